//! A one-owner wake-up flag: what a connection waits on besides its socket.
//!
//! A connection waits for its socket and, at the same time, for three rarer things: a push
//! (pub/sub message, invalidation, MONITOR line in its outbox), a CLIENT KILL, and the server's
//! shutdown. With one tokio `Notify`/`watch` each, every round of an unpipelined client polled all
//! three, and each poll of a registered `Notified` takes its notifier's mutex: ~450 of ~4,600
//! userspace instructions of a `PING` at `-P 1` (callgrind, issue-15 CPU note). A [`Signal`] is
//! one flag and one registered waker: the owner registers its waker once, and every later poll is
//! an atomic load and a waker comparison, no lock. The notifier sets the flag, then wakes the
//! registered waker (kept registered, so a later notify wakes it again).
//!
//! Only one task may wait on a signal (the connection that owns the client); notifiers may be
//! anywhere. The flag is sticky until [`Signal::take`] (or a ready poll) consumes it, so a notify
//! with nobody waiting is not lost. What fired is read from the owner's own state (the killed
//! flag, the outbox length, the shutdown flag), so one signal serves all three causes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Signal {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

/// The owner's side: the waker it registered, compared on each poll to skip the lock.
#[derive(Default)]
pub struct SignalWaiter {
    registered: Option<Waker>,
}

impl Signal {
    /// Sets the flag and wakes the waiting owner, if any.
    pub fn notify(&self) {
        self.fired.store(true, Ordering::SeqCst);
        let slot = self.waker.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = slot.as_ref() {
            w.wake_by_ref();
        }
    }

    /// Consumes the flag: true when a notify came since the last take.
    pub fn take(&self) -> bool {
        self.fired.load(Ordering::Acquire) && self.fired.swap(false, Ordering::AcqRel)
    }

    /// Ready (consuming the flag) once notified; otherwise registers `cx`'s waker, with the lock
    /// only when it differs from the one `waiter` registered last.
    pub fn poll_wait(&self, waiter: &mut SignalWaiter, cx: &mut Context<'_>) -> Poll<()> {
        let same = waiter
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if !same {
            let w = cx.waker().clone();
            *self.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(w.clone());
            waiter.registered = Some(w);
        }
        // After the registration: a notify that set the flag before it is seen here, one after
        // it wakes the registered waker.
        if self.fired.load(Ordering::SeqCst) && self.fired.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Waits for the next notify (see [`Signal::poll_wait`]).
    pub async fn wait(&self, waiter: &mut SignalWaiter) {
        std::future::poll_fn(|cx| self.poll_wait(waiter, cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_notify_before_the_wait_is_kept() {
        let s = Signal::default();
        s.notify();
        let mut w = SignalWaiter::default();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(s.poll_wait(&mut w, &mut cx).is_ready());
        assert!(s.poll_wait(&mut w, &mut cx).is_pending());
        assert!(!s.take());
        s.notify();
        assert!(s.take());
        assert!(!s.take());
    }

    #[test]
    fn a_notify_wakes_the_registered_waiter_every_time() {
        use std::sync::atomic::AtomicUsize;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let s = Arc::new(Signal::default());
        let seen = Arc::new(AtomicUsize::new(0));
        let (s2, seen2) = (s.clone(), seen.clone());
        // Each notify waits until the waiter has seen the one before, so none coalesce.
        let notifier = std::thread::spawn(move || {
            for i in 0..3 {
                while seen2.load(Ordering::SeqCst) < i {
                    std::thread::yield_now();
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                s2.notify();
            }
        });
        rt.block_on(async {
            let mut w = SignalWaiter::default();
            for _ in 0..3 {
                s.wait(&mut w).await;
                seen.fetch_add(1, Ordering::SeqCst);
            }
        });
        notifier.join().unwrap();
    }
}
