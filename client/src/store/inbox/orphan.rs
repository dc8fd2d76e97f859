//! Reading back the inbox of a recorder that died, to move what it holds
//! into the database.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use super::record::{decode, is_filler, Entry, HEAD, MAX_RECORD};
use super::{inbox_files, INFIX};
use crate::store::model::{NewDelivery, Outcome};
use crate::store::FileId;

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
            unreadable: 0,
        })
    }

    /// The answers its recorder kept in the file as it stopped (the history
    /// refusing writes then), by their requests' sequence numbers.
    pub fn answers(&self) -> std::io::Result<HashMap<u64, Outcome>> {
        let mut records = self.requests()?;
        let mut answers = HashMap::new();
        while let Some((seq, entry)) = records.record()? {
            if let Entry::Answer(outcome) = entry {
                answers.insert(seq, *outcome);
            }
        }
        Ok(answers)
    }

    /// Deletes the file once its requests are in the database.
    pub fn remove(self) -> std::io::Result<()> {
        std::fs::remove_file(&self.path)?;
        drop(self.file);
        Ok(())
    }

    /// Renames the file to a name no recovery picks up, once what could be
    /// read of it is in the database, and returns where it now is: records
    /// it could not read are kept for whoever can.
    pub fn set_aside(self) -> std::io::Result<PathBuf> {
        let kept = self
            .path
            .with_file_name(self.name.replacen(INFIX, "-unreadable-inbox-", 1));
        std::fs::rename(&self.path, &kept)?;
        drop(self.file);
        Ok(kept)
    }
}

/// The requests of an orphaned inbox with their sequence numbers, read
/// from the file as they are asked for. A record cut short by a crash ends
/// them; a failed read is an error, so the file is kept for another try. A
/// whole record that does not decode (written by a later PortPreview, or
/// damaged) is skipped and counted.
pub struct Requests<'a> {
    reader: BufReader<&'a File>,
    /// The record being decoded; reused from one record to the next.
    buf: Vec<u8>,
    key_fields: Vec<String>,
    /// Large bodies read so far whose requests are still to come, by number.
    bodies: HashMap<u64, Vec<u8>>,
    ended: bool,
    unreadable: usize,
}

impl Requests<'_> {
    /// How the inbox's recorder made event keys, known once the first
    /// request has been read.
    pub fn key_fields(&self) -> &[String] {
        &self.key_fields
    }

    /// Records read but not understood; the file should be kept when
    /// there are any.
    pub fn unreadable(&self) -> usize {
        self.unreadable
    }

    /// The next whole record, or `None` where the readable part ends.
    fn record(&mut self) -> std::io::Result<Option<(u64, Entry)>> {
        loop {
            let mut len = [0u8; 4];
            if !fill(&mut self.reader, &mut len)? {
                return Ok(None);
            }
            let len = u32::from_le_bytes(len) as usize;
            // No record is empty or this long: past here nothing can be
            // told apart. Zeros to the end are what a power cut leaves of
            // writes that never reached the disk, and held nothing.
            if len == 0 && zeros_to_the_end(&mut self.reader)? {
                return Ok(None);
            }
            if len == 0 || len > MAX_RECORD {
                self.unreadable += 1;
                return Ok(None);
            }
            let head_len = len.min(HEAD);
            self.buf.resize(head_len, 0);
            if !fill(&mut self.reader, &mut self.buf)? {
                return Ok(None);
            }
            // Mostly zeros over punched out requests, up to 16 MiB each:
            // not worth reading, nor room made for.
            if is_filler(&self.buf) {
                let rest = i64::try_from(len - head_len).map_err(std::io::Error::other)?;
                self.reader.seek_relative(rest)?;
                continue;
            }
            self.buf.resize(len, 0);
            if !fill(&mut self.reader, &mut self.buf[head_len..])? {
                return Ok(None);
            }
            match decode(&mut self.buf) {
                Some(record) => return Ok(Some(record)),
                None => self.unreadable += 1,
            }
        }
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
                    let room = crate::store::MAX_STORED_BODY.saturating_sub(parts.len());
                    parts.extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
                Ok(Some((seq, Entry::PartedRequest { body, mut request }))) => {
                    request.request_body = self.bodies.remove(&body).unwrap_or_default();
                    return Some(Ok((seq, *request)));
                }
                // Read apart, by [`Orphan::answers`].
                Ok(Some((_, Entry::Answer(_)))) => {}
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

/// Whether nothing but zero bytes is left in `reader`.
fn zeros_to_the_end(reader: &mut impl Read) -> std::io::Result<bool> {
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf)? {
            0 => return Ok(true),
            n if buf[..n].iter().all(|&b| b == 0) => {}
            _ => return Ok(false),
        }
    }
}

/// Fills `buf` from `reader`; false when the file ends first.
pub(super) fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(err) => Err(err),
    }
}

/// Inboxes of the database at `db` whose recorders are gone, each locked
/// so that no other process moves it at the same time.
pub fn orphans(db: &Path) -> Vec<Orphan> {
    let mut found = Vec::new();
    for (name, path) in inbox_files(db) {
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        // A held lock means its recorder is alive and moves its own requests.
        if file.try_lock().is_err() {
            continue;
        }
        // The lock is the file's, not the name's: between the open and the
        // lock, another recovery may have moved this file in and deleted it,
        // or its recorder put a compacted file in its place and closed this
        // one. Either way what the lock was taken on is no orphan, and
        // reading it would store its requests a second time.
        if still_named(&file, &path) {
            found.push(Orphan { file, path, name });
        }
    }
    found
}

/// Whether `path` still names the file `file` is open on.
pub(super) fn still_named(file: &File, path: &Path) -> bool {
    FileId::of(file) == FileId::at(path)
}
