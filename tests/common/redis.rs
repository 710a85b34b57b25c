//! A real `redis-server` (the Debian package) for differential and interoperability tests: started
//! on a free loopback port, waited for with PING polling, killed when dropped (also when a test
//! assertion fails, so no server outlives its test).
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::RawConn;

pub struct RealRedis {
    child: Child,
    pub addr: SocketAddr,
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
    pub fn start(extra: &[&str]) -> RealRedis {
        let bin = binary();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
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
        if !extra.contains(&"--dir") {
            args.extend([
                "--dir".to_string(),
                std::env::temp_dir().to_string_lossy().into_owned(),
            ]);
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
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(mut c) = RawConn::connect_if_listening(redis.addr) {
                if c.cmd_str(&["PING"]) == b"+PONG\r\n" {
                    return redis;
                }
            }
            let exited = redis.child.try_wait().ok().flatten().is_some();
            assert!(
                !exited && Instant::now() < deadline,
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
    }
}
