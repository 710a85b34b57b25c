//! One client connection: read, parse every complete request, execute the batch under one keyspace
//! lock, write all replies with one write.
//!
//! Batching is what makes pipelines fast: a `-P 16` client sends 16 requests in one segment, they
//! are decoded together, executed with a single lock acquisition and answered with a single write.
//! Before a client has authenticated, requests run one at a time so that the smaller
//! unauthenticated protocol limits apply exactly until AUTH succeeds, as in Redis.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::{self, Action, ClientState};
use crate::engine::{ClientHandle, Shared};
use crate::protocol::parser::{ParserLimits, RequestParser};

const READ_CHUNK: usize = 16 * 1024;

/// Serves one client until it quits, errs, is killed, times out or the server stops.
pub async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    handle: Arc<ClientHandle>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let needs_auth = shared.config().requirepass.is_some();
    let mut client = ClientState::new(handle.clone(), !needs_auth);
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut outbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut requests: Vec<Vec<Bytes>> = Vec::new();
    let mut resume = false;
    // Config values read per request, cached until a CONFIG SET moves the generation.
    let mut config_gen = u64::MAX;
    let (mut idle_timeout, mut max_bulk_len, mut query_limit) = (0u64, 0usize, 0usize);

    'conn: loop {
        // ---- read --------------------------------------------------------------------------
        let gen = shared.config_gen.load(Ordering::Acquire);
        if gen != config_gen {
            let c = shared.config();
            (idle_timeout, max_bulk_len, query_limit) =
                (c.timeout, c.proto_max_bulk_len, c.client_query_buffer_limit);
            config_gen = gen;
        }
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        // After a WAIT, the rest of the pipeline is already here: run it before reading more.
        let resuming = std::mem::take(&mut resume) && resumed_round(&requests, &inbuf);
        let n = if resuming {
            Ok(Some(usize::MAX))
        } else {
            let read = async {
                if idle_timeout > 0 {
                    match tokio::time::timeout(
                        Duration::from_secs(idle_timeout),
                        stream.read_buf(&mut inbuf),
                    )
                    .await
                    {
                        Ok(r) => r.map(Some),
                        Err(_) => Ok(None),
                    }
                } else {
                    stream.read_buf(&mut inbuf).await.map(Some)
                }
            };
            tokio::select! {
                r = read => r,
                // Pub/sub messages and other pushes: write them without waiting for a request.
                _ = handle.outbox.ready.notified() => Ok(Some(usize::MAX)),
                _ = handle.kill.notified() => break 'conn,
                _ = shutdown.changed() => break 'conn,
            }
        };
        match n {
            Ok(Some(usize::MAX)) => {}
            Ok(Some(0)) | Err(_) => break,
            Ok(None) => {
                tracing::debug!(id = handle.id, "closing idle client");
                break;
            }
            Ok(Some(n)) => {
                shared
                    .stats
                    .net_input_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        if handle.killed.load(Ordering::Relaxed) {
            break;
        }

        // ---- parse and execute --------------------------------------------------------------
        let mut close_after = false;
        loop {
            let limits = ParserLimits {
                max_bulk_len,
                authenticated: client.authenticated,
            };
            let mut protocol_error = None;
            // Unauthenticated clients take one request per round so AUTH lifts the limits in time.
            let batch_max = if client.authenticated { usize::MAX } else { 1 };
            while requests.len() < batch_max {
                match parser.next_request(&mut inbuf, &limits) {
                    Ok(Some(argv)) => requests.push(argv),
                    Ok(None) => break,
                    Err(e) => {
                        protocol_error = Some(e);
                        break;
                    }
                }
            }
            if requests.is_empty() && protocol_error.is_none() {
                break;
            }
            if !requests.is_empty() {
                let now = commands::now_ms();
                handle.last_active_ms.store(now, Ordering::Relaxed);
                // A block, so the keyspace guard is provably gone before the commit's await.
                let (aof_upto, done) = {
                    let mut engine = shared.engine();
                    if engine.shut_down {
                        // The final snapshot is taken: run nothing more, answer nothing more.
                        drop(engine);
                        requests.clear();
                        close_after = true;
                        break;
                    }
                    // Pushes published before this batch go out before its replies; pushes a command
                    // sends to this very client go out before that command's reply, as in Redis.
                    handle.outbox.drain_into(&mut outbuf);
                    let mut done = 0;
                    for argv in requests.iter() {
                        let reply =
                            commands::dispatch(&shared, &mut engine, &mut client, argv, now);
                        handle.outbox.drain_into(&mut outbuf);
                        reply.encode(client.proto, &mut outbuf);
                        done += 1;
                        if !client.after_reply.is_empty() {
                            outbuf.extend_from_slice(&client.after_reply);
                            client.after_reply.clear();
                        }
                        if client.action.is_some() {
                            break;
                        }
                    }
                    super::replica::notify_fed(&shared, &mut engine);
                    let aof_upto = crate::persistence::aof::offset(&engine);
                    drop(engine);
                    (aof_upto, done)
                };
                requests.drain(..done);
                // Group commit: this batch's writes are handed to the AOF writer; under
                // `appendfsync always` its replies wait (asynchronously) for the fsync covering them.
                if let Some(at) = aof_upto {
                    crate::persistence::aof::commit(&shared, at).await;
                }
            }
            if let Some(e) = protocol_error {
                // Redis replies with the protocol error, then closes once replies are written.
                // The exact bytes: the unexpected byte in "expected '$', got 'X'" is sent raw.
                outbuf.extend_from_slice(b"-");
                outbuf.extend_from_slice(&e.text_bytes());
                outbuf.extend_from_slice(b"\r\n");
                close_after = true;
                break;
            }
            if client.action.is_some() || batch_max == usize::MAX {
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
        handle.outbox.drain_into(&mut outbuf);
        if handle.killed.load(Ordering::Relaxed) {
            // Killed by an output buffer limit while the batch ran: drop what is pending.
            break;
        }
        if !outbuf.is_empty() {
            shared
                .stats
                .net_output_bytes
                .fetch_add(outbuf.len() as u64, Ordering::Relaxed);
            // A subscriber that stops reading blocks here; an output buffer limit then kills it.
            let written = tokio::select! {
                r = stream.write_all(&outbuf) => r.is_ok(),
                _ = handle.kill.notified() => false,
            };
            if !written {
                break;
            }
            outbuf.clear();
            if outbuf.capacity() > 4 * 1024 * 1024 {
                outbuf = BytesMut::with_capacity(READ_CHUNK);
            }
        }
        if inbuf.is_empty() && inbuf.capacity() > 4 * 1024 * 1024 {
            inbuf = BytesMut::with_capacity(READ_CHUNK);
        }
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
                    shutdown,
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
                let n =
                    super::replica::wait_acks(&shared, &handle, numreplicas, timeout_ms, offset)
                        .await;
                crate::protocol::Reply::Int(n as i64).encode(client.proto, &mut outbuf);
                if stream.write_all(&outbuf).await.is_err() {
                    break;
                }
                outbuf.clear();
                resume = true;
            }
            None => {}
        }
    }

    let _ = stream.shutdown().await;
    {
        let mut engine = shared.engine();
        client.unwatch_all(&mut engine.store);
        engine.pubsub.remove_client(handle.id);
    }
    shared.clients().remove(&handle.id);
}

/// True when a round without a read still has work: queued requests or unparsed input.
fn resumed_round(requests: &[Vec<Bytes>], inbuf: &BytesMut) -> bool {
    !requests.is_empty() || !inbuf.is_empty()
}
