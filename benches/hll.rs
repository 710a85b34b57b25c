//! HyperLogLog store benches: the per-element PFADD paths and the three read/merge shapes the
//! issue compares against Redis 7 (one cached key, a union of 3 dense keys, PFMERGE of 3 dense keys).
//! These measure the store functions alone; the protocol round trip is the load script's business.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hyperbloom::store::hll::{self, Registers, DEFAULT_SPARSE_MAX_BYTES, REGISTERS};

/// A dense HLL holding `n` distinct elements tagged by `seed`.
fn dense_key(seed: u64, n: u64) -> Vec<u8> {
    let mut v = hll::new_sparse();
    for i in 0..n {
        hll::add(
            &mut v,
            &(seed << 40 | i).to_le_bytes(),
            DEFAULT_SPARSE_MAX_BYTES,
        )
        .unwrap();
    }
    hll::sparse_to_dense(&mut v).unwrap();
    v
}

fn benches(c: &mut Criterion) {
    // PFADD of one element into a sparse value of a few hundred bytes (new elements each time,
    // periodically restarting so the value stays sparse).
    c.bench_function("pfadd/sparse per element", |b| {
        let mut v = hll::new_sparse();
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            if i.is_multiple_of(500) {
                v = hll::new_sparse();
            }
            hll::pfadd(
                &mut v,
                [&i.to_le_bytes()[..]],
                false,
                DEFAULT_SPARSE_MAX_BYTES,
            )
            .unwrap()
        })
    });
    c.bench_function("pfadd/dense per element", |b| {
        let mut v = dense_key(1, 100_000);
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            hll::pfadd(
                &mut v,
                [&i.to_le_bytes()[..]],
                false,
                DEFAULT_SPARSE_MAX_BYTES,
            )
            .unwrap()
        })
    });
    c.bench_function("pfcount/one cached key", |b| {
        let mut v = dense_key(2, 100_000);
        hll::count_cached(&mut v).unwrap();
        b.iter(|| hll::count_cached(black_box(&mut v)).unwrap())
    });
    c.bench_function("pfcount/one dense key, stale cache", |b| {
        let v = dense_key(2, 100_000);
        b.iter(|| hll::count(black_box(&v)).unwrap())
    });
    let keys = [
        dense_key(3, 50_000),
        dense_key(4, 50_000),
        dense_key(5, 50_000),
    ];
    c.bench_function("pfcount/3 dense keys", |b| {
        b.iter(|| {
            let mut max: Box<Registers> = Box::new([0u8; REGISTERS]);
            for k in &keys {
                hll::merge_into(&mut max, black_box(k)).unwrap();
            }
            hll::estimate(&hll::raw_histogram(&max))
        })
    });
    c.bench_function("internals/unpack one dense body", |b| {
        let mut out: Box<Registers> = Box::new([0u8; REGISTERS]);
        b.iter(|| hll::unpack_dense(black_box(&keys[0][16..]), &mut out))
    });
    c.bench_function("internals/raw histogram", |b| {
        let mut out: Box<Registers> = Box::new([0u8; REGISTERS]);
        hll::unpack_dense(&keys[0][16..], &mut out);
        b.iter(|| hll::raw_histogram(black_box(&out)))
    });
    c.bench_function("pfmerge/3 dense keys", |b| {
        let dest = dense_key(6, 1000);
        b.iter(|| {
            let mut d = dest.clone();
            let mut max: Box<Registers> = Box::new([0u8; REGISTERS]);
            hll::merge_into(&mut max, &d).unwrap();
            for k in &keys {
                hll::merge_into(&mut max, black_box(k)).unwrap();
            }
            hll::merge_apply(&mut d, &max, true, DEFAULT_SPARSE_MAX_BYTES).unwrap();
            d
        })
    });
}

criterion_group!(hll_benches, benches);
criterion_main!(hll_benches);
