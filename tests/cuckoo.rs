//! CF.* behaviour the golden vectors leave out: the current RedisBloom line's range errors, RESP3
//! typing of INSERT/INSERTNX, the `cf-*` configs, TYPE / MEMORY USAGE / COMMAND INFO, and crafted
//! LOADCHUNK headers that must be refused (or loaded lazily) without exhausting memory.

mod common;

use common::{start_server, RawConn};

fn cmd(c: &mut RawConn, argv: &[&[u8]]) -> String {
    String::from_utf8_lossy(&c.cmd(argv)).into_owned()
}

fn header(
    items: u64,
    buckets: u64,
    deletes: u64,
    filters: u64,
    bs: u16,
    it: u16,
    exp: u16,
) -> Vec<u8> {
    let mut h = Vec::new();
    for v in [items, buckets, deletes, filters] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    for v in [bs, it, exp] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h
}

#[test]
fn reserve_range_errors_of_the_current_line() {
    let s = start_server();
    let mut c = s.raw();
    let cases: [(&[&[u8]], &str); 8] = [
        (
            &[b"CF.RESERVE", b"k", b"100", b"BUCKETSIZE", b"0"],
            "-BUCKETSIZE: value must be in the range [1, 255]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"1000", b"BUCKETSIZE", b"256"],
            "-BUCKETSIZE: value must be in the range [1, 255]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"MAXITERATIONS", b"0"],
            "-MAXITERATIONS: value must be in the range [1, 65535]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"MAXITERATIONS", b"65536"],
            "-MAXITERATIONS: value must be in the range [1, 65535]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"EXPANSION", b"32769"],
            "-EXPANSION: value must be in the range [0, 32768]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"3"],
            "-Capacity must be in the range [2 * BUCKETSIZE, 1073741824]\r\n",
        ),
        (
            &[b"CF.RESERVE", b"k", b"1073741825"],
            "-Capacity must be in the range [2 * BUCKETSIZE, 1073741824]\r\n",
        ),
        (
            &[
                b"CF.RESERVE",
                b"k",
                b"100",
                b"MAXITERATIONS",
                b"5",
                b"EXPANSION",
            ],
            "-ERR wrong number of arguments for 'cf.reserve' command\r\n",
        ),
    ];
    for (argv, want) in cases {
        assert_eq!(cmd(&mut c, argv), want, "{argv:?}");
    }
    // A keyword as the last argument has no value: "Couldn't parse".
    assert_eq!(
        cmd(&mut c, &[b"CF.RESERVE", b"k", b"100", b"x", b"EXPANSION"]),
        "-Couldn't parse EXPANSION\r\n"
    );
    assert_eq!(
        cmd(
            &mut c,
            &[b"CF.INSERT", b"k", b"CAPACITY", b"3", b"ITEMS", b"a"]
        ),
        "-Capacity must be in the range [cf-bucket-size * 2, 1073741824]\r\n"
    );
    // The biggest reservation is cheap: pages are allocated on first write.
    assert_eq!(
        cmd(
            &mut c,
            &[b"CF.RESERVE", b"big", b"1073741824", b"BUCKETSIZE", b"1"]
        ),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &[b"CF.ADD", b"big", b"x"]), ":1\r\n");
}

#[test]
fn resp3_sequence_from_the_redisbloom_suite() {
    let s = start_server();
    let mut c = s.raw();
    c.cmd(&[b"HELLO", b"3"]);
    assert_eq!(
        cmd(&mut c, &[b"CF.RESERVE", b"a", b"9", b"EXPANSION", b"0"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &[b"CF.ADD", b"a", b"3"]), "#t\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.ADD", b"a", b"4"]), "#t\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.ADDNX", b"a", b"4"]), "#f\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.ADDNX", b"a", b"9"]), "#t\r\n");
    assert_eq!(
        cmd(&mut c, &[b"CF.INSERT", b"a", b"ITEMS", b"4", b"5"]),
        "*2\r\n#t\r\n#t\r\n"
    );
    assert_eq!(
        cmd(&mut c, &[b"CF.INSERTNX", b"a", b"ITEMS", b"4", b"6"]),
        "*2\r\n:0\r\n:1\r\n"
    );
    assert_eq!(cmd(&mut c, &[b"CF.DEL", b"a", b"3"]), "#t\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.DEL", b"a", b"3"]), "#f\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.COUNT", b"a", b"4"]), ":2\r\n");
    assert_eq!(
        cmd(&mut c, &[b"CF.INFO", b"a"]),
        "%8\r\n+Size\r\n:64\r\n+Number of buckets\r\n:4\r\n+Number of filters\r\n:1\r\n+Number of items inserted\r\n:5\r\n+Number of items deleted\r\n:1\r\n+Bucket size\r\n:2\r\n+Expansion rate\r\n:0\r\n+Max iterations\r\n:20\r\n"
    );
    // A full non-growing filter: INSERT answers #f per item in RESP3, :-1 in RESP2.
    cmd(
        &mut c,
        &[
            b"CF.RESERVE",
            b"f",
            b"4",
            b"BUCKETSIZE",
            b"1",
            b"EXPANSION",
            b"0",
        ],
    );
    let items: Vec<Vec<u8>> = (0..12).map(|i| format!("i{i}").into_bytes()).collect();
    let mut argv: Vec<&[u8]> = vec![b"CF.INSERT", b"f", b"ITEMS"];
    argv.extend(items.iter().map(|i| i.as_slice()));
    let r = cmd(&mut c, &argv);
    assert!(r.contains("#f\r\n") && !r.contains(":-1"), "{r}");
    let mut c2 = s.raw();
    let r = cmd(&mut c2, &argv);
    assert!(r.contains(":-1\r\n") && !r.contains("#f"), "{r}");
}

#[test]
fn type_memory_usage_and_command_info() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &[b"CF.RESERVE", b"bf", b"1000"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &[b"TYPE", b"bf"]), "+MBbloomCF\r\n");
    // Size 1080 + 48, as RedisBloom's suite expects on Redis >= 7.
    assert_eq!(cmd(&mut c, &[b"MEMORY", b"USAGE", b"bf"]), ":1128\r\n");
    let info = cmd(&mut c, &[b"COMMAND", b"INFO", b"cf.compact", b"cf.add"]);
    assert!(
        info.contains("cf.compact") && info.contains("readonly") && info.contains("module"),
        "{info}"
    );
    assert!(
        info.contains("cf.add") && info.contains("denyoom"),
        "{info}"
    );
}

#[test]
fn cf_configs() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(
        cmd(&mut c, &[b"CONFIG", b"GET", b"cf-*"]),
        "*10\r\n$14\r\ncf-bucket-size\r\n$1\r\n2\r\n$15\r\ncf-initial-size\r\n$4\r\n1024\r\n$17\r\ncf-max-iterations\r\n$2\r\n20\r\n$19\r\ncf-expansion-factor\r\n$1\r\n1\r\n$17\r\ncf-max-expansions\r\n$2\r\n32\r\n"
    );
    let e = cmd(&mut c, &[b"CONFIG", b"SET", b"cf-bucket-size", b"256"]);
    assert!(e.contains("must be in the range"), "{e}");
    let e = cmd(&mut c, &[b"CONFIG", b"SET", b"cf-max-iterations", b"x"]);
    assert!(e.starts_with("-ERR CONFIG SET failed"), "{e}");
    for (k, v) in [
        ("cf-bucket-size", "4"),
        ("cf-initial-size", "64"),
        ("cf-max-iterations", "7"),
        ("cf-expansion-factor", "3"),
    ] {
        assert_eq!(
            cmd(&mut c, &[b"CONFIG", b"SET", k.as_bytes(), v.as_bytes()]),
            "+OK\r\n"
        );
    }
    // cf-initial-size 64 caps the bucket size at 32; bucket size 4 floors the initial size at 8.
    assert!(cmd(&mut c, &[b"CONFIG", b"SET", b"cf-bucket-size", b"33"]).contains("[1, 32]"));
    assert!(cmd(&mut c, &[b"CONFIG", b"SET", b"cf-initial-size", b"7"]).contains("[8, 1073741824]"));
    cmd(&mut c, &[b"CF.ADD", b"auto", b"x"]);
    assert_eq!(
        cmd(&mut c, &[b"CF.DEBUG", b"auto"]),
        "$77\r\nbktsize:4 buckets:16 items:1 deletes:0 filters:1 max_iterations:7 expansion:4\r\n"
    );
    // The sub-filter limit comes from cf-max-expansions.
    assert_eq!(
        cmd(&mut c, &[b"CONFIG", b"SET", b"cf-max-expansions", b"1"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &[b"CF.ADD", b"auto", b"y"]),
        "-Maximum expansions reached\r\n"
    );
}

#[test]
fn crafted_loadchunk_headers() {
    let s = start_server();
    let mut c = s.raw();
    // test_scandump_invalid_header_alloc: 2^48 buckets.
    let h = header(1, 1 << 48, 0, 1, 2, 20, 1);
    assert_eq!(
        cmd(&mut c, &[b"CF.LOADCHUNK", b"k", b"1", &h]),
        "-Couldn't create filter!\r\n"
    );
    // numFilters above 65535 is refused, not truncated to 16 bits.
    let h = header(1, 8, 0, 65536 + 1, 2, 20, 1);
    assert_eq!(
        cmd(&mut c, &[b"CF.LOADCHUNK", b"k", b"1", &h]),
        "-Couldn't create filter!\r\n"
    );
    // 65535 sub-filters of 2^21 buckets: 128 GiB, refused.
    let h = header(1, 1 << 21, 0, 65535, 1, 20, 1);
    assert_eq!(
        cmd(&mut c, &[b"CF.LOADCHUNK", b"k", b"1", &h]),
        "-Couldn't create filter!\r\n"
    );
    // A 4 GiB sub-filter loads (lazily) and accepts inserts, as in RedisBloom's suite.
    let h = header(0, 1 << 32, 0, 1, 1, 20, 1);
    assert_eq!(cmd(&mut c, &[b"CF.LOADCHUNK", b"k", b"1", &h]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.ADD", b"k", b"foo"]), ":1\r\n");
    assert_eq!(cmd(&mut c, &[b"CF.EXISTS", b"k", b"foo"]), ":1\r\n");
    // A chunk past the last sub-filter is refused (RedisBloom would write it at a wrong offset).
    assert_eq!(
        cmd(&mut c, &[b"CF.LOADCHUNK", b"k", b"9999999999999", b"ab"]),
        "-Couldn't load chunk!\r\n"
    );
}
