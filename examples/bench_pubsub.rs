//! Pub/sub load generator for scripts/bench-pubsub.sh (issue 14): measures one server (hyperbloom or
//! redis-server) over TCP.
//!
//! ```text
//! cargo run --release --example bench_pubsub -- throughput <port> <subscribers> <messages>
//! cargo run --release --example bench_pubsub -- latency <port> <subscribers> <messages> <gap_us>
//! ```
//!
//! - `throughput`: N subscribers on one channel; one publisher pipelines `messages` PUBLISH
//!   commands (64 in flight) as fast as the server answers. Printed: `publish/s` (PUBLISH replies
//!   per second, which is what the publisher sees) and `delivered/s` (messages received by all
//!   subscribers per second, measured until the last subscriber has them all).
//! - `latency`: N subscribers; one publisher sends one PUBLISH every `gap_us` microseconds, its
//!   payload the send time. Each subscriber records receive time - send time for every message.
//!   Printed: p50, p99, p99.9 and max over all (message, subscriber) pairs, in microseconds.
//!
//! Each subscriber is its own tokio task on a 2-worker runtime, reading with a 64 KiB buffer, as a
//! typical client library does. Output is one line of `key=value` pairs for the script to parse.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// The exact frame a RESP2 subscriber receives for a `payload` on `channel`.
fn message_frame(channel: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut v = b"*3\r\n$7\r\nmessage\r\n".to_vec();
    v.extend_from_slice(format!("${}\r\n", channel.len()).as_bytes());
    v.extend_from_slice(channel);
    v.extend_from_slice(format!("\r\n${}\r\n", payload.len()).as_bytes());
    v.extend_from_slice(payload);
    v.extend_from_slice(b"\r\n");
    v
}

async fn subscriber(port: u16, ready: Arc<AtomicU64>) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.set_nodelay(true).ok();
    s.write_all(&command(&[b"SUBSCRIBE", b"bench"]))
        .await
        .expect("subscribe");
    let confirm = b"*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n";
    let mut got = vec![0u8; confirm.len()];
    s.read_exact(&mut got).await.expect("confirmation");
    assert_eq!(&got[..], confirm);
    ready.fetch_add(1, Ordering::SeqCst);
    s
}

/// Waits until the server counts `n` subscribers on the channel (PUBSUB NUMSUB).
async fn wait_numsub(p: &mut TcpStream, n: usize) {
    let want = format!("*2\r\n$5\r\nbench\r\n:{n}\r\n");
    loop {
        p.write_all(&command(&[b"PUBSUB", b"NUMSUB", b"bench"]))
            .await
            .unwrap();
        let mut buf = vec![0u8; 64];
        let k = p.read(&mut buf).await.unwrap();
        if &buf[..k] == want.as_bytes() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn throughput(port: u16, subs: usize, messages: usize) {
    let payload = [b'x'; 32];
    let frame = message_frame(b"bench", &payload);
    let ready = Arc::new(AtomicU64::new(0));
    let mut streams = Vec::new();
    for _ in 0..subs {
        streams.push(subscriber(port, ready.clone()).await);
    }
    let total = (frame.len() * messages) as u64;
    let mut readers = Vec::new();
    for mut s in streams {
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut n = 0u64;
            while n < total {
                let k = s.read(&mut buf).await.expect("read");
                assert!(k > 0, "subscriber closed");
                n += k as u64;
            }
            Instant::now()
        }));
    }
    let mut p = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    p.set_nodelay(true).ok();
    wait_numsub(&mut p, subs).await;
    let one = command(&[b"PUBLISH", b"bench", &payload]);
    let reply = format!(":{subs}\r\n");
    let start = Instant::now();
    let (mut rd, mut wr) = p.into_split();
    let window = 64usize;
    let sender = tokio::spawn(async move {
        let mut batch = Vec::new();
        let mut sent = 0;
        while sent < messages {
            let n = window.min(messages - sent);
            batch.clear();
            for _ in 0..n {
                batch.extend_from_slice(&one);
            }
            wr.write_all(&batch).await.unwrap();
            sent += n;
        }
        wr
    });
    let want = (reply.len() * messages) as u64;
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    while got < want {
        let k = rd.read(&mut buf).await.unwrap();
        assert!(k > 0);
        got += k as u64;
    }
    let published = start.elapsed();
    let _wr = sender.await.unwrap();
    let mut last = start;
    for r in readers {
        last = last.max(r.await.unwrap());
    }
    let delivered = last - start;
    println!(
        "mode=throughput subs={subs} messages={messages} publish_per_s={:.0} delivered_per_s={:.0}",
        messages as f64 / published.as_secs_f64(),
        (messages * subs) as f64 / delivered.as_secs_f64()
    );
}

async fn latency(port: u16, subs: usize, messages: usize, gap_us: u64) {
    let epoch = Instant::now();
    let ready = Arc::new(AtomicU64::new(0));
    let mut streams = Vec::new();
    for _ in 0..subs {
        streams.push(subscriber(port, ready.clone()).await);
    }
    // Payload: 20 digits of nanoseconds since `epoch`, so every frame has the same length.
    let frame_len = message_frame(b"bench", &[b'0'; 20]).len();
    let head = frame_len - 22;
    let mut readers = Vec::new();
    for mut s in streams {
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut pending: Vec<u8> = Vec::new();
            let mut lat = Vec::with_capacity(messages);
            while lat.len() < messages {
                let k = s.read(&mut buf).await.expect("read");
                assert!(k > 0, "subscriber closed");
                let now = epoch.elapsed().as_nanos() as u64;
                pending.extend_from_slice(&buf[..k]);
                let whole = pending.len() / frame_len * frame_len;
                for f in pending[..whole].chunks(frame_len) {
                    let sent: u64 = std::str::from_utf8(&f[head..head + 20])
                        .unwrap()
                        .parse()
                        .unwrap();
                    lat.push(now.saturating_sub(sent) / 1000);
                }
                pending.drain(..whole);
            }
            lat
        }));
    }
    let mut p = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    p.set_nodelay(true).ok();
    wait_numsub(&mut p, subs).await;
    let (mut rd, mut wr) = p.into_split();
    let drain = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while rd.read(&mut buf).await.map(|k| k > 0).unwrap_or(false) {}
    });
    let mut tick = tokio::time::interval(Duration::from_micros(gap_us.max(1)));
    for _ in 0..messages {
        tick.tick().await;
        let ts = format!("{:020}", epoch.elapsed().as_nanos() as u64);
        wr.write_all(&command(&[b"PUBLISH", b"bench", ts.as_bytes()]))
            .await
            .unwrap();
    }
    let mut all = Vec::new();
    for r in readers {
        all.extend(r.await.unwrap());
    }
    drop(wr);
    drain.abort();
    all.sort_unstable();
    let q = |f: f64| all[((all.len() as f64 * f) as usize).min(all.len() - 1)];
    println!(
        "mode=latency subs={subs} messages={messages} gap_us={gap_us} p50_us={} p99_us={} p999_us={} max_us={}",
        q(0.50),
        q(0.99),
        q(0.999),
        all[all.len() - 1]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: bench_pubsub throughput|latency <port> <subscribers> <messages> [gap_us]";
    if args.len() < 5 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let port: u16 = args[2].parse().expect("port");
    let subs: usize = args[3].parse().expect("subscribers");
    let messages: usize = args[4].parse().expect("messages");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match args[1].as_str() {
        "throughput" => rt.block_on(throughput(port, subs, messages)),
        "latency" => {
            let gap: u64 = args.get(5).and_then(|g| g.parse().ok()).unwrap_or(1000);
            rt.block_on(latency(port, subs, messages, gap))
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
