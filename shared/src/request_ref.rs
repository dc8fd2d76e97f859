//! A request head encoded from borrowed parts.
//!
//! The relay builds each request's head from the caller's request only to
//! encode it: owned, every header's name and value was copied into
//! allocations of their own, encoded, and freed. [`RequestHeadRef`]
//! borrows them instead, and encodes to exactly the bytes of the
//! [`ServerMessage::RequestHead`] it stands for, which is what the client
//! decodes.

use serde::ser::{Serialize, SerializeStructVariant, Serializer};

use crate::message::{headers_hint, Framed, StreamId, SMALL_MESSAGE};
#[cfg(doc)]
use crate::message::{Header, ServerMessage};

/// [`ServerMessage::RequestHead`]'s place among the variants: the number
/// its frame starts with.
const REQUEST_HEAD_VARIANT: u32 = 2;

/// A [`Header`] borrowed from wherever it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename = "Header")]
pub struct HeaderRef<'a> {
    /// Header name (lowercase, as HTTP/1 parsers normalise it).
    pub name: &'a str,
    /// Raw value bytes, encoded as [`Header`]'s are.
    #[serde(with = "serde_bytes")]
    pub value: &'a [u8],
}

impl<'a> HeaderRef<'a> {
    /// A header of `name` and `value`.
    pub fn new(name: &'a str, value: &'a [u8]) -> Self {
        Self { name, value }
    }
}

/// [`ServerMessage::RequestHead`] with borrowed parts; its fields are that
/// variant's.
#[derive(Debug, Clone, Copy)]
pub struct RequestHeadRef<'a> {
    /// Stream for this exchange, unique on the socket.
    pub stream: StreamId,
    /// HTTP method.
    pub method: &'a str,
    /// Path and query as the caller sent them, tunnel prefix removed.
    pub target: &'a str,
    /// Request headers in order, hop-by-hop ones already dropped.
    pub headers: &'a [HeaderRef<'a>],
    /// True when the frame holds the whole body: no body frames follow.
    pub end: bool,
}

impl Serialize for RequestHeadRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Field by field as serde's derive writes the owned variant.
        let mut head = serializer.serialize_struct_variant("ServerMessage", REQUEST_HEAD_VARIANT, "RequestHead", 5)?;
        head.serialize_field("stream", &self.stream)?;
        head.serialize_field("method", self.method)?;
        head.serialize_field("target", self.target)?;
        head.serialize_field("headers", self.headers)?;
        head.serialize_field("end", &self.end)?;
        head.end()
    }
}

impl Framed for RequestHeadRef<'_> {
    fn carries_body(&self) -> bool {
        true
    }

    fn encoded_hint(&self) -> usize {
        SMALL_MESSAGE
            + self.method.len()
            + self.target.len()
            + headers_hint(self.headers.iter().map(|h| (h.name, h.value)))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::{decode, encode};
    use crate::message::{Header, ServerMessage};

    #[test]
    fn a_borrowed_head_encodes_as_the_owned_one() {
        let owned_headers = vec![
            Header::new("host", "relay.example"),
            Header::new("x-raw", vec![0x80, 0, b'a']),
            Header::new("x-long", vec![b'l'; 300]),
        ];
        let borrowed: Vec<HeaderRef> = owned_headers
            .iter()
            .map(|h| HeaderRef::new(&h.name, &h.value))
            .collect();
        for end in [true, false] {
            let owned = ServerMessage::RequestHead {
                stream: u64::MAX - 3,
                method: "POST".into(),
                target: "/hook?a=1".into(),
                headers: owned_headers.clone(),
                end,
            };
            let head = RequestHeadRef {
                stream: u64::MAX - 3,
                method: "POST",
                target: "/hook?a=1",
                headers: &borrowed,
                end,
            };
            let frame = encode(&head, b"body").expect("a frame");
            assert_eq!(frame, encode(&owned, b"body").expect("a frame"));
            let (back, body) = decode::<ServerMessage>(Bytes::from(frame)).expect("decodes");
            assert_eq!((back, &body[..]), (owned, &b"body"[..]));
        }
    }
}
