//! CMS.* and TOPK.* behaviour the golden vectors leave out: the current line's allocation limits
//! (errors, never an abort), TYPE / OBJECT ENCODING / MEMORY USAGE / COMMAND INFO / MODULE LIST,
//! WATCH seeing failed writes, the save-point counter, MERGE keeping the destination's TTL, the
//! well-formed TOPK.INCRBY array and decay texts as Redis 7.0 prints them.

mod common;

use common::{start_server, RawConn};

fn cmd(c: &mut RawConn, argv: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd_str(argv)).into_owned()
}

#[test]
fn sizes_beyond_memory_are_errors_not_aborts() {
    let s = start_server();
    let mut c = s.raw();
    for argv in [
        &["CMS.INITBYDIM", "c", "1000000000000", "1"][..],
        &["CMS.INITBYDIM", "c", "1000000000", "1000000000"],
        &["CMS.INITBYDIM", "c", "4611686018427387904", "1"],
        &["CMS.INITBYPROB", "c", "1e-12", "0.5"],
        &["CMS.INITBYPROB", "c", "1e-16", "1e-16"],
        &["CMS.INITBYPROB", "c", "3e-19", "0.5"],
    ] {
        assert_eq!(
            cmd(&mut c, argv),
            "-CMS: Insufficient memory to create the key\r\n",
            "{argv:?}"
        );
    }
    assert_eq!(
        cmd(&mut c, &["CMS.INITBYDIM", "c", "8589934592", "8589934592"]),
        "-CMS: invalid init arguments\r\n"
    );
    for argv in [
        &["TOPK.RESERVE", "t", "4294967295"][..],
        &["TOPK.RESERVE", "t", "3", "2000000000", "200000000", "1"],
        &["TOPK.RESERVE", "t", "1", "4294967295", "4294967295", "1"],
    ] {
        assert_eq!(
            cmd(&mut c, argv),
            "-ERR Insufficient memory to create topk data structure\r\n",
            "{argv:?}"
        );
    }
    assert_eq!(cmd(&mut c, &["DBSIZE"]), ":0\r\n");
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
}

#[test]
fn type_encoding_memory_usage_module_list() {
    let s = start_server();
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["CMS.INITBYDIM", "c", "20", "5"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["TOPK.RESERVE", "t", "3", "50", "4", "0.5"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["TYPE", "c"]), "+CMSk-TYPE\r\n");
    assert_eq!(cmd(&mut c, &["TYPE", "t"]), "+TopK-TYPE\r\n");
    assert_eq!(cmd(&mut c, &["OBJECT", "ENCODING", "c"]), "$3\r\nraw\r\n");
    assert_eq!(cmd(&mut c, &["OBJECT", "ENCODING", "t"]), "$3\r\nraw\r\n");
    // Type figures (cms.md §10 current line: 32 + 4·w·d; topk.md §11: 2088 + 8·w·d + 24·k) plus
    // the per-key overhead every module type gets here (key length + 46).
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "c"]), ":479\r\n");
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "t"]), ":3807\r\n");
    let modules = cmd(&mut c, &["MODULE", "LIST"]);
    assert!(
        modules.starts_with("*1\r\n") && modules.contains("$2\r\nbf\r\n"),
        "{modules}"
    );
}

#[test]
fn command_info_entries() {
    let s = start_server();
    let mut c = s.raw();
    let info = cmd(&mut c, &["COMMAND", "INFO", "cms.merge"]);
    assert!(
        info.starts_with("*1\r\n*10\r\n$9\r\ncms.merge\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+module\r\n:1\r\n:1\r\n:1\r\n"),
        "{info}"
    );
    let info = cmd(&mut c, &["COMMAND", "INFO", "topk.count"]);
    assert!(
        info.starts_with("*1\r\n*10\r\n$10\r\ntopk.count\r\n:-3\r\n*2\r\n+readonly\r\n+module\r\n"),
        "{info}"
    );
    for (name, arity) in [
        ("cms.initbydim", 4),
        ("cms.initbyprob", 4),
        ("cms.incrby", -4),
        ("cms.query", -3),
        ("cms.info", 2),
        ("topk.reserve", -3),
        ("topk.add", -3),
        ("topk.incrby", -4),
        ("topk.query", -3),
        ("topk.list", -2),
        ("topk.info", 2),
    ] {
        let info = cmd(&mut c, &["COMMAND", "INFO", name]);
        assert!(
            info.contains(&format!("\r\n{name}\r\n:{arity}\r\n")),
            "{info}"
        );
    }
    // Declared arities: MULTI refuses at queue time (current line).
    assert_eq!(cmd(&mut c, &["MULTI"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["CMS.INFO"]),
        "-ERR wrong number of arguments for 'cms.info' command\r\n"
    );
    assert!(cmd(&mut c, &["EXEC"]).starts_with("-EXECABORT"));
}

/// EXEC after WATCH key and `argv` (run on another connection): aborted (`*-1`) or not.
fn watch_aborts(s: &common::TestServer, setup: &[&[&str]], argv: &[&str]) -> bool {
    let mut c = s.raw();
    let mut other = s.raw();
    cmd(&mut c, &["FLUSHALL"]);
    for step in setup {
        cmd(&mut c, step);
    }
    cmd(&mut c, &["WATCH", "k"]);
    cmd(&mut other, argv);
    cmd(&mut c, &["MULTI"]);
    cmd(&mut c, &["PING"]);
    cmd(&mut c, &["EXEC"]) == "*-1\r\n"
}

#[test]
fn watch_sees_failed_writes() {
    let s = start_server();
    let cms: &[&[&str]] = &[&["CMS.INITBYDIM", "k", "4", "2"]];
    let topk: &[&[&str]] = &[&["TOPK.RESERVE", "k", "2"]];
    let string: &[&[&str]] = &[&["SET", "k", "v"]];
    // Opened for writing, then failed: still a modification for WATCH (cms.md §12, topk.md §13).
    assert!(watch_aborts(&s, cms, &["CMS.INITBYDIM", "k", "4", "2"]));
    assert!(watch_aborts(
        &s,
        string,
        &["CMS.INITBYPROB", "k", "0.1", "0.1"]
    ));
    assert!(watch_aborts(&s, &[], &["CMS.INCRBY", "k", "a", "1"]));
    assert!(watch_aborts(&s, cms, &["CMS.INCRBY", "k", "a", "x"]));
    assert!(watch_aborts(&s, cms, &["CMS.MERGE", "k", "1", "missing"]));
    assert!(watch_aborts(&s, topk, &["TOPK.RESERVE", "k", "2"]));
    assert!(watch_aborts(&s, &[], &["TOPK.ADD", "k", "a"]));
    assert!(watch_aborts(&s, topk, &["TOPK.INCRBY", "k", "a", "-1"]));
    // Reads and arity errors do not.
    assert!(!watch_aborts(&s, cms, &["CMS.QUERY", "k", "a"]));
    assert!(!watch_aborts(&s, cms, &["CMS.INFO", "k"]));
    assert!(!watch_aborts(&s, cms, &["CMS.INCRBY", "k", "a", "1", "b"]));
    assert!(!watch_aborts(&s, topk, &["TOPK.LIST", "k", "WITHCOUNT"]));
    assert!(!watch_aborts(&s, topk, &["TOPK.COUNT", "k", "a"]));
}

fn changes(c: &mut RawConn) -> u64 {
    let info = cmd(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rdb_changes_since_last_save")
}

#[test]
fn save_points_count_successful_writes_once() {
    let s = start_server();
    let mut c = s.raw();
    let base = changes(&mut c);
    cmd(&mut c, &["CMS.INITBYDIM", "c", "4", "2"]);
    cmd(&mut c, &["CMS.INITBYDIM", "c", "4", "2"]);
    cmd(&mut c, &["CMS.INCRBY", "c", "a", "x"]);
    cmd(&mut c, &["CMS.QUERY", "c", "a"]);
    assert_eq!(changes(&mut c), base + 1);
    cmd(&mut c, &["CMS.INCRBY", "c", "a", "1", "b", "2"]);
    cmd(&mut c, &["TOPK.RESERVE", "t", "2"]);
    cmd(&mut c, &["TOPK.ADD", "t", "a", "b", "c"]);
    assert_eq!(changes(&mut c), base + 4);
}

#[test]
fn merge_writes_in_place_and_keeps_the_ttl() {
    let s = start_server();
    let mut c = s.raw();
    cmd(&mut c, &["CMS.INITBYDIM", "d", "10", "3"]);
    cmd(&mut c, &["CMS.INITBYDIM", "a", "10", "3"]);
    cmd(&mut c, &["CMS.INCRBY", "a", "x", "5"]);
    cmd(&mut c, &["PEXPIREAT", "d", "4102444800000"]);
    assert_eq!(
        cmd(
            &mut c,
            &["CMS.MERGE", "d", "2", "a", "a", "WEIGHTS", "2", "3"]
        ),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["CMS.QUERY", "d", "x"]), "*1\r\n:25\r\n");
    assert_eq!(cmd(&mut c, &["PEXPIRETIME", "d"]), ":4102444800000\r\n");
    // A self-merge reads the old cells.
    assert_eq!(cmd(&mut c, &["CMS.MERGE", "d", "2", "d", "d"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["CMS.QUERY", "d", "x"]), "*1\r\n:50\r\n");
}

#[test]
fn topk_incrby_array_is_well_formed_when_it_stops_early() {
    let s = start_server();
    let mut c = s.raw();
    cmd(&mut c, &["TOPK.RESERVE", "t", "3"]);
    // RedisBloom announces *3 and sends one element (topk.md §3.3); hyperbloom sends *1.
    assert_eq!(
        cmd(&mut c, &["TOPK.INCRBY", "t", "a", "x", "b", "1", "c", "2"]),
        "*1\r\n-TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000\r\n"
    );
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
    assert_eq!(
        cmd(&mut c, &["TOPK.INCRBY", "t", "a", "3", "b", "100001", "c", "2"]),
        "*2\r\n$-1\r\n-TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000\r\n"
    );
    // The pair before the bad one stays applied.
    assert_eq!(
        cmd(&mut c, &["TOPK.LIST", "t", "WITHCOUNT"]),
        "*2\r\n$1\r\na\r\n:3\r\n"
    );
}

#[test]
fn topk_info_decay_as_redis_7_0_prints_it() {
    let s = start_server();
    let mut c = s.raw();
    cmd(&mut c, &["TOPK.RESERVE", "t", "3"]);
    assert_eq!(
        cmd(&mut c, &["TOPK.INFO", "t"]),
        "*8\r\n+k\r\n:3\r\n+width\r\n:8\r\n+depth\r\n:7\r\n+decay\r\n$19\r\n0.90000000000000002\r\n"
    );
    let mut c3 = s.raw();
    cmd(&mut c3, &["HELLO", "3"]);
    assert_eq!(
        cmd(&mut c3, &["TOPK.INFO", "t"]),
        "%4\r\n+k\r\n:3\r\n+width\r\n:8\r\n+depth\r\n:7\r\n+decay\r\n,0.90000000000000002\r\n"
    );
}

#[test]
fn sketches_survive_save_and_reload() {
    let dir = common::tempdir("cms-topk-reload");
    let s = common::start_with(&[
        "--dir",
        dir.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = s.raw();
    cmd(&mut c, &["CMS.INITBYPROB", "c", "0.01", "0.01"]);
    cmd(&mut c, &["CMS.INCRBY", "c", "apple", "7", "pie", "3"]);
    cmd(&mut c, &["TOPK.RESERVE", "t", "3", "20", "3", "1"]);
    cmd(&mut c, &["TOPK.ADD", "t", "a", "b", "a", "c", "d", "a"]);
    let before = (
        cmd(&mut c, &["CMS.QUERY", "c", "apple", "pie", "x"]),
        cmd(&mut c, &["TOPK.LIST", "t", "WITHCOUNT"]),
    );
    let dump_c = c.cmd_str(&["DUMP", "c"]);
    assert_eq!(cmd(&mut c, &["DEBUG", "RELOAD"]), "+OK\r\n");
    let after = (
        cmd(&mut c, &["CMS.QUERY", "c", "apple", "pie", "x"]),
        cmd(&mut c, &["TOPK.LIST", "t", "WITHCOUNT"]),
    );
    assert_eq!(before, after);
    assert_eq!(c.cmd_str(&["DUMP", "c"]), dump_c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
