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
use common::{
    connect_when_ready, persistence_field, spawn_binary_with, tempdir, wait_loaded, RawConn,
};
use std::net::SocketAddr;

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

/// A test's temporary directory, removed when dropped — unless the test is failing (then it is
/// kept to look at). Declared before the servers using it, so they are killed first.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        Dir(tempdir(tag))
    }
}

impl std::ops::Deref for Dir {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &std::path::PathBuf {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A hyperbloom child process, killed (-9) when dropped (`common::ServerProcess`): a failing
/// assertion leaves no server running behind the test.
struct Hb(common::ServerProcess);

impl Hb {
    fn spawn(dir: &Path, args: &[&str]) -> (Hb, SocketAddr) {
        let (child, addr) = spawn_binary_with(dir, "", args);
        (Hb(child), addr)
    }

    fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// Waits for the process to exit by itself; its status and output.
    fn output(self) -> std::process::Output {
        self.0.output()
    }
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

/// As [`writer`], but every write is to a key that exists, so that most run in place under the
/// shared keyspace lock (`commands::shared_path`) and enter the AOF from there. Rounds number
/// on from `base` (what earlier runs got acknowledged), so a later SET never writes a smaller
/// round than an acknowledged one.
fn in_place_writer(addr: SocketAddr, t: usize, base: u64, stop: Arc<AtomicBool>) -> u64 {
    let mut c = RawConn::connect(addr);
    let (bf, cf, hll) = (format!("bf{t}"), format!("cf{t}"), format!("h{t}"));
    // The keys, made once (the HLL dense: a sparse one is grown on the exclusive path).
    for cmd in [
        vec!["SETNX", "all", "0"],
        vec!["BF.ADD", &bf, "seed"],
        vec!["CF.ADD", &cf, "seed"],
        vec!["PFADD", &hll, "seed"],
        vec!["PFDEBUG", "TODENSE", &hll],
    ] {
        let r = c.cmd_str(&cmd);
        if r.is_empty() || r.starts_with(b"-") {
            return 0;
        }
    }
    let mut acked = 0u64;
    let mut i = base + 1;
    while !stop.load(Ordering::Relaxed) {
        let (own, item, counter) = (format!("s{t}"), format!("i{i}"), format!("n{t}"));
        let value = i.to_string();
        let round: Vec<Vec<&str>> = vec![
            vec!["INCR", &counter],
            vec!["SET", &own, &value],
            vec!["BF.ADD", &bf, &item],
            vec!["CF.ADD", &cf, &item],
            vec!["PFADD", &hll, &item],
            // One key every writer increments.
            vec!["INCR", "all"],
        ];
        let mut bytes = Vec::new();
        for cmd in &round {
            let argv: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            bytes.extend(common::encode_command(&argv));
        }
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.send_raw(&bytes);
            for _ in 0..round.len() {
                let r = c.read_reply();
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

/// What [`in_place_writer`] had acknowledged, rounds `from..=to` of writer `t`, is all there.
/// Rounds are numbered on across runs, so each acknowledged one has items of its own.
fn check_in_place(c: &mut RawConn, t: usize, from: u64, to: u64) {
    let own = int_reply(&c.cmd_str(&["GET", &format!("s{t}")]));
    assert!(own as u64 >= to, "s{t} = {own} < {to} acknowledged");
    for i in from..=to {
        let item = format!("i{i}");
        assert_eq!(
            c.cmd_str(&["BF.EXISTS", &format!("bf{t}"), &item]),
            b":1\r\n",
            "lost BF item {t}/{i}"
        );
        assert_eq!(
            c.cmd_str(&["CF.EXISTS", &format!("cf{t}"), &item]),
            b":1\r\n",
            "lost CF item {t}/{i}"
        );
    }
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
    kill_loop("aof-kill", false, false);
}

/// The same for writes to existing keys, which run in place under the shared keyspace lock and
/// enter the AOF from there, several writers at once (one key written by all of them).
#[test]
fn always_loses_no_in_place_write_across_kill9() {
    kill_loop("aof-kill-in-place", false, true);
}

/// The same with BGREWRITEAOF started over and over, so kills land before, during and after the
/// manifest switches.
#[test]
fn kill9_during_rewrites_loses_nothing() {
    kill_loop("aof-kill-rewrite", true, false);
}

fn kill_loop(tag: &str, rewrites: bool, in_place: bool) {
    let dir = Dir::new(tag);
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
        let (mut child, addr) = Hb::spawn(&dir, &args);
        wait_loaded(&mut connect_when_ready(addr));
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = stop.clone();
                let base = acked_total[t];
                std::thread::spawn(move || {
                    let acked = if in_place {
                        in_place_writer(addr, t, base, stop)
                    } else {
                        writer(addr, t, stop)
                    };
                    (base, acked)
                })
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
        child.kill9();
        stop.store(true, Ordering::Relaxed);
        let mut this_run = vec![0u64; threads];
        for (t, h) in handles.into_iter().enumerate() {
            let (_, acked) = h.join().unwrap();
            this_run[t] = acked;
            acked_total[t] = acked.max(acked_total[t]);
        }
        runs_with_acks += this_run.iter().any(|&a| a > 0) as usize;
        // Restart and check every acknowledged round.
        let (mut child, addr) = Hb::spawn(&dir, &args);
        let mut c = connect_when_ready(addr);
        while c.cmd_str(&["PING"]).starts_with(b"-LOADING") {
            std::thread::sleep(Duration::from_millis(10));
        }
        if in_place {
            for (t, &acked) in acked_total.iter().enumerate() {
                check_in_place(&mut c, t, 1, acked);
                let n = int_reply(&c.cmd_str(&["GET", &format!("n{t}")]));
                assert!(
                    n as u64 >= acked,
                    "n{t} = {n} < {acked} acked (round {round})"
                );
            }
            let all = int_reply(&c.cmd_str(&["GET", "all"]));
            let acked: u64 = acked_total.iter().sum();
            // Every acknowledged INCR of the key all writers share (rounds of earlier runs
            // included: they were checked present then, and a counter only grows).
            assert!(
                all as u64 >= acked,
                "all = {all} < {acked} acked (round {round})"
            );
            eprintln!("kill {round}: this run acked {this_run:?}, all {acked_total:?} present");
            child.kill9();
            continue;
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
        child.kill9();
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

#[test]
fn our_appendonlydir_loads_in_redis_and_passes_redis_check_aof() {
    for preamble in ["yes", "no"] {
        let dir = Dir::new("aof-to-redis");
        let args = ["--appendonly", "yes", "--aof-use-rdb-preamble", preamble];
        let (mut child, addr) = Hb::spawn(&dir, &args);
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
        child.kill9();
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
    let dir = Dir::new("aof-from-redis");
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
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), ours_expected);
    child.kill9();
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

fn prepared_dir(tag: &str) -> Dir {
    let dir = Dir::new(tag);
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    fill(&mut c);
    drop(c);
    child.kill9();
    dir
}

/// What a crash can leave of a prepared rewrite switch beside the manifest's files: an incr file
/// past the manifest's last one (empty as prepared, or with bytes if the crash fell after a
/// switch's rename but before the directory reached the disk — unacknowledged under `always`)
/// and temp manifests `temp-<name>.manifest.<seq>`. Redis 7.0.15 loads such a directory, reading
/// only what the manifest names; so do we, and at startup we delete them and prepare our next
/// switch afresh: the incr file after the manifest's last, empty (whatever a leftover held).
#[test]
fn leftover_prepared_switch_files_are_ignored_by_both_servers_and_cleaned() {
    let dir = prepared_dir("aof-leftover");
    let ad = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        std::fs::read_to_string(ad.join("temp-appendonly.aof.manifest.2")).unwrap(),
        format!("{manifest}file appendonly.aof.2.incr.aof seq 2 type i\n"),
        "the killed server had prepared its next switch"
    );
    let junk = common::encode_command(&[b"SET", b"s1", b"junk"]);
    std::fs::write(ad.join("appendonly.aof.2.incr.aof"), &junk).unwrap();
    std::fs::write(ad.join("appendonly.aof.7.incr.aof"), &junk).unwrap();
    std::fs::write(ad.join("temp-appendonly.aof.manifest.2"), "garbage").unwrap();
    std::fs::write(
        ad.join("temp-appendonly.aof.manifest.7"),
        "file appendonly.aof.7.incr.aof seq 7 type i\n",
    )
    .unwrap();
    let theirs = {
        let redis = RealRedis::start(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
        let mut r = redis.raw();
        wait_loaded(&mut r);
        probe(&mut r)
    };
    assert_eq!(theirs[0], b"$2\r\nv1\r\n", "Redis loaded a leftover");
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), theirs);
    child.kill9();
    let mut names: Vec<String> = std::fs::read_dir(&ad)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "appendonly.aof.1.base.rdb",
            "appendonly.aof.1.incr.aof",
            "appendonly.aof.2.incr.aof",
            "appendonly.aof.manifest",
            "temp-appendonly.aof.manifest.2"
        ]
    );
    assert_eq!(
        std::fs::metadata(ad.join("appendonly.aof.2.incr.aof"))
            .unwrap()
            .len(),
        0,
        "the leftover's bytes survived into the prepared incr file"
    );
    assert_eq!(
        std::fs::read_to_string(ad.join("temp-appendonly.aof.manifest.2")).unwrap(),
        format!("{manifest}file appendonly.aof.2.incr.aof seq 2 type i\n")
    );
    assert_eq!(
        std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap(),
        manifest
    );
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
    let (child, _) = Hb::spawn(&dir, &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    let out = child.output();
    assert_eq!(out.status.code(), Some(1));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(incr.file_name().unwrap().to_str().unwrap()),
        "{log}"
    );

    // yes: loads the complete commands and cuts the file back.
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(c.cmd_str(&["GET", "s1"]), b"$2\r\nv1\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "half"]), b":0\r\n");
    assert_eq!(std::fs::metadata(&incr).unwrap().len() as usize, whole);
    child.kill9();
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
    let (child, _) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let out = child.output();
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
    let dir = Dir::new("aof-config");
    let (mut child, addr) = Hb::spawn(&dir, &[]);
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
    child.kill9();
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), ours);
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n1\r\n");
    child.kill9();
}

// ---------------------------------------------------------------------------------------------
// appendfsync everysec: the loss bound
// ---------------------------------------------------------------------------------------------

/// The same rounds as [`writer`], each acknowledgement stamped: `acks[i - 1]` is when round i's
/// last reply arrived.
fn timed_writer(addr: SocketAddr, t: usize, stop: Arc<AtomicBool>) -> Vec<Instant> {
    let mut c = RawConn::connect(addr);
    let mut acks = Vec::new();
    let mut i = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let (key, item, k2) = (format!("k{t}:{i}"), format!("i{i}"), format!("m{t}:{i}"));
        let (n, mn) = (format!("n{t}"), format!("mn{t}"));
        let (bf, hll, cf) = (format!("bf{t}"), format!("h{t}"), format!("cf{t}"));
        let round: Vec<Vec<&str>> = vec![
            vec!["SET", &key, "v"],
            vec!["INCR", &n],
            vec!["BF.ADD", &bf, &item],
            vec!["PFADD", &hll, &item],
            vec!["CF.ADD", &cf, &item],
            vec!["EXPIRE", &key, "10000"],
            vec!["MULTI"],
            vec!["SET", &k2, "1"],
            vec!["INCR", &mn],
            vec!["EXEC"],
        ];
        let mut bytes = Vec::new();
        for cmd in &round {
            let argv: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            bytes.extend(common::encode_command(&argv));
        }
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.send_raw(&bytes);
            (0..round.len()).all(|_| {
                let r = c.read_reply();
                !r.is_empty() && !r.starts_with(b"-")
            })
        }));
        if !matches!(ok, Ok(true)) {
            break;
        }
        acks.push(Instant::now());
        i += 1;
    }
    acks
}

/// `appendfsync everysec` under kill -9: every round acknowledged more than 2 s before the kill
/// is present after the restart. 2 s is the bound Redis documents for everysec (one fsync a
/// second, and a write postponed at most 2 s behind a slow fsync); a kill -9 leaves the page cache
/// alone, so what it checks is that acknowledged writes reach the file within that bound — the
/// writer thread and the cron's pass, not the fsync. `AOF_FLUSH_SLEEP_US` (e.g. 3000000) sets DEBUG
/// AOF-FLUSH-SLEEP, holding writes back from the file: the test must then fail.
#[test]
fn everysec_keeps_every_write_acknowledged_2s_before_kill9() {
    const BOUND: Duration = Duration::from_secs(2);
    let dir = Dir::new("aof-everysec");
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--enable-debug-command",
        "local",
    ];
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut admin = connect_when_ready(addr);
    wait_loaded(&mut admin);
    if let Ok(us) = std::env::var("AOF_FLUSH_SLEEP_US") {
        assert_eq!(
            admin.cmd_str(&["DEBUG", "AOF-FLUSH-SLEEP", &us]),
            b"+OK\r\n"
        );
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let run = Duration::from_millis(2600 + Rng(seed).next() % 1000);
    eprintln!("seed {seed}: kill after {run:?}");
    let threads = 4;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || timed_writer(addr, t, stop))
        })
        .collect();
    std::thread::sleep(run);
    let killed_at = Instant::now();
    child.kill9();
    stop.store(true, Ordering::Relaxed);
    let acks: Vec<Vec<Instant>> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    let (mut owed, mut recent, mut recent_lost) = (0usize, 0usize, 0usize);
    for (t, acks) in acks.iter().enumerate() {
        let old = acks
            .iter()
            .take_while(|&&at| killed_at.duration_since(at) > BOUND)
            .count();
        owed += old;
        for i in 1..=old as u64 {
            check_round(&mut c, t, i);
        }
        let n = int_reply(&c.cmd_str(&["GET", &format!("n{t}")]));
        assert!(n as usize >= old, "counter n{t} = {n} < {old} owed");
        // Reported, not asserted: rounds acknowledged within the bound that did not survive.
        for i in old as u64 + 1..=acks.len() as u64 {
            recent += 1;
            let key = format!("k{t}:{i}");
            recent_lost += (c.cmd_str(&["EXISTS", &key]) != b":1\r\n") as usize;
        }
    }
    eprintln!(
        "everysec kill -9: {owed} rounds acknowledged > {BOUND:?} before the kill, all present; \
         {recent} in the last {BOUND:?}, {recent_lost} of them lost"
    );
    assert!(owed > 0, "no round was acknowledged early enough to check");
    child.kill9();
}

// ---------------------------------------------------------------------------------------------
// Write errors: a full disk
// ---------------------------------------------------------------------------------------------

/// A small tmpfs mounted over a test directory (root only), unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// None (and the reason on stderr) when mounting is not possible here.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the file system holding `path` with one file.
fn fill_disk(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.flush();
}

/// everysec on a full disk, as Redis 7.0: the failed write stays buffered, writes (and PING) are
/// refused with `-MISCONF Errors writing to the AOF file: <strerror>`, reads are served, and once
/// there is space again the buffered writes go out and writes are accepted. The server stays up,
/// and after a kill -9 every acknowledged write is there.
#[test]
fn a_full_disk_refuses_writes_with_misconf_then_recovers_losing_nothing() {
    let dir = Dir::new("aof-enospc");
    let Some(_mount) = Tmpfs::mount(&dir, "2m") else {
        return;
    };
    let args = ["--appendonly", "yes", "--appendfsync", "everysec"];
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    let value = "x".repeat(200);
    let mut acked = Vec::new();
    let mut i = 0u64;
    let mut set = |c: &mut RawConn, acked: &mut Vec<u64>| {
        i += 1;
        let r = c.cmd_str(&["SET", &format!("w{i}"), &value]);
        if r == b"+OK\r\n" {
            acked.push(i);
        }
        r
    };
    for _ in 0..50 {
        assert_eq!(set(&mut c, &mut acked), b"+OK\r\n");
    }
    let filler = dir.join("filler");
    fill_disk(&filler);
    let start = Instant::now();
    let refused = loop {
        let r = set(&mut c, &mut acked);
        if r != b"+OK\r\n" {
            break r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "writes never refused on a full disk"
        );
    };
    let misconf = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n";
    assert_eq!(
        String::from_utf8_lossy(&refused),
        String::from_utf8_lossy(misconf)
    );
    assert_eq!(c.cmd_str(&["PING"]), misconf);
    assert_eq!(c.cmd_str(&["BF.ADD", "bf", "x"]), misconf);
    assert_eq!(persistence_field(&mut c, "aof_last_write_status"), "err");
    assert_eq!(
        c.cmd_str(&["GET", "w1"]),
        format!("${}\r\n{value}\r\n", value.len()).into_bytes()
    );
    eprintln!(
        "refused after {} acknowledged writes on the full disk",
        acked.len() - 50
    );

    std::fs::remove_file(&filler).unwrap();
    let start = Instant::now();
    while set(&mut c, &mut acked) != b"+OK\r\n" {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "writes still refused with space again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(persistence_field(&mut c, "aof_last_write_status"), "ok");
    for _ in 0..50 {
        assert_eq!(set(&mut c, &mut acked), b"+OK\r\n");
    }
    // Past the everysec fsync, then a crash.
    std::thread::sleep(Duration::from_millis(1200));
    child.kill9();
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    for k in &acked {
        assert_eq!(
            c.cmd_str(&["EXISTS", &format!("w{k}")]),
            b":1\r\n",
            "acknowledged w{k} lost ({} acknowledged)",
            acked.len()
        );
    }
    child.kill9();
}

/// A replica whose disk is full applies its primary's writes all the same: it refuses its own
/// clients' writes and PING with MISCONF, as Redis does, but a write of the primary's stream
/// refused there would exist on the primary alone (Redis panics instead, or applies with
/// `repl-ignore-disk-write-error`). Once there is space again its AOF catches up and a restart
/// from it holds every key.
#[test]
fn a_replica_on_a_full_disk_applies_every_write_of_its_primary() {
    let dir = Dir::new("aof-enospc-replica");
    let Some(_mount) = Tmpfs::mount(&dir, "2m") else {
        return;
    };
    let pdir = tempdir("aof-enospc-primary");
    let (_primary, paddr) = spawn_binary_with(&pdir, "", &[]);
    let mut p = connect_when_ready(paddr);
    let args = ["--appendonly", "yes", "--appendfsync", "everysec"];
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut r = connect_when_ready(addr);
    wait_loaded(&mut r);
    let field = |c: &mut RawConn, name: &str| -> String {
        let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "replication"])).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_default()
            .to_string()
    };
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &paddr.port().to_string()]);
    let start = Instant::now();
    while field(&mut r, "master_link_status") != "up" {
        assert!(start.elapsed() < Duration::from_secs(20), "link never up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let filler = dir.join("filler");
    fill_disk(&filler);
    let value = "x".repeat(200);
    let misconf = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n";
    let mut i = 0;
    let start = Instant::now();
    // Until the replica knows its disk is full (its PING says so).
    while r.cmd_str(&["PING"]) != misconf {
        i += 1;
        p.cmd_str(&["SET", &format!("k{i}"), &value]);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the replica never saw its full disk"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..200 {
        i += 1;
        p.cmd_str(&["SET", &format!("k{i}"), &value]);
    }
    let offset = field(&mut p, "master_repl_offset");
    let start = Instant::now();
    while field(&mut r, "master_repl_offset") != offset {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "offsets never met"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let dbsize = |c: &mut RawConn| c.cmd_str(&["DBSIZE"]);
    assert_eq!(dbsize(&mut r), format!(":{i}\r\n").into_bytes());
    assert_eq!(dbsize(&mut p), dbsize(&mut r));
    // Its own clients are refused meanwhile, as Redis's are.
    assert_eq!(
        r.cmd_str(&["CONFIG", "SET", "replica-read-only", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(r.cmd_str(&["SET", "local", "v"]), misconf);
    // Space again: the AOF catches up, and a restart from it has every key.
    std::fs::remove_file(&filler).unwrap();
    let start = Instant::now();
    while r.cmd_str(&["PING"]) != b"+PONG\r\n" {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the AOF never recovered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    child.kill9();
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(dbsize(&mut c), format!(":{i}\r\n").into_bytes());
    child.kill9();
    let _ = std::fs::remove_dir_all(&pdir);
}

/// appendfsync always on a full disk: as Redis, the server exits 1 (the replies of an
/// unwritten command can't be taken back, so it stops before sending any) and nothing
/// acknowledged is lost.
#[test]
fn a_full_disk_under_always_exits_1_losing_nothing() {
    let dir = Dir::new("aof-enospc-always");
    let Some(_mount) = Tmpfs::mount(&dir, "2m") else {
        return;
    };
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let (child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    let value = "y".repeat(200);
    let mut acked = 0u64;
    for _ in 0..50 {
        acked += 1;
        let key = format!("a{acked}");
        assert_eq!(c.cmd_str(&["SET", &key, &value]), b"+OK\r\n");
    }
    let filler = dir.join("filler");
    fill_disk(&filler);
    let start = Instant::now();
    loop {
        let key = format!("a{}", acked + 1);
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.cmd_str(&["SET", &key, &value]) == b"+OK\r\n"
        }));
        if !matches!(ok, Ok(true)) {
            break;
        }
        acked += 1;
        assert!(start.elapsed() < Duration::from_secs(20), "never failed");
    }
    let out = child.output();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let log =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("Can't recover from AOF write error"), "{log}");
    std::fs::remove_file(&filler).unwrap();
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    for k in 1..=acked {
        assert_eq!(
            c.cmd_str(&["EXISTS", &format!("a{k}")]),
            b":1\r\n",
            "lost a{k}"
        );
    }
    eprintln!("always: exited 1 after {acked} acknowledged writes (50 before the disk filled), all present");
    child.kill9();
}

// ---------------------------------------------------------------------------------------------
// aof-timestamp-enabled, BGREWRITEAOF with the AOF off, the Redis 6 upgrade
// ---------------------------------------------------------------------------------------------

fn wait_rewrites(c: &mut RawConn, n: u64) {
    let start = Instant::now();
    while persistence_field(c, "aof_rewrites") != n.to_string()
        || persistence_field(c, "aof_rewrite_in_progress") != "0"
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "rewrite never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ts_lines(data: &[u8]) -> Vec<u64> {
    data.split(|&b| b == b'\n')
        .filter_map(|l| l.strip_prefix(b"#TS:"))
        .map(|l| {
            let digits = l.strip_suffix(b"\r").expect("#TS line ends in CRLF");
            std::str::from_utf8(digits).unwrap().parse().unwrap()
        })
        .collect()
}

/// `aof-timestamp-enabled yes` writes Redis's `#TS:<unix seconds>\r\n` before the first command of
/// each new second and at the start of a command base; redis-check-aof and redis-server accept
/// our files, and we load the ones Redis writes with annotations.
#[test]
fn timestamp_annotations_are_written_and_both_servers_read_them() {
    let dir = Dir::new("aof-ts");
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-timestamp-enabled",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
    ];
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let t0 = now();
    fill(&mut c);
    std::thread::sleep(Duration::from_millis(1100));
    c.cmd_str(&["SET", "s1", "later"]);
    let incr = std::fs::read(incr_path(&dir)).unwrap();
    let ts = ts_lines(&incr);
    assert!(ts.len() >= 2, "expected an annotation per second: {ts:?}");
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    assert!(ts.iter().all(|&t| t >= t0 && t <= now()), "{ts:?} vs {t0}");
    // A command base starts with one.
    assert_eq!(
        c.cmd_str(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    wait_rewrites(&mut c, 1);
    let base = dir.join("appendonlydir/appendonly.aof.2.base.aof");
    let data = std::fs::read(&base).unwrap();
    assert!(
        data.starts_with(b"#TS:"),
        "{:?}",
        String::from_utf8_lossy(&data[..40.min(data.len())])
    );
    std::thread::sleep(Duration::from_millis(1100));
    c.cmd_str(&["INCR", "n"]);
    let ours = probe(&mut c);
    child.kill9();
    let (ok, text) = redis_check_aof(&dir.join("appendonlydir/appendonly.aof.manifest"));
    assert!(ok, "redis-check-aof refused our annotated AOF: {text}");
    {
        let redis = RealRedis::start(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
        let mut r = redis.raw();
        wait_loaded(&mut r);
        assert_eq!(
            probe(&mut r),
            ours,
            "Redis loaded our annotated AOF differently"
        );
    }

    // Redis's annotated files in ours.
    let dir = Dir::new("aof-ts-redis");
    let expected;
    {
        let redis = RealRedis::start(&[
            "--dir",
            dir.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-timestamp-enabled",
            "yes",
        ]);
        let mut r = redis.raw();
        fill(&mut r);
        std::thread::sleep(Duration::from_millis(1100));
        r.cmd_str(&["INCR", "n"]);
        expected = probe(&mut r);
    }
    assert!(ts_lines(&std::fs::read(incr_path(&dir)).unwrap()).len() >= 2);
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), expected);
    child.kill9();
}

/// BGREWRITEAOF with `appendonly no`: Redis 7.0.15 (checked by hand: same commands, same
/// directory) writes `appendonlydir/appendonly.aof.1.base.rdb` and a manifest naming only it, and
/// leaves the AOF off. We do the same, and both servers load the result with `appendonly yes`.
#[test]
fn bgrewriteaof_with_the_aof_off_writes_a_base_as_redis_does() {
    let dir = Dir::new("aof-off-rewrite");
    let (mut child, addr) = Hb::spawn(&dir, &[]);
    let mut c = connect_when_ready(addr);
    fill(&mut c);
    assert_eq!(
        c.cmd_str(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    wait_rewrites(&mut c, 1);
    assert_eq!(persistence_field(&mut c, "aof_enabled"), "0");
    assert_eq!(persistence_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    assert_eq!(
        std::fs::read_to_string(&manifest).unwrap(),
        "file appendonly.aof.1.base.rdb seq 1 type b\n"
    );
    let ours = probe(&mut c);
    child.kill9();
    let (ok, text) = redis_check_aof(&manifest);
    assert!(ok, "{text}");
    let copy = Dir::new("aof-off-rewrite-copy");
    std::fs::create_dir_all(copy.join("appendonlydir")).unwrap();
    for f in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.join("appendonlydir").join(f.file_name())).unwrap();
    }
    let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    assert_eq!(probe(&mut c), ours);
    child.kill9();
    let redis = RealRedis::start(&["--dir", copy.to_str().unwrap(), "--appendonly", "yes"]);
    let mut r = redis.raw();
    wait_loaded(&mut r);
    assert_eq!(probe(&mut r), ours);
}

/// A Redis 6 `dir/appendonly.aof` (commands, or an RDB preamble followed by commands) with
/// `appendonly yes`: Redis 7.0 moves it into appendonlydir as the base of a new manifest
/// (`file appendonly.aof seq 1 type b`), loads it and adds an incr file. We do the same: the same
/// manifest, the same files, the same data, side by side with redis-server 7.0.15.
#[test]
fn a_redis6_single_file_aof_is_migrated_as_redis_7_does() {
    let commands = |c: &mut Vec<u8>| {
        for cmd in [
            &["SELECT", "0"][..],
            &["SET", "s1", "v1"],
            &["INCRBY", "n", "42"],
            &["SELECT", "5"],
            &["SET", "in5", "five"],
        ] {
            let argv: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            c.extend(common::encode_command(&argv));
        }
    };
    let probe6 = |c: &mut RawConn| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for p in [
            &["GET", "s1"][..],
            &["GET", "n"],
            &["GET", "pre"],
            &["DBSIZE"],
            &["SELECT", "5"],
            &["GET", "in5"],
        ] {
            out.push(c.cmd_str(p));
        }
        out
    };
    for preamble in [false, true] {
        let mut file = Vec::new();
        if preamble {
            // An RDB preamble (ours; Redis 6 wrote the same format) holding one key.
            let d = Dir::new("aof-v6-rdb");
            let (mut child, addr) = Hb::spawn(&d, &[]);
            let mut c = connect_when_ready(addr);
            c.cmd_str(&["SET", "pre", "amble"]);
            assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
            child.kill9();
            file = std::fs::read(d.join("dump.rdb")).unwrap();
        }
        commands(&mut file);
        let mut answers = Vec::new();
        let mut listings = Vec::new();
        for server in ["ours", "redis"] {
            let dir = Dir::new("aof-v6");
            std::fs::write(dir.join("appendonly.aof"), &file).unwrap();
            let answer = if server == "ours" {
                let (mut child, addr) = Hb::spawn(&dir, &["--appendonly", "yes"]);
                let mut c = connect_when_ready(addr);
                wait_loaded(&mut c);
                let a = probe6(&mut c);
                child.kill9();
                a
            } else {
                let redis =
                    RealRedis::start(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
                let mut r = redis.raw();
                wait_loaded(&mut r);
                probe6(&mut r)
            };
            assert!(
                !dir.join("appendonly.aof").exists(),
                "{server} left the old file"
            );
            let mut names: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            if server == "ours" {
                // Beside Redis's files, the next rewrite's switch prepared off the locks (an
                // empty incr file and a temp manifest naming it; Redis reads neither, and a
                // clean shutdown removes them): exactly those two, then the same layout.
                let prepared = [
                    "appendonly.aof.2.incr.aof",
                    "temp-appendonly.aof.manifest.2",
                ];
                let (extra, rest): (Vec<String>, Vec<String>) = names
                    .into_iter()
                    .partition(|n| prepared.contains(&n.as_str()));
                assert_eq!(extra, prepared, "preamble {preamble}: the prepared switch");
                let incr2 = dir.join("appendonlydir/appendonly.aof.2.incr.aof");
                assert_eq!(std::fs::metadata(incr2).unwrap().len(), 0);
                names = rest;
            }
            let manifest =
                std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
            listings.push((names, manifest));
            answers.push(answer);
        }
        assert_eq!(
            answers[0], answers[1],
            "preamble {preamble}: different data"
        );
        assert_eq!(
            listings[0], listings[1],
            "preamble {preamble}: different layout"
        );
        assert_eq!(answers[0][1], b"$2\r\n42\r\n");
        if preamble {
            assert_eq!(answers[0][2], b"$5\r\namble\r\n");
        }
    }
}

/// A startup load that outlasts cron ticks leaves the manifest alone (the cron once took the
/// not-yet-open AOF for `CONFIG SET appendonly yes` and installed a manifest of the half-loaded
/// keyspace over the files being loaded: the next restart came up empty).
#[test]
fn a_slow_startup_load_keeps_the_manifest() {
    let dir = Dir::new("aof-slow-load");
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let (mut child, addr) = Hb::spawn(&dir, &args);
    let mut c = connect_when_ready(addr);
    wait_loaded(&mut c);
    // Past the first manifest (seq 1), so a manifest written by mistake shows.
    c.cmd_str(&["SET", "slow:0", "v"]);
    c.cmd_str(&["BGREWRITEAOF"]);
    wait_rewrites(&mut c, 1);
    let n = 300_000;
    let mut bytes = Vec::new();
    for i in 0..n {
        let k = format!("slow:{i}");
        bytes.extend(common::encode_command(&[b"SET", k.as_bytes(), b"v"]));
    }
    c.send_raw(&bytes);
    for _ in 0..n {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    child.kill9();
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let before = std::fs::read_to_string(&manifest).unwrap();
    for round in 0..2 {
        let (mut child, addr) = Hb::spawn(&dir, &args);
        let mut c = connect_when_ready(addr);
        wait_loaded(&mut c);
        assert_eq!(
            c.cmd_str(&["DBSIZE"]),
            format!(":{n}\r\n").into_bytes(),
            "restart {round}"
        );
        assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before);
        child.kill9();
    }
}

/// Keyspace events set in the configuration fire after an AOF load at startup. The load builds
/// the keyspace apart and swaps it in; the swapped-in databases had no events until a CONFIG
/// SET, so `notify-keyspace-events` in a redis.conf with `appendonly yes` did nothing.
#[test]
fn keyspace_events_from_the_config_fire_after_an_aof_load() {
    let dir = tempdir("aof-events");
    let args = ["--appendonly", "yes", "--notify-keyspace-events", "E$"];
    for round in 0..2 {
        // The first start creates the AOF, the second loads it.
        let (mut child, addr) = spawn_binary_with(&dir, "", &args);
        let mut c = connect_when_ready(addr);
        wait_loaded(&mut c);
        let mut sub = RawConn::connect(addr);
        assert_eq!(
            sub.cmd_str(&["SUBSCRIBE", "__keyevent@0__:set"]),
            b"*3\r\n$9\r\nsubscribe\r\n$18\r\n__keyevent@0__:set\r\n:1\r\n"
        );
        let key = format!("k{round}");
        assert_eq!(c.cmd_str(&["SET", &key, "v"]), b"+OK\r\n");
        let want = format!("*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$2\r\n{key}\r\n");
        assert_eq!(sub.read_reply(), want.as_bytes(), "round {round}");
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
