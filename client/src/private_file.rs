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

pub use portpreview_shared::file_mode::open_to_others;

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
