//! Glob-style matching as Redis's `stringmatchlen` (KEYS, SCAN MATCH, CONFIG GET): `*`, `?`,
//! `[abc]`, `[^abc]`, `[a-z]`, and `\x` escapes.

/// True if `string` matches `pattern`.
pub fn matches(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    match_from(pattern, string, nocase, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> bool {
    // Redis caps recursion; a pathological pattern simply fails to match.
    if depth > 1000 {
        return false;
    }
    while !p.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for i in 0..=s.len() {
                    if match_from(&p[1..], &s[i..], nocase, depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if s.is_empty() {
                    return false;
                }
                s = &s[1..];
            }
            b'[' => {
                if s.is_empty() {
                    return false;
                }
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if eq(p[0], s[0], nocase) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut lo, mut hi) = (p[0], p[2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        let c = s[0];
                        let in_range = if nocase {
                            let c = c.to_ascii_lowercase();
                            c >= lo.to_ascii_lowercase() && c <= hi.to_ascii_lowercase()
                        } else {
                            c >= lo && c <= hi
                        };
                        if in_range {
                            matched = true;
                        }
                        p = &p[2..];
                    } else if eq(p[0], s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Unterminated class: the pattern ends here.
                    return s.is_empty();
                }
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if s.is_empty() || !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if s.is_empty() || !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
    }
    s.is_empty()
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
    }
}
