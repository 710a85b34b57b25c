//! The test harness's own promises that other tests lean on.

mod common;

use std::process::Command;

/// `spawn_listening` starts the server again on another port when its port was taken between
/// `free_port`'s check and the server's bind (the CI run at `43f747b` lost a test so), and keeps
/// the output of a server that exited for another reason.
#[test]
fn a_server_whose_port_was_taken_is_started_on_another() {
    let dir = common::tempdir("harness-port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let mut ports = Vec::new();
    let (mut child, port) = common::spawn_listening(|port| {
        // The first attempt gets the taken port, as if someone bound it first.
        let port = if ports.is_empty() { taken_port } else { port };
        ports.push(port);
        let mut command = Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
        command.args(common::binary_args(port, &dir, ""));
        command
    });
    assert_eq!(ports.len(), 2, "{ports:?}");
    assert_ne!(port, taken_port);
    assert_eq!(ports[1], port);
    let mut c = common::connect_when_ready(format!("127.0.0.1:{port}").parse().unwrap());
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    let _ = child.kill();
    drop(taken);

    // An exit for another reason is not retried, and what the server said is kept.
    let mut attempts = 0;
    let (child, _) = common::spawn_listening(|port| {
        attempts += 1;
        let mut command = Command::new(env!("CARGO_BIN_EXE_hyperbloom"));
        command
            .args(common::binary_args(port, &dir, ""))
            .args(["--maxmemory-policy", "no-such-policy"]);
        command
    });
    assert_eq!(attempts, 1);
    let out = child.output();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("maxmemory-policy"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
