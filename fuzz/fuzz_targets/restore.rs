#![no_main]
//! Fuzz target `restore`: see `harness::restore` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::restore(data));
