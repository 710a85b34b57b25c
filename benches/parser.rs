//! Request parser and reply encoder throughput.
//!
//! Each parser bench parses a pipelined buffer of 1000 commands, so criterion's per-element figure
//! (`Throughput::Elements`) reads as time per command; the buffer copy is done in the untimed setup.
//! Run briefly with `cargo bench --bench parser -- --warm-up-time 1 --measurement-time 2`.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hyperbloom::protocol::parser::{ParserLimits, RequestParser};
use hyperbloom::protocol::Reply;

const N: usize = 1000;

fn bench_parser(c: &mut Criterion) {
    let mut g = c.benchmark_group("parser");
    g.throughput(Throughput::Elements(N as u64));

    let mut set = BytesMut::new();
    for i in 0..N {
        let key = format!("key:{i}");
        let val = format!("value{i}");
        set.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{val}\r\n",
                key.len(),
                val.len()
            )
            .as_bytes(),
        );
    }
    g.bench_function("multibulk_set_x1000", |b| {
        b.iter_batched_ref(|| set.clone(), parse_buf, BatchSize::SmallInput)
    });

    let mut ping = BytesMut::new();
    for _ in 0..N {
        ping.extend_from_slice(b"PING\r\n");
    }
    g.bench_function("inline_ping_x1000", |b| {
        b.iter_batched_ref(|| ping.clone(), parse_buf, BatchSize::SmallInput)
    });
    g.finish();
}

fn parse_buf(buf: &mut BytesMut) {
    let limits = ParserLimits::default();
    let mut parser = RequestParser::new();
    let mut n = 0;
    while let Ok(Some(req)) = parser.next_request(buf, &limits) {
        black_box(&req);
        n += 1;
    }
    assert_eq!(n, N);
}

fn bench_encoder(c: &mut Criterion) {
    let mut g = c.benchmark_group("reply_encode");
    let mut out = BytesMut::with_capacity(4096);
    let int = Reply::Int(1234567);
    g.bench_function("int", |b| {
        b.iter(|| {
            out.clear();
            black_box(&int).encode(2, &mut out);
        })
    });
    let bulk = Reply::Bulk(Bytes::from_static(b"some value of 20 b.."));
    g.bench_function("bulk_20b", |b| {
        b.iter(|| {
            out.clear();
            black_box(&bulk).encode(2, &mut out);
        })
    });
    let arr = Reply::Array(
        (0..10)
            .map(|i| Reply::Bulk(Bytes::from(format!("element-{i}"))))
            .collect(),
    );
    g.bench_function("array_10_bulks", |b| {
        b.iter(|| {
            out.clear();
            black_box(&arr).encode(2, &mut out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_parser, bench_encoder);
criterion_main!(benches);
