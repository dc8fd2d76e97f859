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

/// Makes an existing file readable and writable by its owner only: for a
/// file PortPreview adopts (an empty file given as the history).
pub fn restrict(path: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
