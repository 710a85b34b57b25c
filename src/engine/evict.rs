//! `maxmemory` eviction, as Redis's evict.c does it: before a command runs on the exclusive path,
//! while `used_memory` is over `maxmemory`, keys are deleted by `maxmemory-policy`.
//!
//! - `allkeys-random` / `volatile-random`: a random key (with a TTL, for `volatile-`) of each
//!   database in turn.
//! - `allkeys-lru` / `volatile-lru`, `allkeys-lfu` / `volatile-lfu`, `volatile-ttl`: Redis's
//!   approximation. Each pick samples `maxmemory-samples` keys of every database into a pool of
//!   the 16 best candidates seen so far (kept between picks, so good candidates accumulate), by
//!   idle time (the keys' LRU clocks), by the inverse of their LFU counters, or by the nearest
//!   deadline; the best candidate that still exists is evicted. For `volatile-ttl` a sample is
//!   the earliest deadline of a random stripe's ordered expiry queue (`store::db`), a better
//!   draw than Redis's random key for the same cost.
//! - `noeviction`: nothing is deleted; deny-oom commands are refused with the OOM error
//!   (`commands::refuse`), as they are under every policy when eviction could not get under the
//!   limit.
//!
//! An evicted key is deleted as `DEL` would delete it, counted in INFO `evicted_keys`, raises the
//! `evicted` keyspace event, invalidates WATCH and CLIENT TRACKING, and reaches the AOF and
//! replicas as `DEL` (`UNLINK` under `lazyfree-lazy-eviction`) before the command that caused
//! it. A replica never evicts (`replica-ignore-maxmemory yes`, Redis's default): its primary's
//! DELs keep it in step. Nothing is evicted while loading.
//!
//! Bounds, where Redis's differ from ours:
//! - A run stops after the time `maxmemory-eviction-tenacity` allows ([`time_limit`], 500 µs at
//!   the default 10; checked every 16 evictions, as Redis does) and lets the command run, as Redis
//!   does (`EVICT_RUNNING`); Redis continues from a timer, here the next command or the cron
//!   (`hz` times a second) does.
//! - A snapshot being saved shares the keyspace's blocks (`store::entry`), so deleting a key
//!   it holds frees nothing until the save ends, where Redis's forked child holds its own copy.
//!   Sixteen evictions in a row that free nothing end the loop, so a save in progress does not
//!   make eviction empty the database; the command then meets the OOM check as under
//!   `noeviction`.
//! - The comparison leaves out what Redis's `freeMemoryGetNotCountedMemory` does: replication
//!   buffers beyond `repl-backlog-size` and the AOF buffer (`engine::memory`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Engine, Shared};
use crate::store::access;

/// The pool's size (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// How long one eviction run may take before the command runs, by `maxmemory-eviction-tenacity`
/// (Redis's `evictionTimeLimitUs`): 50 µs a step up to 10 (the default: 500 µs), then 15 % more
/// a step (about two minutes at 99), and no limit at 100 (`None`).
pub fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * u64::from(tenacity))),
        11..=99 => Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        )),
        _ => None,
    }
}

/// Evictions in a row that may free nothing (keys a snapshot still holds) before the run stops.
const FRUITLESS_MAX: u32 = 16;

/// What `maxmemory-policy` evicts, and how it ranks keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    NoEviction,
    Random { volatile: bool },
    Lru { volatile: bool },
    Lfu { volatile: bool },
    Ttl,
}

impl Policy {
    fn parse(name: &str) -> Policy {
        let volatile = name.starts_with("volatile-");
        match name.rsplit('-').next() {
            Some("random") => Policy::Random { volatile },
            Some("lru") => Policy::Lru { volatile },
            Some("lfu") => Policy::Lfu { volatile },
            Some("ttl") => Policy::Ttl,
            _ => Policy::NoEviction,
        }
    }

    fn volatile(self) -> bool {
        match self {
            Policy::Random { volatile } | Policy::Lru { volatile } | Policy::Lfu { volatile } => {
                volatile
            }
            Policy::Ttl => true,
            Policy::NoEviction => false,
        }
    }

    /// A candidate's score: the higher, the sooner it goes.
    fn score(self, access_bits: u32, deadline: Option<u64>) -> u64 {
        match self {
            Policy::Lru { .. } => access::idle_ms(access_bits),
            Policy::Lfu { .. } => 255 - u64::from(access::decayed_counter(access_bits)),
            Policy::Ttl => u64::MAX - deadline.unwrap_or(u64::MAX),
            Policy::Random { .. } | Policy::NoEviction => 0,
        }
    }
}

/// The eviction pool and the random policies' database cursor, kept in the engine between
/// runs (Redis's `EvictionPoolLRU` and its static `next_db`).
#[derive(Default, Debug)]
pub struct EvictionState {
    /// Candidates, ascending by score: (score, database, key).
    pool: Vec<(u64, usize, Bytes)>,
    next_db: usize,
    seed: u64,
}

/// How an eviction run ended (Redis's `EVICT_OK`, `EVICT_RUNNING`, `EVICT_FAIL`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Under the limit (or no limit, or nothing to do here: a replica, loading, `noeviction`).
    Ok,
    /// Still over the limit when the run's time budget ran out: the command runs all the same,
    /// as in Redis, and the next command or the cron goes on evicting.
    Running,
    /// Still over the limit with nothing left to evict (or evictions that free nothing): a
    /// deny-oom command is refused with the OOM error.
    Failed,
}

/// Evicts keys while `used_memory` is over `maxmemory` and the policy allows (module docs).
/// Called before a command on the exclusive path, and by the cron; cheap when no limit is set
/// or it is not reached.
#[inline]
pub fn perform(shared: &Shared, engine: &mut Engine) -> Outcome {
    let max = shared.maxmemory.load(Ordering::Relaxed);
    // Under `noeviction` there is nothing to do here (`commands::refuse` answers OOM): no
    // reading of `used_memory`, which the deny-oom check makes anyway.
    if max == 0
        || !shared.maxmemory_evicts.load(Ordering::Relaxed)
        || !crate::engine::memory::over_maxmemory(shared, &engine.repl, max)
    {
        return Outcome::Ok;
    }
    perform_over(shared, engine, max)
}

#[inline(never)]
fn perform_over(shared: &Shared, engine: &mut Engine, max: u64) -> Outcome {
    // Nothing is evicted on a replica, while loading, or while CLIENT PAUSE holds clients back
    // (the dataset stays as it is, as in Redis).
    if engine.repl.master.is_some()
        || shared.loading.load(Ordering::Relaxed)
        || shared.client_pause.at(super::now_ms()).is_some()
    {
        return Outcome::Ok;
    }
    let (policy, samples, unlink, limit) = {
        let c = shared.config();
        (
            Policy::parse(&c.maxmemory_policy),
            c.maxmemory_samples.max(1) as usize,
            c.lazyfree_lazy_eviction,
            time_limit(c.maxmemory_eviction_tenacity),
        )
    };
    if policy == Policy::NoEviction {
        // Not reached while `maxmemory_evicts` agrees (both change together, under this lock);
        // `commands::refuse` answers deny-oom commands with OOM.
        return Outcome::Ok;
    }
    let started = Instant::now();
    // What the comparison leaves out (replica buffers, the AOF buffer), taken once: the run's
    // DELs reach the stream after it.
    let not_counted = crate::engine::memory::not_counted(shared, &engine.repl);
    let counted = || crate::engine::memory::used_memory().saturating_sub(not_counted);
    let mut used = counted();
    let mut evicted = 0u64;
    let mut fruitless = 0;
    let mut outcome = Outcome::Ok;
    while used > max {
        let Some((db, key)) = pick(engine, policy, samples) else {
            outcome = Outcome::Failed;
            break;
        };
        if !engine.store.dbs[db].evict(&key, unlink) {
            continue;
        }
        evicted += 1;
        let now_used = counted();
        fruitless = if now_used >= used { fruitless + 1 } else { 0 };
        used = now_used;
        if fruitless >= FRUITLESS_MAX {
            outcome = Outcome::Failed;
            break;
        }
        if evicted.is_multiple_of(16) && limit.is_some_and(|limit| started.elapsed() > limit) {
            outcome = Outcome::Running;
            break;
        }
    }
    if evicted > 0 {
        shared
            .stats
            .evicted_keys
            .fetch_add(evicted, Ordering::Relaxed);
        // Into the write stream now, before the command that caused them.
        engine.push_expired();
        tracing::debug!(
            evicted,
            used,
            max,
            ?outcome,
            fruitless,
            "evicted keys over maxmemory"
        );
    }
    outcome
}

/// The next key to evict: (database, key), or `None` when no key qualifies.
fn pick(engine: &mut Engine, policy: Policy, samples: usize) -> Option<(usize, Bytes)> {
    let volatile = policy.volatile();
    let Engine {
        store, eviction, ..
    } = engine;
    let dbs = &mut store.dbs;
    if let Policy::Random { .. } = policy {
        for i in 0..dbs.len() {
            let db = (eviction.next_db + i) % dbs.len();
            let mut found = None;
            dbs[db].eviction_sample(1, volatile, false, false, &mut eviction.seed, |k, _, _| {
                found = Some(Bytes::copy_from_slice(k))
            });
            if let Some(key) = found {
                eviction.next_db = db + 1;
                return Some((db, key));
            }
        }
        return None;
    }
    let ttl = policy == Policy::Ttl;
    for (db, d) in dbs.iter_mut().enumerate() {
        let has = if volatile {
            d.expires_count() > 0
        } else {
            !d.is_empty()
        };
        if !has {
            continue;
        }
        let EvictionState { pool, seed, .. } = eviction;
        d.eviction_sample(samples, volatile, ttl, ttl, seed, |key, bits, deadline| {
            insert(pool, policy.score(bits, deadline), db, key)
        });
    }
    // The best candidate that is still one (a pooled key may have gone, or lost its TTL).
    while let Some((_, db, key)) = eviction.pool.pop() {
        if dbs
            .get(db)
            .is_some_and(|d| d.eviction_candidate(&key, volatile))
        {
            return Some((db, key));
        }
    }
    None
}

/// Adds a candidate to the pool (ascending by score) unless it is worse than all of a full
/// pool or there already (Redis's `evictionPoolPopulate`); the key is copied only then.
fn insert(pool: &mut Vec<(u64, usize, Bytes)>, score: u64, db: usize, key: &[u8]) {
    if pool.len() >= POOL_SIZE && score <= pool[0].0 {
        return;
    }
    if let Some(i) = pool
        .iter()
        .position(|(_, d, k)| *d == db && k.as_ref() == key)
    {
        // Seen again: its score now.
        pool.remove(i);
    } else if pool.len() >= POOL_SIZE {
        pool.remove(0);
    }
    let at = pool.partition_point(|(s, _, _)| *s <= score);
    pool.insert(at, (score, db, Bytes::copy_from_slice(key)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenacity_sets_redis_time_limits() {
        let us = |t| time_limit(t).map(|d| d.as_micros());
        assert_eq!(us(0), Some(0));
        assert_eq!(us(1), Some(50));
        assert_eq!(us(10), Some(500));
        // Redis: (unsigned long)(500.0 * pow(1.15, tenacity - 10.0)).
        assert_eq!(us(11), Some(575));
        assert_eq!(us(20), Some(2022));
        assert_eq!(us(99), Some((500.0 * 1.15f64.powi(89)) as u128));
        assert!(us(99).unwrap() > 110_000_000, "about two minutes");
        assert_eq!(us(100), None);
    }

    #[test]
    fn policies_parse_as_redis_names_them() {
        assert_eq!(Policy::parse("noeviction"), Policy::NoEviction);
        assert_eq!(
            Policy::parse("allkeys-lru"),
            Policy::Lru { volatile: false }
        );
        assert_eq!(
            Policy::parse("volatile-lfu"),
            Policy::Lfu { volatile: true }
        );
        assert_eq!(
            Policy::parse("volatile-random"),
            Policy::Random { volatile: true }
        );
        assert_eq!(Policy::parse("volatile-ttl"), Policy::Ttl);
        assert!(Policy::Ttl.volatile());
        // The nearest deadline scores highest.
        assert!(Policy::Ttl.score(0, Some(10)) > Policy::Ttl.score(0, Some(20)));
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen_once_each() {
        let mut state = EvictionState::default();
        for i in 0..40u64 {
            insert(
                &mut state.pool,
                i % 20,
                0,
                format!("k{}", i % 20).as_bytes(),
            );
        }
        assert_eq!(state.pool.len(), POOL_SIZE);
        let scores: Vec<u64> = state.pool.iter().map(|(s, _, _)| *s).collect();
        assert_eq!(scores, (4..20).collect::<Vec<_>>());
        assert_eq!(state.pool.last().unwrap().2, Bytes::from("k19"));
    }
}
