//! Memory bounds (issue 10): what one command may make the server hold.
//!
//! These run the real binary and read its `/proc/PID/status` (`VmHWM` is the peak RSS, reset
//! through `/proc/PID/clear_refs`), so every figure is the process's own and no other test in this
//! binary can disturb it. The bounds are far from both the fixed figure and the broken one, so the
//! tests are deterministic.

mod common;

use common::RawConn;

struct Spawned {
    child: std::process::Child,
    conn: RawConn,
    dir: std::path::PathBuf,
}

impl Spawned {
    fn start(tag: &str, extra: &[&str]) -> Spawned {
        let dir = common::tempdir(tag);
        let (child, addr) = common::spawn_binary_with(&dir, "", extra);
        let conn = common::connect_when_ready(addr);
        Spawned { child, conn, dir }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak RSS in MB since the last [`Spawned::reset_peak`].
    fn peak_mb(&self) -> u64 {
        common::proc_status_kb(self.pid(), "VmHWM") / 1024
    }

    fn reset_peak(&self) {
        // "5" resets the peak RSS to the current RSS (proc(5), clear_refs).
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
    }

    fn ok(&mut self, argv: &[&str]) {
        let r = self.conn.cmd_str(argv);
        assert_eq!(r, b"+OK\r\n", "{argv:?}: {}", String::from_utf8_lossy(&r));
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Item 2: SAVE, BGSAVE, DUMP and SCANDUMP of never-written 1.38 GB Bloom and 1 GiB cuckoo
/// filters stream their pages: the peak stays far below the filters' size (it was 1.37 GB for SAVE
/// and as much again for DUMP).
#[test]
fn saving_never_written_filters_allocates_none_of_them() {
    let mut s = Spawned::start("mem-save", &[]);
    s.ok(&["BF.RESERVE", "big", "0.01", "1000000000"]);
    s.ok(&["CF.RESERVE", "cbig", "1000000000"]);
    s.reset_peak();
    s.ok(&["SAVE"]);
    let after_save = s.peak_mb();
    let r = s.conn.cmd_str(&["BGSAVE"]);
    assert_eq!(r, b"+Background saving started\r\n");
    let start = std::time::Instant::now();
    loop {
        let info = String::from_utf8_lossy(&s.conn.cmd_str(&["INFO", "persistence"])).into_owned();
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            break;
        }
        assert!(start.elapsed().as_secs() < 60, "BGSAVE did not finish");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let after_bgsave = s.peak_mb();
    for key in ["big", "cbig"] {
        let r = s.conn.cmd_str(&["DUMP", key]);
        assert!(r.len() > 1000, "DUMP {key}");
    }
    let after_dump = s.peak_mb();
    let r = s.conn.cmd_str(&["BF.SCANDUMP", "big", "1"]);
    assert!(r.len() > 16 << 20, "a 16 MiB chunk");
    let after_scandump = s.peak_mb();
    let figures = format!(
        "peak MB after SAVE {after_save}, BGSAVE {after_bgsave}, DUMP {after_dump}, \
         SCANDUMP {after_scandump}"
    );
    eprintln!("{figures}");
    assert!(after_scandump < 150, "{figures}");
    // The file is what Redis would load: both keys, a few MB for ~2.4 GB of zeros.
    let file = std::fs::metadata(s.dir.join("dump.rdb")).unwrap().len();
    assert!(file < 40 << 20, "{file} bytes; {figures}");
}
