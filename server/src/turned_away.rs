//! News of a request the relay answered itself, for the client's history:
//! told at once to a live tunnel, or kept for the client that reclaims a
//! name held for it.

use http::StatusCode;
use hyper::body::{Body, Incoming};
use portpreview_shared::codec::EncodeError;
use portpreview_shared::content_length;
use portpreview_shared::request_ref::HeaderRef;
use portpreview_shared::{Header, ServerMessage};

use crate::headers::{request_headers, Hop};

/// A request the relay answers itself, before any stream is opened for it
/// or instead of one.
pub struct TurnedAway<'a> {
    /// The caller's request line and headers.
    pub parts: &'a http::request::Parts,
    /// Path and query the client would have been sent.
    pub target: &'a str,
    /// How the request reached the relay, for its `X-Forwarded-*`.
    pub hop: &'a Hop<'a>,
    /// As [`ServerMessage::TurnedAway`] has it.
    pub body_size: Option<u64>,
    /// When the request came.
    pub arrived: tokio::time::Instant,
}

impl<'a> TurnedAway<'a> {
    /// A request arriving now, whose body its Content-Length `declared`
    /// (none, when its body is chunked or it has none: `body` tells which).
    pub fn arriving(
        parts: &'a http::request::Parts,
        body: &Incoming,
        declared: Option<u64>,
        target: &'a str,
        hop: &'a Hop<'a>,
    ) -> Self {
        Self {
            parts,
            target,
            hop,
            body_size: declared.or_else(|| body.is_end_stream().then_some(0)),
            arrived: tokio::time::Instant::now(),
        }
    }

    /// Hands `tell` the news of this request, answered `status` for
    /// `reason`, with the caller's headers as the handler would have had
    /// them. A head within the relay's limit may not fit in a frame once
    /// the relay's X-Forwarded-Host repeats its Host: then `tell` is handed
    /// it again without that; failing that, without any header, and with
    /// the body marked unknown, so that the history's copy is never
    /// replayed as the request sent. `body` is the request's, when the
    /// relay read it whole.
    pub fn tell(
        &self,
        status: StatusCode,
        reason: &str,
        body: &[u8],
        mut tell: impl FnMut(&ServerMessage, &[u8]) -> Result<(), EncodeError>,
    ) {
        // Debug, not info: a crowd turned away would otherwise flood the log.
        tracing::debug!(method = %self.parts.method, status = status.as_u16(), %reason, "request turned away");
        let headers = || request_headers(&self.parts.headers, self.hop).into_iter();
        let owned = |h: HeaderRef<'_>| Header::new(h.name, h.value);
        let whole = self.news(status, reason, headers().map(owned).collect(), self.body_size);
        if tell(&whole, body).is_ok() {
            return;
        }
        let repeated = |h: &HeaderRef<'_>| h.name == "x-forwarded-host";
        let unrepeated = headers().filter(|h| !repeated(h)).map(owned).collect();
        let fewer = self.news(status, reason, unrepeated, self.body_size);
        if tell(&fewer, body).is_ok() {
            return;
        }
        let bare = self.news(status, reason, Vec::new(), None);
        if let Err(err) = tell(&bare, &[]) {
            tracing::debug!(%err, "news of a request turned away does not fit a frame");
        }
    }

    fn news(&self, status: StatusCode, reason: &str, headers: Vec<Header>, body_size: Option<u64>) -> ServerMessage {
        ServerMessage::TurnedAway {
            method: self.parts.method.as_str().to_owned(),
            target: self.target.to_owned(),
            headers,
            body_size,
            status: status.as_u16(),
            reason: reason.to_owned(),
            waited_ms: millis(self.arrived.elapsed()),
            told_after_ms: 0,
        }
    }
}

/// The body length the caller's headers declare, when they declare one.
/// hyper has refused a request whose lengths it could not read.
pub fn declared_body_size(headers: &http::HeaderMap) -> Option<u64> {
    let lengths = headers.get_all(http::header::CONTENT_LENGTH);
    content_length::declared(lengths.iter().map(http::HeaderValue::as_bytes))
        .ok()
        .flatten()
}

/// `elapsed` in whole milliseconds, as the protocol counts them.
pub fn millis(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}
