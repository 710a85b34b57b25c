//! Floating-point numbers as Redis parses and prints them.
//!
//! `parse_f64` is `string2d` (C `strtod` over the whole argument: leading `+`, `.5`, `5.`, exponents, hex floats,
//! `inf`; no leading blank, no NaN, no overflow to infinity, no underflow to zero).
//! `parse_long_double` is the INCRBYFLOAT variant (`string2ld`), which also refuses infinity.

/// C `strtod` accepting the whole of `s`; None if not fully consumed or empty.
///
/// No allocation on the decimal path: `parse_f64` runs for every value of a `TDIGEST.ADD` and
/// every quantile asked of `TDIGEST.QUANTILE` (issue 15: three allocations a number were a
/// third of a 2-quantile request's instructions beside the reply's formatting).
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
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f64::INFINITY);
    }
    let starts_with = |prefix: &[u8]| super::starts_with_ignore_case(body.as_bytes(), prefix);
    if body.eq_ignore_ascii_case("nan") || starts_with(b"nan(") {
        return Some(f64::NAN);
    }
    if starts_with(b"0x") {
        return parse_hex_float(&body[2..].to_ascii_lowercase()).map(|v| sign * v);
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
    if v.is_infinite() && !is_explicit_inf(s) {
        return None;
    }
    if v == 0.0 && mantissa_is_nonzero(s) {
        // An underflow to zero (strtod sets ERANGE); "0e5" or "0x0p3" are real zeros.
        return None;
    }
    Some(v)
}

/// `inf` or `infinity` in any case, after any signs: an infinity the client wrote, not an overflow.
fn is_explicit_inf(s: &[u8]) -> bool {
    let start = s
        .iter()
        .position(|&c| c != b'+' && c != b'-')
        .unwrap_or(s.len());
    let t = &s[start..];
    t.eq_ignore_ascii_case(b"inf") || t.eq_ignore_ascii_case(b"infinity")
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
    double_text(d).as_str().to_owned()
}

/// [`format_double`] without the allocation, for the reply encoder.
pub fn double_text(d: f64) -> FloatText {
    let mut out = FloatText::new();
    if d.is_nan() {
        // glibc's %.17g shows the sign of a NaN (Redis 7.0 prints `-nan` for 0/0 on x86-64).
        out.push_str(if d.is_sign_negative() { "-nan" } else { "nan" });
    } else if d.is_infinite() {
        out.push_str(if d > 0.0 { "inf" } else { "-inf" });
    } else {
        write_g(d, 17, &mut out);
    }
    out
}

/// C's `%.<precision>g`.
pub fn format_g(d: f64, precision: usize) -> String {
    if !d.is_finite() {
        return format_double(d);
    }
    if precision <= G_MAX_PRECISION {
        let mut out = FloatText::new();
        write_g(d, precision, &mut out);
        return out.as_str().to_owned();
    }
    format_g_long(d, precision)
}

/// The most significant digits [`FloatText`] has room for: `-d.<16 digits>e-308` is 24 bytes.
const G_MAX_PRECISION: usize = 17;

/// A number's text on the stack: `%.17g` of a finite double is at most 24 bytes.
pub struct FloatText {
    bytes: [u8; 32],
    len: usize,
}

impl FloatText {
    fn new() -> FloatText {
        FloatText {
            bytes: [0; 32],
            len: 0,
        }
    }

    /// Only ever called with ASCII that fits: the callers here bound their lengths.
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn push_str(&mut self, s: &str) {
        for &b in s.as_bytes() {
            self.push(b);
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl std::fmt::Write for FloatText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `%.<p>g` of a finite `d`, `p` ≤ [`G_MAX_PRECISION`], appended to `out`.
///
/// One exact conversion: `%g` rounds to `p` significant digits as `%e` does, and then prints
/// those digits in `%e` or `%f` form by the exponent, without trailing zeros. The `%f` form of
/// the same rounding has the same digits (both are the exact value rounded at the same decimal
/// place), so they are laid out from the `%e` conversion instead of converting again, as the
/// allocating version did (kept as the oracle of `write_g_matches_the_two_conversion_version`).
fn write_g(d: f64, precision: usize, out: &mut FloatText) {
    use std::fmt::Write;
    if d == 0.0 {
        out.push_str(if d.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let p = precision.clamp(1, G_MAX_PRECISION);
    // `d.ddd…e±x` of |d|: at most 1 + 1 + 16 + 1 + 4 = 23 bytes.
    let mut e_form = FloatText::new();
    if write!(e_form, "{:.*e}", p - 1, d.abs()).is_err() {
        out.push_str(&format_g_long(d, p));
        return;
    }
    let text = e_form.as_bytes();
    let e_at = text.iter().position(|&c| c == b'e').unwrap_or(text.len());
    let mut digits = [b'0'; G_MAX_PRECISION];
    let mut n = 0;
    for &c in &text[..e_at] {
        if c.is_ascii_digit() && n < p {
            digits[n] = c;
            n += 1;
        }
    }
    // Rust writes the exponent as `e-5`, `e0`, `e308`: a sign only when negative.
    let exp_text = text.get(e_at + 1..).unwrap_or_default();
    let (negative, exp_digits) = match exp_text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, exp_text),
    };
    let magnitude = exp_digits.iter().fold(0i32, |acc, &c| {
        acc * 10 + i32::from(c.wrapping_sub(b'0') % 10)
    });
    let exp = if negative { -magnitude } else { magnitude };
    // Without `#`, %g drops trailing zeros of the fraction (and the point if nothing is left).
    let significant = digits[..n]
        .iter()
        .rposition(|&c| c != b'0')
        .map_or(1, |i| i + 1);
    if d < 0.0 {
        out.push(b'-');
    }
    if exp < -4 || exp >= p as i32 {
        out.push(digits[0]);
        if significant > 1 {
            out.push(b'.');
            for &c in &digits[1..significant] {
                out.push(c);
            }
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let x = exp.unsigned_abs();
        if x >= 100 {
            out.push(b'0' + (x / 100) as u8);
        }
        out.push(b'0' + (x / 10 % 10) as u8);
        out.push(b'0' + (x % 10) as u8);
    } else if exp >= 0 {
        // exp < p: the integer part is the first exp + 1 digits.
        let int_len = exp as usize + 1;
        for &c in &digits[..int_len] {
            out.push(c);
        }
        if significant > int_len {
            out.push(b'.');
            for &c in &digits[int_len..significant] {
                out.push(c);
            }
        }
    } else {
        // -4 ≤ exp < 0: `0.`, then -exp - 1 zeros, then the digits (the first is not zero).
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push(b'0');
        }
        for &c in &digits[..significant] {
            out.push(c);
        }
    }
}

/// `%.<precision>g` for precisions past [`G_MAX_PRECISION`] (no caller asks for one today): two
/// allocating conversions.
fn format_g_long(d: f64, precision: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
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

    /// The stack version against the two-conversion one it replaced, over doubles of every
    /// exponent (bit patterns from a fixed xorshift), every precision, and the edge cases of the
    /// form switch (powers of ten, 9.99… rounding up across it).
    #[test]
    fn write_g_matches_the_two_conversion_version() {
        let mut edge = vec![
            1e-5,
            9.9999e-5,
            0.0001,
            0.00009999999999999999,
            1e16,
            1e17,
            9.999999999999999e16,
            99999999999999999.0,
            123456789.0,
            0.5,
            2.5,
            1.5e-300,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        for e in -310..310 {
            edge.push(10f64.powi(e));
            edge.push(9.5 * 10f64.powi(e));
            edge.push(9.999999999999999 * 10f64.powi(e));
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut values: Vec<f64> = edge.iter().flat_map(|&v| [v, -v]).collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                values.push(v);
            }
            values.push((x >> 11) as f64 / (1u64 << 40) as f64);
        }
        for &v in values.iter().filter(|v| v.is_finite()) {
            for p in 1..=G_MAX_PRECISION {
                let mut out = FloatText::new();
                write_g(v, p, &mut out);
                assert_eq!(out.as_str(), format_g_long(v, p), "{v:e} at precision {p}");
            }
        }
    }

    #[test]
    fn double_text_spells_the_specials_as_redis() {
        assert_eq!(double_text(f64::INFINITY).as_str(), "inf");
        assert_eq!(double_text(f64::NEG_INFINITY).as_str(), "-inf");
        assert_eq!(double_text(f64::NAN).as_str(), "nan");
        assert_eq!(double_text(-f64::NAN).as_str(), "-nan");
        assert_eq!(double_text(-0.0).as_str(), "-0");
        assert_eq!(double_text(0.1).as_str(), "0.10000000000000001");
        assert_eq!(double_text(-1e300).as_str(), "-1.0000000000000001e+300");
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
        assert_eq!(parse_f64(b"-INFINITY"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"NaN(123)"), None);
        assert_eq!(parse_f64(b"0X1P4"), Some(16.0));
        assert_eq!(parse_f64(b"-1e400"), None);
        assert_eq!(parse_f64(b"infin"), None);
    }
}
