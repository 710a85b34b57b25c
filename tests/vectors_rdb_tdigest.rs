//! Golden RDB vectors for t-digests (`TDIS-TYPE`), written by Redis 7.0.15 + RedisBloom:
//! `rdb/dumps-tdigest.jsonl` (DUMP payloads and what RESTORE does with them, hand-built payloads
//! included) replayed in both protocols, and `rdb/tdigest.rdb` loaded and checked against its
//! manifest, then re-encoded byte for byte.

mod common;

use std::path::{Path, PathBuf};

use hyperbloom::store::Value;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/rdb")
}

#[test]
fn tdigest_dump_restore_cases_resp2_and_resp3() {
    common::vectors::replay_file("rdb/dumps-tdigest.jsonl", 121);
}

#[test]
fn tdigest_rdb_loads_and_answers() {
    let (checked, skipped) = common::vectors::check_rdb_manifest("tdigest");
    assert_eq!((checked, skipped), (94, 0));
}

#[test]
fn tdigest_rdb_reencodes_byte_identical() {
    let original = std::fs::read(vectors().join("tdigest.rdb")).unwrap();
    let (entries, stats) = common::vectors::load_rdb(&original);
    assert_eq!(entries.len(), 8);
    assert!(entries.iter().all(|e| matches!(e.2, Value::TDigest(_))));
    let out = common::vectors::reencode_rdb(&entries, &stats);
    assert!(out == original, "re-encoded tdigest.rdb differs");
}
