//! Golden vectors for the BF.* commands: every case of `tests/vectors/bloom.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6, limited to inputs where the current line answers the same)
//! replayed against an in-process server over raw sockets, in RESP2 and RESP3, byte for byte.
//!
//! A case is FLUSHALL, its setup commands (replies ignored), then its command. RESP3 runs on a fresh
//! connection per case that first sends `HELLO 3` and discards the reply.

mod common;

use common::{start_server, RawConn};

struct Case {
    name: String,
    setup: Vec<Vec<Vec<u8>>>,
    cmd: Vec<Vec<u8>>,
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

/// Byte strings are stored as JSON strings whose code points are the bytes (latin-1).
fn latin1(v: &serde_json::Value) -> Vec<u8> {
    v.as_str()
        .expect("a string")
        .chars()
        .map(|c| u8::try_from(u32::from(c)).expect("a latin-1 code point"))
        .collect()
}

fn command(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v.as_array().expect("an argv").iter().map(latin1).collect()
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/bloom.jsonl"
    ))
    .expect("tests/vectors/bloom.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON case");
            Case {
                name: v["name"].as_str().expect("name").to_string(),
                setup: v["setup"]
                    .as_array()
                    .expect("setup")
                    .iter()
                    .map(command)
                    .collect(),
                cmd: command(&v["cmd"]),
                resp2: latin1(&v["resp2"]),
                resp3: latin1(&v["resp3"]),
            }
        })
        .collect()
}

fn printable(b: &[u8]) -> String {
    let cut = &b[..b.len().min(400)];
    format!(
        "{:?}{}",
        String::from_utf8_lossy(cut),
        if b.len() > cut.len() { " …" } else { "" }
    )
}

enum Outcome {
    Pass,
    /// The setup uses a command of another family (CF.*, PF*) this build does not have yet.
    Skipped(String),
    Fail(String),
}

fn replay(conn: &mut RawConn, case: &Case, expected: &[u8]) -> Outcome {
    assert_eq!(conn.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    for step in &case.setup {
        let argv: Vec<&[u8]> = step.iter().map(Vec::as_slice).collect();
        if conn.cmd(&argv).starts_with(b"-ERR unknown command") {
            return Outcome::Skipped(String::from_utf8_lossy(&step[0]).to_uppercase());
        }
    }
    let argv: Vec<&[u8]> = case.cmd.iter().map(Vec::as_slice).collect();
    let got = conn.cmd(&argv);
    if got == expected {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "\n   want {}\n    got {}",
            printable(expected),
            printable(&got)
        ))
    }
}

#[test]
fn bloom_vectors_resp2_and_resp3() {
    let cases = cases();
    assert_eq!(cases.len(), 417, "bloom.jsonl holds 417 cases");
    let server = start_server();
    let mut resp2 = server.raw();
    let (mut passed, mut failed, mut skipped) = (0, Vec::new(), Vec::new());
    for case in &cases {
        let mut resp3 = server.raw();
        resp3.cmd(&[b"HELLO", b"3"]);
        for (proto, conn, expected) in [(2, &mut resp2, &case.resp2), (3, &mut resp3, &case.resp3)]
        {
            match replay(conn, case, expected) {
                Outcome::Pass => passed += 1,
                Outcome::Skipped(cmd) => {
                    skipped.push(format!("[RESP{proto}] {} (needs {cmd})", case.name))
                }
                Outcome::Fail(why) => failed.push(format!("[RESP{proto}] {}:{why}", case.name)),
            }
        }
    }
    println!(
        "bloom vectors: {passed}/{} replies identical",
        2 * cases.len()
    );
    if !skipped.is_empty() {
        println!("skipped {}:\n{}", skipped.len(), skipped.join("\n"));
    }
    assert!(
        failed.is_empty(),
        "{} mismatches:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // Only cases whose setup needs the cuckoo (CF.*) or HyperLogLog (PF*) commands may be skipped,
    // and only while those families are absent from this build.
    assert!(
        skipped
            .iter()
            .all(|s| s.contains("(needs CF.") || s.contains("(needs PF")),
        "unexpected skips: {skipped:?}"
    );
}
