//! One clock read per connection round: wall-clock milliseconds derived from a monotonic reading.
//!
//! A round needs the time twice: the Unix milliseconds that commands see (expiry, `idle`,
//! `timeout`) and a monotonic start for the command statistics (`cmd_clock`). Two
//! `clock_gettime` calls cost ~100 userspace instructions more per request than one (callgrind,
//! issue 15), so the round reads [`mono_ns`] once and converts it with [`unix_ms`]: the offset
//! from the monotonic clock to Unix time, re-measured by [`calibrate`] on every cron tick (`hz`
//! times a second) so that a step of the system clock is followed within one tick, as Redis's
//! cached `server.mstime` follows it within one event-loop iteration. Kept in nanoseconds, the
//! conversion differs from `SystemTime::now()` only by the slew between two calibrations
//! (NTP slews at most 500 ppm: 50 µs in 100 ms). The readings are plain `u64` nanoseconds, not
//! `Instant`s: `Instant` subtraction (`sub_timespec`) cost ~50 instructions a call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::engine::mono_ns;

/// Unix nanoseconds minus [`mono_ns`], as last measured (wrapping, so any origin works).
static UNIX_MINUS_MONO_NS: AtomicU64 = AtomicU64::new(0);

fn unix_ns_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Re-measures the offset between the clocks (the cron, and once at startup).
pub fn calibrate() {
    let wall = unix_ns_now();
    let mono = mono_ns();
    UNIX_MINUS_MONO_NS.store(wall.wrapping_sub(mono), Ordering::Relaxed);
}

/// Unix milliseconds at `t`, a [`mono_ns`] reading taken after the first [`calibrate`].
#[inline]
pub fn unix_ms(t: u64) -> u64 {
    UNIX_MINUS_MONO_NS.load(Ordering::Relaxed).wrapping_add(t) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_unix_time_follows_the_system_clock() {
        calibrate();
        let before = crate::engine::now_ms();
        let derived = unix_ms(mono_ns());
        let after = crate::engine::now_ms();
        assert!(
            before <= derived + 1 && derived <= after + 1,
            "{before} {derived} {after}"
        );
    }
}
