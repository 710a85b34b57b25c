#![no_main]
//! Fuzz target `rdb_file`: see `harness::rdb_file` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::rdb_file(data));
