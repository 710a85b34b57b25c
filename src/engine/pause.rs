//! CLIENT PAUSE: for a while, clients' commands wait instead of running — all of them, or only
//! those that may write (`WRITE`: commands flagged `write` or `may_replicate`, and EXEC of a
//! transaction holding one), as Redis 7.0's `pauseClients` does. A pause only grows: a second
//! one keeps the later end and the stricter mode; CLIENT UNPAUSE or the end lifts it. Replicas
//! (their links to us) and our link to our primary are never paused; the connection that asked
//! for the pause is.
//!
//! A paused command waits in its connection (`server::connection`), after the replies of the
//! commands before it went out, holding no lock, and counts in INFO `blocked_clients`, as
//! Redis's postponed clients do. While a pause lasts, active expiry and eviction stop (the
//! dataset must not change under a failover that paused writes to let replicas catch up); a
//! read that meets a due key still reclaims it, where Redis answers as if it were gone and
//! deletes nothing until the pause ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The pause in force, if any.
#[derive(Debug, Default)]
pub struct ClientPause {
    /// Unix ms when the pause ends; 0: no pause.
    until_ms: AtomicU64,
    /// Every command waits (`ALL`), not only those that may write.
    all: AtomicBool,
    /// Woken by CLIENT UNPAUSE.
    lifted: tokio::sync::Notify,
    /// Held by whoever changes the pause (CLIENT PAUSE, UNPAUSE, its end), so that lifting an
    /// ended pause cannot clear the mode of a new one; readers take no lock.
    change: std::sync::Mutex<()>,
}

/// What a pause holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    Writes,
    All,
}

impl ClientPause {
    /// CLIENT PAUSE until `until_ms`: the later end and the stricter mode of this pause and the
    /// one in force win.
    pub fn pause(&self, until_ms: u64, all: bool) {
        let _change = self.lock();
        if all {
            self.all.store(true, Ordering::Relaxed);
        }
        self.until_ms.fetch_max(until_ms.max(1), Ordering::Release);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        let _change = self.lock();
        self.lift();
    }

    fn lift(&self) {
        self.until_ms.store(0, Ordering::Release);
        self.all.store(false, Ordering::Relaxed);
        self.lifted.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.change.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pause at `now_ms`, if one is in force. A pause past its end is lifted here.
    #[inline]
    pub fn at(&self, now_ms: u64) -> Option<Paused> {
        let until = self.until_ms.load(Ordering::Acquire);
        if until == 0 {
            return None;
        }
        self.at_slow(until, now_ms)
    }

    #[cold]
    fn at_slow(&self, until: u64, now_ms: u64) -> Option<Paused> {
        if now_ms >= until {
            // Ended: lifted, unless a longer one replaced it meanwhile.
            let _change = self.lock();
            if self.until_ms.load(Ordering::Acquire) == until {
                self.lift();
            }
            return None;
        }
        Some(if self.all.load(Ordering::Relaxed) {
            Paused::All
        } else {
            Paused::Writes
        })
    }

    /// Waits until no pause holds back a command of this kind (`write`), or `give_up` says so
    /// (the connection was killed, the server stops): polled every 10 ms at most.
    pub async fn wait(&self, write: bool, mut give_up: impl FnMut() -> bool) {
        loop {
            let now = super::now_ms();
            let until = match self.at(now) {
                None => return,
                Some(Paused::Writes) if !write => return,
                Some(_) => self.until_ms.load(Ordering::Acquire),
            };
            if give_up() {
                return;
            }
            let nap = Duration::from_millis(until.saturating_sub(now).clamp(1, 10));
            let lifted = self.lifted.notified();
            tokio::select! {
                _ = lifted => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_keeps_the_later_end_and_the_stricter_mode() {
        let p = ClientPause::default();
        assert_eq!(p.at(100), None);
        p.pause(1000, false);
        assert_eq!(p.at(100), Some(Paused::Writes));
        p.pause(500, true);
        assert_eq!(p.at(100), Some(Paused::All));
        // A later WRITE pause does not loosen ALL.
        p.pause(2000, false);
        assert_eq!(p.at(1500), Some(Paused::All));
        assert_eq!(p.at(2000), None);
        // Lifted at its end: the next pause starts afresh.
        p.pause(3000, false);
        assert_eq!(p.at(2500), Some(Paused::Writes));
        p.unpause();
        assert_eq!(p.at(2500), None);
    }

    #[tokio::test]
    async fn waiting_ends_with_the_pause_or_at_unpause() {
        let p = std::sync::Arc::new(ClientPause::default());
        let now = crate::engine::now_ms();
        p.pause(now + 60_000, false);
        // A read goes on under a WRITE pause.
        p.wait(false, || false).await;
        let waiter = {
            let p = p.clone();
            tokio::spawn(async move { p.wait(true, || false).await })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiter.is_finished());
        p.unpause();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("UNPAUSE lets the write go")
            .unwrap();
        p.pause(crate::engine::now_ms() + 50, true);
        let started = std::time::Instant::now();
        p.wait(false, || false).await;
        assert!(started.elapsed() >= Duration::from_millis(40));
    }
}
