//! ns per add / exists on a 1-link and a 13-link chain, and per item of a 10-item MADD.
//!
//! Run with `cargo bench --bench bloom` (keep it short on shared machines:
//! `-- --warm-up-time 1 --measurement-time 2`).
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hyperbloom::store::bloom::ScalingBloom;

fn items(n: usize, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}:{i}").into_bytes()).collect()
}

/// A chain (rate 0.01, growth 2, first link of `cap` items) with `links` links, its last link half
/// full so that the add benchmark's 10 000 new items never make it scale.
fn chain(links: usize, cap: u64) -> ScalingBloom {
    let mut bf = ScalingBloom::create(cap, 0.01, 2, false).expect("create");
    let mut i = 0u64;
    while bf.nfilters() < links
        || bf
            .links()
            .last()
            .is_some_and(|l| l.size() < l.entries() / 2)
    {
        let _ = bf.add(format!("fill:{i}").as_bytes());
        i += 1;
    }
    bf
}

fn bench(c: &mut Criterion) {
    // 1 link of 100 000 items (120 KB) and 13 links from 100 items (2 MB in all).
    for (links, cap) in [(1usize, 100_000u64), (13, 100)] {
        let base = chain(links, cap);
        let probe = items(4096, "probe");
        let mut g = c.benchmark_group(format!("bloom_{links}_links"));
        g.throughput(Throughput::Elements(1));
        let mut n = 0usize;
        g.bench_function("exists_absent", |b| {
            b.iter(|| {
                n = (n + 1) & 4095;
                black_box(base.exists(black_box(&probe[n])))
            })
        });
        let present = items(4096, "fill");
        g.bench_function("exists_present", |b| {
            b.iter(|| {
                n = (n + 1) & 4095;
                black_box(base.exists(black_box(&present[n])))
            })
        });
        // Adds of new items into a copy (the copy is cheap: pages are shared, copied on write).
        let fresh = items(10_000, "new");
        let mut bf = base.clone();
        let mut k = 0usize;
        g.bench_function("add_new", |b| {
            b.iter(|| {
                k += 1;
                if k == fresh.len() {
                    k = 0;
                    bf = base.clone();
                }
                black_box(bf.add(black_box(&fresh[k])))
            })
        });
        g.finish();
    }
    // MADD of 10 new items, the loop BF.MADD runs after one key lookup.
    let base = chain(1, 100_000);
    let fresh = items(10_000, "madd");
    let mut bf = base.clone();
    let mut k = 0usize;
    let mut g = c.benchmark_group("bloom_madd10");
    g.throughput(Throughput::Elements(10));
    g.bench_function("madd_10_items", |b| {
        b.iter(|| {
            k += 10;
            if k >= fresh.len() {
                k = 0;
                bf = base.clone();
            }
            for it in &fresh[k..k + 10] {
                black_box(bf.add(it).ok());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
