//! Relays one caller's request through a tunnel and streams the answer back.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::CHUNK_SIZE;
use portpreview_shared::request_ref::RequestHeadRef;
use portpreview_shared::stall::WakeGrace;
use tokio::sync::oneshot;
use tokio_util::task::AbortOnDropHandle;

use crate::body::{answer, closing, retry_shortly, RelayBody};
use crate::headers::{request_headers, Hop};
use crate::port::StreamPort;
use crate::registry::{BodyAtOpen, OpenError, Registry, Route, Tunnel};
use crate::stream::Inbound;
use crate::turned_away::{declared_body_size, TurnedAway};
use crate::write_stall::StallNote;
use crate::writer::SendError;

mod pump;
mod refusal;
mod reply;

use pump::{credit_out, more_credit, pump_outcome, Pump, PumpEnd, MALFORMED_BODY};
use refusal::{
    bad_gateway, client_gone, client_stalled, clients_reason, cut_short, over_limit, timed_out, too_large, unframable,
};
use reply::{response, AnswerHead};

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

/// Sends `req` to `tunnel` as `target` and answers with what the client
/// sends. `registry` routes `name` again when the client went away while
/// the body came.
pub async fn forward(
    tunnel: Arc<dyn Tunnel>,
    registry: &dyn Registry,
    name: &str,
    req: Request<Incoming>,
    target: String,
    hop: &Hop<'_>,
    limits: ForwardLimits,
) -> Response<RelayBody> {
    let (parts, body) = req.into_parts();
    let declared = declared_body_size(&parts.headers);
    // The tunnel the name leads to once the body has come, when its client
    // went away meanwhile and is back.
    let rerouted: Arc<dyn Tunnel>;
    let mut turning = TurnAway {
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
        // A caller that went away gets no answer, one that closed only its
        // side reads this one: which, the relay learns only by writing it.
        Err(Unread::Broken { got }) => {
            return turning.answer(
                StatusCode::BAD_REQUEST,
                format!("{}; it was not forwarded", cut_short(got as u64, declared)),
            )
        }
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
    let mut port = match tunnel.open(body_at_open) {
        Ok(port) => port,
        // Its client went away while the body came: a reconnect takes
        // seconds, and so can a body. The name leads to where it is now.
        Err(OpenError::Gone) => match registry.route(name) {
            Route::Live(next) if !Arc::ptr_eq(&next, &tunnel) => {
                rerouted = next;
                turning.tunnel = &*rerouted;
                match rerouted.open(body_at_open) {
                    Ok(port) => port,
                    Err(err) => return not_opened(err, name, &turning, &inline),
                }
            }
            Route::Reconnecting => return crate::reconnecting::answer_held(registry, name, &turning.request),
            Route::Live(_) | Route::Unknown => return client_gone(),
        },
        Err(err) => return not_opened(err, name, &turning, &inline),
    };
    if let Some(stall) = parts.extensions.get::<Arc<StallNote>>() {
        port.watch_caller(Arc::clone(stall));
    }
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
    // A head that never left ends its stream unheard of (see `send_head`).
    let sent = tokio::time::timeout_at(deadline, port.send_head(&head, &inline)).await;
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(SendError::Unframable(err))) => return unframable(err, &turning),
        Ok(Err(SendError::Closed)) => return client_gone(),
        Err(_) => return client_stalled(limits.timeout),
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
    let mut grace = WakeGrace::default();
    // Once the body has all gone, part of it may still be on its way to
    // the client (a slow link), or waiting on a handler that reads it
    // slowly: while the client's credit comes back, the client is taking
    // it, and the handler's time starts over each time it takes more.
    let credit = port.credit();
    let mut taking = false;
    loop {
        tokio::select! {
            event = port.recv() => {
                return match event {
                    Some(Inbound::Head { status, headers, body, end }) => {
                        let head = AnswerHead { status, headers, first: body, end };
                        // A handler may answer before it reads the whole
                        // body (a 401 to a bad signature): the rest is
                        // not read once the answer is done.
                        let unread = pump_end.as_mut().is_some_and(|end| !matches!(end.try_recv(), Ok(PumpEnd::Done)));
                        let answer = response(port, head, parts, pump, limits);
                        if unread { closing(answer) } else { answer }
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
                    Ok(PumpEnd::Done) => {
                        answer_wait.as_mut().reset(tokio::time::Instant::now() + limits.timeout);
                        taking = credit_out(&credit);
                    }
                    Ok(PumpEnd::TooLarge) => return too_large(limits.max_body),
                    Ok(PumpEnd::Malformed) => return answer(StatusCode::BAD_REQUEST, MALFORMED_BODY),
                    Ok(PumpEnd::Stalled) => {
                        let waited = format_duration(limits.timeout);
                        return answer(
                            StatusCode::REQUEST_TIMEOUT,
                            format!("the request body stopped arriving: nothing came for {waited}"),
                        );
                    }
                    Ok(PumpEnd::CallerGone { got }) => {
                        let declared = declared_body_size(&parts.headers);
                        return answer(
                            StatusCode::BAD_REQUEST,
                            format!(
                                "{}; what came was passed on, so the handler may have had part of it",
                                cut_short(got, declared)
                            ),
                        );
                    }
                    Ok(PumpEnd::ClientStalled) => return client_stalled(limits.timeout),
                    Ok(PumpEnd::TunnelGone) | Err(_) => return client_gone(),
                }
            }
            came_back = more_credit(&credit), if taking => {
                if came_back {
                    answer_wait.as_mut().reset(tokio::time::Instant::now() + limits.timeout);
                }
                taking = came_back && credit_out(&credit);
            }
            () = &mut answer_wait => {
                // This process was not running when the time ran out: the
                // in-process relay of a tunnel paused with it, or a relay
                // stopped. The answer may wait in the socket, unread.
                let now = tokio::time::Instant::now().into_std();
                if let Some(later) = grace.after(answer_wait.deadline().into_std(), now) {
                    answer_wait.as_mut().reset(later.into());
                    continue;
                }
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
    /// The caller's connection failed mid-body, `got` bytes into it.
    Broken { got: usize },
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
        Ok(Err(got)) => Err(Unread::Broken { got }),
        Err(_) => Err(Unread::Late),
    }
}

/// Every data byte of `body`, which is small. A body that comes in one
/// piece, as most small ones do, is taken as it is: no list of pieces, no
/// copy. When the caller's connection breaks, how many bytes came.
async fn read_whole(mut body: Incoming) -> Result<Bytes, usize> {
    let mut first = Bytes::new();
    let mut more = Vec::new();
    while let Some(frame) = body.frame().await {
        let got = first.len().max(more.len());
        // Trailers are hop-by-hop metadata of chunked coding; not relayed.
        let Ok(data) = frame.map_err(|_| got)?.into_data() else {
            continue;
        };
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
        OpenError::Busy => retry_shortly(turning.answer_with(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many requests in flight for tunnel {name}"),
            inline,
        )),
        // Its body, still arriving, was not read: nothing to keep of it.
        OpenError::Uploading => retry_shortly(turning.answer(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many request bodies still arriving for tunnel {name}; try again shortly"),
        )),
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
