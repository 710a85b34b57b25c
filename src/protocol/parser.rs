//! The request parser: bytes from a client's socket in, argument vectors out.
//!
//! # What it must match
//!
//! Redis reads two request shapes and tells them apart by the first byte of each request:
//!
//! * `*` starts a **multibulk** request: `*<count>\r\n` then `count` times `$<len>\r\n<len bytes>\r\n`.
//!   This is what every client library sends.
//! * anything else starts an **inline** request: one line ending at `\n`, split into words the way
//!   `redis-cli` and `telnet` users type them (`SET "a b" 'c d'`), with Redis's `sdssplitargs` quoting.
//!
//! hyperbloom must answer malformed input with the same bytes as Redis 7.0, so this file follows the
//! reference's observable behaviour exactly, including its quirks (all checked against a live
//! Redis 7.0.15; see `/work/shared/spec/clients.md` §1):
//!
//! * A count or length line runs to the first `\r`, and the byte after that `\r` is skipped without
//!   checking that it is `\n` (`*1\r\n$4\r\nPING\rX` is a valid PING). After bulk data, exactly two bytes
//!   are skipped unchecked.
//! * Numbers follow `string2ll`: optional `-`, no `+`, no leading zeros, at most 20 bytes. Counts above
//!   `i32::MAX` are refused; a count ≤ 0 (`*0`, `*-5`) is an empty request that gets no reply.
//! * Redis searches for the terminator with `strchr`, which stops at a NUL byte. So a NUL before the
//!   terminator does not end the line: the terminator is simply never found, and the request waits until
//!   more than 64 KiB are buffered, then fails with the "too big" error. (`PING\0\r\n` hangs on Redis
//!   7.0.15.) We reproduce that: a NUL "blocks" the line being searched.
//! * The "too big" errors fire only when no terminator is found *and* more than 65 536 bytes are buffered
//!   from the line's start; a terminator found first always wins. Which of the two errors a client gets
//!   for a >64 KiB line therefore depends on how the bytes arrived, exactly as in Redis.
//! * The byte shown in `expected '$', got 'X'` is sent raw, except `\r` and `\n`, which Redis's error
//!   formatter turns into spaces.
//! * While a client still has to authenticate, counts above 10 and bulks above 16 384 bytes are refused.
//!
//! # How it is built
//!
//! [`RequestParser`] is resumable: it consumes each piece of a multibulk request (count line, length
//! line, bulk data) from the front of the caller's `BytesMut` as soon as that piece is complete, and keeps
//! only a few integers of state. A request split across reads therefore costs no re-parsing; while a line
//! is incomplete it also remembers how far it has already searched for the terminator. Count and length
//! lines of the usual shape (1 to 9 digits) are read in a single pass; anything else takes the general
//! path, which implements every rule above. Bulk arguments are
//! split off the read buffer with `split_to(..).freeze()`, so no argument bytes are copied. Inline
//! arguments without quotes are slices of the frozen line; only quoted ones are rebuilt.
//!
//! Nothing is ever allocated from a length the client sent: the argument vector's initial capacity is
//! capped at 1024 entries, and while a large bulk arrives the read buffer is grown at most to double what
//! has actually been received.
//!
//! After a protocol error the parser's state is unspecified: the connection replies with the error and
//! closes, as Redis does, so it is never called again.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::CmdError;
pub use crate::numeric::parse_i64 as parse_strict_i64;

// ---------------------------------------------------------------------------------------------
// Limits and error texts
// ---------------------------------------------------------------------------------------------

/// Longest inline request, and longest count or length line (Redis `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX_SIZE: usize = 64 * 1024;
/// Default `proto-max-bulk-len`.
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Largest argument count accepted before authentication.
pub const UNAUTH_MAX_ARGS: i64 = 10;
/// Largest bulk accepted before authentication.
pub const UNAUTH_MAX_BULK: i64 = 16 * 1024;
/// Largest multibulk count (`INT_MAX` in Redis).
const MAX_MULTIBULK: i64 = i32::MAX as i64;
/// Cap on the argument vector reserved from a client-sent count; it grows past this as arguments arrive.
const MAX_ARGV_PREALLOC: usize = 1024;
/// Floor of the read-buffer growth step while a large bulk arrives.
const BULK_GROWTH_MIN: usize = 64 * 1024;

/// Multibulk count not an integer, or above `INT_MAX`.
pub const E_INVALID_MULTIBULK: &str = "ERR Protocol error: invalid multibulk length";
/// Bulk length not an integer, negative, or above `proto-max-bulk-len`.
pub const E_INVALID_BULK: &str = "ERR Protocol error: invalid bulk length";
/// No `\r` within 64 KiB of the count line's start.
pub const E_TOO_BIG_MBULK: &str = "ERR Protocol error: too big mbulk count string";
/// No `\r` within 64 KiB of a length line's start.
pub const E_TOO_BIG_BULK: &str = "ERR Protocol error: too big bulk count string";
/// No `\n` within 64 KiB of an inline request's start.
pub const E_TOO_BIG_INLINE: &str = "ERR Protocol error: too big inline request";
/// An inline request whose quotes `sdssplitargs` refuses.
pub const E_UNBALANCED_QUOTES: &str = "ERR Protocol error: unbalanced quotes in request";
/// A count above 10 before authentication.
pub const E_UNAUTH_MULTIBULK: &str = "ERR Protocol error: unauthenticated multibulk length";
/// A bulk above 16 384 bytes before authentication.
pub const E_UNAUTH_BULK: &str = "ERR Protocol error: unauthenticated bulk length";
/// Prefix of the error for an argument not starting with `$`; the offending byte and `'` follow.
const E_EXPECTED_DOLLAR_PREFIX: &str = "ERR Protocol error: expected '$', got '";

/// What the parser needs to know about the client and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParserLimits {
    /// `proto-max-bulk-len`: the largest accepted bulk argument (default 536870912).
    pub max_bulk_len: usize,
    /// False while a password is configured and the client has not authenticated yet; this turns on
    /// the 10-argument / 16 KiB-bulk limits. True when no password is configured.
    pub authenticated: bool,
}

impl Default for ParserLimits {
    fn default() -> Self {
        ParserLimits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            authenticated: true,
        }
    }
}

/// A malformed request. The connection sends it as an error reply, then closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    /// An argument that does not start with `$`; holds the byte found instead.
    ExpectedDollar(u8),
    TooBigMbulkCount,
    TooBigBulkCount,
    TooBigInline,
    UnbalancedQuotes,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    fn fixed_text(&self) -> Option<&'static str> {
        Some(match self {
            ProtocolError::InvalidMultibulkLength => E_INVALID_MULTIBULK,
            ProtocolError::InvalidBulkLength => E_INVALID_BULK,
            ProtocolError::ExpectedDollar(_) => return None,
            ProtocolError::TooBigMbulkCount => E_TOO_BIG_MBULK,
            ProtocolError::TooBigBulkCount => E_TOO_BIG_BULK,
            ProtocolError::TooBigInline => E_TOO_BIG_INLINE,
            ProtocolError::UnbalancedQuotes => E_UNBALANCED_QUOTES,
            ProtocolError::UnauthenticatedMultibulkLength => E_UNAUTH_MULTIBULK,
            ProtocolError::UnauthenticatedBulkLength => E_UNAUTH_BULK,
        })
    }

    /// The exact bytes of the error text (what follows the `-` of the reply line). Unlike
    /// [`Display`](fmt::Display), this keeps a non-ASCII byte in `expected '$', got 'X'` raw, as Redis
    /// sends it.
    pub fn text_bytes(&self) -> Vec<u8> {
        match self {
            ProtocolError::ExpectedDollar(b) => {
                let mut v = Vec::with_capacity(E_EXPECTED_DOLLAR_PREFIX.len() + 2);
                v.extend_from_slice(E_EXPECTED_DOLLAR_PREFIX.as_bytes());
                v.push(shown_byte(*b));
                v.push(b'\'');
                v
            }
            other => other.fixed_text().unwrap_or_default().as_bytes().to_vec(),
        }
    }

    /// The error as a command error, for the connection's reply path. `CmdError` holds UTF-8 text, so
    /// a non-ASCII byte in `expected '$', got 'X'` is rendered as the Latin-1 character of that byte
    /// (two bytes in UTF-8); use [`text_bytes`](Self::text_bytes) where the exact byte matters.
    pub fn to_cmd_error(&self) -> CmdError {
        match self.fixed_text() {
            Some(s) => CmdError::Static(s),
            None => CmdError::Owned(self.to_string()),
        }
    }
}

/// Redis's error formatter replaces CR and LF by spaces so the reply line stays one line.
fn shown_byte(b: u8) -> u8 {
    match b {
        b'\r' | b'\n' => b' ',
        b => b,
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::ExpectedDollar(b) => {
                write!(
                    f,
                    "{E_EXPECTED_DOLLAR_PREFIX}{}'",
                    char::from(shown_byte(*b))
                )
            }
            other => f.write_str(other.fixed_text().unwrap_or_default()),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<ProtocolError> for CmdError {
    fn from(e: ProtocolError) -> Self {
        e.to_cmd_error()
    }
}

// ---------------------------------------------------------------------------------------------
// The parser
// ---------------------------------------------------------------------------------------------

/// Outcome of searching a buffer for a line terminator.
enum Scan {
    /// The terminator is at this index.
    Found(usize),
    /// Not in the bytes buffered so far.
    NotYet,
    /// A NUL came first: C's `strchr` would never find the terminator (see the module essay).
    Blocked,
}

/// A resumable parser for one connection's request stream.
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments still to read in the current multibulk request; 0 between requests.
    remaining: usize,
    /// Length of the bulk being read, once its `$` line has been consumed.
    bulk_len: Option<usize>,
    /// Arguments of the current multibulk request read so far.
    args: Vec<Bytes>,
    /// Bytes at the front of the buffer already searched for the current line's terminator.
    scanned: usize,
    /// A NUL was found before the current line's terminator.
    blocked: bool,
    /// Scratch for [`fast_request`](Self::fast_request): the argument ranges of the request being
    /// checked, kept to reuse its capacity.
    ranges: Vec<(usize, usize)>,
}

impl RequestParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no request is partly parsed (nothing is held between calls).
    pub fn is_idle(&self) -> bool {
        self.remaining == 0 && self.scanned == 0 && !self.blocked
    }

    /// Takes the next complete request from the front of `buf`, consuming its bytes.
    ///
    /// * `Ok(Some(argv))`: one request, `argv[0]` being the command name; never empty.
    /// * `Ok(None)`: `buf` holds no complete request yet (its partial bytes may have been consumed into
    ///   the parser's state); call again when more bytes arrived.
    /// * `Err(e)`: a protocol error; reply with it and close the connection.
    ///
    /// Empty requests (`*0`, `*-5`, blank inline lines) are consumed silently and parsing continues with
    /// the next one.
    pub fn next_request(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut argv = Vec::new();
        if self.fast_request(buf, limits, &mut argv) {
            return Ok(Some(argv));
        }
        self.general_request(buf, limits)
    }

    /// Like [`next_request`](Self::next_request), but appends the request's arguments to `out` (a
    /// batch's flat argument list) and returns how many it appended (0: no complete request yet).
    /// The usual request then costs no allocation at all: the arguments are slices of one frozen
    /// piece of `buf`, pushed into a vector the caller reuses from batch to batch.
    pub fn next_request_into(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
        out: &mut Vec<Bytes>,
    ) -> Result<usize, ProtocolError> {
        let before = out.len();
        if self.fast_request(buf, limits, out) {
            return Ok(out.len() - before);
        }
        match self.general_request(buf, limits)? {
            Some(argv) => {
                out.extend(argv);
                Ok(out.len() - before)
            }
            None => Ok(0),
        }
    }

    /// The common case in one pass: between requests, a whole multibulk request already buffered,
    /// every count and length line of the shape [`fast_line`] reads and within the limits. Then the
    /// request is split off `buf` once, frozen, and each argument is a slice of it. Anything else
    /// (partial input, `$0`, limits, errors) returns false with nothing consumed, and the general
    /// path gives the answer, so the two paths always agree (tested by `fast_path_agrees`).
    ///
    /// A request that is not complete yet costs one scan of what has arrived; the general path then
    /// consumes it piece by piece, so the parser is no longer idle and this is not retried for it.
    fn fast_request(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
        out: &mut Vec<Bytes>,
    ) -> bool {
        if !self.is_idle() {
            return false;
        }
        let b: &[u8] = buf;
        let Some((mut pos, count)) = fast_line(b, b'*') else {
            return false;
        };
        if !limits.authenticated && count > UNAUTH_MAX_ARGS as usize {
            return false;
        }
        let max_bulk = if limits.authenticated {
            limits.max_bulk_len
        } else {
            limits.max_bulk_len.min(UNAUTH_MAX_BULK as usize)
        };
        self.ranges.clear();
        for _ in 0..count {
            let Some((header, len)) = b.get(pos..).and_then(|rest| fast_line(rest, b'$')) else {
                return false;
            };
            if len > max_bulk {
                return false;
            }
            let start = pos + header;
            // Data plus the two unchecked bytes after it must be here.
            if b.len() - start < len + 2 {
                return false;
            }
            self.ranges.push((start, start + len));
            pos = start + len + 2;
        }
        let mut frame = buf.split_to(pos).freeze();
        // `count` ≥ 1 (fast_line reads no leading zero), so there is a last argument: it is the
        // frame itself, cut down, instead of one more slice of it. Each slice takes a reference
        // on the buffer and each drop gives one back; this saves a pair per request.
        if let Some((&(start, end), rest)) = self.ranges.split_last() {
            out.extend(rest.iter().map(|&(s, e)| frame.slice(s..e)));
            frame.truncate(end);
            frame.advance(start);
            out.push(frame);
        }
        true
    }

    /// The resumable path: any shape, any split, every error.
    fn general_request(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        // Defensive: `scanned` indexes the front of the buffer, which only this parser consumes.
        if self.scanned > buf.len() {
            self.scanned = 0;
            self.blocked = false;
        }
        loop {
            if self.remaining == 0 {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first == b'*' {
                    let count = match fast_line(buf, b'*') {
                        Some((header, n))
                            if limits.authenticated || n <= UNAUTH_MAX_ARGS as usize =>
                        {
                            buf.advance(header);
                            self.scanned = 0;
                            n as i64
                        }
                        _ => match self.count_line(buf, limits)? {
                            Some(count) => count,
                            None => return Ok(None),
                        },
                    };
                    if count <= 0 {
                        continue; // empty request: no reply
                    }
                    // `count` ≤ i32::MAX, so this fits in usize on every supported target.
                    let count = count as usize;
                    self.remaining = count;
                    self.args = Vec::with_capacity(count.min(MAX_ARGV_PREALLOC));
                } else {
                    match self.inline(buf)? {
                        None => return Ok(None),
                        Some(argv) if argv.is_empty() => continue,
                        Some(argv) => return Ok(Some(argv)),
                    }
                }
            }
            while self.remaining > 0 {
                let len = match self.bulk_len {
                    Some(len) => len,
                    None => match fast_line(buf, b'$') {
                        Some((header, len))
                            if len <= limits.max_bulk_len
                                && (limits.authenticated || len <= UNAUTH_MAX_BULK as usize) =>
                        {
                            buf.advance(header);
                            self.scanned = 0;
                            len
                        }
                        _ => match self.length_line(buf, limits)? {
                            Some(len) => len,
                            None => return Ok(None),
                        },
                    },
                };
                let need = len.saturating_add(2);
                if buf.len() < need {
                    self.bulk_len = Some(len);
                    // Grow towards the announced size, but never past twice what has arrived: the
                    // length is the client's word, the received bytes are not.
                    let missing = need - buf.len();
                    if missing > buf.capacity() - buf.len() {
                        buf.reserve(missing.min(buf.len().max(BULK_GROWTH_MIN)));
                    }
                    return Ok(None);
                }
                self.bulk_len = None;
                let arg = buf.split_to(len).freeze();
                buf.advance(2); // the two bytes after the data are not checked, as in Redis
                self.args.push(arg);
                self.remaining -= 1;
            }
            return Ok(Some(std::mem::take(&mut self.args)));
        }
    }

    /// Searches `buf` for `needle` (or a blocking NUL), resuming where the last call stopped.
    #[inline]
    fn scan(&mut self, buf: &[u8], needle: u8) -> Scan {
        if self.blocked {
            return Scan::Blocked;
        }
        let from = self.scanned;
        let hay = &buf[from..];
        // Count and length lines are a handful of bytes, as are most inline commands: a plain loop over
        // the first few bytes beats memchr's setup there; memchr takes over for long lines.
        let quick = hay.len().min(16);
        let hit = match hay[..quick].iter().position(|&b| b == needle || b == 0) {
            Some(i) => Some(i),
            None => memchr::memchr2(needle, 0, &hay[quick..]).map(|i| i + quick),
        };
        match hit {
            Some(i) if hay[i] == 0 => {
                self.blocked = true;
                Scan::Blocked
            }
            Some(i) => {
                self.scanned = from + i;
                Scan::Found(from + i)
            }
            None => {
                self.scanned = buf.len();
                Scan::NotYet
            }
        }
    }

    /// Finds a complete count or length line: its `\r` plus the unchecked byte after it. Returns the
    /// index of the `\r`, `Ok(None)` to wait, or `too_big` once 64 KiB are buffered without one.
    #[inline]
    fn line_end(
        &mut self,
        buf: &[u8],
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        match self.scan(buf, b'\r') {
            // Redis also wants the byte after the `\r` in the buffer before using the line.
            Scan::Found(cr) if cr + 1 < buf.len() => Ok(Some(cr)),
            Scan::Found(_) => Ok(None),
            Scan::NotYet | Scan::Blocked if buf.len() > INLINE_MAX_SIZE => Err(too_big),
            Scan::NotYet | Scan::Blocked => Ok(None),
        }
    }

    /// Consumes a `*<count>` line. `Ok(None)`: incomplete.
    fn count_line(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
    ) -> Result<Option<i64>, ProtocolError> {
        let Some(cr) = self.line_end(buf, ProtocolError::TooBigMbulkCount)? else {
            return Ok(None);
        };
        let count = match parse_strict_i64(&buf[1..cr]) {
            Some(n) if n <= MAX_MULTIBULK => n,
            _ => return Err(ProtocolError::InvalidMultibulkLength),
        };
        if count > UNAUTH_MAX_ARGS && !limits.authenticated {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        buf.advance(cr + 2);
        self.scanned = 0;
        Ok(Some(count))
    }

    /// Consumes a `$<len>` line. `Ok(None)`: incomplete.
    fn length_line(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        let Some(cr) = self.line_end(buf, ProtocolError::TooBigBulkCount)? else {
            return Ok(None);
        };
        // Redis looks at the `$` only once the whole line is there.
        if buf[0] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[0]));
        }
        let len = parse_strict_i64(&buf[1..cr])
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= limits.max_bulk_len)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if len > UNAUTH_MAX_BULK as usize && !limits.authenticated {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        buf.advance(cr + 2);
        self.scanned = 0;
        Ok(Some(len))
    }

    /// Consumes one inline line and splits it. `Ok(None)`: incomplete. An empty vector: a blank line.
    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let nl = match self.scan(buf, b'\n') {
            Scan::Found(nl) => nl,
            Scan::NotYet | Scan::Blocked if buf.len() > INLINE_MAX_SIZE => {
                return Err(ProtocolError::TooBigInline)
            }
            Scan::NotYet | Scan::Blocked => return Ok(None),
        };
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        // Consumed before splitting: after an error the connection closes, so nothing is lost.
        let line = buf.split_to(nl + 1).freeze();
        self.scanned = 0;
        let mut argv = Vec::new();
        split_args_into(&line[..end], &mut argv, |a| match a {
            Arg::Slice(start, stop) => line.slice(start..stop),
            Arg::Owned(v) => Bytes::from(v),
        })?;
        Ok(Some(argv))
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers and inline splitting
// ---------------------------------------------------------------------------------------------

/// The common case of a count or length line, read in one pass: `prefix`, 1 to 9 digits without a
/// leading zero, `\r`, and the byte after it all present. Returns the line's length including those two
/// bytes, and the number. Anything else (`0`, negatives, long or partial lines, errors) returns `None`
/// and goes through the general path, which gives the same answer for these lines.
#[inline(always)]
fn fast_line(buf: &[u8], prefix: u8) -> Option<(usize, usize)> {
    if buf.first() != Some(&prefix) || !matches!(buf.get(1), Some(b'1'..=b'9')) {
        return None;
    }
    let mut n: usize = 0;
    let mut i = 1;
    while let Some(&d) = buf.get(i) {
        if !d.is_ascii_digit() {
            break;
        }
        // At most 9 digits: below 10^9, so no overflow even with a 32-bit usize, and within i32::MAX.
        if i > 9 {
            return None;
        }
        n = n * 10 + usize::from(d - b'0');
        i += 1;
    }
    if buf.get(i) == Some(&b'\r') && buf.len() > i + 1 {
        Some((i + 2, n))
    } else {
        None
    }
}

/// One inline argument: a range of the line when it had no quotes, else rebuilt bytes.
#[derive(Debug, PartialEq, Eq)]
enum Arg {
    Slice(usize, usize),
    Owned(Vec<u8>),
}

/// C `isspace` in the C locale: what `sdssplitargs` skips between arguments and accepts after a
/// closing quote.
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline line into arguments with Redis's `sdssplitargs` rules (see the module essay and
/// clients.md §1.3). Public for tests and tools; the parser uses the zero-copy variant.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    // The line is a C string to `sdssplitargs`: a NUL ends it. (The parser never passes one, since a
    // NUL blocks the line search.)
    let line = &line[..memchr::memchr(0, line).unwrap_or(line.len())];
    let mut args = Vec::new();
    split_args_into(line, &mut args, |a| match a {
        Arg::Slice(s, e) => line[s..e].to_vec(),
        Arg::Owned(v) => v,
    })?;
    Ok(args)
}

/// The `sdssplitargs` loop over a line holding no NUL; each argument is turned into a `T` by `make`.
fn split_args_into<T>(
    line: &[u8],
    args: &mut Vec<T>,
    make: impl Fn(Arg) -> T,
) -> Result<(), ProtocolError> {
    let n = line.len();
    let mut p = 0;
    loop {
        while p < n && is_c_space(line[p]) {
            p += 1;
        }
        if p >= n {
            return Ok(());
        }
        // The unquoted run; an unquoted token ends only at space, tab, CR, LF (or the end).
        let start = p;
        while p < n && !matches!(line[p], b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'') {
            p += 1;
        }
        if p >= n || !matches!(line[p], b'"' | b'\'') {
            args.push(make(Arg::Slice(start, p)));
            if p < n {
                p += 1; // the separator
            }
            continue;
        }
        // A quoted section, possibly after an unquoted prefix (`a"b c"` is `ab c`). It ends the token.
        let mut cur = line[start..p].to_vec();
        let quote = line[p];
        p += 1;
        loop {
            let Some(&c) = line.get(p) else {
                return Err(ProtocolError::UnbalancedQuotes); // never closed
            };
            if c == quote {
                // The closing quote must be followed by a blank or the end of the line.
                if line.get(p + 1).is_some_and(|&b| !is_c_space(b)) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                p += 1;
                break;
            }
            if c == b'\\' && p + 1 < n {
                let e = line[p + 1];
                if quote == b'"' {
                    if e == b'x' {
                        if let (Some(h), Some(l)) = (
                            line.get(p + 2).copied().and_then(hex_value),
                            line.get(p + 3).copied().and_then(hex_value),
                        ) {
                            cur.push(h * 16 + l);
                            p += 4;
                            continue;
                        }
                    }
                    cur.push(match e {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    p += 2;
                    continue;
                } else if e == b'\'' {
                    cur.push(b'\'');
                    p += 2;
                    continue;
                }
            }
            cur.push(c);
            p += 1;
        }
        args.push(make(Arg::Owned(cur)));
    }
}

#[cfg(test)]
mod tests;
