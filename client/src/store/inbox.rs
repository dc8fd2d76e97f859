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
//! Record layout: `[u32 LE length][postcard (seq, Entry)]`. A record cut
//! short by a crash ends the readable part of the file.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufReader, IoSlice, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::model::NewDelivery;

/// An inbox this large drops the requests SQLite already holds: all of it
/// once everything is there, and otherwise as soon as what is still missing
/// is at most a quarter of it (see [`Inbox::compact`]).
const RESTART_AT: u64 = 4 * 1024 * 1024;

/// Staged records are written at once when they reach this size, so the
/// buffer kept between bursts stays small.
const STAGE_LIMIT: usize = 256 * 1024;

/// A request body at least this long goes to the file ahead of its request,
/// in parts of this size, each written on its own (see [`Inbox::begin_body`]).
pub const BODY_PART: usize = 256 * 1024;

/// Largest record a reader accepts: a request body at the store's limit and
/// its headers, with room to spare.
const MAX_RECORD: usize = super::MAX_STORED_BODY + 1024 * 1024;

/// What one record holds, as read back.
#[derive(Debug, Deserialize)]
enum Entry {
    /// First in every inbox: how the recorder made event keys.
    Opened { key_fields: Vec<String> },
    /// A request, before it reached SQLite.
    Request(Box<NewDelivery>),
    /// The next part of large body number `body`, ahead of its request.
    BodyPart {
        body: u64,
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// A request whose body went ahead as the parts of body number `body`.
    PartedRequest { body: u64, request: Box<NewDelivery> },
}

/// [`Entry`] as written, borrowing instead of copying; same variants in
/// the same order, so the encodings are the same.
#[derive(Serialize)]
enum EntryRef<'a> {
    Opened {
        key_fields: &'a [String],
    },
    Request(&'a NewDelivery),
    /// Encoded up to its bytes, which follow from where they lie (see
    /// [`Inbox::append_body_part`]).
    BodyPart {
        body: u64,
        len: PartLen,
    },
    PartedRequest {
        body: u64,
        request: &'a NewDelivery,
    },
}

/// A byte string's length, encoded as postcard encodes it ahead of the
/// bytes, which the caller writes right after.
struct PartLen(u64);

impl Serialize for PartLen {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

/// What keeps a stretch of the file from being dropped by a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// A request not yet known to be in SQLite, by sequence number.
    Request(u64),
    /// The parts of a large body whose request is still to come.
    Body(u64),
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
        };
        inbox.open_entry()?;
        inbox.flush()?;
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
        let mut parts = [IoSlice::new(&self.staged), IoSlice::new(&head), IoSlice::new(bytes)];
        let written = write_all_vectored(&mut self.file, &mut parts);
        self.staged.clear();
        self.settle(written, size)
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
        let parts = body.and_then(|body| self.pending.iter_mut().find(|(held, _)| *held == Holder::Body(body)));
        match parts {
            Some(parts) => parts.0 = Holder::Request(seq),
            None => self.pending.push_back((Holder::Request(seq), here)),
        }
        if self.staged.len() >= STAGE_LIMIT {
            self.flush()?;
        }
        self.next_seq += 1;
        Ok(seq)
    }

    fn check_open(&self) -> std::io::Result<()> {
        if self.closed {
            return Err(std::io::Error::other("the inbox is closed"));
        }
        Ok(())
    }

    /// Writes every staged record, in one write.
    pub fn flush(&mut self) -> std::io::Result<()> {
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
                Ok(())
            }
            Err(err) => {
                let _ = self.file.set_len(self.len);
                Err(err)
            }
        }
    }

    /// True when every request appended is at or below `applied`, the newest
    /// sequence number in SQLite.
    pub fn all_applied(&self, applied: u64) -> bool {
        applied + 1 >= self.next_seq
    }

    /// Once the file has grown past [`RESTART_AT`], drops the requests that
    /// SQLite holds (`applied` is the newest sequence number there): starts
    /// the file over when nothing else is left, and otherwise moves the
    /// requests still missing into a fresh file once they are at most a
    /// quarter of it. Under steady load some request is always in flight,
    /// so waiting for an empty moment would let the file grow with every
    /// request for as long as the load lasts. Returns the file a fresh one
    /// replaced, for the caller to close where that may take long.
    pub fn compact(&mut self, applied: u64) -> std::io::Result<Option<File>> {
        while matches!(self.pending.front(), Some((Holder::Request(seq), _)) if *seq <= applied) {
            self.pending.pop_front();
        }
        let size = self.len + self.staged.len() as u64;
        if self.closed || size < RESTART_AT {
            return Ok(None);
        }
        let start = match self.pending.front() {
            Some(&(_, start)) if size.saturating_sub(start) * 4 > size => return Ok(None),
            Some(&(_, start)) => start,
            None => {
                // What is staged is in SQLite already.
                self.staged.clear();
                self.len
            }
        };
        self.flush()?;
        self.keep_from(start.min(self.len)).map(Some)
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

/// Appends one record to `out`; on failure `out` is left as it was, so the
/// records before it stay whole.
fn encode_record(out: &mut Vec<u8>, seq: u64, entry: &EntryRef<'_>) -> std::io::Result<()> {
    encode_head(out, seq, entry, 0)
}

/// Appends one record to `out` but for its last `trailing` bytes, which
/// the caller writes right after; on failure `out` is left as it was.
fn encode_head(out: &mut Vec<u8>, seq: u64, entry: &EntryRef<'_>, trailing: usize) -> std::io::Result<()> {
    let start = out.len();
    // Room for a large body up front: growing would copy it again.
    out.reserve(4 + entry.size_hint());
    out.extend_from_slice(&[0; 4]);
    let encoded = match postcard::to_io(&(seq, entry), &mut *out) {
        Ok(_) => {
            u32::try_from(out.len() - start - 4 + trailing).map_err(|_| std::io::Error::other("inbox record too large"))
        }
        Err(err) => Err(std::io::Error::other(err.to_string())),
    };
    match encoded {
        Ok(len) => {
            out[start..start + 4].copy_from_slice(&len.to_le_bytes());
            Ok(())
        }
        Err(err) => {
            out.truncate(start);
            Err(err)
        }
    }
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

impl EntryRef<'_> {
    /// Roughly how long the encoded entry is.
    fn size_hint(&self) -> usize {
        match self {
            EntryRef::Opened { key_fields } => key_fields.iter().map(|f| f.len() + 1).sum::<usize>() + 8,
            EntryRef::Request(d) | EntryRef::PartedRequest { request: d, .. } => {
                let headers: usize = d.request_headers.iter().map(|h| h.name.len() + h.value.len() + 4).sum();
                d.request_body.len() + headers + d.tunnel_url.len() + d.target.len() + d.path.len() + 128
            }
            EntryRef::BodyPart { .. } => 24,
        }
    }
}

/// An inbox left behind by a recorder that died, locked by its finder.
#[derive(Debug)]
pub struct Orphan {
    file: File,
    path: PathBuf,
    /// The file name, which keys its progress in the database.
    pub name: String,
}

impl Orphan {
    /// Its requests, oldest first, read one record at a time: after a long
    /// stall an inbox can hold far more than fits in memory.
    pub fn requests(&self) -> std::io::Result<Requests<'_>> {
        // Every reading starts at the top, wherever the last one stopped.
        (&self.file).rewind()?;
        Ok(Requests {
            reader: BufReader::new(&self.file),
            buf: Vec::new(),
            key_fields: Vec::new(),
            bodies: HashMap::new(),
            ended: false,
        })
    }

    /// Deletes the file once its requests are in the database.
    pub fn remove(self) -> std::io::Result<()> {
        std::fs::remove_file(&self.path)?;
        drop(self.file);
        Ok(())
    }
}

/// The requests of an orphaned inbox with their sequence numbers, read
/// from the file as they are asked for. A record cut short by a crash ends
/// them; a failed read is an error, so the file is kept for another try.
pub struct Requests<'a> {
    reader: BufReader<&'a File>,
    /// The record being decoded; reused from one record to the next.
    buf: Vec<u8>,
    key_fields: Vec<String>,
    /// Large bodies read so far whose requests are still to come, by number.
    bodies: HashMap<u64, Vec<u8>>,
    ended: bool,
}

impl Requests<'_> {
    /// How the inbox's recorder made event keys, known once the first
    /// request has been read.
    pub fn key_fields(&self) -> &[String] {
        &self.key_fields
    }

    /// The next whole record, or `None` where the readable part ends.
    fn record(&mut self) -> std::io::Result<Option<(u64, Entry)>> {
        let mut len = [0u8; 4];
        if !fill(&mut self.reader, &mut len)? {
            return Ok(None);
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_RECORD {
            return Ok(None);
        }
        self.buf.resize(len, 0);
        if !fill(&mut self.reader, &mut self.buf)? {
            return Ok(None);
        }
        Ok(postcard::from_bytes(&self.buf).ok())
    }
}

impl Iterator for Requests<'_> {
    type Item = std::io::Result<(u64, NewDelivery)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            match self.record() {
                Ok(Some((_, Entry::Opened { key_fields }))) => self.key_fields = key_fields,
                Ok(Some((seq, Entry::Request(delivery)))) => return Some(Ok((seq, *delivery))),
                Ok(Some((_, Entry::BodyPart { body, bytes }))) => {
                    let parts = self.bodies.entry(body).or_default();
                    let room = super::MAX_STORED_BODY.saturating_sub(parts.len());
                    parts.extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
                Ok(Some((seq, Entry::PartedRequest { body, mut request }))) => {
                    request.request_body = self.bodies.remove(&body).unwrap_or_default();
                    return Some(Ok((seq, *request)));
                }
                Ok(None) => self.ended = true,
                Err(err) => {
                    self.ended = true;
                    return Some(Err(err));
                }
            }
        }
        None
    }
}

/// Fills `buf` from `reader`; false when the file ends first.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(err) => Err(err),
    }
}

/// Inboxes of the database at `db` whose recorders are gone, each locked
/// so that no other process moves it at the same time.
pub fn orphans(db: &Path) -> Vec<Orphan> {
    let prefix = prefix(db);
    let dir = match db.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        // A held lock means its recorder is alive and moves its own requests.
        if file.try_lock().is_ok() {
            found.push(Orphan { file, path, name });
        }
    }
    found
}

fn prefix(db: &Path) -> String {
    let file = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{file}-inbox-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{delivery, ScratchDir};

    /// How `orphan`'s recorder made event keys, and every request it left.
    fn read_all(orphan: &Orphan) -> (Vec<String>, Vec<(u64, NewDelivery)>) {
        let mut requests = orphan.requests().unwrap();
        let read = requests.by_ref().collect::<std::io::Result<Vec<_>>>().unwrap();
        (requests.key_fields().to_vec(), read)
    }

    /// Each request's sequence number and event key.
    fn keys(requests: &[(u64, NewDelivery)]) -> Vec<(u64, &str)> {
        requests.iter().map(|(seq, d)| (*seq, d.event_key.as_str())).collect()
    }

    #[test]
    fn a_dead_recorders_requests_are_read_back_and_a_live_one_is_left_alone() {
        let dir = ScratchDir::new("inbox-orphans");
        let db = dir.0.join("history.db");
        let mut live = Inbox::create(&db, &[]).unwrap();
        live.append(&mut delivery("evt_live", "/")).unwrap();
        {
            let mut dead = Inbox::create(&db, &["/id".to_string()]).unwrap();
            dead.append(&mut delivery("evt_1", "/a")).unwrap();
            dead.append(&mut delivery("evt_2", "/b")).unwrap();
            // Dropped without discard: its lock goes, its file stays.
        }
        let mut orphans = orphans(&db);
        assert_eq!(orphans.len(), 1, "only the unlocked inbox is an orphan");
        let (key_fields, requests) = read_all(&orphans[0]);
        assert_eq!(key_fields, ["/id"]);
        assert_eq!(keys(&requests), [(1, "evt_1"), (2, "evt_2")]);
        orphans.pop().unwrap().remove().unwrap();
        assert!(super::orphans(&db).is_empty());
        live.discard();
    }

    #[test]
    fn a_body_parts_head_and_bytes_read_back_as_the_part() {
        for (body, len) in [(0, 0), (3, 1), (200, BODY_PART), (u64::MAX, 70_000)] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut record = Vec::new();
            let entry = EntryRef::BodyPart {
                body,
                len: PartLen(len as u64),
            };
            encode_head(&mut record, 0, &entry, len).unwrap();
            record.extend_from_slice(&bytes);
            let declared = u32::from_le_bytes(record[..4].try_into().unwrap()) as usize;
            assert_eq!(
                declared,
                record.len() - 4,
                "body {body}, {len} bytes: the length covers the bytes"
            );
            match postcard::from_bytes::<(u64, Entry)>(&record[4..]).unwrap() {
                (0, Entry::BodyPart { body: read, bytes: got }) => {
                    assert_eq!(read, body);
                    assert!(got == bytes, "body {body}, {len} bytes read back");
                }
                other => panic!("read back as {other:?}"),
            }
        }
    }

    #[test]
    fn staged_and_large_records_read_back_whole_and_in_order() {
        let dir = ScratchDir::new("inbox-large");
        let db = dir.0.join("history.db");
        let mut big = delivery("evt_big", "/big");
        big.request_body = (0..BODY_PART * 4).map(|i| (i % 251) as u8).collect();
        {
            let mut inbox = Inbox::create(&db, &[]).unwrap();
            inbox.append(&mut delivery("evt_1", "/a")).unwrap();
            assert_eq!(inbox.append(&mut big).unwrap(), 2);
            inbox.append(&mut delivery("evt_3", "/c")).unwrap();
            // Dropped without discard, as by a recorder that died.
        }
        let (_, requests) = read_all(&orphans(&db).pop().unwrap());
        assert_eq!(keys(&requests), [(1, "evt_1"), (2, "evt_big"), (3, "evt_3")]);
        assert!(
            requests[1].1.request_body == big.request_body,
            "the large body is intact"
        );
    }

    #[test]
    fn requests_appended_between_a_large_bodys_parts_read_back_and_an_abandoned_body_is_skipped() {
        let dir = ScratchDir::new("inbox-parts");
        let db = dir.0.join("history.db");
        let mut big = delivery("evt_big", "/big");
        big.request_body = (0..BODY_PART * 2 + 7).map(|i| (i % 251) as u8).collect();
        {
            let mut inbox = Inbox::create(&db, &[]).unwrap();
            let body = inbox.begin_body().unwrap();
            let lost = inbox.begin_body().unwrap();
            let mut parts = big.request_body.chunks(BODY_PART);
            inbox.append_body_part(body, parts.next().unwrap()).unwrap();
            inbox.append_body_part(lost, b"never followed by its request").unwrap();
            assert_eq!(inbox.append(&mut delivery("evt_small", "/a")).unwrap(), 1);
            inbox.abandon_body(lost);
            for part in parts {
                inbox.append_body_part(body, part).unwrap();
            }
            let body_before = big.request_body.clone();
            assert_eq!(inbox.append_parted(body, &mut big).unwrap(), 2);
            assert!(big.request_body == body_before, "the delivery is left as it was");
            // Dropped without discard, as by a recorder that died.
        }
        let (_, requests) = read_all(&orphans(&db).pop().unwrap());
        assert_eq!(keys(&requests), [(1, "evt_small"), (2, "evt_big")]);
        assert!(
            requests[0].1.request_body.len() < 100,
            "a small request keeps its own body"
        );
        assert!(
            requests[1].1.request_body == big.request_body,
            "the large body is put back together from its parts"
        );
    }

    #[test]
    fn a_large_body_still_being_written_survives_compaction_until_abandoned() {
        let dir = ScratchDir::new("inbox-parts-compact");
        let db = dir.0.join("history.db");
        let mut inbox = Inbox::create(&db, &[]).unwrap();
        let body = inbox.begin_body().unwrap();
        let part = vec![b'x'; BODY_PART];
        for _ in 0..(RESTART_AT as usize / BODY_PART + 1) {
            inbox.append_body_part(body, &part).unwrap();
        }
        let seq = inbox.append(&mut delivery("evt_small", "/a")).unwrap();
        inbox.compact(seq).unwrap();
        assert!(inbox.len > RESTART_AT, "the parts of a body in progress are kept");
        inbox.abandon_body(body);
        inbox.compact(seq).unwrap();
        assert!(
            inbox.len < 1024,
            "abandoned parts are dropped: {} bytes left",
            inbox.len
        );
        inbox.discard();
    }

    #[test]
    fn a_record_cut_short_ends_the_inbox_without_an_error() {
        let dir = ScratchDir::new("inbox-torn");
        let db = dir.0.join("history.db");
        let path = {
            let mut inbox = Inbox::create(&db, &[]).unwrap();
            inbox.append(&mut delivery("evt_whole", "/")).unwrap();
            inbox.path.clone()
        };
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[200, 0, 0, 0, 1, 2, 3]).unwrap();
        let (_, requests) = read_all(&orphans(&db).pop().unwrap());
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].1.event_key, "evt_whole");
    }

    #[test]
    fn an_inbox_starts_over_only_when_all_of_it_is_applied() {
        let dir = ScratchDir::new("inbox-restart");
        let db = dir.0.join("history.db");
        let mut inbox = Inbox::create(&db, &[]).unwrap();
        let mut big = delivery("evt_big", "/");
        big.request_body = vec![b'x'; RESTART_AT as usize];
        let seq = inbox.append(&mut big).unwrap();
        inbox.compact(seq - 1).unwrap();
        assert!(inbox.len > RESTART_AT, "a request not yet applied keeps the file");
        let replaced = inbox.compact(seq).unwrap();
        assert!(
            replaced.is_some(),
            "the old file is handed back, to be closed elsewhere"
        );
        assert!(inbox.len < 1024, "applied requests are dropped");
        assert_eq!(inbox.append(&mut big).unwrap(), seq + 1, "sequence numbers go on");
        inbox.discard();
        assert!(!inbox.path.exists());
    }

    #[test]
    fn under_steady_load_the_inbox_keeps_only_what_sqlite_lacks() {
        let dir = ScratchDir::new("inbox-compact");
        let db = dir.0.join("history.db");
        let mut inbox = Inbox::create(&db, &["/id".to_string()]).unwrap();
        let mut big = delivery("evt_big", "/big");
        big.request_body = (0..BODY_PART).map(|i| (i % 251) as u8).collect();
        let mut largest = 0;
        let mut applied = 0;
        // A small request staged, then a large one written directly; the
        // writer is always one step behind, as it is under load.
        for n in 0..60 {
            inbox.append(&mut delivery(&format!("evt_{n}"), "/small")).unwrap();
            let newest = inbox.append(&mut big).unwrap();
            applied = newest - 2;
            inbox.compact(applied).unwrap();
            largest = largest.max(inbox.len);
        }
        assert!(
            largest < 2 * RESTART_AT,
            "the file stays bounded though a request is always in flight: {largest} bytes"
        );
        let newest = inbox.next_seq - 1;
        let path = inbox.path.clone();
        drop(inbox);
        let (key_fields, requests) = read_all(&orphans(&db).pop().unwrap());
        assert_eq!(key_fields, ["/id"], "a compacted inbox still opens with its key fields");
        let seqs: Vec<u64> = requests.iter().map(|(seq, _)| *seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "whole records, in order: {seqs:?}"
        );
        assert!(seqs[0] <= applied + 1 && seqs.last() == Some(&newest), "{seqs:?}");
        let (_, last) = requests.last().unwrap();
        assert!(last.request_body == big.request_body, "the large body is intact");
        assert!(!path
            .with_file_name(format!(".{}.new", path.file_name().unwrap().to_string_lossy()))
            .exists());
    }
}
