//! Golden vectors for the CMS.* commands: every case of `tests/vectors/cms.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6) replayed against an in-process server over raw sockets, in
//! RESP2 and in RESP3, comparing the exact reply bytes.

mod common;

#[test]
fn cms_vectors_resp2_and_resp3() {
    common::vectors::replay_file("cms.jsonl", 263);
}
