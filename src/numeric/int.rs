//! Integers as Redis parses them.
//!
//! `parse_i64` is Redis's `string2ll`: an optional `-`, then `0` alone or a non-zero digit followed by
//! digits; no `+`, no leading zeros, no blanks, at most 20 bytes, within i64. The request parser uses
//! the same rules for its length headers, commands for every integer argument, and the store for
//! the `int` encoding test.

/// Redis's `string2ll`: an optional `-`, then `0` alone or a non-zero digit followed by digits; at most
/// 20 bytes; must fit in an i64. No `+`, no spaces, no leading zeros, no `-0`.
#[inline]
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            // v == 2^63 wraps to i64::MIN, which is the right answer.
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// A decimal u64 as `str::parse::<u64>` accepts it (an optional `+`, then at least one digit, no
/// overflow), without its UTF-8 check and generic parser: the AOF loader's `*N` and `$N` lengths,
/// two per argument (13 % of the instructions of replaying 1M SETs went to `str::parse`).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    let d = s.strip_prefix(b"+").unwrap_or(s);
    if d.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &c in d {
        let v = c.wrapping_sub(b'0');
        if v > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(v))?;
    }
    Some(n)
}

/// The decimal form of an integer in a stack buffer: the reply encoder and the write stream print
/// lengths and integers on every request, so no `format!` and no allocation.
pub struct Decimal {
    /// 20 bytes hold every u64 (20 digits) and every i64 (`-` and 19 digits).
    buf: [u8; 20],
    start: usize,
}

/// "00" to "99": [`write_u64`] writes two digits per division (the one-digit loop cost PFCOUNT's
/// 7-digit reply 94 instructions at `-P 1`, issue 15).
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `n` in decimal so that it ends just before `buf[end]`, and returns where it starts.
/// `buf[..end]` must have room for 20 digits when `n` can be that large (every caller's buffer
/// has; an index past it would panic, not write out of bounds).
#[inline]
pub fn write_u64(buf: &mut [u8], end: usize, n: u64) -> usize {
    let mut at = end;
    let mut v = n;
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + v as u8;
    }
    at
}

/// [`write_u64`] of an `i64`, with its `-`: needs room for 20 bytes.
#[inline]
pub fn write_i64(buf: &mut [u8], end: usize, n: i64) -> usize {
    let mut at = write_u64(buf, end, n.unsigned_abs());
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    at
}

impl Decimal {
    pub fn of_u64(n: u64) -> Decimal {
        let mut buf = [0; 20];
        let start = write_u64(&mut buf, 20, n);
        Decimal { buf, start }
    }

    pub fn of_i64(n: i64) -> Decimal {
        let mut buf = [0; 20];
        // At most 19 digits for a negative i64, so there is room for the sign.
        let start = write_i64(&mut buf, 20, n);
        Decimal { buf, start }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AOF loader's length parser accepts and refuses what `str::parse::<u64>` does.
    #[test]
    fn parse_u64_is_str_parse() {
        let cases: &[&[u8]] = &[
            b"",
            b"0",
            b"7",
            b"+7",
            b"+",
            b"-1",
            b"-0",
            b"00012",
            b"12a",
            b" 1",
            b"1 ",
            b"++1",
            b"18446744073709551615",
            b"18446744073709551616",
            b"99999999999999999999",
            b"+18446744073709551615",
            "\u{663}".as_bytes(),
            b"\xff1",
        ];
        for &c in cases {
            let want = std::str::from_utf8(c)
                .ok()
                .and_then(|s| s.parse::<u64>().ok());
            assert_eq!(parse_u64(c), want, "{:?}", String::from_utf8_lossy(c));
        }
    }

    #[test]
    fn decimal_edges() {
        for n in [0i64, 7, -7, 10, -10, i64::MAX, i64::MIN] {
            assert_eq!(Decimal::of_i64(n).as_bytes(), n.to_string().as_bytes());
        }
        for n in [0u64, 9, 10, u64::MAX] {
            assert_eq!(Decimal::of_u64(n).as_bytes(), n.to_string().as_bytes());
        }
    }

    /// Every digit count, and both sides of each power of ten (the pair loop's boundaries).
    #[test]
    fn decimal_is_to_string_at_every_length() {
        let mut p = 1u64;
        loop {
            for n in [p - 1, p, p + 1, p.saturating_mul(7) / 3] {
                assert_eq!(Decimal::of_u64(n).as_bytes(), n.to_string().as_bytes());
                let i = n as i64;
                assert_eq!(Decimal::of_i64(i).as_bytes(), i.to_string().as_bytes());
                assert_eq!(Decimal::of_i64(-i).as_bytes(), (-i).to_string().as_bytes());
            }
            match p.checked_mul(10) {
                Some(next) => p = next,
                None => break,
            }
        }
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"1.5"[..],
            b"+5",
            b"007",
            b"-0",
            b"1e3",
            b"9223372036854775808",
            b"",
            b" 1",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }
}
