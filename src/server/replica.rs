//! The primary's side of a replica link: after `PSYNC`, the connection answers `+FULLRESYNC` and
//! streams a snapshot, or `+CONTINUE`, then copies the replication stream from the backlog to the
//! socket while reading the replica's `REPLCONF ACK`s. Also WAIT's blocking part and the
//! replication cron (PINGs to replicas, backlog TTL, dropping silent replicas).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::socket::ClientStream;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::commands::ClientState;
use crate::engine::repl::{encode_command, ReplicaInfo, ReplicaState};
use crate::engine::{ClientHandle, Shared};
use crate::persistence::rdb::SaveOptions;
use crate::protocol::parser::{ParserLimits, RequestParser};
use crate::replication::{self, Psync};

/// Bytes copied from the backlog per write.
const SEND_MAX: usize = 1 << 20;

/// Serves a replica until it disconnects, is killed, falls too far behind or the server stops.
pub async fn serve(
    shared: Arc<Shared>,
    mut stream: ClientStream,
    client: &ClientState,
    mut inbuf: BytesMut,
    replid: Bytes,
    offset: Bytes,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let handle = client.handle.clone();
    handle.is_replica.store(true, Ordering::Relaxed);
    let conf = client.replconf.clone();
    let now = crate::engine::now_ms();
    let (backlog_size, diskless, opts, dir) = {
        let c = shared.config();
        (
            c.repl_backlog_size as usize,
            c.repl_diskless_sync,
            SaveOptions::from_config(&c),
            c.dir.clone(),
        )
    };
    // Decide, register and (for a full sync) take the snapshot in one critical section, so the
    // snapshot and the stream offset agree.
    let (decision, snapshot) = {
        let mut engine = shared.engine();
        engine.repl.ensure_backlog(backlog_size);
        // Everything written from here on reaches the backlog; what was written before is in the
        // backlog already, or in the snapshot taken below.
        engine.pump_repl();
        let decision = replication::decide(&engine.repl, &replid, &offset);
        if matches!(decision, Psync::Full { .. }) {
            // The stream after the snapshot starts with a SELECT.
            engine.repl_force_select();
        }
        let repl = &mut engine.repl;
        if let Some(b) = repl.backlog.as_mut() {
            b.idle_since_ms = None;
        }
        let (send_offset, state) = match &decision {
            Psync::Full { offset, .. } => (offset + 1, ReplicaState::WaitBgsave),
            Psync::Continue { from, .. } => (*from, ReplicaState::Online),
        };
        match &decision {
            Psync::Full { .. } => {
                repl.sync_full += 1;
                if &replid[..] != b"?" {
                    repl.sync_partial_err += 1;
                }
            }
            Psync::Continue { .. } => repl.sync_partial_ok += 1,
        }
        let ip = conf
            .ip_address
            .clone()
            .unwrap_or_else(|| handle.addr.host());
        repl.replicas.insert(
            handle.id,
            ReplicaInfo {
                client_id: handle.id,
                ip,
                port: conf.listening_port.unwrap_or(0),
                state,
                ack_offset: 0,
                ack_ms: now,
                send_offset,
            },
        );
        let snapshot = matches!(decision, Psync::Full { .. })
            .then(|| crate::persistence::snapshot::take(&shared, &engine.store));
        (decision, snapshot)
    };
    let result = async {
        match &decision {
            Psync::Full { replid, offset } => {
                tracing::info!(
                    "Replica {}:{} asks for synchronization; full resync at offset {offset}",
                    handle.addr.host(),
                    conf.listening_port.unwrap_or(0)
                );
                stream
                    .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
                    .await?;
                set_state(&shared, handle.id, ReplicaState::SendBulk);
                let dbs = snapshot.unwrap_or_default();
                let (rid, off) = (replid.clone(), *offset);
                if diskless && conf.capa_eof {
                    send_diskless(&mut stream, dbs, opts, rid, off).await?;
                    // A replica finds the end of an EOF-marked transfer by looking at the end of
                    // what it read, so nothing may follow the mark until it ACKs (Redis's
                    // repl_put_online_on_ack).
                    wait_first_ack(&shared, &mut stream, &handle, &mut inbuf).await?;
                } else {
                    send_from_disk(&mut stream, dbs, opts, rid, off, &dir, handle.id).await?;
                }
                tracing::info!("Synchronization with replica {} succeeded", handle.addr);
            }
            Psync::Continue { replid, from } => {
                tracing::info!(
                    "Partial resynchronization request from {} accepted, from offset {from}",
                    handle.addr
                );
                let line = if conf.capa_psync2 {
                    format!("+CONTINUE {replid}\r\n")
                } else {
                    "+CONTINUE\r\n".to_string()
                };
                stream.write_all(line.as_bytes()).await?;
            }
        }
        {
            let mut engine = shared.engine();
            if let Some(r) = engine.repl.replicas.get_mut(&handle.id) {
                r.state = ReplicaState::Online;
                r.ack_ms = crate::engine::now_ms();
            }
        }
        stream_loop(&shared, &mut stream, &handle, &mut inbuf, &mut shutdown).await
    }
    .await;
    if let Err(e) = result {
        tracing::info!("Connection with replica {} lost: {e}", handle.addr);
    }
    let _ = stream.shutdown().await;
    let mut engine = shared.engine();
    engine.repl.replicas.remove(&handle.id);
    if engine.repl.replicas.is_empty() {
        if let Some(b) = engine.repl.backlog.as_mut() {
            b.idle_since_ms = Some(crate::engine::now_ms());
        }
    }
}

fn set_state(shared: &Shared, id: u64, state: ReplicaState) {
    if let Some(r) = shared.engine().repl.replicas.get_mut(&id) {
        r.state = state;
    }
}

/// Serialises the snapshot on a thread into a bounded channel; the task writes each chunk.
fn spawn_writer(
    dbs: Vec<(usize, crate::store::db::DbSnapshot)>,
    opts: SaveOptions,
    replid: String,
    offset: u64,
) -> tokio::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = tokio::sync::mpsc::channel(replication::CHANNEL_CHUNKS);
    let spawned = std::thread::Builder::new()
        .name("repl-rdb".into())
        .spawn(move || {
            let w = replication::ChannelWriter::new(tx);
            if let Err(e) = replication::write_rdb(w, dbs, opts, &replid, offset) {
                tracing::debug!("full-sync snapshot stopped: {e}");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the full-sync thread: {e}");
    }
    rx
}

/// `$EOF:<mark>\r\n<rdb><mark>`.
async fn send_diskless(
    stream: &mut ClientStream,
    dbs: Vec<(usize, crate::store::db::DbSnapshot)>,
    opts: SaveOptions,
    replid: String,
    offset: u64,
) -> std::io::Result<()> {
    let mark = replication::eof_mark();
    let mut head = b"$EOF:".to_vec();
    head.extend_from_slice(&mark);
    head.extend_from_slice(b"\r\n");
    stream.write_all(&head).await?;
    let mut rx = spawn_writer(dbs, opts, replid, offset);
    let mut sent = 0u64;
    while let Some(chunk) = rx.recv().await {
        sent += chunk.len() as u64;
        stream.write_all(&chunk).await?;
    }
    if sent == 0 {
        return Err(std::io::Error::other("snapshot thread failed"));
    }
    stream.write_all(&mark).await
}

/// `$<len>\r\n<rdb>`: the snapshot goes to a temporary file first (its length must be known),
/// with a newline every second meanwhile so the replica does not time out, as Redis does.
async fn send_from_disk(
    stream: &mut ClientStream,
    dbs: Vec<(usize, crate::store::db::DbSnapshot)>,
    opts: SaveOptions,
    replid: String,
    offset: u64,
    dir: &str,
    id: u64,
) -> std::io::Result<()> {
    let path = std::path::Path::new(dir).join(format!("temp-repl-{}-{id}.rdb", std::process::id()));
    let p = path.clone();
    let mut job = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
        let f = std::fs::File::create(&p)?;
        let w = std::io::BufWriter::with_capacity(1 << 20, f);
        let w = replication::write_rdb(w, dbs, opts, &replid, offset)?;
        drop(w);
        Ok(std::fs::metadata(&p)?.len())
    });
    let len = loop {
        tokio::select! {
            r = &mut job => break r.map_err(std::io::Error::other)?,
            _ = super::timer::sleep(Duration::from_secs(1)) => stream.write_all(b"\n").await?,
        }
    };
    let result = async {
        let len = len?;
        stream.write_all(format!("${len}\r\n").as_bytes()).await?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
        let p = path.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut f = match std::fs::File::open(&p) {
                Ok(f) => f,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            loop {
                let mut buf = vec![0u8; replication::CHUNK];
                match f.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.blocking_send(Ok(buf)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                }
            }
        });
        let mut copied = 0u64;
        while let Some(chunk) = rx.recv().await {
            let chunk = chunk?;
            copied += chunk.len() as u64;
            stream.write_all(&chunk).await?;
        }
        if copied != len {
            return Err(std::io::Error::other("snapshot file changed while sending"));
        }
        Ok(())
    }
    .await;
    let _ = std::fs::remove_file(&path);
    result
}

/// Reads until the replica's first `REPLCONF ACK` (after a diskless transfer).
async fn wait_first_ack(
    shared: &Shared,
    stream: &mut ClientStream,
    handle: &ClientHandle,
    inbuf: &mut BytesMut,
) -> std::io::Result<()> {
    let mut parser = RequestParser::new();
    let limits = ParserLimits {
        max_bulk_len: 1 << 20,
        authenticated: true,
    };
    let timeout = Duration::from_secs(shared.config().repl_timeout.max(1));
    loop {
        while let Ok(Some(argv)) = parser.next_request(inbuf, &limits) {
            if let Some(off) = ack_offset(&argv) {
                record_ack(shared, handle.id, off);
                return Ok(());
            }
        }
        let n = super::timer::timeout(timeout, stream.read_buf(inbuf))
            .await
            .map_err(|_| std::io::Error::other("timeout waiting for the replica's first ACK"))??;
        if n == 0 {
            return Err(std::io::Error::other("replica closed the connection"));
        }
    }
}

fn ack_offset(argv: &[Bytes]) -> Option<u64> {
    if argv.len() >= 3
        && argv[0].eq_ignore_ascii_case(b"replconf")
        && argv[1].eq_ignore_ascii_case(b"ack")
    {
        std::str::from_utf8(&argv[2]).ok()?.parse().ok()
    } else {
        None
    }
}

fn record_ack(shared: &Shared, id: u64, off: u64) {
    let mut engine = shared.engine();
    if let Some(r) = engine.repl.replicas.get_mut(&id) {
        r.ack_offset = r.ack_offset.max(off);
        r.ack_ms = crate::engine::now_ms();
    }
    drop(engine);
    shared.repl_acked.notify_waiters();
}

/// Copies the stream from the backlog while reading ACKs.
async fn stream_loop(
    shared: &Arc<Shared>,
    stream: &mut ClientStream,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut fed = shared.repl_fed.subscribe();
    let mut parser = RequestParser::new();
    let limits = ParserLimits {
        max_bulk_len: 1 << 20,
        authenticated: true,
    };
    let timeout = shared.config().repl_timeout.max(1);
    let mut last_heard = tokio::time::Instant::now();
    let limit = {
        let c = shared.config();
        c.client_obuf_limits.replica_effective(c.repl_backlog_size)
    };
    loop {
        // Send everything that is pending.
        loop {
            let chunk = {
                let mut engine = shared.engine();
                let hard = if limit.hard == 0 {
                    usize::MAX
                } else {
                    limit.hard as usize
                };
                let master_next = engine.repl.offset + 1;
                let Some(r) = engine.repl.replicas.get(&handle.id) else {
                    return Err(std::io::Error::other("replica unregistered"));
                };
                let from = r.send_offset;
                if over_output_limit(handle, &limit, master_next.saturating_sub(from)) {
                    let line = crate::commands::client::info_string(&engine.pubsub, handle);
                    tracing::warn!(
                        "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
                    );
                    return Err(std::io::Error::other("output buffer limit"));
                }
                let repl = &mut engine.repl;
                let Some(b) = repl.backlog.as_ref() else {
                    return Err(std::io::Error::other("backlog gone"));
                };
                let Some(chunk) = b.read_from(from, SEND_MAX) else {
                    return Err(std::io::Error::other("replica fell out of the backlog"));
                };
                if let Some(r) = repl.replicas.get_mut(&handle.id) {
                    r.send_offset = from + chunk.len() as u64;
                }
                repl.trim(hard);
                chunk
            };
            if chunk.is_empty() {
                break;
            }
            shared
                .stats
                .net_repl_output_bytes
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            stream.write_all(&chunk).await?;
        }
        tokio::select! {
            r = fed.changed() => {
                if r.is_err() {
                    return Ok(());
                }
            }
            n = stream.read_some(inbuf) => {
                if n? == 0 {
                    return Ok(());
                }
                last_heard = tokio::time::Instant::now();
                while let Ok(Some(argv)) = parser.next_request(inbuf, &limits) {
                    if let Some(off) = ack_offset(&argv) {
                        record_ack(shared, handle.id, off);
                    }
                }
            }
            _ = super::timer::sleep_until(last_heard + Duration::from_secs(timeout)) => {
                return Err(std::io::Error::other("timeout: no ACK from the replica"));
            }
            _ = handle.kill.notified() => return Ok(()),
            _ = shutdown.changed() => return Ok(()),
        }
        if handle.killed.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
}

/// The output-buffer-limit hook for replicas: `pending` is how many stream bytes this replica
/// has not been sent yet (its share of the backlog, which is its output buffer, shown as its
/// CLIENT LIST `omem`). Applies the `client-output-buffer-limit replica` class (hard, and soft
/// for its seconds; the hard limit raised to `repl-backlog-size` as Redis does) with the
/// client's own soft-limit clock, the same rule as the normal and pubsub classes.
fn over_output_limit(
    handle: &ClientHandle,
    limit: &crate::config::OutputLimit,
    pending: u64,
) -> bool {
    let pending = usize::try_from(pending).unwrap_or(usize::MAX);
    handle.mem.out_pending.store(pending, Ordering::Relaxed);
    handle.output_limit_reached(limit, pending, crate::engine::now_ms() / 1000)
}

/// WAIT's blocking part: asks every replica for an ACK, then waits until `numreplicas` acknowledged
/// `offset` or the timeout passed. Returns how many did.
pub async fn wait_acks(
    shared: &Arc<Shared>,
    handle: &ClientHandle,
    numreplicas: usize,
    timeout_ms: u64,
    offset: u64,
) -> usize {
    request_acks(shared);
    let deadline =
        (timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout_ms));
    loop {
        let notified = shared.repl_acked.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let acked = shared.engine().repl.acked(offset);
        if acked >= numreplicas || handle.killed.load(Ordering::Relaxed) {
            return acked;
        }
        let sleep = async {
            match deadline {
                Some(d) => super::timer::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = notified => {}
            _ = sleep => return shared.engine().repl.acked(offset),
            _ = handle.kill.notified() => return shared.engine().repl.acked(offset),
        }
    }
}

/// Feeds `REPLCONF GETACK *` into the stream (it counts in the offset, as in Redis).
pub fn request_acks(shared: &Shared) {
    let mut engine = shared.engine();
    if engine.repl.replicas.is_empty() {
        return;
    }
    engine.pump_repl();
    let cmd = encode_command(&[b"REPLCONF", b"GETACK", b"*"]);
    engine.repl.feed(&cmd);
    let off = engine.repl.offset;
    drop(engine);
    shared.repl_fed.send_replace(off);
}

/// Wakes the replica tasks when the last batch fed the stream. Called by connections after a batch
/// (outside the lock is fine: the flag was taken under it).
pub fn notify_fed(shared: &Shared, engine: &mut crate::engine::Engine) {
    if engine.repl.pending_notify {
        engine.repl.pending_notify = false;
        shared.repl_fed.send_replace(engine.repl.offset);
    }
}

/// Wakes the replica tasks for writes made under the shared lock: their bytes are still in the
/// write stream, and a task moves them into the backlog when it takes the keyspace lock
/// (`Shared::engine`) to read it.
pub fn wake_replicas(shared: &Shared) {
    shared.repl_fed.send_modify(|_| {});
}

/// Once a second from the server cron: PING the replicas every `repl-ping-replica-period`
/// (through the stream, so it counts in the offset) and free a backlog idle for
/// `repl-backlog-ttl`.
pub fn cron(shared: &Shared, tick: u64) {
    let (period, ttl, size, hard) = {
        let c = shared.config();
        (
            c.repl_ping_replica_period.max(1),
            c.repl_backlog_ttl,
            c.repl_backlog_size as usize,
            c.client_obuf_limits
                .replica_effective(c.repl_backlog_size)
                .hard as usize,
        )
    };
    let mut engine = shared.engine();
    // Bytes the stream holds go before the PING (and a freed backlog ends the subscription).
    engine.pump_repl();
    let repl = &mut engine.repl;
    repl.obuf_hard = if hard == 0 { usize::MAX } else { hard };
    if let Some(b) = repl.backlog.as_mut() {
        b.size = size.max(1);
    }
    if repl.master.is_none() && !repl.replicas.is_empty() && tick.is_multiple_of(period) {
        repl.feed(&encode_command(&[b"PING"]));
    }
    if repl.master.is_none() && repl.replicas.is_empty() && ttl > 0 {
        let now = crate::engine::now_ms();
        if let Some(since) = repl.backlog.as_ref().and_then(|b| b.idle_since_ms) {
            if now.saturating_sub(since) > ttl * 1000 {
                tracing::info!(
                    "Replication backlog freed after {ttl} seconds without connected replicas."
                );
                repl.backlog = None;
            }
        }
    }
    engine.ensure_repl_stream();
    notify_fed(shared, &mut engine);
}
