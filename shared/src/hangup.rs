//! Whether the process was started with SIGHUP ignored.
//!
//! `nohup portpreview http 3000 &` and `nohup portpreview-server … &` ask
//! that closing the terminal leave the process running. A handler
//! installed for SIGHUP would undo that, so both binaries ask this first.

/// Whether SIGHUP was ignored when first asked, which is before either
/// binary installs a handler for it. Read from `/proc` on Linux; elsewhere
/// taken as not ignored.
pub fn ignored() -> bool {
    static IGNORED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let mask = status.lines().find_map(|line| line.strip_prefix("SigIgn:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            // Bit n-1 stands for signal n; SIGHUP is 1.
            .is_some_and(|mask| mask & 1 != 0)
    })
}
