//! Files PortPreview writes that may hold payloads and secrets: the history
//! database and exports.

use std::fs::OpenOptions;
use std::path::Path;

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
pub fn restrict(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

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

/// Creates `dir` and its missing parents, each one for its owner only (as
/// the XDG spec asks of data folders): they hold payloads and secrets.
/// A file standing where a folder of the path should be is named:
/// `create_dir_all` says only "File exists" or "Not a directory", which
/// reads as a refusal to overwrite.
pub fn create_folders(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|err| {
        match dir
            .ancestors()
            .find(|a| !a.as_os_str().is_empty() && a.exists() && !a.is_dir())
        {
            Some(file) => std::io::Error::new(err.kind(), format!("{} is a file, not a folder", file.display())),
            None => err,
        }
    })
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
    }

    #[test]
    fn folders_made_for_a_file_are_for_its_owner_only() {
        let top = std::env::temp_dir().join(format!("portpreview-folders-{}", std::process::id()));
        let deepest = top.join("a/b");
        super::create_folders(&deepest).unwrap();
        for dir in [top.join("a"), deepest] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        std::fs::remove_dir_all(&top).unwrap();
    }
}
