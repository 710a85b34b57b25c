//! One numbered database and the set of them: the keyspace.
//!
//! A `Db` is a hash map from binary keys to values, plus the expiry index Redis keeps beside it:
//! - `expires` maps a key to its absolute expiry in unix milliseconds (what `PEXPIRETIME` returns);
//! - `expire_queue` orders the same entries by time, so active expiry pops the keys that are due without
//!   scanning the keyspace (Redis samples randomly; an ordered queue reclaims memory at least as fast
//!   and never visits a live key). It is one ordered set per stripe ([`ExpiryQueues`]), so that
//!   TTLs set or cleared under the shared keyspace lock go straight into their key's set.
//!
//! Lazy expiry: every lookup first checks the key's deadline against the database clock (`now_ms`,
//! set by the dispatcher once per command, as Redis caches its time per command) and deletes the key
//! if it is due, so an expired key is never visible.
//!
//! WATCH support: `watched` holds a version counter for keys some client watches; every write path
//! (`lookup_mut`, `insert`, `remove`, expiry, flush) bumps it. EXEC compares versions. The map is empty
//! unless someone watches, so the check costs one branch on the write path.
//!
//! `dirty` counts modifications since the last save, for the `save` points and INFO persistence.
//! `changes` counts the same modifications but is never reset and leaves out deletions by expiry:
//! the dispatcher compares it before and after a command to decide whether the command wrote
//! anything (Redis's `server.dirty` delta in `call()`), so a GET that reclaims an expired key is
//! not itself propagated. Keys deleted by expiry are instead recorded in `expired_log` while
//! `log_expired` is on (someone consumes the write stream), to be propagated as `DEL`.
//!
//! Memory per key (issue 15). The main map is the dominant cost for millions of small keys: each
//! slot is paid roughly twice (hashbrown grows by doubling at 7/8 load, so 1M keys sit in 2M
//! buckets). The map therefore holds [`Entry`]s, 8-byte thin pointers to one block per key
//! holding the value, the `OBJECT ENCODING` override byte and the key bytes (`store::entry`); a
//! string of up to 30 bytes lives inside the value (`store::string`). For a 16-byte key and a
//! short string that is 9 bytes of table per bucket and one 64-byte malloc chunk: no other
//! allocation. The override is in the block rather than in a side map because every
//! PFADD-created HLL is `raw` in Redis. Rare per-key fields stay beside the entries: expiry (only
//! keys with a TTL) and WATCH versions (only watched keys); both cost nothing otherwise.
//!
//! Snapshots (issue 11). The entries and their TTLs live in a [`KeyTable`]: segments of ~128 keys
//! behind `Arc` (`store::keytable`). [`Db::snapshot`] clones the segment list — no key is copied,
//! so BGSAVE, the AOF rewrite and a full sync hold the lock for O(keys / 128) — and every write
//! path here reaches a segment through `Arc::make_mut`, which copies it first if a snapshot still
//! shares it. The snapshot therefore stays the keyspace of its instant with no hook on any write
//! path: a shared segment is immutable by type. The TTL index (`expire_queue`) and WATCH
//! versions are not part of a snapshot; the snapshot keeps the clock (`now_ms`) of its instant to
//! leave out keys that were already due, as the old copy did. Segments also bound the cost of
//! growth: the table grows one segment split at a time instead of rehashing every key at once.
//!
//! Nothing here does I/O; the store knows nothing of sockets or RESP.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use smallvec::SmallVec;

use super::chunked_set::ChunkedSet;
use super::entry::Entry;
use super::keytable::{ForWrite, KeyTable, TableSnapshot};
use super::string::Str;
use super::value::Value;
use crate::events;

pub type KeyMap<V> = HashMap<Bytes, V, ahash::RandomState>;

/// What a read-only command needs of its database, so that one implementation of the command
/// serves both paths of `commands::shared_path`: [`Db`] itself under the exclusive keyspace lock
/// (a lookup reclaims a due key and raises `keymiss`, as Redis's `lookupKeyRead`), and
/// [`SharedDb`] under the shared lock.
pub trait ReadView {
    /// The live value of `key`, its access recorded (`store::access`).
    fn read(&mut self, key: &[u8]) -> Option<&Value>;

    /// [`ReadView::read`] without recording an access: Redis's `LOOKUP_NOTOUCH` (EXISTS, TTL
    /// and the like leave the key's idle time as it was).
    fn read_notouch(&mut self, key: &[u8]) -> Option<&Value>;

    /// The TTL (unix ms) of `key`, which [`ReadView::read`] has just found live.
    fn expiry(&mut self, key: &[u8]) -> Option<u64>;

    /// The command's clock (unix ms), against which TTLs are read.
    fn clock(&self) -> u64;

    /// The hash of the argument `item` if the batch's prefetch computed it (and started the
    /// misses of its probes): [`SharedDb`]'s `prefetched`. The command then neither hashes the
    /// item again nor prefetches it again. The filter the command finds may not be the one the
    /// prefetch saw (another connection may have replaced it meanwhile), so the command checks
    /// that the hash is of its filter's kind ([`ItemHash`]); a hash is a function of the item's
    /// bytes and that kind alone.
    fn batch_hash(&self, _item: &[u8]) -> Option<ItemHash> {
        None
    }
}

/// An item hashed as a filter hashes it, by the batch's prefetch (`commands::prefetch_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemHash {
    /// A Bloom filter's pair, and whether it is the 64-bit hash (`ScalingBloom::hashes_wide`;
    /// legacy chains hash with 32 bits).
    Bloom { wide: bool, a: u64, b: u64 },
    /// A cuckoo filter's fingerprint and bucket hashes (every cuckoo filter hashes alike).
    Cuckoo(super::cuckoo::Hashed),
}

impl ItemHash {
    /// `item`'s hash of the same kind as `like` (the debug check of [`ReadView::batch_hash`],
    /// and tests).
    pub fn of(item: &[u8], like: ItemHash) -> ItemHash {
        match like {
            ItemHash::Bloom { wide, .. } => {
                let (a, b) = super::murmur::bloom_hash(item, wide);
                ItemHash::Bloom { wide, a, b }
            }
            ItemHash::Cuckoo(_) => ItemHash::Cuckoo(super::cuckoo::Hashed::new(item)),
        }
    }
}

/// An argument of the batch being run, by its address and length, and its [`ItemHash`].
///
/// Why an address identifies the argument: the list holds only arguments of the batch being run
/// (`ClientState::prefetched` is emptied when a batch starts and at each prefetch), and those
/// stay alive and unchanged until the batch ends (immutable `Bytes` of the batch's requests).
/// Two live slices with the same address and length are the same bytes. A stale entry — an
/// argument freed and its memory reused for another — would be a wrong hash, i.e. a wrong
/// answer, which is why the emptying at the batch's start is part of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchedItem {
    addr: usize,
    len: usize,
    pub hash: ItemHash,
}

impl PrefetchedItem {
    /// A placeholder that matches no argument (an empty list's slots).
    pub const NONE: PrefetchedItem = PrefetchedItem {
        addr: 0,
        len: usize::MAX,
        hash: ItemHash::Bloom {
            wide: false,
            a: 0,
            b: 0,
        },
    };

    pub fn new(item: &[u8], hash: ItemHash) -> PrefetchedItem {
        PrefetchedItem {
            addr: item.as_ptr() as usize,
            len: item.len(),
            hash,
        }
    }

    /// Whether this is the entry of the argument `item`.
    #[inline]
    pub fn is(&self, item: &[u8]) -> bool {
        self.addr == item.as_ptr() as usize && self.len == item.len()
    }
}

impl ReadView for Db {
    fn read(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup(key)
    }

    fn read_notouch(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup_notouch(key)
    }

    fn expiry(&mut self, key: &[u8]) -> Option<u64> {
        self.expire_at(key)
    }

    fn clock(&self) -> u64 {
        self.now_ms
    }
}

pub use super::keytable::{held, stripe_of, STRIPES};

/// `e`'s value, its access recorded (a lookup Redis does not flag `NOTOUCH`).
#[inline]
fn touched(e: &Entry) -> &Value {
    e.touch();
    e.value()
}

/// One stripe on a cache line of its own, so that two cores locking neighbouring stripes do not
/// share a line.
#[repr(align(64))]
#[derive(Default)]
struct Stripe(RwLock<()>);

/// The locks that let commands write values in place under the *shared* keyspace lock
/// (`commands::shared_path`, issue 15 target 4). The keyspace `RwLock` still guards the
/// structure: under it shared, no segment is copied or split and the segment list does not
/// change, so every `&Entry` stays valid. What may change is a value (and its encoding code),
/// and only while its key's stripe is held for writing; every read of a value under the shared
/// lock holds the stripe for reading. A key's stripe is its segment's index modulo
/// [`STRIPES`], so in a table of at least that many segments a stripe also guards whole
/// segments, in which a key may then be added or removed ([`SharedDb::write_or_vacant`],
/// [`SharedDb::delete_keys`]) and a TTL set or cleared ([`SharedDb::set_ttl`]). The exclusive
/// path takes no stripe: holding the keyspace lock exclusively, it excludes everyone who could.
///
/// A lock holds no data: which values a stripe guards is a function of the key's hash
/// ([`stripe_of`]), which [`SharedDb`] checks before handing out any value.
pub struct Stripes(Box<[Stripe]>);

impl Default for Stripes {
    fn default() -> Stripes {
        Stripes((0..STRIPES).map(|_| Stripe::default()).collect())
    }
}

impl std::fmt::Debug for Stripes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stripes({})", self.0.len())
    }
}

impl Stripes {
    /// Stripe `i` held for reading, as `commands::prefetch_keys` does to look at a filter's
    /// pages under the shared lock.
    pub fn read(&self, i: usize) -> StripeRead<'_> {
        StripeRead {
            // No data behind the lock, so a poisoned one guards nothing broken.
            _guard: self.0[i].0.read().unwrap_or_else(|p| p.into_inner()),
            _mark: held::StripeMark::new(i, false),
        }
    }

    fn write(&self, i: usize) -> StripeWrite<'_> {
        StripeWrite {
            _guard: self.0[i].0.write().unwrap_or_else(|p| p.into_inner()),
            _mark: held::StripeMark::new(i, true),
        }
    }
}

/// A stripe held for reading; in debug builds this thread's mark of it too (`keytable::held`,
/// which checks the shared path's table accesses against the stripes held).
pub struct StripeRead<'a> {
    _guard: RwLockReadGuard<'a, ()>,
    _mark: held::StripeMark,
}

/// A stripe held for writing, marked as [`StripeRead`] is.
pub struct StripeWrite<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
    _mark: held::StripeMark,
}

/// A stripe a [`SharedDb`] holds.
enum StripeGuard<'a> {
    Read(#[allow(dead_code)] StripeRead<'a>),
    Write(#[allow(dead_code)] StripeWrite<'a>),
}

/// A database under the shared keyspace lock, for one command: its keys' stripes held
/// ([`SharedDb::hold`]), for reading or for writing.
///
/// Reads: reclaiming a key that is due is a write (Redis propagates it as `DEL`), so `read`
/// answers as if such a key were gone and defers the command ([`SharedDb::defer`]): the caller
/// then drops the reply and runs the command again on the exclusive path, which reclaims the key
/// as Redis would. Everything else reads exactly as [`Db::lookup`] does.
///
/// Writes ([`SharedDb::write`]): an existing, live key whose block no snapshot can reach, in place;
/// anything else (a new key, a due one, one a snapshot shares) defers.
pub struct SharedDb<'a> {
    db: &'a Db,
    stripes: &'a Stripes,
    /// Whether a missing key may be added ([`SharedDb::write_or_vacant`]).
    inserts: bool,
    now_ms: u64,
    deferred: bool,
    /// The arguments the batch's prefetch hashed ([`ReadView::batch_hash`]).
    prefetched: &'a [PrefetchedItem],
    /// The stripe held by a command of one key (most), or the first of several.
    held: Option<(usize, StripeGuard<'a>)>,
    /// The others of several, ascending, each once (only for a command of several keys in
    /// several stripes; an `Option` so that the common drop is one test, not a call).
    held_more: Option<Vec<(usize, StripeGuard<'a>)>>,
    /// Writes made, for `dirty` ([`SharedDb::wrote`]).
    writes: u64,
    /// Read lookups that found their key, and that did not (INFO `keyspace_hits`/`misses`),
    /// counted by the caller once the command is answered here ([`SharedDb::keyspace_counts`]).
    hits: u32,
    misses: u32,
    /// Keys added ([`SharedVacancy::insert`]) and removed ([`SharedDb::delete_keys`]), for the
    /// table's key count.
    inserted: usize,
    removed: usize,
    /// The defaults an add that creates its filter takes, and `cf-max-expansions`, which CF.ADD
    /// checks (the shared path reads no config lock).
    pub write_config: Option<&'a WriteConfig>,
    /// `maxmemory` (0 = no limit), set for a write: a filter it creates must fit under it
    /// (`commands::reservation_fits`), or the write defers and the exclusive path refuses it.
    pub maxmemory: u64,
    /// Where a write that creates a filter encodes the `BF.RESERVE` or `CF.RESERVE` it
    /// propagates before itself ([`SharedDb::propagate_before`]): given, emptied, only while the
    /// write stream has consumers (a buffer of the client's, so no allocation per command).
    prelude: Option<&'a mut Vec<u8>>,
    /// Where a write that propagates as another command (SET with a relative expiry, as
    /// `SET key value PXAT ms`) encodes it ([`SharedDb::propagate_as`]): given, emptied, while
    /// the write stream has consumers, as `prelude`; non-empty once this command wrote it.
    rewrite: Option<&'a mut Vec<u8>>,
    /// The first key [`SharedDb::hold`] hashed: (address, length, hash); address 0 for none,
    /// which no slice has.
    first_key: (usize, usize, u64),
    /// The hashes [`SharedDb::hold`] computed for a command of several keys, in argument order
    /// (MSET writes each key with its hash: [`SharedDb::take_key_hashes`]); kept for writes
    /// only, and inline up to 8 keys, so that a read of several keys (MGET, EXISTS) allocates
    /// nothing for it.
    key_hashes: Option<SmallVec<[u64; 8]>>,
}

/// A value being written in place under the shared lock ([`SharedDb::write`]).
pub struct SharedEntry<'s> {
    pub value: &'s mut Value,
    enc: &'s mut u8,
    /// The key's TTL (unix ms), if it has one.
    pub ttl: Option<u64>,
}

impl SharedEntry<'_> {
    /// Drops the `OBJECT ENCODING` override, as replacing a value does ([`Db::insert`]).
    pub fn clear_encoding(&mut self) {
        *self.enc = super::entry::with_code(*self.enc, ENC_NONE);
    }

    /// Marks a string `raw`, as Redis's unsharing before a write in place does
    /// ([`Db::lookup_unshared`]).
    pub fn mark_raw(&mut self) {
        *self.enc = super::entry::with_code(*self.enc, enc_code(Some("raw")));
    }
}

impl<'a> SharedDb<'a> {
    /// Takes the stripe of `key`, the command's only key (for writing if `write`).
    #[inline]
    pub fn hold_key(&mut self, key: &[u8], write: bool) {
        let h = self.db.hash(key);
        self.first_key = (key.as_ptr() as usize, key.len(), h);
        let i = stripe_of(h);
        debug_assert!(self.held.is_none(), "a command's stripes are taken once");
        self.held = Some((i, self.guard(i, write)));
    }

    /// Takes the stripes of `keys` (for writing if `write`), in ascending order so that two
    /// commands holding several never wait for each other in a cycle.
    pub fn hold<'k>(&mut self, mut keys: impl Iterator<Item = &'k [u8]>, write: bool) {
        let Some(first) = keys.next() else {
            return;
        };
        let h = self.db.hash(first);
        self.first_key = (first.as_ptr() as usize, first.len(), h);
        let Some(second) = keys.next() else {
            // The common case, one key: no list to sort.
            self.lock(stripe_of(h), write);
            return;
        };
        let hashes = [h, self.db.hash(second)]
            .into_iter()
            .chain(keys.map(|k| self.db.hash(k)));
        // Inline up to 16 stripes, a transaction of 14 reads (`commands::shared_path`'s EXEC)
        // included: a list that spills is an allocation. A read keeps no hashes.
        let mut want: SmallVec<[usize; 16]> = if write {
            let hashes: SmallVec<[u64; 8]> = hashes.collect();
            let want = hashes.iter().map(|&h| stripe_of(h)).collect();
            self.key_hashes = Some(hashes);
            want
        } else {
            hashes.map(stripe_of).collect()
        };
        want.sort_unstable();
        want.dedup();
        // The guards after the first, in one allocation (pushed one by one, the list grew
        // through 4, 8 and 16: a realloc each).
        if want.len() > 1 {
            self.held_more = Some(Vec::with_capacity(want.len() - 1));
        }
        for i in want {
            self.lock(i, write);
        }
    }

    #[inline]
    fn guard(&self, i: usize, write: bool) -> StripeGuard<'a> {
        if write {
            StripeGuard::Write(self.stripes.write(i))
        } else {
            StripeGuard::Read(self.stripes.read(i))
        }
    }

    fn lock(&mut self, i: usize, write: bool) {
        let guard = self.guard(i, write);
        if self.held.is_none() {
            self.held = Some((i, guard));
        } else {
            self.held_more.get_or_insert_with(Vec::new).push((i, guard));
        }
    }

    /// The table hash of `key`: the one [`SharedDb::hold`] computed when `key` is the very
    /// argument it hashed first (same address and length: the arguments do not change while the
    /// command runs), else computed.
    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        let (at, len, h) = self.first_key;
        if key.as_ptr() as usize == at && key.len() == len {
            h
        } else {
            self.db.hash(key)
        }
    }

    /// The table hash of `key` ([`SharedDb::hash`]: computed unless it is the first key held).
    #[inline]
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        self.hash(key)
    }

    /// The hashes of a write's keys, in argument order, when [`SharedDb::hold`] took several for
    /// writing (it computed them for their stripes); `None` for one key, for a read, or when
    /// taken already.
    pub fn take_key_hashes(&mut self) -> Option<SmallVec<[u64; 8]>> {
        self.key_hashes.take()
    }

    #[inline]
    fn holds(&self, stripe: usize, for_write: bool) -> bool {
        let fits = |(i, g): &(usize, StripeGuard)| {
            *i == stripe && (!for_write || matches!(g, StripeGuard::Write(_)))
        };
        // The one stripe of most commands first, without an iterator chain.
        self.held.as_ref().is_some_and(fits)
            || self.held_more.as_ref().is_some_and(|m| m.iter().any(fits))
    }

    /// Marks the command as one that must run on the exclusive path after all (it met a due key,
    /// or would have to write, e.g. PFCOUNT's stale cache): its reply is dropped.
    pub fn defer(&mut self) {
        self.deferred = true;
    }

    pub fn deferred(&self) -> bool {
        self.deferred
    }

    /// Counts a write for `dirty` (the exclusive path counts it in [`Db::lookup_mut_typed`] or
    /// [`Db::signal_modified`]); the caller adds [`SharedDb::writes`] to the database once the
    /// command was not deferred.
    pub fn wrote(&mut self) {
        self.writes += 1;
    }

    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Gives the buffers for [`SharedDb::propagate_before`] and [`SharedDb::propagate_as`]: the
    /// write stream has consumers.
    pub fn set_stream_buffers(&mut self, prelude: &'a mut Vec<u8>, rewrite: &'a mut Vec<u8>) {
        prelude.clear();
        rewrite.clear();
        self.prelude = Some(prelude);
        self.rewrite = Some(rewrite);
    }

    /// The command clock (unix ms).
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Has `encode` write the command (`engine::propagate::encode_command`) that enters the
    /// write stream in place of this one, as the exclusive path's `Ctx::propagate_as`. Nothing
    /// while the stream has no consumer ([`SharedDb::propagating`]).
    pub fn propagate_as(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        encode_into(self.rewrite.as_deref_mut(), encode);
    }

    /// [`SharedDb::propagate_as`]'s command, if any.
    pub fn rewritten(&self) -> Option<&[u8]> {
        encoded(self.rewrite.as_deref())
    }

    /// Whether `key`'s TTL may be set or cleared under the shared lock ([`SharedDb::set_ttl`],
    /// [`SharedDb::clear_ttl`]): keys may change there ([`Store::shared_inserts`]), its stripe
    /// is held for writing, and its segment is one that only this stripe reaches and no snapshot
    /// holds ([`KeyTable::can_remove_shared`]). A write that would change a TTL checks this
    /// before it changes anything, and defers when it is false.
    #[inline]
    pub fn can_change_ttl(&self, key: &[u8]) -> bool {
        let h = self.hash(key);
        self.inserts && self.holds(stripe_of(h), true) && self.db.table.can_remove_shared(h)
    }

    /// Sets the TTL of `key`, a key this command wrote or added, to `when` (unix ms), as
    /// [`Db::set_expire`] does but counting no write (SET counts one for the value and the TTL,
    /// as Redis's `setGenericCommand`). The caller checked [`SharedDb::can_change_ttl`] before
    /// it changed anything; nothing can have undone that since (only the exclusive lock can).
    pub fn set_ttl(&mut self, key: &[u8], when: u64) {
        let h = self.hash(key);
        assert!(self.can_change_ttl(key), "TTL change not checked");
        // SAFETY: `can_change_ttl` (asserted just now, under the locks this `SharedDb` holds
        // for `'a`) is `set_expiry_shared`'s contract: the keyspace lock shared, the key's
        // stripe held for writing, `can_remove_shared`; and the key is in the table, which
        // this command wrote or added (checked in debug builds by `set_expiry_shared`).
        let old = unsafe { self.db.table.set_expiry_shared(h, key, when) };
        self.db.expire_queue.change_shared(h, old, Some(when));
    }

    /// Removes the TTL of `key`, if it has one (SET without KEEPTTL replacing a key that had
    /// one), as [`SharedDb::set_ttl`]: the caller checked [`SharedDb::can_change_ttl`].
    pub fn clear_ttl(&mut self, key: &[u8]) {
        let h = self.hash(key);
        assert!(self.can_change_ttl(key), "TTL change not checked");
        self.clear_ttl_h(h, key);
    }

    /// [`SharedDb::clear_ttl`] of a key whose hash is `h`, with `can_change_ttl` checked.
    fn clear_ttl_h(&mut self, h: u64, key: &[u8]) {
        // SAFETY: the caller checked `can_change_ttl` under the locks this `SharedDb` holds for
        // `'a`: `remove_expiry_shared`'s contract.
        if let Some(when) = unsafe { self.db.table.remove_expiry_shared(h, key) } {
            self.db.expire_queue.change_shared(h, Some(when), None);
        }
    }

    /// Whether the write stream has consumers (a buffer was given), so that a write that creates
    /// a filter must [`SharedDb::propagate_before`] its `BF.RESERVE` or `CF.RESERVE`.
    pub fn propagating(&self) -> bool {
        self.prelude.is_some()
    }

    /// Has `encode` write a command (`engine::propagate::encode_command`) to enter the write
    /// stream before this command, the two as one `MULTI`/`EXEC` unit, as the exclusive path
    /// propagates a filter it created (its `BF.RESERVE` or `CF.RESERVE`, then the command).
    /// Nothing while the stream has no consumer.
    pub fn propagate_before(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        encode_into(self.prelude.as_deref_mut(), encode);
    }

    /// [`SharedDb::propagate_before`]'s command, if any.
    pub fn prelude(&self) -> Option<&[u8]> {
        encoded(self.prelude.as_deref())
    }

    /// Keys added, which the caller adds to the database's key count ([`Db::count_shared`])
    /// once the command was not deferred, before the shared lock is let go.
    pub fn inserted(&self) -> usize {
        self.inserted
    }

    /// Keys removed, as [`SharedDb::inserted`].
    pub fn removed(&self) -> usize {
        self.removed
    }

    /// Deletes `keys` (DEL, UNLINK) and answers how many there were, a repeated key counted
    /// once; `None` with the command deferred, before any is deleted, if one of them cannot be
    /// removed under the shared lock: it is due (reclaiming it is the exclusive path's, which
    /// propagates it as an expiry), a snapshot can reach it, removals are off
    /// ([`Store::shared_inserts`]), the table is too small for a segment's keys to share a
    /// stripe, or its stripe is not held for writing. A key's TTL goes with it
    /// ([`SharedDb::clear_ttl`]). Counts a write per key deleted.
    pub fn delete_keys(&mut self, keys: &[Bytes]) -> Option<usize> {
        for key in keys {
            let h = self.hash(key);
            // The stripe before anything is read (see `slot`).
            let removable = self.holds(stripe_of(h), true)
                && !(self.db.table.expires_len() != 0 && self.db.due_at(h, key, self.now_ms))
                && match self.db.table.find_for_write(h, key) {
                    ForWrite::Missing => true,
                    ForWrite::Found(_) => self.inserts && self.db.table.can_remove_shared(h),
                    ForWrite::Shared => false,
                };
            if !removable {
                self.deferred = true;
                return None;
            }
        }
        let mut n = 0;
        for key in keys {
            let h = self.hash(key);
            // Missing (from the start, or a repeat of a key removed just now): nothing to do,
            // and its segment may be one that removals must not touch (a small table).
            if !matches!(self.db.table.find_for_write(h, key), ForWrite::Found(_)) {
                continue;
            }
            // SAFETY: the keyspace lock is held shared (for `'a`) and the key's stripe for
            // writing (checked above, and held since by `self`); the first pass saw
            // `can_remove_shared` hold for this key, which only the exclusive lock could undo,
            // and `find_for_write` has just found the entry unshared: `remove_shared`'s
            // contract. The removals are counted below and added to the table's count before
            // the shared lock is let go.
            if let Some(entry) = unsafe { self.db.table.remove_shared(h, key) } {
                // Its TTL went with it (`remove_shared` counted it); its queue entry goes too.
                if let Some(when) = entry.deadline() {
                    self.db.expire_queue.change_shared(h, Some(when), None);
                }
                drop(entry);
                n += 1;
            }
        }
        self.removed += n;
        self.writes += n as u64;
        Some(n)
    }

    /// What a plain `SET key value` (no options: the value replaced, any TTL cleared) would
    /// meet under the shared lock, changing nothing: `Some(true)` a live key it can replace,
    /// `Some(false)` a missing key it can add after the `adding` keys the same command adds
    /// before it ([`KeyTable::can_insert_shared_after`]), `None` if it would defer (as
    /// [`SharedDb::write_or_vacant`] and a TTL it could not clear). MSET and MSETNX check every
    /// key with it before they write any: nothing but their own writes can change the answers
    /// while they hold their keys' stripes.
    /// `h` is the key's hash ([`SharedDb::key_hash`]).
    pub fn plain_set_check(&self, key: &[u8], h: u64, adding: usize) -> Option<bool> {
        // The stripe first, as in `slot`.
        if !self.holds(stripe_of(h), true) {
            return None;
        }
        let ttl = if self.db.table.expires_len() != 0 {
            self.db.table.expiry(h, key)
        } else {
            None
        };
        match (self.db.table.find_for_write(h, key), ttl) {
            (_, Some(t)) if t <= self.now_ms => None,
            (ForWrite::Found(_), None) => Some(true),
            (ForWrite::Found(_), Some(_)) => self.can_change_ttl(key).then_some(true),
            (ForWrite::Missing, _) => {
                (self.inserts && self.db.table.can_insert_shared_after(h, adding)).then_some(false)
            }
            (ForWrite::Shared, _) => None,
        }
    }

    /// `key`'s value for a write in place, or `None` with the command deferred: the key is
    /// missing (see [`SharedDb::write_or_vacant`] for a write that may add it), due (reclaiming
    /// it is a write of its own), in a block a snapshot can reach (unsharing changes the table),
    /// or its stripe is not held for writing. The handler must decide everything that could
    /// defer or fail before it changes the value: a deferred command runs again, from the start,
    /// on the exclusive path.
    #[inline]
    pub fn write(&mut self, key: &[u8]) -> Option<SharedEntry<'_>> {
        match self.slot(key, false)? {
            SharedSlot::Live(e) => Some(e),
            SharedSlot::Vacant(_) => None,
        }
    }

    /// As [`SharedDb::write`], and for a missing key, its place in the table when one can be
    /// added under the shared lock ([`KeyTable::can_insert_shared`], and only while
    /// [`Store::shared_inserts`]); otherwise the command is deferred. The handler decides
    /// everything that could defer or fail before it fills the place: a vacancy left unfilled
    /// leaves the table as it was.
    #[inline]
    pub fn write_or_vacant<'k>(&mut self, key: &'k [u8]) -> Option<SharedSlot<'_, 'k>> {
        let inserts = self.inserts;
        self.slot(key, inserts)
    }

    /// [`SharedDb::write_or_vacant`] of a key [`SharedDb::plain_set_check`] approved (with
    /// its hash `h`), by a command that checked all its keys before writing any: a missing key's
    /// vacancy is refused only by what cannot have changed since
    /// ([`KeyTable::can_insert_shared_here`]), not by the table's key count, which other
    /// threads' batches move meanwhile.
    #[inline]
    pub fn write_or_vacant_checked<'k>(
        &mut self,
        key: &'k [u8],
        h: u64,
    ) -> Option<SharedSlot<'_, 'k>> {
        debug_assert_eq!(h, self.db.hash(key));
        let inserts = if self.inserts {
            Inserts::Checked
        } else {
            Inserts::No
        };
        self.slot_hashed(key, h, inserts)
    }

    #[inline(always)]
    fn slot<'k>(&mut self, key: &'k [u8], inserts: bool) -> Option<SharedSlot<'_, 'k>> {
        let h = self.hash(key);
        let inserts = if inserts { Inserts::Yes } else { Inserts::No };
        self.slot_hashed(key, h, inserts)
    }

    // Always inlined: split out of `slot` for MSET's hashed keys, it must not cost the one-key
    // writes a call (PFADD -P 16 ran ~50 instructions more when it was one).
    #[inline(always)]
    fn slot_hashed<'k>(
        &mut self,
        key: &'k [u8],
        h: u64,
        inserts: Inserts,
    ) -> Option<SharedSlot<'_, 'k>> {
        // The stripe first: the key's segment may be changing under another stripe's holder
        // otherwise.
        if !self.holds(stripe_of(h), true) {
            self.deferred = true;
            return None;
        }
        let ttl = if self.db.table.expires_len() != 0 {
            self.db.table.expiry(h, key)
        } else {
            None
        };
        if ttl.is_some_and(|t| t <= self.now_ms) {
            self.deferred = true;
            return None;
        }
        let entry = match self.db.table.find_for_write(h, key) {
            ForWrite::Found(entry) => entry,
            ForWrite::Missing
                if match inserts {
                    Inserts::No => false,
                    Inserts::Yes => self.db.table.can_insert_shared(h),
                    Inserts::Checked => self.db.table.can_insert_shared_here(h, 0),
                } =>
            {
                return Some(SharedSlot::Vacant(SharedVacancy {
                    table: &self.db.table,
                    inserted: &mut self.inserted,
                    h,
                    key,
                }));
            }
            _ => {
                self.deferred = true;
                return None;
            }
        };
        // The access bits are atomics, apart from the value and the code.
        entry.touch();
        let (value, enc) = entry.shared_write_parts();
        // SAFETY: the block is live and stays so: the keyspace lock is held shared for `'a`, so
        // no entry is removed or replaced, and `find_for_write` saw no snapshot holding it, which
        // none can start to while that lock is held. Its value and code are reached under the
        // shared lock only through a `SharedDb` holding the key's stripe, checked here to be
        // held for writing by this one, for as long as the returned borrow of `self` lives
        // (the guard sits in `self.held`): so no other reference to them exists meanwhile. The
        // exclusive path, the only other way to them, cannot run while the shared lock is held.
        // The value (offset 0) and the code (ENC_OFF, after it) do not overlap.
        let (value, enc) = unsafe { (&mut *value, &mut *enc) };
        Some(SharedSlot::Live(SharedEntry { value, enc, ttl }))
    }
}

/// Whether [`SharedDb::slot_hashed`] may answer a vacancy for a missing key.
#[derive(Clone, Copy)]
enum Inserts {
    No,
    /// Where [`KeyTable::can_insert_shared`] allows.
    Yes,
    /// The key was checked with the others of its command ([`SharedDb::write_or_vacant_checked`]).
    Checked,
}

/// Has `encode` write a command into a stream buffer of [`SharedDb`] (`None`: the stream has no
/// consumer, nothing is encoded).
fn encode_into(buffer: Option<&mut Vec<u8>>, encode: impl FnOnce(&mut Vec<u8>)) {
    if let Some(buffer) = buffer {
        buffer.clear();
        encode(buffer);
    }
}

/// The command a [`SharedDb`] stream buffer holds, if any (it is emptied when given).
fn encoded(buffer: Option<&Vec<u8>>) -> Option<&[u8]> {
    buffer.filter(|b| !b.is_empty()).map(Vec::as_slice)
}

/// The configuration that writes under the shared lock read, mirrored for the shared path, which
/// takes no config lock: the defaults for filters that adds create (`bf-*` for BF.ADD and
/// BF.MADD, `cf-*` for CF.ADD, with `cf-max-expansions`, which CF.ADD checks on any filter) and
/// `hll-sparse-max-bytes` (PFADD of a sparse HLL). Written only by CONFIG SET, under the
/// exclusive keyspace lock, so a reader under the shared lock sees them all from one
/// configuration.
#[derive(Debug, Default)]
pub struct WriteConfig {
    hll_sparse_max_bytes: AtomicU64,
    bf_error_rate: AtomicU64,
    bf_initial_size: AtomicU64,
    bf_expansion: AtomicU64,
    cf_initial_size: AtomicU64,
    cf_bucket_size: AtomicU64,
    cf_max_iterations: AtomicU64,
    cf_expansion: AtomicU64,
    cf_max_expansions: AtomicU64,
}

/// The `cf-*` defaults a CF.ADD that creates its filter takes ([`WriteConfig::cuckoo`]).
#[derive(Debug, Clone, Copy)]
pub struct CuckooDefaults {
    pub initial_size: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
    pub max_expansions: u32,
}

impl WriteConfig {
    /// (error rate, capacity, expansion), as `commands::bloom` reads them from the config.
    pub fn bloom(&self) -> (f64, u64, u32) {
        (
            f64::from_bits(self.bf_error_rate.load(Ordering::Relaxed)),
            self.bf_initial_size.load(Ordering::Relaxed),
            self.bf_expansion.load(Ordering::Relaxed) as u32,
        )
    }

    /// `hll-sparse-max-bytes`: past it a sparse HLL turns dense.
    pub fn hll_sparse_max_bytes(&self) -> u64 {
        self.hll_sparse_max_bytes.load(Ordering::Relaxed)
    }

    pub fn set_hll_sparse_max_bytes(&self, bytes: u64) {
        self.hll_sparse_max_bytes.store(bytes, Ordering::Relaxed);
    }

    /// `cf-max-expansions` alone, which every CF.ADD checks.
    pub fn cf_max_expansions(&self) -> u32 {
        self.cf_max_expansions.load(Ordering::Relaxed) as u32
    }

    pub fn cuckoo(&self) -> CuckooDefaults {
        CuckooDefaults {
            initial_size: self.cf_initial_size.load(Ordering::Relaxed),
            bucket_size: self.cf_bucket_size.load(Ordering::Relaxed) as u16,
            max_iterations: self.cf_max_iterations.load(Ordering::Relaxed) as u16,
            expansion: self.cf_expansion.load(Ordering::Relaxed) as u16,
            max_expansions: self.cf_max_expansions(),
        }
    }

    pub fn set_bloom(&self, error_rate: f64, initial_size: u64, expansion: u32) {
        self.bf_error_rate
            .store(error_rate.to_bits(), Ordering::Relaxed);
        self.bf_initial_size.store(initial_size, Ordering::Relaxed);
        self.bf_expansion
            .store(u64::from(expansion), Ordering::Relaxed);
    }

    pub fn set_cuckoo(&self, d: CuckooDefaults) {
        self.cf_initial_size
            .store(d.initial_size, Ordering::Relaxed);
        self.cf_bucket_size
            .store(u64::from(d.bucket_size), Ordering::Relaxed);
        self.cf_max_iterations
            .store(u64::from(d.max_iterations), Ordering::Relaxed);
        self.cf_expansion
            .store(u64::from(d.expansion), Ordering::Relaxed);
        self.cf_max_expansions
            .store(u64::from(d.max_expansions), Ordering::Relaxed);
    }
}

/// What [`SharedDb::write_or_vacant`] found.
pub enum SharedSlot<'s, 'k> {
    /// The live key's value, to write in place.
    Live(SharedEntry<'s>),
    /// The key is missing and may be added here.
    Vacant(SharedVacancy<'s, 'k>),
}

/// A missing key's place in the table under the shared lock, its stripe held for writing by the
/// [`SharedDb`] it borrows ([`SharedDb::write_or_vacant`]).
pub struct SharedVacancy<'s, 'k> {
    table: &'s KeyTable,
    inserted: &'s mut usize,
    h: u64,
    key: &'k [u8],
}

impl SharedVacancy<'_, '_> {
    /// Adds the key with `value`, no TTL and no encoding override, as [`Db::insert`] adds a new
    /// key. The caller counts the write ([`SharedDb::wrote`]).
    pub fn insert(self, value: Value) {
        self.insert_with_code(value, ENC_NONE);
    }

    /// [`SharedVacancy::insert`] of a key the command gives a TTL next ([`SharedDb::set_ttl`]):
    /// its entry has the deadline slot already (`Entry::with_slot`).
    pub fn insert_expiring(self, value: Value) {
        let entry = Entry::with_slot(self.key, ENC_NONE, value);
        self.insert_entry(entry);
    }

    /// [`SharedVacancy::insert`] of a string marked `raw`, as PFADD creates its HLL (Redis
    /// makes every HLL a raw string, whatever its length).
    pub fn insert_raw(self, value: Value) {
        self.insert_with_code(value, enc_code(Some("raw")));
    }

    fn insert_with_code(self, value: Value, code: u8) {
        let entry = Entry::new(self.key, code, value);
        self.insert_entry(entry);
    }

    fn insert_entry(self, entry: Entry) {
        // SAFETY: `SharedDb::slot` made this vacancy under the shared keyspace lock with the
        // key's stripe held for writing, after `can_insert_shared` and a lookup that found the
        // key missing; both locks are still held, since the vacancy borrows the `SharedDb`
        // holding the stripe, which borrows the engine under the shared guard. No key can have
        // been added to this segment since: that takes the same stripe.
        unsafe { self.table.insert_shared(self.h, entry) };
        *self.inserted += 1;
    }
}

impl SharedDb<'_> {
    /// The live entry of `key` for a read; `None` with the command deferred when its stripe is
    /// not held or the key is due (reclaiming it is a write).
    #[inline]
    fn read_entry(&mut self, key: &[u8]) -> Option<&Entry> {
        let h = self.hash(key);
        if !self.holds(stripe_of(h), false)
            || (self.db.table.expires_len() != 0 && self.db.due_at(h, key, self.now_ms))
        {
            self.deferred = true;
            return None;
        }
        let found = self.db.table.find(h, key);
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    /// The read lookups that found their key, and that did not, for INFO `keyspace_hits` and
    /// `keyspace_misses` (as [`Db::lookup_entry`] counts the exclusive path's).
    pub fn keyspace_counts(&self) -> (u32, u32) {
        (self.hits, self.misses)
    }
}

impl ReadView for SharedDb<'_> {
    fn read(&mut self, key: &[u8]) -> Option<&Value> {
        self.read_entry(key).map(touched)
    }

    fn read_notouch(&mut self, key: &[u8]) -> Option<&Value> {
        self.read_entry(key).map(Entry::value)
    }

    fn expiry(&mut self, key: &[u8]) -> Option<u64> {
        let h = self.hash(key);
        if !self.holds(stripe_of(h), false) {
            self.deferred = true;
            return None;
        }
        self.db.table.expiry(h, key)
    }

    fn clock(&self) -> u64 {
        self.now_ms
    }

    fn batch_hash(&self, item: &[u8]) -> Option<ItemHash> {
        let hash = self.prefetched.iter().find(|p| p.is(item)).map(|p| p.hash);
        debug_assert!(
            hash.is_none_or(|h| h == ItemHash::of(item, h)),
            "a prefetched hash that is not its argument's"
        );
        hash
    }
}

/// A key as stored: its own allocation. Arguments arrive as `Bytes` slices of the connection's read
/// buffer; keeping one would pin the whole read chunk in memory for the key's lifetime.
fn own_key(key: Bytes) -> Bytes {
    Bytes::copy_from_slice(&key)
}

/// A read lookup found no `key`: counted in a database's `keyspace_misses`, and its `keymiss`
/// event raised if enabled (as `Db::notify` raises events). Over the fields, not `&mut Db`, so
/// that a lookup may call it while it holds an entry of the table.
fn read_missed(
    misses: &mut u64,
    notify_flags: u32,
    pending: &mut Vec<(u32, &'static str, Bytes)>,
    key: &[u8],
) {
    *misses += 1;
    let f = notify_flags;
    if f & events::KEY_MISS != 0 && f & (events::KEYSPACE | events::KEYEVENT) != 0 {
        pending.push((events::KEY_MISS, "keymiss", Bytes::copy_from_slice(key)));
    }
}

/// Encoding-override codes kept in an [`Entry`].
const ENC_NONE: u8 = 0;
const ENCODINGS: [&str; 3] = ["raw", "embstr", "int"];

/// Lookups prefetched at once by [`Db::prefetch`]: a pipelined batch of 16, redis-benchmark's
/// `-P 16`, in one go; a longer batch is prefetched in such steps as it runs.
pub const PREFETCH_BATCH: usize = 16;

/// Below this many keys the table's hot lines mostly stay in the caches, and prefetching a
/// batch's lookups costs more instructions than the misses it saves (see [`Db::prefetch`]).
const PREFETCH_MIN_KEYS: usize = 1 << 15;

fn enc_code(e: Option<&'static str>) -> u8 {
    match e {
        None => ENC_NONE,
        Some(e) => ENCODINGS
            .iter()
            .position(|x| *x == e)
            .map(|i| i as u8 + 1)
            .unwrap_or(ENC_NONE),
    }
}

fn enc_name(code: u8) -> Option<&'static str> {
    match code {
        ENC_NONE => None,
        c => ENCODINGS.get(c as usize - 1).copied(),
    }
}

#[derive(Debug, Clone, Default)]
struct Watch {
    version: u64,
    refs: usize,
}

/// What [`Db::lookup_mut_typed`] found.
pub enum TypedLookup<'a> {
    /// The value, of the asked type, marked modified.
    Hit(&'a mut Value),
    /// No such key (or it was due and is now reclaimed).
    Missing,
    /// A value of another type, left untouched.
    OtherType,
}

/// The expiry queue of a database: its keys with a TTL ordered by time, one ordered set per
/// stripe (a key's set is its stripe's, [`stripe_of`]). Active expiry walks the sets from a
/// cursor, popping what is due in each ([`Db::active_expire`]).
///
/// Why per stripe: TTLs are set and cleared under the shared keyspace lock too (SET with an
/// expiry, SET or DEL of a key that had one: [`SharedDb::set_ttl`], [`SharedDb::clear_ttl`]),
/// by cores holding different stripes at once. One set per database would be a lock every such
/// write takes, or a log of changes that the exclusive lock applies later, serially (measured:
/// ~0.3 µs per change, a tenth of a second's changes applied at once by the cron). One set per
/// stripe is changed only by whoever holds the stripe for writing (or the exclusive lock), so
/// its mutex is never waited for: it makes the sharing safe, not serial. The exclusive path
/// reaches the sets through `&mut` and takes no lock.
///
/// The order active expiry reclaims keys in is each set's time order, not the database's: with
/// its budget of keys per run spent, the keys left are due in other stripes rather than later
/// in time. Redis itself reclaims due keys by random sampling.
#[derive(Debug)]
struct ExpiryQueues {
    sets: Box<[ExpirySet]>,
    /// The stripe active expiry looks at first next time, so that a budget spent early does not
    /// always leave the same stripes for later.
    cursor: usize,
}

/// One stripe's queue: the (deadline, key hash) of each key with a TTL, ordered. The key itself
/// is found in the key table by its hash and deadline ([`KeyTable::expiring_entry`]): a queue entry
/// is 16 bytes and no allocation, where a copy of the key cost a heap chunk and a reference count
/// (issue 15, target 3: a key with a TTL cost 247 bytes more than one without). A set in full
/// chunks of 64 pairs ([`ChunkedSet`]: ~16 bytes a key where a `BTreeSet`'s half-full leaves
/// took ~37 and a map to a count more). Two keys of one hash and one deadline (a 64-bit
/// collision) are one entry of the set and one of `more`, which counts the entries past the
/// first.
#[derive(Debug, Default)]
struct ExpiryQueue {
    set: ChunkedSet,
    more: HashMap<(u64, u64), u32>,
}

impl ExpiryQueue {
    /// The entry due first.
    fn first(&self) -> Option<(u64, u64)> {
        self.set.first()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.set.len() + self.more.values().map(|&n| n as usize).sum::<usize>()
    }

    fn clear(&mut self) {
        self.set.clear();
        self.more.clear();
    }
}

#[repr(align(64))]
#[derive(Debug, Default)]
struct ExpirySet(Mutex<ExpiryQueue>);

impl Default for ExpiryQueues {
    fn default() -> ExpiryQueues {
        ExpiryQueues {
            sets: (0..STRIPES).map(|_| ExpirySet::default()).collect(),
            cursor: 0,
        }
    }
}

/// Counts one more key at (`when`, `h`) in `queue`.
fn queue_add(queue: &mut ExpiryQueue, when: u64, h: u64) {
    if !queue.set.insert((when, h)) {
        *queue.more.entry((when, h)).or_insert(0) += 1;
    }
}

/// Counts one key less at (`when`, `h`) in `queue`.
fn queue_remove(queue: &mut ExpiryQueue, when: u64, h: u64) {
    if let Some(n) = queue.more.get_mut(&(when, h)) {
        *n -= 1;
        if *n == 0 {
            queue.more.remove(&(when, h));
        }
        return;
    }
    queue.set.remove((when, h));
}

impl ExpiryQueues {
    /// Bytes the queues have allocated (MEMORY STATS `overhead.hashtable.expires`): the sets'
    /// chunks and the side maps' tables (an entry and its control byte per slot).
    fn allocated_bytes(&mut self) -> usize {
        let side_slot = std::mem::size_of::<((u64, u64), u32)>() + 1;
        (0..self.sets.len())
            .map(|i| {
                let q = self.set_mut(i);
                q.set.allocated_bytes() + q.more.capacity() * side_slot
            })
            .sum::<usize>()
            + std::mem::size_of_val(&*self.sets)
    }

    /// The set of stripe `i`, for the exclusive path.
    fn set_mut(&mut self, i: usize) -> &mut ExpiryQueue {
        // A poisoned set was left by a panic between two whole operations of a `BTreeMap`.
        self.sets[i].0.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&mut self, h: u64, when: u64) {
        queue_add(self.set_mut(stripe_of(h)), when, h);
    }

    fn remove(&mut self, h: u64, when: u64) {
        queue_remove(self.set_mut(stripe_of(h)), when, h);
    }

    /// Under the shared keyspace lock, with the stripe of `h` held for writing: removes the
    /// key's `old` deadline, then adds its `new` one, in the stripe's set.
    fn change_shared(&self, h: u64, old: Option<u64>, new: Option<u64>) {
        // Never waited for: only the holder of the stripe's write lock takes it.
        let mut set = self.sets[stripe_of(h)]
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(old) = old {
            queue_remove(&mut set, old, h);
        }
        if let Some(new) = new {
            queue_add(&mut set, new, h);
        }
    }

    /// A (deadline, key hash) that is due at `now`, from the stripe at the cursor on: the
    /// cursor stays on a stripe while it has due keys.
    fn next_due(&mut self, now: u64) -> Option<(u64, u64)> {
        for _ in 0..self.sets.len() {
            let cursor = self.cursor;
            let set = self.set_mut(cursor);
            if let Some((when, h)) = set.first() {
                if when <= now {
                    return Some((when, h));
                }
            }
            self.cursor = (cursor + 1) % STRIPES;
        }
        None
    }

    /// The (deadline, key hash) due first in the first non-empty set at or after a random
    /// stripe (`draw`): volatile-ttl's eviction sample.
    fn earliest(&mut self, draw: u64) -> Option<(u64, u64)> {
        let start = (draw as usize) % self.sets.len();
        for i in 0..self.sets.len() {
            if let Some(first) = self.set_mut((start + i) % STRIPES).first() {
                return Some(first);
            }
        }
        None
    }

    #[cfg(test)]
    fn len(&mut self) -> usize {
        (0..self.sets.len()).map(|i| self.set_mut(i).len()).sum()
    }

    fn clear(&mut self) {
        for i in 0..self.sets.len() {
            self.set_mut(i).clear();
        }
    }
}

/// One database (`SELECT n`).
#[derive(Debug, Default)]
pub struct Db {
    /// The keys, their values and their TTLs: segments behind `Arc` (`store::keytable`).
    table: KeyTable,
    expire_queue: ExpiryQueues,
    watched: KeyMap<Watch>,
    /// The clock used for expiry decisions (unix ms), set before each command.
    pub now_ms: u64,
    /// Modifications since the last successful save.
    pub dirty: u64,
    /// Keys reclaimed by lazy expiry (a lookup found them due); INFO `expired_keys` adds this to the
    /// active-expiry count.
    pub lazy_expired: u64,
    /// Modifications by commands, never reset (see the module essay).
    pub changes: u64,
    /// Modifications by commands on the shared path, not yet in `dirty` and `changes`
    /// ([`Store::db`] folds them in): added once per batch, on a line of its own.
    pub shared_dirty: SharedCount,
    /// Record keys deleted by expiry in `expired_log` (on while the write stream has consumers).
    /// Read lookups that found their key, and that did not (INFO `keyspace_hits` and
    /// `keyspace_misses`; the shared path counts its own in its clients).
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub log_expired: bool,
    /// Keys deleted by lazy or active expiry or by eviction, oldest first, with the command that
    /// propagates each (`DEL`, or `UNLINK` for an eviction under `lazyfree-lazy-eviction`), until
    /// the dispatcher drains them.
    pub expired_log: Vec<(&'static [u8], Bytes)>,
    /// The `notify-keyspace-events` classes in force ([`crate::events`]); 0 = none, the common case,
    /// which costs one branch per event.
    pub notify_flags: u32,
    /// Keyspace events raised since the dispatcher last drained them: (class, event, key). The
    /// store only records them; the engine publishes them.
    pub events: Vec<(u32, &'static str, Bytes)>,
}

/// A counter that shared-path writers add to from any core, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct SharedCount(pub AtomicU64);

/// A database as it was at one instant, for a writer on another thread (BGSAVE, the AOF
/// rewrite's base, a full sync): the key table's segments, shared copy-on-write, and the clock
/// that decides which keys were already due then. Taking it copies no key ([`Db::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct DbSnapshot {
    table: TableSnapshot,
    now_ms: u64,
}

impl DbSnapshot {
    /// The live entries (keys that were due at the snapshot's instant left out) with their
    /// TTLs, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &Value, Option<u64>)> {
        let now = self.now_ms;
        self.table
            .entries()
            .filter(move |(_, _, ttl, _)| ttl.is_none_or(|t| t > now))
            .map(|(k, v, ttl, _)| (k, v, ttl))
    }

    /// How many entries [`DbSnapshot::entries`] yields, and how many of them have a TTL (the
    /// RDB's RESIZEDB hint): O(keys with a TTL).
    pub fn counts(&self) -> (u64, u64) {
        let now = self.now_ms;
        let (n, e) = self.table.counts();
        let due = self.table.expiries().filter(|&t| t <= now).count();
        ((n - due) as u64, (e - due) as u64)
    }

    /// True if no live entry.
    pub fn is_empty(&self) -> bool {
        self.counts().0 == 0
    }

    /// [`DbSnapshot::entries`] through `f`, with each key's access bits (`store::access`, for
    /// the RDB's IDLE and FREQ records), letting go of each key table segment once walked
    /// (`TableSnapshot::drain_some`): how a save's writer walks its snapshot. Returns whether
    /// any segment is left; [`DbSnapshot::counts`] then counts only those.
    pub fn drain_some<E>(
        &mut self,
        max_segments: usize,
        mut f: impl FnMut(&[u8], &Value, Option<u64>, u32) -> Result<(), E>,
    ) -> Result<bool, E> {
        let now = self.now_ms;
        self.table.drain_some(max_segments, |k, v, ttl, access| {
            if ttl.is_none_or(|t| t > now) {
                f(k, v, ttl, access)
            } else {
                Ok(())
            }
        })
    }

    /// Walks every entry through `f` ([`DbSnapshot::drain_some`] to the end).
    pub fn drain<E>(
        mut self,
        f: impl FnMut(&[u8], &Value, Option<u64>, u32) -> Result<(), E>,
    ) -> Result<(), E> {
        self.drain_some(usize::MAX, f).map(|_| ())
    }
}

impl Db {
    pub fn new() -> Db {
        Db::default()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.table.hash(key)
    }

    /// Starts the cache misses of the lookups of up to [`PREFETCH_BATCH`] keys together, before
    /// the commands that look them up run one by one (issue 15: with a million keys, `GET` spent
    /// half its CPU waiting on the segment, slot and entry lines of its key, one after the other;
    /// [`KeyTable::prefetch`]). Nothing for a table small enough to stay in the caches. A hint:
    /// keys that are not in the table, or arguments that are not keys, cost a wasted line.
    ///
    /// `stripes`: given when other threads may be adding keys under the shared lock meanwhile
    /// ([`Store::shared_inserts`] with `Shared::parallel_batches`): their writers change
    /// segments other keys' readers do not exclude, so each walk holds its hash's stripe for
    /// reading, as a read would.
    pub fn prefetch<'a>(&self, keys: impl Iterator<Item = &'a [u8]>, stripes: Option<&Stripes>) {
        if self.table.len() < PREFETCH_MIN_KEYS {
            return;
        }
        let mut hashes = [0u64; PREFETCH_BATCH];
        let mut n = 0;
        for key in keys.take(PREFETCH_BATCH) {
            hashes[n] = self.hash(key);
            n += 1;
        }
        self.table
            .prefetch(&hashes[..n], |h| stripes.map(|s| s.read(stripe_of(h))));
    }

    /// This database for one command under the shared lock, at the command time `now_ms`, with
    /// the arguments the batch's prefetch hashed; it holds no stripe until [`SharedDb::hold`].
    ///
    /// `inserts`: whether a write may add a key ([`SharedDb::write_or_vacant`]),
    /// [`Store::shared_inserts`]: sound because every reader that can run beside the write holds
    /// stripes (with one thread running batches, the batch prefetch runs before the commands,
    /// never beside them: `Shared::parallel_batches`).
    pub fn shared_view<'a>(
        &'a self,
        stripes: &'a Stripes,
        now_ms: u64,
        prefetched: &'a [PrefetchedItem],
        inserts: bool,
    ) -> SharedDb<'a> {
        SharedDb {
            db: self,
            stripes,
            inserts,
            now_ms,
            deferred: false,
            prefetched,
            held: None,
            held_more: None,
            writes: 0,
            hits: 0,
            misses: 0,
            inserted: 0,
            removed: 0,
            write_config: None,
            maxmemory: 0,
            prelude: None,
            rewrite: None,
            first_key: (0, 0, 0),
            key_hashes: None,
        }
    }

    /// Counts keys added and removed under the shared lock ([`SharedDb::inserted`],
    /// [`SharedDb::removed`]).
    pub fn count_shared(&self, added: usize, removed: usize) {
        self.table.count_shared(added, removed);
    }

    /// The stripe of `key` ([`stripe_of`]).
    pub fn stripe(&self, key: &[u8]) -> usize {
        stripe_of(self.hash(key))
    }

    /// True if some client watches a key here (a write must then bump its version, which only
    /// the exclusive path does).
    pub fn has_watches(&self) -> bool {
        !self.watched.is_empty()
    }

    /// Moves the shared path's writes into `dirty` and `changes`.
    fn fold_shared_dirty(&mut self) {
        let n = self.shared_dirty.0.get_mut();
        if *n != 0 {
            self.dirty += *n;
            self.changes += *n;
            *n = 0;
        }
    }

    /// Counts this command's modifications since `before` (a reading of [`Db::dirty`] taken
    /// before its first) as `n`: Redis's commands of several steps (RENAME, COPY, MOVE,
    /// RESTORE) count `server.dirty++` once, where each of our steps (a removal, an insert, a
    /// TTL) counts its own, and `rdb_changes_since_last_save` would move by 2 or 3.
    pub fn count_changes_since(&mut self, before: u64, n: u64) {
        self.dirty = before + n;
    }

    /// How many TTLs the expiry queue holds (tests: it must agree with the key table's).
    #[cfg(test)]
    pub fn queue_len(&mut self) -> usize {
        self.expire_queue.len()
    }

    /// The value of `key` without any of a lookup's effects (no expiry, no statistics): for
    /// hints such as `commands::prefetch_keys`, which may look at a key that is due.
    pub fn peek_value(&self, key: &[u8]) -> Option<&Value> {
        self.get(key).map(Entry::value)
    }

    fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.table.find(self.hash(key), key)
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let h = self.hash(key);
        self.table.find_mut(h, key)
    }

    fn has(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Removes the entry of `key` from the map, and its TTL with it, returning its value.
    fn take(&mut self, key: &[u8]) -> Option<Value> {
        let h = self.hash(key);
        let entry = self.table.remove(h, key)?;
        if let Some(when) = entry.deadline() {
            self.expire_queue.remove(h, when);
        }
        Some(entry.into_value())
    }

    /// Number of keys, including keys that are due but not yet reclaimed (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn expires_count(&self) -> usize {
        self.table.expires_len()
    }

    /// What the database's structures take beside its keys and values, as MEMORY STATS
    /// reports per database: the key tables, and the expiry queues.
    pub fn overhead_bytes(&mut self) -> (usize, usize) {
        (
            self.table.table_bytes(),
            self.expire_queue.allocated_bytes(),
        )
    }

    fn is_due(&self, key: &[u8]) -> bool {
        if self.table.expires_len() == 0 {
            return false;
        }
        self.is_due_h(self.hash(key), key)
    }

    /// [`Db::is_due`] of a key whose hash is `h`.
    #[inline]
    fn is_due_h(&self, h: u64, key: &[u8]) -> bool {
        self.due_at(h, key, self.now_ms)
    }

    /// True if the key whose hash is `h` has a deadline at or before `now_ms`.
    #[inline]
    fn due_at(&self, h: u64, key: &[u8], now_ms: u64) -> bool {
        match self.table.expiry(h, key) {
            Some(when) => when <= now_ms,
            None => false,
        }
    }

    /// Deletes `key` if its deadline has passed. Returns true if it did.
    fn expire_if_due(&mut self, key: &[u8]) -> bool {
        if self.table.expires_len() != 0 && self.is_due(key) {
            self.remove_expired(key);
            self.lazy_expired += 1;
            true
        } else {
            false
        }
    }

    /// [`Db::expire_if_due`] of a key whose hash is `h`.
    #[inline]
    fn expire_if_due_h(&mut self, h: u64, key: &[u8]) -> bool {
        if self.table.expires_len() != 0 && self.is_due_h(h, key) {
            self.remove_expired(key);
            self.lazy_expired += 1;
            true
        } else {
            false
        }
    }

    /// Records a keyspace event if its class is enabled (and K or E is).
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let f = self.notify_flags;
        if f & class != 0 && f & (events::KEYSPACE | events::KEYEVENT) != 0 {
            self.events
                .push((class, event, Bytes::copy_from_slice(key)));
        }
    }

    fn touch(&mut self, key: &[u8]) {
        self.changes += 1;
        self.bump_watch(key);
        self.dirty += 1;
        self.track(events::TRACKED, key);
    }

    /// Records a modification of `key` for CLIENT TRACKING (while some client tracks).
    fn track(&mut self, class: u32, key: &[u8]) {
        if self.notify_flags & events::TRACKED != 0 {
            self.events.push((class, "", Bytes::copy_from_slice(key)));
        }
    }

    fn bump_watch(&mut self, key: &[u8]) {
        if !self.watched.is_empty() {
            if let Some(w) = self.watched.get_mut(key) {
                w.version += 1;
            }
        }
    }

    /// What a deletion by expiry records: counted for the save points and WATCH, not as a
    /// command's write.
    fn touch_expired(&mut self, key: &[u8]) {
        self.dirty += 1;
        self.bump_watch(key);
        self.track(events::TRACKED | events::EXPIRED, key);
    }

    /// Marks a key modified without going through a write path (e.g. a handler mutated a value
    /// obtained by `lookup_mut` and wants the change counted twice — rarely needed).
    pub fn signal_modified(&mut self, key: &[u8]) {
        self.touch(key);
    }

    /// Bumps the WATCH version of `key` without counting a change for the save points: a module
    /// command that opened the key for writing and then failed (RedisBloom's CMS/TopK writes) makes
    /// a watching EXEC abort, but Redis's `dirty` only moves when the command replicates.
    pub fn signal_watchers(&mut self, key: &[u8]) {
        self.bump_watch(key);
        self.track(events::TRACKED, key);
    }

    /// Read lookup: the value, unless absent or expired; the access is recorded.
    pub fn lookup(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup_entry(key).map(touched)
    }

    /// [`Db::lookup`] without recording the access (Redis's `LOOKUP_NOTOUCH`: EXISTS, TYPE,
    /// TTL, OBJECT).
    pub fn lookup_notouch(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup_entry(key).map(Entry::value)
    }

    /// The key's access bits (`store::access`), not counting this look (OBJECT IDLETIME and
    /// FREQ), as [`Db::lookup_notouch`] finds the key.
    pub fn access_of(&mut self, key: &[u8]) -> Option<u32> {
        self.lookup_entry(key).map(Entry::access)
    }

    /// Sets the key's access bits (RESTORE's IDLETIME and FREQ); false if there is no such key.
    pub fn set_access_of(&self, key: &[u8], bits: u32) -> bool {
        self.get(key).map(|e| e.set_access(bits)).is_some()
    }

    /// A read lookup (Redis's `lookupKeyRead`): reclaims a due key, raises `keymiss`, and counts
    /// INFO's `keyspace_hits` or `keyspace_misses`.
    #[inline]
    fn lookup_entry(&mut self, key: &[u8]) -> Option<&Entry> {
        let h = self.hash(key);
        self.expire_if_due_h(h, key);
        // One probe: the counters and events are other fields than the table the entry
        // borrows (so no `&mut self` method while it lives).
        let found = self.table.find(h, key);
        match found {
            Some(_) => self.keyspace_hits += 1,
            None => read_missed(
                &mut self.keyspace_misses,
                self.notify_flags,
                &mut self.events,
                key,
            ),
        }
        found
    }

    /// Read lookup that raises no key-miss event (Redis's LOOKUP_NONOTIFY, used where a command
    /// checks for a key it is about to write).
    pub fn lookup_quiet(&mut self, key: &[u8]) -> Option<&Value> {
        self.expire_if_due(key);
        self.get(key).map(touched)
    }

    /// Read lookup that does not reclaim (for commands that must not write, e.g. inside a snapshot
    /// walk). An expired key still reads as absent.
    pub fn peek(&self, key: &[u8]) -> Option<&Value> {
        if self.is_due(key) {
            None
        } else {
            self.get(key).map(Entry::value)
        }
    }

    /// Write lookup: the value for in-place modification. Marks the key modified.
    /// One probe of the table ([`Db::lookup_mut_typed`] with every type accepted), where the
    /// existence test and then the entry were two.
    pub fn lookup_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        match self.lookup_mut_typed(key, |_| true) {
            TypedLookup::Hit(v) => Some(v),
            TypedLookup::Missing | TypedLookup::OtherType => None,
        }
    }

    /// Write lookup of a value of one type, in one probe of the table: a hit marks the key
    /// modified as [`Db::lookup_mut`] does; a value for which `is_type` is false is
    /// [`TypedLookup::OtherType`] and leaves the key untouched (WRONGTYPE must not bump WATCH
    /// versions).
    pub fn lookup_mut_typed(
        &mut self,
        key: &[u8],
        is_type: impl FnOnce(&Value) -> bool,
    ) -> TypedLookup<'_> {
        self.expire_if_due(key);
        let h = self.hash(key);
        let Some(e) = self.table.find_mut(h, key) else {
            return TypedLookup::Missing;
        };
        e.touch();
        if !is_type(e.value()) {
            return TypedLookup::OtherType;
        }
        // `touch`, spelled out on the other fields while the entry is borrowed.
        self.changes += 1;
        if !self.watched.is_empty() {
            if let Some(w) = self.watched.get_mut(key) {
                w.version += 1;
            }
        }
        self.dirty += 1;
        if self.notify_flags & events::TRACKED != 0 {
            self.events
                .push((events::TRACKED, "", Bytes::copy_from_slice(key)));
        }
        TypedLookup::Hit(e.value_mut())
    }

    /// Write lookup that does not mark the key modified, for commands that, like Redis's, signal
    /// the change themselves ([`Db::signal_modified`]) only once they know they succeeded: PFADD
    /// that stops at a corrupt HLL and PFCOUNT that fails to recompute leave WATCH alone.
    pub fn lookup_mut_unsignalled(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.expire_if_due(key);
        let e = self.get_mut(key)?;
        e.touch();
        // Redis unshares a string before writing into it: OBJECT ENCODING then says `raw`.
        if matches!(e.value(), Value::Str(_)) {
            e.set_enc(enc_code(Some("raw")));
        }
        Some(e.value_mut())
    }

    /// One probe for a command that reads a value and may then write it in place, as Redis's
    /// PFADD and PFCOUNT do (lookup, type and format checks, `dbUnshareStringValue`, maybe a
    /// write): the value, mutable, with the key not marked modified (the caller signals a change
    /// it makes). A string for which `unshare` holds is marked `raw` first, as unsharing makes it
    /// in Redis. `notify_miss` raises the `keymiss` event on a miss (a read lookup's, Redis's
    /// lookupKeyRead; PFADD's write lookup raises none).
    pub fn lookup_unshared(
        &mut self,
        key: &[u8],
        notify_miss: bool,
        unshare: impl FnOnce(&Value) -> bool,
    ) -> Option<&mut Value> {
        self.expire_if_due(key);
        // A read's lookup (PFCOUNT of one key): counted as `lookup_entry` counts.
        if notify_miss {
            if !self.has(key) {
                read_missed(
                    &mut self.keyspace_misses,
                    self.notify_flags,
                    &mut self.events,
                    key,
                );
                return None;
            }
            self.keyspace_hits += 1;
        }
        let e = self.get_mut(key)?;
        e.touch();
        if matches!(e.value(), Value::Str(_)) && unshare(e.value()) {
            e.set_enc(enc_code(Some("raw")));
        }
        Some(e.value_mut())
    }

    /// [`Value::prepare_for_save`] on every value, before a synchronous save.
    pub fn prepare_for_save(&mut self) {
        // Only t-digests change, and only their segments are unshared from a snapshot.
        self.table
            .update_where(|v| matches!(v, Value::TDigest(_)), Value::prepare_for_save);
    }

    pub fn contains(&mut self, key: &[u8]) -> bool {
        self.lookup(key).is_some()
    }

    /// Stores `value` under `key`, dropping any TTL (as SET does).
    pub fn insert(&mut self, key: impl AsRef<[u8]>, value: Value) {
        self.insert_with(key.as_ref(), value, false);
    }

    /// [`Db::insert`] of a value the command gives a TTL next ([`Db::set_expire_of_written`]):
    /// a new key's entry has the deadline slot already (`Entry::with_slot`).
    pub fn insert_expiring(&mut self, key: impl AsRef<[u8]>, value: Value) {
        self.insert_with(key.as_ref(), value, true);
    }

    fn insert_with(&mut self, key: &[u8], value: Value, slot: bool) {
        // One hash for the whole write (issue 15).
        let h = self.hash(key);
        if self.table.expires_len() != 0 {
            // A due key is reclaimed first (and announced as expired), so the new value is a new
            // key.
            self.expire_if_due_h(h, key);
            self.clear_expire_h(h, key);
        }
        // Redis's order: dbAdd raises `new`, then setKey signals the modification.
        if self.put(h, key, value, slot) {
            self.notify(events::NEW, "new", key);
        }
        self.touch(key);
    }

    /// Stores `value` under `key` (hash `h`) with no encoding override (replacing the key drops
    /// it), in one probe of the table; a new key's entry with a deadline slot if `slot`. True if
    /// the key is new.
    fn put(&mut self, h: u64, key: &[u8], value: Value, slot: bool) -> bool {
        self.table.upsert(h, key, |e| match e {
            Some(e) => {
                *e.value_mut() = value;
                e.set_enc(ENC_NONE);
                (None, false)
            }
            None if slot => (Some(Entry::with_slot(key, ENC_NONE, value)), true),
            None => (Some(Entry::new(key, ENC_NONE, value)), true),
        })
    }

    /// Stores `value` under `key`, keeping an existing TTL (SET KEEPTTL, SETRANGE, APPEND...).
    pub fn insert_keep_ttl(&mut self, key: impl AsRef<[u8]>, value: Value) {
        let key = key.as_ref();
        let h = self.hash(key);
        self.expire_if_due_h(h, key);
        if self.put(h, key, value, false) {
            self.notify(events::NEW, "new", key);
        }
        self.touch(key);
    }

    /// Read-modify-write of one key in one probe of the table (INCR and friends): `f` gets the
    /// live value, or `None` when the key is missing (or was due, and is now reclaimed), and
    /// answers the value to store with a result, or an error that leaves the key untouched (not
    /// marked modified, as a refused Redis command does). A stored value replaces the old one
    /// keeping its TTL and dropping its encoding override, or is a new key (raising `new`), as
    /// [`Db::insert_keep_ttl`].
    pub fn replace_with<R, E>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(Option<&Value>) -> Result<(Value, R), E>,
    ) -> Result<R, E> {
        let h = self.hash(key);
        self.expire_if_due_h(h, key);
        let (r, new) = self.table.upsert(h, key, |e| match e {
            Some(e) => match f(Some(e.value())) {
                Ok((v, r)) => {
                    *e.value_mut() = v;
                    e.set_enc(ENC_NONE);
                    (None, Ok((r, false)))
                }
                Err(err) => (None, Err(err)),
            },
            None => match f(None) {
                Ok((v, r)) => (Some(Entry::new(key, ENC_NONE, v)), Ok((r, true))),
                Err(err) => (None, Err(err)),
            },
        })?;
        if new {
            self.notify(events::NEW, "new", key);
        }
        self.touch(key);
        Ok(r)
    }

    /// Removes a key and its TTL. Returns the value if the key existed (expired keys included: the
    /// caller asked for deletion, and the expired value is simply reclaimed).
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let v = self.take(key)?;
        self.touch(key);
        Some(v)
    }

    /// Evicts `key` (`maxmemory`): removes it and its TTL, signals the change (WATCH, tracking)
    /// and raises `evicted`, in Redis's order, and records it for propagation as `DEL`, or
    /// `UNLINK` when `unlink` (`lazyfree-lazy-eviction`). Like Redis's eviction it does not count
    /// in `dirty`. False if the key was not there.
    pub fn evict(&mut self, key: &[u8], unlink: bool) -> bool {
        if self.take(key).is_none() {
            return false;
        }
        self.bump_watch(key);
        self.track(events::TRACKED, key);
        self.notify(events::EVICTED, "evicted", key);
        if self.log_expired {
            let verb: &'static [u8] = if unlink { b"UNLINK" } else { b"DEL" };
            self.expired_log.push((verb, Bytes::copy_from_slice(key)));
        }
        true
    }

    /// Eviction candidates (`maxmemory`), each through `consider` with its access bits and,
    /// with `with_ttl`, its deadline: `n` keys next to one another from a random place
    /// ([`KeyTable::sample_run`]), or with `volatile` `n` keys with a TTL next to one another in
    /// a segment ([`KeyTable::sample_expiring_run`]). With `earliest` (volatile-ttl),
    /// each of `n` draws (which may repeat a key) is instead the key due
    /// first in a random stripe's expiry queue: the queues are ordered, so a draw is the nearest
    /// deadline of 1/256 of the keys, where Redis's sample is a random key. A database with no
    /// (volatile) key gives none. `seed` advances.
    #[allow(clippy::too_many_arguments)]
    pub fn eviction_sample(
        &mut self,
        n: usize,
        volatile: bool,
        earliest: bool,
        with_ttl: bool,
        seed: &mut u64,
        mut consider: impl FnMut(&[u8], u32, Option<u64>),
    ) {
        if !volatile {
            let table = &self.table;
            table.sample_run(super::splitmix64(seed), n, |e| {
                let ttl = if with_ttl { e.deadline() } else { None };
                consider(e.key(), e.access(), ttl);
            });
            return;
        }
        if !earliest {
            // A run of the key table, keeping the keys with a TTL; a table where few keys have
            // one falls back to a run of the segments that hold some, which skips the others.
            let table = &self.table;
            let mut got = 0;
            table.sample_run(super::splitmix64(seed), 2 * n, |e| {
                if got < n {
                    if let Some(when) = e.deadline() {
                        consider(e.key(), e.access(), Some(when).filter(|_| with_ttl));
                        got += 1;
                    }
                }
            });
            if got == 0 {
                table.sample_expiring_run(super::splitmix64(seed), n, |e, when| {
                    consider(e.key(), e.access(), Some(when).filter(|_| with_ttl));
                });
            }
            return;
        }
        // There are only STRIPES queue heads: more draws than that find no new candidate, and
        // `maxmemory-samples` may be up to 2^31 - 1.
        for _ in 0..n.min(STRIPES) {
            let draw = super::splitmix64(seed);
            let Some((when, h)) = self.expire_queue.earliest(draw) else {
                return;
            };
            let Some(e) = self.table.expiring_entry(h, when) else {
                continue;
            };
            consider(e.key(), e.access(), Some(when).filter(|_| with_ttl));
        }
    }

    /// Whether `key` exists and (with `volatile`) has a TTL: an eviction pool's candidate is
    /// still one.
    pub fn eviction_candidate(&self, key: &[u8], volatile: bool) -> bool {
        let h = self.hash(key);
        self.table.find(h, key).is_some()
            && (!volatile || (self.table.expires_len() != 0 && self.table.expiry(h, key).is_some()))
    }

    /// Deletes a key whose deadline passed, recording it for propagation.
    fn remove_expired(&mut self, key: &[u8]) {
        if self.take(key).is_some() {
            // Redis's order: the `expired` event, then the modification (WATCH, tracking).
            self.notify(events::EXPIRED, "expired", key);
            self.touch_expired(key);
            if self.log_expired {
                self.expired_log.push((b"DEL", Bytes::copy_from_slice(key)));
            }
        }
    }

    /// The encoding Redis would report for the string at `key` when it differs from the one its bytes
    /// suggest (see [`Db::set_encoding_override`]).
    pub fn encoding_override(&self, key: &[u8]) -> Option<&'static str> {
        self.get(key).and_then(|e| enc_name(e.enc()))
    }

    /// Records (or with None, drops) an encoding override for an existing key: Redis turns a
    /// string modified in place (APPEND, SETRANGE, PFADD...) into `raw` however short, and
    /// INCRBYFLOAT stores `embstr` even for "3". Replacing the value drops it, and it is not saved:
    /// a reload re-derives encodings, as in Redis.
    pub fn set_encoding_override(&mut self, key: &[u8], encoding: Option<&'static str>) {
        if let Some(e) = self.get_mut(key) {
            e.set_enc(enc_code(encoding));
        }
    }

    /// Removes a live key (DEL semantics: an expired key counts as absent).
    pub fn delete(&mut self, key: &[u8]) -> bool {
        if self.expire_if_due(key) {
            return false;
        }
        self.remove(key).is_some()
    }

    fn clear_expire(&mut self, key: &[u8]) {
        if self.table.expires_len() == 0 {
            return;
        }
        let h = self.hash(key);
        self.clear_expire_h(h, key);
    }

    /// [`Db::clear_expire`] of a key whose hash is `h`.
    fn clear_expire_h(&mut self, h: u64, key: &[u8]) {
        if let Some(when) = self.table.remove_expiry(h, key) {
            self.expire_queue.remove(h, when);
        }
    }

    /// The absolute expiry (unix ms) of a live key.
    pub fn expire_at(&mut self, key: &[u8]) -> Option<u64> {
        self.expire_if_due(key);
        self.table.expiry(self.hash(key), key)
    }

    /// Sets the absolute expiry of an existing key. A time in the past deletes the key (Redis does
    /// the same for EXPIRE with a past time), returning false in that case.
    /// Loading: room for `n` keys in all ([`KeyTable::reserve`]; RDB's RESIZEDB hint).
    pub fn reserve_keys(&mut self, n: usize) {
        self.table.reserve(n);
    }

    /// Loading (an RDB file or an AOF's RDB base): adds a key the database does not hold yet, and
    /// its TTL, with one hash and one probe of the key table. Raises no event, bumps no WATCH
    /// version and counts no change (a load is not a write; the loader resets `dirty`). False,
    /// with nothing changed, if the key is already there (a corrupt file's duplicate).
    pub fn load_new(&mut self, key: &[u8], value: Value, expire_ms: Option<u64>) -> bool {
        let h = self.hash(key);
        self.load_entry(h, Db::new_entry(key, value, expire_ms.is_some()), expire_ms)
            .is_ok()
    }

    /// The entry [`Db::load_new`] would make for `key`, built where the caller likes (a load
    /// builds entries on its decoding thread, and [`Db::load_entry`] inserts them); with a
    /// deadline slot when the key has a TTL (`with_ttl`), which the insert then fills in place.
    pub fn new_entry(key: &[u8], value: Value, with_ttl: bool) -> Entry {
        if with_ttl {
            Entry::with_slot(key, ENC_NONE, value)
        } else {
            Entry::new(key, ENC_NONE, value)
        }
    }

    /// This database's key hash, for [`Db::load_entry`]'s `h` computed on another thread.
    pub fn key_hasher(&self) -> crate::store::keytable::KeyHasher {
        self.table.hasher()
    }

    /// [`Db::load_new`] of an entry made by [`Db::new_entry`], whose key hashes to `h` by
    /// [`Db::key_hasher`]: the entry back, nothing changed, if its key is already there.
    pub fn load_entry(
        &mut self,
        h: u64,
        entry: Entry,
        expire_ms: Option<u64>,
    ) -> Result<(), Entry> {
        debug_assert_eq!(h, self.hash(entry.key()));
        let Some(when) = expire_ms else {
            return self.table.insert_if_absent(h, entry);
        };
        // The TTL in the block before it goes into the table: one allocation, not two.
        let mut entry = entry;
        entry.set_deadline(Some(when));
        self.table.insert_if_absent(h, entry)?;
        self.expire_queue.insert(h, when);
        Ok(())
    }

    pub fn set_expire(&mut self, key: &[u8], when_ms: u64) -> bool {
        if !self.set_expire_of_written(key, when_ms) {
            return false;
        }
        self.touch(key);
        true
    }

    /// [`Db::set_expire`] for a key the command has just written (SET with an expiry, SETEX):
    /// no second modification is counted, as Redis's `setGenericCommand` counts one for the
    /// value and its TTL together (`rdb_changes_since_last_save` moves by 1).
    pub fn set_expire_of_written(&mut self, key: &[u8], when_ms: u64) -> bool {
        if !self.has(key) {
            return false;
        }
        let h = self.hash(key);
        // A TTL it had is replaced in the table; its queue entry goes.
        if let Some(old) = self.table.set_expiry(h, key, when_ms) {
            self.expire_queue.remove(h, old);
        }
        self.expire_queue.insert(h, when_ms);
        true
    }

    /// Removes the TTL of a live key. Returns true if there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        self.expire_if_due(key);
        if self.table.expiry(self.hash(key), key).is_some() {
            self.clear_expire(key);
            self.touch(key);
            true
        } else {
            false
        }
    }

    /// Active expiry: reclaims up to `budget` keys whose deadline has passed. Returns how many.
    pub fn active_expire(&mut self, budget: usize) -> usize {
        // No TTL anywhere (most databases): not a look at the 256 sets, ten times a second.
        if self.table.expires_len() == 0 {
            return 0;
        }
        let mut n = 0;
        while n < budget {
            let Some((when, h)) = self.expire_queue.next_due(self.now_ms) else {
                break;
            };
            // A `Str`: a key of up to 30 bytes is copied without an allocation.
            let Some(key) = self
                .table
                .expiring_entry(h, when)
                .map(|e| Str::copy_from_slice(e.key()))
            else {
                // An entry the table does not have (a bug: every TTL change changes both). Left
                // there, it would stay first in its set, taking every run's budget; dropped, it
                // costs nothing more.
                self.expire_queue.remove(h, when);
                continue;
            };
            self.remove_expired(&key);
            n += 1;
        }
        n
    }

    /// Gives the key table's memory back after deletions, as Redis's cron resizes a dict below
    /// 10% fill (`tryResizeHashTables`): hashbrown never shrinks by itself, so a table that once
    /// held 10M keys would keep its ~150 MB (in `used_memory`, and against `maxmemory`) after the
    /// keys are deleted. Bounded work per call ([`KeyTable::shrink`]), under the cron's lock.
    pub fn shrink_if_sparse(&mut self) {
        self.table.shrink();
    }

    /// Empties the database (FLUSHDB). Watched keys that existed count as modified.
    pub fn clear(&mut self) {
        let existed: Vec<Bytes> = self
            .watched
            .keys()
            .filter(|k| self.has(k))
            .cloned()
            .collect();
        self.dirty += self.table.len() as u64;
        self.changes += self.table.len() as u64;
        // Given back, not cleared in place (see `shrink_if_sparse`).
        self.table.clear();
        self.expire_queue.clear();
        for k in existed {
            if let Some(w) = self.watched.get_mut(&k) {
                w.version += 1;
            }
        }
    }

    /// Live keys (expired ones skipped), in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.table
            .iter()
            .map(Entry::key)
            .filter(|k| !self.is_due(k))
    }

    /// One SCAN step: the live keys at or after `cursor` in scan order, `count` of them (more
    /// when keys share the last one's position), and the next cursor (0 when done). A key
    /// present for the whole scan is returned exactly once, whatever is added or removed
    /// meanwhile; each step costs O(keys of a segment), not O(keys)
    /// ([`KeyTable::scan`](super::keytable::KeyTable::scan)).
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Bytes>) {
        self.table.scan(cursor, count, |h, k| !self.is_due_h(h, k))
    }

    /// A uniformly chosen live key (RANDOMKEY): a few draws into one segment each
    /// ([`KeyTable::random_entry`](super::keytable::KeyTable::random_entry)).
    pub fn random_key(&mut self, seed: u64) -> Option<Bytes> {
        for attempt in 0..8u64 {
            let draw = seed.wrapping_add(attempt.wrapping_mul(0x2545_f491_4f6c_dd1d));
            let k = Bytes::copy_from_slice(self.table.random_entry(draw)?.key());
            if !self.expire_if_due(&k) {
                return Some(k);
            }
        }
        self.keys().next().map(Bytes::copy_from_slice)
    }

    // --- WATCH ---------------------------------------------------------------------------------

    /// Starts watching `key`; returns its current version.
    pub fn watch(&mut self, key: &Bytes) -> u64 {
        let w = self.watched.entry(own_key(key.clone())).or_default();
        w.refs += 1;
        w.version
    }

    pub fn unwatch(&mut self, key: &[u8]) {
        if let Some(w) = self.watched.get_mut(key) {
            w.refs = w.refs.saturating_sub(1);
            if w.refs == 0 {
                self.watched.remove(key);
            }
        }
    }

    pub fn watch_version(&self, key: &[u8]) -> u64 {
        self.watched.get(key).map(|w| w.version).unwrap_or(0)
    }

    /// True if the key has a deadline that has passed (whether or not it was reclaimed yet).
    pub fn is_logically_expired(&self, key: &[u8]) -> bool {
        self.is_due(key)
    }

    /// The content at this instant for a writer on another thread: O(segments) `Arc` clones,
    /// nothing per key; a later write copies the one segment it touches (`store::keytable`).
    pub fn snapshot(&self) -> DbSnapshot {
        DbSnapshot {
            table: self.table.snapshot(),
            now_ms: self.now_ms,
        }
    }

    /// Live entries with their expiry, in no particular order (snapshot writers walk this under
    /// the lock instead of cloning).
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &Value, Option<u64>)> {
        self.saved_entries().map(|(k, v, ttl, _)| (k, v, ttl))
    }

    /// [`Db::entries`] with each key's access bits (`store::access`): what SAVE writes.
    pub fn saved_entries(&self) -> impl Iterator<Item = (&[u8], &Value, Option<u64>, u32)> {
        let now = self.now_ms;
        self.table
            .iter()
            .map(|e| (e.key(), e.value(), e.deadline(), e.access()))
            .filter(move |(_, _, ttl, _)| ttl.is_none_or(|t| t > now))
    }

    /// Every entry, due ones included (INFO walks).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Value)> {
        self.table.iter().map(|e| (e.key(), e.value()))
    }

    /// Mean remaining TTL in ms of the keys with a TTL (INFO keyspace `avg_ttl`).
    pub fn avg_ttl(&self) -> u64 {
        if self.table.expires_len() == 0 {
            return 0;
        }
        let sum: u128 = self
            .table
            .expiries()
            .map(|w| w.saturating_sub(self.now_ms) as u128)
            .sum();
        (sum / self.table.expires_len() as u128) as u64
    }
}

/// All databases.
#[derive(Debug)]
pub struct Store {
    pub dbs: Vec<Db>,
    /// The value locks of the shared path, for every database (a key's stripe depends on its
    /// hash alone; two databases sharing one only makes a rare wait).
    pub stripes: Stripes,
    /// `notify-keyspace-events` in force (also copied into each database).
    pub notify_flags: u32,
    /// Whether writes under the shared keyspace lock may add keys (`SharedDb::write_or_vacant`);
    /// on in the server (`server::serve_main`), whatever its runtime. Off, a new key defers to the
    /// exclusive path, and its client's next batches go there directly (`shared_path`'s
    /// backoff): on one thread that cost a pipelined SET of fresh keys ~230 instructions a
    /// request (callgrind, 100k keys, 14 % new: 2,265 against 2,035 with it on).
    pub shared_inserts: bool,
}

impl Store {
    /// SWAPDB: databases `a` and `b` exchange their keys (tables, TTLs, expiry queues), while
    /// everything tied to the index stays: WATCHes, counters, pending events, as Redis's
    /// `dbSwapDatabases` leaves its clients in the database they selected. A watched key that
    /// exists in either database afterwards makes its watchers' EXEC fail
    /// (`touchAllWatchedKeysInDb`). Returns false for an index out of range.
    pub fn swap_dbs(&mut self, a: usize, b: usize) -> bool {
        if a >= self.dbs.len() || b >= self.dbs.len() {
            return false;
        }
        if a == b {
            return true;
        }
        let (low, high) = (a.min(b), a.max(b));
        let (left, right) = self.dbs.split_at_mut(high);
        let (x, y) = (&mut left[low], &mut right[0]);
        std::mem::swap(&mut x.table, &mut y.table);
        std::mem::swap(&mut x.expire_queue, &mut y.expire_queue);
        let in_either = |x: &Db, y: &Db, watcher: &Db| -> Vec<Bytes> {
            watcher
                .watched
                .keys()
                .filter(|k| x.has(k) || y.has(k))
                .cloned()
                .collect()
        };
        let (touched_x, touched_y) = (in_either(x, y, x), in_either(x, y, y));
        for k in touched_x {
            x.bump_watch(&k);
        }
        for k in touched_y {
            y.bump_watch(&k);
        }
        // One change, as Redis counts one (`server.dirty++`).
        x.changes += 1;
        x.dirty += 1;
        true
    }

    pub fn new(databases: usize) -> Store {
        Store {
            dbs: (0..databases.max(1)).map(|_| Db::new()).collect(),
            stripes: Stripes::default(),
            notify_flags: 0,
            shared_inserts: false,
        }
    }

    /// The database `index` with its clock set to `now_ms`.
    pub fn db(&mut self, index: usize, now_ms: u64) -> &mut Db {
        let db = &mut self.dbs[index];
        db.now_ms = now_ms;
        db.fold_shared_dirty();
        db
    }

    /// Applies `notify-keyspace-events` to every database (CLIENT TRACKING's bit is kept).
    pub fn set_notify_flags(&mut self, flags: u32) {
        let flags = (flags & !events::TRACKED) | (self.notify_flags & events::TRACKED);
        self.notify_flags = flags;
        for d in &mut self.dbs {
            d.notify_flags = flags;
        }
    }

    /// Turns the recording of modified keys for CLIENT TRACKING on or off.
    pub fn set_tracking(&mut self, on: bool) {
        let flags = (self.notify_flags & !events::TRACKED) | if on { events::TRACKED } else { 0 };
        self.notify_flags = flags;
        for d in &mut self.dbs {
            d.notify_flags = flags;
        }
    }

    pub fn dirty(&self) -> u64 {
        self.dbs
            .iter()
            .map(|d| d.dirty + d.shared_dirty.0.load(Ordering::Relaxed))
            .sum()
    }

    /// The sum of every database's `changes`: a command wrote iff this moved across it.
    pub fn changes(&self) -> u64 {
        self.dbs
            .iter()
            .map(|d| d.changes + d.shared_dirty.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Turns the recording of expired keys on or off in every database (off drops the log).
    pub fn set_log_expired(&mut self, on: bool) {
        for d in &mut self.dbs {
            d.log_expired = on;
            if !on {
                d.expired_log.clear();
            }
        }
    }

    pub fn reset_dirty(&mut self, by: u64) {
        // Changes made while a background save ran stay counted.
        let mut left = by;
        for d in &mut self.dbs {
            d.fold_shared_dirty();
            let take = d.dirty.min(left);
            d.dirty -= take;
            left -= take;
        }
    }

    /// A snapshot of every non-empty database ([`Db::snapshot`]): O(segments).
    pub fn snapshot(&self) -> Vec<(usize, DbSnapshot)> {
        self.dbs
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.is_empty())
            .map(|(i, d)| (i, d.snapshot()))
            .collect()
    }

    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(|d| d.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::string::Str;

    fn db_at(now: u64) -> Db {
        let mut db = Db::new();
        db.now_ms = now;
        db
    }

    /// Debug builds check the shared path's rule at the table (`keytable::held`): a key read
    /// under the shared keyspace lock passes with the key's stripe held and panics without it
    /// (or with another stripe); outside the shared lock nothing is checked.
    #[cfg(debug_assertions)]
    #[test]
    fn a_read_under_the_shared_lock_is_checked_against_the_stripes_held() {
        let mut db = db_at(0);
        db.insert(b"k", Value::Str(Str::from_vec(b"v".to_vec())));
        let stripes = Stripes::default();
        let mine = db.stripe(b"k");
        let other = (mine + 1) % STRIPES;
        assert!(db.peek_value(b"k").is_some(), "no shared lock: unchecked");
        let shared = held::SharedLockMark::new();
        {
            let _held = stripes.read(mine);
            assert!(db.peek_value(b"k").is_some());
        }
        let read_without = |held_stripe: Option<usize>| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _held = held_stripe.map(|i| stripes.read(i));
                db.peek_value(b"k").is_some()
            }))
        };
        assert!(read_without(None).is_err(), "no stripe held");
        assert!(read_without(Some(other)).is_err(), "another stripe held");
        assert_eq!(read_without(Some(mine)).ok(), Some(true));
        drop(shared);
        assert!(read_without(None).is_ok(), "the shared lock let go");
    }

    /// A load sized by its RESIZEDB hint neither splits nor grows the key table, keeps TTLs, and
    /// refuses a duplicate without changing the first value.
    #[test]
    fn a_load_reserved_by_its_hint_adds_keys_without_splitting() {
        let mut db = db_at(0);
        db.reserve_keys(5_000);
        let segments = db.table.segments();
        assert!(segments * super::super::keytable::SEG_KEYS >= 5_000);
        for i in 0..5_000u32 {
            let key = format!("k{i}");
            let expire = (i % 3 == 0).then_some(1_000_000 + u64::from(i));
            assert!(db.load_new(
                key.as_bytes(),
                Value::Str(Str::from_vec(b"v".to_vec())),
                expire
            ));
        }
        assert_eq!(db.table.segments(), segments, "the load split segments");
        assert_eq!(db.len(), 5_000);
        assert_eq!(db.expires_count(), 1_667);
        assert_eq!(db.expire_at(b"k3"), Some(1_000_003));
        assert_eq!(db.expire_at(b"k4"), None);
        assert!(!db.load_new(b"k7", Value::Str(Str::from_vec(b"other".to_vec())), None));
        assert!(matches!(db.peek(b"k7"), Some(Value::Str(s)) if s.as_bytes() == b"v"));
        assert_eq!(db.len(), 5_000);
    }

    /// Active expiry over the per-stripe queues: runs of a bounded budget reclaim every due key,
    /// across all stripes, and none that is not due; the queues and the table agree after.
    #[test]
    fn active_expiry_reclaims_every_due_key_of_every_stripe_and_no_other() {
        let mut db = db_at(1_000);
        for i in 0..10_000u64 {
            let key = format!("k{i}");
            db.insert(key.as_bytes(), Value::str(b"v"));
            // Even keys due at 1500, odd ones at 10^9.
            let when = if i % 2 == 0 { 1_500 } else { 1_000_000_000 };
            assert!(db.set_expire(key.as_bytes(), when));
        }
        assert_eq!(db.active_expire(1000), 0, "nothing due yet");
        db.now_ms = 2_000;
        let mut runs = 0;
        while db.active_expire(1000) > 0 {
            runs += 1;
        }
        assert_eq!(runs, 5);
        assert_eq!(db.len(), 5_000);
        assert_eq!(db.expires_count(), 5_000);
        assert_eq!(db.queue_len(), 5_000);
        assert!(db
            .keys()
            .all(|k| k[1..].iter().last().is_some_and(|d| d % 2 == 1)));
    }

    /// A queue entry the table does not have (which no path makes) neither deletes its key nor
    /// stays first in its set.
    #[test]
    fn active_expiry_drops_a_queue_entry_without_its_ttl() {
        let mut db = db_at(1_000);
        db.insert(&b"k"[..], Value::str(b"v"));
        assert!(db.set_expire(b"k", 1_000_000_000));
        let h = db.hash(b"k");
        db.expire_queue.insert(h, 1_500);
        db.now_ms = 2_000;
        assert_eq!(db.active_expire(1000), 0);
        assert_eq!(
            db.expire_at(b"k"),
            Some(1_000_000_000),
            "the key is still there"
        );
        assert_eq!(db.queue_len(), 1);
    }

    /// The one-probe write lookup of BF.ADD/BF.MADD: a hit counts as a change and bumps WATCH
    /// like `lookup_mut`; another type is left alone (a WRONGTYPE reply must not abort EXEC).
    #[test]
    fn a_typed_write_lookup_touches_only_a_value_of_its_type() {
        let mut db = db_at(1000);
        db.insert(Bytes::from("s"), Value::str(b"v"));
        db.insert(Bytes::from("t"), Value::str(b"w"));
        let (ws, wt) = (db.watch(&Bytes::from("s")), db.watch(&Bytes::from("t")));
        let changes = db.changes;
        let is_str = |v: &Value| matches!(v, Value::Str(_));
        assert!(matches!(
            db.lookup_mut_typed(b"s", |v| !is_str(v)),
            TypedLookup::OtherType
        ));
        assert_eq!((db.watch_version(b"s"), db.changes), (ws, changes));
        assert!(matches!(
            db.lookup_mut_typed(b"t", is_str),
            TypedLookup::Hit(Value::Str(_))
        ));
        assert!(db.watch_version(b"t") > wt);
        assert_eq!(db.changes, changes + 1);
        assert!(matches!(
            db.lookup_mut_typed(b"nope", is_str),
            TypedLookup::Missing
        ));
        assert_eq!(db.changes, changes + 1);
    }

    #[test]
    fn lazy_expiry_hides_keys() {
        let mut db = db_at(1000);
        db.insert(Bytes::from("k"), Value::str(b"v"));
        assert!(db.set_expire(b"k", 1500));
        assert!(db.lookup(b"k").is_some());
        db.now_ms = 1500;
        assert!(db.lookup(b"k").is_none());
        assert_eq!(db.len(), 0);
    }

    #[test]
    fn active_expiry_pops_due_keys_only() {
        let mut db = db_at(0);
        for i in 0..10u64 {
            let k = Bytes::from(format!("k{i}"));
            db.insert(k.clone(), Value::str(b""));
            db.set_expire(&k, 100 + i);
        }
        db.insert(Bytes::from("live"), Value::str(b""));
        db.now_ms = 104;
        assert_eq!(db.active_expire(100), 5);
        assert_eq!(db.len(), 6);
    }

    #[test]
    fn scan_returns_every_key_once() {
        let mut db = db_at(0);
        for i in 0..1000 {
            db.insert(Bytes::from(format!("key:{i}")), Value::str(b""));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            let (next, keys) = db.scan(cursor, 10);
            for k in keys {
                assert!(seen.insert(k));
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 1000);
    }

    #[test]
    fn random_key_is_uniform_over_the_keys() {
        // 3,000 keys over segments of unequal sizes (linear hashing: split and unsplit ones);
        // 300,000 draws, ~100 a key. A key of a bigger segment must not come up more often.
        let mut db = db_at(0);
        let n = 3000;
        for i in 0..n {
            db.insert(Bytes::from(format!("key:{i}")), Value::str(b""));
        }
        let mut hits: HashMap<Bytes, u32> = HashMap::new();
        let draws = 300_000u64;
        for d in 0..draws {
            let k = db
                .random_key(d.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .expect("a key");
            *hits.entry(k).or_default() += 1;
        }
        assert_eq!(hits.len(), n, "every key drawn");
        // Chi-square with n - 1 = 2,999 degrees of freedom: mean 2,999, sd ~77; 3,400 is
        // over five sd. This draw measured 2,949; choosing by segment alone (a uniform
        // segment, then a uniform key in it) 45,643.
        let expected = draws as f64 / n as f64;
        let chi2: f64 = hits
            .values()
            .map(|&h| (h as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 3400.0, "chi-square {chi2:.0}");
    }

    #[test]
    fn a_scan_cursor_keeps_its_meaning_when_the_table_is_replaced() {
        // DEBUG RELOAD and a replica's full sync load the keys into a new table mid-walk; as in
        // Redis (one hash seed per process), the walk goes on from its cursor in the new one.
        let fill = |db: &mut Db, keys: std::ops::Range<usize>| {
            for i in keys {
                db.insert(Bytes::from(format!("key:{i}")), Value::str(b""));
            }
        };
        let mut before = db_at(0);
        fill(&mut before, 0..5000);
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        for _ in 0..100 {
            let (next, keys) = before.scan(cursor, 10);
            seen.extend(keys);
            cursor = next;
        }
        // The same keys, loaded in another order into a new table.
        let mut after = db_at(0);
        fill(&mut after, 2500..5000);
        fill(&mut after, 0..2500);
        loop {
            let (next, keys) = after.scan(cursor, 10);
            for k in keys {
                assert!(seen.insert(k), "a key returned twice");
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 5000, "keys missed");
    }

    #[test]
    fn a_scan_step_looks_at_a_segment_not_the_table() {
        let mut db = db_at(0);
        for i in 0..100_000 {
            db.insert(Bytes::from(format!("key:{i}")), Value::str(b""));
        }
        // Every key a step considers passes through `keep`: one segment's worth (at most about
        // 3 × SEG_KEYS), not the table's 100,000, which SCAN once walked on every step.
        let looked = std::cell::Cell::new(0usize);
        let mut cursor = 0;
        let mut steps = 0;
        let mut seen = 0;
        loop {
            looked.set(0);
            let (next, keys) = db.table.scan(cursor, 10, |_, _| {
                looked.set(looked.get() + 1);
                true
            });
            assert!(
                looked.get() <= 3 * crate::store::keytable::SEG_KEYS,
                "step {steps} looked at {} keys",
                looked.get()
            );
            seen += keys.len();
            steps += 1;
            if next == 0 || steps == 300 {
                break;
            }
            cursor = next;
        }
        assert!(seen >= 10 * 300, "{seen} keys in {steps} steps");
    }

    #[test]
    fn scan_returns_keys_whose_hashes_collide_across_a_page_boundary() {
        let mut db = db_at(0);
        for i in 0..200 {
            db.insert(Bytes::from(format!("key:{i}")), Value::str(b""));
        }
        // Positions with many collisions (a real 64-bit hash collision is rare, not impossible),
        // and some at u64::MAX, where the next cursor wraps to 0. The top 4 bits stay: 200 keys
        // fill 2 segments, so equal positions stay within a segment, as real ones do.
        let few = |h: u64| {
            let p = crate::store::keytable::scan_position(h);
            if h % 4 == 3 {
                p | (u64::MAX >> 4)
            } else {
                p & !(u64::MAX >> 4) | (h % 5)
            }
        };
        for count in [1, 2, 3, 7, 10, 1000] {
            let mut seen = std::collections::HashSet::new();
            let mut cursor = 0;
            loop {
                let (next, keys) = db.table.scan_by(cursor, count, |_, _| true, few);
                for k in keys {
                    assert!(seen.insert(k), "count {count}: a key returned twice");
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            assert_eq!(seen.len(), 200, "count {count}");
        }
    }

    #[test]
    fn encoding_override_lives_in_the_key_and_is_dropped_on_replace() {
        let mut db = db_at(0);
        let k = Bytes::from("h");
        db.insert(k.clone(), Value::str(b"abc"));
        assert_eq!(db.encoding_override(b"h"), None);
        db.set_encoding_override(b"h", Some("raw"));
        assert_eq!(db.encoding_override(b"h"), Some("raw"));
        // Identity ignores the override byte: the key is still found and still one key.
        assert_eq!(
            db.lookup(b"h").and_then(Value::as_str).map(|s| &s[..]),
            Some(&b"abc"[..])
        );
        assert_eq!(db.len(), 1);
        db.set_encoding_override(b"h", Some("embstr"));
        assert_eq!(db.encoding_override(b"h"), Some("embstr"));
        db.insert(k.clone(), Value::str(b"x"));
        assert_eq!(db.encoding_override(b"h"), None);
        db.lookup_mut_unsignalled(b"h");
        assert_eq!(db.encoding_override(b"h"), Some("raw"));
        assert!(db.delete(b"h"));
        assert_eq!(db.encoding_override(b"h"), None);
    }

    #[test]
    fn main_map_slot_is_small() {
        // The slot is what a million keys pay twice over (see the module docs).
        assert_eq!(std::mem::size_of::<Entry>(), 8);
        assert_eq!(std::mem::size_of::<Value>(), 32);
    }

    #[test]
    fn many_keys_insert_find_replace_remove() {
        let mut db = db_at(0);
        for i in 0..5000u32 {
            db.insert(Bytes::from(format!("k{i}")), Value::str(&i.to_be_bytes()));
        }
        assert_eq!(db.len(), 5000);
        for i in (0..5000u32).step_by(3) {
            db.insert(Bytes::from(format!("k{i}")), Value::str(&[7; 100]));
        }
        for i in (0..5000u32).step_by(2) {
            assert!(db.delete(format!("k{i}").as_bytes()));
        }
        assert_eq!(db.len(), 2500);
        for i in 0..5000u32 {
            let got = db
                .lookup(format!("k{i}").as_bytes())
                .map(|v| v.as_str().unwrap().to_vec());
            let want = match (i % 2, i % 3) {
                (0, _) => None,
                (_, 0) => Some(vec![7; 100]),
                _ => Some(i.to_be_bytes().to_vec()),
            };
            assert_eq!(got, want, "k{i}");
        }
        assert_eq!(db.keys().count(), 2500);
    }

    #[test]
    fn a_flush_and_mass_deletion_give_the_table_back() {
        // Redis frees the dict on FLUSHDB/FLUSHALL and shrinks it below 10% fill
        // (tryResizeHashTables); a table kept at its peak size shows in used_memory and maxmemory.
        let mut db = db_at(0);
        for i in 0..100_000u32 {
            let k = Bytes::from(format!("k{i}"));
            db.insert(k.clone(), Value::str(b"v"));
            db.set_expire(&k, 1_000_000);
        }
        db.clear();
        assert_eq!(db.table.capacity(), 0);
        for i in 0..100_000u32 {
            let k = Bytes::from(format!("k{i}"));
            db.insert(k.clone(), Value::str(b"v"));
            db.set_expire(&k, 1_000_000);
        }
        let peak = db.table.capacity();
        for i in 100..100_000u32 {
            assert!(db.delete(format!("k{i}").as_bytes()));
        }
        db.shrink_if_sparse();
        let map = db.table.capacity();
        assert!(map < peak / 50, "{map}");
        assert_eq!(db.table.expires_len(), 100);
        assert_eq!(db.queue_len(), 100);
        for i in 0..100u32 {
            assert!(db.lookup(format!("k{i}").as_bytes()).is_some());
            assert_eq!(db.expire_at(format!("k{i}").as_bytes()), Some(1_000_000));
        }
        // A table that is not sparse is left alone.
        let cap = db.table.capacity();
        db.shrink_if_sparse();
        assert_eq!(db.table.capacity(), cap);
    }

    #[test]
    fn a_table_a_snapshot_held_is_shrunk_once_it_is_let_go() {
        // The shrink walk runs only after removals; a segment a snapshot held when it ran is
        // looked at again on a later call, with no removal in between.
        let mut db = db_at(0);
        for i in 0..20_000u32 {
            let k = Bytes::from(format!("k{i}"));
            db.insert(k.clone(), Value::str(b"v"));
            db.set_expire(&k, 1_000_000);
        }
        let peak = db.table.capacity();
        let snap = db.snapshot();
        for i in 100..20_000u32 {
            assert!(db.delete(format!("k{i}").as_bytes()));
        }
        for _ in 0..100 {
            db.shrink_if_sparse();
        }
        drop(snap);
        db.shrink_if_sparse();
        let map = db.table.capacity();
        assert!(map < peak / 20, "{map} of {peak}");
        assert_eq!(db.len(), 100);
        assert_eq!(db.expire_at(b"k7"), Some(1_000_000));
    }

    #[test]
    fn an_expiry_queue_counts_keys_of_one_hash_and_deadline() {
        let mut q = ExpiryQueue::default();
        queue_add(&mut q, 10, 7);
        queue_add(&mut q, 10, 7);
        queue_add(&mut q, 5, 9);
        assert_eq!((q.len(), q.first()), (3, Some((5, 9))));
        queue_remove(&mut q, 5, 9);
        queue_remove(&mut q, 10, 7);
        assert_eq!((q.len(), q.first()), (1, Some((10, 7))));
        queue_remove(&mut q, 10, 7);
        assert_eq!((q.len(), q.first()), (0, None));
        // Removing what is not there changes nothing.
        queue_remove(&mut q, 10, 7);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_snapshot_keeps_the_ttls_its_keys_had() {
        // A TTL lives in the key's block (`store::entry`), which a snapshot shares: setting,
        // clearing or giving a first TTL after the snapshot copies the block, and the snapshot
        // still sees the old one.
        let mut db = db_at(0);
        for i in 0..1_000u32 {
            let k = Bytes::from(format!("k{i}"));
            db.insert(k.clone(), Value::str(b"v"));
            if i.is_multiple_of(2) {
                db.set_expire(&k, 1_000_000 + u64::from(i));
            }
        }
        let snap = db.snapshot();
        for i in 0..1_000u32 {
            let k = format!("k{i}");
            match i % 4 {
                0 => assert!(db.persist(k.as_bytes())),
                1 => assert!(db.set_expire(k.as_bytes(), 5_000_000)),
                2 => assert!(db.set_expire(k.as_bytes(), 6_000_000)),
                _ => {}
            }
        }
        let mut seen = 0;
        for (k, _, ttl, _) in snap.table.entries() {
            let i: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            let want = i.is_multiple_of(2).then_some(1_000_000 + i);
            assert_eq!(ttl, want, "k{i}");
            seen += 1;
        }
        assert_eq!(seen, 1_000);
        assert_eq!(snap.table.counts(), (1_000, 500));
        for i in 0..1_000u64 {
            let want = match i % 4 {
                0 | 3 => None,
                1 => Some(5_000_000),
                _ => Some(6_000_000),
            };
            assert_eq!(db.expire_at(format!("k{i}").as_bytes()), want, "k{i}");
        }
        assert_eq!(db.table.expires_len(), 500);
        assert_eq!(db.queue_len(), 500);
    }

    mod model {
        //! The key table against a `HashMap` model: inserts, replacements and removals of keys of
        //! every interesting length (0, 15/16/17 around the 16-byte key, the 1/2-byte varint
        //! boundary at 127/128), values inline, heap and shared, with SCANs running across growth
        //! and shrinking.
        use super::*;
        use proptest::prelude::*;
        use std::collections::{HashMap, HashSet};

        #[derive(Debug, Clone)]
        enum Op {
            Insert(Vec<u8>, usize),
            Remove(Vec<u8>),
            /// Insert `n` filler keys (the table grows), or remove them all (it shrinks).
            Grow(u16),
            Shrink,
            ScanStep(usize),
        }

        fn key() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::sample::select(vec![0usize, 1, 15, 16, 17, 127, 128, 300]),
                0u8..4,
            )
                .prop_map(|(len, b)| vec![b'a' + b; len])
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (key(), prop::sample::select(vec![0usize, 5, 30, 31, 1023, 1024, 20_000]))
                    .prop_map(|(k, n)| Op::Insert(k, n)),
                2 => key().prop_map(Op::Remove),
                1 => (1u16..3000).prop_map(Op::Grow),
                1 => Just(Op::Shrink),
                4 => (1usize..20).prop_map(Op::ScanStep),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn table_matches_a_hashmap_and_scan_keeps_its_guarantee(ops in prop::collection::vec(op(), 1..120)) {
                let mut db = db_at(0);
                let mut want: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
                let mut filler = 0u32;
                // The running scan: its cursor, what it returned, the keys present all along.
                let mut cursor = 0u64;
                let mut returned: HashSet<Vec<u8>> = HashSet::new();
                let mut stable: HashSet<Vec<u8>> = HashSet::new();
                let mut scanning = false;
                for op in ops {
                    match op {
                        Op::Insert(k, n) => {
                            let v = vec![k.len() as u8; n];
                            db.insert(Bytes::from(k.clone()), Value::str(&v));
                            want.insert(k, v);
                        }
                        Op::Remove(k) => {
                            prop_assert_eq!(db.delete(&k), want.remove(&k).is_some());
                            stable.remove(&k);
                        }
                        Op::Grow(n) => {
                            for _ in 0..n {
                                let k = format!("filler:{filler}").into_bytes();
                                filler += 1;
                                db.insert(Bytes::from(k.clone()), Value::str(b"f"));
                                want.insert(k, b"f".to_vec());
                            }
                        }
                        Op::Shrink => {
                            let fillers: Vec<Vec<u8>> =
                                want.keys().filter(|k| k.starts_with(b"filler:")).cloned().collect();
                            for k in fillers {
                                prop_assert!(db.delete(&k));
                                want.remove(&k);
                                stable.remove(&k);
                            }
                            db.shrink_if_sparse();
                        }
                        Op::ScanStep(count) => {
                            if !scanning {
                                scanning = true;
                                cursor = 0;
                                returned.clear();
                                stable = want.keys().cloned().collect();
                            }
                            let (next, keys) = db.scan(cursor, count);
                            for k in keys {
                                prop_assert!(want.contains_key(&k[..]), "a key that is not there");
                                prop_assert!(returned.insert(k.to_vec()), "a key returned twice");
                            }
                            if next == 0 {
                                for k in &stable {
                                    prop_assert!(returned.contains(k), "missed {:?}", k);
                                }
                                scanning = false;
                            }
                            cursor = next;
                        }
                    }
                    prop_assert_eq!(db.len(), want.len());
                }
                for (k, v) in &want {
                    let got = db.lookup(k).and_then(Value::as_str).map(|s| s.to_vec());
                    prop_assert_eq!(got.as_ref(), Some(v));
                }
                prop_assert_eq!(db.keys().count(), want.len());
            }
        }
    }

    mod snapshot_model {
        //! Snapshots against a model (issue 11): random writes of every kind — overwrites,
        //! in-place changes, Bloom adds (copy-on-write pages), deletions, TTLs set and removed,
        //! lazy and active expiry, growth and shrinking (segment splits and merges), FLUSHDB,
        //! MOVE between databases, swapping databases — interleaved with snapshots taken and
        //! dropped at random points. Every snapshot must hold exactly the keyspace of its instant
        //! (keys already due then left out), however much is written after it, and the live
        //! keyspace must stay the model's.
        use super::*;
        use crate::store::bloom::ScalingBloom;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        type Model = BTreeMap<Vec<u8>, (Value, Option<u64>)>;
        /// A snapshot taken, the model's live keyspace at that instant, and what a save's
        /// writer has walked of it so far (`DbSnapshot::drain_some`), per database.
        type Taken = (Vec<(usize, DbSnapshot)>, Vec<Model>, Vec<Model>);

        #[derive(Debug, Clone)]
        enum Op {
            Set(u8, usize, u8),
            SetKeepTtl(u8, usize, u8),
            Append(u8),
            BfAdd(u8, u16),
            Del(u8),
            Expire(u8, u64),
            Persist(u8),
            Lookup(u8),
            Tick(u64, usize),
            Grow(u16),
            Shrink,
            Flush,
            Move(u8),
            Swap,
            Snap,
            Check(usize),
            Drop(usize),
            Drain(usize, usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            let len = prop::sample::select(vec![0usize, 7, 30, 31, 200, 1024, 3000]);
            prop_oneof![
                6 => (any::<u8>(), len.clone(), any::<u8>()).prop_map(|(k, n, b)| Op::Set(k, n, b)),
                2 => (any::<u8>(), len, any::<u8>()).prop_map(|(k, n, b)| Op::SetKeepTtl(k, n, b)),
                2 => any::<u8>().prop_map(Op::Append),
                3 => (any::<u8>(), any::<u16>()).prop_map(|(k, i)| Op::BfAdd(k, i)),
                3 => any::<u8>().prop_map(Op::Del),
                3 => (any::<u8>(), 1u64..50).prop_map(|(k, d)| Op::Expire(k, d)),
                1 => any::<u8>().prop_map(Op::Persist),
                2 => any::<u8>().prop_map(Op::Lookup),
                2 => (0u64..20, 0usize..5).prop_map(|(d, n)| Op::Tick(d, n)),
                1 => (1u16..1500).prop_map(Op::Grow),
                1 => Just(Op::Shrink),
                1 => Just(Op::Flush),
                1 => any::<u8>().prop_map(Op::Move),
                1 => Just(Op::Swap),
                3 => Just(Op::Snap),
                2 => any::<usize>().prop_map(Op::Check),
                2 => any::<usize>().prop_map(Op::Drop),
                3 => (any::<usize>(), 1usize..4).prop_map(|(i, n)| Op::Drain(i, n)),
            ]
        }

        /// Keys 0..200 of a few lengths; the db they go to is the key's low bit.
        fn key(k: u8) -> Vec<u8> {
            let k = k % 200;
            format!("{}{k}", "k".repeat(k as usize % 20)).into_bytes()
        }

        fn live(model: &Model, now: u64) -> Model {
            model
                .iter()
                .filter(|(_, (_, t))| t.is_none_or(|t| t > now))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }

        /// The model entry of a key unless due (a due one is dropped, as lazy expiry does).
        fn present<'a>(
            m: &'a mut Model,
            k: &[u8],
            now: u64,
        ) -> Option<&'a mut (Value, Option<u64>)> {
            if m.get(k).is_some_and(|(_, t)| t.is_some_and(|t| t <= now)) {
                m.remove(k);
            }
            m.get_mut(k)
        }

        fn of_snapshot(s: &DbSnapshot) -> Model {
            s.entries()
                .map(|(k, v, t)| (k.to_vec(), (v.clone(), t)))
                .collect()
        }

        /// The snapshot's segments not yet drained, plus those drained (`drained`, per db), hold
        /// exactly `want`.
        fn check(
            snap: &[(usize, DbSnapshot)],
            drained: &[Model],
            want: &[Model],
        ) -> Result<(), TestCaseError> {
            for (i, w) in want.iter().enumerate() {
                let mut got = snap
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, s)| {
                        let (n, e) = s.counts();
                        let m = of_snapshot(s);
                        assert_eq!(n as usize, m.len());
                        assert_eq!(e as usize, m.values().filter(|v| v.1.is_some()).count());
                        m
                    })
                    .unwrap_or_default();
                for (k, v) in drained.get(i).into_iter().flatten() {
                    prop_assert!(got.insert(k.clone(), v.clone()).is_none(), "walked twice");
                }
                prop_assert_eq!(&got, w, "db {}", i);
            }
            Ok(())
        }

        /// Walks up to `n` segments of each database of `snap` into `drained`, as a save's
        /// writer does, letting them go.
        fn drain(snap: &mut [(usize, DbSnapshot)], drained: &mut [Model], n: usize) {
            for (i, s) in snap.iter_mut() {
                let _ = s.drain_some(n, |k, v, t, _| {
                    assert!(drained[*i].insert(k.to_vec(), (v.clone(), t)).is_none());
                    Ok::<(), ()>(())
                });
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(96))]
            #[test]
            fn a_snapshot_is_the_keyspace_of_its_instant(ops in prop::collection::vec(op(), 1..250)) {
                let mut store = Store::new(2);
                let mut model: Vec<Model> = vec![Model::new(), Model::new()];
                let mut now = 1000u64;
                let mut snaps: Vec<Taken> = Vec::new();
                let mut filler = 0u32;
                for op in ops {
                    for d in store.dbs.iter_mut() {
                        d.now_ms = now;
                    }
                    match op {
                        Op::Set(k, n, b) | Op::SetKeepTtl(k, n, b) => {
                            let keep = matches!(op, Op::SetKeepTtl(..));
                            let (key, db) = (key(k), (k & 1) as usize);
                            let v = Value::str(&vec![b; n]);
                            let m = &mut model[db];
                            let ttl = present(m, &key, now).and_then(|e| e.1).filter(|_| keep);
                            m.insert(key.clone(), (v.clone(), ttl));
                            if keep {
                                store.dbs[db].insert_keep_ttl(Bytes::from(key), v);
                            } else {
                                store.dbs[db].insert(Bytes::from(key), v);
                            }
                        }
                        Op::Append(k) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            if let Some(Value::Str(s)) = store.dbs[db].lookup_mut(&key) {
                                s.make_mut().push(b'+');
                            }
                            if let Some((Value::Str(s), _)) = present(&mut model[db], &key, now) {
                                s.make_mut().push(b'+');
                            }
                        }
                        Op::BfAdd(k, item) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            let item = item.to_le_bytes();
                            let d = &mut store.dbs[db];
                            match d.lookup_mut_typed(&key, |v| matches!(v, Value::Bloom(_))) {
                                TypedLookup::Hit(Value::Bloom(b)) => {
                                    let _ = b.add(&item);
                                }
                                TypedLookup::Missing => {
                                    let mut b = ScalingBloom::create(100, 0.01, 2, false).expect("create");
                                    let _ = b.add(&item);
                                    d.insert(Bytes::from(key.clone()), Value::Bloom(Box::new(b)));
                                }
                                _ => {}
                            }
                            match present(&mut model[db], &key, now) {
                                Some((Value::Bloom(b), _)) => {
                                    let _ = b.add(&item);
                                }
                                Some(_) => {}
                                None => {
                                    let mut b = ScalingBloom::create(100, 0.01, 2, false).expect("create");
                                    let _ = b.add(&item);
                                    model[db].insert(key, (Value::Bloom(Box::new(b)), None));
                                }
                            }
                        }
                        Op::Del(k) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            let had = present(&mut model[db], &key, now).is_some();
                            model[db].remove(&key);
                            prop_assert_eq!(store.dbs[db].delete(&key), had);
                        }
                        Op::Expire(k, dt) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            if store.dbs[db].lookup(&key).is_some() {
                                prop_assert!(store.dbs[db].set_expire(&key, now + dt));
                            }
                            if let Some(e) = present(&mut model[db], &key, now) {
                                e.1 = Some(now + dt);
                            }
                        }
                        Op::Persist(k) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            let had = present(&mut model[db], &key, now).is_some_and(|e| e.1.take().is_some());
                            prop_assert_eq!(store.dbs[db].persist(&key), had);
                        }
                        Op::Lookup(k) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            let want = present(&mut model[db], &key, now).map(|e| e.0.clone());
                            prop_assert_eq!(store.dbs[db].lookup(&key).cloned(), want);
                        }
                        Op::Tick(dt, budget) => {
                            now += dt;
                            for d in store.dbs.iter_mut() {
                                d.now_ms = now;
                                d.active_expire(budget);
                            }
                        }
                        Op::Grow(n) => {
                            for _ in 0..n {
                                let k = format!("filler:{filler}").into_bytes();
                                filler += 1;
                                store.dbs[0].insert(Bytes::from(k.clone()), Value::str(b"f"));
                                model[0].insert(k, (Value::str(b"f"), None));
                            }
                        }
                        Op::Shrink => {
                            let fillers: Vec<Vec<u8>> =
                                model[0].keys().filter(|k| k.starts_with(b"filler:")).cloned().collect();
                            for k in fillers {
                                prop_assert!(store.dbs[0].delete(&k));
                                model[0].remove(&k);
                            }
                            store.dbs[0].shrink_if_sparse();
                        }
                        Op::Flush => {
                            store.dbs[1].clear();
                            model[1].clear();
                        }
                        Op::Move(k) => {
                            let (key, db) = (key(k), (k & 1) as usize);
                            let to = 1 - db;
                            if store.dbs[db].lookup(&key).is_some() && store.dbs[to].lookup(&key).is_none() {
                                let ttl = store.dbs[db].expire_at(&key);
                                let v = store.dbs[db].remove(&key).expect("present");
                                store.dbs[to].insert(Bytes::from(key.clone()), v);
                                if let Some(t) = ttl {
                                    store.dbs[to].set_expire(&key, t);
                                }
                                present(&mut model[to], &key, now);
                                let e = present(&mut model[db], &key, now).cloned().expect("model");
                                model[db].remove(&key);
                                model[to].insert(key, e);
                            }
                        }
                        Op::Swap => {
                            store.dbs.swap(0, 1);
                            model.swap(0, 1);
                        }
                        Op::Snap => {
                            let want = model.iter().map(|m| live(m, now)).collect();
                            snaps.push((store.snapshot(), want, vec![Model::new(), Model::new()]));
                        }
                        Op::Check(i) if !snaps.is_empty() => {
                            let (s, want, drained) = &snaps[i % snaps.len()];
                            check(s, drained, want)?;
                        }
                        Op::Drop(i) if !snaps.is_empty() => {
                            let (s, want, drained) = snaps.remove(i % snaps.len());
                            check(&s, &drained, &want)?;
                        }
                        Op::Drain(i, n) if !snaps.is_empty() => {
                            let at = i % snaps.len();
                            let (s, _, drained) = &mut snaps[at];
                            drain(s, drained, n);
                        }
                        Op::Check(_) | Op::Drop(_) | Op::Drain(..) => {}
                    }
                }
                for (s, want, drained) in &mut snaps {
                    check(s, drained, want)?;
                    drain(s, drained, usize::MAX);
                    check(s, drained, want)?;
                }
                let now_live: Vec<Model> = model.iter().map(|m| live(m, now)).collect();
                for d in store.dbs.iter_mut() {
                    d.now_ms = now;
                }
                check(&store.snapshot(), &[], &now_live)?;
                for (i, d) in store.dbs.iter().enumerate() {
                    let got: Model = d.entries().map(|(k, v, t)| (k.to_vec(), (v.clone(), t))).collect();
                    prop_assert_eq!(&got, &now_live[i]);
                }
            }
        }

        /// A snapshot walked on another thread while this one rewrites, deletes and adds keys in
        /// every segment: the walker sees the instant of the snapshot only. `drain`: the walker
        /// lets each segment go as a save's writer does, racing the writes that copy or reclaim it.
        fn walked_on_another_thread(drain: bool) {
            let mut db = db_at(0);
            for i in 0..50_000u32 {
                db.insert(Bytes::from(format!("k{i}")), Value::str(&i.to_le_bytes()));
            }
            let snap = db.snapshot();
            let walker = std::thread::spawn(move || {
                let mut seen = 0u32;
                let mut check = |k: &[u8], v: &Value, t: Option<u64>| {
                    let i: u32 = std::str::from_utf8(&k[1..])
                        .expect("utf8")
                        .parse()
                        .expect("n");
                    assert_eq!(
                        v.as_str().map(|s| s.to_vec()),
                        Some(i.to_le_bytes().to_vec())
                    );
                    assert_eq!(t, None);
                    seen += 1;
                    Ok::<(), ()>(())
                };
                if drain {
                    snap.drain(|k, v, t, _| check(k, v, t)).expect("walk");
                } else {
                    for (k, v, t) in snap.entries() {
                        check(k, v, t).expect("walk");
                    }
                }
                seen
            });
            for i in 0..50_000u32 {
                match i % 3 {
                    0 => db.insert(Bytes::from(format!("k{i}")), Value::str(b"new")),
                    1 => assert!(db.delete(format!("k{i}").as_bytes())),
                    _ => db.insert(Bytes::from(format!("n{i}")), Value::str(b"added")),
                }
            }
            assert_eq!(walker.join().expect("walker"), 50_000);
            for i in 0..50_000u32 {
                let want: Option<&[u8]> = match i % 3 {
                    0 => Some(b"new"),
                    1 => None,
                    _ => Some(&i.to_le_bytes()),
                };
                let got = db.lookup(format!("k{i}").as_bytes());
                assert_eq!(got.and_then(|v| v.as_str()).map(|s| &s[..]), want);
            }
        }

        #[test]
        fn a_snapshot_walked_on_another_thread_ignores_concurrent_writes() {
            walked_on_another_thread(false);
        }

        #[test]
        fn a_snapshot_drained_on_another_thread_ignores_concurrent_writes() {
            walked_on_another_thread(true);
        }
    }

    #[test]
    fn watch_versions_move_on_write() {
        let mut db = db_at(0);
        let k = Bytes::from("w");
        let v0 = db.watch(&k);
        db.insert(k.clone(), Value::str(b""));
        assert_ne!(db.watch_version(&k), v0);
    }
}
