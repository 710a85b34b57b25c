//! The cost of a snapshot on the write path, without the network (issue 11).
//!
//! Fills a database with `KEYS` string keys, then times `WRITES` overwrites of random keys in
//! batches of 50 (one event-loop iteration of 50 unpipelined clients), three ways:
//!   idle       no snapshot alive;
//!   snapshot   right after `Db::snapshot`, with a thread walking the snapshot meanwhile (as the
//!              BGSAVE / rewrite writer does), and dropping it at the end;
//! and reports the snapshot's own time, the slowest single write, the slowest batch, the 99th
//! percentile batch, and the total.
//!
//!   cargo run --release --example snapshot_cow -- [KEYS] [WRITES]
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyperbloom::store::{Db, Value};

#[global_allocator]
static ALLOC: hyperbloom::engine::alloc::CountingAlloc = hyperbloom::engine::alloc::CountingAlloc;

fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn run(
    db: &mut Db,
    keys: u64,
    writes: usize,
    seed: u64,
) -> (Duration, Duration, Duration, Duration) {
    let mut s = seed;
    let mut batches = Vec::with_capacity(writes / 50 + 1);
    let mut worst = Duration::ZERO;
    let all = Instant::now();
    let mut done = 0;
    while done < writes {
        let b = Instant::now();
        for _ in 0..50.min(writes - done) {
            let k = Bytes::from(format!("key:{:012}", rng(&mut s) % keys));
            let t = Instant::now();
            db.insert(k, Value::str(b"yyyyyyyyyyyyyyyy"));
            worst = worst.max(t.elapsed());
            done += 1;
        }
        batches.push(b.elapsed());
    }
    let total = all.elapsed();
    batches.sort();
    let p99 = batches[batches.len() * 99 / 100];
    (worst, batches[batches.len() - 1], p99, total)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let writes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(300_000);
    let mut db = Db::new();
    for i in 0..keys {
        db.insert(
            Bytes::from(format!("key:{i:012}")),
            Value::str(b"xxxxxxxxxxxxxxxx"),
        );
    }
    println!("{keys} keys, {writes} overwrites in batches of 50; times in ms");
    println!("phase      snapshot  worst-write  worst-batch  p99-batch  total");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for round in 0..3 {
        let (w, b, p, t) = run(&mut db, keys, writes, 0x9e3779b97f4a7c15 + round);
        println!(
            "idle       {:>8} {:>12.3} {:>12.3} {:>10.3} {:>6.1}",
            "-",
            ms(w),
            ms(b),
            ms(p),
            ms(t)
        );
        let t0 = Instant::now();
        let snap = db.snapshot();
        let took = t0.elapsed();
        let walker = std::thread::spawn(move || {
            let mut sum = 0u64;
            for (k, v, _) in snap.entries() {
                sum = sum.wrapping_add(k.len() as u64 + v.as_str().map_or(0, |s| s[0] as u64));
            }
            (sum, snap)
        });
        let (w, b, p, t) = run(&mut db, keys, writes, 0x1234567 + round);
        let (_, snap) = walker.join().expect("walker");
        let t1 = Instant::now();
        drop(snap);
        println!(
            "snapshot   {:>8.3} {:>12.3} {:>12.3} {:>10.3} {:>6.1}   (drop of the snapshot: {:.1} ms)",
            ms(took),
            ms(w),
            ms(b),
            ms(p),
            ms(t),
            ms(t1.elapsed())
        );
    }
}
