//! The way back: hyperbloom's snapshots load into real Redis. `redis-check-rdb` (Debian
//! redis-tools) must accept a hyperbloom dump with strings, HLLs and filters, and a real
//! `redis-server` started on a dump of strings and HLLs must answer GET / PFCOUNT / PTTL as
//! hyperbloom did. Needs Debian's redis-server and redis-tools (scripts/test.sh installs them).

mod common;

use std::path::PathBuf;
use std::process::Command;

fn tool(name: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// Fills a hyperbloom server with strings and HLLs (sparse and dense), SAVEs, and returns the
/// replies it gives for the checks we will repeat on Redis.
fn make_dump(dir: &std::path::Path, with_filters: bool) -> Vec<(Vec<String>, Vec<u8>)> {
    let server = common::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut c = server.raw();
    c.cmd_str(&["SET", "plain", "hello world"]);
    c.cmd_str(&["SET", "int", "987654"]);
    c.cmd_str(&["SET", "neg", "-12"]);
    c.cmd_str(&["SET", "long", &"compress me ".repeat(200)]);
    c.cmd(&[b"SET", b"bin\x00key", b"\x00\x01\xff\r\n"]);
    c.cmd_str(&["PFADD", "hll-sparse", "a", "b", "c"]);
    let items: Vec<String> = (0..5000).map(|i| format!("item:{i}")).collect();
    let mut argv = vec!["PFADD".to_string(), "hll-dense".to_string()];
    argv.extend(items);
    let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    c.cmd_str(&refs);
    // An expiring key, via RESTORE ABSTTL.
    let payload = c.cmd_str(&["DUMP", "plain"]);
    let payload =
        &payload[payload.iter().position(|&b| b == b'\n').unwrap() + 1..payload.len() - 2];
    c.cmd(&[
        b"RESTORE",
        b"expiring",
        b"4102444800000",
        payload,
        b"ABSTTL",
    ]);
    c.cmd_str(&["SELECT", "5"]);
    c.cmd_str(&["SET", "in-db5", "five"]);
    c.cmd_str(&["SELECT", "0"]);
    if with_filters {
        c.cmd_str(&["BF.ADD", "bf", "x"]);
        c.cmd_str(&["CF.ADD", "cf", "y"]);
    }
    // PFCOUNT first: it caches the cardinality in the HLL string, which the GETs then show.
    let checks: Vec<Vec<&str>> = vec![
        vec!["PFCOUNT", "hll-sparse"],
        vec!["PFCOUNT", "hll-dense"],
        vec!["GET", "plain"],
        vec!["GET", "int"],
        vec!["GET", "neg"],
        vec!["GET", "long"],
        vec!["GET", "bin\x00key"],
        vec!["GET", "hll-sparse"],
        vec!["GET", "hll-dense"],
        vec!["GET", "expiring"],
        vec!["DBSIZE"],
    ];
    let mut out = Vec::new();
    for chk in checks {
        let r = c.cmd_str(&chk);
        out.push((chk.iter().map(|s| s.to_string()).collect(), r));
    }
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    drop(server);
    out
}

#[test]
fn redis_check_rdb_accepts_hyperbloom_dumps() {
    let check = tool("redis-check-rdb").expect(
        "redis-check-rdb not installed: apt-get install redis-tools (scripts/test.sh does)",
    );
    for with_filters in [false, true] {
        let dir = common::tempdir("check");
        make_dump(&dir, with_filters);
        let out = Command::new(&check)
            .arg(dir.join("dump.rdb"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "redis-check-rdb failed:\n{text}");
        assert!(text.contains("RDB looks OK"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn real_redis_loads_a_hyperbloom_dump() {
    let dir = common::tempdir("redis");
    let expected = make_dump(&dir, false);
    let redis = common::redis::RealRedis::start(&[
        "--dir",
        dir.to_str().unwrap(),
        "--dbfilename",
        "dump.rdb",
    ]);
    let mut c = redis.raw();
    for (argv, want) in &expected {
        let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
        let got = c.cmd_str(&refs);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{argv:?}"
        );
    }
    assert_eq!(
        c.cmd_str(&["PEXPIRETIME", "expiring"]),
        b":4102444800000\r\n"
    );
    assert_eq!(c.cmd_str(&["SELECT", "5"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "in-db5"]), b"$4\r\nfive\r\n");
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}
