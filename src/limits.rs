//! Argument bounds that both the configuration and the commands enforce — floor 7 (the bottom).
//!
//! RedisBloom validates `BF.RESERVE`/`BF.INSERT` arguments and its `bf-*` module settings against the
//! same numbers (current line). They live below both `config` and `commands` so that neither has to
//! reach into the other for them.

/// Largest capacity BF.RESERVE / BF.INSERT accept, and the largest `bf-initial-size`.
pub const BF_MAX_CAPACITY: i64 = 1 << 30;
/// Largest expansion factor (`EXPANSION`, `bf-expansion-factor`).
pub const BF_MAX_EXPANSION: i64 = 32768;
/// Error rates above this are silently lowered to it (`BF.RESERVE` and `bf-error-rate`).
pub const BF_MAX_ERROR_RATE: f64 = 0.25;
