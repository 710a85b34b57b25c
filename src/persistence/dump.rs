//! DUMP and RESTORE payloads (rdb.md §7): one value as in an RDB record, without its key, followed
//! by a 2-byte little-endian RDB version and a CRC-64 of everything before the CRC.
//!
//! ```text
//! <type byte> <value> <version: u16 LE> <crc64: u64 LE>
//! ```
//!
//! hyperbloom writes version 10 (so Redis 7.0 and later restore its payloads) and accepts up to 12
//! (what Redis 7.4 / 8 write). The value is encoded by the RDB writer with the same string rules,
//! so the bytes equal Redis's for the same value.

use super::rdb::{self, RdbReader, RdbWriter, SaveOptions};
use crate::store::Value;

/// Why a RESTORE payload was refused; each maps to Redis's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    /// Too short, newer version, or checksum mismatch: `ERR DUMP payload version or checksum are wrong`.
    Footer,
    /// The value does not parse or fails validation: `ERR Bad data format`.
    BadData,
}

/// The DUMP payload of `value`. `compression` is `rdbcompression`.
pub fn dump(value: &Value, compression: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let opts = SaveOptions {
        compression,
        ..SaveOptions::default()
    };
    let mut w = RdbWriter::new(&mut out, opts);
    // Writing into a Vec cannot fail.
    let _ = w
        .byte(rdb::writer::value_type(value))
        .and_then(|_| w.value(value));
    let _ = w.finish_dump();
    out
}

/// The length of `value`'s RDB encoding (DEBUG OBJECT's `serializedlength`, Redis's
/// `rdbSavedObjectLen`): written to a sink that only counts, so a large filter is not copied.
/// `compression` is `rdbcompression`.
pub fn serialized_len(value: &Value, compression: bool) -> u64 {
    let opts = SaveOptions {
        compression,
        ..SaveOptions::default()
    };
    let mut w = RdbWriter::new(std::io::sink(), opts);
    // Writing into a sink cannot fail.
    let _ = w.value(value);
    w.written()
}

/// Checks the footer (length, version, CRC) of a RESTORE payload.
pub fn verify(payload: &[u8]) -> Result<(), PayloadError> {
    if payload.len() < 10 {
        return Err(PayloadError::Footer);
    }
    let n = payload.len();
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > rdb::RDB_MAX_READ_VERSION {
        return Err(PayloadError::Footer);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[n - 8..]);
    if super::crc64::checksum(&payload[..n - 8]) != u64::from_le_bytes(crc) {
        return Err(PayloadError::Footer);
    }
    Ok(())
}

/// Decodes a verified payload into a value.
///
/// Like Redis 7.0's RESTORE, the value is read from the whole payload, footer included, and what
/// follows the value is not checked: a value that runs into the version and CRC bytes (say
/// `00 c0` + footer, an 8-bit integer whose byte is the version's low byte) is accepted with those
/// bytes as its content, exactly as Redis accepts it. The reads stay within the payload.
pub fn restore(payload: &[u8]) -> Result<Value, PayloadError> {
    verify(payload)?;
    let mut r = RdbReader::new(payload, payload.len() as u64);
    let ty = r.byte().map_err(|_| PayloadError::BadData)?;
    let mut skipped = Vec::new();
    match r.value(ty, b"", 0, &mut skipped) {
        Ok(Some(v)) => Ok(v),
        Ok(None) | Err(_) => Err(PayloadError::BadData),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_payload_matches_redis() {
        // DUMP of "hello dump" on Redis 7.0 (dumps.jsonl).
        let want = b"\x00\x0ahello dump\x0a\x00\x76\xbd\xb3\x79\x91\x2c\x69\xbf";
        assert_eq!(dump(&Value::str(b"hello dump"), true), want);
        assert_eq!(restore(want), Ok(Value::str(b"hello dump")));
    }

    #[test]
    fn footer_checks() {
        let mut p = dump(&Value::str(b"x"), true);
        assert!(verify(&p).is_ok());
        let n = p.len();
        p[n - 1] ^= 1;
        assert_eq!(verify(&p), Err(PayloadError::Footer));
        assert_eq!(verify(b"short"), Err(PayloadError::Footer));
    }

    #[test]
    fn value_may_run_into_the_footer_as_in_redis() {
        // Type 0, 8-bit integer encoding, and no byte for it: Redis 7.0.15 reads the version's
        // low byte (10) and restores "10".
        let mut p = vec![0u8, 0xc0];
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = crate::persistence::crc64::checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&p), Ok(Value::str(b"10")));
        // A length one past the body takes the version's low byte as the last character.
        let mut p = b"\x00\x0ahelo dump".to_vec();
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = crate::persistence::crc64::checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&p), Ok(Value::str(b"helo dump\n")));
    }

    #[test]
    fn garbage_value_is_bad_data() {
        // Type 0 with a length pointing past the body.
        let mut p = vec![0u8, 0x3f, b'a'];
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = crate::persistence::crc64::checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&p), Err(PayloadError::BadData));
        // An unsupported type (a list).
        let mut p = vec![1u8, 0];
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = crate::persistence::crc64::checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&p), Err(PayloadError::BadData));
    }
}
