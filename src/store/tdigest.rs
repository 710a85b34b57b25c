//! t-digests, centroid for centroid the same as RedisBloom's `TDIS-TYPE`.
//!
//! A t-digest summarises a stream of numbers so that quantiles (`what value is at the 99th
//! percentile?`), the CDF (`what fraction is below x?`), ranks and trimmed means can be estimated in
//! a few kilobytes. It keeps *centroids* — `(mean, weight)` pairs sorted by mean — and merges
//! neighbours only while the merged weight stays below a bound that is tight near the tails
//! (quantiles 0 and 1) and loose in the middle, so extreme quantiles stay accurate.
//!
//! hyperbloom must hold exactly the centroids RedisBloom holds after the same operations: replies
//! are compared byte for byte (`%.17g` doubles), and DUMP/RDB values move between the servers. So
//! everything below is the reference's merging digest (t-digest-c `5b89d70a` as RedisBloom pins it,
//! spec `tdigest.md` §4), evaluated in IEEE binary64 **in exactly the order the spec writes each
//! expression** (no fused multiply-add, no reassociation): a reordered sum changes the last bit, and
//! the last bit shows in the reply.
//!
//! # Layout
//!
//! ```text
//! TDigest { compression: f64, min, max: f64, cap: i32,
//!           merged_nodes, unmerged_nodes: i32, total_compressions: i64,
//!           merged_weight, unmerged_weight: i64,
//!           nodes[cap]: (mean f64, weight i64) }
//!
//! nodes: [ 0 .. merged_nodes )                              centroids, sorted by mean
//!        [ merged_nodes .. merged_nodes + unmerged_nodes )  buffer, in insertion order
//!        [ .. cap )                                         stale or never written
//! ```
//!
//! `cap = 6 × trunc(compression) + 10` for digests made by commands (100 → 610). An add appends to
//! the buffer; when the buffer would reach `cap − 1` nodes the digest is **compressed** first: all
//! nodes are sorted by mean with the reference's own quicksort (its order of equal means decides
//! which weights merge, so a different sort would give different centroids), then one left-to-right
//! pass merges node `i` into the current centroid while
//!
//! ```text
//! (w_cur + w_i) × compression / (2π × W × ln W)  ≤  q(1−q)   at both edges q0, q2 of the centroid
//! ```
//!
//! and starts a new centroid otherwise. Read commands (QUANTILE, CDF, TRIMMED_MEAN, in-range
//! RANK/BYRANK), MERGE and every save compress too, so they change the stored digest
//! (`Total compressions` in INFO).
//!
//! # Quirks reproduced (tdigest.md §10)
//!
//! * With total weight ≤ 1 a compression sorts and returns: a digest with one observation keeps it in
//!   the buffer, and every centroid-based query answers as if empty (§4.4).
//! * NaN signs show in replies: NaNs the module returns as constants are positive (`nan`); NaNs made
//!   by invalid arithmetic (`0/0`, `∞ − ∞`) are x86-64's default NaN, negative (`-nan`). The
//!   arithmetic here runs on runtime values, so the hardware produces the same default NaN; constant
//!   NaN answers use [`f64::NAN`] (sign clear).
//! * Conversions from double to int64 follow x86-64 C: truncation, and `INT64_MIN` for NaN, ±∞ and
//!   out-of-range values ([`c_i64`]).
//!
//! # Storage and limits
//!
//! The node array is materialised lazily: slots are allocated as the buffer first reaches them (the
//! reference callocs all `cap` slots at creation, whose untouched pages cost nothing either), with
//! `try_reserve`, so no size from a client or a file can abort the server. `cap` must fit an `i32`
//! (compression ≤ [`MAX_COMPRESSION`]); above it the reference's `cap` wraps and it misbehaves,
//! where hyperbloom answers "allocation failed". The array sits behind an `Arc`, so the keyspace
//! clone taken for a background save shares it until the next write.
//!
//! Nothing here does I/O; the RDB encoding lives in `persistence::rdb::module`.

use std::sync::Arc;

/// `2π` as the reference spells it (6.283185307179586, which is exactly `TAU`).
const TWO_PI: f64 = std::f64::consts::TAU;

/// The largest compression whose `cap = 6c + 10` fits an `i32` (tdigest.md §4.1, §10).
pub const MAX_COMPRESSION: i64 = (i32::MAX as i64 - 10) / 6;

/// Default compression of `TDIGEST.CREATE` and the default-less MERGE.
pub const DEFAULT_COMPRESSION: i64 = 100;

/// Ceiling on buffer nodes a loaded value may claim beyond its centroids. A saved digest has at
/// most one buffered node; a crafted one claiming millions would make the loader materialise them
/// (as zero nodes) for nothing.
pub const MAX_LOADED_BUFFER: i64 = 1 << 20;

/// The C conversion `(long long)d` on x86-64: truncation toward zero; NaN, ±∞ and values outside
/// the int64 range become `INT64_MIN` (cvttsd2si's "integer indefinite").
pub fn c_i64(d: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// One node: a centroid or a buffered observation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Node {
    pub mean: f64,
    pub weight: i64,
}

/// Why an operation failed; each maps to one RedisBloom reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TdError {
    /// Capacity zero, wrapping, or memory refused: "allocation failed".
    Alloc,
    /// A weight would overflow, or the buffer is full and cannot be compressed: "overflow detected".
    Overflow,
}

/// The fields of a loaded value, validated by [`TDigest::from_raw_parts`].
#[derive(Debug, Clone, PartialEq)]
pub struct RawDigest {
    pub compression: f64,
    pub min: f64,
    pub max: f64,
    pub cap: i32,
    pub merged_nodes: i32,
    pub unmerged_nodes: i32,
    pub total_compressions: i64,
    pub merged_weight: i64,
    pub unmerged_weight: i64,
    /// The `merged_nodes` centroids.
    pub centroids: Vec<Node>,
}

/// A merging t-digest (module type `TDIS-TYPE`).
#[derive(Debug, Clone, PartialEq)]
pub struct TDigest {
    compression: f64,
    min: f64,
    max: f64,
    cap: i32,
    merged_nodes: i32,
    unmerged_nodes: i32,
    total_compressions: i64,
    merged_weight: i64,
    unmerged_weight: i64,
    /// Slots written so far (`len ≥ merged_nodes + unmerged_nodes`); slots beyond are zero.
    nodes: Arc<Vec<Node>>,
}

/// `6 × trunc(compression) + 10`, or None when it does not fit an `i32` (or compression is not a
/// finite non-negative number).
pub fn capacity_for(compression: f64) -> Option<i32> {
    if !compression.is_finite() || compression < 0.0 {
        return None;
    }
    let t = compression.trunc();
    if t > MAX_COMPRESSION as f64 {
        return None;
    }
    i32::try_from(6 * (t as i64) + 10).ok()
}

impl TDigest {
    /// An empty digest (tdigest.md §4.1). Nothing is allocated until observations arrive.
    pub fn new(compression: f64) -> Result<TDigest, TdError> {
        let cap = capacity_for(compression).ok_or(TdError::Alloc)?;
        Ok(TDigest {
            compression,
            min: f64::MAX,
            max: -f64::MAX,
            cap,
            merged_nodes: 0,
            unmerged_nodes: 0,
            total_compressions: 0,
            merged_weight: 0,
            unmerged_weight: 0,
            nodes: Arc::new(Vec::new()),
        })
    }

    /// Rebuilds a digest from loaded fields, refusing anything the reference would crash on
    /// (tdigest.md §7.4): a compression that is not finite and non-negative or whose capacity does
    /// not fit an `i32`, a `cap` above that capacity, node counts outside `[0, cap]`. The
    /// `unmerged_nodes` buffer slots come back as `(0.0, 0)` nodes, as in the reference (§7.3).
    pub fn from_raw_parts(raw: RawDigest) -> Result<TDigest, String> {
        let capacity = capacity_for(raw.compression)
            .ok_or_else(|| format!("compression {} out of range", raw.compression))?;
        if raw.cap > capacity {
            return Err(format!("cap {} above the capacity {capacity}", raw.cap));
        }
        if raw.merged_nodes < 0 || raw.merged_nodes > raw.cap {
            return Err(format!(
                "merged nodes {} outside [0, cap]",
                raw.merged_nodes
            ));
        }
        let total = raw.merged_nodes as i64 + raw.unmerged_nodes as i64;
        if raw.unmerged_nodes < 0 || total > raw.cap as i64 {
            return Err(format!("unmerged nodes {} do not fit", raw.unmerged_nodes));
        }
        if raw.unmerged_nodes as i64 > MAX_LOADED_BUFFER {
            return Err(format!("{} buffered nodes", raw.unmerged_nodes));
        }
        if raw.centroids.len() != raw.merged_nodes as usize {
            return Err("centroid count does not match merged nodes".into());
        }
        let mut nodes = raw.centroids;
        nodes
            .try_reserve_exact(raw.unmerged_nodes as usize)
            .map_err(|_| "cannot allocate the buffer".to_string())?;
        nodes.resize(total as usize, Node::default());
        Ok(TDigest {
            compression: raw.compression,
            min: raw.min,
            max: raw.max,
            cap: raw.cap,
            merged_nodes: raw.merged_nodes,
            unmerged_nodes: raw.unmerged_nodes,
            total_compressions: raw.total_compressions,
            merged_weight: raw.merged_weight,
            unmerged_weight: raw.unmerged_weight,
            nodes: Arc::new(nodes),
        })
    }

    // -- accessors ------------------------------------------------------------------------------

    pub fn compression(&self) -> f64 {
        self.compression
    }
    pub fn min(&self) -> f64 {
        self.min
    }
    pub fn max(&self) -> f64 {
        self.max
    }
    pub fn cap(&self) -> i32 {
        self.cap
    }
    pub fn merged_nodes(&self) -> i32 {
        self.merged_nodes
    }
    pub fn unmerged_nodes(&self) -> i32 {
        self.unmerged_nodes
    }
    pub fn total_compressions(&self) -> i64 {
        self.total_compressions
    }
    pub fn merged_weight(&self) -> i64 {
        self.merged_weight
    }
    pub fn unmerged_weight(&self) -> i64 {
        self.unmerged_weight
    }

    /// Observations: `merged_weight + unmerged_weight` (int64, wrapping as in C on x86-64).
    pub fn size(&self) -> i64 {
        self.merged_weight.wrapping_add(self.unmerged_weight)
    }

    /// The centroids (valid after a compression).
    pub fn centroids(&self) -> &[Node] {
        &self.nodes[..self.merged_nodes as usize]
    }

    /// Centroids and buffer, in storage order.
    pub fn all_nodes(&self) -> &[Node] {
        &self.nodes[..(self.merged_nodes + self.unmerged_nodes) as usize]
    }

    /// RedisBloom's memory figure (current line: `sizeof(td_histogram_t) + 16 × cap`, §8).
    pub fn memory_usage(&self) -> u64 {
        80 + 16 * self.cap.max(0) as u64
    }

    // -- updates --------------------------------------------------------------------------------

    /// Empties the digest (§4.8); compression and cap are kept.
    pub fn reset(&mut self) {
        self.min = f64::MAX;
        self.max = -f64::MAX;
        self.merged_nodes = 0;
        self.merged_weight = 0;
        self.unmerged_nodes = 0;
        self.unmerged_weight = 0;
        self.total_compressions = 0;
    }

    /// Writes node `pos` (`pos ≤` slots written so far), growing the array fallibly.
    fn put(&mut self, pos: usize, node: Node) -> Result<(), TdError> {
        let nodes = Arc::make_mut(&mut self.nodes);
        if pos < nodes.len() {
            nodes[pos] = node;
            return Ok(());
        }
        if nodes.len() == nodes.capacity() {
            let upper = (self.cap.max(1) as usize).max(nodes.len() + 1);
            let want = (nodes.len() * 2).max(16).min(upper);
            nodes
                .try_reserve_exact(want - nodes.len())
                .map_err(|_| TdError::Alloc)?;
        }
        nodes.push(node);
        Ok(())
    }

    /// Adds `weight` observations of `mean` (§4.2).
    pub fn add(&mut self, mean: f64, weight: i64) -> Result<(), TdError> {
        if self.merged_nodes as i64 + self.unmerged_nodes as i64 >= self.cap as i64 - 1 {
            self.compress()?;
        }
        let pos = self.merged_nodes as i64 + self.unmerged_nodes as i64;
        if pos >= self.cap as i64 {
            return Err(TdError::Overflow);
        }
        // The reference's weight checks on int64. With a negative weight (crafted payloads only)
        // its first check overflows; it is treated as passing.
        if weight >= 0 && self.unmerged_weight > i64::MAX - weight {
            return Err(TdError::Overflow);
        }
        let new_unmerged = self.unmerged_weight.wrapping_add(weight);
        if new_unmerged > i64::MAX.wrapping_sub(self.merged_weight) {
            return Err(TdError::Overflow);
        }
        let total = new_unmerged.wrapping_add(self.merged_weight) as f64;
        if (new_unmerged as f64).is_infinite() || total_overflows(total) {
            return Err(TdError::Overflow);
        }
        // Strict comparisons: the first of -0 and 0 to arrive is kept.
        if mean < self.min {
            self.min = mean;
        }
        if mean > self.max {
            self.max = mean;
        }
        // A failed allocation here is real memory exhaustion; the reference had the slot already.
        self.put(pos as usize, Node { mean, weight })
            .map_err(|_| TdError::Overflow)?;
        self.unmerged_nodes += 1;
        self.unmerged_weight = new_unmerged;
        Ok(())
    }

    /// Merges the buffer into the centroids (§4.3).
    pub fn compress(&mut self) -> Result<(), TdError> {
        if self.unmerged_nodes == 0 {
            return Ok(());
        }
        let n = (self.merged_nodes + self.unmerged_nodes) as usize;
        let nodes = &mut Arc::make_mut(&mut self.nodes)[..n];
        quicksort(nodes);
        let unmerged = self.unmerged_weight as f64;
        let tw = self.merged_weight as f64 + unmerged;
        if unmerged.is_infinite() || total_overflows(tw) {
            return Err(TdError::Overflow);
        }
        if tw <= 1.0 {
            // The reference returns here, after sorting, with nothing merged (§4.4).
            return Ok(());
        }
        let denom = TWO_PI * tw * tw.ln();
        if denom == f64::INFINITY {
            return Err(TdError::Overflow);
        }
        let normalizer = self.compression / denom;
        if normalizer == f64::INFINITY {
            return Err(TdError::Overflow);
        }
        let mut cur = 0usize;
        let mut wsf = 0.0f64;
        for i in 1..n {
            let pw = nodes[cur].weight as f64 + nodes[i].weight as f64;
            let z = pw * normalizer;
            let q0 = wsf / tw;
            let q2 = (wsf + pw) / tw;
            if z <= q0 * (1.0 - q0) && z <= q2 * (1.0 - q2) {
                nodes[cur].weight = nodes[cur].weight.wrapping_add(nodes[i].weight);
                let delta = nodes[i].mean - nodes[cur].mean;
                nodes[cur].mean += delta * nodes[i].weight as f64 / nodes[cur].weight as f64;
            } else {
                wsf += nodes[cur].weight as f64;
                cur += 1;
                nodes[cur] = nodes[i];
            }
            if cur != i {
                nodes[i] = Node::default();
            }
        }
        self.merged_nodes = cur as i32 + 1;
        self.merged_weight = c_i64(tw);
        self.unmerged_nodes = 0;
        self.unmerged_weight = 0;
        self.total_compressions = self.total_compressions.wrapping_add(1);
        Ok(())
    }

    /// Adds every node of `from` to `self` after compressing both (§4.5). `from`'s min/max are not
    /// used: the node means decide.
    pub fn merge_from(&mut self, from: &mut TDigest) -> Result<(), TdError> {
        self.compress()?;
        from.compress()?;
        for node in from.all_nodes() {
            self.add(node.mean, node.weight)?;
        }
        Ok(())
    }

    // -- queries (each compresses first, as the reference does) ---------------------------------

    /// The fraction of observations below `x`, counting half of those equal (§4.6).
    pub fn cdf(&mut self, x: f64) -> f64 {
        let _ = self.compress();
        let c = self.centroids();
        let n = c.len();
        let (min, max) = (self.min, self.max);
        if n == 0 {
            return f64::NAN;
        }
        if x < min {
            return 0.0;
        }
        if x > max {
            return 1.0;
        }
        if n == 1 {
            return if x - min <= max - min {
                0.5
            } else {
                (x - min) / (max - min)
            };
        }
        let total = self.merged_weight as f64;
        let m = |i: usize| c[i].mean;
        let w = |i: usize| c[i].weight as f64;
        if x < m(0) {
            let width = m(0) - min;
            if width > 0.0 {
                if x == min {
                    return 0.5 / total;
                }
                return (1.0 + (x - min) / width * (w(0) / 2.0 - 1.0)) / total;
            }
            return 0.0;
        }
        if x > m(n - 1) {
            let width = max - m(n - 1);
            if width > 0.0 {
                if x == max {
                    return 1.0 - 0.5 / total;
                }
                return 1.0 - (1.0 + (max - x) / width * (w(n - 1) / 2.0 - 1.0)) / total;
            }
            return 1.0;
        }
        let mut wsf = 0.0f64;
        for i in 0..n - 1 {
            if m(i) == x {
                let mut dw = 0.0f64;
                let mut j = i;
                while j < n && m(j) == x {
                    dw += w(j);
                    j += 1;
                }
                return (wsf + dw / 2.0) / total;
            } else if m(i) <= x && x < m(i + 1) {
                if m(i + 1) - m(i) > 0.0 {
                    if w(i) == 1.0 && w(i + 1) == 1.0 {
                        return (wsf + 1.0) / total;
                    }
                    let le = if w(i) == 1.0 { 0.5 } else { 0.0 };
                    let re = if w(i + 1) == 1.0 { 0.5 } else { 0.0 };
                    let dw = (w(i) + w(i + 1)) / 2.0;
                    let base = wsf + w(i) / 2.0 + le;
                    return (base + (dw - le - re) * (x - m(i)) / (m(i + 1) - m(i))) / total;
                }
                return (wsf + (w(i) + w(i + 1)) / 2.0) / total;
            } else {
                wsf += w(i);
            }
        }
        1.0 - 0.5 / total
    }

    /// The value at quantile `q ∈ [0, 1]` (QUANTILE, §5.6). Compresses.
    pub fn quantile(&mut self, q: f64) -> f64 {
        let _ = self.compress();
        match self.merged_nodes {
            0 => f64::NAN,
            1 => self.nodes[0].mean,
            _ => self.interp(q * self.merged_weight as f64),
        }
    }

    /// Several quantiles after one compression, in argument order.
    pub fn quantiles(&mut self, qs: &[f64]) -> Vec<f64> {
        let _ = self.compress();
        qs.iter().map(|&q| self.quantile(q)).collect()
    }

    /// The quantile BYRANK/BYREVRANK use (§4.7.1): like [`TDigest::quantile`] but an index below 1
    /// answers `min`.
    pub fn quantile_at(&mut self, q: f64) -> f64 {
        let _ = self.compress();
        if !(0.0..=1.0).contains(&q) || self.merged_nodes == 0 {
            return f64::NAN;
        }
        if self.merged_nodes == 1 {
            return self.nodes[0].mean;
        }
        let index = q * self.merged_weight as f64;
        if index < 1.0 {
            return self.min;
        }
        self.interp(index)
    }

    /// Interpolates the value at weight position `index` (§4.7); needs at least two centroids.
    fn interp(&self, index: f64) -> f64 {
        let c = self.centroids();
        let n = c.len();
        let (min, max) = (self.min, self.max);
        let total = self.merged_weight;
        let tw = total as f64;
        let m = |i: usize| c[i].mean;
        let w = |i: usize| c[i].weight as f64;
        if w(0) > 1.0 && index < w(0) / 2.0 {
            return min + (index - 1.0) / (w(0) / 2.0 - 1.0) * (m(0) - min);
        }
        if index > total.wrapping_sub(1) as f64 {
            return max;
        }
        let wl = w(n - 1);
        if wl > 1.0 && tw - index <= wl / 2.0 {
            return max - (tw - index - 1.0) / (wl / 2.0 - 1.0) * (max - m(n - 1));
        }
        let mut wsf = w(0) / 2.0;
        for i in 0..n - 1 {
            let dw = (w(i) + w(i + 1)) / 2.0;
            if wsf + dw > index {
                let mut lu = 0.0;
                if w(i) == 1.0 {
                    if index - wsf < 0.5 {
                        return m(i);
                    }
                    lu = 0.5;
                }
                let mut ru = 0.0;
                if w(i + 1) == 1.0 {
                    if wsf + dw - index <= 0.5 {
                        return m(i + 1);
                    }
                    ru = 0.5;
                }
                let z1 = index - wsf - lu;
                let z2 = wsf + dw - index - ru;
                return weighted_average(m(i), z2, m(i + 1), z1);
            }
            wsf += dw;
        }
        // Reached only through NaN means.
        let z1 = index - tw - wl / 2.0;
        let z2 = wl / 2.0 - z1;
        weighted_average(m(n - 1), z1, max, z2)
    }

    /// RANK (`reverse` false) or REVRANK of `v` (§5.8): -2 when empty, -1 beyond the end it counts
    /// from, the size beyond the other; otherwise from the CDF (compressing).
    pub fn rank(&mut self, v: f64, reverse: bool) -> i64 {
        let size = self.size() as f64;
        if size == 0.0 {
            return -2;
        }
        if v < self.min {
            return if reverse { c_i64(size) } else { -1 };
        }
        if v > self.max {
            return if reverse { -1 } else { c_i64(size) };
        }
        let c = self.cdf(v) * size;
        if reverse {
            c_i64((size - c.round()).round())
        } else {
            c_i64(half_round_down(c))
        }
    }

    /// BYRANK (`reverse` false) or BYREVRANK of a non-negative `rank` (§5.9).
    pub fn by_rank(&mut self, rank: i64, reverse: bool) -> f64 {
        let size = self.size() as f64;
        let r = rank as f64;
        if size == 0.0 {
            return f64::NAN;
        }
        if r == 0.0 {
            return if reverse { self.max } else { self.min };
        }
        if r >= size {
            return if reverse {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        if reverse {
            self.quantile_at((size - r - 1.0) / size)
        } else {
            self.quantile_at(r / size)
        }
    }

    /// The mean of the observations between quantiles `low < high` (§5.10). Compresses.
    pub fn trimmed_mean(&mut self, low: f64, high: f64) -> f64 {
        let _ = self.compress();
        match self.merged_nodes {
            0 => return f64::NAN,
            1 => return self.nodes[0].mean,
            _ => {}
        }
        let total = self.merged_weight as f64;
        let lo = (total * low).floor();
        let hi = (total * high).ceil();
        let (mut done, mut sum, mut count) = (0.0f64, 0.0f64, 0.0f64);
        for node in self.centroids() {
            let w = node.weight as f64;
            let mut take = w;
            take -= min2(max2(0.0, lo - done), take);
            take = min2(max2(0.0, hi - done), take);
            done += w;
            sum += node.mean * take;
            count += take;
            if done >= hi {
                break;
            }
        }
        sum / count
    }
}

/// The reference's `(a > b) ? a : b`.
fn max2(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// The reference's `(a < b) ? a : b`.
fn min2(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// The reference's overflow test on a total weight: `W` or `2π × W × ln W` is `+∞`.
fn total_overflows(total: f64) -> bool {
    total.is_infinite() || (TWO_PI * total * total.ln()).is_infinite()
}

/// The weighted average of two points, clamped to `[min(x1, x2), max(x1, x2)]` with exactly the
/// reference's conditional forms (they decide which NaN wins).
fn weighted_average(x1: f64, w1: f64, x2: f64, w2: f64) -> f64 {
    let (a, wa, b, wb) = if x1 <= x2 {
        (x1, w1, x2, w2)
    } else {
        (x2, w2, x1, w1)
    };
    let x = (a * wa + b * wb) / (wa + wb);
    let t = if x < b { x } else { b };
    if a > t {
        a
    } else {
        t
    }
}

/// The reference's quicksort over the whole slice (§4.3): middle pivot swapped to the end, Lomuto
/// partition on `<`, a direct compare-and-swap for two elements. The permutation of equal means
/// matters, so this must not be replaced by a library sort. The ranges are disjoint, so an explicit
/// stack (no recursion depth to overflow on the quadratic inputs) gives the same result.
///
/// One shortcut, with an identical result: on a range whose means are all equal no element is
/// below any pivot, so each partition step only swaps the middle node to the end and then the end
/// to the front, and recurses on the rest. That chain is replayed directly in O(n) instead of
/// O(n²) compares, so a stream of identical values (a constant latency) cannot stall the server
/// at large compressions. Mixed ranges take the reference's path.
fn quicksort(nodes: &mut [Node]) {
    if nodes.len() < 2 {
        return;
    }
    let mut stack: Vec<(usize, usize)> = vec![(0, nodes.len() - 1)];
    while let Some((lo, hi)) = stack.pop() {
        if lo >= hi {
            continue;
        }
        if hi - lo == 1 {
            if nodes[lo].mean > nodes[hi].mean {
                nodes.swap(lo, hi);
            }
            continue;
        }
        let first = nodes[lo].mean;
        if nodes[lo..=hi].iter().all(|n| n.mean == first) {
            // The all-equal chain (see above); the final pair compares equal and stays.
            let mut lo = lo;
            while hi - lo >= 2 {
                nodes.swap(lo + (hi - lo) / 2, hi);
                nodes.swap(lo, hi);
                lo += 1;
            }
            continue;
        }
        let p = lo + (hi - lo) / 2; // == (lo + hi) / 2 without overflow
        let pivot = nodes[p].mean;
        nodes.swap(p, hi);
        // k starts at lo - 1; track k + 1 to stay unsigned.
        let mut next = lo;
        for j in lo..hi {
            if nodes[j].mean < pivot {
                nodes.swap(next, j);
                next += 1;
            }
        }
        nodes.swap(next, hi);
        let q = next;
        if q > lo {
            stack.push((lo, q - 1));
        }
        stack.push((q + 1, hi));
    }
}

/// The reference's `half_round_down` (RANK): halves go toward zero, NaN stays NaN.
fn half_round_down(f: f64) -> f64 {
    let t = f.trunc();
    let frac = f - t;
    if frac.abs() <= 0.5 {
        t
    } else if t >= 0.0 {
        t + 1.0
    } else {
        t - 1.0
    }
}

#[cfg(test)]
mod tests;
