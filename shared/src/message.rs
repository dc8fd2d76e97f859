//! The messages of the relay ↔ client protocol, named by who sends them.
//!
//! Every WebSocket binary message is one frame: a small serde header (one of
//! these enums) plus raw body bytes, laid out by [`crate::codec`]. Bodies are
//! never re-encoded.
//!
//! A head's frame carries the first body bytes too, so a webhook of a few
//! KiB and its answer cross the socket as one frame each way; only bodies
//! larger than that, or of unknown length, follow in body frames.

use serde::{Deserialize, Serialize};

/// Version of the wire protocol. Bump it on any change to these enums.
pub const PROTOCOL_VERSION: u32 = 4;

/// Path on the relay where clients upgrade to the WebSocket.
pub const CONNECT_PATH: &str = "/_portpreview/connect";

/// Upgrade header naming the tunnel a client wants, so a name held by
/// someone else is refused with a plain 409 before the upgrade.
pub const NAME_HEADER: &str = "x-portpreview-name";

/// Upgrade header carrying the resume secret of a previous `Welcome`: it
/// proves a reconnecting client owns the name it asks for back.
pub const RESUME_HEADER: &str = "x-portpreview-resume";

/// How a relay serving TLS begins its plain-text 400 to a request sent in
/// plain HTTP (`http://` for `https://`, `ws://` for `wss://`); a client
/// that reads it knows to change its scheme.
pub const TLS_REQUIRED: &str = "this relay serves HTTPS only";

/// The relay's close reason when it shuts down. It has answered the
/// callers still waiting (502) before it closes, which the client records.
pub const RELAY_SHUTTING_DOWN: &str = "relay shutting down";

/// Largest body chunk carried by one frame. Large bodies are split so that a
/// big upload never holds the socket long enough to stall its neighbours.
pub const CHUNK_SIZE: usize = 64 * 1024;

/// Body bytes a sender may have in flight on one stream before the receiver
/// grants more with a `Window` message. Bounds each side's buffering.
pub const STREAM_WINDOW: u32 = 1024 * 1024;

/// Body credit either side holds at most on one stream; grants beyond it are
/// ignored, so a hostile peer cannot overflow the counter.
pub const MAX_CREDIT: usize = 16 * STREAM_WINDOW as usize;

/// How much of a `Window` grant of `credit` to take on a stream that holds
/// `held` credit already: the part that keeps it within [`MAX_CREDIT`].
pub fn grantable(held: usize, credit: u32) -> usize {
    (credit as usize).min(MAX_CREDIT.saturating_sub(held))
}

/// Requests a relay keeps in flight on one tunnel at most (its own cap,
/// `max_in_flight`, may be lower). A client answers 503 itself while twice
/// this many exchanges run, so a relay that does not keep count (or resets
/// each stream it opens) cannot make it run one, with its request body,
/// for each of thousands of streams.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Largest encoded frame header (request line plus headers).
pub const MAX_HEADER_BYTES: usize = 128 * 1024;

/// Largest frame either side accepts: length prefix, header and one chunk.
pub const MAX_FRAME_BYTES: usize = 4 + MAX_HEADER_BYTES + CHUNK_SIZE;

/// Identifies one request/response exchange multiplexed on the socket. The
/// relay numbers them from 1: 0 is no stream.
pub type StreamId = u64;

/// One HTTP header exactly as received: name and raw value bytes.
///
/// Kept as an ordered list, never a map, so repeated headers and their order
/// survive the trip and a replay.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Header {
    /// Header name (lowercase, as HTTP/1 parsers normalise it).
    pub name: String,
    /// Raw value bytes; not necessarily UTF-8. Encoded as one byte string,
    /// which postcard writes exactly as it writes a sequence of bytes, only
    /// in one copy instead of one call per byte.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
}

impl Header {
    /// Builds a header from a name and any byte-like value.
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// Messages the client sends to the relay.
///
/// `Hello` must stay variant 0 with `protocol` as its first field in every
/// protocol version, so a relay can always read the version of any client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMessage {
    /// First message on the socket: protocol version and the wanted name.
    Hello {
        /// The client's [`PROTOCOL_VERSION`].
        protocol: u32,
        /// The client's package version, for error messages.
        client_version: String,
        /// Tunnel name asked for; the relay picks one when absent.
        name: Option<String>,
    },
    /// Status and headers of the local answer to a stream; the frame's body
    /// bytes are the start of the answer's body.
    ResponseHead {
        /// Stream being answered.
        stream: StreamId,
        /// HTTP status code.
        status: u16,
        /// Response headers in order.
        headers: Vec<Header>,
        /// True when the frame holds the whole body: no body frames follow.
        end: bool,
    },
    /// A chunk of response body; the bytes are the frame's body.
    ResponseBody {
        /// Stream the chunk belongs to.
        stream: StreamId,
        /// True on the last chunk.
        end: bool,
    },
    /// The client abandons a stream (the relay answers the caller itself).
    Reset {
        /// Stream abandoned.
        stream: StreamId,
        /// Why, in a few words.
        reason: String,
    },
    /// Grants the relay `credit` more request-body bytes on `stream`.
    Window {
        /// Stream the credit is for.
        stream: StreamId,
        /// Bytes granted.
        credit: u32,
    },
}

/// Messages the relay sends to the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerMessage {
    /// Answer to `Hello`: the tunnel is live under this name and URL.
    Welcome {
        /// The relay's [`PROTOCOL_VERSION`].
        protocol: u32,
        /// Name given to the tunnel.
        name: String,
        /// Public URL that reaches the tunnel.
        public_url: String,
        /// Secret that reclaims this name after a disconnect, sent back in
        /// the [`RESUME_HEADER`] of the next upgrade.
        resume: String,
    },
    /// The relay will not serve this client; the socket closes after it.
    Refused {
        /// Why, in one line meant for the user.
        reason: String,
    },
    /// A caller's request line and headers; the frame's body bytes are the
    /// start of the request's body.
    RequestHead {
        /// Stream for this exchange, unique on the socket.
        stream: StreamId,
        /// HTTP method.
        method: String,
        /// Path and query as the caller sent them, tunnel prefix removed.
        target: String,
        /// Request headers in order, hop-by-hop ones already dropped.
        headers: Vec<Header>,
        /// True when the frame holds the whole body: no body frames follow.
        end: bool,
    },
    /// A chunk of request body; the bytes are the frame's body.
    RequestBody {
        /// Stream the chunk belongs to.
        stream: StreamId,
        /// True on the last chunk.
        end: bool,
    },
    /// The relay abandons a stream (the caller went away).
    Reset {
        /// Stream abandoned.
        stream: StreamId,
        /// Why, in a few words.
        reason: String,
    },
    /// Grants the client `credit` more response-body bytes on `stream`.
    Window {
        /// Stream the credit is for.
        stream: StreamId,
        /// Bytes granted.
        credit: u32,
    },
    /// A request the relay answered itself without sending it on (its body
    /// over the limit, too many in flight, a body that never came, a head
    /// too large for a frame, or the tunnel reconnecting, told right after
    /// the `Welcome` of the client that reclaims its name), so the client's
    /// history has every delivery its tunnel was sent. No stream is opened; the client answers nothing.
    /// The frame's body bytes are the request's body when the relay had
    /// read it whole (a small one, turned away for too many in flight).
    TurnedAway {
        /// HTTP method.
        method: String,
        /// Path and query as the caller sent them, tunnel prefix removed.
        target: String,
        /// Request headers in order, hop-by-hop ones already dropped.
        headers: Vec<Header>,
        /// The body's length as the caller declared it, 0 for none; `None`
        /// for a body of a length it did not declare (chunked).
        body_size: Option<u64>,
        /// The status the relay answered the caller.
        status: u16,
        /// Why, as the caller was told.
        reason: String,
        /// Milliseconds from the request's arrival to the relay's answer:
        /// the client dates the delivery from its arrival.
        waited_ms: u64,
        /// Milliseconds from the relay's answer to this news being sent: 0
        /// for news sent at once, more for a request turned away while the
        /// tunnel's name was held for its client, told once it is back.
        /// The delivery is dated that much earlier again; its duration is
        /// the caller's wait alone.
        told_after_ms: u64,
    },
}

/// Messages whose frame may carry body bytes.
pub trait Framed {
    /// True when this message's frame carries body bytes.
    fn carries_body(&self) -> bool;

    /// About how many bytes the encoded message takes, at least as many as
    /// it does in most frames: room made for it at once, so that encoding
    /// a head and its body never moves what is already written.
    fn encoded_hint(&self) -> usize {
        SMALL_MESSAGE
    }
}

/// The reason of a relay's [`ServerMessage::Reset`] for a stream whose
/// caller went away before the whole answer reached the relay, not having
/// had its head: the caller got none of the answer.
pub const CALLER_GONE_BEFORE_ANSWER: &str = "the caller went away before the answer";

/// The same, the caller having had the answer's head: it got the status
/// and headers, not the whole body.
pub const CALLER_GONE_DURING_ANSWER: &str = "the caller went away during the answer";

/// Room for a message without headers or long text: a variant, a stream
/// id, a status or a few flags, each a few bytes at most.
pub(crate) const SMALL_MESSAGE: usize = 32;

/// Room for the headers' own bytes and for each one's two length prefixes.
pub(crate) fn headers_hint<'a>(headers: impl Iterator<Item = (&'a str, &'a [u8])>) -> usize {
    headers.map(|(name, value)| name.len() + value.len() + 4).sum()
}

/// [`headers_hint`] of owned headers.
fn owned_headers_hint(headers: &[Header]) -> usize {
    headers_hint(headers.iter().map(|h| (h.name.as_str(), h.value.as_slice())))
}

impl Framed for ClientMessage {
    fn carries_body(&self) -> bool {
        matches!(
            self,
            ClientMessage::ResponseHead { .. } | ClientMessage::ResponseBody { .. }
        )
    }

    fn encoded_hint(&self) -> usize {
        match self {
            ClientMessage::ResponseHead { headers, .. } => SMALL_MESSAGE + owned_headers_hint(headers),
            ClientMessage::Reset { reason, .. } => SMALL_MESSAGE + reason.len(),
            _ => SMALL_MESSAGE,
        }
    }
}

impl ServerMessage {
    /// What kind of message it is, in words, without its fields: a
    /// message out of place is told of by this, as its fields are the
    /// sender's to fill, at any length.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerMessage::Welcome { .. } => "a welcome",
            ServerMessage::Refused { .. } => "a refusal",
            ServerMessage::RequestHead { .. } => "a request head",
            ServerMessage::RequestBody { .. } => "a request body",
            ServerMessage::Reset { .. } => "a stream reset",
            ServerMessage::Window { .. } => "a window grant",
            ServerMessage::TurnedAway { .. } => "news of a request turned away",
        }
    }
}

impl Framed for ServerMessage {
    fn carries_body(&self) -> bool {
        matches!(
            self,
            ServerMessage::RequestHead { .. } | ServerMessage::RequestBody { .. } | ServerMessage::TurnedAway { .. }
        )
    }

    fn encoded_hint(&self) -> usize {
        match self {
            ServerMessage::RequestHead {
                method,
                target,
                headers,
                ..
            } => SMALL_MESSAGE + method.len() + target.len() + owned_headers_hint(headers),
            ServerMessage::Reset { reason, .. } => SMALL_MESSAGE + reason.len(),
            ServerMessage::TurnedAway {
                method,
                target,
                headers,
                reason,
                ..
            } => SMALL_MESSAGE + method.len() + target.len() + owned_headers_hint(headers) + reason.len(),
            _ => SMALL_MESSAGE,
        }
    }
}

/// The line a user sees when client and relay speak different versions,
/// on either side.
pub fn version_mismatch(client_version: &str, client_protocol: u32, relay_protocol: u32) -> String {
    let side = if client_protocol < relay_protocol {
        "upgrade the client"
    } else {
        "upgrade the relay"
    };
    format!("client {client_version} speaks protocol {client_protocol}, relay speaks {relay_protocol}: {side}")
}
