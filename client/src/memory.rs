//! Giving memory back to the system once the tunnel is idle.
//!
//! The binary's allocator keeps the pages a burst of large bodies freed, for
//! reuse, and hands them back only as it allocates again: a tunnel left
//! idle after a few 25 MiB uploads would sit on 150 MiB or more. The
//! allocator belongs to the binary, so the binary registers here how to
//! hand memory back, and the history writer, which notices when the tunnel
//! goes idle, asks for it.

use std::sync::OnceLock;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Sets how to return freed memory to the system; the first call wins.
pub fn set_release(release: fn()) {
    let _ = RELEASE.set(release);
}

/// Returns freed memory to the system, if the binary has said how.
pub fn release() {
    if let Some(release) = RELEASE.get() {
        release();
    }
}
