//! Protected configs and commands (issue 10, item 3): `enable-protected-configs`,
//! `enable-debug-command` and `enable-module-command` with Redis 7's semantics — `no` by default,
//! `local` = loopback clients only, `yes` = everyone — and Redis's exact texts (checked against
//! redis-server 7.0.15).

mod common;

use std::net::{IpAddr, SocketAddr, UdpSocket};

const PROTECTED_DIR: &[u8] =
    b"-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n";
const PROTECTED_DBFILENAME: &[u8] =
    b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config\r\n";
const DEBUG_REFUSED: &[u8] = b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";
const MODULE_REFUSED: &[u8] = b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";

#[test]
fn defaults_refuse_dir_dbfilename_debug_and_module_load() {
    let dir = common::tempdir("protected");
    let server = common::start_server();
    let mut c = server.raw();
    let d = dir.to_str().unwrap();
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "dir", d]), PROTECTED_DIR);
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "dir", "/etc"]), PROTECTED_DIR);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dbfilename", "authorized_keys"]),
        PROTECTED_DBFILENAME
    );
    // Refused as a whole: the allowed pair before it is not applied either.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "hz", "20", "dbfilename", "x.rdb"]),
        PROTECTED_DBFILENAME
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n10\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "dbfilename"]),
        b"*2\r\n$10\r\ndbfilename\r\n$8\r\ndump.rdb\r\n"
    );
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "0"]), DEBUG_REFUSED);
    assert_eq!(c.cmd_str(&["MODULE", "LOAD", "/tmp/x.so"]), MODULE_REFUSED);
    assert_eq!(
        c.cmd_str(&["MODULE", "LOADEX", "/tmp/x.so"]),
        MODULE_REFUSED
    );
    assert_eq!(c.cmd_str(&["MODULE", "UNLOAD", "bf"]), MODULE_REFUSED);
    // MODULE LIST is not protected.
    assert!(c.cmd_str(&["MODULE", "LIST"]).starts_with(b"*1\r\n"));
    for name in [
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
    ] {
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", name, "yes"]),
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config\r\n").as_bytes()
        );
        assert_eq!(
            c.cmd_str(&["CONFIG", "GET", name]),
            format!("*2\r\n${}\r\n{name}\r\n$2\r\nno\r\n", name.len()).as_bytes()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn yes_allows_and_dir_must_exist() {
    let dir = common::tempdir("protected-yes");
    let server = common::start_with(&[
        "--enable-protected-configs",
        "yes",
        "--enable-debug-command",
        "yes",
        "--enable-module-command",
        "yes",
    ]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", "/nonexistent-hb-dir"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory\r\n"
    );
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", file.to_str().unwrap()]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - Not a directory\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", dir.to_str().unwrap()]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dbfilename", "other.rdb"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dbfilename", "a/b"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename\r\n"
    );
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    assert!(dir.join("other.rdb").exists());
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["MODULE", "LOAD", "/tmp/x.so"]),
        b"-ERR Error loading the extension. Please check the server logs.\r\n"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_dir_in_the_config_is_fatal_with_redis_text() {
    let err = hyperbloom::config::Config::from_args(&[
        "--port".to_string(),
        "0".into(),
        "--dir".into(),
        "/nonexistent-hb-dir".into(),
    ])
    .unwrap_err();
    assert!(err.0.ends_with("\nNo such file or directory"), "{}", err.0);
}

/// A non-loopback address of this machine, if it has one.
fn outside_ip() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:1").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn local_means_loopback_only() {
    let server = common::start_with(&[
        "--bind",
        "0.0.0.0",
        "--protected-mode",
        "no",
        "--enable-protected-configs",
        "local",
        "--enable-debug-command",
        "local",
        "--enable-module-command",
        "local",
    ]);
    let mut local =
        common::RawConn::connect(SocketAddr::new("127.0.0.1".parse().unwrap(), server.port()));
    assert_eq!(
        local.cmd_str(&["CONFIG", "SET", "dbfilename", "l.rdb"]),
        b"+OK\r\n"
    );
    assert_eq!(local.cmd_str(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
    assert_eq!(
        local.cmd_str(&["MODULE", "UNLOAD", "nosuch"]),
        b"-ERR Error unloading module: no such module with that name\r\n"
    );
    let Some(ip) = outside_ip() else {
        eprintln!("no non-loopback address on this machine: the remote half is not checked");
        return;
    };
    let mut remote = common::RawConn::connect(SocketAddr::new(ip, server.port()));
    assert_eq!(
        remote.cmd_str(&["CONFIG", "SET", "dbfilename", "r.rdb"]),
        PROTECTED_DBFILENAME
    );
    assert_eq!(remote.cmd_str(&["DEBUG", "SLEEP", "0"]), DEBUG_REFUSED);
    assert_eq!(remote.cmd_str(&["MODULE", "LOAD", "/x.so"]), MODULE_REFUSED);
}
