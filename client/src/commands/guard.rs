//! Where a file the user names for output (an export, a JUnit report) must
//! never be written: over a database.
//!
//! A mistyped or tab-completed `-o` that replaced the history lost every
//! delivery, and a tunnel recording into it went on writing into a broken
//! file; one that replaced a history's WAL lost what the WAL held. So the
//! history's own files are refused however they are reached (another
//! spelling, a symbolic or a hard link), and so is any file that holds an
//! SQLite database or its WAL, or is named as SQLite and PortPreview name
//! the files they keep beside a database.

use std::path::{Path, PathBuf};

use crate::store::{beside, INBOX_INFIX};

/// What an SQLite database file starts with.
const DATABASE_HEADER: &[u8] = b"SQLite format 3\0";

/// What an SQLite WAL file starts with (big-endian; the last bit says
/// which checksum order it uses).
const WAL_MAGIC: [[u8; 4]; 2] = [[0x37, 0x7f, 0x06, 0x82], [0x37, 0x7f, 0x06, 0x83]];

/// Suffixes of the files SQLite keeps beside a database; the recorder's
/// inboxes beside it are named `<db>` [`INBOX_INFIX`] `<id>`.
const COMPANION_SUFFIXES: &[&str] = &["-wal", "-shm", "-journal"];

/// Fails when writing `what` (`the export`, `the JUnit report`) to
/// `output` would overwrite the history at `db` (when there is one), one of
/// the files kept beside it, or any other database or such file.
pub fn refuse_to_overwrite_a_database(output: &Path, db: Option<&Path>, what: &str) -> anyhow::Result<()> {
    if db.is_some_and(|db| is_history_file(output, db)) {
        anyhow::bail!(
            "{} is the history database or one of its files; write {what} to another file",
            output.display()
        );
    }
    if output.is_file() && (holds_a_database(output) || named_as_a_companion(output)) {
        anyhow::bail!(
            "{} is an SQLite database or one of the files kept beside one; {what} does not overwrite it",
            output.display()
        );
    }
    Ok(())
}

/// Whether `output` is the history at `db` or a file kept beside it, by
/// path (links resolved) or, for a file that exists, by identity.
fn is_history_file(output: &Path, db: &Path) -> bool {
    let (Some(output), Some(history)) = (resolved(output), resolved(db)) else {
        return false;
    };
    let inbox = beside(&history, INBOX_INFIX);
    let by_path = output == history
        || COMPANION_SUFFIXES.iter().any(|s| output == beside(&history, s))
        || output
            .as_os_str()
            .as_encoded_bytes()
            .starts_with(inbox.as_os_str().as_encoded_bytes());
    by_path || history_files(&history).iter().any(|file| same_file(file, &output))
}

/// The files of the history at `history` that exist now.
fn history_files(history: &Path) -> Vec<PathBuf> {
    let mut files = vec![history.to_path_buf()];
    files.extend(COMPANION_SUFFIXES.iter().map(|suffix| beside(history, suffix)));
    if let (Some(folder), Some(name)) = (history.parent(), history.file_name()) {
        let mut prefix = name.to_os_string();
        prefix.push(INBOX_INFIX);
        if let Ok(entries) = std::fs::read_dir(folder) {
            files.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().as_encoded_bytes().starts_with(prefix.as_encoded_bytes()))
                    .map(|e| e.path()),
            );
        }
    }
    files
}

/// Whether `a` and `b` are one file (a hard link is another name for it).
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return (a.dev(), a.ino()) == (b.dev(), b.ino());
        }
    }
    a == b
}

/// Whether the file at `path` starts as an SQLite database or WAL does.
fn holds_a_database(path: &Path) -> bool {
    let mut start = [0u8; 16];
    let read = std::fs::File::open(path).and_then(|mut file| std::io::Read::read_exact(&mut file, &mut start));
    read.is_ok() && (start.as_slice() == DATABASE_HEADER || WAL_MAGIC.iter().any(|magic| start.starts_with(magic)))
}

/// Whether `path` is named as the files kept beside a database are.
fn named_as_a_companion(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    COMPANION_SUFFIXES.iter().any(|s| name.ends_with(s)) || name.contains(INBOX_INFIX)
}

/// `path` made absolute with links resolved, for a file that may not exist
/// yet: its folder resolved, its name kept.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(path) = path.canonicalize() {
        return Some(path);
    }
    let name = path.file_name()?;
    let folder = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(folder) => folder.canonicalize().ok()?,
        None => std::env::current_dir().ok()?,
    };
    Some(folder.join(name))
}
