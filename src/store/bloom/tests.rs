//! Unit, property and statistical tests of the Bloom chain. Expected numbers come from bloom.md
//! (checked there against RedisBloom 2.6.28 and the current RedisBloom test suite).

use super::*;
use proptest::prelude::*;

/// Deterministic item generator (splitmix64), so statistical tests are reproducible.
struct Items(u64);
impl Items {
    fn next_item(&mut self) -> [u8; 16] {
        let mut out = [0u8; 16];
        for half in out.chunks_exact_mut(8) {
            half.copy_from_slice(&crate::store::splitmix64(&mut self.0).to_le_bytes());
        }
        out
    }
}

fn reserve(error: f64, cap: u64) -> ScalingBloom {
    ScalingBloom::create(cap, error, 2, false).expect("create")
}

#[test]
fn link_sizes_match_table() {
    // bloom.md §7.5: (entries, link error, bytes, bits, k).
    let table: &[(u64, f64, u64, u64, u32)] = &[
        (10, 0.005, 16, 128, 8),
        (100, 0.005, 144, 1152, 8),
        (100, 0.01, 120, 960, 7),
        (2, 0.01, 8, 64, 7),
        (100, 0.0005, 200, 1600, 11),
        (1000, 0.005, 1384, 11072, 8),
        (1000, 0.0005, 1984, 15872, 11),
        (1000, 0.025, 960, 7680, 6),
        (100, 0.125, 56, 448, 4),
        (100, 0.25, 40, 320, 3),
        (50000, 0.0005, 98880, 791040, 11),
        (300000000, 5e-7, 1132420136, 9059361088, 21),
    ];
    for &(entries, error, bytes, bits, k) in table {
        let s = size_link(entries, error, OPT_FORCE64 | OPT_NOROUND).expect("size");
        assert_eq!(
            (s.bytes, s.bits, s.hashes, s.entries, s.n2),
            (bytes, bits, k, entries, 0),
            "entries {entries} error {error}"
        );
    }
    let s = size_link(100, 0.005, OPT_FORCE64 | OPT_NOROUND).expect("size");
    assert_eq!(s.bpe, 11.027753418256411);
}

#[test]
fn foo_sets_the_documented_bits() {
    let mut bf = reserve(0.01, 100);
    assert_eq!(bf.add(b"foo"), Ok(true));
    let bytes = bf.links()[0].to_bytes();
    let set: Vec<u64> = (0..1152u64)
        .filter(|&x| bytes[(x >> 3) as usize] & (1 << (x & 7)) != 0)
        .collect();
    assert_eq!(set, vec![21, 25, 145, 269, 475, 599, 723, 847]);
    assert_eq!(bf.add(b"foo"), Ok(false));
    assert!(bf.exists(b"foo"));
    assert_eq!(bf.size(), 1);
}

#[test]
fn header_matches_redisbloom() {
    let mut bf = reserve(0.01, 100);
    bf.add(b"foo").expect("add");
    let hex: String = bf.header().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        concat!(
            "0100000000000000",
            "01000000",
            "05000000",
            "02000000",
            "9000000000000000",
            "8004000000000000",
            "0100000000000000",
            "7b14ae47e17a743f",
            "e9862fb2350e2640",
            "08000000",
            "6400000000000000",
            "00"
        )
    );
    assert_eq!(
        bf.scandump_chunk(1).map(|(it, c)| (it, c.len())),
        Some((145, 144))
    );
    assert_eq!(bf.scandump_chunk(145), None);
    assert_eq!(bf.scandump_chunk(0), None);
    assert_eq!(bf.scandump_chunk(-1), None);

    let mut bf = reserve(0.001, 1000);
    for i in 0..4 {
        bf.add(format!("x{i}").as_bytes()).expect("add");
    }
    let hex: String = bf.header().iter().map(|b| format!("{b:02x}")).collect();
    let want = "0400000000000000 01000000 05000000 02000000 c007000000000000 003e000000000000 \
                0400000000000000 fca9f1d24d62403f 2e92f414fca32f40 0b000000 e803000000000000 00";
    assert_eq!(hex, want.replace([' ', '\n'], ""));
}

#[test]
fn info_sizes() {
    let i = reserve(0.01, 100).info();
    assert_eq!(
        i,
        BloomInfo {
            capacity: 100,
            size: 240,
            filters: 1,
            items: 0,
            expansion: Some(2)
        }
    );
    assert_eq!(reserve(0.001, 100).info().size, 296);
    let ns = ScalingBloom::create(3, 0.01, 2, true).expect("create");
    assert_eq!(ns.info().size, 104);
    assert_eq!(ns.info().expansion, None);
    assert_eq!(ns.options(), 13);
    assert_eq!(ns.growth(), 2);
    assert_eq!(reserve(0.05, 1000).memory_usage(), 1056);
}

#[test]
fn debug_scaling_example() {
    let mut bf = reserve(0.01, 10);
    for i in 0..100 {
        bf.add(i.to_string().as_bytes()).expect("add");
    }
    assert_eq!(
        bf.debug_lines(),
        vec![
            "size:99",
            "bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:10 ratio:0.005",
            "bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 size:20 ratio:0.0025",
            "bytes:72 bits:576 hashes:10 hashwidth:64 capacity:40 size:40 ratio:0.00125",
            "bytes:160 bits:1280 hashes:11 hashwidth:64 capacity:80 size:29 ratio:0.000625",
        ]
    );
}

#[test]
fn debug_six_links_example() {
    let mut bf = reserve(0.001, 100);
    for i in 0..4000 {
        bf.add(i.to_string().as_bytes()).expect("add");
    }
    let lines = bf.debug_lines();
    assert_eq!(lines[0], "size:3997");
    assert_eq!(bf.nfilters(), 6);
    let caps: Vec<u64> = bf.links().iter().map(|l| l.entries()).collect();
    assert_eq!(caps, vec![100, 200, 400, 800, 1600, 3200]);
    let bytes: Vec<u64> = bf.links().iter().map(|l| l.bytes()).collect();
    assert_eq!(bytes, vec![200, 432, 936, 2016, 4320, 9216]);
    let ks: Vec<u32> = bf.links().iter().map(|l| l.hashes()).collect();
    assert_eq!(ks, vec![11, 12, 13, 14, 15, 16]);
    let ratios: Vec<String> = lines[1..]
        .iter()
        .map(|l| l.rsplit("ratio:").next().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        ratios,
        vec![
            "0.0005",
            "0.00025",
            "0.000125",
            "6.25e-05",
            "3.125e-05",
            "1.5625e-05"
        ]
    );
    assert_eq!(bf.links()[5].size(), 897);
}

#[test]
fn insert_large_capacity_debug() {
    let mut bf = ScalingBloom::create(50000, 0.001, 2, false).expect("create");
    bf.add(b"foo").expect("add");
    assert_eq!(
        bf.debug_lines(),
        vec![
            "size:1",
            "bytes:98880 bits:791040 hashes:11 hashwidth:64 capacity:50000 size:1 ratio:0.0005"
        ]
    );
}

#[test]
fn nonscaling_full() {
    let mut bf = ScalingBloom::create(2, 0.01, 2, true).expect("create");
    assert_eq!(bf.add(b"x"), Ok(true));
    assert_eq!(bf.add(b"y"), Ok(true));
    assert_eq!(bf.add(b"z"), Err(AddError::Full));
    assert_eq!(bf.add(b"x"), Ok(false));
    assert_eq!(bf.size(), 2);
}

#[test]
fn growth_zero_scaling_chain_fails_to_scale() {
    // Only a crafted dump can hold this: scaling with growth 0.
    let mut bf = ScalingBloom::create(1, 0.01, 0, false).expect("create");
    assert_eq!(bf.add(b"a"), Ok(true));
    assert_eq!(bf.add(b"b"), Err(AddError::Failed));
}

#[test]
fn huge_reserve_is_out_of_memory_not_abort() {
    let r = ScalingBloom::create(1 << 30, 1e-300, 2, false);
    assert_eq!(r.err(), Some(CreateError::OutOfMemory));
    // Zero error after halving the smallest subnormal is invalid, not an allocation problem.
    let r = ScalingBloom::create(100, 5e-324, 2, false);
    assert_eq!(r.err(), Some(CreateError::Invalid));
}

#[test]
fn reserved_filter_costs_no_pages() {
    // 1.1 GB of bits, none resident until written: only the page table (16 bytes a page).
    let mut bf = ScalingBloom::create(300_000_000, 0.000001, 2, false).expect("create");
    assert_eq!(bf.info().size, 1132420232);
    let table = 1132420232u64.div_ceil(PAGE_BYTES as u64) * 16;
    assert!(
        bf.resident_bytes() < table + 4096,
        "{}",
        bf.resident_bytes()
    );
    bf.add(b"a").expect("add");
    // k = 20 probes: at most 20 pages.
    assert!(bf.resident_bytes() < table + 4096 + 20 * PAGE_BYTES as u64);
    assert!(bf.exists(b"a"));
}

/// Builds a header by hand: chain fields and a list of link tuples.
#[allow(clippy::type_complexity)]
fn header(
    size: u64,
    options: u32,
    growth: u32,
    links: &[(u64, u64, u64, f64, f64, u32, u64, u8)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&(links.len() as u32).to_le_bytes());
    h.extend_from_slice(&options.to_le_bytes());
    h.extend_from_slice(&growth.to_le_bytes());
    for &(bytes, bits, sz, err, bpe, k, entries, n2) in links {
        h.extend_from_slice(&bytes.to_le_bytes());
        h.extend_from_slice(&bits.to_le_bytes());
        h.extend_from_slice(&sz.to_le_bytes());
        h.extend_from_slice(&err.to_le_bytes());
        h.extend_from_slice(&bpe.to_le_bytes());
        h.extend_from_slice(&k.to_le_bytes());
        h.extend_from_slice(&entries.to_le_bytes());
        h.push(n2);
    }
    h
}

#[test]
fn crafted_header_with_huge_entries() {
    // bloom.md §11 bug 1: a scale-out that would need ~2.8e14 bytes must fail cleanly.
    let n = 0x00014874ddf31811u64;
    let h = header(n, 1, 1, &[(1, 8, n, 0.1, 0.1, 1, n, 0)]);
    let mut bf = ScalingBloom::from_header(&h).expect("valid header");
    assert_eq!(bf.add(b"1"), Err(AddError::Failed));
    assert_eq!(
        bf.load_chunk(71752852194637, b"HELLO"),
        Err(ChunkError::NoLink)
    );
}

#[test]
fn header_validation() {
    let good = (
        144u64,
        1152u64,
        0u64,
        0.005f64,
        11.027753418256411f64,
        8u32,
        100u64,
        0u8,
    );
    assert!(ScalingBloom::from_header(&header(0, 5, 2, &[good])).is_ok());
    let bad = |h: Vec<u8>| {
        assert_eq!(
            ScalingBloom::from_header(&h).err(),
            Some(ChunkError::BadData)
        )
    };
    let h = header(0, 5, 2, &[good]);
    bad(h[..h.len() - 1].to_vec());
    bad([&h[..], &[0]].concat());
    bad(Vec::new());
    bad(h[..20].to_vec());
    bad(header(0, 5, 2, &[]));
    bad(header(0, 16 | 5, 2, &[good]));
    bad(header(1, 5, 2, &[good]));
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, 0.0, good.4, good.5, 100, 0)],
    ));
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, 1.5, good.4, good.5, 100, 0)],
    ));
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, f64::NAN, good.4, good.5, 100, 0)],
    ));
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, good.3, good.4, 9, 100, 0)],
    ));
    bad(header(
        0,
        5,
        2,
        &[(good.0, 1151, 0, good.3, good.4, good.5, 100, 0)],
    ));
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, good.3, good.4, good.5, 100, 64)],
    ));
    // n2 = 11 needs bits ≥ 2048 but has 1152.
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, good.3, good.4, good.5, 100, 11)],
    ));
    // Terabytes of bits.
    bad(header(
        0,
        5,
        2,
        &[(1 << 50, 1 << 53, 0, good.3, good.4, good.5, 100, 0)],
    ));
    // An absurd k that matches its absurd bpe.
    bad(header(
        0,
        5,
        2,
        &[(good.0, good.1, 0, good.3, 1e7, 6931472, 100, 0)],
    ));
    // Link sizes overflowing when summed.
    bad(header(
        0,
        5,
        2,
        &[
            (good.0, good.1, u64::MAX, good.3, good.4, good.5, 100, 0),
            (good.0, good.1, 2, good.3, good.4, good.5, 100, 0),
        ],
    ));
    // A huge nfilters with a short buffer is refused by the length rule.
    let mut h = header(0, 5, 2, &[good]);
    h[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    bad(h);
}

/// Dumps `bf` the way a client does and restores it into a fresh chain.
fn round_trip(bf: &ScalingBloom) -> ScalingBloom {
    let mut chunks = Vec::new();
    let mut it = 1i64;
    while let Some((next, data)) = bf.scandump_chunk(it) {
        chunks.push((next, data));
        it = next;
    }
    let mut copy = ScalingBloom::from_header(&bf.header()).expect("header");
    for (it, data) in chunks {
        copy.load_chunk(it, &data).expect("chunk");
    }
    copy
}

#[test]
fn scandump_loadchunk_round_trip() {
    let mut bf = ScalingBloom::create(10, 0.01, 3, false).expect("create");
    let mut gen = Items(7);
    for _ in 0..500 {
        bf.add(&gen.next_item()).expect("add");
    }
    assert!(bf.nfilters() >= 4);
    let copy = round_trip(&bf);
    assert_eq!(copy.header(), bf.header());
    assert_eq!(copy.debug_lines(), bf.debug_lines());
    for (a, b) in bf.links().iter().zip(copy.links()) {
        assert_eq!(a.to_bytes(), b.to_bytes());
    }
    let mut probe = Items(99);
    for _ in 0..2000 {
        let item = probe.next_item();
        assert_eq!(bf.exists(&item), copy.exists(&item));
    }
}

#[test]
fn scandump_any_offset_and_chunk_errors() {
    let mut bf = ScalingBloom::create(1, 0.01, 2, false).expect("create");
    for i in 0..4 {
        bf.add(format!("i{i}").as_bytes()).expect("add");
    }
    let first = bf.links()[0].bytes();
    assert_eq!(first, 8);
    // An offset inside link 0 runs to the end of link 0 only.
    assert_eq!(
        bf.scandump_chunk(5).map(|(it, c)| (it, c.len())),
        Some((9, 4))
    );
    let total = bf.total_bytes() as i64;
    assert_eq!(bf.scandump_chunk(total + 1), None);
    assert!(bf.scandump_chunk(total).is_some());

    let mut copy = bf.clone();
    assert_eq!(copy.load_chunk(1, b"ab"), Err(ChunkError::BadData));
    assert_eq!(copy.load_chunk(0, b""), Err(ChunkError::BadData));
    assert_eq!(copy.load_chunk(-5, b"ab"), Err(ChunkError::BadData));
    assert_eq!(copy.load_chunk(3, b"abc"), Err(ChunkError::NoLink));
    assert_eq!(copy.load_chunk(1, b"a"), Err(ChunkError::NoLink));
    assert_eq!(copy.load_chunk(1000000, b"abc"), Err(ChunkError::NoLink));
    // Starting at byte 4 of the 8-byte link 0, 8 bytes run past it.
    assert_eq!(copy.load_chunk(13, &[0xff; 8]), Err(ChunkError::TooBig));
    assert_eq!(copy.load_chunk(1, b""), Ok(()));
    assert_eq!(copy.load_chunk(9, &[0xff; 4]), Ok(()));
    assert_eq!(&copy.links()[0].to_bytes()[4..], &[0xff; 4]);
}

#[test]
fn clones_share_pages_until_written() {
    let mut gen = Items(3);
    let mut bf = ScalingBloom::create(200_000, 0.01, 2, false).expect("create");
    for _ in 0..1000 {
        bf.add(&gen.next_item()).expect("add");
    }
    let snapshot = bf.clone();
    let before: Vec<u8> = snapshot.links()[0].to_bytes();
    for _ in 0..1000 {
        bf.add(&gen.next_item()).expect("add");
    }
    assert_eq!(snapshot.links()[0].to_bytes(), before);
    assert_ne!(bf.links()[0].to_bytes(), before);
    assert_eq!(snapshot.size(), 1000);
    assert_eq!(bf.size(), 2000);
}

/// The add path writes a large filter's pages in place, checking once for the whole array that
/// no clone shares them ([`Pages::lineage`]). A clone of a clone shares the token too: while any
/// clone lives, the adds must leave every clone's bits alone; once all are gone they write in
/// place again. Fails if the token is not shared through clones of clones (the first snapshot
/// dropped, the second's bits would change).
#[test]
fn the_in_place_add_path_spares_every_living_clone() {
    let mut gen = Items(5);
    // 2.4 MB in 2 KiB pages: paged, and large enough for the add path's prefetch.
    let mut bf = ScalingBloom::create(2_000_000, 0.01, 2, false).expect("create");
    let add_batch = |bf: &mut ScalingBloom, gen: &mut Items| {
        let items: Vec<[u8; 16]> = (0..1000).map(|_| gen.next_item()).collect();
        let (answers, err) = bf.add_all(&items);
        assert_eq!(err, None);
        assert_eq!(answers.len(), items.len());
        items
    };
    let first = add_batch(&mut bf, &mut gen);
    let snapshot = bf.clone();
    let snapshot_of_snapshot = snapshot.clone();
    let before = snapshot_of_snapshot.links()[0].to_bytes();
    drop(snapshot);
    let second = add_batch(&mut bf, &mut gen);
    assert_eq!(snapshot_of_snapshot.links()[0].to_bytes(), before);
    assert!(second.iter().any(|i| !snapshot_of_snapshot.exists(i)));
    drop(snapshot_of_snapshot);
    let third = add_batch(&mut bf, &mut gen);
    for item in first.iter().chain(&second).chain(&third) {
        assert!(bf.exists(item));
    }
    assert!(bf.size() > 2900);
}

#[test]
fn raw_parts_round_trip_and_validation() {
    let mut bf = ScalingBloom::create(5, 0.05, 2, false).expect("create");
    let mut gen = Items(11);
    for _ in 0..40 {
        bf.add(&gen.next_item()).expect("add");
    }
    let raw: Vec<RawLink> = bf
        .links()
        .iter()
        .map(|l| RawLink {
            entries: l.entries(),
            error: l.error(),
            bpe: l.bpe(),
            hashes: l.hashes() as u64,
            bits: l.bits(),
            n2: l.n2() as u64,
            size: l.size(),
            data: BitArray::from_bytes(&l.bit_slices().flatten().copied().collect::<Vec<u8>>())
                .expect("bits"),
        })
        .collect();
    let copy = ScalingBloom::from_raw_parts(bf.size(), bf.options(), bf.growth(), raw.clone())
        .expect("valid");
    assert_eq!(copy.header(), bf.header());
    let mut broken = raw.clone();
    let short = broken[0].data.len() - 1;
    broken[0].data = BitArray::zeroed(short).expect("bits");
    assert_eq!(
        ScalingBloom::from_raw_parts(bf.size(), bf.options(), bf.growth(), broken).err(),
        Some(RawPartsError::BadLink)
    );
    let mut broken = raw.clone();
    broken[0].n2 = 300;
    assert!(ScalingBloom::from_raw_parts(0, 5, 2, broken).is_err());
    assert_eq!(
        ScalingBloom::from_raw_parts(0, 5, 2, Vec::new()).err(),
        Some(RawPartsError::NoLinks)
    );
}

#[test]
fn legacy_layouts_load_and_scale() {
    // A 32-bit-hash chain with a power-of-two link (options 0: neither NOROUND nor FORCE64).
    // entries 100 at 0.01: bpe 9.585, 958.5 bits → n2 10, 1024 bits, 128 bytes, k 7.
    let s = size_link(100, 0.01, 0).expect("size");
    assert_eq!((s.n2, s.bits, s.bytes, s.hashes), (10, 1024, 128, 7));
    assert_eq!(s.entries, 100 + ((1024.0 - 100.0 * s.bpe) / s.bpe) as u64);
    let h = header(
        0,
        0,
        2,
        &[(s.bytes, s.bits, 0, 0.01, s.bpe, s.hashes, s.entries, s.n2)],
    );
    let mut bf = ScalingBloom::from_header(&h).expect("header");
    assert!(bf.add(b"apple").expect("add"));
    assert!(bf.exists(b"apple"));
    assert!(bf.debug_lines()[1].contains("hashwidth:32"));
    for i in 0..300 {
        bf.add(format!("{i}").as_bytes()).expect("add");
    }
    assert!(bf.nfilters() > 1);
    assert!(bf.links().iter().all(|l| l.n2() > 0));
    // ENTS_IS_BITS: entries is log2 of the bit count.
    let s = size_link(12, 0.01, OPT_ENTS_IS_BITS).expect("size");
    assert_eq!((s.n2, s.bits, s.bytes), (12, 4096, 512));
    assert!(size_link(64, 0.01, OPT_ENTS_IS_BITS).is_err());
}

/// The false-positive rate the realised bit density predicts for `bf`: a link of `m` bits whose
/// fraction `f` of bits is set answers a stranger with probability about `f^k`, plus `f/m` for the
/// strangers whose `b ≡ 0 (mod m)` (double hashing then probes one bit `k` times, a property of
/// RedisBloom's scheme that matters for tiny links); the chain answers yes if any link does.
fn predicted_fp(bf: &ScalingBloom) -> f64 {
    1.0 - bf
        .links()
        .iter()
        .map(|l| {
            let ones: u32 = l.to_bytes().iter().map(|b| b.count_ones()).sum();
            let m = l.bits() as f64;
            let f = ones as f64 / m;
            1.0 - (f.powf(l.hashes() as f64) + f / m)
        })
        .product::<f64>()
}

/// Fills a chain to `fill` items, then measures the false-positive rate on `probes` items never
/// added, and checks it against theory (within 5 standard deviations) and against the rate.
fn check_fp(cap: u64, error: f64, growth: u32, fill: usize, want_links: usize, seed: u64) {
    const PROBES: usize = 200_000;
    let mut bf = ScalingBloom::create(cap, error, growth, false).expect("create");
    let mut gen = Items(seed);
    while (bf.size() as usize) < fill {
        bf.add(&gen.next_item()).expect("add");
    }
    assert_eq!(bf.nfilters(), want_links);
    // Probes come from another stream; 128-bit items from the two cannot collide in practice.
    let mut probe = Items(seed ^ 0xdead_beef_cafe_f00d);
    let fp = (0..PROBES)
        .filter(|_| bf.exists(&probe.next_item()))
        .count();
    let measured = fp as f64 / PROBES as f64;
    let predicted = predicted_fp(&bf);
    let sigma = (predicted * (1.0 - predicted) / PROBES as f64).sqrt();
    assert!(
        (measured - predicted).abs() <= 5.0 * sigma,
        "error {error}: measured {measured}, predicted {predicted}"
    );
    // Each link sits at (or a hair above, because k is rounded up) half its predecessor's rate,
    // so a chain filled exactly to capacity lands at the configured rate; 10% covers the rounding
    // of k and the sampling noise.
    assert!(
        measured <= error * 1.1,
        "error {error}: measured {measured} over {want_links} links"
    );
}

#[test]
fn false_positive_rate_single_link_at_capacity() {
    // Link 0 is built at error/2, so one full link measures about error/2.
    check_fp(20_000, 0.1, 2, 20_000, 1, 1);
    check_fp(20_000, 0.01, 2, 20_000, 1, 2);
    check_fp(20_000, 0.001, 2, 20_000, 1, 3);
}

#[test]
fn false_positive_rate_long_chains() {
    // 100·(1+2+4+8+16) = 3100 items fill 5 links exactly; 6300 fill 6.
    check_fp(100, 0.05, 2, 3100, 5, 4);
    check_fp(100, 0.01, 2, 6300, 6, 5);
    // At 0.001 the degenerate `b ≡ 0 (mod m)` probes of a 1600-bit link alone add ~3e-4, so the
    // chain starts at 1000 items (5 links: 31000 items) to test the scaling arithmetic instead.
    check_fp(1000, 0.001, 2, 31_000, 5, 6);
    // Growth 1: 8 equal links with halving rates.
    check_fp(500, 0.01, 1, 4000, 8, 8);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// No false negatives, whatever the items, capacity, rate and growth.
    #[test]
    fn no_false_negatives(
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 1..300),
        cap in 1u64..50,
        error in 0.0001f64..0.25,
        growth in 1u32..5,
        nonscaling in any::<bool>(),
    ) {
        let mut bf = ScalingBloom::create(cap, error, growth, nonscaling).expect("create");
        let mut added = Vec::new();
        for item in &items {
            match bf.add(item) {
                Ok(_) => added.push(item),
                Err(AddError::Full) => prop_assert!(nonscaling),
                Err(AddError::Failed) => prop_assert!(false, "scale-out failed"),
            }
        }
        for item in &added {
            prop_assert!(bf.exists(item));
        }
        // The batch forms answer exactly as item-by-item calls do.
        let mut batch = ScalingBloom::create(cap, error, growth, nonscaling).expect("create");
        let (answers, err) = batch.add_all(&items);
        let mut single = ScalingBloom::create(cap, error, growth, nonscaling).expect("create");
        let mut expected = Vec::new();
        let mut expected_err = None;
        for item in &items {
            match single.add(item) {
                Ok(v) => expected.push(v),
                Err(e) => { expected_err = Some(e); break; }
            }
        }
        prop_assert_eq!(answers, expected);
        prop_assert_eq!(err, expected_err);
        let probes: Vec<Vec<u8>> = items.iter().map(|i| [&i[..], b"?"].concat()).chain(items.iter().cloned()).collect();
        let one_by_one: Vec<bool> = probes.iter().map(|p| batch.exists(p)).collect();
        prop_assert_eq!(batch.exists_all(&probes), one_by_one);
        let sum: u64 = bf.links().iter().map(|l| l.size()).sum();
        prop_assert_eq!(sum, bf.size());
        let copy = round_trip(&bf);
        for item in &added {
            prop_assert!(copy.exists(item));
        }
    }

    /// Reading the head's bits before testing them answers as the bit-by-bit check does, on
    /// links from empty to overfull, flat (1 000 items) and paged (20 000), and with fewer
    /// hashes than the head (a loose rate).
    #[test]
    fn head_first_check_agrees_with_the_plain_check(
        (capacity, fill) in prop_oneof![(Just(1000u64), 0u64..1500), (Just(20_000u64), 0u64..30_000)],
        rate in prop_oneof![Just(0.01f64), Just(0.3f64), Just(0.0001f64)],
        pairs in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..200),
    ) {
        let mut bf = ScalingBloom::create(capacity, rate, 1, true).unwrap();
        // A non-scaling link refuses adds past its capacity; only the accepted are in it.
        let added: Vec<Vec<u8>> = (0..fill)
            .map(|i| format!("item:{i}").into_bytes())
            .filter(|item| bf.add(item).is_ok())
            .collect();
        let link = &bf.links()[0];
        prop_assert_eq!(matches!(link.data, PagedBits::Paged(_)), capacity > 1000);
        for (a, b) in pairs {
            prop_assert_eq!(link.holds(a, b), link.check(a, b));
        }
        for item in &added {
            let (a, b) = bf.hash(item);
            prop_assert!(link.holds(a, b));
        }
    }

    /// The division-free probe sequence equals `(a + i·b) mod 2^64 mod m` exactly.
    #[test]
    fn probes_match_the_direct_formula(
        a in any::<u64>(),
        b in any::<u64>(),
        m in prop_oneof![1u64..4096, 1u64..(1 << 40), 1u64..(1 << 63), Just(1u64 << 63)],
    ) {
        let modulus = Modulus { m, wrap: (u64::MAX % m + 1) % m };
        let mut probes = modulus.probes(a, b);
        for i in 0..64u64 {
            let want = a.wrapping_add(i.wrapping_mul(b)) % m;
            prop_assert_eq!(probes.next_bit(), want, "probe {}", i);
        }
    }

    /// Arbitrary bytes as a header never panic, and whatever loads keeps its invariants.
    #[test]
    fn header_fuzz(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(bf) = ScalingBloom::from_header(&data) {
            prop_assert_eq!(bf.header(), data);
        }
    }
}

/// Memory per key (issue 15): a default filter is the chain's allocation (first link inline) plus
/// one flat bit array; the link stays at 72 bytes so the chain fits a 112-byte malloc chunk.
#[test]
fn a_small_chain_is_two_allocations_of_known_size() {
    assert_eq!(std::mem::size_of::<Link>(), 72);
    assert_eq!(std::mem::size_of::<ScalingBloom>(), 96);
    let mut bf = ScalingBloom::create(100, 0.01, 2, false).unwrap();
    assert!(bf.add(b"x").unwrap());
    assert!(!bf.links.spilled());
    assert!(matches!(bf.links[0].data, PagedBits::Flat(_)));
    assert_eq!(bf.resident_bytes(), 96 + 144);
    // A link above FLAT_MAX is paged, and a chain that scales spills its links to the heap.
    let big = ScalingBloom::create(100_000, 0.01, 2, false).unwrap();
    assert!(matches!(big.links[0].data, PagedBits::Paged(_)));
    let mut grown = ScalingBloom::create(1, 0.01, 2, false).unwrap();
    for i in 0..10u32 {
        grown.add(&i.to_le_bytes()).unwrap();
    }
    assert!(grown.nfilters() > 1 && grown.links.spilled());
}

/// The batch's prefetch (`prefetch_item`, then `exists_prefetched` with the pair it answered)
/// never changes an answer, on a chain large enough to be prefetched and not on one too small
/// for it (where `prefetch_item` starts nothing and answers no hash).
#[test]
fn a_prefetch_hint_changes_no_answer() {
    let mut big = ScalingBloom::create(2_000_000, 0.01, 2, false).unwrap();
    let mut small = ScalingBloom::create(100, 0.01, 2, false).unwrap();
    for i in (0..2000u32).step_by(2) {
        big.add(&i.to_le_bytes()).unwrap();
        small.add(&i.to_le_bytes()).unwrap();
    }
    assert!(
        big.prefetch_item(b"x").is_some(),
        "a 2.4 MB link is worth prefetching"
    );
    assert!(small.prefetch_item(b"x").is_none(), "a link in L2 is not");
    assert!(big.hashes_wide(), "a new chain hashes with 64 bits");
    for i in 0..2000u32 {
        let item = i.to_le_bytes();
        let plain = big.exists(&item);
        let (a, b) = big.prefetch_item(&item).expect("worth prefetching");
        assert_eq!((a, b), crate::store::murmur::bloom_hash64(&item));
        assert_eq!(big.exists_prefetched(a, b), plain, "item {i}");
        if i % 2 == 0 {
            assert!(plain && small.exists(&item), "no false negative");
        }
    }
}
