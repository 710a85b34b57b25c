//! The key table of one database: segments behind `Arc`, so a snapshot is a copy of the segment
//! list, and a write after it copies only the segment it touches.
//!
//! # Why (issue 11: "the rewrite must not block the server")
//! Redis takes a BGSAVE / AOF-rewrite / full-sync snapshot with `fork()`: the kernel shares every
//! page copy-on-write, the parent is blocked only for the fork (Redis reports it as INFO
//! `latest_fork_usec`), and a later write copies one 4 KiB page. hyperbloom has threads, so no
//! fork; it used to copy the table under the keyspace lock instead (a key and a value per entry),
//! which stalled every client for 0.2-0.7 s per million keys. Here the table does what the kernel
//! does, with segments for pages:
//!
//! ```text
//!   KeyTable { segs: [Arc<Segment>; n], level, split, len, expires_len, removed, hasher }
//!                       |
//!   Segment  { map: HashTable<Entry>,       the keys whose hash falls in this segment, each
//!              ttls }                      with its TTL in its block (`store::entry`); how
//!                                          many of them have one
//! ```
//! - **Snapshot** ([`KeyTable::snapshot`]): clones the `Arc`s: O(n / [`SEG_KEYS`]) count
//!   increments under the lock, about 8 000 for a million keys (0.1-0.4 ms measured); nothing
//!   per key.
//! - **Write**: every path that changes a segment goes through [`Arc::make_mut`]. While a snapshot
//!   holds the segment, that clones it first: its table, with the entries in it *shared*
//!   (`store::entry`: each block carries a holder count, so the copy is ~[`SEG_KEYS`] pointer
//!   copies and count increments, one table allocation, no key or value copied). The first
//!   change to an entry still shared copies that one entry (strings copied, filters sharing their
//!   pages as before). A write to a segment no snapshot holds costs one uncontended
//!   compare-exchange on its count, and one load of the entry's count.
//! - **Consistency** follows from the types: a segment behind a shared `Arc`, and an entry whose
//!   count is above one, are reachable only through `&`, so nothing can change what a snapshot
//!   sees; it is exactly the table at the instant of [`KeyTable::snapshot`], whatever comes after
//!   (writes, deletions, expiry, growth, FLUSHDB, SWAPDB, MOVE). No write path needs a hook, and
//!   none can forget one.
//! - **Release**: a save's writer walks its snapshot with [`TableSnapshot::drain_some`], dropping
//!   each segment once written. A later write to a segment already written copies nothing, and
//!   the writer's thread, not the event loop, lets go of the old copy (count decrements; it frees
//!   only the entries the live table replaced meanwhile).
//! - **Memory**: like a fork's pages, a segment's table is duplicated only if written while a
//!   snapshot holds it, and an entry only if it is itself changed.
//!
//! # What it costs (measured, `scripts/bench-snapshot.sh`, 1M keys, 50 writing clients)
//! The lock is held 0.1-0.8 ms for the snapshot instead of 140-440 ms. Where the stalls came from
//! (instrumented build, timings per event-loop round, notes/stall.md): when each copy copied its
//! entries, a uniform write load copied most of them during a save (677 181 of 951 568 keys
//! for one rewrite, 911 995 for a BGSAVE), and the snapshot's thread then freed the old copies at the end (1.7 s for that
//! rewrite, 0.67 s for a BGSAVE). While it did, each segment copy on the event loop took 10-67 ms
//! instead of tens of µs: the copies' ~128 mallocs ran into glibc's main arena filling with the
//! other thread's frees (the copy's table allocation consolidates them). 62 copies over 3 ms
//! held the lock 1.42 s in all during that one drop. Sharing the entries removes both the copies
//! and the frees. Max latency during a save, medians of 3 interleaved rounds, same run, load
//! average 7-12 (ms): BGSAVE 334 before, 128 with the release alone, 77 with shared entries,
//! Redis 7.0.15 70; BGREWRITEAOF 314 / 212 / 98, Redis 108; idle 65 / 58 / 93, Redis 72. The
//! block of a 16-byte key is 52 bytes (was 50), still a 64-byte chunk: 87 B/key for 1M strings
//! before and after (`scripts/bench_memory.py`, Redis 114-115).

//! # Growth without a stall: linear hashing
//! A single hash table doubles when full, rehashing every key under the lock (tens of ms per
//! million keys, one cache miss per entry). Segments instead grow one at a time, by Litwin's
//! linear hashing: with `n = 2^level + split` segments, a key goes to segment
//! `x mod 2^level`, or `x mod 2^(level+1)` when that is below `split` (`x` is the key's hash
//! shifted right by [`SEG_SHIFT`], so the bits that pick a segment are not the ones hashbrown uses
//! inside it). When the table averages more than [`SEG_KEYS`] keys per segment, segment `split`
//! is split in two (its keys with bit `level` of `x` set move to a new last segment) and `split`
//! advances; the reverse merge gives memory back after mass deletions ([`KeyTable::shrink`]).
//! Every resize is O([`SEG_KEYS`]).
//!
//! # Keys added under the shared keyspace lock
//! A key's stripe (`store::db::Stripes`, the value locks of the shared path) is the low 8 bits of
//! its segment bits ([`stripe_of`]). A key's segment is those bits modulo `2^level` or
//! `2^(level+1)`, so from level 8 (256 segments, ~32k keys) on, all keys of a segment share the
//! segment index modulo 256 as their stripe, and whoever holds that stripe for writing is the
//! only one on the shared path looking into the segment. [`KeyTable::insert_shared`] adds a key
//! there: the segment's map may grow (hence [`SegMap`]'s cell), the segment list, the `Arc`s and
//! the other segments do not change. It is refused ([`KeyTable::can_insert_shared`]) below
//! level 8, when a snapshot holds the segment, past 1/16 over the split mark, and in a segment
//! of [`SEG_SHARED_MAX`] keys: splits stay on the exclusive path, which catches up
//! ([`KeyTable::grew`], [`KeyTable::shrink`]). The key count is an atomic its callers add to
//! once per batch ([`KeyTable::count_shared`]). Keys are removed the same way
//! ([`KeyTable::remove_shared`]), and TTLs set and cleared in their entries
//! ([`KeyTable::set_expiry_shared`], [`KeyTable::remove_expiry_shared`]), counted at once in an
//! atomic, since a reader that sees no TTL anywhere looks no further ([`KeyTable::expiry`]).
//!
//! # Filters' reserved bytes
//! The bytes a filter reserved but never wrote count toward `used_memory` once
//! (`store::pages::Reservation`). A snapshot used to hold uncounted copies; now it holds the
//! originals and the live table gets the copy. So a segment copied for a write counts its copies'
//! reservations and un-counts its originals' ([`Value::uncount_reservations`]): the total stays
//! what it was.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hashbrown::HashTable;

use super::entry::Entry;
use super::value::Value;

/// The average number of keys per segment above which a segment is split. A copy-on-write copy
/// is at most a few times this many pointers; the snapshot clones `len / SEG_KEYS`
/// `Arc`s. Chosen between 512, 128 and 64 by `scripts/bench-snapshot.sh`: the lock time grows
/// as the segments shrink (0.09-0.18, 0.14-0.37, 0.36-0.79 ms per million keys), the latency
/// under writes did not separate them on this (noisy) machine, and a smaller copy bounds the
/// work one event-loop iteration of 50 writes can meet.
pub const SEG_KEYS: usize = 128;

/// The hash bits below this are hashbrown's bucket index inside a segment (a segment holds a few
/// thousand buckets at most) and the top 7 its tag; the segment index comes from the bits between.
const SEG_SHIFT: u32 = 24;

/// Past the split mark, keys may still be added under the shared lock until the table holds
/// this fraction more ([`KeyTable::can_insert_shared`]): 1/16, so segments average at most 136
/// keys instead of 128 while the splits wait for the exclusive lock.
const SHARED_SLACK: usize = 16;

/// The most keys a segment may reach by keys added under the shared lock
/// ([`KeyTable::can_insert_shared`]). A segment not yet split in the current round of linear
/// hashing covers twice the hash range of one that was, so it holds up to about 2 ×
/// [`SEG_KEYS`] in the normal course; 3 × leaves room for chance and bounds what a split moves.
const SEG_SHARED_MAX: usize = 3 * SEG_KEYS;

/// Splits made at most per key added on the exclusive path ([`KeyTable::grew`]): one is the
/// steady state; more catch up on the splits keys added under the shared lock left due, while
/// bounding what one insert does under the lock (a split moves about [`SEG_KEYS`] / 2 entries).
const SPLITS_PER_KEY: usize = 4;

/// How many entries a merge pass may move ([`KeyTable::shrink`]): bounds the time the cron's
/// shrinking holds the lock.
const MERGE_BUDGET: usize = 16 * SEG_KEYS;

/// Entries copied by writes to entries a snapshot shared, process-wide (logged when a save
/// ends, as Redis logs the memory its child's copy-on-write cost): compare two readings.
pub fn entries_copied() -> u64 {
    super::entry::copies()
}

/// A key table's hash function, detached from the table ([`KeyTable::hasher`]).
#[derive(Clone)]
pub struct KeyHasher(ahash::RandomState);

impl KeyHasher {
    /// What [`KeyTable::hash`] answers for `key` on the table this came from.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.0.hash_one(key)
    }
}

/// How many stripe locks guard the values, and a segment's keys, under the shared keyspace lock
/// (`store::db::Stripes`): a power of two, enough that two cores writing random keys rarely meet
/// (1 in 256 per pair of commands), few enough to stay in 16 KiB.
pub const STRIPES: usize = 256;

/// The table level from which every key of a segment is in one stripe ([`stripe_of`]):
/// `log2(STRIPES)`.
const STRIPE_LEVEL: u32 = STRIPES.trailing_zeros();

/// The stripe of the key whose hash is `h`: the low bits of its segment bits. A key's segment is
/// its segment bits modulo `2^level` or `2^(level+1)`, so from [`STRIPE_LEVEL`] on every key of a
/// segment has the segment's index modulo [`STRIPES`] for its stripe: holding that stripe for
/// writing excludes every reader and writer of the segment on the shared path, which is what lets
/// a key be added there ([`KeyTable::insert_shared`]).
#[inline]
pub fn stripe_of(h: u64) -> usize {
    seg_bits(h) & (STRIPES - 1)
}

/// The shared path's locking rule, checked in debug builds at every table access that relies on
/// it: a thread holding the keyspace lock shared reads a key's segment tables only while it
/// holds the key's stripe, and changes them only while it holds that stripe for writing (the
/// argument of [`SegCell`]'s `Sync` impl). The keyspace and stripe guards (`engine::Shared::
/// engine_shared`, `store::db::Stripes`) record themselves in thread-local marks; the table
/// methods the shared path calls ([`KeyTable::find`], [`KeyTable::expiry`],
/// [`KeyTable::find_for_write`] and the `*_shared` changes) check them. Release builds record
/// nothing and check nothing: the marks are empty structs. What the check cannot see: a read of a
/// segment through a path that calls none of those methods (`KeyTable::prefetch`, which reads a
/// key map's structure only, under a stripe when another thread may be changing it).
pub mod held {
    use std::marker::PhantomData;

    #[cfg(debug_assertions)]
    thread_local! {
        /// How many shared keyspace guards this thread holds.
        static SHARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// The stripes this thread holds, and whether for writing.
        static STRIPES: std::cell::RefCell<Vec<(usize, bool)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Marks this thread as holding the keyspace lock shared while it lives (beside the guard:
    /// not `Send`, so it is dropped on the thread that made it).
    #[derive(Debug)]
    pub struct SharedLockMark(PhantomData<*const ()>);

    impl SharedLockMark {
        #[allow(clippy::new_without_default)]
        pub fn new() -> SharedLockMark {
            #[cfg(debug_assertions)]
            SHARED.with(|s| s.set(s.get() + 1));
            SharedLockMark(PhantomData)
        }
    }

    impl Drop for SharedLockMark {
        fn drop(&mut self) {
            #[cfg(debug_assertions)]
            SHARED.with(|s| s.set(s.get().saturating_sub(1)));
        }
    }

    /// Marks this thread as holding a stripe (for writing, or not) while it lives.
    #[derive(Debug)]
    pub struct StripeMark {
        #[cfg(debug_assertions)]
        stripe: usize,
        #[cfg(debug_assertions)]
        write: bool,
        _not_send: PhantomData<*const ()>,
    }

    impl StripeMark {
        #[allow(unused_variables)]
        pub fn new(stripe: usize, write: bool) -> StripeMark {
            #[cfg(debug_assertions)]
            STRIPES.with(|h| h.borrow_mut().push((stripe, write)));
            StripeMark {
                #[cfg(debug_assertions)]
                stripe,
                #[cfg(debug_assertions)]
                write,
                _not_send: PhantomData,
            }
        }
    }

    impl Drop for StripeMark {
        fn drop(&mut self) {
            #[cfg(debug_assertions)]
            STRIPES.with(|h| {
                let mut h = h.borrow_mut();
                if let Some(at) = h.iter().rposition(|&m| m == (self.stripe, self.write)) {
                    h.swap_remove(at);
                }
            });
        }
    }

    /// Debug builds: panics if this thread holds the keyspace lock shared but not `stripe` (for
    /// writing, if `write`) — a table access the shared path's rule forbids.
    #[inline]
    #[allow(unused_variables)]
    pub fn check(stripe: usize, write: bool, what: &str) {
        #[cfg(debug_assertions)]
        if SHARED.with(|s| s.get()) > 0 {
            let ok = STRIPES.with(|h| {
                h.borrow()
                    .iter()
                    .any(|&(i, w)| i == stripe && (w || !write))
            });
            assert!(
                ok,
                "{what} under the shared keyspace lock without stripe {stripe} held{}",
                if write { " for writing" } else { "" }
            );
        }
    }
}

/// A segment's key map ([`SegMap`]). The keyspace lock guards it like the rest of the key table,
/// with one exception that needs the cell: under the *shared* lock, a thread holding a segment's
/// stripe for writing may add a key to it or remove one ([`KeyTable::insert_shared`],
/// [`KeyTable::remove_shared`]), and set or clear a key's TTL, which may rebuild its entry
/// ([`KeyTable::set_expiry_shared`], [`KeyTable::remove_expiry_shared`]).
#[derive(Default)]
struct SegCell<T>(UnsafeCell<T>);

/// A segment's key map.
type SegMap = SegCell<HashTable<Entry>>;

// SAFETY: a `SegCell` is reached through `&` from several threads only under the keyspace lock
// held shared (the exclusive holder, or a save's writer with its own `Arc` to a segment no live
// write may change, reach it alone) or through a snapshot's `Arc`. Under the shared lock, it is
// changed only by `KeyTable::insert_shared`, `remove_shared`, `set_expiry_shared` and
// `remove_expiry_shared`, whose callers hold the segment's stripe for writing (every key of the
// segment maps to it at the levels where that is allowed); everything that reads a segment's
// tables under the shared lock holds the stripe of the key it reads (`store::db::SharedDb`), or,
// when another thread may be inserting under the shared lock meanwhile (`Shared::parallel_batches`
// with inserts on), the stripe of the hash it walks (`Db::prefetch`, which reads the key map
// alone; with one thread running batches the walk ends before that thread's commands run, and
// no other thread inserts). So a reading `&` and the writing `&mut` never overlap in time,
// and the lock's release/acquire orders them. A segment a snapshot holds (its `Arc` shared) is
// never changed under the shared lock. What the tables hold (entries, keys and times) is `Send`
// and `Sync` already, as `T: Send + Sync` requires. Debug builds (and the tests, `profile.ci`)
// check the stripe half of this argument at every table access the shared path makes ([`held`]).
unsafe impl<T: Send + Sync> Sync for SegCell<T> {}

impl<T> Deref for SegCell<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: see the `Sync` impl: no `&mut` to the table exists while a `&` to it is in use.
        unsafe { &*self.0.get() }
    }
}

impl<T> DerefMut for SegCell<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }
}

impl<T: Clone> Clone for SegCell<T> {
    fn clone(&self) -> SegCell<T> {
        SegCell::new((**self).clone())
    }
}

impl<V> std::fmt::Debug for SegCell<HashTable<V>> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SegCell({})", self.len())
    }
}

impl<T> SegCell<T> {
    fn new(table: T) -> SegCell<T> {
        SegCell(UnsafeCell::new(table))
    }

    fn into_inner(self) -> T {
        self.0.into_inner()
    }

    /// The table for a change under the shared keyspace lock.
    ///
    /// # Safety
    /// The caller holds the keyspace lock shared and the stripe of every key of the segment for
    /// writing (the table is at [`STRIPE_LEVEL`] or above), and no snapshot holds the segment:
    /// then nothing else reads or writes the table while the returned `&mut` lives (the `Sync`
    /// impl).
    #[allow(clippy::mut_from_ref)]
    unsafe fn shared_mut(&self) -> &mut T {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.0.get() }
    }
}

/// The keys whose hash maps here, with their TTLs. Shared (behind `Arc`) with the snapshots taken
/// since it was last written.
#[derive(Debug, Default)]
pub struct Segment {
    map: SegMap,
    /// How many of the keys have a TTL (the RDB's RESIZEDB hint, and walks over keys with a TTL
    /// skip a segment without). Atomic as `keys_changed` is, for the TTLs set and cleared under
    /// the shared lock.
    ttls: AtomicUsize,
    /// Keys added to or removed from `map` so far: SCAN's ordered copy of the segment
    /// ([`ScanCache`]) is good while this has not moved. Atomic for the keys added and removed
    /// under the shared lock, where the stripe makes the writer the segment's only user, so a
    /// load and a store (no locked add) suffice; SCAN reads it under the exclusive lock.
    keys_changed: AtomicU64,
}

impl Clone for Segment {
    /// The copy a write makes of a segment a snapshot holds: its tables, the entries in them
    /// shared (`store::entry`: a count bumped per entry, no key or value copied). A later change
    /// to an entry copies that entry alone, and the copy takes over counting a filter's reserved
    /// bytes then.
    fn clone(&self) -> Segment {
        Segment {
            map: self.map.clone(),
            ttls: AtomicUsize::new(self.ttls.load(Ordering::Relaxed)),
            keys_changed: AtomicU64::new(self.keys_changed.load(Ordering::Relaxed)),
        }
    }
}

impl Segment {
    /// Counts a key added or removed, on the exclusive path.
    #[inline]
    fn changed(&mut self) {
        *self.keys_changed.get_mut() += 1;
    }

    /// Counts a key added or removed under the shared lock, by the holder of the segment's
    /// stripe (its only user meanwhile: [`KeyTable::insert_shared`]).
    #[inline]
    fn changed_shared(&self) {
        let n = self.keys_changed.load(Ordering::Relaxed);
        self.keys_changed.store(n + 1, Ordering::Relaxed);
    }

    fn ttls(&self) -> usize {
        self.ttls.load(Ordering::Relaxed)
    }
}

/// Counts a TTL set (`added`) or cleared in segment `seg` and in the table's total `total`. On
/// the exclusive path, or by the holder of the segment's stripe under the shared lock: the
/// segment has no other user then, so a load and a store count it (as in
/// [`Segment::changed_shared`]); the total is shared by every stripe's holder.
#[inline]
fn count_ttl(total: &AtomicUsize, seg: &Segment, added: bool) {
    let before = seg.ttls.load(Ordering::Relaxed);
    if added {
        seg.ttls.store(before + 1, Ordering::Relaxed);
        total.fetch_add(1, Ordering::Relaxed);
    } else {
        seg.ttls.store(before - 1, Ordering::Relaxed);
        total.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What [`KeyTable::find_for_write`] found.
pub enum ForWrite<'a> {
    /// The entry, which no snapshot can reach.
    Found(&'a Entry),
    /// No such key, in a segment no snapshot holds.
    Missing,
    /// A snapshot can reach the segment or the entry.
    Shared,
}

/// The segmented, copy-on-write key table (module docs).
#[derive(Debug)]
pub struct KeyTable {
    segs: Vec<Arc<Segment>>,
    level: u32,
    split: usize,
    /// Atomic for the keys added under the shared lock ([`KeyTable::insert_shared`]).
    len: AtomicUsize,
    /// Atomic for the TTLs set and cleared under the shared lock
    /// ([`KeyTable::set_expiry_shared`]), which count them at once: a reader's fast path
    /// ([`KeyTable::expiry`]) trusts a zero.
    expires_len: AtomicUsize,
    /// Removals since [`KeyTable::shrink`] last walked every segment: only a removal can leave a
    /// segment's table sparse, so with none the walk (one cache miss per segment, ~8 000 for a
    /// million keys, ten times a second under the cron's lock) is skipped.
    removed: usize,
    /// Removals under the shared lock ([`KeyTable::count_shared`]), folded into `removed` by
    /// [`KeyTable::shrink`].
    removed_shared: AtomicUsize,
    /// Splits and merges so far: they move keys between segments, so SCAN's ordered copies
    /// ([`ScanCache`]) name the table's shape as well as the segment's changes.
    reshapes: u64,
    /// SCAN's ordered copies of the segments its last steps stopped inside ([`KeyTable::scan`]).
    /// SCAN runs under the exclusive lock, so the mutex is never contended; it lets a `&self`
    /// step keep the copy.
    scan_cache: Mutex<ScanCache>,
    hasher: ahash::RandomState,
}

impl Default for KeyTable {
    fn default() -> KeyTable {
        KeyTable::with_hasher(process_hasher())
    }
}

/// The key hash of every table: seeded once per process, as Redis seeds its dict hash once at
/// startup. A SCAN cursor is a position in that hash's order ([`scan_position`]), so it keeps
/// its meaning when a load puts the keys in a new table mid-walk (DEBUG RELOAD, a replica's full
/// sync), as Redis's does; with a seed per table such a walk returned keys twice and missed
/// others. Still random per process, so no one can aim keys at a segment.
fn process_hasher() -> ahash::RandomState {
    static HASHER: std::sync::OnceLock<ahash::RandomState> = std::sync::OnceLock::new();
    HASHER.get_or_init(ahash::RandomState::new).clone()
}

fn seg_bits(h: u64) -> usize {
    (h >> SEG_SHIFT) as usize
}

/// The slots per segment of [`KeyTable::random_entry`]'s draw: 8 × [`SEG_KEYS`], so a draw
/// lands on a key with a chance of 1/8 to 1/4 and 64 draws all miss about once in 2,500.
pub const RANDOM_SLOTS: usize = 8 * SEG_KEYS;

/// Draws before [`KeyTable::random_entry`] falls back to the walk.
const RANDOM_DRAWS: usize = 64;

/// The most segments one SCAN step visits ([`KeyTable::scan`]).
pub const SCAN_SEGMENTS_MAX: usize = 64;

/// A key's place in SCAN order, from its hash `h`: the segment bits reversed, so that the keys of
/// a segment are one interval of positions at every depth, then the bits below them. One-to-one
/// on hashes: only keys whose 64-bit hashes collide share a position.
pub fn scan_position(h: u64) -> u64 {
    (h >> SEG_SHIFT).reverse_bits() | (h & ((1 << SEG_SHIFT) - 1))
}

/// Which segment, in which state, a [`ScanPage`] copies: the same segment index means the same
/// keys only while no split or merge reshaped the table and no key entered or left the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScanTag {
    seg: usize,
    reshapes: u64,
    keys_changed: u64,
}

/// A key of a [`ScanPage`]: its position, its hash (for `keep`) and its bytes in the page's
/// `keys`.
#[derive(Debug)]
struct ScanKey {
    position: u64,
    hash: u64,
    at: usize,
    len: usize,
}

/// One segment's keys in SCAN order, copied (one buffer, each key returned as a slice of it).
#[derive(Debug)]
struct ScanPage {
    tag: ScanTag,
    order: Vec<ScanKey>,
    keys: Bytes,
    /// When the page was last used ([`ScanCache`]'s clock), to replace the oldest.
    used: u64,
}

impl ScanPage {
    /// The keys at or after `cursor` that `keep` accepts, the first `need` of them and any
    /// sharing the last one's position, onto `out`; the next cursor if keys are left after
    /// them, `None` if the segment's keys ran out.
    fn take(
        &self,
        cursor: u64,
        need: usize,
        keep: &impl Fn(u64, &[u8]) -> bool,
        out: &mut Vec<Bytes>,
    ) -> Option<u64> {
        let first = self.order.partition_point(|k| k.position < cursor);
        let keys = self.order[first..].iter().map(|k| (k.position, k.hash, k));
        take_in_order(
            keys,
            need,
            keep,
            out,
            |k| &self.keys[k.at..k.at + k.len],
            |k| self.keys.slice(k.at..k.at + k.len),
        )
    }
}

/// A SCAN step's take from keys in position order, `(position, hash, key)`: the first `need`
/// that `keep` accepts, and any sharing the last one's position (the next cursor is past it), onto
/// `out` as `bytes` makes them; the next cursor if keys are left after them, `None` if `sorted`
/// ran out. `bytes(key)` gives a key's bytes to `keep`, and `owned(key)` the reply's copy or
/// slice of them.
fn take_in_order<'k, K: Copy + 'k>(
    sorted: impl Iterator<Item = (u64, u64, K)>,
    need: usize,
    keep: &impl Fn(u64, &[u8]) -> bool,
    out: &mut Vec<Bytes>,
    bytes: impl Fn(K) -> &'k [u8],
    owned: impl Fn(K) -> Bytes,
) -> Option<u64> {
    let mut taken = 0;
    let mut last = 0;
    for (position, hash, key) in sorted {
        if !keep(hash, bytes(key)) {
            continue;
        }
        if taken >= need && position != last {
            // `last` is below this key's position, so `last + 1` does not wrap.
            return Some(last + 1);
        }
        out.push(owned(key));
        taken += 1;
        last = position;
    }
    None
}

/// The pages SCAN keeps between steps ([`KeyTable::scan`]): a walk with COUNT 10 asks for a
/// segment's keys in ~13-25 steps, and a step that found its page here binary-searches it
/// instead of hashing and ordering the segment again. A few pages, so that walks interleaved
/// from several clients (`redis-cli --scan` beside a monitoring tool) keep theirs. A page is
/// checked against its segment's state ([`ScanTag`]) before each use, never trusted.
#[derive(Debug, Default)]
struct ScanCache {
    pages: Vec<ScanPage>,
    clock: u64,
}

/// Pages [`ScanCache`] keeps.
const SCAN_PAGES: usize = 4;

/// Key bytes past which a segment's page is not kept (a segment of large keys, which SCAN then
/// hashes at every step as without the cache): bounds the cache at [`SCAN_PAGES`] × this (plus
/// 32 bytes a key of order), counted in `used_memory` like every allocation.
const SCAN_PAGE_BYTES_MAX: usize = 64 << 10;

impl ScanCache {
    fn find(&self, tag: &ScanTag) -> Option<usize> {
        self.pages.iter().position(|p| p.tag == *tag)
    }

    fn touch(&mut self, at: usize) -> &ScanPage {
        self.clock += 1;
        self.pages[at].used = self.clock;
        &self.pages[at]
    }

    /// Keeps `page` in place of a stale page of the same segment, or of the oldest.
    fn keep(&mut self, mut page: ScanPage) -> &ScanPage {
        self.clock += 1;
        page.used = self.clock;
        let at = if let Some(same) = self.pages.iter().position(|p| p.tag.seg == page.tag.seg) {
            same
        } else if self.pages.len() < SCAN_PAGES {
            self.pages.len()
        } else {
            (0..self.pages.len())
                .min_by_key(|&i| self.pages[i].used)
                .unwrap_or(0)
        };
        if at == self.pages.len() {
            self.pages.push(page);
        } else {
            self.pages[at] = page;
        }
        &self.pages[at]
    }
}

/// A segment for writing: copied first if a snapshot holds it ([`Arc::make_mut`]), without
/// `make_mut`'s locked compare-exchange when it is ours alone, the case of every write outside a
/// save (issue 15: the copy-on-write table had added ~330-420 instructions to each write).
#[inline]
fn unshare(seg: &mut Arc<Segment>) -> &mut Segment {
    if Arc::strong_count(seg) == 1 && Arc::weak_count(seg) == 0 {
        // Pairs with the Release decrement of a snapshot's clone dropped on another thread, so
        // its reads of the segment happen before our writes (what `Arc::get_mut` does, minus the
        // compare-exchange).
        fence(Ordering::Acquire);
        // SAFETY: `&mut` gives us the only access to this `Arc`. Its strong count is 1, so no
        // other `Arc` to the segment exists, and none can appear while we hold the `&mut`: a
        // clone needs an `Arc` to clone from, and an upgrade needs a `Weak`, of which there are
        // none (the weak count is 0, and a new one needs an `Arc` to downgrade). The segment is
        // therefore not aliased, and a `&mut` to it lives no longer than our borrow of the `Arc`.
        return unsafe { &mut *(Arc::as_ptr(seg) as *mut Segment) };
    }
    Arc::make_mut(seg)
}

/// Prefetches every entry of `map` before a walk that hashes each key (a split, or hashbrown
/// growing the table). Entry blocks live wherever malloc put them, so in a table bigger than the
/// caches such a walk waits on one miss per entry in turn; issued together first, the misses
/// overlap. With a million keys, splits and rehashes were 22% of INCR's CPU on new keys (perf,
/// `redis-benchmark -t incr -r 1000000 -P 16`).
fn prefetch_entries(map: &HashTable<Entry>) {
    for e in map.iter() {
        e.prefetch();
    }
}

/// Called before an insert into a segment's `map`: a full table rehashes every entry on the
/// insert (hashbrown reserves before it probes, so even for a key already there).
#[inline]
fn before_insert(map: &HashTable<Entry>) {
    if map.len() == map.capacity() {
        prefetch_entries(map);
    }
}

impl KeyTable {
    fn with_hasher(hasher: ahash::RandomState) -> KeyTable {
        KeyTable {
            segs: vec![Arc::new(Segment::default())],
            level: 0,
            split: 0,
            len: AtomicUsize::new(0),
            expires_len: AtomicUsize::new(0),
            removed: 0,
            removed_shared: AtomicUsize::new(0),
            reshapes: 0,
            scan_cache: Mutex::new(ScanCache::default()),
            hasher,
        }
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// This table's key hash, to compute on another thread (a load's decoding thread).
    pub fn hasher(&self) -> KeyHasher {
        KeyHasher(self.hasher.clone())
    }

    /// The segment of hash `h`.
    #[inline]
    fn seg_of(&self, h: u64) -> usize {
        let x = seg_bits(h);
        let i = x & ((1usize << self.level) - 1);
        if i < self.split {
            x & ((2usize << self.level) - 1)
        } else {
            i
        }
    }

    /// Segment `i` for writing: copied first if a snapshot holds it.
    #[inline]
    fn seg_mut(&mut self, i: usize) -> &mut Segment {
        unshare(&mut self.segs[i])
    }

    /// False when segment `i` is shared with a snapshot and does not hold `key`: a write path
    /// that would find nothing need not copy it.
    #[inline]
    fn worth_unsharing(&self, i: usize, h: u64, key: &[u8]) -> bool {
        let s = &self.segs[i];
        Arc::strong_count(s) == 1 || s.map.find(h, |e| e.key() == key).is_some()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.expires_len.load(Ordering::Relaxed)
    }

    /// Bytes of the key tables themselves: each segment's hash table (its buckets of entry
    /// pointers and control bytes) and header; the entries' blocks are the data (MEMORY STATS
    /// `overhead.hashtable.main`).
    pub fn table_bytes(&self) -> usize {
        self.segs
            .iter()
            .map(|s| s.map.allocation_size() + std::mem::size_of::<Segment>())
            .sum()
    }

    /// Buckets allocated in the key tables (tests of the shrinking).
    pub fn capacity(&self) -> usize {
        self.segs.iter().map(|s| s.map.capacity()).sum()
    }

    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    #[inline]
    pub fn find(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        held::check(stripe_of(h), false, "a key read");
        self.segs[self.seg_of(h)].map.find(h, |e| e.key() == key)
    }

    /// For a write under the shared keyspace lock (`store::db::SharedDb`), which can unshare
    /// nothing: the entry of `key` if no snapshot can reach it (its segment is not shared, no
    /// snapshot holding that segment, and neither is its block, no older copy of the segment
    /// pointing at it). Snapshots are taken only under the exclusive lock, so neither count can
    /// go up while the caller holds the shared one; they only go down, as a save's writer lets
    /// go.
    #[inline]
    pub fn find_for_write(&self, h: u64, key: &[u8]) -> ForWrite<'_> {
        held::check(stripe_of(h), true, "a value write");
        let seg = &self.segs[self.seg_of(h)];
        if Arc::strong_count(seg) != 1 {
            return ForWrite::Shared;
        }
        // `strong_count` loads Relaxed; this pairs with the Release decrement of the snapshot's
        // last clone, so that writer's reads of the segment's entries happen before our writes.
        fence(Ordering::Acquire);
        match seg.map.find(h, |e| e.key() == key) {
            Some(e) if e.is_unique() => ForWrite::Found(e),
            Some(_) => ForWrite::Shared,
            None => ForWrite::Missing,
        }
    }

    /// Starts the cache misses of a batch of lookups, all at once (issue 15). A lookup in a
    /// table bigger than the caches waits on three dependent misses: the segment's header, then
    /// hashbrown's control group and slot, then the entry block. One command alone cannot
    /// overlap them, but a pipelined batch of commands can: this prefetches every segment
    /// header first, then walks each hash's control group to its first tag match and prefetches
    /// that entry. The walks do not depend on each other, so the CPU overlaps their misses, and
    /// the lookups that follow find the lines in cache. A hint only: a false tag match or a
    /// key not in the table costs a wasted line, never a wrong answer.
    ///
    /// Under the shared lock with keys being added there ([`KeyTable::insert_shared`]), the
    /// walks read segments that another stripe's writer may be changing: the caller then holds
    /// the stripe of each hash around its walk (`guard`, `store::db::Db::prefetch`). The
    /// segment headers need no stripe: the segment list and its `Arc`s do not change under the
    /// shared lock.
    pub fn prefetch<G>(&self, hashes: &[u64], guard: impl Fn(u64) -> G) {
        for &h in hashes {
            super::prefetch(Arc::as_ptr(&self.segs[self.seg_of(h)]));
        }
        for &h in hashes {
            let _held = guard(h);
            if let Some(e) = self.segs[self.seg_of(h)].map.iter_hash(h).next() {
                e.prefetch();
            }
        }
    }

    /// The entry of `key` for writing (its segment unshared first).
    #[inline]
    pub fn find_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        let i = self.seg_of(h);
        if !self.worth_unsharing(i, h, key) {
            return None;
        }
        self.seg_mut(i).map.find_mut(h, |e| e.key() == key)
    }

    /// Adds an entry for a key that is not in the table.
    pub fn insert_new(&mut self, h: u64, entry: Entry) {
        let i = self.seg_of(h);
        let hasher = &self.hasher;
        let seg = unshare(&mut self.segs[i]);
        before_insert(&seg.map);
        debug_assert!(entry.deadline().is_none(), "a new key has no TTL yet");
        seg.map
            .insert_unique(h, entry, |e| hasher.hash_one(e.key()));
        seg.changed();
        self.grew();
    }

    /// Adds `entry` (whose key hashes to `h`) if its key is not in the table, with one probe; the
    /// entry back if the key is there (a load's duplicate key). Its TTL, if it has one
    /// (`Entry::set_deadline` before the insert), is counted.
    pub fn insert_if_absent(&mut self, h: u64, entry: Entry) -> Result<(), Entry> {
        let i = self.seg_of(h);
        let hasher = &self.hasher;
        let seg = unshare(&mut self.segs[i]);
        match seg
            .map
            .entry(h, |e| e.key() == entry.key(), |e| hasher.hash_one(e.key()))
        {
            hashbrown::hash_table::Entry::Occupied(_) => Err(entry),
            hashbrown::hash_table::Entry::Vacant(v) => {
                let has_ttl = entry.deadline().is_some();
                v.insert(entry);
                seg.changed();
                if has_ttl {
                    count_ttl(&self.expires_len, seg, true);
                }
                self.grew();
                Ok(())
            }
        }
    }

    /// One probe for a write that replaces or creates (SET, INCR...): `f` gets the entry of
    /// `key` (its segment unshared first) or `None`, and answers an entry to insert for the
    /// missing key, if any. (Two probes, a `find_mut` and an `insert_new`, cost a second hash
    /// and a second search on every new key.)
    #[inline]
    pub fn upsert<R>(
        &mut self,
        h: u64,
        key: &[u8],
        f: impl FnOnce(Option<&mut Entry>) -> (Option<Entry>, R),
    ) -> R {
        let i = self.seg_of(h);
        let hasher = &self.hasher;
        let seg = unshare(&mut self.segs[i]);
        before_insert(&seg.map);
        match seg
            .map
            .entry(h, |e| e.key() == key, |e| hasher.hash_one(e.key()))
        {
            hashbrown::hash_table::Entry::Occupied(mut o) => f(Some(o.get_mut())).1,
            hashbrown::hash_table::Entry::Vacant(v) => {
                let (new, r) = f(None);
                if let Some(new) = new {
                    debug_assert!(new.key() == key);
                    debug_assert!(new.deadline().is_none(), "a new key has no TTL yet");
                    v.insert(new);
                    seg.changed();
                    self.grew();
                }
                r
            }
        }
    }

    /// One entry more: splits a segment when they average more than [`SEG_KEYS`] (up to
    /// [`SPLITS_PER_KEY`] when keys added under the shared lock, which never splits, went past
    /// the mark).
    #[inline]
    fn grew(&mut self) {
        let len = self.len.get_mut();
        *len += 1;
        let len = *len;
        let mut budget = SPLITS_PER_KEY;
        while len > self.segs.len() * SEG_KEYS && budget > 0 {
            self.split_one();
            budget -= 1;
        }
    }

    /// Whether a key of hash `h` that is not in the table could be added to it under the shared
    /// keyspace lock ([`KeyTable::insert_shared`]): the table is at [`STRIPE_LEVEL`] or above
    /// (every key of the segment in the key's stripe), no snapshot holds the segment (copying it
    /// would replace its `Arc`, which readers of other stripes use), and no split is due (a split
    /// changes two segments and the segment list). Otherwise the exclusive path adds it.
    ///
    /// Keys added here may take the table past its split mark by [`SHARED_SLACK`]th; the splits
    /// that are then due happen on the exclusive path, up to [`SPLITS_PER_KEY`] for each key it
    /// adds and some in every cron run ([`KeyTable::shrink`]). The slack keeps the deferrals
    /// rare: one client's deferral takes its next writes to the exclusive lock for a while
    /// (`commands::shared_path::WRITE_BACKOFF`), and those catch up on the splits.
    ///
    /// The key count lags under the shared lock (each batch adds its keys when it ends), so the
    /// slack is approximate; what bounds the cost of a late split is the segment's own size,
    /// exact under its stripe: at most [`SEG_SHARED_MAX`] keys.
    #[inline]
    pub fn can_insert_shared(&self, h: u64) -> bool {
        self.can_insert_shared_after(h, 0)
    }

    /// [`KeyTable::can_insert_shared`] for a key that one command adds after `before` others
    /// (MSET): whether it could still be added once they are, wherever they go. Checked for every
    /// key before the first is added, so that the command adds all or defers with none added.
    #[inline]
    pub fn can_insert_shared_after(&self, h: u64, before: usize) -> bool {
        let mark = self.segs.len() * SEG_KEYS;
        self.len() + before < mark + mark / SHARED_SLACK && self.can_insert_shared_here(h, before)
    }

    /// [`KeyTable::can_insert_shared_after`] without the table's key count: the part that stays
    /// true under the shared lock once checked, for the keys a command checked before it added
    /// any. (Other threads' batches add to the count as they end, so a count checked a moment
    /// ago may refuse now; what it bounds, how far splits fall behind, is approximate anyway.
    /// The segment's size is exact under its stripe, and the level and the snapshots' hold
    /// change only under the exclusive lock.)
    #[inline]
    pub fn can_insert_shared_here(&self, h: u64, before: usize) -> bool {
        self.can_remove_shared(h) && self.segs[self.seg_of(h)].map.len() + before < SEG_SHARED_MAX
    }

    /// Adds `entry` (hash `h`, its key not in the table) under the shared keyspace lock.
    ///
    /// # Safety
    /// The caller holds the keyspace lock shared, holds the stripe of `h` ([`stripe_of`]) for
    /// writing (so no other thread reads or changes the segment: every key of it is in that
    /// stripe), checked [`KeyTable::can_insert_shared`] under these locks, and found the key
    /// missing under them. It counts the key with [`KeyTable::count_shared`] before it lets go
    /// of the shared lock.
    pub unsafe fn insert_shared(&self, h: u64, entry: Entry) {
        held::check(stripe_of(h), true, "a key added");
        let seg = &self.segs[self.seg_of(h)];
        debug_assert!(self.level >= STRIPE_LEVEL && Arc::strong_count(seg) == 1);
        // Pairs with the Release decrement of a snapshot's last clone of the segment, as in
        // `find_for_write`: that writer's reads happen before this change.
        fence(Ordering::Acquire);
        // SAFETY: the caller's contract: the stripe held for writing excludes every other access
        // to this segment's map under the shared lock (`SegMap`'s `Sync` impl), the exclusive
        // lock cannot be held meanwhile, and no snapshot holds the segment (its count was 1 and
        // cannot rise under the shared lock). So this `&mut` is the only reference to the map
        // while it lives.
        let map = unsafe { seg.map.shared_mut() };
        before_insert(map);
        let hasher = &self.hasher;
        debug_assert!(entry.deadline().is_none(), "a new key has no TTL yet");
        map.insert_unique(h, entry, |e| hasher.hash_one(e.key()));
        seg.changed_shared();
    }

    /// Whether a key of hash `h` could be removed under the shared keyspace lock
    /// ([`KeyTable::remove_shared`]): at [`STRIPE_LEVEL`] or above, in a segment no snapshot
    /// holds. (Merges, which give memory back, stay on the exclusive path.)
    #[inline]
    pub fn can_remove_shared(&self, h: u64) -> bool {
        self.level >= STRIPE_LEVEL && Arc::strong_count(&self.segs[self.seg_of(h)]) == 1
    }

    /// Removes the entry of `key` (hash `h`) under the shared keyspace lock, and with it its TTL
    /// (counted at once: the caller removes the expiry queue's entry, `Entry::deadline`).
    ///
    /// # Safety
    /// As [`KeyTable::insert_shared`], with [`KeyTable::can_remove_shared`] checked and the
    /// entry found unshared (`find_for_write`) under these locks. It counts the removal with
    /// [`KeyTable::count_shared`] before it lets go of the shared lock.
    pub unsafe fn remove_shared(&self, h: u64, key: &[u8]) -> Option<Entry> {
        held::check(stripe_of(h), true, "a key removed");
        let seg = &self.segs[self.seg_of(h)];
        debug_assert!(self.level >= STRIPE_LEVEL && Arc::strong_count(seg) == 1);
        fence(Ordering::Acquire);
        // SAFETY: as in `insert_shared`: the stripe held for writing makes this the only
        // reference to the map while it lives.
        let map = unsafe { seg.map.shared_mut() };
        let removed = map.find_entry(h, |e| e.key() == key).ok()?.remove().0;
        seg.changed_shared();
        if removed.deadline().is_some() {
            count_ttl(&self.expires_len, seg, false);
        }
        Some(removed)
    }

    /// Counts the keys added ([`KeyTable::insert_shared`]) and removed
    /// ([`KeyTable::remove_shared`]) under the shared lock by one batch, before it lets go of the
    /// lock. Under the shared lock the count may lag, or run ahead, by the batches in flight (the
    /// atomic wraps rather than fail if one batch's removals of another's keys land first); the
    /// exclusive lock always sees it exact.
    pub fn count_shared(&self, added: usize, removed: usize) {
        if added != 0 {
            self.len.fetch_add(added, Ordering::Relaxed);
        }
        if removed != 0 {
            self.len.fetch_sub(removed, Ordering::Relaxed);
            self.removed_shared.fetch_add(removed, Ordering::Relaxed);
        }
    }

    /// Removes the entry of `key`, and with it its TTL (the caller removes the expiry queue's
    /// entry, `Entry::deadline`).
    pub fn remove(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let i = self.seg_of(h);
        if !self.worth_unsharing(i, h, key) {
            return None;
        }
        let seg = unshare(&mut self.segs[i]);
        let removed = seg.map.find_entry(h, |e| e.key() == key).ok()?.remove().0;
        seg.changed();
        if removed.deadline().is_some() {
            count_ttl(&self.expires_len, seg, false);
        }
        *self.len.get_mut() -= 1;
        self.removed += 1;
        Some(removed)
    }

    // --- TTLs ----------------------------------------------------------------------------------

    #[inline]
    pub fn expiry(&self, h: u64, key: &[u8]) -> Option<u64> {
        if self.expires_len() == 0 {
            return None;
        }
        held::check(stripe_of(h), false, "a TTL read");
        self.segs[self.seg_of(h)]
            .map
            .find(h, |e| e.key() == key)
            .and_then(Entry::deadline)
    }

    /// Sets the TTL of `key` (the caller checked the key exists); returns the old one. The
    /// entry is rebuilt with a deadline slot the first time (`store::entry`).
    pub fn set_expiry(&mut self, h: u64, key: &[u8], when: u64) -> Option<u64> {
        let i = self.seg_of(h);
        let seg = unshare(&mut self.segs[i]);
        let entry = seg.map.find_mut(h, |e| e.key() == key)?;
        let old = entry.set_deadline(Some(when));
        if old.is_none() {
            count_ttl(&self.expires_len, seg, true);
        }
        old
    }

    /// Removes the TTL of `key`; returns it. (The entry keeps its deadline slot.)
    pub fn remove_expiry(&mut self, h: u64, key: &[u8]) -> Option<u64> {
        if self.expires_len() == 0 {
            return None;
        }
        let i = self.seg_of(h);
        // Looked up first: a key without a TTL unshares nothing.
        self.segs[i]
            .map
            .find(h, |e| e.key() == key)
            .and_then(Entry::deadline)?;
        let seg = unshare(&mut self.segs[i]);
        let old = seg
            .map
            .find_mut(h, |e| e.key() == key)
            .and_then(|e| e.set_deadline(None))?;
        count_ttl(&self.expires_len, seg, false);
        Some(old)
    }

    /// Sets the TTL of `key` (hash `h`, a key in the table) under the shared keyspace lock:
    /// answers the old TTL, if it had one. Counted at once, not per batch: a reader that sees the count
    /// at zero looks no further ([`KeyTable::expiry`]). A first TTL rebuilds the entry with a
    /// deadline slot, replacing it in the segment's map, as `insert_shared` may change the map.
    ///
    /// # Safety
    /// The caller holds the keyspace lock shared and the stripe of `h` for writing, checked
    /// [`KeyTable::can_remove_shared`] under these locks, and the key is in the table; it holds
    /// no reference into the entry (which may move).
    pub unsafe fn set_expiry_shared(&self, h: u64, key: &[u8], when: u64) -> Option<u64> {
        held::check(stripe_of(h), true, "a TTL set");
        let seg = &self.segs[self.seg_of(h)];
        debug_assert!(self.level >= STRIPE_LEVEL && Arc::strong_count(seg) == 1);
        fence(Ordering::Acquire);
        // SAFETY: the caller's contract is `shared_mut`'s: the stripe held for writing guards
        // every key of the segment (level 8 and up), and no snapshot holds it.
        let map = unsafe { seg.map.shared_mut() };
        let entry = map.find_mut(h, |e| e.key() == key);
        debug_assert!(entry.is_some(), "a TTL set on a key not in the table");
        let old = entry?.set_deadline(Some(when));
        if old.is_none() {
            count_ttl(&self.expires_len, seg, true);
        }
        old
    }

    /// Removes the TTL of `key` (hash `h`) under the shared keyspace lock: the TTL, if it had
    /// one. Counted at once, as [`KeyTable::set_expiry_shared`].
    ///
    /// # Safety
    /// As [`KeyTable::set_expiry_shared`] (the key need not be in the table).
    pub unsafe fn remove_expiry_shared(&self, h: u64, key: &[u8]) -> Option<u64> {
        held::check(stripe_of(h), true, "a TTL removed");
        let seg = &self.segs[self.seg_of(h)];
        debug_assert!(self.level >= STRIPE_LEVEL && Arc::strong_count(seg) == 1);
        if seg.ttls() == 0 {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: as in `set_expiry_shared`.
        let map = unsafe { seg.map.shared_mut() };
        let old = map
            .find_mut(h, |e| e.key() == key)
            .and_then(|e| e.set_deadline(None))?;
        count_ttl(&self.expires_len, seg, false);
        Some(old)
    }

    /// Every TTL (unix ms): a walk over every key.
    pub fn expiries(&self) -> impl Iterator<Item = u64> + '_ {
        self.segs
            .iter()
            .filter(|s| s.ttls() != 0)
            .flat_map(|s| s.map.iter().filter_map(Entry::deadline))
    }

    /// The key with hash `h` whose TTL is `when`, as the expiry queue records it (a deadline and
    /// a key hash: `store::db`). Two keys of one hash and one deadline are both found, in turn:
    /// the queue counts them.
    pub fn expiring_entry(&self, h: u64, when: u64) -> Option<&Entry> {
        if self.expires_len() == 0 {
            return None;
        }
        let hasher = &self.hasher;
        self.segs[self.seg_of(h)].map.find(h, |e| {
            e.deadline() == Some(when) && hasher.hash_one(e.key()) == h
        })
    }

    // --- Walks -------------------------------------------------------------------------------

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.segs.iter().flat_map(|s| s.map.iter())
    }

    /// `f` on the value of every entry for which `wants` holds; only the segments holding one are
    /// unshared.
    pub fn update_where(&mut self, wants: impl Fn(&Value) -> bool, f: impl Fn(&mut Value)) {
        for i in 0..self.segs.len() {
            if self.segs[i].map.iter().any(|e| wants(e.value())) {
                for e in self.seg_mut(i).map.iter_mut() {
                    if wants(e.value()) {
                        f(e.value_mut());
                    }
                }
            }
        }
    }

    /// One SCAN step: the keys whose [`scan_position`] is at or after `cursor`, in position order,
    /// the first `count` that `keep` (given the key's hash and the key) accepts, extended over
    /// keys sharing the last one's position; and the next cursor, 0 when the walk is done.
    ///
    /// A key's position is its segment bits reversed (then its low hash bits): the keys of one
    /// segment, which share their low `depth` segment bits, fill one interval of positions, and
    /// a split cuts a segment's interval in two, a merge joins two back (Redis's reverse-binary
    /// cursor, over linear hashing's segments instead of a power-of-two bucket array). So a step
    /// visits only the segments its cursor's interval and the next ones cover, O([`SEG_KEYS`])
    /// each, and a key present for the whole walk is returned exactly once, however the table
    /// grows or shrinks meanwhile: positions never move. It visits at most
    /// [`SCAN_SEGMENTS_MAX`] segments, so a step over emptied segments stays short (Redis bounds
    /// its empty buckets the same way); it may then return fewer keys than `count`.
    ///
    /// A step that stops inside a segment keeps the segment's keys in position order
    /// ([`ScanCache`]), so the walk's next steps there cost what they return instead of hashing
    /// the segment's ~128-256 keys (one cache miss each) again: a walk with the default COUNT 10
    /// visits each segment ~13-25 times.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        keep: impl Fn(u64, &[u8]) -> bool,
    ) -> (u64, Vec<Bytes>) {
        self.scan_by(cursor, count, keep, scan_position)
    }

    /// [`KeyTable::scan`] with another position function, for tests that need positions to
    /// collide: `position(h)` must keep the top bits of [`scan_position`] up to the table's
    /// depth, so that equal positions stay within one segment, and must be the same function at
    /// every step on one table (the kept orders hold its positions).
    pub(crate) fn scan_by(
        &self,
        mut cursor: u64,
        count: usize,
        keep: impl Fn(u64, &[u8]) -> bool,
        position: impl Fn(u64) -> u64,
    ) -> (u64, Vec<Bytes>) {
        let count = count.max(1);
        let mut out: Vec<Bytes> = Vec::with_capacity(count.min(SCAN_SEGMENTS_MAX * SEG_KEYS));
        // Under the exclusive lock, which SCAN holds, the lock is always free.
        let mut cache = self.scan_cache.try_lock().ok();
        for _ in 0..SCAN_SEGMENTS_MAX {
            let (i, depth) = self.seg_of_position(cursor);
            let seg = &self.segs[i];
            // The interval of positions this segment holds ends where the next one starts.
            let start = (i as u64).reverse_bits();
            let end = match depth {
                0 => None,
                d => start.checked_add(1u64 << (64 - d)),
            };
            let need = count - out.len();
            let tag = ScanTag {
                seg: i,
                reshapes: self.reshapes,
                keys_changed: seg.keys_changed.load(Ordering::Relaxed),
            };
            // A step that takes the rest of the segment leaves nothing for a next one to reuse.
            let page = match cache.as_deref_mut() {
                Some(c) if seg.map.len() > need => match c.find(&tag) {
                    Some(at) => Some(c.touch(at)),
                    None => self.order_segment(seg, tag, &position).map(|p| c.keep(p)),
                },
                _ => None,
            };
            let stopped = match page {
                Some(page) => page.take(cursor, need, &keep, &mut out),
                None => self.scan_select(seg, cursor, need, &keep, &position, &mut out),
            };
            if let Some(next) = stopped {
                return (next, out);
            }
            match end {
                None => return (0, out),
                Some(next) => cursor = next,
            }
            if out.len() >= count {
                break;
            }
        }
        (cursor, out)
    }

    /// [`ScanPage::take`] without a page (a step that takes the rest of the segment, or a
    /// segment whose keys are too large to copy): the keys of `seg` at or after `cursor`, hashed
    /// and ordered for this step alone.
    fn scan_select(
        &self,
        seg: &Segment,
        cursor: u64,
        need: usize,
        keep: &impl Fn(u64, &[u8]) -> bool,
        position: &impl Fn(u64) -> u64,
        out: &mut Vec<Bytes>,
    ) -> Option<u64> {
        let mut page: Vec<(u64, u64, &[u8])> = Vec::with_capacity(seg.map.len());
        for e in seg.map.iter() {
            let h = self.hasher.hash_one(e.key());
            let p = position(h);
            if p >= cursor {
                page.push((p, h, e.key()));
            }
        }
        page.sort_unstable_by_key(|&(p, _, _)| p);
        take_in_order(
            page.into_iter(),
            need,
            keep,
            out,
            |k| k,
            Bytes::copy_from_slice,
        )
    }

    /// Every key of `seg`, ordered by position, for [`ScanCache`]; `None` for a segment whose
    /// keys are too large to keep a copy of ([`SCAN_PAGE_BYTES_MAX`]).
    fn order_segment(
        &self,
        seg: &Segment,
        tag: ScanTag,
        position: &impl Fn(u64) -> u64,
    ) -> Option<ScanPage> {
        let bytes: usize = seg.map.iter().map(|e| e.key().len()).sum();
        if bytes > SCAN_PAGE_BYTES_MAX {
            return None;
        }
        let mut keys = Vec::with_capacity(bytes);
        let mut order = Vec::with_capacity(seg.map.len());
        for e in seg.map.iter() {
            let key = e.key();
            let hash = self.hasher.hash_one(key);
            order.push(ScanKey {
                position: position(hash),
                hash,
                at: keys.len(),
                len: key.len(),
            });
            keys.extend_from_slice(key);
        }
        order.sort_unstable_by_key(|k| k.position);
        Some(ScanPage {
            tag,
            order,
            keys: Bytes::from(keys),
            used: 0,
        })
    }

    /// The segment holding scan position `p` ([`scan_position`]), and its depth: the number of
    /// low segment bits its keys share.
    fn seg_of_position(&self, p: u64) -> (usize, u32) {
        // The position's top bits are the segment bits' low bits, reversed.
        let x = p.reverse_bits() as usize;
        let i = x & ((1usize << self.level) - 1);
        if i < self.split {
            (x & ((2usize << self.level) - 1), self.level + 1)
        } else {
            (i, self.level)
        }
    }

    /// Up to `n` entries next to one another, from a random place (`seed`) in a random segment
    /// on, through `f`: eviction's sample (`Db::eviction_sample`), as Redis's `dictGetSomeKeys`
    /// takes consecutive buckets from a random one. Not uniform, and cheap: one walk into one
    /// segment (or the next ones, when it has fewer than `n` keys), where `n` draws of
    /// [`KeyTable::random_entry`] each walk to their slot (measured: 56 % of a pipelined SET's
    /// CPU under allkeys-lru when eviction drew that way).
    pub fn sample_run(&self, seed: u64, n: usize, mut f: impl FnMut(&Entry)) {
        if !self.is_empty() {
            self.sample_segments(
                seed,
                n,
                |s| s.map.len(),
                |e| {
                    f(e);
                    true
                },
            );
        }
    }

    /// [`KeyTable::sample_run`] over the keys with a TTL: up to `n` of them next to one another
    /// in the segments that hold any, from a random place on, through `f` with their deadlines
    /// (as Redis samples its expires dictionary for the `volatile-` policies).
    pub fn sample_expiring_run(&self, seed: u64, n: usize, mut f: impl FnMut(&Entry, u64)) {
        if self.expires_len() != 0 {
            self.sample_segments(seed, n, Segment::ttls, |e| {
                if let Some(when) = e.deadline() {
                    f(e, when);
                    true
                } else {
                    false
                }
            });
        }
    }

    /// The walk of [`KeyTable::sample_run`]: `f` says whether an entry counted toward the `n`
    /// (every one, or those with a TTL), `count_of` how many a segment holds.
    fn sample_segments(
        &self,
        seed: u64,
        n: usize,
        count_of: impl Fn(&Segment) -> usize,
        mut f: impl FnMut(&Entry) -> bool,
    ) {
        let mut state = seed;
        let segs = self.segs.len();
        let first = (super::splitmix64(&mut state) % segs as u64) as usize;
        let mut left = n;
        for i in 0..segs {
            if left == 0 {
                return;
            }
            let seg = &self.segs[(first + i) % segs];
            if count_of(seg) == 0 {
                continue;
            }
            let table = &seg.map;
            let start = (super::splitmix64(&mut state) % table.len() as u64) as usize;
            for item in table.iter().skip(start).chain(table.iter().take(start)) {
                if left == 0 {
                    return;
                }
                if f(item) {
                    left -= 1;
                }
            }
        }
    }

    /// A uniformly chosen entry (RANDOMKEY), drawn from `seed` by rejection: a segment chosen
    /// uniformly, then a slot below [`RANDOM_SLOTS`]; a slot past the segment's keys draws again.
    /// Each draw picks every key with the same chance, 1 / (segments × `RANDOM_SLOTS`), as long
    /// as no segment holds more than `RANDOM_SLOTS` keys (one past the bound that a draw meets,
    /// or a run of bad draws, falls back to [`KeyTable::nth`], and keys of such a segment would
    /// be drawn less often). No segment comes near it: a segment not yet split in its round of
    /// linear hashing covers under 2 / segments of the hash range, so it expects at most
    /// 2 × 136 keys (the split mark plus the shared path's slack), and with the hash seeded per
    /// process nobody can aim keys at one. For a Poisson count of mean 272, the chance of 1,025
    /// or more is below e^-272 × (e × 272 / 1025)^1025 ≈ 10^-263 (Chernoff), per segment. A draw
    /// reads one segment: a few cache misses, where `nth` alone walks every segment's header
    /// (~8,000 for a million keys).
    pub fn random_entry(&self, seed: u64) -> Option<&Entry> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        // A splitmix64 stream whose state starts from the seed mixed, so that neighbouring
        // seeds give unrelated streams (not the same stream shifted by a step).
        let mut state = super::splitmix64(&mut { seed });
        let mut next = || super::splitmix64(&mut state);
        for _ in 0..RANDOM_DRAWS {
            let seg = &self.segs[(next() % self.segs.len() as u64) as usize];
            if seg.map.len() > RANDOM_SLOTS {
                break;
            }
            let slot = (next() % RANDOM_SLOTS as u64) as usize;
            if slot < seg.map.len() {
                return seg.map.iter().nth(slot);
            }
        }
        self.nth((next() % len as u64) as usize)
    }

    /// The `n`th entry in iteration order: O(segments + one segment).
    pub fn nth(&self, mut n: usize) -> Option<&Entry> {
        for s in &self.segs {
            if n < s.map.len() {
                return s.map.iter().nth(n);
            }
            n -= s.map.len();
        }
        None
    }

    /// The content at this instant, for a writer on another thread: O(segments), nothing per key.
    pub fn snapshot(&self) -> TableSnapshot {
        TableSnapshot {
            segs: self.segs.clone(),
        }
    }

    /// Empties the table, giving its memory back (a segment a snapshot holds is freed by the
    /// snapshot).
    pub fn clear(&mut self) {
        *self = KeyTable::with_hasher(self.hasher.clone());
    }

    // --- Resizing ----------------------------------------------------------------------------

    /// Splits segment `split` (linear hashing, module docs). Each key is hashed once: the hash
    /// that decides whether it moves is the one it is inserted with (the extraction yields an
    /// entry right after its test), and the new segment is sized for the half that moves, so it
    /// does not rehash while it fills (issue 15: splits and growth were ~350 instructions per
    /// new key).
    fn split_one(&mut self) {
        let from = self.split;
        let bit = 1usize << self.level;
        let hasher = &self.hasher;
        let old = unshare(&mut self.segs[from]);
        let mut new = Segment {
            map: SegCell::new(HashTable::with_capacity(old.map.len() / 2)),
            ttls: AtomicUsize::new(0),
            keys_changed: AtomicU64::new(0),
        };
        prefetch_entries(&old.map);
        let tested = Cell::new(0u64);
        let moves = |h: u64| {
            tested.set(h);
            seg_bits(h) & bit != 0
        };
        let mut ttls_moved = 0;
        for e in old.map.extract_if(|e| moves(hasher.hash_one(e.key()))) {
            let h = tested.get();
            debug_assert_eq!(h, hasher.hash_one(e.key()));
            ttls_moved += usize::from(e.deadline().is_some());
            new.map.insert_unique(h, e, |e| hasher.hash_one(e.key()));
        }
        *old.ttls.get_mut() -= ttls_moved;
        *new.ttls.get_mut() = ttls_moved;
        shrink_segment(old, hasher);
        self.segs.push(Arc::new(new));
        self.reshapes += 1;
        self.split += 1;
        if self.split == bit {
            self.level += 1;
            self.split = 0;
        }
    }

    /// Merges the last segment back into its buddy (the inverse of [`KeyTable::split_one`]);
    /// returns the number of entries moved.
    fn merge_one(&mut self) -> usize {
        if self.segs.len() == 1 {
            return 0;
        }
        if self.split == 0 {
            self.level -= 1;
            self.split = 1 << self.level;
        }
        self.split -= 1;
        let into = self.split;
        let Some(last) = self.segs.pop() else {
            return 0;
        };
        self.reshapes += 1;
        // Shared with a snapshot: move clones, the snapshot keeps the original.
        let last = Arc::try_unwrap(last).unwrap_or_else(|shared| (*shared).clone());
        let moved = last.map.len();
        let hasher = self.hasher.clone();
        let seg = self.seg_mut(into);
        *seg.ttls.get_mut() += last.ttls();
        for e in last.map.into_inner() {
            let h = hasher.hash_one(e.key());
            seg.map.insert_unique(h, e, |e| hasher.hash_one(e.key()));
        }
        moved
    }

    /// Makes room for `n` keys in all (RDB's RESIZEDB hint at load, as Redis's `dictExpand`): splits
    /// segments until they would average [`SEG_KEYS`] and gives each room for that many, so a
    /// load neither splits nor rehashes (they were a quarter of the load time of 600k strings).
    /// The caller bounds `n` (by the bytes left in the file).
    pub fn reserve(&mut self, n: usize) {
        while self.segs.len() * SEG_KEYS < n {
            self.split_one();
        }
        for seg in &mut self.segs {
            let seg = unshare(seg);
            let room = SEG_KEYS.saturating_sub(seg.map.len());
            let hasher = &self.hasher;
            seg.map.reserve(room, |e| hasher.hash_one(e.key()));
        }
    }

    /// Splits what keys added under the shared lock left due, then gives memory back after
    /// deletions, as Redis's cron resizes a dict below 10% fill
    /// (`tryResizeHashTables`): merges segments while they average under a quarter of
    /// [`SEG_KEYS`] (at most [`MERGE_BUDGET`] entries moved per call), and shrinks a segment's
    /// tables below a tenth full. Segments a snapshot holds are left for a later call.
    pub fn shrink(&mut self) {
        // Splits keys added under the shared lock left due (`can_insert_shared`), within the
        // same budget of entries moved.
        let mut splits = MERGE_BUDGET / SEG_KEYS;
        while splits > 0 && self.len() > self.segs.len() * SEG_KEYS {
            self.split_one();
            splits -= 1;
        }
        self.removed += std::mem::take(self.removed_shared.get_mut());
        let mut budget = MERGE_BUDGET;
        while self.segs.len() > 1 && self.len() * 4 < self.segs.len() * SEG_KEYS && budget > 0 {
            budget = budget.saturating_sub(self.merge_one().max(1));
        }
        if self.removed == 0 {
            return;
        }
        let hasher = self.hasher.clone();
        let mut skipped = false;
        for s in &mut self.segs {
            match Arc::get_mut(s) {
                Some(s) => shrink_segment(s, &hasher),
                None => skipped = true,
            }
        }
        // A segment a snapshot held is looked at again on the next call.
        self.removed = usize::from(skipped);
    }
}

/// Shrinks a segment's table below a tenth full.
fn shrink_segment(s: &mut Segment, hasher: &ahash::RandomState) {
    const MIN: usize = 64;
    if s.map.capacity() > MIN && s.map.len() * 10 < s.map.capacity() {
        let len = s.map.len();
        s.map.shrink_to(len, |e| hasher.hash_one(e.key()));
    }
}

/// A key table as it was at one instant ([`KeyTable::snapshot`]): the segments, shared.
#[derive(Debug, Clone, Default)]
pub struct TableSnapshot {
    segs: Vec<Arc<Segment>>,
}

/// How far ahead of a walk entries are prefetched: each entry is its own block, one cache miss
/// per key, so a second iterator running ahead starts those loads early and they overlap.
const PREFETCH_AHEAD: usize = 16;

impl TableSnapshot {
    /// Every entry with its TTL and its access bits (`store::access`), in no particular order.
    pub fn entries(&self) -> SnapshotIter<'_> {
        SnapshotIter {
            segs: &self.segs,
            seg: 0,
            cur: None,
            ahead: None,
        }
    }

    /// Entries, and entries with a TTL (of the segments not yet drained).
    pub fn counts(&self) -> (usize, usize) {
        self.segs
            .iter()
            .fold((0, 0), |(n, e), s| (n + s.map.len(), e + s.ttls()))
    }

    /// The TTLs of the snapshot's keys (of the segments not yet drained): a walk over the keys
    /// of the segments holding any.
    pub fn expiries(&self) -> impl Iterator<Item = u64> + '_ {
        self.segs
            .iter()
            .filter(|s| s.ttls() != 0)
            .flat_map(|s| s.map.iter().filter_map(Entry::deadline))
    }

    /// Walks up to `max` segments through `f` (each entry with its TTL and access bits, in no
    /// particular order),
    /// letting go of each segment as soon as it is walked; returns whether any are left. The
    /// writer of a save walks the whole snapshot this way, so a segment it has written is no
    /// longer shared: a later write to it copies nothing, and a copy the live table already made
    /// frees the old one here, on the writer's thread (module docs).
    pub fn drain_some<E>(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], &Value, Option<u64>, u32) -> Result<(), E>,
    ) -> Result<bool, E> {
        for _ in 0..max {
            let Some(seg) = self.segs.pop() else {
                return Ok(false);
            };
            let one = [seg];
            let walk = SnapshotIter {
                segs: &one,
                seg: 0,
                cur: None,
                ahead: None,
            };
            for (k, v, ttl, access) in walk {
                f(k, v, ttl, access)?;
            }
        }
        Ok(!self.segs.is_empty())
    }
}

/// [`TableSnapshot::entries`].
pub struct SnapshotIter<'a> {
    segs: &'a [Arc<Segment>],
    seg: usize,
    cur: Option<hashbrown::hash_table::Iter<'a, Entry>>,
    ahead: Option<hashbrown::hash_table::Iter<'a, Entry>>,
}

impl<'a> Iterator for SnapshotIter<'a> {
    type Item = (&'a [u8], &'a Value, Option<u64>, u32);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let seg = self.segs.get(self.seg)?;
            let cur = self.cur.get_or_insert_with(|| {
                let mut ahead = seg.map.iter();
                ahead
                    .by_ref()
                    .take(PREFETCH_AHEAD)
                    .for_each(Entry::prefetch);
                self.ahead = Some(ahead);
                seg.map.iter()
            });
            match cur.next() {
                Some(e) => {
                    if let Some(next) = self.ahead.as_mut().and_then(Iterator::next) {
                        next.prefetch();
                    }
                    return Some((e.key(), e.value(), e.deadline(), e.access()));
                }
                None => {
                    self.seg += 1;
                    self.cur = None;
                    self.ahead = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &[u8]) -> Entry {
        Entry::new(key, 0, Value::str(b"v"))
    }

    /// A table of `n` keys added on the exclusive path.
    fn table_of(n: usize) -> KeyTable {
        let mut t = KeyTable::default();
        for i in 0..n {
            let key = format!("k:{i}");
            let h = t.hash(key.as_bytes());
            t.insert_new(h, entry(key.as_bytes()));
        }
        t
    }

    #[test]
    fn a_segments_keys_share_one_stripe_from_level_eight() {
        let t = table_of(40_000);
        assert!(t.level >= STRIPE_LEVEL);
        for seg in 0..t.segs.len() {
            for e in t.segs[seg].map.iter() {
                assert_eq!(stripe_of(t.hash(e.key())), seg % STRIPES);
            }
        }
    }

    #[test]
    fn keys_added_under_the_shared_lock_are_refused_where_they_must_be() {
        // Below level 8 a segment holds keys of several stripes.
        let small = table_of(1_000);
        assert!(!small.can_insert_shared(small.hash(b"x")));

        let mut t = table_of(40_000);
        // Fill the segment of one key up to the cap; the count is left as is, so only the
        // segment's own size refuses.
        let target = t.seg_of(t.hash(b"probe"));
        let mut added = 0;
        for i in 0.. {
            let key = format!("fill:{i}");
            let h = t.hash(key.as_bytes());
            if t.seg_of(h) != target {
                continue;
            }
            if !t.can_insert_shared(h) {
                break;
            }
            // SAFETY: one thread, no lock to hold: nothing else can look at the table while
            // this test owns it; the key is new (`fill:` keys are not in `table_of`'s).
            unsafe { t.insert_shared(h, entry(key.as_bytes())) };
            added += 1;
        }
        assert_eq!(t.segs[target].map.len(), SEG_SHARED_MAX);
        assert!(added > 0);
        // A command adding several keys (MSET) checks each against what it adds before it:
        // one place short of the cap, a first key fits and a second does not.
        let probe = t.hash(b"probe");
        let last = t.segs[target]
            .map
            .iter()
            .find(|e| e.key().starts_with(b"fill:"))
            .map(|e| e.key().to_vec())
            .unwrap();
        let h_last = t.hash(&last);
        // SAFETY: as above.
        assert!(unsafe { t.remove_shared(h_last, &last) }.is_some());
        assert!(t.can_insert_shared_after(probe, 0));
        assert!(!t.can_insert_shared_after(probe, 1));
        // SAFETY: as above; the key was removed just now.
        unsafe { t.insert_shared(h_last, entry(&last)) };
        // Counted, the keys take the table past its split mark; the next exclusive insert
        // splits back under it, at most SPLITS_PER_KEY at a time.
        t.count_shared(added, 0);
        let before = t.segs.len();
        let h = t.hash(b"one more");
        t.insert_new(h, entry(b"one more"));
        assert!(t.segs.len() > before && t.segs.len() <= before + SPLITS_PER_KEY);
        // A segment a snapshot holds is refused, and accepted again once the snapshot is gone.
        let h = t.hash(b"probe");
        let snapshot = t.snapshot();
        assert!(!t.can_insert_shared(h));
        drop(snapshot);
        assert!(t.can_insert_shared(h) || t.segs[t.seg_of(h)].map.len() >= SEG_SHARED_MAX);
        // Removing one: gone, and counted.
        let key = b"k:17";
        let h = t.hash(key);
        assert!(t.can_remove_shared(h));
        let len = t.len();
        // SAFETY: as above.
        let removed = unsafe { t.remove_shared(h, key) };
        assert!(removed.is_some());
        t.count_shared(0, 1);
        assert_eq!(t.len(), len - 1);
        assert!(t.find(h, key).is_none());
        assert_eq!(t.iter().count(), t.len());
    }

    #[test]
    fn a_kept_scan_page_is_dropped_when_the_shared_path_changes_its_segment() {
        let t = table_of(40_000);
        assert!(t.level >= STRIPE_LEVEL);
        // A first step stops inside segment 0 and keeps its page.
        let (cursor, first) = t.scan(0, 3, |_, _| true);
        assert_eq!(first.len(), 3);
        assert!(cursor != 0 && t.seg_of_position(cursor).0 == 0);
        // Under the shared lock: remove a key the walk has not reached, add one.
        let order = |t: &KeyTable| {
            let mut keys: Vec<(u64, Vec<u8>)> = t.segs[0]
                .map
                .iter()
                .map(|e| (scan_position(t.hash(e.key())), e.key().to_vec()))
                .collect();
            keys.sort();
            keys
        };
        let gone = order(&t)[5].1.clone();
        let h = t.hash(&gone);
        assert!(t.can_remove_shared(h));
        // SAFETY: one thread, no lock to hold: nothing else can look at the table while this
        // test owns it.
        assert!(unsafe { t.remove_shared(h, &gone) }.is_some());
        t.count_shared(0, 1);
        // The rest of the walk through segment 0 does not return the removed key.
        let mut cursor = cursor;
        let mut rest = Vec::new();
        while cursor != 0 && t.seg_of_position(cursor).0 == 0 {
            let (next, keys) = t.scan(cursor, 3, |_, _| true);
            rest.extend(keys);
            cursor = next;
        }
        assert!(
            rest.iter().all(|k| k[..] != gone[..]),
            "a removed key returned"
        );
        let want: Vec<Vec<u8>> = order(&t).into_iter().skip(3).map(|(_, k)| k).collect();
        let got: Vec<Vec<u8>> = rest
            .iter()
            .filter(|k| t.seg_of(t.hash(k)) == 0)
            .map(|k| k.to_vec())
            .collect();
        assert_eq!(got, want);
    }
}
