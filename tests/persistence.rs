//! Snapshots end to end: SAVE / BGSAVE / LASTSAVE / DEBUG RELOAD / SHUTDOWN, reload at startup,
//! crash safety (kill -9 during BGSAVE, failed writes), corrupt and truncated files, an unwritable
//! directory (the save fails cleanly, INFO says why, MISCONF, the server keeps serving).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use hyperbloom::persistence::rdb::{RdbWriter, SaveOptions};
use hyperbloom::persistence::snapshot::{self, Target};
use hyperbloom::store::{Store, Value};

fn start_in(dir: &Path, extra: &[&str]) -> common::TestServer {
    let mut args = vec!["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"];
    args.extend_from_slice(extra);
    common::start_with(&args)
}

/// Starting on `dir` must fail; returns the error text.
fn start_fails(dir: &Path) -> String {
    let config = hyperbloom::config::Config::from_args(&[
        "--port".to_string(),
        "0".into(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        "".into(),
        "--dir".into(),
        dir.to_str().unwrap().into(),
    ])
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        match hyperbloom::server::start(config).await {
            Ok(h) => {
                h.stop().await;
                panic!("server started on a bad snapshot");
            }
            Err(e) => e.to_string(),
        }
    })
}

fn wait_bgsave(c: &mut common::RawConn) {
    let start = Instant::now();
    while common::persistence_field(c, "rdb_bgsave_in_progress") != "0" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "BGSAVE never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn fill(c: &mut common::RawConn) {
    assert_eq!(c.cmd_str(&["SET", "s", "hello"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "n", "12345"]), b"+OK\r\n");
    let big = "abc".repeat(1000);
    assert_eq!(c.cmd_str(&["SET", "big", &big]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"SET", b"bin\x00\xff", b"\x00\r\n\xff"]),
        b"+OK\r\n"
    );
    // An expiring key through RESTORE (works whatever TTL commands this build has).
    let payload = c.cmd_str(&["DUMP", "s"]);
    let payload =
        &payload[payload.iter().position(|&b| b == b'\n').unwrap() + 1..payload.len() - 2];
    assert_eq!(
        c.cmd(&[b"RESTORE", b"exp", b"4102444800000", payload, b"ABSTTL"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "in3", "x"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SELECT", "0"]), b"+OK\r\n");
}

fn check(server: &common::TestServer) {
    let mut c = server.raw();
    assert_eq!(c.cmd_str(&["GET", "s"]), b"$5\r\nhello\r\n");
    assert_eq!(c.cmd_str(&["GET", "n"]), b"$5\r\n12345\r\n");
    let big = "abc".repeat(1000);
    assert_eq!(
        c.cmd_str(&["GET", "big"]),
        format!("$3000\r\n{big}\r\n").as_bytes()
    );
    assert_eq!(c.cmd(&[b"GET", b"bin\x00\xff"]), b"$4\r\n\x00\r\n\xff\r\n");
    assert_eq!(c.cmd_str(&["GET", "exp"]), b"$5\r\nhello\r\n");
    assert_eq!(
        server.shared.engine().store.dbs[0].expire_at(b"exp"),
        Some(4102444800000)
    );
    assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "in3"]), b"$1\r\nx\r\n");
}

#[test]
fn save_then_restart_restores_everything() {
    let dir = common::tempdir("save");
    let server = start_in(&dir, &[]);
    let mut c = server.raw();
    fill(&mut c);
    assert_ne!(
        common::persistence_field(&mut c, "rdb_changes_since_last_save"),
        "0"
    );
    let before = c.cmd_str(&["LASTSAVE"]);
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    assert_eq!(
        common::persistence_field(&mut c, "rdb_changes_since_last_save"),
        "0"
    );
    assert!(c.cmd_str(&["LASTSAVE"]) >= before);
    drop(server);
    let server = start_in(&dir, &[]);
    check(&server);
    let mut c = server.raw();
    assert_eq!(
        common::persistence_field(&mut c, "rdb_last_load_keys_loaded"),
        "6"
    );
    // Nothing but the snapshot is left in the directory (no temp files).
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["dump.rdb"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgsave_then_restart() {
    let dir = common::tempdir("bgsave");
    let server = start_in(&dir, &[]);
    let mut c = server.raw();
    fill(&mut c);
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    // Writes during the save are fine and are not part of it.
    assert_eq!(c.cmd_str(&["SET", "after", "1"]), b"+OK\r\n");
    wait_bgsave(&mut c);
    assert_eq!(
        common::persistence_field(&mut c, "rdb_last_bgsave_status"),
        "ok"
    );
    assert_eq!(common::persistence_field(&mut c, "rdb_saves"), "1");
    assert_eq!(c.cmd_str(&["BGSAVE", "FOO"]), b"-ERR syntax error\r\n");
    drop(server);
    let server = start_in(&dir, &[]);
    check(&server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A large filter written while a BGSAVE is under way: the snapshot keeps the bits it had when
/// the save began. The adds write such a filter's pages in place once nothing else holds them
/// (`Pages::lineage` in `src/store/bloom.rs`); while the snapshot does, they copy the pages they
/// touch. `rdb-key-save-delay` holds the save open before it writes the filter, so every add
/// lands first: were the snapshot's pages written in place, every new item would load back as
/// present (the test fails so when the add path skips its check).
#[test]
fn bgsave_keeps_a_large_filter_as_it_was() {
    let dir = common::tempdir("bgsave-bloom");
    let server = start_in(&dir, &["--rdb-key-save-delay", "300000"]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd_str(&["BF.RESERVE", "big", "0.01", "300000"]),
        b"+OK\r\n"
    );
    let batch = |prefix: &str, from: usize| -> Vec<String> {
        (from..from + 100)
            .map(|i| format!("{prefix}:{i}"))
            .collect()
    };
    let madd = |c: &mut common::RawConn, items: &[String]| {
        let mut argv = vec!["BF.MADD", "big"];
        argv.extend(items.iter().map(String::as_str));
        let reply = c.cmd_str(&argv);
        assert!(
            reply.starts_with(b"*100\r\n"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    };
    // 360 KB in 2 KiB pages, every page written by the first 5,000 items: the later adds then
    // take the in-place path, which only pages that exist can (on a filter large enough to
    // prefetch, as this one is).
    let old: Vec<String> = (0..50).flat_map(|b| batch("old", b * 100)).collect();
    for chunk in old.chunks(100) {
        madd(&mut c, chunk);
    }
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let new: Vec<String> = (0..20).flat_map(|b| batch("new", b * 100)).collect();
    for chunk in new.chunks(100) {
        madd(&mut c, chunk);
    }
    // The premise: the adds ran while the save was still to write the filter.
    assert_eq!(
        common::persistence_field(&mut c, "rdb_bgsave_in_progress"),
        "1"
    );
    wait_bgsave(&mut c);
    assert_eq!(
        common::persistence_field(&mut c, "rdb_last_bgsave_status"),
        "ok"
    );
    drop(server);

    let server = start_in(&dir, &[]);
    let mut c = server.raw();
    let present = |c: &mut common::RawConn, items: &[String]| -> usize {
        let mut argv = vec!["BF.MEXISTS", "big"];
        argv.extend(items.iter().map(String::as_str));
        let reply = c.cmd_str(&argv);
        reply.windows(4).filter(|w| w == b":1\r\n").count()
    };
    assert_eq!(present(&mut c, &old), old.len());
    // 1 % false positives: ~20 of 2,000 expected.
    let leaked = present(&mut c, &new);
    assert!(
        leaked < 100,
        "{leaked} of {} later adds are in the snapshot",
        new.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_reload_and_shutdown_save() {
    let dir = common::tempdir("reload");
    let server = start_in(&dir, &["--enable-debug-command", "yes"]);
    let mut c = server.raw();
    fill(&mut c);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    check(&server);
    assert_eq!(c.cmd_str(&["SET", "late", "v"]), b"+OK\r\n");
    c.send(&[b"SHUTDOWN", b"SAVE"]);
    assert!(c.is_closed());
    drop(server);
    let server = start_in(&dir, &[]);
    check(&server);
    assert_eq!(server.raw().cmd_str(&["GET", "late"]), b"$1\r\nv\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unwritable_dir_fails_cleanly_and_sets_misconf() {
    let dir = common::tempdir("unwritable");
    let server = start_in(&dir, &["--save", "3600 1"]);
    let mut c = server.raw();
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let good = std::fs::read(dir.join("dump.rdb")).unwrap();
    // Replace the directory by a file: every save must now fail (root ignores permissions).
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    assert_eq!(c.cmd_str(&["SAVE"]), b"-ERR\r\n");
    assert!(common::persistence_field(&mut c, "rdb_last_save_error").contains("temp RDB file"));
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave(&mut c);
    assert_eq!(
        common::persistence_field(&mut c, "rdb_last_bgsave_status"),
        "err"
    );
    // stop-writes-on-bgsave-error: writes refused, reads served.
    let r = c.cmd_str(&["SET", "k", "w"]);
    assert!(
        r.starts_with(b"-MISCONF"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    // The directory comes back: the next BGSAVE succeeds and writes are accepted again.
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dump.rdb"), &good).unwrap();
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave(&mut c);
    assert_eq!(
        common::persistence_field(&mut c, "rdb_last_bgsave_status"),
        "ok"
    );
    assert_eq!(c.cmd_str(&["SET", "k", "w"]), b"+OK\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn sample_store() -> Store {
    let mut store = Store::new(16);
    for i in 0..500u32 {
        let k = bytes::Bytes::from(format!("key:{i}"));
        store.dbs[(i % 3) as usize].insert(
            k.clone(),
            Value::Str(
                format!("value {i} ")
                    .repeat(i as usize % 40)
                    .into_bytes()
                    .into(),
            ),
        );
        if i % 7 == 0 {
            store.dbs[(i % 3) as usize].set_expire(&k, 4102444800000 + i as u64);
        }
    }
    store
}

fn file_of(store: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = RdbWriter::new(&mut out, SaveOptions::default());
    w.header(0, 0).unwrap();
    snapshot::write_store(&mut w, store).unwrap();
    w.finish().unwrap();
    out
}

#[test]
fn every_truncation_and_every_flipped_byte_is_refused() {
    let store = sample_store();
    let bytes = file_of(&store);
    let dir = common::tempdir("corrupt");
    let path = dir.join("dump.rdb");
    // Every prefix (sampled densely at the start, where the headers are).
    let mut cuts: Vec<usize> = (0..200.min(bytes.len())).collect();
    cuts.extend((200..bytes.len()).step_by(7));
    for cut in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut s = Store::new(16);
        assert!(
            hyperbloom::persistence::load_file(&path, &mut s, true).is_err(),
            "prefix of {cut} bytes loaded"
        );
    }
    // Flipped bytes: the checksum (or the parser) must catch every one; never a panic.
    for pos in (0..bytes.len()).step_by(3) {
        let mut b = bytes.clone();
        b[pos] ^= 0x5a;
        std::fs::write(&path, &b).unwrap();
        let mut s = Store::new(16);
        assert!(
            hyperbloom::persistence::load_file(&path, &mut s, true).is_err(),
            "flip at {pos} loaded"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn startup_fails_on_bad_files_naming_the_file() {
    let dir = common::tempdir("startup");
    let bytes = file_of(&sample_store());
    let path = dir.join("dump.rdb");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let e = start_fails(&dir);
    assert!(e.contains("dump.rdb") && e.contains("truncated"), "{e}");
    // A flipped bit in the CRC64 trailer itself: a byte before it may be a length, which the
    // streaming parser (like Redis's rdbLoad) reports as a short read before it reaches the
    // checksum, and the key order in the file changes from run to run (hash order, random seed).
    let mut b = bytes.clone();
    let n = b.len();
    b[n - 1] ^= 1;
    std::fs::write(&path, &b).unwrap();
    let e = start_fails(&dir);
    assert!(e.contains("dump.rdb") && e.contains("checksum"), "{e}");
    std::fs::write(&path, b"GARBAGE!!!!!!!").unwrap();
    let e = start_fails(&dir);
    assert!(e.contains("bad magic"), "{e}");
    std::fs::write(&path, b"REDIS0013\xff").unwrap();
    let e = start_fails(&dir);
    assert!(e.contains("version 13"), "{e}");
    // A list value: the message names the key, the type and the offset.
    let mut f = b"REDIS0010\xfe\x00\x01\x06mylist".to_vec();
    f.extend_from_slice(b"\x01\x01a\xff");
    f.extend_from_slice(&[0; 8]);
    std::fs::write(&path, &f).unwrap();
    let e = start_fails(&dir);
    assert!(
        e.contains("type 1 (LIST) at key 'mylist' is not supported (offset 11)"),
        "{e}"
    );
    // A crafted huge length: refused without allocating.
    let mut f = b"REDIS0010\xfe\x00\x00\x01k\x81\x00\x00\x10\x00\x00\x00\x00\x00".to_vec();
    f.extend_from_slice(&[0; 8]);
    std::fs::write(&path, &f).unwrap();
    let e = start_fails(&dir);
    assert!(e.contains("dump.rdb"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_write_keeps_the_previous_snapshot() {
    let dir = common::tempdir("abort");
    let target = Target {
        dir: dir.clone(),
        filename: "dump.rdb".into(),
        opts: SaveOptions::default(),
    };
    let store = sample_store();
    snapshot::write_file(&target, None, |w| snapshot::write_store(w, &store)).unwrap();
    let good = std::fs::read(target.path()).unwrap();
    // A save that dies half-way (as a crash or a full disk would leave it).
    let err = snapshot::write_file(&target, None, |w| {
        w.raw(&[0u8; 100_000])?;
        Err(std::io::Error::other("No space left on device"))
    })
    .unwrap_err();
    assert!(err.contains("No space left"), "{err}");
    assert_eq!(std::fs::read(target.path()).unwrap(), good);
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(names.len(), 1, "temp file left behind");
    let mut s = Store::new(16);
    hyperbloom::persistence::load_file(&target.path(), &mut s, true).unwrap();
    assert_eq!(s.total_keys(), 500);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real thing: a hyperbloom process killed with SIGKILL in the middle of a BGSAVE leaves the
/// previous snapshot intact and loadable.
#[test]
fn kill_9_during_bgsave_leaves_previous_snapshot() {
    let dir = common::tempdir("kill9");
    let (mut child, addr) = common::spawn_binary(&dir, "");
    let mut c = common::connect_when_ready(addr);
    assert_eq!(c.cmd_str(&["SET", "first", "1"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let good = std::fs::read(dir.join("dump.rdb")).unwrap();
    // Enough data that the background save takes a while.
    let value = vec![b'x'; 64 * 1024];
    let mut batch = Vec::new();
    for i in 0..3000 {
        batch.extend_from_slice(&common::encode_command(&[
            b"SET",
            format!("k{i}").as_bytes(),
            &value,
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..3000 {
        c.read_reply();
    }
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdbcompression", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(30));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::read(dir.join("dump.rdb")).unwrap(), good);
    let mut s = Store::new(16);
    hyperbloom::persistence::load_file(&dir.join("dump.rdb"), &mut s, true).unwrap();
    assert_eq!(s.total_keys(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary loads in the background: clients get -LOADING until the keyspace is in, then the
/// data. (Asserting that LOADING was seen needs the load to outlast the first connection: the
/// file is ~200 MB.)
#[test]
fn binary_answers_loading_while_it_loads() {
    let dir = common::tempdir("loading");
    let mut store = Store::new(16);
    let mut seed = 88172645463325252u64;
    for i in 0..200 {
        let v: Vec<u8> = (0..1 << 20)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        store.dbs[0].insert(bytes::Bytes::from(format!("k{i}")), Value::Str(v.into()));
    }
    let target = Target {
        dir: dir.clone(),
        filename: "dump.rdb".into(),
        opts: SaveOptions {
            compression: false,
            ..SaveOptions::default()
        },
    };
    snapshot::write_file(&target, None, |w| snapshot::write_store(w, &store)).unwrap();
    drop(store);
    let (mut child, addr) = common::spawn_binary(&dir, "");
    let start = Instant::now();
    let mut saw_loading = false;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never finished loading"
        );
        let Some(mut c) = common::RawConn::connect_if_listening(addr) else {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        };
        let r = c.cmd_str(&["DBSIZE"]);
        if r.starts_with(b"-LOADING") {
            saw_loading = true;
            // The load may finish between the two commands: INFO then says `loading:0`, and from
            // then on the keyspace must answer.
            let info = c.cmd_str(&["INFO", "persistence"]);
            if info.windows(9).any(|w| w == b"loading:1") {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            assert!(
                info.windows(9).any(|w| w == b"loading:0"),
                "INFO persistence has no loading field"
            );
            assert_eq!(c.cmd_str(&["DBSIZE"]), b":200\r\n");
            break;
        }
        assert_eq!(r, b":200\r\n");
        break;
    }
    assert!(saw_loading, "the load finished before the first connection");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A corrupt snapshot makes the binary exit with status 1 and say which file and what is wrong.
#[test]
fn binary_exits_nonzero_on_a_corrupt_snapshot() {
    let dir = common::tempdir("exit1");
    let bytes = file_of(&sample_store());
    std::fs::write(dir.join("dump.rdb"), &bytes[..bytes.len() - 100]).unwrap();
    let (child, _) = common::spawn_binary(&dir, "");
    let out = child.output();
    assert_eq!(out.status.code(), Some(1));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        log.contains("dump.rdb") && log.contains("checksum") || log.contains("truncated"),
        "{log}"
    );
}

/// `save 1 1`: one change and a bit over a second later, the cron starts a BGSAVE by itself.
#[test]
fn save_points_trigger_a_background_save() {
    let dir = common::tempdir("savepoint");
    let server = start_in(&dir, &["--save", "1 1"]);
    let mut c = server.raw();
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    let start = Instant::now();
    while common::persistence_field(&mut c, "rdb_saves") != "1" {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no save point fired"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        common::persistence_field(&mut c, "rdb_changes_since_last_save"),
        "0"
    );
    let mut s = Store::new(16);
    hyperbloom::persistence::load_file(&dir.join("dump.rdb"), &mut s, true).unwrap();
    assert_eq!(s.total_keys(), 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM with save points configured saves before exiting (exit status 0).
#[test]
fn sigterm_saves_when_save_points_are_set() {
    let dir = common::tempdir("sigterm");
    let (mut child, addr) = common::spawn_binary(&dir, "3600 1");
    let mut c = common::connect_when_ready(addr);
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut s = Store::new(16);
    hyperbloom::persistence::load_file(&dir.join("dump.rdb"), &mut s, true).unwrap();
    assert_eq!(s.total_keys(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
