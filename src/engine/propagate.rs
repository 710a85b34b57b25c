//! The write stream: every executed write, as the commands Redis 7.0 would propagate, encoded as
//! RESP in one total order. The AOF (issue 11) and replication (issue 12) both consume it.
//!
//! # How a write becomes commands
//! Redis's `call()` collects what a command propagates in `server.also_propagate`; at the end of
//! the outermost call it writes the collected commands out, wrapped in `MULTI`/`EXEC` when there
//! is more than one, with a `SELECT` before any command whose database differs from the one the
//! consumer last selected. This module does the same, in three steps:
//! 1. While a command runs, [`WriteStream::push`] adds one command (its database and argv) to the
//!    current *unit*. The dispatcher pushes, in this order: a `DEL` for each key that lazy expiry
//!    reclaimed during the command, anything the handler added itself (`also_propagate`), then the
//!    command's own argv — as the handler rewrote it, or verbatim — if the command changed the
//!    keyspace (or forced propagation), unless it prevented propagation.
//! 2. EXEC runs its queued commands inside the same unit, so a transaction with two writes is one
//!    unit; a transaction with one write propagates that write bare, as Redis 7.0 does.
//! 3. [`WriteStream::end_unit`] appends the unit to every subscriber's buffer: `MULTI` (selecting
//!    the first command's database first), the commands, `EXEC` — or the lone command.
//!
//! Active expiry emits each `DEL` as its own unit ([`WriteStream::emit`]), like Redis's
//! `activeExpireCycle`.
//!
//! # The rules, as checked against Redis 7.0.15 (a real `redis-server` with `appendonly yes`,
//! reading its incr file) and RedisBloom's `rebloom.c`
//! - Relative expiry becomes absolute: `SET … EX/PX/EXAT` → `SET key value PXAT ms` (the whole
//!   argv rebuilt, so `GET`, `NX`/`XX` are dropped), `SETEX`/`PSETEX` → `SET key value PXAT ms`,
//!   `SET … PXAT` verbatim but for `GET`, `EXPIRE`/`PEXPIRE`/`EXPIREAT` → `PEXPIREAT key ms` keeping
//!   `NX|XX|GT|LT`, `GETEX EX/PX/EXAT/PXAT` → `PEXPIREAT key ms`, `GETEX PERSIST` → `PERSIST key`;
//!   an expiry already in the past deletes the key and is written `DEL key`.
//! - `GETSET` → `SET key value`; `GETDEL` → `DEL key`; `INCRBYFLOAT` → `SET key new KEEPTTL`.
//! - `RESTORE key ttl … ` with a relative ttl → the absolute ttl and `ABSTTL` appended; one already
//!   expired (with `REPLACE` over an existing key) → `DEL key`.
//! - A lazily or actively expired key → `DEL key` (hyperbloom has no `lazyfree-lazy-expire`, so
//!   never `UNLINK`).
//! - A command that changed nothing (`SETNX` on an existing key, `DEL` of a missing key, `PFADD`
//!   that altered no register, `EXPIRE … NX` that did not apply) is not written.
//! - `PFCOUNT key` that recomputed a stale cached cardinality wrote the cache, so it is written
//!   verbatim (Redis's `server.dirty++`); `PFCOUNT` of several keys writes nothing.
//! - Rewritten commands use Redis's shared upper-case names (`SET`, `PXAT`, `DEL`, `PEXPIREAT`,
//!   `PERSIST`, `KEEPTTL`, `ABSTTL`); verbatim commands keep the client's spelling.
//! - Module commands: Redis skips `CMD_MODULE` commands in `call()`'s automatic propagation; they
//!   propagate where the module calls `RedisModule_ReplicateVerbatim`. hyperbloom's BF/CF
//!   handlers force propagation at exactly those points; any module command that changed the
//!   keyspace and did not answer an error is also written (CMS, TopK and t-digest rely on that:
//!   RedisBloom replicates their writes on success). RedisBloom's points:
//!   `BF.RESERVE`, `BF.ADD`/`BF.MADD`/`BF.INSERT` once they reach
//!   the item loop (so also when every item existed, and when a non-scaling filter filled up and
//!   the reply carries an error), `BF.LOADCHUNK` and `CF.RESERVE` on success, `CF.ADD`/`CF.ADDNX`
//!   unless the filter is full, `CF.INSERT`/`CF.INSERTNX` after the loop, `CF.DEL` for any existing
//!   filter (found or not), `CF.COMPACT`. Two deliberate differences: every `CF.LOADCHUNK` chunk is
//!   written (RedisBloom replicates only the header chunk, so a replica or AOF loses the cuckoo
//!   data), and a command that auto-creates a filter is preceded by an explicit `BF.RESERVE key
//!   error capacity [EXPANSION n|NONSCALING]` / `CF.RESERVE key capacity BUCKETSIZE b
//!   MAXITERATIONS m EXPANSION e` carrying the parameters actually used, so the replay builds the
//!   same filter whatever the loader's `bf-*`/`cf-*` defaults are (the pair is one unit, hence
//!   wrapped in `MULTI`/`EXEC`).
//!
//! # Consumers
//! A consumer [`subscribes`](WriteStream::subscribe) and gets its own buffer, its own selected
//! database (none at first, so its first command is preceded by `SELECT`) and its own byte offset.
//! It [`drains`](WriteStream::drain) the buffer under the keyspace lock — which is what makes the
//! order total — and writes the bytes wherever it wants after releasing the lock. The offset
//! counts every byte appended to that consumer's buffer, `SELECT`, `MULTI` and `EXEC` included,
//! which is what Redis counts in `master_repl_offset` and the AOF size.
//!
//! Nothing is recorded while nobody subscribes: the dispatcher checks [`WriteStream::is_active`]
//! once per command, so a server without AOF or replicas pays one branch.
//!
//! # Writers under the shared lock
//! The engine keeps the stream in a [`StreamCell`]: a mutex that only writes made in place under
//! the shared keyspace lock take (`commands::shared_path`), each while it still holds its key's
//! stripe, pushing its command and ending its unit in one go. Whoever holds the exclusive lock
//! reaches the stream through [`StreamCell::get_mut`], with no atomic operation. The order stays
//! total and true: two writes to one key hold one stripe in turn, so they enter the stream in the
//! order they were made; writes to different keys commute, so any order between them replays to
//! the same keyspace; and a command that read what a shared write left (holding the stripe after
//! it) enters the stream after it. A consumer that drains under the shared lock takes the mutex.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::numeric::int::Decimal;
use crate::protocol::reply::{put_bulk, put_header};

/// A subscription to the write stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubscriberId(u64);

struct Subscriber {
    id: SubscriberId,
    /// Encoded commands not yet drained.
    buf: Vec<u8>,
    /// The database this consumer's stream last selected; None forces a `SELECT`.
    db: Option<usize>,
    /// Bytes appended to `buf` since subscribing, plus the starting offset.
    offset: u64,
    notify: Option<Arc<Notify>>,
}

/// What the running command asked for its own propagation (Redis's `rewriteClientCommandVector`,
/// `forceCommandPropagation`, `preventCommandPropagation`). Reset before each command.
#[derive(Debug, Default)]
pub struct CommandPropagation {
    /// Propagate this argv instead of the one received.
    pub argv: Option<Vec<bytes::Bytes>>,
    /// Propagate even though the keyspace did not change (module `ReplicateVerbatim`).
    pub force: bool,
    /// Propagate nothing for this command itself.
    pub prevent: bool,
}

/// The stream. Lives in [`super::Engine`], under the keyspace lock.
#[derive(Default)]
pub struct WriteStream {
    subs: Vec<Subscriber>,
    next_id: u64,
    /// The current unit: each command's database and its encoding's range in `scratch`.
    unit: Vec<(usize, std::ops::Range<usize>)>,
    scratch: Vec<u8>,
    /// The running command's own propagation request.
    pub command: CommandPropagation,
}

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// Appends `argv` as a RESP array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    // One reservation for the whole command (a header is at most 1 + 20 digits + CRLF): every
    // write to the stream passes here, and growing per piece showed in profiles.
    let body: usize = argv.iter().map(|a| a.as_ref().len() + 2 + 23).sum();
    out.reserve(23 + body);
    put_header(out, b'*', argv.len());
    for a in argv {
        put_bulk(out, a.as_ref());
    }
}

/// Appends `SELECT db`.
pub fn encode_select(out: &mut Vec<u8>, db: usize) {
    encode_command(
        out,
        &[b"SELECT" as &[u8], Decimal::of_u64(db as u64).as_bytes()],
    );
}

impl WriteStream {
    pub fn new() -> WriteStream {
        WriteStream::default()
    }

    /// True while someone consumes the stream (otherwise nothing is recorded).
    pub fn is_active(&self) -> bool {
        !self.subs.is_empty()
    }

    /// Adds a consumer whose offset starts at `start_offset`. `notify`, when given, is signalled
    /// each time bytes are appended for it. Through [`StreamCell::subscribe`] (prefer
    /// [`super::Engine::subscribe_stream`], which also turns on the recording of expired keys).
    fn subscribe(&mut self, start_offset: u64, notify: Option<Arc<Notify>>) -> SubscriberId {
        let id = SubscriberId(self.next_id);
        self.next_id += 1;
        self.subs.push(Subscriber {
            id,
            buf: Vec::new(),
            db: None,
            offset: start_offset,
            notify,
        });
        id
    }

    /// Removes a consumer; its undrained bytes are dropped. Returns false if it was unknown.
    fn unsubscribe(&mut self, id: SubscriberId) -> bool {
        let before = self.subs.len();
        self.subs.retain(|s| s.id != id);
        self.subs.len() != before
    }

    fn sub(&mut self, id: SubscriberId) -> Option<&mut Subscriber> {
        self.subs.iter_mut().find(|s| s.id == id)
    }

    /// Moves the consumer's pending bytes to the end of `into` and returns the consumer's offset
    /// after them (None if unknown). `into` is appended to, never cleared, so a consumer can
    /// reuse one allocation.
    pub fn drain(&mut self, id: SubscriberId, into: &mut Vec<u8>) -> Option<u64> {
        let s = self.sub(id)?;
        if into.is_empty() {
            std::mem::swap(into, &mut s.buf);
        } else {
            into.extend_from_slice(&s.buf);
            s.buf.clear();
        }
        Some(s.offset)
    }

    /// Bytes waiting for the consumer.
    pub fn pending(&self, id: SubscriberId) -> usize {
        self.subs
            .iter()
            .find(|s| s.id == id)
            .map_or(0, |s| s.buf.len())
    }

    /// The consumer's offset: every byte appended for it so far (drained or not).
    pub fn offset(&self, id: SubscriberId) -> Option<u64> {
        self.subs.iter().find(|s| s.id == id).map(|s| s.offset)
    }

    /// Makes the consumer's next command start with a `SELECT` (a new AOF incr file, a new
    /// replication backlog), as Redis resets `aof_selected_db` / `slaveseldb` to -1.
    pub fn force_select(&mut self, id: SubscriberId) {
        if let Some(s) = self.sub(id) {
            s.db = None;
        }
    }

    /// Adds one command for database `db` to the current unit.
    pub fn push<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A]) {
        let start = self.scratch.len();
        encode_command(&mut self.scratch, argv);
        self.unit.push((db, start..self.scratch.len()));
    }

    /// Commands in the current unit so far.
    pub fn unit_len(&self) -> usize {
        self.unit.len()
    }

    /// Ends the current unit: appends it to every consumer, wrapped in `MULTI`/`EXEC` when it
    /// holds more than one command.
    pub fn end_unit(&mut self) {
        if self.unit.is_empty() {
            return;
        }
        let wrap = self.unit.len() > 1;
        for s in &mut self.subs {
            let before = s.buf.len();
            if wrap {
                select_if_needed(s, self.unit[0].0);
                s.buf.extend_from_slice(MULTI);
            }
            for (db, range) in &self.unit {
                select_if_needed(s, *db);
                s.buf.extend_from_slice(&self.scratch[range.clone()]);
            }
            if wrap {
                s.buf.extend_from_slice(EXEC);
            }
            s.offset += (s.buf.len() - before) as u64;
            if let Some(n) = &s.notify {
                n.notify_one();
            }
        }
        self.unit.clear();
        self.scratch.clear();
        if self.scratch.capacity() > 1 << 20 {
            self.scratch = Vec::new();
        }
    }

    /// One command as a unit of its own (active expiry).
    pub fn emit<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A]) {
        self.end_unit();
        self.push(db, argv);
        self.end_unit();
    }

    /// [`WriteStream::emit`] of a command already encoded by [`encode_command`]: a writer under
    /// the shared lock encodes before it takes the stream's mutex, so the mutex covers only the
    /// copy into each consumer's buffer.
    pub fn emit_encoded(&mut self, db: usize, command: &[u8]) {
        self.emit_encoded_unit(db, &[command]);
    }

    /// Encoded commands as one unit in database `db`, wrapped in `MULTI`/`EXEC` when more than
    /// one, byte for byte what [`WriteStream::end_unit`] writes for that unit (a shared-path
    /// write that created a filter: its `BF.RESERVE`, then itself).
    pub fn emit_encoded_unit(&mut self, db: usize, commands: &[&[u8]]) {
        self.end_unit();
        let wrap = commands.len() > 1;
        for s in &mut self.subs {
            let before = s.buf.len();
            select_if_needed(s, db);
            if wrap {
                s.buf.extend_from_slice(MULTI);
            }
            for command in commands {
                s.buf.extend_from_slice(command);
            }
            if wrap {
                s.buf.extend_from_slice(EXEC);
            }
            s.offset += (s.buf.len() - before) as u64;
            if let Some(n) = &s.notify {
                n.notify_one();
            }
        }
    }
}

/// The stream as the engine keeps it (see "Writers under the shared lock" above).
#[derive(Default)]
pub struct StreamCell {
    stream: Mutex<WriteStream>,
    /// [`WriteStream::is_active`], kept outside the mutex: consumers come and go only under the
    /// exclusive keyspace lock (`&mut self`), so under the shared lock this never changes.
    active: bool,
}

impl StreamCell {
    pub fn new() -> StreamCell {
        StreamCell::default()
    }

    /// The stream, for the holder of the exclusive keyspace lock.
    #[inline]
    pub fn get_mut(&mut self) -> &mut WriteStream {
        // A writer that panicked holding the mutex panicked in `push`/`end_unit`, which keep the
        // unit whole or leave it to the next `end_unit`: nothing a later user must not see.
        self.stream.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// The stream, under the shared keyspace lock.
    pub fn lock(&self) -> MutexGuard<'_, WriteStream> {
        self.stream.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while someone consumes the stream; readable without the mutex.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// [`WriteStream::subscribe`].
    pub fn subscribe(&mut self, start_offset: u64, notify: Option<Arc<Notify>>) -> SubscriberId {
        self.active = true;
        self.get_mut().subscribe(start_offset, notify)
    }

    /// [`WriteStream::unsubscribe`].
    pub fn unsubscribe(&mut self, id: SubscriberId) -> bool {
        let known = self.get_mut().unsubscribe(id);
        self.active = self.get_mut().is_active();
        known
    }
}

fn select_if_needed(s: &mut Subscriber, db: usize) {
    if s.db != Some(db) {
        encode_select(&mut s.buf, db);
        s.db = Some(db);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(w: &mut WriteStream, id: SubscriberId) -> String {
        let mut v = Vec::new();
        w.drain(id, &mut v);
        String::from_utf8_lossy(&v).replace("\r\n", " ")
    }

    /// A command encoded beforehand enters the stream as `emit` puts it there: after what the
    /// current unit holds, with the `SELECT`s, offsets and notifications `end_unit` gives.
    #[test]
    fn emit_encoded_appends_what_emit_appends() {
        let mut cells = [StreamCell::new(), StreamCell::new()];
        let notify = Arc::new(Notify::new());
        let subs: Vec<_> = cells
            .iter_mut()
            .map(|c| c.subscribe(7, Some(notify.clone())))
            .collect();
        assert!(cells.iter().all(StreamCell::is_active));
        for (db, argv) in [
            (0, ["SET", "a", "1"]),
            (0, ["SET", "b", "2"]),
            (3, ["SET", "c", "3"]),
        ] {
            for (i, cell) in cells.iter_mut().enumerate() {
                let w = cell.get_mut();
                w.push(1, &["DEL", "pending"]);
                if i == 0 {
                    w.emit(db, &argv);
                } else {
                    let mut encoded = Vec::new();
                    encode_command(&mut encoded, &argv);
                    w.emit_encoded(db, &encoded);
                }
            }
        }
        let [a, b] = &mut cells;
        assert_eq!(a.get_mut().offset(subs[0]), b.get_mut().offset(subs[1]));
        let (got, want) = (drain(b.get_mut(), subs[1]), drain(a.get_mut(), subs[0]));
        assert_eq!(got, want);
        assert!(got.starts_with("*2 $6 SELECT $1 1 *2 $3 DEL $7 pending *2 $6 SELECT $1 0 "));
        assert!(b.unsubscribe(subs[1]));
        assert!(!b.is_active());
    }

    /// The framing matches the plain `*n` / `$len` form at every header width.
    #[test]
    fn encode_command_frames_every_length() {
        for n in [0usize, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 65536] {
            let arg = vec![b'x'; n];
            let mut out = Vec::new();
            encode_command(&mut out, &[b"SET" as &[u8], b"k", &arg]);
            let mut want = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${n}\r\n").into_bytes();
            want.extend_from_slice(&arg);
            want.extend_from_slice(b"\r\n");
            assert_eq!(out, want, "{n}");
        }
        let many: Vec<&[u8]> = vec![b"a"; 120];
        let mut out = Vec::new();
        encode_command(&mut out, &many);
        assert!(out.starts_with(b"*120\r\n$1\r\na\r\n"));
        assert_eq!(out.len(), 6 + 120 * 7);
    }

    #[test]
    fn nothing_is_kept_without_subscribers_and_select_comes_first() {
        let mut w = WriteStream::new();
        assert!(!w.is_active());
        let id = w.subscribe(100, None);
        w.push(0, &["SET", "a", "1"]);
        w.end_unit();
        assert_eq!(drain(&mut w, id), "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 ");
        let after_first = 100
            + "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n".len()
                as u64;
        assert_eq!(w.offset(id), Some(after_first));
        w.push(0, &["DEL", "a"]);
        w.end_unit();
        assert_eq!(drain(&mut w, id), "*2 $3 DEL $1 a ");
    }

    #[test]
    fn a_unit_of_several_commands_is_a_transaction_selected_before_multi() {
        let mut w = WriteStream::new();
        let id = w.subscribe(0, None);
        w.push(3, &["DEL", "q"]);
        w.push(3, &["SET", "q", "2"]);
        w.push(12, &["SET", "r", "2"]);
        w.end_unit();
        assert_eq!(
            drain(&mut w, id),
            "*2 $6 SELECT $1 3 *1 $5 MULTI *2 $3 DEL $1 q *3 $3 SET $1 q $1 2 \
             *2 $6 SELECT $2 12 *3 $3 SET $1 r $1 2 *1 $4 EXEC "
        );
    }

    #[test]
    fn each_consumer_selects_for_itself() {
        let mut w = WriteStream::new();
        let a = w.subscribe(0, None);
        w.push(1, &["SET", "k", "v"]);
        w.end_unit();
        let b = w.subscribe(0, None);
        w.emit(1, &["DEL", "k"]);
        assert_eq!(
            drain(&mut w, a),
            "*2 $6 SELECT $1 1 *3 $3 SET $1 k $1 v *2 $3 DEL $1 k "
        );
        assert_eq!(drain(&mut w, b), "*2 $6 SELECT $1 1 *2 $3 DEL $1 k ");
        w.force_select(a);
        w.emit(1, &["DEL", "j"]);
        assert_eq!(drain(&mut w, a), "*2 $6 SELECT $1 1 *2 $3 DEL $1 j ");
        assert_eq!(drain(&mut w, b), "*2 $3 DEL $1 j ");
        assert!(w.unsubscribe(a));
        assert!(!w.unsubscribe(a));
        assert_eq!(w.pending(b), 0);
    }
}
