//! Why the store could not do what was asked, sorted from SQLite's codes
//! into what callers act on, each said in one line.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

/// Why the store could not do what was asked. Each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process held the database lock for longer than [`BUSY_TIMEOUT`](super::BUSY_TIMEOUT).
    #[error("the history database is locked by another process")]
    Busy,
    /// The file exists but is not an SQLite database.
    #[error("{} is not a PortPreview history database (not SQLite, or its header is damaged)", path.display())]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The file is SQLite but damaged.
    #[error("history database {} is corrupt: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What SQLite or the decoder reported.
        detail: String,
    },
    /// The database was written by a newer PortPreview; it is never downgraded.
    #[error(
        "history database {} was written by a newer PortPreview (schema {found}, this build knows {supported}): upgrade portpreview or use another --db",
        path.display()
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest schema this build knows.
        supported: i64,
    },
    /// A history this user may only read was written by an earlier
    /// PortPreview: reading it needs its schema brought up to date first.
    #[error(
        "history database {} was written by an earlier PortPreview (schema {found}, this build reads {supported}) and must be upgraded, which needs write access: run any portpreview command on it once as a user who may write it",
        path.display()
    )]
    NeedsUpgrade {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The schema this build reads.
        supported: i64,
    },
    /// A reading command was pointed at a file that does not exist; only
    /// `portpreview http` creates the history.
    #[error("no history database at {} (start one with portpreview http)", path.display())]
    Missing {
        /// The path that was given.
        path: PathBuf,
    },
    /// The file is another program's SQLite database: it is never written to.
    #[error("{} is another program's SQLite database, not a PortPreview history: pass --db another file", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// A reading command was pointed at an empty file: only `portpreview
    /// http` starts a history in it.
    #[error("{} holds no history yet (start one with portpreview http)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A process that records was given a history this user may only read.
    #[error(
        "history database {} (or its folder, where SQLite keeps its journal) is read-only for this user: pass --db \
         a file you may write, or --no-record",
        path.display()
    )]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// A process that records was given a history on a file system
    /// mounted read-only.
    #[error(
        "history database {} is on a read-only file system: pass --db a file on one you may write, or --no-record",
        path.display()
    )]
    ReadOnlyFileSystem {
        /// The file.
        path: PathBuf,
    },
    /// A command that changes the history (prune, a replay's record) was
    /// run on one this process may only read.
    #[error("{}", write_refused(path, *cause))]
    WriteRefused {
        /// The file.
        path: PathBuf,
        /// Why it may only be read.
        cause: WriteCause,
    },
    /// This user may not read the file.
    #[error("history database {} cannot be read by this user: pass --db a history you may read", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
    },
    /// A folder on the way to the file is closed to this user: whether
    /// anything is there cannot be known.
    #[error("history database {} cannot be reached by this user, a folder on its path is closed to it: pass --db a history you may read", path.display())]
    Unreachable {
        /// The file.
        path: PathBuf,
    },
    /// The path names a directory.
    #[error("{} is a directory, not a history database: pass --db a file path", path.display())]
    IsDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The path names a device, a pipe or a socket. SQLite would write its
    /// journal beside it (`/dev/null-journal`).
    #[error("{} is not a regular file, so it cannot hold a history: pass --db a file path", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A history from an earlier schema whose upgrade failed: a file
    /// changed by hand, or by another program. Nothing of it is changed.
    #[error(
        "history database {} could not be brought up to this PortPreview's schema ({detail}); it is left as it was: pass --db another file",
        path.display()
    )]
    NotUpgraded {
        /// The file.
        path: PathBuf,
        /// What SQLite said, without the statement it said it of.
        detail: String,
    },
    /// Any other SQLite failure (disk full, I/O error…). The SQLite error is
    /// kept out of `source()`: the message already includes it.
    #[error("history database error: {}", said(.0))]
    Sqlite(rusqlite::Error),
    /// Creating the database's directory or file failed (kept out of
    /// `source()` too).
    #[error("cannot create the history database: {0}")]
    Io(std::io::Error),
    /// Reading or setting aside a dead recorder's inbox failed (a
    /// read-only folder, a damaged disk); it stays for a later try.
    #[error("cannot {doing} history inbox {name}: {source}")]
    Inbox {
        /// What was done to it: read, set aside.
        doing: &'static str,
        /// The inbox's file name.
        name: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file the history was opened from was deleted or replaced, and
    /// what is at its path now cannot be opened as a history.
    #[error("{} was deleted or replaced, and cannot be opened again: {source}", path.display())]
    Replaced {
        /// The history's path.
        path: PathBuf,
        /// Why opening what is there failed.
        source: Box<StoreError>,
    },
}

/// Why a history may only be read: what the user must change to write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCause {
    /// This user may not write the file or its folder.
    Permission,
    /// Its file system is mounted read-only.
    ReadOnlyFileSystem,
    /// Its disk has no room left (the history was opened read-only for it).
    DiskFull,
}

impl WriteCause {
    /// Why the history at `path` cannot be written, judged from its folder.
    #[cfg(target_os = "linux")]
    pub(super) fn of(path: &Path) -> WriteCause {
        let folder = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if rustix::fs::access(folder, rustix::fs::Access::WRITE_OK) == Err(rustix::io::Errno::ROFS) {
            return WriteCause::ReadOnlyFileSystem;
        }
        match rustix::fs::statvfs(folder) {
            Ok(fs) if fs.f_bavail == 0 => WriteCause::DiskFull,
            _ => WriteCause::Permission,
        }
    }

    /// Told apart only on Linux, where access(2) and statvfs(2) are at hand.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn of(_path: &Path) -> WriteCause {
        WriteCause::Permission
    }
}

/// What [`StoreError::WriteRefused`] says, by its cause.
fn write_refused(path: &Path, cause: WriteCause) -> String {
    let file = path.display();
    match cause {
        WriteCause::Permission => format!(
            "history database {file} (or its folder, where SQLite keeps its journal) is read-only for this user, and \
             this would change it: run it as a user who may write both, or on a copy"
        ),
        WriteCause::ReadOnlyFileSystem => format!(
            "history database {file} is on a read-only file system, and this would change it: run it on a copy \
             elsewhere"
        ),
        WriteCause::DiskFull => format!(
            "the disk holding history database {file} is full, and this would change it: free some space on it first"
        ),
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        Self::Sqlite(err)
    }
}

impl From<std::io::Error> for StoreError {
    fn from(err: std::io::Error) -> Self {
        Self::Io(err)
    }
}

impl StoreError {
    /// True when the statement was stopped by the check given to
    /// [`Store::stop_when`](super::Store::stop_when): nothing is wrong, the answer was no longer wanted.
    pub fn is_stopped(&self) -> bool {
        matches!(self, StoreError::Sqlite(err) if err.sqlite_error_code() == Some(ErrorCode::OperationInterrupted))
    }

    /// True when another process holds the history or the disk is full:
    /// nothing is wrong with the file, and it may pass.
    pub fn is_busy_or_full(&self) -> bool {
        matches!(self, StoreError::Busy) || self.is_full()
    }

    /// True when the disk holding the history is full (or failed a write,
    /// as a full disk makes some do).
    pub fn is_full(&self) -> bool {
        matches!(self, StoreError::Sqlite(err) if matches!(
            err.sqlite_error_code(),
            Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure)
        ))
    }

    /// Turns the error into one line for a command's stderr, naming `db` once.
    pub fn for_command(self, db: &Path) -> anyhow::Error {
        let file = db.display();
        match self {
            // Held past the seconds a command waits: by a process stopped
            // while it wrote, most often, which holds it until it goes on.
            Self::Busy => anyhow::anyhow!(
                "history database {file} is locked by another process (one stopped as it wrote, by ctrl-z, \
                 SIGSTOP or a debugger, or an sqlite3 shell in a transaction)"
            ),
            // SQLite says "disk I/O error" of a disk with no room left, as
            // of a failing one: the likelier cause is named.
            Self::Sqlite(err) if err.sqlite_error_code() == Some(ErrorCode::SystemIoFailure) => {
                anyhow::anyhow!("history database {file}: {err} (is the disk full?)")
            }
            // `prune` among them: deleting takes room too, for the journal.
            Self::Sqlite(err) if err.sqlite_error_code() == Some(ErrorCode::DiskFull) => anyhow::anyhow!(
                "history database {file}: the disk holding it is full, and even deleting needs room for SQLite's \
                 journal: free some space on it first"
            ),
            Self::Sqlite(err) => anyhow::anyhow!("history database {file}: {}", said(&err)),
            Self::Io(err) => anyhow::anyhow!("cannot create history database {file}: {err}"),
            named => anyhow::Error::new(named),
        }
    }
}

/// What SQLite said: of a statement it could not run, its reason alone.
/// rusqlite adds the statement, whose lines (a schema's `CREATE`s) would
/// fill an error line with SQL the user never wrote.
pub(super) fn said(err: &rusqlite::Error) -> String {
    match err {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

fn extended_code(err: &rusqlite::Error) -> Option<std::ffi::c_int> {
    match err {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code),
        _ => None,
    }
}

/// Sorts an SQLite failure into the variants callers act on.
pub(super) fn classify(err: rusqlite::Error, path: &Path) -> StoreError {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy,
        // Plain SQLITE_READONLY is this user's lack of the right to write;
        // its extended codes (the file moved, a journal to roll back) are
        // other troubles, which the right would not mend.
        Some(ErrorCode::ReadOnly) if extended_code(&err) == Some(rusqlite::ffi::SQLITE_READONLY) => {
            StoreError::WriteRefused {
                path: path.to_path_buf(),
                cause: WriteCause::of(path),
            }
        }
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase {
            path: path.to_path_buf(),
        },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: err.to_string(),
        },
        _ => StoreError::Sqlite(err),
    }
}
