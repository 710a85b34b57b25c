#![no_main]
//! Fuzz target `lzf`: see `harness::lzf` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::lzf(data));
