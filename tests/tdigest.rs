//! TDIGEST.* behaviour the golden vectors do not cover: compressions made by SAVE (and not by
//! BGSAVE's copy), WATCH untouched by read-command compressions, the compression limits, the command
//! table's entries, MEMORY USAGE and MODULE LIST.

mod common;

fn info_field(reply: &[u8], name: &str) -> i64 {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    while let Some(l) = lines.next() {
        if l == format!("+{name}") {
            return lines.next().unwrap()[1..].parse().unwrap();
        }
    }
    panic!("{name} not in {text}");
}

#[test]
fn save_compresses_the_live_digest_and_reload_answers_the_same() {
    let dir = common::tempdir("tdigest-save");
    let server = common::start_with(&[
        "--dir",
        dir.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = server.raw();
    c.cmd_str(&["TDIGEST.CREATE", "t", "COMPRESSION", "20"]);
    for i in 0..50 {
        c.cmd_str(&["TDIGEST.ADD", "t", &format!("{}", (i * 37) % 101)]);
    }
    let before = c.cmd_str(&["TDIGEST.INFO", "t"]);
    assert!(info_field(&before, "Unmerged nodes") > 0);
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let after = c.cmd_str(&["TDIGEST.INFO", "t"]);
    assert_eq!(info_field(&after, "Unmerged nodes"), 0);
    assert_eq!(
        info_field(&after, "Total compressions"),
        info_field(&before, "Total compressions") + 1
    );
    let q = c.cmd_str(&["TDIGEST.QUANTILE", "t", "0.1", "0.5", "0.99"]);
    let dump = c.cmd_str(&["DUMP", "t"]);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["TDIGEST.INFO", "t"]), after);
    assert_eq!(
        c.cmd_str(&["TDIGEST.QUANTILE", "t", "0.1", "0.5", "0.99"]),
        q
    );
    assert_eq!(c.cmd_str(&["DUMP", "t"]), dump);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_commands_compress_without_touching_watch() {
    let server = common::start_server();
    let mut c = server.raw();
    c.cmd_str(&["TDIGEST.CREATE", "t"]);
    c.cmd_str(&["TDIGEST.ADD", "t", "1", "2", "3"]);
    c.cmd_str(&["WATCH", "t"]);
    c.cmd_str(&["TDIGEST.QUANTILE", "t", "0.5"]);
    c.cmd_str(&["DUMP", "t"]);
    assert_eq!(
        info_field(&c.cmd_str(&["TDIGEST.INFO", "t"]), "Total compressions"),
        1
    );
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["SET", "x", "1"]);
    assert_eq!(c.cmd_str(&["EXEC"]), b"*1\r\n+OK\r\n");
    // A write does.
    c.cmd_str(&["WATCH", "t"]);
    c.cmd_str(&["TDIGEST.ADD", "t", "4"]);
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["SET", "x", "1"]);
    assert_eq!(c.cmd_str(&["EXEC"]), b"*-1\r\n");
}

#[test]
fn compression_limits() {
    let server = common::start_server();
    let mut c = server.raw();
    // The largest compression whose capacity fits an int32 costs nothing until values arrive.
    assert_eq!(
        c.cmd_str(&["TDIGEST.CREATE", "big", "COMPRESSION", "357913939"]),
        b"+OK\r\n"
    );
    let info = c.cmd_str(&["TDIGEST.INFO", "big"]);
    assert_eq!(info_field(&info, "Capacity"), 2147483644);
    assert_eq!(info_field(&info, "Memory usage"), 80 + 16 * 2147483644);
    assert_eq!(
        c.cmd_str(&["TDIGEST.ADD", "big", "1", "2", "3"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["TDIGEST.QUANTILE", "big", "0.5"]),
        b"*1\r\n$1\r\n2\r\n"
    );
    for bad in ["357913940", "100000000000000000", "9223372036854775807"] {
        assert_eq!(
            c.cmd_str(&["TDIGEST.CREATE", "x", "COMPRESSION", bad]),
            b"-ERR T-Digest: allocation failed\r\n"
        );
        assert_eq!(
            c.cmd_str(&["TDIGEST.MERGE", "x", "1", "big", "COMPRESSION", bad]),
            b"-ERR T-Digest: allocation of destination digest failed\r\n"
        );
    }
    assert_eq!(c.cmd_str(&["EXISTS", "x"]), b":0\r\n");
}

#[test]
fn table_entries_memory_usage_and_module_list() {
    let server = common::start_server();
    let mut c = server.raw();
    let info = c.cmd_str(&["COMMAND", "INFO", "tdigest.merge", "tdigest.quantile"]);
    let text = String::from_utf8_lossy(&info);
    assert!(text.contains("tdigest.merge\r\n:-4\r\n"), "{text}");
    assert!(text.contains("tdigest.quantile\r\n:-3\r\n"), "{text}");
    assert!(text.contains("+denyoom"), "{text}");
    c.cmd_str(&["TDIGEST.CREATE", "t"]);
    let usage = String::from_utf8_lossy(&c.cmd_str(&["MEMORY", "USAGE", "t"])).to_string();
    let usage: i64 = usage.trim_start_matches(':').trim().parse().unwrap();
    // RedisBloom's figure (80 + 16 × 610) plus the key's overhead.
    assert!((9840..9840 + 64).contains(&usage), "{usage}");
    let modules = String::from_utf8_lossy(&c.cmd_str(&["MODULE", "LIST"])).to_string();
    assert!(modules.contains("bf"), "{modules}");
    assert_eq!(c.cmd_str(&["OBJECT", "ENCODING", "t"]), b"$3\r\nraw\r\n");
}
