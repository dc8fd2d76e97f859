//! Dropping the requests SQLite holds from the inbox where they lie, while
//! those still missing stay where they are.
//!
//! Under a steady stream of large uploads the history writer always lags,
//! so the inbox never empties; copying what is still missing into a fresh
//! file then moved tens of MiB at a time on the tunnel's thread. Instead,
//! each stretch of stored requests gets a filler record over it (see
//! [`super::record`]) and its blocks are freed: offsets stay, so nothing
//! moves and nothing is renumbered, and the payloads, tokens and cookies
//! in it read back as zeros.
//!
//! A filler starts and ends where records do, so a recorder killed at any
//! point leaves a file whose every record is whole: one written over a
//! stretch not yet punched only hides requests SQLite already holds.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;

use super::record::{filler_head, FILLER_SPAN};
use super::Inbox;

/// Frees the blocks of `len` bytes of `file` from `offset`, which then
/// read back as zeros; the file keeps its size.
pub(super) type Punch = fn(&File, u64, u64) -> std::io::Result<()>;

/// [`Punch`] where the system has it.
pub(super) fn punch_hole(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{fallocate, FallocateFlags};
        fallocate(
            file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        )?;
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (file, offset, len);
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

impl Inbox {
    /// Puts fillers over the records from the end of the last one up to
    /// `to`, where the first record still needed starts, and punches out
    /// what they cover. Says whether any stretch was dropped: none is when
    /// no record starts within a filler's reach.
    pub(super) fn punch_up_to(&mut self, to: u64, punch: Punch) -> std::io::Result<bool> {
        // The inbox's own handle appends wherever it is told to write.
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        let mut dropped = false;
        while let Some((end, head)) = self.next_filler(to, &file)? {
            let start = self.hole_end;
            file.write_all_at(&head, start)?;
            let freed = start + head.len() as u64;
            if end > freed {
                punch(&file, freed, end - freed)?;
            }
            self.hole_end = end;
            while self.applied_starts.front().is_some_and(|&at| at <= end) {
                self.applied_starts.pop_front();
            }
            dropped = true;
        }
        Ok(dropped)
    }

    /// Where the next filler ends, the farthest start of a record within
    /// reach, and its head.
    fn next_filler(&self, to: u64, file: &File) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        let from = self.hole_end;
        if from >= to {
            return Ok(None);
        }
        let reach = from.saturating_add(FILLER_SPAN).min(to);
        let filler = |end: u64| Some((end, filler_head(end - from)?));
        let within = self.applied_starts.partition_point(|&at| at <= reach);
        let starts = self.applied_starts.range(..within).rev();
        let known = std::iter::once(to)
            .filter(|&to| to <= reach)
            .chain(starts.copied())
            .take_while(|&end| end > from)
            .find_map(filler);
        if known.is_some() {
            return Ok(known);
        }
        // A stored request's body longer than a filler reaches (a 20 MiB
        // upload) starts no request within it: its parts' records do.
        let walked = record_starts(file, from, reach)?;
        Ok(walked.into_iter().rev().find_map(filler))
    }
}

/// The starts of the records that follow the one at `from`, as far as
/// `reach`, each found from the length before the one ahead of it. Only
/// written records lie before `reach`, and none is longer than a large
/// body's part or a request with a small body.
fn record_starts(file: &File, from: u64, reach: u64) -> std::io::Result<Vec<u64>> {
    let mut starts = Vec::new();
    let mut at = from;
    // Past `reach` may lie what is only staged, not yet in the file.
    while at < reach {
        let mut len = [0u8; 4];
        file.read_exact_at(&mut len, at)?;
        let len = u32::from_le_bytes(len);
        let next = at + 4 + u64::from(len);
        if len == 0 || next > reach {
            break;
        }
        starts.push(next);
        at = next;
    }
    Ok(starts)
}
