//! Whether a file others may read holds what is meant for one user only:
//! a history, a config file with tokens and signing secrets, a relay's
//! tokens file.

use std::path::Path;

/// The permission bits of the file at `path` when users other than its
/// owner may read or write it: a history made by an older tool, or
/// copied with another umask, that PortPreview did not make private.
pub fn open_to_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o066 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// How other users may reach a file whose bits [`open_to_others`] gave:
/// "read" when they may read it, else "changed".
pub fn reached_as(mode: u32) -> &'static str {
    match mode & 0o044 {
        0 => "changed",
        _ => "read",
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_others_may_read_is_told_apart() {
        let path = std::env::temp_dir().join(format!("portpreview-open-to-others-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        for (mode, open) in [(0o644, Some(0o644)), (0o620, Some(0o620)), (0o600, None), (0o700, None)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(super::open_to_others(&path), open, "{mode:o}");
        }
        std::fs::remove_file(&path).unwrap();
        assert_eq!(super::open_to_others(&path), None, "no file");
        assert_eq!(
            (super::reached_as(0o644), super::reached_as(0o620)),
            ("read", "changed")
        );
    }
}
