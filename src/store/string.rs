//! String values: small ones inside the value, large ones in a shared buffer.
//!
//! Two costs pull a string representation in opposite directions (issue 15 target 3, issue 10
//! item 5):
//! - **Memory per key.** Most keys of a cache hold a few bytes. A `Vec<u8>` costs a 24-byte header
//!   plus a heap chunk (32 bytes for glibc's smallest) for an 8-byte value. Here a string of up to
//!   [`INLINE`] bytes lives in the value itself: no allocation at all. The limit is what fits in the
//!   32-byte `Value` beside a tag and a length byte, and it holds the sparse HLLs of a few elements
//!   (16-byte header plus some opcodes) as well as counters, flags and short tokens.
//! - **Time under the keyspace lock.** A GET of an 8 MB value must not copy 8 MB while every other
//!   client waits. A string of at least [`SHARE_MIN`] bytes is kept as a refcounted [`Bytes`]: a
//!   reply, a BGSAVE / AOF-rewrite / full-sync snapshot or DUMP takes a handle (O(1)), the
//!   connection writes the buffer after the lock is released (`protocol::out`), and a write that
//!   follows while someone still holds the buffer copies it first (copy-on-write: the reply keeps
//!   the bytes it was given). Without a second holder the buffer is reused in place.
//!
//! Between the two, strings live in a plain `Vec<u8>`, which is also the form every in-place
//! modification works on ([`Str::make_mut`]): APPEND, SETRANGE and the HLL writers get a
//! `&mut Vec<u8>` through a guard that puts the string back in its compact form when dropped.
//! The one exception: a shared string of up to [`EDIT_AS_VEC_MAX`] bytes edited where it lies
//! (a dense HLL that PFADD raises a register of) stays a `Vec` from then on, since a `Bytes`
//! cannot be written in place without a round trip through `BytesMut` on every edit.
//!
//! ```text
//!  Repr::Inline   [tag][len][ up to 30 bytes ....................... ]   32 bytes, no heap
//!  Repr::Heap     [tag][pad ][ Vec<u8>: ptr cap len ]                     + the Vec's buffer
//!  Repr::Shared   [tag][pad ][ Box<Bytes> ]                               + Bytes header + buffer
//! ```
//! The representation never shows in a reply: every accessor sees the same bytes.

use std::ops::{Deref, DerefMut};

use bytes::{Bytes, BytesMut};

/// Strings up to this many bytes are stored inline.
pub const INLINE: usize = 30;

/// Strings at least this long are kept in a shared buffer. Below it, a copy under the lock costs
/// less than the extra header (the `Box<Bytes>` and its 48-byte chunk).
pub const SHARE_MIN: usize = 1024;

/// A shared string at most this long that is edited in place ([`Str::edit_in_place`]: a dense
/// HLL, 12,304 bytes) moves to the plain `Vec` form for good. Editing a `Bytes` in place means
/// turning it into a `BytesMut` and freezing it back on every edit, ~150 instructions of a
/// PFADD's ~4,200 (issue 15, target 1); a `Vec` is written where it lies. What the string gives
/// up is the O(1) handle a GET reply or a snapshot takes: they copy at most this many bytes.
pub const EDIT_AS_VEC_MAX: usize = 16 * 1024;

/// A binary-safe string value.
#[derive(Clone)]
pub struct Str(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Vec<u8>),
    Shared(Box<Bytes>),
}

impl Default for Str {
    fn default() -> Str {
        Str::new()
    }
}

impl Str {
    /// The empty string.
    pub const fn new() -> Str {
        Str(Repr::Inline {
            len: 0,
            buf: [0; INLINE],
        })
    }

    /// A string holding a copy of `s`. Arguments arrive as slices of a connection's read buffer;
    /// keeping one would pin the whole buffer, so this always copies.
    pub fn copy_from_slice(s: &[u8]) -> Str {
        if s.len() <= INLINE {
            Str::inline(s)
        } else {
            Str::from_vec(s.to_vec())
        }
    }

    /// Takes ownership of `v` (inlined if short; otherwise its buffer and capacity are kept).
    pub fn from_vec(v: Vec<u8>) -> Str {
        if v.len() <= INLINE {
            Str::inline(&v)
        } else if v.len() < SHARE_MIN {
            Str(Repr::Heap(v))
        } else {
            // No copy: the Vec's buffer becomes the shared one.
            Str(Repr::Shared(Box::new(Bytes::from(v))))
        }
    }

    fn inline(s: &[u8]) -> Str {
        let mut buf = [0u8; INLINE];
        buf[..s.len()].copy_from_slice(s);
        Str(Repr::Inline {
            len: s.len() as u8,
            buf,
        })
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, buf } => &buf[..*len as usize],
            Repr::Heap(v) => v,
            Repr::Shared(b) => b,
        }
    }

    /// The bytes as a `Bytes`: a new handle on the buffer if it is shared (O(1), what a reply to
    /// GET takes under the lock), else a copy of fewer than [`SHARE_MIN`] bytes.
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            Repr::Shared(b) => Bytes::clone(b),
            _ => Bytes::copy_from_slice(self.as_bytes()),
        }
    }

    /// True if the bytes are in a shared buffer (a reply may hold a handle on it).
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Repr::Shared(_))
    }

    /// The string as a `Vec<u8>` to modify in place; the guard stores it back in compact form when
    /// dropped. A shared buffer that a reply still holds is copied first.
    pub fn make_mut(&mut self) -> StrMut<'_> {
        let v = match std::mem::take(&mut self.0) {
            Repr::Inline { len, buf } => buf[..len as usize].to_vec(),
            Repr::Heap(v) => v,
            // Zero-copy when this is the only handle; otherwise the reply keeps the old bytes.
            Repr::Shared(b) => Vec::from(*b),
        };
        StrMut { s: self, v }
    }

    /// Runs `f` on the bytes for an edit that keeps their length (the dense HLL writers: PFADD
    /// raising a register, PFCOUNT writing its cache), in whatever form the string is: a shared
    /// buffer no one else holds is written where it is, one that a reply or a snapshot still holds
    /// is copied first (copy-on-write, as [`Str::make_mut`]). Unlike `make_mut` the form does not
    /// change per edit, so nothing is allocated or freed (issue 15: `make_mut` and the guard's
    /// drop were a fifth of a PFADD to a dense HLL) — except once: a shared string of at most
    /// [`EDIT_AS_VEC_MAX`] bytes moves to the `Vec` form on its first edit. Should `f` panic, the
    /// bytes it saw are kept.
    pub fn edit_in_place<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        match &mut self.0 {
            Repr::Inline { len, buf } => f(&mut buf[..*len as usize]),
            Repr::Heap(v) => f(v),
            Repr::Shared(b) if b.len() <= EDIT_AS_VEC_MAX => {
                // Leaves the shared form for good: this edit and the next are plain writes (see
                // `EDIT_AS_VEC_MAX`). Zero-copy when no one else holds the buffer; otherwise the
                // holder keeps the old bytes.
                let mut v = Vec::from(std::mem::take(&mut **b));
                if v.capacity() != v.len() {
                    // As the shared buffer counted in MEMORY USAGE: exactly the bytes.
                    v.shrink_to_fit();
                }
                self.0 = Repr::Heap(v);
                self.edit_in_place(f)
            }
            Repr::Shared(b) => {
                let taken = std::mem::take(&mut **b);
                let mut guard = SharedEdit {
                    slot: b,
                    buf: taken
                        .try_into_mut()
                        .unwrap_or_else(|held| BytesMut::from(&held[..])),
                };
                f(&mut guard.buf)
            }
        }
    }

    /// Heap bytes this string holds beyond the value itself (for MEMORY USAGE): the capacity
    /// reserved for it, or its length when inline or shared.
    pub fn allocated(&self) -> usize {
        match &self.0 {
            Repr::Heap(v) => v.capacity(),
            _ => self.len(),
        }
    }
}

/// A shared buffer opened by [`Str::edit_in_place`]; frozen back into its slot when dropped.
struct SharedEdit<'a> {
    slot: &'a mut Bytes,
    buf: BytesMut,
}

impl Drop for SharedEdit<'_> {
    fn drop(&mut self) {
        *self.slot = std::mem::take(&mut self.buf).freeze();
    }
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Inline {
            len: 0,
            buf: [0; INLINE],
        }
    }
}

impl Deref for Str {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl std::fmt::Debug for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.as_bytes()))
    }
}

impl From<Vec<u8>> for Str {
    fn from(v: Vec<u8>) -> Str {
        Str::from_vec(v)
    }
}

impl From<&[u8]> for Str {
    fn from(s: &[u8]) -> Str {
        Str::copy_from_slice(s)
    }
}

/// A string opened for modification ([`Str::make_mut`]).
pub struct StrMut<'a> {
    s: &'a mut Str,
    v: Vec<u8>,
}

impl Deref for StrMut<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.v
    }
}

impl DerefMut for StrMut<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.v
    }
}

impl Drop for StrMut<'_> {
    fn drop(&mut self) {
        *self.s = Str::from_vec(std::mem::take(&mut self.v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_by_length() {
        assert!(matches!(Str::copy_from_slice(b"v1").0, Repr::Inline { .. }));
        assert!(matches!(
            Str::copy_from_slice(&[7; INLINE]).0,
            Repr::Inline { .. }
        ));
        assert!(matches!(
            Str::copy_from_slice(&[7; INLINE + 1]).0,
            Repr::Heap(_)
        ));
        assert!(!Str::copy_from_slice(&[7; SHARE_MIN - 1]).is_shared());
        let big = Str::copy_from_slice(&[7; SHARE_MIN]);
        assert!(big.is_shared());
        assert_eq!(&big.to_bytes()[..], &[7; SHARE_MIN][..]);
    }

    #[test]
    fn a_shared_buffer_is_the_same_memory() {
        let s = Str::from_vec(vec![3; 100_000]);
        let a = s.to_bytes();
        let b = s.to_bytes();
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.as_ptr(), s.as_bytes().as_ptr());
    }

    #[test]
    fn writing_after_a_reply_copies_and_the_reply_keeps_its_bytes() {
        let mut s = Str::from_vec(vec![1; 5000]);
        let reply = s.to_bytes();
        s.make_mut()[0] = 9;
        assert_eq!(reply[0], 1);
        assert_eq!(s[0], 9);
        assert_eq!(s.len(), 5000);
        assert!(s.is_shared());
        drop(reply);
        // With no other holder, the buffer is reused in place.
        let p = s.as_bytes().as_ptr();
        let mut m = s.make_mut();
        m[1] = 8;
        assert_eq!(m.as_ptr(), p);
        drop(m);
        assert_eq!(s[1], 8);
        assert_eq!(s.as_bytes().as_ptr(), p);
    }

    #[test]
    fn edits_in_place_keep_the_form_and_copy_only_a_held_buffer() {
        for len in [3, INLINE + 5, 5000, EDIT_AS_VEC_MAX + 1] {
            let mut s = Str::from_vec(vec![1; len]);
            let shared = s.is_shared();
            let before = s.as_bytes().as_ptr();
            assert_eq!(
                s.edit_in_place(|b| std::mem::replace(&mut b[len - 1], 7)),
                1
            );
            assert_eq!(s.len(), len);
            assert_eq!(s[len - 1], 7);
            // Inline and Vec strings keep their form; a shared one of an HLL's size moves to a
            // Vec, its buffer reused.
            assert_eq!(s.is_shared(), shared && len > EDIT_AS_VEC_MAX);
            if len > INLINE {
                assert_eq!(s.as_bytes().as_ptr(), before, "written where it lies");
            }
        }
        // A buffer a reply holds is copied; the reply keeps its bytes.
        for len in [5000, EDIT_AS_VEC_MAX + 1] {
            let mut s = Str::from_vec(vec![1; len]);
            let reply = s.to_bytes();
            s.edit_in_place(|b| b[0] = 9);
            assert_eq!((reply[0], s[0]), (1, 9));
            assert_ne!(reply.as_ptr(), s.as_bytes().as_ptr());
            assert_eq!(s.is_shared(), len > EDIT_AS_VEC_MAX);
            assert_eq!(s.allocated(), len, "exactly the bytes, as before the edit");
        }
        let mut s = Str::from_vec(vec![1; 5000]);
        // A panicking edit leaves the bytes it saw.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.edit_in_place(|b| {
                b[1] = 5;
                panic!("edit");
            })
        }));
        assert!(caught.is_err());
        assert_eq!((s.len(), s[0], s[1]), (5000, 1, 5));
    }

    #[test]
    fn modifications_return_to_the_compact_form() {
        let mut s = Str::copy_from_slice(b"abc");
        s.make_mut().extend_from_slice(&[b'x'; INLINE]);
        assert!(matches!(s.0, Repr::Heap(_)));
        assert_eq!(s.len(), 3 + INLINE);
        s.make_mut().truncate(2);
        assert!(matches!(s.0, Repr::Inline { .. }));
        assert_eq!(&s[..], b"ab");
        assert_eq!(s, Str::from_vec(b"ab".to_vec()));
    }

    #[test]
    fn size() {
        assert_eq!(std::mem::size_of::<Str>(), 32);
    }
}
