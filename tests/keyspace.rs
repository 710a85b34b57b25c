//! Keyspace and string commands against replies captured from Redis 7.0.15, byte for byte, plus the
//! cases a plain redis-server cannot produce (WRONGTYPE against module values) and lazy-expiry stats.
//!
//! `tests/vectors/keyspace_core.jsonl` holds one `[argv, reply]` pair per line (latin-1 JSON
//! strings, like the shared golden vectors): a single connection's session, replayed in order, so
//! each case sees the state the previous ones left (FLUSHALL first, HELLO 3 near the end).

mod common;

use common::start_server;

fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

#[test]
fn session_matches_redis_7() {
    let server = start_server();
    let mut c = server.raw();
    let text = include_str!("vectors/keyspace_core.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        let argv: Vec<Vec<u8>> = v[0]
            .as_array()
            .expect("argv")
            .iter()
            .map(|a| latin1(a.as_str().expect("arg")))
            .collect();
        let expected = latin1(v[1].as_str().expect("reply"));
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let got = c.cmd(&refs);
        count += 1;
        // HELLO's map carries the connection id and the module list: not comparable.
        let hello = argv[0].eq_ignore_ascii_case(b"HELLO");
        if got != expected && !hello {
            failures.push(format!(
                "{:?}\n    redis:      {:?}\n    hyperbloom: {:?}",
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>(),
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(count > 150);
    assert!(
        failures.is_empty(),
        "{} of {count} replies differ:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn string_commands_refuse_module_values() {
    let server = start_server();
    let mut c = server.raw();
    assert_eq!(c.cmd_str(&["BF.ADD", "bf", "x"]), b":1\r\n");
    for cmd in [
        &["GET", "bf"][..],
        &["SET", "bf", "v", "GET"],
        &["GETSET", "bf", "v"],
        &["GETDEL", "bf"],
        &["GETEX", "bf", "PERSIST"],
        &["APPEND", "bf", "x"],
        &["STRLEN", "bf"],
        &["GETRANGE", "bf", "0", "-1"],
        &["SETRANGE", "bf", "0", "x"],
        &["INCR", "bf"],
        &["DECRBY", "bf", "3"],
        &["INCRBYFLOAT", "bf", "1.5"],
    ] {
        assert_eq!(c.cmd_str(cmd), WRONGTYPE, "{cmd:?}");
    }
    // Reads that do not check the type, and argument errors that come before the type check.
    assert_eq!(c.cmd_str(&["MGET", "bf", "nokey"]), b"*2\r\n$-1\r\n$-1\r\n");
    assert_eq!(c.cmd_str(&["SETRANGE", "bf", "0", ""]), WRONGTYPE);
    assert_eq!(
        c.cmd_str(&["GETRANGE", "bf", "x", "0"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        c.cmd_str(&["INCRBY", "bf", "x"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(c.cmd_str(&["TYPE", "bf"]), b"+MBbloom--\r\n");
    // Keyspace commands move module values like any other.
    assert_eq!(c.cmd_str(&["COPY", "bf", "bf2"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["BF.EXISTS", "bf2", "x"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["RENAME", "bf2", "bf3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["MOVE", "bf3", "1"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["SELECT", "1"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["TYPE", "bf3"]), b"+MBbloom--\r\n");
    assert_eq!(
        c.cmd_str(&["SCAN", "0", "TYPE", "mbbloom--", "COUNT", "100"]),
        b"*2\r\n$1\r\n0\r\n*1\r\n$3\r\nbf3\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SCAN", "0", "TYPE", "string", "COUNT", "100"]),
        b"*2\r\n$1\r\n0\r\n*0\r\n"
    );
    // SET replaces a value of any type (and GET then works).
    assert_eq!(c.cmd_str(&["SET", "bf3", "plain"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "bf3"]), b"$5\r\nplain\r\n");
}

#[test]
fn lazy_expiry_hides_keys_and_counts_in_info() {
    let server = start_server();
    let mut c = server.raw();
    assert_eq!(c.cmd_str(&["SET", "k", "v", "PX", "30"]), b"+OK\r\n");
    // Wait for the deadline without sleeping blindly: poll PTTL until it is gone.
    let start = std::time::Instant::now();
    while c.cmd_str(&["PTTL", "k"]) != b":-2\r\n" {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        std::thread::yield_now();
    }
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$-1\r\n");
    let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "stats"])).into_owned();
    let expired: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("expired_keys");
    assert!(expired >= 1, "{info}");
}

#[test]
fn scan_pages_cover_every_key_once() {
    let server = start_server();
    let mut c = server.raw();
    for i in 0..300 {
        c.cmd_str(&["SET", &format!("key:{i}"), "v"]);
    }
    c.cmd_str(&["SET", "other", "v"]);
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let r = c.cmd_str(&["SCAN", &cursor, "MATCH", "key:*", "COUNT", "17"]);
        let text = String::from_utf8_lossy(&r).into_owned();
        let lines: Vec<&str> = text.split("\r\n").collect();
        // *2, $n, cursor, *m, then ($len, key) pairs.
        cursor = lines[2].to_string();
        for pair in lines[4..].chunks(2) {
            if pair.len() == 2 && pair[0].starts_with('$') {
                assert!(seen.insert(pair[1].to_string()), "duplicate {}", pair[1]);
            }
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
}

#[test]
fn watch_is_not_disturbed_by_commands_that_change_nothing() {
    let server = start_server();
    let mut a = server.raw();
    let mut b = server.raw();
    a.cmd_str(&["SET", "w", "text"]);
    assert_eq!(a.cmd_str(&["WATCH", "w"]), b"+OK\r\n");
    // Failed or no-op writes from another client.
    b.cmd_str(&["INCR", "w"]);
    b.cmd_str(&["SET", "w", "x", "NX"]);
    b.cmd_str(&["SETRANGE", "w", "0", ""]);
    b.cmd_str(&["PERSIST", "w"]);
    b.cmd_str(&["EXPIRE", "w", "100", "XX"]);
    a.cmd_str(&["MULTI"]);
    a.cmd_str(&["GET", "w"]);
    assert_eq!(a.cmd_str(&["EXEC"]), b"*1\r\n$4\r\ntext\r\n");
    // A real write aborts.
    a.cmd_str(&["WATCH", "w"]);
    b.cmd_str(&["APPEND", "w", "!"]);
    a.cmd_str(&["MULTI"]);
    a.cmd_str(&["GET", "w"]);
    assert_eq!(a.cmd_str(&["EXEC"]), b"*-1\r\n");
}

/// Pipelined batches over a table big enough for the batch prefetch (`Db::prefetch`, from 32 768
/// keys) give the replies a model of one-by-one execution gives: hits, misses, new and existing
/// counters, overwrites, deletions, and a SELECT in the middle of a batch (the prefetch looked in
/// the database the batch started in).
#[test]
fn pipelined_batches_over_a_big_table_answer_as_commands_one_by_one() {
    use std::collections::HashMap;
    let server = start_server();
    let mut c = server.raw();
    const KEYS: usize = 40_000;
    let mut model: [HashMap<Vec<u8>, Vec<u8>>; 2] = [HashMap::new(), HashMap::new()];
    let mut load = Vec::new();
    for i in 0..KEYS {
        let (k, v) = (format!("k:{i}"), format!("v{i}"));
        load.extend(common::encode_command(&[
            b"SET",
            k.as_bytes(),
            v.as_bytes(),
        ]));
        model[0].insert(k.into_bytes(), v.into_bytes());
    }
    c.send_raw(&load);
    for _ in 0..KEYS {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    let bulk = |v: Option<&Vec<u8>>| match v {
        Some(v) => {
            let mut out = format!("${}\r\n", v.len()).into_bytes();
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
            out
        }
        None => b"$-1\r\n".to_vec(),
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _round in 0..20 {
        let mut db = 0usize;
        let mut batch = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..100 {
            let key = match next(3) {
                0 => format!("k:{}", next(KEYS as u64)),
                1 => format!("k:{}", KEYS as u64 + next(1000)),
                _ => format!("n:{}", next(500)),
            }
            .into_bytes();
            let m = &mut model[db];
            match next(6) {
                0 | 1 => {
                    batch.extend(common::encode_command(&[b"GET", &key]));
                    expected.extend(bulk(m.get(&key)));
                }
                2 => {
                    batch.extend(common::encode_command(&[b"INCR", &key]));
                    match m
                        .get(&key)
                        .map(|v| String::from_utf8_lossy(v).parse::<i64>())
                    {
                        Some(Err(_)) => expected
                            .extend_from_slice(b"-ERR value is not an integer or out of range\r\n"),
                        Some(Ok(n)) => {
                            expected.extend(format!(":{}\r\n", n + 1).into_bytes());
                            m.insert(key, (n + 1).to_string().into_bytes());
                        }
                        None => {
                            expected.extend_from_slice(b":1\r\n");
                            m.insert(key, b"1".to_vec());
                        }
                    }
                }
                3 => {
                    let v = format!("w{}", next(1_000_000)).into_bytes();
                    batch.extend(common::encode_command(&[b"SET", &key, &v]));
                    expected.extend_from_slice(b"+OK\r\n");
                    m.insert(key, v);
                }
                4 => {
                    batch.extend(common::encode_command(&[b"DEL", &key]));
                    let n = m.remove(&key).is_some() as u8;
                    expected.extend(format!(":{n}\r\n").into_bytes());
                }
                _ => {
                    db = 1 - db;
                    let d = db.to_string();
                    batch.extend(common::encode_command(&[b"SELECT", d.as_bytes()]));
                    expected.extend_from_slice(b"+OK\r\n");
                }
            }
        }
        if db == 1 {
            batch.extend(common::encode_command(&[b"SELECT", b"0"]));
            expected.extend_from_slice(b"+OK\r\n");
        }
        c.send_raw(&batch);
        let mut got = Vec::new();
        while got.len() < expected.len() {
            got.extend(c.read_reply());
        }
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected)
        );
    }
}
