//! Key access clocks: the 24 bits per key that `maxmemory` eviction ranks keys by, as Redis keeps
//! them in `robj.lru` (evict.c, object.c).
//!
//! Under an LRU policy (and every non-LFU one) the bits are the LRU clock of the key's last
//! access: unix seconds modulo 2^24 (Redis's `LRU_CLOCK()`, resolution 1 s, wrapping every 194
//! days; [`idle_ms`] unwraps it as `estimateObjectIdleTime` does). Under an LFU policy they are
//! Redis's Morris counter: the minute of the last decrement in the high 16 bits
//! (`LFUGetTimeInMinutes`) and a logarithmic access counter in the low 8, which starts at
//! [`LFU_INIT_VAL`], grows on an access with probability `1 / ((counter - 5) * lfu-log-factor + 1)`
//! and loses one every `lfu-decay-time` minutes. Switching policies reinterprets the bits, as in
//! Redis ("it will take some time to adjust").
//!
//! The clock and the policy are process-wide atomics ([`tick`], [`set_policy`]), read by every
//! access: a key's bits are written only when they change, so a key read a million times a
//! second by many cores is written once a second under LRU (its cache line is not bounced
//! between them on every read).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The largest LRU clock value (24 bits).
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
/// A new key's LFU counter (Redis's `LFU_INIT_VAL`), so that it is not evicted at once.
pub const LFU_INIT_VAL: u32 = 5;

/// The LRU clock: unix seconds & [`LRU_CLOCK_MAX`].
static CLOCK: AtomicU32 = AtomicU32::new(0);
/// Unix minutes & 0xffff.
static MINUTES: AtomicU32 = AtomicU32::new(0);
/// Whether the policy is an LFU one (the bits are counters, not clocks).
static LFU: AtomicBool = AtomicBool::new(false);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_TIME: AtomicU32 = AtomicU32::new(1);

/// Advances the clocks to `unix_ms` (the server cron, `hz` times a second, and startup).
pub fn tick(unix_ms: u64) {
    CLOCK.store(((unix_ms / 1000) as u32) & LRU_CLOCK_MAX, Ordering::Relaxed);
    MINUTES.store(((unix_ms / 60_000) as u32) & 0xffff, Ordering::Relaxed);
}

/// The eviction policy's kind and the LFU parameters (`maxmemory-policy`, `lfu-log-factor`,
/// `lfu-decay-time`).
pub fn set_policy(lfu: bool, log_factor: u32, decay_time: u32) {
    LFU.store(lfu, Ordering::Relaxed);
    LOG_FACTOR.store(log_factor, Ordering::Relaxed);
    DECAY_TIME.store(decay_time, Ordering::Relaxed);
}

/// Whether the bits are LFU counters.
pub fn is_lfu() -> bool {
    LFU.load(Ordering::Relaxed)
}

/// The LRU clock now.
pub fn lru_clock() -> u32 {
    CLOCK.load(Ordering::Relaxed)
}

/// The bits of a key loaded with the RDB's IDLE record (`idle_seconds`) or FREQ record (`freq`),
/// as Redis's `objectSetLRUOrLFU` sets them: under an LFU policy the FREQ counter, stamped with
/// the minute now; under any other policy the LRU clock the IDLE time back from now (wrapping
/// as Redis's 24-bit field does). `None` when the file has no record for the policy's kind (the
/// key keeps a new key's bits).
pub fn loaded(idle_seconds: Option<u64>, freq: Option<u8>) -> Option<u32> {
    if is_lfu() {
        return freq.map(|f| (MINUTES.load(Ordering::Relaxed) << 8) | u32::from(f));
    }
    let idle = i64::try_from(idle_seconds?).unwrap_or(i64::MAX);
    let at = i64::from(lru_clock()).saturating_sub(idle);
    let at = if at >= 0 {
        at
    } else {
        at + i64::from(LRU_CLOCK_MAX)
    };
    Some((at as u64 & u64::from(LRU_CLOCK_MAX)) as u32)
}

/// The bits of a key made now (Redis's `createObject`).
#[inline]
pub fn initial() -> u32 {
    if is_lfu() {
        (MINUTES.load(Ordering::Relaxed) << 8) | LFU_INIT_VAL
    } else {
        lru_clock()
    }
}

/// The bits after an access to a key whose bits were `old` (Redis's `updateLFU`, or the LRU
/// clock).
#[inline]
pub fn accessed(old: u32) -> u32 {
    if !is_lfu() {
        return lru_clock();
    }
    let counter = log_incr(decayed_counter(old));
    (MINUTES.load(Ordering::Relaxed) << 8) | counter
}

/// Milliseconds since the access the LRU bits `bits` record (`estimateObjectIdleTime`).
pub fn idle_ms(bits: u32) -> u64 {
    let clock = lru_clock();
    let seconds = if clock >= bits {
        clock - bits
    } else {
        clock + (LRU_CLOCK_MAX - bits)
    };
    u64::from(seconds) * 1000
}

/// The LFU counter of `bits`, decayed by the minutes since its last decrement
/// (`LFUDecrAndReturn`), without writing it back.
pub fn decayed_counter(bits: u32) -> u32 {
    let last = bits >> 8;
    let counter = bits & 0xff;
    let decay = DECAY_TIME.load(Ordering::Relaxed);
    // lfu-decay-time 0: the counter never decays.
    let periods = minutes_since(last).checked_div(decay).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// Minutes since `last` (16 bits, wrapping: `LFUTimeElapsed`).
fn minutes_since(last: u32) -> u32 {
    let now = MINUTES.load(Ordering::Relaxed);
    if now >= last {
        now - last
    } else {
        65535 - last + now
    }
}

/// A logarithmic increment of the counter (`LFULogIncr`): the higher it is, the less likely.
fn log_incr(counter: u32) -> u32 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * f64::from(LOG_FACTOR.load(Ordering::Relaxed)) + 1.0);
    if random_unit() < p {
        counter + 1
    } else {
        counter
    }
}

thread_local! {
    /// This thread's generator for the LFU draws (seeded from the thread's own address, so two
    /// threads draw differently).
    static DRAWS: Cell<u64> = const { Cell::new(0) };
}

/// A uniform draw in [0, 1).
fn random_unit() -> f64 {
    DRAWS.with(|state| {
        let mut s = state.get();
        if s == 0 {
            s = state as *const Cell<u64> as u64 | 1;
        }
        let r = super::splitmix64(&mut s);
        state.set(s);
        (r >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The clocks are process-wide: one test changes them, in one sequence.
    #[test]
    fn clocks_counters_and_idle_times_follow_redis() {
        set_policy(false, 10, 1);
        tick(1_000_000);
        let t = initial();
        assert_eq!(t, 1000);
        tick(1_005_999);
        assert_eq!(idle_ms(t), 5000);
        assert_eq!(accessed(t), 1005);
        // Wrapping: an access just before the clock wrapped.
        tick(0);
        assert_eq!(idle_ms(LRU_CLOCK_MAX - 2), 2000);

        set_policy(true, 10, 1);
        tick(60_000 * 100);
        let b = initial();
        assert_eq!(b & 0xff, LFU_INIT_VAL);
        assert_eq!(decayed_counter(b), LFU_INIT_VAL);
        // Three minutes later the counter lost three.
        tick(60_000 * 103);
        assert_eq!(decayed_counter(b), LFU_INIT_VAL - 3);
        // A thousand accesses: logarithmic growth, far below a thousand (Redis's table for
        // lfu-log-factor 10 gives ~18 after 1,000 hits).
        let mut bits = initial();
        for _ in 0..1000 {
            bits = accessed(bits);
        }
        let c = bits & 0xff;
        assert!((10..=30).contains(&c), "{c}");
        // lfu-decay-time 0: no decay.
        set_policy(true, 10, 0);
        tick(60_000 * 200);
        assert_eq!(decayed_counter(bits), c);
        set_policy(false, 10, 1);
        tick(0);
    }
}
