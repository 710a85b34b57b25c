//! Floating-point numbers as Redis parses and prints them.
//!
//! `parse_f64` is `string2d` (C `strtod` over the whole argument: leading `+`, `.5`, `5.`, exponents, hex floats,
//! `inf`; no leading blank, no NaN, no overflow to infinity, no underflow to zero).
//! `parse_long_double` is the INCRBYFLOAT variant (`string2ld`), which also refuses infinity.

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

/// Formats a double the way Redis's RESP3 double reply and most of its float replies do: `%.17g`,
/// with `inf`/`-inf`/`nan` spelled as Redis spells them.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        // glibc's %.17g shows the sign of a NaN (Redis 7.0 prints `-nan` for 0/0 on x86-64).
        return if d.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format_g(d, 17)
}

/// C's `%.<precision>g`.
pub fn format_g(d: f64, precision: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    if !d.is_finite() {
        return format_double(d);
    }
    let p = precision.max(1);
    // Exponent as %e would print it after rounding to p significant digits.
    let e_form = format!("{:.*e}", p - 1, d);
    let (mantissa, exp) = e_form.split_once('e').unwrap_or((&e_form, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(format_g(0.01, 17), "0.01");
        assert_eq!(format_g(1.5, 17), "1.5");
        assert_eq!(format_g(1e20, 17), "1e+20");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(0.00001, 6), "1e-05");
        assert_eq!(format_g(100.0, 6), "100");
        assert_eq!(format_g(3.0000000000000004, 17), "3.0000000000000004");
        assert_eq!(format_g(123456789.0, 6), "1.23457e+08");
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
