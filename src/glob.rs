//! Glob-style matching as Redis's `stringmatchlen` (KEYS, SCAN MATCH, CONFIG GET, PSUBSCRIBE and
//! PUBSUB CHANNELS): `*`, `?`, `[abc]`, `[^abc]`, `[a-z]`, and `\x` escapes. On the bottom floor
//! because both the commands and the pub/sub registry in `engine/` match with it.

/// True if `string` matches `pattern`.
pub fn matches(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

/// The byte at `i` as C sees it: a NUL past the end (patterns are NUL-terminated `sds` strings).
fn at(p: &[u8], i: usize) -> u8 {
    p.get(i).copied().unwrap_or(0)
}

fn lower(c: u8) -> u8 {
    c.to_ascii_lowercase()
}

/// A byte as a C `char` on x86-64 (signed), for the range comparisons of `[a-z]`.
fn signed(c: u8) -> i32 {
    c as i8 as i32
}

/// Redis's `stringmatchlen_impl`, step for step, including its quirks: the loop runs only while
/// both pattern and string have bytes left, so an empty string matches only an empty pattern (KEYS
/// `*` and SCAN `MATCH *` bypass matching altogether); `[` ranges compare signed chars; an
/// unterminated `[` class ends the pattern; and `skip_longer` stops retrying a `*` once a deeper `*`
/// has already scanned to the end of the string (the result is the same, only faster).
fn match_impl(
    pattern: &[u8],
    string: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    if nesting > 1000 {
        return false;
    }
    let (mut p, mut s) = (0usize, 0usize);
    let (plen, slen) = (pattern.len(), string.len());
    while p < plen && s < slen {
        match pattern[p] {
            b'*' => {
                while p < plen && at(pattern, p + 1) == b'*' {
                    p += 1;
                }
                if plen - p == 1 {
                    return true;
                }
                while s < slen {
                    if match_impl(
                        &pattern[p + 1..],
                        &string[s..],
                        nocase,
                        skip_longer,
                        nesting + 1,
                    ) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s += 1,
            b'[' => {
                p += 1;
                let not = at(pattern, p) == b'^';
                if not {
                    p += 1;
                }
                let mut matched = false;
                let c = string[s];
                loop {
                    if at(pattern, p) == b'\\' && plen.saturating_sub(p) >= 2 {
                        p += 1;
                        if pattern[p] == c {
                            matched = true;
                        }
                    } else if at(pattern, p) == b']' {
                        break;
                    } else if p >= plen {
                        // Unterminated class: step back so the loop's increment ends the pattern.
                        p -= 1;
                        break;
                    } else if plen - p >= 3 && pattern[p + 1] == b'-' {
                        let (mut start, mut end, mut ch) =
                            (signed(pattern[p]), signed(pattern[p + 2]), signed(c));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            let low = |v: i32| {
                                if (0..128).contains(&v) {
                                    lower(v as u8) as i32
                                } else {
                                    v
                                }
                            };
                            start = low(start);
                            end = low(end);
                            ch = low(ch);
                        }
                        p += 2;
                        if ch >= start && ch <= end {
                            matched = true;
                        }
                    } else if (!nocase && pattern[p] == c)
                        || (nocase && lower(pattern[p]) == lower(c))
                    {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s += 1;
            }
            first => {
                let mut pc = first;
                if first == b'\\' && plen - p >= 2 {
                    p += 1;
                    pc = pattern[p];
                }
                let c = string[s];
                if (!nocase && pc != c) || (nocase && lower(pc) != lower(c)) {
                    return false;
                }
                s += 1;
            }
        }
        p += 1;
        if s == slen {
            while at(pattern, p) == b'*' && p < plen {
                p += 1;
            }
            break;
        }
    }
    p >= plen && s == slen
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"user:*:name", b"user:42:name", false));
        assert!(!matches(b"a*b", b"acd", false));
        assert!(matches(b"\\*x", b"*x", false));
        assert!(matches(b"MAXMEM*", b"maxmemory", true));
        // Redis quirks.
        assert!(!matches(b"*", b"", false));
        assert!(!matches(b"**", b"", false));
        assert!(matches(b"", b"", false));
        assert!(matches(b"k1*", b"k1", false));
        assert!(!matches(b"k1*?", b"k1", false));
        assert!(matches(b"[a", b"a", false));
        assert!(matches(b"\\", b"\\", false));
    }
}
