//! The history store: every delivery in SQLite.
//!
//! One [`Store`] wraps one connection. The tunnel writes through a
//! [`Recorder`], whose own thread owns a `Store`; commands and the TUI open
//! their own `Store` to read. WAL lets readers and the writer run together.

mod catch_up;
mod error;
mod event_types;
mod filter;
mod functions;
mod header_blob;
mod inbox;
pub mod model;
mod open;
mod read;
pub mod recorder;
mod rekey;
pub mod schema;
mod status_word;
mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

pub use error::StoreError;
pub use filter::status_words;
pub(crate) use inbox::INFIX as INBOX_INFIX;
pub use model::{size_past_cut, size_unknown_past, Delivery, NewDelivery, Outcome, Pruned, ReplayRun, Summary};
pub(crate) use open::beside;
pub use open::require;
pub use read::{EventState, Pick};
pub use recorder::{RecordError, Recorded, Recorder, RecorderHandle, Recovered, Ticket, WriterNews, MAX_STORED_BODY};
pub use status_word::StatusWord;

/// How long a statement waits for another process's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a write waiting for another process's lock tries again.
/// SQLite's own wait grows to 100 ms between tries, and a prune, which
/// takes the lock again a few milliseconds after each batch, would be let
/// in first every time while a tunnel's writer slept.
const LOCK_POLL: Duration = Duration::from_millis(1);

/// The provider filter that lists deliveries no provider was recognised
/// in: the word `show` prints for them.
pub const UNKNOWN_PROVIDER: &str = "unknown";

/// Which deliveries `list` and `count` return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Most rows to return; `None` returns all.
    pub limit: Option<usize>,
    /// Only rows with `id < before_id` (keyset paging: pass the last id seen).
    pub before_id: Option<i64>,
    /// Only rows with `id > after_id`: what is newer than the rows held.
    pub after_id: Option<i64>,
    /// Only these providers, [`UNKNOWN_PROVIDER`] among them for the
    /// deliveries no provider was recognised in; all when empty.
    pub providers: Vec<String>,
    /// Only this event key.
    pub event_key: Option<String>,
    /// Only deliveries whose event type this glob names (`invoice.*`:
    /// SQLite's GLOB, `*` any text, `?` one character, case as written).
    pub event_type: Option<String>,
    /// Only deliveries answered as one of these words says; all when empty.
    pub status: Vec<StatusWord>,
    /// Only deliveries whose path this glob names, as `--path` reads it
    /// (`/webhooks/*`).
    pub path: Option<String>,
    /// Only deliveries received at this time (milliseconds since the epoch)
    /// or later.
    pub received_since_ms: Option<i64>,
    /// Words that must all match: `404` a status, `5xx` a class of status,
    /// `err` a delivery with no answer, anything else a case-insensitive
    /// substring of the path, method, provider, event type, event key, error,
    /// a header value or either body's text.
    pub search: Option<String>,
    /// Also list the deliveries sent by `replay`.
    pub include_replays: bool,
}

impl ListQuery {
    /// The row of delivery `id` alone, replay or not.
    pub fn one(id: i64) -> ListQuery {
        ListQuery {
            before_id: Some(id + 1),
            after_id: Some(id - 1),
            limit: Some(1),
            include_replays: true,
            ..ListQuery::default()
        }
    }
}

/// The history database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The files opened at `path` and beside it, to tell when the path
    /// comes to name another.
    opened: Opened,
    /// Requests tunnels had forwarded and the history did not hold when
    /// this store was opened for reading (see [`Store::unstored_at_open`]).
    unstored_at_open: Unstored,
    /// What opening the history moved in from the inboxes of tunnels that
    /// died (see [`Store::recovered_at_open`]).
    recovered_at_open: Recovered,
    /// How long a write waits for another process's lock: [`BUSY_TIMEOUT`],
    /// but for the work [`Store::waiting_up_to`] runs.
    patience: std::cell::Cell<Duration>,
}

/// Requests whose callers heard back that a reader opening the history
/// found still outside it, in tunnels' inboxes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unstored {
    /// In the inboxes of running tunnels whose writers are held up
    /// (another process holding the write lock, a full disk).
    pub held_up: u64,
    /// In the inboxes of tunnels that died, which the reader could not
    /// move in: another process held the write lock.
    pub orphaned: u64,
}

/// The history file a store opened, with its WAL and shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opened {
    history: Option<FileId>,
    wal: Option<FileId>,
    shm: Option<FileId>,
}

impl Opened {
    /// The files at `path` and beside it now.
    fn at(path: &Path) -> Opened {
        Opened {
            history: FileId::at(path),
            wal: FileId::at(&beside(path, "-wal")),
            shm: FileId::at(&beside(path, "-shm")),
        }
    }
}

/// A file's identity on its device, whatever name it goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The file at `path` now; `None` when there is none.
    pub(crate) fn at(path: &Path) -> Option<FileId> {
        Self::from_meta(&std::fs::metadata(path).ok()?)
    }

    /// The file `file` is open on, whether or not a path still names it.
    pub(crate) fn of(file: &std::fs::File) -> Option<FileId> {
        Self::from_meta(&file.metadata().ok()?)
    }

    #[cfg(unix)]
    fn from_meta(meta: &std::fs::Metadata) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// No identity to compare elsewhere: a history is never seen replaced.
    #[cfg(not(unix))]
    fn from_meta(_meta: &std::fs::Metadata) -> Option<FileId> {
        None
    }
}

impl Drop for Store {
    /// A history moved or deleted under a store that writes it lets go of
    /// its WAL before closing, as reopening it does: a tunnel stopped
    /// before its next write would otherwise leave it beside the path.
    fn drop(&mut self) {
        let writes = !self.conn.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(true);
        if writes && self.replaced() {
            if let Err(err) = self.let_go_of_sidecars() {
                tracing::warn!(%err, "the moved history's WAL stays beside its old path");
            }
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(crate) mod tests;
