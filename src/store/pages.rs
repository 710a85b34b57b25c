//! Paged byte arrays as their readers see them: one [`Page`] at a time, never the whole array.
//!
//! Bloom links and cuckoo sub-filters keep their bytes in copy-on-write pages, and a page that was
//! never written is not allocated at all (it reads as zeros). Anything that must walk the whole
//! array — the RDB writer behind SAVE, BGSAVE and DUMP, and later the AOF rewrite and the
//! replication full sync — takes an iterator of [`Page`]s, so it can hold one page at a time and
//! write a never-allocated page straight from the shared [`ZEROS`] instead of materialising it.
//! The iterators are `Clone`, so a writer that needs two passes (LZF needs the compressed length
//! before the bytes) walks the pages twice rather than gathering them.

/// A read-only page of zeros, shared by every never-written page.
pub static ZEROS: [u8; ZEROS_LEN] = [0; ZEROS_LEN];
/// Length of [`ZEROS`]; no page is longer, so a zero page is always one slice of it.
pub const ZEROS_LEN: usize = 64 * 1024;

/// One page of a paged byte array, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page<'a> {
    /// `n` bytes that were never written: all zeros, nothing allocated (`n ≤ ZEROS_LEN`).
    Zeros(usize),
    /// Bytes held in an allocated page.
    Bytes(&'a [u8]),
}

impl<'a> Page<'a> {
    /// The page's length in bytes.
    #[allow(clippy::len_without_is_empty)] // a page is never empty
    pub fn len(&self) -> usize {
        match self {
            Page::Zeros(n) => *n,
            Page::Bytes(b) => b.len(),
        }
    }

    /// The page's bytes; a zero page borrows [`ZEROS`].
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            Page::Zeros(n) => &ZEROS[..n.min(ZEROS_LEN)],
            Page::Bytes(b) => b,
        }
    }

    /// True for a never-written page.
    pub fn is_zeros(&self) -> bool {
        matches!(self, Page::Zeros(_))
    }
}
