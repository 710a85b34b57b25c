//! The reply model and its RESP2/RESP3 encoder.
//!
//! Handlers return a [`Reply`] that says what they mean (a map, a boolean, a null) and the connection
//! encodes it for the protocol it negotiated, making the same downgrades Redis makes for RESP2:
//! maps become flat arrays, sets become arrays, nulls become `$-1` or `*-1`, booleans become `:1`/`:0`,
//! doubles become bulk strings and verbatim strings become bulk strings.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::CmdError;
use crate::numeric::double_text;
use crate::numeric::int::write_i64;

/// One reply, in the shape of RESP3.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`: a status line. Must not contain CR or LF.
    Status(&'static str),
    /// A status line with a text computed at run time (e.g. TYPE).
    StatusOwned(Bytes),
    /// `-ERR ...`
    Error(CmdError),
    /// `:n`
    Int(i64),
    /// `$n\r\n...`
    Bulk(Bytes),
    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// The null array: `*-1` in RESP2, `_` in RESP3.
    NullArray,
    /// `*n`
    Array(Vec<Reply>),
    /// `%n` in RESP3; a flat array of 2n elements in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// `~n` in RESP3; an array in RESP2.
    Set(Vec<Reply>),
    /// `#t`/`#f` in RESP3; `:1`/`:0` in RESP2.
    Bool(bool),
    /// An array of `len` (≤ 64) booleans, bit `i` of `bits` the `i`-th: the same bytes as an
    /// [`Reply::Array`] of [`Reply::Bool`]s. BF.MADD and friends answer so without a vector to
    /// build, walk and free (issue 15: a 10-item BF.MADD spent ~1,200 of its ~14,700
    /// instructions on its array of ten `Reply::Bool`s).
    Bools { bits: u64, len: u8 },
    /// `,d` in RESP3; a bulk string in RESP2. Formatted like Redis's `%.17g` via [`double_text`](crate::numeric::double_text).
    Double(f64),
    /// `=n\r\ntxt:...` in RESP3; a bulk string in RESP2.
    Verbatim(Bytes),
    /// `>n` in RESP3; an array in RESP2: the out-of-band frames of pub/sub (subscription
    /// confirmations, messages) and client-side caching invalidations.
    Push(Vec<Reply>),
    /// Several replies written one after the other for one command: (P|S)(UN)SUBSCRIBE answer with
    /// one frame per channel. Inside EXEC's array it still counts as one element, as in Redis.
    Seq(Vec<Reply>),
    /// Pre-encoded bytes, written as they are whatever the protocol (used for EXEC's queued replies
    /// and for golden tests). Use sparingly.
    Raw(Bytes),
}

pub const OK: Reply = Reply::Status("OK");

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status("OK")
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn opt_bulk(b: Option<Bytes>) -> Reply {
        match b {
            Some(b) => Reply::Bulk(b),
            None => Reply::Null,
        }
    }

    pub fn error(e: impl Into<CmdError>) -> Reply {
        Reply::Error(e.into())
    }

    /// An array of booleans: [`Reply::Bools`] when there are at most 64 of them, else an
    /// [`Reply::Array`] of [`Reply::Bool`]s (the same bytes either way).
    pub fn bools(items: impl ExactSizeIterator<Item = bool>) -> Reply {
        if items.len() <= 64 {
            let len = items.len() as u8;
            let bits = items
                .enumerate()
                .fold(0u64, |acc, (i, b)| acc | (b as u64) << i);
            Reply::Bools { bits, len }
        } else {
            Reply::Array(items.map(Reply::Bool).collect())
        }
    }

    /// Drops a reply that has been encoded. The variants most commands answer with own nothing,
    /// and for them this skips the out-of-line `drop_in_place::<Reply>` (a recursive function:
    /// seven register saves and restores around a jump table, ~27 instructions per reply at
    /// `-P 1`, callgrind, issue 15).
    #[inline(always)]
    pub fn discard(self) {
        match self {
            Reply::Status(_)
            | Reply::Int(_)
            | Reply::Null
            | Reply::NullArray
            | Reply::Bool(_)
            | Reply::Bools { .. }
            | Reply::Double(_) => std::mem::forget(self),
            owning => drop(owning),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Encodes the reply for a connection speaking protocol `proto` (2 or 3).
    pub fn encode(&self, proto: u8, out: &mut BytesMut) {
        let resp3 = proto >= 3;
        match self {
            Reply::Status(s) => {
                out.put_u8(b'+');
                out.put_slice(s.as_bytes());
                out.put_slice(b"\r\n");
            }
            Reply::StatusOwned(s) => {
                out.put_u8(b'+');
                out.put_slice(s);
                out.put_slice(b"\r\n");
            }
            Reply::Error(e) => {
                out.put_u8(b'-');
                out.put_slice(&e.to_bytes());
                out.put_slice(b"\r\n");
            }
            Reply::Int(n) => put_int_line(out, b':', *n),
            Reply::Bulk(b) => put_bulk(out, b),
            Reply::Null => {
                if resp3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"$-1\r\n")
                }
            }
            Reply::NullArray => {
                if resp3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"*-1\r\n")
                }
            }
            Reply::Array(items) => {
                put_header(out, b'*', items.len());
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Set(items) => {
                put_header(out, if resp3 { b'~' } else { b'*' }, items.len());
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    put_header(out, b'%', pairs.len());
                } else {
                    put_header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Bool(b) => {
                if resp3 {
                    out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::Bools { bits, len } => {
                put_header(out, b'*', *len as usize);
                out.reserve(*len as usize * 4);
                let (yes, no) = if resp3 {
                    (b"#t\r\n", b"#f\r\n")
                } else {
                    (b":1\r\n", b":0\r\n")
                };
                for i in 0..*len {
                    out.put_slice(if bits >> i & 1 != 0 { yes } else { no });
                }
            }
            Reply::Double(d) => {
                let text = double_text(*d);
                if resp3 {
                    out.put_u8(b',');
                    out.put_slice(text.as_bytes());
                    out.put_slice(b"\r\n");
                } else {
                    put_bulk(out, text.as_bytes());
                }
            }
            Reply::Verbatim(b) => {
                if resp3 {
                    put_header(out, b'=', b.len() + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(b);
                    out.put_slice(b"\r\n");
                } else {
                    put_bulk(out, b);
                }
            }
            Reply::Push(items) => {
                put_header(out, if resp3 { b'>' } else { b'*' }, items.len());
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Seq(items) => {
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Raw(b) => out.put_slice(b),
        }
    }

    /// Convenience for tests: the encoded bytes.
    pub fn to_bytes(&self, proto: u8) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

impl From<CmdError> for Reply {
    fn from(e: CmdError) -> Self {
        Reply::Error(e)
    }
}

/// `<prefix><n>\r\n` as one copy from a stack buffer. 0 to 9 — BF.ADD's, BF.MADD's, CF.EXISTS's,
/// EXISTS's and DEL's usual answers — skip the digit loop.
#[inline]
pub(crate) fn put_int_line(out: &mut impl BufMut, prefix: u8, n: i64) {
    if (0..10).contains(&n) {
        out.put_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
        return;
    }
    // prefix, up to 20 bytes of `-` and digits, CRLF.
    let mut line = [0u8; 23];
    line[21] = b'\r';
    line[22] = b'\n';
    let start = write_i64(&mut line, 21, n) - 1;
    line[start] = prefix;
    out.put_slice(&line[start..]);
}

/// An aggregate or bulk header: `<prefix><len>\r\n`. Lengths under 100 (nearly all of them) go
/// out as one small copy, not the digit loop and a `memcpy` call: every reply and every command
/// in the write stream (`engine::propagate`) passes here.
#[inline]
pub fn put_header(out: &mut impl BufMut, prefix: u8, len: usize) {
    if len < 10 {
        out.put_slice(&[prefix, b'0' + len as u8, b'\r', b'\n']);
    } else if len < 100 {
        out.put_slice(&[
            prefix,
            b'0' + (len / 10) as u8,
            b'0' + (len % 10) as u8,
            b'\r',
            b'\n',
        ]);
    } else {
        put_int_line(out, prefix, len as i64);
    }
}

/// `$n\r\n<b>\r\n`.
pub fn put_bulk(out: &mut impl BufMut, b: &[u8]) {
    put_header(out, b'$', b.len());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_downgrades() {
        let m = Reply::Map(vec![(Reply::bulk_str("a"), Reply::Int(1))]);
        assert_eq!(&m.to_bytes(2)[..], b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&m.to_bytes(3)[..], b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(&Reply::Null.to_bytes(2)[..], b"$-1\r\n");
        assert_eq!(&Reply::NullArray.to_bytes(2)[..], b"*-1\r\n");
        assert_eq!(&Reply::Null.to_bytes(3)[..], b"_\r\n");
        assert_eq!(&Reply::Bool(true).to_bytes(2)[..], b":1\r\n");
        assert_eq!(&Reply::Bool(false).to_bytes(3)[..], b"#f\r\n");
        assert_eq!(
            &Reply::Verbatim(Bytes::from("x")).to_bytes(3)[..],
            b"=5\r\ntxt:x\r\n"
        );
        for proto in [2, 3] {
            for n in [0usize, 1, 10, 64, 65] {
                let v: Vec<bool> = (0..n).map(|i| i % 3 == 1 || i == 63).collect();
                let array = Reply::Array(v.iter().map(|&b| Reply::Bool(b)).collect());
                assert_eq!(
                    Reply::bools(v.iter().copied()).to_bytes(proto),
                    array.to_bytes(proto),
                    "{n} booleans, RESP{proto}"
                );
            }
        }
        assert_eq!(
            &Reply::Int(i64::MIN).to_bytes(2)[..],
            b":-9223372036854775808\r\n"
        );
    }
}
