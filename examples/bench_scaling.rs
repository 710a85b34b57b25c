//! In-process scaling bench (issue 15): N threads execute pre-parsed, pipelined batches against one
//! engine, with no sockets, and report the throughput and the time spent under the keyspace lock.
//!
//! ```text
//! cargo run --release --example bench_scaling -- [ops_per_thread] [threads,...] [batch] [COMMAND]
//! ```
//!
//! Each thread is one client (its own `ClientState`) with its own keys, so the only thing threads
//! share is the `RwLock<Engine>` — exactly what the connection loop shares. A batch is taken the
//! way `server::connection` takes one (`commands::shared_path::EngineLock`): lock once, dispatch
//! and encode every request, unlock. Every command runs twice per thread count: with the exclusive
//! lock forced (the design before the shared path), and as the server runs it (`shared` when the
//! command has a shared-lock path, see `commands::shared_path`). A third run gives each thread an
//! engine of its own (`partitioned`): the keyspace split by client with nothing shared, the upper
//! bound of any keyspace sharded by key hash (and of thread-per-core) for commands on distinct
//! keys. Between it and `exclusive` lies what sharding the writes could gain on this machine
//! (the plan in `src/server/mod.rs`).
//! Printed per command, lock and thread count:
//! - ops/s of all threads together (wall clock);
//! - ns under the lock per command (lock held, measured per batch around dispatch + encode, divided
//!   by the batch size): under the exclusive lock the serial part — one lock can never exceed
//!   1e9 / this many commands per second, however many cores (the last column); under the shared
//!   lock it is not serial;
//! - ns waiting for the lock per command (contention).
//!
//! Defaults: 200k ops per thread, threads 1,2, batch 16 (redis-benchmark -P 16).
//!
//! `BENCH_PREFETCH=1` prefetches each batch's keys first, as the connection loop does
//! (`commands::prefetch_keys`); `BENCH_SHARED_INSERTS=0` keeps new keys on the exclusive path, as
//! a single-threaded server does (`store::db::Store::shared_inserts`).
//!
//! `BENCH_MAXMEMORY=<bytes>` sets `maxmemory` on every engine (far above what the bench uses):
//! what the limit's check before every deny-oom write costs, and that writes stay shared.
//!
//! `BENCH_STREAM=1` gives every engine a consumer of its write stream, drained every millisecond
//! under the shared lock as the AOF writer drains it (`persistence::aof`): what the AOF costs
//! writes, the stream's mutex included.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hyperbloom::commands::shared_path::EngineLock;
use hyperbloom::commands::{self, ClientState};
use hyperbloom::config::Config;
use hyperbloom::engine::{ClientHandle, Shared};

// The server's allocator (`src/main.rs`), so that what allocating costs across cores is the server's.
#[global_allocator]
static ALLOC: hyperbloom::engine::alloc::CountingAlloc = hyperbloom::engine::alloc::CountingAlloc;

type Gen = fn(t: usize, i: usize) -> Vec<String>;

const TESTS: &[(&str, Gen)] = &[
    ("PING", |_, _| vec!["PING".into()]),
    // Overwrites keys that exist (the shared path writes them in place).
    ("SET", |t, i| {
        vec![
            "SET".into(),
            format!("key:{t}:{}", i % 100_000),
            "yyy".into(),
        ]
    }),
    // A new key per request (added under the shared lock, `KeyTable::insert_shared`).
    ("SET-new", |t, i| {
        vec!["SET".into(), format!("new:{t}:{i}"), "xxx".into()]
    }),
    // A key that comes and goes: SET of a new key, then its DEL (both under the shared lock).
    ("DEL-new", |t, i| {
        let key = format!("tmp:{t}:{}", i / 2);
        if i % 2 == 0 {
            vec!["SET".into(), key, "xxx".into()]
        } else {
            vec!["DEL".into(), key]
        }
    }),
    // Overwrites keys that exist with a TTL each time (the first pass sets it, later ones
    // replace it), as a cache refreshes its entries.
    ("SET-EX", |t, i| {
        vec![
            "SET".into(),
            format!("key:{t}:{}", i % 100_000),
            "yyy".into(),
            "EX".into(),
            "1000".into(),
        ]
    }),
    // A new key with a TTL per request, as a cache fills.
    ("SET-EX-new", |t, i| {
        vec![
            "SET".into(),
            format!("newex:{t}:{i}"),
            "xxx".into(),
            "EX".into(),
            "1000".into(),
        ]
    }),
    // A TTL set again and again on keys that exist (under the shared lock: PEXPIREAT in the
    // stream, the key's stripe's expiry set).
    ("EXPIRE", |t, i| {
        vec![
            "EXPIRE".into(),
            format!("key:{t}:{}", i % 100_000),
            (1000 + i % 1000).to_string(),
        ]
    }),
    // A key with a TTL that comes and goes: SETEX of a new key, then its DEL.
    ("DEL-EX-new", |t, i| {
        let key = format!("tmpex:{t}:{}", i / 2);
        if i % 2 == 0 {
            vec!["SETEX".into(), key, "1000".into(), "xxx".into()]
        } else {
            vec!["DEL".into(), key]
        }
    }),
    // Ten keys that exist per request (their stripes all held, `commands::strings`'s
    // `mset_shared`).
    ("MSET", |t, i| {
        let mut argv = vec!["MSET".to_string()];
        for j in 0..10 {
            argv.push(format!("key:{t}:{}", (i * 10 + j) % 100_000));
            argv.push("yyy".into());
        }
        argv
    }),
    // Ten new keys per request.
    ("MSET-new", |t, i| {
        let mut argv = vec!["MSET".to_string()];
        for j in 0..10 {
            argv.push(format!("newm:{t}:{}", i * 10 + j));
            argv.push("xxx".into());
        }
        argv
    }),
    ("GET", |t, i| {
        vec!["GET".into(), format!("key:{t}:{}", i % 100_000)]
    }),
    ("INCR", |t, i| {
        vec!["INCR".into(), format!("ctr:{t}:{}", i % 1000)]
    }),
    // A new counter per request.
    ("INCR-new", |t, i| {
        vec!["INCR".into(), format!("newctr:{t}:{i}")]
    }),
    ("BF.ADD", |t, i| {
        vec!["BF.ADD".into(), format!("bf:{t}"), i.to_string()]
    }),
    // A new filter per request (the bf-* defaults: 100 items at 1 %).
    ("BF.ADD-new", |t, i| {
        vec!["BF.ADD".into(), format!("newbf:{t}:{i}"), "x".into()]
    }),
    // Ten items per request, as issue 15's BF.MADD (the filter has room: the shared path).
    ("BF.MADD", |t, i| {
        let mut argv = vec!["BF.MADD".to_string(), format!("bf:{t}")];
        argv.extend((0..10).map(|j| (i * 10 + j).to_string()));
        argv
    }),
    ("BF.EXISTS", |t, i| {
        vec!["BF.EXISTS".into(), format!("bf:{t}"), i.to_string()]
    }),
    ("CF.ADD", |t, i| {
        vec!["CF.ADD".into(), format!("cf:{t}"), i.to_string()]
    }),
    // A new filter per request (the cf-* defaults: 1024 items).
    ("CF.ADD-new", |t, i| {
        vec!["CF.ADD".into(), format!("newcf:{t}:{i}"), "x".into()]
    }),
    ("CF.EXISTS", |t, i| {
        vec!["CF.EXISTS".into(), format!("cf:{t}"), i.to_string()]
    }),
    ("PFADD", |t, i| {
        vec!["PFADD".into(), format!("hll:{t}"), i.to_string()]
    }),
    // A new HLL per request (sparse, created by PFADD).
    ("PFADD-new", |t, i| {
        vec!["PFADD".into(), format!("newhll:{t}:{i}"), "x".into()]
    }),
    // Per-page distinct counting: 20k small sparse HLLs per thread, created by the first pass
    // and fed by the later ones.
    ("PFADD-pages", |t, i| {
        vec![
            "PFADD".into(),
            format!("page:{t}:{}", i % 20_000),
            format!("visitor:{i}"),
        ]
    }),
    ("PFCOUNT", |t, _| vec!["PFCOUNT".into(), format!("hll:{t}")]),
    // Transactions of reads, as a redis-py pipeline sends them (`transaction=True`, its
    // default): MULTI, 14 reads, EXEC per 16 requests (`commands::shared_path`, "Transactions").
    ("MULTI-BF.EXISTS", |t, i| match i % 16 {
        0 => vec!["MULTI".into()],
        15 => vec!["EXEC".into()],
        _ => vec!["BF.EXISTS".into(), format!("bf:{t}"), i.to_string()],
    }),
    ("MULTI-GET", |t, i| match i % 16 {
        0 => vec!["MULTI".into()],
        15 => vec!["EXEC".into()],
        _ => vec!["GET".into(), format!("key:{t}:{}", i % 100_000)],
    }),
];

fn client(id: u64) -> ClientState {
    let addr: SocketAddr = "127.0.0.1:1".parse().expect("literal address");
    ClientState::new(Arc::new(ClientHandle::new(id, addr, addr)), true)
}

fn run_one(shared: &Arc<Shared>, argv: Vec<Bytes>) {
    let mut c = client(0);
    let mut engine = shared.engine();
    commands::dispatch(shared, &mut engine, &mut c, &argv, commands::now_ms());
}

/// True if the command runs on the shared-lock path (`commands::shared_path`) with batches on
/// more than one thread.
fn has_shared_path(name: &str) -> bool {
    // A transaction of reads: its reads'.
    let name = name.strip_prefix("MULTI-").unwrap_or(name);
    let command = name.split('-').next().unwrap_or(name);
    commands::table()
        .get(command.as_bytes())
        .is_some_and(|(_, spec)| spec.shared_handler(true).is_some())
}

/// How the threads share the keyspace.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One engine, the exclusive lock forced for every batch.
    Exclusive,
    /// One engine, locked as the server locks it (shared for commands with a shared path).
    AsServer,
    /// An engine per thread.
    Partitioned,
}

struct Outcome {
    ops: usize,
    held: Duration,
    waited: Duration,
    /// When this thread ran its last batch.
    finished: Instant,
    /// The thread's requests, handed back to be freed outside the timing.
    reqs: Vec<Vec<Bytes>>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ops: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let threads: Vec<usize> = args
        .next()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2]);
    let batch: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
        .max(1);
    let with_stream = std::env::var("BENCH_STREAM").is_ok_and(|v| v == "1");
    let prefetch = std::env::var("BENCH_PREFETCH").is_ok_and(|v| v == "1");
    let shared_inserts = std::env::var("BENCH_SHARED_INSERTS").map_or(true, |v| v != "0");
    let maxmemory: u64 = std::env::var("BENCH_MAXMEMORY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    println!(
        "in-process, {ops} ops per thread, batch {batch}, {} cores, load average {}{}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split(' ').next().map(str::to_string))
            .unwrap_or_default(),
        if with_stream {
            ", a write-stream consumer drained every ms"
        } else {
            ""
        }
    );
    println!("| command | lock | threads | ops/s | ns under lock / cmd | ns waiting / cmd | max ops/s under one lock |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let only: Option<String> = args.next();
    for (name, gen) in TESTS
        .iter()
        .filter(|(name, _)| only.as_deref().is_none_or(|o| o.eq_ignore_ascii_case(name)))
    {
        for (&n, mode) in threads.iter().flat_map(|n| {
            [
                (n, Mode::Exclusive),
                (n, Mode::AsServer),
                (n, Mode::Partitioned),
            ]
        }) {
            let shared_path = mode == Mode::AsServer;
            // One engine, or one per thread when partitioned.
            let engines: Vec<Arc<Shared>> = (0..if mode == Mode::Partitioned { n } else { 1 })
                .map(|_| Shared::new(Config::default(), commands::table().len()))
                .collect();
            // As the server on a multi-thread runtime: shared-path writes may add keys (unless
            // BENCH_SHARED_INSERTS=0); with more than one thread on an engine, its batches run
            // in parallel, as `server` declares them (the prefetch then holds stripes, and
            // MSET takes its shared handler).
            let parallel = engines.len() < n;
            for shared in &engines {
                let mut engine = shared.engine();
                engine.store.shared_inserts = shared_inserts;
                shared.maxmemory.store(maxmemory, Ordering::Relaxed);
                shared.parallel_batches.store(parallel, Ordering::Relaxed);
            }
            for t in 0..n {
                let shared = &engines[t % engines.len()];
                let words = |w: &[&str]| {
                    w.iter()
                        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                        .collect()
                };
                run_one(
                    shared,
                    words(&["BF.RESERVE", &format!("bf:{t}"), "0.01", "10000000"]),
                );
                run_one(
                    shared,
                    words(&["CF.RESERVE", &format!("cf:{t}"), "4000000"]),
                );
                // GET reads keys that exist, SET overwrites them, the `-new` rows add keys to a
                // table that holds some (keys are added under the shared lock from 32k keys on,
                // `store::keytable::KeyTable::can_insert_shared`).
                if name.ends_with("GET")
                    || *name == "EXPIRE"
                    || name.starts_with("SET")
                    || name.starts_with("MSET")
                    || name.starts_with("PFADD-")
                    || name.ends_with("-new")
                {
                    for i in 0..100_000 {
                        run_one(shared, words(&["SET", &format!("key:{t}:{i}"), "xxx"]));
                    }
                }
            }
            // The AOF's part: a consumer, and a thread draining it as the AOF writer does.
            let stop = Arc::new(AtomicBool::new(false));
            let drainers: Vec<_> = engines
                .iter()
                .filter(|_| with_stream)
                .map(|shared| {
                    let sub = shared.engine().subscribe_stream(0, None);
                    let (shared, stop) = (shared.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let mut buf = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            shared.engine_shared().stream.lock().drain(sub, &mut buf);
                            buf.clear();
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    })
                })
                .collect();
            // Pre-parsed requests, built before the clock starts. Each argument is cloned once
            // here: a `Bytes` made from a `String` allocates its shared header at its first clone
            // (MULTI's queue clones every argument), where the connection's arguments, cut
            // from its read buffer, are shared from the start.
            let work: Vec<Vec<Vec<Bytes>>> = (0..n)
                .map(|t| {
                    (0..ops)
                        .map(|i| {
                            gen(t, i)
                                .into_iter()
                                .map(|s| {
                                    let b = Bytes::from(s);
                                    drop(b.clone());
                                    b
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect();
            let barrier = Arc::new(Barrier::new(n + 1));
            let handles: Vec<_> = work
                .into_iter()
                .enumerate()
                .map(|(t, reqs)| {
                    let shared = engines[t % engines.len()].clone();
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        let mut c = client(t as u64 + 1);
                        let mut out = BytesMut::with_capacity(64 * 1024);
                        let mut held = Duration::ZERO;
                        let mut waited = Duration::ZERO;
                        barrier.wait();
                        for chunk in reqs.chunks(batch) {
                            let t0 = Instant::now();
                            let mut engine = if shared_path {
                                EngineLock::for_batch(&shared, &chunk[0], &mut c)
                            } else {
                                EngineLock::exclusive_from_start(&shared)
                            };
                            let t1 = Instant::now();
                            if prefetch {
                                commands::prefetch_keys(
                                    &shared,
                                    &engine,
                                    &mut c,
                                    chunk.iter().map(|a| &a[..]),
                                );
                            }
                            let now = commands::now_ms();
                            for argv in chunk {
                                let reply = engine
                                    .dispatch(&shared, &mut c, argv, now)
                                    .expect("no shutdown in the bench");
                                reply.encode(2, &mut out);
                            }
                            let t2 = Instant::now();
                            drop(engine);
                            held += t2 - t1;
                            waited += t1 - t0;
                            if out.len() > 32 * 1024 {
                                out.clear();
                            }
                        }
                        let finished = Instant::now();
                        // The requests are freed after the clock stops: they were allocated by
                        // the main thread, and freeing 200k of them here (cross-thread frees into
                        // one malloc arena) cost as long as running them, and did not scale.
                        Outcome {
                            ops: reqs.len(),
                            held,
                            waited,
                            finished,
                            reqs,
                        }
                    })
                })
                .collect();
            barrier.wait();
            let started = Instant::now();
            let outcomes: Vec<Outcome> = handles
                .into_iter()
                .map(|h| h.join().expect("bench thread"))
                .collect();
            stop.store(true, Ordering::Relaxed);
            for d in drainers {
                d.join().expect("drainer");
            }
            let wall = outcomes
                .iter()
                .map(|o| o.finished - started)
                .max()
                .unwrap_or_default()
                .as_secs_f64();
            let total: usize = outcomes.iter().map(|o| o.ops).sum();
            let held: f64 =
                outcomes.iter().map(|o| o.held.as_secs_f64()).sum::<f64>() * 1e9 / total as f64;
            let waited: f64 =
                outcomes.iter().map(|o| o.waited.as_secs_f64()).sum::<f64>() * 1e9 / total as f64;
            // Under the shared lock the time held is not serial: no ceiling to print.
            let (lock, ceiling) = match (mode, *name) {
                (Mode::AsServer, n) if has_shared_path(n) => ("shared", "-".to_string()),
                (Mode::AsServer, _) => ("exclusive (no shared path)", format!("{:.0}", 1e9 / held)),
                (Mode::Exclusive, _) => ("exclusive", format!("{:.0}", 1e9 / held)),
                // A lock per thread: nothing serial between threads.
                (Mode::Partitioned, _) => ("partitioned", "-".to_string()),
            };
            println!(
                "| {name} | {lock} | {n} | {:.0} | {held:.0} | {waited:.0} | {ceiling} |",
                total as f64 / wall,
            );
            drop(outcomes.into_iter().map(|o| o.reqs).collect::<Vec<_>>());
        }
    }
}
