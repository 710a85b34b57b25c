//! INFO: every section Redis 7.0 prints, with Redis's field names, read from the shared state.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::CmdResult;
use super::{table, Ctx};
use crate::engine::pubsub::Kind;
use crate::protocol::Reply;

// ---------------------------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------------------------

/// Every section, in Redis's order. The default set is all of them but `commandstats` (Redis 7.0
/// also leaves out `latencystats`, which hyperbloom does not have).
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "bloom",
    "commandstats",
    "errorstats",
    "cluster",
    "keyspace",
];

fn default_sections() -> impl Iterator<Item = &'static str> {
    ALL_SECTIONS
        .iter()
        .copied()
        .filter(|s| *s != "commandstats")
}

pub(super) fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut wanted: Vec<&str> = Vec::new();
    if argv.len() == 1 {
        wanted.extend(default_sections());
    }
    for a in &argv[1..] {
        let name = String::from_utf8_lossy(a).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(default_sections()),
            "all" | "everything" => wanted.extend(ALL_SECTIONS),
            other => {
                if let Some(s) = ALL_SECTIONS.iter().find(|s| **s == other) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for section in ALL_SECTIONS {
        if !wanted.contains(section) || done.contains(section) {
            continue;
        }
        done.push(section);
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(ctx, section, &mut out);
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

fn info_section(ctx: &mut Ctx, section: &str, out: &mut String) {
    use std::fmt::Write;
    let shared = ctx.shared;
    match section {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            let port = shared.port.load(Ordering::Relaxed);
            let hz = ctx.config().hz;
            let config_file = ctx.config().config_file.clone().unwrap_or_default();
            let _ = write!(
                out,
                "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:hyperbloom\r\nconfig_file:{}\r\nio_threads_active:0\r\nhyperbloom_version:{}\r\n",
                crate::REDIS_VERSION,
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                shared.run_id,
                port,
                ctx.now_ms * 1000,
                uptime,
                uptime / 86400,
                hz,
                hz,
                // The clock the keys' access bits are stamped with (`store::access`).
                crate::store::access::lru_clock(),
                config_file,
                crate::VERSION,
            );
        }
        "clients" => {
            // The largest query and output buffers now (Redis's "recent" figures are the
            // largest of the last few seconds).
            let (n, max_in, max_out, blocked) = {
                let clients = shared.clients();
                // WAIT, and commands a CLIENT PAUSE holds back.
                let blocked = clients
                    .values()
                    .filter(|h| h.blocked.load(Ordering::Relaxed))
                    .count();
                let max_in = clients
                    .values()
                    .map(|h| h.mem.qbuf.load(Ordering::Relaxed))
                    .max();
                let max_out = clients
                    .values()
                    .map(|h| crate::engine::ClientHandle::output_split(h.output_pending()).1)
                    .max();
                (
                    clients.len(),
                    max_in.unwrap_or(0),
                    max_out.unwrap_or(0),
                    blocked,
                )
            };
            let tracking = ctx.pubsub.tracking.clients();
            let maxclients = ctx.config().maxclients;
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{n}\r\ncluster_connections:0\r\nmaxclients:{maxclients}\r\nclient_recent_max_input_buffer:{max_in}\r\nclient_recent_max_output_buffer:{max_out}\r\nblocked_clients:{blocked}\r\ntracking_clients:{tracking}\r\nclients_in_timeout_table:0\r\n"
            );
        }
        "memory" => {
            out.push_str(&memory_section(ctx));
        }
        "persistence" => {
            crate::persistence::refresh(ctx.shared, ctx.store);
            let p = shared.persistence().clone();
            let dirty = ctx.store.dirty();
            let loading = shared.loading.load(Ordering::Relaxed) as u8;
            let current = p
                .bgsave_started
                .map(|s| s.elapsed().as_secs() as i64)
                .unwrap_or(-1);
            let _ = write!(
                out,
                "# Persistence\r\nloading:{loading}\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:{dirty}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\n{aof}",
                p.bgsave_in_progress as u8,
                p.last_save_unix,
                if shared.bgsave_failed.load(Ordering::Relaxed) {
                    "err"
                } else {
                    "ok"
                },
                p.last_bgsave_duration_sec,
                p.saves,
                p.last_load_keys_expired,
                p.last_load_keys_loaded,
                aof = crate::persistence::aof::info_text(shared, &p),
            );
            // hyperbloom's own field: why the last save failed (Redis only logs it).
            if let Some(e) = &p.last_error {
                let _ = write!(
                    out,
                    "rdb_last_save_error:{}\r\n",
                    e.replace(['\r', '\n'], " ")
                );
            }
        }
        "stats" => {
            let s = &shared.stats;
            let (tracking_keys, tracking_items, tracking_prefixes) = ctx.pubsub.tracking.totals();
            let total_commands: u64 = ctx.command_stats().iter().map(|c| c.calls).sum();
            let hits = s.keyspace_hits.load(Ordering::Relaxed)
                + ctx.store.dbs.iter().map(|d| d.keyspace_hits).sum::<u64>();
            let misses = s.keyspace_misses.load(Ordering::Relaxed)
                + ctx.store.dbs.iter().map(|d| d.keyspace_misses).sum::<u64>();
            let (ops, (kbps_in, kbps_out)) = {
                let m = shared
                    .instantaneous
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                (m.ops_per_sec(), m.kbps())
            };
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{ops}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ninstantaneous_input_kbps:{kbps_in:.2}\r\ninstantaneous_output_kbps:{kbps_out:.2}\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:{}\r\ntotal_forks:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{}\r\n",
                s.connections_received.load(Ordering::Relaxed),
                total_commands,
                s.net_input_bytes.load(Ordering::Relaxed),
                s.net_output_bytes.load(Ordering::Relaxed),
                s.rejected_connections.load(Ordering::Relaxed),
                ctx.repl.sync_full,
                ctx.repl.sync_partial_ok,
                ctx.repl.sync_partial_err,
                s.expired_keys.load(Ordering::Relaxed)
                    + ctx.store.dbs.iter().map(|d| d.lazy_expired).sum::<u64>(),
                s.evicted_keys.load(Ordering::Relaxed),
                ctx.pubsub.len(Kind::Channel),
                ctx.pubsub.numpat(),
                ctx.pubsub.len(Kind::Shard),
                s.latest_snapshot_usec.load(Ordering::Relaxed),
                s.snapshots.load(Ordering::Relaxed),
                tracking_keys,
                tracking_items,
                tracking_prefixes,
                ctx.error_stats.values().sum::<u64>(),
            );
        }
        "replication" => {
            out.push_str(&super::replication::info_section(
                shared, ctx.repl, ctx.now_ms,
            ));
        }
        "cpu" => {
            let (user, sys) = cpu_times();
            let _ = write!(
                out,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n"
            );
        }
        "bloom" => out.push_str(&super::bloom::info_section(ctx.store)),
        "modules" => {
            let _ = write!(
                out,
                "# Modules\r\nmodule:name=bf,ver={},api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]\r\n",
                crate::BF_MODULE_VERSION
            );
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            let stats = ctx.command_stats();
            for (i, spec) in table().all().iter().enumerate() {
                let s = stats[i];
                if s.calls == 0 && s.rejected == 0 && s.failed == 0 {
                    continue;
                }
                let per = if s.calls > 0 {
                    s.nanos as f64 / 1000.0 / s.calls as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                    spec.name,
                    s.calls,
                    s.nanos / 1000,
                    per,
                    s.rejected,
                    s.failed
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            let mut codes: Vec<_> = ctx.error_stats.iter().collect();
            codes.sort();
            for (code, n) in codes {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
        }
        "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let now = ctx.now_ms;
            for (i, db) in ctx.store.dbs.iter_mut().enumerate() {
                db.now_ms = now;
                if db.is_empty() {
                    continue;
                }
                let _ = write!(
                    out,
                    "db{i}:keys={},expires={},avg_ttl={}\r\n",
                    db.len(),
                    db.expires_count(),
                    db.avg_ttl()
                );
            }
        }
        _ => {}
    }
}

/// INFO memory, with Redis 7.0's fields in its order (`engine::memory` for the breakdown). The
/// allocator figures are what Redis reports when built with libc malloc, which has no statistics
/// of its own: allocated is `used_memory`, active and resident are the RSS. There is no Lua or
/// function VM, so their figures are 0.
fn memory_section(ctx: &mut Ctx) -> String {
    use crate::engine::memory;
    let r = memory::report(ctx.shared, ctx.repl, ctx.store);
    let o = &r.overhead;
    let (used, rss, peak) = (r.used, r.rss, r.peak);
    let (overhead, dataset) = (r.overhead_total(), r.dataset());
    let (maxmemory, policy) = {
        let c = ctx.config();
        (c.maxmemory, c.maxmemory_policy.clone())
    };
    let system = memory::total_system_memory();
    use std::fmt::Write as _;
    let mut out = String::with_capacity(2048);
    let _ = write!(
        out,
        "# Memory\r\n\
         used_memory:{used}\r\nused_memory_human:{}\r\n\
         used_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\n\
         used_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\n\
         used_memory_overhead:{overhead}\r\nused_memory_startup:{}\r\n\
         used_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\n\
         allocator_allocated:{used}\r\nallocator_active:{rss}\r\nallocator_resident:{rss}\r\n\
         total_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n\
         used_memory_lua:0\r\nused_memory_vm_eval:0\r\nused_memory_lua_human:0B\r\n\
         used_memory_scripts_eval:0\r\nnumber_of_cached_scripts:0\r\nnumber_of_functions:0\r\n\
         number_of_libraries:0\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:0\r\n\
         used_memory_vm_total_human:0B\r\nused_memory_functions:0\r\nused_memory_scripts:0\r\n\
         used_memory_scripts_human:0B\r\n\
         maxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\n\
         allocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\n\
         allocator_rss_ratio:1.00\r\nallocator_rss_bytes:0\r\n\
         rss_overhead_ratio:1.00\r\nrss_overhead_bytes:0\r\n\
         mem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\n\
         mem_not_counted_for_evict:{}\r\nmem_replication_backlog:{}\r\n\
         mem_total_replication_buffers:{}\r\nmem_clients_slaves:{}\r\n\
         mem_clients_normal:{}\r\nmem_cluster_links:0\r\nmem_aof_buffer:{}\r\n\
         mem_allocator:libc\r\nactive_defrag_running:0\r\n\
         lazyfree_pending_objects:0\r\nlazyfreed_objects:0\r\n",
        human(used),
        human(rss),
        human(peak),
        r.peak_percentage(),
        o.startup,
        r.dataset_percentage(),
        human(system),
        human(maxmemory),
        r.fragmentation(),
        r.fragmentation_bytes(),
        r.fragmentation(),
        r.fragmentation_bytes(),
        o.not_counted,
        o.replication_backlog,
        o.replication_buffers,
        o.clients_replicas,
        o.clients_normal,
        o.aof_buffer,
    );
    out
}

fn human(n: u64) -> String {
    let f = n as f64;
    if f < 1024.0 {
        format!("{n}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else if f < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", f / 1024.0 / 1024.0)
    } else {
        format!("{:.2}G", f / 1024.0 / 1024.0 / 1024.0)
    }
}

/// User and system CPU seconds of this process, from /proc (0 where unavailable).
fn cpu_times() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name (which is in parentheses and may contain spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return (0.0, 0.0);
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = 100.0;
    let utime = fields
        .get(11)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / ticks;
    let stime = fields
        .get(12)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / ticks;
    (utime, stime)
}
