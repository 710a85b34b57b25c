//! Redis's numeric parsing and formatting — floor 7 (the bottom), imports nothing from the crate.
//!
//! The request parser (`protocol`), the data structures (`store`), the configuration (`config`) and
//! the commands all need the same number rules, so they live here, below all of them:
//! - [`int`]: `string2ll` (strict i64) and the unsigned cursor parse;
//! - [`float`]: `string2d`/`string2ld` (C `strtod` over the whole argument) and `%g`/`%.17g`;
//! - [`longdouble`]: the 80-bit extended precision arithmetic behind INCRBYFLOAT.
pub mod float;
pub mod int;
pub mod longdouble;

/// True if `s` starts with `prefix`, ASCII case ignored (`0x`, `nan(` in the float grammars).
pub(crate) fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

pub use float::{double_text, format_double, format_g, parse_f64, parse_long_double, FloatText};
pub use int::{parse_i64, parse_u64};
