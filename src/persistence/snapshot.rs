//! Writing snapshots to disk: crash safety, SAVE, BGSAVE without fork, and the save points.
//!
//! # Crash safety
//!
//! A snapshot is written to `temp-<pid>-<n>.rdb` in `dir`, flushed and `fsync`ed, then renamed over
//! `dbfilename`, and the directory is `fsync`ed so the rename itself is durable. A crash (even
//! `kill -9`) at any point leaves either the old file or the new one, both complete. A failed save
//! removes its temporary file, keeps the old snapshot, logs why, and records the reason for INFO.
//!
//! # BGSAVE without fork
//!
//! Redis forks and lets the kernel share pages copy-on-write. hyperbloom is multi-threaded, where a
//! fork is unsafe, so it builds the copy-on-write snapshot itself, at two levels:
//! - the key table of each database is a list of segments behind `Arc` (`store::keytable`):
//!   [`take`] clones the list under the keyspace lock — O(keys / 128) count increments, no key
//!   copied — and a write that follows copies the one segment it touches (a few hundred
//!   pointers, the entries shared behind a count; a changed entry is copied alone) while a
//!   snapshot still holds it. The writer lets go of each segment once it has written it
//!   ([`write_snapshots`], `DbSnapshot::drain`), so a write to it afterwards copies nothing;
//! - a filter's bit array lives in `Arc` pages, so copying its segment copies its page table, and
//!   a later add copies one page.
//!
//! Invariant: a snapshot is exactly the keyspace at the instant of [`take`] (keys already due then
//! left out, by the clock the database had then): a segment behind a shared `Arc` is reachable
//! only through `&`, so no later write, deletion, expiry, resize or flush can reach it. That is
//! the point-in-time image the AOF rewrite depends on (its new incr file starts at that instant).
//! The time [`take`] holds the lock is INFO `latest_fork_usec` (and `total_forks` counts
//! snapshots), the analogue of Redis's fork time; the keys copied by writes meanwhile are logged
//! when the save ends, as Redis logs the memory its child's copy-on-write cost.
//!
//! The lock is then released and a plain thread serialises the snapshot. The thread never touches
//! shared state: it leaves its outcome in the [`BgJob`], and the server cron (or the next SAVE,
//! BGSAVE, LASTSAVE or INFO) collects it — the way Redis's cron reaps its child — updating
//! LASTSAVE, the bgsave status and the change counter (only the changes made *before* the snapshot
//! are cleared).
//!
//! A synchronous save while a background save runs (SHUTDOWN, DEBUG RELOAD, SIGTERM) cancels the
//! background one first; the cancel flag is checked under the same lock as the final rename, so a
//! stale background file can never replace a newer one.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::rdb::{RdbWriter, SaveOptions};
use crate::engine::{BgJob, Shared};
use crate::store::db::DbSnapshot;
use crate::store::Store;

/// Serialises the final rename of every save against cancellation.
static RENAME_LOCK: Mutex<()> = Mutex::new(());
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where the snapshot goes and how it is written, read from the config.
#[derive(Debug, Clone)]
pub struct Target {
    pub dir: PathBuf,
    pub filename: String,
    pub opts: SaveOptions,
}

impl Target {
    pub fn from_shared(shared: &Shared) -> Target {
        let c = shared.config();
        Target {
            dir: PathBuf::from(&c.dir),
            filename: c.dbfilename.clone(),
            opts: SaveOptions::from_config(&c),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.filename)
    }
}

/// Writes a complete snapshot file through `body` with the crash-safety protocol of the module
/// docs. Returns the file size.
pub fn write_file(
    target: &Target,
    cancel: Option<&AtomicBool>,
    body: impl FnOnce(&mut RdbWriter<BufWriter<File>>) -> std::io::Result<()>,
) -> Result<u64, String> {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = target
        .dir
        .join(format!("temp-{}-{n}.rdb", std::process::id()));
    let result = write_temp(&tmp, target, cancel, body);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_temp(
    tmp: &Path,
    target: &Target,
    cancel: Option<&AtomicBool>,
    body: impl FnOnce(&mut RdbWriter<BufWriter<File>>) -> std::io::Result<()>,
) -> Result<u64, String> {
    let file = File::create(tmp).map_err(|e| {
        format!(
            "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
            tmp.display(),
            target.dir.display()
        )
    })?;
    let io_err = |e: std::io::Error| format!("Write error saving DB on disk: {e}");
    let mut w = RdbWriter::new(BufWriter::with_capacity(1 << 20, file), target.opts);
    let ctime = crate::engine::now_ms() / 1000;
    w.header(ctime, crate::engine::alloc::used_memory() as u64)
        .map_err(io_err)?;
    body(&mut w).map_err(io_err)?;
    let (buf, size) = w.finish().map_err(io_err)?;
    let file = buf.into_inner().map_err(|e| io_err(e.into_error()))?;
    file.sync_all().map_err(io_err)?;
    drop(file);
    let _guard = RENAME_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
        return Err("background save cancelled by a newer save".into());
    }
    let path = target.path();
    std::fs::rename(tmp, &path).map_err(|e| {
        format!(
            "Error moving temp DB file {} on the final destination {} (in server root dir {}): {e}",
            tmp.display(),
            path.display(),
            target.dir.display()
        )
    })?;
    // Make the rename durable. Failing to open a directory for fsync is not fatal on every
    // platform, but it is on Linux if it happens; report it.
    File::open(&target.dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("Failed to fsync directory {}: {e}", target.dir.display()))?;
    Ok(size)
}

/// Writes every database of a live store (SAVE, SHUTDOWN: the lock is held by the caller).
pub fn write_store<W: std::io::Write>(w: &mut RdbWriter<W>, store: &Store) -> std::io::Result<()> {
    for (i, db) in store.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        w.select_db(i, db.len() as u64, db.expires_count() as u64)?;
        for (k, v, exp, access) in db.saved_entries() {
            w.entry(k, v, exp, access)?;
        }
    }
    Ok(())
}

/// Writes snapshots of databases (BGSAVE, the AOF rewrite's RDB base, a full sync), letting go
/// of each key table segment as soon as it is written ([`DbSnapshot::drain`]).
pub fn write_snapshots<W: std::io::Write>(
    w: &mut RdbWriter<W>,
    dbs: Vec<(usize, DbSnapshot)>,
) -> std::io::Result<()> {
    for (i, snap) in dbs {
        let (keys, expires) = snap.counts();
        if keys == 0 {
            continue;
        }
        w.select_db(i, keys, expires)?;
        snap.drain(|k, v, exp, access| w.entry(k, v, exp, access))?;
    }
    Ok(())
}

/// A synchronous save of `store` (SAVE, SHUTDOWN, DEBUG RELOAD, SIGTERM). Cancels a background
/// save in flight. Updates LASTSAVE and the status on success; logs and records the reason on
/// failure.
pub fn save_sync(shared: &Shared, store: &mut Store) -> Result<u64, String> {
    if shared.loading.load(Ordering::SeqCst) {
        // The keyspace is not the file's content yet: saving now would destroy the snapshot.
        return Err("the dataset is still loading; not saving".into());
    }
    let target = Target::from_shared(shared);
    cancel_bgsave(shared);
    let started = Instant::now();
    // The live values change as RedisBloom's do when saved (a BGSAVE changes only its copy).
    for db in store.dbs.iter_mut() {
        db.prepare_for_save();
    }
    let result = write_file(&target, None, |w| write_store(w, store));
    let mut p = shared.persistence();
    match &result {
        Ok(size) => {
            tracing::info!(
                "DB saved on disk ({size} bytes in {:.3}s)",
                started.elapsed().as_secs_f64()
            );
            let dirty = store.dirty();
            store.reset_dirty(dirty);
            p.last_save_unix = crate::engine::now_ms() / 1000;
            shared.bgsave_failed.store(false, Ordering::Relaxed);
            p.saves += 1;
            p.last_error = None;
        }
        Err(e) => {
            tracing::warn!("Error saving DB on disk: {e}");
            p.last_error = Some(e.clone());
        }
    }
    result
}

/// Asks a running background save to give up (its result will be discarded).
fn cancel_bgsave(shared: &Shared) {
    let mut p = shared.persistence();
    if let Some(job) = p.job.take() {
        job.cancel.store(true, Ordering::SeqCst);
        p.bgsave_in_progress = false;
        p.bgsave_started = None;
        p.bgsave_scheduled = false;
        tracing::info!("Background saving cancelled: a foreground save supersedes it");
    }
}

/// The snapshot of `store` a background writer works from (BGSAVE, the AOF rewrite's base, a
/// full sync), taken under the keyspace lock the caller holds. The time that takes is INFO
/// `latest_fork_usec`: Redis reports its `fork()` there, the stall its parent pays to get a
/// copy-on-write image; ours is the same stall for the same image (`store::keytable`).
pub fn take(shared: &Shared, store: &Store) -> Vec<(usize, DbSnapshot)> {
    let started = Instant::now();
    let snaps = store.snapshot();
    let usec = started.elapsed().as_micros() as u64;
    shared
        .stats
        .latest_snapshot_usec
        .store(usec, Ordering::Relaxed);
    shared.stats.snapshots.fetch_add(1, Ordering::Relaxed);
    snaps
}

/// Why a background save could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgsaveRefused {
    InProgress,
    /// The startup load is still running.
    Loading,
}

/// Starts a background save: clones the keyspace now (the caller holds the lock) and serialises the
/// clone on a thread.
pub fn start_bgsave(shared: &Shared, store: &Store) -> Result<(), BgsaveRefused> {
    if shared.loading.load(Ordering::SeqCst) {
        return Err(BgsaveRefused::Loading);
    }
    let target = Target::from_shared(shared);
    let mut p = shared.persistence();
    if p.job.is_some() {
        return Err(BgsaveRefused::InProgress);
    }
    let clone_started = Instant::now();
    let dbs = take(shared, store);
    let job = Arc::new(BgJob {
        cancel: AtomicBool::new(false),
        outcome: Mutex::new(None),
        dirty_at_start: store.dirty(),
        started: Instant::now(),
        copied_at_start: crate::store::keytable::entries_copied(),
    });
    p.job = Some(job.clone());
    p.bgsave_in_progress = true;
    p.bgsave_started = Some(Instant::now());
    p.last_bgsave_try_unix = crate::engine::now_ms() / 1000;
    p.bgsave_scheduled = false;
    drop(p);
    tracing::info!(
        "Background saving started (snapshot taken in {:.3} ms)",
        clone_started.elapsed().as_secs_f64() * 1000.0
    );
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            let result = write_file(&target, Some(&job.cancel), |w| write_snapshots(w, dbs));
            *job.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        });
    if let Err(e) = spawned {
        let mut p = shared.persistence();
        if let Some(job) = p.job.take() {
            *job.outcome.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Err(format!("cannot start the save thread: {e}")));
            p.job = Some(job);
        }
    }
    Ok(())
}

/// Collects a finished background save: updates the status and the change counter, and starts a
/// scheduled BGSAVE. Called by the cron and by the persistence commands (lock held).
pub fn poll_bgsave(shared: &Shared, store: &mut Store) {
    let mut p = shared.persistence();
    let Some(job) = p.job.clone() else {
        let scheduled = p.bgsave_scheduled;
        drop(p);
        if scheduled {
            let _ = start_bgsave(shared, store);
        }
        return;
    };
    let outcome = job.outcome.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(outcome) = outcome else { return };
    p.job = None;
    p.bgsave_in_progress = false;
    p.bgsave_started = None;
    p.last_bgsave_duration_sec = job.started.elapsed().as_secs() as i64;
    match outcome {
        Ok(size) => {
            tracing::info!(
                "Background saving terminated with success ({size} bytes in {:.3}s)",
                job.started.elapsed().as_secs_f64()
            );
            tracing::info!(
                "Copy-on-write during the save: {} keys copied",
                crate::store::keytable::entries_copied() - job.copied_at_start
            );
            store.reset_dirty(job.dirty_at_start);
            p.last_save_unix = crate::engine::now_ms() / 1000;
            shared.bgsave_failed.store(false, Ordering::Relaxed);
            p.saves += 1;
            p.last_error = None;
        }
        Err(e) => {
            tracing::warn!("Background saving error: {e}");
            shared.bgsave_failed.store(true, Ordering::Relaxed);
            p.last_error = Some(e);
        }
    }
    let scheduled = p.bgsave_scheduled;
    drop(p);
    if scheduled {
        let _ = start_bgsave(shared, store);
    }
}

/// Redis waits this long before retrying a save point after a failed background save.
const BGSAVE_RETRY_DELAY_SECS: u64 = 5;

/// The save points: start a BGSAVE when, for some `save <seconds> <changes>`, at least `changes`
/// changes happened and `seconds` passed since the last successful save.
pub fn check_save_points(shared: &Shared, store: &mut Store) {
    poll_bgsave(shared, store);
    let points = shared.config().save.clone();
    if points.is_empty() {
        return;
    }
    let dirty = store.dirty();
    let now = crate::engine::now_ms() / 1000;
    let p = shared.persistence();
    if p.job.is_some() {
        return;
    }
    let since_save = now.saturating_sub(p.last_save_unix);
    let may_retry = !shared.bgsave_failed.load(Ordering::Relaxed)
        || now.saturating_sub(p.last_bgsave_try_unix) > BGSAVE_RETRY_DELAY_SECS;
    drop(p);
    for (secs, changes) in points {
        if dirty >= changes && since_save > secs && may_retry {
            tracing::info!("{changes} changes in {secs} seconds. Saving...");
            let _ = start_bgsave(shared, store);
            break;
        }
    }
}
