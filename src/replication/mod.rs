//! Replication (floor 4, beside `persistence`): Redis's primary/replica protocol, both ways, with
//! no socket code of its own. The connection tasks in `server/` move the bytes; this module decides
//! what the bytes are.
//!
//! # The protocol, as hyperbloom speaks it
//!
//! ```text
//! replica                                    primary
//!   PING                              ->       +PONG
//!   AUTH [user] pass (masterauth)     ->       +OK
//!   REPLCONF listening-port <port>    ->       +OK
//!   REPLCONF capa eof capa psync2     ->       +OK
//!   PSYNC <replid> <offset+1> | ? -1  ->       +FULLRESYNC <replid> <offset>
//!                                              $<len>\r\n<rdb>           (repl-diskless-sync no)
//!                                              $EOF:<40 bytes>\r\n<rdb><same 40 bytes>  (yes)
//!                                       or     +CONTINUE [<replid>]     (from the backlog)
//!                                    <-        the write stream: RESP commands, PING every
//!                                              repl-ping-replica-period, REPLCONF GETACK *
//!   REPLCONF ACK <offset>   (every second and on GETACK)  ->
//! ```
//!
//! Offsets count stream bytes (see `engine::repl`); a replica's offset is the number of stream
//! bytes it has applied, so a primary and its replicas agree byte for byte, down a chain too: a
//! replica forwards its primary's bytes verbatim to its own replicas and to its own backlog.
//!
//! The full-sync snapshot is taken under the keyspace lock the way BGSAVE takes one (databases
//! cloned; filter pages shared copy-on-write) and serialised on a plain thread into a bounded
//! channel that the replica's task drains onto the socket, so other clients keep being served and
//! at most [`CHANNEL_CHUNKS`] × [`CHUNK`] bytes of RDB are in flight. Writes made after the
//! snapshot go to the backlog and follow the RDB.
//!
//! The replica side receives the RDB into a temporary file in `dir` (Redis's disk-load), loads it
//! into a fresh keyspace on a blocking thread and swaps it in whole under the lock, so the old data
//! keeps being served (replica-serve-stale-data) until the new is complete.

use std::io::Write;

use crate::engine::repl::ReplState;
use crate::persistence::rdb::{RdbWriter, SaveOptions};
use crate::persistence::snapshot;
use crate::store::db::DbSnapshot;

/// Bytes per message from the snapshot thread to the replica task.
pub const CHUNK: usize = 64 * 1024;
/// Messages in flight between them.
pub const CHANNEL_CHUNKS: usize = 16;

/// What PSYNC gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Psync {
    /// `+FULLRESYNC <replid> <offset>`; the stream continues at `offset + 1` after the RDB.
    Full { replid: String, offset: u64 },
    /// `+CONTINUE <replid>`; the stream continues at `from`.
    Continue { replid: String, from: u64 },
}

/// Decides between a partial and a full resync for `PSYNC <replid> <offset>`, as Redis's
/// `masterTryPartialResynchronization`: the id must be ours, or our previous one up to the offset
/// where the history forked, and the offset must still be in the backlog.
pub fn decide(state: &ReplState, replid: &[u8], offset: &[u8]) -> Psync {
    let full = Psync::Full {
        replid: state.replid.clone(),
        offset: state.offset,
    };
    let Some(off) = std::str::from_utf8(offset)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
    else {
        return full;
    };
    if off < 0 {
        return full;
    }
    let off = off as u64;
    let id_ok = replid == state.replid.as_bytes()
        || (replid == state.replid2.as_bytes() && off as i64 <= state.second_offset);
    if !id_ok {
        return full;
    }
    match &state.backlog {
        Some(b) if b.covers(off) => Psync::Continue {
            replid: state.replid.clone(),
            from: off,
        },
        _ => full,
    }
}

/// A fresh 40-byte EOF mark for a diskless transfer.
pub fn eof_mark() -> [u8; 40] {
    let id = crate::engine::shared::new_run_id();
    let mut mark = [b'0'; 40];
    mark.copy_from_slice(&id.as_bytes()[..40]);
    mark
}

/// Sends the RDB bytes to the replica task in [`CHUNK`]-sized messages; fails once the task is
/// gone (replica disconnected), which stops the snapshot thread.
pub struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    pub fn new(tx: tokio::sync::mpsc::Sender<Vec<u8>>) -> ChannelWriter {
        ChannelWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .blocking_send(chunk)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "replica gone"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// Writes a complete RDB (version 10, loadable by Redis 7.0) of `dbs` to `w`, with the aux fields
/// a Redis primary adds for replication.
pub fn write_rdb<W: Write>(
    w: W,
    dbs: Vec<(usize, DbSnapshot)>,
    opts: SaveOptions,
    replid: &str,
    offset: u64,
) -> std::io::Result<W> {
    let mut w = RdbWriter::new(w, opts);
    let ctime = crate::engine::now_ms() / 1000;
    w.header(ctime, crate::engine::alloc::used_memory() as u64)?;
    w.aux(b"repl-stream-db", b"0")?;
    w.aux(b"repl-id", replid.as_bytes())?;
    w.aux(b"repl-offset", offset.to_string().as_bytes())?;
    snapshot::write_snapshots(&mut w, dbs)?;
    let (mut inner, _) = w.finish()?;
    inner.flush()?;
    Ok(inner)
}

/// The first line of a primary's reply to PSYNC, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PsyncReply {
    Full {
        replid: String,
        offset: u64,
    },
    /// `+CONTINUE` with the primary's id when it changed.
    Continue {
        new_replid: Option<String>,
    },
    /// `-NOMASTERLINK`, `-LOADING`: try again later.
    Retry(String),
    /// Anything else (e.g. an old server without PSYNC).
    Error(String),
}

pub fn parse_psync_reply(line: &[u8]) -> PsyncReply {
    let text = String::from_utf8_lossy(line).trim_end().to_string();
    if let Some(rest) = text.strip_prefix("+FULLRESYNC ") {
        let mut it = rest.split(' ');
        if let (Some(id), Some(off)) = (it.next(), it.next()) {
            if id.len() == 40 {
                if let Ok(offset) = off.parse() {
                    return PsyncReply::Full {
                        replid: id.to_string(),
                        offset,
                    };
                }
            }
        }
        return PsyncReply::Error(text);
    }
    if let Some(rest) = text.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        return PsyncReply::Continue {
            new_replid: (id.len() == 40).then(|| id.to_string()),
        };
    }
    if text.starts_with("-NOMASTERLINK") || text.starts_with("-LOADING") {
        return PsyncReply::Retry(text);
    }
    PsyncReply::Error(text)
}

/// How the primary frames the RDB after `+FULLRESYNC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkHeader {
    Len(u64),
    Eof([u8; 40]),
}

/// Parses the `$<len>` or `$EOF:<mark>` line (without CRLF).
pub fn parse_bulk_header(line: &[u8]) -> Option<BulkHeader> {
    let rest = line.strip_prefix(b"$")?;
    if let Some(mark) = rest.strip_prefix(b"EOF:") {
        let mark: [u8; 40] = mark.try_into().ok()?;
        return Some(BulkHeader::Eof(mark));
    }
    let len = std::str::from_utf8(rest).ok()?.parse().ok()?;
    Some(BulkHeader::Len(len))
}

/// Finds the end of an EOF-mark transfer: keeps the last 40 bytes seen so a mark split across
/// reads is still recognised.
pub struct EofScanner {
    mark: [u8; 40],
    tail: Vec<u8>,
}

impl EofScanner {
    pub fn new(mark: [u8; 40]) -> EofScanner {
        EofScanner {
            mark,
            tail: Vec::with_capacity(80),
        }
    }

    /// Feeds received bytes; true when the data seen so far ends with the mark. The caller writes
    /// every byte and truncates the last 40 at the end.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() >= 40 {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - 40..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(40);
            self.tail.drain(..excess);
        }
        self.tail.len() == 40 && self.tail[..] == self.mark[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psync_decisions() {
        let mut s = ReplState::new("a".repeat(40));
        assert!(matches!(decide(&s, b"?", b"-1"), Psync::Full { .. }));
        s.ensure_backlog(100);
        s.feed(b"0123456789");
        assert_eq!(
            decide(&s, "a".repeat(40).as_bytes(), b"5"),
            Psync::Continue {
                replid: "a".repeat(40),
                from: 5
            }
        );
        assert_eq!(
            decide(&s, "a".repeat(40).as_bytes(), b"11"),
            Psync::Continue {
                replid: "a".repeat(40),
                from: 11
            }
        );
        assert!(matches!(
            decide(&s, "a".repeat(40).as_bytes(), b"12"),
            Psync::Full { .. }
        ));
        assert!(matches!(
            decide(&s, "b".repeat(40).as_bytes(), b"5"),
            Psync::Full { .. }
        ));
        s.shift_replid("c".repeat(40));
        assert!(matches!(
            decide(&s, "a".repeat(40).as_bytes(), b"11"),
            Psync::Continue { .. }
        ));
        s.feed(b"x");
        assert!(
            matches!(
                decide(&s, "a".repeat(40).as_bytes(), b"12"),
                Psync::Full { .. }
            ),
            "past the fork point the old id is no good"
        );
    }

    #[test]
    fn psync_reply_lines() {
        let id = "f".repeat(40);
        assert_eq!(
            parse_psync_reply(format!("+FULLRESYNC {id} 42").as_bytes()),
            PsyncReply::Full {
                replid: id.clone(),
                offset: 42
            }
        );
        assert_eq!(
            parse_psync_reply(b"+CONTINUE"),
            PsyncReply::Continue { new_replid: None }
        );
        assert_eq!(
            parse_psync_reply(format!("+CONTINUE {id}").as_bytes()),
            PsyncReply::Continue {
                new_replid: Some(id)
            }
        );
        assert!(matches!(
            parse_psync_reply(b"-NOMASTERLINK Can't SYNC while not connected with my master"),
            PsyncReply::Retry(_)
        ));
        assert!(matches!(
            parse_psync_reply(b"-ERR unknown command"),
            PsyncReply::Error(_)
        ));
    }

    #[test]
    fn bulk_headers_and_eof_marks() {
        assert_eq!(parse_bulk_header(b"$123"), Some(BulkHeader::Len(123)));
        let mark = [b'm'; 40];
        let mut line = b"$EOF:".to_vec();
        line.extend_from_slice(&mark);
        assert_eq!(parse_bulk_header(&line), Some(BulkHeader::Eof(mark)));
        assert_eq!(parse_bulk_header(b"$EOF:short"), None);
        assert_eq!(parse_bulk_header(b"+OK"), None);

        let mut sc = EofScanner::new(mark);
        assert!(!sc.feed(b"REDIS0010 data"));
        assert!(!sc.feed(&mark[..25]));
        assert!(sc.feed(&mark[25..]), "a mark split across reads");
        let mut sc = EofScanner::new(mark);
        let mut all = vec![b'x'; 1000];
        all.extend_from_slice(&mark);
        assert!(sc.feed(&all));
    }
}
