//! Differential test of the core against a real `redis-server` 7: the same seeded random command
//! sequences go to both servers over raw sockets and every reply must be byte-identical.
//!
//! Covered: keyspace and string commands with their options and errors, expiry (only with times far
//! from now, so timing cannot change an outcome), transactions (MULTI/EXEC/DISCARD, queued errors,
//! WATCH with a second connection modifying keys), bad arity, unknown commands, binary keys and
//! values, several databases, RESP2 and RESP3.
//!
//! Replies that legitimately differ are normalised before comparing: KEYS and SCAN elements are
//! sorted, RANDOMKEY is compared only as null / not null, TTL-like replies are compared with a
//! tolerance of a couple of seconds, and HELLO's map (server id, version) is not compared.
//!
//! Needs `redis-server` (Debian package `redis-server`; `/usr/bin/redis-server`). Set
//! `DIFF_SEEDS` / `DIFF_COMMANDS` to change the amount of work.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{encode_command, frame_len};

// ---------------------------------------------------------------------------------------------
// The reference server
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Connections and replies
// ---------------------------------------------------------------------------------------------

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        stream.set_nodelay(true).ok();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    fn cmd(&mut self, argv: &[Vec<u8>]) -> Result<Vec<u8>, String> {
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        self.stream
            .write_all(&encode_command(&refs))
            .map_err(|e| e.to_string())?;
        loop {
            if let Some(n) = frame_len(&self.buf) {
                return Ok(self.buf.drain(..n).collect());
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A parsed reply, for normalisation.
#[derive(Debug, Clone, PartialEq)]
enum Resp {
    /// A one-line frame: type byte and the line.
    Line(u8, Vec<u8>),
    Bulk(u8, Option<Vec<u8>>),
    Agg(u8, Option<Vec<Resp>>),
}

fn parse(buf: &[u8], at: &mut usize) -> Resp {
    let start = *at;
    let end = start
        + buf[start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("line");
    let kind = buf[start];
    let line = buf[start + 1..end].to_vec();
    *at = end + 2;
    match kind {
        b'$' | b'=' | b'!' => {
            let n: i64 = String::from_utf8_lossy(&line).parse().expect("len");
            if n < 0 {
                return Resp::Bulk(kind, None);
            }
            let body = buf[*at..*at + n as usize].to_vec();
            *at += n as usize + 2;
            Resp::Bulk(kind, Some(body))
        }
        b'*' | b'~' | b'%' | b'>' | b'|' => {
            let n: i64 = String::from_utf8_lossy(&line).parse().expect("len");
            if n < 0 {
                return Resp::Agg(kind, None);
            }
            let count = if matches!(kind, b'%' | b'|') {
                n * 2
            } else {
                n
            };
            Resp::Agg(kind, Some((0..count).map(|_| parse(buf, at)).collect()))
        }
        _ => Resp::Line(kind, line),
    }
}

fn lower(a: &[u8]) -> String {
    String::from_utf8_lossy(a).to_ascii_lowercase()
}

/// Normalises a reply to `argv` so that legitimate differences disappear. TTL-like integers are
/// left for `equal_with_tolerance`.
fn normalise(argv: &[Vec<u8>], r: Resp) -> Resp {
    let name = lower(&argv[0]);
    match (name.as_str(), r) {
        ("keys", Resp::Agg(k, Some(mut items))) => {
            items.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            Resp::Agg(k, Some(items))
        }
        ("scan", Resp::Agg(k, Some(mut items))) if items.len() == 2 => {
            if let Resp::Agg(k2, Some(mut keys)) = items[1].clone() {
                keys.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
                items[1] = Resp::Agg(k2, Some(keys));
            }
            Resp::Agg(k, Some(items))
        }
        ("randomkey", Resp::Bulk(k, Some(_))) => Resp::Bulk(k, Some(b"<random key>".to_vec())),
        ("hello", _) => Resp::Line(b'+', b"<hello>".to_vec()),
        (_, r) => r,
    }
}

/// Allowed difference for a command's integer reply (TTL-like commands only).
fn tolerance(argv: &[Vec<u8>]) -> i64 {
    match lower(&argv[0]).as_str() {
        "ttl" | "expiretime" => 2,
        "pttl" | "pexpiretime" => 2000,
        _ => 0,
    }
}

fn equal(argv: &[Vec<u8>], a: &Resp, b: &Resp) -> bool {
    let tol = tolerance(argv);
    match (a, b) {
        (Resp::Line(b':', x), Resp::Line(b':', y)) if tol > 0 => {
            let x: i64 = String::from_utf8_lossy(x).parse().unwrap_or(i64::MIN);
            let y: i64 = String::from_utf8_lossy(y).parse().unwrap_or(i64::MAX);
            // -1 / -2 and 0 must match exactly; positive times within the tolerance.
            x == y || (x > 0 && y > 0 && (x - y).abs() <= tol)
        }
        _ => a == b,
    }
}

/// Compares EXEC replies element by element with the normalisation of each queued command.
fn equal_exec(queued: &[Vec<Vec<u8>>], a: &Resp, b: &Resp) -> bool {
    match (a, b) {
        (Resp::Agg(k1, Some(x)), Resp::Agg(k2, Some(y))) if x.len() == queued.len() => {
            k1 == k2
                && x.len() == y.len()
                && queued.iter().zip(x.iter().zip(y)).all(|(argv, (x, y))| {
                    equal(
                        argv,
                        &normalise(argv, x.clone()),
                        &normalise(argv, y.clone()),
                    )
                })
        }
        _ => a == b,
    }
}

fn c(s: impl AsRef<str>) -> Vec<u8> {
    s.as_ref().as_bytes().to_vec()
}

// ---------------------------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------------------------

/// xorshift64*: tiny, seeded, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const KEYS: &[&[u8]] = &[
    b"k1",
    b"k2",
    b"k3",
    b"n",
    b"f",
    b"bin\x00key",
    b"\r\n",
    b"\xff\xfe\x00",
    b"sp ace",
    b"",
    b"{tag}key",
    b"a-much-longer-key-name-used-to-check-binary-safe-handling",
];

struct Gen {
    rng: Rng,
    /// Unix seconds at the start: absolute expiry times are chosen far from it.
    base_s: i64,
}

impl Gen {
    fn key(&mut self) -> Vec<u8> {
        // Favour a few keys so commands collide.
        if self.rng.chance(60) {
            self.rng.pick(&KEYS[..4]).to_vec()
        } else {
            self.rng.pick(KEYS).to_vec()
        }
    }

    fn int_text(&mut self) -> Vec<u8> {
        let choices: &[&str] = &[
            "0",
            "1",
            "-1",
            "7",
            "42",
            "-100",
            "9999",
            "10000",
            "123456789",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "+1",
            "01",
            " 1",
            "1.5",
            "abc",
            "",
            "1e3",
        ];
        self.rng.pick(choices).as_bytes().to_vec()
    }

    fn float_text(&mut self) -> Vec<u8> {
        let choices: &[&str] = &[
            "0.1",
            "-0.1",
            "1.5",
            "10.5",
            "1e3",
            "3.0e-2",
            "-5",
            "0x10",
            "inf",
            "-inf",
            "abc",
            "1e400",
            "1000.001",
            "0.3333333333333333",
            "+.5",
            "5.",
            "1e300",
            "-1e-300",
            "2.5e-5",
            "1000",
            "0",
            "-0",
            "1e",
            " 1",
            "nan",
            "123456789.123456789",
            "0.2",
        ];
        match self.rng.below(10) {
            0..=2 => {
                let int = self.rng.below(2000) as i64 - 1000;
                let frac = self.rng.below(1000);
                return format!("{int}.{frac:03}").into_bytes();
            }
            3 | 4 => {
                // Long mantissas and wide exponents exercise the long-double rounding.
                let digits: String = (0..1 + self.rng.below(25))
                    .map(|_| (b'0' + self.rng.below(10) as u8) as char)
                    .collect();
                let sign = if self.rng.chance(30) { "-" } else { "" };
                let exp = self.rng.below(80) as i64 - 40;
                let dot = self.rng.below(digits.len() + 1);
                return format!("{sign}{}.{}e{exp}", &digits[..dot], &digits[dot..]).into_bytes();
            }
            5 => {
                let v = self.rng.next() >> self.rng.below(64);
                return format!("0x{v:x}p-{}", self.rng.below(70)).into_bytes();
            }
            _ => {}
        }
        self.rng.pick(choices).as_bytes().to_vec()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.below(10) {
            0..=2 => self.int_text(),
            3 => self.float_text(),
            4 => {
                let n = self.rng.below(12);
                (0..n).map(|_| self.rng.next() as u8).collect()
            }
            5 => {
                let n = 40 + self.rng.below(10);
                vec![b'x'; n]
            }
            6 if self.rng.chance(5) => {
                // Occasionally a large value (crosses socket buffers and the 32 KB bulk threshold).
                let n = 1000 + self.rng.below(70_000);
                let byte = b'a' + self.rng.below(26) as u8;
                vec![byte; n]
            }
            6 => b"".to_vec(),
            _ => {
                let words: &[&str] = &["hello", "world", "v", "value with spaces", "\r\n", "ok"];
                self.rng.pick(words).as_bytes().to_vec()
            }
        }
    }

    fn case(&mut self, word: &str) -> Vec<u8> {
        match self.rng.below(3) {
            0 => word.to_ascii_lowercase().into_bytes(),
            1 => word.to_ascii_uppercase().into_bytes(),
            _ => word
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c.to_ascii_lowercase()
                    }
                })
                .collect::<String>()
                .into_bytes(),
        }
    }

    /// A relative time in seconds that never expires during the test, or an immediate one.
    fn rel_seconds(&mut self) -> Vec<u8> {
        let choices: &[&str] = &[
            "10000",
            "20000",
            "30000",
            "0",
            "-5",
            "abc",
            "9223372036854775807",
            "9223372036854776",
            "-9223372036854776",
            "1.5",
        ];
        self.rng.pick(choices).as_bytes().to_vec()
    }

    fn rel_ms(&mut self) -> Vec<u8> {
        let choices: &[&str] = &[
            "15000000",
            "25000000",
            "0",
            "-1",
            "9223372036854775807",
            "x",
        ];
        self.rng.pick(choices).as_bytes().to_vec()
    }

    /// An absolute time in seconds: far past, far future, or invalid.
    fn abs_seconds(&mut self) -> Vec<u8> {
        let b = self.base_s;
        let choices = [
            (b + 50_000).to_string(),
            (b + 100_000).to_string(),
            (b + 5_000).to_string(),
            "1".to_string(),
            (b - 1000).to_string(),
            "0".to_string(),
            "-1".to_string(),
            "9223372036854775807".to_string(),
            "abc".to_string(),
        ];
        self.rng.pick(&choices).as_bytes().to_vec()
    }

    fn abs_ms(&mut self) -> Vec<u8> {
        let b = self.base_s * 1000;
        let choices = [
            (b + 60_000_000).to_string(),
            (b + 7_000_000).to_string(),
            (b - 1000).to_string(),
            "1".to_string(),
            "9223372036854775807".to_string(),
            "-3".to_string(),
        ];
        self.rng.pick(&choices).as_bytes().to_vec()
    }

    /// True for a time argument that parses and is not in the future.
    fn is_past(&self, v: &[u8], ms: bool) -> bool {
        let now = if ms { self.base_s * 1000 } else { self.base_s };
        String::from_utf8_lossy(v)
            .parse::<i64>()
            .is_ok_and(|t| t > 0 && t <= now)
    }

    fn set_options(&mut self, for_getex: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..self.rng.below(4) {
            match self.rng.below(12) {
                0 => out.push(self.case("NX")),
                1 => out.push(self.case("XX")),
                2 => out.push(self.case("GET")),
                3 => out.push(self.case("KEEPTTL")),
                4 => {
                    out.push(self.case("EX"));
                    let v = self.rel_seconds();
                    out.push(v);
                }
                5 => {
                    out.push(self.case("PX"));
                    let v = self.rel_ms();
                    out.push(v);
                }
                // SET with a past absolute time stores a key that is already expired: DBSIZE then
                // depends on when each server's active expiry reclaims it. GETEX deletes at once.
                6 => {
                    out.push(self.case("EXAT"));
                    let v = self.abs_seconds();
                    out.push(if for_getex || !self.is_past(&v, false) {
                        v
                    } else {
                        c("abc")
                    });
                }
                7 => {
                    out.push(self.case("PXAT"));
                    let v = self.abs_ms();
                    out.push(if for_getex || !self.is_past(&v, true) {
                        v
                    } else {
                        c("0")
                    });
                }
                8 => out.push(self.case("PERSIST")),
                9 => out.push(self.case("EX")),
                10 if for_getex => {
                    out.push(self.case("EX"));
                    out.push(b"10000".to_vec());
                }
                _ => out.push(b"bogus".to_vec()),
            }
        }
        out
    }

    fn pattern(&mut self) -> Vec<u8> {
        if self.rng.chance(40) {
            // Random glob syntax over the key alphabet: brackets, ranges, negation, escapes.
            let alphabet = b"*?[]^-\\k1a2{}ey \x00\xff";
            let n = 1 + self.rng.below(7);
            return (0..n)
                .map(|_| alphabet[self.rng.below(alphabet.len())])
                .collect();
        }
        let choices: &[&[u8]] = &[
            b"*",
            b"k*",
            b"k?",
            b"[kn]*",
            b"*e*",
            b"bin*",
            b"\\{tag\\}*",
            b"{tag}*",
            b"[^k]*",
            b"*\x00*",
            b"",
            b"[a-z]",
            b"n",
            b"k[1-2]",
            b"*y",
        ];
        self.rng.pick(choices).to_vec()
    }

    /// One random read among those with a shared-lock path in hyperbloom.
    fn read_command(&mut self) -> Vec<Vec<u8>> {
        let (k1, k2) = (self.key(), self.key());
        match self.rng.below(9) {
            0 => vec![c("GET"), k1],
            1 => vec![c("MGET"), k1, k2],
            2 => vec![c("EXISTS"), k1, k2, self.key()],
            3 => vec![c("STRLEN"), k1],
            4 => vec![c("TTL"), k1],
            5 => vec![c("PTTL"), k1],
            6 => vec![c("PFCOUNT"), k1],
            7 => vec![c("PING")],
            _ => vec![c("ECHO"), self.value()],
        }
    }

    /// One random command (never MULTI/EXEC/WATCH: the driver emits those).
    fn command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        match self.rng.below(62) {
            0..=3 => vec![c("GET"), k],
            4..=8 => {
                let mut v = vec![c("SET"), k, self.value()];
                v.extend(self.set_options(false));
                v
            }
            9 => vec![c("SETNX"), k, self.value()],
            10 => {
                let t = self.rel_seconds();
                vec![c("SETEX"), k, t, self.value()]
            }
            11 => {
                let t = self.rel_ms();
                vec![c("PSETEX"), k, t, self.value()]
            }
            12 => vec![c("GETSET"), k, self.value()],
            13 => vec![c("GETDEL"), k],
            14 => {
                let mut v = vec![c("GETEX"), k];
                v.extend(self.set_options(true));
                v
            }
            15 => {
                let mut v = vec![c("MGET"), k];
                for _ in 0..self.rng.below(4) {
                    v.push(self.key());
                }
                v
            }
            16 => {
                let mut v = vec![c("MSET")];
                for _ in 0..1 + self.rng.below(3) {
                    v.push(self.key());
                    v.push(self.value());
                }
                if self.rng.chance(10) {
                    v.pop();
                }
                v
            }
            17 => {
                let mut v = vec![c("MSETNX")];
                for _ in 0..1 + self.rng.below(3) {
                    v.push(self.key());
                    v.push(self.value());
                }
                if self.rng.chance(10) {
                    v.pop();
                }
                v
            }
            18 | 19 => vec![c("APPEND"), k, self.value()],
            20 => vec![c("STRLEN"), k],
            21 | 22 => {
                let name = if self.rng.chance(20) {
                    "SUBSTR"
                } else {
                    "GETRANGE"
                };
                let idx: &[&str] = &[
                    "0",
                    "1",
                    "-1",
                    "-3",
                    "5",
                    "100",
                    "-100",
                    "abc",
                    "9223372036854775807",
                    "-9223372036854775808",
                ];
                vec![c(name), k, c(self.rng.pick(idx)), c(self.rng.pick(idx))]
            }
            23 | 24 => {
                let offs: &[&str] = &["0", "1", "3", "10", "-1", "x", "536870912", "600000000"];
                vec![c("SETRANGE"), k, c(self.rng.pick(offs)), self.value()]
            }
            25 => vec![c("INCR"), k],
            26 => vec![c("DECR"), k],
            27 => vec![c("INCRBY"), k, self.int_text()],
            28 => vec![c("DECRBY"), k, self.int_text()],
            29 | 30 => vec![c("INCRBYFLOAT"), k, self.float_text()],
            31 => {
                let mut v = vec![c(if self.rng.chance(50) { "DEL" } else { "UNLINK" }), k];
                if self.rng.chance(40) {
                    v.push(self.key());
                }
                v
            }
            32 => {
                let mut v = vec![
                    c(if self.rng.chance(70) {
                        "EXISTS"
                    } else {
                        "TOUCH"
                    }),
                    k,
                ];
                for _ in 0..self.rng.below(3) {
                    v.push(self.key());
                }
                v
            }
            33 => vec![c("TYPE"), k],
            34 => vec![c("KEYS"), self.pattern()],
            35 => {
                let mut v = vec![c("SCAN"), c("0"), c("COUNT"), c("100000")];
                if self.rng.chance(50) {
                    v.push(self.case("MATCH"));
                    v.push(self.pattern());
                }
                if self.rng.chance(30) {
                    v.push(self.case("TYPE"));
                    v.push(c(self.rng.pick(&["string", "STRING", "list", "none"])));
                }
                if self.rng.chance(10) {
                    let bad: &[&[&str]] = &[
                        &["COUNT", "0"],
                        &["COUNT", "x"],
                        &["MATCH"],
                        &["bogus", "1"],
                    ];
                    v.extend(self.rng.pick(bad).iter().map(c));
                }
                if self.rng.chance(5) {
                    v[1] = c(self.rng.pick(&[" 1", "abc", "18446744073709551616", ""]));
                }
                v
            }
            36 => vec![c("RANDOMKEY")],
            37 | 38 => {
                let name = if self.rng.chance(50) {
                    "RENAME"
                } else {
                    "RENAMENX"
                };
                vec![c(name), k, self.key()]
            }
            39 | 40 => {
                let mut v = vec![c("COPY"), k, self.key()];
                if self.rng.chance(40) {
                    v.push(self.case("DB"));
                    v.push(c(self.rng.pick(&["0", "1", "2", "16", "-1", "x"])));
                }
                if self.rng.chance(40) {
                    v.push(self.case("REPLACE"));
                }
                if self.rng.chance(5) {
                    v.push(self.case("DB"));
                }
                v
            }
            41 => vec![
                c("MOVE"),
                k,
                c(self
                    .rng
                    .pick(&["0", "1", "2", "16", "-1", "x", "4294967296"])),
            ],
            42..=46 => {
                let (name, t) = match self.rng.below(4) {
                    0 => ("EXPIRE", self.rel_seconds()),
                    1 => ("PEXPIRE", self.rel_ms()),
                    2 => ("EXPIREAT", self.abs_seconds()),
                    _ => ("PEXPIREAT", self.abs_ms()),
                };
                let mut v = vec![c(name), k, t];
                let absolute = name.ends_with("AT");
                for _ in 0..self.rng.below(3) {
                    // GT/LT compare against the current expiry: only safe with absolute times.
                    let opts: &[&str] = if absolute {
                        &["NX", "XX", "GT", "LT", "nx", "bogus"]
                    } else {
                        &["NX", "XX", "xx"]
                    };
                    v.push(c(self.rng.pick(opts)));
                }
                v
            }
            47 | 48 => {
                let name = self.rng.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]);
                vec![c(name), k]
            }
            49 => vec![c("PERSIST"), k],
            50 => {
                let sub = self
                    .rng
                    .pick(&["FREQ", "HELP", "bogus", "IDLETIME", "ENCODING", "ENCODING"]);
                if *sub == "HELP" {
                    vec![c("OBJECT"), c(sub)]
                } else if *sub == "IDLETIME" {
                    // The value differs (we do not track access time): only compare a missing key.
                    vec![c("OBJECT"), c(sub), c("no-such-key")]
                } else {
                    vec![c("OBJECT"), c(sub), k]
                }
            }
            51 => vec![c("DBSIZE")],
            52 => vec![
                c("SELECT"),
                c(self.rng.pick(&["0", "0", "1", "2", "16", "x"])),
            ],
            53 => vec![c("PING")],
            54 => vec![c("ECHO"), self.value()],
            55 => {
                // Wrong arity.
                let cmds: &[&[&str]] = &[
                    &["GET"],
                    &["SET", "k1"],
                    &["GETRANGE", "k1", "0"],
                    &["EXPIRE", "k1"],
                    &["TTL"],
                    &["RENAME", "k1"],
                    &["MGET"],
                    &["INCRBY", "k1"],
                    &["OBJECT"],
                    &["OBJECT", "ENCODING"],
                    &["SCAN"],
                    &["KEYS", "a", "b"],
                    &["SETEX", "k1", "10"],
                    &["DEL"],
                    &["RANDOMKEY", "x"],
                    &["copy", "a"],
                ];
                self.rng.pick(cmds).iter().map(c).collect()
            }
            56 => {
                // Unknown commands, including long and binary arguments.
                let mut v = vec![c(self.rng.pick(&["FOOBAR", "GETT", "set2", "bf.nothing"]))];
                for _ in 0..self.rng.below(4) {
                    v.push(self.value());
                }
                if self.rng.chance(20) {
                    v.push(vec![b'z'; 200]);
                }
                v
            }
            57 => {
                if self.rng.chance(10) {
                    vec![c("FLUSHDB")]
                } else {
                    vec![c("EXISTS"), k]
                }
            }
            58 => vec![c("OBJECT"), c("ENCODING"), c("no-such-key")],
            59 => {
                // OBJECT ENCODING right after a SET is deterministic (int / embstr / raw).
                let v = self.value();
                vec![c("SET"), k, v]
            }
            60 => {
                // HLLs are strings: PFADD/PFCOUNT mixed with string commands on the same keys.
                match self.rng.below(3) {
                    0 => {
                        let mut v = vec![c("PFADD"), k];
                        for _ in 0..self.rng.below(4) {
                            v.push(self.value());
                        }
                        v
                    }
                    1 => vec![c("PFCOUNT"), k],
                    _ => vec![c("GETEX"), k, self.case("PERSIST")],
                }
            }
            _ => vec![c("SETRANGE"), k, c("2"), self.value()],
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------

struct Pair {
    redis: Conn,
    ours: Conn,
}

impl Pair {
    fn new(redis_port: u16, our_port: u16) -> Pair {
        Pair {
            redis: Conn::connect(redis_port),
            ours: Conn::connect(our_port),
        }
    }
}

struct Diff {
    compared: usize,
    log: Vec<String>,
}

fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Diff {
    fn new() -> Diff {
        Diff {
            compared: 0,
            log: Vec::new(),
        }
    }

    /// Sends `argv` on both sides of `pair` and fails on a difference.
    fn send(&mut self, pair: &mut Pair, argv: &[Vec<u8>], queued: Option<&[Vec<Vec<u8>>]>) -> Resp {
        self.log.push(show(argv));
        if self.log.len() > 30 {
            self.log.remove(0);
        }
        let fail = |side: &str, e: String, log: &[String]| -> ! {
            panic!(
                "{side} gave no reply ({e})\n  command: {}\n  recent commands:\n    {}",
                show(argv),
                log.join("\n    ")
            )
        };
        let a = pair
            .redis
            .cmd(argv)
            .unwrap_or_else(|e| fail("redis", e, &self.log));
        let b = pair
            .ours
            .cmd(argv)
            .unwrap_or_else(|e| fail("hyperbloom", e, &self.log));
        self.compared += 1;
        let ra = normalise(argv, parse(&a, &mut 0));
        let rb = normalise(argv, parse(&b, &mut 0));
        let same = match queued {
            Some(q) => equal_exec(q, &ra, &rb),
            None => equal(argv, &ra, &rb),
        };
        if !same {
            let probe = |conn: &mut Conn| -> String {
                match argv.get(1) {
                    Some(k) => {
                        let v = conn.cmd(&[c("GET"), k.clone()]).unwrap_or_default();
                        format!(
                            "GET {:?} -> {:?}",
                            String::from_utf8_lossy(k),
                            String::from_utf8_lossy(&v)
                        )
                    }
                    None => String::new(),
                }
            };
            let pa = probe(&mut pair.redis);
            let pb = probe(&mut pair.ours);
            eprintln!("after the difference: redis {pa}; hyperbloom {pb}");
            panic!(
                "replies differ after {} commands\n  command: {}\n  redis:      {:?}\n  hyperbloom: {:?}\n  recent commands:\n    {}",
                self.compared,
                show(argv),
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                self.log.join("\n    ")
            );
        }
        ra
    }
}

fn run_seed(seed: u64, commands: usize, redis_port: u16, our_port: u16, diff: &mut Diff) {
    let mut main = Pair::new(redis_port, our_port);
    let mut other = Pair::new(redis_port, our_port);
    diff.send(&mut main, &[c("FLUSHALL")], None);
    let resp3 = seed % 2 == 1;
    if resp3 {
        diff.send(&mut main, &[c("HELLO"), c("3")], None);
    }
    let base_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut g = Gen {
        rng: Rng::new(seed),
        base_s,
    };
    let mut sent = 0;
    while sent < commands {
        match g.rng.below(100) {
            0..=3 => {
                // A transaction, maybe WATCHed and disturbed by the other connection.
                let watched = g.rng.chance(50).then(|| g.key());
                if let Some(k) = &watched {
                    diff.send(&mut main, &[c("WATCH"), k.clone()], None);
                    if g.rng.chance(50) {
                        let disturb = match g.rng.below(4) {
                            0 => vec![c("SET"), k.clone(), c("other")],
                            1 => vec![c("DEL"), k.clone()],
                            2 => vec![c("EXPIRE"), k.clone(), c("50000")],
                            _ => vec![c("GET"), k.clone()],
                        };
                        diff.send(&mut other, &disturb, None);
                    }
                }
                diff.send(&mut main, &[c("MULTI")], None);
                let mut queued = Vec::new();
                // Some transactions are of reads only: hyperbloom runs those under its shared
                // keyspace lock (`commands::shared_path`, "Transactions").
                let reads_only = g.rng.chance(40);
                for _ in 0..g.rng.below(5) {
                    let cmd = if g.rng.chance(10) {
                        vec![c(g.rng.pick(&["WATCH", "MULTI", "GET"]))]
                    } else if reads_only {
                        g.read_command()
                    } else {
                        g.command()
                    };
                    // SELECT inside MULTI is fine; the arity/unknown errors abort EXEC.
                    let r = diff.send(&mut main, &cmd, None);
                    if r == Resp::Line(b'+', b"QUEUED".to_vec()) {
                        queued.push(cmd);
                    }
                    sent += 1;
                }
                if g.rng.chance(80) {
                    diff.send(&mut main, &[c("EXEC")], Some(&queued));
                } else {
                    diff.send(&mut main, &[c("DISCARD")], None);
                }
                sent += 2;
            }
            4 => {
                let cmd = vec![c(g.rng.pick(&["EXEC", "DISCARD", "UNWATCH"]))];
                diff.send(&mut main, &cmd, None);
                sent += 1;
            }
            5..=7 => {
                // The other connection (RESP2, db 0) writes too.
                let cmd = g.command();
                if lower(&cmd[0]) == "select" {
                    continue;
                }
                diff.send(&mut other, &cmd, None);
                sent += 1;
            }
            _ => {
                let cmd = g.command();
                let is_set = lower(&cmd[0]) == "set" && cmd.len() == 3;
                diff.send(&mut main, &cmd, None);
                if is_set {
                    diff.send(
                        &mut main,
                        &[c("OBJECT"), c("ENCODING"), cmd[1].clone()],
                        None,
                    );
                }
                sent += 1;
            }
        }
    }
}

#[test]
fn same_replies_as_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let seeds: u64 = std::env::var("DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let commands: usize = std::env::var("DIFF_COMMANDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut diff = Diff::new();
    for seed in 1..=seeds {
        run_seed(seed, commands, redis.port(), ours.port(), &mut diff);
    }
    println!(
        "differential test: {} replies compared over {seeds} seeds, 0 differences",
        diff.compared
    );
    assert!(diff.compared >= seeds as usize * commands);
}

/// INCRBYFLOAT alone, many times over on one key, so the 80-bit long double arithmetic and the
/// `%.17Lf` printing are compared on thousands of sums (most random commands hit non-numbers).
#[test]
fn incrbyfloat_matches_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    let mut g = Gen {
        rng: Rng::new(4242),
        base_s: 0,
    };
    diff.send(&mut pair, &[c("FLUSHALL")], None);
    for _ in 0..5000 {
        if g.rng.chance(10) {
            let v = g.float_text();
            diff.send(&mut pair, &[c("SET"), c("f"), v], None);
        }
        let by = g.float_text();
        diff.send(&mut pair, &[c("INCRBYFLOAT"), c("f"), by], None);
    }
    println!(
        "incrbyfloat: {} replies compared, 0 differences",
        diff.compared
    );
}

/// Fixed edges of issue 10 (item 8), each sent to both servers on a fresh connection with a
/// password set: SELECT beyond int, DEBUG before AUTH (the enable-debug-command refusal comes
/// first), EXEC after a refused MULTI (EXEC refused by NOAUTH or arity answers EXECABORT), and the
/// protected-config refusals.
#[test]
fn edge_replies_match_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    // The password is set after start (the readiness check PINGs without AUTH).
    for port in [redis.port(), ours.port()] {
        let mut conn = Conn::connect(port);
        let r = conn.cmd(&[c("CONFIG"), c("SET"), c("requirepass"), c("pw")]);
        assert_eq!(r, Ok(b"+OK\r\n".to_vec()));
    }
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    let script: &[&[&str]] = &[
        &["DEBUG", "SLEEP", "0"],
        &["DEBUG"],
        &["MODULE", "LOAD", "/tmp/x.so"],
        &["MULTI"],
        &["EXEC"],
        &["EXEC", "x"],
        &["AUTH", "pw"],
        &["SELECT", "99999999999"],
        &["SELECT", "2147483648"],
        &["SELECT", "2147483647"],
        &["SELECT", "-2147483648"],
        &["SELECT", "-2147483649"],
        &["SELECT", "-1"],
        &["SELECT", "16"],
        &["SELECT", "abc"],
        &["MULTI", "x"],
        &["EXEC"],
        &["EXEC", "x"],
        &["MULTI"],
        &["SELECT", "99999999999"],
        &["SET", "a", "1"],
        &["EXEC"],
        &["MULTI"],
        &["MULTI"],
        &["EXEC", "x"],
        &["EXEC"],
        &["DEBUG", "SLEEP", "0"],
        &["MULTI"],
        &["DEBUG", "SLEEP", "0"],
        &["EXEC"],
        &["CONFIG", "SET", "dir", "/etc"],
        &["CONFIG", "SET", "dbfilename", "authorized_keys"],
        &["CONFIG", "SET", "enable-protected-configs", "yes"],
        &["CONFIG", "SET", "enable-debug-command", "yes"],
        &["CONFIG", "GET", "enable-protected-configs"],
        &["CONFIG", "GET", "enable-debug-command"],
        &["CONFIG", "GET", "enable-module-command"],
        &["MODULE", "LOAD", "/tmp/x.so"],
        &["MODULE", "UNLOAD", "bf"],
    ];
    for argv in script {
        let argv: Vec<Vec<u8>> = argv.iter().map(c).collect();
        diff.send(&mut pair, &argv, None);
    }
    println!("edges: {} replies compared, 0 differences", diff.compared);
}

/// Every container's HELP (the text redis-cli users read), in RESP2 and RESP3, and its wrong
/// arity. Before, CLIENT HELP had hyperbloom's own text and CONFIG, COMMAND, MEMORY, MODULE,
/// SCRIPT and FUNCTION answered "unknown subcommand 'HELP'".
#[test]
fn container_help_matches_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    let containers = [
        "CLIENT", "CONFIG", "COMMAND", "MEMORY", "MODULE", "SCRIPT", "FUNCTION", "OBJECT", "PUBSUB",
    ];
    for protocol in ["2", "3"] {
        let hello: Vec<Vec<u8>> = ["HELLO", protocol].iter().map(c).collect();
        pair.redis.cmd(&hello).expect("HELLO");
        pair.ours.cmd(&hello).expect("HELLO");
        for container in containers {
            for argv in [
                vec![container, "HELP"],
                vec![container, "help"],
                vec![container, "HELP", "extra"],
            ] {
                let argv: Vec<Vec<u8>> = argv.iter().map(c).collect();
                diff.send(&mut pair, &argv, None);
            }
        }
    }
    println!("HELP: {} replies compared, 0 differences", diff.compared);
}

/// RESTORE of mutated string payloads (a byte changed, inserted, removed or appended; footer
/// recomputed): both servers must accept and refuse the same payloads, and
/// restore the same value. This is how the "value runs into the footer" edge was found.
#[test]
fn restore_payload_edges_match_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    let values: &[&[u8]] = &[
        b"hello dump",
        b"12345",
        b"-1",
        &[b'a'; 100],
        b"abcabcabcabcabcabcabcabcabcabcabcabcabc",
        b"",
        b"9223372036854775807",
    ];
    let mut seeds = Vec::new();
    for v in values {
        let set = vec![c("SET"), c("src"), v.to_vec()];
        diff.send(&mut pair, &set, None);
        let dump = pair.redis.cmd(&[c("DUMP"), c("src")]).unwrap();
        // A bulk reply: strip "$<n>\r\n" and the final CRLF.
        let start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
        seeds.push(dump[start..dump.len() - 2].to_vec());
    }
    let seal = |mut body: Vec<u8>| {
        body.extend_from_slice(&10u16.to_le_bytes());
        let crc = hyperbloom::persistence::crc64::checksum(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    };
    let mut rng = Rng::new(10);
    let mut payloads = vec![
        // The edges found: a value that ends inside the footer.
        seal(vec![0x00, 0xc0]),
        seal(b"\x00\x0ahelo dump".to_vec()),
    ];
    for _ in 0..1500 {
        let seed = &seeds[rng.below(seeds.len())];
        let mut body = seed[..seed.len() - 10].to_vec();
        // The type byte stays 0 (string): Redis restores types hyperbloom does not have.
        match rng.below(4) {
            0 | 3 if body.len() > 1 => {
                let i = 1 + rng.below(body.len() - 1);
                body[i] = rng.next() as u8;
            }
            1 => {
                let i = 1 + rng.below(body.len());
                body.insert(i, rng.next() as u8);
            }
            2 if body.len() > 1 => {
                let i = 1 + rng.below(body.len() - 1);
                body.remove(i);
            }
            _ => body.push(rng.next() as u8),
        }
        payloads.push(seal(body));
    }
    for p in payloads {
        let argv = vec![c("RESTORE"), c("dst"), c("0"), p, c("REPLACE")];
        let r = diff.send(&mut pair, &argv, None);
        if r == Resp::Line(b'+', b"OK".to_vec()) {
            diff.send(&mut pair, &[c("GET"), c("dst")], None);
        }
    }
    println!(
        "restore edges: {} replies compared, 0 differences",
        diff.compared
    );
}

impl Conn {
    /// Sends every command in one write, then reads as many replies.
    fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for argv in cmds {
            let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
            out.extend_from_slice(&encode_command(&refs));
        }
        self.stream.write_all(&out).expect("write");
        let mut replies = Vec::new();
        while replies.len() < cmds.len() {
            if let Some(n) = frame_len(&self.buf) {
                replies.push(self.buf.drain(..n).collect());
                continue;
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        replies
    }
}

/// Strings around the store's and the output buffer's thresholds (inline up to 30 bytes, shared
/// from 1 KiB, written as a handle from 16 KiB), empty values, in-place writers on shared values
/// (also while an earlier reply still holds the buffer: pipelined), the length limit, and keys of
/// 0/15/16/17 bytes and 100 KB, in RESP2 and RESP3.
#[test]
fn string_and_key_boundaries_match_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    let x = |n: usize, b: u8| vec![b; n];
    let b = |s: &str| s.as_bytes().to_vec();
    let huge_key: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let mut script: Vec<Vec<Vec<u8>>> = Vec::new();
    for proto in ["2", "3"] {
        script.push(vec![b("HELLO"), b(proto)]);
        script.push(vec![b("FLUSHALL")]);
        // Empty values.
        for argv in [
            vec![b("SET"), b("e"), b("")],
            vec![b("GET"), b("e")],
            vec![b("STRLEN"), b("e")],
            vec![b("GETRANGE"), b("e"), b("0"), b("-1")],
            vec![b("APPEND"), b("e"), b("")],
            vec![b("OBJECT"), b("ENCODING"), b("e")],
            vec![b("SETRANGE"), b("e"), b("0"), b("")],
            vec![b("SETRANGE"), b("missing"), b("5"), b("")],
            vec![b("EXISTS"), b("missing")],
            vec![b("APPEND"), b("e2"), b("")],
            vec![b("EXISTS"), b("e2")],
            vec![b("GETDEL"), b("e")],
        ] {
            script.push(argv);
        }
        // Around the inline (30), shared (1024) and handle (16384) thresholds.
        for n in [30, 31, 1023, 1024, 16_383, 16_384, 16_385] {
            let k = format!("s{n}").into_bytes();
            script.push(vec![b("SET"), k.clone(), x(n, b'a')]);
            script.push(vec![b("GET"), k.clone()]);
            script.push(vec![b("OBJECT"), b("ENCODING"), k.clone()]);
            script.push(vec![b("GETRANGE"), k.clone(), b("0"), b("-1")]);
            script.push(vec![b("GETRANGE"), k.clone(), b("1"), b("-1")]);
            script.push(vec![b("GETRANGE"), k.clone(), b("0"), b("16383")]);
            script.push(vec![b("GETRANGE"), k.clone(), b("-16384"), b("-2")]);
            script.push(vec![b("APPEND"), k.clone(), b("z")]);
            script.push(vec![b("OBJECT"), b("ENCODING"), k.clone()]);
            script.push(vec![b("SETRANGE"), k.clone(), b("16384"), b("y")]);
            script.push(vec![b("SETRANGE"), k.clone(), b("0"), x(20, b'q')]);
            script.push(vec![b("GET"), k.clone()]);
            script.push(vec![b("STRLEN"), k.clone()]);
            script.push(vec![b("DUMP"), k.clone()]);
        }
        for argv in [
            vec![
                b("MGET"),
                b("s16384"),
                b("nokey"),
                b("s30"),
                b("s16385"),
                b("e"),
            ],
            vec![b("GETEX"), b("s16384"), b("PERSIST")],
            vec![b("SET"), b("s16384"), b("small"), b("GET")],
            vec![b("SET"), b("s16384"), x(20_000, b'b'), b("GET")],
            vec![b("GETDEL"), b("s16384")],
            vec![b("GET"), b("s16384")],
            // Grown by APPEND across both thresholds.
            vec![b("SET"), b("g"), x(1000, b'c')],
            vec![b("APPEND"), b("g"), x(100, b'd')],
            vec![b("APPEND"), b("g"), x(16_000, b'e')],
            vec![b("GET"), b("g")],
            vec![b("OBJECT"), b("ENCODING"), b("g")],
            // The length limit: SETRANGE past 512 MB, an empty write at any offset.
            vec![b("SETRANGE"), b("g"), b("536870912"), b("x")],
            vec![b("SETRANGE"), b("g"), b("536870911"), b("xy")],
            vec![b("SETRANGE"), b("g"), b("536870912"), b("")],
            vec![b("SETRANGE"), b("nokey"), b("536870912"), b("x")],
            vec![b("SETRANGE"), b("nokey"), b("536870912"), b("")],
            vec![b("CONFIG"), b("SET"), b("proto-max-bulk-len"), b("1048576")],
            vec![b("SET"), b("lim"), x(1_048_000, b'l')],
            vec![b("APPEND"), b("lim"), x(576, b'm')],
            vec![b("APPEND"), b("lim"), b("n")],
            vec![b("SETRANGE"), b("lim"), b("1048575"), b("o")],
            vec![b("SETRANGE"), b("lim"), b("1048576"), b("o")],
            vec![b("STRLEN"), b("lim")],
            vec![
                b("CONFIG"),
                b("SET"),
                b("proto-max-bulk-len"),
                b("536870912"),
            ],
            vec![b("DEL"), b("lim")],
        ] {
            script.push(argv);
        }
        // Key lengths around the 16-byte key and the varint boundary, and a 100 KB key.
        for n in [0usize, 15, 16, 17, 127, 128] {
            let k = x(n, b'k');
            script.push(vec![b("SET"), k.clone(), x(n, b'v')]);
            script.push(vec![b("GET"), k.clone()]);
            script.push(vec![b("APPEND"), k.clone(), b("w")]);
            script.push(vec![b("GET"), k.clone()]);
            script.push(vec![b("RENAME"), k.clone(), x(n + 1, b'r')]);
            script.push(vec![b("GET"), x(n + 1, b'r')]);
            script.push(vec![b("DEL"), x(n + 1, b'r')]);
        }
        for argv in [
            vec![b("SET"), huge_key.clone(), x(20_000, b'h')],
            vec![b("GET"), huge_key.clone()],
            vec![b("EXISTS"), huge_key.clone()],
            vec![b("KEYS"), b("*")],
            vec![b("RENAME"), huge_key.clone(), b("short")],
            vec![b("RENAME"), b("short"), huge_key.clone()],
            vec![b("STRLEN"), huge_key.clone()],
            vec![b("DEL"), huge_key.clone()],
        ] {
            script.push(argv);
        }
    }
    for argv in &script {
        diff.send(&mut pair, argv, None);
    }
    // Pipelined: a write into a shared value while the reply of the GET before it is still
    // queued (the reply keeps the old bytes), and MGET with the same value twice.
    let pipe: Vec<Vec<Vec<u8>>> = vec![
        vec![b("SET"), b("p"), x(40_000, b'p')],
        vec![b("GET"), b("p")],
        vec![b("SETRANGE"), b("p"), b("0"), b("XY")],
        vec![b("GET"), b("p")],
        vec![b("APPEND"), b("p"), x(30_000, b'q')],
        vec![b("MGET"), b("p"), b("p")],
        vec![b("GETRANGE"), b("p"), b("1"), b("20000")],
        vec![b("SETRANGE"), b("p"), b("5"), b("Z")],
        vec![b("GETDEL"), b("p")],
        vec![b("GET"), b("p")],
    ];
    let a = pair.redis.pipeline(&pipe);
    let o = pair.ours.pipeline(&pipe);
    for (i, (ra, ro)) in a.iter().zip(&o).enumerate() {
        assert!(
            ra == ro,
            "pipelined reply {i} differs ({} vs {} bytes)",
            ra.len(),
            ro.len()
        );
    }
    println!(
        "boundaries: {} replies compared, 0 differences",
        diff.compared + pipe.len()
    );
}

/// Integer configs parse as Redis's `string2ll` (no `+`, no leading zero or space, i64 range)
/// before their range is checked, in CONFIG SET's error texts.
#[test]
fn config_set_integers_parse_like_redis() {
    let redis = common::redis::RealRedis::start(&[]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let mut diff = Diff::new();
    for name in ["hz", "tracking-table-max-keys", "timeout", "maxclients"] {
        for v in [
            "+5",
            "05",
            " 5",
            "5 ",
            "-0",
            "-1",
            "abc",
            "",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "12",
        ] {
            diff.send(&mut pair, &[c("CONFIG"), c("SET"), c(name), c(v)], None);
            diff.send(&mut pair, &[c("CONFIG"), c("GET"), c(name)], None);
        }
    }
}

/// `rdb_changes_since_last_save` after each write: Redis counts one change per command that
/// wrote (`server.dirty++`), however many steps it took (RENAME removes and adds, SET EX stores
/// a value and a TTL, RESTORE REPLACE deletes first), and the save points count what it counts.
#[test]
fn changes_since_last_save_match_redis() {
    let redis = common::redis::RealRedis::start(&["--save", ""]);
    let ours = common::start_server();
    let mut pair = Pair::new(redis.port(), ours.port());
    let changes = |conn: &mut Conn| -> i64 {
        let info = conn
            .cmd(&[c("INFO"), c("persistence")])
            .expect("INFO answered");
        String::from_utf8_lossy(&info)
            .lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("the field")
    };
    // A payload for RESTORE (DUMP of a string from Redis: the same bytes from both servers).
    pair.redis
        .cmd(&[c("SET"), c("tmp"), c("x")])
        .expect("SET answered");
    let dump = pair
        .redis
        .cmd(&[c("DUMP"), c("tmp")])
        .expect("DUMP answered");
    pair.redis.cmd(&[c("DEL"), c("tmp")]).expect("DEL answered");
    let start = dump.iter().position(|&b| b == b'\n').expect("bulk header") + 1;
    let payload = dump[start..dump.len() - 2].to_vec();
    // Compared from here (no SAVE: the test server's directory is the working one).
    let base = (changes(&mut pair.redis), changes(&mut pair.ours));
    let script: &[&[&str]] = &[
        &["SET", "a", "1", "EX", "1000"],
        &["SET", "a", "2", "PX", "1000000", "GET"],
        &["SET", "a", "3", "KEEPTTL"],
        &["SET", "a", "4", "NX"],
        &["SET", "b", "4", "XX", "EX", "100"],
        &["SETEX", "b", "1000", "v"],
        &["PSETEX", "c", "1000000", "v"],
        &["SET", "a", "5"],
        &["EXPIRE", "a", "1000"],
        &["PERSIST", "a"],
        &["GETEX", "a", "EX", "500"],
        &["RENAME", "a", "d"],
        &["RENAME", "d", "b"],
        &["RENAMENX", "b", "c"],
        &["RENAMENX", "b", "e"],
        &["COPY", "e", "f"],
        &["COPY", "e", "f", "REPLACE"],
        &["MOVE", "f", "1"],
        &["MOVE", "c", "1"],
        &["SELECT", "1"],
        &["RESTORE", "g", "0", "PAYLOAD"],
        &["RESTORE", "g", "100000", "PAYLOAD", "REPLACE"],
        &["GETDEL", "g"],
        &["DEL", "f", "c", "nosuch"],
        &["SELECT", "0"],
        &["INCR", "n"],
        &["APPEND", "n", "0"],
        &["GETSET", "n", "7"],
    ];
    for argv in script {
        let argv: Vec<Vec<u8>> = argv
            .iter()
            .map(|a| match *a {
                "PAYLOAD" => payload.clone(),
                a => a.as_bytes().to_vec(),
            })
            .collect();
        let want = pair.redis.cmd(&argv).expect("redis answered");
        let got = pair.ours.cmd(&argv).expect("we answered");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{}",
            show(&argv)
        );
        assert_eq!(
            changes(&mut pair.ours) - base.1,
            changes(&mut pair.redis) - base.0,
            "after {}",
            show(&argv)
        );
    }
}
