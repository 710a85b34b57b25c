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

use common::{
    binary_args, connect_when_ready, free_port, persistence_field, tempdir, wait_loaded, RawConn,
};

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
        // Killing strace detaches its tracee and leaves it running: kill the server first.
        let strace = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children"));
        for pid in children.unwrap_or_default().split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_traced(tag: &str) -> (Traced, RawConn) {
    start_traced_with(
        tag,
        "trace=fdatasync",
        &["--no-appendfsync-on-rewrite", "yes"],
    )
}

/// The server under `strace -f -y` (file descriptors shown with their paths) tracing `trace`.
fn start_traced_with(tag: &str, trace: &str, extra: &[&str]) -> (Traced, RawConn) {
    let dir = tempdir(tag);
    let log = dir.join("strace.log");
    let port = free_port();
    let child = Command::new("strace")
        .args(["-f", "-y", "-qq", "-e", trace, "-e", "signal=none", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_hyperbloom"))
        .args(binary_args(port, &dir, ""))
        .args(["--appendonly", "yes", "--appendfsync", "always"])
        .args(extra)
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

/// One traced call: the thread, the call's name and its first line (a call another thread
/// interrupts shows as `<unfinished ...>` then `<... resumed>`: the first line is its start, so
/// a call that began after another ended comes later in the log).
struct Call {
    tid: String,
    name: String,
    line: String,
}

fn calls(log: &Path) -> Vec<Call> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains(" resumed>"))
        .filter_map(|l| {
            let (tid, rest) = l.split_once(' ')?;
            let name = rest.trim_start().split('(').next()?.to_string();
            Some(Call {
                tid: tid.to_string(),
                name,
                line: l.to_string(),
            })
        })
        .collect()
}

/// The rewrite switch's crash guarantee under `always`, in the order of the system calls: the
/// switch renames a manifest prepared (and fsynced) off the locks, the directory is fsynced
/// after that rename and before the first fdatasync of the new incr file — the fsync a reply
/// waits for — and the prepared manifest was fsynced by another thread than the one that renamed
/// it (which holds the locks), whose call before the rename is no fsync of a manifest. (The
/// directory fsync may run on the renaming thread: the cron's writer pass follows the switch
/// there, after the keyspace lock is released; strace cannot see the lock.) A kill -9 test cannot see a missing fsync (the
/// page cache survives it); this one can. `rdb-key-save-delay` holds each rewrite open, so the
/// writes land in the new incr file before the rewrite thread's own manifest (and its directory
/// fsync) could cover them.
#[test]
fn the_rewrite_switch_fsyncs_the_directory_before_the_new_incr_off_the_locks() {
    let (server, mut c) = start_traced_with(
        "switch",
        "trace=fsync,fdatasync,rename",
        &["--no-appendfsync-on-rewrite", "no"],
    );
    // 100 keys at 20 ms each: a rewrite stays open for ~2 s.
    sets(&mut c, "fill:", 100);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "20000"]),
        b"+OK\r\n"
    );
    let rewrites = 3;
    for round in 0..rewrites {
        assert!(c.cmd_str(&["BGREWRITEAOF"]).starts_with(b"+"));
        // The cron starts it (the switch happens then).
        wait_field(&mut c, "aof_rewrite_in_progress", "1");
        sets(&mut c, &format!("r{round}:"), 5);
        assert_eq!(
            persistence_field(&mut c, "aof_rewrite_in_progress"),
            "1",
            "the rewrite ended before the writes did"
        );
        wait_field(&mut c, "aof_rewrite_in_progress", "0");
    }
    // strace logs a call when it returns.
    std::thread::sleep(Duration::from_millis(200));
    let calls = calls(&server.log);
    let is_dir_fsync = |c: &Call| c.name == "fsync" && c.line.contains("/appendonlydir>)");
    let mut switches = 0;
    for (i, r) in calls.iter().enumerate() {
        // rename("<dir>/temp-appendonly.aof.manifest.<seq>", "<dir>/appendonly.aof.manifest")
        let Some(seq) = r
            .line
            .split("temp-appendonly.aof.manifest.")
            .nth(1)
            .and_then(|t| t.split('"').next())
        else {
            continue;
        };
        if r.name != "rename" {
            continue;
        }
        switches += 1;
        let incr = format!("/appendonly.aof.{seq}.incr.aof>");
        let first_sync = calls[i + 1..]
            .iter()
            .position(|c| (c.name == "fdatasync" || c.name == "fsync") && c.line.contains(&incr))
            .unwrap_or_else(|| panic!("no fsync of incr {seq} after its switch"))
            + i
            + 1;
        assert!(
            calls[i + 1..first_sync].iter().any(is_dir_fsync),
            "incr {seq} was fsynced (a reply released) before the directory after the rename:\n{}",
            calls[i..=first_sync]
                .iter()
                .map(|c| c.line.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        // The temp manifest was fsynced before, by another thread (startup or the rewrite
        // thread); the renaming thread's call before the rename is no fsync of a manifest.
        let temp = format!("/temp-appendonly.aof.manifest.{seq}>");
        let prepared = calls[..i]
            .iter()
            .rfind(|c| c.name == "fsync" && c.line.contains(&temp))
            .unwrap_or_else(|| panic!("the prepared manifest {seq} was never fsynced"));
        assert_ne!(
            prepared.tid, r.tid,
            "the thread holding the locks fsynced the prepared manifest"
        );
        if let Some(prev) = calls[..i].iter().rfind(|c| c.tid == r.tid) {
            assert!(
                !prev.line.contains("manifest"),
                "the thread holding the locks fsynced a manifest before the rename: {}",
                prev.line
            );
        }
    }
    assert_eq!(
        switches, rewrites,
        "every rewrite should switch with a prepared manifest"
    );
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":115\r\n");
}
