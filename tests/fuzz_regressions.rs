//! Replays every saved fuzz input (`fuzz/regressions/<target>/*`) through the same harness the
//! libFuzzer targets run, so a crash the fuzzer found and we fixed stays fixed under `cargo test`.
//! The inputs are the ones that found something, plus a small seed set per target.
#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let data = std::fs::read(&path).expect("readable input");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target}: {} fails again", path.display());
        n += 1;
    }
    assert!(n > 0, "no saved inputs for {target} in {}", dir.display());
}

#[test]
fn parser() {
    replay("parser", harness::parser);
}

#[test]
fn parser_diff() {
    replay("parser_diff", harness::parser_diff);
}

#[test]
fn config() {
    replay("config", harness::config);
}

#[test]
fn restore() {
    replay("restore", harness::restore);
}

#[test]
fn restore_with_footer() {
    replay("restore_with_footer", harness::restore_with_footer);
}

#[test]
fn rdb_file() {
    replay("rdb_file", harness::rdb_file);
}

#[test]
fn dispatch() {
    replay("dispatch", harness::dispatch);
}

#[test]
fn hll() {
    replay("hll", harness::hll);
}

#[test]
fn lzf() {
    replay("lzf", harness::lzf);
}

#[test]
fn loadchunk() {
    replay("loadchunk", harness::loadchunk);
}
