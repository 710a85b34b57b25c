//! The wire protocol (floor 7, the bottom): requests in, replies out. Knows nothing of storage;
//! uses only `error` (the reply model carries `CmdError`) and `numeric`.
pub mod out;
pub mod parser;
pub mod reply;

pub use reply::Reply;
