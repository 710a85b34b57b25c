//! The replica's side: the link to our primary. A supervisor task follows REPLICAOF (through
//! `Shared::repl_target`), connects, runs the handshake, receives the snapshot into a file in
//! `dir`, loads it into a fresh keyspace on a blocking thread and swaps it in whole, then applies
//! the stream through the dispatcher as the "master client" and forwards the same bytes to its own
//! backlog (so its replicas and its offset match the primary's byte for byte). A dropped link is
//! retried every second with `PSYNC <replid> <offset+1>`, which the primary answers `+CONTINUE`
//! when it still has the bytes.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::{self, ClientState};
use crate::engine::repl::{encode_command, Backlog, ZERO_ID};
use crate::engine::{ClientHandle, Shared};
use crate::protocol::parser::{ParserLimits, RequestParser};
use crate::replication::{self, BulkHeader, PsyncReply};
use crate::store::Store;

/// Follows REPLICAOF for the life of the server.
pub async fn supervisor(shared: Arc<Shared>) {
    let mut target = shared.repl_target.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let master = shared.engine().repl.master.clone();
        let Some(m) = master else {
            tokio::select! {
                r = target.changed() => if r.is_err() { return },
                _ = shutdown.wait_for(|v| *v) => return,
            }
            continue;
        };
        let generation = m.generation;
        tokio::select! {
            r = run_link(&shared, m.host.clone(), m.port, generation) => {
                if let Err(e) = r {
                    tracing::warn!("Replication link with {}:{} lost: {e}", m.host, m.port);
                }
            }
            _ = target.changed() => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
        set_link_state(&shared, generation, "connect");
        tokio::select! {
            _ = super::timer::sleep(Duration::from_secs(1)) => {}
            _ = target.changed() => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

fn set_link_state(shared: &Shared, generation: u64, state: &'static str) {
    let mut engine = shared.engine();
    if let Some(m) = engine.repl.master.as_mut() {
        if m.generation == generation {
            let was_up = m.state == "connected";
            m.state = state;
            if was_up && state != "connected" {
                m.down_since_ms = crate::engine::now_ms();
            }
        }
    }
}

/// A socket with a read buffer, for the line-based handshake.
struct Link {
    stream: TcpStream,
    buf: BytesMut,
    timeout: Duration,
}

impl Link {
    async fn send(&mut self, argv: &[&[u8]]) -> Result<(), String> {
        self.stream
            .write_all(&encode_command(argv))
            .await
            .map_err(|e| e.to_string())
    }

    async fn fill(&mut self) -> Result<(), String> {
        match super::timer::timeout(self.timeout, self.stream.read_buf(&mut self.buf)).await {
            Ok(Ok(0)) => Err("connection closed by the primary".into()),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timeout talking to the primary".into()),
        }
    }

    /// One line without its CRLF; bare newlines (the primary's keepalives) are skipped.
    async fn line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            while self.buf.first() == Some(&b'\n') {
                self.buf.advance(1);
            }
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line = self.buf.split_to(i + 1).to_vec();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buf.len() > 64 * 1024 {
                return Err("protocol error: line too long".into());
            }
            self.fill().await?;
        }
    }

    async fn command(&mut self, argv: &[&[u8]]) -> Result<Vec<u8>, String> {
        self.send(argv).await?;
        self.line().await
    }
}

async fn run_link(
    shared: &Arc<Shared>,
    host: String,
    port: u16,
    generation: u64,
) -> Result<(), String> {
    let (timeout, auth, user, announce_ip, announce_port, dir) = {
        let c = shared.config();
        (
            Duration::from_secs(c.repl_timeout.max(1)),
            c.masterauth.clone(),
            c.masteruser.clone(),
            c.replica_announce_ip.clone(),
            c.replica_announce_port,
            c.dir.clone(),
        )
    };
    set_link_state(shared, generation, "connecting");
    tracing::info!("Connecting to MASTER {host}:{port}");
    let stream = super::timer::timeout(timeout, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| "timeout connecting to the primary".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let mut link = Link {
        stream,
        buf: BytesMut::with_capacity(64 * 1024),
        timeout,
    };
    tracing::info!("MASTER <-> REPLICA sync started");
    let pong = link.command(&[b"PING"]).await?;
    if pong.first() == Some(&b'-')
        && !pong.starts_with(b"-NOAUTH")
        && !pong.starts_with(b"-NOPERM")
        && !pong.starts_with(b"-ERR operation not permitted")
    {
        return Err(format!(
            "error reply to PING from the primary: {}",
            String::from_utf8_lossy(&pong)
        ));
    }
    if let Some(pass) = &auth {
        let reply = match &user {
            Some(u) => {
                link.command(&[b"AUTH", u.as_bytes(), pass.as_bytes()])
                    .await?
            }
            None => link.command(&[b"AUTH", pass.as_bytes()]).await?,
        };
        if reply.first() == Some(&b'-') {
            return Err(format!(
                "unable to AUTH to the primary: {}",
                String::from_utf8_lossy(&reply)
            ));
        }
    }
    let my_port = if announce_port > 0 {
        announce_port as usize
    } else {
        shared.port.load(Ordering::Relaxed)
    };
    let p = my_port.to_string();
    let reply = link
        .command(&[b"REPLCONF", b"listening-port", p.as_bytes()])
        .await?;
    if reply.first() == Some(&b'-') {
        tracing::info!(
            "(Non critical) the primary does not understand REPLCONF listening-port: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    if let Some(ip) = &announce_ip {
        link.command(&[b"REPLCONF", b"ip-address", ip.as_bytes()])
            .await?;
    }
    link.command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
        .await?;
    let (replid, next) = {
        let e = shared.engine();
        (e.repl.replid.clone(), e.repl.offset + 1)
    };
    let next = next.to_string();
    tracing::info!("Trying a partial resynchronization (request {replid}:{next}).");
    let reply = link
        .command(&[b"PSYNC", replid.as_bytes(), next.as_bytes()])
        .await?;
    match replication::parse_psync_reply(&reply) {
        PsyncReply::Full { replid, offset } => {
            tracing::info!("Full resync from master: {replid}:{offset}");
            set_link_state(shared, generation, "sync");
            full_sync(shared, &mut link, generation, &dir, replid, offset).await?;
        }
        PsyncReply::Continue { new_replid } => {
            tracing::info!("Successful partial resynchronization with master.");
            let mut engine = shared.engine();
            let size = shared.config().repl_backlog_size as usize;
            let repl = &mut engine.repl;
            if let Some(id) = new_replid {
                if id != repl.replid {
                    tracing::info!("Master replication ID changed to {id}");
                    repl.shift_replid(id);
                    commands::replication::disconnect_replicas(shared, repl);
                }
            }
            repl.ensure_backlog(size);
        }
        PsyncReply::Retry(e) | PsyncReply::Error(e) => return Err(format!("PSYNC refused: {e}")),
    }
    set_link_state(shared, generation, "connected");
    {
        let mut engine = shared.engine();
        if let Some(m) = engine.repl.master.as_mut() {
            m.last_io_ms = crate::engine::now_ms();
        }
    }
    tracing::info!("MASTER <-> REPLICA sync: Finished with success");
    apply_stream(shared, link, generation).await
}

/// Receives the snapshot into a file, loads it, swaps it in.
async fn full_sync(
    shared: &Arc<Shared>,
    link: &mut Link,
    generation: u64,
    dir: &str,
    replid: String,
    offset: u64,
) -> Result<(), String> {
    let header = link.line().await?;
    let header = replication::parse_bulk_header(&header).ok_or_else(|| {
        format!(
            "bad protocol from MASTER, the first byte is not '$': {}",
            String::from_utf8_lossy(&header)
        )
    })?;
    let path = std::path::Path::new(dir)
        .join(format!("temp-{}-sync-{generation}.rdb", std::process::id()));
    let result = receive(shared, link, generation, &path, header).await;
    let result = match result {
        Ok(()) => load(shared, generation, &path, replid, offset).await,
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_file(&path);
    result
}

async fn receive(
    shared: &Arc<Shared>,
    link: &mut Link,
    generation: u64,
    path: &std::path::Path,
    header: BulkHeader,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the snapshot to {}: {e}", path.display());
    let mut file =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(io)?);
    let mut read = 0u64;
    let progress = |read: u64, left: i64| {
        let mut engine = shared.engine();
        if let Some(m) = engine.repl.master.as_mut() {
            if m.generation == generation {
                m.sync_read = read;
                m.sync_left = left;
                m.last_io_ms = crate::engine::now_ms();
            }
        }
    };
    match header {
        BulkHeader::Len(len) => {
            tracing::info!("MASTER <-> REPLICA sync: receiving {len} bytes from master to disk");
            while read < len {
                if link.buf.is_empty() {
                    link.fill().await?;
                }
                let take = (len - read).min(link.buf.len() as u64) as usize;
                let chunk = link.buf.split_to(take);
                file.write_all(&chunk).map_err(io)?;
                read += take as u64;
                shared
                    .stats
                    .net_repl_input_bytes
                    .fetch_add(take as u64, Ordering::Relaxed);
                progress(read, (len - read) as i64);
            }
        }
        BulkHeader::Eof(mark) => {
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk"
            );
            let mut scanner = replication::EofScanner::new(mark);
            loop {
                if link.buf.is_empty() {
                    link.fill().await?;
                }
                let chunk = link.buf.split();
                file.write_all(&chunk).map_err(io)?;
                read += chunk.len() as u64;
                shared
                    .stats
                    .net_repl_input_bytes
                    .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                progress(read, -1);
                if scanner.feed(&chunk) {
                    break;
                }
            }
            let f = file.into_inner().map_err(|e| io(e.into_error()))?;
            f.set_len(read.saturating_sub(40)).map_err(io)?;
            return Ok(());
        }
    }
    file.flush().map_err(io)?;
    Ok(())
}

async fn load(
    shared: &Arc<Shared>,
    generation: u64,
    path: &std::path::Path,
    replid: String,
    offset: u64,
) -> Result<(), String> {
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let databases = shared.config().databases;
    let p = path.to_path_buf();
    let started = std::time::Instant::now();
    let (store, stats) = tokio::task::spawn_blocking(move || {
        let mut store = Store::new(databases);
        crate::persistence::load_file(&p, &mut store, true).map(|s| (store, s))
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("failed loading the primary's snapshot: {e}"))?;
    let mut engine = shared.engine();
    let still_ours = engine
        .repl
        .master
        .as_ref()
        .is_some_and(|m| m.generation == generation);
    if !still_ours {
        return Err("REPLICAOF changed while loading".into());
    }
    let mut store = store;
    std::mem::swap(&mut engine.store.dbs, &mut store.dbs);
    let size = shared.config().repl_backlog_size as usize;
    let repl = &mut engine.repl;
    repl.replid = replid;
    repl.replid2 = ZERO_ID.into();
    repl.second_offset = -1;
    repl.offset = offset;
    repl.backlog = Some(Backlog::new(size, offset + 1));
    commands::replication::disconnect_replicas(shared, repl);
    drop(engine);
    // The old keyspace is freed outside the lock.
    drop(store);
    tracing::info!(
        "MASTER <-> REPLICA sync: {} keys loaded in {:.3}s (RDB version {})",
        stats.keys_loaded,
        started.elapsed().as_secs_f64(),
        stats.version
    );
    Ok(())
}

/// Applies the stream until the link drops or REPLICAOF changes.
async fn apply_stream(shared: &Arc<Shared>, link: Link, generation: u64) -> Result<(), String> {
    let Link {
        mut stream,
        buf: mut inbuf,
        timeout,
    } = link;
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    let laddr = stream.local_addr().unwrap_or(peer);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let handle = Arc::new(ClientHandle::new(id, peer, laddr));
    handle.is_master.store(true, Ordering::Relaxed);
    shared.clients().insert(id, handle.clone());
    let result = apply_loop(
        shared,
        &mut stream,
        &mut inbuf,
        handle.clone(),
        generation,
        timeout,
    )
    .await;
    shared.clients().remove(&id);
    result
}

async fn apply_loop(
    shared: &Arc<Shared>,
    stream: &mut TcpStream,
    inbuf: &mut BytesMut,
    handle: Arc<ClientHandle>,
    generation: u64,
    timeout: Duration,
) -> Result<(), String> {
    let mut client = ClientState::new(handle.clone(), true);
    client.is_master = true;
    let mut parser = RequestParser::new();
    let limits = ParserLimits {
        max_bulk_len: usize::MAX / 2,
        authenticated: true,
    };
    // The first ACK at once: a primary that sent a diskless snapshot waits for it.
    send_ack(shared, stream).await?;
    let mut ack = super::timer::interval(Duration::from_secs(1));
    let mut target = shared.repl_target.subscribe();
    let mut last_io = tokio::time::Instant::now();
    let mut acks: Vec<u64> = Vec::new();
    loop {
        if !inbuf.is_empty() {
            let now = commands::now_ms();
            {
                let mut engine = shared.engine();
                loop {
                    let before = inbuf.len();
                    let argv = match parser.next_request(inbuf, &limits) {
                        Ok(Some(argv)) => argv,
                        Ok(None) => break,
                        Err(e) => return Err(format!("protocol error from the primary: {e:?}")),
                    };
                    let used = before - inbuf.len();
                    if is_getack(&argv) {
                        acks.push(engine.repl.offset);
                    } else {
                        let reply =
                            commands::dispatch(shared, &mut engine, &mut client, &argv, now);
                        if let crate::protocol::Reply::Error(e) = reply {
                            tracing::debug!(
                                "error applying {} from the primary: {e}",
                                String::from_utf8_lossy(&argv[0])
                            );
                        }
                    }
                    // Forward the command as the primary framed it: Redis always propagates plain
                    // multibulk, so re-encoding gives the same bytes (and the same offset).
                    let argv_refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
                    let bytes = encode_command(&argv_refs);
                    if bytes.len() != used {
                        tracing::warn!("the primary sent a command in a non-canonical framing; offsets may drift");
                    }
                    engine.repl.feed(&bytes);
                }
                if let Some(m) = engine.repl.master.as_mut() {
                    m.last_io_ms = now;
                }
                super::replica::notify_fed(shared, &mut engine);
                // BCAST invalidations for the primary's writes, once per read, as a client
                // connection sends them once per round.
                engine.pubsub.broadcast_invalidations(shared);
            }
            for off in acks.drain(..) {
                let o = off.to_string();
                stream
                    .write_all(&encode_command(&[b"REPLCONF", b"ACK", o.as_bytes()]))
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        tokio::select! {
            n = stream.read_buf(inbuf) => {
                match n {
                    Ok(0) => return Err("connection closed by the primary".into()),
                    Ok(n) => {
                        last_io = tokio::time::Instant::now();
                        shared.stats.net_repl_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            _ = ack.tick() => send_ack(shared, stream).await?,
            _ = super::timer::sleep_until(last_io + timeout) => {
                return Err("MASTER timeout: no data nor PING received".into());
            }
            _ = target.changed() => {
                if shared.engine().repl.generation != generation {
                    return Ok(());
                }
            }
            _ = handle.kill.notified() => return Err("killed by CLIENT KILL".into()),
        }
    }
}

fn is_getack(argv: &[Bytes]) -> bool {
    argv.len() >= 2
        && argv[0].eq_ignore_ascii_case(b"replconf")
        && argv[1].eq_ignore_ascii_case(b"getack")
}

async fn send_ack(shared: &Shared, stream: &mut TcpStream) -> Result<(), String> {
    let off = shared.engine().repl.offset.to_string();
    stream
        .write_all(&encode_command(&[b"REPLCONF", b"ACK", off.as_bytes()]))
        .await
        .map_err(|e| e.to_string())
}
