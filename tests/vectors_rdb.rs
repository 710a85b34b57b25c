//! Golden RDB vectors (tests/vectors/rdb, written by Redis 7.0.15 + RedisBloom 2.6): every dump loads
//! and answers as its manifest says; DUMP/RESTORE cases replay byte for byte; re-encoding a Redis
//! file reproduces it exactly.

mod common;

use std::path::{Path, PathBuf};

use hyperbloom::persistence::rdb::{RdbWriter, SaveOptions};
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

#[test]
fn strings_hll_dump_loads_and_answers() {
    let (checked, skipped) = common::vectors::check_rdb_manifest("strings-hll");
    eprintln!("strings-hll: {checked} checked, {skipped} skipped ");
    assert_eq!((checked, skipped), (36, 0));
}

/// Parses a Redis file and writes it back with the same AUX values and key order: the bytes must
/// be identical (string encodings, LZF choices, lengths, CRC).
#[test]
fn reencoding_a_redis_file_is_byte_identical() {
    let original = std::fs::read(vectors().join("strings-hll.rdb")).unwrap();
    let (entries, stats) = common::vectors::load_rdb(&original);
    assert_eq!(stats.version, 10);
    assert_eq!(entries.len(), 10);
    let out = common::vectors::reencode_rdb(&entries, &stats);
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
            if r.starts_with(b"-ERR unknown command") || r.starts_with(b"-ERR Bad data format") {
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
        if unsupported || got.starts_with(b"-ERR unknown command") {
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
    let (checked, skipped) = common::vectors::check_rdb_manifest("bloom-hll");
    eprintln!("bloom-hll: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (39, 0));
}

#[test]
fn cuckoo_dump_loads_and_answers() {
    let (checked, skipped) = common::vectors::check_rdb_manifest("cuckoo");
    eprintln!("cuckoo: {checked} checked, {skipped} skipped");
    assert_eq!((checked, skipped), (31, 0));
}

#[test]
fn cms_topk_dump_loads_and_answers() {
    let (checked, skipped) = common::vectors::check_rdb_manifest("cms-topk");
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
    let (entries, _) = common::vectors::load_rdb(&original);
    assert_eq!(entries.len(), 13);
    let (mut identical, mut round_trips) = (0, 0);
    for (_, key, value, expire) in &entries {
        let mut record = Vec::new();
        RdbWriter::new(&mut record, SaveOptions::default())
            .entry(key, value, *expire, 0)
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
        let (entries, stats) = common::vectors::load_rdb(&original);
        let out = common::vectors::reencode_rdb(&entries, &stats);
        assert!(out == original, "{name}: re-encoded file differs");
    }
}
