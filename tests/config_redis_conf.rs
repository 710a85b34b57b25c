//! The user's redis.conf starts hyperbloom (issue 10, item 7): Debian's stock
//! `/etc/redis/redis.conf` (installed with the `redis-server` package; scripts/test.sh installs it)
//! plus overrides for port, dir, daemonize and logfile. Every directive of it is accepted; those
//! not implemented are named by one warning line each at startup and keep their values for CONFIG
//! GET. A directive Redis does not know either is fatal, with redis-server's own text.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEBIAN_CONF: &str = "/etc/redis/redis.conf";

fn debian_conf() -> String {
    assert!(
        std::path::Path::new(DEBIAN_CONF).exists(),
        "{DEBIAN_CONF} is missing: install the redis-server package (scripts/test.sh does)"
    );
    DEBIAN_CONF.to_string()
}

/// Runs `bin` with `args` to its end (a server that refuses its configuration exits at once):
/// its exit code and stderr.
fn exit_and_stderr(bin: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn debian_redis_conf_starts_hyperbloom() {
    let conf = debian_conf();
    let dir = common::tempdir("redis-conf");
    // Killed on drop should an assertion fail before the SIGTERM below; started again on another
    // port should its port be taken before it binds, and waited for until it listens (or has
    // exited: the loop below reports why).
    let (mut child, port) = common::spawn_listening(|port| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
        command
            .arg(&conf)
            .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
            .args(["--daemonize", "no", "--logfile", ""]);
        command
    });
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    let mut c = loop {
        if let Some(conn) = common::RawConn::connect_if_listening(addr) {
            break conn;
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.output();
            panic!(
                "hyperbloom {conf} exited with {}:\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    // The overrides won over the file; the file's own values are in force or shown.
    let get = |c: &mut common::RawConn, name: &str| -> String {
        let r = c.cmd_str(&["CONFIG", "GET", name]);
        let text = String::from_utf8_lossy(&r).into_owned();
        text.split("\r\n").nth(4).unwrap_or_default().to_string()
    };
    assert_eq!(get(&mut c, "port"), port.to_string());
    assert_eq!(get(&mut c, "dir"), dir.to_str().unwrap());
    assert_eq!(get(&mut c, "daemonize"), "no");
    assert_eq!(get(&mut c, "logfile"), "");
    assert_eq!(
        get(&mut c, "proc-title-template"),
        "{title} {listen-addr} {server-mode}"
    );
    assert_eq!(get(&mut c, "slowlog-max-len"), "128");
    assert_eq!(get(&mut c, "databases"), "16");
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    // One warning line per accepted, not implemented directive, e.g. proc-title-template.
    for name in [
        "proc-title-template",
        "jemalloc-bg-thread",
        "lazyfree-lazy-expire",
    ] {
        let lines = out
            .lines()
            .filter(|l| l.contains(&format!("Directive '{name}' is accepted")))
            .count();
        assert_eq!(lines, 1, "{name}: {lines} warning lines in:\n{out}");
    }
    // Implemented directives are not named.
    assert!(!out.contains("Directive 'port'"), "{out}");
    assert!(!out.contains("Directive 'lazyfree-lazy-eviction'"), "{out}");
    assert!(!out.contains("Directive 'maxmemory-samples'"), "{out}");
    assert!(!out.contains("Directive 'slowlog-max-len'"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directive unknown to Redis too: hyperbloom stops with redis-server 7.0.15's exact text (the
/// line number counts the file's lines, then the command-line options).
#[test]
fn unknown_directive_is_fatal_like_redis() {
    let dir = common::tempdir("redis-conf-bad");
    let conf = dir.join("bad.conf");
    std::fs::write(
        &conf,
        "port 0\n# a comment\nproc-title-template \"{title} {listen-addr}\"\nslowlog-max-len 5\nno-such-directive yes\n",
    )
    .unwrap();
    let conf = conf.to_str().unwrap().to_string();
    let run = |bin: &str, extra: &[&str]| {
        let args: Vec<&str> = std::iter::once(conf.as_str())
            .chain(extra.iter().copied())
            .collect();
        exit_and_stderr(bin, &args)
    };
    let redis = common::redis::binary();
    let ours = env!("CARGO_BIN_EXE_hyperbloom");
    let (rc_redis, err_redis) = run(&redis, &[]);
    let (rc_ours, err_ours) = run(ours, &[]);
    assert_eq!(rc_redis, Some(1));
    assert_eq!(rc_ours, Some(1));
    assert_eq!(err_ours, err_redis);
    // And on the command line, after a good file.
    std::fs::write(&conf, "port 0\n").unwrap();
    let extra = ["--maxmemory", "1mb", "--bogus-option", "a b"];
    let (_, err_redis) = run(&redis, &extra);
    let (rc_ours, err_ours) = run(ours, &extra);
    assert_eq!(rc_ours, Some(1));
    assert_eq!(err_ours, err_redis);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rename-command`, the usual hardening of a redis.conf, on the command line of both servers:
/// a removed command (FLUSHALL), one renamed to a 40-character secret (CONFIG), one renamed to
/// a new word (GET to FETCH, any case) are answered alike, in and out of MULTI; and the two
/// impossible renames stop both servers with the same text.
#[test]
fn rename_command_acts_as_in_redis() {
    let secret = "b840fc02d524045429941cc15f59e41cb7be6c52";
    let renames = [
        "--rename-command",
        "FLUSHALL",
        "",
        "--rename-command",
        "config",
        secret,
        "--rename-command",
        "get",
        "fetch",
    ];
    let redis = common::redis::RealRedis::start(&renames);
    let dir = common::tempdir("rename-command");
    let (_ours, addr) = common::spawn_binary_with(&dir, "", &renames);
    let mut theirs = redis.raw();
    let mut ours = common::connect_when_ready(addr);
    let script: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["FLUSHALL"],
        &["flushall", "async"],
        &["CONFIG", "GET", "maxmemory"],
        &[secret, "GET", "maxmemory"],
        &[&secret.to_uppercase(), "GET", "hz"],
        &["GET", "k"],
        &["fetch", "k"],
        &["FETCH", "k"],
        &["EXISTS", "k"],
        &["MULTI"],
        &["FETCH", "k"],
        &["GET", "k"],
        &["EXEC"],
        &["MULTI"],
        &["FETCH", "k"],
        &["EXEC"],
    ];
    for argv in script {
        let (a, b) = (theirs.cmd_str(argv), ours.cmd_str(argv));
        assert_eq!(
            String::from_utf8_lossy(&b),
            String::from_utf8_lossy(&a),
            "{argv:?}"
        );
    }
    // COMMAND INFO by the new name shows the command's own name, as Redis's does (the rest of
    // the entry, ACL categories and key specs, is a known difference of COMMAND INFO).
    let info = |c: &mut common::RawConn| c.cmd_str(&["COMMAND", "INFO", "fetch"])[..18].to_vec();
    assert_eq!(info(&mut ours), info(&mut theirs));
    assert!(info(&mut ours).ends_with(b"$3\r\nget\r\n"));
    // A removed command leaves COMMAND COUNT and COMMAND LIST, as in Redis; a renamed one is
    // listed by its own name.
    let count = |c: &mut common::RawConn| -> i64 {
        let r = c.cmd_str(&["COMMAND", "COUNT"]);
        String::from_utf8_lossy(&r[1..r.len() - 2]).parse().unwrap()
    };
    let plain_redis = common::redis::RealRedis::start(&[]);
    let plain_ours = common::start_server();
    assert_eq!(count(&mut theirs), count(&mut plain_redis.raw()) - 1);
    assert_eq!(count(&mut ours), count(&mut plain_ours.raw()) - 1);
    for c in [&mut theirs, &mut ours] {
        let list = String::from_utf8_lossy(&c.cmd_str(&["COMMAND", "LIST"])).into_owned();
        assert!(!list.contains("\r\nflushall\r\n"), "{list}");
        assert!(list.contains("\r\nget\r\n") && list.contains("\r\nconfig\r\n"));
    }
    // Impossible renames: fatal, with redis-server's text.
    for bad in [["nosuch", "x"], ["get", "SET"]] {
        let run =
            |bin: &str| exit_and_stderr(bin, &["--port", "0", "--rename-command", bad[0], bad[1]]);
        let (rc_redis, err_redis) = run(&common::redis::binary());
        let (rc_ours, err_ours) = run(env!("CARGO_BIN_EXE_hyperbloom"));
        assert_eq!((rc_ours, err_ours), (rc_redis, err_redis), "{bad:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An in-process server refuses `rename-command`: the command table is the process's, so the
/// renames would reach every other server of the process (the tests run many side by side).
#[test]
fn an_in_process_server_refuses_rename_command() {
    let config = hyperbloom::config::Config::from_args(&[
        "--port".into(),
        "0".into(),
        "--rename-command".into(),
        "get".into(),
        "fetch".into(),
    ])
    .expect("config");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(hyperbloom::server::start(config))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("rename-command"), "{err}");
    // And the process's table is untouched: GET is still GET for the servers beside it.
    let server = common::start_server();
    assert_eq!(server.raw().cmd_str(&["GET", "k"]), b"$-1\r\n");
}
