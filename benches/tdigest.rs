//! Criterion benches for the t-digest store: TDIGEST.ADD and TDIGEST.QUANTILE without the network.
//!
//! Run briefly: `cargo bench --bench tdigest -- --warm-up-time 1 --measurement-time 3`.
//! ADD's cost is dominated by the compressions it triggers (one sort + merge pass per `cap − 1`
//! buffered values); QUANTILE on a compressed digest is a walk over the centroids.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hyperbloom::store::tdigest::TDigest;

const N: usize = 100_000;

/// Deterministic values in [0, 1000) in random order (xorshift64*).
fn values() -> Vec<f64> {
    let mut x: u64 = 0x9e3779b97f4a7c15;
    (0..N)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545f4914f6cdd1d) >> 11) as f64 / (1u64 << 53) as f64 * 1000.0
        })
        .collect()
}

fn filled(compression: f64, vals: &[f64]) -> TDigest {
    let mut td = TDigest::new(compression).unwrap();
    for &v in vals {
        td.add(v, 1).unwrap();
    }
    td
}

fn bench(c: &mut Criterion) {
    let vals = values();
    let mut g = c.benchmark_group("tdigest");

    g.throughput(Throughput::Elements(N as u64));
    for compression in [100.0, 1000.0] {
        g.bench_function(format!("add_100k_c{compression}"), |b| {
            b.iter(|| filled(compression, black_box(&vals)))
        });
    }

    let qs: Vec<f64> = (0..=100).map(|i| i as f64 / 100.0).collect();
    g.throughput(Throughput::Elements(qs.len() as u64));
    let mut compressed = filled(100.0, &vals);
    compressed.compress().unwrap();
    g.bench_function("quantile_101_compressed_c100", |b| {
        b.iter(|| black_box(compressed.quantiles(black_box(&qs))))
    });
    // With a full buffer: QUANTILE compresses first, as it does after a burst of ADDs.
    let buffered = {
        let mut td = filled(100.0, &vals);
        for &v in &vals[..600] {
            td.add(v, 1).unwrap();
        }
        td
    };
    g.bench_function("quantile_101_after_buffer_c100", |b| {
        b.iter_batched(
            || buffered.clone(),
            |mut td| black_box(td.quantiles(&qs)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
