//! Golden vectors for the PF* commands: every case of `tests/vectors/hll.jsonl` (replies captured
//! from Redis 7.0.15) replayed against an in-process server, in RESP2 and in RESP3, comparing the
//! exact reply bytes.
//!
//! A case is: FLUSHALL, the setup commands (replies ignored), then the command. For RESP3 the
//! steps run on a fresh connection that first sends `HELLO 3`.

mod common;

#[test]
fn hll_vectors_resp2_and_resp3() {
    common::vectors::replay_file("hll.jsonl", 295);
}
