//! Keyspace-event classes (`notify-keyspace-events`), on the bottom floor because the
//! configuration parses them, the store raises them and the engine publishes them.
//!
//! The letters are Redis's: `K` keyspace channel, `E` keyevent channel, `g` generic (DEL,
//! EXPIRE, RENAME...), `$` string, `l` list, `s` set, `h` hash, `z` sorted set, `x` expired,
//! `e` evicted, `t` stream, `d` module, `m` key miss, `n` new key; `A` is `g$lshzxetd`.

pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 12;
pub const NEW: u32 = 1 << 13;
/// Not a `notify-keyspace-events` letter: set while some client uses CLIENT TRACKING, it makes
/// the store record every modified key among its events (class `TRACKED`, or `TRACKED | EXPIRED`
/// for a deletion by expiry), in the order Redis signals them, for the invalidation messages.
pub const TRACKED: u32 = 1 << 14;
/// `A`: every class but key-miss and new-key.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses a `notify-keyspace-events` value; None for an unknown letter (Redis refuses it).
pub fn parse(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical text of `flags`, as CONFIG GET shows it (`keyspaceEventsFlagsToString`).
pub fn to_text(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    // As Redis 7.0 writes it: `n` only outside the `A` branch (so "KEAn" reads back as "AKE").
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_like_redis() {
        assert_eq!(to_text(parse("KEA").unwrap()), "AKE");
        assert_eq!(to_text(parse("KEAmn").unwrap()), "AKEm");
        assert_eq!(to_text(parse("Kmn").unwrap()), "nKm");
        assert_eq!(to_text(parse("Eg$xn").unwrap()), "g$xnE");
        assert_eq!(to_text(parse("").unwrap()), "");
        assert_eq!(parse("Kq"), None);
        assert_eq!(to_text(parse("g$lshzxetdKEmn").unwrap()), "AKEm");
    }
}
