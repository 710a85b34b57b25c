//! Golden RDB vectors (tests/vectors/rdb, written by Redis 7.0.15 + RedisBloom 2.6): every dump loads
//! and answers as its manifest says; DUMP/RESTORE cases replay byte for byte; re-encoding a Redis
//! file reproduces it exactly.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use hyperbloom::persistence::rdb::{LoadOptions, RdbReader, RdbWriter, SaveOptions};
use hyperbloom::store::Value;
use serde_json::Value as Json;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/rdb")
}

/// latin-1 JSON string → bytes (vectors/README).
fn bytes_of(v: &Json) -> Vec<u8> {
    v.as_str()
        .expect("string")
        .chars()
        .map(|c| c as u32 as u8)
        .collect()
}

fn is_unknown_command(reply: &[u8]) -> bool {
    reply.starts_with(b"-ERR unknown command")
}

/// Loads `name.rdb` into a fresh server and checks its manifest's `expect` list. Returns
/// (checked, skipped because the command family is not in this build).
fn check_manifest(name: &str) -> (usize, usize) {
    let manifest: Json =
        serde_json::from_slice(&std::fs::read(vectors().join(format!("{name}.json"))).unwrap())
            .unwrap();
    let dir = common::tempdir(name);
    std::fs::copy(vectors().join(format!("{name}.rdb")), dir.join("dump.rdb")).unwrap();
    let server = common::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut c = server.raw();
    // Expiries, checked on the keyspace itself (independent of which TTL commands are built).
    for k in manifest["keys"].as_array().unwrap() {
        let key = bytes_of(&k["key"]);
        let want = k["expire_ms"].as_u64();
        let mut engine = server.shared.engine();
        assert_eq!(
            engine.store.dbs[0].expire_at(&key),
            want,
            "{name}: expiry of {:?}",
            k["key"]
        );
    }
    let (mut checked, mut skipped) = (0, 0);
    for e in manifest["expect"].as_array().unwrap() {
        let argv: Vec<Vec<u8>> = e["cmd"].as_array().unwrap().iter().map(bytes_of).collect();
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let got = c.cmd(&refs);
        if is_unknown_command(&got) {
            skipped += 1;
            continue;
        }
        let want = bytes_of(&e["reply"]);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{name}: {:?}",
            e["cmd"]
        );
        checked += 1;
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    (checked, skipped)
}

#[test]
fn strings_hll_dump_loads_and_answers() {
    let (checked, skipped) = check_manifest("strings-hll");
    eprintln!("strings-hll: {checked} checked, {skipped} skipped ");
    assert_eq!((checked, skipped), (36, 0));
}

/// Parses a Redis file and writes it back with the same AUX values and key order: the bytes must
/// be identical (string encodings, LZF choices, lengths, CRC).
#[test]
fn reencoding_a_redis_file_is_byte_identical() {
    let original = std::fs::read(vectors().join("strings-hll.rdb")).unwrap();
    let mut entries: Vec<(usize, Bytes, Value, Option<u64>)> = Vec::new();
    let stats = RdbReader::new(&original[..], original.len() as u64)
        .load_file(LoadOptions::default(), 0, |db, k, v, e| {
            entries.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.version, 10);
    assert_eq!(entries.len(), 10);
    let aux = |name: &[u8]| -> u64 {
        let v = &stats.aux.iter().find(|(k, _)| k == name).unwrap().1;
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
    assert_eq!(out.len(), original.len());
    assert!(out == original, "re-encoded file differs from Redis's");
}

/// DUMP/RESTORE cases from dumps.jsonl whose commands this build serves.
#[test]
fn dump_restore_cases() {
    let text = std::fs::read_to_string(vectors().join("dumps.jsonl")).unwrap();
    let server = common::start_server();
    let (mut checked, mut skipped) = (0, 0);
    for line in text.lines() {
        let case: Json = serde_json::from_str(line).unwrap();
        let mut c = server.raw();
        c.cmd_str(&["FLUSHALL"]);
        let mut unsupported = false;
        for s in case["setup"].as_array().unwrap() {
            let argv: Vec<Vec<u8>> = s.as_array().unwrap().iter().map(bytes_of).collect();
            let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
            let r = c.cmd(&refs);
            if is_unknown_command(&r) || r.starts_with(b"-ERR Bad data format") {
                unsupported = true;
            }
        }
        let argv: Vec<Vec<u8>> = case["cmd"]
            .as_array()
            .unwrap()
            .iter()
            .map(bytes_of)
            .collect();
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let got = c.cmd(&refs);
        let want = bytes_of(&case["resp2"]);
        if unsupported || is_unknown_command(&got) {
            skipped += 1;
            continue;
        }
        assert_eq!(
            got,
            want,
            "case {}: got {:?}",
            case["name"],
            String::from_utf8_lossy(&got)
        );
        checked += 1;
    }
    eprintln!("dumps.jsonl: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (67, 0));
}

#[test]
fn bloom_hll_dump_loads_and_answers() {
    let (checked, skipped) = check_manifest("bloom-hll");
    eprintln!("bloom-hll: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (39, 0));
}

#[test]
fn cuckoo_dump_loads_and_answers() {
    let (checked, skipped) = check_manifest("cuckoo");
    eprintln!("cuckoo: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (31, 0));
}

#[test]
fn cms_topk_dump_loads_and_answers() {
    let (checked, skipped) = check_manifest("cms-topk");
    eprintln!("cms-topk: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (73, 0));
}

/// DUMP/RESTORE of CMS and TopK keys (dumps-sketches.jsonl), in RESP2 and RESP3: payloads, what the
/// restored keys answer, and every hand-edited payload refused with `ERR Bad data format`.
#[test]
fn sketch_dump_restore_cases() {
    common::vectors::replay_file("rdb/dumps-sketches.jsonl", 155);
}

/// cms-topk.rdb re-encoded: every CMS record and every TopK record without items is the exact bytes
/// RedisBloom wrote (LZF choices included). TopK records with items hold the saving process's heap
/// addresses, which hyperbloom writes as 0: those must load back to the same value.
#[test]
fn cms_topk_file_reencodes() {
    let original = std::fs::read(vectors().join("cms-topk.rdb")).unwrap();
    let mut entries: Vec<(usize, Bytes, Value, Option<u64>)> = Vec::new();
    RdbReader::new(&original[..], original.len() as u64)
        .load_file(LoadOptions::default(), 0, |db, k, v, e| {
            entries.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
    assert_eq!(entries.len(), 13);
    let (mut identical, mut round_trips) = (0, 0);
    for (_, key, value, expire) in &entries {
        let mut record = Vec::new();
        RdbWriter::new(&mut record, SaveOptions::default())
            .entry(key, value, *expire)
            .unwrap();
        let with_items =
            matches!(value, Value::TopK(t) if t.heap().iter().any(|s| s.item.is_some()));
        if with_items {
            let payload = hyperbloom::persistence::dump::dump(value, true);
            let back = hyperbloom::persistence::dump::restore(&payload).unwrap();
            assert!(&back == value, "{key:?} does not round-trip");
            round_trips += 1;
        } else {
            assert!(
                original
                    .windows(record.len())
                    .any(|w| w == record.as_slice()),
                "{key:?}: re-encoded record not found in Redis's file"
            );
            identical += 1;
        }
    }
    assert_eq!((identical, round_trips), (7, 6));
}

/// Every key of the module dumps re-encodes to the exact bytes Redis + RedisBloom wrote.
#[test]
fn module_files_reencode_byte_identical() {
    for name in ["bloom-hll", "cuckoo", "strings-hll"] {
        let original = std::fs::read(vectors().join(format!("{name}.rdb"))).unwrap();
        let mut entries: Vec<(usize, Bytes, Value, Option<u64>)> = Vec::new();
        let stats = RdbReader::new(&original[..], original.len() as u64)
            .load_file(LoadOptions::default(), 0, |db, k, v, e| {
                entries.push((db, k, v, e));
                Ok(())
            })
            .unwrap();
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
        assert!(out == original, "{name}: re-encoded file differs");
    }
}
