//! Locating the built binaries for tests that need a real process.
//!
//! `CARGO_BIN_EXE_*` only covers the test's own package, so the root test
//! package builds the workspace's binaries once per test executable and finds
//! them beside it: `<target>/<profile>/deps/<test>` → `<target>/<profile>/<binary>`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Path of an up-to-date `portpreview` binary (built on first use).
pub fn portpreview_bin() -> PathBuf {
    built("portpreview")
}

/// Path of an up-to-date `portpreview-server` binary (built on first use).
pub fn server_bin() -> PathBuf {
    built("portpreview-server")
}

/// Runs `command` with its stdout already closed, as after `| head -1` has
/// exited, and returns what it left on stderr and its exit.
pub fn run_into_a_closed_pipe(command: &mut Command) -> std::process::Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start portpreview");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for portpreview")
}

/// Builds every binary of the workspace once per test executable and
/// returns the profile directory they landed in.
///
/// The build selects what `cargo test --workspace` selects (all packages,
/// tests included) so that it resolves the same dependency features: a
/// narrower `-p portpreview` resolves others, and would compile a second copy
/// of tokio, rustls and the rest beside the first.
fn profile_dir_with_binaries() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("test executable lives in <target>/<profile>/deps")
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(["build", "--workspace", "--bins", "--tests"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        // cargo hands a test its package's CARGO_PKG_NAME, CARGO_MANIFEST_DIR
        // and the like; build scripts that watch those (ring's does) would
        // see them changed and compile again.
        for (name, _) in std::env::vars_os() {
            if set_by_cargo_for_this_test(&name) {
                command.env_remove(name);
            }
        }
        // Tests built in release find release binaries beside them.
        if profile_dir.file_name().is_some_and(|name| name == "release") {
            command.arg("--release");
        }
        let status = command.status().expect("run cargo build");
        assert!(status.success(), "cargo build --workspace --bins failed");
        profile_dir
    })
}

fn set_by_cargo_for_this_test(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    name == "OUT_DIR"
        || name == "CARGO_PRIMARY_PACKAGE"
        || name == "CARGO_TARGET_TMPDIR"
        || ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

fn built(bin: &str) -> PathBuf {
    let path = profile_dir_with_binaries().join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} missing after the build", path.display());
    path
}
