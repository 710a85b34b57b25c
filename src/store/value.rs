//! What a key holds.
//!
//! Strings (HyperLogLogs are strings too; see `store::string` for their compact and shared forms)
//! and the module types. `Value` is 32 bytes: a string of up to 30 bytes lives inside it, and the
//! module types are boxed. `Value` is `Clone` and the big module types keep their arrays in
//! pages behind `Arc`, so the copy a write makes of a key-table segment a snapshot holds
//! (`store::keytable`) copies only a filter's small header; a later add copies one page, not the
//! filter.

use super::string::{Str, StrMut};

/// The value stored under a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A binary-safe string (Redis type `string`). HyperLogLogs live here.
    Str(Str),
    /// A scalable Bloom filter (RedisBloom type `MBbloom--`).
    Bloom(Box<crate::store::bloom::ScalingBloom>),
    /// A RedisBloom cuckoo filter (module type `MBbloomCF`).
    Cuckoo(Box<super::cuckoo::CuckooFilter>),
    /// A RedisBloom t-digest (module type `TDIS-TYPE`).
    TDigest(Box<super::tdigest::TDigest>),
    /// A RedisBloom count-min sketch (module type `CMSk-TYPE`).
    Cms(Box<super::cms::CountMinSketch>),
    /// A RedisBloom Top-K sketch (module type `TopK-TYPE`).
    TopK(Box<super::topk::TopK>),
}

impl Value {
    /// Stops counting a filter's never-written bytes as reserved: this value becomes a
    /// snapshot's copy, a live copy taking over the counting (`store::keytable`).
    pub fn uncount_reservations(&self) {
        match self {
            Value::Bloom(b) => b.uncount_reservations(),
            Value::Cuckoo(c) => c.uncount_reservations(),
            Value::Cms(c) => c.uncount_reservations(),
            _ => {}
        }
    }

    /// The name `TYPE` replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Bloom(_) => "MBbloom--",
            Value::Cuckoo(_) => "MBbloomCF",
            Value::TDigest(_) => "TDIS-TYPE",
            Value::Cms(_) => "CMSk-TYPE",
            Value::TopK(_) => "TopK-TYPE",
        }
    }

    /// The name `OBJECT ENCODING` replies with, as Redis derives it for a stored value.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::Str(s) => {
                if s.len() <= 20 && crate::numeric::parse_i64(s).is_some() {
                    "int"
                } else if s.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Bloom(_) => "raw",
            // Redis reports module values as "raw".
            Value::Cuckoo(_) => "raw",
            Value::TDigest(_) => "raw",
            Value::Cms(_) => "raw",
            Value::TopK(_) => "raw",
        }
    }

    /// What RedisBloom does to a value when saving it (SAVE, DUMP): a t-digest is compressed, and
    /// the change shows in `TDIGEST.INFO`. Not a write: nothing is signalled.
    pub fn prepare_for_save(&mut self) {
        if let Value::TDigest(td) = self {
            let _ = td.compress();
        }
    }

    /// Bytes this value accounts for in `MEMORY USAGE` (key and entry overhead excluded).
    pub fn memory_usage(&self) -> usize {
        match self {
            Value::Str(s) => s.allocated() + 16,
            // RedisBloom's Size formula (bloom.md §8). The current RedisBloom suite expects
            // Size + 48 for key `bf`; the caller adds key length + 40, so 6 more here.
            Value::Bloom(b) => b.memory_usage() as usize + 6,
            Value::Cuckoo(cf) => cf.memory_usage() as usize,
            // RedisBloom's current-line figure, 80 + 16 × cap (tdigest.md §8).
            Value::TDigest(td) => td.memory_usage() as usize,
            // The current line's figure (cms.md §10), with the same +6 as the filters above.
            Value::Cms(s) => s.memory_usage().saturating_add(6) as usize,
            // topk.md §11, the same in both lines.
            Value::TopK(t) => t.memory_usage().saturating_add(6) as usize,
        }
    }

    /// A string value (from bytes that are copied: see [`Str::copy_from_slice`]).
    pub fn str(bytes: &[u8]) -> Value {
        Value::Str(Str::copy_from_slice(bytes))
    }

    pub fn as_str(&self) -> Option<&Str> {
        match self {
            Value::Str(s) => Some(s),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The string opened for modification (the guard puts it back in compact form when dropped).
    pub fn as_str_mut(&mut self) -> Option<StrMut<'_>> {
        match self {
            Value::Str(s) => Some(s.make_mut()),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}
