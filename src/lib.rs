//! hyperbloom: a Redis-protocol server for Bloom filters, cuckoo filters and HyperLogLog.
//!
//! The map of the crate:
//! - [`protocol`]: the request parser (inline and multibulk, resumable) and the RESP2/RESP3 reply encoder.
//! - [`store`]: the keyspace and the data structures ([`store::hll`]: HyperLogLog strings;
//!   [`store::cuckoo`]: cuckoo filters).
//! - [`error`]: every client-visible error text as a named constant, and the `CmdError` type.
pub mod error;
pub mod protocol;
pub mod store;
