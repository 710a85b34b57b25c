#![no_main]
//! Fuzz target `parser_diff`: see `harness::parser_diff` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::parser_diff(data));
