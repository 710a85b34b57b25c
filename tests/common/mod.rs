//! Test support: an in-process server on an ephemeral port, and a raw RESP connection that reads
//! exactly one reply's bytes (for byte-for-byte comparisons with golden vectors and real Redis).
#![allow(dead_code)]

pub mod redis;
pub mod session;
pub mod vectors;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use hyperbloom::config::Config;
use hyperbloom::engine::Shared;

// The server's memory accounting (INFO used_memory, maxmemory) counts through this allocator, as
// in the binary.
#[global_allocator]
static ALLOC: hyperbloom::engine::alloc::CountingAlloc = hyperbloom::engine::alloc::CountingAlloc;

/// A server running on its own runtime thread; stops when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a server with test defaults (port 0, no save points) plus `args` (`--directive value`).
pub fn start_with(args: &[&str]) -> TestServer {
    let mut all: Vec<String> = vec![
        "--port".into(),
        "0".into(),
        "--save".into(),
        "".into(),
        "--bind".into(),
        "127.0.0.1".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let config = Config::from_args(&all).expect("test config");
    start_config(config)
}

pub fn start_config(config: Config) -> TestServer {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            match hyperbloom::server::start(config).await {
                Ok(h) => {
                    let _ = tx.send(Ok((h.addr, h.shared.clone())));
                    let _ = h.join.await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                }
            }
        });
    });
    let (addr, shared) = rx.recv().expect("server thread").expect("server start");
    TestServer {
        addr,
        shared,
        thread: Some(thread),
    }
}

pub fn start_server() -> TestServer {
    start_with(&[])
}

impl TestServer {
    pub fn raw(&self) -> RawConn {
        RawConn::connect(self.addr)
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.request_shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A fresh, empty directory under the system temp dir, unique per process, tag and instant.
pub fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "hb-test-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The ports [`free_port`] hands out: below Linux's default ephemeral range (32768-60999), so the
/// kernel never gives one of them to a `bind(0)` or as a connection's source port.
const TEST_PORTS: std::ops::Range<u32> = 12_000..32_000;

/// A TCP port that was free a moment ago, for a spawned binary; never the same one twice in a
/// test process.
///
/// It used to be the kernel's pick for `bind(0)`, released at once. Two tests running in parallel
/// could then both be handed the same port before either server bound it: one server failed to
/// bind, and its test talked to the other test's server until that one exited (the CI run at
/// b3c9a32 lost `a_full_disk_under_always_exits_1_losing_nothing` with a connection reset so).
/// Now each process walks the range from a pid-dependent start, and a port is still checked by
/// binding it, in case another process holds it.
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let origin = std::process::id().wrapping_mul(7_919) % span;
    loop {
        let step = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(step < span, "every test port handed out");
        let port = (TEST_PORTS.start + (origin + step) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A field of `INFO persistence` ("" when absent).
pub fn persistence_field(c: &mut RawConn, field: &str) -> String {
    info_field(c, "persistence", field).unwrap_or_default()
}

/// A field of an INFO section, if the section has it.
pub fn info_field(c: &mut RawConn, section: &str, field: &str) -> Option<String> {
    let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", section])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// A numeric field of an INFO section; panics, naming it, when absent or not a number.
pub fn info_number(c: &mut RawConn, section: &str, field: &str) -> f64 {
    info_field(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {field} in INFO {section}"))
}

/// Waits (bounded) until a freshly started server is done loading its data (`-LOADING` until then).
pub fn wait_loaded(c: &mut RawConn) {
    let start = std::time::Instant::now();
    while c.cmd_str(&["PING"]).starts_with(b"-LOADING") {
        assert!(start.elapsed() < Duration::from_secs(20), "still loading");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A spawned server binary, killed (and reaped) when dropped: a test that fails partway, or
/// whose server never came up, leaves no server running. `Deref`s to the `Child` for
/// everything else (kill -9 and wait, stdout, the pid).
pub struct ServerProcess {
    child: Option<std::process::Child>,
    port: Option<u16>,
    /// What the process wrote, when [`spawn_listening`] read it to tell a lost port from another
    /// reason to exit; [`ServerProcess::output`] hands it on.
    exited_output: Option<std::process::Output>,
}

impl ServerProcess {
    pub fn new(child: std::process::Child) -> ServerProcess {
        ServerProcess {
            child: Some(child),
            port: None,
            exited_output: None,
        }
    }

    /// The TCP port the server was told to listen on: a failing test then also shows who listens
    /// there.
    pub fn on_port(mut self, port: u16) -> ServerProcess {
        self.port = Some(port);
        self
    }

    /// The `Child`, no longer killed on drop: for `wait_with_output` and the like.
    pub fn into_child(mut self) -> std::process::Child {
        self.child.take().expect("only `into_child` takes it")
    }

    /// Waits for the process to exit by itself: its status and what it wrote.
    pub fn output(mut self) -> std::process::Output {
        let read = self.exited_output.take();
        let out = self
            .into_child()
            .wait_with_output()
            .expect("wait for the server");
        match read {
            Some(read) => std::process::Output {
                status: out.status,
                ..read
            },
            None => out,
        }
    }

    /// For a process that has exited (it waits for that): its piped stdout and stderr as one
    /// text, read to their end once and kept for [`ServerProcess::output`] and the drop's report.
    pub fn read_exited_output(&mut self) -> String {
        use std::io::Read;
        if let Some(out) = &self.exited_output {
            return String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
        }
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        if let Some(mut pipe) = self.stdout.take() {
            let _ = pipe.read_to_end(&mut stdout);
        }
        if let Some(mut pipe) = self.stderr.take() {
            let _ = pipe.read_to_end(&mut stderr);
        }
        let status = self.wait().expect("wait for the server");
        let text =
            String::from_utf8_lossy(&stdout).into_owned() + &String::from_utf8_lossy(&stderr);
        self.exited_output = Some(std::process::Output {
            status,
            stdout,
            stderr,
        });
        text
    }

    /// Waits (bounded) until this very process listens on `port`, or has exited (a test may
    /// expect that: a failed load). A connection made after this reaches this server, never a
    /// socket of another process that happens to hold the port: the CI runs at `b3c9a32` and
    /// `a95b331` lost a full-disk test each to a reset on the first request of a connection
    /// made once the port merely showed a listener, with the test's own server alive and
    /// silent.
    pub fn wait_until_it_listens(&mut self, port: u16) {
        let start = std::time::Instant::now();
        let pid = self.id();
        loop {
            if matches!(self.try_wait(), Ok(Some(_))) {
                return;
            }
            if holds_any_socket(pid, &listening_inodes(port)) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the server (pid {pid}) did not listen on port {port} in 20 s; listening there: {:?}",
                listeners_of(port)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl std::ops::Deref for ServerProcess {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        self.child.as_ref().expect("only `into_child` takes it")
    }
}

impl std::ops::DerefMut for ServerProcess {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        self.child.as_mut().expect("only `into_child` takes it")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Already gone (the test stopped it) is the common case: both calls are then no-ops.
        if let Some(mut child) = self.child.take() {
            let panicking = std::thread::panicking();
            // A failing test: who listens on the server's port (pids), while it still runs.
            if let (true, Some(port)) = (panicking, self.port) {
                eprintln!(
                    "the test's server has pid {}; listening on its port {port}: {:?}",
                    child.id(),
                    listeners_of(port)
                );
            }
            let _ = child.kill();
            if !panicking {
                let _ = child.wait();
                return;
            }
            // Then what its server said, which is often why (it exited, or never bound its
            // port). The pipes are read to their end now that the process is gone.
            let read = self.exited_output.take();
            if let Ok(out) = child.wait_with_output() {
                // Output read before (by `spawn_listening`) is all there is; the pipes are empty.
                let out = read.unwrap_or(out);
                eprintln!(
                    "the test's server ended with {}; its stdout:\n{}\nits stderr:\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Starts the real binary on a free port with `dir` and the given `save` points.
pub fn spawn_binary(dir: &std::path::Path, save: &str) -> (ServerProcess, std::net::SocketAddr) {
    spawn_binary_with(dir, save, &[])
}

/// The arguments every spawned test binary starts with: `port` on 127.0.0.1, `dir`, the `save`
/// points, warnings only.
pub fn binary_args(port: u16, dir: &std::path::Path, save: &str) -> Vec<String> {
    let dir = dir.to_str().unwrap();
    let port = port.to_string();
    ["--port", &port, "--bind", "127.0.0.1", "--save", save]
        .into_iter()
        .chain(["--dir", dir, "--loglevel", "warning"])
        .map(String::from)
        .collect()
}

/// [`spawn_binary`] with extra `--directive value` arguments.
pub fn spawn_binary_with(
    dir: &std::path::Path,
    save: &str,
    extra: &[&str],
) -> (ServerProcess, std::net::SocketAddr) {
    let (child, port) = spawn_listening(|port| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
        command.args(binary_args(port, dir, save)).args(extra);
        command
    });
    (child, format!("127.0.0.1:{port}").parse().unwrap())
}

/// Spawns `command_for(port)` on a [`free_port`] and waits until it listens there
/// ([`ServerProcess::wait_until_it_listens`]); when it exits saying the port is taken, spawns it
/// again on another port (up to 8 times). Its stdout and stderr are piped (kept for
/// [`ServerProcess::output`] and shown when a test fails).
///
/// `free_port` checks a port by binding it, but something may bind it between that check and the
/// server's own bind: the CI run at `43f747b` lost `tests/unix_socket.rs`'s
/// `config_get_shows_both_and_config_set_refuses_them` to "Address already in use" on a port
/// nothing listened on a moment later.
pub fn spawn_listening(
    mut command_for: impl FnMut(u16) -> std::process::Command,
) -> (ServerProcess, u16) {
    const ATTEMPTS: usize = 8;
    for attempt in 1..=ATTEMPTS {
        let port = free_port();
        let child = command_for(port)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let mut process = ServerProcess::new(child).on_port(port);
        process.wait_until_it_listens(port);
        if !matches!(process.try_wait(), Ok(Some(_))) {
            return (process, port);
        }
        // It exited before (or right after) it listened: the output says whether the port was
        // the reason. Read now (the process is gone, so its pipes end), and kept for a test that
        // expected the exit.
        let said = process.read_exited_output();
        if said.contains("Address already in use") && attempt < ATTEMPTS {
            eprintln!("port {port} was taken before the server bound it; another port");
            continue;
        }
        return (process, port);
    }
    unreachable!("the last attempt returns")
}

/// The inodes of the sockets listening on TCP `port` (`/proc/net/tcp{,6}`: the local address's
/// port is the hex after the colon, state `0A` is LISTEN, the inode is the tenth field).
fn listening_inodes(port: u16) -> Vec<u64> {
    let want = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 9 && fields[1].ends_with(&want) && fields[3] == "0A" {
                inodes.extend(fields[9].parse::<u64>().ok());
            }
        }
    }
    inodes
}

/// The processes holding a socket that listens on `port` (their pids), found through
/// `/proc/PID/fd`: who answers a connection to it.
pub fn listeners_of(port: u16) -> Vec<u32> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| holds_any_socket(pid, &inodes))
        .collect()
}

/// True if process `pid` has one of the socket `inodes` open.
fn holds_any_socket(pid: u32, inodes: &[u64]) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|target| {
                let t = target
                    .to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?;
                t.parse::<u64>().ok()
            })
            .is_some_and(|inode| inodes.contains(&inode))
    })
}

/// Connects once the spawned server accepts connections (polling, bounded).
///
/// It waits for the port to show a listener in `/proc/net/tcp{,6}` before connecting at all: a
/// connect to a port nothing listens on yet can succeed as a connection to itself when the port
/// is in the ephemeral range (the kernel may pick it as the source port: a TCP simultaneous open),
/// and that socket, even closed, makes the server's bind of the port fail for seconds. The CI run
/// at eba41ca, and a local run after it, lost `tests/memory.rs`'s server so, when `free_port`
/// still drew from that range; ports other tests pass in may still.
pub fn connect_when_ready(addr: std::net::SocketAddr) -> RawConn {
    let start = std::time::Instant::now();
    loop {
        if let Some(conn) = RawConn::connect_if_listening(addr) {
            return conn;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True if some socket of this host listens on TCP `port` (`/proc/net/tcp` and `tcp6`: the local
/// address's port is the hex after the colon, state `0A` is LISTEN).
pub fn is_listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|path| {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|line| {
                let mut fields = line.split_whitespace();
                let local = fields.nth(1).unwrap_or("");
                let state = fields.nth(1).unwrap_or("");
                local.ends_with(&want) && state == "0A"
            })
    })
}

/// A `/proc/PID/status` figure in kB (`VmRSS`, `VmHWM`, ...); 0 when absent.
pub fn proc_status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A connection speaking RESP by hand: TCP by default, or any byte stream (a Unix socket's,
/// [`RawConn::over`]).
pub struct RawConn<S = TcpStream> {
    pub stream: S,
    buf: Vec<u8>,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> RawConn {
        RawConn::try_connect(addr).expect("connect")
    }

    /// A connection, or the error, for loops that wait for a server to come up.
    ///
    /// A connection to itself counts as refused: while nothing listens on a port of the ephemeral
    /// range, a connect whose kernel-chosen source port is that very port completes as a TCP
    /// simultaneous open with itself. Loops that wait for a server should also not connect before
    /// [`is_listening`], because such a socket makes the server's bind fail.
    pub fn try_connect(addr: SocketAddr) -> std::io::Result<RawConn> {
        let stream = TcpStream::connect(addr)?;
        if stream.local_addr()? == stream.peer_addr()? {
            return Err(std::io::ErrorKind::ConnectionRefused.into());
        }
        stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
        stream.set_nodelay(true).ok();
        Ok(RawConn {
            stream,
            buf: Vec::new(),
        })
    }

    /// A connection if something listens on `addr`'s port ([`is_listening`]) and accepts: one
    /// attempt of a loop that waits for a server, which must never connect before the port
    /// listens (see [`connect_when_ready`]).
    pub fn connect_if_listening(addr: SocketAddr) -> Option<RawConn> {
        if is_listening(addr.port()) {
            RawConn::try_connect(addr).ok()
        } else {
            None
        }
    }
}

impl<S: Read + Write> RawConn<S> {
    /// RESP over a stream opened elsewhere (a `UnixStream`), its timeouts set by the caller.
    pub fn over(stream: S) -> RawConn<S> {
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends a command as a multibulk request.
    pub fn send(&mut self, argv: &[&[u8]]) {
        self.send_raw(&encode_command(argv));
    }

    /// Sends a command and returns the exact bytes of its reply.
    pub fn cmd(&mut self, argv: &[&[u8]]) -> Vec<u8> {
        self.send(argv);
        self.read_reply()
    }

    /// Like `cmd` for string arguments.
    pub fn cmd_str(&mut self, argv: &[&str]) -> Vec<u8> {
        let v: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
        self.cmd(&v)
    }

    /// Reads exactly one reply (all of its nested frames) and returns its bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = frame_len(&self.buf) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read reply");
            assert!(
                n > 0,
                "connection closed while waiting for a reply; have {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// True if the server closed the connection (reads EOF) within the timeout.
    pub fn is_closed(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        matches!(self.stream.read(&mut chunk), Ok(0) | Err(_))
    }
}

pub fn encode_command(argv: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Length of the first complete RESP2/RESP3 frame in `buf`, or None if incomplete.
pub fn frame_len(buf: &[u8]) -> Option<usize> {
    let line_end = |from: usize| -> Option<usize> {
        buf[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p)
    };
    fn parse(buf: &[u8], at: usize, line_end: &dyn Fn(usize) -> Option<usize>) -> Option<usize> {
        if at >= buf.len() {
            return None;
        }
        let end = line_end(at)?;
        let header = std::str::from_utf8(&buf[at + 1..end]).unwrap_or("");
        let next = end + 2;
        match buf[at] {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Some(next),
            b'$' | b'=' | b'!' => {
                let n: i64 = header.parse().ok()?;
                if n < 0 {
                    return Some(next);
                }
                let stop = next + n as usize + 2;
                if buf.len() >= stop {
                    Some(stop)
                } else {
                    None
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n: i64 = header.parse().ok()?;
                if n < 0 {
                    return Some(next);
                }
                let count = if matches!(buf[at], b'%' | b'|') {
                    n * 2
                } else {
                    n
                };
                let mut pos = next;
                for _ in 0..count {
                    pos = parse(buf, pos, line_end)?;
                }
                Some(pos)
            }
            _ => None,
        }
    }
    parse(buf, 0, &line_end)
}
