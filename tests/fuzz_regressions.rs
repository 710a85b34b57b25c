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

/// The shared path against the exclusive one: the dispatcher's saved inputs, then 3000
/// pseudo-random ones (a fixed seed; each a few commands of the harness's vocabulary) and 2000
/// built ones.
#[test]
fn shared_path() {
    replay("dispatch", harness::shared_path);
    // `SHARED_PATH_SCALE=N` runs N times as many (and another seed per N), for a longer search.
    let scale: u64 = std::env::var("SHARED_PATH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ scale.wrapping_sub(1).wrapping_mul(0x2545_f491);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 * scale {
        let len = 8 + (next() % 120) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Mostly atoms (the keys and numbers the commands know) rather than raw runs.
        for b in data.iter_mut() {
            if *b & 0x80 != 0 && *b != 0xff && next() % 4 != 0 {
                *b &= 0x7f;
            }
        }
        let outcome = std::panic::catch_unwind(|| harness::shared_path(&data));
        assert!(outcome.is_ok(), "shared_path fails on {data:?}");
    }
    // Built inputs: the writes that make filters, strings, HLLs and TTLs, then transactions whose
    // commands are mostly the reads the shared path runs (its EXEC of reads, and every fallback).
    let writes: &[(&str, usize)] = &[
        ("SET", 2),
        ("BF.ADD", 2),
        ("CF.ADD", 2),
        ("PFADD", 2),
        ("INCR", 1),
        ("DEL", 1),
        ("PEXPIRE", 2),
        ("MSET", 4),
    ];
    let reads: &[(&str, usize)] = &[
        ("GET", 1),
        ("MGET", 3),
        ("EXISTS", 2),
        ("STRLEN", 1),
        ("TTL", 1),
        ("PTTL", 1),
        ("PFCOUNT", 2),
        ("BF.EXISTS", 2),
        ("BF.MEXISTS", 3),
        ("CF.EXISTS", 2),
        ("CF.MEXISTS", 3),
        ("CF.COUNT", 2),
        ("PING", 0),
        ("ECHO", 1),
        ("EXPIRETIME", 1),
    ];
    let atoms = ["k", "k2", "{k}3", "1", "10", "0", "-1", "100"];
    for _ in 0..2000 * scale {
        let mut data = Vec::new();
        let command =
            |data: &mut Vec<u8>, name: &str, argc: usize, next: &mut dyn FnMut() -> u64| {
                data.push(harness::command_byte(name));
                data.push(harness::argc_byte(argc, next().is_multiple_of(4)));
                for _ in 0..argc {
                    data.push(harness::atom_byte(atoms[next() as usize % atoms.len()]));
                }
                if next().is_multiple_of(16) {
                    data.push(0xff);
                }
            };
        for _ in 0..(2 + next() % 6) {
            let (name, argc) = writes[next() as usize % writes.len()];
            command(&mut data, name, argc, &mut next);
            if next().is_multiple_of(2) {
                command(&mut data, "MULTI", 0, &mut next);
                for _ in 0..(next() % 5) {
                    let (name, argc) = if next().is_multiple_of(8) {
                        writes[next() as usize % writes.len()]
                    } else {
                        reads[next() as usize % reads.len()]
                    };
                    command(&mut data, name, argc, &mut next);
                }
                let end = if next().is_multiple_of(8) {
                    "DISCARD"
                } else {
                    "EXEC"
                };
                command(&mut data, end, 0, &mut next);
            }
        }
        let outcome = std::panic::catch_unwind(|| harness::shared_path(&data));
        assert!(outcome.is_ok(), "shared_path fails on {data:?}");
    }
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
