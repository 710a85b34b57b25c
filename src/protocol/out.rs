//! A connection's pending output: encoded bytes plus shared buffers, in order.
//!
//! A reply is encoded while the keyspace lock is held (the connection runs a whole batch under
//! one lock). Copying a large value into the output buffer there would make every other client
//! wait for the copy: 200 clients reading 8 MB values each made the next PING wait seconds (issue
//! 10 item 5). So a bulk string of at least [`SHARE_MIN`] bytes is not copied: its [`Bytes`]
//! handle (which shares the stored value's buffer, `store::string`) is queued as a segment of its
//! own, and the socket writes it after the lock is released. Everything else is encoded into the
//! tail buffer as before, so the bytes on the wire are exactly those of [`Reply::encode`].
//!
//! ```text
//!   segs: [ "*2\r\n$8388608\r\n" ][ 8 MB shared value ][ "\r\n$-1\r\n" ]   tail: [ ... ]
//! ```
//! The writer takes [`OutBuf::front`] and [`OutBuf::advance`]s by what the socket accepted.

use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::reply::{put_header, Reply};

/// Bulk strings at least this long are queued as a handle instead of being copied.
pub const SHARE_MIN: usize = 16 * 1024;

/// Pending output (see the module docs).
#[derive(Debug, Default)]
pub struct OutBuf {
    /// Sealed segments, written before `tail`.
    segs: VecDeque<Bytes>,
    /// Bytes in `segs`.
    segs_len: usize,
    tail: BytesMut,
}

impl OutBuf {
    pub fn with_capacity(n: usize) -> OutBuf {
        OutBuf {
            segs: VecDeque::new(),
            segs_len: 0,
            tail: BytesMut::with_capacity(n),
        }
    }

    /// Appends `reply` encoded for protocol `proto`; long bulk strings are queued, not copied.
    pub fn push_reply(&mut self, reply: &Reply, proto: u8) {
        match reply {
            Reply::Bulk(b) if b.len() >= SHARE_MIN => {
                put_header(&mut self.tail, b'$', b.len());
                self.push_shared(b.clone());
                self.tail.put_slice(b"\r\n");
            }
            // MGET's array (`*` in both protocols).
            Reply::Array(items) if items.iter().any(has_long_bulk) => {
                put_header(&mut self.tail, b'*', items.len());
                for item in items {
                    self.push_reply(item, proto);
                }
            }
            other => other.encode(proto, &mut self.tail),
        }
    }

    /// Queues `b` after what is pending, without copying it.
    pub fn push_shared(&mut self, b: Bytes) {
        if !self.tail.is_empty() {
            let t = self.tail.split().freeze();
            self.segs_len += t.len();
            self.segs.push_back(t);
        }
        self.segs_len += b.len();
        self.segs.push_back(b);
    }

    /// The buffer that encoded bytes are appended to (pushes, error lines, WAIT's reply).
    pub fn tail_mut(&mut self) -> &mut BytesMut {
        &mut self.tail
    }

    /// Bytes pending in total.
    pub fn len(&self) -> usize {
        self.segs_len + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Memory this output holds: the encoding buffer's capacity plus the queued shared buffers
    /// (they belong to values, but this connection keeps them alive: CLIENT LIST `tot-mem`).
    pub fn capacity(&self) -> usize {
        self.tail.capacity() + self.segs_len
    }

    /// The next bytes to write: the first segment, or the tail.
    pub fn front(&self) -> &[u8] {
        match self.segs.front() {
            Some(b) => b,
            None => &self.tail,
        }
    }

    /// Drops the first `n` bytes of [`OutBuf::front`] (what a write accepted).
    pub fn advance(&mut self, n: usize) {
        match self.segs.front_mut() {
            Some(b) => {
                let n = n.min(b.len());
                b.advance(n);
                self.segs_len -= n;
                if b.is_empty() {
                    self.segs.pop_front();
                }
            }
            // All of the tail taken (nearly every write): clearing keeps the buffer's start, so
            // its capacity stays whole and the next reply needs no reserve to reclaim the front.
            None if n >= self.tail.len() => self.tail.clear(),
            None => self.tail.advance(n),
        }
    }

    /// Drops everything pending.
    pub fn clear(&mut self) {
        // Nearly always empty (only long bulk strings are queued): `VecDeque::clear` is an
        // out-of-line `truncate` even then, ~25 instructions a round at `-P 1` (callgrind).
        if !self.segs.is_empty() {
            self.segs.clear();
        }
        self.segs_len = 0;
        self.tail.clear();
    }

    /// Everything pending, copied into one buffer (tests).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        for s in &self.segs {
            v.extend_from_slice(s);
        }
        v.extend_from_slice(&self.tail);
        v
    }
}

fn has_long_bulk(r: &Reply) -> bool {
    matches!(r, Reply::Bulk(b) if b.len() >= SHARE_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replies() -> Vec<Reply> {
        let big = Bytes::from(vec![b'x'; SHARE_MIN + 5]);
        vec![
            Reply::Status("OK"),
            Reply::Bulk(big.clone()),
            Reply::Int(7),
            Reply::Array(vec![
                Reply::Null,
                Reply::Bulk(big.clone()),
                Reply::bulk_str("a"),
            ]),
            Reply::Array(vec![Reply::bulk_str("small")]),
            Reply::Bulk(Bytes::from_static(b"short")),
            Reply::Bulk(big),
        ]
    }

    #[test]
    fn same_bytes_as_encode_in_both_protocols() {
        for proto in [2, 3] {
            let mut out = OutBuf::with_capacity(16);
            let mut want = BytesMut::new();
            for r in replies() {
                out.push_reply(&r, proto);
                r.encode(proto, &mut want);
            }
            assert_eq!(out.len(), want.len());
            assert_eq!(out.to_vec(), want.to_vec());
            // Written the way the connection writes, in odd-sized pieces.
            let mut got = Vec::new();
            while !out.is_empty() {
                let f = out.front();
                let n = f.len().min(1000);
                got.extend_from_slice(&f[..n]);
                out.advance(n);
            }
            assert_eq!(got, want.to_vec());
        }
    }

    #[test]
    fn a_long_bulk_is_not_copied() {
        let big = Bytes::from(vec![1u8; 1 << 20]);
        let mut out = OutBuf::default();
        out.push_reply(&Reply::Bulk(big.clone()), 2);
        assert_eq!(out.front(), b"$1048576\r\n");
        out.advance(10);
        assert_eq!(out.front().as_ptr(), big.as_ptr());
        // Not copied into the encoding buffer.
        assert!(out.tail_mut().capacity() < 1024);
        assert!(out.capacity() >= 1 << 20);
    }
}
