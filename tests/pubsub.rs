//! Pub/sub and keyspace events that have no counterpart in a plain `redis-server` (the
//! differential tests in `diff_pubsub.rs` cover the rest): the events Redis itself raises around
//! RedisBloom's module commands — `new` when a command creates the key, `keymiss` when a command
//! that opens its key read-only finds none — and nothing else (RedisBloom publishes no events).

mod common;

use common::{start_server, RawConn};

/// Subscribes `sub` to every keyspace and keyevent channel and returns a closure-free helper.
fn subscribed(addr: std::net::SocketAddr) -> RawConn {
    let mut sub = RawConn::connect(addr);
    assert_eq!(
        sub.cmd_str(&["PSUBSCRIBE", "__key*__:*"]),
        b"*3\r\n$10\r\npsubscribe\r\n$10\r\n__key*__:*\r\n:1\r\n"
    );
    sub
}

/// What `sub` received before the reply to a `PING marker`.
fn received(sub: &mut RawConn, marker: &str) -> Vec<String> {
    sub.send(&[b"PING", marker.as_bytes()]);
    let mut out = Vec::new();
    loop {
        let f = sub.read_reply();
        if f == format!("*2\r\n$4\r\npong\r\n${}\r\n{marker}\r\n", marker.len()).as_bytes() {
            return out;
        }
        out.push(String::from_utf8_lossy(&f).into_owned());
    }
}

fn pmessage(channel: &str, payload: &str) -> String {
    format!(
        "*4\r\n$8\r\npmessage\r\n$10\r\n__key*__:*\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
        channel.len(),
        payload.len()
    )
}

/// A command and the (channel, payload) messages it must raise.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

#[test]
fn module_commands_raise_only_new_and_keymiss() {
    let server = start_server();
    let mut c = server.raw();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "notify-keyspace-events", "KEAmn"]),
        b"+OK\r\n"
    );
    let mut sub = subscribed(server.addr);
    let cases: &[Case] = &[
        (
            &["BF.ADD", "bf", "a"],
            &[("__keyspace@0__:bf", "new"), ("__keyevent@0__:new", "bf")],
        ),
        (&["BF.ADD", "bf", "b"], &[]),
        (&["BF.EXISTS", "bf", "a"], &[]),
        (
            &["BF.EXISTS", "nobf", "a"],
            &[
                ("__keyspace@0__:nobf", "keymiss"),
                ("__keyevent@0__:keymiss", "nobf"),
            ],
        ),
        (
            &["BF.INFO", "nobf"],
            &[
                ("__keyspace@0__:nobf", "keymiss"),
                ("__keyevent@0__:keymiss", "nobf"),
            ],
        ),
        (
            &["BF.RESERVE", "bf2", "0.01", "100"],
            &[("__keyspace@0__:bf2", "new"), ("__keyevent@0__:new", "bf2")],
        ),
        (
            &["CF.ADD", "cf", "a"],
            &[("__keyspace@0__:cf", "new"), ("__keyevent@0__:new", "cf")],
        ),
        (&["CF.DEL", "cf", "a"], &[]),
        (
            &["CF.EXISTS", "nocf", "a"],
            &[
                ("__keyspace@0__:nocf", "keymiss"),
                ("__keyevent@0__:keymiss", "nocf"),
            ],
        ),
        (&["CF.COUNT", "cf", "a"], &[]),
        (
            &["DEL", "bf"],
            &[("__keyspace@0__:bf", "del"), ("__keyevent@0__:del", "bf")],
        ),
    ];
    for (i, (argv, expect)) in cases.iter().enumerate() {
        // Replies (BF.INFO's `ERR not found` included) are covered elsewhere; the events here.
        c.cmd_str(argv);
        let got = received(&mut sub, &format!("m{i}"));
        let want: Vec<String> = expect.iter().map(|(ch, p)| pmessage(ch, p)).collect();
        assert_eq!(got, want, "events of {argv:?}");
    }
}

#[test]
fn publish_reaches_many_subscribers_in_order() {
    let server = start_server();
    let mut subs: Vec<RawConn> = (0..20)
        .map(|_| {
            let mut s = server.raw();
            s.cmd_str(&["SUBSCRIBE", "fan"]);
            s
        })
        .collect();
    let mut p = server.raw();
    for i in 0..50 {
        assert_eq!(p.cmd_str(&["PUBLISH", "fan", &format!("m{i}")]), b":20\r\n");
    }
    for s in subs.iter_mut() {
        for i in 0..50 {
            let m = format!("m{i}");
            let want = format!(
                "*3\r\n$7\r\nmessage\r\n$3\r\nfan\r\n${}\r\n{m}\r\n",
                m.len()
            );
            assert_eq!(s.read_reply(), want.as_bytes());
        }
    }
    // A subscriber that disconnects stops counting.
    drop(subs.pop());
    let mut n = Vec::new();
    for _ in 0..200 {
        n = p.cmd_str(&["PUBSUB", "NUMSUB", "fan"]);
        if n.ends_with(b":19\r\n") {
            break;
        }
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(n.ends_with(b":19\r\n"), "{}", String::from_utf8_lossy(&n));
}
