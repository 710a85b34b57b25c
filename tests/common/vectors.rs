//! Golden-vector replay shared by the `vectors_*` tests: reply cases, and the RDB vector files.
//!
//! A case file (`tests/vectors/<name>.jsonl`, copied from the captures of Redis 7.0.15 + RedisBloom)
//! holds one JSON object per line: `name`, `setup` (commands whose replies are ignored), `cmd`, and
//! the exact reply bytes `resp2` and `resp3`. Byte strings are JSON strings whose code points are the
//! bytes (latin-1). A case runs as FLUSHALL, the setup, then the command; for RESP3 on a fresh
//! connection that first sent `HELLO 3`.
#![allow(dead_code)]

use super::{start_server, RawConn};

pub struct Case {
    pub name: String,
    pub setup: Vec<Vec<Vec<u8>>>,
    pub cmd: Vec<Vec<u8>>,
    pub resp2: Vec<u8>,
    pub resp3: Vec<u8>,
}

/// The bytes of a latin-1 JSON string.
pub fn bytes(v: &serde_json::Value) -> Vec<u8> {
    v.as_str()
        .expect("string")
        .chars()
        .map(|c| u8::try_from(c as u32).expect("latin-1 code point"))
        .collect()
}

pub fn argv(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v.as_array().expect("argv").iter().map(bytes).collect()
}

/// `current_<field>` if the case has it, else `<field>`.
fn current_or<'a>(d: &'a serde_json::Value, field: &str) -> &'a serde_json::Value {
    match d.get(format!("current_{field}")) {
        Some(v) if !v.is_null() => v,
        _ => &d[field],
    }
}

/// Loads `tests/vectors/<file>`.
pub fn load(file: &str) -> Vec<Case> {
    let path = format!("{}/tests/vectors/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let d: serde_json::Value = serde_json::from_str(l).expect("json");
            Case {
                name: d["name"].as_str().expect("name").to_string(),
                setup: d["setup"]
                    .as_array()
                    .expect("setup")
                    .iter()
                    .map(argv)
                    .collect(),
                cmd: argv(&d["cmd"]),
                // Where RedisBloom's current line replies differently from the captured 2.6
                // (TDIGEST.INFO's memory figure), the file carries the current-line bytes too.
                resp2: bytes(current_or(&d, "resp2")),
                resp3: bytes(current_or(&d, "resp3")),
            }
        })
        .collect()
}

pub fn show(b: &[u8]) -> String {
    let cut = &b[..b.len().min(400)];
    format!(
        "{:?}{}",
        String::from_utf8_lossy(cut),
        if b.len() > cut.len() { " …" } else { "" }
    )
}

fn refs(a: &[Vec<u8>]) -> Vec<&[u8]> {
    a.iter().map(Vec::as_slice).collect()
}

/// Runs one case on `conn`; Err describes a mismatch.
pub fn replay(conn: &mut RawConn, case: &Case, expected: &[u8]) -> Result<(), String> {
    assert_eq!(conn.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    for step in &case.setup {
        conn.cmd(&refs(step));
    }
    let got = conn.cmd(&refs(&case.cmd));
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "\n   want {}\n    got {}",
            show(expected),
            show(&got)
        ))
    }
}

/// Replays every case of `file` (which must hold `count` cases) in RESP2 and RESP3 against a fresh
/// in-process server and fails listing every mismatch.
pub fn replay_file(file: &str, count: usize) {
    let cases = load(file);
    assert_eq!(cases.len(), count, "{file} holds {count} cases");
    let server = start_server();
    let mut resp2 = server.raw();
    let mut failed = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let mut resp3 = server.raw();
        let hello = resp3.cmd(&[b"HELLO", b"3"]);
        assert!(hello.starts_with(b"%"), "HELLO 3 reply: {}", show(&hello));
        for (proto, conn, expected) in [(2, &mut resp2, &case.resp2), (3, &mut resp3, &case.resp3)]
        {
            match replay(conn, case, expected) {
                Ok(()) => passed += 1,
                Err(why) => failed.push(format!("[RESP{proto}] {}:{why}", case.name)),
            }
        }
    }
    println!("{file}: {passed}/{} replies identical", 2 * cases.len());
    assert!(
        failed.is_empty(),
        "{} mismatches:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// RDB vectors (`tests/vectors/rdb/<name>.rdb` with its manifest `<name>.json`)
// ---------------------------------------------------------------------------------------------

use bytes::Bytes;
use hyperbloom::persistence::rdb::{LoadOptions, LoadStats, RdbReader, RdbWriter, SaveOptions};
use hyperbloom::store::Value;

/// One key as the RDB reader hands it over: database, key, value, expiry.
pub type RdbEntry = (usize, Bytes, Value, Option<u64>);

/// The folder of the RDB vectors.
pub fn rdb_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/rdb")
}

/// Every key of an RDB file, in file order, with the file's statistics (AUX fields, version).
pub fn load_rdb(bytes: &[u8]) -> (Vec<RdbEntry>, LoadStats) {
    let mut entries = Vec::new();
    let stats = RdbReader::new(bytes, bytes.len() as u64)
        .load_file(LoadOptions::default(), 0, |db, k, v, e, _| {
            entries.push((db, bytes::Bytes::copy_from_slice(k), v, e));
            Ok(())
        })
        .expect("the vector file loads");
    (entries, stats)
}

/// Writes `entries` (all in database 0) back as a file with the AUX `ctime` and `used-mem` of
/// `stats`, the way Redis wrote the original.
pub fn reencode_rdb(entries: &[RdbEntry], stats: &LoadStats) -> Vec<u8> {
    let aux = |name: &[u8]| -> u64 {
        let v = &stats
            .aux
            .iter()
            .find(|(k, _)| k == name)
            .expect("aux field")
            .1;
        std::str::from_utf8(v).unwrap().parse().unwrap()
    };
    let mut out = Vec::new();
    let mut w = RdbWriter::new(&mut out, SaveOptions::default());
    w.header(aux(b"ctime"), aux(b"used-mem")).unwrap();
    let expires = entries.iter().filter(|e| e.3.is_some()).count() as u64;
    w.select_db(0, entries.len() as u64, expires).unwrap();
    for (_, k, v, e) in entries {
        w.entry(k, v, *e, 0).unwrap();
    }
    w.finish().unwrap();
    out
}

/// Loads `name.rdb` into a fresh server and checks its manifest: every key's expiry on the
/// keyspace, then every `expect` command's reply (the current line's `current_reply` where the
/// manifest has one). Returns (checked, skipped because the command is unknown to this build);
/// fails with every mismatch listed.
pub fn check_rdb_manifest(name: &str) -> (usize, usize) {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rdb_dir().join(format!("{name}.json"))).unwrap())
            .unwrap();
    let dir = super::tempdir(name);
    std::fs::copy(rdb_dir().join(format!("{name}.rdb")), dir.join("dump.rdb")).unwrap();
    let server = super::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut c = server.raw();
    for k in manifest["keys"].as_array().unwrap() {
        let key = bytes(&k["key"]);
        let mut engine = server.shared.engine();
        assert_eq!(
            engine.store.dbs[0].expire_at(&key),
            k["expire_ms"].as_u64(),
            "{name}: expiry of {:?}",
            k["key"]
        );
    }
    let (mut checked, mut skipped) = (0, 0);
    let mut mismatches = Vec::new();
    for e in manifest["expect"].as_array().unwrap() {
        let cmd = argv(&e["cmd"]);
        let refs: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        let got = c.cmd(&refs);
        if got.starts_with(b"-ERR unknown command") {
            skipped += 1;
            continue;
        }
        let want = match e.get("current_reply") {
            Some(v) if !v.is_null() => bytes(v),
            _ => bytes(&e["reply"]),
        };
        if got != want {
            mismatches.push(format!(
                "{:?}\n   want {}\n    got {}",
                e["cmd"],
                show(&want),
                show(&got)
            ));
        }
        checked += 1;
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(mismatches.is_empty(), "{name}:\n{}", mismatches.join("\n"));
    (checked, skipped)
}
