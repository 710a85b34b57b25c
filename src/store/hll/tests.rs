//! Unit and property tests of the HLL format code.

use super::estimate::*;
use super::*;
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn pfadd_new(elems: &[&[u8]]) -> Vec<u8> {
    let mut v = new_sparse();
    pfadd(
        &mut v,
        elems.iter().copied(),
        true,
        DEFAULT_SPARSE_MAX_BYTES,
    )
    .unwrap();
    v
}

fn header(invalid: bool) -> Vec<u8> {
    let mut h = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    if invalid {
        h[15] = 0x80;
    }
    h
}

#[test]
fn hash_vectors() {
    assert_eq!(murmurhash64a(b"", HASH_SEED), 0xd8dfea6585bc9732);
    assert_eq!(murmurhash64a(b"a", HASH_SEED), 0x53d2470a9b43b1a7);
    assert_eq!(murmurhash64a(b"hello", HASH_SEED), 0x0f656f01eecfe400);
    assert_eq!(murmurhash64a(b"123456789", HASH_SEED), 0x217532cb09f2a44d);
    assert_eq!(hash_element(b""), (5938, 2));
    assert_eq!(hash_element(b"a"), (12711, 2));
    assert_eq!(hash_element(b"b"), (15780, 1));
    assert_eq!(hash_element(b"12345678"), (10579, 3));
    assert_eq!(hash_element(b"0"), (13225, 4));
    assert_eq!(hash_element(b"11332"), (0, 1));
    assert_eq!(hash_element(b"15508"), (1, 1));
}

#[test]
fn spec_strings() {
    assert_eq!(pfadd_new(&[]), hex("48594c4c0100000000000000000000807fff"));
    let mut v = pfadd_new(&[b"a", b"b", b"c"]);
    assert_eq!(
        v,
        hex("48594c4c01000000000000000000008060f38050b1844bfb80425a")
    );
    assert_eq!(
        sparse_debug_string(&v),
        "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
    );
    assert_eq!(count_cached(&mut v).unwrap(), (3, true));
    assert_eq!(
        v,
        hex("48594c4c01000000030000000000000060f38050b1844bfb80425a")
    );
    assert_eq!(count_cached(&mut v).unwrap(), (3, false));
    assert_eq!(
        pfadd_new(&[b"11332", b"15508"]),
        hex("48594c4c010000000000000000000080817ffd")
    );
    let digits: Vec<Vec<u8>> = (0..10).map(|i| i.to_string().into_bytes()).collect();
    let refs: Vec<&[u8]> = digits.iter().map(|d| d.as_slice()).collect();
    let mut n = pfadd_new(&refs);
    assert_eq!(n, hex("48594c4c01000000000000000000008041ee844823805351804ce08040928048ca8c43738042d78042128c40cf844322"));
    assert_eq!(count_cached(&mut n).unwrap().0, 10);
}

#[test]
fn spec_merge() {
    let mut x = pfadd_new(&[b"foo", b"bar", b"zap", b"a"]);
    assert_eq!(count_cached(&mut x).unwrap().0, 4);
    let x2 = pfadd_new(&[b"a", b"b", b"c", b"foo"]);
    let mut max = Box::new([0u8; REGISTERS]);
    merge_into(&mut max, &x).unwrap();
    merge_into(&mut max, &x2).unwrap();
    let mut m = new_sparse();
    merge_apply(&mut m, &max, false, DEFAULT_SPARSE_MAX_BYTES).unwrap();
    assert_eq!(
        m,
        hex("48594c4c0100000000000000000000805cb3904207844235804621804a8e844bfb80425a")
    );
    assert_eq!(count(&m).unwrap(), 6);
    assert_eq!(estimate(&raw_histogram(&max)), 6);
}

#[test]
fn spec_sizes() {
    for (n, enc, len, card) in [
        (200u32, Encoding::Sparse, 507usize, 201u64),
        (1000, Encoding::Sparse, 1923, 1001),
        (10000, Encoding::Dense, 12304, 9987),
        (100000, Encoding::Dense, 12304, 99565),
    ] {
        let elems: Vec<Vec<u8>> = (0..n).map(|i| i.to_string().into_bytes()).collect();
        let mut v = pfadd_new(&elems.iter().map(|e| e.as_slice()).collect::<Vec<_>>());
        assert_eq!(validate(&v).unwrap(), enc, "n={n}");
        assert_eq!(v.len(), len, "n={n}");
        assert_eq!(count_cached(&mut v).unwrap().0, card, "n={n}");
    }
}

#[test]
fn validation() {
    assert_eq!(validate(b"hello"), Err(HllError::NotHll));
    assert_eq!(
        validate(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"),
        Err(HllError::NotHll)
    );
    assert_eq!(validate(&header(false)), Ok(Encoding::Sparse));
    let mut d = vec![0u8; DENSE_LEN];
    d[..4].copy_from_slice(MAGIC);
    assert_eq!(validate(&d), Ok(Encoding::Dense));
    d.push(0);
    assert_eq!(validate(&d), Err(HllError::NotHll));
}

#[test]
fn corruption_cases() {
    let with = |tail: &[u8]| {
        let mut v = header(true);
        v.extend_from_slice(tail);
        v
    };
    // 16385 registers.
    let mut v = with(&[0x7f, 0xff, 0x00]);
    assert_eq!(count_cached(&mut v), Err(HllError::Corrupt));
    assert_eq!(add(&mut v, b"a", 3000), Ok(true));
    // 16383 registers.
    let mut v = with(&[0x7f, 0xfe]);
    assert_eq!(count(&v), Err(HllError::Corrupt));
    assert_eq!(add(&mut v, b"hello", 3000), Ok(true));
    // VAL past the end.
    let v = with(&[0x7f, 0xfe, 0x83]);
    assert_eq!(count(&v), Err(HllError::Corrupt));
    let mut max = Box::new([0u8; REGISTERS]);
    assert_eq!(merge_into(&mut max, &v), Err(HllError::Corrupt));
    // Header only.
    let mut v = with(&[]);
    assert_eq!(count(&v), Err(HllError::Corrupt));
    assert_eq!(add(&mut v, b"a", 3000), Err(HllError::Corrupt));
    // Truncated XZERO reads 0: a valid empty HLL.
    let v = with(&[0x7f, 0xfe, 0x40]);
    assert_eq!(sparse_debug_string(&v), "Z:16383 Z:1");
    assert_eq!(count(&v), Ok(0));
    // The CVE shape: many XZERO(16384) then a VAL.
    let mut tail = Vec::new();
    for _ in 0..1000 {
        tail.extend_from_slice(&[0x7f, 0xff]);
    }
    tail.push(0x80);
    let mut v = with(&tail);
    assert_eq!(count(&v), Err(HllError::Corrupt));
    assert_eq!(sparse_to_dense(&mut v), Err(HllError::Corrupt));
    // Appended garbage after a valid body.
    let mut v = pfadd_new(&[b"a"]);
    v.extend_from_slice(b"hello");
    assert_eq!(count(&v), Err(HllError::Corrupt));
    assert_eq!(add(&mut v, b"zz", 3000), Ok(true));
}

#[test]
fn estimator_edges() {
    assert_eq!(estimate(&raw_histogram(&[0u8; REGISTERS])), 0);
    let mut h = [0u32; 64];
    h[51] = REGISTERS as u32;
    assert_eq!(estimate(&h), 0x8000_0000_0000_0000);
}

#[test]
fn promotion_by_size_and_value() {
    let mut v = new_sparse();
    let mut n = 0u32;
    while validate(&v).unwrap() == Encoding::Sparse {
        add(&mut v, &n.to_le_bytes(), 300).unwrap();
        assert!(v.len() <= 300 || validate(&v).unwrap() == Encoding::Dense);
        n += 1;
    }
    let mut v = new_sparse();
    set_register(&mut v, 7, 40, 3000).unwrap();
    assert_eq!(validate(&v).unwrap(), Encoding::Dense);
    assert_eq!(dense_registers(&v).unwrap()[7], 40);
}

#[test]
fn pack_roundtrip_and_selftest() {
    let mut regs = Box::new([0u8; REGISTERS]);
    for (i, r) in regs.iter_mut().enumerate() {
        *r = (i * 7 % 64) as u8;
    }
    let mut body = vec![0u8; DENSE_BODY_LEN];
    pack_dense(&regs, &mut body);
    for i in 0..REGISTERS {
        assert_eq!(dense_get(&body, i), regs[i]);
    }
    let mut back = Box::new([0u8; REGISTERS]);
    unpack_dense(&body, &mut back);
    assert_eq!(back, regs);
    // Both pair-table histograms against a plain count.
    let mut naive = [0u32; 64];
    for &r in regs.iter() {
        naive[r as usize] += 1;
    }
    assert_eq!(raw_histogram(&regs), naive);
    assert_eq!(dense_histogram(&body), naive);
    let mut max = Box::new([0u8; REGISTERS]);
    max[5] = 60;
    max[REGISTERS - 1] = 63;
    dense_max_into(&body, &mut max);
    for i in 0..REGISTERS {
        let expect = regs[i].max(if i == 5 {
            60
        } else if i == REGISTERS - 1 {
            63
        } else {
            0
        });
        assert_eq!(max[i], expect, "register {i}");
    }
    let mut scalar = Box::new([7u8; REGISTERS]);
    let mut fast = Box::new([7u8; REGISTERS]);
    dense_max_into_scalar(&body, &mut scalar);
    dense_max_into(&body, &mut fast);
    assert_eq!(scalar, fast);
    assert_eq!(selftest(), Ok(()));
}

fn sparse_regs() -> impl Strategy<Value = Vec<u8>> {
    // Mostly zeros with clusters of small values, so runs of every opcode kind appear.
    prop::collection::vec((0usize..REGISTERS, 1u8..=32, 1usize..300), 0..60).prop_map(|spots| {
        let mut r = vec![0u8; REGISTERS];
        for (at, val, len) in spots {
            let end = (at + len).min(REGISTERS);
            for x in &mut r[at..end] {
                *x = val;
            }
        }
        r
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn sparse_decode_encode_identity(r in sparse_regs()) {
        let regs: Box<Registers> = r.into_boxed_slice().try_into().unwrap();
        let enc = sparse_encode(&regs).unwrap();
        prop_assert_eq!(sparse_decode(&enc).unwrap(), regs.clone());
        // Promotion agrees with the decoder.
        let mut d = enc.clone();
        sparse_to_dense(&mut d).unwrap();
        prop_assert_eq!(dense_registers(&d).unwrap(), regs.clone());
        prop_assert_eq!(count(&d).unwrap(), count(&enc).unwrap());
    }

    #[test]
    fn sparse_updates_match_a_register_model(
        ops in prop::collection::vec((0usize..REGISTERS, 1u8..=40), 0..400),
        max_bytes in prop::sample::select(vec![0u64, 30, 100, 500, 3000, 1 << 20]),
    ) {
        let mut v = new_sparse();
        let mut model = vec![0u8; REGISTERS];
        for (i, c) in ops {
            let changed = set_register(&mut v, i, c, max_bytes).unwrap();
            prop_assert_eq!(changed, c > model[i]);
            model[i] = model[i].max(c);
            if validate(&v).unwrap() == Encoding::Sparse {
                prop_assert!(v.len() as u64 <= max_bytes.max(18));
            }
        }
        prop_assert_eq!(&dense_registers(&v).unwrap()[..], &model[..]);
    }

    #[test]
    fn invalid_streams_rejected(r in sparse_regs(), cut in 1usize..8, extra in prop::collection::vec(any::<u8>(), 1..4)) {
        let regs: Box<Registers> = r.into_boxed_slice().try_into().unwrap();
        let enc = sparse_encode(&regs).unwrap();
        // Dropping a whole trailing opcode leaves fewer than 16384 registers.
        let mut short = enc.clone();
        let keep = short.len().saturating_sub(cut).max(HEADER_LEN);
        short.truncate(keep);
        let mut p = HEADER_LEN; let mut total = 0u64;
        while p < short.len() { let op = read_op(&short, p); total += op.run(); p += op.len(); }
        if total != REGISTERS as u64 {
            prop_assert_eq!(sparse_decode(&short).err(), Some(HllError::Corrupt));
        }
        // Anything appended that covers registers overflows the count.
        let mut long = enc.clone();
        long.extend_from_slice(&extra);
        prop_assert_eq!(sparse_decode(&long).err(), Some(HllError::Corrupt));
        prop_assert_eq!(count(&long).err(), Some(HllError::Corrupt));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..200),
        dense in any::<bool>(),
        elems in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), 0..20),
    ) {
        let mut v = if dense { vec![0u8; DENSE_LEN] } else { header(true) };
        v[..4].copy_from_slice(MAGIC);
        if dense {
            for (i, b) in body.iter().enumerate() { v[HEADER_LEN + i * 61 % DENSE_BODY_LEN] = *b; }
        } else {
            v.extend_from_slice(&body);
        }
        let _ = sparse_debug_string(&v);
        let _ = count(&v);
        let mut w = v.clone();
        let _ = count_cached(&mut w);
        let mut max = Box::new([0u8; REGISTERS]);
        let _ = merge_into(&mut max, &v);
        let mut w = v.clone();
        let _ = pfadd(&mut w, elems.iter().map(|e| e.as_slice()), false, 40);
        let mut w = v.clone();
        let _ = merge_apply(&mut w, &max, false, 40);
        let mut w = v.clone();
        let _ = sparse_to_dense(&mut w);
        let _ = dense_registers(&v);
        // Raw header bytes too.
        let _ = validate(&body);
    }
}
