//! `unixsocket` and `unixsocketperm`: the server also listens on a Unix domain socket, with Redis
//! 7.0.15's behaviour (each expected text below was checked against redis-server 7.0.15):
//!
//! - the socket file gets the `unixsocketperm` mode bits (octal; `999`/`abc` are not octal,
//!   `1000`/`-1` are out of 0..=777: fatal config errors with Redis's text, exit 1);
//! - `port 0` with a `unixsocket` means no TCP listener at all;
//! - `CONFIG GET` shows both, `CONFIG SET` refuses both (immutable);
//! - a socket client is `addr=PATH:0 laddr=PATH:0` with the flag `U` in CLIENT LIST / INFO,
//!   `[0 unix:PATH]` in MONITOR, killed by `CLIENT KILL ADDR PATH:0`, and local for the
//!   `enable-*` protections;
//! - a file already at the path is replaced at startup; SHUTDOWN and SIGTERM remove the socket
//!   file; a socket in a missing directory stops the startup with exit code 1;
//! - replies over the socket are those over TCP (plain, pipelined, a 1 MB value).
//!
//! Every server here is the real binary, killed on drop ([`common::ServerProcess`]); sockets live
//! under a fresh short directory of `/tmp` (a socket path has at most 107 bytes).

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{encode_command, RawConn, ServerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_hyperbloom");

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A fresh directory directly under `/tmp` (not `$TMPDIR`, which may be long), removed on drop.
struct SockDir(PathBuf);

impl SockDir {
    fn new(tag: &str) -> SockDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = PathBuf::from(format!("/tmp/hbus-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create socket dir");
        SockDir(d)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// `DIR/name`, as a string (the form the server is given and shows).
    fn file(&self, name: &str) -> String {
        let p = self.0.join(name).to_str().unwrap().to_string();
        assert!(p.len() < 100, "socket path too long: {p}");
        p
    }
}

impl Drop for SockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// RESP over a Unix domain socket: [`common::RawConn`] over a `UnixStream`.
type SockConn = RawConn<UnixStream>;

/// Opening a [`SockConn`], and what only these tests ask of one.
trait SockConnExt: Sized {
    fn try_connect_unix(path: &str) -> std::io::Result<Self>;
    fn connect_unix(path: &str) -> Self;
    fn text(&mut self, argv: &[&str]) -> String;
    fn is_closed_within_5s(&mut self) -> bool;
}

impl SockConnExt for SockConn {
    fn try_connect_unix(path: &str) -> std::io::Result<SockConn> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(RawConn::over(stream))
    }

    fn connect_unix(path: &str) -> SockConn {
        SockConn::try_connect_unix(path).unwrap_or_else(|e| panic!("connect to {path}: {e}"))
    }

    /// The reply as text, for the assertions' messages.
    fn text(&mut self, argv: &[&str]) -> String {
        String::from_utf8_lossy(&self.cmd_str(argv)).into_owned()
    }

    /// True if the server closed the connection (EOF or a reset) within 5 s; false if the
    /// connection is still open then (a timeout is not a close).
    fn is_closed_within_5s(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut chunk = [0u8; 1024];
        let closed = match self.stream.read(&mut chunk) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        closed
    }
}

/// The server under test: hyperbloom, or `HB_UNIX_SOCKET_BIN` (`redis-server` there runs the
/// same tests against Redis, which checks the tests themselves; those on Bloom filters, or
/// comparing with Redis, then fail or compare Redis with itself).
fn binary() -> String {
    std::env::var("HB_UNIX_SOCKET_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// The server with only the Unix socket: `--port 0 --unixsocket sock`, plus `extra`.
fn spawn_socket_only(dir: &Path, sock: &str, extra: &[&str]) -> ServerProcess {
    let child = Command::new(binary())
        .args(["--port", "0", "--unixsocket", sock, "--save", ""])
        .args(["--dir", dir.to_str().unwrap(), "--loglevel", "warning"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    ServerProcess::new(child)
}

/// The server on a free TCP port of 127.0.0.1 and on the socket `sock`, plus `extra`.
fn spawn_with_socket(dir: &Path, sock: &str, extra: &[&str]) -> (ServerProcess, SocketAddr) {
    let (child, port) = common::spawn_listening(|port| {
        let mut command = Command::new(binary());
        command
            .args(common::binary_args(port, dir, ""))
            .args(["--unixsocket", sock])
            .args(extra);
        command
    });
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// [`spawn_with_socket`], and both connections once it answers.
fn spawn_tcp_and_socket(
    dir: &Path,
    sock: &str,
    extra: &[&str],
) -> (ServerProcess, RawConn, SockConn) {
    let (mut child, addr) = spawn_with_socket(dir, sock, extra);
    let tcp = common::connect_when_ready(addr);
    let unix = connect_unix_when_ready(sock, &mut child);
    (child, tcp, unix)
}

/// Connects to the socket once the server answers PING on it (polling, bounded); fails at once if
/// the server exited (its output is printed by [`ServerProcess`]'s drop).
fn connect_unix_when_ready(sock: &str, child: &mut ServerProcess) -> SockConn {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.read_exited_output();
            panic!("the server exited with {status} before serving {sock}:\n{out}");
        }
        if let Ok(mut c) = SockConn::try_connect_unix(sock) {
            let r = c.cmd_str(&["PING"]);
            if r == b"+PONG\r\n" {
                return c;
            }
            assert!(
                r.starts_with(b"-LOADING"),
                "PING over the socket: {}",
                String::from_utf8_lossy(&r)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the server did not answer on {sock}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the process to exit; fails if it is still running after `secs`.
fn wait_exit(child: &mut ServerProcess, secs: u64) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "the server did not exit within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `bin args` to its end (bounded: killed after 10 s, which fails the test): exit code and
/// stderr.
fn run_to_exit(bin: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = ServerProcess::new(
        Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin}: {e}")),
    );
    let status = wait_exit(&mut child, 10);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err)
}

/// The value of `CONFIG GET name` (a one-pair array).
fn config_get(c: &mut SockConn, name: &str) -> String {
    let r = c.text(&["CONFIG", "GET", name]);
    let parts: Vec<&str> = r.split("\r\n").collect();
    assert_eq!(parts.first(), Some(&"*2"), "CONFIG GET {name}: {r:?}");
    parts[4].to_string()
}

/// The bulk string of a `$N\r\n...\r\n` reply.
fn bulk(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    assert!(text.starts_with('$'), "not a bulk string: {text:?}");
    let start = text.find("\r\n").unwrap() + 2;
    text[start..text.len() - 2].to_string()
}

/// `field=value` of one CLIENT LIST / CLIENT INFO line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

/// The line of CLIENT LIST for client `id`.
fn client_line(list: &str, id: &str) -> String {
    list.lines()
        .find(|l| field(l, "id") == id)
        .unwrap_or_else(|| panic!("client {id} not in CLIENT LIST:\n{list}"))
        .to_string()
}

/// The TCP sockets in LISTEN state that process `pid` holds (its fds' inodes, found in
/// `/proc/net/tcp` and `tcp6` with state `0A`).
fn tcp_listeners_of(pid: u32) -> usize {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the server's fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_str()?.to_string();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() > 9 && f[3] == "0A" && inodes.contains(f[9])
        })
        .count()
}

fn mode_of(path: &str) -> (bool, u32) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("stat {path}: {e}"));
    (
        meta.file_type().is_socket(),
        meta.permissions().mode() & 0o777,
    )
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// The same commands answer with the same bytes over the socket and over TCP, on one keyspace:
/// strings, Bloom filters, HyperLogLogs.
#[test]
fn commands_over_the_socket_answer_as_over_tcp() {
    let d = SockDir::new("same");
    let sock = d.file("s.sock");
    let (_child, mut tcp, mut unix) = spawn_tcp_and_socket(d.path(), &sock, &[]);
    let script = |p: &str| -> Vec<Vec<String>> {
        let k = |s: &str| format!("{p}:{s}");
        vec![
            vec!["PING".into()],
            vec!["ECHO".into(), "hello".into()],
            vec!["SET".into(), k("str"), "value".into()],
            vec!["GET".into(), k("str")],
            vec!["GET".into(), k("missing")],
            vec!["INCR".into(), k("n")],
            vec!["INCRBY".into(), k("n"), "41".into()],
            vec!["BF.ADD".into(), k("bf"), "x".into()],
            vec!["BF.ADD".into(), k("bf"), "x".into()],
            vec!["BF.EXISTS".into(), k("bf"), "x".into()],
            vec!["BF.EXISTS".into(), k("bf"), "y".into()],
            vec!["PFADD".into(), k("hll"), "a".into(), "b".into(), "c".into()],
            vec!["PFCOUNT".into(), k("hll")],
            vec!["TYPE".into(), k("bf")],
            vec!["NOSUCHCOMMAND".into()],
            vec!["GET".into()],
        ]
    };
    let mut over_unix = Vec::new();
    for argv in script("u") {
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        over_unix.push(unix.cmd_str(&a));
    }
    let mut over_tcp = Vec::new();
    for argv in script("t") {
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        over_tcp.push(tcp.cmd_str(&a));
    }
    for (i, (u, t)) in over_unix.iter().zip(&over_tcp).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(u),
            String::from_utf8_lossy(t),
            "command {i} of the script"
        );
    }
    // The replies are the right ones, not just equal.
    assert_eq!(over_unix[0], b"+PONG\r\n");
    assert_eq!(over_unix[3], b"$5\r\nvalue\r\n");
    assert_eq!(over_unix[6], b":42\r\n");
    assert_eq!(over_unix[7], b":1\r\n");
    assert_eq!(over_unix[8], b":0\r\n");
    assert_eq!(over_unix[9], b":1\r\n");
    assert_eq!(over_unix[10], b":0\r\n");
    assert_eq!(over_unix[12], b":3\r\n");
    assert!(over_unix[14].starts_with(b"-ERR unknown command"));
    // One keyspace: what one side wrote, the other reads.
    assert_eq!(tcp.cmd_str(&["GET", "u:str"]), b"$5\r\nvalue\r\n");
    assert_eq!(unix.cmd_str(&["BF.EXISTS", "t:bf", "x"]), b":1\r\n");
    assert_eq!(unix.cmd_str(&["DBSIZE"]), b":8\r\n");
}

/// `unixsocketperm` gives the socket file exactly these mode bits, whatever the umask (777 is
/// not what a usual umask of 022 leaves).
#[test]
fn unixsocketperm_sets_the_socket_files_mode() {
    for (perm, want) in [("700", 0o700), ("777", 0o777), ("0640", 0o640)] {
        let d = SockDir::new("perm");
        let sock = d.file("s.sock");
        let mut child = spawn_socket_only(d.path(), &sock, &["--unixsocketperm", perm]);
        let mut c = connect_unix_when_ready(&sock, &mut child);
        let (is_socket, mode) = mode_of(&sock);
        assert!(is_socket, "{sock} is not a socket");
        assert_eq!(mode, want, "unixsocketperm {perm}: mode {mode:o}");
        // CONFIG GET shows the octal number without a leading 0, as Redis does.
        assert_eq!(
            config_get(&mut c, "unixsocketperm"),
            format!("{want:o}"),
            "unixsocketperm {perm}"
        );
    }
}

/// `CONFIG GET unixsocket` / `unixsocketperm` show the configuration; `CONFIG SET` refuses both
/// with Redis's text, and they stay as they were.
#[test]
fn config_get_shows_both_and_config_set_refuses_them() {
    let d = SockDir::new("config");
    let sock = d.file("s.sock");
    let (_child, mut tcp, mut unix) =
        spawn_tcp_and_socket(d.path(), &sock, &["--unixsocketperm", "700"]);
    assert_eq!(config_get(&mut unix, "unixsocket"), sock);
    assert_eq!(config_get(&mut unix, "unixsocketperm"), "700");
    let all = unix.text(&["CONFIG", "GET", "unixsocket*"]);
    assert!(all.starts_with("*4\r\n"), "{all:?}");
    assert!(
        all.contains(&format!(
            "$10\r\nunixsocket\r\n${}\r\n{sock}\r\n",
            sock.len()
        )),
        "{all:?}"
    );
    assert!(
        all.contains("$14\r\nunixsocketperm\r\n$3\r\n700\r\n"),
        "{all:?}"
    );
    assert_eq!(
        unix.text(&["CONFIG", "SET", "unixsocket", "/tmp/x.sock"]),
        "-ERR CONFIG SET failed (possibly related to argument 'unixsocket') - can't set immutable config\r\n"
    );
    assert_eq!(
        tcp.cmd_str(&["CONFIG", "SET", "unixsocketperm", "777"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'unixsocketperm') - can't set immutable config\r\n"
    );
    assert_eq!(config_get(&mut unix, "unixsocket"), sock);
    assert_eq!(config_get(&mut unix, "unixsocketperm"), "700");
    assert_eq!(mode_of(&sock), (true, 0o700));
}

/// `port 0` with a `unixsocket`: the server listens on the socket only, and says its port is 0.
/// (With TCP as well, the same fd check finds the TCP listener: the check can see one.)
#[test]
fn port_0_with_a_unixsocket_listens_on_no_tcp_port() {
    let d = SockDir::new("port0");
    let sock = d.file("s.sock");
    let mut child = spawn_socket_only(d.path(), &sock, &[]);
    let mut c = connect_unix_when_ready(&sock, &mut child);
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(
        tcp_listeners_of(child.id()),
        0,
        "a TCP listener with port 0 and a unixsocket"
    );
    assert_eq!(config_get(&mut c, "port"), "0");
    let info = c.text(&["INFO", "server"]);
    assert!(info.contains("\r\ntcp_port:0\r\n"), "{info}");

    let d2 = SockDir::new("port0-tcp");
    let sock2 = d2.file("s.sock");
    let (both, _tcp, _unix) = spawn_tcp_and_socket(d2.path(), &sock2, &[]);
    assert!(
        tcp_listeners_of(both.id()) >= 1,
        "no TCP listener found for a server given a TCP port"
    );
}

/// CLIENT INFO / CLIENT LIST: `addr=PATH:0 laddr=PATH:0` and the flag `U` for a socket client
/// (after the other flags, as in Redis: `xU` in MULTI), nothing of the sort for a TCP client.
#[test]
fn client_info_and_list_show_socket_clients_with_flag_u() {
    let d = SockDir::new("clients");
    let sock = d.file("s.sock");
    let (_child, mut tcp, mut unix) = spawn_tcp_and_socket(d.path(), &sock, &[]);
    let info = bulk(&unix.cmd_str(&["CLIENT", "INFO"]));
    let me = format!("{sock}:0");
    assert_eq!(field(&info, "addr"), me, "{info}");
    assert_eq!(field(&info, "laddr"), me, "{info}");
    assert_eq!(field(&info, "flags"), "U", "{info}");
    let unix_id = field(&info, "id").to_string();
    assert_eq!(
        unix.cmd_str(&["CLIENT", "ID"]),
        format!(":{unix_id}\r\n").as_bytes()
    );

    let tcp_info = bulk(&tcp.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&tcp_info, "flags"), "N", "{tcp_info}");
    assert!(
        field(&tcp_info, "addr").starts_with("127.0.0.1:"),
        "{tcp_info}"
    );
    let tcp_id = field(&tcp_info, "id").to_string();

    assert_eq!(unix.cmd_str(&["CLIENT", "SETNAME", "overunix"]), b"+OK\r\n");
    let list = bulk(&tcp.cmd_str(&["CLIENT", "LIST"]));
    let line = client_line(&list, &unix_id);
    assert_eq!(field(&line, "addr"), me, "{line}");
    assert_eq!(field(&line, "laddr"), me, "{line}");
    assert_eq!(field(&line, "flags"), "U", "{line}");
    assert_eq!(field(&line, "name"), "overunix", "{line}");
    let tcp_line = client_line(&list, &tcp_id);
    assert!(!field(&tcp_line, "flags").contains('U'), "{tcp_line}");

    // In MULTI: `xU`, as another client sees it.
    assert_eq!(unix.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(unix.cmd_str(&["SET", "k", "v"]), b"+QUEUED\r\n");
    let list = bulk(&tcp.cmd_str(&["CLIENT", "LIST"]));
    assert_eq!(
        field(&client_line(&list, &unix_id), "flags"),
        "xU",
        "{list}"
    );
    assert_eq!(unix.cmd_str(&["EXEC"]), b"*1\r\n+OK\r\n");

    // Two socket clients share the addr; CLIENT LIST shows both with it.
    let mut other = SockConn::connect_unix(&sock);
    let other_info = bulk(&other.cmd_str(&["CLIENT", "INFO"]));
    assert_eq!(field(&other_info, "addr"), me);
    let list = bulk(&tcp.cmd_str(&["CLIENT", "LIST"]));
    let with_addr = list
        .lines()
        .filter(|l| field(l, "addr") == me && field(l, "flags").contains('U'))
        .count();
    assert_eq!(with_addr, 2, "{list}");
}

/// MONITOR shows a socket client's commands as `[0 unix:PATH]`, a TCP client's as `[0 IP:PORT]`.
#[test]
fn monitor_shows_socket_clients_as_unix_path() {
    let d = SockDir::new("monitor");
    let sock = d.file("s.sock");
    let (_child, mut tcp, mut unix) = spawn_tcp_and_socket(d.path(), &sock, &[]);
    let mut monitor = SockConn::connect_unix(&sock);
    assert_eq!(monitor.cmd_str(&["MONITOR"]), b"+OK\r\n");
    assert_eq!(unix.cmd_str(&["SET", "a", "b"]), b"+OK\r\n");
    let line = String::from_utf8_lossy(&monitor.read_reply()).into_owned();
    let want = format!(" [0 unix:{sock}] \"SET\" \"a\" \"b\"\r\n");
    assert!(
        line.starts_with('+') && line.ends_with(&want),
        "{line:?} does not end with {want:?}"
    );
    let stamp = &line[1..line.len() - want.len()];
    let (secs, micros) = stamp.split_once('.').expect("a seconds.micros stamp");
    assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line:?}");

    assert_eq!(unix.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(unix.cmd_str(&["GET", "a"]), b"$-1\r\n");
    let _select = monitor.read_reply();
    let line = String::from_utf8_lossy(&monitor.read_reply()).into_owned();
    assert!(
        line.ends_with(&format!(" [3 unix:{sock}] \"GET\" \"a\"\r\n")),
        "{line:?}"
    );

    assert_eq!(tcp.cmd_str(&["GET", "a"]), b"$1\r\nb\r\n");
    let line = String::from_utf8_lossy(&monitor.read_reply()).into_owned();
    assert!(line.contains(" [0 127.0.0.1:"), "{line:?}");
    assert!(!line.contains("unix:"), "{line:?}");
}

/// `CLIENT KILL ADDR PATH:0` kills every socket client but the caller (SKIPME), and only them:
/// it answers their number.
#[test]
fn client_kill_addr_kills_the_socket_clients() {
    let d = SockDir::new("kill");
    let sock = d.file("s.sock");
    let (_child, mut tcp, mut killer) = spawn_tcp_and_socket(d.path(), &sock, &[]);
    let mut a = SockConn::connect_unix(&sock);
    let mut b = SockConn::connect_unix(&sock);
    assert_eq!(a.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(b.cmd_str(&["PING"]), b"+PONG\r\n");
    let addr = format!("{sock}:0");
    assert_eq!(
        killer.cmd_str(&["CLIENT", "KILL", "ADDR", &addr]),
        b":2\r\n"
    );
    assert!(
        a.is_closed_within_5s(),
        "socket client a survived CLIENT KILL ADDR"
    );
    assert!(
        b.is_closed_within_5s(),
        "socket client b survived CLIENT KILL ADDR"
    );
    assert_eq!(killer.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(tcp.cmd_str(&["PING"]), b"+PONG\r\n");
    // From TCP, the caller is not one of them: the remaining socket client goes.
    assert_eq!(tcp.cmd_str(&["CLIENT", "KILL", "ADDR", &addr]), b":1\r\n");
    assert!(
        killer.is_closed_within_5s(),
        "the last socket client survived"
    );
    assert_eq!(tcp.cmd_str(&["PING"]), b"+PONG\r\n");
    // A new socket client still connects.
    let mut again = SockConn::connect_unix(&sock);
    assert_eq!(again.cmd_str(&["PING"]), b"+PONG\r\n");
}

/// SHUTDOWN (sent over the socket itself) removes the socket file; the server exits 0.
#[test]
fn shutdown_removes_the_socket_file() {
    let d = SockDir::new("shutdown");
    let sock = d.file("s.sock");
    let mut child = spawn_socket_only(d.path(), &sock, &[]);
    let mut c = connect_unix_when_ready(&sock, &mut child);
    assert!(Path::new(&sock).exists());
    c.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
    let status = wait_exit(&mut child, 10);
    assert!(status.success(), "{status}");
    assert!(
        !Path::new(&sock).exists(),
        "{sock} is still there after SHUTDOWN"
    );
}

/// SIGTERM removes the socket file too; the server exits 0.
#[test]
fn sigterm_removes_the_socket_file() {
    let d = SockDir::new("sigterm");
    let sock = d.file("s.sock");
    let (mut child, mut tcp, mut unix) = spawn_tcp_and_socket(d.path(), &sock, &[]);
    assert_eq!(unix.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(tcp.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_exit(&mut child, 10);
    assert!(status.success(), "{status}");
    assert!(
        !Path::new(&sock).exists(),
        "{sock} is still there after SIGTERM"
    );
}

/// A file already at the path (a stale socket, or any file) is replaced by the server's socket.
#[test]
fn a_file_already_at_the_path_is_replaced() {
    let d = SockDir::new("stale");
    // A stale socket: bound, its listener gone, the file left behind.
    let stale = d.file("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    assert!(Path::new(&stale).exists());
    assert!(UnixStream::connect(&stale).is_err());
    // A regular file.
    let plain = d.file("plain.sock");
    std::fs::write(&plain, b"not a socket").unwrap();
    for sock in [stale, plain] {
        let mut child = spawn_socket_only(d.path(), &sock, &["--unixsocketperm", "700"]);
        let mut c = connect_unix_when_ready(&sock, &mut child);
        assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
        assert_eq!(mode_of(&sock), (true, 0o700), "{sock}");
        c.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
        assert!(wait_exit(&mut child, 10).success());
    }
}

/// `unixsocket` / `unixsocketperm` in a configuration file, and CONFIG REWRITE keeps them: the
/// server restarted from the rewritten file serves the same socket, with the same mode.
#[test]
fn a_config_file_and_config_rewrite_keep_the_socket() {
    let d = SockDir::new("conf");
    let sock = d.file("s.sock");
    let conf = d.path().join("r.conf");
    std::fs::write(
        &conf,
        format!(
            "port 0\nunixsocket {sock}\nunixsocketperm 0750\nsave \"\"\ndir {}\n",
            d.path().display()
        ),
    )
    .unwrap();
    for round in 0..2 {
        let mut child = ServerProcess::new(
            Command::new(binary())
                .arg(&conf)
                .args(["--loglevel", "warning"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn the server"),
        );
        let mut c = connect_unix_when_ready(&sock, &mut child);
        assert_eq!(mode_of(&sock), (true, 0o750), "round {round}");
        assert_eq!(config_get(&mut c, "unixsocket"), sock, "round {round}");
        assert_eq!(config_get(&mut c, "unixsocketperm"), "750", "round {round}");
        assert_eq!(tcp_listeners_of(child.id()), 0, "round {round}");
        if round == 0 {
            assert_eq!(c.text(&["CONFIG", "REWRITE"]), "+OK\r\n");
            let text = std::fs::read_to_string(&conf).unwrap();
            assert!(
                text.lines()
                    .any(|l| l.starts_with("unixsocket ") && l.contains(&sock)),
                "{text}"
            );
            assert!(
                text.lines().any(|l| l.trim_end() == "unixsocketperm 750"),
                "{text}"
            );
        }
        c.send_raw(&encode_command(&[b"SHUTDOWN", b"NOSAVE"]));
        assert!(wait_exit(&mut child, 10).success(), "round {round}");
        assert!(!Path::new(&sock).exists(), "round {round}");
    }
}

/// A `unixsocketperm` that is not an octal number, or is out of 0..=777, stops the startup with
/// redis-server's exact text (stderr) and exit code 1.
#[test]
fn a_bad_unixsocketperm_is_fatal_like_redis() {
    let d = SockDir::new("badperm");
    let sock = d.file("s.sock");
    let redis = common::redis::binary();
    for (value, message) in [
        ("999", "argument couldn't be parsed as an octal number"),
        ("abc", "argument couldn't be parsed as an octal number"),
        ("8", "argument couldn't be parsed as an octal number"),
        ("1000", "argument must be between 0 and 777 inclusive"),
        ("07777", "argument must be between 0 and 777 inclusive"),
        ("-1", "argument must be between 0 and 777 inclusive"),
    ] {
        let args = [
            "--port",
            "0",
            "--save",
            "",
            "--unixsocket",
            &sock,
            "--unixsocketperm",
            value,
        ];
        let (rc_redis, err_redis) = run_to_exit(&redis, &args);
        let (rc_ours, err_ours) = run_to_exit(&binary(), &args);
        assert_eq!(rc_redis, Some(1), "redis-server, unixsocketperm {value}");
        assert!(err_redis.contains(message), "{err_redis}");
        assert_eq!(rc_ours, Some(1), "unixsocketperm {value}: {err_ours}");
        assert!(
            err_ours.contains(&format!(">>> 'unixsocketperm \"{value}\"'\n{message}")),
            "unixsocketperm {value}: {err_ours}"
        );
        assert_eq!(err_ours, err_redis, "unixsocketperm {value}");
    }
}

/// A socket in a directory that does not exist: the server does not start (exit code 1) and says
/// something (Redis: "Failed opening Unix socket: bind: No such file or directory").
#[test]
fn a_socket_in_a_missing_directory_fails_the_startup() {
    let d = SockDir::new("nodir");
    let sock = d.file("missing/s.sock");
    let (mut child, _addr) = spawn_with_socket(d.path(), &sock, &[]);
    let status = wait_exit(&mut child, 10);
    let out = child.read_exited_output();
    assert_eq!(status.code(), Some(1), "{status}: {out}");
    assert!(!out.trim().is_empty(), "the failed startup logged nothing");
    assert!(!Path::new(&sock).exists());
}

/// A pipelined batch (1,000 SETs and GETs in one write) and a 1 MB value round trip over the
/// socket.
#[test]
fn a_pipelined_batch_and_a_1mb_value_over_the_socket() {
    let d = SockDir::new("pipe");
    let sock = d.file("s.sock");
    let mut child = spawn_socket_only(d.path(), &sock, &[]);
    let mut c = connect_unix_when_ready(&sock, &mut child);
    let n = 1000;
    let mut batch = Vec::new();
    for i in 0..n {
        let k = format!("key:{i}");
        let v = format!("value:{i}");
        batch.extend(encode_command(&[b"SET", k.as_bytes(), v.as_bytes()]));
        batch.extend(encode_command(&[b"GET", k.as_bytes()]));
    }
    batch.extend(encode_command(&[b"DBSIZE"]));
    c.send_raw(&batch);
    for i in 0..n {
        assert_eq!(c.read_reply(), b"+OK\r\n", "SET {i}");
        let v = format!("value:{i}");
        assert_eq!(
            c.read_reply(),
            format!("${}\r\n{v}\r\n", v.len()).as_bytes(),
            "GET {i}"
        );
    }
    assert_eq!(c.read_reply(), format!(":{n}\r\n").as_bytes());

    let big: Vec<u8> = (0..1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(c.cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["STRLEN", "big"]), b":1048576\r\n");
    let got = c.cmd(&[b"GET", b"big"]);
    let header = b"$1048576\r\n";
    assert_eq!(got.len(), header.len() + big.len() + 2);
    assert_eq!(&got[..header.len()], header);
    assert!(got[header.len()..header.len() + big.len()] == big[..]);
    assert_eq!(&got[got.len() - 2..], b"\r\n");
}

/// A socket client is local: `enable-debug-command local` and `enable-protected-configs local`
/// let it run DEBUG and set `dir`, as on loopback; with the default `no` it may not.
#[test]
fn a_socket_client_is_local() {
    let d = SockDir::new("local");
    let sock = d.file("s.sock");
    let dir = d.path().to_str().unwrap();
    let mut child = spawn_socket_only(
        d.path(),
        &sock,
        &[
            "--enable-debug-command",
            "local",
            "--enable-protected-configs",
            "local",
        ],
    );
    let mut c = connect_unix_when_ready(&sock, &mut child);
    assert_eq!(c.text(&["DEBUG", "SLEEP", "0"]), "+OK\r\n");
    assert_eq!(c.text(&["CONFIG", "SET", "dir", dir]), "+OK\r\n");
    drop(c);
    drop(child);

    let d2 = SockDir::new("notlocal");
    let sock2 = d2.file("s.sock");
    let mut child = spawn_socket_only(d2.path(), &sock2, &[]);
    let mut c = connect_unix_when_ready(&sock2, &mut child);
    assert!(
        c.text(&["DEBUG", "SLEEP", "0"])
            .starts_with("-ERR DEBUG command not allowed."),
        "DEBUG with enable-debug-command no"
    );
    assert_eq!(
        c.text(&["CONFIG", "SET", "dir", dir]),
        "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n"
    );
}

/// The socket listens with `tcp-backlog`, as Redis's does (`ss -xl` shows a listener's backlog
/// as its Send-Q); std's bind would have said 128 whatever the setting.
#[test]
fn the_socket_listens_with_tcp_backlog() {
    let d = SockDir::new("backlog");
    let sock = d.path().join("redis.sock").to_str().unwrap().to_string();
    let mut child = spawn_socket_only(d.path(), &sock, &["--tcp-backlog", "77"]);
    let mut c = connect_unix_when_ready(&sock, &mut child);
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    let out = Command::new("ss")
        .args(["-xlnH", "src", &sock])
        .output()
        .expect("ss (iproute2; scripts/test.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let send_q = text
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("no listener at {sock} in `ss -xl`: {text:?}"));
    assert_eq!(send_q, "77", "{text}");
}
