//! Files PortPreview writes that may hold payloads and secrets: the history
//! database and exports.

use std::fs::OpenOptions;

/// Open options for a file only its owner may read: a file created through
/// them is never readable by others, not even for a moment.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}
