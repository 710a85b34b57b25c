//! An ordered set of `(u64, u64)` pairs kept in full chunks: the expiry queue's storage
//! (`store::db`'s `ExpiryQueue`, one per stripe: (deadline, key hash) of every key with a TTL).
//!
//! # Why not a `BTreeSet`
//! A B-tree leaf holds 11 pairs in a 192-byte block (a 208-byte glibc chunk), and a tree filled
//! at its right edge, which is how deadlines arrive when keys are set with one `EX`, splits its
//! last leaf in two and leaves every leaf about half full: ~37 bytes a key, a quarter of what a
//! key with a TTL cost in all (141 bytes, Redis 157). Here a chunk holds up to [`CHUNK`] pairs in
//! one allocation (1,024 bytes when full, a 1,040-byte glibc chunk: 16.25 bytes a pair), and the
//! last chunk, when it fills up with a pair to go in its last quarter, hands only the pairs from
//! there on to a new chunk, so that rising keys leave chunks at least three quarters full
//! behind. A split anywhere else halves the chunk, as a B-tree does. Removals merge a chunk that
//! falls under a quarter full with a neighbour when both fit in one, so deletions cannot leave a
//! chunk per pair. A chunk's capacity starts small and doubles, so that a set of a few pairs
//! (a stripe with a few keys with a TTL) costs about what a B-tree leaf did.
//!
//! An index (`BTreeMap`) maps each chunk's first pair to the chunk: a lookup is a search of the
//! index (about one entry per 64 pairs) and a binary search of one chunk.

use std::collections::BTreeMap;
use std::ops::Bound;

type Pair = (u64, u64);

/// Pairs per chunk.
pub const CHUNK: usize = 64;

/// A sorted run of at most [`CHUNK`] distinct pairs. Its capacity starts at [`FIRST_CAPACITY`]
/// and doubles up to [`CHUNK`] (exactly: `reserve_exact`), so that a stripe holding a few keys
/// with a TTL does not pay for a whole chunk.
struct Chunk {
    items: Vec<Pair>,
}

/// A new chunk's capacity.
const FIRST_CAPACITY: usize = 4;

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            items: Vec::with_capacity(FIRST_CAPACITY),
        }
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn pairs(&self) -> &[Pair] {
        &self.items
    }

    /// Room for `more` pairs, growing by doubling up to [`CHUNK`], never past it.
    fn make_room(&mut self, more: usize) {
        let need = self.items.len() + more;
        let cap = self.items.capacity();
        if need > cap {
            let target = (cap * 2).max(need).min(CHUNK);
            self.items.reserve_exact(target - self.items.len());
        }
    }

    fn insert_at(&mut self, at: usize, pair: Pair) {
        debug_assert!(self.len() < CHUNK && at <= self.len());
        self.make_room(1);
        self.items.insert(at, pair);
    }

    fn remove_at(&mut self, at: usize) {
        self.items.remove(at);
        // Give back half when it is a quarter used (a chunk emptied by active expiry).
        let cap = self.items.capacity();
        if cap > FIRST_CAPACITY && self.items.len() * 4 <= cap {
            self.items.shrink_to((cap / 2).max(FIRST_CAPACITY));
        }
    }

    /// Moves the pairs from `at` on into a new chunk (of exactly their number, plus room for
    /// one: the caller often adds a pair to it next).
    fn split_off(&mut self, at: usize) -> Chunk {
        let mut items = Vec::with_capacity((self.len() - at + 1).max(FIRST_CAPACITY));
        items.extend_from_slice(&self.items[at..]);
        self.items.truncate(at);
        Chunk { items }
    }

    /// Appends `other`'s pairs, all greater than this chunk's (the caller checked they fit).
    fn append(&mut self, other: &Chunk) {
        debug_assert!(self.len() + other.len() <= CHUNK);
        self.make_room(other.len());
        self.items.extend_from_slice(other.pairs());
    }
}

/// The ordered set (module docs). Every chunk is non-empty, and the index key of a chunk is its
/// first pair.
#[derive(Default)]
pub struct ChunkedSet {
    chunks: BTreeMap<Pair, Chunk>,
    len: usize,
}

impl std::fmt::Debug for ChunkedSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ChunkedSet({} pairs, {} chunks)",
            self.len,
            self.chunks.len()
        )
    }
}

impl ChunkedSet {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes the set has allocated: each chunk's pairs, and its index entry counted as its key
    /// and value (the B-tree's nodes hold about that, at 2/3 to full).
    pub fn allocated_bytes(&self) -> usize {
        let index_entry = std::mem::size_of::<Pair>() + std::mem::size_of::<Chunk>();
        self.chunks
            .values()
            .map(|c| c.items.capacity() * std::mem::size_of::<Pair>() + index_entry)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The smallest pair.
    pub fn first(&self) -> Option<Pair> {
        self.chunks.first_key_value().map(|(&first, _)| first)
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// The index key of the chunk that holds `pair` or would: the last chunk starting at or
    /// before it, or the first chunk when `pair` is below every chunk.
    fn chunk_for(&self, pair: Pair) -> Option<Pair> {
        self.chunks
            .range(..=pair)
            .next_back()
            .or_else(|| self.chunks.first_key_value())
            .map(|(&key, _)| key)
    }

    /// Adds `pair`; false if it was there already.
    pub fn insert(&mut self, pair: Pair) -> bool {
        let Some(key) = self.chunk_for(pair) else {
            let mut chunk = Chunk::new();
            chunk.insert_at(0, pair);
            self.chunks.insert(pair, chunk);
            self.len = 1;
            return true;
        };
        let is_last = self.chunks.last_key_value().is_some_and(|(&k, _)| k == key);
        let Some(chunk) = self.chunks.get_mut(&key) else {
            return false;
        };
        let at = match chunk.pairs().binary_search(&pair) {
            Ok(_) => return false,
            Err(at) => at,
        };
        self.len += 1;
        if chunk.len() < CHUNK {
            chunk.insert_at(at, pair);
            if at == 0 {
                self.rekey(key);
            }
            return true;
        }
        if is_last && at >= CHUNK * 3 / 4 {
            // Near the right edge (deadlines rise, but keys of one millisecond come in hash
            // order, not sorted): the pairs from `at` on and the new one start a new chunk, and
            // the full one stays at least three quarters full.
            let mut next = chunk.split_off(at);
            next.insert_at(0, pair);
            self.chunks.insert(pair, next);
            return true;
        }
        let mut upper = chunk.split_off(CHUNK / 2);
        if at <= CHUNK / 2 {
            chunk.insert_at(at, pair);
        } else {
            upper.insert_at(at - CHUNK / 2, pair);
        }
        self.chunks.insert(upper.items[0], upper);
        if at == 0 {
            self.rekey(key);
        }
        true
    }

    /// Removes `pair`; false if it was not there.
    pub fn remove(&mut self, pair: Pair) -> bool {
        let Some((&key, _)) = self.chunks.range(..=pair).next_back() else {
            return false;
        };
        let Some(chunk) = self.chunks.get_mut(&key) else {
            return false;
        };
        let Ok(at) = chunk.pairs().binary_search(&pair) else {
            return false;
        };
        chunk.remove_at(at);
        self.len -= 1;
        if chunk.len() == 0 {
            self.chunks.remove(&key);
            return true;
        }
        let small = chunk.len() < CHUNK / 4;
        let key = if at == 0 { self.rekey(key) } else { key };
        if small {
            self.merge_around(key);
        }
        true
    }

    /// Re-indexes the chunk indexed at `old` under its first pair now; returns the new key.
    fn rekey(&mut self, old: Pair) -> Pair {
        let Some(chunk) = self.chunks.remove(&old) else {
            return old;
        };
        let key = chunk.items[0];
        self.chunks.insert(key, chunk);
        key
    }

    /// Merges the chunk at `key` with its next neighbour, or else its previous one, when the
    /// two fit in one chunk.
    fn merge_around(&mut self, key: Pair) {
        let len_of = |set: &ChunkedSet, k: &Pair| set.chunks.get(k).map_or(0, |c| c.len());
        let mine = len_of(self, &key);
        let next = self
            .chunks
            .range((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(&k, c)| (k, c.len()));
        if let Some((next_key, n)) = next.filter(|&(_, n)| mine + n <= CHUNK) {
            debug_assert!(n > 0);
            if let Some(upper) = self.chunks.remove(&next_key) {
                if let Some(chunk) = self.chunks.get_mut(&key) {
                    chunk.append(&upper);
                }
            }
            return;
        }
        let prev = self
            .chunks
            .range(..key)
            .next_back()
            .map(|(&k, c)| (k, c.len()));
        if let Some((prev_key, _)) = prev.filter(|&(_, n)| mine + n <= CHUNK) {
            if let Some(upper) = self.chunks.remove(&key) {
                if let Some(chunk) = self.chunks.get_mut(&prev_key) {
                    chunk.append(&upper);
                }
            }
        }
    }

    /// Every pair in order (tests).
    #[cfg(test)]
    fn pairs(&self) -> Vec<Pair> {
        self.chunks
            .values()
            .flat_map(|c| c.pairs().iter().copied())
            .collect()
    }

    /// Checks the invariants (tests): chunks non-empty and sorted, keyed by their first pair,
    /// in order across chunks, and the count.
    #[cfg(test)]
    fn check(&self) {
        let mut n = 0;
        let mut last: Option<Pair> = None;
        for (key, chunk) in &self.chunks {
            assert!(chunk.len() > 0 && chunk.len() <= CHUNK && chunk.items.capacity() <= CHUNK);
            assert_eq!(*key, chunk.items[0]);
            for &p in chunk.pairs() {
                assert!(last.is_none_or(|l| l < p), "{last:?} then {p:?}");
                last = Some(p);
            }
            n += chunk.len();
        }
        assert_eq!(n, self.len);
    }

    /// Chunks in the index (tests).
    #[cfg(test)]
    fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn rising_pairs_leave_full_chunks() {
        let mut s = ChunkedSet::default();
        for i in 0..10 * CHUNK as u64 {
            assert!(s.insert((i, i * 7)));
        }
        s.check();
        assert_eq!(s.chunk_count(), 10);
        assert_eq!(s.first(), Some((0, 0)));
        assert!(!s.insert((5, 35)), "a pair already there");
        // Popping from the front, as active expiry does, empties chunks one by one.
        for i in 0..5 * CHUNK as u64 {
            assert_eq!(s.first(), Some((i, i * 7)));
            assert!(s.remove((i, i * 7)));
        }
        s.check();
        assert_eq!(s.chunk_count(), 5);
        assert!(!s.remove((0, 0)));
    }

    #[test]
    fn a_chunk_grows_by_doubling_to_its_size_and_gives_memory_back() {
        let mut s = ChunkedSet::default();
        s.insert((1, 1));
        let cap = |s: &ChunkedSet| s.chunks.values().map(|c| c.items.capacity()).sum::<usize>();
        assert_eq!(cap(&s), FIRST_CAPACITY);
        for i in 2..=CHUNK as u64 {
            s.insert((i, 0));
        }
        assert_eq!((s.chunk_count(), cap(&s)), (1, CHUNK));
        for i in 2..=CHUNK as u64 {
            s.remove((i, 0));
        }
        s.check();
        assert_eq!((s.len(), cap(&s)), (1, FIRST_CAPACITY));
    }

    #[test]
    fn removals_merge_sparse_chunks() {
        let mut s = ChunkedSet::default();
        let n = 20 * CHUNK as u64;
        // Reversed: every insert is at the front, so chunks split in halves.
        for i in (0..n).rev() {
            s.insert((i, 0));
        }
        s.check();
        for i in 0..n {
            if i % 16 != 0 {
                assert!(s.remove((i, 0)));
            }
        }
        s.check();
        assert_eq!(s.len(), (n / 16) as usize);
        // Inserted from the top, every chunk split in halves (40 chunks of 32); with 15 of 16
        // pairs removed, a chunk that fell under a quarter full merged with a neighbour that
        // fit: at most 5 chunks hold the 80 pairs left, not 40.
        assert!(s.chunk_count() <= 5, "{} chunks", s.chunk_count());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64, u64),
        PopFirst,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Small ranges, so that inserts meet existing pairs and removals find them.
        let pair = (0u64..600, 0u64..3);
        prop_oneof![
            5 => pair.clone().prop_map(|(a, b)| Op::Insert(a, b)),
            3 => pair.prop_map(|(a, b)| Op::Remove(a, b)),
            1 => Just(Op::PopFirst),
        ]
    }

    proptest! {
        #[test]
        fn answers_as_a_btreeset(ops in prop::collection::vec(op(), 1..2000)) {
            let mut s = ChunkedSet::default();
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(a, b) => prop_assert_eq!(s.insert((a, b)), model.insert((a, b))),
                    Op::Remove(a, b) => prop_assert_eq!(s.remove((a, b)), model.remove(&(a, b))),
                    Op::PopFirst => {
                        let first = model.first().copied();
                        prop_assert_eq!(s.first(), first);
                        if let Some(p) = first {
                            prop_assert!(s.remove(p));
                            model.remove(&p);
                        }
                    }
                }
                prop_assert_eq!(s.len(), model.len());
            }
            s.check();
            prop_assert_eq!(s.pairs(), model.iter().copied().collect::<Vec<_>>());
        }
    }
}
