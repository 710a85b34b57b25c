//! Scripted multi-connection sessions for differential tests against a real `redis-server`:
//! each step runs one command on one connection, then synchronises every connection with
//! `PING <marker>` (allowed in every context; `[pong, marker]` in the RESP2 subscriber context),
//! and what arrived before the marker's reply is that step's output for that connection.
//!
//! An argument `$idN` is replaced by connection N's client id (REDIRECT), and `__wait_ms N`
//! sleeps instead of sending.

use super::{frame_len, RawConn};

pub struct Session {
    pub conns: Vec<RawConn>,
    /// Connections inside MULTI: a PING there would only be queued, so they are not synchronised
    /// (the acting one reads exactly its reply) until EXEC or DISCARD.
    in_multi: Vec<bool>,
    marker: usize,
    ids: Vec<Option<u64>>,
    /// Connections that sent QUIT: no longer synchronised.
    closed: Vec<bool>,
}

/// Splits `buf` into complete frames.
pub fn frames(buf: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let n = frame_len(&buf[at..]).expect("complete frame");
        out.push(buf[at..at + n].to_vec());
        at += n;
    }
    out
}

/// The bulk strings of a frame, in order (enough to recognise and normalise our frames).
pub fn bulks(frame: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < frame.len() {
        let end = at
            + frame[at..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .expect("line");
        if frame[at] == b'$' {
            let n: i64 = String::from_utf8_lossy(&frame[at + 1..end])
                .parse()
                .expect("len");
            if n >= 0 {
                out.push(frame[end + 2..end + 2 + n as usize].to_vec());
                at = end + 2 + n as usize + 2;
                continue;
            }
        }
        at = end + 2;
    }
    out
}

impl Session {
    pub fn new(port: u16, n: usize) -> Session {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        Session {
            conns: (0..n).map(|_| RawConn::connect(addr)).collect(),
            in_multi: vec![false; n],
            marker: 0,
            ids: vec![None; n],
            closed: vec![false; n],
        }
    }

    /// Connection `n`'s client id (asked once, the first time a script needs it).
    pub fn id(&mut self, n: usize) -> u64 {
        if let Some(id) = self.ids[n] {
            return id;
        }
        let r = self.conns[n].cmd(&[b"CLIENT", b"ID"]);
        let id = String::from_utf8_lossy(&r[1..r.len() - 2])
            .parse()
            .expect("client id");
        self.ids[n] = Some(id);
        id
    }

    /// Runs one step: `argv` on connection `who`, then synchronises every connection. Returns
    /// each connection's output for the step.
    pub fn step(&mut self, who: usize, argv: &[&str]) -> Vec<Vec<u8>> {
        if argv[0] == "__wait_ms" {
            // Lets a PX deadline pass (the clock, not readiness: both servers see the same wait).
            let ms = argv[1].parse().unwrap_or(0);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            return vec![Vec::new(); self.conns.len()];
        }
        let argv: Vec<String> = argv
            .iter()
            .map(
                |a| match a.strip_prefix("$id").and_then(|n| n.parse::<usize>().ok()) {
                    Some(n) => self.id(n).to_string(),
                    None => a.to_string(),
                },
            )
            .collect();
        let argv: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
        self.conns[who].send(&argv.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        let mut outputs = Vec::new();
        // The acting connection first, so its reply is complete before others are synchronised.
        let order: Vec<usize> = std::iter::once(who)
            .chain((0..self.conns.len()).filter(|&i| i != who))
            .collect();
        let mut by_conn = vec![Vec::new(); self.conns.len()];
        let name = argv[0].to_ascii_lowercase();
        if self.in_multi[who] && name != "exec" && name != "discard" {
            by_conn[who] = self.conns[who].read_reply();
            return by_conn;
        }
        for i in order {
            if self.closed[i] || (self.in_multi[i] && i != who) {
                continue;
            }
            if i == who && name == "quit" {
                by_conn[i] = self.conns[i].read_reply();
                self.closed[i] = true;
                continue;
            }
            if i == who && name == "multi" {
                let r = self.conns[i].read_reply();
                self.in_multi[i] = r == b"+OK\r\n";
                by_conn[i] = r;
                continue;
            }
            if i == who && (name == "exec" || name == "discard") {
                self.in_multi[i] = false;
            }
            self.marker += 1;
            let marker = format!("sync-{}", self.marker);
            self.conns[i].send(&[b"PING", marker.as_bytes()]);
            let mut got = Vec::new();
            loop {
                let f = self.conns[i].read_reply();
                let plain = format!("${}\r\n{}\r\n", marker.len(), marker);
                let sub = format!("*2\r\n$4\r\npong\r\n{plain}");
                if f == plain.as_bytes() || f == sub.as_bytes() {
                    break;
                }
                got.extend_from_slice(&f);
            }
            by_conn[i] = got;
        }
        outputs.extend(by_conn);
        outputs
    }
}
