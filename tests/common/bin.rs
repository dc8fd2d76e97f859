//! Locating the built `portpreview` binary for tests that need a real process.
//!
//! `CARGO_BIN_EXE_*` only covers the test's own package, so the root test
//! package builds the client once per test binary and finds it beside the
//! test executable: `<target>/<profile>/deps/<test>` → `<target>/<profile>/portpreview`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Path of an up-to-date `portpreview` binary (built on first use).
pub fn portpreview_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("test executable lives in <target>/<profile>/deps")
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "portpreview", "--bin", "portpreview"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build");
        assert!(status.success(), "cargo build -p portpreview failed");
        let bin = profile_dir.join(format!("portpreview{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.exists(), "{} missing after the build", bin.display());
        bin
    })
    .clone()
}
