//! Differential test of client-side caching (CLIENT TRACKING) against a real `redis-server`
//! 7.0: the same scripted sessions run against both servers and everything each connection
//! receives — replies, `invalidate` pushes (RESP3), `__redis__:invalidate` messages (RESP2 with
//! REDIRECT), null flush invalidations, `tracking-redir-broken` — must be byte-identical, step by
//! step (see `common::session`).
//!
//! Normalised: HELLO's map (client id, modules), and client ids where a reply carries one
//! (TRACKINGINFO / GETREDIR redirect, `tracking-redir-broken`), replaced by the connection number.

mod common;

use common::redis::RealRedis;
use common::session::Session;
use common::TestServer;

fn normalise(s: &mut Session, argv: &[&str], out: &[u8]) -> Vec<u8> {
    let name = argv[0].to_ascii_lowercase();
    if name == "hello" && !out.starts_with(b"-") {
        return b"<hello>".to_vec();
    }
    let sub = argv
        .get(1)
        .map(|a| a.to_ascii_lowercase())
        .unwrap_or_default();
    let carries_id = (name == "client" && (sub == "trackinginfo" || sub == "getredir"))
        || out.windows(21).any(|w| w == b"tracking-redir-broken");
    if !carries_id {
        return out.to_vec();
    }
    let mut text = String::from_utf8_lossy(out).into_owned();
    for n in 0..s.conns.len() {
        let id = s.id(n);
        text = text.replace(&format!(":{id}\r\n"), &format!(":<conn{n}>\r\n"));
    }
    text.into_bytes()
}

fn run(script: &[(usize, &[&str])], conns: usize) {
    let ours: TestServer = common::start_server();
    let real = RealRedis::start(&[]);
    let mut a = Session::new(ours.port(), conns);
    let mut b = Session::new(real.port(), conns);
    // Ids first: a subscriber (RESP2) could not answer CLIENT ID later.
    for n in 0..conns {
        a.id(n);
        b.id(n);
    }
    for (n, (who, argv)) in script.iter().enumerate() {
        let x = a.step(*who, argv);
        let y = b.step(*who, argv);
        for c in 0..conns {
            let (xo, yo) = (
                normalise(&mut a, argv, &x[c]),
                normalise(&mut b, argv, &y[c]),
            );
            assert!(
                xo == yo,
                "step {n} (conn {who}: {argv:?}), output of conn {c} differs\n hyperbloom: {:?}\n redis:      {:?}",
                String::from_utf8_lossy(&x[c]),
                String::from_utf8_lossy(&y[c])
            );
        }
    }
}

/// RESP3 default mode: own writes (after the reply), others' writes, MULTI, FLUSHDB's null, and
/// every option error in Redis's order; then BCAST with prefixes and NOLOOP.
#[test]
fn resp3_default_and_bcast_modes() {
    run(
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "on"]),
            (0, &["GET", "k"]),
            (0, &["SET", "k", "v"]),
            (0, &["GET", "k"]),
            (1, &["SET", "k", "v2"]),
            (1, &["SET", "k", "v3"]),
            (0, &["GET", "k"]),
            (0, &["MULTI"]),
            (0, &["GET", "k"]),
            (0, &["SET", "k", "x"]),
            (0, &["GET", "k"]),
            (0, &["EXEC"]),
            (0, &["MGET", "k", "k2", "k3"]),
            (1, &["MSET", "k", "1", "k3", "3"]),
            (1, &["SELECT", "2"]),
            (1, &["SET", "k2", "other db, same name"]),
            (1, &["SELECT", "0"]),
            (0, &["GET", "k"]),
            (0, &["FLUSHDB"]),
            (1, &["SET", "k", "forgotten by the flush"]),
            (1, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (1, &["CLIENT", "GETREDIR"]),
            (0, &["CLIENT", "TRACKING", "on", "BCAST"]),
            (0, &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
            (0, &["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "99999"]),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "abc"]),
            (
                0,
                &[
                    "CLIENT", "TRACKING", "on", "REDIRECT", "$id1", "REDIRECT", "$id1",
                ],
            ),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT"]),
            (0, &["CLIENT", "TRACKING", "on", "foo"]),
            (0, &["CLIENT", "TRACKING", "maybe"]),
            (0, &["CLIENT", "TRACKING"]),
            (0, &["CLIENT", "CACHING", "yes"]),
            (0, &["CLIENT", "CACHING", "maybe"]),
            (0, &["CLIENT", "CACHING"]),
            (1, &["CLIENT", "CACHING", "yes"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (
                0,
                &[
                    "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab",
                ],
            ),
            (
                0,
                &[
                    "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP",
                ],
            ),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "abc"]),
            (
                0,
                &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c", "OPTIN"],
            ),
            (1, &["MSET", "a1", "1", "b2", "2", "c3", "3", "a0", "0"]),
            (0, &["SET", "a5", "5"]),
            (1, &["SET", "a5", "6"]),
            (1, &["DEL", "a5", "a0", "b9"]),
            (0, &["CLIENT", "TRACKING", "on"]),
            (0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (1, &["SET", "c1", "x"]),
            (1, &["FLUSHALL"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (0, &["CLIENT", "TRACKING", "on", "BCAST"]),
            (1, &["SET", "anything", "1"]),
            (0, &["RESET"]),
            (1, &["SET", "anything", "2"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
        ],
        2,
    );
}

/// RESP2: invalidations through REDIRECT to a `__redis__:invalidate` subscriber (RESP2) or to a
/// RESP3 connection; the flush null in the tracking client's protocol; OPTIN/OPTOUT with
/// CLIENT CACHING (also across MULTI); NOLOOP; RESET turning tracking off.
#[test]
fn resp2_redirect_optin_optout_noloop() {
    run(
        &[
            (1, &["SUBSCRIBE", "__redis__:invalidate"]),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$id1"]),
            (0, &["GET", "k"]),
            (0, &["MGET", "k", "k2"]),
            (2, &["SET", "k", "1"]),
            (2, &["MSET", "k", "1", "k2", "2"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["GET", "k"]),
            (0, &["FLUSHALL"]),
            (3, &["HELLO", "3"]),
            (2, &["CLIENT", "TRACKING", "on", "REDIRECT", "$id3"]),
            (2, &["GET", "k"]),
            (0, &["SET", "k", "1"]),
            (2, &["FLUSHDB"]),
            (3, &["CLIENT", "TRACKING", "on", "OPTIN"]),
            (3, &["GET", "a"]),
            (0, &["SET", "a", "1"]),
            (3, &["CLIENT", "CACHING", "yes"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            (3, &["GET", "a"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            (0, &["SET", "a", "2"]),
            (3, &["GET", "a"]),
            (0, &["SET", "a", "3"]),
            (3, &["CLIENT", "CACHING", "yes"]),
            (3, &["MULTI"]),
            (3, &["GET", "b"]),
            (3, &["GET", "c"]),
            (3, &["EXEC"]),
            (0, &["MSET", "b", "1", "c", "1"]),
            (3, &["CLIENT", "CACHING", "no"]),
            (3, &["CLIENT", "TRACKING", "off"]),
            (3, &["CLIENT", "TRACKING", "on", "OPTOUT", "NOLOOP"]),
            (3, &["CLIENT", "TRACKING", "on", "OPTIN"]),
            (3, &["CLIENT", "CACHING", "no"]),
            (3, &["GET", "c"]),
            (0, &["SET", "c", "1"]),
            (3, &["GET", "d"]),
            (3, &["SET", "d", "1"]),
            (3, &["GET", "d"]),
            (0, &["SET", "d", "2"]),
            (3, &["GET", "e"]),
            (3, &["RESET"]),
            (0, &["SET", "e", "1"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            // RESP2 without REDIRECT: nothing can be sent on the connection itself.
            (2, &["CLIENT", "TRACKING", "off"]),
            (2, &["CLIENT", "TRACKING", "on"]),
            (2, &["GET", "f"]),
            (0, &["SET", "f", "1"]),
            (2, &["FLUSHALL"]),
        ],
        4,
    );
}

/// A redirect target that disconnects (`tracking-redir-broken`, `broken_redirect`), lazy expiry,
/// HLL writes (PFADD, and DEL of an HLL read with PFCOUNT), and keys read by EXISTS.
#[test]
fn broken_redirect_expiry_and_hll() {
    run(
        &[
            (0, &["HELLO", "3"]),
            (1, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$id1"]),
            (0, &["GET", "k"]),
            (1, &["QUIT"]),
            (2, &["SET", "k", "1"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "k"]),
            (2, &["SET", "k", "2"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (0, &["CLIENT", "TRACKING", "on"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "y"]),
            (2, &["SET", "y", "1", "PX", "20"]),
            (0, &["GET", "y"]),
            (0, &["__wait_ms", "60"]),
            (0, &["GET", "y"]),
            (0, &["PFCOUNT", "h"]),
            (2, &["PFADD", "h", "a"]),
            (0, &["EXISTS", "h"]),
            (0, &["PFCOUNT", "h"]),
            (2, &["PFADD", "h", "a"]),
            (2, &["DEL", "h"]),
            (0, &["EXISTS", "h"]),
            (2, &["SET", "h", "x"]),
        ],
        3,
    );
}

/// Invalidations a client owes itself inside a transaction that also turns tracking off: Redis
/// still sends them after EXEC's reply (its pending list is flushed to the current client, whose
/// tracking flag `sendTrackingMessage` does not check), and they must never reach another client
/// later.
#[test]
fn pending_invalidations_of_a_transaction_that_turns_tracking_off() {
    run(
        &[
            (0, &["HELLO", "3"]),
            (1, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "on"]),
            (0, &["GET", "k"]),
            (0, &["MULTI"]),
            (0, &["SET", "k", "x"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (0, &["EXEC"]),
            (0, &["PING"]),
            (1, &["CLIENT", "TRACKING", "on"]),
            (1, &["GET", "other"]),
            (1, &["PING"]),
            (0, &["CLIENT", "TRACKING", "on"]),
            (0, &["GET", "j"]),
            (0, &["MULTI"]),
            (0, &["FLUSHALL"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (0, &["EXEC"]),
            (1, &["GET", "other"]),
            (1, &["PING"]),
            // The same through a redirect (kept after OFF, as Redis keeps it).
            (2, &["SUBSCRIBE", "__redis__:invalidate"]),
            (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "$id2"]),
            (0, &["GET", "r"]),
            (0, &["MULTI"]),
            (0, &["SET", "r", "1"]),
            (0, &["CLIENT", "TRACKING", "off"]),
            (0, &["EXEC"]),
            (0, &["PING"]),
            (1, &["SET", "r", "2"]),
            (0, &["PING"]),
        ],
        3,
    );
}

/// The `tracking_*` lines of an INFO reply.
fn tracking_lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| l.starts_with("tracking_"))
        .map(str::to_string)
        .collect()
}

/// The field names of an INFO section, in order.
fn field_names(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

/// INFO's tracking fields (`tracking_clients` in clients; `tracking_total_keys`,
/// `tracking_total_items`, `tracking_total_prefixes` in stats) have Redis's names, places and
/// values through default-mode reads by two clients, BCAST prefixes, writes, a flush and OFF.
#[test]
fn info_tracking_fields_match_redis() {
    let ours: TestServer = common::start_server();
    let real = RealRedis::start(&[]);
    let mut a = Session::new(ours.port(), 4);
    let mut b = Session::new(real.port(), 4);
    for n in 0..4 {
        a.id(n);
        b.id(n);
    }
    let script: &[(usize, &[&str])] = &[
        (0, &["HELLO", "3"]),
        (0, &["CLIENT", "TRACKING", "on"]),
        (0, &["GET", "a"]),
        (0, &["MGET", "b", "c", "a"]),
        (1, &["CLIENT", "TRACKING", "on", "REDIRECT", "$id0"]),
        (1, &["GET", "a"]),
        (1, &["GET", "z"]),
        (2, &["HELLO", "3"]),
        (
            2,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "y",
            ],
        ),
        (3, &["__info"]),
        (3, &["SET", "a", "1"]),
        (3, &["__info"]),
        (1, &["CLIENT", "TRACKING", "off"]),
        (3, &["__info"]),
        (3, &["SET", "z", "1"]),
        (3, &["__info"]),
        (0, &["GET", "q"]),
        (3, &["FLUSHALL"]),
        (3, &["__info"]),
        (2, &["CLIENT", "TRACKING", "off"]),
        (0, &["CLIENT", "TRACKING", "off"]),
        (3, &["__info"]),
    ];
    let mut checked = 0;
    for (n, (who, argv)) in script.iter().enumerate() {
        if argv[0] == "__info" {
            for section in ["stats", "clients"] {
                let x = a.step(*who, &["INFO", section]);
                let y = b.step(*who, &["INFO", section]);
                assert_eq!(
                    tracking_lines(&x[*who]),
                    tracking_lines(&y[*who]),
                    "step {n}: INFO {section}"
                );
                // Our fields are a subset of Redis's, in Redis's order.
                let theirs = field_names(&y[*who]);
                let mut at = 0;
                for name in field_names(&x[*who]) {
                    match theirs[at..].iter().position(|t| *t == name) {
                        Some(p) => at += p + 1,
                        None => {
                            panic!("INFO {section}: {name} is out of Redis's order or not Redis's")
                        }
                    }
                }
                checked += 1;
            }
            continue;
        }
        let x = a.step(*who, argv);
        let y = b.step(*who, argv);
        for c in 0..4 {
            let (xo, yo) = (
                normalise(&mut a, argv, &x[c]),
                normalise(&mut b, argv, &y[c]),
            );
            assert!(
                xo == yo,
                "step {n} ({argv:?}), conn {c} differs:\n {xo:?}\n {yo:?}"
            );
        }
    }
    assert_eq!(checked, 12);
}
