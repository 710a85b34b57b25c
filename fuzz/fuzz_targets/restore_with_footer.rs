#![no_main]
//! Fuzz target `restore_with_footer`: see `harness::restore_with_footer` for what it checks.
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::restore_with_footer(data));
