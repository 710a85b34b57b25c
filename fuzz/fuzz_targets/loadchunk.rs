#![no_main]
//! Fuzz target `loadchunk`: see `harness::loadchunk` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::loadchunk(data));
