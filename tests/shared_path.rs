//! The shared keyspace lock (`commands::shared_path`) under real concurrency: readers pipeline
//! `BF.EXISTS`, `GET`, `EXISTS` and `CF.EXISTS` on several connections while writers add, on a
//! test server with two runtime worker threads, so reads really run side by side with each other
//! and between writes. Every read of an item whose write was acknowledged before the read was sent
//! must see it: an unseen add is a false negative, the one error a filter must never make. At the
//! end, INFO commandstats must count every read exactly once (the shared path counts in atomics,
//! a run of one command per batch at a time).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{encode_command, start_server};

const WRITERS: usize = 2;
const READERS: usize = 3;
const PER_WRITER: u64 = 3000;
const BATCH: usize = 16;

fn info_field(text: &str, prefix: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or("")
        .trim()
        .to_string()
}

fn calls(stats: &str, cmd: &str) -> u64 {
    let line = info_field(stats, &format!("cmdstat_{cmd}:"));
    line.split(',')
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn concurrent_reads_see_every_acknowledged_write_and_are_all_counted() {
    let server = start_server();
    let mut setup = server.raw();
    assert_eq!(setup.cmd_str(&["CF.RESERVE", "cf", "100000"]), b"+OK\r\n");
    assert_eq!(
        setup.cmd_str(&["BF.RESERVE", "bf", "0.001", "100000"]),
        b"+OK\r\n"
    );
    assert_eq!(setup.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");

    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let writing = Arc::new(AtomicBool::new(true));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut c = server.raw();
            let acked = acked.clone();
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let item = format!("w{w}:{i}");
                    assert_eq!(c.cmd_str(&["BF.ADD", "bf", &item]), b":1\r\n", "{item}");
                    assert_eq!(c.cmd_str(&["CF.ADD", "cf", &item]), b":1\r\n");
                    assert_eq!(c.cmd_str(&["SET", &format!("k:{item}"), &item]), b"+OK\r\n");
                    // Acknowledged: from now on every read must see it.
                    acked[w].store(i + 1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let mut c = server.raw();
            let acked = acked.clone();
            let writing = writing.clone();
            std::thread::spawn(move || {
                let mut sent: u64 = 0;
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ r as u64;
                let mut rounds = 0u64;
                while writing.load(Ordering::SeqCst) || rounds < 20 {
                    rounds += 1;
                    let mut batch = Vec::new();
                    let mut expect = Vec::new();
                    for _ in 0..BATCH / 4 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let w = (seed % WRITERS as u64) as usize;
                        let n = acked[w].load(Ordering::SeqCst);
                        if n == 0 {
                            continue;
                        }
                        let item = format!("w{w}:{}", (seed >> 8) % n);
                        let key = format!("k:{item}");
                        batch.extend(encode_command(&[b"BF.EXISTS", b"bf", item.as_bytes()]));
                        expect.push(b":1\r\n".to_vec());
                        batch.extend(encode_command(&[b"CF.EXISTS", b"cf", item.as_bytes()]));
                        expect.push(b":1\r\n".to_vec());
                        batch.extend(encode_command(&[b"GET", key.as_bytes()]));
                        expect.push(format!("${}\r\n{item}\r\n", item.len()).into_bytes());
                        batch.extend(encode_command(&[b"EXISTS", key.as_bytes()]));
                        expect.push(b":1\r\n".to_vec());
                    }
                    if batch.is_empty() {
                        std::thread::yield_now();
                        continue;
                    }
                    c.send_raw(&batch);
                    for want in &expect {
                        let got = c.read_reply();
                        assert_eq!(
                            String::from_utf8_lossy(&got),
                            String::from_utf8_lossy(want),
                            "a read missed an acknowledged write"
                        );
                    }
                    sent += expect.len() as u64 / 4;
                }
                sent
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    writing.store(false, Ordering::SeqCst);
    let per_command: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    assert!(per_command > 0);

    let stats = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "commandstats"])).into_owned();
    let writes = WRITERS as u64 * PER_WRITER;
    assert_eq!(calls(&stats, "bf.exists"), per_command, "{stats}");
    assert_eq!(calls(&stats, "cf.exists"), per_command, "{stats}");
    assert_eq!(calls(&stats, "get"), per_command, "{stats}");
    assert_eq!(calls(&stats, "exists"), per_command, "{stats}");
    assert_eq!(calls(&stats, "bf.add"), writes, "{stats}");
    let info = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "stats"])).into_owned();
    let total: u64 = info_field(&info, "total_commands_processed:")
        .parse()
        .expect("total_commands_processed");
    // Every read and write, plus CONFIG RESETSTAT and INFO commandstats (each counted once it ran).
    assert_eq!(total, 4 * per_command + 3 * writes + 2, "{info}");
}

/// The same reads pipelined in one batch around writes answer exactly as when sent one by one:
/// a batch that starts on the shared lock and meets a write moves to the exclusive one.
#[test]
fn mixed_pipelines_answer_as_one_by_one() {
    let script: Vec<Vec<&str>> = vec![
        vec!["GET", "a"],
        vec!["EXISTS", "a", "b"],
        vec!["SET", "a", "1"],
        vec!["GET", "a"],
        vec!["BF.EXISTS", "bf", "x"],
        vec!["BF.ADD", "bf", "x"],
        vec!["BF.EXISTS", "bf", "x"],
        vec!["GET", "bf"],
        vec!["CF.EXISTS", "bf", "x"],
        vec!["MGET", "a", "bf", "zz"],
        vec!["STRLEN", "a"],
        vec!["PING"],
        vec!["ECHO", "e"],
        vec!["PING", "a", "b"],
        vec!["GET"],
        vec!["SET", "b", "2", "PX", "1"],
        vec!["CF.ADD", "cf", "y"],
        vec!["CF.COUNT", "cf", "y"],
        vec!["CF.MEXISTS", "cf", "y", "z"],
        vec!["BF.MEXISTS", "bf", "x", "y"],
        // Transactions: of reads (the shared path's), with a write, with a queuing error, an
        // empty one, one discarded, and one with a read that fails.
        vec!["MULTI"],
        vec!["GET", "a"],
        vec!["BF.EXISTS", "bf", "x"],
        vec!["MGET", "a", "bf"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["GET", "a"],
        vec!["SET", "c", "3"],
        vec!["GET", "c"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["GET"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["GET", "a"],
        vec!["DISCARD"],
        vec!["MULTI"],
        vec!["GET", "bf"],
        vec!["CF.EXISTS", "cf", "y"],
        vec!["EXEC"],
        vec!["EXEC"],
        vec!["GET", "c"],
    ];
    let one_by_one = {
        let server = start_server();
        let mut c = server.raw();
        script
            .iter()
            .map(|w| c.cmd_str(w))
            .collect::<Vec<Vec<u8>>>()
    };
    let server = start_server();
    let mut c = server.raw();
    let mut batch = Vec::new();
    for w in &script {
        let argv: Vec<&[u8]> = w.iter().map(|s| s.as_bytes()).collect();
        batch.extend(encode_command(&argv));
    }
    c.send_raw(&batch);
    for (w, want) in script.iter().zip(&one_by_one) {
        let got = c.read_reply();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{w:?}"
        );
    }
}

/// Sends `commands` pipelined, `BATCH` at a time; their replies.
fn pipeline_replies(c: &mut common::RawConn, commands: &[(Vec<String>, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut replies = Vec::with_capacity(commands.len());
    for chunk in commands.chunks(BATCH) {
        let mut out = Vec::new();
        for (argv, _) in chunk {
            let argv: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
            out.extend(encode_command(&argv));
        }
        c.send_raw(&out);
        replies.extend(chunk.iter().map(|_| c.read_reply()));
    }
    replies
}

/// Sends `commands` pipelined, `BATCH` at a time, and checks every reply.
fn pipeline(c: &mut common::RawConn, commands: &[(Vec<String>, Vec<u8>)]) {
    for ((argv, want), got) in commands.iter().zip(pipeline_replies(c, commands)) {
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{argv:?}"
        );
    }
}

/// `n` keys `fill:0`... set through `c`: a table big enough (from 32k keys) for keys to be added
/// under the shared lock.
fn fill(c: &mut common::RawConn, n: usize) {
    let commands: Vec<(Vec<String>, Vec<u8>)> = (0..n)
        .map(|i| {
            let argv = vec!["SET".into(), format!("fill:{i}"), "x".into()];
            (argv, b"+OK\r\n".to_vec())
        })
        .collect();
    pipeline(c, &commands);
}

/// Connection `t` of `conns` pipelines `commands(t)`, all at once, each on a thread of its own;
/// returns when every one is answered as expected.
fn pipeline_from_connections(
    conns: Vec<common::RawConn>,
    commands: impl Fn(usize) -> Vec<(Vec<String>, Vec<u8>)>,
) {
    let threads: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(t, mut c)| {
            let commands = commands(t);
            std::thread::spawn(move || pipeline(&mut c, &commands))
        })
        .collect();
    for t in threads {
        t.join().expect("connection");
    }
}

/// Keys added under the shared lock (`store::keytable::KeyTable::insert_shared`, on with the
/// test server's two worker threads): four connections pipeline SETs and INCRs of new keys into
/// a table big enough for them to stay shared, while a fifth takes BGSAVE snapshots. Every key
/// must be there, once, with its value; DBSIZE, KEYS and the RDB must all count them.
#[test]
fn new_keys_from_many_connections_are_all_kept_and_counted() {
    const FILL: usize = 40_000;
    const PER_CONN: usize = 10_000;
    const CONNS: usize = 4;
    let dir = common::tempdir("shared-inserts");
    let dir_arg = dir.to_str().unwrap().to_string();
    let server = common::start_with(&["--dir", &dir_arg, "--enable-debug-command", "yes"]);
    let mut setup = server.raw();
    fill(&mut setup, FILL);
    let snapshots = {
        let mut c = server.raw();
        std::thread::spawn(move || {
            for _ in 0..5 {
                let reply = c.cmd_str(&["BGSAVE"]);
                assert!(
                    reply.starts_with(b"+"),
                    "{}",
                    String::from_utf8_lossy(&reply)
                );
                while common::persistence_field(&mut c, "rdb_bgsave_in_progress") == "1" {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        })
    };
    pipeline_from_connections((0..CONNS).map(|_| server.raw()).collect(), |t| {
        (0..PER_CONN)
            .flat_map(|i| {
                [
                    (
                        vec!["SET".into(), format!("k:{t}:{i}"), i.to_string()],
                        b"+OK\r\n".to_vec(),
                    ),
                    (
                        vec!["INCRBY".into(), format!("c:{t}:{i}"), "5".into()],
                        b":5\r\n".to_vec(),
                    ),
                ]
            })
            .collect()
    });
    snapshots.join().expect("snapshots");
    let want = FILL + 2 * CONNS * PER_CONN;
    assert_eq!(
        setup.cmd_str(&["DBSIZE"]),
        format!(":{want}\r\n").into_bytes()
    );
    let keys = setup.cmd_str(&["KEYS", "*"]);
    assert!(
        keys.starts_with(format!("*{want}\r\n").as_bytes()),
        "KEYS counts every key"
    );
    for t in 0..CONNS {
        for i in (0..PER_CONN).step_by(53) {
            let v = i.to_string();
            let want = format!("${}\r\n{v}\r\n", v.len()).into_bytes();
            assert_eq!(setup.cmd_str(&["GET", &format!("k:{t}:{i}")]), want);
            assert_eq!(
                setup.cmd_str(&["GET", &format!("c:{t}:{i}")]),
                b"$1\r\n5\r\n"
            );
        }
    }
    // A save after the inserts holds every key: reloaded, the count is the same.
    assert_eq!(setup.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(
        setup.cmd_str(&["DBSIZE"]),
        format!(":{want}\r\n").into_bytes()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same on the binary with two runtime workers and `appendonly yes`: keys added under the
/// shared lock enter the AOF (a created filter's BF.RESERVE with its BF.ADD, as one
/// MULTI/EXEC), and a restart from the AOF alone brings every one of them back.
#[test]
fn new_keys_added_under_the_shared_lock_come_back_from_the_aof() {
    const FILL: usize = 40_000;
    const PER_CONN: usize = 3_000;
    const CONNS: usize = 3;
    let dir = common::tempdir("shared-inserts-aof");
    // The first run creates filters of 1000 by default, the restart's default is 100: what comes
    // back is what the AOF's BF.RESERVE says.
    let start = |initial_size: &str| {
        let (server, port) = common::spawn_listening(|port| {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
            command
                .args(common::binary_args(port, &dir, ""))
                .args(["--appendonly", "yes", "--appendfsync", "no"])
                .args(["--bf-initial-size", initial_size])
                .env("HYPERBLOOM_WORKERS", "2");
            command
        });
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut c = common::connect_when_ready(addr);
        common::wait_loaded(&mut c);
        (server, addr, c)
    };
    let (server, addr, mut setup) = start("1000");
    fill(&mut setup, FILL);
    pipeline_from_connections(
        (0..CONNS).map(|_| common::RawConn::connect(addr)).collect(),
        |t| {
            (0..PER_CONN)
                .flat_map(|i| {
                    [
                        (
                            vec!["SET".into(), format!("k:{t}:{i}"), i.to_string()],
                            b"+OK\r\n".to_vec(),
                        ),
                        (
                            vec!["INCR".into(), format!("c:{t}:{i}")],
                            b":1\r\n".to_vec(),
                        ),
                        (
                            vec!["BF.ADD".into(), format!("bf:{t}:{i}"), "item".into()],
                            b":1\r\n".to_vec(),
                        ),
                        (
                            vec![
                                "BF.MADD".into(),
                                format!("bm:{t}:{i}"),
                                "a".into(),
                                "b".into(),
                            ],
                            b"*2\r\n:1\r\n:1\r\n".to_vec(),
                        ),
                        (
                            vec!["CF.ADD".into(), format!("cf:{t}:{i}"), "item".into()],
                            b":1\r\n".to_vec(),
                        ),
                        // A TTL, which enters the AOF as `SET key value PXAT ms`.
                        (
                            vec![
                                "SET".into(),
                                format!("e:{t}:{i}"),
                                "v".into(),
                                "EX".into(),
                                "1000".into(),
                            ],
                            b"+OK\r\n".to_vec(),
                        ),
                    ]
                })
                .collect()
        },
    );
    // TTLs cleared (every third `e:` key set again without one) and keys with a TTL that come
    // and go, from all connections at once.
    pipeline_from_connections(
        (0..CONNS).map(|_| common::RawConn::connect(addr)).collect(),
        |t| {
            (0..PER_CONN)
                .flat_map(|i| {
                    let clear = (i % 3 == 0).then(|| {
                        (
                            vec!["SET".into(), format!("e:{t}:{i}"), "w".into()],
                            b"+OK\r\n".to_vec(),
                        )
                    });
                    clear.into_iter().chain([
                        (
                            vec![
                                "PSETEX".into(),
                                format!("x:{t}:{i}"),
                                "1000000".into(),
                                "v".into(),
                            ],
                            b"+OK\r\n".to_vec(),
                        ),
                        (vec!["DEL".into(), format!("x:{t}:{i}")], b":1\r\n".to_vec()),
                    ])
                })
                .collect()
        },
    );
    // Then every other SET key deleted, again from all connections at once.
    pipeline_from_connections(
        (0..CONNS).map(|_| common::RawConn::connect(addr)).collect(),
        |t| {
            (0..PER_CONN)
                .step_by(2)
                .map(|i| (vec!["DEL".into(), format!("k:{t}:{i}")], b":1\r\n".to_vec()))
                .collect()
        },
    );
    let want = FILL + 6 * CONNS * PER_CONN - CONNS * PER_CONN.div_ceil(2);
    let ttls = CONNS * (PER_CONN - PER_CONN.div_ceil(3));
    let keyspace = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "keyspace"])).to_string();
    assert!(
        keyspace.contains(&format!("db0:keys={want},expires={ttls},")),
        "{keyspace}"
    );
    assert_eq!(
        setup.cmd_str(&["DBSIZE"]),
        format!(":{want}\r\n").into_bytes()
    );
    // SHUTDOWN NOSAVE: no RDB, so the restart loads the AOF alone.
    setup.send(&[b"SHUTDOWN", b"NOSAVE"]);
    let mut child = server.into_child();
    assert!(child.wait().expect("server exits").success());
    assert!(!dir.join("dump.rdb").exists(), "the AOF is what loads");
    let (_server, _, mut c) = start("100");
    assert_eq!(c.cmd_str(&["DBSIZE"]), format!(":{want}\r\n").into_bytes());
    let keyspace = String::from_utf8_lossy(&c.cmd_str(&["INFO", "keyspace"])).to_string();
    assert!(
        keyspace.contains(&format!("db0:keys={want},expires={ttls},")),
        "{keyspace}"
    );
    for t in 0..CONNS {
        for i in (0..PER_CONN).step_by(41) {
            let v = i.to_string();
            let want = if i % 2 == 0 {
                b"$-1\r\n".to_vec()
            } else {
                format!("${}\r\n{v}\r\n", v.len()).into_bytes()
            };
            assert_eq!(c.cmd_str(&["GET", &format!("k:{t}:{i}")]), want);
            assert_eq!(c.cmd_str(&["GET", &format!("c:{t}:{i}")]), b"$1\r\n1\r\n");
            let bf = format!("bf:{t}:{i}");
            assert_eq!(c.cmd_str(&["BF.EXISTS", &bf, "item"]), b":1\r\n");
            // Made with the first run's defaults, as the BF.RESERVE in the AOF says.
            let info = c.cmd_str(&["BF.INFO", &bf, "CAPACITY"]);
            assert_eq!(
                info,
                b"*1\r\n:1000\r\n",
                "{}",
                String::from_utf8_lossy(&info)
            );
            let cf = format!("cf:{t}:{i}");
            assert_eq!(c.cmd_str(&["CF.EXISTS", &cf, "item"]), b":1\r\n");
            let bm = format!("bm:{t}:{i}");
            assert_eq!(
                c.cmd_str(&["BF.MEXISTS", &bm, "a", "b"]),
                b"*2\r\n:1\r\n:1\r\n"
            );
            // The TTL as set (PXAT in the AOF), or cleared; the keys that came and went, gone.
            let e = format!("e:{t}:{i}");
            let ttl = c.cmd_str(&["TTL", &e]);
            if i % 3 == 0 {
                assert_eq!(ttl, b":-1\r\n");
                assert_eq!(c.cmd_str(&["GET", &e]), b"$1\r\nw\r\n");
            } else {
                let secs: i64 = String::from_utf8_lossy(&ttl[1..ttl.len() - 2])
                    .parse()
                    .expect("an integer reply");
                assert!((900..=1000).contains(&secs), "TTL {secs}");
            }
            assert_eq!(c.cmd_str(&["EXISTS", &format!("x:{t}:{i}")]), b":0\r\n");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// MSET and MSETNX under the shared lock (taken on the test server's two worker threads): four
/// connections pipeline MSETs of new keys (each with a key repeated, and one key written by every
/// connection) and MSETNXs of new keys into a table big enough for keys to be added there. Every
/// command must answer as on one lock: the shared handler checks all its keys before it writes
/// one, and the other connections' batches, which move the table's key count meanwhile, must not
/// make a checked key fail (they once did: an internal error mid-MSET). Then every key is there
/// with its last value, and DBSIZE counts each once.
#[test]
fn msets_from_many_connections_write_every_pair() {
    const FILL: usize = 40_000;
    const PER_CONN: usize = 3_000;
    const CONNS: usize = 4;
    let server = start_server();
    let mut setup = server.raw();
    fill(&mut setup, FILL);
    let conns = (0..CONNS).map(|_| server.raw()).collect();
    pipeline_from_connections(conns, |t| {
        (0..PER_CONN)
            .map(|i| {
                if i % 3 == 2 {
                    let argv = [
                        "MSETNX",
                        &format!("nx:{t}:{i}:a"),
                        "1",
                        &format!("nx:{t}:{i}:b"),
                        "2",
                    ];
                    (argv.map(String::from).to_vec(), b":1\r\n".to_vec())
                } else {
                    let mut argv = vec!["MSET".to_string()];
                    for j in 0..5 {
                        argv.extend([format!("m:{t}:{i}:{j}"), format!("{t}:{i}:{j}")]);
                    }
                    // A key repeated (its last value stays) and one every connection writes.
                    argv.extend([format!("m:{t}:{i}:0"), "last".into()]);
                    argv.extend(["shared".into(), format!("{t}")]);
                    (argv, b"+OK\r\n".to_vec())
                }
            })
            .collect()
    });
    let stats = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "commandstats"])).into_owned();
    for cmd in ["mset", "msetnx"] {
        let line = info_field(&stats, &format!("cmdstat_{cmd}:"));
        assert!(line.ends_with("failed_calls=0"), "{cmd}: {stats}");
    }
    let msets = (0..PER_CONN).filter(|i| i % 3 != 2).count();
    let msetnxs = PER_CONN - msets;
    let want = FILL + CONNS * (msets * 5 + msetnxs * 2) + 1;
    assert_eq!(
        setup.cmd_str(&["DBSIZE"]),
        format!(":{want}\r\n").into_bytes()
    );
    for t in 0..CONNS {
        for i in [0, PER_CONN / 2, PER_CONN - 2] {
            let reply = setup.cmd_str(&["MGET", &format!("m:{t}:{i}:0"), &format!("m:{t}:{i}:4")]);
            let four = format!("{t}:{i}:4");
            assert_eq!(
                String::from_utf8_lossy(&reply),
                format!("*2\r\n$4\r\nlast\r\n${}\r\n{four}\r\n", four.len())
            );
        }
    }
}

/// PFADD under the shared lock, as per-page distinct counting uses it: four connections create
/// and feed small sparse HLLs (a few past `hll-sparse-max-bytes`, turning dense) in a table big
/// enough for keys to be added there. Each connection owns its keys, so each key sees its adds in
/// one order; a second server fed the same commands from one connection, with every write on
/// the exclusive path (keyspace events on keep writes off the shared one), must answer the same
/// and end with the same bytes in every key.
#[test]
fn pfadds_from_many_connections_leave_what_one_connection_leaves() {
    const FILL: usize = 40_000;
    const PER_CONN: usize = 4_000;
    const CONNS: usize = 4;
    const PAGES: usize = 300;
    let commands = |t: usize| -> Vec<(Vec<String>, Vec<u8>)> {
        (0..PER_CONN)
            .map(|i| {
                let page = format!("page:{t}:{}", i % PAGES);
                // Page 0 of each connection gets many visitors at once: it turns dense.
                let visitors = if i % PAGES == 0 { 400 } else { 1 };
                let argv = ["PFADD".to_string(), page]
                    .into_iter()
                    .chain((0..visitors).map(|v| format!("visitor:{i}:{v}")))
                    .collect();
                (argv, b":1\r\n".to_vec())
            })
            .collect()
    };
    // Which PFADDs change a register is not known beforehand: compare replies across servers.
    let shared = start_server();
    let mut setup = shared.raw();
    fill(&mut setup, FILL);
    let replies: Vec<Vec<Vec<u8>>> = {
        let threads: Vec<_> = (0..CONNS)
            .map(|t| {
                let mut c = shared.raw();
                let commands = commands(t);
                std::thread::spawn(move || pipeline_replies(&mut c, &commands))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("connection"))
            .collect()
    };
    let one = common::start_with(&["--notify-keyspace-events", "Kx"]);
    let mut c = one.raw();
    fill(&mut c, FILL);
    for (t, got) in replies.iter().enumerate() {
        let want: Vec<(Vec<String>, Vec<u8>)> = commands(t)
            .into_iter()
            .zip(got)
            .map(|((argv, _), reply)| (argv, reply.clone()))
            .collect();
        // The same replies, from one connection.
        pipeline(&mut c, &want);
    }
    let stats = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "commandstats"])).into_owned();
    assert!(
        info_field(&stats, "cmdstat_pfadd:").ends_with("failed_calls=0"),
        "{stats}"
    );
    assert_eq!(setup.cmd_str(&["DBSIZE"]), c.cmd_str(&["DBSIZE"]));
    for t in 0..CONNS {
        for p in 0..PAGES {
            let key = format!("page:{t}:{p}");
            assert_eq!(
                setup.cmd_str(&["GET", &key]),
                c.cmd_str(&["GET", &key]),
                "{key}"
            );
        }
        let dense = format!("page:{t}:0");
        assert_eq!(
            setup.cmd_str(&["OBJECT", "ENCODING", &dense]),
            b"$3\r\nraw\r\n".to_vec()
        );
    }
}

/// Transactions of reads (MULTI, reads, EXEC, pipelined as redis-py sends them) run side by side
/// on the shared path while writers add: each sees every write acknowledged before it was sent,
/// and INFO commandstats counts each EXEC and each read it ran once.
#[test]
fn concurrent_transactions_of_reads_see_every_acknowledged_write() {
    let server = start_server();
    let mut setup = server.raw();
    assert_eq!(
        setup.cmd_str(&["BF.RESERVE", "bf", "0.001", "100000"]),
        b"+OK\r\n"
    );
    assert_eq!(setup.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    let acked = Arc::new(AtomicU64::new(0));
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let mut c = server.raw();
        let acked = acked.clone();
        std::thread::spawn(move || {
            for i in 0..PER_WRITER {
                let item = format!("t{i}");
                assert_eq!(c.cmd_str(&["BF.ADD", "bf", &item]), b":1\r\n");
                assert_eq!(c.cmd_str(&["SET", &format!("k:{item}"), &item]), b"+OK\r\n");
                acked.store(i + 1, Ordering::SeqCst);
            }
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let mut c = server.raw();
            let acked = acked.clone();
            let writing = writing.clone();
            std::thread::spawn(move || {
                let mut execs = 0u64;
                let mut seed = 0x2545_f491_4f6c_dd1du64 ^ r as u64;
                while writing.load(Ordering::SeqCst) || execs < 20 {
                    let n = acked.load(Ordering::SeqCst);
                    if n == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let mut batch = encode_command(&[b"MULTI"]);
                    let mut items = Vec::new();
                    for _ in 0..3 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let item = format!("t{}", seed % n);
                        let key = format!("k:{item}");
                        batch.extend(encode_command(&[b"BF.EXISTS", b"bf", item.as_bytes()]));
                        batch.extend(encode_command(&[b"GET", key.as_bytes()]));
                        items.push(item);
                    }
                    batch.extend(encode_command(&[b"EXEC"]));
                    c.send_raw(&batch);
                    assert_eq!(c.read_reply(), b"+OK\r\n");
                    for _ in 0..6 {
                        assert_eq!(c.read_reply(), b"+QUEUED\r\n");
                    }
                    let mut want = b"*6\r\n".to_vec();
                    for item in &items {
                        want.extend_from_slice(b":1\r\n");
                        want.extend(format!("${}\r\n{item}\r\n", item.len()).into_bytes());
                    }
                    assert_eq!(
                        String::from_utf8_lossy(&c.read_reply()),
                        String::from_utf8_lossy(&want),
                        "a transaction missed an acknowledged write"
                    );
                    execs += 1;
                }
                execs
            })
        })
        .collect();
    writer.join().expect("writer");
    writing.store(false, Ordering::SeqCst);
    let execs: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    let stats = String::from_utf8_lossy(&setup.cmd_str(&["INFO", "commandstats"])).into_owned();
    assert_eq!(calls(&stats, "exec"), execs, "{stats}");
    assert_eq!(calls(&stats, "multi"), execs, "{stats}");
    assert_eq!(calls(&stats, "bf.exists"), 3 * execs, "{stats}");
    assert_eq!(calls(&stats, "get"), 3 * execs, "{stats}");
}
