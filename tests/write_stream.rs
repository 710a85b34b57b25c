//! What each command propagates: the write stream's bytes after running commands through the
//! dispatcher at a fixed clock. The expectations are what Redis 7.0.15 (+ RedisBloom's
//! `ReplicateVerbatim` calls) wrote to its incr AOF for the same commands, timestamps included
//! (`engine::propagate` lists the rules).

use std::sync::Arc;

use bytes::Bytes;
use hyperbloom::commands::{self, ClientState};
use hyperbloom::config::Config;
use hyperbloom::engine::{ClientHandle, Shared, SubscriberId};

const NOW: u64 = 1_800_000_000_000;

struct Harness {
    shared: Arc<Shared>,
    client: ClientState,
    sub: SubscriberId,
    now: u64,
}

impl Harness {
    fn new() -> Harness {
        let shared = Shared::new(Config::default(), commands::table().len());
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let handle = Arc::new(ClientHandle::new(1, addr, addr));
        let client = ClientState::new(handle, true);
        let sub = shared.engine().subscribe_stream(0, None);
        Harness {
            shared,
            client,
            sub,
            now: NOW,
        }
    }

    /// Runs one command (split on spaces) and returns its reply bytes.
    fn run(&mut self, line: &str) -> String {
        let argv: Vec<Bytes> = line
            .split(' ')
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        self.run_argv(&argv)
    }

    fn run_argv(&mut self, argv: &[Bytes]) -> String {
        let mut engine = self.shared.engine();
        let reply = commands::dispatch(&self.shared, &mut engine, &mut self.client, argv, self.now);
        String::from_utf8_lossy(&reply.to_bytes(2)).into_owned()
    }

    /// The propagated commands since the last call, one per line, arguments space-separated.
    fn drain(&mut self) -> Vec<String> {
        let mut buf = Vec::new();
        self.shared
            .engine()
            .stream
            .get_mut()
            .drain(self.sub, &mut buf);
        decode(&buf)
    }
}

/// Splits RESP arrays of bulk strings into lines "ARG ARG ...", checking the framing exactly.
fn decode(mut buf: &[u8]) -> Vec<String> {
    fn line<'a>(buf: &mut &'a [u8]) -> &'a [u8] {
        let at = buf.windows(2).position(|w| w == b"\r\n").expect("CRLF");
        let l = &buf[..at];
        *buf = &buf[at + 2..];
        l
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let head = line(&mut buf);
        assert_eq!(head[0], b'*');
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            let h = line(&mut buf);
            assert_eq!(h[0], b'$');
            let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
            args.push(String::from_utf8_lossy(&buf[..len]).into_owned());
            assert_eq!(&buf[len..len + 2], b"\r\n");
            buf = &buf[len + 2..];
        }
        out.push(args.join(" "));
    }
    out
}

fn ms(offset: u64) -> String {
    (NOW + offset).to_string()
}

#[test]
fn relative_expiry_is_written_absolute() {
    let mut h = Harness::new();
    h.run("SET a 1 EX 100");
    h.run("SETEX b 100 x");
    h.run("PSETEX p 100000 v");
    h.run("EXPIRE a 200");
    h.run("PEXPIRE a 300 NX");
    h.run("PEXPIRE a 300 XX");
    h.run("EXPIREAT a 1900000000");
    h.run("pexpireat a 1900000000001");
    h.run("SET q 1 PXAT 1900000000000 GET");
    h.run("SET r 1 EXAT 1900000000 GET");
    h.run("GETEX q EX 50");
    h.run("GETEX q PERSIST");
    h.run("GETEX q PERSIST");
    assert_eq!(
        h.drain(),
        [
            "SELECT 0".to_string(),
            format!("SET a 1 PXAT {}", ms(100_000)),
            format!("SET b x PXAT {}", ms(100_000)),
            format!("SET p v PXAT {}", ms(100_000)),
            format!("PEXPIREAT a {}", ms(200_000)),
            format!("PEXPIREAT a {} XX", ms(300)),
            "PEXPIREAT a 1900000000000".to_string(),
            "pexpireat a 1900000000001".to_string(),
            "SET q 1 PXAT 1900000000000".to_string(),
            "SET r 1 PXAT 1900000000000".to_string(),
            format!("PEXPIREAT q {}", ms(50_000)),
            "PERSIST q".to_string(),
        ]
    );
}

#[test]
fn rewrites_and_deletions() {
    let mut h = Harness::new();
    h.run("SET x 1 GET");
    h.run("set y 1 get nx get");
    h.run("GETSET x 5");
    h.run("GETDEL x");
    h.run("GETDEL x");
    h.run("INCRBYFLOAT f 1.5");
    h.run("INCRBYFLOAT f 2e3");
    h.run("SET e 1");
    h.run("EXPIRE e -1");
    h.run("SET e 1");
    h.run("PEXPIREAT e 1");
    h.run("SET g 1");
    h.run("GETEX g PXAT 5");
    assert_eq!(
        h.drain(),
        [
            "SELECT 0",
            "SET x 1",
            "set y 1 nx",
            "SET x 5",
            "DEL x",
            "SET f 1.5 KEEPTTL",
            "SET f 2001.5 KEEPTTL",
            "SET e 1",
            "DEL e",
            "SET e 1",
            "DEL e",
            "SET g 1",
            "DEL g",
        ]
    );
}

#[test]
fn commands_that_change_nothing_are_not_written() {
    let mut h = Harness::new();
    h.run("SET z 1");
    h.drain();
    for cmd in [
        "SETNX z 2",
        "SET z 2 NX",
        "SET w 2 XX",
        "DEL nokey",
        "EXPIRE nokey 10",
        "EXPIRE z 10 XX",
        "PERSIST z",
        "GET z",
        "GETDEL nokey",
        "PFCOUNT nohll",
        "RENAMENX z z",
        "INCRBYFLOAT z abc",
        "SELECT 3",
        "PING",
    ] {
        h.run(cmd);
        assert_eq!(
            h.drain(),
            Vec::<String>::new(),
            "{cmd} propagated something"
        );
    }
}

#[test]
fn flushes_are_written_even_when_empty_and_select_follows_the_client() {
    let mut h = Harness::new();
    h.run("SELECT 9");
    h.run("FLUSHDB");
    h.run("FLUSHALL");
    h.run("SET k v");
    h.run("SELECT 2");
    h.run("MOVE nokey 3");
    h.run("SET k v");
    assert_eq!(
        h.drain(),
        ["SELECT 9", "FLUSHDB", "FLUSHALL", "SET k v", "SELECT 2", "SET k v"]
    );
}

#[test]
fn transactions_wrap_only_several_writes() {
    let mut h = Harness::new();
    for c in ["MULTI", "SET m1 1", "EXEC"] {
        h.run(c);
    }
    for c in ["MULTI", "SET m2 1", "GET m1", "SET m3 2", "EXEC"] {
        h.run(c);
    }
    for c in ["MULTI", "GET m1", "EXEC"] {
        h.run(c);
    }
    for c in ["MULTI", "SET a 1", "SELECT 4", "SET b 2", "EXEC"] {
        h.run(c);
    }
    assert_eq!(
        h.drain(),
        [
            "SELECT 0", "SET m1 1", "MULTI", "SET m2 1", "SET m3 2", "EXEC", "MULTI", "SET a 1",
            "SELECT 4", "SET b 2", "EXEC",
        ]
    );
}

#[test]
fn expired_keys_are_deleted_and_wrapped_with_the_command_that_found_them() {
    let mut h = Harness::new();
    h.run("SET q 1 PX 50");
    h.run("SET q5 1 PX 50");
    h.run("SET q9 1 PX 50");
    h.drain();
    h.now += 1000;
    // A read that reclaims: only the DEL.
    h.run("GET q9");
    // A write over an expired key: DEL then SET, one transaction.
    h.run("SET q 2");
    for c in ["MULTI", "SET q2 1", "GET q5", "SET q3 1", "EXEC"] {
        h.run(c);
    }
    assert_eq!(
        h.drain(),
        [
            "DEL q9", "MULTI", "DEL q", "SET q 2", "EXEC", "MULTI", "SET q2 1", "DEL q5",
            "SET q3 1", "EXEC",
        ]
    );
    // Active expiry: one DEL per key, each on its own, in the key's database.
    h.run("SELECT 1");
    h.run("SET a 1 PX 10");
    h.drain();
    {
        let mut engine = h.shared.engine();
        for db in engine.store.dbs.iter_mut() {
            db.now_ms = NOW + 5000;
            db.active_expire(100);
        }
        engine.emit_expired();
    }
    assert_eq!(h.drain(), ["DEL a"]);
}

#[test]
fn restore_is_written_with_an_absolute_ttl() {
    let mut h = Harness::new();
    h.run("SET k v");
    let dump = {
        let mut engine = h.shared.engine();
        let argv = [Bytes::from_static(b"DUMP"), Bytes::from_static(b"k")];
        match commands::dispatch(&h.shared, &mut engine, &mut h.client, &argv, NOW) {
            hyperbloom::protocol::Reply::Bulk(b) => b,
            other => panic!("DUMP answered {other:?}"),
        }
    };
    h.drain();
    let restore = |name: &str, ttl: &str, extra: &[&str]| {
        let mut v = vec![
            Bytes::from_static(b"RESTORE"),
            Bytes::copy_from_slice(name.as_bytes()),
            Bytes::copy_from_slice(ttl.as_bytes()),
            dump.clone(),
        ];
        v.extend(extra.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())));
        v
    };
    assert_eq!(h.run_argv(&restore("r1", "5000", &[])), "+OK\r\n");
    assert_eq!(h.run_argv(&restore("r2", "0", &[])), "+OK\r\n");
    assert_eq!(
        h.run_argv(&restore("r2", "1", &["REPLACE", "ABSTTL"])),
        "+OK\r\n"
    );
    let payload = String::from_utf8_lossy(&dump).into_owned();
    assert_eq!(
        h.drain(),
        [
            format!("RESTORE r1 {} {payload} ABSTTL", ms(5000)),
            format!("RESTORE r2 0 {payload}"),
            "DEL r2".to_string(),
        ]
    );
}

#[test]
fn hll_writes_and_pfcount_cache_updates() {
    let mut h = Harness::new();
    h.run("PFADD h a b c");
    h.run("PFADD h a");
    h.run("PFCOUNT h");
    h.run("PFCOUNT h");
    h.run("PFCOUNT h x");
    h.run("PFMERGE h3 h");
    h.run("PFCOUNT h3");
    h.run("PFADD newh");
    h.run("PFADD newh");
    assert_eq!(
        h.drain(),
        [
            "SELECT 0",
            "PFADD h a b c",
            "PFCOUNT h",
            "PFMERGE h3 h",
            "PFCOUNT h3",
            "PFADD newh"
        ]
    );
}

#[test]
fn bloom_commands_follow_redisbloom_and_auto_creation_is_explicit() {
    let mut h = Harness::new();
    h.run("BF.ADD b x");
    h.run("BF.ADD b x");
    h.run("BF.RESERVE full 0.01 2 NONSCALING");
    h.run("BF.MADD full a b c d e");
    h.run("BF.INSERT i CAPACITY 50 ERROR 0.001 NONSCALING ITEMS p");
    h.run("BF.INSERT nope NOCREATE ITEMS p");
    h.run("BF.ADD b");
    h.run("SET str v");
    h.run("BF.ADD str x");
    h.run("CONFIG SET bf-error-rate 0.05");
    h.run("bf.madd b2 x y");
    assert_eq!(
        h.drain(),
        [
            "SELECT 0",
            "MULTI",
            "BF.RESERVE b 0.01 100 EXPANSION 2",
            "BF.ADD b x",
            "EXEC",
            "BF.ADD b x",
            "BF.RESERVE full 0.01 2 NONSCALING",
            "BF.MADD full a b c d e",
            "MULTI",
            "BF.RESERVE i 0.001 50 NONSCALING",
            "BF.INSERT i CAPACITY 50 ERROR 0.001 NONSCALING ITEMS p",
            "EXEC",
            "SET str v",
            "MULTI",
            "BF.RESERVE b2 0.05 100 EXPANSION 2",
            "bf.madd b2 x y",
            "EXEC",
        ]
    );
}

#[test]
fn cuckoo_commands_follow_redisbloom_and_every_chunk_is_written() {
    let mut h = Harness::new();
    h.run("CF.ADD c x");
    h.run("CF.ADDNX c x");
    h.run("CF.DEL c nothere");
    h.run("CF.DEL nokey x");
    h.run("CF.RESERVE tiny 2 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 0");
    assert_eq!(
        h.drain(),
        [
            "SELECT 0",
            "MULTI",
            "CF.RESERVE c 1024 BUCKETSIZE 2 MAXITERATIONS 20 EXPANSION 1",
            "CF.ADD c x",
            "EXEC",
            "CF.ADDNX c x",
            "CF.DEL c nothere",
            "CF.RESERVE tiny 2 BUCKETSIZE 1 MAXITERATIONS 1 EXPANSION 0",
        ]
    );
    // Fill the two one-slot buckets: an add that finds no room answers "Filter is full" and is
    // not written; the ones that fit are.
    let mut expected = Vec::new();
    let mut full = false;
    for i in 0..20 {
        let cmd = format!("CF.ADD tiny item{i}");
        if h.run(&cmd).starts_with('-') {
            full = true;
            break;
        }
        expected.push(cmd);
    }
    assert!(full, "a 2-slot non-expanding filter never filled");
    assert_eq!(h.drain(), expected);
    // CF.INSERT is written even when items found no room.
    h.run("CF.INSERT tiny ITEMS more");
    assert_eq!(h.drain(), ["CF.INSERT tiny ITEMS more"]);

    // SCANDUMP then LOADCHUNK into a new key: every chunk is propagated.
    let mut it = Bytes::from_static(b"0");
    let mut chunks = 0;
    loop {
        let argv = [
            Bytes::from_static(b"CF.SCANDUMP"),
            Bytes::from_static(b"c"),
            it,
        ];
        let reply = {
            let mut engine = h.shared.engine();
            commands::dispatch(&h.shared, &mut engine, &mut h.client, &argv, NOW)
        };
        let hyperbloom::protocol::Reply::Array(parts) = reply else {
            panic!("SCANDUMP answered {reply:?}")
        };
        let hyperbloom::protocol::Reply::Int(next) = parts[0] else {
            panic!()
        };
        if next == 0 {
            break;
        }
        let hyperbloom::protocol::Reply::Bulk(data) = &parts[1] else {
            panic!()
        };
        let next_b = Bytes::from(next.to_string());
        let load = [
            Bytes::from_static(b"CF.LOADCHUNK"),
            Bytes::from_static(b"c2"),
            next_b.clone(),
            data.clone(),
        ];
        assert_eq!(h.run_argv(&load), "+OK\r\n");
        chunks += 1;
        it = next_b;
    }
    assert!(chunks >= 2, "expected a header and data chunks");
    let written = h.drain();
    assert_eq!(written.len(), chunks);
    assert!(written.iter().all(|l| l.starts_with("CF.LOADCHUNK c2 ")));
}

#[test]
fn nothing_is_recorded_without_a_subscriber_and_offsets_count_every_byte() {
    let mut h = Harness::new();
    h.run("SET a 1");
    let mut buf = Vec::new();
    let end = h
        .shared
        .engine()
        .stream
        .get_mut()
        .drain(h.sub, &mut buf)
        .unwrap();
    assert_eq!(end, buf.len() as u64);
    h.shared.engine().unsubscribe_stream(h.sub);
    assert!(!h.shared.engine().stream.is_active());
    h.run("SET b 1 PX 1");
    h.now += 10;
    h.run("GET b");
    // A late subscriber owes nothing from before it subscribed and starts with a SELECT.
    let sub = h.shared.engine().subscribe_stream(1000, None);
    h.sub = sub;
    h.run("SET c 1");
    let mut buf = Vec::new();
    let end = h
        .shared
        .engine()
        .stream
        .get_mut()
        .drain(sub, &mut buf)
        .unwrap();
    assert_eq!(decode(&buf), ["SELECT 0", "SET c 1"]);
    assert_eq!(end, 1000 + buf.len() as u64);
}
