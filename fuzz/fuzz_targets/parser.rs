#![no_main]
//! Fuzz target `parser`: see `harness::parser` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::parser(data));
