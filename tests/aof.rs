//! The append-only file end to end, with the real binary: no acknowledged write lost across
//! kill -9 (appendfsync always), rewrite under load, truncated and corrupt files, and interop with
//! a real redis-server 7.0 both ways (plus redis-check-aof).
//!
//! `AOF_KILLS=n` sets the number of randomized kills (default 3, to keep CI short).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redis::RealRedis;
use common::{connect_when_ready, spawn_binary_with, tempdir, RawConn};

fn kills() -> usize {
    std::env::var("AOF_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// A small xorshift for reproducible randomness from a logged seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn kill9(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// What one writer thread got acknowledged: the highest round fully answered.
fn writer(addr: std::net::SocketAddr, t: usize, stop: Arc<AtomicBool>) -> u64 {
    let mut c = RawConn::connect(addr);
    let mut acked = 0u64;
    let mut i = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("k{t}:{i}");
        let item = format!("i{i}");
        let counter = format!("n{t}");
        let (bf, hll, cf) = (format!("bf{t}"), format!("h{t}"), format!("cf{t}"));
        let round: Vec<Vec<&str>> = vec![
            vec!["SET", &key, "v"],
            vec!["INCR", &counter],
            vec!["BF.ADD", &bf, &item],
            vec!["PFADD", &hll, &item],
            vec!["CF.ADD", &cf, &item],
            vec!["EXPIRE", &key, "10000"],
        ];
        // Pipelined, then the replies: a round counts only once every reply arrived. Runs after a
        // kill number from 1 again: the same keys, idempotent writes.
        let mut bytes = Vec::new();
        for cmd in &round {
            let argv: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            bytes.extend(common::encode_command(&argv));
        }
        let multi: Vec<&[u8]> = vec![b"MULTI"];
        bytes.extend(common::encode_command(&multi));
        let k2 = format!("m{t}:{i}");
        bytes.extend(common::encode_command(&[b"SET", k2.as_bytes(), b"1"]));
        bytes.extend(common::encode_command(&[
            b"INCR",
            format!("mn{t}").as_bytes(),
        ]));
        bytes.extend(common::encode_command(&[b"EXEC"]));
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.send_raw(&bytes);
            for _ in 0..round.len() + 4 {
                let r = c.read_reply();
                // An error (e.g. -LOADING) is no acknowledgement.
                assert!(!r.is_empty() && !r.starts_with(b"-"));
            }
        }))
        .is_err()
        {
            break;
        }
        acked = i;
        i += 1;
    }
    acked
}

fn check_round(c: &mut RawConn, t: usize, i: u64) {
    let key = format!("k{t}:{i}");
    assert_eq!(c.cmd_str(&["GET", &key]), b"$1\r\nv\r\n", "lost {key}");
    assert_eq!(
        c.cmd_str(&["BF.EXISTS", &format!("bf{t}"), &format!("i{i}")]),
        b":1\r\n",
        "lost BF item {t}/{i}"
    );
    assert_eq!(
        c.cmd_str(&["CF.EXISTS", &format!("cf{t}"), &format!("i{i}")]),
        b":1\r\n",
        "lost CF item {t}/{i}"
    );
    assert_eq!(c.cmd_str(&["EXISTS", &format!("m{t}:{i}")]), b":1\r\n");
}

fn int_reply(r: &[u8]) -> i64 {
    let s = std::str::from_utf8(r).unwrap();
    s.trim_start_matches([':', '$'])
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn always_loses_no_acknowledged_write_across_kill9() {
    kill_loop("aof-kill", false);
}

/// The same with BGREWRITEAOF started over and over, so kills land before, during and after the
/// manifest switches.
#[test]
fn kill9_during_rewrites_loses_nothing() {
    kill_loop("aof-kill-rewrite", true);
}

fn kill_loop(tag: &str, rewrites: bool) {
    let dir = tempdir(tag);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let threads = 4;
    let mut acked_total = vec![0u64; threads];
    let mut runs_with_acks = 0;
    for round in 0..kills() {
        let (mut child, addr) = spawn_binary_with(&dir, "", &args);
        wait_loaded(&mut connect_when_ready(addr));
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = stop.clone();
                let base = acked_total[t];
                std::thread::spawn(move || (base, writer(addr, t, stop)))
            })
            .collect();
        let until = Instant::now() + Duration::from_millis(150 + rng.next() % 500);
        let mut admin = RawConn::connect(addr);
        while Instant::now() < until {
            if rewrites {
                admin.cmd_str(&["BGREWRITEAOF"]);
            }
            std::thread::sleep(Duration::from_millis(1 + rng.next() % 30));
        }
        kill9(&mut child);
        stop.store(true, Ordering::Relaxed);
        let mut this_run = vec![0u64; threads];
        for (t, h) in handles.into_iter().enumerate() {
            let (_, acked) = h.join().unwrap();
            this_run[t] = acked;
            acked_total[t] = acked.max(acked_total[t]);
        }
        runs_with_acks += this_run.iter().any(|&a| a > 0) as usize;
        // Restart and check every acknowledged round.
        let (mut child, addr) = spawn_binary_with(&dir, "", &args);
        let mut c = connect_when_ready(addr);
        while c.cmd_str(&["PING"]).starts_with(b"-LOADING") {
            std::thread::sleep(Duration::from_millis(10));
        }
        for (t, &acked) in acked_total.iter().enumerate() {
            for i in 1..=acked {
                check_round(&mut c, t, i);
            }
            let n = int_reply(&c.cmd_str(&["GET", &format!("n{t}")]));
            assert!(
                n as u64 >= acked,
                "counter n{t} = {n} < {acked} acked (round {round})"
            );
            let mn = int_reply(&c.cmd_str(&["GET", &format!("mn{t}")]));
            assert!(mn as u64 >= acked);
        }
        eprintln!("kill {round}: this run acked {this_run:?}, all {acked_total:?} present");
        kill9(&mut child);
    }
    assert!(
        runs_with_acks * 2 > kills(),
        "only {runs_with_acks} of {} runs had a write acknowledged",
        kills()
    );
}

fn redis_check_aof(manifest: &Path) -> (bool, String) {
    let out = std::process::Command::new("redis-check-aof")
        .arg(manifest)
        .output()
        .expect("redis-check-aof (apt-get install redis-tools / redis-server)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Commands whose answers are compared after each load.
const PROBES: &[&[&str]] = &[
    &["GET", "s1"],
    &["GET", "s2"],
    &["GET", "n"],
    &["GET", "f"],
    &["PFCOUNT", "h"],
    // Before DBSIZE: reclaims the expired key in both servers (DBSIZE counts due keys).
    &["EXISTS", "gone"],
    &["DBSIZE"],
    &["SELECT", "5"],
    &["GET", "in5"],
    &["DBSIZE"],
];

fn fill(c: &mut RawConn) {
    // The listener accepts while the AOF still loads (-LOADING meanwhile).
    wait_loaded(c);
    for cmd in [
        &["SET", "s1", "v1"][..],
        &["SET", "s2", "v2", "EX", "5000"],
        &["SET", "gone", "x", "PX", "1"],
        &["INCR", "n"],
        &["INCRBY", "n", "41"],
        &["INCRBYFLOAT", "f", "1.25"],
        &["PFADD", "h", "a", "b", "c", "d"],
        &["SELECT", "5"],
        &["SET", "in5", "five"],
        &["SELECT", "0"],
    ] {
        let r = c.cmd_str(cmd);
        assert!(
            !r.starts_with(b"-"),
            "{cmd:?} -> {}",
            String::from_utf8_lossy(&r)
        );
    }
    std::thread::sleep(Duration::from_millis(5));
}

fn probe(c: &mut RawConn) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = PROBES.iter().map(|p| c.cmd_str(p)).collect();
    c.cmd_str(&["SELECT", "0"]);
    let ttl = int_reply(&c.cmd_str(&["TTL", "s2"]));
    out.push(format!("ttl-ok:{}", (4900..=5000).contains(&ttl)).into_bytes());
    out
}

fn wait_loaded(c: &mut RawConn) {
    let start = Instant::now();
    while c.cmd_str(&["PING"]).starts_with(b"-LOADING") {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn our_appendonlydir_loads_in_redis_and_passes_redis_check_aof() {
    for preamble in ["yes", "no"] {
        let dir = tempdir("aof-to-redis");
        let args = ["--appendonly", "yes", "--aof-use-rdb-preamble", preamble];
        let (mut child, addr) = spawn_binary_with(&dir, "", &args);
        let mut c = connect_when_ready(addr);
        fill(&mut c);
        // A rewrite first (the base then holds the data), then more writes into the new incr.
        assert_eq!(
            c.cmd_str(&["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        let start = Instant::now();
        loop {
            let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "persistence"])).into_owned();
            if info.contains("aof_rewrites:1") && info.contains("aof_rewrite_in_progress:0") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "rewrite never finished"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        c.cmd_str(&["INCR", "n"]);
        c.cmd_str(&["SET", "s1", "v1b"]);
        let ours = probe(&mut c);
        kill9(&mut child);
        let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
        let (ok, text) = redis_check_aof(&manifest);
        assert!(
            ok,
            "redis-check-aof refused our AOF (preamble {preamble}): {text}"
        );
        let redis = RealRedis::start(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
        let mut r = redis.raw();
        wait_loaded(&mut r);
        assert_eq!(
            probe(&mut r),
            ours,
            "Redis loaded different data (preamble {preamble})"
        );
    }
}

#[test]
fn redis_appendonlydir_loads_in_hyperbloom() {
    let dir = tempdir("aof-from-redis");
    let ours_expected;
    {
        let redis = RealRedis::start(&[
            "--dir",
            dir.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]);
        let mut r = redis.raw();
        fill(&mut r);
        r.cmd_str(&["MULTI"]);
        r.cmd_str(&["INCR", "n"]);
        r.cmd_str(&["SET", "s1", "x"]);
        r.cmd_str(&["EXEC"]);
        ours_expected = probe(&mut r);
        // Dropped: killed without a rewrite, so the incr file holds Redis's own propagation.
    }
    let (mut child, addr) = spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), ours_expected);
    kill9(&mut child);
}

fn incr_path(dir: &Path) -> std::path::PathBuf {
    let m = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    let name = m
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string();
    dir.join("appendonlydir").join(name)
}

fn prepared_dir(tag: &str) -> std::path::PathBuf {
    let dir = tempdir(tag);
    let (mut child, addr) = spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    fill(&mut c);
    drop(c);
    kill9(&mut child);
    dir
}

#[test]
fn a_truncated_tail_follows_aof_load_truncated() {
    let dir = prepared_dir("aof-trunc");
    let incr = incr_path(&dir);
    let mut data = std::fs::read(&incr).unwrap();
    let whole = data.len();
    data.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf");
    std::fs::write(&incr, &data).unwrap();

    // no: exit 1, naming the file.
    let (child, _) = spawn_binary_with(
        &dir,
        "",
        &["--appendonly", "yes", "--aof-load-truncated", "no"],
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(incr.file_name().unwrap().to_str().unwrap()),
        "{log}"
    );

    // yes: loads the complete commands and cuts the file back.
    let (mut child, addr) = spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(c.cmd_str(&["GET", "s1"]), b"$2\r\nv1\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "half"]), b":0\r\n");
    assert_eq!(std::fs::metadata(&incr).unwrap().len() as usize, whole);
    kill9(&mut child);
}

#[test]
fn corruption_in_the_middle_exits_1_with_file_and_offset() {
    let dir = prepared_dir("aof-corrupt");
    let incr = incr_path(&dir);
    let mut data = std::fs::read(&incr).unwrap();
    let at = data.len() / 2;
    // Find the start of a command near the middle and break its '*'.
    let pos = (at..data.len()).find(|&i| data[i] == b'*').unwrap();
    data[pos] = b'!';
    std::fs::write(&incr, &data).unwrap();
    let (child, _) = spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(log.contains(&format!("at offset {pos}")), "{log}");
    assert!(
        log.contains(incr.file_name().unwrap().to_str().unwrap()),
        "{log}"
    );
}

#[test]
fn config_set_appendonly_yes_writes_a_base_of_the_current_data() {
    let dir = tempdir("aof-config");
    let (mut child, addr) = spawn_binary_with(&dir, "", &[]);
    let mut c = connect_when_ready(addr);
    fill(&mut c);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
    let start = Instant::now();
    while !dir.join("appendonlydir/appendonly.aof.manifest").exists() {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    c.cmd_str(&["SET", "after", "1"]);
    let ours = probe(&mut c);
    kill9(&mut child);
    let (mut child, addr) = spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), ours);
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n1\r\n");
    kill9(&mut child);
}
