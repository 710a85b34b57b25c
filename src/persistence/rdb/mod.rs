//! The RDB format: constants, the module-id packing, and the error type shared by the writer and
//! the reader. The format itself is described in `writer.rs` (what hyperbloom emits) and `reader.rs`
//! (what it accepts); spec: `rdb.md`.
//!
//! ```text
//! "REDIS0010"  AUX*  { SELECTDB n  RESIZEDB keys expires  { [EXPIRETIME_MS t] type key value }* }*
//! EOF(0xFF)  CRC-64 (8 bytes LE, over everything before it; zero when checksums are off)
//! ```

pub mod module;
pub mod reader;
pub mod sketches;
pub mod writer;

pub use reader::{AccessRecord, LoadOptions, LoadStats, RdbReader};
pub use writer::{AccessRecords, RdbWriter, SaveOptions};

/// The version hyperbloom writes: what Redis 7.0 writes, so 7.0 and every later Redis loads it.
pub const RDB_VERSION: u16 = 10;
/// The newest version hyperbloom reads (Redis 7.4 / 8.x).
pub const RDB_MAX_READ_VERSION: u16 = 12;

// Opcodes (rdb.md §1.2).
pub const OP_FUNCTION2: u8 = 0xF5;
pub const OP_FUNCTION_PRE_GA: u8 = 0xF6;
pub const OP_MODULE_AUX: u8 = 0xF7;
pub const OP_IDLE: u8 = 0xF8;
pub const OP_FREQ: u8 = 0xF9;
pub const OP_AUX: u8 = 0xFA;
pub const OP_RESIZEDB: u8 = 0xFB;
pub const OP_EXPIRETIME_MS: u8 = 0xFC;
pub const OP_EXPIRETIME: u8 = 0xFD;
pub const OP_SELECTDB: u8 = 0xFE;
pub const OP_EOF: u8 = 0xFF;
pub const OP_SLOT_INFO: u8 = 0xF4;

// Value types hyperbloom serves (rdb.md §5).
pub const TYPE_STRING: u8 = 0;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;

// Module opcodes (rdb.md §4.2).
pub const MOD_EOF: u64 = 0;
pub const MOD_SINT: u64 = 1;
pub const MOD_UINT: u64 = 2;
pub const MOD_FLOAT: u64 = 3;
pub const MOD_DOUBLE: u64 = 4;
pub const MOD_STRING: u64 = 5;

/// The Redis name of a value type byte, for the "not supported" message.
pub fn type_name(t: u8) -> &'static str {
    match t {
        0 => "STRING",
        1 => "LIST",
        2 => "SET",
        3 => "ZSET",
        4 => "HASH",
        5 => "ZSET_2",
        6 => "MODULE (pre-GA)",
        7 => "MODULE_2",
        9 => "HASH_ZIPMAP",
        10 => "LIST_ZIPLIST",
        11 => "SET_INTSET",
        12 => "ZSET_ZIPLIST",
        13 => "HASH_ZIPLIST",
        14 => "LIST_QUICKLIST",
        15 => "STREAM_LISTPACKS",
        16 => "HASH_LISTPACK",
        17 => "ZSET_LISTPACK",
        18 => "LIST_QUICKLIST_2",
        19 => "STREAM_LISTPACKS_2",
        20 => "SET_LISTPACK",
        21 => "STREAM_LISTPACKS_3",
        22 => "HASH_METADATA_PRE_GA",
        23 => "HASH_LISTPACK_EX_PRE_GA",
        24 => "HASH_METADATA",
        25 => "HASH_LISTPACK_EX",
        _ => "unknown",
    }
}

const MODULE_CHARSET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Packs a 9-character module type name and a 10-bit encoding version into a module id (§4.1).
/// `None` if the name is not 9 characters of the module charset.
pub fn module_id(name: &str, encver: u16) -> Option<u64> {
    let b = name.as_bytes();
    if b.len() != 9 || encver > 1023 {
        return None;
    }
    let mut id: u64 = 0;
    for &c in b {
        let pos = MODULE_CHARSET.iter().position(|&x| x == c)? as u64;
        id = (id << 6) | pos;
    }
    Some((id << 10) | encver as u64)
}

/// The type name packed in a module id.
pub fn module_name(id: u64) -> String {
    let mut name = [0u8; 9];
    let mut v = id >> 10;
    for i in (0..9).rev() {
        name[i] = MODULE_CHARSET[(v & 63) as usize];
        v >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// Why a file or payload could not be read or written. Messages name what is wrong and where
/// (`offset` is the byte position in the file or payload where the problem was detected).
#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not an RDB file (bad magic)")]
    BadMagic,
    #[error("can't handle RDB format version {0}")]
    Version(u32),
    #[error("unexpected end of file at offset {offset} (truncated file?)")]
    Truncated { offset: u64 },
    #[error("{what} at offset {offset}")]
    Corrupt { what: String, offset: u64 },
    #[error("type {ty} ({}) at key '{key}' is not supported (offset {offset})", type_name(*.ty))]
    Unsupported { ty: u8, key: String, offset: u64 },
    #[error("wrong RDB checksum: expected {expected:016x}, file has {stored:016x}")]
    Checksum { expected: u64, stored: u64 },
}

impl RdbError {
    pub fn corrupt(what: impl Into<String>, offset: u64) -> RdbError {
        RdbError::Corrupt {
            what: what.into(),
            offset,
        }
    }
}

/// A key for messages: printable as-is when it is text, escaped otherwise, and cut at 128 bytes.
pub fn printable_key(key: &[u8]) -> String {
    let cut = &key[..key.len().min(128)];
    let mut s = String::new();
    for &b in cut {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'\'' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    if key.len() > 128 {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_ids_match_spec() {
        assert_eq!(module_id("MBbloom--", 4), Some(0x3016e5a289bef804));
        assert_eq!(module_id("MBbloomCF", 4), Some(0x3016e5a289821404));
        assert_eq!(module_id("CMSk-TYPE", 0), Some(0x08c4a4f9360f1000));
        assert_eq!(module_id("TopK-TYPE", 0), Some(0x4e8a4af9360f1000));
        assert_eq!(module_id("TDIS-TYPE", 0), Some(0x4c3212f9360f1000));
        assert_eq!(module_name(0x3016e5a289bef804), "MBbloom--");
        assert_eq!(module_name(0x4c3212f9360f1000), "TDIS-TYPE");
    }
}
