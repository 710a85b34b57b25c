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

// ---------------------------------------------------------------------------------------------
// Reserved bytes
// ---------------------------------------------------------------------------------------------

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes reserved by live paged arrays and not (yet) allocated as pages, process-wide.
static RESERVED: AtomicU64 = AtomicU64::new(0);

/// Bytes that filters have reserved but not allocated. RedisBloom `calloc`s a filter whole at
/// creation, and Redis's `used_memory` counts it from that moment, so the server adds this to the
/// allocator's count for `used_memory` and the `maxmemory` check: a reservation commits memory
/// even while the kernel (or our paging) has not backed it yet.
pub fn reserved_bytes() -> u64 {
    RESERVED.load(Ordering::Relaxed)
}

/// The reserved-but-unallocated part of one paged array, kept in [`reserved_bytes`] while the
/// array lives. A clone counts again (COPY makes a second filter that may fill up); the copy a
/// snapshot holds is [`Reservation::uncount`]ed, since it only shares pages for the time of a
/// save, as Redis's forked child does outside `used_memory` (`store::keytable` hands the count
/// over when a write copies a segment a snapshot holds).
#[derive(Debug)]
pub struct Reservation {
    unbacked: u64,
    /// Atomic so that a copy a snapshot shares can be un-counted through `&` (a write copying a
    /// key table segment hands the counting over to its copy: `store::keytable`).
    counted: AtomicBool,
}

impl Reservation {
    /// `bytes` reserved, none allocated.
    pub fn new(bytes: u64) -> Reservation {
        RESERVED.fetch_add(bytes, Ordering::Relaxed);
        Reservation {
            unbacked: bytes,
            counted: AtomicBool::new(true),
        }
    }

    /// `n` of the reserved bytes were just allocated (a page was written for the first time):
    /// from now on the allocator counts them.
    pub fn backed(&mut self, n: u64) {
        let n = n.min(self.unbacked);
        self.unbacked -= n;
        if *self.counted.get_mut() {
            RESERVED.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Stops counting this reservation (the copy a snapshot holds). Through `&`: `unbacked`
    /// changes only through `&mut`, so it cannot move while this runs, and the swap makes the
    /// subtraction happen once.
    pub fn uncount(&self) {
        if self.counted.swap(false, Ordering::Relaxed) {
            RESERVED.fetch_sub(self.unbacked, Ordering::Relaxed);
        }
    }

    /// Reserved bytes not allocated.
    pub fn unbacked(&self) -> u64 {
        self.unbacked
    }
}

impl Clone for Reservation {
    fn clone(&self) -> Reservation {
        Reservation::new(self.unbacked)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if *self.counted.get_mut() {
            RESERVED.fetch_sub(self.unbacked, Ordering::Relaxed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Copy-on-write paged byte arrays
// ---------------------------------------------------------------------------------------------

/// Arrays of at most this many bytes are kept flat: one allocation, made (zeroed) at creation and
/// copied by a clone, instead of a page table and copy-on-write pages. A small filter is written by
/// its first add anyway, so the page table, its reservation and the `Arc` counts were pure
/// overhead on every small key (issue 15: a default cuckoo filter, 1024 bytes, paid 112 bytes of
/// bookkeeping in two more allocations). A snapshot copies a flat array whole, which for ≤ 4 KiB is
/// what a forked Redis child pays for one written kernel page.
pub const FLAT_MAX: u64 = 4096;

/// A zero-initialised byte array in copy-on-write pages; `None` pages read as zeroes. Cuckoo
/// sub-filters and count-min sketches keep their bytes in it; its never-written bytes are a
/// [`Reservation`], so `used_memory` and `maxmemory` count them as RedisBloom's `calloc` would.
/// Arrays of at most [`FLAT_MAX`] bytes are one allocated page (see there).
#[derive(Clone)]
pub struct PagedBytes(Repr);

#[derive(Clone)]
enum Repr {
    /// The whole array, allocated: one page of `len` bytes.
    Flat(Box<[u8]>),
    /// Larger arrays: a page table of copy-on-write pages.
    Paged(Box<Paged>),
}

/// One entry of a page table: `None` for a never-written page.
type PageSlot = Option<Arc<[u8]>>;

#[derive(Clone)]
struct Paged {
    len: u64,
    /// Bytes per page: a whole number of units (a cuckoo bucket, a CMS counter), at most the
    /// target given at creation. The last page may be shorter.
    page_len: u64,
    pages: Vec<Option<Arc<[u8]>>>,
    /// The bytes of never-written pages, counted as reserved memory (see `store::pages`).
    reserved: Reservation,
}

/// `len` zero bytes in one allocation, `None` when it fails.
pub(crate) fn zeroed_box(len: usize) -> Option<Box<[u8]>> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, 0);
    Some(v.into_boxed_slice())
}

impl PagedBytes {
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        match &self.0 {
            Repr::Flat(b) => b.len() as u64,
            Repr::Paged(p) => p.len,
        }
    }

    /// True for an empty array.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per page (the last page may be shorter: see [`PagedBytes::page_size`]). A flat
    /// array is one page of its whole length.
    pub fn page_len(&self) -> u64 {
        match &self.0 {
            Repr::Flat(b) => (b.len() as u64).max(1),
            Repr::Paged(p) => p.page_len,
        }
    }

    /// Number of pages.
    pub fn page_count(&self) -> usize {
        match &self.0 {
            Repr::Flat(b) => usize::from(!b.is_empty()),
            Repr::Paged(p) => p.pages.len(),
        }
    }

    /// Page `p`'s bytes when it was ever written; `None` for a never-written (all-zero) page.
    pub fn allocated_page(&self, p: usize) -> Option<&[u8]> {
        match &self.0 {
            Repr::Flat(b) => (p == 0 && !b.is_empty()).then_some(&b[..]),
            Repr::Paged(pg) => pg.pages.get(p)?.as_deref(),
        }
    }

    /// Memory of the page table itself (0 for a flat array).
    pub fn page_table_bytes(&self) -> u64 {
        match &self.0 {
            Repr::Flat(_) => 0,
            Repr::Paged(p) => (p.pages.len() * std::mem::size_of::<Option<Arc<[u8]>>>()) as u64,
        }
    }

    /// Stops counting the never-written bytes as reserved: for the copy a snapshot holds, which
    /// only shares pages for the time of a save (see [`Reservation::uncount`]).
    pub fn uncount_reservation(&self) {
        if let Repr::Paged(p) = &self.0 {
            p.reserved.uncount();
        }
    }

    /// A zeroed array of `len` bytes in pages of a whole number of `unit`-byte units, at most
    /// `target` (and at most [`ZEROS_LEN`]) bytes each. Allocates only the page table (or, up to
    /// [`FLAT_MAX`] bytes, the whole flat array); `None` when that allocation fails.
    pub fn zeroed(len: u64, unit: u64, target: usize) -> Option<PagedBytes> {
        if len <= FLAT_MAX {
            return zeroed_box(len as usize).map(|b| PagedBytes(Repr::Flat(b)));
        }
        let target = target.clamp(1, ZEROS_LEN) as u64;
        let unit = unit.clamp(1, target);
        let page_len = (target / unit) * unit;
        let count = usize::try_from(len.div_ceil(page_len)).ok()?;
        let mut pages = Vec::new();
        pages.try_reserve_exact(count).ok()?;
        pages.resize(count, None);
        Some(PagedBytes(Repr::Paged(Box::new(Paged {
            len,
            page_len,
            pages,
            reserved: Reservation::new(len),
        }))))
    }

    #[inline]
    pub fn page_size(&self, p: usize) -> usize {
        match &self.0 {
            Repr::Flat(b) => {
                if p == 0 {
                    b.len()
                } else {
                    0
                }
            }
            Repr::Paged(pg) => pg.page_size(p),
        }
    }

    /// `n` bytes from `off` when they lie in one page; `None` when they straddle or run past the end.
    #[inline]
    pub fn slice(&self, off: u64, n: usize) -> Option<&[u8]> {
        match &self.0 {
            Repr::Flat(b) => {
                let off = usize::try_from(off).ok()?;
                b.get(off..off.checked_add(n)?)
            }
            Repr::Paged(pg) => {
                let p = (off / pg.page_len) as usize;
                let w = (off % pg.page_len) as usize;
                let page = pg.pages.get(p)?;
                if w + n > pg.page_size(p) {
                    return None;
                }
                Some(match page {
                    Some(a) => &a[w..w + n],
                    None => &ZEROS[w..w + n],
                })
            }
        }
    }

    #[inline]
    pub fn get(&self, off: u64) -> u8 {
        self.slice(off, 1).map_or(0, |s| s[0])
    }

    /// The page holding `p`, materialised and unshared, ready to write.
    pub fn page_mut(&mut self, p: usize) -> &mut [u8] {
        match &mut self.0 {
            Repr::Flat(b) => &mut b[..],
            Repr::Paged(pg) => pg.page_mut(p),
        }
    }

    #[inline]
    pub fn set(&mut self, off: u64, v: u8) {
        match &mut self.0 {
            Repr::Flat(b) => {
                // Offsets the filter computes are in range; never panic on one that is not.
                if let Some(slot) = usize::try_from(off).ok().and_then(|o| b.get_mut(o)) {
                    *slot = v;
                }
            }
            Repr::Paged(pg) => {
                if off >= pg.len {
                    return;
                }
                let p = (off / pg.page_len) as usize;
                let w = (off % pg.page_len) as usize;
                if v == 0 && pg.pages[p].is_none() {
                    return;
                }
                pg.page_mut(p)[w] = v;
            }
        }
    }

    /// Copies `out.len()` bytes starting at `off` (caller checked the range).
    pub fn read_into(&self, mut off: u64, out: &mut [u8]) {
        let pg = match &self.0 {
            Repr::Flat(b) => {
                let off = off as usize;
                out.copy_from_slice(&b[off..off + out.len()]);
                return;
            }
            Repr::Paged(pg) => pg,
        };
        let mut done = 0;
        while done < out.len() {
            let p = (off / pg.page_len) as usize;
            let w = (off % pg.page_len) as usize;
            let n = (pg.page_size(p) - w).min(out.len() - done);
            match &pg.pages[p] {
                Some(a) => out[done..done + n].copy_from_slice(&a[w..w + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
            off += n as u64;
        }
    }

    /// Writes `data` at `off` (caller checked the range). All-zero data never materialises a page.
    pub fn write_from(&mut self, mut off: u64, data: &[u8]) {
        let pg = match &mut self.0 {
            Repr::Flat(b) => {
                let off = off as usize;
                b[off..off + data.len()].copy_from_slice(data);
                return;
            }
            Repr::Paged(pg) => pg,
        };
        let mut done = 0;
        while done < data.len() {
            let p = (off / pg.page_len) as usize;
            let w = (off % pg.page_len) as usize;
            let n = (pg.page_size(p) - w).min(data.len() - done);
            let src = &data[done..done + n];
            if pg.pages[p].is_some() || src.iter().any(|&b| b != 0) {
                pg.page_mut(p)[w..w + n].copy_from_slice(src);
            }
            done += n;
            off += n as u64;
        }
    }

    /// The pages in order, zero pages included, as borrowed slices.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.pages_ref().map(|p| p.bytes())
    }

    /// The pages in order, never-written ones as [`Page::Zeros`] (nothing allocated).
    pub fn pages_ref(&self) -> impl Iterator<Item = Page<'_>> + Clone + '_ {
        let (flat, paged): (Option<&[u8]>, &[PageSlot]) = match &self.0 {
            Repr::Flat(b) => ((!b.is_empty()).then_some(&b[..]), &[]),
            Repr::Paged(pg) => (None, &pg.pages[..]),
        };
        flat.into_iter()
            .map(Page::Bytes)
            .chain(paged.iter().enumerate().map(move |(p, page)| match page {
                Some(a) => Page::Bytes(&a[..]),
                None => Page::Zeros(self.page_size(p)),
            }))
    }

    /// Bytes actually allocated for page contents.
    pub fn resident(&self) -> u64 {
        match &self.0 {
            Repr::Flat(b) => b.len() as u64,
            Repr::Paged(pg) => pg.pages.iter().flatten().map(|a| a.len() as u64).sum(),
        }
    }
}

impl Paged {
    #[inline]
    fn page_size(&self, p: usize) -> usize {
        let start = p as u64 * self.page_len;
        (self.len.saturating_sub(start)).min(self.page_len) as usize
    }

    fn page_mut(&mut self, p: usize) -> &mut [u8] {
        let size = self.page_size(p);
        let slot = &mut self.pages[p];
        if slot.is_none() {
            self.reserved.backed(size as u64);
        }
        let arc = slot.get_or_insert_with(|| std::iter::repeat_n(0u8, size).collect());
        Arc::make_mut(arc)
    }
}

impl std::fmt::Debug for PagedBytes {
    /// Sizes only: a filter can hold gigabytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedBytes")
            .field("len", &self.len())
            .field("pages", &self.page_count())
            .field("resident", &self.resident())
            .finish()
    }
}

impl PartialEq for PagedBytes {
    /// Equal contents, whether a zero page is materialised or not.
    fn eq(&self, other: &PagedBytes) -> bool {
        self.len() == other.len() && self.iter().flatten().eq(other.iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Other tests create filters concurrently, so only this reservation's own figures are checked
    // here; tests/memory.rs checks the process-wide total through INFO.
    #[test]
    fn a_reservation_shrinks_as_it_is_backed() {
        let mut a = Reservation::new(1000);
        a.backed(300);
        assert_eq!(a.unbacked(), 700);
        a.backed(5000);
        assert_eq!(a.unbacked(), 0);
        let b = Reservation::new(10).clone();
        assert_eq!(b.unbacked(), 10);
    }
}
