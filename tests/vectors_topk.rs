//! Golden vectors for the TOPK.* commands: every case of `tests/vectors/topk.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6, only inputs whose replies do not depend on `rand()`) replayed
//! against an in-process server over raw sockets, in RESP2 and in RESP3.

mod common;

#[test]
fn topk_vectors_resp2_and_resp3() {
    common::vectors::replay_file("topk.jsonl", 211);
}
