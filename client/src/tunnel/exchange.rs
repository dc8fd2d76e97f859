//! One request's trip: relay → local handler → relay, recorded on the way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::BodyExt;
use portpreview_shared::message::{Header, StreamId};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use super::body::{Capture, Held, Inflow, Keep, StreamedBody, WholeBody};
use super::outage::Outage;
use super::outbox::Outbox;
use super::respond::{answer_error, failure, relay_response, AnswerSide, Timing};
use super::Stop;
use crate::events::{report, report_delivered, TunnelEvent};
use crate::forward::{undefined_status, Forwarder, LocalBody};
use crate::store::recorder::{RecordError, Recorder, Ticket};
use crate::store::{size_past_cut, NewDelivery, Outcome, Summary, MAX_STORED_BODY};

/// Request bodies up to this size are read whole and recorded before
/// forwarding; larger ones stream, and are recorded as the handler read them.
const BUFFERED_BODY: usize = 1024 * 1024;

/// Why an exchange whose request body never arrived whole failed.
const CUT_SHORT: &str = "the caller went away before its request body was complete; it was not forwarded";
/// Why an exchange whose request body stopped part way to the handler failed.
const PART_FORWARDED: &str = "the request body stopped part way; the handler got only part of it";

/// Why an exchange cut off by the end of its relay connection failed.
const ABANDONED: &str = "the connection to the relay ended before the answer";
/// Why an exchange cut off by the user stopping PortPreview failed.
const STOPPED: &str = "PortPreview was stopped before the answer came";

/// How the Host header reaches the local handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostHeader {
    /// Set Host to the local target (what most local servers expect).
    Rewrite,
    /// Keep the Host the caller sent.
    Preserve,
}

/// What every exchange of a tunnel shares.
pub struct Shared {
    /// The local target's client.
    pub forwarder: Forwarder,
    /// The history writer, when recording.
    pub recorder: Option<Recorder>,
    /// Where deliveries are reported.
    pub events: mpsc::Sender<TunnelEvent>,
    /// Host header policy.
    pub host_header: HostHeader,
    /// How long the local handler may take to answer.
    pub local_timeout: Duration,
    /// Public URL of the tunnel, kept with each delivery.
    pub public_url: Mutex<String>,
    /// How the user stops the tunnel: an exchange abandoned once they
    /// asked says so in the history.
    pub stop: Stop,
    /// Deliveries cannot be recorded (the inbox cannot be written: a full
    /// disk), told once, not per delivery.
    pub not_recording: Outage,
}

impl Shared {
    /// Whether a request with `headers` goes to the handler with the
    /// caller's Host: the history records the same answer, for replays.
    fn preserves_host(&self, headers: &[Header]) -> bool {
        self.host_header == HostHeader::Preserve && headers.iter().any(|h| h.name.eq_ignore_ascii_case("host"))
    }

    /// Tells the display that deliveries are not recorded, once until
    /// recording works again; the log keeps one note per change too.
    fn recording_failed(&self, err: &RecordError) {
        if !self.not_recording.began() {
            tracing::debug!(%err, "delivery not recorded");
            return;
        }
        // Shown by the display, in the TUI too; the log keeps a note.
        tracing::info!(%err, "deliveries are not recorded; forwarding goes on");
        report(
            &self.events,
            TunnelEvent::NotRecording {
                reason: Some(err.to_string()),
            },
        );
    }

    /// Tells the display that deliveries are recorded again, if they were not.
    fn recording_worked(&self) {
        if self.not_recording.ended() {
            tracing::info!("deliveries are recorded again");
            report(&self.events, TunnelEvent::NotRecording { reason: None });
        }
    }

    /// How much of each body the history keeps: nothing when nothing is recorded.
    fn keep(&self) -> Keep {
        match &self.recorder {
            Some(recorder) => Keep::new(MAX_STORED_BODY, recorder.held_budget()),
            None => Keep::default(),
        }
    }
}

/// A request head as the relay sent it.
pub struct Head {
    /// Stream id.
    pub stream: StreamId,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Headers in order.
    pub headers: Vec<Header>,
}

/// The per-stream handles the session keeps to steer an exchange.
pub struct Steering {
    /// Response-body credit granted by the relay.
    pub credit: Arc<Semaphore>,
    /// Fires with the relay's reason when it resets the stream.
    pub reset: oneshot::Receiver<String>,
    /// Cancelled when the connection to the relay ends with the exchange
    /// still in flight.
    pub abandoned: CancellationToken,
}

/// What an exchange leaves outside itself, so that it outlives the exchange
/// being cut off.
#[derive(Default)]
struct Kept {
    /// The recorded request's ticket: a request recorded before its caller
    /// went away still gets its answer, the failure.
    ticket: Option<Ticket>,
    /// The room the answer's body holds in the history's budget, until the
    /// answer is handed to the recorder.
    answer_room: Held,
    /// A streamed request not yet recorded. It is recorded once the handler
    /// answers or, should the relay end the stream first (the caller hung
    /// up, the body went over the limit), with what the handler had read.
    streaming: Option<Streaming>,
}

/// A request whose body streams to the handler, kept whole until recorded.
struct Streaming {
    request: NewDelivery,
    /// What the handler reads, until it is moved into `request`.
    capture: Option<Arc<Mutex<Capture>>>,
    declared: u64,
    /// The room the moved body holds in the budget.
    room: Held,
}

impl Streaming {
    /// Moves what the handler has read so far into the request, once.
    fn settle(&mut self) {
        if let Some(capture) = self.capture.take() {
            let capture = std::mem::take(&mut *capture.lock().unwrap_or_else(|p| p.into_inner()));
            self.room = body_into(&mut self.request, capture, self.declared);
        }
    }
}

/// What the live display needs of a request, kept apart so the request
/// itself can move into the recorder without a copy.
struct Line {
    received_at_ms: i64,
    started: Instant,
    method: String,
    path: String,
}

/// Carries one request to the local target and its answer back.
pub async fn run(shared: Arc<Shared>, head: Head, inflow: Inflow, steering: Steering, outbox: Outbox) -> StreamId {
    let stream = head.stream;
    let line = Line {
        received_at_ms: crate::time::now_ms(),
        started: Instant::now(),
        method: head.method.clone(),
        path: head.target.clone(),
    };
    let mut kept = Kept::default();
    let Steering {
        credit,
        mut reset,
        abandoned,
    } = steering;
    let outcome = {
        let answer = AnswerSide {
            credit,
            head_sent: AtomicBool::new(false),
        };
        let mut exchanged = std::pin::pin!(exchange(&shared, head, inflow, &line, &answer, &outbox, &mut kept));
        tokio::select! {
            // The exchange goes first: when the relay drops a stream mid-body,
            // the exchange records the cut request before the reset ends it.
            biased;
            outcome = &mut exchanged => outcome,
            // The relay says why in words meant for the history: the caller
            // hung up, or the relay gave up and answered the caller itself.
            Ok(reason) = &mut reset => answer_for_nobody(&shared, exchanged, &answer, line.started, &reason).await,
            () = abandoned.cancelled() => {
                if shared.stop.asked.is_cancelled() {
                    failure(line.started, STOPPED.into())
                } else {
                    answer_for_nobody(&shared, exchanged, &answer, line.started, ABANDONED).await
                }
            }
        }
    };
    // A body that stopped short says only that; the relay's reset, when
    // it sent one, says why (malformed, stalled, the caller gone).
    let outcome = match (reset.try_recv(), outcome.error.as_deref().and_then(cut_body)) {
        (Ok(reason), Some(cut)) => failure(line.started, format!("{reason}; {cut}")),
        _ => outcome,
    };
    if kept.ticket.is_none() {
        kept.ticket = record_streaming(&shared, &mut kept.streaming).await;
    }
    finish(&shared, line, outcome, kept.ticket).await;
    drop(kept.answer_room);
    stream
}

/// No caller will receive the handler's answer, for the reason `why`: the
/// caller hung up, the relay gave up waiting and answered it, or the
/// connection to the relay ended (and the relay answered 502). The handler
/// may be acting on the request all the same (charging the card, sending
/// the e-mail), as a server goes on after its client has gone, and the
/// provider will retry: so the local request is not cut off, and its
/// answer, if it comes within the local timeout and before the user stops,
/// is recorded beside the note that no caller received it. Stopping gives
/// it the time any request in flight gets.
async fn answer_for_nobody(
    shared: &Shared,
    exchanged: std::pin::Pin<&mut impl std::future::Future<Output = Outcome>>,
    answer: &AnswerSide,
    started: Instant,
    why: &str,
) -> Outcome {
    // No credit comes for a stream the relay has dropped: sends must not wait for it.
    answer.credit.close();
    let answered = tokio::select! {
        answered = tokio::time::timeout(shared.local_timeout, exchanged) => answered.ok(),
        () = shared.stop.drain_over() => None,
    };
    let Some(mut outcome) = answered else {
        let why = if shared.stop.asked.is_cancelled() {
            format!("{why}; {STOPPED}")
        } else {
            why.to_owned()
        };
        return failure(started, why);
    };
    // The head went ahead of the body: the caller had the status, and the
    // history says so, or the delivery would pass for one no caller got.
    if answer.head_sent.load(Ordering::Relaxed) && outcome.status.is_some() {
        outcome.error = Some(format!(
            "{why}: the caller had the status and headers, not the whole body"
        ));
        return outcome;
    }
    // Status stays empty, as for every answer that did not reach its caller.
    outcome.error = Some(match (outcome.status.take(), outcome.error.take()) {
        (Some(status), _) => format!("{why}; the handler then answered {status}, which reached no caller"),
        (None, Some(error)) => match cut_body(&error) {
            Some(cut) => format!("{why}; {cut}"),
            None => format!("{why}; then {error}"),
        },
        (None, None) => why.into(),
    });
    outcome
}

/// What became of a request body that never came whole, when `error`
/// says only that it stopped: beside the reason it stopped, this says
/// whether the handler saw any of it.
fn cut_body(error: &str) -> Option<&'static str> {
    match error {
        CUT_SHORT => Some("it was not forwarded"),
        PART_FORWARDED => Some("the handler got only part of its body"),
        _ => None,
    }
}

async fn exchange(
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
    let mut prefix = Vec::new();
    let mut seen = 0;
    let mut stalled = false;
    while seen < BUFFERED_BODY {
        // Each chunk within the local timeout, as the relay waits for the
        // caller's: a stream whose body stops coming must not hold its
        // exchange, and its place in the session, for good.
        match tokio::time::timeout(shared.local_timeout, inflow.next()).await {
            Ok(Some(chunk)) => {
                seen += chunk.data.len();
                prefix.push(chunk.data);
            }
            Ok(None) => break,
            Err(_) => {
                stalled = true;
                break;
            }
        }
    }
    let buffered = inflow.is_done();
    let declared = declared_length(&head.headers).unwrap_or(0);
    let mut capture = Capture::of(&prefix, declared, shared.keep());
    capture.complete = inflow.is_complete();
    if stalled {
        // Kept as cut short, as below: the handler never saw it.
        let request = new_delivery(shared, head, line.received_at_ms);
        kept.ticket = record_captured(shared, request, capture, declared).await;
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
        kept.ticket = record_captured(shared, request, capture, declared).await;
        return failure(started, CUT_SHORT.into());
    }
    let mut streamed = None;
    let body: LocalBody = if buffered {
        WholeBody::new(prefix).boxed()
    } else {
        let shared_capture = Arc::new(Mutex::new(std::mem::take(&mut capture)));
        streamed = Some(shared_capture.clone());
        StreamedBody {
            prefix,
            inflow,
            capture: shared_capture,
        }
        .boxed()
    };
    let local = build_request(shared, &head, body, buffered);
    let request = new_delivery(shared, head, line.received_at_ms);
    let local = match local {
        Ok(local) => local,
        Err(reason) => {
            kept.ticket = record(shared, request).await;
            return answer_error(stream, outbox, started, 400, reason);
        }
    };

    // The handler's time starts when it is sent the request, not while
    // recording waits for room.
    let send = |local| tokio::time::timeout(shared.local_timeout, shared.forwarder.send(local));
    let response = match streamed {
        None => {
            // In the inbox before the handler even sees it; the session writes
            // the inbox out before any answer leaves.
            kept.ticket = record_captured(shared, request, capture, declared).await;
            send(local).await
        }
        Some(capture) => {
            kept.streaming = Some(Streaming {
                request,
                capture: Some(capture.clone()),
                declared,
                room: Held::default(),
            });
            let response = send(local).await;
            let cut = capture.lock().is_ok_and(|c| c.cut);
            // What the handler read before answering is what it acted on.
            kept.ticket = record_streaming(shared, &mut kept.streaming).await;
            // The relay ended the stream mid-body, and says why; the
            // handler's failure to answer a body cut under it is no news.
            // A body still on its way is another matter: the handler could
            // not be reached, or failed, and the caller hears so now.
            if cut && !matches!(response, Ok(Ok(_))) {
                return failure(started, PART_FORWARDED.into());
            }
            response
        }
    };

    let response = match response {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => return answer_error(stream, outbox, started, 502, err.to_string()),
        Err(_) => {
            let reason = format!(
                "{} did not answer within {}",
                shared.forwarder.target(),
                portpreview_shared::duration::format_duration(shared.local_timeout)
            );
            return answer_error(stream, outbox, started, 504, reason);
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
        return answer_error(stream, outbox, started, 502, reason);
    }
    if let Some(reason) = undefined_status(shared.forwarder.target(), response.status()) {
        return answer_error(stream, outbox, started, 502, reason);
    }
    let timing = Timing {
        started,
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

/// Records `request` with the body `capture` kept, holding the capture's
/// room in the budget until the recorder has the bytes.
async fn record_captured(shared: &Shared, mut request: NewDelivery, capture: Capture, declared: u64) -> Option<Ticket> {
    let _room = body_into(&mut request, capture, declared);
    record(shared, request).await
}

/// Moves the body `capture` kept into `request`; a body that never went by
/// whole keeps the size its caller `declared`, so the history shows it cut
/// short. Without a declared size (chunked) it is recorded one byte longer
/// than what came: its true size is unknown, but it was cut, and replay
/// must refuse it. Returns the room the bytes hold in the budget.
fn body_into(request: &mut NewDelivery, capture: Capture, declared: u64) -> Held {
    let complete = capture.complete;
    let (bytes, size, room) = capture.into_parts();
    request.request_body_size = if complete {
        size
    } else {
        declared.max(size_past_cut(size))
    };
    request.request_body = bytes;
    room
}

/// Records the streamed request in `slot`. Cut off while it waits for room
/// or writes the body, it leaves the request in `slot` for the next call.
async fn record_streaming(shared: &Shared, slot: &mut Option<Streaming>) -> Option<Ticket> {
    let recorder = shared.recorder.as_ref()?;
    let streaming = slot.as_mut()?;
    streaming.settle();
    let staged = recorder.stage(&streaming.request).await;
    let streaming = slot.take()?;
    recorded(
        shared,
        staged.and_then(|staged| recorder.append_request(staged, streaming.request)),
    )
}

async fn record(shared: &Shared, request: NewDelivery) -> Option<Ticket> {
    let recorder = shared.recorder.as_ref()?;
    recorded(shared, recorder.record_request(request).await)
}

/// The ticket of a recorded request; a failure costs the history, never the forwarding.
fn recorded(shared: &Shared, result: Result<Ticket, RecordError>) -> Option<Ticket> {
    match result {
        Ok(ticket) => {
            shared.recording_worked();
            Some(ticket)
        }
        Err(err) => {
            shared.recording_failed(&err);
            None
        }
    }
}

/// The Content-Length a request head declares, if any.
fn declared_length(headers: &[Header]) -> Option<u64> {
    let header = headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"))?;
    std::str::from_utf8(&header.value).ok()?.trim().parse().ok()
}

fn new_delivery(shared: &Shared, head: Head, received_at_ms: i64) -> NewDelivery {
    let host_preserved = shared.preserves_host(&head.headers);
    NewDelivery {
        received_at_ms,
        host_preserved,
        tunnel_url: shared.public_url.lock().map(|url| url.clone()).unwrap_or_default(),
        target: shared.forwarder.target().to_string(),
        method: head.method,
        path: head.target,
        request_headers: head.headers,
        ..NewDelivery::default()
    }
}

fn build_request(shared: &Shared, head: &Head, body: LocalBody, buffered: bool) -> Result<Request<LocalBody>, String> {
    let method = Method::from_bytes(head.method.as_bytes()).map_err(|_| format!("invalid method {:?}", head.method))?;
    let target = shared.forwarder.target();
    // A whole body's length is set from the bytes, not copied: the caller's
    // header could disagree with them. Set even at 0, as the caller sent it:
    // some servers answer a POST without a length with 411.
    let length = buffered.then(|| http_body::Body::size_hint(&body).exact()).flatten();
    let mut request = Request::builder()
        .method(method)
        .uri(target.request_path(&head.target))
        .body(body)
        .map_err(|e| format!("invalid request target: {e}"))?;
    let preserve_host = shared.preserves_host(&head.headers);
    let headers = request.headers_mut();
    let mut declared_length = false;
    for header in &head.headers {
        let name = header.name.as_str();
        if buffered && name.eq_ignore_ascii_case("content-length") {
            declared_length = true;
            continue;
        }
        if !preserve_host && name.eq_ignore_ascii_case("host") {
            continue;
        }
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&header.value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => {
                tracing::warn!(header = %portpreview_shared::sanitize::escape_str(name), "header dropped: not valid HTTP")
            }
        }
    }
    // A Host that is not valid HTTP was dropped above: the target's stands in.
    if !preserve_host || !headers.contains_key(http::header::HOST) {
        if let Ok(host) = HeaderValue::from_str(&target.authority()) {
            headers.insert(http::header::HOST, host);
        }
    }
    if let (true, Some(length)) = (declared_length, length) {
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    Ok(request)
}

/// Hands the answer to the history, whose writer reports the delivery once
/// it is stored; a delivery the history will not report is reported here.
async fn finish(shared: &Shared, line: Line, outcome: Outcome, ticket: Option<Ticket>) {
    let unrecorded = Summary {
        id: 0,
        received_at_ms: line.received_at_ms,
        method: line.method,
        path: line.path,
        status: outcome.status,
        duration_ms: outcome.duration_ms,
        provider: None,
        event_key: String::new(),
        event_key_source: String::new(),
        event_scope: String::new(),
        delivery_count: 1,
        error: outcome.error.clone(),
        replay_of: None,
    };
    if let (Some(recorder), Some(ticket)) = (&shared.recorder, ticket) {
        match recorder.record_outcome(ticket, outcome).await {
            Ok(()) => return,
            Err(err) => shared.recording_failed(&err),
        }
    }
    report_delivered(&shared.events, unrecorded);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;

    /// A body that stopped says whether the handler saw any of it, beside
    /// whatever reason the relay gives for the stop; other errors say
    /// nothing of the body.
    #[test]
    fn a_cut_body_says_how_much_the_handler_saw() {
        assert_eq!(cut_body(CUT_SHORT), Some("it was not forwarded"));
        assert_eq!(cut_body(PART_FORWARDED), Some("the handler got only part of its body"));
        assert_eq!(cut_body("connection refused"), None);
    }

    /// A full disk fails every delivery's recording: the display is told
    /// once, and once more when recording works again.
    #[test]
    fn recording_that_fails_is_told_once_per_change() {
        let (events, mut shown) = mpsc::channel(16);
        let shared = Shared {
            forwarder: Forwarder::new(Target::parse("127.0.0.1:9").expect("target")),
            recorder: None,
            events,
            host_header: HostHeader::Rewrite,
            local_timeout: Duration::from_secs(1),
            public_url: Default::default(),
            stop: Stop::default(),
            not_recording: Default::default(),
        };
        let full = || RecordError::Inbox(std::io::Error::from_raw_os_error(28));
        for _ in 0..3 {
            assert!(recorded(&shared, Err(full())).is_none());
        }
        shared.recording_worked();
        shared.recording_worked();
        let told: Vec<TunnelEvent> = std::iter::from_fn(|| shown.try_recv().ok()).collect();
        assert_eq!(
            told,
            [
                TunnelEvent::NotRecording {
                    reason: Some("cannot write the history inbox: No space left on device (os error 28)".into())
                },
                TunnelEvent::NotRecording { reason: None },
            ]
        );
    }
}
