//! Times LZF decompression of a sparse Bloom-like bit array (the shape that dominates loading a
//! big Bloom filter): `cargo run --release --example lzf_decode -- [MB] [bits per byte*1000] [rounds]`.
//! Prints the compressed size and the median decode time of the streamed and the whole decoder.
use hyperbloom::persistence::lzf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mb: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(36);
    let density: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(110);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let n = mb << 20;
    let mut data = vec![0u8; n];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..(n as u64 * density / 1000) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bit = (x % (n as u64 * 8)) as usize;
        data[bit / 8] |= 1 << (bit % 8);
    }
    let c = lzf::compress(&data, n).expect("compressible");
    println!("{} MB -> {} bytes compressed", mb, c.len());
    if let Ok(path) = std::env::var("LZF_DUMP") {
        std::fs::write(path, &c).expect("writable dump path");
    }
    let mut times = Vec::new();
    let mut sum = 0u64;
    for _ in 0..rounds {
        let t = Instant::now();
        lzf::decompress_streamed(&c, n, |p| {
            sum = sum.wrapping_add(p[p.len() / 2] as u64);
            true
        })
        .expect("valid");
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    println!("streamed: median {:.1} ms", times[rounds / 2] * 1e3);
    let mut times = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let v = lzf::decompress(&c, n).expect("valid");
        times.push(t.elapsed().as_secs_f64());
        assert!(v == data);
    }
    times.sort_by(f64::total_cmp);
    println!("whole: median {:.1} ms ({sum})", times[rounds / 2] * 1e3);
}
