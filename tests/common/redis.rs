//! A real `redis-server` (the Debian package) for differential and interoperability tests: started
//! on a free loopback port, waited for with PING polling, killed when dropped (also when a test
//! assertion fails, so no server outlives its test).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::RawConn;

pub struct RealRedis {
    child: Child,
    pub addr: SocketAddr,
    /// The directory made for it when the test gave no `--dir`, removed on drop.
    own_dir: Option<std::path::PathBuf>,
}

/// Where the binary is. A test that needs it fails with this hint rather than passing vacuously:
/// `scripts/test.sh` installs it.
pub fn binary() -> String {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if std::path::Path::new(candidate).exists() {
            return candidate.to_string();
        }
    }
    panic!("redis-server not found in /usr/bin or /usr/local/bin: install it with `apt-get install redis-server` (scripts/test.sh does)");
}

impl RealRedis {
    /// Starts `redis-server` with no persistence, plus `extra` directives (`--dir`, ...).
    ///
    /// The port is [`super::free_port`]'s, and the server that answers on it must be this child
    /// (`INFO server`'s `process_id`): another process can take a port between the check that it
    /// is free and the child's bind. Then the child cannot bind and exits, and the PING would
    /// reach the other server; that is how CI at `2a5fddd` lost `info_tracking_fields_match_redis`
    /// (a connection reset while starting). Such a start is retried on another port.
    pub fn start(extra: &[&str]) -> RealRedis {
        for _ in 0..5 {
            if let Some(redis) = RealRedis::try_start(extra) {
                return redis;
            }
        }
        panic!("redis-server did not start on any of 5 ports (args {extra:?})");
    }

    /// One attempt: the server, or None when its port turned out to be someone else's.
    fn try_start(extra: &[&str]) -> Option<RealRedis> {
        let bin = binary();
        let port = super::free_port();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // A directory of its own: in a shared one (it was /tmp) any dump.rdb left there, by
        // another test or by hand, loads at startup, and a differential test then starts from
        // someone else's keys (a local CI run read `k` = `v` from a stray /tmp/dump.rdb).
        let own_dir = (!extra.contains(&"--dir")).then(|| super::tempdir("real-redis"));
        if let Some(dir) = &own_dir {
            args.extend(["--dir".to_string(), dir.to_string_lossy().into_owned()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(&bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {bin}: {e}"));
        let mut redis = RealRedis {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            own_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if redis.child.try_wait().ok().flatten().is_some() {
                // Most likely the port was taken after free_port checked it.
                return None;
            }
            if super::is_listening(port) {
                match server_pid(redis.addr) {
                    Some(pid) if pid == redis.child.id() => {
                        let mut c = RawConn::connect(redis.addr);
                        if c.cmd_str(&["PING"]) == b"+PONG\r\n" {
                            return Some(redis);
                        }
                    }
                    // Another process's server holds the port: ours cannot bind it.
                    Some(_) => return None,
                    None => {}
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port} (args {args:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn raw(&self) -> RawConn {
        RawConn::connect(self.addr)
    }
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.own_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The `process_id` of the server answering on `addr` (`INFO server`), or None if it cannot be
/// read (not up yet, a reset, a reply without one).
fn server_pid(addr: SocketAddr) -> Option<u32> {
    let mut stream = TcpStream::connect(addr).ok()?;
    if stream.local_addr().ok()? == stream.peer_addr().ok()? {
        return None;
    }
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&reply);
        if let Some(at) = text.find("process_id:") {
            if let Some(end) = text[at..].find("\r\n") {
                return text[at + "process_id:".len()..at + end].parse().ok();
            }
        }
        if text.starts_with('-') && text.contains("\r\n") {
            return None;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..n]);
    }
}
