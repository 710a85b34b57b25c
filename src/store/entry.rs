//! One key and its value in a single allocation, behind an 8-byte pointer, shared copy-on-write
//! between the live key table and the snapshots that hold it.
//!
//! The main map pays for its slots about twice over (hashbrown grows by doubling at 7/8 load, so
//! 1M keys sit in 2M buckets), so the slot must be small, and every allocation per key costs a
//! malloc header and a round-up to the allocator's size class. An [`Entry`] is therefore a thin
//! pointer (the slot is 8 bytes plus hashbrown's control byte) to one block:
//!
//! ```text
//!  offset 0                 32             34     35          36          38           38+n
//!  [ Value (32 bytes)      ][holders u16  ][enc ][access hi ][access lo ][len varint n][key ...]
//!                                                                  then, for a key with a TTL:
//!                                                                  [deadline u64, unaligned]
//! ```
//! - `Value` first, so it is aligned; a short string lives inside it (`store::string`).
//! - `holders`: how many key table segments point at the block (an atomic count, as in `Arc`).
//!   A segment copied for a write while a snapshot holds it (`store::keytable`) copies the 8-byte
//!   pointers and bumps each count instead of copying every key and value; the first write to
//!   an entry that is still shared copies that one entry ([`Entry::value_mut`] and every other
//!   `&mut` access do it). When the snapshot lets go, it only decrements the counts: it frees the
//!   blocks the live table replaced and nothing else. Two bytes: the holders are the live table
//!   plus one per snapshot alive; past [`SHARE_MAX`] a clone copies the block instead.
//! - `enc` is the `OBJECT ENCODING` override code (0 = none, low 6 bits): Redis reports strings
//!   modified in place as `raw` however short, and every HLL is `raw`. Kept here instead of in a
//!   side map, and changed in place. Its top bits say whether the block ends with a deadline slot
//!   ([`SLOT`]) and whether the slot holds the key's TTL ([`TTL_SET`]).
//! - the deadline (unix ms) of a key with a TTL, in 8 bytes after the key. A TTL used to be an
//!   element of a per-segment TTL table holding a copy of the key (40 bytes, in a hash table at
//!   most 7/8 full): 1M keys with a TTL cost 234 bytes each against Redis's 156. A block grows
//!   by the slot when a key first gets a TTL and keeps it when the TTL goes (PERSIST, or SET
//!   without KEEPTTL), so that a key whose TTL is set again and again (`SET k v EX 100`, the
//!   cache's pattern) is rebuilt once, not on every write.
//! - `access`: the key's 24 access bits for `maxmemory` eviction, an LRU clock or an LFU counter
//!   (`store::access`), as Redis's `robj.lru`: a byte and a `u16`, each atomic, so that readers
//!   under the shared keyspace lock may record an access through `&Entry`, in a block a snapshot
//!   may share too (the snapshot reads only the key and the value). The two halves are written
//!   one after the other: a reader racing a writer may see one half of each, an approximate
//!   clock for an approximate LRU, never anything unsound.
//! - the key length as LEB128 (1 byte up to 127), then the key bytes.
//!
//! A 16-byte key with an inline string is a 55-byte block, a 64-byte glibc chunk (keys up to 17
//! bytes fit it; before the access bits, 20; before the count, 22). The map hashes
//! the key bytes; the entry does not cache the hash (rehashing on growth recomputes it, which is
//! cheap for short keys and keeps the block within its size class).

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU16, AtomicU64, AtomicU8, Ordering};

use super::value::Value;

const VALUE_SIZE: usize = std::mem::size_of::<Value>();
const COUNT_OFF: usize = VALUE_SIZE;
const ENC_OFF: usize = COUNT_OFF + 2;
const ACCESS_HI_OFF: usize = ENC_OFF + 1;
const ACCESS_LO_OFF: usize = ACCESS_HI_OFF + 1;
const LEN_OFF: usize = ACCESS_LO_OFF + 2;

/// The bits of the `enc` byte that hold the encoding code; the two above it are flags.
const CODE_MASK: u8 = 0x3f;
/// Flag: the block ends with an 8-byte deadline slot (after the key).
const SLOT: u8 = 0x80;
/// Flag: the slot holds the key's TTL (with [`SLOT`] set).
const TTL_SET: u8 = 0x40;
const DEADLINE_SIZE: usize = 8;
// The count is an AtomicU16 at COUNT_OFF: the block is aligned for Value, which is at least as
// aligned as u16, and COUNT_OFF is a multiple of 2.
// The same for the access bits' low half, a u16 at ACCESS_LO_OFF.
const _: () = assert!(std::mem::align_of::<Value>() >= 2 && COUNT_OFF.is_multiple_of(2));
const _: () = assert!(ACCESS_LO_OFF.is_multiple_of(2));

/// Past this many holders a clone copies the block instead of sharing it (the count cannot
/// overflow: only the live table's thread clones, one count at a time).
const SHARE_MAX: u16 = 1 << 14;

/// Entries copied because a write reached one that a snapshot shares, process-wide.
static COPIES: AtomicU64 = AtomicU64::new(0);

/// [`COPIES`]: compare two readings (logged when a save ends).
pub fn copies() -> u64 {
    COPIES.load(Ordering::Relaxed)
}

// An `Entry` is sent between threads with the keyspace; it owns a `Value`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Value>();
};

/// A key, its encoding override and its value, owned through one thin pointer, shared with
/// the snapshots that hold it (module docs).
pub struct Entry(NonNull<u8>);

// SAFETY: as for `Arc<Value>`: the block is shared between threads only through the atomic
// holder count, its only non-plain content is a `Value`, which is Send + Sync (asserted above),
// and it is changed only through `&mut Entry` after `make_unique` saw a count of 1 (with Acquire,
// pairing with the Release decrement of the last other holder), i.e. when no other thread can
// reach it.
unsafe impl Send for Entry {}
// SAFETY: as above; `&Entry` gives only shared access (reads, and atomic count updates).
unsafe impl Sync for Entry {}

/// The `enc` byte `byte` with its encoding code replaced by `code` and its flags kept (a write
/// of the code through [`Entry::shared_write_parts`]'s pointer goes through this).
pub(super) fn with_code(byte: u8, code: u8) -> u8 {
    debug_assert!(code <= CODE_MASK);
    (byte & !CODE_MASK) | (code & CODE_MASK)
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn layout(key_len: usize, slot: bool) -> Layout {
    // A key is at most isize::MAX bytes (it exists in memory), so the sum cannot overflow; the
    // alignment is a power of two.
    let size = LEN_OFF + varint_len(key_len) + key_len + if slot { DEADLINE_SIZE } else { 0 };
    match Layout::from_size_align(size, std::mem::align_of::<Value>()) {
        Ok(l) => l,
        Err(_) => alloc::handle_alloc_error(Layout::new::<Value>()),
    }
}

impl Entry {
    /// A new block holding `value`, encoding code `enc` and a copy of `key`, accessed now
    /// (`store::access::initial`).
    pub fn new(key: &[u8], enc: u8, value: Value) -> Entry {
        Entry::with_access(key, enc, value, super::access::initial())
    }

    /// [`Entry::new`] with an empty deadline slot, for a key about to get a TTL (SET ... EX of a
    /// new key): the TTL is then written in place, where a block without a slot is rebuilt.
    pub fn with_slot(key: &[u8], enc: u8, value: Value) -> Entry {
        Entry::build(
            key,
            (enc & CODE_MASK) | SLOT,
            value,
            super::access::initial(),
            None,
        )
    }

    /// A new block as [`Entry::new`] makes it, with the access bits `access`.
    fn with_access(key: &[u8], enc: u8, value: Value, access: u32) -> Entry {
        Entry::build(key, enc & CODE_MASK, value, access, None)
    }

    /// A new block: `flags` is the whole `enc` byte (code and flags); with [`SLOT`] in it the
    /// block ends with a deadline slot holding `deadline` (0 when `None`).
    fn build(key: &[u8], flags: u8, value: Value, access: u32, deadline: Option<u64>) -> Entry {
        let slot = flags & SLOT != 0;
        debug_assert!(slot || flags & TTL_SET == 0);
        let layout = layout(key.len(), slot);
        // SAFETY: the layout has a non-zero size (it holds a Value).
        let p = unsafe { alloc::alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: the block is `layout.size()` bytes, aligned for Value; every write below is
        // within it: the Value at 0, the code at ENC_OFF, the access bits at ACCESS_HI_OFF and
        // ACCESS_LO_OFF (aligned for u16, asserted at the constants), the varint and then the
        // key, and with a slot the 8 deadline bytes after it, which end exactly at the block's
        // size.
        unsafe {
            p.as_ptr().cast::<Value>().write(value);
            p.as_ptr().add(COUNT_OFF).cast::<u16>().write(1);
            p.as_ptr().add(ENC_OFF).write(flags);
            p.as_ptr().add(ACCESS_HI_OFF).write((access >> 16) as u8);
            p.as_ptr()
                .add(ACCESS_LO_OFF)
                .cast::<u16>()
                .write(access as u16);
            let mut at = p.as_ptr().add(LEN_OFF);
            let mut n = key.len();
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    at.write(byte);
                    at = at.add(1);
                    break;
                }
                at.write(byte | 0x80);
                at = at.add(1);
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), at, key.len());
            if slot {
                at.add(key.len())
                    .cast::<u64>()
                    .write_unaligned(deadline.unwrap_or(0));
            }
        }
        Entry(p)
    }

    /// The whole `enc` byte: the code and the flags.
    fn flags(&self) -> u8 {
        // SAFETY: written by `build` at ENC_OFF, inside the block.
        unsafe { *self.0.as_ptr().add(ENC_OFF) }
    }

    /// The key's TTL (unix ms), if it has one.
    #[inline]
    pub fn deadline(&self) -> Option<u64> {
        if self.flags() & TTL_SET == 0 {
            return None;
        }
        let (len, at) = self.key_span();
        // SAFETY: TTL_SET implies SLOT: `build` made the block with 8 deadline bytes after the
        // key's `len` bytes at `at`; read unaligned, as written.
        Some(unsafe { self.0.as_ptr().add(at + len).cast::<u64>().read_unaligned() })
    }

    /// Sets or clears the key's TTL (the entry copied first if a snapshot shares it); answers
    /// the old one. A block without a slot is rebuilt with one when a TTL is set (module docs);
    /// clearing keeps the slot.
    pub fn set_deadline(&mut self, when: Option<u64>) -> Option<u64> {
        let old = self.deadline();
        if old == when {
            return old;
        }
        let flags = self.flags();
        if flags & SLOT == 0 {
            self.rebuild_with_slot(when?);
            return None;
        }
        self.make_unique();
        let (len, at) = self.key_span();
        // SAFETY: the block has its slot (SLOT, unchanged by `make_unique`'s copy) after the key;
        // `&mut self` on an unshared block makes the writes unique.
        unsafe {
            let base = self.0.as_ptr();
            if let Some(when) = when {
                base.add(at + len).cast::<u64>().write_unaligned(when);
                base.add(ENC_OFF).write(flags | TTL_SET);
            } else {
                base.add(ENC_OFF).write(flags & !TTL_SET);
            }
        }
        old
    }

    /// Replaces the block by one with a deadline slot holding `when`: the value moved when the
    /// block is this entry's alone, cloned (and its reserved bytes taken over) when a snapshot
    /// shares it.
    #[cold]
    fn rebuild_with_slot(&mut self, when: u64) {
        let flags = self.flags() | SLOT | TTL_SET;
        let access = self.access();
        if !self.is_unique() {
            let copy = Entry::build(self.key(), flags, self.value().clone(), access, Some(when));
            self.value().uncount_reservations();
            COPIES.fetch_add(1, Ordering::Relaxed);
            *self = copy;
            return;
        }
        let layout = layout(self.key().len(), false);
        let p = self.0;
        // SAFETY: the block is this entry's alone (checked above): the Value is moved out once,
        // the key copied into the new block before the old one is freed (with the layout `build`
        // made it with: no slot), and the old block is never dropped (`self` is overwritten
        // without running Drop).
        unsafe {
            let value = p.as_ptr().cast::<Value>().read();
            let new = Entry::build(self.key(), flags, value, access, Some(when));
            alloc::dealloc(p.as_ptr(), layout);
            std::ptr::write(self, new);
        }
    }

    /// The layout this block was allocated with.
    fn own_layout(&self) -> Layout {
        layout(self.key().len(), self.flags() & SLOT != 0)
    }

    /// (key length, offset of the key bytes).
    fn key_span(&self) -> (usize, usize) {
        let mut n = 0usize;
        let mut shift = 0;
        let mut at = LEN_OFF;
        loop {
            // SAFETY: the varint was written by `new` inside the block and ends with a byte
            // below 0x80, so every byte read here is within it.
            let byte = unsafe { *self.0.as_ptr().add(at) };
            n |= ((byte & 0x7f) as usize) << shift;
            at += 1;
            if byte < 0x80 {
                return (n, at);
            }
            shift += 7;
        }
    }

    /// The key bytes.
    pub fn key(&self) -> &[u8] {
        let (len, at) = self.key_span();
        // SAFETY: `new` copied `len` key bytes at offset `at`, the end of the block; they live as
        // long as `self` and are never written again.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(at), len) }
    }

    fn holders(&self) -> &AtomicU16 {
        // SAFETY: `new` wrote a u16 at COUNT_OFF, aligned (asserted at the constants); after
        // that it is only accessed atomically, through this reference, while the block lives.
        unsafe { AtomicU16::from_ptr(self.0.as_ptr().add(COUNT_OFF).cast::<u16>()) }
    }

    fn access_parts(&self) -> (&AtomicU8, &AtomicU16) {
        // SAFETY: `new` wrote a u8 at ACCESS_HI_OFF and a u16 at ACCESS_LO_OFF (aligned,
        // asserted at the constants); after that they are only accessed atomically, through
        // these references, while the block lives.
        unsafe {
            (
                AtomicU8::from_ptr(self.0.as_ptr().add(ACCESS_HI_OFF)),
                AtomicU16::from_ptr(self.0.as_ptr().add(ACCESS_LO_OFF).cast::<u16>()),
            )
        }
    }

    /// The key's access bits (`store::access`: an LRU clock or an LFU counter).
    #[inline]
    pub fn access(&self) -> u32 {
        let (hi, lo) = self.access_parts();
        (u32::from(hi.load(Ordering::Relaxed)) << 16) | u32::from(lo.load(Ordering::Relaxed))
    }

    /// Sets the access bits; through `&self`, as any holder may (module docs).
    #[inline]
    pub fn set_access(&self, bits: u32) {
        let (hi, lo) = self.access_parts();
        hi.store((bits >> 16) as u8, Ordering::Relaxed);
        lo.store(bits as u16, Ordering::Relaxed);
    }

    /// Records an access (a lookup that is not `NOTOUCH` in Redis's terms): the bits are
    /// written only when they change (`store::access`).
    #[inline]
    pub fn touch(&self) {
        let old = self.access();
        let new = super::access::accessed(old);
        if new != old {
            self.set_access(new);
        }
    }

    /// True when no snapshot shares the block.
    #[inline]
    pub(super) fn is_unique(&self) -> bool {
        // Acquire: pairs with the Release decrement of the last other holder, so its reads of
        // the block happen before any write made after this returns true.
        self.holders().load(Ordering::Acquire) == 1
    }

    /// Makes the block this entry's alone before a change: a shared one is copied (the key, the
    /// code, a clone of the value: strings copied, filters sharing their pages) and the copy
    /// takes over counting the filter's reserved bytes from the original, which stays with the
    /// snapshot (`store::pages::Reservation`).
    #[inline]
    fn make_unique(&mut self) {
        if !self.is_unique() {
            self.copy_out();
        }
    }

    #[cold]
    fn copy_out(&mut self) {
        let copy = self.copy_block();
        self.value().uncount_reservations();
        COPIES.fetch_add(1, Ordering::Relaxed);
        *self = copy;
    }

    /// Asks the CPU to start loading the block's first cache line (value and key length) — a
    /// hint for walks over the whole table, which otherwise stall on one cache miss per key.
    #[inline]
    pub fn prefetch(&self) {
        super::prefetch(self.0.as_ptr());
    }

    pub fn value(&self) -> &Value {
        // SAFETY: a valid Value sits at offset 0 for the block's whole life.
        unsafe { &*self.0.as_ptr().cast::<Value>() }
    }

    /// The value for changing (the entry copied first if a snapshot shares it).
    #[inline]
    pub fn value_mut(&mut self) -> &mut Value {
        self.make_unique();
        // SAFETY: as in `value`; `&mut self` and a block no one else holds make the access
        // unique.
        unsafe { &mut *self.0.as_ptr().cast::<Value>() }
    }

    /// Raw pointers to the value and to the `enc` byte (the code and the flags: write a code with
    /// [`with_code`]), for a write through `&` under the
    /// shared keyspace lock (`store::db::SharedDb::write`). Making them is safe; writing
    /// through them is the caller's to prove: it must hold the key's stripe lock for writing
    /// (so nothing else reads or writes this value or code meanwhile) and have seen the block
    /// unique ([`Entry::is_unique`]: no snapshot can read it).
    pub(super) fn shared_write_parts(&self) -> (*mut Value, *mut u8) {
        let base = self.0.as_ptr();
        // `wrapping_add`: pointer arithmetic inside the block, no access.
        (base.cast::<Value>(), base.wrapping_add(ENC_OFF))
    }

    /// The key and its value, for walks that need both (copied first if shared).
    pub fn key_value_mut(&mut self) -> (&[u8], &mut Value) {
        self.make_unique();
        let (len, at) = self.key_span();
        let base = self.0.as_ptr();
        // SAFETY: the key bytes and the Value are disjoint parts of the block (the key starts
        // after offset VALUE_SIZE); `&mut self` on an unshared block makes the Value access
        // unique.
        unsafe {
            (
                std::slice::from_raw_parts(base.add(at), len),
                &mut *base.cast::<Value>(),
            )
        }
    }

    /// The encoding override code (0 = none).
    pub fn enc(&self) -> u8 {
        self.flags() & CODE_MASK
    }

    pub fn set_enc(&mut self, code: u8) {
        self.make_unique();
        let byte = with_code(self.flags(), code);
        // SAFETY: as in `flags`; `&mut self` on an unshared block makes the write unique.
        unsafe { self.0.as_ptr().add(ENC_OFF).write(byte) }
    }

    /// A new block with the same key, flags, deadline and access bits, and a clone of the value
    /// (which takes over counting its reserved bytes: the caller un-counts the original's).
    fn copy_block(&self) -> Entry {
        Entry::build(
            self.key(),
            self.flags(),
            self.value().clone(),
            self.access(),
            self.deadline(),
        )
    }

    /// Frees the block and returns the value (a clone, taking over the counting of its
    /// reserved bytes, if a snapshot shares the block).
    pub fn into_value(self) -> Value {
        if !self.is_unique() {
            let v = self.value().clone();
            self.value().uncount_reservations();
            COPIES.fetch_add(1, Ordering::Relaxed);
            return v;
        }
        let layout = self.own_layout();
        let p = self.0;
        std::mem::forget(self);
        // SAFETY: the block is this entry's alone (checked above); the Value is moved out exactly
        // once and the block, allocated by `new` with this layout, is freed without dropping it
        // again (`self` was forgotten).
        unsafe {
            let v = p.as_ptr().cast::<Value>().read();
            alloc::dealloc(p.as_ptr(), layout);
            v
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // As `Arc`: Release so this holder's reads happen before the last holder frees; the
        // last one's Acquire fence pairs with every earlier decrement.
        if self.holders().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = self.own_layout();
        // SAFETY: this was the last holder; the Value is dropped once, then the block is freed
        // with the layout `new` used.
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr().cast::<Value>());
            alloc::dealloc(self.0.as_ptr(), layout);
        }
    }
}

impl Clone for Entry {
    /// Another holder of the same block (a key table segment copied for a write while a snapshot
    /// holds it: `store::keytable`); a change through either copies it first. Past
    /// [`SHARE_MAX`] holders, a new block whose value takes over the reserved-bytes counting
    /// (the clone is the live table's, as in `Entry::make_unique`).
    fn clone(&self) -> Entry {
        // Relaxed, as `Arc::clone`: a new holder is made from an existing one, which keeps the
        // block alive meanwhile.
        let before = self.holders().fetch_add(1, Ordering::Relaxed);
        if before < SHARE_MAX {
            return Entry(self.0);
        }
        self.holders().fetch_sub(1, Ordering::Relaxed);
        let copy = self.copy_block();
        self.value().uncount_reservations();
        COPIES.fetch_add(1, Ordering::Relaxed);
        copy
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &bytes::Bytes::copy_from_slice(self.key()))
            .field("enc", &self.enc())
            .field("deadline", &self.deadline())
            .field("value", self.value())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::string::Str;

    #[test]
    fn round_trips_keys_of_every_varint_length() {
        for len in [0usize, 1, 16, 127, 128, 300, 16_384, 70_000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut e = Entry::new(&key, 2, Value::Str(Str::copy_from_slice(b"v")));
            assert_eq!(e.key(), &key[..]);
            assert_eq!(e.enc(), 2);
            e.set_enc(0);
            assert_eq!(e.enc(), 0);
            *e.value_mut() = Value::Str(Str::from_vec(vec![5; 100]));
            assert_eq!(e.key(), &key[..]);
            let (k, v) = e.key_value_mut();
            assert_eq!(k, &key[..]);
            assert_eq!(v.as_str().map(|s| s.len()), Some(100));
            assert_eq!(e.into_value(), Value::Str(Str::from_vec(vec![5; 100])));
        }
    }

    #[test]
    fn access_bits_round_trip_and_survive_a_copy() {
        let e = Entry::new(b"k", 0, Value::Str(Str::copy_from_slice(b"v")));
        for bits in [
            0,
            1,
            0xffff,
            0x1_0000,
            0xab_cdef,
            super::super::access::LRU_CLOCK_MAX,
        ] {
            e.set_access(bits);
            assert_eq!(e.access(), bits);
        }
        e.set_access(0x12_3456);
        // A clone past the share limit copies the block; a write to a shared one copies too.
        let mut shared = e.clone();
        *shared.value_mut() = Value::Str(Str::copy_from_slice(b"w"));
        assert_eq!(shared.access(), 0x12_3456);
        assert_eq!(e.value(), &Value::Str(Str::copy_from_slice(b"v")));
    }

    #[test]
    fn a_deadline_is_set_cleared_and_kept_by_copies() {
        for len in [0usize, 1, 16, 17, 127, 128, 300] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut e = Entry::new(&key, 2, Value::Str(Str::copy_from_slice(b"v")));
            e.set_access(0x12_3456);
            assert_eq!(e.deadline(), None);
            assert_eq!(e.set_deadline(None), None);
            assert_eq!(e.flags() & SLOT, 0, "clearing no TTL adds no slot");
            // The first TTL rebuilds the block with a slot; the rest is unchanged.
            assert_eq!(e.set_deadline(Some(u64::MAX - 1)), None);
            assert_eq!(e.deadline(), Some(u64::MAX - 1));
            assert_eq!((e.key(), e.enc(), e.access()), (&key[..], 2, 0x12_3456));
            assert_eq!(e.value(), &Value::Str(Str::copy_from_slice(b"v")));
            assert_eq!(e.set_deadline(Some(7)), Some(u64::MAX - 1));
            // The code changes without touching the flags, and the other way round.
            e.set_enc(1);
            assert_eq!((e.enc(), e.deadline()), (1, Some(7)));
            let mut byte = e.flags();
            byte = with_code(byte, 3);
            assert_eq!(byte & !CODE_MASK, SLOT | TTL_SET);
            // A snapshot's holder keeps the TTL it saw; the live copy changes its own.
            let snapshot = e.clone();
            assert_eq!(e.set_deadline(None), Some(7));
            assert_eq!((snapshot.deadline(), e.deadline()), (Some(7), None));
            assert_ne!(e.flags() & SLOT, 0, "clearing keeps the slot");
            assert_eq!(e.set_deadline(Some(9)), None);
            assert_eq!((snapshot.deadline(), e.deadline()), (Some(7), Some(9)));
            assert_eq!(e.key(), &key[..]);
            // A shared block without a slot is copied into one with it.
            let mut plain = Entry::new(&key, 0, Value::Str(Str::from_vec(vec![5; 100])));
            let held = plain.clone();
            assert_eq!(plain.set_deadline(Some(11)), None);
            assert_eq!((held.deadline(), plain.deadline()), (None, Some(11)));
            assert_eq!(plain.value(), held.value());
            drop(held);
            assert_eq!(plain.into_value(), Value::Str(Str::from_vec(vec![5; 100])));
            // A block made with a slot takes its first TTL in place.
            let mut slotted = Entry::with_slot(&key, 0, Value::Str(Str::copy_from_slice(b"w")));
            assert_eq!(slotted.deadline(), None);
            let at = slotted.0;
            assert_eq!(slotted.set_deadline(Some(5)), None);
            assert_eq!((slotted.0, slotted.deadline()), (at, Some(5)));
        }
    }

    #[test]
    fn block_of_a_small_key_fits_a_64_byte_chunk() {
        assert_eq!(std::mem::size_of::<Entry>(), 8);
        // glibc serves requests up to 56 bytes from a 64-byte chunk.
        assert!(
            layout(16, false).size() <= 56,
            "{}",
            layout(16, false).size()
        );
        // With a TTL, an 80-byte chunk (up to 72 bytes).
        assert!(layout(16, true).size() <= 72, "{}", layout(16, true).size());
    }
}
