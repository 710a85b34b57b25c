//! `HYPERBLOOM_BUSY_POLL`: with busy polling on, the server answers as without it, stops spinning
//! once traffic stops (an idle server must not burn its core), and a bad setting or a runtime that
//! cannot spin leaves it off with a warning instead of refusing to start.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{binary_args, connect_when_ready, tempdir, RawConn};

/// A spawned server that is killed when dropped, so a failing assertion cannot leave a server
/// spinning on the machine after the test (one that never stops spinning holds a core):
/// `common::ServerProcess` does the killing.
struct Server(common::ServerProcess);

impl Server {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Kills the server and returns what it logged.
    fn stop(mut self) -> String {
        let _ = self.0.kill();
        let out = self.0.output();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Starts the binary with `HYPERBLOOM_BUSY_POLL=budget` and the given extra environment.
fn spawn_busy(tag: &str, budget: &str, env: &[(&str, &str)]) -> (Server, RawConn) {
    let dir = tempdir(tag);
    let (process, port) = common::spawn_listening(|port| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
        command
            .args(binary_args(port, &dir, ""))
            .env("HYPERBLOOM_BUSY_POLL", budget)
            .envs(env.iter().copied());
        command
    });
    let server = Server(process);
    let conn = connect_when_ready(format!("127.0.0.1:{port}").parse().unwrap());
    (server, conn)
}

/// utime + stime of `pid` in clock ticks (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it are positional.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state), so field N is at index N - 3.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_second() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output();
    out.ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

#[test]
fn busy_polling_serves_pipelines_and_goes_quiet_when_idle() {
    let (server, mut c) = spawn_busy("busy-poll-on", "200", &[]);
    // A pipeline of 500 writes then reads: every reply in order, as without the setting.
    let mut batch = Vec::new();
    for i in 0..500 {
        batch.extend(common::encode_command(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("v{i}").as_bytes(),
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..500 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    for i in (0..500).step_by(50) {
        let v = format!("v{i}");
        let want = format!("${}\r\n{v}\r\n", v.len());
        assert_eq!(c.cmd_str(&["GET", &format!("k{i}")]), want.as_bytes());
    }
    assert_eq!(c.cmd_str(&["BF.ADD", "bf", "x"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["PFADD", "h", "a", "b"]), b":1\r\n");
    // Quiet: after the budget the poller sleeps in 1 ms steps. A server still spinning would use
    // a whole core over the window; the bound leaves room for a loaded CI machine's noise.
    std::thread::sleep(Duration::from_millis(300));
    let pid = server.pid();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_millis(1500));
    let used = cpu_ticks(pid) - before;
    let hz = clock_ticks_per_second();
    assert!(
        used * 2 < hz * 3 / 2,
        "an idle busy-polling server used {used} of {} ticks",
        hz * 3 / 2
    );
    // Past the back-off the server still answers (the poller wakes on its next 1 ms step).
    assert_eq!(c.cmd_str(&["GET", "k0"]), b"$2\r\nv0\r\n");
    server.stop();
}

#[test]
fn a_bad_setting_or_a_multi_thread_runtime_leaves_busy_polling_off() {
    let (server, mut c) = spawn_busy("busy-poll-bad", "50us", &[]);
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    let log = server.stop();
    assert!(
        log.contains("HYPERBLOOM_BUSY_POLL=50us is not a number of microseconds"),
        "{log}"
    );
    let (server, mut c) = spawn_busy("busy-poll-mt", "50", &[("HYPERBLOOM_WORKERS", "2")]);
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    let log = server.stop();
    assert!(log.contains("needs the current-thread runtime"), "{log}");
}
