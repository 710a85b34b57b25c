//! The keyspace and the data structures (floor 6). Pure Rust: no sockets, no RESP, no files.
//! Imports only `numeric` from the bottom floor.
pub mod bloom;
pub mod cms;
pub mod cuckoo;
pub mod db;
pub mod entry;
pub mod hll;
pub mod keytable;
pub mod murmur;
pub mod pages;
pub mod string;
pub mod tdigest;
pub mod topk;
pub mod value;

pub use db::{Db, Store};
pub use string::Str;
pub use value::Value;
