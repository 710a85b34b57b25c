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
//! the directory), so at any instant the manifest on disk names a complete, loadable set.
//!
//! # Writing
//! The AOF is one consumer of the write stream (`engine::propagate`). After each batch, the
//! connection calls [`commit`] with the stream offset its writes reached, before it sends the
//! replies. `commit` is a group commit: under the file lock it drains everything the stream holds
//! for the AOF (the writes of every connection so far), writes it with one `write`, and for
//! `appendfsync always` one `fdatasync`; a connection whose offset is already covered returns at
//! once. So with `always` no reply leaves before its write is on disk, and concurrent clients
//! share fsyncs as Redis's one-fsync-per-event-loop does. `everysec` writes before replying
//! (a kill -9 loses nothing; a power loss up to ~1 s) and a cron fsyncs once a second off the hot
//! path; `no` only writes.
//!
//! # Rewrite (BGREWRITEAOF, automatic, CONFIG SET appendonly yes)
//! No fork: under the keyspace lock the AOF's pending bytes are written out, the keyspace is
//! snapshotted (values share their pages, as for BGSAVE), a new incr file is opened at exactly
//! that stream position and — when the AOF was already on — a manifest naming the old base, the
//! old incrs and the new incr is installed. A thread writes the new base from the snapshot; when
//! it is durable, a manifest naming the new base and the new incr replaces the old one and the old
//! files are deleted. A crash before the swap loads the old base and all incrs; after it, the new
//! base and the new incr.
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
//! enabled` annotations) are skipped.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::rdb::SaveOptions;
use super::snapshot::{self, Target};
use crate::config::AppendFsync;
use crate::engine::propagate::encode_command;
use crate::engine::{AofRewriteJob, AofSink, Engine, Shared};
use crate::store::db::DbSnapshot;
use crate::store::{Store, Value};

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
    let mut f =
        File::create(&tmp).map_err(|e| io_context("Can't open the AOF manifest", &tmp, e))?;
    f.write_all(m.format().as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| io_context("Can't write the AOF manifest", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, paths.manifest())
        .map_err(|e| io_context("Can't install the AOF manifest", &paths.manifest(), e))?;
    sync_dir(&paths.dir)
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

// ---------------------------------------------------------------------------------------------
// Writing: group commit
// ---------------------------------------------------------------------------------------------

/// The AOF's stream offset after the batch that just ran (None when the AOF is off). Read under
/// the keyspace lock by the connection, passed to [`commit`] after releasing it.
pub fn offset(engine: &Engine) -> Option<u64> {
    engine.aof_sub.and_then(|id| engine.stream.offset(id))
}

/// Makes every write up to stream offset `upto` reach the file (and the disk, with `always`)
/// before returning: the group commit of the module essay. Errors are recorded for INFO; with
/// `always` a write error stops the server as in Redis.
pub fn commit(shared: &Shared, upto: u64) {
    // Without `always`, a connection never waits for another's write: if the AOF is busy its bytes
    // go out with the next commit or the cron's pass (within 1/hz s), inside everysec's bound.
    let mut guard = if shared.aof_always.load(Ordering::Relaxed) {
        shared.aof()
    } else {
        match shared.aof.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        }
    };
    let Some(sink) = guard.as_mut() else {
        return;
    };
    let durable = sink.fsync == AppendFsync::Always;
    if durable && sink.synced >= upto || !durable && sink.written >= upto {
        return;
    }
    if let Err(e) = write_pending(shared, sink) {
        fail_write(shared, sink, e);
        return;
    }
    if durable {
        if let Err(e) = sink.file.sync_data() {
            fail_write(shared, sink, e);
            return;
        }
        sink.synced = sink.written;
    }
}

fn fail_write(shared: &Shared, sink: &mut AofSink, e: std::io::Error) {
    tracing::warn!("Error writing to the AOF file: {e}");
    sink.last_write_ok = false;
    publish(shared, Some(sink));
    if sink.fsync == AppendFsync::Always {
        tracing::error!(
            "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
        );
        std::process::exit(1);
    }
}

/// Drains the stream's bytes for the AOF and writes them (the AOF lock is held).
fn write_pending(shared: &Shared, sink: &mut AofSink) -> std::io::Result<()> {
    sink.buf.clear();
    let end = {
        let mut engine = shared.engine();
        engine.stream.drain(sink.sub, &mut sink.buf)
    };
    if !sink.buf.is_empty() {
        sink.file.write_all(&sink.buf)?;
        sink.incr_size += sink.buf.len() as u64;
        if sink.buf.capacity() > 4 << 20 {
            sink.buf = Vec::new();
        }
    }
    if let Some(end) = end {
        sink.written = end;
    }
    sink.last_write_ok = true;
    shared
        .aof_info
        .incr_size
        .store(sink.incr_size, Ordering::Relaxed);
    Ok(())
}

/// The cron's AOF duties: collect a finished rewrite, apply configuration changes, start a
/// scheduled or automatic rewrite, and the everysec fsync (in a thread, off the connections' path).
pub fn cron(shared: &Arc<Shared>) {
    {
        let mut guard = shared.aof();
        let mut engine = shared.engine();
        poll_rewrite(shared, &mut guard, &mut engine);
        reconcile(shared, &mut guard, &mut engine);
        if auto_rewrite_due(shared, &guard) {
            tracing::info!("Starting automatic rewriting of AOF");
            if let Err(e) = start_rewrite_locked(shared, &mut guard, &mut engine) {
                tracing::warn!("Automatic AOF rewrite failed to start: {e}");
            }
        }
    }
    // Bytes a busy commit left behind (everysec, no) reach the file at least once a tick.
    {
        let mut guard = shared.aof();
        if let Some(sink) = guard.as_mut() {
            if sink.fsync != AppendFsync::Always {
                if let Err(e) = write_pending(shared, sink) {
                    fail_write(shared, sink, e);
                }
            }
        }
    }
    let fsync_now = shared.aof().as_ref().is_some_and(|s| {
        s.fsync == AppendFsync::EverySec && s.last_fsync.elapsed().as_millis() >= 1000
    });
    if fsync_now {
        let skip = shared.config().no_appendfsync_on_rewrite
            && (rewrite_in_progress(shared) || shared.persistence().bgsave_in_progress);
        let shared = shared.clone();
        std::thread::spawn(move || {
            // The fsync runs on a second handle, outside the AOF lock: connections keep writing
            // (Redis's bio fsync thread).
            let target = {
                let mut guard = shared.aof();
                let Some(sink) = guard.as_mut() else {
                    return;
                };
                sink.last_fsync = Instant::now();
                if write_pending(&shared, sink).is_err() || skip || sink.synced >= sink.written {
                    return;
                }
                sink.file.try_clone().ok().map(|f| (f, sink.written))
            };
            if let Some((file, upto)) = target {
                if file.sync_data().is_ok() {
                    if let Some(sink) = shared.aof().as_mut() {
                        sink.synced = sink.synced.max(upto);
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
        if write_pending(shared, sink).is_ok() {
            let _ = sink.file.sync_data();
            sink.synced = sink.written;
        }
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
            Ok(())
        }
        None => {
            // No AOF yet: a base of the current data, an empty incr, then the manifest.
            let rdb = shared.config().aof_use_rdb_preamble;
            let snaps = snapshot_all(&engine.store);
            let base = paths.base_name(1, rdb);
            let base_size = write_base(shared, &paths, &base, rdb, &snaps)?;
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
            Ok(())
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
    *guard = Some(AofSink {
        file,
        sub,
        buf: Vec::new(),
        written: 0,
        synced: 0,
        fsync,
        last_fsync: Instant::now(),
        base_size,
        incr_size,
        rewrite_base_size: base_size + incr_size,
        last_write_ok: true,
        manifest,
    });
    publish(shared, guard.as_ref());
}

/// Stops the AOF (CONFIG SET appendonly no): writes what is pending, fsyncs, unsubscribes.
fn stop(shared: &Shared, guard: &mut Option<AofSink>, engine: &mut Engine) {
    if let Some(mut sink) = guard.take() {
        sink.buf.clear();
        engine.stream.drain(sink.sub, &mut sink.buf);
        let _ = sink.file.write_all(&sink.buf);
        let _ = sink.file.sync_data();
        engine.unsubscribe_stream(sink.sub);
    }
    engine.aof_sub = None;
    publish(shared, None);
}

/// Brings the AOF in line with the configuration: `appendfsync`, and `appendonly` turned on (a
/// rewrite writes the base of the current data first, as Redis) or off. Both locks are held.
fn reconcile(shared: &Shared, guard: &mut Option<AofSink>, engine: &mut Engine) {
    let (on, fsync) = {
        let c = shared.config();
        (c.appendonly, c.appendfsync)
    };
    if let Some(s) = guard.as_mut() {
        s.fsync = fsync;
    }
    shared
        .aof_always
        .store(fsync == AppendFsync::Always, Ordering::Relaxed);
    if on && guard.is_none() && !rewrite_in_progress(shared) {
        if let Err(e) = start_rewrite_locked(shared, guard, engine) {
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
    if scheduled && guard.is_some() && !rewrite_in_progress(shared) {
        if let Err(e) = start_rewrite_locked(shared, guard, engine) {
            tracing::warn!("Background AOF rewrite failed to start: {e}");
        }
    }
}

fn snapshot_all(store: &Store) -> Vec<(usize, DbSnapshot)> {
    store
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| (i, d.snapshot()))
        .collect()
}

/// Starts a rewrite (module essay). Both locks are held: the AOF (`guard`), then the keyspace.
fn start_rewrite_locked(
    shared: &Shared,
    guard: &mut Option<AofSink>,
    engine: &mut Engine,
) -> Result<(), String> {
    if rewrite_in_progress(shared) {
        return Err("Background append only file rewriting already in progress".into());
    }
    let paths = AofPaths::from_shared(shared);
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| io_context("Can't create the AOF directory", &paths.dir, e))?;
    // Everything before the switch goes to the old incr file.
    let old_manifest = match guard.as_mut() {
        Some(sink) if !sink.manifest.is_empty() => {
            sink.buf.clear();
            engine.stream.drain(sink.sub, &mut sink.buf);
            sink.file
                .write_all(&sink.buf)
                .and_then(|_| sink.file.sync_data())
                .map_err(|e| format!("Error writing to the AOF before the rewrite: {e}"))?;
            sink.incr_size += sink.buf.len() as u64;
            sink.buf.clear();
            if let Some(o) = engine.stream.offset(sink.sub) {
                sink.written = o;
                sink.synced = o;
            }
            Some(Manifest::parse(&sink.manifest)?)
        }
        _ => None,
    };
    let snaps = snapshot_all(&engine.store);
    let next_incr = old_manifest
        .as_ref()
        .and_then(|m| m.incrs.last().map(|e| e.seq + 1))
        .unwrap_or(1);
    let next_base = old_manifest
        .as_ref()
        .and_then(|m| m.base.as_ref().map(|e| e.seq + 1))
        .unwrap_or(1);
    let (file, incr_name) = open_incr(&paths, next_incr)?;
    let new_incr = ManifestEntry {
        name: incr_name,
        seq: next_incr,
        kind: 'i',
    };
    // The switch: from here on the AOF's bytes go to the new incr file.
    let interim = match (guard.as_mut(), old_manifest) {
        (Some(sink), Some(mut m)) => {
            m.incrs.push(new_incr.clone());
            write_manifest(&paths, &m)?;
            sink.file = file;
            sink.manifest = m.format();
            engine.stream.force_select(sink.sub);
            Some(m)
        }
        _ => {
            // Turning the AOF on: subscribe now; the manifest appears once the base is written.
            install_sink(shared, guard, engine, file, String::new(), (0, 0));
            None
        }
    };
    let rdb = shared.config().aof_use_rdb_preamble;
    let base_name = paths.base_name(next_base, rdb);
    let job = Arc::new(AofRewriteJob {
        started: Instant::now(),
        outcome: std::sync::Mutex::new(None),
    });
    shared.persistence().aof_rewrite = Some(job.clone());
    let thread_job = job.clone();
    let opts = snapshot::Target::from_shared(shared).opts;
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            let r = write_base_file(&paths, &base_name, rdb, &snaps, opts).and_then(|_| {
                let m = Manifest {
                    base: Some(ManifestEntry {
                        name: base_name.clone(),
                        seq: next_base,
                        kind: 'b',
                    }),
                    incrs: vec![new_incr.clone()],
                    history: Vec::new(),
                };
                write_manifest(&paths, &m)?;
                // The old files are history now: delete them.
                if let Some(old) = &interim {
                    for e in old.load_order() {
                        if e.name != new_incr.name && e.name != base_name {
                            let _ = std::fs::remove_file(paths.dir.join(&e.name));
                        }
                    }
                }
                Ok(())
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
        Ok(()) => {
            if let Ok(text) = std::fs::read_to_string(paths.manifest()) {
                if let Ok(m) = Manifest::parse(&text) {
                    let sizes = manifest_sizes(&paths, &m);
                    if let Some(sink) = guard.as_mut() {
                        sink.manifest = text;
                        sink.base_size = sizes.0;
                        sink.incr_size = sizes.1;
                        sink.rewrite_base_size = sizes.0 + sizes.1;
                    }
                    publish(shared, guard.as_ref());
                }
            }
            tracing::info!("Background AOF rewrite finished successfully");
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

fn write_base(
    shared: &Shared,
    paths: &AofPaths,
    name: &str,
    rdb: bool,
    snaps: &[(usize, DbSnapshot)],
) -> Result<u64, String> {
    let opts = snapshot::Target::from_shared(shared).opts;
    write_base_file(paths, name, rdb, snaps, opts)
}

fn write_base_file(
    paths: &AofPaths,
    name: &str,
    rdb: bool,
    snaps: &[(usize, DbSnapshot)],
    opts: SaveOptions,
) -> Result<u64, String> {
    if rdb {
        let target = Target {
            dir: paths.dir.clone(),
            filename: name.to_string(),
            opts,
        };
        return snapshot::write_file(&target, None, |w| snapshot::write_snapshots(w, snaps));
    }
    let path = paths.dir.join(name);
    let tmp = paths
        .dir
        .join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let result = (|| {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let size = write_commands(&mut w, snaps)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok::<u64, std::io::Error>(size)
    })();
    let size = result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_context("Error writing the AOF base", &tmp, e)
    })?;
    std::fs::rename(&tmp, &path).map_err(|e| io_context("Can't install the AOF base", &path, e))?;
    sync_dir(&paths.dir)?;
    Ok(size)
}

/// The keyspace as commands, as Redis's `rewriteAppendOnlyFileRio` writes it: `SELECT`, then per
/// key `SET` for strings (HLLs included), `BF.LOADCHUNK`/`CF.LOADCHUNK` chunk by chunk for filters
/// (what RedisBloom's AOF rewrite callbacks emit), `RESTORE key 0 <payload>` for the other module
/// types, and `PEXPIREAT` for a TTL.
pub fn write_commands<W: Write>(w: &mut W, snaps: &[(usize, DbSnapshot)]) -> std::io::Result<u64> {
    let mut out = Vec::with_capacity(64 * 1024);
    let mut total = 0u64;
    let flush = |out: &mut Vec<u8>, w: &mut W, total: &mut u64| -> std::io::Result<()> {
        w.write_all(out)?;
        *total += out.len() as u64;
        out.clear();
        Ok(())
    };
    for (i, snap) in snaps {
        crate::engine::propagate::encode_select(&mut out, *i);
        for (key, value, expire) in &snap.entries {
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
        }
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
        match File::open(&path).and_then(|mut f| f.read_to_end(&mut data)) {
            Ok(_) => {}
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
        }
        stats.files += 1;
        stats.bytes += data.len() as u64;
        if data.starts_with(b"REDIS") {
            drop(data);
            super::load_file(&path, &mut engine.store, verify).map_err(|e| {
                AofLoadError::Fatal(format!(
                    "Bad file format reading the append only file {}: {e}",
                    entry.name
                ))
            })?;
            continue;
        }
        match replay_commands(shared, &data, engine, replay, &mut stats) {
            Ok(()) => {}
            Err(ParseStop::Truncated(valid)) if last && truncated_ok => {
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
                return Err(AofLoadError::Fatal(format!(
                    "Unexpected end of file reading the append only file {} at offset {valid}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                    entry.name
                )))
            }
            Err(ParseStop::Bad(offset)) => {
                return Err(AofLoadError::Fatal(format!(
                    "Bad file format reading the append only file {} at offset {offset}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>",
                    entry.name
                )))
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
    let n = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(Parse::Bad(start))?;
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

/// Mirrors the sink's figures into the atomics INFO reads.
fn publish(shared: &Shared, sink: Option<&AofSink>) {
    let i = &shared.aof_info;
    i.enabled.store(sink.is_some(), Ordering::Relaxed);
    if let Some(s) = sink {
        i.base_size.store(s.base_size, Ordering::Relaxed);
        i.incr_size.store(s.incr_size, Ordering::Relaxed);
        i.write_failed.store(!s.last_write_ok, Ordering::Relaxed);
    } else {
        i.write_failed.store(false, Ordering::Relaxed);
    }
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
