//! Golden RDB vectors for t-digests (`TDIS-TYPE`), written by Redis 7.0.15 + RedisBloom:
//! `rdb/dumps-tdigest.jsonl` (DUMP payloads and what RESTORE does with them, hand-built payloads
//! included) replayed in both protocols, and `rdb/tdigest.rdb` loaded and checked against its
//! manifest, then re-encoded byte for byte.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use hyperbloom::persistence::rdb::{LoadOptions, RdbReader, RdbWriter, SaveOptions};
use hyperbloom::store::Value;
use serde_json::Value as Json;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/rdb")
}

#[test]
fn tdigest_dump_restore_cases_resp2_and_resp3() {
    common::vectors::replay_file("rdb/dumps-tdigest.jsonl", 121);
}

#[test]
fn tdigest_rdb_loads_and_answers() {
    let manifest: Json =
        serde_json::from_slice(&std::fs::read(vectors().join("tdigest.json")).unwrap()).unwrap();
    let dir = common::tempdir("tdigest-rdb");
    std::fs::copy(vectors().join("tdigest.rdb"), dir.join("dump.rdb")).unwrap();
    let server = common::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut c = server.raw();
    for k in manifest["keys"].as_array().unwrap() {
        let key = common::vectors::bytes(&k["key"]);
        let mut engine = server.shared.engine();
        assert_eq!(
            engine.store.dbs[0].expire_at(&key),
            k["expire_ms"].as_u64(),
            "expiry of {:?}",
            k["key"]
        );
    }
    let mut mismatches = Vec::new();
    let expect = manifest["expect"].as_array().unwrap();
    for e in expect {
        let argv = common::vectors::argv(&e["cmd"]);
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let got = c.cmd(&refs);
        let want = match e.get("current_reply") {
            Some(v) if !v.is_null() => common::vectors::bytes(v),
            _ => common::vectors::bytes(&e["reply"]),
        };
        if got != want {
            mismatches.push(format!(
                "{:?}\n   want {}\n    got {}",
                e["cmd"],
                common::vectors::show(&want),
                common::vectors::show(&got)
            ));
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(expect.len(), 94);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn tdigest_rdb_reencodes_byte_identical() {
    let original = std::fs::read(vectors().join("tdigest.rdb")).unwrap();
    let mut entries: Vec<(usize, Bytes, Value, Option<u64>)> = Vec::new();
    let stats = RdbReader::new(&original[..], original.len() as u64)
        .load_file(LoadOptions::default(), 0, |db, k, v, e| {
            entries.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
    assert_eq!(entries.len(), 8);
    assert!(entries.iter().all(|e| matches!(e.2, Value::TDigest(_))));
    let aux = |n: &[u8]| -> u64 {
        let v = &stats.aux.iter().find(|(k, _)| k == n).unwrap().1;
        std::str::from_utf8(v).unwrap().parse().unwrap()
    };
    let mut out = Vec::new();
    let mut w = RdbWriter::new(&mut out, SaveOptions::default());
    w.header(aux(b"ctime"), aux(b"used-mem")).unwrap();
    let expires = entries.iter().filter(|e| e.3.is_some()).count() as u64;
    w.select_db(0, entries.len() as u64, expires).unwrap();
    for (_, k, v, e) in &entries {
        w.entry(k, v, *e).unwrap();
    }
    w.finish().unwrap();
    assert!(out == original, "re-encoded tdigest.rdb differs");
}
