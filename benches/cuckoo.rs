//! Criterion benches for the cuckoo filter store: CF.ADD, CF.EXISTS and CF.DEL without the network.
//!
//! Run briefly: `cargo bench --bench cuckoo -- --warm-up-time 1 --measurement-time 3`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hyperbloom::store::cuckoo::CuckooFilter;

const N: usize = 100_000;

fn items(prefix: &str) -> Vec<Vec<u8>> {
    (0..N)
        .map(|i| format!("{prefix}:{i}").into_bytes())
        .collect()
}

fn bench(c: &mut Criterion) {
    let present = items("in");
    let absent = items("out");
    let mut g = c.benchmark_group("cuckoo");
    g.throughput(Throughput::Elements(N as u64));

    // ADD into a default-sized filter (1024 capacity, grows), as CF.ADD on a fresh key does.
    g.bench_function("add_100k_growing", |b| {
        b.iter(|| {
            let mut cf = CuckooFilter::new(1024, 2, 20, 1).unwrap();
            for it in &present {
                black_box(cf.insert(it));
            }
            cf
        })
    });

    // ADD into a filter reserved for the whole load.
    g.bench_function("add_100k_reserved", |b| {
        b.iter(|| {
            let mut cf = CuckooFilter::new(2 * N as u64, 2, 20, 1).unwrap();
            for it in &present {
                black_box(cf.insert(it));
            }
            cf
        })
    });

    let mut full = CuckooFilter::new(2 * N as u64, 2, 20, 1).unwrap();
    for it in &present {
        full.insert(it);
    }
    g.bench_function("exists_100k_hits", |b| {
        b.iter(|| present.iter().filter(|it| full.contains(it)).count())
    });
    g.bench_function("exists_100k_misses", |b| {
        b.iter(|| absent.iter().filter(|it| full.contains(it)).count())
    });

    g.bench_function("del_100k", |b| {
        b.iter_batched(
            || full.clone(),
            |mut cf| {
                for it in &present {
                    black_box(cf.delete(it));
                }
                cf
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
