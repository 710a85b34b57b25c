//! BF.* behaviour the golden vectors leave out because RedisBloom 2.6 and the current line differ
//! there (bloom.md §4–§5, §12): range errors, the 0.25 rate cap, EXPANSION 0, the bf-* config
//! settings, memory figures, and the memory-safety rules of §11.

mod common;

use common::{start_server, RawConn};

fn cmd(c: &mut RawConn, argv: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd_str(argv)).into_owned()
}

fn bin(c: &mut RawConn, argv: &[&[u8]]) -> Vec<u8> {
    c.cmd(argv)
}

#[test]
fn reserve_current_line_ranges() {
    let s = start_server();
    let mut c = s.raw();
    let range = "-ERR error rate must be in the range (0.000000, 1.000000)\r\n";
    for rate in ["0", "1", "1.5", "-0.1", "inf"] {
        assert_eq!(
            cmd(&mut c, &["BF.RESERVE", "k", rate, "100"]),
            range,
            "{rate}"
        );
    }
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "k", "nan", "100"]),
        "-ERR bad error rate\r\n"
    );
    let cap = "-ERR capacity must be in the range [1, 1073741824]\r\n";
    for capacity in ["0", "-1", "1073741825"] {
        assert_eq!(cmd(&mut c, &["BF.RESERVE", "k", "0.01", capacity]), cap);
    }
    let exp = "-ERR expansion must be in the range [0, 32768]\r\n";
    for e in ["-1", "32769"] {
        assert_eq!(
            cmd(&mut c, &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", e]),
            exp
        );
    }
    // With NONSCALING any non-zero value is refused first, even an out-of-range one.
    assert_eq!(
        cmd(
            &mut c,
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "10",
                "NONSCALING",
                "EXPANSION",
                "-1"
            ]
        ),
        "-Nonscaling filters cannot expand\r\n"
    );
    // EXPANSION 0 makes a non-scaling filter that stores growth 0.
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "z", "0.01", "10", "EXPANSION", "0"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["BF.INFO", "z", "EXPANSION"]), "*1\r\n$-1\r\n");
    assert_eq!(
        cmd(
            &mut c,
            &[
                "BF.RESERVE",
                "z2",
                "0.01",
                "10",
                "NONSCALING",
                "EXPANSION",
                "0"
            ]
        ),
        "+OK\r\n"
    );
    let header = bin(&mut c, &[b"BF.SCANDUMP", b"z", b"0"]);
    // *2 :1 $73 <size 8> <nfilters 4> <options 4> <growth 4>: options 13, growth 0.
    let h = &header[header.len() - 75..];
    assert_eq!(&h[12..16], &13u32.to_le_bytes());
    assert_eq!(&h[16..20], &0u32.to_le_bytes());
    // 2^30 is the largest capacity; it fits in memory as pages that are never touched.
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "big", "0.01", "1073741824"]),
        "+OK\r\n"
    );
}

#[test]
fn rate_above_quarter_is_lowered() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["BF.RESERVE", "k", "0.5", "100"]), "+OK\r\n");
    let dbg = cmd(&mut c, &["BF.DEBUG", "k"]);
    assert!(
        dbg.contains("bytes:56 bits:448 hashes:4 hashwidth:64 capacity:100 size:0 ratio:0.125"),
        "{dbg}"
    );
    assert_eq!(
        cmd(
            &mut c,
            &["BF.INSERT", "i", "ERROR", "0.9", "NONSCALING", "ITEMS", "a"]
        ),
        "*1\r\n:1\r\n"
    );
    assert!(cmd(&mut c, &["BF.DEBUG", "i"]).contains("bytes:40 bits:320 hashes:3"));
}

#[test]
fn insert_current_line_ranges() {
    let s = start_server();
    let mut c = s.raw();
    let cases: &[(&[&str], &str)] = &[
        (&["ERROR", "0"], "-Bad error rate\r\n"),
        (&["ERROR", "1"], "-Bad error rate\r\n"),
        (&["CAPACITY", "0"], "-Bad capacity\r\n"),
        (&["CAPACITY", "1073741825"], "-Bad capacity\r\n"),
        (&["EXPANSION", "-1"], "-Bad expansion\r\n"),
        (&["EXPANSION", "32769"], "-Bad expansion\r\n"),
    ];
    for (opts, want) in cases {
        let mut argv = vec!["BF.INSERT", "k"];
        argv.extend_from_slice(opts);
        argv.extend_from_slice(&["ITEMS", "a"]);
        assert_eq!(cmd(&mut c, &argv), *want, "{opts:?}");
        // Value errors come before the missing-ITEMS arity error.
        let mut argv = vec!["BF.INSERT", "k"];
        argv.extend_from_slice(opts);
        assert_eq!(cmd(&mut c, &argv), *want, "{opts:?} without ITEMS");
    }
    // EXPANSION 0 is non-scaling.
    assert_eq!(
        cmd(
            &mut c,
            &[
                "BF.INSERT",
                "k",
                "CAPACITY",
                "1",
                "EXPANSION",
                "0",
                "ITEMS",
                "a",
                "b"
            ]
        ),
        "*2\r\n:1\r\n-ERR non scaling filter is full\r\n"
    );
}

#[test]
fn config_defaults_and_set() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "bf-*"]),
        "*6\r\n$13\r\nbf-error-rate\r\n$4\r\n0.01\r\n$15\r\nbf-initial-size\r\n$3\r\n100\r\n$19\r\nbf-expansion-factor\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf-error-rate", "0.001"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf-initial-size", "1000"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf-expansion-factor", "4"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["BF.ADD", "a", "x"]), ":1\r\n");
    assert_eq!(
        cmd(&mut c, &["BF.DEBUG", "a"]),
        "*2\r\n$6\r\nsize:1\r\n$78\r\nbytes:1984 bits:15872 hashes:11 hashwidth:64 capacity:1000 size:1 ratio:0.0005\r\n"
    );
    assert_eq!(cmd(&mut c, &["BF.INFO", "a", "EXPANSION"]), "*1\r\n:4\r\n");
    // RESERVE takes its default expansion from the config too.
    assert_eq!(cmd(&mut c, &["BF.RESERVE", "r", "0.01", "10"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["BF.INFO", "r", "EXPANSION"]), "*1\r\n:4\r\n");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf-expansion-factor", "0"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["BF.MADD", "n", "x"]), "*1\r\n:1\r\n");
    assert_eq!(cmd(&mut c, &["BF.INFO", "n", "EXPANSION"]), "*1\r\n$-1\r\n");

    let refused = |name: &str, value: &str, tail: &str| {
        let mut c = s.raw();
        let got = cmd(&mut c, &["CONFIG", "SET", name, value]);
        assert_eq!(
            got,
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {tail}\r\n")
        );
    };
    refused(
        "bf-error-rate",
        "1",
        "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)",
    );
    refused("bf-error-rate", "x", "Invalid value for `bf-error-rate`");
    refused(
        "bf-initial-size",
        "0",
        "Value for `bf-initial-size` must be in the range [1, 1073741824]",
    );
    refused(
        "bf-expansion-factor",
        "32769",
        "Value for `bf-expansion-factor` must be in the range [0, 32768]",
    );
    refused(
        "bf-expansion-factor",
        "1.5",
        "Invalid value for `bf-expansion-factor`",
    );
    // A rate above 0.25 is accepted and acts as 0.25; CONFIG GET shows what was set.
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf-error-rate", "0.5"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "bf-error-rate"]),
        "*2\r\n$13\r\nbf-error-rate\r\n$3\r\n0.5\r\n"
    );
}

#[test]
fn type_memory_and_command_info() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "bf", "0.05", "1000"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["TYPE", "bf"]), "+MBbloom--\r\n");
    assert_eq!(cmd(&mut c, &["BF.INFO", "bf", "SIZE"]), "*1\r\n:1056\r\n");
    // The current RedisBloom suite expects Size + 48 on Redis 7+.
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "bf"]), ":1104\r\n");
    let info = cmd(&mut c, &["COMMAND", "INFO", "bf.add"]);
    assert!(
        info.contains("bf.add") && info.contains("module") && info.contains("denyoom"),
        "{info}"
    );
    assert_eq!(
        cmd(&mut c, &["bf.ADD"]),
        "-ERR wrong number of arguments for 'bf.add' command\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["BF.INSERT", "k", "ITEMS"]),
        "-ERR wrong number of arguments for 'bf.insert' command\r\n"
    );
}

#[test]
fn memory_safety() {
    let s = start_server();
    let mut c = s.raw();
    // ~190 GB of bits: refused, not attempted.
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "huge", "1e-300", "1073741824"]),
        "-ERR Insufficient memory to create filter\r\n"
    );
    assert_eq!(
        cmd(
            &mut c,
            &[
                "BF.INSERT",
                "huge",
                "ERROR",
                "1e-300",
                "CAPACITY",
                "1073741824",
                "ITEMS",
                "a"
            ]
        ),
        "-ERR Insufficient memory to create filter\r\n"
    );
    // bloom.md §11: a crafted header whose scale-out would need ~2.8e14 bytes.
    let n: u64 = 0x0001_4874_ddf3_1811;
    let mut h = Vec::new();
    h.extend_from_slice(&n.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&1u64.to_le_bytes());
    h.extend_from_slice(&8u64.to_le_bytes());
    h.extend_from_slice(&n.to_le_bytes());
    h.extend_from_slice(&0.1f64.to_le_bytes());
    h.extend_from_slice(&0.1f64.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&n.to_le_bytes());
    h.push(0);
    assert_eq!(bin(&mut c, &[b"BF.LOADCHUNK", b"k", b"1", &h]), b"+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["BF.ADD", "k", "1"]),
        "-ERR problem inserting into filter\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["BF.LOADCHUNK", "k", "71752852194637", "HELLO"]),
        "-ERR invalid offset - no link found\r\n"
    );
    // A header claiming 2^50 bytes of bits.
    let mut h2 = h.clone();
    h2[20..28].copy_from_slice(&(1u64 << 50).to_le_bytes());
    h2[28..36].copy_from_slice(&(1u64 << 53).to_le_bytes());
    assert_eq!(
        bin(&mut c, &[b"BF.LOADCHUNK", b"k2", b"1", &h2]),
        b"-ERR received bad data\r\n"
    );
    // A NaN error rate.
    let mut h3 = h.clone();
    h3[44..52].copy_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(
        bin(&mut c, &[b"BF.LOADCHUNK", b"k3", b"1", &h3]),
        b"-ERR received bad data\r\n"
    );
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
}

#[test]
fn scandump_loadchunk_round_trip_over_the_wire() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        cmd(
            &mut c,
            &["BF.RESERVE", "src", "0.01", "10", "EXPANSION", "3"]
        ),
        "+OK\r\n"
    );
    for i in 0..300 {
        c.cmd_str(&["BF.ADD", "src", &format!("item:{i}")]);
    }
    // Parse [it, data] pairs by hand from the raw replies.
    let mut it: i64 = 0;
    loop {
        let r = bin(&mut c, &[b"BF.SCANDUMP", b"src", it.to_string().as_bytes()]);
        let text_end = r[4..].windows(2).position(|w| w == b"\r\n").expect("int") + 4;
        let next: i64 = std::str::from_utf8(&r[5..text_end])
            .expect("utf8")
            .parse()
            .expect("int");
        if next == 0 {
            break;
        }
        let len_start = text_end + 3;
        let len_end = r[len_start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("len")
            + len_start;
        let len: usize = std::str::from_utf8(&r[len_start..len_end])
            .expect("utf8")
            .parse()
            .expect("len");
        let data = &r[len_end + 2..len_end + 2 + len];
        assert_eq!(
            bin(
                &mut c,
                &[b"BF.LOADCHUNK", b"dst", next.to_string().as_bytes(), data]
            ),
            b"+OK\r\n"
        );
        it = next;
    }
    assert_eq!(
        cmd(&mut c, &["BF.DEBUG", "src"]),
        cmd(&mut c, &["BF.DEBUG", "dst"])
    );
    for i in 0..400 {
        let item = format!("item:{i}");
        assert_eq!(
            cmd(&mut c, &["BF.EXISTS", "src", &item]),
            cmd(&mut c, &["BF.EXISTS", "dst", &item])
        );
    }
}

/// What a client library sees: redis-rs parsing BF.* replies under RESP2 and RESP3, with a
/// SCANDUMP/LOADCHUNK round trip through the client's own types (as redis-py's tests do).
#[test]
fn redis_crate_parses_bloom_replies() {
    let s = start_server();
    for url in [s.url(), format!("{}?protocol=resp3", s.url())] {
        let client = redis::Client::open(url.as_str()).expect("client");
        let mut con = client.get_connection().expect("connection");
        let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("flushall");
        let ok: String = redis::cmd("BF.RESERVE")
            .arg("b")
            .arg(0.01)
            .arg(10)
            .query(&mut con)
            .expect("reserve");
        assert_eq!(ok, "OK");
        let added: Vec<bool> = redis::cmd("BF.MADD")
            .arg("b")
            .arg(&["a", "b", "c"])
            .query(&mut con)
            .expect("madd");
        assert_eq!(added, vec![true, true, true], "{url}");
        let one: bool = redis::cmd("BF.ADD")
            .arg("b")
            .arg("a")
            .query(&mut con)
            .expect("add");
        assert!(!one);
        let found: Vec<bool> = redis::cmd("BF.MEXISTS")
            .arg("b")
            .arg(&["a", "zzz"])
            .query(&mut con)
            .expect("mexists");
        assert_eq!(found, vec![true, false]);
        let card: i64 = redis::cmd("BF.CARD")
            .arg("b")
            .query(&mut con)
            .expect("card");
        assert_eq!(card, 3);
        // The full BF.INFO as name → value pairs (a flat array in RESP2, a map in RESP3).
        let info: Vec<(String, Option<i64>)> = match redis::cmd("BF.INFO")
            .arg("b")
            .query::<redis::Value>(&mut con)
            .expect("info")
        {
            redis::Value::Map(pairs) => pairs
                .into_iter()
                .map(|(k, v)| {
                    (
                        redis::from_redis_value(&k).expect("name"),
                        redis::from_redis_value(&v).expect("value"),
                    )
                })
                .collect(),
            redis::Value::Array(flat) => flat
                .chunks(2)
                .map(|kv| {
                    (
                        redis::from_redis_value(&kv[0]).expect("name"),
                        redis::from_redis_value(&kv[1]).expect("value"),
                    )
                })
                .collect(),
            other => panic!("unexpected BF.INFO reply {other:?}"),
        };
        assert_eq!(
            info,
            vec![
                ("Capacity".into(), Some(10)),
                ("Size".into(), Some(112)),
                ("Number of filters".into(), Some(1)),
                ("Number of items inserted".into(), Some(3)),
                ("Expansion rate".into(), Some(2)),
            ],
            "{url}"
        );
        let mut chunks: Vec<(i64, Vec<u8>)> = Vec::new();
        let mut it = 0i64;
        loop {
            let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
                .arg("b")
                .arg(it)
                .query(&mut con)
                .expect("scandump");
            if next == 0 {
                break;
            }
            chunks.push((next, data));
            it = next;
        }
        for (it, data) in &chunks {
            let ok: String = redis::cmd("BF.LOADCHUNK")
                .arg("copy")
                .arg(*it)
                .arg(data.as_slice())
                .query(&mut con)
                .expect("loadchunk");
            assert_eq!(ok, "OK");
        }
        let a: Vec<String> = redis::cmd("BF.DEBUG")
            .arg("b")
            .query(&mut con)
            .expect("debug");
        let b: Vec<String> = redis::cmd("BF.DEBUG")
            .arg("copy")
            .query(&mut con)
            .expect("debug");
        assert_eq!(a, b);
        // Auto-creation with the defaults.
        let created: bool = redis::cmd("BF.ADD")
            .arg("auto")
            .arg("x")
            .query(&mut con)
            .expect("add");
        assert!(created);
        let err = redis::cmd("BF.INFO")
            .arg("missing")
            .query::<redis::Value>(&mut con);
        assert!(err.is_err_and(|e| e.to_string().contains("not found")));
    }
}

/// A pipelined batch over filters too big for the caches prefetches its items' probes
/// (`commands::prefetch_keys`): the replies must be those of the same commands sent one by one.
#[test]
fn pipelined_filter_batches_answer_as_commands_one_by_one() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        cmd(&mut c, &["BF.RESERVE", "bf", "0.01", "2000000"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["CF.RESERVE", "cf", "2000000"]), "+OK\r\n");
    let item = |i: u32| format!("item:{i}");
    // Half the items are added, pipelined in batches, then every item is asked about.
    let mut batch = Vec::new();
    for i in (0..4000).step_by(2) {
        batch.extend(common::encode_command(&[
            b"BF.ADD",
            b"bf",
            item(i).as_bytes(),
        ]));
        batch.extend(common::encode_command(&[
            b"CF.ADD",
            b"cf",
            item(i).as_bytes(),
        ]));
    }
    c.send_raw(&batch);
    for _ in (0..4000).step_by(2) {
        assert_eq!(c.read_reply(), b":1\r\n", "BF.ADD of a new item");
        assert_eq!(c.read_reply(), b":1\r\n", "CF.ADD");
    }
    let queries: Vec<[Vec<u8>; 3]> = (0..4000)
        .flat_map(|i| {
            [
                [b"BF.EXISTS".to_vec(), b"bf".to_vec(), item(i).into_bytes()],
                [b"CF.EXISTS".to_vec(), b"cf".to_vec(), item(i).into_bytes()],
                [b"bf.exists".to_vec(), b"cf".to_vec(), item(i).into_bytes()],
            ]
        })
        .collect();
    let one_by_one: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| c.cmd(&[&q[0], &q[1], &q[2]]))
        .collect();
    let mut batch = Vec::new();
    for q in &queries {
        batch.extend(common::encode_command(&[&q[0], &q[1], &q[2]]));
    }
    c.send_raw(&batch);
    for (i, expected) in one_by_one.iter().enumerate() {
        assert_eq!(&c.read_reply(), expected, "query {i}");
    }
    for i in (0..4000).step_by(2) {
        assert_eq!(one_by_one[3 * i as usize], b":1\r\n", "no false negative");
        assert_eq!(one_by_one[3 * i as usize + 1], b":1\r\n");
    }
    // (BF.EXISTS on the cuckoo key: whatever RedisBloom answers one by one, the batch answers.)
}
