//! Relays one caller's request through a tunnel and streams the answer back.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use portpreview_shared::codec::EncodeError;
use portpreview_shared::content_length;
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::{CHUNK_SIZE, MAX_HEADER_BYTES};
use portpreview_shared::request_ref::RequestHeadRef;
use portpreview_shared::{ServerMessage, StreamId};
use tokio::sync::{oneshot, Semaphore};
use tokio_util::task::AbortOnDropHandle;

use crate::body::{answer, RelayBody, TunnelBody};
use crate::headers::{request_headers, response_headers, Hop, MAX_RESPONSE_HEADERS};
use crate::port::{RequestSide, StreamPort};
use crate::registry::{BodyAtOpen, OpenError, Tunnel};
use crate::stream::{Inbound, CLIENT_GONE};
use crate::turned_away::{declared_body_size, TurnedAway};
use crate::writer::{Outbox, SendError};

/// How many times the answer timeout a caller may take to upload a body
/// that keeps coming: a large body on a slow link is not the handler's
/// delay, yet a body trickled a byte at a time must end some day.
const UPLOAD_TIMEOUTS: u32 = 10;

/// The limits a forwarded request is held to.
#[derive(Debug, Clone, Copy)]
pub struct ForwardLimits {
    /// Largest request body.
    pub max_body: u64,
    /// Wait for the client's answer, and for each body chunk either way.
    pub timeout: Duration,
}

enum PumpEnd {
    Done,
    TooLarge,
    /// The caller's body was not valid HTTP (a broken chunked coding).
    Malformed,
    /// The caller sent no more body within the timeout.
    Stalled,
    /// The caller hung up mid-body: nobody is left to answer.
    CallerGone,
    TunnelGone,
}

/// Sends `req` to `tunnel` as `target` and answers with what the client sends.
pub async fn forward(
    tunnel: Arc<dyn Tunnel>,
    name: &str,
    req: Request<Incoming>,
    target: String,
    hop: &Hop<'_>,
    limits: ForwardLimits,
) -> Response<RelayBody> {
    let (parts, body) = req.into_parts();
    let declared = declared_body_size(&parts.headers);
    let turning = TurnAway {
        tunnel: &*tunnel,
        request: TurnedAway::arriving(&parts, &body, declared, &target, hop),
    };
    let arrived = turning.request.arrived;
    if declared.is_some_and(|len| len > limits.max_body) {
        return closing(turning.answer(StatusCode::PAYLOAD_TOO_LARGE, over_limit(limits.max_body)));
    }
    let deadline = arrived + limits.timeout;
    let (inline, to_pump) = match split_body(body, declared, deadline).await {
        Ok(split) => split,
        Err(Unread::Broken) => return turning.answer(StatusCode::BAD_REQUEST, UNREADABLE_BODY.into()),
        Err(Unread::Late) => {
            return turning.answer(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time".into(),
            )
        }
    };
    let body_at_open = match to_pump {
        Some(_) => BodyAtOpen::Arriving,
        None => BodyAtOpen::Whole,
    };
    let port = match tunnel.open(body_at_open) {
        Ok(port) => port,
        Err(err) => return not_opened(err, name, &turning, &inline),
    };
    let headers = request_headers(&parts.headers, hop);
    let head = RequestHeadRef {
        stream: port.id,
        method: parts.method.as_str(),
        target: &target,
        headers: &headers,
        end: to_pump.is_none(),
    };
    // A client that stops reading its socket fills the writer's queue; the
    // caller's wait is bounded by the same timeout either way. A small body
    // rides in the head's frame, within the initial window.
    let sent = tokio::time::timeout_at(deadline, port.outbox().send(&head, &inline)).await;
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(SendError::Unframable(err))) => {
            port.discard();
            return unframable(err, &turning);
        }
        Ok(Err(SendError::Closed)) => return client_gone(),
        Err(_) => return timed_out(&port, limits.timeout),
    }
    let (pump, pump_end) = match to_pump {
        Some(incoming) => {
            let (pump, end) = Pump::start(&port, incoming, limits);
            (Some(pump), Some(end))
        }
        None => {
            port.request_done();
            (None, None)
        }
    };
    await_answer(port, &parts, (pump, pump_end), deadline, limits).await
}

/// Waits for the client's answer on `port` while the caller's body, if any
/// is left, is pumped after the head; the caller's answer is the client's,
/// or the relay's own when the body or the answer fails.
async fn await_answer(
    mut port: StreamPort,
    parts: &http::request::Parts,
    (pump, mut pump_end): (Option<AbortOnDropHandle<()>>, Option<oneshot::Receiver<PumpEnd>>),
    deadline: tokio::time::Instant,
    limits: ForwardLimits,
) -> Response<RelayBody> {
    // The wait for an answer is the handler's: while the caller's body is
    // still coming it is held to the upload's limit only, and it starts
    // over once the body has all gone to the client.
    let upload_limit = limits.timeout * UPLOAD_TIMEOUTS;
    let answer_wait = match pump_end {
        Some(_) => tokio::time::sleep(upload_limit),
        None => tokio::time::sleep_until(deadline),
    };
    tokio::pin!(answer_wait);
    loop {
        tokio::select! {
            event = port.inbound.recv() => {
                return match event {
                    Some(Inbound::Head { status, headers, body, end }) => {
                        let head = AnswerHead { status, headers, first: body, end };
                        response(port, head, parts, pump, limits)
                    }
                    Some(Inbound::Body { .. }) => {
                        bad_gateway("the tunnel's client sent a body before its response head")
                    }
                    Some(Inbound::Ended(why)) => bad_gateway(why),
                    Some(Inbound::Reset(reason)) => bad_gateway(format!(
                        "the tunnel's client abandoned the request: {}",
                        clients_reason(&reason)
                    )),
                    None => client_gone(),
                };
            }
            ended = pump_outcome(&mut pump_end) => {
                pump_end = None;
                match ended {
                    Ok(PumpEnd::Done) => answer_wait.as_mut().reset(tokio::time::Instant::now() + limits.timeout),
                    Ok(PumpEnd::TooLarge) => return too_large(limits.max_body),
                    Ok(PumpEnd::Malformed) => return answer(StatusCode::BAD_REQUEST, MALFORMED_BODY),
                    Ok(PumpEnd::Stalled) => {
                        let waited = format_duration(limits.timeout);
                        return answer(
                            StatusCode::REQUEST_TIMEOUT,
                            format!("the request body stopped arriving: nothing came for {waited}"),
                        );
                    }
                    Ok(PumpEnd::CallerGone) => return unreadable_body(),
                    Ok(PumpEnd::TunnelGone) | Err(_) => return client_gone(),
                }
            }
            () = &mut answer_wait => {
                if pump_end.is_none() {
                    return timed_out(&port, limits.timeout);
                }
                let waited = format_duration(upload_limit);
                port.abandon(&format!(
                    "the request body was still arriving after {waited}; the relay answered the caller 408"
                ));
                return answer(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the request body was still arriving after {waited}, the most an upload may take"),
                );
            }
        }
    }
}

/// Why a small body read in advance was not read.
enum Unread {
    /// The caller's connection failed mid-body.
    Broken,
    /// It did not all come before the deadline.
    Late,
}

/// The caller's body as it leaves for the client: the bytes that ride in
/// the head's frame, and what is left to pump in chunks. A small body of
/// known length is read whole before anything is sent, so head and body
/// leave as one frame and no pump task is needed; an empty one leaves
/// nothing to pump.
async fn split_body(
    body: Incoming,
    declared: Option<u64>,
    deadline: tokio::time::Instant,
) -> Result<(Bytes, Option<Incoming>), Unread> {
    if !declared.is_some_and(|len| len > 0 && len <= CHUNK_SIZE as u64) {
        let rest = (!body.is_end_stream()).then_some(body);
        return Ok((Bytes::new(), rest));
    }
    match tokio::time::timeout_at(deadline, read_whole(body)).await {
        Ok(Ok(whole)) => Ok((whole, None)),
        Ok(Err(_)) => Err(Unread::Broken),
        Err(_) => Err(Unread::Late),
    }
}

/// Every data byte of `body`, which is small. A body that comes in one
/// piece, as most small ones do, is taken as it is: no list of pieces, no
/// copy.
async fn read_whole(mut body: Incoming) -> Result<Bytes, hyper::Error> {
    let mut first = Bytes::new();
    let mut more = Vec::new();
    while let Some(frame) = body.frame().await {
        // Trailers are hop-by-hop metadata of chunked coding; not relayed.
        let Ok(data) = frame?.into_data() else { continue };
        if first.is_empty() {
            first = data;
        } else {
            if more.is_empty() {
                more.extend_from_slice(&first);
            }
            more.extend_from_slice(&data);
        }
    }
    Ok(if more.is_empty() { first } else { Bytes::from(more) })
}

/// The answer to a request no stream could be opened for on tunnel `name`.
/// `inline` is the body, when it was small enough to be read whole.
fn not_opened(err: OpenError, name: &str, turning: &TurnAway<'_>, inline: &[u8]) -> Response<RelayBody> {
    match err {
        OpenError::Busy => turning.answer_with(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many requests in flight for tunnel {name}"),
            inline,
        ),
        // Its body, still arriving, was not read: nothing to keep of it.
        OpenError::Uploading => {
            let mut busy = turning.answer(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("too many request bodies still arriving for tunnel {name}; try again shortly"),
            );
            busy.headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("5"));
            busy
        }
        // Nobody is left to tell.
        OpenError::Gone => client_gone(),
        OpenError::ShuttingDown => turning.answer_with(
            StatusCode::SERVICE_UNAVAILABLE,
            "the relay is shutting down".into(),
            inline,
        ),
    }
}

/// A request the relay may answer itself, and the tunnel told of it.
struct TurnAway<'a> {
    tunnel: &'a dyn Tunnel,
    request: TurnedAway<'a>,
}

impl TurnAway<'_> {
    /// Answers the caller `status` with `reason`, and tells the client: its
    /// history would otherwise never hear of the delivery.
    fn answer(&self, status: StatusCode, reason: String) -> Response<RelayBody> {
        self.answer_with(status, reason, &[])
    }

    /// As [`TurnAway::answer`], for a request whose `body` the relay had
    /// read whole: the history keeps it, and it can be replayed.
    fn answer_with(&self, status: StatusCode, reason: String, body: &[u8]) -> Response<RelayBody> {
        self.tell(status, &reason, body);
        answer(status, reason)
    }

    /// Tells the client now, if it can take the news.
    fn tell(&self, status: StatusCode, reason: &str, body: &[u8]) {
        self.request.tell(status, reason, body, |news, body| {
            self.tunnel.tell_turned_away(news, body)
        });
    }
}

/// The head of the client's answer, as it came.
struct AnswerHead {
    status: u16,
    headers: Vec<portpreview_shared::Header>,
    /// Body bytes that rode in the head's frame.
    first: Bytes,
    end: bool,
}

/// The caller's answer from the client's head: checked, its length made
/// plain, its body whole or streamed from the tunnel.
fn response(
    port: StreamPort,
    head: AnswerHead,
    request: &http::request::Parts,
    pump: Option<AbortOnDropHandle<()>>,
    limits: ForwardLimits,
) -> Response<RelayBody> {
    // A final status, as RFC 9110 numbers them: `from_u16` takes up to 999.
    let Some(status) = StatusCode::from_u16(head.status)
        .ok()
        .filter(|s| (200..600).contains(&s.as_u16()))
    else {
        port.abandon("the answer's status was not one HTTP defines; the relay answered the caller 502");
        return bad_gateway(format!("the tunnel's client sent an invalid status {}", head.status));
    };
    let Some(mut headers) = response_headers(head.headers) else {
        port.abandon("the answer had too many headers; the relay answered the caller 502");
        return bad_gateway(format!(
            "the tunnel's client sent too many response headers (the limit is {MAX_RESPONSE_HEADERS})"
        ));
    };
    let declared = match declared_length(&mut headers) {
        Ok(declared) => declared,
        Err(why) => {
            port.abandon("the answer's Content-Length was not one number; the relay answered the caller 502");
            return bad_gateway(why);
        }
    };
    let body = if head.end {
        match whole_body(declared, head.first, &request.method, status) {
            Ok(body) => RelayBody::Full(body),
            Err(why) => {
                port.abandon("the answer's body did not match its Content-Length; the relay answered the caller 502");
                return bad_gateway(why);
            }
        }
    } else {
        RelayBody::Tunnel(Box::new(TunnelBody::new(
            port,
            head.first,
            pump,
            limits.timeout,
            declared.filter(|_| carries_body(&request.method, status)),
        )))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    // HTTP/1.0 has no chunked coding: hyper ends a body of unknown length
    // by closing the connection, yet tells a keep-alive caller it stays
    // open unless the answer itself is HTTP/1.0 (hyper then leaves
    // keep-alive off).
    if request.version == http::Version::HTTP_10 && !head.end && declared.is_none() {
        *response.version_mut() = http::Version::HTTP_10;
    }
    response
}

async fn pump_outcome(rx: &mut Option<oneshot::Receiver<PumpEnd>>) -> Result<PumpEnd, oneshot::error::RecvError> {
    match rx {
        Some(rx) => rx.await,
        None => std::future::pending().await,
    }
}

struct Pump {
    stream: StreamId,
    outbox: Outbox,
    credit: Arc<Semaphore>,
    side: RequestSide,
    limits: ForwardLimits,
}

impl Pump {
    /// Starts streaming `body` on `port`'s stream; the task ends with the
    /// handle, and the receiver hears how the body ended.
    fn start(
        port: &StreamPort,
        body: Incoming,
        limits: ForwardLimits,
    ) -> (AbortOnDropHandle<()>, oneshot::Receiver<PumpEnd>) {
        let (tx, rx) = oneshot::channel();
        let job = Pump {
            stream: port.id,
            outbox: port.outbox().clone(),
            credit: port.credit(),
            side: port.request_side(),
            limits,
        };
        let task = tokio::spawn(async move {
            let _ = tx.send(job.run(body).await);
        });
        (AbortOnDropHandle::new(task), rx)
    }

    /// Streams the caller's body to the client in chunks, within the credit
    /// the client grants, and never more than the body limit.
    async fn run(self, mut body: Incoming) -> PumpEnd {
        let mut total: u64 = 0;
        loop {
            // The client hears why, for the history: it only sees the body stop.
            let frame = match tokio::time::timeout(self.limits.timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(None) => break,
                Ok(Some(Err(err))) if err.is_incomplete_message() || !is_malformed(&err) => {
                    self.side
                        .abandon("the caller went away before its request body was complete");
                    return PumpEnd::CallerGone;
                }
                Ok(Some(Err(_))) => {
                    self.side
                        .abandon(&format!("{MALFORMED_BODY}; the relay answered the caller 400"));
                    return PumpEnd::Malformed;
                }
                Err(_) => {
                    let waited = format_duration(self.limits.timeout);
                    self.side.abandon(&format!(
                        "the request body stopped arriving for {waited}; the relay answered the caller 408"
                    ));
                    return PumpEnd::Stalled;
                }
            };
            // Trailers are hop-by-hop metadata of chunked coding; not relayed.
            let Ok(mut data) = frame.into_data() else { continue };
            total += data.len() as u64;
            if total > self.limits.max_body {
                self.side
                    .abandon("the request body went over the relay's limit; the relay answered the caller 413");
                return PumpEnd::TooLarge;
            }
            let last_frame = body.is_end_stream();
            while !data.is_empty() {
                let chunk = data.split_to(data.len().min(CHUNK_SIZE));
                let end = last_frame && data.is_empty();
                if !self.send(chunk, end).await {
                    return PumpEnd::TunnelGone;
                }
                if end {
                    self.side.finished();
                    return PumpEnd::Done;
                }
            }
            if last_frame {
                break;
            }
        }
        if !self.send(Bytes::new(), true).await {
            return PumpEnd::TunnelGone;
        }
        self.side.finished();
        PumpEnd::Done
    }

    async fn send(&self, chunk: Bytes, end: bool) -> bool {
        if !chunk.is_empty() {
            // chunk.len() <= CHUNK_SIZE, so it fits in u32.
            match self.credit.acquire_many(chunk.len() as u32).await {
                Ok(permit) => permit.forget(),
                Err(_) => return false,
            }
        }
        let msg = ServerMessage::RequestBody {
            stream: self.stream,
            end,
        };
        self.outbox.send(&msg, &chunk).await.is_ok()
    }
}

fn too_large(limit: u64) -> Response<RelayBody> {
    closing(answer(StatusCode::PAYLOAD_TOO_LARGE, over_limit(limit)))
}

/// What the caller of a body over `limit` is told.
fn over_limit(limit: u64) -> String {
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

/// `refused` with the connection closed after it: the rest of the body is
/// not worth reading just to keep the connection.
fn closing(mut refused: Response<RelayBody>) -> Response<RelayBody> {
    refused
        .headers_mut()
        .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    refused
}

/// Answers a request whose head does not fit in a frame the client would
/// accept: sent anyway, it would cost the whole tunnel its session. The
/// client hears of it with what fits.
fn unframable(err: EncodeError, turning: &TurnAway<'_>) -> Response<RelayBody> {
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

/// What the relay says of a request body that is not valid HTTP.
const MALFORMED_BODY: &str = "the request body's chunked coding was malformed";

/// Whether reading a body failed on its bytes (hyper's chunked decoder
/// reports bad framing as invalid data) rather than on the connection: a
/// caller that hangs up mid-body, with unread bytes left, resets it.
fn is_malformed(err: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            );
        }
        source = cause.source();
    }
    // No I/O cause: a parse error of hyper's own.
    true
}

/// What the relay says of a request body its caller's connection broke off.
const UNREADABLE_BODY: &str = "the request body could not be read";

fn unreadable_body() -> Response<RelayBody> {
    answer(StatusCode::BAD_REQUEST, UNREADABLE_BODY)
}

/// Answers the caller 504 and tells the client why its exchange ends.
fn timed_out(port: &StreamPort, timeout: Duration) -> Response<RelayBody> {
    let waited = format_duration(timeout);
    port.abandon(&format!("no answer within {waited}; the relay answered the caller 504"));
    answer(
        StatusCode::GATEWAY_TIMEOUT,
        format!("the tunnel's client did not answer within {waited}"),
    )
}

fn client_gone() -> Response<RelayBody> {
    bad_gateway(CLIENT_GONE)
}

/// The one length an answer's `Content-Length` headers declare, written
/// back in its plain form. hyper refuses to send an answer whose lengths
/// disagree only once its head is being written, and then drops the
/// caller's connection without a word; `+5` or ` 005` would reach the
/// caller as sent, where strict parsers refuse them.
fn declared_length(headers: &mut http::HeaderMap) -> Result<Option<u64>, String> {
    let values = headers.get_all(http::header::CONTENT_LENGTH);
    let declared = content_length::declared(values.iter().map(http::HeaderValue::as_bytes)).map_err(|_| {
        format!(
            "the tunnel's client sent an answer whose Content-Length is not one number: {}",
            content_length::shown(values.iter().map(http::HeaderValue::as_bytes))
        )
    })?;
    // One value, written as the number is: nothing to write back.
    let mut each = values.iter();
    let plain = match (each.next(), each.next()) {
        (Some(only), None) => {
            let text = only.as_bytes();
            text.iter().all(u8::is_ascii_digit) && (text.len() == 1 || text.first() != Some(&b'0'))
        }
        _ => false,
    };
    if let Some(length) = declared.filter(|_| !plain) {
        headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(length));
    }
    Ok(declared)
}

/// The body of an answer that came whole in its head's frame, checked
/// against the length its headers declare. hyper writes a body of known
/// size under the handler's `Content-Length` and trusts the two to agree:
/// a client that declared fewer bytes than it sent would have the rest
/// read by the caller as the next response on its connection (perhaps the
/// answer to a request for another tunnel), and one that declared more
/// would leave the caller waiting for bytes that never come.
fn whole_body(
    declared: Option<u64>,
    body: Bytes,
    method: &http::Method,
    status: StatusCode,
) -> Result<Option<Bytes>, String> {
    if !carries_body(method, status) {
        return Ok(None);
    }
    match declared {
        Some(length) if length != body.len() as u64 => Err(format!(
            "the tunnel's client sent a body of {} bytes under Content-Length: {length}",
            body.len()
        )),
        _ => Ok((!body.is_empty()).then_some(body)),
    }
}

/// Whether an answer carries a body its Content-Length measures. These do
/// not: the length, if any, is that of the representation a GET would
/// have got.
fn carries_body(method: &http::Method, status: StatusCode) -> bool {
    method != http::Method::HEAD && !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
}

/// A reason the tunnel's client gave, as the caller reads it: on one line,
/// its control characters escaped (whoever runs the client chose them, and
/// the caller may be reading in a terminal), and of a sensible length.
fn clients_reason(reason: &str) -> String {
    /// Longer than any reason PortPreview's client gives.
    const LONGEST: usize = 500;
    portpreview_shared::text::shorten(&portpreview_shared::sanitize::escape_str(reason), LONGEST)
}

fn bad_gateway(text: impl Into<String>) -> Response<RelayBody> {
    answer(StatusCode::BAD_GATEWAY, text)
}

#[cfg(test)]
mod tests {
    use http::header::CONTENT_LENGTH;
    use http::{HeaderMap, HeaderValue};

    use super::declared_length;

    fn lengths(values: &[&str]) -> (Result<Option<u64>, String>, Vec<String>) {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CONTENT_LENGTH, HeaderValue::from_str(value).unwrap());
        }
        let declared = declared_length(&mut headers);
        let written = headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        (declared, written)
    }

    /// Whatever form the lengths came in, one plain number goes on.
    #[test]
    fn a_content_length_goes_on_as_one_plain_number() {
        assert_eq!(lengths(&["5"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["0"]), (Ok(Some(0)), vec!["0".to_owned()]));
        assert_eq!(lengths(&[" 5 "]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["005"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["5", "5"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&[]), (Ok(None), vec![]));
        assert!(lengths(&["+5"]).0.is_err());
        assert!(lengths(&["5", "6"]).0.is_err());
    }
}
