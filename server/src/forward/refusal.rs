//! The answers the relay gives a forwarded request itself.

use std::time::Duration;

use http::{Response, StatusCode};
use portpreview_shared::codec::EncodeError;
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::MAX_HEADER_BYTES;

use super::TurnAway;
use crate::body::{answer, closing, RelayBody};
use crate::port::StreamPort;
use crate::stream::CLIENT_GONE;

pub(super) fn too_large(limit: u64) -> Response<RelayBody> {
    closing(answer(StatusCode::PAYLOAD_TOO_LARGE, over_limit(limit)))
}

/// What the caller of a body over `limit` is told.
pub(super) fn over_limit(limit: u64) -> String {
    match limit {
        // The default, 25 MiB, reads better so than as 26214400 bytes.
        mib if mib > 0 && mib % (1024 * 1024) == 0 => {
            format!(
                "request body over the relay's limit of {} MiB ({limit} bytes)",
                mib / (1024 * 1024)
            )
        }
        _ => format!("request body over the relay's limit of {limit} bytes"),
    }
}

/// Answers a request whose head does not fit in a frame the client would
/// accept: sent anyway, it would cost the whole tunnel its session. The
/// client hears of it with what fits.
pub(super) fn unframable(err: EncodeError, turning: &TurnAway<'_>) -> Response<RelayBody> {
    let (status, reason) = match err {
        EncodeError::HeaderTooLarge(size) => (
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "request headers too large to cross the tunnel: {size} bytes framed, the limit is {MAX_HEADER_BYTES}"
            ),
        ),
        other => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request could not be framed for the tunnel: {other}"),
        ),
    };
    turning.tell(status, &reason, &[]);
    closing(answer(status, reason))
}

/// What the relay says of a request body its caller's connection broke off.
const UNREADABLE_BODY: &str = "the request body could not be read";

/// Why a body that broke off after `got` bytes could not be read: how far
/// it got, of the length it `declared`, or before its last chunk.
pub(super) fn cut_short(got: u64, declared: Option<u64>) -> String {
    let how_far = match declared {
        Some(declared) => format!("{got} of {declared} bytes"),
        None => format!("{got} bytes, before its last chunk"),
    };
    format!("{UNREADABLE_BODY}: it ended after {how_far} (the caller went away, or closed its side of the connection)")
}

/// Answers the caller 504 and tells the client why its exchange ends.
pub(super) fn timed_out(port: &StreamPort, timeout: Duration) -> Response<RelayBody> {
    port.abandon(&format!(
        "no answer within {}; the relay answered the caller 504",
        format_duration(timeout)
    ));
    client_stalled(timeout)
}

/// The caller's 504 when the client answered nothing, not even taking the
/// request's head or body, within `timeout` (the client was told already,
/// or never heard of the request).
pub(super) fn client_stalled(timeout: Duration) -> Response<RelayBody> {
    answer(
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "no answer came through the tunnel within {}: its client, or the handler behind it, took longer",
            format_duration(timeout)
        ),
    )
}

pub(super) fn client_gone() -> Response<RelayBody> {
    bad_gateway(CLIENT_GONE)
}

/// A reason the tunnel's client gave, as the caller reads it: on one line,
/// its control characters escaped (whoever runs the client chose them, and
/// the caller may be reading in a terminal), and of a sensible length.
pub(super) fn clients_reason(reason: &str) -> String {
    /// Longer than any reason PortPreview's client gives.
    const LONGEST: usize = 500;
    portpreview_shared::text::shorten(&portpreview_shared::sanitize::escape_str(reason), LONGEST)
}

pub(super) fn bad_gateway(text: impl Into<String>) -> Response<RelayBody> {
    answer(StatusCode::BAD_GATEWAY, text)
}
