//! Operators' commands against a real redis-server 7: SLOWLOG, CLIENT REPLY, SWAPDB and CLIENT
//! PAUSE.
//!
//! SLOWLOG: with `slowlog-log-slower-than 0` every command is logged, so one script run on both
//! servers gives the same entries — the same arguments (cut and redacted alike), names and
//! order, ids one apart — whichever path ran the command here (the shared lock's pipelined runs,
//! a transaction of reads, the exclusive path). Ids, times, durations and addresses are the
//! servers' own and are compared for shape only. The errors and HELP are compared byte for byte,
//! and a command slower than the threshold is logged while a faster one is not.
//!
//! CLIENT REPLY: a pipelined script gets the same reply frames back from both servers. SWAPDB:
//! the same replies, WATCH outcomes included, and the swap replayed from our AOF. CLIENT PAUSE:
//! the same errors, and what waits under WRITE and ALL.

mod common;

use common::RawConn;

/// A RESP2 value, enough for SLOWLOG's replies.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Value>),
}

fn parse(buf: &[u8], at: &mut usize) -> Value {
    let end = buf[*at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a line")
        + *at;
    let line = std::str::from_utf8(&buf[*at + 1..end]).expect("utf-8 header");
    let kind = buf[*at];
    *at = end + 2;
    match kind {
        b':' => Value::Int(line.parse().expect("integer")),
        b'$' => {
            let n: usize = line.parse().expect("length");
            let v = buf[*at..*at + n].to_vec();
            *at += n + 2;
            Value::Bulk(v)
        }
        b'*' => {
            let n: usize = line.parse().expect("count");
            Value::Array((0..n).map(|_| parse(buf, at)).collect())
        }
        other => panic!(
            "unexpected {} in {:?}",
            other as char,
            String::from_utf8_lossy(buf)
        ),
    }
}

/// Sends each command to both servers and requires the same reply bytes.
fn same_replies(mine: &mut RawConn, theirs: &mut RawConn, script: &[&[&str]]) {
    for argv in script {
        assert_eq!(
            String::from_utf8_lossy(&mine.cmd_str(argv)),
            String::from_utf8_lossy(&theirs.cmd_str(argv)),
            "{argv:?}"
        );
    }
}

/// One entry without its server-specific fields: (arguments, name).
type Logged = (Vec<String>, String);

/// SLOWLOG GET -1, checked for shape (six fields, ids one apart, newest first, an address) and
/// reduced to what both servers must agree on, oldest first.
fn entries(c: &mut RawConn) -> Vec<Logged> {
    let reply = c.cmd_str(&["SLOWLOG", "GET", "-1"]);
    let Value::Array(list) = parse(&reply, &mut 0) else {
        panic!("{reply:?}")
    };
    let mut out = Vec::new();
    let mut last_id = None;
    for e in list {
        let Value::Array(f) = e else { panic!("entry") };
        let [Value::Int(id), Value::Int(time), Value::Int(us), Value::Array(args), Value::Bulk(peer), Value::Bulk(name)] =
            &f[..]
        else {
            panic!("{f:?}")
        };
        if let Some(last) = last_id {
            assert_eq!(*id, last - 1, "ids one apart, newest first");
        }
        last_id = Some(*id);
        assert!(*time > 1_700_000_000 && *us >= 0);
        assert!(String::from_utf8_lossy(peer).starts_with("127.0.0.1:"));
        let args = args
            .iter()
            .map(|a| match a {
                Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect();
        out.push((args, String::from_utf8_lossy(name).into_owned()));
    }
    out.reverse();
    out
}

fn script(c: &mut RawConn) {
    assert_eq!(c.cmd_str(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    c.cmd_str(&["SET", "a", "1"]);
    // A pipelined run of one command: the shared path logs each call.
    let mut batch = Vec::new();
    for key in ["a", "b", "a"] {
        batch.extend(common::encode_command(&[b"GET", key.as_bytes()]));
    }
    c.send_raw(&batch);
    for _ in 0..3 {
        c.read_reply();
    }
    let long = "v".repeat(200);
    let mut mset: Vec<String> = vec!["MSET".into(), "k".into(), long];
    mset.extend((0..40).map(|i| format!("x{i}")));
    let mset: Vec<&str> = mset.iter().map(|s| s.as_str()).collect();
    c.cmd_str(&mset);
    c.cmd_str(&["AUTH", "secret"]);
    c.cmd_str(&["HELLO", "2", "AUTH", "default", "secret"]);
    c.cmd_str(&["CONFIG", "SET", "masterauth", "pw", "maxmemory", "0"]);
    c.cmd_str(&["CLIENT", "SETNAME", "logger"]);
    // A transaction of reads: its commands are logged, EXEC is not.
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["GET", "a"]);
    c.cmd_str(&["STRLEN", "k"]);
    c.cmd_str(&["EXEC"]);
    // A transaction that writes, on the exclusive path.
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["INCR", "n"]);
    c.cmd_str(&["EXEC"]);
    c.cmd_str(&["BF.ADD", "bf", "x"]);
}

#[test]
fn slowlog_entries_are_redis_entries() {
    let real = common::redis::RealRedis::start(&["--slowlog-log-slower-than", "0"]);
    let ours = common::start_with(&["--slowlog-log-slower-than", "0"]);
    let mut theirs = real.raw();
    let mut mine = ours.raw();
    script(&mut theirs);
    script(&mut mine);
    let mut expected = entries(&mut theirs);
    // The reference has no BF.ADD (no module): ours logs it like any command.
    let got = entries(&mut mine);
    assert_eq!(
        got.last(),
        Some(&(
            vec!["BF.ADD".into(), "bf".into(), "x".into()],
            "logger".to_string()
        ))
    );
    expected.push(got.last().cloned().unwrap());
    assert_eq!(got, expected);
    // The MSET entry: 32 arguments, the value cut at 128 bytes.
    let mset = &got[5].0;
    assert_eq!(mset.len(), 32, "{got:?}");
    assert_eq!(mset[2], format!("{}... (72 more bytes)", "v".repeat(128)));
    assert_eq!(mset[31], "... (12 more arguments)");

    same_replies(
        &mut mine,
        &mut theirs,
        &[
            &["SLOWLOG", "GET", "-2"][..],
            &["SLOWLOG", "GET", "x"],
            &["SLOWLOG", "get", "1", "2"],
            &["SLOWLOG", "LEN", "1"],
            &["SLOWLOG", "nosuch"],
            &["SLOWLOG", "HELP"],
            &["SLOWLOG"],
            &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
            &["CONFIG", "SET", "slowlog-max-len", "-1"],
            &["CONFIG", "SET", "slowlog-max-len", "2"],
            &["CONFIG", "GET", "slowlog-max-len"],
            &["SLOWLOG", "LEN"],
            &["SET", "z", "1"],
            &["SLOWLOG", "LEN"],
        ],
    );
}

/// Only commands at least as slow as the threshold are logged: DEBUG SLEEP 0.05 is, at 20 ms,
/// and GET is not; with -1 nothing is.
#[test]
fn the_threshold_decides() {
    let ours = common::start_with(&[
        "--slowlog-log-slower-than",
        "20000",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = ours.raw();
    assert_eq!(c.cmd_str(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    c.cmd_str(&["SET", "a", "1"]);
    c.cmd_str(&["GET", "a"]);
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "0.05"]), b"+OK\r\n");
    let logged = entries(&mut c);
    assert_eq!(
        logged,
        vec![(
            vec!["DEBUG".into(), "SLEEP".into(), "0.05".into()],
            String::new()
        )]
    );
    let reply = c.cmd_str(&["SLOWLOG", "GET"]);
    let Value::Array(list) = parse(&reply, &mut 0) else {
        panic!()
    };
    let Value::Array(f) = &list[0] else { panic!() };
    assert!(
        matches!(f[2], Value::Int(us) if (50_000..5_000_000).contains(&us)),
        "{f:?}"
    );
    c.cmd_str(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    c.cmd_str(&["DEBUG", "SLEEP", "0.05"]);
    assert_eq!(c.cmd_str(&["SLOWLOG", "LEN"]), b":1\r\n");
}

/// Every reply frame until ECHO's `end` marker comes back.
fn replies_until_end(c: &mut RawConn) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let r = String::from_utf8_lossy(&c.read_reply()).into_owned();
        if r == "$3\r\nend\r\n" {
            return out;
        }
        out.push(r);
    }
}

/// CLIENT REPLY ON|OFF|SKIP drops the replies Redis drops: the same frames come back from a
/// pipelined script on both servers (OFF until ON, SKIP for one command, SKIP ignored while OFF,
/// a bad argument's error, WAIT silenced too).
#[test]
fn client_reply_drops_what_redis_drops() {
    let real = common::redis::RealRedis::start(&[]);
    let ours = common::start_with(&[]);
    let script: &[&[&str]] = &[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["GET", "nosuch"],
        &["INCR", "a", "b"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["PING"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["ECHO", "after two skips"],
        &["CLIENT", "REPLY", "SKIP"],
        &["WAIT", "0", "0"],
        &["WAIT", "0", "0"],
        &["CLIENT", "REPLY", "MAYBE"],
        &["CLIENT", "REPLY"],
        &["ECHO", "end"],
    ];
    let mut frames = Vec::new();
    for addr in [real.addr, ours.addr] {
        let mut c = RawConn::connect(addr);
        let mut out = Vec::new();
        for argv in script {
            let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            out.extend(common::encode_command(&argv));
        }
        c.send_raw(&out);
        frames.push(replies_until_end(&mut c));
    }
    assert_eq!(frames[1], frames[0]);
    assert_eq!(
        frames[0][..3],
        ["+OK\r\n", "$1\r\n1\r\n", "+PONG\r\n"].map(String::from)
    );
}

/// SWAPDB answers as redis-server does (errors, the keys and TTLs each index shows afterwards,
/// a WATCH of a key in either database failing its EXEC, a WATCH of a key in neither not), and
/// reaches the AOF: after a restart the databases are still swapped, a Bloom filter with them.
#[test]
fn swapdb_answers_as_redis_and_survives_a_restart() {
    let real = common::redis::RealRedis::start(&[]);
    let dir = common::tempdir("swapdb");
    let (mut child, addr) = common::spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut frames = Vec::new();
    for addr in [real.addr, addr] {
        let mut c = RawConn::connect(addr);
        let mut watcher = RawConn::connect(addr);
        let mut out = Vec::new();
        let mut run = |c: &mut RawConn, argv: &[&str]| {
            out.push(String::from_utf8_lossy(&c.cmd_str(argv)).into_owned());
        };
        for argv in [
            &["SET", "a", "zero"][..],
            &["SET", "t", "zero", "EX", "1000"],
            &["SELECT", "1"],
            &["SET", "a", "one"],
            &["SET", "b", "one"],
            &["SELECT", "0"],
            &["SWAPDB", "x", "1"],
            &["SWAPDB", "0", "x"],
            &["SWAPDB", "0", "16"],
            &["SWAPDB", "-1", "0"],
            &["SWAPDB", "0", "4294967296"],
            &["SWAPDB", "0"],
            &["SWAPDB", "0", "0"],
        ] {
            run(&mut c, argv);
        }
        // Watched in db 0: `a` (in both), `nowhere` (in neither); in db 1: `t`.
        run(&mut watcher, &["WATCH", "nowhere"]);
        run(&mut c, &["SWAPDB", "0", "1"]);
        for argv in [&["MULTI"][..], &["GET", "a"], &["EXEC"]] {
            run(&mut watcher, argv);
        }
        run(&mut watcher, &["WATCH", "a"]);
        run(&mut c, &["SWAPDB", "1", "0"]);
        run(&mut c, &["SWAPDB", "0", "1"]);
        for argv in [&["MULTI"][..], &["GET", "a"], &["EXEC"]] {
            run(&mut watcher, argv);
        }
        run(&mut watcher, &["SELECT", "1"]);
        run(&mut watcher, &["WATCH", "t"]);
        run(&mut c, &["SWAPDB", "0", "1"]);
        for argv in [&["MULTI"][..], &["GET", "t"], &["EXEC"]] {
            run(&mut watcher, argv);
        }
        for argv in [
            &["SELECT", "0"][..],
            &["GET", "a"],
            &["GET", "b"],
            &["TTL", "t"],
            &["DBSIZE"],
            &["SELECT", "1"],
            &["GET", "a"],
            &["TTL", "t"],
            &["DBSIZE"],
        ] {
            run(&mut c, argv);
        }
        frames.push(out);
    }
    assert_eq!(frames[1], frames[0]);
    // Watching a key in neither database: the EXEC ran.
    assert_eq!(frames[0][17], "*1\r\n$3\r\none\r\n");

    // Ours: a filter swaps with its database, and the AOF replays the swap.
    let mut c = RawConn::connect(addr);
    assert_eq!(c.cmd_str(&["SELECT", "2"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["BF.ADD", "f", "x"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["SWAPDB", "2", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "f"]), b":0\r\n");
    let dbsize_of = |c: &mut RawConn, db: &str| {
        assert_eq!(c.cmd_str(&["SELECT", db]), b"+OK\r\n");
        String::from_utf8_lossy(&c.cmd_str(&["DBSIZE"])).into_owned()
    };
    let before: Vec<String> = ["0", "1", "2", "3"]
        .iter()
        .map(|d| dbsize_of(&mut c, d))
        .collect();
    drop(c);
    let _ = child.kill();
    let _ = child.wait();
    let (_child, addr) = common::spawn_binary_with(&dir, "", &["--appendonly", "yes"]);
    let mut c = common::connect_when_ready(addr);
    common::wait_loaded(&mut c);
    let after: Vec<String> = ["0", "1", "2", "3"]
        .iter()
        .map(|d| dbsize_of(&mut c, d))
        .collect();
    assert_eq!(after, before);
    assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["BF.EXISTS", "f", "x"]), b":1\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

fn int_field(c: &mut RawConn, name: &str) -> i64 {
    common::info_number(c, "clients", name) as i64
}

/// CLIENT PAUSE and UNPAUSE: the same errors as redis-server; under WRITE a read runs and a
/// write waits (counted in `blocked_clients`) until UNPAUSE, and a pipelined batch answers what
/// came before its first write at once; under ALL every command waits for the end.
#[test]
fn client_pause_holds_back_what_redis_holds_back() {
    let real = common::redis::RealRedis::start(&[]);
    let ours = common::start_with(&[]);
    let mut theirs = real.raw();
    let mut admin = ours.raw();
    same_replies(
        &mut admin,
        &mut theirs,
        &[
            &["CLIENT", "PAUSE", "x"][..],
            &["CLIENT", "PAUSE", "-1"],
            &["CLIENT", "PAUSE", "10", "foo"],
            &["CLIENT", "PAUSE", "x", "foo"],
            &["CLIENT", "PAUSE", "10", "write", "extra"],
            &["CLIENT", "PAUSE"],
            &["CLIENT", "UNPAUSE", "x"],
            &["CLIENT", "PAUSE", "0"],
            &["CLIENT", "UNPAUSE"],
        ],
    );

    let addr = ours.addr;
    let timed = move |argv: &'static [&'static str]| {
        std::thread::spawn(move || {
            let mut c = RawConn::connect(addr);
            let started = std::time::Instant::now();
            let reply = c.cmd_str(argv);
            (reply, started.elapsed())
        })
    };
    assert_eq!(admin.cmd_str(&["SET", "a", "1"]), b"+OK\r\n");
    assert_eq!(
        admin.cmd_str(&["CLIENT", "PAUSE", "60000", "WRITE"]),
        b"+OK\r\n"
    );
    let (reply, took) = timed(&["GET", "a"]).join().unwrap();
    assert_eq!(
        (reply.as_slice(), took < std::time::Duration::from_secs(5)),
        (&b"$1\r\n1\r\n"[..], true)
    );
    let write = timed(&["SET", "a", "2"]);
    // A pipelined batch: its GET is answered, its INCR waits.
    let mut pipelined = RawConn::connect(addr);
    let mut batch = common::encode_command(&[b"GET", b"a"]);
    batch.extend(common::encode_command(&[b"INCR", b"n"]));
    pipelined.send_raw(&batch);
    assert_eq!(pipelined.read_reply(), b"$1\r\n1\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while int_field(&mut admin, "blocked_clients") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writes never blocked"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!write.is_finished(), "a write ran under CLIENT PAUSE WRITE");
    assert_eq!(admin.cmd_str(&["GET", "a"]), b"$1\r\n1\r\n");
    assert_eq!(admin.cmd_str(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    let (reply, _) = write.join().unwrap();
    assert_eq!(reply, b"+OK\r\n");
    assert_eq!(pipelined.read_reply(), b":1\r\n");
    assert_eq!(int_field(&mut admin, "blocked_clients"), 0);

    // ALL, ended by its timeout: a PING waits for it.
    assert_eq!(admin.cmd_str(&["CLIENT", "PAUSE", "300"]), b"+OK\r\n");
    let (reply, took) = timed(&["PING"]).join().unwrap();
    assert_eq!(reply, b"+PONG\r\n");
    assert!(took >= std::time::Duration::from_millis(200), "{took:?}");
    assert_eq!(admin.cmd_str(&["GET", "a"]), b"$1\r\n2\r\n");
}

fn keyspace_stats(c: &mut RawConn) -> (i64, i64) {
    (
        common::info_number(c, "stats", "keyspace_hits") as i64,
        common::info_number(c, "stats", "keyspace_misses") as i64,
    )
}

/// INFO `keyspace_hits` and `keyspace_misses` (a constant 0 before) move as redis-server's do,
/// command by command: reads count, writes do not, whichever path ran the read here (pipelined
/// reads take the shared lock); CONFIG RESETSTAT clears them.
#[test]
fn keyspace_hits_and_misses_count_as_redis_counts() {
    let real = common::redis::RealRedis::start(&[]);
    let ours = common::start_with(&[]);
    let script: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["GET", "a"],
        &["GET", "nosuch"],
        &["MGET", "a", "nosuch", "a"],
        &["EXISTS", "a", "nosuch"],
        &["TYPE", "a"],
        &["TYPE", "nosuch"],
        &["TTL", "a"],
        &["PTTL", "nosuch"],
        &["STRLEN", "a"],
        &["GETRANGE", "a", "0", "1"],
        &["SET", "b", "2", "GET"],
        &["SET", "b", "3", "GET"],
        &["GETSET", "a", "5"],
        &["GETDEL", "b"],
        &["GETEX", "a"],
        &["GETEX", "nosuch"],
        &["APPEND", "a", "x"],
        &["INCR", "n"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["OBJECT", "ENCODING", "n"],
        &["DUMP", "n"],
        &["DUMP", "nosuch"],
        &["PFADD", "h", "x"],
        &["PFCOUNT", "h"],
        &["PFCOUNT", "h", "h2"],
        &["MULTI"],
        &["GET", "n"],
        &["GET", "zz"],
        &["EXEC"],
        &["RENAME", "n", "m"],
        &["COPY", "m", "m2"],
        &["MOVE", "m2", "1"],
        &["SETNX", "q", "1"],
        &["SETRANGE", "q", "0", "x"],
        &["EXPIRE", "q", "100"],
        &["PERSIST", "q"],
        &["TOUCH", "q", "zz"],
        &["MSETNX", "x", "1", "y", "2"],
        &["MEMORY", "USAGE", "q"],
        &["SUBSTR", "q", "0", "1"],
        &["DEL", "a", "zz"],
        &["SCAN", "0"],
        &["DBSIZE"],
    ];
    let mut theirs = real.raw();
    let mut mine = ours.raw();
    // INFO from connections of their own (the script's opens a transaction).
    let (mut their_info, mut my_info) = (real.raw(), ours.raw());
    for argv in script {
        theirs.cmd_str(argv);
        mine.cmd_str(argv);
        assert_eq!(
            keyspace_stats(&mut my_info),
            keyspace_stats(&mut their_info),
            "after {argv:?}"
        );
    }
    // Pipelined reads: a batch the shared lock runs here.
    let mut batch = Vec::new();
    for key in ["q", "nosuch", "x", "y", "zz"] {
        batch.extend(common::encode_command(&[b"GET", key.as_bytes()]));
    }
    batch.extend(common::encode_command(&[b"EXISTS", b"q", b"nope"]));
    for c in [&mut theirs, &mut mine] {
        c.send_raw(&batch);
        for _ in 0..6 {
            c.read_reply();
        }
    }
    assert_eq!(
        keyspace_stats(&mut my_info),
        keyspace_stats(&mut their_info)
    );
    assert_eq!(mine.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(keyspace_stats(&mut my_info), (0, 0));
}
