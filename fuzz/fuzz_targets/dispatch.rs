#![no_main]
//! Fuzz target `dispatch`: see `harness::dispatch` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::dispatch(data));
