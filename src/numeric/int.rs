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

/// Redis `string2ull`-style unsigned parse used by SCAN cursors: any decimal u64.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Appends the decimal form of `n` to `out` without going through `format!`.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut v = n;
    loop {
        pos -= 1;
        buf[pos] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[pos..]);
}

#[cfg(test)]
mod tests {
    use super::*;

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
