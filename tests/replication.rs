//! Replication with real servers on loopback: redis-server 7.0 primary → hyperbloom replica,
//! hyperbloom primary → redis-server replica, hyperbloom → hyperbloom (filters, LOADCHUNK,
//! expiries, partial resync after CLIENT KILL TYPE replica, chains). Each server is its own
//! process or in-process instance with its own temp dir; nothing sleeps blindly: every wait polls
//! a condition with a deadline.

mod common;

use std::time::{Duration, Instant};

use common::redis::RealRedis;
use common::{tempdir, RawConn};

/// Polls `f` every 20 ms for up to 20 s.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

/// A field of `INFO <section>`.
fn info_field(c: &mut RawConn, section: &str, field: &str) -> Option<String> {
    let info = text(c.cmd_str(&["INFO", section]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

fn link_up(c: &mut RawConn) -> bool {
    info_field(c, "replication", "master_link_status").as_deref() == Some("up")
}

/// Every key of db 0 with its DUMP payload and whether it has a TTL, sorted.
fn keyspace(c: &mut RawConn) -> Vec<(Vec<u8>, Vec<u8>, bool)> {
    let keys = c.cmd_str(&["KEYS", "*"]);
    let mut out = Vec::new();
    for k in parse_array(&keys) {
        let dump = c.cmd(&[b"DUMP", &k]);
        let pttl = text(c.cmd(&[b"PTTL", &k]));
        out.push((k, dump, pttl != ":-1\r\n"));
    }
    out.sort();
    out
}

/// The bulk strings of a flat RESP2 array reply.
fn parse_array(reply: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = reply.iter().position(|&b| b == b'\n').map_or(0, |p| p + 1);
    while i < reply.len() {
        let end = i + reply[i..].iter().position(|&b| b == b'\n').unwrap_or(0);
        let len: usize = std::str::from_utf8(&reply[i + 1..end - 1])
            .unwrap()
            .parse()
            .unwrap();
        out.push(reply[end + 1..end + 1 + len].to_vec());
        i = end + 1 + len + 2;
    }
    out
}

fn int(reply: Vec<u8>) -> i64 {
    text(reply)
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or(-99)
}

#[test]
fn redis_primary_to_hyperbloom_replica_then_partial_resync() {
    let primary = RealRedis::start(&["--repl-diskless-sync-delay", "0"]);
    let mut p = primary.raw();
    for i in 0..200 {
        p.cmd_str(&["SET", &format!("s{i}"), &format!("v{i}")]);
    }
    p.cmd_str(&["PFADD", "hll", "a", "b", "c"]);
    p.cmd_str(&["SET", "ttl", "x", "EX", "1000"]);
    p.cmd_str(&["SET", "n", "12345"]);
    let dir = tempdir("repl-r2h");
    let replica = common::start_with(&["--dir", dir.to_str().unwrap()]);
    let mut r = replica.raw();
    let port = primary.port().to_string();
    assert_eq!(r.cmd_str(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("link up", || link_up(&mut r));
    // Writes after the snapshot come through the stream, in two databases.
    p.cmd_str(&["INCR", "n"]);
    p.cmd_str(&["PFADD", "hll", "d"]);
    p.cmd_str(&["DEL", "s0"]);
    p.cmd_str(&["SELECT", "2"]);
    p.cmd_str(&["SET", "in2", "yes"]);
    p.cmd_str(&["SELECT", "0"]);
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    r.cmd_str(&["SELECT", "2"]);
    assert_eq!(r.cmd_str(&["GET", "in2"]), b"$3\r\nyes\r\n");
    r.cmd_str(&["SELECT", "0"]);
    assert_eq!(
        r.cmd_str(&["SET", "k", "v"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(
        info_field(&mut r, "replication", "role").as_deref(),
        Some("slave")
    );
    assert_eq!(
        info_field(&mut r, "replication", "master_repl_offset"),
        info_field(&mut p, "replication", "master_repl_offset")
    );

    // Drop the link from the primary's side: the replica comes back with +CONTINUE.
    assert_eq!(int(p.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"])), 1);
    p.cmd_str(&["SET", "after-kill", "1"]);
    wait_for("partial resync", || {
        info_field(&mut p, "stats", "sync_partial_ok").as_deref() == Some("1")
    });
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    assert_eq!(
        info_field(&mut p, "stats", "sync_full").as_deref(),
        Some("1")
    );

    // Promotion: the replica becomes a primary that accepts writes.
    assert_eq!(r.cmd_str(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(
        info_field(&mut r, "replication", "role").as_deref(),
        Some("master")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn hyperbloom_primary_full_sync_to_redis_replica() {
    let dir = tempdir("repl-h2r");
    let primary = common::start_with(&["--dir", dir.to_str().unwrap()]);
    let mut p = primary.raw();
    for i in 0..300 {
        p.cmd_str(&["SET", &format!("s{i}"), &"x".repeat(i)]);
    }
    p.cmd_str(&["PFADD", "hll", "a", "b", "c"]);
    p.cmd_str(&["SET", "ttl", "x", "PX", "900000"]);
    p.cmd_str(&["SET", "int", "-42"]);
    let rdir = tempdir("repl-h2r-redis");
    let port = primary.port().to_string();
    let replica = RealRedis::start(&[
        "--dir",
        rdir.to_str().unwrap(),
        "--replicaof",
        "127.0.0.1",
        &port,
    ]);
    let mut r = replica.raw();
    wait_for("redis replica link up", || link_up(&mut r));
    wait_for("replica online", || {
        info_field(&mut p, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
    });
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    assert_eq!(
        info_field(&mut p, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let role = text(p.cmd_str(&["ROLE"]));
    assert!(role.starts_with("*3\r\n$6\r\nmaster\r\n"), "{role}");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(rdir);
}

#[test]
fn hyperbloom_to_hyperbloom_filters_disk_and_diskless() {
    for diskless in ["yes", "no"] {
        let dir = tempdir("repl-h2h");
        let primary = common::start_with(&[
            "--dir",
            dir.to_str().unwrap(),
            "--repl-diskless-sync",
            diskless,
        ]);
        let mut p = primary.raw();
        p.cmd_str(&["BF.RESERVE", "bf", "0.01", "1000"]);
        for i in 0..500 {
            p.cmd_str(&["BF.ADD", "bf", &format!("i{i}")]);
            p.cmd_str(&["CF.ADD", "cf", &format!("i{i}")]);
        }
        p.cmd_str(&["PFADD", "pf", "a", "b"]);
        p.cmd_str(&["SET", "gone", "x", "PX", "900000"]);
        let rdir = tempdir("repl-h2h-r");
        let replica = common::start_with(&["--dir", rdir.to_str().unwrap()]);
        let mut r = replica.raw();
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
        wait_for("link up", || link_up(&mut r));
        assert_eq!(keyspace(&mut p), keyspace(&mut r), "diskless {diskless}");
        for key in ["bf", "cf"] {
            let cmd = if key == "bf" {
                "BF.SCANDUMP"
            } else {
                "CF.SCANDUMP"
            };
            assert_eq!(
                p.cmd_str(&[cmd, key, "0"]),
                r.cmd_str(&[cmd, key, "0"]),
                "{cmd} chunk 1"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(rdir);
    }
}

#[test]
fn replication_commands_reply_like_redis() {
    let s = common::start_server();
    let mut c = s.raw();
    assert_eq!(c.cmd_str(&["REPLCONF", "listening-port", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["REPLCONF", "listening-port"]),
        b"-ERR syntax error\r\n"
    );
    assert_eq!(c.cmd_str(&["WAIT", "0", "0"]), b":0\r\n");
    assert_eq!(
        c.cmd_str(&["WAIT", "1", "-1"]),
        b"-ERR timeout is negative\r\n"
    );
    // No replica: WAIT 1 100 times out with 0.
    assert_eq!(c.cmd_str(&["WAIT", "1", "100"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["ROLE"]), b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    assert_eq!(
        c.cmd_str(&["REPLICAOF", "127.0.0.1", "0"]),
        b"-ERR Invalid master port\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CLIENT", "KILL", "TYPE", "bogus"]),
        b"-ERR Unknown client type 'bogus'\r\n"
    );
    assert_eq!(c.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"]), b":0\r\n");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "min-replicas-to-write", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    // A pipeline with WAIT in the middle still answers every command, in order.
    let mut batch = Vec::new();
    for argv in [&["SET", "a", "1"][..], &["WAIT", "1", "50"], &["GET", "a"]] {
        let v: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
        batch.extend_from_slice(&common::encode_command(&v));
    }
    c.send_raw(&batch);
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b":0\r\n");
    assert_eq!(c.read_reply(), b"$1\r\n1\r\n");
}
