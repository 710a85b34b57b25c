//! Numbers as Redis parses them.
//!
//! `parse_i64` is Redis's `string2ll`: an optional `-`, then `0` alone or a non-zero digit followed by
//! digits; no `+`, no leading zeros, no blanks, at most 20 bytes, within i64. `parse_f64` is
//! `string2d` (C `strtod` over the whole argument: leading `+`, `.5`, `5.`, exponents, hex floats,
//! `inf`; no leading blank, no NaN, no overflow to infinity, no underflow to zero).
//! `parse_long_double` is the INCRBYFLOAT variant (`string2ld`), which also refuses infinity.

/// Redis `string2ll`: the same strict rules the request parser applies to length headers.
pub use crate::protocol::parser::parse_strict_i64 as parse_i64;

/// Redis `string2ull`-style unsigned parse used by SCAN cursors: any decimal u64.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// C `strtod` accepting the whole of `s`; None if not fully consumed or empty.
fn strtod_full(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() {
        return None;
    }
    let (sign, body) = match text.as_bytes()[0] {
        b'+' => (1.0, &text[1..]),
        b'-' => (-1.0, &text[1..]),
        _ => (1.0, text),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" || lower.starts_with("nan(") {
        return Some(f64::NAN);
    }
    if let Some(hex) = lower.strip_prefix("0x") {
        return parse_hex_float(hex).map(|v| sign * v);
    }
    // Decimal: digits, optional '.', digits, optional exponent. Rust's parser accepts the same
    // grammar for these forms (but also "inf"/"nan", handled above, and not "+"-less oddities).
    let b = body.as_bytes();
    if b.is_empty() || !(b[0].is_ascii_digit() || b[0] == b'.') {
        return None;
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find('p') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int_part.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac_part.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    let e: i32 = match exp {
        Some(e) => e.parse().ok()?,
        None => 0,
    };
    Some(v * 2f64.powi(e))
}

/// Redis `string2d`: rejects NaN, leading blanks, overflow to infinity and underflow to zero; accepts
/// an explicit `inf`.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return None;
    }
    let v = strtod_full(s)?;
    if v.is_nan() {
        return None;
    }
    let explicit_inf = {
        let t = String::from_utf8_lossy(s).to_ascii_lowercase();
        let t = t.trim_start_matches(['+', '-']);
        t == "inf" || t == "infinity"
    };
    if v.is_infinite() && !explicit_inf {
        return None;
    }
    if v == 0.0 && mantissa_is_nonzero(s) {
        // An underflow to zero (strtod sets ERANGE); "0e5" or "0x0p3" are real zeros.
        return None;
    }
    Some(v)
}

fn mantissa_is_nonzero(s: &[u8]) -> bool {
    let t = String::from_utf8_lossy(s).to_ascii_lowercase();
    let t = t.trim_start_matches(['+', '-']);
    if let Some(hex) = t.strip_prefix("0x") {
        hex.split('p')
            .next()
            .is_some_and(|m| m.chars().any(|c| c.is_ascii_hexdigit() && c != '0'))
    } else {
        t.split('e')
            .next()
            .is_some_and(|m| m.chars().any(|c| ('1'..='9').contains(&c)))
    }
}

/// Redis `string2ld` (INCRBYFLOAT, the value side): like `parse_f64` but infinity is refused too.
pub fn parse_long_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 5000 || s[0].is_ascii_whitespace() {
        return None;
    }
    let v = strtod_full(s)?;
    if v.is_nan() || v.is_infinite() {
        return None;
    }
    Some(v)
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

    #[test]
    fn string2d_rules() {
        assert_eq!(parse_f64(b"0.01"), Some(0.01));
        assert_eq!(parse_f64(b"+.5"), Some(0.5));
        assert_eq!(parse_f64(b"5."), Some(5.0));
        assert_eq!(parse_f64(b"1e-3"), Some(0.001));
        assert_eq!(parse_f64(b"0x1p-3"), Some(0.125));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"0"), Some(0.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1e999"), None);
        assert_eq!(parse_f64(b"1e-999"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(parse_f64(b""), None);
    }
}
