#![no_main]
//! Fuzz target `shared_path`: see `harness::shared_path` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::shared_path(data));
