//! Golden vectors for the CF.* commands: every case of `tests/vectors/cuckoo.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6) replayed against an in-process server over raw sockets, in
//! RESP2 and in RESP3, comparing the exact reply bytes.
//!
//! A case is: FLUSHALL, the setup commands (replies ignored), then the command. For RESP3 the steps
//! run on a fresh connection that first sends `HELLO 3` (its reply discarded).

mod common;

#[test]
fn cuckoo_vectors_resp2_and_resp3() {
    common::vectors::replay_file("cuckoo.jsonl", 207);
}
