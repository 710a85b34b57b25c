#![no_main]
//! Fuzz target `config`: see `harness::config` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::config(data));
