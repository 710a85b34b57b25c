//! Replication state (shared-state floor): the replication ids and offset, the backlog, the
//! attached replicas as the primary sees them, and the link to our own primary when this server is
//! a replica. It lives inside [`super::Engine`], under the keyspace lock, so the backlog and
//! `master_repl_offset` advance in the same critical section as the write they carry: `WAIT`,
//! `INFO` and a `PSYNC` snapshot all see one consistent offset.
//!
//! Offsets follow Redis exactly. `master_repl_offset` counts every byte ever fed to the replication
//! stream. The backlog holds the last `histlen` of them; its first byte has offset
//! `first_byte_offset` (1-based: a fresh backlog starts at `master_repl_offset + 1`). A replica
//! that has processed up to offset `o` asks `PSYNC <replid> <o+1>`, which is served when
//! `first_byte_offset <= o+1 <= master_repl_offset + 1`.
//!
//! What the backlog carries: the write stream ([`super::propagate`]) through replication's own
//! subscription ([`super::Engine::pump_repl`], drained after every top-level command and after
//! active expiry, so the bytes are exactly what Redis 7.0 propagates, `SELECT`/`MULTI`/`EXEC`
//! included), plus replication's own `PING` and `REPLCONF GETACK *`. On a replica there is no
//! subscription: the primary's bytes are forwarded verbatim (`server::link`), so sub-replicas
//! see the same bytes at the same offsets.
//!
//! The backlog is also the replicas' output buffer (Redis 7's shared replication buffer): each
//! replica task keeps the offset of the next byte it must send and copies from the backlog, so a
//! write costs one copy whatever the number of replicas. The backlog keeps at least
//! `repl-backlog-size` bytes, and more while a replica still needs them, up to that replica's
//! `client-output-buffer-limit replica` hard limit; a replica that falls further behind is dropped,
//! as Redis drops it.

use std::collections::{BTreeMap, VecDeque};

/// The backlog: the tail of the replication stream.
#[derive(Debug)]
pub struct Backlog {
    buf: VecDeque<u8>,
    /// Offset of `buf[0]`.
    first: u64,
    /// `repl-backlog-size`.
    pub size: usize,
    /// Unix ms when the last replica went away (for `repl-backlog-ttl`).
    pub idle_since_ms: Option<u64>,
}

impl Backlog {
    /// A backlog whose next byte has offset `next`.
    pub fn new(size: usize, next: u64) -> Backlog {
        Backlog {
            buf: VecDeque::new(),
            first: next,
            size: size.max(1),
            idle_since_ms: None,
        }
    }

    pub fn first_byte_offset(&self) -> u64 {
        self.first
    }

    pub fn histlen(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Offset the next fed byte will get.
    pub fn next_offset(&self) -> u64 {
        self.first + self.buf.len() as u64
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
    }

    /// Bytes the backlog has allocated (Redis's `repl_buffer_mem`): the replication buffer every
    /// replica reads from.
    pub fn allocated(&self) -> usize {
        self.buf.capacity()
    }

    /// True when the byte at `offset` (or the position just past the end) is still held.
    pub fn covers(&self, offset: u64) -> bool {
        offset >= self.first && offset <= self.next_offset()
    }

    /// Up to `max` bytes starting at `offset`; `None` when `offset` has been trimmed away.
    pub fn read_from(&self, offset: u64, max: usize) -> Option<Vec<u8>> {
        if !self.covers(offset) {
            return None;
        }
        let start = (offset - self.first) as usize;
        let end = self.buf.len().min(start.saturating_add(max));
        let (a, b) = self.buf.as_slices();
        let mut out = Vec::with_capacity(end - start);
        if start < a.len() {
            out.extend_from_slice(&a[start..end.min(a.len())]);
        }
        if end > a.len() {
            out.extend_from_slice(&b[start.saturating_sub(a.len())..end - a.len()]);
        }
        Some(out)
    }

    /// Drops bytes older than both the configured size and `keep_from` (the oldest offset a
    /// replica still needs), never keeping more than `hard_max` bytes for a replica's sake.
    pub fn trim(&mut self, keep_from: Option<u64>, hard_max: usize) {
        let len = self.buf.len();
        let mut keep = self.size.min(len);
        if let Some(k) = keep_from {
            let needed = self.next_offset().saturating_sub(k) as usize;
            keep = keep.max(needed.min(hard_max.max(self.size)).min(len));
        }
        let drop = len - keep;
        if drop > 0 {
            self.buf.drain(..drop);
            self.first += drop as u64;
        }
        // Give memory back after a burst that a slow replica made us hold.
        if self.buf.capacity() > 4 * self.size.max(1 << 20) && self.buf.len() <= self.size {
            self.buf.shrink_to(self.size);
        }
    }
}

/// Where a replica is in its life, as INFO's `state=` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    /// Waiting for the snapshot to start.
    WaitBgsave,
    /// Receiving the snapshot.
    SendBulk,
    /// Streaming.
    Online,
}

impl ReplicaState {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::WaitBgsave => "wait_bgsave",
            ReplicaState::SendBulk => "send_bulk",
            ReplicaState::Online => "online",
        }
    }
}

/// An attached replica, as the primary sees it.
#[derive(Debug, Clone)]
pub struct ReplicaInfo {
    pub client_id: u64,
    pub ip: String,
    /// From `REPLCONF listening-port`.
    pub port: u16,
    pub state: ReplicaState,
    /// Offset acknowledged with `REPLCONF ACK`.
    pub ack_offset: u64,
    /// Unix ms of the last ACK (INFO `lag`, min-replicas-max-lag).
    pub ack_ms: u64,
    /// Offset of the next stream byte to send (pins the backlog).
    pub send_offset: u64,
}

/// What `REPLCONF` told us about a connection before its `PSYNC`.
#[derive(Debug, Clone, Default)]
pub struct ReplConf {
    pub listening_port: Option<u16>,
    pub ip_address: Option<String>,
    pub capa_eof: bool,
    pub capa_psync2: bool,
}

/// The link to our primary when this server is a replica.
#[derive(Debug, Clone)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    /// `connect`, `connecting`, `handshake`, `sync`, `connected` (INFO master_link_status is `up`
    /// only in `connected`).
    pub state: &'static str,
    /// Unix ms of the last byte read from the primary.
    pub last_io_ms: u64,
    /// Unix ms when the link went down (INFO master_link_down_since_seconds).
    pub down_since_ms: u64,
    /// Bytes of the snapshot still to receive (-1 = unknown, EOF-mark transfer).
    pub sync_left: i64,
    pub sync_read: u64,
    /// Generation of this REPLICAOF: a link task whose generation is stale stops.
    pub generation: u64,
}

/// Everything about replication, under the keyspace lock.
#[derive(Debug)]
pub struct ReplState {
    pub replid: String,
    /// The previous primary's id, served for PSYNC up to `second_offset` after a promotion.
    pub replid2: String,
    pub second_offset: i64,
    /// `master_repl_offset`.
    pub offset: u64,
    pub backlog: Option<Backlog>,
    pub replicas: BTreeMap<u64, ReplicaInfo>,
    /// Some when this server is a replica.
    pub master: Option<MasterLink>,
    /// Bumped by every REPLICAOF.
    pub generation: u64,
    /// Full and partial resyncs served (INFO stats).
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Bytes fed since the last `notify` (the connection wakes replica tasks once per batch).
    pub pending_notify: bool,
    /// `client-output-buffer-limit replica` hard limit: how far a replica may lag.
    pub obuf_hard: usize,
}

pub const ZERO_ID: &str = "0000000000000000000000000000000000000000";

impl ReplState {
    pub fn new(replid: String) -> ReplState {
        ReplState {
            replid,
            replid2: ZERO_ID.into(),
            second_offset: -1,
            offset: 0,
            backlog: None,
            replicas: BTreeMap::new(),
            master: None,
            generation: 0,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            pending_notify: false,
            obuf_hard: 256 << 20,
        }
    }

    /// Appends bytes to the replication stream (the backlog, hence every replica).
    pub fn feed(&mut self, bytes: &[u8]) {
        if let Some(b) = self.backlog.as_mut() {
            b.feed(bytes);
            self.offset += bytes.len() as u64;
            self.pending_notify = true;
            // Trim in steps of an eighth of the size, so the cost is amortised.
            let slack = (b.size / 8).max(64 * 1024) as u64;
            if b.histlen() > b.size as u64 + slack {
                self.trim(self.obuf_hard);
            }
        }
    }

    /// Creates the backlog if there is none (the first replica, or becoming a replica).
    pub fn ensure_backlog(&mut self, size: usize) {
        if self.backlog.is_none() {
            self.backlog = Some(Backlog::new(size, self.offset + 1));
        }
    }

    /// Makes this server a primary with a new history (REPLICAOF NO ONE, or a promotion): the old
    /// id becomes `replid2`, valid up to the current offset, so replicas of the old primary can
    /// partially resync with us (PSYNC2).
    pub fn shift_replid(&mut self, new_id: String) {
        self.replid2 = std::mem::replace(&mut self.replid, new_id);
        self.second_offset = self.offset as i64 + 1;
    }

    /// Replicas whose last ACK is at most `max_lag_s` seconds old.
    pub fn good_replicas(&self, now_ms: u64, max_lag_s: u64) -> usize {
        self.replicas
            .values()
            .filter(|r| {
                r.state == ReplicaState::Online
                    && now_ms.saturating_sub(r.ack_ms) <= max_lag_s * 1000
            })
            .count()
    }

    /// Replicas that acknowledged `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.replicas
            .values()
            .filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset)
            .count()
    }

    /// Trims the backlog: keep what the slowest replica still needs, up to `hard_max`.
    pub fn trim(&mut self, hard_max: usize) {
        let keep_from = self.replicas.values().map(|r| r.send_offset).min();
        if let Some(b) = self.backlog.as_mut() {
            b.trim(keep_from, hard_max);
        }
    }
}

/// A command as a RESP array of bulk strings: the form the replication stream carries.
pub fn encode_command(argv: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + argv.iter().map(|a| a.len() + 16).sum::<usize>());
    out.push(b'*');
    out.extend_from_slice(argv.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in argv {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backlog_offsets_follow_redis() {
        let mut b = Backlog::new(8, 1);
        b.feed(b"abcdef");
        assert_eq!(b.first_byte_offset(), 1);
        assert_eq!(b.histlen(), 6);
        assert_eq!(b.read_from(3, 100).unwrap(), b"cdef");
        assert_eq!(b.read_from(7, 100).unwrap(), b"");
        assert!(b.read_from(8, 1).is_none());
        b.feed(b"ghijkl");
        b.trim(None, 0);
        assert_eq!(b.histlen(), 8);
        assert_eq!(b.first_byte_offset(), 5);
        assert!(b.read_from(4, 1).is_none());
        assert_eq!(b.read_from(5, 3).unwrap(), b"efg");
    }

    #[test]
    fn a_slow_replica_pins_the_backlog_up_to_the_hard_limit() {
        let mut b = Backlog::new(4, 1);
        b.feed(b"0123456789");
        b.trim(Some(3), 100);
        assert_eq!(b.first_byte_offset(), 3);
        b.trim(Some(3), 6);
        assert_eq!(b.first_byte_offset(), 5);
    }

    #[test]
    fn promotion_keeps_the_old_history_reachable() {
        let mut s = ReplState::new("a".repeat(40));
        s.offset = 100;
        s.shift_replid("b".repeat(40));
        assert_eq!(s.replid2, "a".repeat(40));
        assert_eq!(s.second_offset, 101);
    }
}
