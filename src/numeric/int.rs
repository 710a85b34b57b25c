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

impl Decimal {
    pub fn of_u64(n: u64) -> Decimal {
        let mut d = Decimal {
            buf: [0; 20],
            start: 20,
        };
        let mut v = n;
        loop {
            d.start -= 1;
            d.buf[d.start] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        d
    }

    pub fn of_i64(n: i64) -> Decimal {
        let mut d = Decimal::of_u64(n.unsigned_abs());
        if n < 0 {
            // At most 19 digits for a negative i64, so there is room for the sign.
            d.start -= 1;
            d.buf[d.start] = b'-';
        }
        d
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
