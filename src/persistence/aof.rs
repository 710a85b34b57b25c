//! The append-only file, as Redis 7.0's multi-part AOF: `dir/appenddirname/` holds a manifest, one
//! base file and the incremental files written since the base.
//!
//! # Layout (Redis 7.0, `aof.c`)
//! ```text
//! appendonlydir/
//!   appendonly.aof.manifest        file appendonly.aof.1.base.rdb seq 1 type b\n
//!                                  file appendonly.aof.1.incr.aof seq 1 type i\n
//!   appendonly.aof.1.base.rdb      an RDB file (aof-use-rdb-preamble yes) — or .base.aof, commands
//!   appendonly.aof.1.incr.aof      RESP commands, exactly the write stream's bytes
//! ```
//! The manifest lists the base (type `b`), then the incr files in order (type `i`); files of type
//! `h` are history awaiting deletion. It is replaced atomically (temp file, fsync, rename, fsync of
//! the directory), so at any instant the manifest on disk names a complete, loadable set. While
//! the AOF is on, two more files wait beside them: the next rewrite's switch, prepared (below).
//!
//! # Writing
//! The AOF is one consumer of the write stream (`engine::propagate`). After each batch the
//! connection calls [`commit`] with the stream offset its writes reached, and awaits it before
//! sending the replies. Redis does this work once per event-loop iteration, in `beforeSleep`,
//! for all the clients served in it; `commit` does the same in tokio terms: it yields once, so
//! the other connections ready on this worker run their batches first, then the first to resume
//! drains everything the stream holds for the AOF — the writes of every connection so far — and
//! writes it with one `write` (everysec, no; when another thread holds the AOF, the writer
//! thread's next pass covers it), or rings the dedicated writer thread, whose pass is one `write`
//! and one `fdatasync` (always; on a current-thread runtime the connection writes and fsyncs
//! itself, as Redis's one thread does — the writer's hand-back cost an eventfd write per waiting
//! connection there). Progress (how far the file is written and synced) is published
//! on a watch channel. A connection waits (asynchronously: the runtime threads keep serving
//! others) until the file holds its writes — with `always`, until an fsync covers them. That is
//! group commit across connections: while one fsync runs, every batch that arrives meanwhile is
//! covered by the next. So no policy loses an acknowledged write to a kill -9; `everysec` fsyncs
//! once a second in a separate thread on a cloned descriptor (a power loss loses up to ~1-2 s),
//! `no` never does. `no-appendfsync-on-rewrite yes` skips the fsync — everysec's and always's —
//! while a rewrite or BGSAVE runs, and `always` replies after the write then, as in Redis.
//!
//! # Write errors (Redis 7.0's `flushAppendOnlyFile`)
//! A failed or short write leaves its bytes buffered, in order (a short write is cut back off the
//! file so it holds whole commands), and every later pass — at least one per cron tick — retries.
//! Meanwhile writes and PING are refused with `-MISCONF Errors writing to the AOF file:
//! <strerror>` ([`disk_error`]); a failed everysec fsync does the same until one succeeds. The
//! first write that succeeds lifts it ("AOF write error looks solved, Redis can write again.").
//! With `always` a failed write or fsync exits the process, as Redis does: replies already
//! promised durability. `aof-timestamp-enabled yes` puts `#TS:<unix seconds>\r\n` before the first
//! command of each new second (and at the top of a command base); the stream offsets exclude it.
//!
//! # Rewrite (BGREWRITEAOF, automatic, CONFIG SET appendonly yes)
//! No fork: under the keyspace lock the AOF's pending bytes are written out, the keyspace is
//! snapshotted as for BGSAVE (`snapshot::take`: the key table's segments are shared copy-on-write,
//! O(keys / 128) under the lock, nothing per key; a write after it copies the one segment it
//! touches), a new incr file is opened at exactly that stream position and — when the AOF was
//! already on — a manifest naming the old base, the old incrs and the new incr is installed (the
//! switch, next section). The
//! snapshot is the keyspace at the switch exactly: every write before it is in the base, none
//! after it (those are in the new incr file). A thread writes the new base from the snapshot; when
//! it is durable, a manifest naming the new base and the new incr replaces the old one and the old
//! files are deleted. A crash before the swap loads the old base and all incrs; after it, the new
//! base and the new incr. With `aof-rewrite-incremental-fsync yes` the base is fsynced every 4 MB
//! while it is written (Redis's rio autosync, `REDIS_AUTOSYNC_BYTES`). An RDB base carries the
//! `aof-base 1` aux field, as Redis's. BGREWRITEAOF with the AOF off does what Redis 7.0 does:
//! writes a base and a manifest naming only it, and leaves the AOF off.
//!
//! # The switch, prepared off the locks
//! Creating the new incr file and installing the manifest (temp, fsync, rename, fsync of the
//! directory) held both locks ~10.2 of the switch's ~10.4 ms (measured, 1M keys; Redis 7.0 does
//! the same fsyncs on its main thread in `openNewIncrAofForAppend`, plus its fork). So the next
//! switch is prepared ahead, with no lock held: after each manifest change — at AOF open, and by
//! the rewrite thread right after its final manifest — `prepare_switch` creates the next incr
//! file (`<name>.<seq>.incr.aof`, emptied if a leftover holds that name), fsyncs it, writes and
//! fsyncs `temp-<name>.manifest.<seq>` (the manifest in force plus that incr), and fsyncs the
//! directory. The switch then checks that the prepared manifest still extends the one in force
//! and renames it into place: no fsync, no file creation under the locks. The rename's directory
//! entry is the one thing not yet durable, so the sink records `dir_sync_owed` and `sync_sink`
//! fsyncs the directory before the first fsync of the new file: under `always` before any reply
//! that waits for it (a crash leaves the old manifest or the new one, both loadable: the old
//! names the old files, still there; the new names the prepared file, durable since it was
//! made); under everysec or no the cron fsyncs it within a tick, the data's own lag. Nothing
//! prepared, or no match (the rewrite thread failed to prepare, `dir` changed): the switch does
//! it the old way under the locks. The old incr's flush stays under the locks (under `always`
//! its fdatasync too: the connections wait for it and it must precede the switch).
//! Leftovers — temp manifests `temp-<name>.manifest.<seq>` and incr files past the manifest's
//! last (a crash, the AOF turned off) — are removed at startup and by the rewrite thread before
//! it prepares; a clean shutdown removes the prepared pair. Redis 7.0 reads only the files its
//! manifest names and opens a new incr file with `O_TRUNC`, so neither is ever read by it.
//!
//! # Loading
//! With `appendonly yes` the AOF is loaded instead of the RDB file. The base is an RDB file when it
//! starts with `REDIS`, otherwise commands. Commands are replayed through the dispatcher the
//! server passes in, with no write-stream consumer (nothing is re-propagated); a failing command
//! is ignored, as Redis's loader ignores its fake client's error replies (a BF.MADD that filled a
//! non-scaling filter). A command cut short at the end of the *last* file is a truncated AOF:
//! with `aof-load-truncated yes` the file is cut back to the last complete command and loading
//! goes on; otherwise, or anywhere else, loading fails with the file name and offset. An
//! unfinished MULTI at the end counts as truncated at its MULTI. `#...` lines (`aof-timestamp-
//! enabled` annotations) are skipped. Commands after an RDB part are loaded too (a Redis 6
//! RDB-preamble AOF). A Redis 6 `dir/appendonly.aof` with no AOF directory (or no manifest) is
//! first migrated as Redis 7.0's `aofUpgradePrepare` does: it becomes the base of a new manifest
//! (`file appendonly.aof seq 1 type b`) and moves into the directory.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::rdb::RdbWriter;
use super::rdb::SaveOptions;
use super::snapshot;
use crate::config::AppendFsync;
use crate::engine::propagate::encode_command;
use crate::engine::shared::AofWake;
use crate::engine::{
    AofProgress, AofRewriteJob, AofSink, Engine, PreparedSwitch, Shared, SubscriberId,
};
use crate::error::strerror;
use crate::store::db::DbSnapshot;
use crate::store::Value;

// ---------------------------------------------------------------------------------------------
// Manifest
// ---------------------------------------------------------------------------------------------

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    pub name: String,
    pub seq: u64,
    /// `b` base, `i` incr, `h` history.
    pub kind: char,
}

/// The manifest: base, incrs in order, history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<ManifestEntry>,
    pub incrs: Vec<ManifestEntry>,
    pub history: Vec<ManifestEntry>,
}

impl Manifest {
    /// Parses Redis 7's manifest: `key value` pairs per line (`file`, `seq`, `type`), `#` comments.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = split_words(line).ok_or(format!("Invalid AOF manifest line {}", n + 1))?;
            if words.len() % 2 != 0 {
                return Err(format!("Invalid AOF manifest file format (line {})", n + 1));
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for kv in words.chunks(2) {
                match kv[0].as_str() {
                    "file" => name = Some(kv[1].clone()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => kind = kv[1].chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(format!("Invalid AOF manifest file format (line {})", n + 1));
            };
            if name.contains('/') {
                return Err(format!("Invalid AOF file name in the manifest: {name}"));
            }
            let e = ManifestEntry { name, seq, kind };
            match kind {
                'b' => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some(e)
                }
                'i' => {
                    if m.incrs.last().is_some_and(|l| l.seq >= e.seq) {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    m.incrs.push(e)
                }
                'h' => m.history.push(e),
                _ => return Err(format!("Unknown AOF file type '{kind}'")),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    pub fn format(&self) -> String {
        let mut out = String::new();
        let all = self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incrs.iter());
        for e in all {
            out.push_str(&format!("file {} seq {} type {}\n", e.name, e.seq, e.kind));
        }
        out
    }

    /// The files to load, in order.
    pub fn load_order(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.base.iter().chain(self.incrs.iter())
    }
}

fn split_words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return Some(out);
        };
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => w.push(chars.next()?),
                    c => w.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                w.push(c);
                chars.next();
            }
        }
        out.push(w);
    }
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// Where the AOF lives, from the configuration.
#[derive(Debug, Clone)]
pub struct AofPaths {
    pub dir: PathBuf,
    pub filename: String,
}

impl AofPaths {
    pub fn from_shared(shared: &Shared) -> AofPaths {
        let c = shared.config();
        AofPaths {
            dir: Path::new(&c.dir).join(&c.appenddirname),
            filename: c.appendfilename.clone(),
        }
    }

    pub fn manifest(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest", self.filename))
    }

    fn base_name(&self, seq: u64, rdb: bool) -> String {
        let ext = if rdb { "rdb" } else { "aof" };
        format!("{}.{seq}.base.{ext}", self.filename)
    }

    fn incr_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.aof", self.filename)
    }
}

fn io_context(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

/// Installs `m` as the manifest atomically (temp, fsync, rename, fsync of the directory).
pub fn write_manifest(paths: &AofPaths, m: &Manifest) -> Result<(), String> {
    let tmp = paths.dir.join(format!("temp-{}.manifest", paths.filename));
    write_synced_manifest(&tmp, &m.format())?;
    std::fs::rename(&tmp, paths.manifest())
        .map_err(|e| io_context("Can't install the AOF manifest", &paths.manifest(), e))?;
    sync_dir(&paths.dir)
}

/// Writes manifest text to the file at `path` and fsyncs it (not yet installed: the caller
/// renames it into place).
fn write_synced_manifest(path: &Path, text: &str) -> Result<(), String> {
    let mut f =
        File::create(path).map_err(|e| io_context("Can't open the AOF manifest", path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| io_context("Can't write the AOF manifest", path, e))
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_context("Failed to fsync directory", dir, e))
}

fn open_incr(paths: &AofPaths, seq: u64) -> Result<(File, String), String> {
    let name = paths.incr_name(seq);
    let path = paths.dir.join(&name);
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| io_context("Can't open the append-only file", &path, e))?;
    Ok((f, name))
}

/// The temp manifest of a prepared switch to incr `seq`: a name of its own, so it never meets
/// [`write_manifest`]'s `temp-<name>.manifest` (Redis reads neither).
fn prepared_temp_name(paths: &AofPaths, seq: u64) -> String {
    format!("temp-{}.manifest.{seq}", paths.filename)
}

/// Prepares the next rewrite's switch after manifest `m`, with no lock held (module essay,
/// "The switch"): the next incr file, created empty (a leftover of that name is emptied, as
/// Redis's `O_TRUNC` does) and fsynced; a temp manifest naming `m`'s files and it, fsynced; then
/// the directory, so both entries are durable before the switch renames the manifest into place.
fn prepare_switch(paths: &AofPaths, m: &Manifest) -> Result<PreparedSwitch, String> {
    let seq = m.incrs.last().map_or(1, |e| e.seq + 1);
    let (file, incr_name) = open_incr(paths, seq)?;
    let path = paths.dir.join(&incr_name);
    file.set_len(0)
        .and_then(|_| file.sync_all())
        .map_err(|e| io_context("Can't prepare the append-only file", &path, e))?;
    let mut next = m.clone();
    next.incrs.push(ManifestEntry {
        name: incr_name.clone(),
        seq,
        kind: 'i',
    });
    let manifest = next.format();
    let temp = paths.dir.join(prepared_temp_name(paths, seq));
    write_synced_manifest(&temp, &manifest)?;
    sync_dir(&paths.dir)?;
    Ok(PreparedSwitch {
        after: m.format(),
        dir: paths.dir.clone(),
        seq,
        incr_name,
        file,
        temp,
        manifest,
    })
}

/// A prepared switch that will not be used: its temp manifest goes, and its incr file unless
/// the switch about to happen reuses that name (`keep`). Two unlinks, no fsync.
fn discard_prepared(p: PreparedSwitch, keep: Option<&str>) {
    let _ = std::fs::remove_file(&p.temp);
    if keep != Some(p.incr_name.as_str()) {
        let _ = std::fs::remove_file(p.dir.join(&p.incr_name));
    }
}

/// Deletes what an unused prepared switch leaves behind (a crash, the AOF turned off): temp
/// manifests `temp-<name>.manifest.<seq>` and incr files numbered past the last one `m` names.
/// Redis 7.0 loads only the files its manifest names, and truncates an incr file when it reuses
/// the name (`openNewIncrAofForAppend`), so they are harmless to it; this keeps the directory
/// tidy, as the history files are deleted. Run at startup and by the rewrite thread before it
/// prepares the next switch (nothing else creates such files meanwhile).
fn remove_leftovers(paths: &AofPaths, m: &Manifest) {
    let last = m.incrs.last().map_or(0, |e| e.seq);
    let temp_prefix = format!("temp-{}.manifest.", paths.filename);
    let incr_prefix = format!("{}.", paths.filename);
    let Ok(entries) = std::fs::read_dir(&paths.dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let stray = if let Some(seq) = name.strip_prefix(&temp_prefix) {
            seq.parse::<u64>().is_ok()
        } else if let Some(seq) = name
            .strip_prefix(&incr_prefix)
            .and_then(|r| r.strip_suffix(".incr.aof"))
        {
            seq.parse::<u64>().is_ok_and(|s| s > last) && !m.incrs.iter().any(|e| e.name == name)
        } else {
            false
        };
        if stray && std::fs::remove_file(entry.path()).is_ok() {
            tracing::info!("Removed the leftover AOF file {name}");
        }
    }
}

/// Fsyncs the sink's file — after the directory when a switch still owes its fsync, so nothing
/// written to a new incr file is acknowledged under `always` before the manifest naming it is
/// durable.
fn sync_sink(sink: &mut AofSink) -> std::io::Result<()> {
    if let Some(dir) = &sink.dir_sync_owed {
        File::open(dir).and_then(|d| d.sync_all())?;
        sink.dir_sync_owed = None;
    }
    sink.file.sync_data()
}

// ---------------------------------------------------------------------------------------------
// Writing: group commit
// ---------------------------------------------------------------------------------------------

/// The AOF's subscription and stream offset after the batch that just ran (None when the AOF is
/// off). Read under the keyspace lock by the connection, passed to [`commit`] after releasing it.
pub fn offset(engine: &Engine) -> Option<(SubscriberId, u64)> {
    let id = engine.aof_sub?;
    engine.stream.lock().offset(id).map(|o| (id, o))
}

/// Waits, without blocking the runtime, until this batch's writes (stream offset `upto` of
/// subscription `sub`) are in the file — and with `appendfsync always` on the disk — before the
/// replies go out: the group commit of the module essay. As in Redis, a kill -9 then loses no
/// acknowledged write under any policy (everysec and no only risk the page cache, i.e. a power
/// loss). After a failed write (everysec, no) the waiters are let go: their bytes stay buffered
/// and go out once the disk takes them, as Redis keeps its aof_buf.
///
/// Redis writes (and under `always` fsyncs) once per event-loop iteration, in `beforeSleep`, for
/// every client served in it. The tokio equivalent: the connection first yields once —
/// `yield_now` defers it until this worker has run its other ready tasks and polled the I/O
/// driver — so every connection with a batch ready on this worker appends its writes first; then
/// whichever resumes first writes all of them with one `write` (everysec, no) or rings the writer
/// thread for one `write` + `fdatasync` (always), and the others find their offset covered and
/// reply at once. Measured (strace -c -f, 100 k pipelined SETs, -P 16, 50 clients): AOF `write`s
/// 3 886 → 393 under everysec, `fdatasync`s 2 547 → 377 under always (Redis 7.0.15: 149).
pub async fn commit(shared: &Arc<Shared>, (sub, upto): (SubscriberId, u64)) {
    let always = shared.aof_always.load(Ordering::Relaxed);
    let covered = move |p: &AofProgress| {
        // A different subscription: the AOF was stopped (after writing and fsyncing everything).
        p.sub != Some(sub)
            || if always {
                p.released >= upto
            } else {
                p.written >= upto || p.write_failed
            }
    };
    if covered(&shared.aof_commit.progress.borrow()) {
        return;
    }
    tokio::task::yield_now().await;
    if covered(&shared.aof_commit.progress.borrow()) {
        return;
    }
    // On a current-thread runtime the writer thread's hand-back costs one eventfd write per
    // waiting connection (each remote wake unparks the driver): there `always` writes and
    // fsyncs here, as Redis's single thread does in beforeSleep.
    let inline = !always
        || tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    if inline {
        // A write to the page cache costs less than a hand-over to the writer thread and back
        // (measured: waiting on the writer for every batch cut pipelined everysec throughput to
        // ~0.5x of AOF off on the loaded 2-core machine): when the AOF is free, write the pending
        // bytes of every connection here, as Redis's beforeSleep does; when it is busy, the one
        // holding it or the writer thread's next pass covers this batch.
        let attempt = match shared.aof.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut guard) = attempt {
            if let Some(sink) = guard.as_mut().filter(|s| s.sub == sub) {
                flush(shared, sink);
            }
            drop(guard);
            if covered(&shared.aof_commit.progress.borrow()) {
                return;
            }
        }
    }
    let mut rx = shared.aof_commit.progress.subscribe();
    kick(shared);
    let _ = rx.wait_for(covered).await;
}

/// Rings the writer thread's doorbell (starting the thread on first use).
fn kick(shared: &Arc<Shared>) {
    let c = &shared.aof_commit;
    c.writer_started.call_once(|| spawn_writer(shared));
    // Only the ring that raises the flag wakes the thread: under load it is already awake.
    if !c.wake.pending.swap(true, Ordering::AcqRel) {
        let _g = c.wake.lock.lock().unwrap_or_else(|p| p.into_inner());
        c.wake.cv.notify_one();
    }
}

fn spawn_writer(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let wake = shared.aof_commit.wake.clone();
    let spawned = std::thread::Builder::new()
        .name("aof-writer".into())
        .spawn(move || writer_loop(weak, wake));
    if let Err(e) = spawned {
        // Connections under `always` would wait for it forever (Redis exits without its bio
        // threads, too).
        tracing::error!("Fatal: can't start the AOF writer thread: {e}");
        std::process::exit(1);
    }
}

/// The AOF writer (Redis does this in `beforeSleep`, before the event loop sends replies): one
/// pass drains everything the stream holds for the AOF, writes it with one `write`, and under
/// `always` fsyncs once, then publishes the progress the waiting connections watch.
fn writer_loop(weak: std::sync::Weak<Shared>, wake: Arc<AofWake>) {
    loop {
        {
            let mut g = wake.lock.lock().unwrap_or_else(|p| p.into_inner());
            while !wake.pending.load(Ordering::Acquire) {
                let (g2, t) = wake
                    .cv
                    .wait_timeout(g, std::time::Duration::from_secs(1))
                    .unwrap_or_else(|p| p.into_inner());
                g = g2;
                if t.timed_out() && weak.strong_count() == 0 {
                    return;
                }
            }
        }
        // Lowered before draining: a batch that rings after this point gets another pass.
        wake.pending.store(false, Ordering::Release);
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let mut guard = shared.aof();
        if let Some(sink) = guard.as_mut() {
            flush(&shared, sink);
        }
    }
}

/// One writer pass (the AOF lock is held): the stream's bytes to the file, and with `always` to
/// the disk. A write error under `always` stops the server, as in Redis; otherwise the bytes stay
/// buffered, writes are refused (MISCONF) and every later pass retries.
fn flush(shared: &Shared, sink: &mut AofSink) {
    if let Err(e) = write_pending(shared, sink) {
        fail_write(shared, sink, e);
        return;
    }
    if sink.fsync == AppendFsync::Always && sink.released.max(sink.synced) < sink.written {
        if fsync_paused(shared) {
            // no-appendfsync-on-rewrite: Redis skips the fsync while a rewrite or BGSAVE runs
            // and replies anyway (the bytes are in the page cache, as under everysec).
            sink.released = sink.written;
            publish_progress(shared, Some(sink));
            return;
        }
        if let Err(e) = sync_sink(sink) {
            tracing::warn!(
                "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...",
                strerror(&e)
            );
            std::process::exit(1);
        }
        sink.synced = sink.written;
    }
    publish_progress(shared, Some(sink));
}

/// `no-appendfsync-on-rewrite yes` while a rewrite or a BGSAVE runs: no fsync then (Redis's
/// `server.aof_no_fsync_on_rewrite && hasActiveChildProcess()`).
fn fsync_paused(shared: &Shared) -> bool {
    shared.config().no_appendfsync_on_rewrite
        && (rewrite_in_progress(shared) || shared.persistence().bgsave_in_progress)
}

fn fail_write(shared: &Shared, sink: &mut AofSink, e: std::io::Error) {
    if sink.fsync == AppendFsync::Always {
        // The replies of what is already executed cannot be taken back (Redis: "we have a
        // contract with the user that on acknowledged or observed writes are is synced on disk").
        tracing::warn!("Error writing to the AOF file: {}", strerror(&e));
        tracing::warn!(
            "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
        );
        std::process::exit(1);
    }
    if sink.last_write_ok {
        tracing::warn!("Error writing to the AOF file: {}", strerror(&e));
    }
    sink.last_write_ok = false;
    shared
        .aof_info
        .last_errno
        .store(e.raw_os_error().unwrap_or(EIO), Ordering::Relaxed);
    publish(shared, Some(sink));
}

const EIO: i32 = 5;

/// Redis refuses writes — and PING — while the AOF cannot be written or fsynced
/// (`writeCommandsDeniedByDiskError`): the MISCONF text then, None otherwise. Atomics only: the
/// dispatcher runs under the keyspace lock.
#[inline]
pub fn disk_error(shared: &Shared) -> Option<String> {
    if !disk_failed(shared) {
        return None;
    }
    disk_error_text(&shared.aof_info)
}

/// Whether [`disk_error`] refuses: the per-command test, kept apart from building the text.
#[inline]
pub fn disk_failed(shared: &Shared) -> bool {
    let i = &shared.aof_info;
    i.enabled.load(Ordering::Relaxed)
        && (i.write_failed.load(Ordering::Relaxed) || i.fsync_failed.load(Ordering::Relaxed))
}

#[inline(never)]
fn disk_error_text(i: &crate::engine::shared::AofInfo) -> Option<String> {
    let e = std::io::Error::from_raw_os_error(i.last_errno.load(Ordering::Relaxed));
    Some(format!("{}{}", crate::error::MISCONF_AOF, strerror(&e)))
}

/// Publishes the writer's buffer allocation (INFO `mem_aof_buffer`, left out of the `maxmemory`
/// comparison as Redis leaves out its `aof_buf`: `engine::memory`).
fn publish_buffer(shared: &Shared, sink: &AofSink) {
    shared
        .aof_info
        .buffer_bytes
        .store(sink.buf.capacity(), Ordering::Relaxed);
}

/// Drains the stream's bytes for the AOF after what a failed write left in the sink's buffer, and
/// writes them (the AOF lock is held). What could not be written stays buffered, in order, as
/// Redis keeps its `aof_buf`; a short write is cut back off the file so it holds whole commands.
fn write_pending(shared: &Shared, sink: &mut AofSink) -> std::io::Result<()> {
    let before = sink.buf.len();
    let end = {
        // The shared lock and the stream's mutex: writes made in place under the shared lock
        // keep going meanwhile (`engine::propagate`, "Writers under the shared lock").
        let engine = shared.engine_shared();
        let mut stream = engine.stream.lock();
        stream.drain(sink.sub, &mut sink.buf)
    };
    if let Some(end) = end {
        sink.buffered_to = end;
    }
    publish_buffer(shared, sink);
    if sink.timestamps && sink.buf.len() > before {
        // `#TS:<unix seconds>` before the first command of each new second (Redis's
        // genAofTimestampAnnotationIfNeeded; the loader and redis-check-aof skip `#` lines).
        let now = crate::engine::now_ms() / 1000;
        if now > sink.last_ts {
            sink.last_ts = now;
            sink.buf
                .splice(before..before, ts_annotation(now).into_bytes());
        }
    }
    let sleep = shared.aof_commit.flush_sleep_us.load(Ordering::Relaxed);
    if sleep > 0 && !sink.buf.is_empty() {
        // DEBUG AOF-FLUSH-SLEEP, as Redis's flushAppendOnlyFile sleeps before its write.
        std::thread::sleep(std::time::Duration::from_micros(sleep));
    }
    let mut done = 0usize;
    let result = loop {
        if done == sink.buf.len() {
            break Ok(());
        }
        match sink.file.write(&sink.buf[done..]) {
            Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    if result.is_err() && done > 0 {
        if let Ok(md) = sink.file.metadata() {
            if sink
                .file
                .set_len(md.len().saturating_sub(done as u64))
                .is_ok()
            {
                done = 0;
            }
        }
    }
    sink.incr_size += done as u64;
    sink.buf.drain(..done);
    if sink.buf.is_empty() {
        sink.written = sink.buffered_to;
        if sink.buf.capacity() > 4 << 20 {
            sink.buf = Vec::new();
        }
    }
    shared
        .aof_info
        .incr_size
        .store(sink.incr_size, Ordering::Relaxed);
    publish_buffer(shared, sink);
    result?;
    if !sink.last_write_ok {
        tracing::warn!("AOF write error looks solved, Redis can write again.");
        sink.last_write_ok = true;
        publish(shared, Some(sink));
    }
    Ok(())
}

/// The cron's AOF duties: collect a finished rewrite, apply configuration changes, start a
/// scheduled or automatic rewrite, a writer pass for what nobody committed (active expiry, a
/// failed write to retry), and the everysec fsync (in a thread, off the connections' path).
pub fn cron(shared: &Arc<Shared>) {
    // Nothing while the startup load runs: the AOF is not open yet, and turning it "on" then
    // would install a manifest of the half-loaded keyspace over the files being loaded.
    if shared.loading.load(Ordering::SeqCst) {
        return;
    }
    {
        let mut guard = shared.aof();
        let mut engine = shared.engine();
        poll_rewrite(shared, &mut guard, &mut engine);
        reconcile(shared, &mut guard, &mut engine);
        if auto_rewrite_due(shared, &guard) {
            tracing::info!("Starting automatic rewriting of AOF");
            if let Err(e) = start_rewrite_locked(shared, &mut guard, &mut engine, false) {
                tracing::warn!("Automatic AOF rewrite failed to start: {e}");
            }
        }
    }
    {
        let mut guard = shared.aof();
        if let Some(sink) = guard.as_mut() {
            flush(shared, sink);
        }
    }
    // A switch's directory fsync owed under everysec or no lags as their data may (~1 s); under
    // `always` the writer pays it before the first reply (`sync_sink`).
    let fsync_now = shared.aof().as_ref().is_some_and(|s| {
        (s.fsync == AppendFsync::EverySec && s.last_fsync.elapsed().as_millis() >= 1000)
            || (s.fsync != AppendFsync::Always && s.dir_sync_owed.is_some())
    });
    if fsync_now {
        let skip = fsync_paused(shared);
        let shared = shared.clone();
        std::thread::spawn(move || {
            // The fsync runs on a second handle, outside the AOF lock: connections keep writing
            // (Redis's bio fsync thread).
            let (target, dir) = {
                let mut guard = shared.aof();
                let Some(sink) = guard.as_mut() else {
                    return;
                };
                flush(&shared, sink);
                let dir = match sink.fsync {
                    AppendFsync::Always => None,
                    _ => sink.dir_sync_owed.take(),
                };
                let due = sink.fsync == AppendFsync::EverySec
                    && sink.last_fsync.elapsed().as_millis() >= 1000;
                if !due {
                    (None, dir)
                } else {
                    sink.last_fsync = Instant::now();
                    let data = !skip && sink.synced < sink.written;
                    let file = data.then(|| sink.file.try_clone().ok()).flatten();
                    (file.map(|f| (f, sink.written)), dir)
                }
            };
            if let Some(dir) = dir {
                // Before the data: the new incr file's bytes are only worth fsyncing once the
                // manifest naming it is durable.
                if let Err(e) = sync_dir(&dir) {
                    tracing::warn!("{e}");
                    if let Some(sink) = shared.aof().as_mut() {
                        sink.dir_sync_owed.get_or_insert(dir);
                    }
                    return;
                }
            }
            if let Some((file, upto)) = target {
                let info = &shared.aof_info;
                match file.sync_data() {
                    Ok(()) => {
                        info.fsync_failed.store(false, Ordering::Relaxed);
                        if let Some(sink) = shared.aof().as_mut() {
                            sink.synced = sink.synced.max(upto);
                            publish_progress(&shared, Some(sink));
                        }
                    }
                    Err(e) => {
                        // Writes are refused until an fsync succeeds (aof_bio_fsync_status).
                        if !info.fsync_failed.swap(true, Ordering::Relaxed) {
                            tracing::warn!("Fail to fsync the AOF file: {}", strerror(&e));
                        }
                        info.last_errno
                            .store(e.raw_os_error().unwrap_or(EIO), Ordering::Relaxed);
                    }
                }
            }
        });
    }
}

fn rewrite_in_progress(shared: &Shared) -> bool {
    shared.persistence().aof_rewrite.is_some()
}

/// Writes and fsyncs everything pending (shutdown, CONFIG SET appendonly no).
pub fn flush_all(shared: &Shared) {
    let mut guard = shared.aof();
    if let Some(sink) = guard.as_mut() {
        if write_pending(shared, sink).is_ok() && sync_sink(sink).is_ok() {
            sink.synced = sink.written;
        }
        // A clean stop leaves Redis's layout: no prepared switch beside the manifest's files.
        if let Some(p) = sink.prepared.take() {
            discard_prepared(p, None);
        }
        publish_progress(shared, Some(sink));
    }
}

// ---------------------------------------------------------------------------------------------
// Starting, stopping, rewriting
// ---------------------------------------------------------------------------------------------

/// Starts the AOF at server start, after loading: continues the manifest's last incr file, or
/// creates base + incr + manifest from the (just loaded) keyspace when there is no AOF yet.
pub fn open_at_startup(shared: &Shared) -> Result<(), String> {
    let paths = AofPaths::from_shared(shared);
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| io_context("Can't create the AOF directory", &paths.dir, e))?;
    let manifest = match std::fs::read_to_string(paths.manifest()) {
        Ok(text) => Some(Manifest::parse(&text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(io_context(
                "Can't read the AOF manifest",
                &paths.manifest(),
                e,
            ))
        }
    };
    let m = open_locked(shared, &paths, manifest)?;
    // The first rewrite's switch, prepared now that the locks are released.
    remove_leftovers(&paths, &m);
    match prepare_switch(&paths, &m) {
        Ok(p) => {
            let mut guard = shared.aof();
            match guard.as_mut() {
                Some(sink) if sink.manifest == p.after => sink.prepared = Some(p),
                _ => discard_prepared(p, None),
            }
        }
        Err(e) => {
            tracing::warn!(
                "Can't prepare the next AOF switch (it will be made under the locks): {e}"
            )
        }
    }
    Ok(())
}

/// [`open_at_startup`] under the locks; returns the manifest in force.
fn open_locked(
    shared: &Shared,
    paths: &AofPaths,
    manifest: Option<Manifest>,
) -> Result<Manifest, String> {
    let paths = paths.clone();
    // Lock order: the AOF, then the keyspace.
    let mut guard = shared.aof();
    let mut engine = shared.engine();
    match manifest {
        Some(mut m) => {
            let seq = match m.incrs.last() {
                Some(last) => last.seq,
                None => {
                    m.incrs.push(ManifestEntry {
                        name: paths.incr_name(1),
                        seq: 1,
                        kind: 'i',
                    });
                    write_manifest(&paths, &m)?;
                    1
                }
            };
            let (file, _) = open_incr(&paths, seq)?;
            let sizes = manifest_sizes(&paths, &m);
            install_sink(shared, &mut guard, &mut engine, file, m.format(), sizes);
            Ok(m)
        }
        None => {
            // No AOF yet: a base of the current data, an empty incr, then the manifest.
            let snaps = snapshot::take(shared, &engine.store);
            let base = paths.base_name(1, base_is_rdb(shared));
            let base_size = BaseJob::new(shared, paths.clone(), base.clone(), 1, snaps).write()?;
            let (file, incr) = open_incr(&paths, 1)?;
            let m = Manifest {
                base: Some(ManifestEntry {
                    name: base,
                    seq: 1,
                    kind: 'b',
                }),
                incrs: vec![ManifestEntry {
                    name: incr,
                    seq: 1,
                    kind: 'i',
                }],
                history: Vec::new(),
            };
            write_manifest(&paths, &m)?;
            install_sink(
                shared,
                &mut guard,
                &mut engine,
                file,
                m.format(),
                (base_size, 0),
            );
            Ok(m)
        }
    }
}

fn manifest_sizes(paths: &AofPaths, m: &Manifest) -> (u64, u64) {
    let size = |e: &ManifestEntry| {
        std::fs::metadata(paths.dir.join(&e.name))
            .map(|md| md.len())
            .unwrap_or(0)
    };
    let base = m.base.as_ref().map_or(0, size);
    let incr = m.incrs.iter().map(size).sum();
    (base, incr)
}

fn install_sink(
    shared: &Shared,
    guard: &mut Option<AofSink>,
    engine: &mut Engine,
    file: File,
    manifest: String,
    (base_size, incr_size): (u64, u64),
) {
    let sub = engine.subscribe_stream(0, None);
    engine.aof_sub = Some(sub);
    let fsync = shared.config().appendfsync;
    shared
        .aof_always
        .store(fsync == AppendFsync::Always, Ordering::Relaxed);
    let timestamps = shared.config().aof_timestamp_enabled;
    *guard = Some(AofSink {
        file,
        sub,
        buf: Vec::new(),
        buffered_to: 0,
        written: 0,
        synced: 0,
        released: 0,
        timestamps,
        last_ts: 0,
        fsync,
        last_fsync: Instant::now(),
        base_size,
        incr_size,
        rewrite_base_size: base_size + incr_size,
        last_write_ok: true,
        manifest,
        prepared: None,
        dir_sync_owed: None,
    });
    publish(shared, guard.as_ref());
}

/// Stops the AOF (CONFIG SET appendonly no): writes what is pending, fsyncs, unsubscribes.
fn stop(shared: &Shared, guard: &mut Option<AofSink>, engine: &mut Engine) {
    if let Some(mut sink) = guard.take() {
        // The keyspace lock is held here: drain as write_pending would, without retaking it.
        engine.stream.get_mut().drain(sink.sub, &mut sink.buf);
        if let Err(e) = sink
            .file
            .write_all(&sink.buf)
            .and_then(|_| sync_sink(&mut sink))
        {
            tracing::warn!("Fail to fsync the AOF file: {}", strerror(&e));
        }
        if let Some(p) = sink.prepared.take() {
            discard_prepared(p, None);
        }
        engine.unsubscribe_stream(sink.sub);
    }
    engine.aof_sub = None;
    publish(shared, None);
}

/// Brings the AOF in line with the configuration: `appendfsync`, and `appendonly` turned on (a
/// rewrite writes the base of the current data first, as Redis) or off. Both locks are held.
fn reconcile(shared: &Shared, guard: &mut Option<AofSink>, engine: &mut Engine) {
    let (on, fsync, timestamps) = {
        let c = shared.config();
        (c.appendonly, c.appendfsync, c.aof_timestamp_enabled)
    };
    if let Some(s) = guard.as_mut() {
        s.fsync = fsync;
        s.timestamps = timestamps;
    }
    shared
        .aof_always
        .store(fsync == AppendFsync::Always, Ordering::Relaxed);
    if on && guard.is_none() && !rewrite_in_progress(shared) {
        if let Err(e) = start_rewrite_locked(shared, guard, engine, true) {
            tracing::warn!("Can't turn the AOF on: {e}");
        }
    } else if !on && guard.is_some() && !rewrite_in_progress(shared) {
        stop(shared, guard, engine);
    }
    let scheduled = {
        let mut p = shared.persistence();
        let due = p.aof_rewrite_scheduled && !p.bgsave_in_progress;
        if due {
            p.aof_rewrite_scheduled = false;
        }
        due
    };
    // With the AOF off too: Redis 7.0 then writes a base and a manifest naming only it.
    if scheduled && !rewrite_in_progress(shared) {
        if let Err(e) = start_rewrite_locked(shared, guard, engine, false) {
            tracing::warn!("Background AOF rewrite failed to start: {e}");
        }
    }
}

/// Starts a rewrite (module essay). Both locks are held: the AOF (`guard`), then the keyspace.
/// `turn_on`: CONFIG SET appendonly yes (subscribe now, the manifest appears with the base).
/// With the AOF off and not turning on, BGREWRITEAOF as Redis 7.0 does it: a new base and a
/// manifest naming only it (the files of an older manifest become history and are deleted).
fn start_rewrite_locked(
    shared: &Shared,
    guard: &mut Option<AofSink>,
    engine: &mut Engine,
    turn_on: bool,
) -> Result<(), String> {
    if rewrite_in_progress(shared) {
        return Err("Background append only file rewriting already in progress".into());
    }
    let started = Instant::now();
    let paths = AofPaths::from_shared(shared);
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| io_context("Can't create the AOF directory", &paths.dir, e))?;
    // Everything before the switch goes to the old incr file.
    let old_manifest = match guard.as_mut() {
        Some(sink) if !sink.manifest.is_empty() => {
            // The keyspace lock is held: drain here, then write what the sink buffers.
            if let Some(end) = engine.stream.get_mut().drain(sink.sub, &mut sink.buf) {
                sink.buffered_to = end;
            }
            sink.file
                .write_all(&sink.buf)
                .map_err(|e| format!("Error writing to the AOF before the rewrite: {e}"))?;
            sink.incr_size += sink.buf.len() as u64;
            sink.buf.clear();
            sink.written = sink.buffered_to;
            if sink.fsync == AppendFsync::Always {
                // Connections wait for this fsync: it must cover the old file before the switch.
                sync_sink(sink)
                    .map_err(|e| format!("Error writing to the AOF before the rewrite: {e}"))?;
                sink.synced = sink.written;
            } else if let Ok(old) = sink.file.try_clone() {
                // Nobody waits for it (everysec promises about a second, `no` nothing): the old
                // file's last second is fsynced off the locks, which it held for 2-20 ms.
                // A failure is logged as the fsync loop logs it; it cannot refuse writes from
                // here (no handle on the shared state), and the new base about to be written
                // holds the same data.
                let _ = std::thread::Builder::new()
                    .name("aof-fsync".into())
                    .spawn(move || {
                        if let Err(e) = old.sync_data() {
                            tracing::warn!("Fail to fsync the AOF file: {}", strerror(&e));
                        }
                    });
            }
            sink.last_write_ok = true;
            publish(shared, Some(sink));
            Some(Manifest::parse(&sink.manifest)?)
        }
        Some(_) => return Err("the AOF is being turned on".into()),
        None if !turn_on => {
            return start_offline_rewrite(shared, &paths, engine);
        }
        None => None,
    };
    let flushed = started.elapsed();
    let snaps = snapshot::take(shared, &engine.store);
    let snapped = started.elapsed();
    let next_incr = old_manifest
        .as_ref()
        .and_then(|m| m.incrs.last().map(|e| e.seq + 1))
        .unwrap_or(1);
    let next_base = old_manifest
        .as_ref()
        .and_then(|m| m.base.as_ref().map(|e| e.seq + 1))
        .unwrap_or(1);
    let new_incr = ManifestEntry {
        name: paths.incr_name(next_incr),
        seq: next_incr,
        kind: 'i',
    };
    // The switch: from here on the AOF's bytes go to the new incr file.
    let mut prepared_used = false;
    let interim = match (guard.as_mut(), old_manifest) {
        (Some(sink), Some(mut m)) => {
            m.incrs.push(new_incr.clone());
            let text = m.format();
            match sink.prepared.take() {
                Some(p)
                    if p.after == sink.manifest
                        && p.dir == paths.dir
                        && p.seq == next_incr
                        && p.manifest == text =>
                {
                    // Prepared off the locks: the incr file and the temp manifest are durable;
                    // only the rename's directory entry is not, and the writer fsyncs the
                    // directory before the new file's first fsync (`sync_sink`).
                    match std::fs::rename(&p.temp, paths.manifest()) {
                        Ok(()) => {
                            sink.file = p.file;
                            sink.dir_sync_owed = Some(paths.dir.clone());
                            prepared_used = true;
                        }
                        Err(e) => tracing::warn!(
                            "{}",
                            io_context("Can't install the AOF manifest", &paths.manifest(), e)
                        ),
                    }
                }
                Some(p) => discard_prepared(p, Some(&new_incr.name)),
                None => {}
            }
            if !prepared_used {
                let (file, _) = open_incr(&paths, next_incr)?;
                write_manifest(&paths, &m)?;
                sink.file = file;
            }
            sink.manifest = text;
            engine.stream.get_mut().force_select(sink.sub);
            Some(m)
        }
        _ => {
            // Turning the AOF on: subscribe now; the manifest appears once the base is written.
            let (file, _) = open_incr(&paths, next_incr)?;
            install_sink(shared, guard, engine, file, String::new(), (0, 0));
            None
        }
    };
    let base_name = paths.base_name(next_base, base_is_rdb(shared));
    let base = BaseJob::new(shared, paths, base_name, next_base, snaps);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    tracing::info!(
        "AOF rewrite switch: locks held {:.3} ms (old incr flushed in {:.3} ms, snapshot taken in {:.3} ms, new incr and manifest {:.3} ms, {})",
        ms(started.elapsed()),
        ms(flushed),
        ms(snapped - flushed),
        ms(started.elapsed() - snapped),
        if prepared_used { "prepared" } else { "created under the locks" }
    );
    spawn_base_writer(shared, base, Some(new_incr), interim)
}

/// What the rewrite thread needs to write a base.
struct BaseJob {
    paths: AofPaths,
    name: String,
    seq: u64,
    rdb: bool,
    timestamps: bool,
    incremental_fsync: bool,
    opts: SaveOptions,
    snaps: Vec<(usize, DbSnapshot)>,
}

impl BaseJob {
    fn new(
        shared: &Shared,
        paths: AofPaths,
        name: String,
        seq: u64,
        snaps: Vec<(usize, DbSnapshot)>,
    ) -> BaseJob {
        let c = shared.config();
        BaseJob {
            paths,
            name,
            seq,
            rdb: c.aof_use_rdb_preamble,
            timestamps: c.aof_timestamp_enabled,
            incremental_fsync: c.aof_rewrite_incremental_fsync,
            opts: SaveOptions::from_config(&c),
            snaps,
        }
    }

    /// Writes the base, letting go of the snapshot segment by segment as it goes.
    fn write(&mut self) -> Result<u64, String> {
        write_base_file(self)
    }
}

fn base_is_rdb(shared: &Shared) -> bool {
    shared.config().aof_use_rdb_preamble
}

/// BGREWRITEAOF with the AOF off (see [`start_rewrite_locked`]).
fn start_offline_rewrite(
    shared: &Shared,
    paths: &AofPaths,
    engine: &mut Engine,
) -> Result<(), String> {
    let old = match std::fs::read_to_string(paths.manifest()) {
        Ok(text) => Manifest::parse(&text).ok(),
        Err(_) => None,
    };
    let next_base = old
        .as_ref()
        .and_then(|m| m.base.as_ref().map(|e| e.seq + 1))
        .unwrap_or(1);
    let snaps = snapshot::take(shared, &engine.store);
    let name = paths.base_name(next_base, base_is_rdb(shared));
    let base = BaseJob::new(shared, paths.clone(), name, next_base, snaps);
    spawn_base_writer(shared, base, None, old)
}

/// Runs the rewrite thread: the base, then a manifest naming it and `incr` (if any), then the
/// files of `old` that the new manifest no longer names are deleted.
fn spawn_base_writer(
    shared: &Shared,
    mut base: BaseJob,
    incr: Option<ManifestEntry>,
    old: Option<Manifest>,
) -> Result<(), String> {
    let job = Arc::new(AofRewriteJob {
        started: Instant::now(),
        copied_at_start: crate::store::keytable::entries_copied(),
        outcome: std::sync::Mutex::new(None),
    });
    shared.persistence().aof_rewrite = Some(job.clone());
    let thread_job = job.clone();
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            let r = base.write().and_then(|_| {
                let m = Manifest {
                    base: Some(ManifestEntry {
                        name: base.name.clone(),
                        seq: base.seq,
                        kind: 'b',
                    }),
                    incrs: incr.iter().cloned().collect(),
                    history: Vec::new(),
                };
                write_manifest(&base.paths, &m)?;
                // The old files are history now: delete them.
                if let Some(old) = &old {
                    for e in old.load_order().chain(old.history.iter()) {
                        let named =
                            e.name == base.name || incr.as_ref().is_some_and(|i| i.name == e.name);
                        if !named {
                            let _ = std::fs::remove_file(base.paths.dir.join(&e.name));
                        }
                    }
                }
                if incr.is_none() {
                    // The AOF is off: no switch to prepare.
                    return Ok(None);
                }
                remove_leftovers(&base.paths, &m);
                // The next rewrite's switch, made ready here, off the locks.
                match prepare_switch(&base.paths, &m) {
                    Ok(p) => Ok(Some(p)),
                    Err(e) => {
                        tracing::warn!("Can't prepare the next AOF switch (it will be made under the locks): {e}");
                        Ok(None)
                    }
                }
            });
            *thread_job.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        });
    if let Err(e) = spawned {
        shared.persistence().aof_rewrite = None;
        return Err(format!("Can't start the AOF rewrite thread: {e}"));
    }
    tracing::info!("Background append only file rewriting started");
    Ok(())
}

/// Collects a finished rewrite: the sink's manifest and sizes, INFO's status. Both locks held.
fn poll_rewrite(shared: &Shared, guard: &mut Option<AofSink>, engine: &mut Engine) {
    let job = shared.persistence().aof_rewrite.clone();
    let Some(job) = job else {
        return;
    };
    let outcome = job.outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(outcome) = outcome else {
        return;
    };
    let paths = AofPaths::from_shared(shared);
    let ok = outcome.is_ok();
    match outcome {
        Ok(mut prepared) => {
            if let Ok(text) = std::fs::read_to_string(paths.manifest()) {
                if let Ok(m) = Manifest::parse(&text) {
                    let sizes = manifest_sizes(&paths, &m);
                    if let Some(sink) = guard.as_mut() {
                        sink.manifest = text;
                        sink.base_size = sizes.0;
                        sink.incr_size = sizes.1;
                        sink.rewrite_base_size = sizes.0 + sizes.1;
                        if prepared.as_ref().is_some_and(|p| p.after == sink.manifest) {
                            sink.prepared = prepared.take();
                        }
                    }
                    publish(shared, guard.as_ref());
                }
            }
            if let Some(p) = prepared {
                discard_prepared(p, None);
            }
            tracing::info!("Background AOF rewrite finished successfully");
            tracing::info!(
                "Copy-on-write during the rewrite: {} keys copied",
                crate::store::keytable::entries_copied() - job.copied_at_start
            );
        }
        Err(e) => {
            tracing::warn!("Background AOF rewrite failed: {e}");
            // Turning the AOF on failed: it stays off (Redis's AOF_WAIT_REWRITE).
            if guard.as_ref().is_some_and(|s| s.manifest.is_empty()) {
                if let Some(sink) = guard.take() {
                    engine.unsubscribe_stream(sink.sub);
                    engine.aof_sub = None;
                }
                publish(shared, None);
            }
        }
    }
    let mut p = shared.persistence();
    p.aof_rewrite = None;
    p.aof_last_bgrewrite_ok = ok;
    p.aof_last_rewrite_time_sec = job.started.elapsed().as_secs() as i64;
    p.aof_rewrites += 1;
}

fn auto_rewrite_due(shared: &Shared, guard: &Option<AofSink>) -> bool {
    let (pct, min) = {
        let c = shared.config();
        (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
    };
    if pct == 0 || rewrite_in_progress(shared) || shared.persistence().bgsave_in_progress {
        return false;
    }
    match guard.as_ref() {
        Some(s) if !s.manifest.is_empty() => {
            let size = s.base_size + s.incr_size;
            let base = s.rewrite_base_size.max(1);
            size >= min && (size.saturating_sub(base)) * 100 / base >= pct
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Base files
// ---------------------------------------------------------------------------------------------

/// Redis's rio autosync for the rewrite (`REDIS_AUTOSYNC_BYTES`): with
/// `aof-rewrite-incremental-fsync yes` the base is fsynced every 4 MB as it is written, so the
/// final fsync never has a whole base of dirty pages to push at once (which would stall the
/// AOF's own fsyncs behind it).
const AUTOSYNC_BYTES: u64 = 4 << 20;

/// A file that fsyncs itself every `every` bytes written (0: never).
struct AutoSync {
    file: File,
    every: u64,
    since: u64,
}

impl Write for AutoSync {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        if self.every > 0 {
            self.since += n as u64;
            if self.since >= self.every {
                self.file.sync_data()?;
                self.since = 0;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes the base to a temp file, fsyncs it and renames it into place (then fsyncs the
/// directory). Returns its size.
fn write_base_file(job: &mut BaseJob) -> Result<u64, String> {
    let path = job.paths.dir.join(&job.name);
    let tmp = job
        .paths
        .dir
        .join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let result = (|| {
        let file = AutoSync {
            file: File::create(&tmp)?,
            every: if job.incremental_fsync {
                AUTOSYNC_BYTES
            } else {
                0
            },
            since: 0,
        };
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let size = if job.rdb {
            let mut r = RdbWriter::new(w, job.opts);
            let ctime = crate::engine::now_ms() / 1000;
            r.header_for(ctime, crate::engine::alloc::used_memory() as u64, true)?;
            snapshot::write_snapshots(&mut r, std::mem::take(&mut job.snaps))?;
            let (inner, size) = r.finish()?;
            w = inner;
            size
        } else {
            let mut size = 0;
            if job.timestamps {
                // A command base starts with the time of the rewrite (Redis forces one).
                let ts = ts_annotation(crate::engine::now_ms() / 1000);
                w.write_all(ts.as_bytes())?;
                size += ts.len() as u64;
            }
            size + write_commands(
                &mut w,
                std::mem::take(&mut job.snaps),
                job.opts.key_save_delay,
            )?
        };
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.file.sync_all()?;
        Ok::<u64, std::io::Error>(size)
    })();
    let size = result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_context("Error writing the AOF base", &tmp, e)
    })?;
    std::fs::rename(&tmp, &path).map_err(|e| io_context("Can't install the AOF base", &path, e))?;
    sync_dir(&job.paths.dir)?;
    Ok(size)
}

/// The keyspace as commands, as Redis's `rewriteAppendOnlyFileRio` writes it: `SELECT`, then per
/// key `SET` for strings (HLLs included), `BF.LOADCHUNK`/`CF.LOADCHUNK` chunk by chunk for filters
/// (what RedisBloom's AOF rewrite callbacks emit), `RESTORE key 0 <payload>` for the other module
/// types, and `PEXPIREAT` for a TTL.
///
/// `key_save_delay` is `rdb-key-save-delay`, a pause per key as in Redis's rewrite (tests only).
pub fn write_commands<W: Write>(
    w: &mut W,
    snaps: Vec<(usize, DbSnapshot)>,
    key_save_delay: i32,
) -> std::io::Result<u64> {
    let mut out = Vec::with_capacity(64 * 1024);
    let mut total = 0u64;
    let flush = |out: &mut Vec<u8>, w: &mut W, total: &mut u64| -> std::io::Result<()> {
        w.write_all(out)?;
        *total += out.len() as u64;
        out.clear();
        Ok(())
    };
    for (i, snap) in snaps {
        crate::engine::propagate::encode_select(&mut out, i);
        snap.drain(|key, value, expire, _access| -> std::io::Result<()> {
            if key_save_delay != 0 {
                crate::persistence::rdb::writer::debug_delay(key_save_delay);
            }
            match value {
                Value::Str(s) => encode_command(&mut out, &[b"SET" as &[u8], key, s]),
                Value::Bloom(bf) => {
                    encode_command(
                        &mut out,
                        &[b"BF.LOADCHUNK" as &[u8], key, b"1", &bf.header()],
                    );
                    let mut it = 1i64;
                    while let Some((next, data)) = bf.scandump_chunk(it) {
                        if next == 0 {
                            break;
                        }
                        encode_command(
                            &mut out,
                            &[
                                b"BF.LOADCHUNK" as &[u8],
                                key,
                                next.to_string().as_bytes(),
                                &data,
                            ],
                        );
                        it = next;
                        if out.len() > 1 << 20 {
                            flush(&mut out, w, &mut total)?;
                        }
                    }
                }
                Value::Cuckoo(cf) => {
                    let mut pos = 0u64;
                    loop {
                        match cf.scandump(pos) {
                            crate::store::cuckoo::DumpChunk::End => break,
                            crate::store::cuckoo::DumpChunk::Data { next, bytes } => {
                                encode_command(
                                    &mut out,
                                    &[
                                        b"CF.LOADCHUNK" as &[u8],
                                        key,
                                        next.to_string().as_bytes(),
                                        &bytes,
                                    ],
                                );
                                pos = next;
                            }
                        }
                        if out.len() > 1 << 20 {
                            flush(&mut out, w, &mut total)?;
                        }
                    }
                }
                other => {
                    let payload = super::dump::dump(other, false);
                    encode_command(&mut out, &[b"RESTORE" as &[u8], key, b"0", &payload]);
                }
            }
            if let Some(t) = expire {
                encode_command(
                    &mut out,
                    &[b"PEXPIREAT" as &[u8], key, t.to_string().as_bytes()],
                );
            }
            if out.len() > 1 << 20 {
                flush(&mut out, w, &mut total)?;
            }
            Ok(())
        })?;
    }
    flush(&mut out, w, &mut total)?;
    Ok(total)
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

/// Runs one replayed command (the server passes the dispatcher in: this floor cannot call it).
pub type Replay<'a> = dyn FnMut(&Shared, &mut Engine, &[Bytes]) + Send + 'a;

/// What loading found.
#[derive(Debug, Default)]
pub struct AofLoadStats {
    pub commands: u64,
    pub files: usize,
    pub bytes: u64,
    pub truncated: bool,
}

/// Why loading the AOF failed (startup exits 1 with this message).
#[derive(Debug)]
pub enum AofLoadError {
    NotFound,
    Fatal(String),
}

/// Loads the AOF named by the manifest into `engine` (whose keyspace should be empty).
pub fn load(
    shared: &Shared,
    engine: &mut Engine,
    replay: &mut Replay,
) -> Result<AofLoadStats, AofLoadError> {
    let paths = AofPaths::from_shared(shared);
    upgrade_single_file(shared, &paths).map_err(AofLoadError::Fatal)?;
    let text = match std::fs::read_to_string(paths.manifest()) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(AofLoadError::NotFound),
        Err(e) => {
            return Err(AofLoadError::Fatal(io_context(
                "Can't read the AOF manifest",
                &paths.manifest(),
                e,
            )))
        }
    };
    let manifest = Manifest::parse(&text).map_err(AofLoadError::Fatal)?;
    let truncated_ok = shared.config().aof_load_truncated;
    let verify = shared.config().rdbchecksum;
    let files: Vec<&ManifestEntry> = manifest.load_order().collect();
    let mut stats = AofLoadStats::default();
    for (n, entry) in files.iter().enumerate() {
        let last = n + 1 == files.len();
        let path = paths.dir.join(&entry.name);
        let mut data = Vec::new();
        let file_size = match read_unless_rdb(&path, &mut data) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && entry.kind == 'i' && last => {
                continue
            }
            Err(e) => {
                return Err(AofLoadError::Fatal(io_context(
                    "Can't open the append-only file",
                    &path,
                    e,
                )))
            }
        };
        stats.files += 1;
        stats.bytes += file_size;
        // An RDB base — or a Redis 6 file with an RDB preamble and commands after it: Redis's
        // loader reads commands after the RDB part of any file.
        let mut skip = 0usize;
        if data.starts_with(b"REDIS") {
            let size = usize::try_from(file_size).unwrap_or(usize::MAX);
            drop(data);
            let rdb = super::load_file(&path, &mut engine.store, verify).map_err(|e| {
                AofLoadError::Fatal(format!(
                    "Bad file format reading the append only file {}: {e}",
                    entry.name
                ))
            })?;
            skip = usize::try_from(rdb.consumed).unwrap_or(size).min(size);
            if skip == size {
                continue;
            }
            data = read_from(&path, skip as u64).map_err(|e| {
                AofLoadError::Fatal(io_context("Can't read the append-only file", &path, e))
            })?;
        }
        match replay_commands(shared, &data, engine, replay, &mut stats) {
            Ok(()) => {}
            Err(ParseStop::Truncated(valid)) if last && truncated_ok => {
                let valid = valid + skip;
                tracing::warn!(
                    "!!! Warning: short read while loading the AOF file {}!!!",
                    entry.name
                );
                tracing::warn!(
                    "AOF {} loaded anyway because aof-load-truncated is enabled; truncating it to {valid} bytes",
                    entry.name
                );
                if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                    let _ = f.set_len(valid as u64).and_then(|_| f.sync_all());
                }
                stats.truncated = true;
            }
            Err(ParseStop::Truncated(valid)) => {
                let valid = valid + skip;
                return Err(AofLoadError::Fatal(format!(
                    "Unexpected end of file reading the append only file {} at offset {valid}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                    entry.name
                )));
            }
            Err(ParseStop::Bad(offset)) => {
                let offset = offset + skip;
                return Err(AofLoadError::Fatal(format!(
                    "Bad file format reading the append only file {} at offset {offset}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>",
                    entry.name
                )));
            }
        }
    }
    // Keys the replay expired are not owed to anyone; and no save is due for loading.
    engine.store.set_log_expired(false);
    for db in engine.store.dbs.iter_mut() {
        db.dirty = 0;
    }
    Ok(stats)
}

/// The file from byte `at` to its end.
/// The file at `path` into `data`, and its size; but only its first five bytes when they are
/// `REDIS`: an RDB base is loaded by the RDB reader from the file itself, and reading all of it
/// here first (53 MB for a 600k-key base) was a copy thrown away.
fn read_unless_rdb(path: &Path, data: &mut Vec<u8>) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    (&mut f).take(5).read_to_end(data)?;
    if data[..] != *b"REDIS" {
        f.read_to_end(data)?;
        return Ok(data.len() as u64);
    }
    Ok(size)
}

fn read_from(path: &Path, at: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(at))?;
    let mut out = Vec::new();
    f.read_to_end(&mut out)?;
    Ok(out)
}

/// Redis 7.0's upgrade from a Redis 6 single-file AOF (`aofUpgradePrepare`): when
/// `dir/appendfilename` exists and there is no AOF directory, or no manifest, or a manifest that
/// names only that file as its base without having it, the file becomes the base of a new
/// manifest (`file appendonly.aof seq 1 type b`, written first) and is moved into the directory.
/// A crash in between is harmless: the next start finds the same situation and redoes it.
fn upgrade_single_file(shared: &Shared, paths: &AofPaths) -> Result<(), String> {
    let old = Path::new(&shared.config().dir).join(&paths.filename);
    if !old.is_file() {
        return Ok(());
    }
    let inside = paths.dir.join(&paths.filename);
    let manifest = match std::fs::read_to_string(paths.manifest()) {
        Ok(text) => Some(Manifest::parse(&text)?),
        Err(_) => None,
    };
    let upgrade = match &manifest {
        None => true,
        Some(m) => {
            m.incrs.is_empty()
                && (m.base.is_none()
                    || m.base.as_ref().is_some_and(|b| b.name == paths.filename)
                        && !inside.exists())
        }
    };
    if !upgrade {
        return Ok(());
    }
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| io_context("Can't open or create append-only dir", &paths.dir, e))?;
    let m = Manifest {
        base: Some(ManifestEntry {
            name: paths.filename.clone(),
            seq: 1,
            kind: 'b',
        }),
        incrs: Vec::new(),
        history: Vec::new(),
    };
    write_manifest(paths, &m)?;
    std::fs::rename(&old, &inside).map_err(|e| {
        io_context(
            "Error trying to move the old AOF file into the AOF dir",
            &old,
            e,
        )
    })?;
    sync_dir(&paths.dir)?;
    tracing::info!(
        "Successfully migrated an old-style AOF file ({}) into the AOF directory ({}).",
        paths.filename,
        shared.config().appenddirname
    );
    Ok(())
}

enum ParseStop {
    /// Cut short; the number of bytes that hold complete commands.
    Truncated(usize),
    /// Not RESP at this offset.
    Bad(usize),
}

fn replay_commands(
    shared: &Shared,
    data: &[u8],
    engine: &mut Engine,
    replay: &mut Replay,
    stats: &mut AofLoadStats,
) -> Result<(), ParseStop> {
    let mut pos = 0usize;
    let mut multi_at: Option<usize> = None;
    while pos < data.len() {
        if data[pos] == b'#' {
            // An annotation line (#TS:...).
            match memchr::memchr(b'\n', &data[pos..]) {
                Some(end) => {
                    pos += end + 1;
                    continue;
                }
                None => return Err(ParseStop::Truncated(multi_at.unwrap_or(pos))),
            }
        }
        let start = pos;
        let argv = match parse_command(data, &mut pos) {
            Ok(a) => a,
            Err(Parse::Truncated) => return Err(ParseStop::Truncated(multi_at.unwrap_or(start))),
            Err(Parse::Bad(at)) => return Err(ParseStop::Bad(at)),
        };
        if argv[0].eq_ignore_ascii_case(b"multi") {
            multi_at = Some(start);
        } else if argv[0].eq_ignore_ascii_case(b"exec") {
            multi_at = None;
        }
        replay(shared, engine, &argv);
        stats.commands += 1;
    }
    match multi_at {
        // A transaction without its EXEC: truncated at its MULTI (Redis reverts it).
        Some(at) => Err(ParseStop::Truncated(at)),
        None => Ok(()),
    }
}

enum Parse {
    Truncated,
    Bad(usize),
}

/// One `*N\r\n($len\r\n<bytes>\r\n)*N` command at `pos`.
/// Redis's timestamp annotation (`aof-timestamp-enabled`), one line the loader skips.
fn ts_annotation(unix_secs: u64) -> String {
    format!("#TS:{unix_secs}\r\n")
}

fn parse_command(data: &[u8], pos: &mut usize) -> Result<Vec<Bytes>, Parse> {
    let start = *pos;
    if data[start] != b'*' {
        return Err(Parse::Bad(start));
    }
    let n = read_number(data, pos, b'*')?;
    if !(1..=1 << 20).contains(&n) {
        return Err(Parse::Bad(start));
    }
    // The count is the file's word: reserve for a few arguments, grow with the ones that arrive.
    let mut argv = Vec::with_capacity((n as usize).min(16));
    for _ in 0..n {
        if *pos >= data.len() {
            return Err(Parse::Truncated);
        }
        if data[*pos] != b'$' {
            return Err(Parse::Bad(*pos));
        }
        let at = *pos;
        let len = usize::try_from(read_number(data, pos, b'$')?).map_err(|_| Parse::Bad(at))?;
        // A length past the end of the file is a truncated command, never an overflow.
        let end = match pos.checked_add(len).and_then(|e| e.checked_add(2)) {
            Some(end) if end <= data.len() => end,
            _ => return Err(Parse::Truncated),
        };
        if &data[end - 2..end] != b"\r\n" {
            return Err(Parse::Bad(end - 2));
        }
        argv.push(Bytes::copy_from_slice(&data[*pos..end - 2]));
        *pos = end;
    }
    Ok(argv)
}

fn read_number(data: &[u8], pos: &mut usize, prefix: u8) -> Result<u64, Parse> {
    let start = *pos;
    debug_assert_eq!(data[start], prefix);
    let Some(nl) = memchr::memchr(b'\n', &data[start..]) else {
        return Err(Parse::Truncated);
    };
    let line = &data[start + 1..start + nl];
    let Some(digits) = line.strip_suffix(b"\r") else {
        return Err(Parse::Bad(start));
    };
    let n = crate::numeric::parse_u64(digits).ok_or(Parse::Bad(start))?;
    *pos = start + nl + 1;
    Ok(n)
}

/// The `aof_*` lines of INFO persistence, in Redis 7.0's order (the size lines only while the AOF
/// is on). Reads atomics, never the AOF lock: INFO runs under the keyspace lock.
pub fn info_text(shared: &Shared, p: &crate::engine::PersistenceStatus) -> String {
    let i = &shared.aof_info;
    let enabled = i.enabled.load(Ordering::Relaxed);
    let current = p
        .aof_rewrite
        .as_ref()
        .map_or(-1, |j| j.started.elapsed().as_secs() as i64);
    let mut out = format!(
        "aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{current}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:{}\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        enabled as u8,
        p.aof_rewrite.is_some() as u8,
        p.aof_rewrite_scheduled as u8,
        p.aof_last_rewrite_time_sec,
        if p.aof_last_bgrewrite_ok { "ok" } else { "err" },
        p.aof_rewrites,
        if i.write_failed.load(Ordering::Relaxed) { "err" } else { "ok" },
    );
    if enabled {
        let base = i.base_size.load(Ordering::Relaxed);
        out.push_str(&format!(
            "aof_current_size:{}\r\naof_base_size:{base}\r\naof_pending_rewrite:0\r\naof_buffer_length:0\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
            base + i.incr_size.load(Ordering::Relaxed)
        ));
    }
    out
}

/// Mirrors the sink's figures into the atomics INFO and the dispatcher read, and its progress
/// into what waiting connections watch.
fn publish(shared: &Shared, sink: Option<&AofSink>) {
    let i = &shared.aof_info;
    i.enabled.store(sink.is_some(), Ordering::Relaxed);
    if let Some(s) = sink {
        i.base_size.store(s.base_size, Ordering::Relaxed);
        i.incr_size.store(s.incr_size, Ordering::Relaxed);
        i.write_failed.store(!s.last_write_ok, Ordering::Relaxed);
    } else {
        // Turning the AOF on again starts clean (Redis's startAppendOnly ignores old errors).
        i.write_failed.store(false, Ordering::Relaxed);
        i.fsync_failed.store(false, Ordering::Relaxed);
    }
    publish_progress(shared, sink);
}

fn publish_progress(shared: &Shared, sink: Option<&AofSink>) {
    let p = sink.map_or(AofProgress::default(), |s| AofProgress {
        sub: Some(s.sub),
        written: s.written,
        synced: s.synced,
        released: s.released.max(s.synced),
        write_failed: !s.last_write_ok,
    });
    shared.aof_commit.progress.send_if_modified(|old| {
        let changed = *old != p;
        *old = p;
        changed
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_errors() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.format(), text);
        assert_eq!(m.load_order().count(), 3);
        assert!(Manifest::parse("").is_err());
        assert!(Manifest::parse("file a seq x type b\n").is_err());
        assert!(Manifest::parse("file a seq 2 type i\nfile b seq 1 type i\n").is_err());
        let q = Manifest::parse("file \"a b\" seq 1 type i\n").unwrap();
        assert_eq!(q.incrs[0].name, "a b");
    }

    #[test]
    fn parse_stops_at_truncation_and_bad_bytes() {
        let mut pos = 0;
        let ok = b"*2\r\n$3\r\nDEL\r\n$1\r\na\r\n";
        assert_eq!(parse_command(ok, &mut pos).ok().unwrap().len(), 2);
        assert_eq!(pos, ok.len());
        for cut in 1..ok.len() {
            let mut p = 0;
            assert!(
                matches!(parse_command(&ok[..cut], &mut p), Err(Parse::Truncated)),
                "cut at {cut}"
            );
        }
        let mut p = 0;
        assert!(matches!(
            parse_command(b"*1\r\n+OK\r\n", &mut p),
            Err(Parse::Bad(4))
        ));
    }

    #[test]
    fn a_huge_bulk_length_is_truncation_not_a_panic() {
        // u64::MAX and usize-overflowing lengths from a damaged file.
        for text in [
            &b"*1\r\n$18446744073709551615\r\nab\r\n"[..],
            b"*1\r\n$18446744073709551614\r\nab\r\n",
            b"*2\r\n$1\r\na\r\n$99\r\nshort\r\n",
        ] {
            let mut pos = 0;
            assert!(matches!(
                parse_command(text, &mut pos),
                Err(Parse::Truncated)
            ));
        }
    }
}
