//! The inbox: each request appended to a file beside the database before
//! its caller hears back.
//!
//! A commit to SQLite writes a page for the table and one for every index
//! the row touches; appending a record writes one buffer. So the tunnel
//! appends each request here, answers its caller, and the history writer
//! moves requests into SQLite in batches. Appends are staged in memory and
//! written by [`Inbox::flush`], which the tunnel calls before any answer
//! leaves the process: under load one write carries every request of a
//! burst, and no caller hears back before its request is in the file.
//!
//! Each recorder owns its inbox under an exclusive file lock; an inbox whose
//! lock is free belongs to a recorder that died, and whichever process opens
//! the history next moves what is left of it into the database.
//!
//! A large request body goes to the file ahead of its request, in parts
//! written one at a time, so that the tunnel serves everything else in
//! between: one write of a 25 MiB body held it for 60 ms.
//!
//! The records' layout is in [`record`]; dropping stored requests from a
//! file that never empties, in [`punch`]; reading back a dead recorder's
//! inbox, in [`orphan`].

mod live;
mod orphan;
mod punch;
mod record;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{IoSlice, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::model::{NewDelivery, Outcome};
pub use live::{appended_by_live_recorders, left_by_dead_recorders, Appended};
pub use orphan::{orphans, Orphan};
use punch::{punch_hole, Punch};
use record::{encode_head, encode_record, EntryRef, PartLen};

/// An inbox this large drops the requests SQLite already holds: all of it
/// once everything is there, and otherwise once they add up to this much
/// (see [`Inbox::compact`]).
const RESTART_AT: u64 = 4 * 1024 * 1024;

/// Past this size an inbox whose stored requests are punched out copies
/// the rest into a fresh file instead, so that its offsets start over:
/// under every file system's limit on a file's size, and rare enough that
/// the copy costs nothing much (once per 8 GiB recorded without a pause).
const SPARSE_LIMIT: u64 = 8 * 1024 * 1024 * 1024;

/// Staged records are written at once when they reach this size, so the
/// buffer kept between bursts stays small.
const STAGE_LIMIT: usize = 256 * 1024;

/// A request body at least this long goes to the file ahead of its request,
/// in parts of this size, each written on its own (see [`Inbox::begin_body`]).
pub const BODY_PART: usize = 256 * 1024;

/// What keeps a stretch of the file from being dropped by a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// A request not yet known to be in SQLite, by sequence number.
    Request(u64),
    /// The parts of a large body whose request is still to come.
    Body(u64),
}

/// What a compaction did.
#[derive(Debug)]
pub enum Compacted {
    /// Requests SQLite holds were punched out of the file.
    Punched,
    /// A fresh file replaced this one, to be closed where that may take long.
    Replaced(File),
}

/// A recorder's own inbox, locked for as long as it lives.
#[derive(Debug)]
pub struct Inbox {
    file: File,
    path: PathBuf,
    name: String,
    key_fields: Vec<String>,
    len: u64,
    next_seq: u64,
    closed: bool,
    /// Records appended but not yet written; reused, as appending is on the
    /// forwarding path.
    staged: Vec<u8>,
    /// Each request not yet known to be in SQLite, and each large body
    /// whose request is still to come, with the file offset where its
    /// records start (staged ones where they will be written), in file
    /// order: what a compaction keeps.
    pending: VecDeque<(Holder, u64)>,
    /// Number of the next large body begun.
    next_body: u64,
    /// Why records of requests already handed on were dropped by a failed
    /// write: the next [`Inbox::flush`] reports it, so that their callers
    /// do not hear back as if they were in the file.
    unsaved: Option<std::io::Error>,
    /// Requests handed on whose records a failed write dropped (a full
    /// disk): in neither the file nor, until the writer stores them,
    /// SQLite. Dropped once SQLite holds them.
    unwritten: BTreeSet<u64>,
    /// The requests whose records are staged, not yet written.
    staged_requests: Vec<u64>,
    /// The last compaction failed: the next failure is no news.
    cutting_fails: bool,
    /// Length of the opening record, all a file holds once started over.
    opening_len: u64,
    /// Where the next filler starts: before it, but for the opening, the
    /// file holds only fillers over punched out requests.
    hole_end: u64,
    /// Where the records of requests SQLite holds start, past `hole_end`,
    /// in file order: where fillers may end.
    applied_starts: VecDeque<u64>,
    /// How stored requests are punched out; `None` once that failed, and
    /// a compaction copies what is still missing into a fresh file instead.
    punch: Option<Punch>,
}

impl Inbox {
    /// Creates a fresh inbox for the database at `db`.
    pub fn create(db: &Path, key_fields: &[String]) -> std::io::Result<Inbox> {
        let name = format!("{}{:08x}", prefix(db), std::process::id() ^ rand::random::<u32>());
        let path = db.with_file_name(&name);
        // Made and locked under a name no one looks for, then renamed: an
        // inbox is never seen unlocked, so never taken for an orphan.
        let fresh = db.with_file_name(format!(".{name}.new"));
        let file = create_locked(&fresh)?;
        std::fs::rename(&fresh, &path)?;
        let mut inbox = Inbox {
            file,
            path,
            name,
            key_fields: key_fields.to_vec(),
            len: 0,
            next_seq: 1,
            closed: false,
            staged: Vec::new(),
            pending: VecDeque::new(),
            next_body: 1,
            unsaved: None,
            unwritten: BTreeSet::new(),
            staged_requests: Vec::new(),
            cutting_fails: false,
            opening_len: 0,
            hole_end: 0,
            applied_starts: VecDeque::new(),
            punch: Some(punch_hole),
        };
        inbox.open_entry()?;
        inbox.flush()?;
        inbox.opening_len = inbox.len;
        inbox.hole_end = inbox.len;
        Ok(inbox)
    }

    /// True once discarded: nothing more may be appended.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The inbox's file name, which keys its progress in the database.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Appends `delivery` and returns its sequence number. It is in the
    /// file once [`Inbox::flush`] has run. A body of [`BODY_PART`] bytes or
    /// more is written in parts, all at once; the recorder writes such
    /// bodies itself, a part at a time, and appends the request with
    /// [`Inbox::append_parted`].
    pub fn append(&mut self, delivery: &mut NewDelivery) -> std::io::Result<u64> {
        if delivery.request_body.len() < BODY_PART {
            return self.append_request(None, &EntryRef::Request(delivery));
        }
        let body = self.begin_body()?;
        let parts = delivery
            .request_body
            .chunks(BODY_PART)
            .try_for_each(|part| self.append_body_part(body, part));
        match parts {
            Ok(()) => self.append_parted(body, delivery),
            Err(err) => {
                self.abandon_body(body);
                Err(err)
            }
        }
    }

    /// Begins a large body and returns its number: write it with
    /// [`Inbox::append_body_part`], then append its request with
    /// [`Inbox::append_parted`], or [`Inbox::abandon_body`] it. Until
    /// then its parts are kept through compactions.
    pub fn begin_body(&mut self) -> std::io::Result<u64> {
        self.check_open()?;
        let body = self.next_body;
        self.next_body += 1;
        self.pending
            .push_back((Holder::Body(body), self.len + self.staged.len() as u64));
        Ok(body)
    }

    /// Writes the next part of large body `body`, with whatever is staged,
    /// in one write. The part goes to the file from where it lies: staging
    /// it would copy every large body once more on the tunnel's thread.
    pub fn append_body_part(&mut self, body: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.check_open()?;
        let mut head = Vec::with_capacity(32);
        let len = PartLen(bytes.len() as u64);
        encode_head(&mut head, 0, &EntryRef::BodyPart { body, len }, bytes.len())?;
        let size = (self.staged.len() + head.len() + bytes.len()) as u64;
        let earlier = !self.staged.is_empty();
        let mut parts = [IoSlice::new(&self.staged), IoSlice::new(&head), IoSlice::new(bytes)];
        let written = write_all_vectored(&mut self.file, &mut parts);
        self.staged.clear();
        self.settle(written, size)
            .inspect_err(|err| self.dropped_earlier(earlier, err))
    }

    /// Appends the request whose body went ahead as the parts of large body
    /// `body`, and returns its sequence number. The record leaves the body
    /// out; `delivery` is left as it was.
    pub fn append_parted(&mut self, body: u64, delivery: &mut NewDelivery) -> std::io::Result<u64> {
        let bytes = std::mem::take(&mut delivery.request_body);
        let appended = self.append_request(
            Some(body),
            &EntryRef::PartedRequest {
                body,
                request: delivery,
            },
        );
        delivery.request_body = bytes;
        appended
    }

    /// Keeps the answer to request `seq` in the file, for the next open to
    /// store beside its request: written by a recorder that stops while the
    /// history refuses writes, so that the history shows the answer each
    /// caller got. Staged; [`Inbox::flush`] writes it.
    pub fn keep_answer(&mut self, seq: u64, outcome: &Outcome) -> std::io::Result<()> {
        self.check_open()?;
        self.stage(seq, &EntryRef::Answer(outcome))
    }

    /// Gives up large body `body`: its parts stay in the file, unread, until
    /// a compaction drops them.
    pub fn abandon_body(&mut self, body: u64) {
        self.pending.retain(|(holder, _)| *holder != Holder::Body(body));
    }

    /// Stages a request under the next sequence number. Its records start
    /// here, or, when its body went ahead as large body `body`, where that
    /// body's parts start.
    fn append_request(&mut self, body: Option<u64>, entry: &EntryRef<'_>) -> std::io::Result<u64> {
        self.check_open()?;
        let seq = self.next_seq;
        let here = self.len + self.staged.len() as u64;
        self.stage(seq, entry)?;
        self.staged_requests.push(seq);
        let parts = body.and_then(|body| self.pending.iter_mut().find(|(held, _)| *held == Holder::Body(body)));
        match parts {
            Some(parts) => parts.0 = Holder::Request(seq),
            None => self.pending.push_back((Holder::Request(seq), here)),
        }
        if self.staged.len() >= STAGE_LIMIT {
            let earlier = here > self.len;
            if let Err(err) = self.write_staged() {
                // This request hears of it here, any staged before it from
                // the next flush. It is neither in the file nor handed on:
                // its number and its hold on the file go back, and it is
                // no loss to count.
                self.dropped_earlier(earlier, &err);
                self.let_go(seq, body);
                self.unwritten.remove(&seq);
                return Err(err);
            }
        }
        self.next_seq += 1;
        Ok(seq)
    }

    /// Undoes the hold request `seq` took on the file: a large body's
    /// parts, when `body` went ahead, are held for it again until it is
    /// finished or abandoned.
    fn let_go(&mut self, seq: u64, body: Option<u64>) {
        let held = self
            .pending
            .iter()
            .position(|(holder, _)| *holder == Holder::Request(seq));
        match (held, body) {
            (Some(at), Some(body)) => self.pending[at].0 = Holder::Body(body),
            (Some(at), None) => drop(self.pending.remove(at)),
            (None, _) => {}
        }
    }

    fn check_open(&self) -> std::io::Result<()> {
        if self.closed {
            return Err(std::io::Error::other("the inbox is closed"));
        }
        Ok(())
    }

    /// Writes every staged record, in one write, and says whether there
    /// were any (nothing written tells nothing of the disk). An error also
    /// reports an earlier failed write that dropped staged records (a large
    /// body's part, a compaction): their requests are not in the file either.
    pub fn flush(&mut self) -> std::io::Result<bool> {
        let any = !self.staged.is_empty();
        let written = self.write_staged();
        let dropped = self.unsaved.take();
        written?;
        dropped.map_or(Ok(any), Err)
    }

    /// Writes every staged record now, for a caller other than the
    /// requests' own: a failure is left for the next [`Inbox::flush`] to
    /// report, as requests staged with the records may be waiting on it.
    pub fn write_staged_now(&mut self) {
        let earlier = !self.staged_requests.is_empty();
        if let Err(err) = self.write_staged() {
            self.dropped_earlier(earlier, &err);
        }
    }

    /// Notes that a failed write, `err`, dropped records staged by earlier
    /// appends, when it did: see [`Inbox::flush`].
    fn dropped_earlier(&mut self, earlier: bool, err: &std::io::Error) {
        if earlier && self.unsaved.is_none() {
            self.unsaved = Some(std::io::Error::new(err.kind(), err.to_string()));
        }
    }

    fn write_staged(&mut self) -> std::io::Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.staged);
        let size = self.staged.len() as u64;
        // Either way they are done with: written, or reported lost.
        self.staged.clear();
        self.settle(written, size)
    }

    /// Counts `size` bytes written, or, when the write failed, cuts off
    /// whatever part of a record reached the file: the records after it
    /// could never be read back.
    fn settle(&mut self, written: std::io::Result<()>, size: u64) -> std::io::Result<()> {
        match written {
            Ok(()) => {
                self.len += size;
                self.staged_requests.clear();
                Ok(())
            }
            Err(err) => {
                let _ = self.file.set_len(self.len);
                self.unwritten.extend(self.staged_requests.drain(..));
                Err(err)
            }
        }
    }

    /// True when every request appended is at or below `applied`, the newest
    /// sequence number in SQLite.
    pub fn all_applied(&self, applied: u64) -> bool {
        applied + 1 >= self.next_seq
    }

    /// How many requests handed on are neither in SQLite (above `applied`)
    /// nor in the file: a write of their records failed.
    pub fn unwritten_after(&self, applied: u64) -> usize {
        self.unwritten.range(applied + 1..).count()
    }

    /// [`Inbox::compact`], telling a failure once, when failures begin (a
    /// full disk or a folder made read-only fails every try), and when
    /// they end.
    pub fn cut_back(&mut self, applied: u64) -> Option<File> {
        self.cut_back_past(applied, RESTART_AT)
    }

    /// As [`Inbox::cut_back`], for a tunnel gone idle: the requests SQLite
    /// holds are dropped however small the file, so that their payloads,
    /// tokens and cookies among them, do not stay in it beside a history
    /// that may since have pruned them. A file holding nothing more than
    /// its opening is left as it is.
    pub fn cut_back_idle(&mut self, applied: u64) -> Option<File> {
        self.cut_back_past(applied, self.opening_len + 1)
    }

    fn cut_back_past(&mut self, applied: u64, restart_at: u64) -> Option<File> {
        match self.compact(applied, restart_at) {
            // Only a compaction done says it works again: most calls find
            // nothing to do.
            Ok(Some(compacted)) => {
                if std::mem::take(&mut self.cutting_fails) {
                    tracing::info!("stored requests are dropped from the history inbox again");
                }
                match compacted {
                    Compacted::Punched => None,
                    Compacted::Replaced(replaced) => Some(replaced),
                }
            }
            Ok(None) => None,
            Err(err) => {
                if !std::mem::replace(&mut self.cutting_fails, true) {
                    tracing::warn!(
                        %err,
                        path = %self.path.display(),
                        "cannot drop stored requests from the history inbox; it keeps growing"
                    );
                }
                None
            }
        }
    }

    /// Once the file has grown to `restart_at` ([`RESTART_AT`] under load),
    /// drops the requests that SQLite holds (`applied` is the newest
    /// sequence number there): starts the file over when nothing else is
    /// left, and otherwise punches them out once they add up to
    /// `restart_at`, less the opening. Under steady load some request is
    /// always in flight, so waiting for an empty moment would let the file
    /// grow with every request for as long as the load lasts. Where
    /// punching fails, or past [`SPARSE_LIMIT`], the requests still missing
    /// are moved into a fresh file instead, once they are at most a quarter
    /// of it.
    pub fn compact(&mut self, applied: u64, restart_at: u64) -> std::io::Result<Option<Compacted>> {
        while let Some(&(Holder::Request(seq), start)) = self.pending.front() {
            if seq > applied {
                break;
            }
            self.pending.pop_front();
            if start > self.hole_end {
                self.applied_starts.push_back(start);
            }
        }
        while self.unwritten.first().is_some_and(|seq| *seq <= applied) {
            self.unwritten.pop_first();
        }
        let size = self.len + self.staged.len() as u64;
        if self.closed || size < restart_at {
            return Ok(None);
        }
        let start = match self.pending.front() {
            Some(&(_, start)) => start,
            None => {
                // What is staged is in SQLite already.
                self.staged.clear();
                self.staged_requests.clear();
                return self.keep_from(self.len).map(|old| Some(Compacted::Replaced(old)));
            }
        };
        // Written records only: a staged one's start is no record yet.
        let to = start.min(self.len);
        if let Some(punch) = self.punch.filter(|_| size < SPARSE_LIMIT) {
            if self.opening_len + to.saturating_sub(self.hole_end) < restart_at {
                return Ok(None);
            }
            match self.punch_up_to(to, punch) {
                Ok(true) => return Ok(Some(Compacted::Punched)),
                // No filler fits before the first request still needed:
                // the copy below, in time.
                Ok(false) => {}
                Err(err) => {
                    tracing::info!(%err, "cannot punch stored requests out of the history inbox; copying the rest instead");
                    self.punch = None;
                }
            }
        }
        if size.saturating_sub(start) * 4 > size {
            return Ok(None);
        }
        self.write_staged().inspect_err(|err| self.dropped_earlier(true, err))?;
        self.keep_from(start.min(self.len))
            .map(|old| Some(Compacted::Replaced(old)))
    }

    /// Replaces the file with one holding the opening record and every
    /// record from offset `start` on, and returns the old one. Made and
    /// locked under a name no one looks for, then renamed over the old one,
    /// as [`Inbox::create`] does: a crash at any point leaves one whole
    /// inbox under its name.
    fn keep_from(&mut self, start: u64) -> std::io::Result<File> {
        let fresh = self.path.with_file_name(format!(".{}.new", self.name));
        let moved = (|| {
            let mut file = create_locked(&fresh)?;
            let mut opening = Vec::new();
            encode_record(
                &mut opening,
                0,
                &EntryRef::Opened {
                    key_fields: &self.key_fields,
                },
            )?;
            file.write_all(&opening)?;
            let mut old = &self.file;
            old.seek(SeekFrom::Start(start))?;
            let kept = std::io::copy(&mut old.take(self.len - start), &mut file)?;
            swap_in(&fresh, &self.path)?;
            Ok((file, opening.len() as u64, kept))
        })();
        match moved {
            Ok((file, opening, kept)) => {
                self.len = opening + kept;
                for (_, offset) in &mut self.pending {
                    *offset = *offset - start + opening;
                }
                self.hole_end = opening;
                self.applied_starts.clear();
                Ok(std::mem::replace(&mut self.file, file))
            }
            Err(err) => {
                let _ = std::fs::remove_file(&fresh);
                Err(err)
            }
        }
    }

    /// Deletes the file: everything in it is in SQLite.
    pub fn discard(&mut self) {
        self.closed = true;
        self.staged.clear();
        if let Err(err) = std::fs::remove_file(&self.path) {
            tracing::warn!(%err, path = %self.path.display(), "cannot remove the history inbox");
        }
    }

    fn open_entry(&mut self) -> std::io::Result<()> {
        let key_fields = std::mem::take(&mut self.key_fields);
        let staged = self.stage(
            0,
            &EntryRef::Opened {
                key_fields: &key_fields,
            },
        );
        self.key_fields = key_fields;
        staged
    }

    /// Adds one record to the staged ones. Whole records go out in one
    /// write, so a crash leaves whole records and at most one cut short.
    fn stage(&mut self, seq: u64, entry: &EntryRef<'_>) -> std::io::Result<()> {
        encode_record(&mut self.staged, seq, entry)
    }
}

/// Puts the file at `fresh` in the place of the one at `path`. Where the
/// system can, the two names are swapped and the old file, now at `fresh`,
/// unlinked: ext4 flushes a file renamed over another (20 ms for 64 MiB, on
/// the tunnel's thread), but not one swapped with it.
fn swap_in(fresh: &Path, path: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        if renameat_with(CWD, fresh, CWD, path, RenameFlags::EXCHANGE).is_ok() {
            // The swap is done: the inbox is the fresh file whatever happens here.
            if let Err(err) = std::fs::remove_file(fresh) {
                tracing::warn!(%err, path = %fresh.display(), "cannot remove a replaced history inbox");
            }
            return Ok(());
        }
    }
    std::fs::rename(fresh, path)
}

/// Writes every byte of `parts`, in as few writes as the system allows.
fn write_all_vectored(file: &mut File, mut parts: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !parts.is_empty() {
        match file.write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Creates the file at `path`, readable and written only by its owner and
/// only at its end, and locks it for as long as the handle lives.
fn create_locked(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    file.try_lock().map_err(|err| match err {
        TryLockError::Error(err) => err,
        TryLockError::WouldBlock => std::io::Error::other("inbox locked by another process"),
    })?;
    Ok(file)
}

impl Drop for Inbox {
    fn drop(&mut self) {
        if !self.closed {
            if let Err(err) = self.flush() {
                tracing::warn!(%err, path = %self.path.display(), "cannot write the history inbox");
            }
        }
    }
}

/// What an inbox's name puts between its database's name and its own id.
pub(crate) const INFIX: &str = "-inbox-";

/// Every inbox of the database at `db`, live or not, by name and path.
pub(crate) fn inbox_files(db: &Path) -> Vec<(String, PathBuf)> {
    let prefix = prefix(db);
    let dir = match db.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with(&prefix).then(|| (name, entry.path()))
        })
        .collect()
}

/// The name every inbox of the database at `db` starts with.
fn prefix(db: &Path) -> String {
    let file = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{file}{INFIX}")
}
