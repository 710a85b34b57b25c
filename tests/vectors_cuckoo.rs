//! Golden vectors for the CF.* commands: every case of `tests/vectors/cuckoo.jsonl` (replies captured
//! from Redis 7.0.15 + RedisBloom 2.6) replayed against an in-process server over raw sockets, in
//! RESP2 and in RESP3, comparing the exact reply bytes.
//!
//! A case is: FLUSHALL, the setup commands (replies ignored), then the command. For RESP3 the steps
//! run on a fresh connection that first sends `HELLO 3` (its reply discarded).

mod common;

use common::{start_server, RawConn};

struct Case {
    name: String,
    setup: Vec<Vec<Vec<u8>>>,
    cmd: Vec<Vec<u8>>,
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

/// Vector files store bytes as the code points of a JSON string (latin-1).
fn bytes(v: &serde_json::Value) -> Vec<u8> {
    v.as_str()
        .expect("string")
        .chars()
        .map(|c| u8::try_from(c as u32).expect("latin-1 code point"))
        .collect()
}

fn argv(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v.as_array().expect("argv").iter().map(bytes).collect()
}

fn load() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/cuckoo.jsonl");
    let text = std::fs::read_to_string(path).expect("tests/vectors/cuckoo.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let d: serde_json::Value = serde_json::from_str(l).expect("json");
            Case {
                name: d["name"].as_str().expect("name").to_string(),
                setup: d["setup"]
                    .as_array()
                    .expect("setup")
                    .iter()
                    .map(argv)
                    .collect(),
                cmd: argv(&d["cmd"]),
                resp2: bytes(&d["resp2"]),
                resp3: bytes(&d["resp3"]),
            }
        })
        .collect()
}

fn refs(a: &[Vec<u8>]) -> Vec<&[u8]> {
    a.iter().map(|x| x.as_slice()).collect()
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
    format!("{s:?}{}", if b.len() > 300 { " ..." } else { "" })
}

enum Outcome {
    Pass,
    /// The setup needs a command this build lacks; listed, and fails the test.
    Skip(String),
    Fail(String),
}

fn run(c: &mut RawConn, case: &Case, expected: &[u8]) -> Outcome {
    assert_eq!(c.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    for s in &case.setup {
        let r = c.cmd(&refs(s));
        if r.starts_with(b"-ERR unknown command") {
            return Outcome::Skip(String::from_utf8_lossy(&s[0]).to_uppercase());
        }
    }
    let got = c.cmd(&refs(&case.cmd));
    if got == expected {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "expected {}\n       got {}",
            show(expected),
            show(&got)
        ))
    }
}

#[test]
fn cuckoo_vectors_resp2_and_resp3() {
    let cases = load();
    assert_eq!(cases.len(), 207, "the vector file holds 207 cases");
    let server = start_server();
    let mut c2 = server.raw();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let mut c3 = server.raw();
        c3.cmd(&[b"HELLO", b"3"]);
        for (proto, conn, expected) in [
            ("RESP2", &mut c2, &case.resp2),
            ("RESP3", &mut c3, &case.resp3),
        ] {
            match run(conn, case, expected) {
                Outcome::Pass => passed += 1,
                Outcome::Skip(cmd) => {
                    skipped.push(format!("[{proto}] {} (needs {cmd})", case.name))
                }
                Outcome::Fail(why) => failures.push(format!("[{proto}] {}: {why}", case.name)),
            }
        }
    }
    println!(
        "cuckoo vectors: {passed}/{} replies identical",
        cases.len() * 2
    );
    if !skipped.is_empty() {
        println!(
            "cuckoo vectors: {} skipped:\n{}",
            skipped.len(),
            skipped.join("\n")
        );
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(skipped.is_empty(), "cases not run: {skipped:?}");
}
