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

/// Every key of db 0 with its DUMP payload and its absolute expiry (PEXPIRETIME), sorted.
fn keyspace(c: &mut RawConn) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let keys = c.cmd_str(&["KEYS", "*"]);
    let mut out = Vec::new();
    for k in parse_array(&keys) {
        let dump = c.cmd(&[b"DUMP", &k]);
        let at = int(c.cmd(&[b"PEXPIRETIME", &k]));
        out.push((k, dump, at));
    }
    out.sort();
    out
}

/// [`keyspace`] of database `db` (the connection goes back to db 0).
fn keyspace_db(c: &mut RawConn, db: usize) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    c.cmd_str(&["SELECT", &db.to_string()]);
    let ks = keyspace(c);
    c.cmd_str(&["SELECT", "0"]);
    ks
}

/// Every chunk of `BF.SCANDUMP` / `CF.SCANDUMP key`, in order.
fn scandump(c: &mut RawConn, cmd: &str, key: &str) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let reply = c.cmd_str(&[cmd, key, &iter.to_string()]);
        let (next, data) = parse_scandump(&reply);
        if next == 0 {
            return chunks;
        }
        chunks.push(data.clone());
        iter = next;
        assert!(chunks.len() < 100_000, "SCANDUMP does not end");
    }
}

/// `*2 :iter $len data` → (iter, data).
fn parse_scandump(reply: &[u8]) -> (i64, Vec<u8>) {
    let s = reply;
    let l1 = s.iter().position(|&b| b == b'\n').unwrap() + 1;
    let l2 = l1 + s[l1..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let iter: i64 = text(s[l1 + 1..l2 - 2].to_vec()).parse().unwrap();
    if s[l2] != b'$' || s[l2 + 1] == b'-' {
        return (iter, Vec::new());
    }
    let l3 = l2 + s[l2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let len: usize = text(s[l2 + 1..l3 - 2].to_vec()).parse().unwrap();
    (iter, s[l3..l3 + len].to_vec())
}

/// Sends `cmds` as one pipeline and reads every reply.
fn pipeline(c: &mut RawConn, cmds: &[Vec<String>]) -> Vec<Vec<u8>> {
    let mut batch = Vec::new();
    for argv in cmds {
        let v: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
        batch.extend_from_slice(&common::encode_command(&v));
    }
    c.send_raw(&batch);
    cmds.iter().map(|_| c.read_reply()).collect()
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
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

    // The write stream after the snapshot: rewrites (relative expiry, GETSET, INCRBYFLOAT),
    // another database, a transaction, and keys that expire on the primary (sent as DEL).
    let expired_before = int_field(&mut p, "stats", "expired_keys");
    let writes: Vec<Vec<String>> = vec![
        args(&["SET", "s1", "changed"]),
        args(&["APPEND", "s2", "tail"]),
        args(&["INCR", "int"]),
        args(&["DEL", "s3"]),
        args(&["PFADD", "hll", "d", "e"]),
        args(&["PFADD", "hll2", "x"]),
        args(&["PFMERGE", "hll3", "hll", "hll2"]),
        args(&["SET", "rel", "v", "EX", "1000"]),
        args(&["EXPIRE", "s4", "500"]),
        args(&["GETSET", "s5", "new"]),
        args(&["INCRBYFLOAT", "f", "1.5"]),
        args(&["SET", "short1", "x", "PX", "30"]),
        args(&["SET", "short2", "x", "PX", "30"]),
        args(&["SELECT", "3"]),
        args(&["SET", "in3", "yes"]),
        args(&["MULTI"]),
        args(&["INCR", "c3"]),
        args(&["SET", "d3", "x"]),
        args(&["EXEC"]),
        args(&["SELECT", "0"]),
    ];
    for reply in pipeline(&mut p, &writes) {
        assert!(!reply.starts_with(b"-"), "{}", text(reply));
    }
    wait_for("short keys expired on the primary", || {
        int_field(&mut p, "stats", "expired_keys") >= expired_before + 2
    });
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    assert_eq!(keyspace_db(&mut p, 3), keyspace_db(&mut r, 3));
    assert_eq!(r.cmd_str(&["EXISTS", "short1", "short2"]), b":0\r\n");
    assert!(int(r.cmd_str(&["PEXPIRETIME", "rel"])) > 0);
    // Offsets agree, and the primary's INFO shows the replica's acknowledged offset.
    wait_for("offsets agree", || {
        let po = info_field(&mut p, "replication", "master_repl_offset");
        let ro = info_field(&mut r, "replication", "slave_repl_offset");
        let acked = info_field(&mut p, "replication", "slave0").and_then(|s| {
            s.split(',')
                .find_map(|f| f.strip_prefix("offset=").map(String::from))
        });
        po.is_some() && po == ro && po == acked
    });
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(rdir);
}

fn int_field(c: &mut RawConn, section: &str, field: &str) -> i64 {
    info_field(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// Pipelined BF/CF/PF/string writes (with short expiries) from a thread of its own, in rounds of
/// 50 commands, until `stop` is set. Returns the number of rounds.
fn write_load(
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut c = RawConn::connect(addr);
        let mut round = 0usize;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) || round < 20 {
            let mut cmds = Vec::new();
            for j in 0..10 {
                let n = round * 10 + j;
                cmds.push(args(&["BF.ADD", "load-bf", &format!("b{n}")]));
                cmds.push(args(&["CF.ADD", "load-cf", &format!("c{n}")]));
                cmds.push(args(&[
                    "PFADD",
                    &format!("load-pf{}", n % 7),
                    &format!("p{n}"),
                ]));
                cmds.push(args(&[
                    "SET",
                    &format!("load-s{}", n % 100),
                    &n.to_string(),
                ]));
                if n.is_multiple_of(5) {
                    cmds.push(args(&["SET", &format!("load-tmp{n}"), "x", "PX", "20"]));
                } else {
                    cmds.push(args(&["BF.INSERT", "load-bf2", "ITEMS", &format!("q{n}")]));
                }
            }
            for reply in pipeline(&mut c, &cmds) {
                assert!(!reply.starts_with(b"-"), "{}", text(reply));
            }
            round += 1;
        }
        round
    })
}

/// Every filter of the given kind has the same SCANDUMP chunk sequence on both servers.
fn same_filters(p: &mut RawConn, r: &mut RawConn, bf: &[&str], cf: &[&str]) {
    for key in bf {
        let a = scandump(p, "BF.SCANDUMP", key);
        assert!(!a.is_empty(), "{key} has chunks");
        assert_eq!(a, scandump(r, "BF.SCANDUMP", key), "BF.SCANDUMP {key}");
    }
    for key in cf {
        let a = scandump(p, "CF.SCANDUMP", key);
        assert!(!a.is_empty(), "{key} has chunks");
        assert_eq!(a, scandump(r, "CF.SCANDUMP", key), "CF.SCANDUMP {key}");
    }
}

#[test]
fn hyperbloom_to_hyperbloom_under_write_load_with_loadchunk_and_expiry() {
    let dir = tempdir("repl-load");
    let primary = common::start_with(&["--dir", dir.to_str().unwrap()]);
    let mut p = primary.raw();
    p.cmd_str(&["BF.RESERVE", "src-bf", "0.001", "100", "EXPANSION", "2"]);
    p.cmd_str(&["CF.RESERVE", "src-cf", "64", "BUCKETSIZE", "2"]);
    for i in 0..400 {
        p.cmd_str(&["BF.ADD", "src-bf", &format!("i{i}")]);
        p.cmd_str(&["CF.ADD", "src-cf", &format!("i{i}")]);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = write_load(primary.addr, stop.clone());
    // The full sync happens while the writer runs.
    let rdir = tempdir("repl-load-r");
    let replica = common::start_with(&["--dir", rdir.to_str().unwrap()]);
    let mut r = replica.raw();
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    wait_for("link up", || link_up(&mut r));
    // Copy the source filters with SCANDUMP/LOADCHUNK on the primary while the load goes on.
    for (dump, load, src, dst) in [
        ("BF.SCANDUMP", "BF.LOADCHUNK", "src-bf", "copy-bf"),
        ("CF.SCANDUMP", "CF.LOADCHUNK", "src-cf", "copy-cf"),
    ] {
        let mut iter = 0i64;
        let mut n = 0;
        loop {
            let (next, data) = parse_scandump(&p.cmd_str(&[dump, src, &iter.to_string()]));
            if next == 0 {
                break;
            }
            let reply = p.cmd(&[
                load.as_bytes(),
                dst.as_bytes(),
                next.to_string().as_bytes(),
                &data,
            ]);
            assert_eq!(reply, b"+OK\r\n", "{load} chunk {n}");
            iter = next;
            n += 1;
        }
        assert!(n >= 2, "{src}: a multi-chunk sequence");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds >= 20);
    wait_for("the short keys expired", || {
        p.cmd_str(&["KEYS", "load-tmp*"]) == b"*0\r\n"
    });
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(r.cmd_str(&["KEYS", "load-tmp*"]), b"*0\r\n");
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    same_filters(
        &mut p,
        &mut r,
        &["src-bf", "copy-bf", "load-bf", "load-bf2"],
        &["src-cf", "copy-cf", "load-cf"],
    );
    assert_eq!(
        p.cmd_str(&["CF.EXISTS", "copy-cf", "i399"]),
        r.cmd_str(&["CF.EXISTS", "copy-cf", "i399"])
    );

    // Partial resync after CLIENT KILL TYPE replica: writes made meanwhile come from the backlog.
    assert_eq!(int_field(&mut p, "stats", "sync_full"), 1);
    assert_eq!(int(p.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"])), 1);
    for i in 0..50 {
        p.cmd_str(&["BF.ADD", "after-kill", &format!("a{i}")]);
    }
    wait_for("partial resync", || {
        int_field(&mut p, "stats", "sync_partial_ok") == 1
    });
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(int_field(&mut p, "stats", "sync_full"), 1);
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    same_filters(&mut p, &mut r, &["after-kill"], &[]);
    assert_eq!(
        info_field(&mut r, "replication", "master_replid"),
        info_field(&mut p, "replication", "master_replid")
    );
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(rdir);
}

#[test]
fn chain_and_promotion_keep_one_history() {
    let dirs: Vec<_> = (0..3).map(|i| tempdir(&format!("repl-chain{i}"))).collect();
    let a = common::start_with(&["--dir", dirs[0].to_str().unwrap()]);
    let b = common::start_with(&["--dir", dirs[1].to_str().unwrap()]);
    let c = common::start_with(&["--dir", dirs[2].to_str().unwrap()]);
    let (mut pa, mut pb, mut pc) = (a.raw(), b.raw(), c.raw());
    pa.cmd_str(&["SET", "before", "1"]);
    pb.cmd_str(&["REPLICAOF", "127.0.0.1", &a.port().to_string()]);
    pc.cmd_str(&["REPLICAOF", "127.0.0.1", &b.port().to_string()]);
    wait_for("b up", || link_up(&mut pb));
    wait_for("c up", || link_up(&mut pc));
    for i in 0..200 {
        pa.cmd_str(&["PFADD", "pf", &format!("e{i}")]);
        pa.cmd_str(&["CF.ADD", "cf", &format!("e{i}")]);
        pa.cmd_str(&["SET", &format!("k{i}"), "v", "EX", "900"]);
    }
    // WAIT counts direct replicas only: B.
    assert_eq!(int(pa.cmd_str(&["WAIT", "2", "300"])), 1);
    let offset = info_field(&mut pa, "replication", "master_repl_offset");
    wait_for("C reaches A's offset", || {
        info_field(&mut pc, "replication", "master_repl_offset") == offset
    });
    assert_eq!(keyspace(&mut pa), keyspace(&mut pc));
    same_filters(&mut pa, &mut pc, &[], &["cf"]);
    assert_eq!(
        info_field(&mut pc, "replication", "master_replid"),
        info_field(&mut pa, "replication", "master_replid")
    );

    // A goes away; B is promoted: C continues from B's replid2 with a partial resync.
    let old_id = info_field(&mut pa, "replication", "master_replid");
    drop(pa);
    drop(a);
    assert_eq!(pb.cmd_str(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(info_field(&mut pb, "replication", "master_replid2"), old_id);
    pb.cmd_str(&["SET", "after-promotion", "1"]);
    pb.cmd_str(&["SELECT", "5"]);
    pb.cmd_str(&["SET", "in5", "1"]);
    pb.cmd_str(&["SELECT", "0"]);
    wait_for("C follows B's new history", || {
        info_field(&mut pc, "replication", "master_replid")
            == info_field(&mut pb, "replication", "master_replid")
    });
    assert_eq!(int(pb.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(int_field(&mut pb, "stats", "sync_partial_ok"), 1);
    assert_eq!(int_field(&mut pb, "stats", "sync_full"), 1);
    assert_eq!(keyspace(&mut pb), keyspace(&mut pc));
    assert_eq!(keyspace_db(&mut pb, 5), keyspace_db(&mut pc, 5));
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
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

#[test]
fn backlog_too_small_means_full_resync_and_min_replicas_follow_acks() {
    let dir = tempdir("repl-backlog");
    let primary = common::start_with(&[
        "--dir",
        dir.to_str().unwrap(),
        "--repl-backlog-size",
        "16384",
    ]);
    let mut p = primary.raw();
    let rdir = tempdir("repl-backlog-r");
    let replica = common::start_with(&["--dir", rdir.to_str().unwrap()]);
    let mut r = replica.raw();
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    wait_for("link up", || link_up(&mut r));

    // min-replicas-to-write counts the replica while it acknowledges.
    p.cmd_str(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    p.cmd_str(&["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    assert_eq!(p.cmd_str(&["SET", "guarded", "1"]), b"+OK\r\n");
    assert_eq!(
        int_field(&mut p, "replication", "min_slaves_good_slaves"),
        1
    );
    p.cmd_str(&["CONFIG", "SET", "min-replicas-to-write", "0"]);

    // Far more than the backlog is written while the replica is away: it must resync in full.
    assert_eq!(int(p.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"])), 1);
    let value = "v".repeat(1000);
    let writes: Vec<Vec<String>> = (0..400)
        .map(|i| args(&["SET", &format!("big{i}"), &value]))
        .collect();
    pipeline(&mut p, &writes);
    let first = int_field(&mut p, "replication", "repl_backlog_first_byte_offset");
    assert!(first > 1, "the backlog was trimmed (first byte {first})");
    assert!(int_field(&mut p, "replication", "repl_backlog_histlen") < 200_000);
    wait_for("second full sync", || {
        int_field(&mut p, "stats", "sync_full") == 2
    });
    // As in Redis, the first sync counts too: a fresh replica offers its own history
    // (replicationCacheMasterUsingMyself), which the primary refuses.
    assert_eq!(int_field(&mut p, "stats", "sync_partial_err"), 2);
    assert_eq!(int_field(&mut p, "stats", "sync_partial_ok"), 0);
    wait_for("link up again", || link_up(&mut r));
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(keyspace(&mut p), keyspace(&mut r));

    // With its replica gone, a primary that needs one refuses writes.
    p.cmd_str(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    drop(r);
    drop(replica);
    wait_for("NOREPLICAS", || {
        p.cmd_str(&["SET", "k", "v"]) == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    });
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(rdir);
}

/// Writes to keys that exist run under the shared keyspace lock (`commands::shared_path`) even
/// with replicas attached: their bytes wait in the write stream until the next holder of the
/// exclusive lock moves them into the backlog. Two clients pipeline INCR (not idempotent: a
/// write applied twice shows), SET, BF.ADD, BF.MADD and PFADD on existing keys while a replica
/// attaches and fully syncs, and after. A write that reached the snapshot but not the offset
/// would be applied twice on the replica; one left in the stream would be missing.
#[test]
fn shared_path_writes_reach_a_replica_once_each_across_a_full_sync() {
    let primary = common::start_with(&[]);
    let mut p = primary.raw();
    for cmd in [
        &["SET", "counter", "0"][..],
        &["SET", "s0", "x"],
        &["SET", "s1", "x"],
        &["BF.RESERVE", "bf", "0.01", "1000000"],
        &["PFADD", "hll", "seed"],
        &["PFDEBUG", "TODENSE", "hll"],
    ] {
        assert!(!p.cmd_str(cmd).starts_with(b"-"), "{cmd:?}");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = writers_in_rounds(primary.addr, &stop, |t, round| {
        let mut cmds = Vec::new();
        for j in 0..8 {
            let n = format!("{t}:{round}:{j}");
            cmds.push(args(&["INCR", "counter"]));
            cmds.push(args(&["SET", &format!("s{t}"), &n]));
            cmds.push(args(&["BF.ADD", "bf", &n]));
            cmds.push(args(&["BF.MADD", "bf", &format!("{n}a"), &format!("{n}b")]));
            cmds.push(args(&["PFADD", "hll", &n]));
        }
        cmds
    });
    // The replica attaches while both clients write.
    let (_replica, mut r) = attach_replica(&primary);
    // And keeps receiving while they go on.
    // A bulk integer: "$N\r\n<digits>\r\n".
    let get = |c: &mut RawConn| -> i64 {
        let reply = text(c.cmd_str(&["GET", "counter"]));
        reply
            .lines()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-99)
    };
    let synced_at = get(&mut p);
    wait_for("more writes after the sync", || {
        get(&mut p) > synced_at + 400
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // Eight INCRs a round.
    let incrs: i64 = writers
        .into_iter()
        .map(|w| 8 * w.join().unwrap() as i64)
        .sum();
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    assert_eq!(get(&mut p), incrs);
    assert_eq!(get(&mut r), incrs, "each INCR once");
    assert_eq!(keyspace(&mut p), keyspace(&mut r));
    same_filters(&mut p, &mut r, &["bf"], &[]);
    assert_eq!(
        int_field(&mut p, "replication", "master_repl_offset"),
        int_field(&mut r, "replication", "master_repl_offset")
    );
}

/// Two clients pipelining `round(client, n)`'s commands, round after round, each reply checked
/// not to be an error, until `stop` is set and at least 50 rounds are done. Each thread answers
/// its number of rounds.
fn writers_in_rounds(
    addr: std::net::SocketAddr,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    round: fn(usize, usize) -> Vec<Vec<String>>,
) -> Vec<std::thread::JoinHandle<usize>> {
    (0..2)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = RawConn::connect(addr);
                let mut n = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 50 {
                    for reply in pipeline(&mut c, &round(t, n)) {
                        assert!(!reply.starts_with(b"-"), "{}", text(reply));
                    }
                    n += 1;
                }
                n
            })
        })
        .collect()
}

/// A fresh test server made a replica of `primary`, once its link is up.
fn attach_replica(primary: &common::TestServer) -> (common::TestServer, RawConn) {
    let replica = common::start_with(&[]);
    let mut r = replica.raw();
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    wait_for("link up", || link_up(&mut r));
    (replica, r)
}

/// Keys added and deleted under the shared lock (`store::keytable::KeyTable::insert_shared`,
/// on with the test server's two workers, in a table of 40k keys): two clients pipeline SET,
/// INCR, BF.ADD and CF.ADD of new keys and DEL of their previous round's string while a replica
/// attaches and fully syncs, and after. The replica must end with the primary's key count and
/// values, each created filter made once (its BF.RESERVE/CF.RESERVE with its add, one
/// MULTI/EXEC), and the same offset.
#[test]
fn keys_added_and_deleted_on_the_shared_path_reach_a_replica_once_each() {
    let primary = common::start_with(&[]);
    let mut p = primary.raw();
    let fill: Vec<Vec<String>> = (0..40_000)
        .map(|i| args(&["SET", &format!("fill:{i}"), "x"]))
        .collect();
    for chunk in fill.chunks(1000) {
        for reply in pipeline(&mut p, chunk) {
            assert_eq!(reply, b"+OK\r\n");
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = writers_in_rounds(primary.addr, &stop, |t, round| {
        let mut cmds = Vec::new();
        for j in 0..8 {
            let n = format!("{t}:{round}:{j}");
            cmds.push(args(&["SET", &format!("k:{n}"), &n]));
            cmds.push(args(&["INCR", &format!("c:{n}")]));
            cmds.push(args(&["BF.ADD", &format!("bf:{n}"), &n]));
            if j == 0 {
                cmds.push(args(&["CF.ADD", &format!("cf:{n}"), &n]));
            }
            if round > 0 {
                cmds.push(args(&["DEL", &format!("k:{t}:{}:{j}", round - 1)]));
            }
        }
        // A key with a TTL a round (propagated as `SET key value PXAT ms`), its TTL cleared the
        // next round.
        cmds.push(args(&["SET", &format!("e:{t}:{round}"), "v", "EX", "1000"]));
        if round > 0 {
            cmds.push(args(&["SET", &format!("e:{t}:{}", round - 1), "w"]));
        }
        cmds
    });
    // The replica attaches while both clients write, and keeps receiving while they go on.
    let (_replica, mut r) = attach_replica(&primary);
    let synced_at = int(p.cmd_str(&["DBSIZE"]));
    wait_for("more keys after the sync", || {
        int(p.cmd_str(&["DBSIZE"])) > synced_at + 2000
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    // Per client and round: 8 counters and 8 Bloom filters, a cuckoo filter and an `e:` key;
    // the strings of its last round (the others deleted).
    let want: i64 = 40_000 + rounds.iter().map(|&n| (n * 18 + 8) as i64).sum::<i64>();
    assert_eq!(int(p.cmd_str(&["DBSIZE"])), want);
    assert_eq!(int(r.cmd_str(&["DBSIZE"])), want, "the replica's key count");
    // One TTL left per client: its last round's `e:` key.
    for c in [&mut p, &mut r] {
        let keyspace = text(c.cmd_str(&["INFO", "keyspace"]));
        assert!(
            keyspace.contains(&format!("db0:keys={want},expires=2,")),
            "{keyspace}"
        );
    }
    for (t, &n) in rounds.iter().enumerate() {
        for round in (0..n).step_by(7) {
            let name = format!("{t}:{round}:0");
            let string = format!("k:{name}");
            let counter = format!("c:{name}");
            let bloom = format!("bf:{name}");
            let cuckoo = format!("cf:{name}");
            for c in [&mut p, &mut r] {
                let want_string = if round + 1 == n {
                    format!("${}\r\n{name}\r\n", name.len()).into_bytes()
                } else {
                    b"$-1\r\n".to_vec()
                };
                assert_eq!(c.cmd_str(&["GET", &string]), want_string, "{string}");
                assert_eq!(c.cmd_str(&["GET", &counter]), b"$1\r\n1\r\n", "{counter}");
                assert_eq!(c.cmd_str(&["BF.EXISTS", &bloom, &name]), b":1\r\n");
                assert_eq!(c.cmd_str(&["CF.COUNT", &cuckoo, &name]), b":1\r\n");
                let expiring = format!("e:{t}:{round}");
                let ttl = int(c.cmd_str(&["TTL", &expiring]));
                if round + 1 == n {
                    assert!((900..=1000).contains(&ttl), "{expiring}: TTL {ttl}");
                } else {
                    assert_eq!(ttl, -1, "{expiring}: cleared");
                }
            }
        }
    }
    assert_eq!(
        int_field(&mut p, "replication", "master_repl_offset"),
        int_field(&mut r, "replication", "master_repl_offset")
    );
}

/// A replica ignores `maxmemory` (Redis's `replica-ignore-maxmemory yes`): its primary's writes
/// are applied however much memory it uses, or the replica would silently drop them and diverge,
/// and its own clients' writes (a writable replica) are not refused with OOM either. Real
/// binaries: `used_memory` is each process's own.
#[test]
fn a_replica_over_maxmemory_applies_every_write_of_its_primary() {
    let (pdir, rdir) = (tempdir("repl-oom-p"), tempdir("repl-oom-r"));
    let (_primary, paddr) = common::spawn_binary(&pdir, "");
    let (_replica, raddr) = common::spawn_binary_with(&rdir, "", &["--replica-read-only", "no"]);
    let mut p = common::connect_when_ready(paddr);
    let mut r = common::connect_when_ready(raddr);
    let used = int_field(&mut r, "memory", "used_memory");
    let limit = (used + 1024 * 1024).to_string();
    assert_eq!(
        r.cmd_str(&["CONFIG", "SET", "maxmemory", &limit]),
        b"+OK\r\n"
    );
    // Not a replica yet: the limit holds.
    let big = "x".repeat(256 * 1024);
    let oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n".to_vec();
    let refused = (0..10).any(|i| r.cmd_str(&["SET", &format!("big{i}"), &big]) == oom);
    assert!(refused, "the limit never refused a write");
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &paddr.port().to_string()]);
    wait_for("link up", || link_up(&mut r));
    let value = "y".repeat(1000);
    for i in 0..2000 {
        p.cmd_str(&["SET", &format!("k{i}"), &value]);
        p.cmd_str(&["PFADD", "hll", &format!("e{i}")]);
        p.cmd_str(&["BF.ADD", &format!("bf{}", i % 7), &format!("e{i}")]);
        p.cmd_str(&["CF.ADD", "cf", &format!("e{i}")]);
    }
    p.cmd_str(&["MULTI"]);
    p.cmd_str(&["SET", "in-multi", "1"]);
    p.cmd_str(&["INCR", "counter"]);
    p.cmd_str(&["EXEC"]);
    assert_eq!(int(p.cmd_str(&["WAIT", "1", "5000"])), 1);
    let offset = info_field(&mut p, "replication", "master_repl_offset");
    wait_for("the replica reaches the primary's offset", || {
        info_field(&mut r, "replication", "master_repl_offset") == offset
    });
    assert!(int_field(&mut r, "memory", "used_memory") > used + 1024 * 1024);
    let (theirs, ours) = (keyspace(&mut p), keyspace(&mut r));
    let missing = theirs.iter().filter(|k| !ours.contains(k)).count();
    assert!(
        theirs == ours,
        "{} keys on the primary, {} on the replica, {missing} of the primary's missing or different",
        theirs.len(),
        ours.len()
    );
    same_filters(&mut p, &mut r, &["bf0", "bf6"], &["cf"]);
    // A writable replica's own client: no OOM on a replica.
    assert_eq!(r.cmd_str(&["SET", "local", "v"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["BF.ADD", "local-bf", "x"]), b":1\r\n");
    assert_eq!(r.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["SET", "local2", "v"]), b"+QUEUED\r\n");
    assert_eq!(r.cmd_str(&["EXEC"]), b"*1\r\n+OK\r\n");
    drop((p, r));
    let _ = std::fs::remove_dir_all(pdir);
    let _ = std::fs::remove_dir_all(rdir);
}
