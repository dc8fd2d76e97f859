//! Opening the history: creating and migrating it for a writer, reading
//! it as it is for a reader, and telling what is wrong with a file that
//! cannot be opened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::error::{classify, WriteCause};
use super::{error, functions, inbox, recorder, schema, Opened, Recovered, Store, StoreError, Unstored, BUSY_TIMEOUT};

impl Store {
    /// Opens (creating it, mode 0600, with its directories) and migrates the
    /// database at `path`, for a process that writes to it: what recorders
    /// that died left in their inboxes is moved in first, waiting for
    /// another process's lock as any write does.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        refuse_non_file(path)?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            crate::private_file::create_folders(dir)?;
        }
        create_private(path)?;
        let mut store = Self::connect(path, Opening::Create).map_err(|err| match err {
            // Turning on WAL is the first write, refused in a folder this
            // user may not write.
            StoreError::WriteRefused { .. } => StoreError::ReadOnly {
                path: path.to_path_buf(),
            },
            StoreError::Sqlite(err) if err.sqlite_error_code() == Some(ErrorCode::ReadOnly) => StoreError::ReadOnly {
                path: path.to_path_buf(),
            },
            // SQLite says only "unable to open database file" when it
            // cannot make its journal beside a file it may not write.
            StoreError::Sqlite(err)
                if err.sqlite_error_code() == Some(ErrorCode::CannotOpen)
                    && WriteCause::of(path) == WriteCause::ReadOnlyFileSystem =>
            {
                StoreError::ReadOnlyFileSystem {
                    path: path.to_path_buf(),
                }
            }
            other => other,
        })?;
        // SQLite opens a file this user may not write read-only, without a
        // word: every delivery after would be lost to a failed write.
        if store.conn.is_readonly(rusqlite::DatabaseName::Main)? {
            return Err(StoreError::ReadOnly {
                path: path.to_path_buf(),
            });
        }
        store.recovered_at_open = store.recover(BUSY_TIMEOUT);
        Ok(store)
    }

    /// Opens the database at `path` for a command on a history that must
    /// already exist (history, show, export, replay, prune, the TUI
    /// browser): a missing file is [`StoreError::Missing`], never created,
    /// so a mistyped `--db` does not pass for an empty history.
    ///
    /// What dead recorders left in their inboxes is moved in only if the
    /// lock is free at once: reading needs no lock in WAL mode, and a
    /// reader must not stall behind a live tunnel's writes. Skipping is
    /// safe, as the inboxes stay for the next open. Not moving them in on
    /// these opens at all would be simpler, but after a crash `history`
    /// would then miss the last deliveries until `http` ran again.
    ///
    /// Then it waits, a second at most, for live tunnels' writers to store
    /// the requests whose callers have heard back: those are on disk in
    /// the tunnels' inboxes, and a reader run right after must see them.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        require(path)?;
        refuse_non_file(path)?;
        let mut store = match Self::connect(path, Opening::Existing) {
            // A history this user may only read (a CI job's artifact, a
            // read-only mount): reading it needs no write, so it is opened
            // read-only, and what would write says so then.
            Err(StoreError::WriteRefused { .. }) => return Self::open_read_only(path),
            Err(StoreError::Sqlite(err)) if is_read_only(&err) => return Self::open_read_only(path),
            // A full disk has no room for the `-shm` file that sharing the
            // WAL needs: what the file holds can still be read.
            Err(StoreError::Sqlite(err)) if is_out_of_room(&err) => return Self::open_read_only(path),
            opened => opened?,
        };
        store.recovered_at_open = store.recover(Duration::ZERO);
        store.unstored_at_open = Unstored {
            held_up: store.catch_up_with_recorders(),
            orphaned: store.left_in_orphans(),
        };
        Ok(store)
    }

    /// How many requests tunnels had forwarded that [`Store::open_existing`]
    /// found outside the history once it had waited for them: in running
    /// tunnels' inboxes, counted only for a writer that stored none
    /// meanwhile, held up (another process holding the write lock, a full
    /// disk); and in dead tunnels' inboxes it could not move in, the lock
    /// being another's. A listing read now leaves them out.
    pub fn unstored_at_open(&self) -> Unstored {
        self.unstored_at_open
    }

    /// Opens the history a tunnel's writer has made at `path`, for a reader
    /// in the same process (the live TUI): never creating one, refusing a
    /// file the writer has not finished making, and not waiting on the
    /// writer, which reports what it stores to that reader anyway.
    pub fn open_made(path: &Path) -> Result<Store, StoreError> {
        require(path)?;
        refuse_non_file(path)?;
        Self::connect(path, Opening::Existing)
    }

    /// Opens a history read-only: with its WAL when SQLite can share it,
    /// and as a file nobody changes when the folder allows no `-shm` beside it.
    pub(super) fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let shared = Connection::open_with_flags(path, flags)
            .and_then(|conn| conn.query_row("PRAGMA user_version", [], |_| Ok(())).map(|()| conn));
        let conn = match shared {
            Ok(conn) => conn,
            Err(err) if is_read_only(&err) || is_out_of_room(&err) => {
                let wal = beside(path, "-wal");
                if std::fs::metadata(&wal).is_ok_and(|wal| wal.len() > 0) {
                    tracing::warn!(
                        "{} is left out: without a -shm file beside it, which its folder cannot take, SQLite cannot \
                         read it, so the deliveries it holds are not shown",
                        wal.display()
                    );
                }
                Connection::open_with_flags(immutable_uri(path), flags).map_err(|e| classify(e, path))?
            }
            Err(err) => return Err(classify(err, path)),
        };
        let left = inbox::inbox_files(path);
        if let Some((name, _)) = left.first() {
            tracing::warn!(
                "{} inbox file(s) beside the history ({name}…) hold deliveries of a tunnel that stopped; the history is \
                 opened read-only, so they are not moved in and not shown: run a portpreview command on it once with \
                 write access",
                left.len()
            );
        }
        Self::setup(conn, path.to_path_buf(), Opening::ReadOnly)
    }

    /// A private database in memory: for tests, and for a live TUI with
    /// no history to show.
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        Self::setup(conn, PathBuf::from(":memory:"), Opening::Create)
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens and migrates the database file at `path`.
    fn connect(path: &Path, opening: Opening) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|e| classify(e, path))?;
        Self::setup(conn, path.to_path_buf(), opening)
    }

    pub(super) fn setup(mut conn: Connection, path: PathBuf, opening: Opening) -> Result<Store, StoreError> {
        // Set first: a tunnel started beside this one may be making the
        // history, and its lock must be waited for, even to read the kind.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| classify(e, &path))?;
        // Told apart before anything is written: even turning on WAL would
        // change another program's file.
        match schema::contents(&conn).map_err(|e| classify(e, &path))? {
            schema::Contents::History => {}
            schema::Contents::Foreign => return Err(StoreError::Foreign { path }),
            schema::Contents::Empty if opening != Opening::Create => return Err(StoreError::Empty { path }),
            // An empty file given as the history becomes one: owner-only,
            // as a file PortPreview creates is.
            schema::Contents::Empty if path.is_file() => crate::private_file::restrict(&path)?,
            schema::Contents::Empty => {}
        }
        let configure = |conn: &Connection| -> rusqlite::Result<()> {
            conn.set_prepared_statement_cache_capacity(64);
            if opening == Opening::ReadOnly {
                return Ok(());
            }
            turn_on_wal(conn)?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", true)?;
            // Every write, not only prune's: a page that splits as the
            // history grows leaves copies of the rows it moved in its free
            // space, and a prune later finds them in no row to overwrite.
            conn.pragma_update(None, "secure_delete", true)?;
            Ok(())
        };
        configure(&conn).map_err(|e| classify(e, &path))?;
        functions::register(&conn).map_err(|e| classify(e, &path))?;
        if opening == Opening::ReadOnly {
            let found: i64 = conn
                .query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(|e| classify(e, &path))?;
            if found < schema::SCHEMA_VERSION {
                return Err(StoreError::NeedsUpgrade {
                    path,
                    found,
                    supported: schema::SCHEMA_VERSION,
                });
            }
        }
        if opening != Opening::ReadOnly {
            tell_of_long_upgrade(&conn, &path);
        }
        let migrated = schema::migrate(&mut conn).map_err(|e| match classify(e, &path) {
            StoreError::Sqlite(err) => StoreError::NotUpgraded {
                path: path.clone(),
                detail: error::said(&err),
            },
            other => other,
        })?;
        match migrated {
            Ok(()) => Ok(Store {
                opened: Opened::at(&path),
                conn,
                path,
                unstored_at_open: Unstored::default(),
                recovered_at_open: Recovered::default(),
                patience: std::cell::Cell::new(BUSY_TIMEOUT),
            }),
            Err(newer) => Err(StoreError::TooNew {
                path,
                found: newer.found,
                supported: schema::SCHEMA_VERSION,
            }),
        }
    }

    /// Moves in what recorders that died left in their inboxes, waiting up
    /// to `patience` for another process's lock. Failing to is no reason
    /// not to open: the inboxes stay for a later try.
    fn recover(&self, patience: Duration) -> Recovered {
        match self.move_in_orphans(patience) {
            Ok(recovered) => {
                if recovered.moved > 0 {
                    tracing::info!(
                        moved = recovered.moved,
                        "moved deliveries left in an inbox into the history"
                    );
                }
                return recovered;
            }
            // Another process is writing; only a reader gives up this fast.
            Err(StoreError::Busy) if patience.is_zero() => {
                tracing::debug!("the history is busy; deliveries left in an inbox wait for a later open");
            }
            Err(err) => tracing::warn!(%err, "cannot move deliveries left in an inbox into the history yet"),
        }
        Recovered::default()
    }

    /// What opening the history moved in from the inboxes of tunnels that
    /// died: a command that lists them says how many lost their answers.
    pub fn recovered_at_open(&self) -> Recovered {
        self.recovered_at_open
    }

    /// Moves in what recorders that died left in their inboxes, waiting up
    /// to `patience` for another process's lock.
    fn move_in_orphans(&self, patience: Duration) -> Result<Recovered, StoreError> {
        self.waiting_up_to(patience, recorder::recover)
    }

    /// Runs `work` waiting up to `patience` for another process's lock,
    /// then sets the wait back to [`BUSY_TIMEOUT`], as every other
    /// statement has it.
    pub(super) fn waiting_up_to<T>(
        &self,
        patience: Duration,
        work: impl FnOnce(&Self) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.conn.busy_timeout(patience).map_err(|e| self.classify(e))?;
        self.patience.set(patience);
        let result = work(self);
        self.patience.set(BUSY_TIMEOUT);
        self.conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| self.classify(e))?;
        result
    }

    /// For a reader that stays open, as the TUI does: moves in what a
    /// tunnel killed since the history was opened left in its inbox, so
    /// its requests in flight show as cut off rather than waiting for
    /// good. True when there was such an inbox, whose requests may have
    /// changed the history; one that cannot be moved in yet (another
    /// process holds the lock) stays for a later call.
    pub fn take_in_orphans(&self) -> bool {
        if inbox::orphans(&self.path).is_empty() {
            return false;
        }
        if let Err(err) = self.move_in_orphans(Duration::ZERO) {
            tracing::debug!(%err, "deliveries left in an inbox wait for a later look");
        }
        true
    }

    pub(super) fn classify(&self, err: rusqlite::Error) -> StoreError {
        classify(err, &self.path)
    }
}

/// A history file at least this large takes seconds to upgrade when a
/// migration copies its tables (schema version 12 does).
const LONG_UPGRADE_BYTES: u64 = 128 * 1024 * 1024;

/// Says so before an upgrade that will take a while, so that a command
/// waiting on it is not taken for one that hangs.
fn tell_of_long_upgrade(conn: &Connection, path: &Path) {
    let older = conn
        .query_row("PRAGMA user_version", [], |row| row.get::<_, i64>(0))
        .is_ok_and(|found| found < schema::SCHEMA_VERSION);
    if !older {
        return;
    }
    let size = std::fs::metadata(path).map_or(0, |meta| meta.len());
    if size >= LONG_UPGRADE_BYTES {
        tracing::warn!(
            "upgrading the history at {} ({} MiB) to this version's layout: this happens once, and takes a while for \
             a history this large",
            path.display(),
            size / (1024 * 1024)
        );
    }
}

/// Whether opening may start a history in an empty file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    /// A process that writes: an empty file becomes a history.
    Create,
    /// A command on a history that must already exist.
    Existing,
    /// A history this user may not write.
    ReadOnly,
}

/// Whether SQLite refused to write because the file or its folder is read-only.
fn is_read_only(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
    )
}

/// True when SQLite could not write for want of room; it says "disk I/O
/// error" of a file it could not grow as of a failing disk.
fn is_out_of_room(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure)
    )
}

/// The file named `suffix` after the history at `history`: SQLite's
/// `-wal` and `-shm`, the recorder's inboxes.
pub(crate) fn beside(history: &Path, suffix: &str) -> PathBuf {
    let mut name = history.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// An SQLite URI opening `path` as a file nobody changes while it is open.
pub(super) fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for byte in path.as_os_str().as_encoded_bytes() {
        match byte {
            b'%' | b'?' | b'#' | 0x80.. => uri.push_str(&format!("%{byte:02X}")),
            _ => uri.push(char::from(*byte)),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Fails with [`StoreError::Missing`] unless something exists at `path`,
/// or [`StoreError::Unreachable`] when a folder on the way keeps this user
/// from knowing.
pub fn require(path: &Path) -> Result<(), StoreError> {
    let path_buf = || path.to_path_buf();
    match std::fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(StoreError::Unreachable { path: path_buf() })
        }
        Err(_) => Err(StoreError::Missing { path: path_buf() }),
    }
}

/// Fails unless `path` names a regular file (a link to one will do) this
/// user may read, or nothing yet. SQLite would say only that it is
/// "unable to open database file".
///
/// It asks with `access`, never by opening the file: closing any
/// descriptor of a file drops every POSIX lock this process holds on it,
/// SQLite's own included. The live TUI opens the history its own tunnel
/// writes; an open and close here let the next command that closed the
/// history beside it take itself for the last user and delete the WAL
/// the tunnel was writing.
fn refuse_non_file(path: &Path) -> Result<(), StoreError> {
    let path_buf = || path.to_path_buf();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(StoreError::IsDirectory { path: path_buf() }),
        Ok(meta) if !meta.is_file() => Err(StoreError::NotAFile { path: path_buf() }),
        Ok(_) if !readable(path) => Err(StoreError::Unreadable { path: path_buf() }),
        Ok(_) | Err(_) => Ok(()),
    }
}

/// Whether this user may read the file at `path`, asked without opening it.
#[cfg(target_os = "linux")]
fn readable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::READ_OK) != Err(rustix::io::Errno::ACCESS)
}

/// Whether this user may read the file at `path`. Opened and closed here,
/// where no access(2) binding is at hand: a process holding the history
/// open loses its locks on it (see [`refuse_non_file`]).
#[cfg(not(target_os = "linux"))]
fn readable(path: &Path) -> bool {
    !matches!(std::fs::File::open(path), Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Creates the file with owner-only permissions before SQLite opens it, so
/// payloads and secrets are never readable by others, not even for a moment.
fn create_private(path: &Path) -> std::io::Result<()> {
    match crate::private_file::options().write(true).create_new(true).open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// Puts the history in WAL mode. Switching takes the whole file: while
/// another tunnel started beside this one reads it or makes it, SQLite
/// answers busy at once, without waiting as `busy_timeout` asks, so this
/// waits itself. A history already in WAL mode is not switched again.
fn turn_on_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        // journal_mode answers with a row, so it cannot go through execute.
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(err)
                if err.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => return Err(err),
        }
    }
}
