// The expected values are written as the reference prints them (%.17g), hence the extra digits.
#![allow(clippy::excessive_precision, clippy::approx_constant)]

use proptest::prelude::*;

use super::*;

fn digest(compression: i64, values: &[f64]) -> TDigest {
    let mut td = TDigest::new(compression as f64).unwrap();
    for &v in values {
        td.add(v, 1).unwrap();
    }
    td
}

fn pairs(td: &TDigest) -> Vec<(f64, i64)> {
    td.centroids().iter().map(|n| (n.mean, n.weight)).collect()
}

#[test]
fn capacity_schedule() {
    for (c, cap) in [
        (1, 16),
        (2, 22),
        (5, 40),
        (100, 610),
        (1000, 6010),
        (100000, 600010),
    ] {
        assert_eq!(TDigest::new(c as f64).unwrap().cap(), cap);
    }
    assert_eq!(
        TDigest::new(MAX_COMPRESSION as f64).unwrap().cap(),
        2147483644
    );
    assert_eq!(
        TDigest::new((MAX_COMPRESSION + 1) as f64),
        Err(TdError::Alloc)
    );
    assert_eq!(TDigest::new(1e17), Err(TdError::Alloc));
    assert_eq!(TDigest::new(9.223372036854775807e18), Err(TdError::Alloc));
    assert_eq!(TDigest::new(f64::NAN), Err(TdError::Alloc));
}

/// tdigest.md §4.10, step by step.
#[test]
fn worked_example() {
    let values: Vec<f64> = (1..=21).map(f64::from).collect();
    let mut td = digest(2, &values);
    assert_eq!((td.merged_nodes(), td.unmerged_nodes()), (0, 21));
    td.add(22.0, 1).unwrap();
    assert_eq!(
        pairs(&td),
        vec![(1.0, 1), (6.0, 9), (15.0, 9), (20.0, 1), (21.0, 1)]
    );
    assert_eq!(
        (
            td.unmerged_nodes(),
            td.merged_weight(),
            td.total_compressions()
        ),
        (1, 21, 1)
    );
    let qs = td.quantiles(&[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]);
    assert_eq!(
        pairs(&td),
        vec![(1.0, 1), (6.0, 9), (15.5, 10), (21.0, 1), (22.0, 1)]
    );
    assert_eq!(
        qs,
        vec![
            1.0,
            2.3333333333333335,
            6.0,
            11.5,
            17.149999999999999,
            20.780000000000001,
            22.0
        ]
    );
    assert_eq!(td.cdf(2.0), 0.086363636363636365);
    assert_eq!(td.rank(2.0, false), 2);
    assert_eq!(td.rank(2.0, true), 20);
    assert_eq!(td.by_rank(2, false), 2.1111111111111112);
    assert_eq!(td.by_rank(21, false), 22.0);
    assert_eq!(td.trimmed_mean(0.1, 0.9), 11.277777777777779);
}

#[test]
fn single_observation_quirk() {
    let mut td = digest(100, &[7.5]);
    assert!(td.quantile(0.5).is_nan());
    assert!(td.cdf(7.5).is_nan());
    assert_eq!(td.rank(7.5, false), i64::MIN);
    assert_eq!(td.rank(7.5, true), i64::MIN);
    assert_eq!(td.rank(1.0, false), -1);
    assert_eq!(td.rank(1.0, true), 1);
    assert_eq!(td.by_rank(0, false), 7.5);
    assert_eq!(td.by_rank(1, false), f64::INFINITY);
    assert_eq!(td.by_rank(1, true), f64::NEG_INFINITY);
    assert_eq!(
        (
            td.merged_nodes(),
            td.unmerged_nodes(),
            td.total_compressions()
        ),
        (0, 1, 0)
    );
    // Constant NaNs are positive.
    assert!(td.quantile(0.5).is_sign_positive());
}

#[test]
fn ranks_of_duplicates() {
    // tdigest.md §5.8.
    let mut td = digest(100, &[1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
    let vs = [1.0, 2.0, 2.5, 3.0, 3.5, 4.0];
    let r: Vec<i64> = vs.iter().map(|&v| td.rank(v, false)).collect();
    let rr: Vec<i64> = vs.iter().map(|&v| td.rank(v, true)).collect();
    assert_eq!(r, vec![0, 3, 5, 6, 7, 7]);
    assert_eq!(rr, vec![7, 5, 3, 2, 1, 0]);
}

#[test]
fn empty_window_trimmed_mean_is_negative_nan() {
    let mut td = digest(100, &[1.0, 2.0, 3.0]);
    let t = td.trimmed_mean(0.3333333333333333, 0.33333333333333337);
    assert!(t.is_nan() && t.is_sign_negative());
}

#[test]
fn huge_means_overflow_to_negative_nan() {
    let vals: Vec<f64> = (0..12)
        .map(|i| if i % 2 == 0 { 1.7e308 } else { -1.7e308 })
        .collect();
    let mut td = digest(1, &vals);
    td.compress().unwrap();
    assert!(td
        .centroids()
        .iter()
        .any(|n| n.mean.is_nan() && n.mean.is_sign_negative()));
}

#[test]
fn min_max_keep_first_signed_zero() {
    let td = digest(100, &[-0.0, 0.0]);
    assert!(td.min().is_sign_negative() && td.max().is_sign_negative());
}

#[test]
fn c_conversion_is_x86() {
    assert_eq!(TWO_PI.to_bits(), 6.283185307179586f64.to_bits());
    assert_eq!(c_i64(f64::NAN), i64::MIN);
    assert_eq!(c_i64(f64::INFINITY), i64::MIN);
    assert_eq!(c_i64(9.3e18), i64::MIN);
    assert_eq!(c_i64(-2.5), -2);
    assert_eq!(c_i64(-9.223372036854775808e18), i64::MIN);
}

#[test]
fn reset_keeps_compression_and_cap() {
    let mut td = digest(5, &(0..100).map(f64::from).collect::<Vec<_>>());
    td.reset();
    assert_eq!((td.cap(), td.size(), td.merged_nodes()), (40, 0, 0));
    assert_eq!((td.min(), td.max()), (f64::MAX, -f64::MAX));
    td.add(3.0, 1).unwrap();
    td.add(4.0, 1).unwrap();
    assert_eq!(td.quantile(1.0), 4.0);
}

#[test]
fn loaded_cap_governs_adds() {
    // A restored digest whose cap is too small to compress below cap - 1 overflows.
    let raw = RawDigest {
        compression: 100.0,
        min: f64::MAX,
        max: -f64::MAX,
        cap: 2,
        merged_nodes: 0,
        unmerged_nodes: 0,
        total_compressions: 0,
        merged_weight: 0,
        unmerged_weight: 0,
        centroids: vec![],
    };
    let mut td = TDigest::from_raw_parts(raw.clone()).unwrap();
    td.add(1.0, 1).unwrap();
    td.add(2.0, 1).unwrap();
    assert_eq!(td.add(3.0, 1), Err(TdError::Overflow));
    for bad in [
        RawDigest {
            cap: 611,
            ..raw.clone()
        },
        RawDigest {
            compression: f64::NAN,
            ..raw.clone()
        },
        RawDigest {
            compression: -1.0,
            ..raw.clone()
        },
        RawDigest {
            compression: 1e12,
            ..raw.clone()
        },
        RawDigest {
            merged_nodes: -1,
            ..raw.clone()
        },
        RawDigest {
            unmerged_nodes: 3,
            ..raw.clone()
        },
        RawDigest {
            unmerged_nodes: -1,
            ..raw.clone()
        },
    ] {
        assert!(TDigest::from_raw_parts(bad).is_err());
    }
}

#[test]
fn quicksort_orders_and_keeps_pairs() {
    let mut v: Vec<Node> = [5.0, 1.0, 3.0, 3.0, -0.0, 0.0, 9.0, 2.0]
        .iter()
        .enumerate()
        .map(|(i, &m)| Node {
            mean: m,
            weight: i as i64,
        })
        .collect();
    quicksort(&mut v);
    assert!(v.windows(2).all(|w| w[0].mean <= w[1].mean));
    let mut ws: Vec<i64> = v.iter().map(|n| n.weight).collect();
    ws.sort();
    assert_eq!(ws, (0..8).collect::<Vec<_>>());
    // Many equal means: quadratic but no deep recursion.
    let mut eq = vec![
        Node {
            mean: 1.0,
            weight: 1
        };
        20000
    ];
    quicksort(&mut eq);
}

/// The reference's quicksort written as the spec does, recursively, without shortcuts.
fn reference_sort(nodes: &mut [Node], lo: isize, hi: isize) {
    if lo >= hi {
        return;
    }
    let (l, h) = (lo as usize, hi as usize);
    if h - l == 1 {
        if nodes[l].mean > nodes[h].mean {
            nodes.swap(l, h);
        }
        return;
    }
    let p = (l + h) / 2;
    let pivot = nodes[p].mean;
    nodes.swap(p, h);
    let mut k = lo - 1;
    for j in l..h {
        if nodes[j].mean < pivot {
            k += 1;
            nodes.swap(k as usize, j);
        }
    }
    nodes.swap((k + 1) as usize, h);
    let q = k + 1;
    if q > lo {
        reference_sort(nodes, lo, q - 1);
    }
    reference_sort(nodes, q + 1, hi);
}

/// The rank error bound the essay documents, as a fraction of the observations.
fn error_bound(q: f64, compression: f64, n: f64) -> f64 {
    4.0 * std::f64::consts::PI * n.ln() * (q * (1.0 - q)).max(1.0 / n) / compression + 2.0 / n
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The sort (with its all-equal shortcut) gives the reference's exact permutation, duplicates,
    /// signed zeros and NaNs included.
    #[test]
    fn quicksort_is_the_reference_permutation(
        means in prop::collection::vec(prop_oneof![
            4 => (0u8..4).prop_map(f64::from),
            1 => Just(-0.0),
            1 => Just(f64::NAN),
            2 => -10.0f64..10.0,
        ], 0..300),
    ) {
        let nodes: Vec<Node> = means
            .iter()
            .enumerate()
            .map(|(i, &m)| Node { mean: m, weight: i as i64 })
            .collect();
        let (mut a, mut b) = (nodes.clone(), nodes);
        quicksort(&mut a);
        if !b.is_empty() {
            let hi = b.len() as isize - 1;
            reference_sort(&mut b, 0, hi);
        }
        let ids = |v: &[Node]| v.iter().map(|n| n.weight).collect::<Vec<_>>();
        prop_assert_eq!(ids(&a), ids(&b));
    }

    #[test]
    fn quantiles_are_monotone_and_within_the_error(
        values in prop::collection::vec(-1e6f64..1e6, 2..3000),
        compression in prop::sample::select(vec![20i64, 50, 100, 300]),
    ) {
        let mut td = digest(compression, &values);
        let mut sorted = values.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = sorted.len() as f64;
        let mut last = f64::NEG_INFINITY;
        for i in 0..=100 {
            let q = i as f64 / 100.0;
            let est = td.quantile(q);
            prop_assert!(est >= last, "quantile({q}) = {est} < {last}");
            prop_assert!(est >= sorted[0] && est <= sorted[sorted.len() - 1]);
            last = est;
            // Empirical rank of the estimate, against q.
            let below = sorted.partition_point(|&x| x < est) as f64;
            let upto = sorted.partition_point(|&x| x <= est) as f64;
            let err = if q * n < below { below - q * n } else if q * n > upto { q * n - upto } else { 0.0 };
            prop_assert!(err / n <= error_bound(q, compression as f64, n),
                "q {q}: estimate {est} has rank [{below}, {upto}] of {n}");
        }
        let mut last = 0.0;
        for &x in sorted.iter().step_by(7) {
            let c = td.cdf(x);
            prop_assert!(c >= last);
            last = c;
        }
    }
}
