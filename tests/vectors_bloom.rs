//! Golden vectors for the BF.* commands: every case of `tests/vectors/bloom.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6, limited to inputs where the current line answers the same)
//! replayed against an in-process server over raw sockets, in RESP2 and RESP3, byte for byte.
//!
//! A case is FLUSHALL, its setup commands (replies ignored), then its command. RESP3 runs on a fresh
//! connection per case that first sends `HELLO 3` and discards the reply.

mod common;

#[test]
fn bloom_vectors_resp2_and_resp3() {
    common::vectors::replay_file("bloom.jsonl", 417);
}
