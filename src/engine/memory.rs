//! What `used_memory` holds besides the data, and which part of it the `maxmemory` comparison
//! leaves out, as Redis 7.0 computes them (`getMemoryOverheadData` in object.c for INFO memory,
//! `freeMemoryGetNotCountedMemory` in evict.c for eviction and the OOM refusal).
//!
//! Left out of the comparison, as in Redis:
//! - **Replication buffers beyond `repl-backlog-size`.** The backlog is also the replicas' output
//!   buffer (`engine::repl`), so a replica that falls behind makes it hold more than its size, up
//!   to `client-output-buffer-limit replica`. Counting that would make the primary evict keys
//!   because a replica is slow, and each eviction's DEL grows the buffer further: Redis has left
//!   replica buffers out of the comparison since 3.2 for that reason. The backlog's own
//!   `repl-backlog-size` stays counted.
//! - **The AOF buffer**: what the AOF writer holds between the stream and the file
//!   (`persistence::aof` publishes its allocation after every pass). Bytes still in the write
//!   stream between two passes (a millisecond of writes, or what a stalled disk holds up) are
//!   counted.
//!
//! The peak is kept by whoever reads `used_memory` (INFO, the cron `hz` times a second, the
//! eviction run), so a spike between two readings that is freed before the next is not seen;
//! Redis samples after every command.

use std::sync::atomic::{AtomicU64, Ordering};

use super::alloc;
use super::repl::ReplState;
use super::shared::Shared;
use crate::store::db::Store;

/// `used_memory_startup`: `used_memory` once the server was configured and listening, before any
/// data was loaded ([`note_startup`]).
static STARTUP: AtomicU64 = AtomicU64::new(0);

/// `used_memory_peak`: the highest `used_memory` seen ([`used_memory`]).
static PEAK: AtomicU64 = AtomicU64::new(0);

/// Records `used_memory_startup` (the server calls it once, before loading data).
pub fn note_startup() {
    STARTUP.store(used_memory(), Ordering::Relaxed);
}

/// `used_memory` now, counted in the peak.
pub fn used_memory() -> u64 {
    let used = alloc::used_memory() as u64;
    PEAK.fetch_max(used, Ordering::Relaxed);
    used
}

/// `used_memory_peak`.
pub fn peak() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

/// `used_memory_startup`.
pub fn startup() -> u64 {
    STARTUP.load(Ordering::Relaxed)
}

/// The replication buffer: the backlog's allocation, which the replicas read from.
fn replication_buffer(repl: &ReplState) -> u64 {
    repl.backlog.as_ref().map_or(0, |b| b.allocated() as u64)
}

/// The part of the replication buffer beyond `repl-backlog-size`.
fn replication_excess(repl: &ReplState) -> u64 {
    repl.backlog
        .as_ref()
        .map_or(0, |b| (b.allocated() as u64).saturating_sub(b.size as u64))
}

/// The AOF writer's buffer (`mem_aof_buffer`), 0 with the AOF off.
fn aof_buffer(shared: &Shared) -> u64 {
    let info = &shared.aof_info;
    if info.enabled.load(Ordering::Relaxed) {
        info.buffer_bytes.load(Ordering::Relaxed) as u64
    } else {
        0
    }
}

/// `mem_not_counted_for_evict`: what the `maxmemory` comparison leaves out (module docs).
pub fn not_counted(shared: &Shared, repl: &ReplState) -> u64 {
    replication_excess(repl) + aof_buffer(shared)
}

/// Whether `used_memory`, less what is [`not_counted`], is over `max` (non-zero): the
/// comparison before a deny-oom command and before eviction. While `used_memory` is surely under
/// `max` this reads no more than [`alloc::surely_at_most`] does.
#[inline]
pub fn over_maxmemory(shared: &Shared, repl: &ReplState, max: u64) -> bool {
    !alloc::surely_at_most(max) && counted(shared, repl) > max
}

/// `used_memory` less what is [`not_counted`]: the figure eviction compares with `maxmemory`.
#[inline(never)]
pub fn counted(shared: &Shared, repl: &ReplState) -> u64 {
    used_memory().saturating_sub(not_counted(shared, repl))
}

/// INFO memory's breakdown of `used_memory` (Redis's `struct redisMemOverhead`, the parts
/// hyperbloom has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overhead {
    pub startup: u64,
    /// `mem_total_replication_buffers`.
    pub replication_buffers: u64,
    /// `mem_replication_backlog`: the replication buffer up to `repl-backlog-size` while
    /// replicas are attached, all of it otherwise.
    pub replication_backlog: u64,
    /// `mem_clients_slaves`: the replication buffer beyond the backlog's size, with replicas.
    pub clients_replicas: u64,
    /// `mem_clients_normal`: every other connection's buffers (CLIENT LIST `tot-mem`).
    pub clients_normal: u64,
    pub aof_buffer: u64,
    pub not_counted: u64,
}

impl Overhead {
    /// `used_memory_overhead`.
    pub fn total(&self) -> u64 {
        self.startup
            + self.replication_backlog
            + self.clients_replicas
            + self.clients_normal
            + self.aof_buffer
    }
}

/// The breakdown now (walks the client list: for INFO, not for every command).
pub fn overhead(shared: &Shared, repl: &ReplState) -> Overhead {
    let buffers = replication_buffer(repl);
    let excess = replication_excess(repl);
    let (replication_backlog, clients_replicas) = if repl.replicas.is_empty() {
        (buffers, 0)
    } else {
        (buffers - excess, excess)
    };
    let clients_normal = shared
        .clients()
        .values()
        .filter(|h| !h.is_replica.load(Ordering::Relaxed))
        .map(|h| h.total_memory() as u64)
        .sum();
    Overhead {
        startup: startup(),
        replication_buffers: buffers,
        replication_backlog,
        clients_replicas,
        clients_normal,
        aof_buffer: aof_buffer(shared),
        not_counted: not_counted(shared, repl),
    }
}

/// Everything INFO memory, MEMORY STATS and MEMORY DOCTOR report, taken at once (Redis's
/// `getMemoryOverheadData`, which all three read): the breakdown, each database's table
/// overheads, and the ratios Redis derives with libc malloc, where the allocator's own figures
/// are `used_memory` and the RSS.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub used: u64,
    pub peak: u64,
    pub rss: u64,
    pub overhead: Overhead,
    /// (database, key tables, expiry queues) of each database holding keys.
    pub dbs: Vec<(usize, u64, u64)>,
    pub keys: u64,
    /// Connections that are not replicas, and replicas.
    pub clients: u64,
    pub replicas: u64,
}

/// The [`Report`] now (walks the clients, and each database's tables: for INFO and MEMORY, not
/// for every command).
pub fn report(shared: &Shared, repl: &ReplState, store: &mut Store) -> Report {
    let used = used_memory();
    let mut dbs = Vec::new();
    let mut keys = 0;
    for (i, db) in store.dbs.iter_mut().enumerate() {
        if db.is_empty() {
            continue;
        }
        keys += db.len() as u64;
        let (main, expires) = db.overhead_bytes();
        dbs.push((i, main as u64, expires as u64));
    }
    let replicas = repl.replicas.len() as u64;
    Report {
        used,
        peak: peak().max(used),
        rss: rss_bytes(),
        overhead: overhead(shared, repl),
        dbs,
        keys,
        clients: (shared.clients().len() as u64).saturating_sub(replicas),
        replicas,
    }
}

impl Report {
    /// `used_memory_overhead` / `overhead.total`: the buffers and the keyspace's tables.
    pub fn overhead_total(&self) -> u64 {
        self.overhead.total() + self.dbs.iter().map(|&(_, m, e)| m + e).sum::<u64>()
    }

    /// `used_memory_dataset` / `dataset.bytes`.
    pub fn dataset(&self) -> u64 {
        self.used.saturating_sub(self.overhead_total())
    }

    /// `used_memory` less the startup figure, at least 1 (Redis's `net_usage`).
    fn net(&self) -> u64 {
        self.used.saturating_sub(self.overhead.startup).max(1)
    }

    /// `keys.bytes-per-key`.
    pub fn bytes_per_key(&self) -> u64 {
        self.net().checked_div(self.keys).unwrap_or(0)
    }

    /// `used_memory_dataset_perc` / `dataset.percentage`.
    pub fn dataset_percentage(&self) -> f64 {
        ratio(self.dataset() * 100, self.net())
    }

    /// `used_memory_peak_perc` / `peak.percentage`.
    pub fn peak_percentage(&self) -> f64 {
        ratio(self.used * 100, self.peak)
    }

    /// RSS over `used_memory`: the allocator's fragmentation and the total's, which are one
    /// figure with libc malloc.
    pub fn fragmentation(&self) -> f64 {
        ratio(self.rss, self.used)
    }

    pub fn fragmentation_bytes(&self) -> i64 {
        self.rss as i64 - self.used as i64
    }
}

/// `a / b` as Redis computes its ratios, in single precision (so the digits look alike); 0 for
/// a zero `b`.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        f64::from(a as f32 / b as f32)
    }
}

/// The process's resident set (`used_memory_rss`), from /proc/self/statm; 0 where there is none.
pub fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * page_size()
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant; _SC_PAGESIZE is a valid name.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// `total_system_memory`: MemTotal of /proc/meminfo, 0 where there is none.
pub fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::repl::{Backlog, ReplicaInfo, ReplicaState};

    fn replica(id: u64) -> ReplicaInfo {
        ReplicaInfo {
            client_id: id,
            ip: "127.0.0.1".into(),
            port: 6380,
            state: ReplicaState::Online,
            ack_offset: 0,
            ack_ms: 0,
            send_offset: 1,
        }
    }

    /// The backlog's allocation beyond its size is left out of the comparison; up to its size it
    /// counts. With replicas attached INFO calls the excess the replicas' memory.
    #[test]
    fn the_replication_buffer_beyond_the_backlog_size_is_not_counted() {
        let shared = Shared::new(Default::default(), 1);
        let mut repl = ReplState::new("r".into());
        assert_eq!(not_counted(&shared, &repl), 0);
        let mut backlog = Backlog::new(1000, 1);
        backlog.feed(&[b'x'; 600]);
        repl.backlog = Some(backlog);
        let allocated = repl.backlog.as_ref().unwrap().allocated() as u64;
        assert!(allocated >= 600);
        assert_eq!(not_counted(&shared, &repl), allocated.saturating_sub(1000));
        // A replica far behind: the buffer grows past the size (trim keeps what it needs).
        repl.backlog.as_mut().unwrap().feed(&[b'y'; 5000]);
        repl.backlog.as_mut().unwrap().trim(Some(1), usize::MAX);
        repl.replicas.insert(7, replica(7));
        let allocated = repl.backlog.as_ref().unwrap().allocated() as u64;
        assert!(allocated >= 5600, "{allocated}");
        assert_eq!(not_counted(&shared, &repl), allocated - 1000);
        let o = overhead(&shared, &repl);
        assert_eq!(
            (
                o.replication_buffers,
                o.replication_backlog,
                o.clients_replicas
            ),
            (allocated, 1000, allocated - 1000)
        );
        // The AOF buffer is left out while the AOF is on.
        shared.aof_info.buffer_bytes.store(4096, Ordering::Relaxed);
        assert_eq!(not_counted(&shared, &repl), allocated - 1000);
        shared.aof_info.enabled.store(true, Ordering::Relaxed);
        assert_eq!(not_counted(&shared, &repl), allocated - 1000 + 4096);
        assert_eq!(overhead(&shared, &repl).aof_buffer, 4096);
    }

    #[test]
    fn rss_and_system_memory_are_read() {
        assert!(rss_bytes() > 0);
        assert!(total_system_memory() > rss_bytes());
    }
}
