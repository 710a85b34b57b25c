use super::*;

fn heap_view(t: &TopK) -> Vec<(Option<&[u8]>, u32)> {
    t.heap()
        .iter()
        .map(|s| (s.item.as_deref(), s.count))
        .collect()
}

#[test]
fn hashes_match_the_spec() {
    // topk.md §5: fingerprints and the buckets of one ADD in the default 8 × 7 sketch.
    for (item, fp, cols) in [
        (&b"foo"[..], 0x4064c400u32, [5, 2, 0, 1, 3, 4, 1]),
        (b"", 0x4a8566e0, [0, 6, 5, 4, 3, 2, 0]),
        (b"hello", 0x234dad03, [3, 6, 3, 2, 2, 0, 5]),
    ] {
        assert_eq!(murmur2_32(item, FP_SEED), fp);
        let mut t = TopK::new(3, 8, 7, 0.9).unwrap();
        t.insert(item, 1);
        let held: Vec<usize> = (0..7)
            .map(|r| {
                (0..8)
                    .find(|&c| t.buckets()[r * 8 + c] == Bucket { fp, count: 1 })
                    .unwrap()
            })
            .collect();
        assert_eq!(held, cols, "{item:?}");
    }
}

#[test]
fn worked_example_heap_states() {
    // topk.md §6.4.
    let mut t = TopK::new(3, 50, 4, 1.0).unwrap();
    assert_eq!(t.insert(b"a", 1), Some(None));
    assert_eq!(heap_view(&t), [(None, 0), (Some(&b"a"[..]), 1), (None, 0)]);
    assert_eq!(t.insert(b"b", 1), Some(None));
    assert_eq!(t.insert(b"c", 1), Some(None));
    assert_eq!(
        heap_view(&t),
        [(Some(&b"a"[..]), 1), (Some(b"c"), 1), (Some(b"b"), 1)]
    );
    assert_eq!(t.insert(b"d", 1), Some(Some(b"a"[..].into())));
    assert_eq!(t.insert(b"a", 1), Some(Some(b"c"[..].into())));
    assert_eq!(t.insert(b"a", 1), None);
    assert_eq!(
        heap_view(&t),
        [(Some(&b"d"[..]), 1), (Some(b"a"), 3), (Some(b"b"), 1)]
    );
    let listed: Vec<(&[u8], u32)> = t
        .list()
        .iter()
        .map(|s| (s.item.as_deref().unwrap(), s.count))
        .collect();
    assert_eq!(listed, [(&b"a"[..], 3), (b"d", 1), (b"b", 1)]);
    assert!(t.contains(b"a") && !t.contains(b"c"));
    assert_eq!(t.count(b"a"), 3);
}

#[test]
fn decay_one_always_takes_over() {
    // One bucket: b arrives on a's count of 3 with increment 5; decay 1 decrements every unit,
    // and at the third unit (remaining 3, that unit included) b takes the bucket over.
    let mut t = TopK::new(1, 1, 1, 1.0).unwrap();
    t.insert(b"a", 3);
    assert_eq!(t.insert(b"b", 5), Some(Some(b"a"[..].into())));
    assert_eq!(t.buckets()[0].fp, murmur2_32(b"b", FP_SEED));
    assert_eq!(t.buckets()[0].count, 3);
    assert!(t.contains(b"b") && !t.contains(b"a"));
    assert_eq!((t.count(b"b"), t.count(b"a")), (3, 0));
    // Increment 2 on b's 3: no takeover; the bucket keeps b at 1 and the heap is untouched.
    assert_eq!(t.insert(b"c", 2), None);
    assert_eq!(
        t.buckets()[0],
        Bucket {
            fp: murmur2_32(b"b", FP_SEED),
            count: 1
        }
    );
}

#[test]
fn zero_probability_never_decays() {
    // decay 0.5: from count 1075 on the probability is exactly 0.0.
    let mut t = TopK::new(1, 1, 1, 0.5).unwrap();
    t.insert(b"a", 2000);
    for _ in 0..100 {
        t.insert(b"b", 100);
    }
    assert_eq!(t.buckets()[0].count, 2000);
    assert!(t.decay_probability(1075) == 0.0);
    assert!(t.decay_probability(204) > 0.0);
}

#[test]
fn counts_wrap_and_count_respects_the_heap_floor() {
    // topk.md §10, built through the raw parts.
    let fp = murmur2_32(b"apple", FP_SEED);
    let mut buckets = Vec::new();
    buckets.extend_from_slice(&fp.to_le_bytes());
    buckets.extend_from_slice(&4294967011u32.to_le_bytes());
    let mut heap = vec![0u8; 24];
    heap[0..4].copy_from_slice(&fp.to_le_bytes());
    heap[4..8].copy_from_slice(&5u32.to_le_bytes());
    heap[8..16].copy_from_slice(&0xdeadbeefu64.to_le_bytes());
    heap[16..20].copy_from_slice(&4294967011u32.to_le_bytes());
    let mut t =
        TopK::from_raw_parts(1, 1, 1, 0.9, &buckets, &heap, &[b"apple\0".to_vec()]).unwrap();
    assert_eq!(t.insert(b"apple", 1000), None);
    assert_eq!(t.buckets()[0].count, 4294967011u32.wrapping_add(1000));
    assert_eq!(t.heap()[0].count, 4294967011);
    assert_eq!(t.count(b"apple"), 0);
    // Re-encoded with zero pointer bytes.
    assert_eq!(&t.heap_bytes()[8..16], &[0; 8]);
}

#[test]
fn reloaded_empty_item_is_an_empty_slot_with_its_fingerprint() {
    let mut t = TopK::new(2, 4, 2, 1.0).unwrap();
    t.insert(b"", 1);
    let items: Vec<Vec<u8>> = (0..2).map(|i| t.item_string(i)).collect();
    let back =
        TopK::from_raw_parts(2, 4, 2, 1.0, &t.buckets_bytes(), &t.heap_bytes(), &items).unwrap();
    assert!(back.contains(b""));
    assert_eq!(back.list().len(), 1);
    assert_eq!(back.list()[0].item, None);
}

#[test]
fn crafted_raw_parts_are_refused() {
    let ok = |k, w, d, b: &[u8], h: &[u8], items: &[Vec<u8>]| {
        TopK::from_raw_parts(k, w, d, 0.5, b, h, items)
    };
    let one = [b"\0".to_vec()];
    assert!(ok(1, 1, 1, &[0; 8], &[0; 24], &one).is_ok());
    assert_eq!(
        ok(0, 1, 1, &[0; 8], &[], &[]),
        Err(RawPartsError::Dimension)
    );
    assert_eq!(
        ok(1 << 32, 1, 1, &[0; 8], &[0; 24], &one),
        Err(RawPartsError::Dimension)
    );
    assert!(matches!(
        ok(1, 1, 1, &[0; 7], &[0; 24], &one),
        Err(RawPartsError::BucketsLength { .. })
    ));
    // A heap string shorter than 24·k (RedisBloom walks past it).
    assert!(matches!(
        ok(
            2,
            1,
            1,
            &[0; 8],
            &[0; 24],
            &[b"\0".to_vec(), b"\0".to_vec()]
        ),
        Err(RawPartsError::HeapLength { .. })
    ));
    assert!(matches!(
        ok(2, 1, 1, &[0; 8], &[0; 48], &one),
        Err(RawPartsError::ItemCount { .. })
    ));
    assert_eq!(
        ok(1, 1, 1, &[0; 8], &[0; 24], &[b"abc".to_vec()]),
        Err(RawPartsError::ItemNotTerminated(0))
    );
    assert_eq!(
        ok(1, 1, 1, &[0; 8], &[0; 24], &[vec![]]),
        Err(RawPartsError::ItemNotTerminated(0))
    );
    // Sizes beyond memory, refused before allocating.
    assert_eq!(
        ok(
            u32::MAX as u64,
            u32::MAX as u64,
            u32::MAX as u64,
            &[],
            &[],
            &[]
        ),
        Err(RawPartsError::TooLarge)
    );
    assert_eq!(TopK::new(u32::MAX, 8, 7, 0.9), Err(OutOfMemory));
    assert_eq!(
        TopK::new(3, 2_000_000_000, 200_000_000, 1.0),
        Err(OutOfMemory)
    );
}

#[test]
fn decay_tables_pow_then_products() {
    let t = TopK::new(1, 1, 1, 0.9).unwrap();
    assert_eq!(t.table[3], 0.9f64.powf(3.0));
    let l = TopK::from_raw_parts(1, 1, 1, 0.9, &[0; 8], &[0; 24], &[b"\0".to_vec()]).unwrap();
    assert_eq!(l.table[3], 0.9 * 0.9 * 0.9);
}

#[test]
fn c_strings() {
    assert_eq!(c_string(b"ab\0cd"), b"ab");
    assert_eq!(c_string(b""), b"");
    assert_eq!(c_string(b"abc"), b"abc");
}
