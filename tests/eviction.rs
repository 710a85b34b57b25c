//! `maxmemory` eviction (`engine::evict`) on the real binary, whose `used_memory` is its own
//! (an in-process server would count the test's allocations too): each policy deletes the keys
//! Redis's would (the idlest, the least used, the nearest deadline, never a key without a TTL
//! under a `volatile-` policy), keeps `used_memory` at the limit, counts INFO `evicted_keys`,
//! raises `evicted`, and writes each eviction to the AOF before the command that caused it.

mod common;

use common::RawConn;

struct Server {
    child: common::ServerProcess,
    conn: RawConn,
    addr: std::net::SocketAddr,
    dir: std::path::PathBuf,
}

impl Server {
    fn start(tag: &str, extra: &[&str]) -> Server {
        let dir = common::tempdir(tag);
        Server::start_in(dir, extra)
    }

    fn start_in(dir: std::path::PathBuf, extra: &[&str]) -> Server {
        let (child, addr) = common::spawn_binary_with(&dir, "", extra);
        let conn = common::connect_when_ready(addr);
        Server {
            child,
            conn,
            addr,
            dir,
        }
    }

    fn field(&mut self, section: &str, name: &str) -> u64 {
        let info = self.conn.cmd_str(&["INFO", section]);
        let text = String::from_utf8_lossy(&info).to_string();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {text}"))
    }

    fn used(&mut self) -> u64 {
        self.field("memory", "used_memory")
    }

    /// `used_memory` once it is back under `limit`, or after 3 s: an eviction run that ran out
    /// of its time budget lets its command run over the limit (Redis's EVICT_RUNNING), and the
    /// next command or the cron (10 times a second) goes on evicting. The INFO that reads it
    /// evicts first and then builds its reply, which `used_memory` counts: [`SLACK`] above the
    /// limit is that reply, not a key.
    fn used_settled(&mut self, limit: u64) -> u64 {
        let limit = limit + SLACK;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        loop {
            let used = self.used();
            if used <= limit || std::time::Instant::now() > deadline {
                return used;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn evicted(&mut self) -> u64 {
        self.field("stats", "evicted_keys")
    }

    fn dbsize(&mut self) -> u64 {
        let r = self.conn.cmd_str(&["DBSIZE"]);
        String::from_utf8_lossy(&r[1..r.len() - 2]).parse().unwrap()
    }

    /// SETs `name(i)` for `i` in `range` to a 100-byte value, with `extra` arguments (`EX n`),
    /// pipelined; every reply must be `want`'s.
    fn fill(
        &mut self,
        range: std::ops::Range<usize>,
        name: impl Fn(usize) -> String,
        extra: impl Fn(usize) -> Vec<String>,
    ) -> Vec<Vec<u8>> {
        let value = "v".repeat(100);
        let mut replies = Vec::new();
        let ids: Vec<usize> = range.collect();
        for chunk in ids.chunks(500) {
            let mut out = Vec::new();
            for &i in chunk {
                let key = name(i);
                let mut argv: Vec<&[u8]> = vec![b"SET", key.as_bytes(), value.as_bytes()];
                let tail = extra(i);
                argv.extend(tail.iter().map(|s| s.as_bytes()));
                out.extend_from_slice(&common::encode_command(&argv));
            }
            self.conn.send_raw(&out);
            for _ in chunk {
                replies.push(self.conn.read_reply());
            }
        }
        replies
    }

    fn exists(&mut self, keys: impl Iterator<Item = String>) -> usize {
        keys.filter(|k| self.conn.cmd_str(&["EXISTS", k]) == b":1\r\n")
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const LIMIT: u64 = 8 << 20;

/// What the INFO reading `used_memory` allocates for its own reply (a few KB).
const SLACK: u64 = 64 << 10;

fn no_ttl(_: usize) -> Vec<String> {
    Vec::new()
}

fn all_ok(replies: &[Vec<u8>]) {
    for r in replies {
        assert_eq!(r, b"+OK\r\n", "{}", String::from_utf8_lossy(r));
    }
}

/// How many more keys like the ones already there take `s` `over` keys past the limit: keys
/// cost what the first `had` cost each.
fn keys_past_limit(s: &mut Server, base: u64, had: usize, over: usize) -> usize {
    let per_key = (s.used() - base) / had as u64;
    let room = ((LIMIT - base) / per_key) as usize;
    (room + over).saturating_sub(had)
}

/// allkeys-lru: 20k keys, 1,000 of them read two seconds later (the LRU clock counts seconds),
/// then new keys past the limit by ~5,000: the evicted keys are the idle ones, the read ones
/// stay.
#[test]
fn allkeys_lru_evicts_idle_keys_and_keeps_recently_read_ones() {
    let mut s = Server::start(
        "evict-lru",
        &[
            "--maxmemory",
            "8mb",
            "--maxmemory-policy",
            "allkeys-lru",
            "--maxmemory-samples",
            "10",
        ],
    );
    let base = s.used();
    all_ok(&s.fill(0..20_000, |i| format!("old:{i}"), no_ttl));
    assert_eq!(s.evicted(), 0);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for i in 0..1000 {
        s.conn.cmd_str(&["GET", &format!("old:{i}")]);
    }
    let read_at = std::time::Instant::now();
    let more = keys_past_limit(&mut s, base, 20_000, 5000);
    all_ok(&s.fill(0..more, |i| format!("new:{i}"), no_ttl));
    let evicted = s.evicted();
    assert!(evicted >= 2000, "{evicted} evicted");
    let used = s.used_settled(LIMIT);
    assert!(used <= LIMIT + SLACK, "{used}");
    assert_eq!(s.dbsize() + evicted, (20_000 + more) as u64);
    // Every read key stayed; the evictions came from the 19,000 idle ones.
    let hot = s.exists((0..1000).map(|i| format!("old:{i}")));
    assert_eq!(hot, 1000, "read keys evicted");
    let cold = s.exists((1000..20_000).map(|i| format!("old:{i}")));
    assert!(
        cold as u64 <= 19_000 - evicted * 9 / 10,
        "{cold} idle keys left, {evicted} evicted"
    );
    // OBJECT IDLETIME shows the difference Redis's would: the seconds since the read (whole
    // seconds of the LRU clock, so one more at most), not the 2 s before it. (A fixed bound of 1
    // failed on a loaded machine, where the fill took over a second.)
    let since_read = read_at.elapsed().as_secs() as i64;
    let idle = int_of(&s.conn.cmd_str(&["OBJECT", "IDLETIME", "old:5"]));
    assert!(
        idle <= since_read + 1,
        "{idle} s idle, read {since_read} s ago"
    );
    if let Some(cold_key) = (1000..20_000)
        .map(|i| format!("old:{i}"))
        .find(|k| s.conn.cmd_str(&["EXISTS", k]) == b":1\r\n")
    {
        let idle_cold = int_of(&s.conn.cmd_str(&["OBJECT", "IDLETIME", &cold_key]));
        assert!(idle_cold >= 2, "{cold_key}: {idle_cold} s idle");
    }
}

/// allkeys-lfu: the keys read 30 times each stay; new keys (counter 5) and unread old ones go.
#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let mut s = Server::start(
        "evict-lfu",
        &[
            "--maxmemory",
            "8mb",
            "--maxmemory-policy",
            "allkeys-lfu",
            "--maxmemory-samples",
            "10",
        ],
    );
    let base = s.used();
    all_ok(&s.fill(0..20_000, |i| format!("old:{i}"), no_ttl));
    let mut reads = Vec::new();
    for _ in 0..30 {
        for i in 0..500 {
            reads.extend_from_slice(&common::encode_command(&[
                b"GET".as_slice(),
                format!("old:{i}").as_bytes(),
            ]));
        }
    }
    s.conn.send_raw(&reads);
    for _ in 0..30 * 500 {
        s.conn.read_reply();
    }
    let freq = s.conn.cmd_str(&["OBJECT", "FREQ", "old:0"]);
    let freq: u64 = String::from_utf8_lossy(&freq[1..freq.len() - 2])
        .parse()
        .unwrap();
    assert!((6..=20).contains(&freq), "{freq}");
    assert_eq!(s.conn.cmd_str(&["OBJECT", "FREQ", "old:600"]), b":5\r\n");
    let more = keys_past_limit(&mut s, base, 20_000, 5000);
    all_ok(&s.fill(0..more, |i| format!("new:{i}"), no_ttl));
    assert!(s.evicted() >= 2000, "{} evicted", s.evicted());
    let used = s.used_settled(LIMIT);
    assert!(used <= LIMIT + SLACK, "{used}");
    let hot = s.exists((0..500).map(|i| format!("old:{i}")));
    assert!(hot >= 495, "{hot} of 500 frequently read keys left");
}

/// volatile-ttl: the nearest deadlines go first, a key without a TTL never; once no key has a
/// TTL, a write over the limit gets the OOM error, and a read still runs.
#[test]
fn volatile_ttl_evicts_nearest_deadlines_and_then_refuses() {
    let mut s = Server::start(
        "evict-ttl",
        &["--maxmemory", "8mb", "--maxmemory-policy", "volatile-ttl"],
    );
    let base = s.used();
    all_ok(&s.fill(0..10_000, |i| format!("keep:{i}"), no_ttl));
    // Deadlines grow with i.
    all_ok(&s.fill(
        0..10_000,
        |i| format!("ttl:{i}"),
        |i| vec!["EX".into(), (10_000 + i).to_string()],
    ));
    let more = keys_past_limit(&mut s, base, 20_000, 3000);
    all_ok(&s.fill(
        0..more,
        |i| format!("late:{i}"),
        |_| vec!["EX".into(), "1000000".into()],
    ));
    let evicted = s.evicted() as usize;
    assert!((1000..10_000).contains(&evicted), "{evicted} evicted");
    let used = s.used_settled(LIMIT);
    assert!(used <= LIMIT + SLACK, "{used}");
    assert_eq!(s.exists((0..10_000).map(|i| format!("keep:{i}"))), 10_000);
    // The evicted ones are (about) the first `evicted` deadlines: sampling ranks them, as
    // Redis's does, so allow the edge to be ragged.
    let early = s.exists((0..evicted / 2).map(|i| format!("ttl:{i}")));
    assert!(
        early <= evicted / 20,
        "{early} of the earliest deadlines left"
    );
    assert_eq!(s.exists((9000..10_000).map(|i| format!("ttl:{i}"))), 1000);
    // Without a TTL to evict, writes over the limit are refused.
    let replies = s.fill(0..60_000, |i| format!("fill:{i}"), no_ttl);
    let oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n".to_vec();
    assert!(replies.contains(&oom), "never refused");
    let info = s.conn.cmd_str(&["INFO", "keyspace"]);
    assert!(
        String::from_utf8_lossy(&info).contains("expires=0"),
        "{}",
        String::from_utf8_lossy(&info)
    );
    assert_eq!(s.exists((0..10_000).map(|i| format!("keep:{i}"))), 10_000);
    assert_eq!(s.conn.cmd_str(&["GET", "nosuchkey"]), b"$-1\r\n");
}

/// volatile-lru: only keys with a TTL go, the idlest first; keys without one all stay, however
/// idle (10,000 of them written first and never read).
#[test]
fn volatile_lru_evicts_only_keys_with_a_ttl_idlest_first() {
    let mut s = Server::start(
        "evict-vlru",
        &[
            "--maxmemory",
            "8mb",
            "--maxmemory-policy",
            "volatile-lru",
            "--maxmemory-samples",
            "10",
        ],
    );
    let base = s.used();
    all_ok(&s.fill(0..10_000, |i| format!("keep:{i}"), no_ttl));
    let ex = |_| vec!["EX".into(), "1000000".into()];
    all_ok(&s.fill(0..10_000, |i| format!("ttl:{i}"), ex));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for i in 0..500 {
        s.conn.cmd_str(&["GET", &format!("ttl:{i}")]);
    }
    let more = keys_past_limit(&mut s, base, 20_000, 3000);
    all_ok(&s.fill(0..more, |i| format!("late:{i}"), ex));
    let evicted = s.evicted() as usize;
    assert!(evicted >= 1000, "{evicted} evicted");
    let used = s.used_settled(LIMIT);
    assert!(used <= LIMIT + SLACK, "{used}");
    assert_eq!(s.exists((0..10_000).map(|i| format!("keep:{i}"))), 10_000);
    // Approximated LRU, as Redis's: a pick whose sample (and pool) holds no idle key evicts the
    // idlest it has, and when the fill below crosses a second (a loaded machine: a local run of
    // the whole suite on 2026-12-07 lost one of 500), the read keys are idler than the new ones.
    let read_kept = s.exists((0..500).map(|i| format!("ttl:{i}")));
    assert!(read_kept >= 495, "{read_kept} of 500 read keys kept");
    let idle = s.exists((500..10_000).map(|i| format!("ttl:{i}")));
    assert!(
        idle <= 9_500 - evicted * 9 / 10,
        "{idle} idle keys with a TTL left, {evicted} evicted"
    );
}

/// Every eviction raises `evicted` (one message per key, as many as INFO counts), reaches the
/// AOF as UNLINK under `lazyfree-lazy-eviction yes`, and a server started from that AOF holds
/// exactly the keys that were left.
#[test]
fn evictions_raise_events_and_replay_from_the_aof() {
    let dir = common::tempdir("evict-aof");
    let mut s = Server::start_in(
        dir.clone(),
        &[
            "--maxmemory",
            "8mb",
            "--maxmemory-policy",
            "allkeys-random",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--lazyfree-lazy-eviction",
            "yes",
            "--notify-keyspace-events",
            "Ee",
        ],
    );
    common::wait_loaded(&mut s.conn);
    let mut sub = RawConn::connect(s.addr);
    assert_eq!(
        sub.cmd_str(&["SUBSCRIBE", "__keyevent@0__:evicted"]),
        b"*3\r\n$9\r\nsubscribe\r\n$22\r\n__keyevent@0__:evicted\r\n:1\r\n"
    );
    let base = s.used();
    all_ok(&s.fill(0..10_000, |i| format!("k:{i}"), no_ttl));
    let more = keys_past_limit(&mut s, base, 10_000, 3000);
    all_ok(&s.fill(10_000..10_000 + more, |i| format!("k:{i}"), no_ttl));
    let evicted = s.evicted();
    assert!(evicted >= 1000, "{evicted}");
    for _ in 0..evicted {
        let msg = sub.read_reply();
        assert!(
            msg.starts_with(b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n"),
            "{}",
            String::from_utf8_lossy(&msg)
        );
    }
    let left = s.dbsize();
    assert_eq!(left + evicted, (10_000 + more) as u64);
    // The AOF holds an UNLINK for each.
    let mut unlinks = 0;
    for f in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        unlinks += bytes
            .windows(12)
            .filter(|w| *w == b"$6\r\nUNLINK\r\n")
            .count();
    }
    assert_eq!(unlinks as u64, evicted);
    // Restarted from it without a limit: the same keys.
    let keys_before: std::collections::BTreeSet<Vec<u8>> = (0..10_000 + more)
        .map(|i| format!("k:{i}"))
        .filter(|k| s.conn.cmd_str(&["EXISTS", k]) == b":1\r\n")
        .map(String::into_bytes)
        .collect();
    drop(sub);
    let _ = s.child.kill();
    let _ = s.child.wait();
    let keep = std::mem::replace(&mut s.dir, common::tempdir("evict-aof-unused"));
    drop(s);
    let mut again = Server::start_in(keep, &["--appendonly", "yes"]);
    common::wait_loaded(&mut again.conn);
    assert_eq!(again.dbsize(), left);
    let keys_after: std::collections::BTreeSet<Vec<u8>> = (0..10_000 + more)
        .map(|i| format!("k:{i}"))
        .filter(|k| again.conn.cmd_str(&["EXISTS", k]) == b":1\r\n")
        .map(String::into_bytes)
        .collect();
    assert_eq!(keys_before, keys_after);
}

/// The policy names and the new directives answer as Redis 7.0.15's do.
#[test]
fn eviction_directives_answer_as_redis() {
    let mut s = Server::start("evict-config", &[]);
    assert_eq!(
        s.conn.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "bogus"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n"
    );
    assert_eq!(
        s.conn.cmd_str(&["CONFIG", "SET", "maxmemory-samples", "0"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-samples') - argument must be between 1 and 2147483647 inclusive\r\n"
    );
    assert_eq!(
        s.conn
            .cmd_str(&["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LRU"]),
        b"+OK\r\n"
    );
    assert_eq!(
        s.conn.cmd_str(&["CONFIG", "GET", "maxmemory-policy"]),
        b"*2\r\n$16\r\nmaxmemory-policy\r\n$11\r\nallkeys-lru\r\n"
    );
    // EXISTS, TYPE and TTL do not count as accesses; GET and TOUCH do.
    s.conn.cmd_str(&["SET", "k", "v"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for probe in [&["EXISTS", "k"][..], &["TYPE", "k"], &["TTL", "k"]] {
        s.conn.cmd_str(probe);
    }
    let idle = s.conn.cmd_str(&["OBJECT", "IDLETIME", "k"]);
    assert!(idle == b":2\r\n" || idle == b":3\r\n", "{idle:?}");
    assert_eq!(s.conn.cmd_str(&["TOUCH", "k", "nokey"]), b":1\r\n");
    assert_eq!(s.conn.cmd_str(&["OBJECT", "IDLETIME", "k"]), b":0\r\n");
}

/// The same requests to redis-server 7.0.15 and to hyperbloom, byte for byte, in RESP2 and
/// RESP3: the eviction directives' CONFIG SET errors and CONFIG GET answers, OBJECT FREQ and
/// IDLETIME under each kind of policy (their errors, and the counters of keys no one has read
/// yet), TOUCH and its missing keys, and INFO's `evicted_keys` before any eviction.
#[test]
fn eviction_commands_answer_as_redis_does() {
    let real = common::redis::RealRedis::start(&[]);
    let ours = Server::start("evict-diff", &[]);
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "maxmemory-policy", "bogus"],
        &["CONFIG", "SET", "maxmemory-policy", "Volatile-TTL"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["CONFIG", "SET", "maxmemory-samples", "0"],
        &["CONFIG", "SET", "maxmemory-samples", "x"],
        &["CONFIG", "SET", "maxmemory-samples", "10"],
        &["CONFIG", "GET", "maxmemory-samples"],
        &["CONFIG", "SET", "lfu-log-factor", "-1"],
        &["CONFIG", "SET", "lfu-decay-time", "-1"],
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "101"],
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "-1"],
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "x"],
        &["CONFIG", "GET", "maxmemory-eviction-tenacity"],
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"],
        &["CONFIG", "GET", "maxmemory-eviction-tenacity"],
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "10"],
        &["CONFIG", "SET", "lazyfree-lazy-eviction", "maybe"],
        &["CONFIG", "SET", "lazyfree-lazy-eviction", "yes"],
        // One name each: a pattern's matches come in Redis's dictionary order, ours in the
        // directive table's (clients read CONFIG GET as a map).
        &["CONFIG", "GET", "lfu-log-factor"],
        &["CONFIG", "GET", "lfu-decay-time"],
        &["CONFIG", "GET", "lazyfree-lazy-eviction"],
        // A string that is not an integer: Redis shares small integers' objects, whose access
        // bits are every such key's.
        &["SET", "k", "value"],
        &["OBJECT", "FREQ", "k"],
        &["OBJECT", "IDLETIME", "k"],
        &["OBJECT", "FREQ", "nokey"],
        &["OBJECT", "IDLETIME", "nokey"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["SET", "f", "value"],
        &["OBJECT", "FREQ", "f"],
        &["OBJECT", "IDLETIME", "f"],
        &["TOUCH", "f", "nokey", "f"],
        &["TOUCH"],
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    ];
    for proto in ["2", "3"] {
        let mut r = real.raw();
        let mut o = RawConn::connect(ours.addr);
        r.cmd_str(&["HELLO", proto]);
        o.cmd_str(&["HELLO", proto]);
        r.cmd_str(&["FLUSHALL"]);
        o.cmd_str(&["FLUSHALL"]);
        for argv in script {
            assert_eq!(
                String::from_utf8_lossy(&o.cmd_str(argv)),
                String::from_utf8_lossy(&r.cmd_str(argv)),
                "RESP{proto} {argv:?}"
            );
        }
        let evicted = |c: &mut RawConn| {
            let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "stats"])).to_string();
            info.lines()
                .find(|l| l.starts_with("evicted_keys:"))
                .map(str::to_string)
        };
        assert_eq!(evicted(&mut o), evicted(&mut r));
    }
}

/// An integer reply's value.
fn int_of(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    text.trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer: {text}"))
}

/// The RDB's access records (IDLE under an LRU policy, FREQ under an LFU one, before each key)
/// cross a file both ways, as Redis writes and reads them: a key idle 2 s in Redis's file is idle
/// 2 s here, and stays so across DEBUG RELOAD; a key read 200 times here has the same LFU
/// counter in Redis after it loads our file (no decay, `lfu-decay-time 0`, so the counters do not
/// move between the reads).
#[test]
fn access_records_cross_an_rdb_both_ways() {
    // Redis -> hyperbloom, LRU.
    let dir = common::tempdir("evict-rdb-lru");
    let dir_arg = dir.to_str().unwrap().to_string();
    let real =
        common::redis::RealRedis::start(&["--dir", &dir_arg, "--maxmemory-policy", "allkeys-lru"]);
    let mut r = real.raw();
    assert_eq!(r.cmd_str(&["SET", "old", "v"]), b"+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(2200));
    assert_eq!(r.cmd_str(&["SET", "fresh", "v"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    drop(r);
    drop(real);
    let mut ours = Server::start_in(
        dir,
        &[
            "--maxmemory-policy",
            "allkeys-lru",
            "--enable-debug-command",
            "yes",
        ],
    );
    common::wait_loaded(&mut ours.conn);
    let idle = |s: &mut Server, key: &str| int_of(&s.conn.cmd_str(&["OBJECT", "IDLETIME", key]));
    assert!(idle(&mut ours, "old") >= 2, "{}", idle(&mut ours, "old"));
    assert!(
        idle(&mut ours, "fresh") <= 1,
        "{}",
        idle(&mut ours, "fresh")
    );
    // RESTORE's IDLETIME sets it as the IDLE record does (FREQ is ignored under LRU).
    let payload = ours.conn.cmd_str(&["DUMP", "fresh"]);
    let payload = bulk_of(&payload);
    let restore = |s: &mut Server, key: &str, opt: &str, n: &str| {
        let argv: [&[u8]; 6] = [
            b"RESTORE",
            key.as_bytes(),
            b"0",
            &payload,
            opt.as_bytes(),
            n.as_bytes(),
        ];
        assert_eq!(s.conn.cmd(&argv), b"+OK\r\n");
    };
    restore(&mut ours, "restored", "IDLETIME", "1000");
    let restored = idle(&mut ours, "restored");
    assert!((1000..=1001).contains(&restored), "{restored}");
    restore(&mut ours, "by-freq", "FREQ", "77");
    assert!(idle(&mut ours, "by-freq") <= 1);
    // Our own file keeps it too.
    assert_eq!(ours.conn.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert!(idle(&mut ours, "old") >= 2, "{}", idle(&mut ours, "old"));
    assert!(idle(&mut ours, "restored") >= 1000);
    drop(ours);

    // hyperbloom -> Redis, LFU.
    let lfu = ["--maxmemory-policy", "allkeys-lfu", "--lfu-decay-time", "0"];
    let mut ours = Server::start("evict-rdb-lfu", &lfu);
    assert_eq!(ours.conn.cmd_str(&["SET", "hot", "v"]), b"+OK\r\n");
    assert_eq!(ours.conn.cmd_str(&["SET", "cold", "v"]), b"+OK\r\n");
    for _ in 0..200 {
        ours.conn.cmd_str(&["GET", "hot"]);
    }
    let freq = |c: &mut RawConn, key: &str| int_of(&c.cmd_str(&["OBJECT", "FREQ", key]));
    // (DUMP reads its key, which counts as an access, as in Redis.)
    let payload = ours.conn.cmd_str(&["DUMP", "cold"]);
    let payload = bulk_of(&payload);
    let argv: [&[u8]; 6] = [b"RESTORE", b"given", b"0", &payload, b"FREQ", b"77"];
    assert_eq!(ours.conn.cmd(&argv), b"+OK\r\n");
    assert_eq!(freq(&mut ours.conn, "given"), 77);
    let hot = freq(&mut ours.conn, "hot");
    assert!(hot > 6, "{hot}");
    let cold = freq(&mut ours.conn, "cold");
    assert_eq!(ours.conn.cmd_str(&["SAVE"]), b"+OK\r\n");
    let dir_arg = ours.dir.to_str().unwrap().to_string();
    let mut args = vec!["--dir", &dir_arg];
    args.extend(lfu);
    let real = common::redis::RealRedis::start(&args);
    let mut r = real.raw();
    assert_eq!(freq(&mut r, "hot"), hot);
    assert_eq!(freq(&mut r, "cold"), cold);
    assert_eq!(freq(&mut r, "given"), 77);
}

/// A bulk reply's payload.
fn bulk_of(reply: &[u8]) -> Vec<u8> {
    let nl = reply
        .iter()
        .position(|&b| b == b'\n')
        .expect("a bulk reply");
    reply[nl + 1..reply.len() - 2].to_vec()
}

/// DEBUG OBJECT answers as redis-server 7.0.15's: refcount, encoding and serializedlength
/// exactly (the RDB encoding, compressed or not), `lru` the same clock within a second or two
/// and `lru_seconds_idle` 0 for keys just written; the address is each process's own.
#[test]
fn debug_object_answers_as_redis_does() {
    let real = common::redis::RealRedis::start(&["--enable-debug-command", "yes"]);
    let ours = Server::start("evict-debug-object", &["--enable-debug-command", "yes"]);
    let mut r = real.raw();
    let mut o = RawConn::connect(ours.addr);
    let long = "abc".repeat(100);
    let writes: &[&[&str]] = &[
        &["SET", "short", "hello"],
        &["SET", "int", "12345"],
        &["SET", "big", "123456789012"],
        &["SET", "long", &long],
        &["SET", "appended", "x"],
        &["APPEND", "appended", "y"],
        &["PFADD", "hll", "a", "b", "c"],
    ];
    for w in writes {
        assert_eq!(r.cmd_str(w), o.cmd_str(w), "{w:?}");
    }
    let fields = |reply: &[u8]| -> Vec<(String, String)> {
        let text = String::from_utf8_lossy(reply).into_owned();
        assert!(text.starts_with("+Value at:"), "{text}");
        text.trim_start_matches('+')
            .trim_end()
            .split(' ')
            .filter_map(|f| f.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    for key in ["short", "int", "big", "long", "appended", "hll"] {
        let theirs = fields(&r.cmd_str(&["DEBUG", "OBJECT", key]));
        let mine = fields(&o.cmd_str(&["DEBUG", "OBJECT", key]));
        let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(names(&theirs), names(&mine), "{key}");
        for ((name, want), (_, got)) in theirs.iter().zip(&mine) {
            match name.as_str() {
                "at" => {}
                "lru" => {
                    let (a, b): (i64, i64) = (want.parse().unwrap(), got.parse().unwrap());
                    assert!((a - b).abs() <= 2, "{key}: lru {a} against {b}");
                }
                "lru_seconds_idle" => assert!(got.parse::<u64>().unwrap() <= 1, "{key}"),
                _ => assert_eq!(want, got, "{key}: {name}"),
            }
        }
    }
    assert_eq!(
        r.cmd_str(&["DEBUG", "OBJECT", "nokey"]),
        o.cmd_str(&["DEBUG", "OBJECT", "nokey"])
    );
    // INFO's lru_clock is the same clock (it was a constant 0).
    let clock = |c: &mut RawConn| -> i64 {
        let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "server"])).into_owned();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("lru_clock:"))
            .expect("lru_clock")
            .to_string();
        line.trim().parse().unwrap()
    };
    let (a, b) = (clock(&mut r), clock(&mut o));
    assert!((a - b).abs() <= 2, "lru_clock {a} against {b}");
}

/// The fields of an INFO section, in order, with their values.
fn info_fields(reply: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(reply)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('$') && l.contains(':'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// INFO memory lists redis-server 7.0's fields in its order, with figures of our own: the RSS the
/// kernel reports (it was `used_memory` again), a peak that outlives the memory it measured, a
/// startup figure under `used_memory`, and a breakdown that adds up.
#[test]
fn info_memory_has_redis_fields_and_real_figures() {
    let real = common::redis::RealRedis::start(&[]);
    let mut ours = Server::start("info-memory", &[]);
    let names = |fields: &[(String, String)]| -> Vec<String> {
        fields.iter().map(|(k, _)| k.clone()).collect()
    };
    let theirs = info_fields(&real.raw().cmd_str(&["INFO", "memory"]));
    let mine = info_fields(&ours.conn.cmd_str(&["INFO", "memory"]));
    assert_eq!(names(&mine), names(&theirs));

    let field = |fields: &[(String, String)], name: &str| -> i64 {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {fields:?}"))
    };
    // A 24 MB value, read by INFO, then deleted: the peak keeps it.
    assert_eq!(
        ours.conn.cmd_str(&["SETRANGE", "big", "25000000", "x"]),
        b":25000001\r\n"
    );
    let during = info_fields(&ours.conn.cmd_str(&["INFO", "memory"]));
    assert!(field(&during, "used_memory") > 25_000_000, "{during:?}");
    assert_eq!(ours.conn.cmd_str(&["DEL", "big"]), b":1\r\n");
    let after = info_fields(&ours.conn.cmd_str(&["INFO", "memory"]));
    let used = field(&after, "used_memory");
    assert!(used < 10_000_000, "{after:?}");
    assert!(field(&after, "used_memory_peak") > 25_000_000, "{after:?}");

    // The RSS is the kernel's figure for the process (VmRSS), not `used_memory`.
    let rss = field(&after, "used_memory_rss");
    let vm_rss = common::proc_status_kb(ours.child.id(), "VmRSS") as i64 * 1024;
    assert!(
        rss > vm_rss / 2 && rss < vm_rss * 2,
        "used_memory_rss {rss} against VmRSS {vm_rss}"
    );
    assert_eq!(
        field(&after, "mem_fragmentation_bytes"),
        rss - used,
        "{after:?}"
    );

    let startup = field(&after, "used_memory_startup");
    let overhead = field(&after, "used_memory_overhead");
    assert!(0 < startup && startup <= used, "{after:?}");
    assert!(overhead >= startup + field(&after, "mem_clients_normal"));
    assert!(field(&after, "mem_clients_normal") > 0, "{after:?}");
    assert_eq!(field(&after, "used_memory_dataset"), used - overhead);
    assert_eq!(field(&after, "mem_not_counted_for_evict"), 0);
    assert!(field(&after, "total_system_memory") > rss);
}

/// A replica that stops reading makes the backlog hold the stream beyond `repl-backlog-size`
/// (it is the replicas' output buffer). Redis leaves that part out of the `maxmemory`
/// comparison: counting it would evict the primary's keys because a replica is slow, and each
/// eviction's DEL would grow the buffer further. Before, 30 MB of SETs under a limit 40 MB above
/// the start evicted keys here; now none goes, INFO names the held bytes, and a write that
/// really crosses the limit still evicts.
#[test]
fn a_stalled_replica_does_not_make_its_primary_evict() {
    let mut s = Server::start(
        "evict-stalled-replica",
        &[
            "--maxmemory-policy",
            "allkeys-lru",
            "--repl-backlog-size",
            "1mb",
        ],
    );
    let base = s.used();
    let limit = base + (40 << 20);
    assert_eq!(
        s.conn
            .cmd_str(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        b"+OK\r\n"
    );
    // A replica that takes the snapshot's header, then reads nothing more.
    let mut replica = RawConn::connect(s.addr);
    assert_eq!(
        replica.cmd_str(&["REPLCONF", "listening-port", "1"]),
        b"+OK\r\n"
    );
    replica.send(&[b"PSYNC", b"?", b"-1"]);
    let header = replica.read_reply();
    assert!(header.starts_with(b"+FULLRESYNC"), "{header:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&s.conn.cmd_str(&["INFO", "replication"]))
        .contains("state=online")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never came online"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // 3,000 values of 10 KB: 30 MB of data, and as much through the replication stream.
    let set_values = |s: &mut Server, prefix: &str, n: usize| {
        let value = "v".repeat(10_000);
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let mut out = Vec::new();
            for i in chunk {
                let key = format!("{prefix}:{i}");
                out.extend(common::encode_command(&[
                    b"SET",
                    key.as_bytes(),
                    value.as_bytes(),
                ]));
            }
            s.conn.send_raw(&out);
            for _ in chunk {
                assert_eq!(s.conn.read_reply(), b"+OK\r\n");
            }
        }
    };
    set_values(&mut s, "key", 3000);
    let info = info_fields(&s.conn.cmd_str(&["INFO", "memory"]));
    let field = |name: &str| -> u64 {
        info.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {info:?}"))
    };
    let held = field("mem_clients_slaves");
    assert!(
        held > 10 << 20,
        "the stalled replica holds {held} bytes: {info:?}"
    );
    assert_eq!(field("mem_not_counted_for_evict"), held, "{info:?}");
    assert_eq!(field("mem_replication_backlog"), 1 << 20, "{info:?}");
    assert!(field("used_memory") > limit, "{info:?}");
    assert_eq!(
        s.evicted(),
        0,
        "keys evicted for the replica's buffer: {info:?}"
    );
    assert_eq!(s.dbsize(), 3000);

    // Data past the limit still evicts.
    set_values(&mut s, "more", 1500);
    assert!(s.evicted() > 0);
    drop(replica);
}

/// The keys of a MEMORY STATS reply in RESP2 (a flat array: key, value, ...), with a nested
/// map's keys prefixed by its own.
fn memory_stats_keys(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply).to_string();
    let lines: Vec<&str> = text.split("\r\n").collect();
    // Bulk strings whose next element starts a value: every other top-level element. Walk the
    // frames: `*n` opens an array, `$len` + payload is a bulk, `:n` an integer.
    let mut keys = Vec::new();
    let mut i = 1; // after the outer `*n`
    let mut expect_key = true;
    let mut nested_left = 0usize;
    let mut nested_key = true;
    let mut prefix = String::new();
    while i < lines.len() && !lines[i].is_empty() {
        let line = lines[i];
        if nested_left > 0 {
            if line.starts_with('$') {
                if nested_key {
                    keys.push(format!("{prefix}/{}", lines[i + 1]));
                }
                i += 2;
            } else {
                i += 1;
            }
            nested_key = !nested_key;
            nested_left -= 1;
            if nested_left == 0 {
                expect_key = true;
            }
            continue;
        }
        if expect_key {
            assert!(line.starts_with('$'), "{line} in {text}");
            prefix = lines[i + 1].to_string();
            keys.push(prefix.clone());
            i += 2;
            expect_key = false;
        } else if let Some(n) = line.strip_prefix('*') {
            nested_left = n.parse().unwrap();
            nested_key = true;
            i += 1;
        } else if line.starts_with('$') {
            i += 2;
            expect_key = true;
        } else {
            i += 1;
            expect_key = true;
        }
    }
    keys
}

/// MEMORY STATS, DOCTOR and PURGE answer as redis-server 7.0 does: the same STATS keys in the
/// same order for the same databases, the same DOCTOR text for an empty instance, the same
/// arity errors. With data: a peak twice the current use is what DOCTOR reports, and STATS
/// figures add up.
#[test]
fn memory_stats_doctor_and_purge_answer_as_redis() {
    let real = common::redis::RealRedis::start(&[]);
    let mut theirs = real.raw();
    let mut ours = Server::start("memory-stats", &[]);
    for c in [&mut theirs, &mut ours.conn] {
        assert_eq!(c.cmd_str(&["SET", "a", "1"]), b"+OK\r\n");
        assert_eq!(c.cmd_str(&["SET", "b", "2", "EX", "100"]), b"+OK\r\n");
        assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
        assert_eq!(c.cmd_str(&["SET", "c", "3"]), b"+OK\r\n");
    }
    let stats_theirs = theirs.cmd_str(&["MEMORY", "STATS"]);
    let stats_ours = ours.conn.cmd_str(&["MEMORY", "STATS"]);
    assert_eq!(
        memory_stats_keys(&stats_ours),
        memory_stats_keys(&stats_theirs)
    );
    for argv in [
        &["MEMORY", "DOCTOR"][..],
        &["MEMORY", "PURGE"],
        &["MEMORY", "STATS", "x"],
        &["MEMORY", "DOCTOR", "x"],
        &["MEMORY", "PURGE", "x"],
        &["MEMORY", "MALLOC-STATS", "x"],
        &["MEMORY", "HELP"],
    ] {
        assert_eq!(
            String::from_utf8_lossy(&ours.conn.cmd_str(argv)),
            String::from_utf8_lossy(&theirs.cmd_str(argv)),
            "{argv:?}"
        );
    }
    // RESP3: a map, its ratios doubles.
    ours.conn.cmd_str(&["HELLO", "3"]);
    let stats3 = String::from_utf8_lossy(&ours.conn.cmd_str(&["MEMORY", "STATS"])).to_string();
    assert!(stats3.starts_with('%'), "{stats3}");
    assert!(stats3.contains("$13\r\nfragmentation\r\n,"), "{stats3}");
    let doctor3 = ours.conn.cmd_str(&["MEMORY", "DOCTOR"]);
    assert!(doctor3.starts_with(b"="), "{doctor3:?}");
    ours.conn.cmd_str(&["HELLO", "2"]);

    // 60 MB read and let go: the peak is over 150 % of what is left.
    assert_eq!(ours.conn.cmd_str(&["SELECT", "0"]), b"+OK\r\n");
    let value = "x".repeat(1 << 20);
    for i in 0..60 {
        let key = format!("big:{i}");
        assert_eq!(ours.conn.cmd_str(&["SET", &key, &value]), b"+OK\r\n");
    }
    let used_before = ours.used();
    for i in 10..60 {
        let key = format!("big:{i}");
        assert_eq!(ours.conn.cmd_str(&["DEL", &key]), b":1\r\n");
    }
    assert!(used_before > 60 << 20);
    let doctor = String::from_utf8_lossy(&ours.conn.cmd_str(&["MEMORY", "DOCTOR"])).to_string();
    assert!(
        doctor.contains("Sam, I detected a few issues in this Redis instance memory implants:\n\n * Peak memory:"),
        "{doctor}"
    );
    assert!(
        doctor.ends_with("I'm here to keep you safe, Sam. I want to help you.\n\r\n"),
        "{doctor}"
    );
    let stats = String::from_utf8_lossy(&ours.conn.cmd_str(&["MEMORY", "STATS"])).to_string();
    let value_of = |name: &str| -> i64 {
        let at = stats
            .find(&format!("\r\n{name}\r\n"))
            .unwrap_or_else(|| panic!("{name}"));
        let rest = &stats[at + name.len() + 4..];
        let line = rest.split("\r\n").next().unwrap();
        line.trim_start_matches(':')
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {line}"))
    };
    assert!(value_of("peak.allocated") >= used_before as i64);
    assert_eq!(value_of("keys.count"), 13);
    assert_eq!(
        value_of("dataset.bytes"),
        value_of("total.allocated") - value_of("overhead.total")
    );
    assert!(value_of("dataset.bytes") > 10_000_000);
    assert_eq!(ours.conn.cmd_str(&["MEMORY", "PURGE"]), b"+OK\r\n");
    assert_eq!(
        ours.conn.cmd_str(&["MEMORY", "MALLOC-STATS"]),
        b"$45\r\nStats not supported for the current allocator\r\n"
    );
}
