//! Files written whole or not at all: an export, a fixture or a JUnit
//! report that cannot be finished (a full disk, say) leaves what was there
//! before, never a file cut short that a later `check` would trip on.
//! The new file is written beside its path and named once whole; on Linux
//! it has no name until then, so a process killed while writing (ctrl-c
//! on a large export) leaves nothing behind either.

use std::fs::{File, OpenOptions, Permissions};
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

/// What writes a file's content to the writer it is given. It may be
/// called again, from the start, when a first place to write failed, so
/// it writes the same each time: an export renders deliveries one at a
/// time as it goes, never the whole file in memory.
pub type Fill<'a> = &'a mut dyn FnMut(&mut dyn Write) -> io::Result<()>;

/// Writes `bytes` to `path`. On failure the path holds what it held
/// before: nothing, for [`Existing::Refuse`], or the file it replaced.
pub fn write(path: &Path, bytes: &[u8], existing: Existing, access: Access) -> io::Result<()> {
    write_with(path, existing, access, &mut |out| out.write_all(bytes))
}

/// [`write`] with the content written by `fill` as it is made.
pub fn write_with(path: &Path, existing: Existing, access: Access, fill: Fill<'_>) -> io::Result<()> {
    if let Some(stream) = standard_stream(path).filter(|_| existing == Existing::Replace) {
        return stream.write_with(fill);
    }
    match existing {
        Existing::Refuse => create(path, fill, access),
        // A device or a pipe (`-o /dev/stdout`, `-o >(gzip)`) holds nothing
        // to keep, and is written where it is named: a rename would put a
        // file where it stood, and the link that names a pipe
        // (`/proc/self/fd/1`) leads to no path to put one beside.
        Existing::Replace if std::fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir()) => {
            let mut out = io::BufWriter::new(access.options().write(true).truncate(true).open(path)?);
            fill(&mut out)?;
            out.flush()
        }
        Existing::Replace => replace(&followed(path), fill, access),
    }
}

/// One of this process's own standard streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdStream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
}

impl StdStream {
    fn write_with(self, fill: Fill<'_>) -> io::Result<()> {
        match self {
            StdStream::Out => {
                let mut out = io::BufWriter::new(io::stdout().lock());
                fill(&mut out)?;
                out.flush()
            }
            StdStream::Err => fill(&mut io::stderr().lock()),
        }
    }
}

/// The standard stream `path` names: `/dev/stdout`, `/dev/fd/2`,
/// `/proc/self/fd/1`. Opened by its name, a file the shell sent the stream
/// to (`>> app.log`) would be replaced, or written over from its start;
/// through the stream it is written where the shell left it, as `cat`
/// writes it.
pub fn standard_stream(path: &Path) -> Option<StdStream> {
    let name = path.to_str()?;
    let fd = ["/dev/fd/", "/proc/self/fd/"]
        .iter()
        .find_map(|folder| name.strip_prefix(folder));
    match (name, fd) {
        ("/dev/stdout", _) | (_, Some("1")) => Some(StdStream::Out),
        ("/dev/stderr", _) | (_, Some("2")) => Some(StdStream::Err),
        _ => None,
    }
}

/// Whether `path` is a FIFO (a named pipe).
#[cfg(unix)]
pub fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_fifo())
}

/// The FIFO at `path` opened for writing, once something has it open to
/// read; `None` while nothing has. Asked without waiting, so that a process
/// waiting for a reader still answers ctrl-c: an open that waits cannot be
/// interrupted.
#[cfg(unix)]
pub fn fifo_once_read(path: &Path) -> io::Result<Option<File>> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    match OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
    {
        Ok(file) => {
            // Written whole from here on, however slowly it is read.
            rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
            Ok(Some(file))
        }
        Err(err) if err.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Writes a file that must not exist yet: whole beside it, then linked
/// in under its name, which fails if the name was taken meanwhile.
fn create(path: &Path, fill: Fill<'_>, access: Access) -> io::Result<()> {
    if path.symlink_metadata().is_ok() {
        return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"));
    }
    let temp = whole_beside(path, fill, access, None)?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        // A file system without hard links: created in place, and removed
        // again if it cannot be finished.
        Err(err) if err.kind() != io::ErrorKind::AlreadyExists && path.symlink_metadata().is_err() => {
            let file = access.options().write(true).create_new(true).open(path)?;
            let done = finish(&file, fill, None);
            if done.is_err() {
                let _ = std::fs::remove_file(path);
            }
            done
        }
        linked => linked,
    }
}

fn replace(path: &Path, fill: Fill<'_>, access: Access) -> io::Result<()> {
    let before = std::fs::metadata(path).ok();
    // The replaced file's mode carries over, as it did when files were
    // rewritten in place.
    let temp = match whole_beside(path, fill, access, before.as_ref().map(std::fs::Metadata::permissions)) {
        Ok(temp) => temp,
        // A file the user may write in a folder they may not add to.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && before.is_some() => {
            return overwrite(path, fill);
        }
        Err(err) => return Err(err),
    };
    let renamed = std::fs::rename(&temp, path);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

/// Writes what `fill` writes to a new file beside `path`, given
/// `permissions` if any, and returns the name it was given once whole.
fn whole_beside(path: &Path, fill: Fill<'_>, access: Access, permissions: Option<Permissions>) -> io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    if let Some(named) = unnamed_beside(path, fill, access, permissions.clone()) {
        return named;
    }
    let (temp, file) = temp_beside(path, access)?;
    let done = finish(&file, fill, permissions);
    if let Err(err) = done {
        let _ = std::fs::remove_file(&temp);
        return Err(err);
    }
    Ok(temp)
}

/// [`whole_beside`] with a file made without a name (`O_TMPFILE`) and
/// linked in under one once written and synced. `None` where that cannot
/// be done (a file system without it, no `/proc`): the caller writes a
/// named file instead.
#[cfg(target_os = "linux")]
fn unnamed_beside(
    path: &Path,
    fill: Fill<'_>,
    access: Access,
    permissions: Option<Permissions>,
) -> Option<io::Result<PathBuf>> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file = access
        .options()
        .write(true)
        .custom_flags(rustix::fs::OFlags::TMPFILE.bits() as i32)
        .open(folder)
        .ok()?;
    if let Err(err) = finish(&file, fill, permissions) {
        return Some(Err(err));
    }
    let unnamed = format!("/proc/self/fd/{}", file.as_raw_fd());
    loop {
        let temp = temp_name(path);
        match rustix::fs::linkat(
            rustix::fs::CWD,
            unnamed.as_str(),
            rustix::fs::CWD,
            &temp,
            rustix::fs::AtFlags::SYMLINK_FOLLOW,
        ) {
            Ok(()) => return Some(Ok(temp)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(_) => return None,
        }
    }
}

/// Rewrites the existing file at `path` in place, once the room for
/// what `fill` writes is allocated: a full disk refuses before a byte is
/// changed. The content is made in memory first, to know its size.
fn overwrite(path: &Path, fill: Fill<'_>) -> io::Result<()> {
    let mut bytes = Vec::new();
    fill(&mut bytes)?;
    let mut file = OpenOptions::new().write(true).open(path)?;
    allocate(&file, bytes.len())?;
    file.write_all(&bytes)?;
    file.set_len(bytes.len() as u64)?;
    file.sync_all()
}

#[cfg(target_os = "linux")]
fn allocate(file: &File, len: usize) -> io::Result<()> {
    match len {
        0 => Ok(()),
        len => match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len as u64) {
            // A file system that cannot allocate ahead is written as is.
            Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            allocated => allocated.map_err(io::Error::from),
        },
    }
}

/// Where the room cannot be asked for first, a full disk may cut the
/// rewrite short.
#[cfg(not(target_os = "linux"))]
fn allocate(_file: &File, _len: usize) -> io::Result<()> {
    Ok(())
}

/// Gives the new `file` its `permissions`, writes what `fill` writes to
/// it and syncs it.
fn finish(file: &File, fill: Fill<'_>, permissions: Option<Permissions>) -> io::Result<()> {
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    let mut out = io::BufWriter::new(file);
    fill(&mut out)?;
    out.flush()?;
    file.sync_all()
}

/// The file a symbolic link at `path` points to, so that the link stays
/// (and a dangling one makes its target); `path` itself otherwise.
fn followed(path: &Path) -> PathBuf {
    let mut path = path.to_owned();
    // Links to links are followed a few deep; a loop stops there.
    for _ in 0..16 {
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = path
                    .parent()
                    .map_or_else(|| target.clone(), |folder| folder.join(&target))
            }
            Err(_) => break,
        }
    }
    path
}

/// A new hidden file in `path`'s folder for what will go under its name:
/// the same file system, so the rename or link is atomic. Its name is
/// random, so that one left by a killed process is never in the way.
fn temp_beside(path: &Path, access: Access) -> io::Result<(PathBuf, File)> {
    loop {
        let temp = temp_name(path);
        match access.options().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
}

/// A random hidden name beside `path`.
fn temp_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{:016x}.portpreview-tmp", rand::random::<u64>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::ScratchDir;

    #[test]
    fn the_standard_streams_are_known_by_each_of_their_names() {
        for out in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
            assert_eq!(standard_stream(Path::new(out)), Some(StdStream::Out), "{out}");
        }
        for err in ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"] {
            assert_eq!(standard_stream(Path::new(err)), Some(StdStream::Err), "{err}");
        }
        for other in ["/dev/fd/10", "/dev/fd/1x", "stdout", "/dev/null", "/proc/1/fd/1"] {
            assert_eq!(standard_stream(Path::new(other)), None, "{other}");
        }
    }

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

    /// Written without a name, a file a killed process leaves unfinished
    /// is no file at all; it is named only once whole.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_is_named_only_once_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("big.har");
        let bytes = vec![b'x'; 1 << 20];
        let temp = unnamed_beside(&path, &mut |out| out.write_all(&bytes), Access::Private, None)
            .expect("a temporary file system takes O_TMPFILE")
            .unwrap();
        assert_eq!(std::fs::read(&temp).unwrap(), bytes);
        assert_eq!(temp.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        let name = temp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(".big.har.") && name.ends_with(".portpreview-tmp"),
            "{name}"
        );
    }

    /// `-o /dev/stdout | jq`: the link names a pipe, not a path.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pipe_is_written_where_it_is_named() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let (mut reader, writer) = std::io::pipe().unwrap();
        let named = PathBuf::from(format!("/proc/self/fd/{}", writer.as_raw_fd()));
        write(&named, b"{}\n", Existing::Replace, Access::Private).unwrap();
        drop(writer);
        let mut read = String::new();
        reader.read_to_string(&mut read).unwrap();
        assert_eq!(read, "{}\n");
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
    fn a_file_rewritten_in_place_ends_where_the_new_text_does() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("report.xml");
        std::fs::write(&path, "a longer old report").unwrap();
        overwrite(&path, &mut |out| out.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_makes_its_target() {
        let dir = ScratchDir::new("whole-file");
        let link = dir.0.join("current.json");
        std::os::unix::fs::symlink("v4.json", &link).unwrap();
        write(&link, b"new", Existing::Replace, Access::Usual).unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(dir.0.join("v4.json")).unwrap(), "new");
    }

    #[test]
    fn a_new_file_leaves_nothing_beside_it() {
        let dir = ScratchDir::new("whole-file");
        let path = dir.0.join("portpreview-7.json");
        write(&path, b"{}", Existing::Refuse, Access::Private).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
        let left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["portpreview-7.json"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_device_is_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        write(Path::new("/dev/null"), b"gone", Existing::Replace, Access::Usual).unwrap();
        assert!(Path::new("/dev/null").metadata().unwrap().file_type().is_char_device());
    }
}
