#![no_main]
//! Fuzz target `hll`: see `harness::hll` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::hll(data));
