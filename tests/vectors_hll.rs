//! Golden vectors for the PF* commands: every case of `tests/vectors/hll.jsonl` (replies captured
//! from Redis 7.0.15) replayed against an in-process server, in RESP2 and in RESP3, comparing the
//! exact reply bytes.
//!
//! A case is: FLUSHALL, the setup commands (replies ignored), then the command. For RESP3 the
//! steps run on a fresh connection that first sends `HELLO 3`.

mod common;

use common::{start_server, RawConn};

struct Case {
    name: String,
    setup: Vec<Vec<Vec<u8>>>,
    cmd: Vec<Vec<u8>>,
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

/// The vector files store bytes as the code points of a JSON string (latin-1).
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
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/hll.jsonl"
    ))
    .expect("tests/vectors/hll.jsonl");
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
    /// The case needs a command this build does not have yet (a string or Bloom command owned by
    /// another family); counted and listed, never counted as a pass.
    Skip(String),
    Fail(String),
}

/// Runs one case on `c`.
fn run(c: &mut RawConn, case: &Case, expected: &[u8]) -> Outcome {
    assert_eq!(c.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    for s in &case.setup {
        let r = c.cmd(&refs(s));
        if r.starts_with(b"-ERR unknown command") {
            return Outcome::Skip(String::from_utf8_lossy(&s[0]).into_owned());
        }
    }
    let got = c.cmd(&refs(&case.cmd));
    if got == expected {
        Outcome::Pass
    } else if got.starts_with(b"-ERR unknown command")
        && !expected.starts_with(b"-ERR unknown command")
    {
        Outcome::Skip(String::from_utf8_lossy(&case.cmd[0]).into_owned())
    } else {
        Outcome::Fail(format!(
            "expected {}\n       got {}",
            show(expected),
            show(&got)
        ))
    }
}

#[test]
fn hll_vectors_resp2_and_resp3() {
    let cases = load();
    assert_eq!(cases.len(), 295, "the vector file holds 295 cases");
    let server = start_server();
    let mut c2 = server.raw();
    let mut failures = Vec::new();
    let mut skipped = std::collections::BTreeMap::<String, usize>::new();
    let mut passed = 0;
    for case in &cases {
        let mut c3 = server.raw();
        let hello = c3.cmd(&[b"HELLO", b"3"]);
        assert!(hello.starts_with(b"%"), "HELLO 3 reply: {}", show(&hello));
        for (proto, conn, expected) in [
            ("RESP2", &mut c2, &case.resp2),
            ("RESP3", &mut c3, &case.resp3),
        ] {
            match run(conn, case, expected) {
                Outcome::Pass => passed += 1,
                Outcome::Skip(cmd) => *skipped.entry(cmd.to_uppercase()).or_default() += 1,
                Outcome::Fail(why) => failures.push(format!("[{proto}] {}: {why}", case.name)),
            }
        }
    }
    println!(
        "hll vectors: {passed}/{} replies identical",
        cases.len() * 2
    );
    if !skipped.is_empty() {
        println!("hll vectors: skipped for commands this build lacks: {skipped:?}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
