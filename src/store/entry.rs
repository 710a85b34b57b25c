//! One key and its value in a single allocation, behind an 8-byte pointer.
//!
//! The main map pays for its slots about twice over (hashbrown grows by doubling at 7/8 load, so
//! 1M keys sit in 2M buckets), so the slot must be small, and every allocation per key costs a
//! malloc header and a round-up to the allocator's size class. An [`Entry`] is therefore a thin
//! pointer (the slot is 8 bytes plus hashbrown's control byte) to one block:
//!
//! ```text
//!  offset 0                 32     33           33+n
//!  [ Value (32 bytes)      ][enc ][len varint n][key bytes ...]
//! ```
//! - `Value` first, so it is aligned; a short string lives inside it (`store::string`).
//! - `enc` is the `OBJECT ENCODING` override code (0 = none): Redis reports strings modified in
//!   place as `raw` however short, and every HLL is `raw`. Kept here instead of in a side map, and
//!   changed in place.
//! - the key length as LEB128 (1 byte up to 127), then the key bytes.
//!
//! A 16-byte key with an inline string is a 50-byte block, a 64-byte glibc chunk. The map hashes
//! the key bytes; the entry does not cache the hash (rehashing on growth recomputes it, which is
//! cheap for short keys and keeps the block within its size class).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use super::value::Value;

const VALUE_SIZE: usize = std::mem::size_of::<Value>();
const ENC_OFF: usize = VALUE_SIZE;
const LEN_OFF: usize = ENC_OFF + 1;

// An `Entry` is sent between threads with the keyspace; it owns a `Value`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Value>();
};

/// A key, its encoding override and its value, owned through one thin pointer.
pub struct Entry(NonNull<u8>);

// SAFETY: an `Entry` uniquely owns its block, whose only non-plain content is a `Value`, which is
// Send + Sync (asserted above); `&Entry` gives only shared access to it.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn layout(key_len: usize) -> Layout {
    // A key is at most isize::MAX bytes (it exists in memory), so the sum cannot overflow; the
    // alignment is a power of two.
    let size = LEN_OFF + varint_len(key_len) + key_len;
    match Layout::from_size_align(size, std::mem::align_of::<Value>()) {
        Ok(l) => l,
        Err(_) => alloc::handle_alloc_error(Layout::new::<Value>()),
    }
}

impl Entry {
    /// A new block holding `value`, encoding code `enc` and a copy of `key`.
    pub fn new(key: &[u8], enc: u8, value: Value) -> Entry {
        let layout = layout(key.len());
        // SAFETY: the layout has a non-zero size (it holds a Value).
        let p = unsafe { alloc::alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: the block is `layout.size()` bytes, aligned for Value; every write below is
        // within it: the Value at 0, the code at ENC_OFF, the varint and then the key, which end
        // exactly at the block's size.
        unsafe {
            p.as_ptr().cast::<Value>().write(value);
            p.as_ptr().add(ENC_OFF).write(enc);
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
        }
        Entry(p)
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

    /// Asks the CPU to start loading the block's first cache line (value and key length) — a
    /// hint for walks over the whole table, which otherwise stall on one cache miss per key.
    #[inline]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch only hints the cache; it reads nothing and never faults, whatever
        // the address (here a live block's).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.0.as_ptr().cast::<i8>());
        }
    }

    pub fn value(&self) -> &Value {
        // SAFETY: a valid Value sits at offset 0 for the block's whole life.
        unsafe { &*self.0.as_ptr().cast::<Value>() }
    }

    pub fn value_mut(&mut self) -> &mut Value {
        // SAFETY: as in `value`; `&mut self` makes the access unique.
        unsafe { &mut *self.0.as_ptr().cast::<Value>() }
    }

    /// The key and its value, for walks that need both.
    pub fn key_value_mut(&mut self) -> (&[u8], &mut Value) {
        let (len, at) = self.key_span();
        let base = self.0.as_ptr();
        // SAFETY: the key bytes and the Value are disjoint parts of the block (the key starts
        // after offset VALUE_SIZE); `&mut self` makes the Value access unique.
        unsafe {
            (
                std::slice::from_raw_parts(base.add(at), len),
                &mut *base.cast::<Value>(),
            )
        }
    }

    /// The encoding override code (0 = none).
    pub fn enc(&self) -> u8 {
        // SAFETY: written by `new` at ENC_OFF, inside the block.
        unsafe { *self.0.as_ptr().add(ENC_OFF) }
    }

    pub fn set_enc(&mut self, code: u8) {
        // SAFETY: as in `enc`; `&mut self` makes the write unique.
        unsafe { self.0.as_ptr().add(ENC_OFF).write(code) }
    }

    /// Frees the block and returns the value.
    pub fn into_value(self) -> Value {
        let layout = layout(self.key().len());
        let p = self.0;
        std::mem::forget(self);
        // SAFETY: the Value is moved out exactly once and the block, allocated by `new` with this
        // layout, is freed without dropping it again (`self` was forgotten).
        unsafe {
            let v = p.as_ptr().cast::<Value>().read();
            alloc::dealloc(p.as_ptr(), layout);
            v
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let layout = layout(self.key().len());
        // SAFETY: the Value is dropped once, then the block is freed with the layout `new` used.
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr().cast::<Value>());
            alloc::dealloc(self.0.as_ptr(), layout);
        }
    }
}

impl Clone for Entry {
    /// A new block with the same key, code and a clone of the value (a key table segment copied
    /// for a write while a snapshot holds it: `store::keytable`).
    fn clone(&self) -> Entry {
        Entry::new(self.key(), self.enc(), self.value().clone())
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &bytes::Bytes::copy_from_slice(self.key()))
            .field("enc", &self.enc())
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
    fn block_of_a_small_key_fits_a_64_byte_chunk() {
        assert_eq!(std::mem::size_of::<Entry>(), 8);
        // glibc serves requests up to 56 bytes from a 64-byte chunk.
        assert!(layout(16).size() <= 56, "{}", layout(16).size());
    }
}
