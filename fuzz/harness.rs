//! The fuzz targets' bodies, shared by the libFuzzer binaries (`fuzz/fuzz_targets/*.rs`) and the
//! regression replay (`tests/fuzz_regressions.rs`), which runs every saved input under a plain
//! `cargo test` so a fixed crash stays fixed.
//!
//! Each function takes the raw fuzz input and must return normally for every input: a panic, an
//! abort, an allocation failure or a timeout is a finding. Where the server would convert a handler
//! panic into an `ERR internal error` reply (the dispatcher's safety net), the harness treats that
//! reply as a finding too, since the net hides the bug from users but not from us.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::Arc;

use hyperbloom::commands::shared_path::EngineLock;
use hyperbloom::commands::{self, ClientState};
use hyperbloom::config::Config;
use hyperbloom::engine::{ClientHandle, Shared};
use hyperbloom::persistence::{dump, lzf, rdb};
use hyperbloom::protocol::parser::{ParserLimits, RequestParser};
use hyperbloom::protocol::Reply;

// ---------------------------------------------------------------------------------------------
// Request parser
// ---------------------------------------------------------------------------------------------

fn limits(authenticated: bool) -> ParserLimits {
    ParserLimits {
        authenticated,
        ..ParserLimits::default()
    }
}

/// Parses `data` whole, then again split at two points taken from its first bytes, and checks that
/// both ways give the same requests and the same error (the parser is resumable).
pub fn parser(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let authenticated = data[0] & 1 == 1;
    let (a, b) = (data[1] as usize, data[2] as usize);
    let input = &data[3..];
    let whole = parse_all(input, &[], authenticated);
    let cut1 = a * input.len() / 256;
    let cut2 = (cut1 + b * (input.len() - cut1) / 256).min(input.len());
    let split = parse_all(input, &[cut1, cut2], authenticated);
    assert_eq!(whole, split, "whole vs split at {cut1},{cut2}");
}

type Parsed = (Vec<Vec<Bytes>>, Option<String>);

fn parse_all(input: &[u8], cuts: &[usize], authenticated: bool) -> Parsed {
    let limits = limits(authenticated);
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(input.len());
    let mut start = 0;
    for end in bounds {
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            match parser.next_request(&mut buf, &limits) {
                Ok(Some(argv)) => {
                    assert!(!argv.is_empty(), "empty argv returned");
                    out.push(argv)
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }
    (out, None)
}

/// Differential: where both our parser and the `redis-protocol` crate's RESP2 decoder accept a
/// multibulk request of bulk strings, they must read the same arguments from the same bytes.
pub fn parser_diff(data: &[u8]) {
    if data.first() != Some(&b'*') {
        return;
    }
    let theirs = match redis_protocol::resp2::decode::decode(data) {
        Ok(Some((frame, used))) => (frame, used),
        _ => return,
    };
    let redis_protocol::resp2::types::OwnedFrame::Array(items) = theirs.0 else {
        return;
    };
    let mut their_args = Vec::with_capacity(items.len());
    for it in items {
        match it {
            redis_protocol::resp2::types::OwnedFrame::BulkString(b) => their_args.push(b),
            _ => return, // Redis requests are bulk strings only; anything else is not comparable
        }
    }
    if their_args.is_empty() {
        return; // Redis (and we) skip `*0` silently
    }
    let mut buf = BytesMut::from(data);
    let mut parser = RequestParser::new();
    if let Ok(Some(ours)) = parser.next_request(&mut buf, &limits(true)) {
        let ours: Vec<Vec<u8>> = ours.iter().map(|b| b.to_vec()).collect();
        assert_eq!(ours, their_args, "arguments differ");
        assert_eq!(data.len() - buf.len(), theirs.1, "consumed lengths differ");
    }
}

// ---------------------------------------------------------------------------------------------
// Config file
// ---------------------------------------------------------------------------------------------

/// Applies `data` as redis.conf text; then, when it was accepted, rewrites that text as CONFIG
/// REWRITE does (`Config::rewrite`, the file edited in place) and checks the result is accepted
/// back with every value the same.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut config = Config::default();
    if config.apply_text(&text, "fuzz.conf").is_ok() {
        let rewritten = config.rewrite(&text);
        let mut again = Config::default();
        if let Err(e) = again.apply_text(&rewritten, "rewritten.conf") {
            panic!("CONFIG REWRITE output refused: {e}\n{rewritten}");
        }
        assert_eq!(
            again.rewrite(""),
            config.rewrite(""),
            "CONFIG REWRITE output reads back differently:\n{rewritten}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP / RESTORE payloads and RDB files
// ---------------------------------------------------------------------------------------------

/// A RESTORE payload: verification and decoding must fail cleanly or give a value whose DUMP is
/// itself a valid payload that restores.
pub fn restore(data: &[u8]) {
    let _ = dump::verify(data);
    if let Ok(value) = dump::restore(data) {
        let again = dump::dump(&value, false);
        dump::restore(&again).expect("a re-dumped value must restore");
    }
}

/// As `restore`, but with a valid footer (version + CRC-64) appended, so the fuzzer reaches the
/// value decoders instead of stopping at the checksum.
pub fn restore_with_footer(data: &[u8]) {
    let mut payload = data.to_vec();
    payload.extend_from_slice(&10u16.to_le_bytes());
    let crc = hyperbloom::persistence::crc64::checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    restore(&payload);
}

/// An RDB file: loading must fail cleanly or give keys.
pub fn rdb_file(data: &[u8]) {
    let reader = rdb::RdbReader::new(data, data.len() as u64);
    let mut keys = 0usize;
    let _ = reader.load_file(
        rdb::LoadOptions {
            verify_checksum: false,
        },
        0,
        |_, _, _, _, _| {
            keys += 1;
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// In-process dispatcher: random command sequences against the keyspace
// ---------------------------------------------------------------------------------------------

/// A handler's panic, which the dispatcher turns into this reply, is a finding.
fn check_not_internal(argv: &[Bytes], reply: &Reply) {
    if let Reply::Error(e) = reply {
        let text = e.to_string();
        assert!(
            !text.starts_with("ERR internal error"),
            "handler panicked on {:?}: {text}",
            argv.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
    }
}

/// One server's state without sockets: the shared state and one authenticated client.
pub struct Session {
    shared: Arc<Shared>,
    client: ClientState,
    now_ms: u64,
}

impl Session {
    pub fn new() -> Session {
        let config = Config::default();
        let shared = Shared::new(config, commands::table().len());
        let addr: SocketAddr = "127.0.0.1:40000".parse().expect("literal address");
        let handle = Arc::new(ClientHandle::new(1, addr, addr));
        Session {
            shared,
            client: ClientState::new(handle, true),
            now_ms: 1_700_000_000_000,
        }
    }

    pub fn run(&mut self, argv: &[Bytes]) -> Reply {
        let mut engine = self.shared.engine();
        let reply = commands::dispatch(
            &self.shared,
            &mut engine,
            &mut self.client,
            argv,
            self.now_ms,
        );
        check_not_internal(argv, &reply);
        reply
    }

    /// Runs `batch` as the connection loop runs one: the lock its first command allows (shared
    /// or exclusive, `EngineLock`), the batch's prefetch, then each command on the shared path
    /// while it can.
    pub fn run_batch(&mut self, batch: &[Vec<Bytes>]) -> Vec<Reply> {
        let Some(first) = batch.first() else {
            return Vec::new();
        };
        let mut lock = EngineLock::for_batch(&self.shared, first, &mut self.client);
        self.client.prefetched.clear();
        if batch.len() > 1 {
            commands::prefetch_keys(
                &self.shared,
                &lock,
                &mut self.client,
                batch.iter().map(|a| &a[..]),
            );
        }
        let replies: Vec<Reply> = batch
            .iter()
            .map(|argv| {
                lock.dispatch(&self.shared, &mut self.client, argv, self.now_ms)
                    .expect("nothing shuts the session down")
            })
            .collect();
        drop(lock);
        for (argv, reply) in batch.iter().zip(&replies) {
            check_not_internal(argv, reply);
        }
        replies
    }

    pub fn advance_clock(&mut self, ms: u64) {
        self.now_ms += ms;
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

/// Commands the dispatcher target may send: the data commands of every family. Left out: what
/// touches files or the process (SAVE, BGSAVE, SHUTDOWN, DEBUG, CONFIG SET dir), which other
/// targets and the integration tests cover; and PFSELFTEST, a deliberately long self-test (seconds
/// per call) that would only slow the search down.
const COMMANDS: &[&str] = &[
    "SET",
    "GET",
    "GETDEL",
    "GETEX",
    "GETSET",
    "SETNX",
    "SETEX",
    "PSETEX",
    "MSET",
    "MSETNX",
    "MGET",
    "APPEND",
    "STRLEN",
    "GETRANGE",
    "SETRANGE",
    "INCR",
    "DECR",
    "INCRBY",
    "DECRBY",
    "INCRBYFLOAT",
    "DEL",
    "UNLINK",
    "EXISTS",
    "TYPE",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "TTL",
    "PTTL",
    "PERSIST",
    "EXPIRETIME",
    "RENAME",
    "RENAMENX",
    "COPY",
    "MOVE",
    "SELECT",
    "KEYS",
    "SCAN",
    "RANDOMKEY",
    "DBSIZE",
    "FLUSHDB",
    "TOUCH",
    "OBJECT",
    "DUMP",
    "RESTORE",
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH",
    "UNWATCH",
    "PFADD",
    "PFCOUNT",
    "PFMERGE",
    "PFDEBUG",
    "BF.RESERVE",
    "BF.ADD",
    "BF.MADD",
    "BF.EXISTS",
    "BF.MEXISTS",
    "BF.INSERT",
    "BF.INFO",
    "BF.CARD",
    "BF.SCANDUMP",
    "BF.LOADCHUNK",
    "CF.RESERVE",
    "CF.ADD",
    "CF.ADDNX",
    "CF.INSERT",
    "CF.INSERTNX",
    "CF.EXISTS",
    "CF.MEXISTS",
    "CF.DEL",
    "CF.COUNT",
    "CF.INFO",
    "CF.SCANDUMP",
    "CF.LOADCHUNK",
    "CF.COMPACT",
    "MEMORY",
    "PING",
    "ECHO",
];

/// Argument atoms: a few keys (so commands meet each other's values), numbers at the edges Redis
/// checks, options of the commands above, and raw bytes from the input.
const ATOMS: &[&str] = &[
    "k",
    "k2",
    "{k}3",
    "0",
    "1",
    "-1",
    "2",
    "10",
    "100",
    "1000",
    "0.01",
    "0.5",
    "1e300",
    "inf",
    "-inf",
    "nan",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "EX",
    "PX",
    "NX",
    "XX",
    "GT",
    "LT",
    "KEEPTTL",
    "GET",
    "CAPACITY",
    "ERROR",
    "EXPANSION",
    "NONSCALING",
    "ITEMS",
    "NOCREATE",
    "BUCKETSIZE",
    "MAXITERATIONS",
    "MATCH",
    "COUNT",
    "TYPE",
    "*",
    "ENCODING",
    "USAGE",
    "REPLACE",
    "ABSTTL",
    "IDLETIME",
    "FREQ",
    "GETREG",
    "DECODE",
    "ENCODE",
    "TODENSE",
    "SIMD",
    "DB",
    "",
    "HYLL",
];

/// The byte [`decode`] reads as command `name` (for tests that build inputs).
pub fn command_byte(name: &str) -> u8 {
    COMMANDS
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .unwrap_or_else(|| panic!("{name} is not in the harness's vocabulary")) as u8
}

/// The byte [`decode`] reads as an argument count of `argc` (below 8), ending a [`shared_path`]
/// batch after the command if `ends_batch`.
pub fn argc_byte(argc: usize, ends_batch: bool) -> u8 {
    (argc as u8 % 8) | if ends_batch { BATCH_END } else { 0 }
}

/// The byte [`decode`] reads as the argument `atom`.
pub fn atom_byte(atom: &str) -> u8 {
    ATOMS
        .iter()
        .position(|a| *a == atom)
        .unwrap_or_else(|| panic!("{atom} is not an atom")) as u8
}

/// One decoded command of the dispatcher targets, and what follows it.
struct Step {
    argv: Vec<Bytes>,
    /// The clock moves 1.5 s after it (keys with short TTLs fall due).
    advance: bool,
    /// [`shared_path`] ends a batch after it.
    ends_batch: bool,
}

/// In a command's argument-count byte (whose low 3 bits are the count): the batch ends after it.
const BATCH_END: u8 = 0x40;

/// Decodes `data` into at most 64 commands. Bytes: a command index, an argument count (low 3
/// bits; [`BATCH_END`] ends a batch), then per argument either an atom index or (high bit set) a
/// raw run of bytes; a 0xff after a command advances the clock.
fn decode(data: &[u8]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i + 1 < data.len() && steps.len() < 64 {
        let name = COMMANDS[data[i] as usize % COMMANDS.len()];
        let argc = (data[i + 1] % 8) as usize;
        let ends_batch = data[i + 1] & BATCH_END != 0;
        i += 2;
        let mut argv = vec![Bytes::from_static(name.as_bytes())];
        for _ in 0..argc {
            let Some(&b) = data.get(i) else { break };
            i += 1;
            if b & 0x80 == 0 {
                argv.push(Bytes::from_static(
                    ATOMS[b as usize % ATOMS.len()].as_bytes(),
                ));
            } else {
                let n = ((b & 0x7f) as usize).min(data.len() - i);
                argv.push(Bytes::copy_from_slice(&data[i..i + n]));
                i += n;
            }
        }
        let advance = data.get(i) == Some(&0xff);
        if advance {
            i += 1;
        }
        steps.push(Step {
            argv,
            advance,
            ends_batch,
        });
    }
    steps
}

/// Decodes `data` into a sequence of commands ([`decode`]) and runs them on one session.
pub fn dispatch(data: &[u8]) {
    let mut session = Session::new();
    for step in decode(data) {
        session.run(&step.argv);
        if step.advance {
            session.advance_clock(1500);
        }
    }
    // A snapshot of whatever was built must dump and restore.
    for key in ["k", "k2", "{k}3"] {
        if let Reply::Bulk(payload) = session.run(&[Bytes::from_static(b"DUMP"), Bytes::from(key)])
        {
            dump::restore(&payload).expect("DUMP output must restore");
        }
    }
}

/// The shared keyspace lock against the exclusive one (`commands::shared_path`): the commands of
/// `data` ([`decode`]), cut into batches, run on one session as the server runs a batch
/// (`EngineLock`: the shared lock while every command so far could take it, the batch's
/// prefetch first) and on another under the exclusive lock alone. Every reply must be the same
/// (RANDOMKEY's pick apart), and so must each key's DUMP, TTL and type at the end: a faster path
/// that changes a reply byte is a bug.
///
/// Each sequence runs twice: as a one-thread server runs it, and as a multi-thread one does
/// (`Shared::parallel_batches`: the prefetch holds stripes, and MSET/MSETNX take their shared
/// handlers), on one thread here.
pub fn shared_path(data: &[u8]) {
    for parallel in [false, true] {
        shared_path_with(data, parallel);
    }
}

fn shared_path_with(data: &[u8], parallel: bool) {
    let (mut shared, mut exclusive) = (Session::new(), Session::new());
    shared
        .shared
        .parallel_batches
        .store(parallel, std::sync::atomic::Ordering::Relaxed);
    let steps = decode(data);
    let mut start = 0;
    while start < steps.len() {
        let end = (start..steps.len())
            .find(|&i| steps[i].ends_batch || steps[i].advance)
            .map_or(steps.len(), |i| i + 1);
        let batch: Vec<Vec<Bytes>> = steps[start..end].iter().map(|s| s.argv.clone()).collect();
        let got = shared.run_batch(&batch);
        for (argv, got) in batch.iter().zip(&got) {
            let want = exclusive.run(argv);
            if argv[0].eq_ignore_ascii_case(b"RANDOMKEY") {
                continue;
            }
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "the shared path answered {:?} differently",
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            );
        }
        if steps[end - 1].advance {
            shared.advance_clock(1500);
            exclusive.advance_clock(1500);
        }
        start = end;
    }
    // Each database as the exclusive path sees it: the same keys, values, types and TTLs.
    for db in ["0", "1"] {
        let select = [Bytes::from_static(b"SELECT"), Bytes::from(db)];
        shared.run(&select);
        exclusive.run(&select);
        for key in ["k", "k2", "{k}3"] {
            for cmd in ["DUMP", "PTTL", "TYPE", "EXISTS"] {
                let argv = [Bytes::from(cmd), Bytes::from(key)];
                assert_eq!(
                    format!("{:?}", shared.run(&argv)),
                    format!("{:?}", exclusive.run(&argv)),
                    "{cmd} {key} in db {db} after the shared path"
                );
            }
        }
    }
}

/// HLL strings: `data` becomes the value of a key, then every PF command reads it, writes it and
/// merges it; the results must be valid HLLs whenever Redis would accept them.
pub fn hll(data: &[u8]) {
    let mut s = Session::new();
    let b = |x: &'static str| Bytes::from_static(x.as_bytes());
    s.run(&[b("SET"), b("h"), Bytes::copy_from_slice(data)]);
    s.run(&[b("SET"), b("h2"), Bytes::copy_from_slice(data)]);
    s.run(&[b("PFCOUNT"), b("h")]);
    s.run(&[b("PFADD"), b("h"), b("a"), b("b"), b("c")]);
    s.run(&[b("PFCOUNT"), b("h"), b("h2")]);
    s.run(&[b("PFMERGE"), b("m"), b("h"), b("h2")]);
    s.run(&[b("PFCOUNT"), b("m")]);
    s.run(&[b("PFDEBUG"), b("GETREG"), b("h2")]);
    s.run(&[b("PFDEBUG"), b("DECODE"), b("h2")]);
    s.run(&[b("PFDEBUG"), b("TODENSE"), b("h2")]);
    s.run(&[b("PFADD"), b("h2"), Bytes::copy_from_slice(data)]);
    s.run(&[b("PFCOUNT"), b("h2")]);
}

/// BF/CF LOADCHUNK sequences: the input is cut into (iterator, chunk) pairs fed to LOADCHUNK on one
/// key, then the filter is queried, dumped and scanned back.
pub fn loadchunk(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let prefix = if kind & 1 == 0 { "BF" } else { "CF" };
    let mut s = Session::new();
    let cmd = |suffix: &str| Bytes::from(format!("{prefix}.{suffix}"));
    let b = |x: &'static str| Bytes::from_static(x.as_bytes());
    if kind & 2 == 2 {
        // Start from a real filter's header so the chunks reach the data path more often.
        s.run(&[
            cmd("RESERVE"),
            b("f"),
            if prefix == "BF" { b("0.01") } else { b("100") },
            b("100"),
        ]);
    }
    let mut i = 0;
    let mut pieces = 0;
    while i + 3 <= rest.len() && pieces < 16 {
        pieces += 1;
        let iter = u16::from_le_bytes([rest[i], rest[i + 1]]) as i64 - 8;
        let n = (rest[i + 2] as usize * 4).min(rest.len() - i - 3);
        let chunk = Bytes::copy_from_slice(&rest[i + 3..i + 3 + n]);
        i += 3 + n;
        s.run(&[
            cmd("LOADCHUNK"),
            b("f"),
            Bytes::from(iter.to_string()),
            chunk,
        ]);
    }
    s.run(&[cmd("EXISTS"), b("f"), b("x")]);
    s.run(&[cmd("ADD"), b("f"), b("y")]);
    s.run(&[cmd("INFO"), b("f")]);
    let mut cursor = Bytes::from_static(b"0");
    for _ in 0..64 {
        let reply = s.run(&[cmd("SCANDUMP"), b("f"), cursor.clone()]);
        let Reply::Array(items) = reply else { break };
        match items.first() {
            Some(Reply::Int(0)) | None => break,
            Some(Reply::Int(n)) => cursor = Bytes::from(n.to_string()),
            _ => break,
        }
    }
    // A 38-byte header chunk may declare a 100 MB filter (as it may on RedisBloom, which callocs
    // it); DUMP must then produce all of it, which is slow but not a bug. Check DUMP on filters up
    // to 8 MB so the search does not stall on such inputs.
    let small = matches!(
        s.run(&[b("MEMORY"), b("USAGE"), b("f")]),
        Reply::Int(n) if n <= 8 << 20
    );
    if small {
        if let Reply::Bulk(payload) = s.run(&[b("DUMP"), b("f")]) {
            dump::restore(&payload).expect("DUMP output must restore");
        }
    }
}

/// LZF streams: the first two bytes are the stated output length, the rest the compressed bytes.
/// The whole and the streamed decoder (with a sink that takes any piece) must agree, output and
/// error alike; a stream that decodes must compress again to something that decodes to the same.
pub fn lzf(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let out_len = u16::from_le_bytes([data[0], data[1]]) as usize;
    let input = &data[2..];
    let whole = lzf::decompress(input, out_len);
    let mut pieces = Vec::new();
    let streamed = lzf::decompress_streamed(input, out_len, |p| {
        pieces.extend_from_slice(p);
        true
    })
    .map(|()| pieces);
    assert_eq!(whole, streamed, "whole and streamed LZF decoders disagree");
    if let Ok(out) = whole {
        if let Some(c) = lzf::compress(&out, out.len() + 64) {
            assert_eq!(lzf::decompress(&c, out.len()).as_ref(), Ok(&out));
        }
    }
}
