//! One client connection: read, parse every complete request, execute the batch under one keyspace
//! lock, write all replies with one write.
//!
//! Batching is what makes pipelines fast: a `-P 16` client sends 16 requests in one segment, they
//! are decoded together, executed with a single lock acquisition and answered with a single write.
//! Before a client has authenticated, requests run one at a time so that the smaller
//! unauthenticated protocol limits apply exactly until AUTH succeeds, as in Redis.
//!
//! The per-batch path is kept free of allocation and of needless synchronisation (measured with
//! callgrind, `scripts/bench-load.sh --callgrind`): the batch's arguments are slices of the read
//! buffer in one flat vector reused from batch to batch ([`Batch`]); a kill, a push and the
//! server's shutdown all wake the task through one [`crate::engine::signal::Signal`] whose waker is
//! registered once (one tokio `Notify`/`watch` future each cost their notifiers' locks every
//! round: ~1,300 instructions of a ~5,600-instruction `PING` at `-P 1` when they were re-created,
//! ~450 of ~4,600 when merely re-polled); the `select!` is `biased` towards the
//! socket, so no random number is drawn per round; and a write is first tried directly, the
//! `select!` below (reads while the write waits, limits, kill) only when the socket cannot take
//! it all at once.
//!
//! # Output: the pause bound and `client-output-buffer-limit`
//!
//! Replies collect in `outbuf` (a `protocol::out::OutBuf`: encoded bytes plus long bulk strings
//! queued as handles on the stored value, so nothing large is copied under the keyspace lock) and
//! are written when the batch ends. Redis keeps executing whatever
//! a client sends and queues every reply, so with its default (`normal 0 0 0`: no limit) a client
//! that pipelines `GET bigkey` and never reads makes it hold every reply: 1.37 GB for 200,000 GETs
//! of a 1 MiB value. Here a batch stops executing once [`OUTPUT_PAUSE_BYTES`] (1 MiB) of output is
//! pending; the rest waits until that output is written, which for a client that never reads is
//! never. While the write waits, the connection keeps *reading* requests (without executing
//! them) up to `client-query-buffer-limit`, so a client that writes a whole pipeline before it
//! reads any reply cannot deadlock against us; past that limit it is closed, as Redis closes a
//! query buffer over the limit. So with the default config one connection holds at most:
//!
//! ```text
//!   1 MiB of replies + the largest single reply (one command's reply is never cut)
//!   + its unexecuted requests (at most client-query-buffer-limit, 1 GB by default;
//!     26 bytes per `GET bigkey`) + the kernel's socket buffers
//! ```
//!
//! When the client's class (normal, or pubsub for a subscriber) has a non-zero limit, the pause
//! moves up to the larger of 1 MiB, the hard and the soft limit, so the limit acts as in Redis: at
//! or above the hard limit, or at or above the soft limit for longer than its seconds, the client
//! is closed asynchronously with Redis's log line ("Client <CLIENT LIST line> scheduled to be
//! closed ASAP for overcoming of output buffer limits."). The checks run after each reply, on
//! each pub/sub delivery (`engine::pubsub`), and while a write waits (a timer for the soft limit).
//! Replicas are checked in `server::replica` against the replica class. MONITOR clients cannot be
//! paused (their output is other clients' commands): `engine::pubsub` applies the normal class
//! to them, or 64 MiB hard when the normal class has no limit.
//!
//! What the connection holds is published on its [`ClientHandle`] (`mem`) for CLIENT LIST's
//! `qbuf`, `qbuf-free`, `argv-mem`, `omem` and `tot-mem`, and for the limits.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::socket::ClientStream;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWriteExt, Interest};

use crate::commands::shared_path::EngineLock;
use crate::commands::{self, Action, ClientState, PREFETCH_BATCH};
use crate::config::{ObufLimits, OutputLimit};
use crate::engine::signal::SignalWaiter;
use crate::engine::{ClientHandle, Shared};
use crate::protocol::out::OutBuf;
use crate::protocol::parser::{ParserLimits, RequestParser};

const READ_CHUNK: usize = 16 * 1024;

/// Pending output at which a connection stops executing its requests until the output is
/// written (the module essay gives the resulting bound per connection). Pipelines lose nothing:
/// 1 MiB of replies per write is far past where batching stops paying.
pub const OUTPUT_PAUSE_BYTES: usize = 1 << 20;

/// Where a batch pauses for a client whose class has `limit`: 1 MiB, or the class's hard or soft
/// limit when larger, so that a configured limit is reached (and closes) as in Redis.
fn pause_at(limit: &OutputLimit) -> usize {
    OUTPUT_PAUSE_BYTES
        .max(usize::try_from(limit.hard).unwrap_or(usize::MAX))
        .max(usize::try_from(limit.soft).unwrap_or(usize::MAX))
}

/// Bytes of parsed, not yet executed arguments (CLIENT LIST `argv-mem`).
fn argv_bytes(requests: &Batch) -> usize {
    requests.pending_args().iter().map(Bytes::len).sum()
}

/// Accounts for `n` bytes the socket took from `outbuf`: INFO's `total_net_output_bytes` and
/// CLIENT LIST's `omem` source. Returns what is still pending.
fn sent(outbuf: &mut OutBuf, n: usize, shared: &Shared, handle: &ClientHandle) -> usize {
    outbuf.advance(n);
    shared
        .stats
        .net_output_bytes
        .fetch_add(n as u64, Ordering::Relaxed);
    let left = outbuf.len();
    handle.mem.out_pending.store(left, Ordering::Relaxed);
    left
}

/// Publishes the query buffer's figures for CLIENT LIST.
fn publish_input(handle: &ClientHandle, inbuf: &BytesMut) {
    handle.mem.qbuf.store(inbuf.len(), Ordering::Relaxed);
    handle
        .mem
        .qbuf_free
        .store(inbuf.capacity() - inbuf.len(), Ordering::Relaxed);
}

/// Serves one client until it quits, errs, is killed, times out or the server stops.
pub async fn serve(
    shared: Arc<Shared>,
    mut stream: ClientStream,
    handle: Arc<ClientHandle>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    stream.set_nodelay();
    let needs_auth = shared.config().requirepass.is_some();
    let mut client = ClientState::new(handle.clone(), !needs_auth);
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    // Replies; a long bulk string is queued as a handle on the stored value, not copied under
    // the lock (protocol::out).
    let mut outbuf = OutBuf::with_capacity(READ_CHUNK);
    let mut requests = Batch::default();
    let mut resume = false;
    // CLIENT REPLY silenced the WAIT whose answer comes after the batch.
    let mut wait_silenced = false;
    // A CLIENT PAUSE holds back the next request (`Some(it may write)`).
    let mut pause_wait: Option<bool> = None;
    // A protocol error found after requests that a paused batch has not executed yet.
    let mut deferred_error = None;
    // The peer closed its side while we were writing: no more reads.
    let mut read_closed = false;
    // Config values read per request, cached until a CONFIG SET moves the generation.
    let mut config_gen = u64::MAX;
    let (mut max_bulk_len, mut query_limit) = (0usize, 0usize);
    let mut obuf_limits = ObufLimits::default();
    // The output limit of the client's class as of its last batch (normal or pubsub).
    let mut class_limit = obuf_limits.normal;
    // Pushes, CLIENT KILL and the shutdown all wake the task through the outbox's signal: its
    // waker is registered once, and a round that waits checks a flag, no lock (engine::signal).
    let replica_shutdown = shutdown.clone();
    shutdown.mark_unchanged();
    let mut attention = SignalWaiter::default();

    'conn: loop {
        // Whether this round ran a pipelined batch (more than one request): see the write.
        let mut pipelined = false;
        if let Some(write) = pause_wait.take() {
            // Redis's postponed client: counted as blocked until the pause lets it go.
            handle.blocked.store(true, Ordering::Relaxed);
            shared
                .client_pause
                .wait(write, || {
                    handle.killed.load(Ordering::Relaxed) || stopping(&handle, &shutdown)
                })
                .await;
            handle.blocked.store(false, Ordering::Relaxed);
        }
        // ---- read --------------------------------------------------------------------------
        let gen = shared.config_gen.load(Ordering::Acquire);
        if gen != config_gen {
            let c = shared.config();
            (max_bulk_len, query_limit) = (c.proto_max_bulk_len, c.client_query_buffer_limit);
            obuf_limits = c.client_obuf_limits;
            config_gen = gen;
        }
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        // After a WAIT, a paused batch, or requests read while a write waited, the work is already
        // here: run it before reading more.
        let resuming = std::mem::take(&mut resume) && resumed_round(&requests, &inbuf);
        let n = if resuming {
            Ok(Some(usize::MAX))
        } else if read_closed {
            Ok(Some(0))
        } else {
            // Pub/sub messages and other pushes (those that came while a write waited, too): write
            // them without waiting for a request. A wake-up also comes for a kill or the shutdown,
            // both checked below.
            if handle.outbox.pending() > 0 {
                Ok(Some(usize::MAX))
            } else {
                // No timer here: the `timeout` directive is the cron's
                // (server::close_idle_clients). The socket first, then the signal, in one
                // `poll_fn` (a biased `select!` of `read_buf` and `Signal::wait` did the same
                // with ~100 more instructions a request at `-P 1`).
                std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = poll_read_into(&mut stream, &mut inbuf, cx) {
                        return Poll::Ready(r.map(Some));
                    }
                    handle
                        .outbox
                        .ready
                        .poll_wait(&mut attention, cx)
                        .map(|()| Ok(Some(usize::MAX)))
                })
                .await
            }
        };
        if stopping(&handle, &shutdown) {
            break;
        }
        // The clock is read once per round that read something: for `idle`/`timeout` (Redis's
        // lastinteraction moves on every read) and for the batch below.
        let mut round_now = None;
        match n {
            Ok(Some(usize::MAX)) => {}
            Ok(Some(0)) | Ok(None) | Err(_) => break,
            Ok(Some(n)) => {
                shared
                    .stats
                    .net_input_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
                let t = super::clock::mono_ns();
                handle
                    .last_active_ms
                    .store(super::clock::unix_ms(t), Ordering::Relaxed);
                round_now = Some(t);
            }
        }

        // ---- parse and execute --------------------------------------------------------------
        let mut close_after = false;
        let mut paused = false;
        loop {
            let limits = ParserLimits {
                max_bulk_len,
                authenticated: client.authenticated,
            };
            let mut protocol_error = None;
            // Unauthenticated clients take one request per round so AUTH lifts the limits in time.
            let batch_max = if client.authenticated { usize::MAX } else { 1 };
            // An empty buffer completes no request: no parser call for it.
            while requests.len() < batch_max && deferred_error.is_none() && !inbuf.is_empty() {
                match parser.next_request_into(&mut inbuf, &limits, &mut requests.args) {
                    Ok(0) => break,
                    Ok(_) => requests.ends.push(requests.args.len()),
                    Err(e) => {
                        protocol_error = Some(e);
                        break;
                    }
                }
            }
            publish_input(&handle, &inbuf);
            if requests.is_empty() && protocol_error.is_none() && deferred_error.is_none() {
                break;
            }
            if !requests.is_empty() {
                let started = round_now.take().unwrap_or_else(super::clock::mono_ns);
                let now = super::clock::unix_ms(started);
                // A block, so the keyspace guard is provably gone before the commit's await.
                let (aof_upto, done, shut_down_now) = {
                    // Shared for a batch of reads that can run side by side with other
                    // connections' (commands::shared_path), exclusive otherwise.
                    let mut engine = EngineLock::for_batch(&shared, requests.get(0), &mut client);
                    if engine.engine().shut_down {
                        // The final snapshot is taken: run nothing more, answer nothing more.
                        drop(engine);
                        requests.clear();
                        close_after = true;
                        break;
                    }
                    class_limit = if engine.engine().pubsub.is_subscriber(handle.id) {
                        obuf_limits.pubsub
                    } else {
                        obuf_limits.normal
                    };
                    let limited = class_limit != OutputLimit::NONE;
                    let pause = pause_at(&class_limit);
                    handle
                        .mem
                        .argv_mem
                        .store(argv_bytes(&requests), Ordering::Relaxed);
                    // Pushes published before this batch go out before its replies; pushes a command
                    // sends to this very client go out before that command's reply, as in Redis.
                    drain_pushes(&handle, &mut outbuf);
                    let mut done = 0;
                    let mut shut_down_now = false;
                    client.cmd_clock = Some(started);
                    let batch = requests.len();
                    // A batch too short to prefetch must not see the last one's hints.
                    client.prefetched.clear();
                    for i in 0..batch {
                        if i % PREFETCH_BATCH == 0 && batch - i > 1 {
                            commands::prefetch_keys(
                                &shared,
                                &engine,
                                &mut client,
                                (i..batch).map(|j| requests.get(j)),
                            );
                        }
                        let argv = requests.get(i);
                        // CLIENT PAUSE: the command waits, after the replies before it are
                        // written, with no lock held (below, at the top of the next round).
                        if let Some(kind) = shared.client_pause.at(now) {
                            let write = commands::may_write(&client, argv);
                            if write || kind == crate::engine::pause::Paused::All {
                                pause_wait = Some(write);
                                paused = true;
                                break;
                            }
                        }
                        let Some(reply) = engine.dispatch(&shared, &mut client, argv, now) else {
                            // Shut down while this batch changed locks: as above.
                            shut_down_now = true;
                            break;
                        };
                        drain_pushes(&handle, &mut outbuf);
                        if !client.reply_mode.silences() {
                            outbuf.push_reply(&reply, client.proto);
                        } else if matches!(client.action, Some(Action::Wait { .. })) {
                            // WAIT answers later: silenced too.
                            wait_silenced = true;
                        }
                        client.reply_mode = client.reply_mode.after_command();
                        reply.discard();
                        done += 1;
                        if !client.after_reply.is_empty() {
                            outbuf.tail_mut().extend_from_slice(&client.after_reply);
                            client.after_reply.clear();
                        }
                        if client.action.is_some() {
                            break;
                        }
                        if limited {
                            let pending = outbuf.len() + handle.outbox.pending();
                            if handle.output_limit_reached(&class_limit, pending, now / 1000) {
                                handle
                                    .mem
                                    .out_pending
                                    .store(outbuf.len(), Ordering::Relaxed);
                                handle.close_for_output_limit();
                                break;
                            }
                        }
                        if outbuf.len() >= pause {
                            paused = true;
                            break;
                        }
                    }
                    client.cmd_clock = None;
                    // A SUBSCRIBE in this batch moves the client to the pubsub class for its
                    // writes.
                    if engine.engine().pubsub.is_subscriber(handle.id) {
                        class_limit = obuf_limits.pubsub;
                    }
                    // A batch that kept the shared lock tracked nothing; its writes wait in the
                    // write stream (woken for below, once the lock is let go).
                    if let Some(engine) = engine.exclusive_mut().filter(|_| !shut_down_now) {
                        super::replica::notify_fed(&shared, engine);
                        // BCAST invalidations go out once per round, as Redis sends them before
                        // sleeping.
                        engine.pubsub.broadcast_invalidations(&shared);
                    }
                    // Reads too: a read that saw a write not yet on disk waits for it like the
                    // writer (under `appendfsync always`).
                    let aof_upto = crate::persistence::aof::offset(engine.engine());
                    drop(engine);
                    (aof_upto, done, shut_down_now)
                };
                // Shared-path writes entered the replication stream: the replica tasks take the
                // exclusive lock, which moves them into the backlog (`Shared::engine`). Woken
                // after the lock is let go, so none of them wakes only to wait for this batch.
                if std::mem::take(&mut client.fed_replicas) {
                    super::replica::wake_replicas(&shared);
                }
                // The shared path's read lookups, into INFO's totals once a batch.
                if client.keyspace_hits | client.keyspace_misses != 0 {
                    let stats = &shared.stats;
                    let hits = std::mem::take(&mut client.keyspace_hits);
                    let misses = std::mem::take(&mut client.keyspace_misses);
                    stats.keyspace_hits.fetch_add(hits, Ordering::Relaxed);
                    stats.keyspace_misses.fetch_add(misses, Ordering::Relaxed);
                }
                if shut_down_now {
                    requests.clear();
                    close_after = true;
                    break;
                }
                requests.consume(done);
                pipelined = done > 1;
                handle
                    .mem
                    .argv_mem
                    .store(argv_bytes(&requests), Ordering::Relaxed);
                // Group commit: this batch's writes are handed to the AOF writer; under
                // `appendfsync always` its replies wait (asynchronously) for the fsync covering them.
                if let Some(at) = aof_upto {
                    crate::persistence::aof::commit(&shared, at).await;
                }
                if handle.killed.load(Ordering::Relaxed) {
                    break;
                }
            }
            if paused && !requests.is_empty() {
                // Write what is pending first; a protocol error comes after the requests before
                // it, in a later round.
                deferred_error = deferred_error.or(protocol_error);
                break;
            }
            let protocol_error = protocol_error.or(deferred_error.take());
            if let Some(e) = protocol_error {
                // Redis replies with the protocol error, then closes once replies are written.
                // The exact bytes: the unexpected byte in "expected '$', got 'X'" is sent raw.
                let tail = outbuf.tail_mut();
                tail.extend_from_slice(b"-");
                tail.extend_from_slice(&e.text_bytes());
                tail.extend_from_slice(b"\r\n");
                close_after = true;
                break;
            }
            if client.action.is_some() || batch_max == usize::MAX || paused {
                break;
            }
        }
        if inbuf.len() > query_limit {
            tracing::warn!(
                id = handle.id,
                "closing client that exceeded client-query-buffer-limit"
            );
            break;
        }

        // ---- write ---------------------------------------------------------------------------
        drain_pushes(&handle, &mut outbuf);
        if handle.killed.load(Ordering::Relaxed) {
            // Killed (CLIENT KILL, or an output buffer limit) while the batch ran: drop what is
            // pending.
            break;
        }
        let mut read_while_writing = false;
        // The write stopped short, below the bound, to run requests that are waiting.
        let mut partial = false;
        if !outbuf.is_empty() {
            let limited = class_limit != OutputLimit::NONE;
            handle
                .mem
                .out_pending
                .store(outbuf.len(), Ordering::Relaxed);
            handle
                .mem
                .out_capacity
                .store(outbuf.capacity(), Ordering::Relaxed);
            if pipelined && !close_after {
                // A pipelined batch's reply waits for the other connections that are ready in
                // this turn of the event loop (`yield_now` reschedules us after them and after a
                // non-blocking poll of the sockets), so the replies go out back to back, as
                // Redis writes them all before it sleeps. A reply sent alone finds the client
                // asleep and wakes it: an IPI, which in this VM was 14 % of our CPU on a
                // 10-item BF.MEXISTS (perf, cpu-clock: `_raw_spin_unlock_irqrestore` under
                // `sock_def_readable`) against 1.3 % of Redis's. Issue 15, pinned, 50 clients,
                // -P 16, four same-run A/Bs: BF.MADD (10 items) 2.68 -> 2.35, 2.74 -> 2.34 and
                // 2.69 -> 2.41 us of server CPU per request; PING 0.62 -> 0.58, 0.64 -> 0.72,
                // 0.62 -> 0.67 and 0.62 -> 0.59, PFCOUNT and the rest both ways within the
                // ticks' noise; one client: PING 1.33 -> 1.37 (the extra poll), BF.MADD 3.57 ->
                // 3.43. Waiting only after a batch that ran 10 us or more kept less of BF.MADD's
                // gain (2.58) in the one run tried. A single request (-P 1) is answered at once:
                // there the extra poll is a system call per request.
                tokio::task::yield_now().await;
            }
            if !limited {
                // Most writes go out whole at once: then no select (and no timer, no second
                // future on the socket) is needed. What is left takes the loop below.
                match send_now(&stream, outbuf.front()) {
                    Ok(0) => break 'conn,
                    Ok(n) => {
                        sent(&mut outbuf, n, &shared, &handle);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break 'conn,
                }
            }
            while !outbuf.is_empty() {
                // A client that stops reading blocks here. Its requests are still read (not run)
                // up to the query buffer limit, so a client that writes its whole pipeline
                // before reading cannot deadlock with us; the soft limit's clock runs on a timer.
                let can_read = !read_closed && inbuf.len() <= query_limit;
                if can_read && inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
                    inbuf.reserve(READ_CHUNK);
                }
                let deadline = if limited {
                    handle.soft_deadline(&class_limit)
                } else {
                    None
                };
                let sleep_ms = deadline.map_or(u64::MAX, |d| {
                    (d * 1000).saturating_sub(commands::now_ms()).max(1)
                });
                tokio::select! {
                    // One segment at a time: a shared value goes straight from its buffer.
                    r = stream.write_some(outbuf.front()) => match r {
                        Ok(0) | Err(_) => break 'conn,
                        Ok(n) => {
                            handle.last_active_ms.store(commands::now_ms(), Ordering::Relaxed);
                            let left = sent(&mut outbuf, n, &shared, &handle);
                            if limited {
                                let pending = left + handle.outbox.pending();
                                let now_s = commands::now_ms() / 1000;
                                if handle.output_limit_reached(&class_limit, pending, now_s) {
                                    handle.close_for_output_limit();
                                    break 'conn;
                                }
                            }
                            if left > 0
                                && left < pause_at(&class_limit)
                                && (!requests.is_empty() || read_while_writing)
                                && client.action.is_none()
                                && !close_after
                            {
                                // Below the bound with work waiting: run it, appending to what
                                // is left, rather than wait for a slow reader to take it all
                                // (not when the connection closes or hands over after this
                                // write: then all of it goes first).
                                partial = true;
                                break;
                            }
                        }
                    },
                    r = stream.read_some(&mut inbuf), if can_read => match r {
                        Ok(0) | Err(_) => read_closed = true,
                        Ok(n) => {
                            handle.last_active_ms.store(commands::now_ms(), Ordering::Relaxed);
                            read_while_writing = true;
                            shared
                                .stats
                                .net_input_bytes
                                .fetch_add(n as u64, Ordering::Relaxed);
                            publish_input(&handle, &inbuf);
                        }
                    },
                    _ = super::timer::sleep(Duration::from_millis(sleep_ms)), if deadline.is_some() => {
                        let pending = outbuf.len() + handle.outbox.pending();
                        let now_s = commands::now_ms() / 1000;
                        if handle.output_limit_reached(&class_limit, pending, now_s) {
                            handle.close_for_output_limit();
                            break 'conn;
                        }
                    },
                    // A push waits for the next round; a kill ends the write (the shutdown lets
                    // it finish, as before).
                    _ = handle.outbox.ready.wait(&mut attention) => {
                        if handle.killed.load(Ordering::Relaxed) {
                            break 'conn;
                        }
                    },
                }
            }
            if !partial {
                handle.mem.out_pending.store(0, Ordering::Relaxed);
                outbuf.clear();
                if outbuf.capacity() > 4 * 1024 * 1024 {
                    outbuf = OutBuf::with_capacity(READ_CHUNK);
                }
            }
        }
        if inbuf.is_empty() && inbuf.capacity() > 4 * 1024 * 1024 {
            inbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        handle
            .mem
            .out_capacity
            .store(outbuf.capacity(), Ordering::Relaxed);
        publish_input(&handle, &inbuf);
        // Run what is already here before reading again: the rest of a paused batch, or
        // requests that arrived while the write waited.
        resume = !requests.is_empty() || read_while_writing || partial;
        if close_after {
            break;
        }
        match client.action.take() {
            Some(Action::Close) => break,
            Some(Action::Shutdown) => {
                shared.request_shutdown();
                break;
            }
            Some(Action::Replicate { replid, offset }) => {
                requests.clear();
                let rest = std::mem::take(&mut inbuf);
                super::replica::serve(
                    shared.clone(),
                    stream,
                    &client,
                    rest,
                    replid,
                    offset,
                    replica_shutdown,
                )
                .await;
                let mut engine = shared.engine();
                client.unwatch_all(&mut engine.store);
                drop(engine);
                shared.clients().remove(&handle.id);
                return;
            }
            Some(Action::Wait {
                numreplicas,
                timeout_ms,
                offset,
            }) => {
                handle.blocked.store(true, Ordering::Relaxed);
                let n =
                    super::replica::wait_acks(&shared, &handle, numreplicas, timeout_ms, offset)
                        .await;
                handle.blocked.store(false, Ordering::Relaxed);
                handle
                    .last_active_ms
                    .store(commands::now_ms(), Ordering::Relaxed);
                if !std::mem::take(&mut wait_silenced) {
                    crate::protocol::Reply::Int(n as i64).encode(client.proto, outbuf.tail_mut());
                }
                if write_out(&mut stream, &mut outbuf).await.is_err() {
                    break;
                }
                outbuf.clear();
                resume = true;
            }
            None => {}
        }
    }

    if handle.obuf_closed.load(Ordering::Relaxed) {
        let line = {
            let engine = shared.engine();
            commands::client::info_string(&engine.pubsub, &handle)
        };
        tracing::warn!(
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
    }
    let _ = stream.shutdown().await;
    {
        let mut engine = shared.engine();
        client.unwatch_all(&mut engine.store);
        engine.pubsub.remove_client(handle.id);
    }
    shared.clients().remove(&handle.id);
}

/// Moves waiting pushes into the output. Checked (one atomic load, inlined) after every reply;
/// the lock is only taken when something is there.
#[inline(always)]
fn drain_pushes(handle: &ClientHandle, outbuf: &mut OutBuf) {
    if handle.outbox.pending() > 0 {
        handle.outbox.drain_into(outbuf.tail_mut());
    }
}

/// True when the connection must end now: CLIENT KILL (or an output limit) closed it, or the server
/// is shutting down.
fn stopping(handle: &ClientHandle, shutdown: &tokio::sync::watch::Receiver<bool>) -> bool {
    handle.killed.load(Ordering::Relaxed) || shutdown.has_changed().unwrap_or(true)
}

/// Reads what the socket has into `inbuf`'s spare capacity (the caller keeps some): `Ok(0)` when
/// the peer closed its side. `AsyncReadExt::read_buf` without its future.
///
/// tokio's `poll_read` with the system call made directly, for the reason [`send_now`] gives
/// (std's `read` is glibc's `recv`, a cancellation point). The readiness bookkeeping stays
/// tokio's: `poll_read_ready` (the task's budget, the waker), then `try_io`, which clears the
/// readiness it saw when the read would block. A short read clears it too, as tokio's own
/// `poll_read` does on epoll (the socket is drained: edge-triggered, the next bytes bring a
/// new event), so the next round waits instead of trying a `recv` that would only say EAGAIN;
/// `try_io` clears on a `WouldBlock` from its closure, so a short read is reported to it as one
/// and its byte count kept aside. Either way it clears only the readiness it saw before the
/// `recv` (tokio's tick check), so an event that another worker's driver records meanwhile is
/// kept, as in tokio's `poll_read`.
fn poll_read_into(
    stream: &mut ClientStream,
    inbuf: &mut BytesMut,
    cx: &mut Context<'_>,
) -> Poll<std::io::Result<usize>> {
    loop {
        if let Err(e) = std::task::ready!(stream.poll_read_ready(cx)) {
            return Poll::Ready(Err(e));
        }
        let spare = inbuf.spare_capacity_mut();
        let (at, room) = (spare.as_mut_ptr(), spare.len());
        let mut short = None;
        let read = stream.try_io(Interest::READABLE, || {
            // SAFETY: `recvfrom` writes at most `room` bytes starting at `at`, which is `inbuf`'s
            // spare capacity: allocated and writable, and not otherwise borrowed meanwhile. It
            // writes no other memory of ours (no address is asked for). The descriptor is
            // `stream`'s socket, open while `stream` is borrowed. Every argument is passed as a
            // full register, as `syscall` reads `long`s.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_recvfrom,
                    libc::c_long::from(stream.as_raw_fd()),
                    at,
                    room,
                    0 as libc::c_long,
                    std::ptr::null_mut::<libc::sockaddr>(),
                    std::ptr::null_mut::<libc::socklen_t>(),
                )
            };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let n = n as usize;
            if 0 < n && n < room {
                short = Some(n);
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        let n = match (read, short) {
            (_, Some(n)) => n,
            (Ok(n), None) => n,
            (Err(e), None) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            (Err(e), None) => return Poll::Ready(Err(e)),
        };
        // SAFETY: the kernel wrote the first `n` (≤ `room`) bytes of `inbuf`'s spare capacity,
        // so extending `inbuf`'s length by `n` exposes only initialised bytes within its capacity.
        unsafe { inbuf.set_len(inbuf.len() + n) };
        return Poll::Ready(Ok(n));
    }
}

/// A `send` on the socket as it is, for the write that nearly always goes out whole at once.
///
/// Not `TcpStream::try_write`: that goes through tokio's generic readiness check and std's
/// `write`, whose glibc `send` is a cancellation point; in a process with threads every such
/// call enables and disables asynchronous cancellation around the system call (no thread of
/// this server is ever cancelled). Together ~65 userspace instructions of a `-P 1` request
/// (callgrind, issue 15). tokio's readiness flag is only a cache of what the socket said last:
/// a non-blocking `send` is always safe to try, and when it would block (`WouldBlock`) the
/// caller's `write` future asks the socket again, sees the same, clears the flag and waits, as
/// after a `try_write` that would block.
fn send_now(stream: &ClientStream, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `sendto` reads at most `buf.len()` bytes from `buf.as_ptr()`, which `buf` keeps
    // valid for the call, and writes no memory of ours (no address is passed). The descriptor
    // is `stream`'s socket, open while `stream` is borrowed. Every argument is passed as a full
    // register, as `syscall` reads `long`s. MSG_NOSIGNAL as std's `write`: a closed peer is an
    // EPIPE error, not a SIGPIPE. MSG_DONTWAIT is implied by the socket being non-blocking.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(stream.as_raw_fd()),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Writes everything pending, segment by segment.
async fn write_out(stream: &mut ClientStream, out: &mut OutBuf) -> std::io::Result<()> {
    while !out.is_empty() {
        let n = stream.write(out.front()).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        out.advance(n);
    }
    Ok(())
}

/// True when a round without a read still has work: queued requests or unparsed input.
fn resumed_round(requests: &Batch, inbuf: &BytesMut) -> bool {
    !requests.is_empty() || !inbuf.is_empty()
}

/// The parsed requests of a round not yet executed: every argument in one flat vector, and where
/// each request ends. Both vectors keep their capacity, so a round allocates nothing for them.
#[derive(Default)]
struct Batch {
    args: Vec<Bytes>,
    /// `ends[i]`: one past request i's last argument in `args`.
    ends: Vec<usize>,
    /// Requests before this one have run (a paused batch, a WAIT or a replica hand-over stops a
    /// round early).
    next: usize,
}

impl Batch {
    /// Requests parsed and not yet run.
    fn len(&self) -> usize {
        self.ends.len() - self.next
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The i-th request not yet run.
    fn get(&self, i: usize) -> &[Bytes] {
        let i = self.next + i;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.args[start..self.ends[i]]
    }

    /// The arguments of every request not yet run.
    fn pending_args(&self) -> &[Bytes] {
        let start = if self.next == 0 {
            0
        } else {
            self.ends[self.next - 1]
        };
        &self.args[start..]
    }

    /// Marks the first `done` requests as run; drops the arguments once all have run.
    fn consume(&mut self, done: usize) {
        self.next += done;
        if self.next >= self.ends.len() {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.args.clear();
        self.ends.clear();
        self.next = 0;
    }
}
