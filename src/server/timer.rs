//! Timers for a runtime built without tokio's time driver.
//!
//! A runtime with the time driver pays for it on every park, whether or not a timer is due: it
//! locks the wheel, finds the next expiration, reads the clock and processes the wheel again after
//! `epoll_wait` returns. At `-P 1` a park happens for every request, and callgrind put that at
//! ~550 of the ~4,200 userspace instructions of a `PING` (issue 15). Redis's event loop has the
//! same problem solved the same way: one coarse `serverCron` instead of a timer per client.
//!
//! So `main` builds the connection runtime with the I/O driver only and calls [`install`], which
//! starts one thread running a second, timer-only runtime. Every timer of the server (the cron's
//! `hz` sleep, the replication link's timeouts, WAIT's deadline, the soft output limit's clock) is
//! created through this module: with a timer thread installed, the timer is registered with that
//! thread's wheel (the future is still polled by the task that awaits it; when it fires the timer
//! thread wakes that task, which is a remote wake-up of the connection runtime — a handful per
//! second at the default `hz`). Without one (the in-process tests, whose `#[tokio::test]` runtimes
//! have the time driver, `tokio::time::pause` included), the helpers are plain `tokio::time`.
//!
//! Nothing on the per-request path creates a timer: the `timeout` directive (idle clients) is
//! enforced by the cron (`server::idle`), as Redis's `clientsCronHandleTimeout` does.

use std::future::IntoFuture;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, Interval, Sleep, Timeout};

/// The timer thread's runtime, once [`install`] ran.
static TIMER: OnceLock<Handle> = OnceLock::new();

/// Starts the timer thread (a current-thread runtime with the time driver only) and routes every
/// timer of this module to it. For a runtime built without `enable_time`; call it once, before
/// serving. A second call does nothing.
pub fn install() -> std::io::Result<()> {
    if TIMER.get().is_some() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("hb-timer".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))?;
    let _ = TIMER.set(handle);
    Ok(())
}

/// Runs `f` (which creates a timer) in the timer thread's context when there is one.
fn on_timer_wheel<T>(f: impl FnOnce() -> T) -> T {
    match TIMER.get() {
        Some(h) => {
            let _guard = h.enter();
            f()
        }
        None => f(),
    }
}

/// `tokio::time::sleep`.
pub fn sleep(d: Duration) -> Sleep {
    on_timer_wheel(|| tokio::time::sleep(d))
}

/// `tokio::time::sleep_until`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    on_timer_wheel(|| tokio::time::sleep_until(deadline))
}

/// `tokio::time::timeout`.
pub fn timeout<F: IntoFuture>(d: Duration, f: F) -> Timeout<F::IntoFuture> {
    on_timer_wheel(|| tokio::time::timeout(d, f))
}

/// `tokio::time::interval`.
pub fn interval(period: Duration) -> Interval {
    on_timer_wheel(|| tokio::time::interval(period))
}
