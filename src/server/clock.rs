//! One clock read per connection round: wall-clock milliseconds derived from a monotonic reading.
//!
//! A round needs the time twice: the Unix milliseconds that commands see (expiry, `idle`,
//! `timeout`) and a monotonic start for the command statistics (`cmd_clock`). Two
//! `clock_gettime` calls cost ~100 userspace instructions more per request than one (callgrind,
//! issue 15), so the round reads `Instant::now()` once and converts it with [`unix_ms`]: the
//! Unix time at a fixed monotonic origin, re-measured by [`calibrate`] on every cron tick (`hz`
//! times a second) so that a step of the system clock is followed within one tick, as Redis's
//! cached `server.mstime` follows it within one event-loop iteration. Kept in nanoseconds, the
//! conversion differs from `SystemTime::now()` only by the slew between two calibrations
//! (NTP slews at most 500 ppm: 50 µs in 100 ms).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The monotonic origin.
static ORIGIN: OnceLock<Instant> = OnceLock::new();
/// Unix nanoseconds at [`ORIGIN`], as last measured.
static UNIX_NS_AT_ORIGIN: AtomicU64 = AtomicU64::new(0);

fn origin() -> Instant {
    *ORIGIN.get_or_init(|| {
        let now = Instant::now();
        UNIX_NS_AT_ORIGIN.store(unix_ns_now(), Ordering::Relaxed);
        now
    })
}

fn unix_ns_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Re-measures the Unix time at the origin (the cron, and once at startup).
pub fn calibrate() {
    let origin = origin();
    let wall = unix_ns_now();
    let since = u64::try_from(Instant::now().duration_since(origin).as_nanos()).unwrap_or(0);
    UNIX_NS_AT_ORIGIN.store(wall.saturating_sub(since), Ordering::Relaxed);
}

/// Unix milliseconds at `t` (a reading taken after the first [`calibrate`]).
pub fn unix_ms(t: Instant) -> u64 {
    let since = t.saturating_duration_since(origin()).as_nanos() as u64;
    (UNIX_NS_AT_ORIGIN.load(Ordering::Relaxed) + since) / 1_000_000
}
