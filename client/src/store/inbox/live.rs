//! What the recorders still at work have appended, for a reader that must
//! show every delivery whose caller has heard back.
//!
//! A caller hears back once its request is in the inbox; the writer moves
//! it into SQLite a few milliseconds later. `curl … && portpreview replay
//! --latest` falls in between, and would replay the delivery before.

use std::fs::{File, TryLockError};
use std::io::{BufReader, Seek};
use std::path::Path;

use super::inbox_files;
use super::orphan::fill;
use super::record::{request_seq, HEAD, MAX_RECORD};

/// Readings of an inbox begun again when its recorder punched out records
/// under the reader, before it is left out.
const TRIES: usize = 3;

/// The newest request a live recorder has appended to its inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The inbox's file name, which keys its progress in the database.
    pub name: String,
    /// Sequence number of its newest request.
    pub newest: u64,
}

/// For each inbox of the database at `db` whose recorder is alive, the
/// newest request in it. Inboxes that cannot be read are left out: a
/// reader then shows what SQLite holds, as it would without this.
pub fn appended_by_live_recorders(db: &Path) -> Vec<Appended> {
    appended(db, Recorder::Alive)
}

/// For each inbox of the database at `db` whose recorder died, the newest
/// request in it: what the next process to write moves in, and a reader
/// that cannot (another process holds the lock) leaves out.
pub fn left_by_dead_recorders(db: &Path) -> Vec<Appended> {
    appended(db, Recorder::Dead)
}

/// Whose inboxes [`appended`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recorder {
    Alive,
    Dead,
}

fn appended(db: &Path, whose: Recorder) -> Vec<Appended> {
    inbox_files(db)
        .into_iter()
        .filter_map(|(name, path)| {
            let file = File::open(&path).ok()?;
            // A recorder holds its inbox's lock for as long as it lives;
            // a free one is an orphan, moved in by whoever writes next.
            let alive = match file.try_lock_shared() {
                Err(TryLockError::WouldBlock) => true,
                Ok(()) => false,
                Err(TryLockError::Error(_)) => return None,
            };
            if alive != (whose == Recorder::Alive) {
                return None;
            }
            let newest = (0..TRIES).find_map(|_| match newest_request(&file) {
                Ok(Reading::Newest(newest)) => Some(newest),
                Ok(Reading::Punched) => None,
                Err(_) => Some(None),
            })??;
            Some(Appended { name, newest })
        })
        .collect()
}

/// What one reading of an inbox found.
enum Reading {
    /// The sequence number of its last request, if any.
    Newest(Option<u64>),
    /// A zero length, which no record has: its recorder punched out records
    /// from under the reader, and what it read after them may be anything.
    Punched,
}

/// Reads the inbox from the top, each record's head only. A record still
/// being written ends the reading.
fn newest_request(file: &File) -> std::io::Result<Reading> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    reader.rewind()?;
    let mut newest = None;
    let mut head = [0u8; HEAD];
    loop {
        let mut len = [0u8; 4];
        if !fill(&mut reader, &mut len)? {
            return Ok(Reading::Newest(newest));
        }
        let len = u32::from_le_bytes(len) as usize;
        if len == 0 {
            return Ok(Reading::Punched);
        }
        let head_len = len.min(HEAD);
        if len > MAX_RECORD || !fill(&mut reader, &mut head[..head_len])? {
            return Ok(Reading::Newest(newest));
        }
        if let Some(seq) = request_seq(&head[..head_len]) {
            newest = Some(seq);
        }
        let rest = i64::try_from(len - head_len).map_err(std::io::Error::other)?;
        reader.seek_relative(rest)?;
    }
}
