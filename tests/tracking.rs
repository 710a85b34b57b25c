//! CLIENT TRACKING for what a plain `redis-server` cannot be compared on (the differential tests
//! in `diff_tracking.rs` cover the rest): invalidations for writes to filters, sketches and
//! t-digests (RedisBloom's commands open their keys for writing, and Redis signals every key a
//! module opened for writing), and for active expiry, which no command triggers.

mod common;

use common::{start_server, RawConn};

/// A RESP3 connection with tracking on.
fn tracking_conn(addr: std::net::SocketAddr, options: &[&str]) -> RawConn {
    let mut c = RawConn::connect(addr);
    assert!(c.cmd_str(&["HELLO", "3"]).starts_with(b"%"));
    let mut argv = vec!["CLIENT", "TRACKING", "on"];
    argv.extend_from_slice(options);
    assert_eq!(c.cmd_str(&argv), b"+OK\r\n");
    c
}

/// What `c` (RESP3) received before the reply to `PING marker`.
fn received(c: &mut RawConn, marker: &str) -> Vec<u8> {
    c.send(&[b"PING", marker.as_bytes()]);
    let mut out = Vec::new();
    loop {
        let f = c.read_reply();
        if f == format!("${}\r\n{marker}\r\n", marker.len()).as_bytes() {
            return out;
        }
        out.extend_from_slice(&f);
    }
}

fn invalidate(keys: &[&str]) -> Vec<u8> {
    let mut v = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len()).into_bytes();
    for k in keys {
        v.extend_from_slice(format!("${}\r\n{k}\r\n", k.len()).as_bytes());
    }
    v
}

/// (setup, a read-only command the reader runs, a write another client runs), all on key `x`.
type Case<'a> = (&'a [&'a [&'a str]], &'a [&'a str], &'a [&'a str]);

#[test]
fn every_family_write_invalidates_a_reader() {
    let server = start_server();
    let cases: &[Case] = &[
        (
            &[&["BF.RESERVE", "x", "0.01", "100"]],
            &["BF.EXISTS", "x", "a"],
            &["BF.ADD", "x", "a"],
        ),
        (
            &[&["BF.ADD", "x", "a"]],
            &["BF.EXISTS", "x", "a"],
            &["BF.ADD", "x", "a"],
        ),
        (
            &[&["BF.ADD", "x", "a"]],
            &["BF.CARD", "x"],
            &["BF.MADD", "x", "b", "c"],
        ),
        (
            &[&["CF.RESERVE", "x", "100"]],
            &["CF.EXISTS", "x", "a"],
            &["CF.ADD", "x", "a"],
        ),
        (
            &[&["CF.ADD", "x", "a"]],
            &["CF.COUNT", "x", "a"],
            &["CF.DEL", "x", "a"],
        ),
        (
            &[&["CMS.INITBYDIM", "x", "10", "5"]],
            &["CMS.QUERY", "x", "a"],
            &["CMS.INCRBY", "x", "a", "1"],
        ),
        (
            &[&["TOPK.RESERVE", "x", "3"]],
            &["TOPK.QUERY", "x", "a"],
            &["TOPK.ADD", "x", "a"],
        ),
        (
            &[&["TDIGEST.CREATE", "x"]],
            &["TDIGEST.QUANTILE", "x", "0.5"],
            &["TDIGEST.ADD", "x", "1.5"],
        ),
        (
            &[&["PFADD", "x", "a"]],
            &["PFCOUNT", "x"],
            &["PFADD", "x", "b"],
        ),
        (
            &[&["PFADD", "x", "a"]],
            &["PFCOUNT", "x"],
            &["PFMERGE", "x", "x"],
        ),
        (
            &[&["BF.ADD", "x", "a"]],
            &["BF.EXISTS", "x", "a"],
            &["DEL", "x"],
        ),
        (
            &[&["BF.ADD", "x", "a"]],
            &["EXISTS", "x"],
            &["EXPIRE", "x", "100"],
        ),
    ];
    for (n, (setup, read, write)) in cases.iter().enumerate() {
        let mut writer = server.raw();
        assert_eq!(writer.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
        for cmd in setup.iter() {
            let r = writer.cmd_str(cmd);
            assert!(!r.starts_with(b"-"), "case {n}: {cmd:?} -> {r:?}");
        }
        let mut reader = tracking_conn(server.addr, &[]);
        let r = reader.cmd_str(read);
        assert!(!r.starts_with(b"-"), "case {n}: {read:?} -> {r:?}");
        assert_eq!(received(&mut reader, "before"), b"", "case {n}");
        let r = writer.cmd_str(write);
        assert!(!r.starts_with(b"-"), "case {n}: {write:?} -> {r:?}");
        assert_eq!(
            String::from_utf8_lossy(&received(&mut reader, "after")),
            String::from_utf8_lossy(&invalidate(&["x"])),
            "case {n}: {read:?} then {write:?}"
        );
        // The entry is gone: a second write says nothing until the key is read again.
        writer.cmd_str(write);
        assert_eq!(received(&mut reader, "again"), b"", "case {n}");
    }
}

#[test]
fn bcast_sees_module_writes_by_prefix() {
    let server = start_server();
    let mut reader = tracking_conn(server.addr, &["BCAST", "PREFIX", "bf:", "PREFIX", "cf:"]);
    let mut writer = server.raw();
    writer.cmd_str(&["BF.MADD", "bf:1", "a", "b"]);
    writer.cmd_str(&["CF.ADD", "cf:1", "a"]);
    writer.cmd_str(&["SET", "other", "1"]);
    let mut expected = invalidate(&["bf:1"]);
    expected.extend_from_slice(&invalidate(&["cf:1"]));
    // Each write is its own round, so its own message; the order of the rounds is kept.
    assert_eq!(
        String::from_utf8_lossy(&received(&mut reader, "m")),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn active_expiry_invalidates_without_any_command() {
    let server = start_server();
    let mut reader = tracking_conn(server.addr, &[]);
    let mut writer = server.raw();
    assert_eq!(writer.cmd_str(&["SET", "e", "v", "PX", "30"]), b"+OK\r\n");
    assert_eq!(reader.cmd_str(&["GET", "e"]), b"$1\r\nv\r\n");
    // Nobody touches the key: the cron reclaims it and the push arrives on its own.
    assert_eq!(
        String::from_utf8_lossy(&reader.read_reply()),
        String::from_utf8_lossy(&invalidate(&["e"]))
    );
    let info = writer.cmd_str(&["INFO", "clients"]);
    assert!(String::from_utf8_lossy(&info).contains("tracking_clients:1\r\n"));
}

/// On a replica, the writes the primary sends are invalidations too, and BCAST ones go out
/// without waiting for some client of the replica to run a command (Redis sends them from
/// `beforeSleep` after the primary's commands like after anyone's).
#[test]
fn a_replica_sends_bcast_invalidations_for_the_primarys_writes() {
    let primary = start_server();
    let replica = start_server();
    let mut r = RawConn::connect(replica.addr);
    let port = primary.port().to_string();
    assert_eq!(r.cmd_str(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info = String::from_utf8_lossy(&r.cmd_str(&["INFO", "replication"])).into_owned();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the link did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut bcast = tracking_conn(replica.addr, &["BCAST", "PREFIX", "b:"]);
    let mut default = tracking_conn(replica.addr, &[]);
    assert_eq!(default.cmd_str(&["GET", "d"]), b"_\r\n");
    let mut p = RawConn::connect(primary.addr);
    assert_eq!(p.cmd_str(&["SET", "b:1", "x"]), b"+OK\r\n");
    assert_eq!(p.cmd_str(&["SET", "d", "x"]), b"+OK\r\n");
    // Nothing is sent to the replica's clients: the pushes must come by themselves.
    for c in [&mut bcast, &mut default] {
        c.stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .ok();
    }
    assert_eq!(bcast.read_reply(), invalidate(&["b:1"]));
    assert_eq!(default.read_reply(), invalidate(&["d"]));
}

/// The keys named in a run of `>2 invalidate [k]` pushes.
fn invalidated_keys(pushes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(pushes).into_owned();
    let mut keys = Vec::new();
    let mut lines = text.split("\r\n").peekable();
    while let Some(l) = lines.next() {
        if l == "invalidate" {
            assert_eq!(lines.next(), Some("*1"), "{text}");
            lines.next();
            keys.push(lines.next().unwrap_or_default().to_string());
        }
    }
    keys
}

fn stat(c: &mut RawConn, section: &str, field: &str) -> u64 {
    let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", section])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

/// `tracking-table-max-keys`: beyond it, random keys are dropped from the table with an
/// invalidation each (before a command, and from the cron on an idle server); the keys left are
/// exactly the ones still tracked, and INFO counts them.
#[test]
fn the_tracking_table_is_kept_within_tracking_table_max_keys() {
    let server = common::start_with(&["--tracking-table-max-keys", "10"]);
    let mut c = tracking_conn(server.addr, &[]);
    let mut admin = RawConn::connect(server.addr);
    let mut pushes = Vec::new();
    for i in 0..50 {
        c.send(&[b"GET", format!("k{i}").as_bytes()]);
        loop {
            let f = c.read_reply();
            if f == b"_\r\n" {
                break;
            }
            pushes.extend_from_slice(&f);
        }
    }
    // The last GET may leave the table one over until the cron or the next command.
    pushes.extend_from_slice(&received(&mut c, "m1"));
    assert_eq!(stat(&mut admin, "stats", "tracking_total_keys"), 10);
    assert_eq!(stat(&mut admin, "stats", "tracking_total_items"), 10);
    assert_eq!(stat(&mut admin, "clients", "tracking_clients"), 1);
    let dropped = invalidated_keys(&pushes);
    let unique: std::collections::BTreeSet<&String> = dropped.iter().collect();
    assert_eq!((dropped.len(), unique.len()), (40, 40), "{dropped:?}");
    // The other ten are still tracked: writing all fifty invalidates exactly those.
    for i in 0..50 {
        admin.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    let rest = invalidated_keys(&received(&mut c, "m2"));
    assert_eq!(rest.len(), 10, "{rest:?}");
    for k in &rest {
        assert!(!unique.contains(k), "{k} was dropped and still invalidated");
    }
    assert_eq!(stat(&mut admin, "stats", "tracking_total_keys"), 0);

    // 0 = no limit.
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "tracking-table-max-keys", "0"]),
        b"+OK\r\n"
    );
    for i in 0..30 {
        assert_eq!(c.cmd_str(&["GET", &format!("n{i}")]), b"_\r\n");
    }
    assert_eq!(received(&mut c, "m3"), b"");
    assert_eq!(stat(&mut admin, "stats", "tracking_total_keys"), 30);
    // A lowered limit is applied by the cron while the tracking client is idle.
    assert_eq!(
        admin.cmd_str(&["CONFIG", "SET", "tracking-table-max-keys", "5"]),
        b"+OK\r\n"
    );
    c.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok();
    let mut idle = Vec::new();
    while invalidated_keys(&idle).len() < 25 {
        idle.extend_from_slice(&c.read_reply());
    }
    assert_eq!(stat(&mut admin, "stats", "tracking_total_keys"), 5);
}
