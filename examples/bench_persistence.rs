//! Save/load throughput of RDB snapshots, measured on the library (no network):
//!
//! ```text
//! cargo run --release --example bench_persistence -- [bloom_mb] [hlls] [dir]
//! ```
//!
//! 1. `bloom_mb` MB of Bloom filters (64 MB links), first with bit arrays half set from a PRNG
//!    (filters filled to capacity: incompressible), then with 1 % of the bits set (a young filter,
//!    compressible), each saved with `rdbcompression` no and yes, then loaded back;
//! 2. `hlls` small sparse HyperLogLogs (10 elements each), saved and loaded.
//!
//! Prints MB/s of file bytes. The file goes to `dir` (default /tmp) and is removed afterwards.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use hyperbloom::persistence::rdb::SaveOptions;
use hyperbloom::persistence::snapshot::{self, Target};
use hyperbloom::store::bloom::{BitArray, RawLink, ScalingBloom};
use hyperbloom::store::{Store, Value};

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// CPU seconds (user + system) this process used so far: the machine is shared, so wall time
/// alone overstates the cost.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn bloom_store(total_mb: u64, fill_percent: u64) -> Store {
    let mut store = Store::new(16);
    let link_bytes: u64 = 64 << 20;
    let n = (total_mb << 20).div_ceil(link_bytes);
    let mut seed = 0x9e3779b97f4a7c15u64;
    // A template filter of the right shape, for valid link fields.
    let shape = ScalingBloom::create(link_bytes * 8 / 10, 0.01, 2, true).unwrap();
    let l = &shape.links()[0];
    for i in 0..n {
        let bytes = l.bytes();
        let mut data = vec![0u8; bytes as usize];
        if fill_percent >= 50 {
            for c in data.chunks_mut(8) {
                let r = xorshift(&mut seed).to_le_bytes();
                c.copy_from_slice(&r[..c.len()]);
            }
        } else {
            // Sparse: about fill_percent % of the bits set, at random positions.
            let set = bytes * 8 * fill_percent / 100;
            for _ in 0..set {
                let bit = xorshift(&mut seed) % (bytes * 8);
                data[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        let raw = RawLink {
            entries: l.entries(),
            error: l.error(),
            bpe: l.bpe(),
            hashes: l.hashes() as u64,
            bits: l.bits(),
            n2: 0,
            size: l.entries(),
            data: BitArray::from_bytes(&data).unwrap(),
        };
        let b = ScalingBloom::from_raw_parts(l.entries(), shape.options(), 2, vec![raw]).unwrap();
        store.dbs[0].insert(Bytes::from(format!("bf:{i}")), Value::Bloom(Box::new(b)));
    }
    store
}

fn hll_store(n: u64) -> Store {
    let mut store = Store::new(16);
    for i in 0..n {
        let mut v = hyperbloom::store::hll::new_sparse();
        for j in 0..10 {
            let _ = hyperbloom::store::hll::add(&mut v, format!("{i}:{j}").as_bytes(), 3000);
        }
        store.dbs[0].insert(Bytes::from(format!("hll:{i}")), Value::Str(v.into()));
    }
    store
}

fn run(name: &str, store: &Store, dir: &Path, compression: bool) {
    let target = Target {
        dir: dir.to_path_buf(),
        filename: format!("bench-{}.rdb", std::process::id()),
        opts: SaveOptions {
            compression,
            ..SaveOptions::default()
        },
    };
    let (t, c) = (Instant::now(), cpu_secs());
    let size = snapshot::write_file(&target, None, |w| snapshot::write_store(w, store)).unwrap();
    let save = t.elapsed().as_secs_f64();
    let save_cpu = cpu_secs() - c;
    let mut loaded = Store::new(16);
    let (t, c) = (Instant::now(), cpu_secs());
    let stats = hyperbloom::persistence::load_file(&target.path(), &mut loaded, true).unwrap();
    let load = t.elapsed().as_secs_f64();
    let load_cpu = cpu_secs() - c;
    let mb = size as f64 / (1 << 20) as f64;
    println!(
        "{name:<34} compression={:<3} file {mb:7.1} MB | save {save:5.2}s wall {save_cpu:5.2}s cpu | load {load:5.2}s wall {load_cpu:5.2}s cpu | {} keys",
        if compression { "yes" } else { "no" },
        stats.keys_loaded
    );
    let _ = std::fs::remove_file(target.path());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bloom_mb: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let hlls: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = PathBuf::from(args.get(3).cloned().unwrap_or_else(|| "/tmp".into()));
    if bloom_mb > 0 {
        for fill in [50, 1] {
            let store = bloom_store(bloom_mb, fill);
            let name = if fill == 50 {
                format!("{bloom_mb} MB Bloom, full (random bits)")
            } else {
                format!("{bloom_mb} MB Bloom, {fill}% of bits set")
            };
            run(&name, &store, &dir, false);
            run(&name, &store, &dir, true);
        }
    }
    if hlls > 0 {
        let store = hll_store(hlls);
        run(&format!("{hlls} small HLLs"), &store, &dir, true);
    }
}
