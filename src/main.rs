//! `hyperbloom [CONFIG_FILE] [--directive value ...]`, started like `redis-server`.

use clap::Parser;
use hyperbloom::config::Config;

#[global_allocator]
static ALLOC: hyperbloom::engine::alloc::CountingAlloc = hyperbloom::engine::alloc::CountingAlloc;

/// A Redis-protocol server for Bloom filters, cuckoo filters and HyperLogLog (RedisBloom-compatible).
#[derive(Parser, Debug)]
#[command(
    name = "hyperbloom",
    version = hyperbloom::VERSION,
    disable_version_flag = true,
    override_usage = "hyperbloom [CONFIG_FILE] [--directive value ...]\n       hyperbloom --port 7000 --dir /data --save \"900 1\" --requirepass s3cret",
    after_help = "Directives are spelled as in redis.conf; see conf/hyperbloom.conf for the full list."
)]
struct Cli {
    /// Print the version (redis-server style: `v=X.Y.Z`).
    #[arg(short = 'v', long = "version")]
    version: bool,
    /// An optional config file, then `--directive value` pairs.
    #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
    rest: Vec<String>,
}

fn main() {
    let cli = Cli::parse();
    if cli.version {
        println!(
            "hyperbloom v={} sha=00000000:0 malloc=libc bits=64 build=hyperbloom-{}",
            hyperbloom::REDIS_VERSION,
            hyperbloom::VERSION
        );
        return;
    }
    let config = match Config::from_args(&cli.rest) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\n{e}");
            std::process::exit(1);
        }
    };
    use tracing_subscriber::filter::LevelFilter;
    let level = match config.loglevel.as_str() {
        "debug" => LevelFilter::DEBUG,
        "verbose" => LevelFilter::INFO,
        "warning" => LevelFilter::WARN,
        "nothing" => LevelFilter::OFF,
        _ => LevelFilter::INFO,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let runtime = match build_runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async move { hyperbloom::server::serve_main(config).await });
    std::process::exit(code);
}

/// The runtime: `HYPERBLOOM_WORKERS=N` tokio worker threads (N ≥ 1), or `current` for a
/// current-thread runtime (everything on the main thread). Default: see [`default_runtime`].
fn build_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let setting = std::env::var("HYPERBLOOM_WORKERS").ok();
    // The CPUs this process may run on (sched_getaffinity: 1 under `taskset -c 1`).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = match setting.as_deref().map(str::trim) {
        Some("current") => None,
        Some(n) if n.parse::<usize>().is_ok_and(|n| n >= 1) => Some(n.parse().unwrap_or(1)),
        _ => default_runtime(cores),
    };
    // The I/O driver only: the time driver would run on every park, i.e. once per request at
    // `-P 1`; the server's few timers live on a thread of their own (`server::timer`).
    let runtime = match workers {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?,
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_io()
            .build()?,
    };
    hyperbloom::server::timer::install()?;
    Ok(runtime)
}

/// Worker threads when `HYPERBLOOM_WORKERS` is not set; `None` = a current-thread runtime.
///
/// Up to two CPUs, the current-thread runtime (everything on one thread, as Redis):
/// * on one CPU (a one-core machine, or `taskset -c N`) a multi-thread runtime with one worker does
///   the same work plus its scheduler's bookkeeping (per-batch poll-time statistics, the inject
///   queue, the worker park): ~780 more userspace instructions per request at `-P 1` (callgrind);
/// * on two CPUs, unpinned, with the client on the same machine, two workers add futex wake-ups
///   between them (+12 % syscalls and +50 % context switches per request at `-P 1`) and compete
///   with the client for the second core: in same-run interleaved rounds (`scripts/bench-load.sh
///   --workers current,1,2`, issue-15 CPU note) two workers were 15–25 % slower at `-P 1` and behind
///   on most `-P 16` rows.
///
/// Above two CPUs, one worker per core, tokio's own default (the keyspace lock is one, but reads,
/// parsing and writes run in parallel).
fn default_runtime(cores: usize) -> Option<usize> {
    (cores > 2).then_some(cores)
}
