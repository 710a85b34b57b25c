use super::*;
use proptest::prelude::*;

fn nonzero_cells(s: &CountMinSketch) -> Vec<u64> {
    (0..s.width() * s.depth())
        .filter(|&i| s.cell_value(i) != 0)
        .collect()
}

#[test]
fn cells_match_the_spec_worked_values() {
    // cms.md §6: the cells of one increment in a 20 × 5 sketch.
    for (item, cells) in [
        (&b"foo"[..], [13, 26, 56, 65, 87]),
        (b"", [0, 38, 57, 64, 91]),
        (b"hello", [15, 22, 51, 62, 86]),
        (b"a\x00b", [1, 35, 46, 72, 81]),
        (b"apple pie", [11, 23, 44, 64, 95]),
    ] {
        let mut s = CountMinSketch::new(20, 5).unwrap();
        assert_eq!(s.incr_by(item, 3), 3);
        assert_eq!(nonzero_cells(&s), cells, "{item:?}");
        assert_eq!(s.query(item), 3);
        assert_eq!(s.count(), 3);
    }
    assert_eq!(murmur2_32(b"foo", 0), 0x8fea6375);
    assert_eq!(murmur2_32(b"apple pie", 4), 0xbaee13bb);
}

#[test]
fn dump_example_counters() {
    // cms.md §11: CMS.INITBYDIM c 3 2; CMS.INCRBY c foo 7 bar 2.
    let mut s = CountMinSketch::new(3, 2).unwrap();
    s.incr_by(b"foo", 7);
    s.incr_by(b"bar", 2);
    let bytes: Vec<u8> = s.counter_pages().flat_map(|p| p.bytes().to_vec()).collect();
    let want: Vec<u8> = [0u32, 2, 7, 9, 0, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(bytes, want);
    let back = CountMinSketch::from_raw_parts(3, 2, 9, &bytes).unwrap();
    assert_eq!(back, s);
}

#[test]
fn saturation_follows_redisbloom_overflow_test() {
    // cms.md §8, on a 5 × 2 sketch, three rounds.
    let mut s = CountMinSketch::new(5, 2).unwrap();
    let round = |s: &mut CountMinSketch| -> Vec<u32> {
        [(&b"a"[..], 2147483647u64), (b"b", 10), (b"c", 7), (b"d", 5)]
            .iter()
            .map(|(i, v)| s.incr_by(i, *v))
            .collect()
    };
    assert_eq!(round(&mut s), [2147483647, 10, 17, 5]);
    assert_eq!(round(&mut s), [4294967294, 27, 34, 10]);
    assert_eq!(round(&mut s), [CELL_MAX, 44, 51, 15]);
    let q: Vec<u32> = [&b"a"[..], b"b", b"c", b"d"]
        .iter()
        .map(|i| s.query(i))
        .collect();
    assert_eq!(q, [4294967295, 51, 51, 15]);
    // Increments of 2^63 − 1 saturate every cell and wrap the total.
    let mut s = CountMinSketch::new(4, 3).unwrap();
    s.incr_by(b"x", i64::MAX as u64);
    s.incr_by(b"x", i64::MAX as u64);
    assert_eq!(s.query(b"x"), CELL_MAX);
    assert_eq!(s.count() as i64, -2);
}

#[test]
fn dims_from_probabilities() {
    // cms.md §7 examples.
    assert_eq!(dims_for_error(0.001, 0.01), (2000, 7));
    assert_eq!(dims_for_error(0.01, 0.01), (200, 7));
    assert_eq!(dims_for_error(0.1, 0.1), (20, 4));
    for (e, w) in [
        (0.3, 7),
        (0.7, 3),
        (0.123, 17),
        (0.125, 16),
        (0.6666666666666666, 3),
    ] {
        assert_eq!(dims_for_error(e, 0.5).0, w, "error {e}");
    }
    for (p, d) in [
        (0.5, 1),
        (0.25, 2),
        (0.125, 3),
        (0.0625, 4),
        (0.03125, 5),
        (0.0009765625, 10),
        (0.9, 1),
        (0.4, 2),
        (0.2, 3),
        (0.05, 5),
        (1e-4, 14),
        (1e-6, 20),
        (1e-9, 30),
        (1e-45, 149),
        (0.99999999, 0),
        (1e-50, 0),
    ] {
        assert_eq!(dims_for_error(0.5, p).1, d, "probability {p}");
    }
    // Out-of-range widths (cms.md §7 worked edge cases).
    assert_eq!(dims_for_error(1e-19, 0.5).0, 0);
    let (w, d) = dims_for_error(1.5e-19, 0.5);
    assert!(!dims_valid(w, d));
    let (w, d) = dims_for_error(3e-19, 0.5);
    assert!(dims_valid(w, d));
    assert_eq!(CountMinSketch::new(w, d), Err(CreateError::OutOfMemory));
    let (w, d) = dims_for_error(3e-19, 0.4);
    assert!(!dims_valid(w, d));
    assert_eq!(dims_for_error(4e-320, 0.5).0, 0);
}

#[test]
fn size_limits_never_allocate() {
    assert!(dims_valid(4611686018427387904, 1));
    assert_eq!(
        CountMinSketch::new(4611686018427387904, 1),
        Err(CreateError::OutOfMemory)
    );
    assert!(!dims_valid(4611686018427387904, 2));
    assert_eq!(
        CountMinSketch::new(1_000_000, 1_000_000),
        Err(CreateError::OutOfMemory)
    );
    // CVE-2026-62356: width 2^62 with an empty counters string must not load.
    assert_eq!(
        CountMinSketch::from_raw_parts(1 << 62, 1, 0, &[]),
        Err(RawPartsError::TooLarge)
    );
    assert_eq!(
        CountMinSketch::from_raw_parts(2, 2, 0, &[0; 12]),
        Err(RawPartsError::Length { got: 12, want: 16 })
    );
    assert_eq!(
        CountMinSketch::from_raw_parts(0, 2, 0, &[]),
        Err(RawPartsError::ZeroDimension)
    );
}

#[test]
fn merge_rules() {
    let mut a = CountMinSketch::new(10, 3).unwrap();
    let mut b = CountMinSketch::new(10, 3).unwrap();
    a.incr_by(b"x", 5);
    a.incr_by(b"y", 1);
    b.incr_by(b"x", 2);
    b.incr_by(b"y", 1);
    // cms.md §9: a − b succeeds; (a − b) − b fails, b's cells being no longer in it.
    let d = CountMinSketch::merge(10, 3, &[(&a, 1), (&b, -1)]).unwrap();
    assert_eq!(d.count(), 3);
    assert_eq!(
        CountMinSketch::merge(10, 3, &[(&d, 1), (&b, -1)]),
        Err(MergeError::Overflow)
    );
    let d = CountMinSketch::merge(10, 3, &[(&a, 2), (&b, 3)]).unwrap();
    assert_eq!(d.count(), 2 * 6 + 3 * 3);
    for c in 0..30 {
        assert_eq!(d.cell_value(c), 2 * a.cell_value(c) + 3 * b.cell_value(c));
    }
    let other = CountMinSketch::new(10, 4).unwrap();
    assert_eq!(
        CountMinSketch::merge(10, 3, &[(&a, 1), (&other, 1)]),
        Err(MergeError::Dimensions)
    );
    // Two cells of 4·10^9: only weights that keep the sum ≤ 2^32 − 1 succeed.
    let mut big = CountMinSketch::new(2, 1).unwrap();
    big.incr_by(b"x", 4_000_000_000);
    for (w1, w2, ok) in [(1, 1, false), (2, 0, false), (0, 2, false), (1, 0, true)] {
        assert_eq!(
            CountMinSketch::merge(2, 1, &[(&big, w1), (&big, w2)]).is_ok(),
            ok,
            "{w1} {w2}"
        );
    }
    // A wrapped total (two increments of 2^63 − 1) cannot be merged even with weight 1.
    let mut wrapped = CountMinSketch::new(2, 1).unwrap();
    wrapped.incr_by(b"x", i64::MAX as u64);
    wrapped.incr_by(b"x", i64::MAX as u64);
    assert_eq!(
        CountMinSketch::merge(2, 1, &[(&wrapped, 1)]),
        Err(MergeError::Overflow)
    );
    // Huge opposite weights on counts of 4 (cms.md §9).
    let mut four = CountMinSketch::new(3, 1).unwrap();
    four.incr_by(b"q", 4);
    let empty = CountMinSketch::new(3, 1).unwrap();
    let m = CountMinSketch::merge(
        3,
        1,
        &[(&empty, -922337203685477500), (&empty, 922337203685477502)],
    )
    .unwrap();
    assert_eq!(m.count(), 0);
}

#[test]
fn pages_are_copied_on_write_after_a_clone() {
    let mut s = CountMinSketch::new(40_000, 2).unwrap();
    s.incr_by(b"a", 1);
    let snap = s.clone();
    s.incr_by(b"a", 1);
    assert_eq!(snap.query(b"a"), 1);
    assert_eq!(s.query(b"a"), 2);
    let total: u64 = s.counter_pages().map(|p| p.len() as u64).sum();
    assert_eq!(total, 40_000 * 2 * 4);
}

proptest! {
    /// Collisions only add: every estimate is at least the item's true count.
    #[test]
    fn never_under_counts(
        width in 1u64..40,
        depth in 1u64..6,
        ops in prop::collection::vec((0u8..30, 0u64..1000), 0..200),
    ) {
        let mut s = CountMinSketch::new(width, depth).unwrap();
        let mut truth = std::collections::HashMap::new();
        for (item, v) in &ops {
            let est = s.incr_by(&[*item], *v);
            let t = truth.entry(*item).or_insert(0u64);
            *t += v;
            prop_assert!(est as u64 >= *t);
        }
        for (item, t) in &truth {
            prop_assert!(s.query(&[*item]) as u64 >= *t);
        }
        prop_assert_eq!(s.count(), ops.iter().map(|o| o.1).sum::<u64>());
    }

    /// A merge with weights is the weighted sum, cell by cell and in the total.
    #[test]
    fn merge_is_the_weighted_sum(
        width in 1u64..30,
        depth in 1u64..5,
        sketches in prop::collection::vec(
            (prop::collection::vec((0u8..20, 0u64..1000), 0..50), 0i64..5),
            1..4,
        ),
    ) {
        let built: Vec<(CountMinSketch, i64)> = sketches
            .iter()
            .map(|(ops, w)| {
                let mut s = CountMinSketch::new(width, depth).unwrap();
                for (i, v) in ops {
                    s.incr_by(&[*i], *v);
                }
                (s, *w)
            })
            .collect();
        let refs: Vec<(&CountMinSketch, i64)> = built.iter().map(|(s, w)| (s, *w)).collect();
        let m = CountMinSketch::merge(width, depth, &refs).unwrap();
        for c in 0..width * depth {
            let want: i64 = built.iter().map(|(s, w)| s.cell_value(c) as i64 * w).sum();
            prop_assert_eq!(m.cell_value(c) as i64, want);
        }
        let total: i64 = built.iter().map(|(s, w)| s.count() as i64 * w).sum();
        prop_assert_eq!(m.count() as i64, total);
    }
}
