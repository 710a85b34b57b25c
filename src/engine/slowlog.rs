//! The slow log, as Redis's slowlog.c keeps it: each command that ran for at least
//! `slowlog-log-slower-than` microseconds (never with -1, every command with 0) is remembered,
//! newest first, up to `slowlog-max-len` entries. An entry holds an id that only grows, the unix
//! time it was logged, the duration, the arguments (at most 32, each cut at 128 bytes, with
//! Redis's "... (N more arguments)" and "... (N more bytes)" markers; secrets as "(redacted)"),
//! the client's address and its name.
//!
//! It lives beside the keyspace lock, not under it: commands on the shared path (many cores at
//! once) log too. The threshold is an atomic read after every command; the entries sit behind a
//! mutex taken only to log one, or by SLOWLOG itself.
//!
//! The duration is the command's own time as the dispatcher measures it (`commands::execute`,
//! and per call on the shared path): its handler, its propagation, keyspace events and tracking,
//! as Redis's `call()` measures around `c->cmd->proc` and the work it triggers. Commands flagged
//! `skip_slowlog` (EXEC: its commands log one by one) and the AOF's replay are not logged.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// Arguments kept per entry (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGC: usize = 32;
/// Bytes kept per argument (Redis's `SLOWLOG_ENTRY_MAX_STRING`).
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    /// Unix seconds when it was logged.
    pub time: u64,
    pub duration_us: u64,
    pub argv: Vec<Bytes>,
    /// The client's address, `ip:port` (or `path:0` on the Unix socket).
    pub peer: String,
    /// The client's name, empty without one.
    pub name: Bytes,
}

#[derive(Debug, Default)]
struct Entries {
    newest_first: VecDeque<Entry>,
    next_id: u64,
}

/// The log and its two settings.
#[derive(Debug)]
pub struct SlowLog {
    /// `slowlog-log-slower-than`, microseconds; negative: off.
    threshold_us: AtomicI64,
    /// `slowlog-max-len`.
    max_len: AtomicUsize,
    entries: Mutex<Entries>,
}

impl Default for SlowLog {
    fn default() -> SlowLog {
        SlowLog {
            threshold_us: AtomicI64::new(10_000),
            max_len: AtomicUsize::new(128),
            entries: Mutex::new(Entries::default()),
        }
    }
}

impl SlowLog {
    /// Applies the two directives. A shorter `slowlog-max-len` trims the log at the next entry,
    /// as Redis trims it.
    pub fn configure(&self, threshold_us: i64, max_len: u64) {
        self.threshold_us.store(threshold_us, Ordering::Relaxed);
        self.max_len.store(
            usize::try_from(max_len).unwrap_or(usize::MAX),
            Ordering::Relaxed,
        );
    }

    /// Whether any command can be logged: the shared path reads the clock after each call only
    /// then.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.threshold_us.load(Ordering::Relaxed) >= 0
    }

    /// Whether a command that ran `nanos` is logged.
    #[inline]
    pub fn is_slow(&self, nanos: u64) -> bool {
        let threshold = self.threshold_us.load(Ordering::Relaxed);
        threshold >= 0 && nanos / 1000 >= threshold as u64
    }

    /// Logs a command that ran `nanos`. `redacted(i)` says whether argument `i` is a secret.
    pub fn push(
        &self,
        argv: &[Bytes],
        redacted: impl Fn(usize) -> bool,
        nanos: u64,
        now_unix: u64,
        peer: String,
        name: Option<Bytes>,
    ) {
        let kept = argv.len().min(MAX_ARGC);
        let argv = (0..kept)
            .map(|i| {
                if kept != argv.len() && i == kept - 1 {
                    Bytes::from(format!("... ({} more arguments)", argv.len() - kept + 1))
                } else if redacted(i) {
                    Bytes::from_static(b"(redacted)")
                } else if argv[i].len() > MAX_STRING {
                    let mut cut = argv[i][..MAX_STRING].to_vec();
                    cut.extend_from_slice(
                        format!("... ({} more bytes)", argv[i].len() - MAX_STRING).as_bytes(),
                    );
                    Bytes::from(cut)
                } else {
                    // Its own copy: a slice of the request would keep the whole read buffer.
                    Bytes::copy_from_slice(&argv[i])
                }
            })
            .collect();
        let mut log = self.lock();
        let id = log.next_id;
        log.next_id += 1;
        log.newest_first.push_front(Entry {
            id,
            time: now_unix,
            duration_us: nanos / 1000,
            argv,
            peer,
            name: name.unwrap_or_default(),
        });
        let max = self.max_len.load(Ordering::Relaxed);
        log.newest_first.truncate(max);
    }

    /// The newest `count` entries (all with `None`).
    pub fn newest(&self, count: Option<usize>) -> Vec<Entry> {
        let log = self.lock();
        let n = count.map_or(log.newest_first.len(), |c| c.min(log.newest_first.len()));
        log.newest_first.iter().take(n).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.lock().newest_first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SLOWLOG RESET: the entries go, the ids keep growing.
    pub fn reset(&self) {
        self.lock().newest_first.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // An entry is pushed whole or not at all: a poisoned log is still a log.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn entries_cut_long_arguments_and_long_commands_as_redis_does() {
        let log = SlowLog::default();
        log.configure(0, 128);
        let long = "x".repeat(130);
        let mut argv = args(&["mset", &long]);
        argv.extend((0..40).map(|i| Bytes::from(i.to_string())));
        log.push(&argv, |_| false, 12_345, 7, "1.2.3.4:5".into(), None);
        let e = &log.newest(None)[0];
        assert_eq!((e.id, e.time, e.duration_us), (0, 7, 12));
        assert_eq!(e.argv.len(), 32);
        assert_eq!(e.argv[1], format!("{}... (2 more bytes)", "x".repeat(128)));
        assert_eq!(e.argv[30], "28");
        // 42 arguments, 31 kept: the last slot says 11 more.
        assert_eq!(e.argv[31], "... (11 more arguments)");
        assert_eq!((e.peer.as_str(), &e.name[..]), ("1.2.3.4:5", &b""[..]));
        // Exactly 32: all kept.
        let argv: Vec<Bytes> = (0..32).map(|i| Bytes::from(i.to_string())).collect();
        log.push(&argv, |i| i == 3, 0, 8, "p".into(), Some("n".into()));
        let e = &log.newest(Some(1))[0];
        assert_eq!(e.argv, {
            let mut a = argv.clone();
            a[3] = Bytes::from_static(b"(redacted)");
            a
        });
        assert_eq!((e.id, &e.name[..]), (1, &b"n"[..]));
    }

    #[test]
    fn the_threshold_the_length_and_reset() {
        let log = SlowLog::default();
        assert!(log.enabled() && !log.is_slow(9_999_999) && log.is_slow(10_000_000));
        log.configure(-1, 2);
        assert!(!log.enabled() && !log.is_slow(u64::MAX));
        log.configure(0, 2);
        assert!(log.is_slow(0));
        for i in 0..5 {
            log.push(&args(&["get", "k"]), |_| false, i, 0, String::new(), None);
        }
        let ids: Vec<u64> = log.newest(None).iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3]);
        // A shorter length trims at the next entry.
        log.configure(0, 1);
        assert_eq!(log.len(), 2);
        log.push(&args(&["get", "k"]), |_| false, 0, 0, String::new(), None);
        assert_eq!(log.newest(Some(10))[0].id, 5);
        assert_eq!(log.len(), 1);
        log.reset();
        assert!(log.is_empty());
        log.push(&args(&["get", "k"]), |_| false, 0, 0, String::new(), None);
        assert_eq!(log.newest(Some(0)), vec![]);
        assert_eq!(log.newest(None)[0].id, 6);
    }
}
