//! The trip to the local handler and back: the request body read, the
//! request recorded and sent, the handler's answer relayed to the caller.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use portpreview_shared::sync::lock;

use super::record::{new_delivery, record_kept, Unrecorded};
use super::request::{build_request, declared_length};
use super::{Head, Kept, Line, Reading, Shared, CUT_SHORT, PART_FORWARDED};
use crate::forward::{undefined_status, ForwardError, LocalBody};
use crate::store::{NewDelivery, Outcome};
use crate::tunnel::awake::within;
use crate::tunnel::body::{Capture, EndsRest, Inflow, Rest, StreamedBody, WholeBody};
use crate::tunnel::outbox::Outbox;
use crate::tunnel::respond::{answer_error, failure, relay_response, AnswerSide, Timing};

/// Request bodies up to this size are read whole and recorded before
/// forwarding; larger ones stream, and are recorded as they went by.
const BUFFERED_BODY: usize = 1024 * 1024;

/// What sending a request to the handler came to: its answer's head or its
/// failure; `None` past the local timeout.
type Sent = Option<Result<Response<Incoming>, ForwardError>>;

pub(super) async fn exchange(
    shared: &Shared,
    head: Head,
    mut inflow: Inflow,
    line: &Line,
    answer: &AnswerSide,
    outbox: &Outbox,
    kept: &mut Kept,
) -> Outcome {
    let stream = head.stream;
    let started = line.started;
    // Kept outside while the body comes, so that an exchange cut off then
    // (a stop) still leaves its request to the history.
    let reading = kept.reading.insert(Reading {
        head,
        prefix: Vec::new(),
    });
    let stalled = read_prefix(shared, &mut inflow, &mut reading.prefix).await;
    let Some(Reading { head, prefix }) = kept.reading.take() else {
        return failure(started, "the request was lost while its body came".into());
    };
    let buffered = inflow.is_done();
    let declared = declared_length(&head.headers).unwrap_or(0);
    let mut capture = Capture::of(&prefix, declared, shared.keep());
    capture.complete = inflow.is_complete();
    if stalled {
        // Kept as cut short, as below: the handler never saw it.
        let request = new_delivery(shared, head, line.received_at_ms);
        kept.record(shared, request, capture, declared).await;
        let reason = format!(
            "the request body stopped arriving: nothing came for {}; it was not forwarded",
            portpreview_shared::duration::format_duration(shared.local_timeout)
        );
        return answer_error(stream, outbox, started, 408, reason);
    }
    if buffered && !capture.complete {
        // The relay dropped the stream mid-body: its caller went away. The
        // handler never sees a cut body as if it were whole, and the history
        // keeps it marked cut short, so replay refuses it.
        let request = new_delivery(shared, head, line.received_at_ms);
        kept.record(shared, request, capture, declared).await;
        return failure(started, CUT_SHORT.into());
    }
    let (body, streamed) = local_body(prefix, inflow, &mut capture, buffered);
    let local = build_request(shared, &head, body, buffered);
    let request = new_delivery(shared, head, line.received_at_ms);
    let local = match local {
        Ok(local) => local,
        Err(reason) => {
            let capture = std::mem::take(&mut capture);
            kept.record(shared, request, capture, declared).await;
            return answer_error(stream, outbox, started, 400, reason);
        }
    };

    let (response, handler_since) = match streamed {
        None => {
            // In the inbox before the handler even sees it; the session writes
            // the inbox out before any answer leaves.
            kept.record(shared, request, capture, declared).await;
            let since = Instant::now();
            (send(shared, local).await, since)
        }
        Some(streamed) => match send_streamed(shared, local, request, streamed, declared, kept).await {
            StreamedSend::Sent(response, since) => (response, since),
            StreamedSend::Cut => return failure(started, PART_FORWARDED.into()),
            StreamedSend::Stalled => {
                let reason = format!(
                    "{} took no more of the request body for {} and did not answer",
                    shared.forwarder.target(),
                    portpreview_shared::duration::format_duration(shared.local_timeout)
                );
                return answer_error(stream, outbox, started, 504, reason);
            }
        },
    };

    let response = match relayable(shared, response) {
        Ok(response) => response,
        Err((status, reason)) => return answer_error(stream, outbox, started, status, reason),
    };
    let timing = Timing {
        started,
        handler_since,
        patience: shared.local_timeout,
    };
    relay_response(
        response,
        stream,
        answer,
        outbox,
        timing,
        shared.keep(),
        &mut kept.answer_room,
    )
    .await
}

/// Reads the request body into `prefix` until [`BUFFERED_BODY`] bytes have
/// come, or all of it; says whether it stalled on the way.
async fn read_prefix(shared: &Shared, inflow: &mut Inflow, prefix: &mut Vec<Bytes>) -> bool {
    let mut seen = 0;
    while seen < BUFFERED_BODY {
        // Each chunk within the local timeout, as the relay waits for the
        // caller's: a stream whose body stops coming must not hold its
        // exchange, and its place in the session, for good.
        match within(shared.local_timeout, std::pin::pin!(inflow.next())).await {
            Some(Some(chunk)) => {
                seen += chunk.data.len();
                prefix.push(chunk.data);
            }
            Some(None) => break,
            None => return true,
        }
    }
    false
}

/// A body streaming to the handler, as the exchange follows it.
struct Streamed {
    /// What went by, for the history.
    capture: Arc<Mutex<Capture>>,
    /// The rest of the stream, which the exchange takes should the
    /// handler answer before reading it all.
    rest: Arc<Mutex<Rest>>,
}

/// The body the handler reads: whole when it came whole; otherwise what
/// came so far and then the rest as it comes, captured for the history
/// through the returned handle as the handler reads it.
fn local_body(
    prefix: Vec<Bytes>,
    inflow: Inflow,
    capture: &mut Capture,
    buffered: bool,
) -> (LocalBody, Option<Streamed>) {
    if buffered {
        return (WholeBody::new(prefix).boxed(), None);
    }
    let streamed = Streamed {
        capture: Arc::new(Mutex::new(std::mem::take(capture))),
        rest: Rest::of(prefix, inflow),
    };
    let body = StreamedBody {
        rest: streamed.rest.clone(),
        capture: streamed.capture.clone(),
    }
    .boxed();
    (body, Some(streamed))
}

/// Sends `local`, whose body streams to the handler, and records `request`
/// with its body: once the body has all gone to it, while it works on the
/// answer (so a tunnel killed meanwhile leaves the request in its inbox,
/// as it does a small one); when it answers before reading it all, at
/// once, or, for a body it refused or stopped reading, once [`read_on`]
/// has the rest.
async fn send_streamed(
    shared: &Shared,
    local: Request<LocalBody>,
    request: NewDelivery,
    Streamed { capture, rest }: Streamed,
    declared: u64,
    kept: &mut Kept,
) -> StreamedSend {
    kept.rest = Some(EndsRest(rest.clone()));
    kept.unrecorded = Some(Unrecorded::streamed(request, capture.clone(), declared));
    let answer = shared.forwarder.send(local);
    tokio::pin!(answer);
    // Whether the body was cut is read before recording, which takes the
    // capture's bytes and leaves an empty one behind.
    let (response, since, cut) = match until_uploaded(&mut answer, &capture, &rest, shared.local_timeout).await {
        Uploaded::Stalled => {
            // The rest is still the caller's request: the history keeps it
            // whole, as for a handler that refused it, so it can be replayed.
            read_on(shared, &capture, &rest).await;
            kept.ticket = record_kept(shared, &mut kept.unrecorded).await;
            return StreamedSend::Stalled;
        }
        Uploaded::Answered(answered) => {
            // A refusal, or a failure, is the handler done with the body:
            // the rest goes to the history. An answer that goes on (a 2xx
            // streaming while the handler reads, as a full-duplex one does)
            // keeps the body going to the handler, recorded as far as it went.
            if refuses(&answered) {
                read_on(shared, &capture, &rest).await;
            }
            (Some(answered), Instant::now(), lock(&capture).cut)
        }
        Uploaded::At(ended_at) => {
            // Fixed once the body has ended.
            let cut = lock(&capture).cut;
            // Recorded before the answer is awaited, so the ticket is kept
            // should the exchange be cut off while the handler works (a
            // stop): its answer then is the stop. The answer waits unread
            // meanwhile, and the handler's time runs from the body's end,
            // the recording's aside.
            let recording = Instant::now();
            kept.ticket = record_kept(shared, &mut kept.unrecorded).await;
            let spent = ended_at.elapsed().saturating_sub(recording.elapsed());
            let left = shared.local_timeout.saturating_sub(spent);
            (within(left, &mut answer).await, ended_at, cut)
        }
    };
    if kept.ticket.is_none() {
        kept.ticket = record_kept(shared, &mut kept.unrecorded).await;
    }
    // The relay ended the stream mid-body, and says why; the
    // handler's failure to answer a body cut under it is no news.
    // A body still on its way is another matter: the handler could
    // not be reached, or failed, and the caller hears so now.
    if cut && !matches!(response, Some(Ok(_))) {
        return StreamedSend::Cut;
    }
    StreamedSend::Sent(response, since)
}

/// What sending a request whose body streams came to.
enum StreamedSend {
    /// The handler's answer, or its failure, and when its time to give it
    /// began.
    Sent(Sent, Instant),
    /// The relay cut the body under the handler, which did not answer.
    Cut,
    /// The handler took none of the bytes waiting for it for as long as it
    /// may take to answer, and did not answer.
    Stalled,
}

/// Sends `local` to the handler. The handler's time starts when it is sent
/// the request, not while recording waits for room.
async fn send(shared: &Shared, local: Request<LocalBody>) -> Sent {
    within(shared.local_timeout, std::pin::pin!(shared.forwarder.send(local))).await
}

/// How far a request whose body streams to the handler had come.
enum Uploaded<T> {
    /// The handler answered before the body had all gone to it.
    Answered(T),
    /// The body had all gone to it (or was cut) at this time.
    At(Instant),
    /// The handler took none of the bytes waiting for it for `patience`.
    /// How far it read is not told: what it took went into its socket's
    /// buffers, megabytes of them, not necessarily into the handler.
    Stalled,
}

/// Waits for the body to have all gone to the handler as the caller
/// uploads it, or for the handler to answer first. A large body on a slow
/// link is not the handler's delay: the local timeout runs from the body's
/// end (or its cut), and the relay bounds the upload itself. A handler
/// that leaves bytes waiting for `patience` is: it stopped reading, and
/// would otherwise hold the caller until the relay gives up on the upload.
async fn until_uploaded<F: std::future::Future + Unpin>(
    answer: &mut F,
    capture: &Mutex<Capture>,
    rest: &Mutex<Rest>,
    patience: Duration,
) -> Uploaded<F::Output> {
    let mut taken_before = 0;
    let mut waiting_since = None;
    loop {
        let ended_at = lock(capture).ended_at;
        if let Some(ended_at) = ended_at {
            return Uploaded::At(ended_at);
        }
        if let Ok(answered) = tokio::time::timeout(UPLOAD_CHECK, &mut *answer).await {
            return Uploaded::Answered(answered);
        }
        let (taken, waiting) = Rest::reading(rest);
        if taken != taken_before || !waiting {
            taken_before = taken;
            waiting_since = None;
            continue;
        }
        let since = *waiting_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= patience {
            return Uploaded::Stalled;
        }
    }
}

/// How often a streaming exchange looks whether its body has all gone.
const UPLOAD_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// Whether an answer the handler gave before reading the whole body says
/// it is done with it: a 4xx or 5xx, or no answer at all.
fn refuses(answered: &Result<Response<Incoming>, ForwardError>) -> bool {
    answered.as_ref().map_or(true, |response| {
        response.status().is_client_error() || response.status().is_server_error()
    })
}

/// After an answer that came before the body had all gone to the handler
/// (a 401 decided on the headers, a size limit): the rest is still the
/// caller's request, so the exchange takes it from the handler and reads
/// it into the history before the answer goes back, at the caller's pace
/// (the relay reads the whole body from the caller in any case), each
/// chunk within the local timeout. The handler is sent no more of it, and
/// its connection closes once the exchange is over.
async fn read_on(shared: &Shared, capture: &Mutex<Capture>, rest: &Mutex<Rest>) {
    let Some(mut inflow) = Rest::take(rest) else {
        return;
    };
    while let Some(Some(chunk)) = within(shared.local_timeout, std::pin::pin!(inflow.next())).await {
        lock(capture).take_in(&chunk);
        if chunk.end {
            return;
        }
    }
    // Ended short, or stalled past the local timeout: as far as it came.
    if inflow.is_done() {
        lock(capture).end();
    }
}

/// The handler's answer, if it is one the relay can pass to the caller;
/// otherwise the status and reason the caller gets instead.
fn relayable(shared: &Shared, sent: Sent) -> Result<Response<Incoming>, (u16, String)> {
    let response = match sent {
        Some(Ok(response)) => response,
        Some(Err(err)) => return Err((502, err.to_string())),
        None => {
            // The handler is cut off, not stopped: whoever replays the
            // delivery from the history must not take it for one that
            // never acted.
            let reason = format!(
                "{} did not answer within {}; it may still act on the request",
                shared.forwarder.target(),
                portpreview_shared::duration::format_duration(shared.local_timeout)
            );
            return Err((504, reason));
        }
    };
    // hyper passes interim answers by, but gives back a 101 as final; the
    // relay cannot hand a caller an upgraded connection, so it is a failure
    // the caller and the history see alike.
    if response.status().is_informational() {
        let reason = format!(
            "{} answered {}: the tunnel forwards no protocol switches",
            shared.forwarder.target(),
            response.status()
        );
        return Err((502, reason));
    }
    if let Some(reason) = undefined_status(shared.forwarder.target(), response.status()) {
        return Err((502, reason));
    }
    Ok(response)
}
