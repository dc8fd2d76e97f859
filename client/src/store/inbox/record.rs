//! How the inbox lays out what it holds: one record per request, body
//! part, opening note or kept answer.
//!
//! Layout: `[u32 LE length][postcard (seq, Entry)]`. A record cut short by
//! a crash ends the readable part of the file.
//!
//! Requests SQLite holds are punched out of the file where they lie (see
//! [`super::punch`]), each stretch under a filler record as long as the
//! stretch: a part of large body 0, which no request claims, so that any
//! reader, an older PortPreview's too, steps over it by its length.

use serde::{Deserialize, Serialize};

use crate::store::model::{NewDelivery, Outcome};

/// Largest record a reader accepts: a request body at the store's limit and
/// its headers, with room to spare.
pub(super) const MAX_RECORD: usize = crate::store::MAX_STORED_BODY + 1024 * 1024;

/// Enough of a record's start to hold its sequence number and its kind.
pub(super) const HEAD: usize = 16;

/// Longest stretch one filler covers: well within [`MAX_RECORD`], which an
/// older PortPreview may have had smaller.
pub(super) const FILLER_SPAN: u64 = 16 * 1024 * 1024;

/// Large bodies are numbered from 1: parts of body 0 are fillers.
const FILLER_BODY: u64 = 0;

/// Entry variant indexes, in [`Entry`]'s order, as postcard writes them.
const REQUEST: u32 = 1;
const BODY_PART: u32 = 2;
const PARTED_REQUEST: u32 = 3;

/// The sequence number of a request's record, read from the record's
/// first [`HEAD`] bytes (fewer if it is shorter): `None` for any other
/// kind of record. Spares a reader decoding the body that follows.
pub(super) fn request_seq(head: &[u8]) -> Option<u64> {
    // postcard writes the sequence number, then the entry's variant index,
    // each as a varint.
    let ((seq, variant), _) = postcard::take_from_bytes::<(u64, u32)>(head).ok()?;
    matches!(variant, REQUEST | PARTED_REQUEST).then_some(seq)
}

/// Whether the record whose first [`HEAD`] bytes (fewer if it is shorter)
/// are `head` is a filler, to be stepped over unread.
pub(super) fn is_filler(head: &[u8]) -> bool {
    matches!(
        postcard::take_from_bytes::<(u64, u32, u64)>(head),
        Ok(((_, BODY_PART, FILLER_BODY), _))
    )
}

/// The start of a filler record `span` bytes long, length included, up to
/// its zero bytes; `None` for the few spans no filler fits (a varint one
/// byte longer where its value crosses a power of 128).
pub(super) fn filler_head(span: u64) -> Option<Vec<u8>> {
    (1..=10).find_map(|varint| {
        let zeros = span.checked_sub(4 + 3 + varint)?;
        let zeros_len = usize::try_from(zeros).ok()?;
        let mut head = Vec::with_capacity(16);
        let entry = EntryRef::BodyPart {
            body: FILLER_BODY,
            len: PartLen(zeros),
        };
        encode_head(&mut head, 0, &entry, zeros_len).ok()?;
        (head.len() as u64 + zeros == span).then_some(head)
    })
}

/// Decodes one record (without its length). Requests recorded before
/// deliveries kept whether the caller's Host was preserved end one byte
/// short: that flag, a bool, is the last thing postcard writes in both
/// kinds of request record, so such a record reads as not preserved once
/// a `false` is put back. `buf` is left as it was.
pub(super) fn decode(buf: &mut Vec<u8>) -> Option<(u64, Entry)> {
    if let Ok(entry) = postcard::from_bytes(buf) {
        return Some(entry);
    }
    buf.push(0);
    let before_host_preserved = postcard::from_bytes(buf).ok();
    buf.pop();
    before_host_preserved.filter(|(_, entry)| matches!(entry, Entry::Request(_) | Entry::PartedRequest { .. }))
}

/// What one record holds, as read back.
#[derive(Debug, Deserialize)]
pub(super) enum Entry {
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
    /// The answer to the request of the record's sequence number, written
    /// when the recorder stopped while the history refused it.
    Answer(Box<Outcome>),
}

/// [`Entry`] as written, borrowing instead of copying; same variants in
/// the same order, so the encodings are the same.
#[derive(Serialize)]
pub(super) enum EntryRef<'a> {
    Opened {
        key_fields: &'a [String],
    },
    Request(&'a NewDelivery),
    /// Encoded up to its bytes, which follow from where they lie (see
    /// [`Inbox::append_body_part`](super::Inbox::append_body_part)).
    BodyPart {
        body: u64,
        len: PartLen,
    },
    PartedRequest {
        body: u64,
        request: &'a NewDelivery,
    },
    Answer(&'a Outcome),
}

/// A byte string's length, encoded as postcard encodes it ahead of the
/// bytes, which the caller writes right after.
pub(super) struct PartLen(pub(super) u64);

impl Serialize for PartLen {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

/// Appends one record to `out`; on failure `out` is left as it was, so the
/// records before it stay whole.
pub(super) fn encode_record(out: &mut Vec<u8>, seq: u64, entry: &EntryRef<'_>) -> std::io::Result<()> {
    encode_head(out, seq, entry, 0)
}

/// Appends one record to `out` but for its last `trailing` bytes, which
/// the caller writes right after; on failure `out` is left as it was.
pub(super) fn encode_head(out: &mut Vec<u8>, seq: u64, entry: &EntryRef<'_>, trailing: usize) -> std::io::Result<()> {
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
            EntryRef::Answer(o) => {
                let headers: usize = o
                    .response_headers
                    .iter()
                    .map(|h| h.name.len() + h.value.len() + 4)
                    .sum();
                o.response_body.len() + headers + 64
            }
        }
    }
}
