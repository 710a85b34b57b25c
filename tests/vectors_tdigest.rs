//! Golden vectors for the TDIGEST.* commands: every case of `tests/vectors/tdigest.jsonl` (replies
//! captured from Redis 7.0.15 + RedisBloom, with the current line's `TDIGEST.INFO` memory figure)
//! replayed against an in-process server over raw sockets, in RESP2 and in RESP3, comparing the
//! exact reply bytes.

mod common;

#[test]
fn tdigest_vectors_resp2_and_resp3() {
    common::vectors::replay_file("tdigest.jsonl", 331);
}
