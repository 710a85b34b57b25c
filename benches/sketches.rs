//! Criterion benches for the sketch stores: CMS.INCRBY / CMS.QUERY on a count-min sketch and
//! TOPK.ADD on Top-K sketches, without the network (ns per item: throughput is per element).
//!
//! Run briefly: `cargo bench --bench sketches -- --warm-up-time 1 --measurement-time 3`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hyperbloom::store::cms::{dims_for_error, CountMinSketch};
use hyperbloom::store::topk::TopK;

const N: usize = 100_000;

/// Item keys with a skewed (roughly Zipf-like) distribution over 10 000 distinct items, so Top-K
/// sees heavy hitters, collisions and decay as in real use.
fn items() -> Vec<Vec<u8>> {
    let mut x: u64 = 0x2545f4914f6cdd1d;
    (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            let rank = (10_000f64.powf(u)) as u64; // log-uniform: a few items dominate
            format!("item:{rank}").into_bytes()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let items = items();
    let mut g = c.benchmark_group("sketches");
    g.throughput(Throughput::Elements(N as u64));

    // CMS.INITBYPROB k 0.001 0.01 → 2000 × 7, the size RedisBloom's docs use.
    let (w, d) = dims_for_error(0.001, 0.01);
    let mut cms = CountMinSketch::new(w, d).unwrap();
    g.bench_function("cms_incrby_100k_2000x7", |b| {
        b.iter(|| {
            for it in &items {
                black_box(cms.incr_by(it, 1));
            }
        })
    });
    g.bench_function("cms_query_100k_2000x7", |b| {
        b.iter(|| items.iter().map(|it| cms.query(it) as u64).sum::<u64>())
    });

    // TOPK.RESERVE k 10 (8 × 7, decay 0.9): constant collisions and decay draws.
    g.bench_function("topk_add_100k_k10_default", |b| {
        b.iter_batched(
            || TopK::new(10, 8, 7, 0.9).unwrap(),
            |mut t| {
                for it in &items {
                    black_box(t.insert(it, 1));
                }
                t
            },
            criterion::BatchSize::LargeInput,
        )
    });
    // TOPK.RESERVE k 50 2000 7 0.925: a sized sketch, as RedisBloom's docs recommend.
    g.bench_function("topk_add_100k_k50_2000x7", |b| {
        b.iter_batched(
            || TopK::new(50, 2000, 7, 0.925).unwrap(),
            |mut t| {
                for it in &items {
                    black_box(t.insert(it, 1));
                }
                t
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
