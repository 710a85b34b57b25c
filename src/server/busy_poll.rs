//! Busy polling (issue 15, the kernel's share): opt-in with `HYPERBLOOM_BUSY_POLL=<µs>`.
//!
//! Unpipelined, a request costs the server more in the kernel than in userspace: pinned at `-P 1`,
//! over 90 % of its CPU is system time, and one of the reasons is the sleep between requests. A
//! server asleep in `epoll_wait` must be woken by the client's `write` (the loopback softirq runs
//! on the client's core, marks the socket readable and sends the server's core a wake-up; in a VM
//! the idle core has halted and that is a VM exit and an interrupt injected back). Redis pays the
//! same: its event loop blocks in `epoll_wait` whenever no client is ready.
//!
//! A server that does not sleep needs no wake-up. With the setting, one task on the
//! current-thread runtime keeps the runtime from blocking while traffic flows: it calls
//! `yield_now`, and tokio wakes a yielded task only after polling its I/O driver with a zero
//! timeout, so every turn of the loop is one non-blocking `epoll_wait` followed by the ready
//! connections. It watches `total_net_input_bytes`; once that has not moved for the budget (the
//! setting, in microseconds), the task sleeps in 1 ms steps (10 ms after a second of quiet), so an
//! idle server does not burn its core, and the next request that moves the counter starts the
//! spin again within a step.
//!
//! The cost is the core: while the server spins its CPU time is all used, so CPU per request is
//! no measure of it; throughput and the client's cost per request are (docs/benchmarks.md, "Busy
//! polling", has the figures). On a multi-thread runtime a yield does not keep the other
//! workers awake, so there the setting is refused with a warning.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{mono_ns, Shared};

/// The environment variable that turns busy polling on: the spin budget in microseconds.
pub const VARIABLE: &str = "HYPERBLOOM_BUSY_POLL";

/// The longest budget accepted (one second); a longer spin after traffic stops is only waste.
const MAX_BUDGET_US: u64 = 1_000_000;

/// The budget a `HYPERBLOOM_BUSY_POLL` value asks for: `None` when unset, empty or `0` (off);
/// `Err` with the reason for a value that is not a number of microseconds up to one second.
pub fn parse_budget(setting: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(raw) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    match raw.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(us) if us <= MAX_BUDGET_US => Ok(Some(Duration::from_micros(us))),
        _ => Err(format!(
            "{VARIABLE}={raw} is not a number of microseconds from 0 to {MAX_BUDGET_US}"
        )),
    }
}

/// Starts the busy poller when the environment asks for it (after the listeners are bound).
pub fn start(shared: &Arc<Shared>) {
    let budget = match parse_budget(std::env::var(VARIABLE).ok().as_deref()) {
        Ok(Some(b)) => b,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("{e}; busy polling stays off");
            return;
        }
    };
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    if flavor != tokio::runtime::RuntimeFlavor::CurrentThread {
        tracing::warn!(
            "{VARIABLE} needs the current-thread runtime (HYPERBLOOM_WORKERS=current, the default \
             on up to two CPUs); busy polling stays off"
        );
        return;
    }
    tracing::info!(
        "busy polling for {} µs after the last input",
        budget.as_micros()
    );
    let shared = shared.clone();
    tokio::spawn(async move { spin(&shared, budget).await });
}

/// What the poller does next, given how long the input counter has been still.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Traffic moved within the budget: yield (one zero-timeout driver poll) and look again.
    Spin,
    /// Quiet: sleep this long, then look again.
    Sleep(Duration),
}

/// The step after `quiet_ns` nanoseconds without input.
fn next_step(quiet_ns: u64, budget: Duration) -> Step {
    let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    if quiet_ns < budget_ns {
        Step::Spin
    } else if quiet_ns < 1_000_000_000 {
        Step::Sleep(Duration::from_millis(1))
    } else {
        Step::Sleep(Duration::from_millis(10))
    }
}

async fn spin(shared: &Shared, budget: Duration) {
    let mut seen = shared.stats.net_input_bytes.load(Ordering::Relaxed);
    let mut moved_at = mono_ns();
    loop {
        let now = mono_ns();
        let bytes = shared.stats.net_input_bytes.load(Ordering::Relaxed);
        if bytes != seen {
            seen = bytes;
            moved_at = now;
        }
        match next_step(now.saturating_sub(moved_at), budget) {
            Step::Spin => tokio::task::yield_now().await,
            Step::Sleep(d) => super::timer::sleep(d).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_budget_accepts_microseconds_and_refuses_the_rest() {
        assert_eq!(parse_budget(None), Ok(None));
        assert_eq!(parse_budget(Some("")), Ok(None));
        assert_eq!(parse_budget(Some("0")), Ok(None));
        assert_eq!(
            parse_budget(Some(" 50 ")),
            Ok(Some(Duration::from_micros(50)))
        );
        assert_eq!(
            parse_budget(Some("1000000")),
            Ok(Some(Duration::from_secs(1)))
        );
        assert!(parse_budget(Some("1000001")).is_err());
        assert!(parse_budget(Some("-5")).is_err());
        assert!(parse_budget(Some("50us")).is_err());
    }

    #[test]
    fn next_step_spins_within_the_budget_then_backs_off() {
        let budget = Duration::from_micros(50);
        assert_eq!(next_step(0, budget), Step::Spin);
        assert_eq!(next_step(49_999, budget), Step::Spin);
        assert_eq!(
            next_step(50_000, budget),
            Step::Sleep(Duration::from_millis(1))
        );
        assert_eq!(
            next_step(999_999_999, budget),
            Step::Sleep(Duration::from_millis(1))
        );
        assert_eq!(
            next_step(1_000_000_000, budget),
            Step::Sleep(Duration::from_millis(10))
        );
    }
}
