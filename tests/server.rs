//! Integration tests of the core server: protocol, connection commands, transactions, auth.

mod common;

use common::{start_server, start_with};

#[test]
fn ping_echo_and_pipelining() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd_str(&["ECHO", "hi"]), b"$2\r\nhi\r\n");
    // Three requests in one write, answered in order.
    c.send_raw(b"PING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n*-5\r\nPING\r\n");
    assert_eq!(c.read_reply(), b"+PONG\r\n");
    assert_eq!(c.read_reply(), b"$1\r\nx\r\n");
    assert_eq!(c.read_reply(), b"+PONG\r\n");
}

fn stats_field(c: &mut common::RawConn, name: &str) -> f64 {
    common::info_number(c, "stats", name)
}

/// INFO's instantaneous rates (they were a constant 0): under a load of pipelined PINGs they
/// show it, and once the load stops they fall back to 0 within the 1.6 s the samples span.
#[test]
fn instantaneous_rates_follow_the_load() {
    let s = start_server();
    let mut c = s.raw();
    let mut load = s.raw();
    let batch: Vec<u8> = b"PING\r\n".repeat(100);
    let started = std::time::Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(1200) {
        load.send_raw(&batch);
        for _ in 0..100 {
            assert_eq!(load.read_reply(), b"+PONG\r\n");
        }
        sent += 100;
    }
    let ops = stats_field(&mut c, "instantaneous_ops_per_sec");
    let rate = sent as f64 / started.elapsed().as_secs_f64();
    assert!(ops > rate / 10.0, "{ops} ops/s reported, {rate:.0} sent");
    assert!(stats_field(&mut c, "instantaneous_input_kbps") > 0.0);
    assert!(stats_field(&mut c, "instantaneous_output_kbps") > 0.0);
    std::thread::sleep(std::time::Duration::from_millis(2000));
    // Only this connection's INFO commands remain: a few a second.
    assert!(stats_field(&mut c, "instantaneous_ops_per_sec") < 10.0);
}

#[test]
fn protocol_error_replies_then_closes() {
    let s = start_server();
    let mut c = s.raw();
    c.send_raw(b"*1\r\n*1\r\n");
    assert_eq!(
        c.read_reply(),
        b"-ERR Protocol error: expected '$', got '*'\r\n"
    );
    assert!(c.is_closed());
}

#[test]
fn unknown_command_and_arity() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        c.cmd_str(&["FOO", "a", "b"]),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        c.cmd_str(&["GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CLIENT", "SETNAME"]),
        b"-ERR wrong number of arguments for 'client|setname' command\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CLIENT", "BOGUS"]),
        b"-ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.\r\n"
    );
}

#[test]
fn hello_switches_protocol() {
    let s = start_server();
    let mut c = s.raw();
    let r = c.cmd_str(&["HELLO", "3"]);
    assert!(
        r.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(c.cmd_str(&["GET", "nokey"]), b"_\r\n");
    let r = c.cmd_str(&["HELLO", "2"]);
    assert!(r.starts_with(b"*14\r\n"));
    assert_eq!(c.cmd_str(&["GET", "nokey"]), b"$-1\r\n");
    assert_eq!(
        c.cmd_str(&["HELLO", "4"]),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    assert_eq!(
        c.cmd_str(&["HELLO", "x"]),
        b"-ERR Protocol version is not an integer or out of range\r\n"
    );
}

#[test]
fn requirepass_and_auth() {
    let s = start_with(&["--requirepass", "s3cret"]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd_str(&["GET", "a"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.cmd_str(&["AUTH", "wrong"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.cmd_str(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "a"]), b"$-1\r\n");
    // Unauthenticated clients get the small protocol limits.
    let mut d = s.raw();
    d.send_raw(b"*11\r\n");
    assert_eq!(
        d.read_reply(),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
}

#[test]
fn auth_without_password() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        c.cmd_str(&["AUTH", "x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
}

#[test]
fn multi_exec_and_execabort() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["GET", "k"]), b"+QUEUED\r\n");
    assert_eq!(
        c.cmd_str(&["MULTI"]),
        b"-ERR MULTI calls can not be nested\r\n"
    );
    assert_eq!(c.cmd_str(&["EXEC"]), b"*2\r\n+OK\r\n$1\r\nv\r\n");
    assert_eq!(c.cmd_str(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    assert_eq!(c.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        c.cmd_str(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(c.cmd_str(&["DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
}

#[test]
fn watch_aborts_on_change_by_another_client() {
    let s = start_server();
    let mut a = s.raw();
    let mut b = s.raw();
    assert_eq!(a.cmd_str(&["WATCH", "w"]), b"+OK\r\n");
    assert_eq!(b.cmd_str(&["SET", "w", "1"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["GET", "w"]), b"+QUEUED\r\n");
    assert_eq!(a.cmd_str(&["EXEC"]), b"*-1\r\n");
    // Without interference it runs.
    assert_eq!(a.cmd_str(&["WATCH", "w"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["GET", "w"]), b"+QUEUED\r\n");
    assert_eq!(a.cmd_str(&["EXEC"]), b"*1\r\n$1\r\n1\r\n");
}

#[test]
fn select_and_databases() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        c.cmd_str(&["SELECT", "16"]),
        b"-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SELECT", "x"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$-1\r\n");
}

#[test]
fn info_has_the_fields_clients_need() {
    let s = start_server();
    let mut c = s.raw();
    let r = String::from_utf8(c.cmd_str(&["INFO"])).unwrap();
    for field in [
        "redis_version:7.",
        "arch_bits:64",
        "cluster_enabled:0",
        "role:master",
        "loading:0",
        "module:name=bf,ver=80400",
    ] {
        assert!(r.contains(field), "missing {field}");
    }
    assert_eq!(c.cmd_str(&["DPING"])[0], b'-');
}

#[test]
fn redis_crate_client_works() {
    let s = start_server();
    let client = redis::Client::open(s.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(b"\x00\xffbin")
        .query(&mut con)
        .unwrap();
    let v: Vec<u8> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, b"\x00\xffbin");
    let (a, b): (String, Vec<u8>) = redis::pipe()
        .cmd("PING")
        .cmd("GET")
        .arg("k")
        .query(&mut con)
        .unwrap();
    assert_eq!(a, "PONG");
    assert_eq!(b, b"\x00\xffbin");
}

#[test]
fn quit_closes() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["QUIT"]), b"+OK\r\n");
    assert!(c.is_closed());
}

#[test]
fn maxmemory_refuses_denyoom_commands() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["SET", "k", "v"]),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    // Reads and deletes still work.
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
}

#[test]
fn unknown_command_echoes_raw_bytes() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&[b"X", b"a\x00b", b"\xff"]),
        b"-ERR unknown command 'X', with args beginning with: 'a' '\xff' \r\n"
    );
}

#[test]
fn maxclients_refuses_extra_connections() {
    let s = start_with(&["--maxclients", "1"]);
    let mut a = s.raw();
    assert_eq!(a.cmd_str(&["PING"]), b"+PONG\r\n");
    let mut b = s.raw();
    assert_eq!(b.read_reply(), b"-ERR max number of clients reached\r\n");
}

#[test]
fn info_reports_bloom_counters_and_sub_microsecond_stats() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["BF.ADD", "bf", "a"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["BF.ADD", "bf", "b"]), b":1\r\n");
    let r = String::from_utf8(c.cmd_str(&["INFO", "bloom"])).unwrap();
    assert!(r.contains("bf_filters:1\r\n"), "{r}");
    assert!(r.contains("bf_items_inserted:2\r\n"), "{r}");
    let r = String::from_utf8(c.cmd_str(&["INFO", "commandstats"])).unwrap();
    let line = r
        .lines()
        .find(|l| l.starts_with("cmdstat_bf.add:"))
        .expect("bf.add stats");
    assert!(line.contains("calls=2,"), "{line}");
    assert!(
        !line.contains("usec_per_call=0.00"),
        "sub-microsecond calls must not round to zero: {line}"
    );
}

#[test]
fn command_info_unknown_and_subcommands() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["COMMAND", "INFO", "nosuch"]), b"*1\r\n$-1\r\n");
    let r = c.cmd_str(&["COMMAND", "INFO", "client|getname"]);
    assert!(
        r.starts_with(b"*1\r\n*10\r\n$14\r\nclient|getname\r\n"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    let r = c.cmd_str(&["COMMAND", "DOCS", "config|get"]);
    assert!(
        r.starts_with(b"*2\r\n$10\r\nconfig|get\r\n"),
        "{}",
        String::from_utf8_lossy(&r)
    );
}

/// An idle connection waits on its socket and on one wake-up signal for pushes, CLIENT KILL and
/// the shutdown (engine::signal): a kill must close it at once, and a push that comes while it is
/// idle must reach it, also after a kill of another client woke nobody else.
#[test]
fn an_idle_connection_wakes_for_a_kill_and_for_a_push() {
    use std::io::Read;
    let s = start_server();
    let mut victim = s.raw();
    let mut sub = s.raw();
    let mut admin = s.raw();
    let id = String::from_utf8(victim.cmd_str(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end().to_string();
    assert_eq!(
        sub.cmd_str(&["SUBSCRIBE", "ch"]),
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(admin.cmd_str(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
    victim
        .stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut chunk = [0u8; 64];
    // EOF, not a timeout: the kill woke the idle connection.
    assert_eq!(
        victim.stream.read(&mut chunk).expect("EOF, not a timeout"),
        0
    );
    assert_eq!(admin.cmd_str(&["PUBLISH", "ch", "hi"]), b":1\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    assert_eq!(admin.cmd_str(&["PUBLISH", "ch", "again"]), b":1\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nagain\r\n"
    );
}

/// The `timeout` directive, on the real binary (whose runtime has no time driver: the cron
/// closes idle clients, `server::close_idle_clients`). As Redis's `clientsCronHandleTimeout`: an
/// idle client is closed once more than `timeout` whole seconds passed since its last read or
/// write; a client that keeps talking, a subscriber, a MONITOR client and a client blocked in WAIT
/// are not.
#[test]
fn timeout_closes_idle_clients_only() {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let dir = common::tempdir("idle-timeout");
    let (mut child, addr) = common::spawn_binary_with(&dir, "", &["--timeout", "1"]);
    let mut idle = common::connect_when_ready(addr);
    let started = Instant::now();
    let mut busy = common::RawConn::connect(addr);
    let mut sub = common::RawConn::connect(addr);
    let mut monitor = common::RawConn::connect(addr);
    let mut waiter = common::RawConn::connect(addr);
    assert_eq!(idle.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        sub.cmd_str(&["SUBSCRIBE", "ch"]),
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(monitor.cmd_str(&["MONITOR"]), b"+OK\r\n");
    // No replica: WAIT blocks for its whole 3.5 s timeout, past the idle timeout.
    waiter.send(&[b"WAIT", b"1", b"3500"]);
    idle.stream
        .set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let mut chunk = [0u8; 64];
    let closed_after = loop {
        assert_eq!(busy.cmd_str(&["PING"]), b"+PONG\r\n");
        match idle.stream.read(&mut chunk) {
            Ok(0) => break started.elapsed(),
            Ok(n) => panic!("unexpected bytes {:?}", &chunk[..n]),
            Err(_) => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the idle client was not closed"
        );
    };
    assert!(closed_after > Duration::from_secs(1), "{closed_after:?}");
    // Past another full timeout, the others are all still served.
    let until = Instant::now() + Duration::from_millis(2200);
    while Instant::now() < until {
        assert_eq!(busy.cmd_str(&["PING"]), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_eq!(waiter.read_reply(), b":0\r\n");
    assert_eq!(busy.cmd_str(&["PUBLISH", "ch", "hi"]), b":1\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    let line = String::from_utf8(monitor.read_reply()).unwrap();
    assert!(line.contains("\"WAIT\" \"1\" \"3500\""), "{line}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The harness's own check: a spawned server is returned only once it listens on its port
/// itself, and `listeners_of` names it (and nothing else) there. A failing test prints that list,
/// so a reset from some other process's socket on the port is told apart from our server's.
#[test]
fn a_spawned_server_is_the_one_listening_on_its_port() {
    let dir = common::tempdir("own-port");
    let (mut child, addr) = common::spawn_binary(&dir, "");
    assert_eq!(common::listeners_of(addr.port()), vec![child.id()]);
    let mut c = common::connect_when_ready(addr);
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(common::listeners_of(addr.port()), Vec::<u32>::new());
}
