//! Files written whole or not at all: an export, a fixture or a JUnit
//! report that cannot be finished (a full disk, say) leaves what was there
//! before, never a file cut short that a later `check` would trip on.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What becomes of a file already at the path written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// The user named the file: it is replaced, once the new one is whole.
    Replace,
    /// PortPreview named it: it is kept, and the write fails with
    /// [`io::ErrorKind::AlreadyExists`].
    Refuse,
}

/// Who may read a file this module creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Its owner only: it may hold payloads and secrets.
    Private,
    /// As the umask says.
    Usual,
}

impl Access {
    fn options(self) -> OpenOptions {
        match self {
            Access::Private => crate::private_file::options(),
            Access::Usual => OpenOptions::new(),
        }
    }
}

/// Writes `bytes` to `path`. On failure the path holds what it held
/// before: nothing, for [`Existing::Refuse`], or the file it replaced.
pub fn write(path: &Path, bytes: &[u8], existing: Existing, access: Access) -> io::Result<()> {
    match existing {
        Existing::Refuse => {
            let file = access.options().write(true).create_new(true).open(path)?;
            removed_unless_written(file, bytes, path)
        }
        Existing::Replace => replace(&followed(path), bytes, access),
    }
}

fn replace(path: &Path, bytes: &[u8], access: Access) -> io::Result<()> {
    let before = std::fs::metadata(path).ok();
    // A device or a pipe (`-o /dev/stdout`) holds nothing to keep, and a
    // rename would put a file where it stood.
    if before.as_ref().is_some_and(|meta| !meta.is_file()) {
        return in_place(path, bytes, access);
    }
    let temp = beside(path);
    let file = match access.options().write(true).create_new(true).open(&temp) {
        Ok(file) => file,
        // A file the user may write in a folder they may not add to.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && before.is_some() => {
            return in_place(path, bytes, access);
        }
        Err(err) => return Err(err),
    };
    let whole = (|| {
        // The replaced file's mode carries over, as it did when files were
        // rewritten in place.
        if let Some(meta) = &before {
            file.set_permissions(meta.permissions())?;
        }
        removed_unless_written(file, bytes, &temp)?;
        std::fs::rename(&temp, path)
    })();
    if whole.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    whole
}

fn in_place(path: &Path, bytes: &[u8], access: Access) -> io::Result<()> {
    access
        .options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?
        .write_all(bytes)
}

/// Writes `bytes` to the new `file` at `path` and syncs them, or removes it.
fn removed_unless_written(mut file: File, bytes: &[u8], path: &Path) -> io::Result<()> {
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if written.is_err() {
        drop(file);
        let _ = std::fs::remove_file(path);
    }
    written
}

/// The file a symbolic link at `path` points to, so that the link stays;
/// `path` itself otherwise.
fn followed(path: &Path) -> PathBuf {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()),
        _ => path.to_owned(),
    }
}

/// A hidden name in `path`'s folder for the file that will replace it:
/// the same file system, so the rename is atomic.
fn beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.portpreview-tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::ScratchDir;

    #[test]
    fn a_replaced_file_is_whole_and_keeps_its_mode() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("fixture.json");
        std::fs::write(&path, "old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        write(&path, b"new", Existing::Replace, Access::Private).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(path.metadata().unwrap().permissions().mode() & 0o777, 0o640);
        }
        let left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["fixture.json"]);
    }

    #[test]
    fn a_new_private_file_is_its_owners_only() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("new.har");
        write(&path, b"{}", Existing::Replace, Access::Private).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(path.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_stays_a_link_to_the_replaced_file() {
        let dir = ScratchDir::new("whole-file");
        let real = dir.0.join("v3.json");
        let link = dir.0.join("current.json");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"new", Existing::Replace, Access::Usual).unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn refuse_keeps_a_file_already_there() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("portpreview-1.json");
        std::fs::write(&path, "edited by hand").unwrap();
        let err = write(&path, b"new", Existing::Refuse, Access::Private).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "edited by hand");
    }

    #[test]
    fn a_replacement_that_cannot_be_made_leaves_the_old_file() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("fixture.json");
        std::fs::write(&path, "old").unwrap();
        // Where the replacement would be written, something stands.
        std::fs::create_dir(beside(&path)).unwrap();
        write(&path, b"new", Existing::Replace, Access::Private).unwrap_err();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_device_is_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        write(Path::new("/dev/null"), b"gone", Existing::Replace, Access::Usual).unwrap();
        assert!(Path::new("/dev/null").metadata().unwrap().file_type().is_char_device());
    }
}
