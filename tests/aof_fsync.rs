//! `no-appendfsync-on-rewrite` under `appendfsync always`, observed from outside: the server runs
//! under `strace`, which logs every `fdatasync` (the AOF's fsync; the RDB and the rewrite's own
//! files use `fsync`), and `rdb-key-save-delay` holds a BGSAVE or a BGREWRITEAOF open for seconds,
//! as Redis's own tests do.
//!
//! Redis 7.0 (`flushAppendOnlyFile`): with `no-appendfsync-on-rewrite yes`, while a child process
//! saves or rewrites, the AOF is written but not fsynced, whatever the policy; writes are
//! acknowledged with their bytes in the page cache. With `no`, `always` fsyncs before every reply.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{connect_when_ready, free_port, persistence_field, tempdir, wait_loaded, RawConn};

/// The AOF fsyncs `strace` has logged so far.
fn fdatasyncs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("fdatasync("))
        .count()
}

/// Waits until `field` reads `want` (bounded).
fn wait_field(c: &mut RawConn, field: &str, want: &str) {
    let start = Instant::now();
    while persistence_field(c, field) != want {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{field} never became {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Traced {
    child: Child,
    log: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Drop for Traced {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_traced(tag: &str) -> (Traced, RawConn) {
    let dir = tempdir(tag);
    let log = dir.join("strace.log");
    let port = free_port();
    let child = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=fdatasync",
            "-e",
            "signal=none",
            "-o",
        ])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_hyperbloom"))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--dir", dir.to_str().unwrap(), "--loglevel", "warning"])
        .args(["--appendonly", "yes", "--appendfsync", "always"])
        .args(["--no-appendfsync-on-rewrite", "yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace is needed for this test (apt install strace; .ci/run installs it)");
    let mut c = connect_when_ready(format!("127.0.0.1:{port}").parse().unwrap());
    // The listener accepts while the (empty) AOF still loads.
    wait_loaded(&mut c);
    (Traced { child, log, dir }, c)
}

/// `n` acknowledged SETs, one at a time (each reply waits for its own fsync when one is due).
fn sets(c: &mut RawConn, prefix: &str, n: usize) {
    for i in 0..n {
        let reply = c.cmd_str(&["SET", &format!("{prefix}{i}"), "v"]);
        assert_eq!(reply, b"+OK\r\n", "{}", String::from_utf8_lossy(&reply));
    }
}

/// Writes 20 keys while the save that `start` begins is in progress, and returns how many AOF
/// fsyncs they caused. `in_progress` is the INFO field that says the save still runs.
fn fsyncs_during(c: &mut RawConn, log: &Path, start: &str, in_progress: &str, tag: &str) -> usize {
    let reply = c.cmd_str(&[start]);
    assert!(
        reply.starts_with(b"+"),
        "{start}: {}",
        String::from_utf8_lossy(&reply)
    );
    wait_field(c, in_progress, "1");
    // strace logs a call when it returns; give the one before the save time to appear.
    std::thread::sleep(Duration::from_millis(100));
    let before = fdatasyncs(log);
    sets(c, tag, 20);
    std::thread::sleep(Duration::from_millis(100));
    let during = fdatasyncs(log) - before;
    // The writes really were inside the save (the delay keeps it open for ~4 s).
    assert_eq!(
        persistence_field(c, in_progress),
        "1",
        "{start} ended before the writes did"
    );
    wait_field(c, in_progress, "0");
    during
}

#[test]
fn no_appendfsync_on_rewrite_skips_always_fsyncs_only_while_a_save_or_rewrite_runs() {
    let (server, mut c) = start_traced("nofsync");
    // 200 keys at 20 ms each: a BGSAVE or a rewrite stays open for ~4 s.
    sets(&mut c, "fill:", 200);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "20000"]),
        b"+OK\r\n"
    );

    // Outside a save, `always` fsyncs for every acknowledged write.
    std::thread::sleep(Duration::from_millis(100));
    let before = fdatasyncs(&server.log);
    sets(&mut c, "idle:", 20);
    std::thread::sleep(Duration::from_millis(100));
    let idle = fdatasyncs(&server.log) - before;
    assert!(idle >= 20, "20 writes under always made {idle} fsyncs");

    let bgsave = fsyncs_during(
        &mut c,
        &server.log,
        "BGSAVE",
        "rdb_bgsave_in_progress",
        "s:",
    );
    assert_eq!(
        bgsave, 0,
        "fsyncs during BGSAVE with no-appendfsync-on-rewrite yes"
    );
    let rewrite = fsyncs_during(
        &mut c,
        &server.log,
        "BGREWRITEAOF",
        "aof_rewrite_in_progress",
        "r:",
    );
    assert_eq!(
        rewrite, 0,
        "fsyncs during a rewrite with no-appendfsync-on-rewrite yes"
    );

    // With `no`, a save does not pause them.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "no-appendfsync-on-rewrite", "no"]),
        b"+OK\r\n"
    );
    let bgsave = fsyncs_during(
        &mut c,
        &server.log,
        "BGSAVE",
        "rdb_bgsave_in_progress",
        "t:",
    );
    assert!(bgsave >= 20, "20 writes during BGSAVE made {bgsave} fsyncs");
    let rewrite = fsyncs_during(
        &mut c,
        &server.log,
        "BGREWRITEAOF",
        "aof_rewrite_in_progress",
        "u:",
    );
    assert!(
        rewrite >= 20,
        "20 writes during a rewrite made {rewrite} fsyncs"
    );

    // Nothing was lost: every key written during the saves is there.
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":300\r\n");
}

#[test]
fn rdb_key_save_delay_is_hidden_from_patterns_as_in_redis() {
    let server = common::start_server();
    let mut c = server.raw();
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "rdb-key-save-delay"]),
        b"*2\r\n$18\r\nrdb-key-save-delay\r\n$1\r\n0\r\n"
    );
    assert_eq!(c.cmd_str(&["CONFIG", "GET", "rdb-key*"]), b"*0\r\n");
    let all = c.cmd_str(&["CONFIG", "GET", "*"]);
    assert!(!String::from_utf8_lossy(&all).contains("rdb-key-save-delay"));
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "abc"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'rdb-key-save-delay') - argument couldn't be parsed into an integer\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "-5"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "rdb-key-save-delay"]),
        b"*2\r\n$18\r\nrdb-key-save-delay\r\n$2\r\n-5\r\n"
    );
}
