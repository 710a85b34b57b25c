//! ns per add / exists on a 1-link and a 13-link chain, per item of a 10-item MADD, and for a
//! large filter (a 120 MB link with every page written): exists, add, and the snapshot clone (the
//! page-table copy a BGSAVE makes under the keyspace lock). The page size in store/bloom.rs was
//! chosen with these (its essay has the numbers).
//!
//! Run with `cargo bench --bench bloom` (keep it short on shared machines:
//! `-- --warm-up-time 1 --measurement-time 2`).
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hyperbloom::store::bloom::ScalingBloom;

fn items(n: usize, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}:{i}").into_bytes()).collect()
}

/// A chain (rate 0.01, first link of `cap` items, each next link `growth` times larger) with `links`
/// links, its last link half full so that the add benchmark's 10 000 new items never make it scale.
fn chain(links: usize, cap: u64, growth: u32) -> ScalingBloom {
    let mut bf = ScalingBloom::create(cap, 0.01, growth, false).expect("create");
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
    // 1 link of 100 000 items (120 KB), 13 links from 100 items (2 MB in all), and the load
    // benchmark's "12 links" chain (scripts/bench_load.py: EXPANSION 1, 1 000 items per link,
    // ~40 KB, in the core's L2: a lookup there is arithmetic, not cache misses).
    for (links, cap, growth) in [(1usize, 100_000u64, 2u32), (13, 100, 2), (12, 1000, 1)] {
        let base = chain(links, cap, growth);
        let mut g = c.benchmark_group(format!("bloom_{links}_links_x{growth}"));
        g.throughput(Throughput::Elements(1));
        // Every absent item is new (8 bytes from a counter): cycling through a few thousand
        // lets the branch predictor learn which probe of which link turns each one away, which
        // no real stream of lookups allows (ScalingBloom::any_link_holds).
        let mut absent = 1u64 << 40;
        g.bench_function("exists_absent", |b| {
            b.iter(|| {
                absent += 1;
                let item = absent.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
                black_box(base.exists(black_box(&item)))
            })
        });
        let mut n = 0usize;
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
    let base = chain(1, 100_000, 2);
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

/// A link of 100 M items at 0.01 (~120 MB), every page written with pseudo-random bytes, so probes
/// see a dense array far larger than the caches, as in a big production filter.
fn large(c: &mut Criterion) {
    let mut base = ScalingBloom::create(100_000_000, 0.01, 2, true).expect("create");
    let bytes = base.links()[0].bytes();
    let header = base.header();
    let mut seed = 0x9E3779B97F4A7C15u64;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed as u8) & (seed >> 8) as u8 // ~1/4 of the bits set
        })
        .collect();
    let mut restored = ScalingBloom::from_header(&header).expect("header");
    let mut off = 0u64;
    while off < bytes {
        let n = (bytes - off).min(chunk.len() as u64);
        restored
            .load_chunk((off + n + 1) as i64, &chunk[..n as usize])
            .expect("chunk");
        off += n;
    }
    base = restored;
    let probe = items(4096, "probe");
    let mut g = c.benchmark_group("bloom_large_120MB");
    g.throughput(Throughput::Elements(1));
    let mut n = 0usize;
    g.bench_function("exists_absent", |b| {
        b.iter(|| {
            n = (n + 1) & 4095;
            black_box(base.exists(black_box(&probe[n])))
        })
    });
    let fresh = items(1 << 16, "new");
    let mut bf = base.clone();
    let mut k = 0usize;
    g.bench_function("add_new_unshared", |b| {
        b.iter(|| {
            k = (k + 1) & 0xffff;
            black_box(bf.add(black_box(&fresh[k])))
        })
    });
    g.bench_function("snapshot_clone", |b| b.iter(|| black_box(base.clone())));
    g.finish();
}

criterion_group!(benches, bench, large);
criterion_main!(benches);
