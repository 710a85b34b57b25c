//! Differential test of the PF* commands against a real `redis-server` (the Debian package).
//!
//! Random workloads run on both servers side by side: PFADD batches of 1 to 100 000 binary
//! elements (up to about 200 000 per key), single- and multi-key PFCOUNT (missing and repeated keys
//! included), PFMERGE of sparse and dense keys into new and existing keys (with no sources too),
//! `CONFIG SET hll-sparse-max-bytes` changes, PFDEBUG TODENSE/GETREG/DECODE, DEL, damage by
//! SETRANGE (as Redis's fuzz test does), APPEND and SET, and WATCH/EXEC around PF commands (which
//! of them count as modifying the key). Every reply is compared byte for byte, and after every
//! step the `GET` bytes of every key. Any difference fails the test with the workload seed and step.
//!
//! It needs `redis-server` installed (scripts/test.sh installs it) and fails without it.
//! `HLL_DIFF_SEEDS=N` (default 20) and `HLL_DIFF_FIRST_SEED=S` (default 1) run longer soaks.

mod common;

use std::time::Instant;

use common::{start_server, RawConn};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

const KEYS: &[&[u8]] = &[
    b"h0", b"h1", b"h2", b"h3", b"h4", b"h5{x}", b"h\r\n6", b"missing",
];

/// Binary elements: lengths 0..24 with every byte value (NUL, CR, LF included).
fn element(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => 0,
        1..=6 => 1 + rng.below(12) as usize,
        _ => 8 + rng.below(17) as usize,
    };
    let mut e = Vec::with_capacity(len);
    let mut w = rng.next();
    for i in 0..len {
        if i % 8 == 0 {
            w = rng.next();
        }
        e.push((w >> (8 * (i % 8))) as u8);
    }
    e
}

struct Pair {
    ours: RawConn,
    redis: RawConn,
    steps: usize,
    compared: usize,
    /// Replies that were INVALIDOBJ (damaged values caught) and dense values seen by GET.
    corrupt: usize,
    dense: usize,
}

impl Pair {
    /// Sends one command to both servers; their replies must be identical.
    fn cmd(&mut self, seed: u64, what: &str, argv: &[&[u8]]) -> Vec<u8> {
        let a = self.ours.cmd(argv);
        let b = self.redis.cmd(argv);
        self.compared += 1;
        self.corrupt += a.starts_with(b"-INVALIDOBJ") as usize;
        self.dense += (a.starts_with(b"$12304\r\n") && argv[0] == b"GET") as usize;
        assert!(
            a == b,
            "seed {seed} step {}: {what} ({} args) replies differ\n  hyperbloom: {:?}\n  redis:      {:?}",
            self.steps,
            argv.len(),
            String::from_utf8_lossy(&a[..a.len().min(200)]),
            String::from_utf8_lossy(&b[..b.len().min(200)]),
        );
        a
    }

    /// Every key's bytes must match, and its OBJECT ENCODING (PF commands make strings `raw`
    /// exactly when Redis unshares them).
    fn check_keys(&mut self, seed: u64) {
        for k in KEYS {
            self.cmd(
                seed,
                &format!("GET {}", String::from_utf8_lossy(k)),
                &[b"GET", k],
            );
            self.cmd(seed, "OBJECT ENCODING", &[b"OBJECT", b"ENCODING", k]);
        }
    }
}

/// The payload of a RESP bulk reply.
fn bulk(reply: &[u8]) -> Option<Vec<u8>> {
    let end = reply.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(reply.get(1..end)?).ok()?.parse().ok()?;
    reply.get(end + 2..end + 2 + n).map(|b| b.to_vec())
}

fn workload(pair: &mut Pair, seed: u64, steps: usize) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut added = vec![0usize; KEYS.len()];
    pair.cmd(seed, "FLUSHALL", &[b"FLUSHALL"]);
    pair.cmd(
        seed,
        "CONFIG SET",
        &[b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"3000"],
    );
    for _ in 0..steps {
        pair.steps += 1;
        let ki = rng.below(KEYS.len() as u64) as usize;
        let key = KEYS[ki];
        match rng.below(100) {
            0..=44 => {
                // Mostly small batches (the sparse paths), sometimes large ones (promotion, dense).
                let n = match rng.below(20) {
                    0..=7 => 1 + rng.below(4) as usize,
                    8..=12 => 5 + rng.below(60) as usize,
                    13..=15 => 100 + rng.below(900) as usize,
                    16..=17 => 1000 + rng.below(9000) as usize,
                    18 => 10_000 + rng.below(40_000) as usize,
                    _ => 100_000,
                };
                if added[ki] + n > 200_000 {
                    pair.cmd(seed, "DEL", &[b"DEL", key]);
                    added[ki] = 0;
                }
                added[ki] += n;
                // Repeats make some elements change nothing.
                let elems: Vec<Vec<u8>> = (0..n).map(|_| element(&mut rng)).collect();
                let mut argv: Vec<&[u8]> = vec![b"PFADD", key];
                argv.extend(elems.iter().map(|e| e.as_slice()));
                pair.cmd(seed, "PFADD", &argv);
                if rng.below(4) == 0 {
                    pair.cmd(seed, "PFADD again", &argv);
                }
            }
            45..=59 => {
                pair.cmd(seed, "PFCOUNT", &[b"PFCOUNT", key]);
            }
            60..=69 => {
                let n = 2 + rng.below(4) as usize;
                let mut argv: Vec<&[u8]> = vec![b"PFCOUNT"];
                for _ in 0..n {
                    argv.push(*rng.pick(KEYS));
                }
                pair.cmd(seed, "PFCOUNT multi", &argv);
            }
            70..=81 => {
                let n = rng.below(4) as usize;
                let mut argv: Vec<&[u8]> = vec![b"PFMERGE", key];
                for _ in 0..n {
                    argv.push(*rng.pick(KEYS));
                }
                pair.cmd(seed, "PFMERGE", &argv);
            }
            82..=86 => {
                let v = *rng.pick(&[&b"0"[..], b"1", b"30", b"100", b"500", b"3000", b"5000"]);
                pair.cmd(
                    seed,
                    "CONFIG SET",
                    &[b"CONFIG", b"SET", b"hll-sparse-max-bytes", v],
                );
            }
            87..=90 => {
                let sub = *rng.pick(&[&b"TODENSE"[..], b"GETREG", b"DECODE", b"ENCODING"]);
                pair.cmd(seed, "PFDEBUG", &[b"PFDEBUG", sub, key]);
            }
            91..=92 => {
                pair.cmd(seed, "DEL", &[b"DEL", key]);
                added[ki] = 0;
            }
            93 => {
                // Does the PF command count as a modification? EXEC answers nil if it did.
                pair.cmd(seed, "WATCH", &[b"WATCH", key]);
                let e = element(&mut rng);
                match rng.below(3) {
                    0 => pair.cmd(seed, "PFCOUNT watched", &[b"PFCOUNT", key]),
                    1 => pair.cmd(seed, "PFADD watched", &[b"PFADD", key, &e]),
                    _ => pair.cmd(seed, "PFADD watched, no element", &[b"PFADD", key]),
                };
                pair.cmd(seed, "MULTI", &[b"MULTI"]);
                pair.cmd(seed, "PING queued", &[b"PING"]);
                pair.cmd(seed, "EXEC", &[b"EXEC"]);
            }
            _ => {
                // Damage the value as Redis's fuzz test does (SETRANGE), or with APPEND or a
                // whole-value SET, then read and update the key.
                let got = pair.cmd(seed, "GET", &[b"GET", key]);
                if let Some(mut v) = bulk(&got) {
                    if v.len() > 16 {
                        let off = 16 + rng.below(v.len() as u64 - 16) as usize;
                        let byte = [rng.next() as u8];
                        match rng.below(3) {
                            0 => {
                                let o = off.to_string();
                                pair.cmd(
                                    seed,
                                    "SETRANGE damage",
                                    &[b"SETRANGE", key, o.as_bytes(), &byte],
                                );
                            }
                            1 => {
                                let tail = element(&mut rng);
                                pair.cmd(seed, "APPEND damage", &[b"APPEND", key, &tail]);
                            }
                            _ => {
                                v[off] = byte[0];
                                pair.cmd(seed, "SET damage", &[b"SET", key, &v]);
                            }
                        }
                        pair.cmd(seed, "PFCOUNT damaged", &[b"PFCOUNT", key]);
                        let e = element(&mut rng);
                        pair.cmd(seed, "PFADD damaged", &[b"PFADD", key, &e]);
                    }
                }
            }
        }
        pair.check_keys(seed);
    }
}

#[test]
fn pf_commands_match_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let server = start_server();
    let mut pair = Pair {
        ours: server.raw(),
        redis: RawConn::connect(redis.addr),
        steps: 0,
        compared: 0,
        corrupt: 0,
        dense: 0,
    };
    let started = Instant::now();
    // HLL_DIFF_SEEDS=N runs a longer soak (the default keeps the test under ~30 s in debug).
    let n: u64 = std::env::var("HLL_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let first: u64 = std::env::var("HLL_DIFF_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let seeds = first..first + n;
    for seed in seeds.clone() {
        workload(&mut pair, seed, 150);
    }
    println!(
        "diff_hll: {} seeds, {} steps, {} replies compared ({} INVALIDOBJ, {} dense GETs), all identical, in {:.1?}",
        seeds.count(),
        pair.steps,
        pair.compared,
        pair.corrupt,
        pair.dense,
        started.elapsed()
    );
}
