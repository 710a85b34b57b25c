//! Top-K commands: `TOPK.*`, with RedisBloom's grammar, reply shapes and error texts (topk.md §3–§4).
//!
//! The sketch lives in [`crate::store::topk`]; this file parses arguments, finds keys and shapes
//! replies. Quirks reproduced here: RESERVE refusing any existing key before its arguments and
//! taking only 3 or 6 arguments, items sent back as C strings (cut at the first NUL), INCRBY
//! stopping at the first bad increment, LIST's `strncasecmp` prefix match of `WITHCOUNT` checked
//! before the key, and the RESP3 typing (booleans for QUERY, a double for INFO's decay). One is
//! deliberately not reproduced: RedisBloom announces INCRBY's array with one element per pair and
//! then sends fewer when it stops early, desynchronising the connection; hyperbloom sends the
//! elements it produced (topk.md §3.3).

use bytes::Bytes;

use super::cms::writing;
use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::{parse_f64, parse_i64};
use crate::protocol::Reply;
use crate::store::topk::{self, c_string, TopK};
use crate::store::{Db, Value};

// ---------------------------------------------------------------------------------------------
// Error texts (topk.md §4). Without ERR (their code is `TopK:`) unless shown.
// ---------------------------------------------------------------------------------------------

/// TOPK.RESERVE on any existing key.
pub const KEY_EXISTS: &str = "TopK: key already exists";
/// TOPK.RESERVE: k not an integer in [1, 2³²−1].
pub const INVALID_K: &str = "TopK: invalid k";
/// TOPK.RESERVE: width not an integer in [1, 2³²−1].
pub const INVALID_WIDTH: &str = "TopK: invalid width";
/// TOPK.RESERVE: depth not an integer in [1, 2³²−1].
pub const INVALID_DEPTH: &str = "TopK: invalid depth";
/// TOPK.RESERVE: decay not a double in (0, 1].
pub const INVALID_DECAY: &str = "TopK: invalid decay value. must be '<= 1' & '> 0'";
/// TOPK.RESERVE: the sketch cannot be allocated (current line; with ERR).
pub const INSUFFICIENT_MEMORY: &str = "ERR Insufficient memory to create topk data structure";
/// Every command but RESERVE on a missing key.
pub const KEY_MISSING: &str = "TopK: key does not exist";
/// TOPK.INCRBY: an increment that is not an integer in [0, 100000] (array element; 28 spaces).
pub const BAD_INCREMENT: &str = "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000";
/// TOPK.LIST: a third argument that is not a prefix of WITHCOUNT.
pub const WITHCOUNT_EXPECTED: &str = "WITHCOUNT keyword expected";

// ---------------------------------------------------------------------------------------------
// The table (current line)
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("topk.reserve", -3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Initializes a TopK with specified parameters", reserve),
    cmd("topk.add", -3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Increases the count of one or more items by increment", add),
    cmd("topk.incrby", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Increases the count of one or more items by increment", incrby),
    cmd("topk.query", -3, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Checks whether one or more items are in a sketch", query),
    cmd("topk.count", -3, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Return the count for one or more items are in a sketch", count),
    cmd("topk.list", -2, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Return full list of items in Top K list", list),
    cmd("topk.info", 2, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Returns information about a sketch", info),
];

// ---------------------------------------------------------------------------------------------
// Key access and replies
// ---------------------------------------------------------------------------------------------

fn existing<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a TopK, CmdError> {
    match db.lookup(key) {
        None => Err(CmdError::Static(KEY_MISSING)),
        Some(Value::TopK(t)) => Ok(t),
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

fn existing_mut<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a mut TopK, CmdError> {
    existing(db, key)?;
    match db.lookup_mut(key) {
        Some(Value::TopK(t)) => Ok(t),
        _ => Err(CmdError::Static(KEY_MISSING)),
    }
}

/// An item as RedisBloom sends it: a C string, or null for a slot without an item.
fn item_reply(item: Option<&[u8]>) -> Reply {
    match item {
        Some(b) => Reply::Bulk(Bytes::copy_from_slice(c_string(b))),
        None => Reply::Null,
    }
}

/// What an insert answers: the expelled item, or null (nothing expelled, or an empty slot).
fn expelled_reply(expelled: Option<Option<Box<[u8]>>>) -> Reply {
    item_reply(expelled.flatten().as_deref())
}

// ---------------------------------------------------------------------------------------------
// TOPK.RESERVE
// ---------------------------------------------------------------------------------------------

/// A dimension in [1, 2³²−1].
fn dimension(arg: &[u8]) -> Option<u32> {
    parse_i64(arg)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v >= 1)
}

/// `TOPK.RESERVE key topk [width depth decay]` → `+OK` (defaults 8, 7, 0.9).
fn reserve(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() != 3 && argv.len() != 6 {
        return Err(CmdError::arity("topk.reserve"));
    }
    writing(ctx, &argv[1], |db| {
        if db.lookup(&argv[1]).is_some() {
            return Err(CmdError::Static(KEY_EXISTS));
        }
        let k = dimension(&argv[2]).ok_or(CmdError::Static(INVALID_K))?;
        let (width, depth, decay) = if argv.len() == 6 {
            (
                dimension(&argv[3]).ok_or(CmdError::Static(INVALID_WIDTH))?,
                dimension(&argv[4]).ok_or(CmdError::Static(INVALID_DEPTH))?,
                parse_f64(&argv[5])
                    .filter(|&d| d > 0.0 && d <= 1.0)
                    .ok_or(CmdError::Static(INVALID_DECAY))?,
            )
        } else {
            (
                topk::DEFAULT_WIDTH,
                topk::DEFAULT_DEPTH,
                topk::DEFAULT_DECAY,
            )
        };
        let t =
            TopK::new(k, width, depth, decay).map_err(|_| CmdError::Static(INSUFFICIENT_MEMORY))?;
        db.insert(argv[1].clone(), Value::TopK(Box::new(t)));
        Ok(Reply::ok())
    })
}

// ---------------------------------------------------------------------------------------------
// TOPK.ADD, TOPK.INCRBY
// ---------------------------------------------------------------------------------------------

/// `TOPK.ADD key item [item ...]` → per item, the expelled item or null.
fn add(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    writing(ctx, &argv[1], |db| {
        let t = existing_mut(db, &argv[1])?;
        Ok(Reply::Array(
            argv[2..]
                .iter()
                .map(|item| expelled_reply(t.insert(item, 1)))
                .collect(),
        ))
    })
}

/// `TOPK.INCRBY key item increment [item increment ...]` → per pair, the expelled item or null;
/// a bad increment ends the array with its error element and stops the command (earlier pairs
/// stay applied).
fn incrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 1 {
        return Err(CmdError::arity("topk.incrby"));
    }
    writing(ctx, &argv[1], |db| {
        let t = existing_mut(db, &argv[1])?;
        let mut out = Vec::with_capacity((argv.len() - 2) / 2);
        for pair in argv[2..].chunks_exact(2) {
            match parse_i64(&pair[1]).filter(|&v| (0..=topk::MAX_INCREMENT as i64).contains(&v)) {
                Some(n) => out.push(expelled_reply(t.insert(&pair[0], n as u32))),
                None => {
                    out.push(Reply::Error(CmdError::Static(BAD_INCREMENT)));
                    break;
                }
            }
        }
        Ok(Reply::Array(out))
    })
}

// ---------------------------------------------------------------------------------------------
// TOPK.QUERY, TOPK.COUNT, TOPK.LIST, TOPK.INFO
// ---------------------------------------------------------------------------------------------

/// `TOPK.QUERY key item [item ...]` → per item, whether it is in the heap (`:1`/`:0`, `#t`/`#f`).
fn query(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let t = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|item| Reply::Bool(t.contains(item)))
            .collect(),
    ))
}

/// `TOPK.COUNT key item [item ...]` → per item, its bucket count (topk.md §8.2).
fn count(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let t = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|item| Reply::Int(t.count(item) as i64))
            .collect(),
    ))
}

/// C `strncasecmp(arg, "WITHCOUNT", len(arg)) == 0`: any case-insensitive prefix (the empty one
/// too), or WITHCOUNT followed by a NUL and anything.
fn is_withcount(arg: &[u8]) -> bool {
    const WORD: &[u8] = b"withcount";
    for (i, &c) in arg.iter().enumerate() {
        let w = WORD.get(i).copied().unwrap_or(0);
        if c.to_ascii_lowercase() != w {
            return false;
        }
        if c == 0 {
            return true;
        }
    }
    true
}

/// `TOPK.LIST key [WITHCOUNT]` → the heap's items by count, descending (with counts interleaved
/// when asked).
fn list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::arity("topk.list"));
    }
    // The keyword is checked before the key.
    let with_count = argv.len() == 3;
    if with_count && !is_withcount(&argv[2]) {
        return Err(CmdError::Static(WITHCOUNT_EXPECTED));
    }
    let t = existing(ctx.db(), &argv[1])?;
    let mut out = Vec::new();
    for slot in t.list() {
        out.push(item_reply(slot.item.as_deref()));
        if with_count {
            out.push(Reply::Int(slot.count as i64));
        }
    }
    Ok(Reply::Array(out))
}

/// `TOPK.INFO key` → `k`, `width`, `depth` and `decay` (a double reply, `%.17g` as Redis 7.0
/// formats it); simple-string names, a map in RESP3.
fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let t = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Map(vec![
        (Reply::Status("k"), Reply::Int(t.k() as i64)),
        (Reply::Status("width"), Reply::Int(t.width() as i64)),
        (Reply::Status("depth"), Reply::Int(t.depth() as i64)),
        (Reply::Status("decay"), Reply::Double(t.decay())),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withcount_prefixes() {
        for ok in [
            &b""[..],
            b"W",
            b"with",
            b"withc",
            b"WITHCOUNT",
            b"withcount\0xyz",
        ] {
            assert!(is_withcount(ok), "{ok:?}");
        }
        for bad in [&b"WITHCOUNTS"[..], b"count", b"wi\0", b"\0"] {
            assert!(!is_withcount(bad), "{bad:?}");
        }
    }
}
