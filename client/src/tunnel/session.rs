//! One connected session: reads the relay's frames, runs an exchange per
//! stream, and writes every ready frame with a single flush.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, Stream, StreamExt};
use portpreview_shared::codec;
use portpreview_shared::message::{
    grantable, ServerMessage, StreamId, MAX_IN_FLIGHT, RELAY_SHUTTING_DOWN, STREAM_WINDOW,
};
use portpreview_shared::stall::overslept;
use portpreview_shared::text::truncate;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::{self, JoinSet};
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::body::{Backlog, Chunk, Inflow};
use super::contact::Contact;
use super::exchange::{self, Answered, Head, Shared, Steering, NO_STREAM, RELAY_SHUT_DOWN};
use super::in_flight::{InFlight, Joined};
use super::outbox::Outbox;
use super::pause::Heard;
use super::{frame_writer, persist};
use crate::events::{report, TunnelEvent};

/// The relay pings every few seconds; this long without any frame means it is gone.
pub const RELAY_SILENCE_LIMIT: Duration = Duration::from_secs(15);

/// How long the silence limit, once reached, waits for one more turn of the
/// reactor before it ends the session. A process continued just before
/// the limit (ctrl-z, then `fg`) has its timer fire before it has learnt
/// what its socket holds; the frames of the pause come a moment later.
const LAST_CHANCE: Duration = Duration::from_secs(1);

/// On shutdown, how long exchanges in flight may take to finish.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// How long exchanges abandoned at shutdown get to record why they ended.
const ABANDON_LIMIT: Duration = Duration::from_secs(1);

/// Exchanges running at once past which a new stream is answered 503
/// here. Twice what a relay may keep in flight: an exchange that has sent
/// its answer's end, or whose stream the relay reset, is still running
/// while the relay has freed its place already.
const MAX_STREAMS: usize = 2 * MAX_IN_FLIGHT;

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// Shutdown was asked for.
    Shutdown,
    /// The relay refused to go on; retrying will not help.
    Refused(String),
    /// The socket closed or broke; a reconnect may help.
    Lost(String),
    /// The relay sent what the protocol forbids; this side closed the
    /// connection, saying why. A reconnect may help.
    Malformed(String),
}

struct StreamEntry {
    chunks: Option<(mpsc::UnboundedSender<Chunk>, Backlog)>,
    credit: Arc<Semaphore>,
    reset: oneshot::Sender<String>,
    /// The exchange's task: one that fails is known only by it.
    task: task::Id,
}

/// What a session keeps between the events it answers: the streams in
/// flight and their exchanges, and whether it is stopping.
struct Session {
    shared: Arc<Shared>,
    outbox: Outbox,
    streams: HashMap<StreamId, StreamEntry>,
    exchanges: InFlight,
    /// Cancelled as the session ends, for the exchanges still in flight.
    abandon: CancellationToken,
    /// Finishing what is in flight, as the user asked to stop.
    draining: bool,
    /// When the relay last sent a frame (the silence limit counts from
    /// it), and a pause of this process long enough for the relay to have
    /// given up on it, until the relay answers the ping sent after it: the
    /// requests read meanwhile wait for that answer (see [`super::pause`]),
    /// and so do the exchanges' records of answers sent then.
    contact: Contact,
    /// The requests read during the pause, whose exchanges wait until the
    /// relay answers: what to record of each, should it never forward.
    held: HashMap<StreamId, HeldRequest>,
    /// Body chunks read during a pause, for requests forwarded before it
    /// and those held, kept until the relay answers: if it gave up, their
    /// callers have their 502, and a body that ends would have the handler
    /// act on it.
    /// Each with the way to its exchange, as a stream whose end is held
    /// takes no more.
    held_bodies: Vec<(StreamId, Chunk, mpsc::UnboundedSender<Chunk>)>,
    /// The answers sent lately, which a reset coming after may amend:
    /// their callers went away while they were on their way.
    answered: Answered,
    /// The user was told that requests past [`MAX_STREAMS`] in flight go
    /// unrecorded: once a session, not once a request.
    told_full: bool,
}

/// A request read during a pause, held until the relay answers the ping
/// sent after it: its head and the body that came with it, as they are
/// recorded should it never be forwarded, and the way to let it go.
struct HeldRequest {
    head: Head,
    body: Bytes,
    /// Its size, when the head brought it whole.
    declared: Option<u64>,
    clear: oneshot::Sender<()>,
}

/// Serves one socket until it ends or the user stops the tunnel. When the
/// socket is lost, the exchanges still in flight are handed back rather
/// than cut off: their handlers may yet answer, and the history should show
/// what they said (see [`exchange::run`]).
pub async fn serve<S>(socket: S, shared: Arc<Shared>) -> (SessionEnd, JoinSet<StreamId>)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message, Error = tungstenite::Error> + Unpin,
{
    let (sink, mut frames) = socket.split();
    // A relay in this process was paused with it, and gave up on nothing.
    let relay_in_process = shared.relay_in_process;
    let (outbox, queue) = Outbox::new();
    let before_send = persist::Persist::new(shared.recorder.clone(), shared.events.clone());
    let writer = frame_writer::write_frames(sink, queue, before_send);
    tokio::pin!(writer);
    let mut writer_done = false;
    let drain_deadline = tokio::time::sleep(Duration::MAX);
    tokio::pin!(drain_deadline);
    let mut session = Session {
        shared,
        outbox,
        streams: HashMap::new(),
        exchanges: InFlight::default(),
        abandon: CancellationToken::new(),
        draining: false,
        contact: Contact::new(!relay_in_process),
        held: HashMap::new(),
        held_bodies: Vec::new(),
        answered: Answered::default(),
        told_full: false,
    };
    // Counted from the last frame, so exchanges finishing meanwhile never
    // restart the count; the deadline moves only when it fires early, not
    // on every frame.
    let silence = tokio::time::sleep(RELAY_SILENCE_LIMIT);
    tokio::pin!(silence);
    let mut last_chance = false;
    // Made once, not on every turn of the loop: each one made registers
    // with its token, under a lock, and unregisters when dropped, which a
    // turn per frame and per finished exchange paid twice over.
    let stop = session.shared.stop.clone();
    let stop_asked = stop.drain.cancelled();
    let stop_now = stop.now.cancelled();
    tokio::pin!(stop_asked, stop_now);

    let end = loop {
        tokio::select! {
            // In this order: frames before the silence limit, so a process
            // woken from a pause reads what the relay sent during it
            // before it judges the relay silent.
            biased;
            () = &mut stop_asked, if !session.draining => {
                if let Some(end) = session.stop_asked(drain_deadline.as_mut()) {
                    break end;
                }
            }
            () = &mut drain_deadline, if session.draining => break SessionEnd::Shutdown,
            () = &mut stop_now, if session.draining => break session.stop_now(),
            result = &mut writer => {
                writer_done = true;
                break SessionEnd::Lost(match result {
                    Ok(()) => "the socket closed".into(),
                    Err(err) => format!("writing to the relay failed: {err}"),
                });
            }
            Some(done) = session.exchanges.join_next() => {
                if let Some(end) = session.exchange_ended(done) {
                    break end;
                }
            }
            next = frames.next() => {
                if let ControlFlow::Break(end) = session.received(next) {
                    break end;
                }
            }
            () = &mut silence => {
                // The tunnel itself was not running (stopped, or the laptop
                // asleep): what the relay sent meanwhile is still unread,
                // and its silence is counted from now.
                if overslept(silence.deadline().into_std(), Instant::now().into_std()) {
                    session.heard_from_relay();
                }
                let quiet_until = session.contact.heard().at() + RELAY_SILENCE_LIMIT;
                if quiet_until > Instant::now() {
                    last_chance = false;
                    silence.as_mut().reset(quiet_until);
                    continue;
                }
                if !std::mem::replace(&mut last_chance, true) {
                    silence.as_mut().reset(Instant::now() + LAST_CHANCE);
                    continue;
                }
                break SessionEnd::Lost(format!("the relay was silent for {}s", RELAY_SILENCE_LIMIT.as_secs()));
            }
        }
    };
    let writer = (!writer_done).then_some(writer);
    session.finish(end, writer).await
}

impl Session {
    /// Ends the session for `end`: a shutdown says goodbye and gives its
    /// exchanges a moment; the exchanges still running are handed back,
    /// with `end`, once the writer, if still running, has sent what it can.
    async fn finish(
        mut self,
        end: SessionEnd,
        writer: Option<Pin<&mut impl std::future::Future<Output = Result<(), tungstenite::Error>>>>,
    ) -> (SessionEnd, JoinSet<StreamId>) {
        // Answers sent after a pause, waiting to learn whether the relay
        // still waited for them, learn that it may not have.
        self.contact.over();
        // The relay never answered: it may have given up on the tunnel and
        // answered their callers 502, so what was held is not forwarded.
        let quiet = self.contact.quiet();
        for (_, held) in std::mem::take(&mut self.held) {
            let why = format!(
                "not forwarded: read after {}s without a word from the relay (PortPreview paused, or the \
                 relay or the network stalled), and the connection ended before the relay answered the ping \
                 asking whether it still waited: it may have answered the caller 502",
                quiet.as_secs()
            );
            self.record_held(held, why);
        }
        if end == SessionEnd::Shutdown {
            self.outbox.send_raw(Message::Close(Some(CloseFrame {
                code: CloseCode::Away,
                reason: "client shutting down".into(),
            })));
        }
        drop(self.outbox);
        // Exchanges still in flight are abandoned: the relay answers their callers
        // 502 and never resends them, so each delivery happens at most once.
        self.abandon.cancel();
        let mut exchanges = self.exchanges;
        if end == SessionEnd::Shutdown {
            // Each gets a moment to record why it ended; what is still running
            // is cut off.
            let settled = async { while exchanges.join_next().await.is_some() {} };
            if tokio::time::timeout(ABANDON_LIMIT, settled).await.is_err() {
                exchanges.shutdown().await;
            }
        }
        // Let the writer send what is queued (the close frame among it),
        // briefly. Over a connection already lost nothing more arrives, and
        // exchanges left running keep its queue open: waiting would only keep
        // the tunnel from hearing a ctrl-c for that second.
        if let Some(writer) = writer.filter(|_| !matches!(end, SessionEnd::Lost(_))) {
            // The close frame of a malformed session, among others, still goes.
            let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
        }
        (end, exchanges.into_tasks())
    }

    /// The user asked to stop: the session ends now if nothing is in
    /// flight, or once what is has finished, within [`DRAIN_LIMIT`].
    fn stop_asked(&mut self, drain_deadline: Pin<&mut Sleep>) -> Option<SessionEnd> {
        if self.exchanges.is_empty() {
            return Some(SessionEnd::Shutdown);
        }
        // Finish what is in flight, briefly; new requests get 503.
        self.draining = true;
        drain_deadline.reset(tokio::time::Instant::now() + DRAIN_LIMIT);
        report(
            &self.shared.events,
            TunnelEvent::Stopping {
                in_flight: self.exchanges.len(),
                within: DRAIN_LIMIT,
            },
        );
        None
    }

    /// The user asked to stop a second time: what is in flight is cut off.
    fn stop_now(&self) -> SessionEnd {
        report(
            &self.shared.events,
            TunnelEvent::Stopping {
                in_flight: self.exchanges.len(),
                within: Duration::ZERO,
            },
        );
        SessionEnd::Shutdown
    }

    /// Forgets an exchange's stream once the exchange has ended; ends a
    /// draining session with its last exchange.
    fn exchange_ended(&mut self, done: Joined) -> Option<SessionEnd> {
        match done {
            Joined::Finished(stream) => {
                self.streams.remove(&stream);
            }
            Joined::Failed { task, why } => {
                // Rare enough to look for: every other exchange is
                // known by its stream, with no second map to keep.
                let failed = self
                    .streams
                    .iter()
                    .find(|(_, entry)| entry.task == task)
                    .map(|(stream, _)| *stream);
                tracing::error!(stream = ?failed, %why, "an exchange failed; the relay answers its caller");
                // Its caller would otherwise wait out the relay's
                // timeout for an answer nobody will send.
                if let Some(stream) = failed {
                    self.streams.remove(&stream);
                    self.outbox.reset(stream, "the exchange failed inside PortPreview");
                }
            }
        }
        if self.draining && self.exchanges.is_empty() {
            return Some(SessionEnd::Shutdown);
        }
        None
    }

    /// Notes that the relay was heard from now, or that this process ran
    /// again after a pause, which the silence limit then counts from. After
    /// a pause long enough for the relay to have given up on this client,
    /// it is asked whether it did.
    fn heard_from_relay(&mut self) {
        if let Some(ping) = self.contact.hear(Heard::now()) {
            self.outbox.send_raw(Message::Ping(ping));
        }
    }

    /// Takes one read of the socket: a message, or how it ended.
    fn received(&mut self, next: Option<Result<Message, tungstenite::Error>>) -> ControlFlow<SessionEnd> {
        let message = match next {
            None => return ControlFlow::Break(SessionEnd::Lost("the relay closed the connection".into())),
            Some(Err(err)) => return ControlFlow::Break(SessionEnd::Lost(read_failed(err))),
            Some(Ok(message)) => message,
        };
        self.heard_from_relay();
        if self.contact.unanswered() {
            return ControlFlow::Break(SessionEnd::Lost(
                "the relay did not answer the ping sent after a pause".into(),
            ));
        }
        let frame = match message {
            Message::Binary(frame) => frame,
            Message::Close(close) => {
                if close.as_ref().is_some_and(|frame| frame.reason == RELAY_SHUTTING_DOWN) {
                    // Its callers still waiting had their 502 before the close.
                    for (_, entry) in self.streams.drain() {
                        let _ = entry.reset.send(RELAY_SHUT_DOWN.into());
                    }
                }
                return ControlFlow::Break(SessionEnd::Lost(close_reason(close)));
            }
            Message::Pong(pong) if self.contact.ends_pause(&pong) => {
                for (_, held) in self.held.drain() {
                    let _ = held.clear.send(());
                }
                for (stream, chunk, exchange) in std::mem::take(&mut self.held_bodies) {
                    // A stream reset meanwhile takes nothing more.
                    if self.streams.contains_key(&stream) {
                        let _ = exchange.send(chunk);
                    }
                }
                return ControlFlow::Continue(());
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return ControlFlow::Continue(()),
            Message::Text(_) => {
                return ControlFlow::Break(protocol_error(&self.outbox, "text message on a binary protocol"))
            }
        };
        let (message, body) = match codec::decode::<ServerMessage>(frame) {
            Ok(decoded) => decoded,
            Err(err) => return ControlFlow::Break(protocol_error(&self.outbox, &err.to_string())),
        };
        match message {
            ServerMessage::RequestHead {
                stream,
                method,
                target,
                headers,
                end,
            } => self.open(
                Head {
                    stream,
                    method,
                    target,
                    headers,
                },
                body,
                end,
            ),
            ServerMessage::RequestBody { stream, end } => self.request_body(stream, body, end),
            ServerMessage::Reset { stream, reason } => {
                self.reset(stream, &reason);
                ControlFlow::Continue(())
            }
            ServerMessage::Window { stream, credit } => {
                self.window(stream, credit);
                ControlFlow::Continue(())
            }
            ServerMessage::TurnedAway {
                method,
                target,
                headers,
                body_size,
                status,
                reason,
                waited_ms,
                told_after_ms,
            } => {
                let head = Head {
                    stream: NO_STREAM,
                    method,
                    target,
                    headers,
                };
                let when = (Duration::from_millis(waited_ms), Duration::from_millis(told_after_ms));
                self.turned_away(head, (body, body_size), status, &reason, when);
                ControlFlow::Continue(())
            }
            ServerMessage::Refused { reason } => {
                ControlFlow::Break(SessionEnd::Refused(super::connect::shown_reason(&reason)))
            }
            ServerMessage::Welcome { .. } => ControlFlow::Break(protocol_error(&self.outbox, "a second welcome")),
        }
    }

    /// A new request: its exchange starts, and the session keeps the
    /// handles that feed and steer it.
    fn open(&mut self, head: Head, body: Bytes, end: bool) -> ControlFlow<SessionEnd> {
        let stream = head.stream;
        if stream == NO_STREAM {
            return ControlFlow::Break(protocol_error(
                &self.outbox,
                "a request on stream 0, which is no stream",
            ));
        }
        if self.streams.contains_key(&stream) {
            return ControlFlow::Break(protocol_error(&self.outbox, "stream id reused while in flight"));
        }
        if self.draining {
            self.outbox.turn_away(stream, "the tunnel's client is shutting down");
            let why = "PortPreview was stopping: it answered the caller 503, and the request was not forwarded";
            let size = end.then_some(body.len() as u64);
            self.record_unforwarded(head, (body, size), (Duration::ZERO, Duration::ZERO), why.into());
            return ControlFlow::Continue(());
        }
        // Counted by the exchanges that run: one whose stream the relay has
        // reset goes on to give the handler's answer to the history.
        if self.exchanges.len() >= MAX_STREAMS {
            tracing::debug!(
                stream,
                "the relay sent more requests at once than a tunnel carries; answered 503"
            );
            self.tell_full();
            self.outbox.turn_away(
                stream,
                &format!("the tunnel's client has {MAX_STREAMS} requests in flight already"),
            );
            return ControlFlow::Continue(());
        }
        // A body that came whole with its head needs no channel.
        let (tx, rx) = if end {
            (None, None)
        } else {
            let (tx, rx) = mpsc::unbounded_channel();
            let backlog = Backlog::default();
            (Some((tx, backlog.clone())), Some((rx, backlog)))
        };
        let (reset, on_reset) = oneshot::channel();
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW as usize));
        // Read during a pause, it waits until the relay answers: sent on
        // before, it would make a duplicate of the tunnel's own should the
        // relay have given up (the provider retries what failed).
        let cleared = self.contact.pausing().then(|| {
            let (clear, cleared) = oneshot::channel();
            let declared = end.then_some(body.len() as u64);
            self.held.insert(
                stream,
                HeldRequest {
                    head: head.clone(),
                    body: body.clone(),
                    declared,
                    clear,
                },
            );
            cleared
        });
        let inflow = Inflow::new(stream, body, end, rx, self.outbox.clone());
        let steering = Steering {
            credit: credit.clone(),
            reset: on_reset,
            abandoned: self.abandon.clone(),
            cleared,
            contact: self.contact.heeded(),
            answered: self.answered.clone(),
        };
        // Boxed: the exchange's state is about 6 KiB, which the
        // task would otherwise copy on spawn and again when it ends.
        let exchange = exchange::run(self.shared.clone(), head, inflow, steering, self.outbox.clone());
        let task = self.exchanges.spawn(Box::pin(exchange));
        self.streams.insert(
            stream,
            StreamEntry {
                chunks: tx,
                credit,
                reset,
                task,
            },
        );
        ControlFlow::Continue(())
    }

    /// A request the relay answered `status` itself for `reason`, `waited`
    /// after it came and told of `told_after` its answer (`when`), with its
    /// body as far as the relay sent it and the size its caller declared:
    /// recorded beside the exchanges, as the history's writer may make it
    /// wait for room.
    fn turned_away(
        &mut self,
        head: Head,
        body: (Bytes, Option<u64>),
        status: u16,
        reason: &str,
        when: (Duration, Duration),
    ) {
        // The reason was written for the caller; the history keeps a line of it.
        let why = format!("the relay answered the caller {status}: {}", truncate(reason, 200));
        self.record_unforwarded(head, body, when, why);
    }

    /// Records a request held during a pause that is not forwarded, for `why`.
    fn record_held(&mut self, held: HeldRequest, why: String) {
        let HeldRequest {
            head, body, declared, ..
        } = held;
        self.record_unforwarded(head, (body, declared), (Duration::ZERO, Duration::ZERO), why);
    }

    /// Records a request that is not forwarded, for `why`, beside the
    /// exchanges, as the history's writer may make it wait for room.
    fn record_unforwarded(&mut self, head: Head, body: (Bytes, Option<u64>), when: (Duration, Duration), why: String) {
        if self.exchanges.len() >= MAX_STREAMS {
            tracing::debug!("a request not forwarded was not recorded: too many in flight");
            self.tell_full();
            return;
        }
        let record = exchange::turned_away(self.shared.clone(), head, body, when, why);
        self.exchanges.spawn(record);
    }

    /// Tells the user, once a session, that the tunnel carries as many
    /// requests as it can: callers past them get 503 and go unrecorded.
    /// Most often the history holds them up (another process has its lock).
    fn tell_full(&mut self) {
        if std::mem::replace(&mut self.told_full, true) {
            return;
        }
        let text = format!(
            "{MAX_STREAMS} requests are in flight, the most a tunnel carries: callers past them are answered 503 and \
             not recorded (is the history held up? another process may hold its lock)"
        );
        // Shown by the display, in the TUI too; the log keeps a note.
        tracing::info!("{text}");
        report(&self.shared.events, TunnelEvent::Notice { text });
    }

    /// More of a request's body, passed on to its exchange; during a pause,
    /// held until the relay answers (see [`Session::held_bodies`]). Checked
    /// as it arrives, so that the stream's window bounds what is held.
    fn request_body(&mut self, stream: StreamId, body: Bytes, end: bool) -> ControlFlow<SessionEnd> {
        // A stream whose body has ended (or never had one) takes no more.
        let Some(entry) = self.streams.get_mut(&stream) else {
            return ControlFlow::Continue(());
        };
        let Some((chunks, backlog)) = &entry.chunks else {
            return ControlFlow::Continue(());
        };
        if !backlog.arrived(body.len()) {
            return ControlFlow::Break(protocol_error(&self.outbox, "request body beyond the stream's window"));
        }
        // Bytes are bounded by the window; an empty chunk says nothing but
        // the end, and a stream of them would queue without bound.
        if body.is_empty() && !end {
            return ControlFlow::Break(protocol_error(
                &self.outbox,
                "an empty request body chunk that does not end its stream",
            ));
        }
        let chunk = Chunk { data: body, end };
        if self.contact.pausing() {
            self.held_bodies.push((stream, chunk, chunks.clone()));
        } else {
            let _ = chunks.send(chunk);
        }
        if end {
            entry.chunks = None;
        }
        ControlFlow::Continue(())
    }

    /// The relay reset a stream: its exchange is told why.
    fn reset(&mut self, stream: StreamId, reason: &str) {
        tracing::debug!(stream, %reason, "relay reset a stream");
        // Its exchange ends without a word; what it would have recorded is
        // recorded here.
        if let Some(held) = self.held.remove(&stream) {
            let why = format!(
                "{}; not forwarded: it came during a pause, before the relay answered the tunnel's ping",
                truncate(reason, 200)
            );
            self.record_held(held, why);
        }
        if let Some(entry) = self.streams.remove(&stream) {
            // The reason goes into the history; a relay
            // gets a line of it, not a novel.
            let _ = entry.reset.send(truncate(reason, 200).to_owned());
        }
        // Its exchange may have sent the whole answer before the reset
        // came, and recorded it as delivered.
        self.answered.amend(&self.shared, stream, reason);
    }

    /// The relay granted a stream more response-body credit.
    fn window(&self, stream: StreamId, credit: u32) {
        if let Some(entry) = self.streams.get(&stream) {
            entry
                .credit
                .add_permits(grantable(entry.credit.available_permits(), credit));
        }
    }
}

/// Why reading from the relay failed, in words for the user.
fn read_failed(err: tungstenite::Error) -> String {
    match err {
        tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            "the relay's connection was reset".into()
        }
        // The same under TLS, which rustls words as a missing close_notify.
        tungstenite::Error::Io(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the relay's connection was reset".into()
        }
        // After a sleep the relay has long closed the connection, and the
        // first write the read flushes says so in the system's words.
        tungstenite::Error::Io(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            ) =>
        {
            format!("the relay's connection was closed under it ({err})")
        }
        err => err.to_string(),
    }
}

fn protocol_error(outbox: &Outbox, reason: &str) -> SessionEnd {
    let reason = format!("malformed frame from the relay: {reason}");
    outbox.send_raw(Message::Close(Some(CloseFrame {
        code: CloseCode::Protocol,
        reason: truncate(&reason, 120).to_string().into(),
    })));
    SessionEnd::Malformed(reason)
}

fn close_reason(close: Option<CloseFrame>) -> String {
    match close {
        Some(frame) if !frame.reason.is_empty() => format!("the relay closed the connection: {}", frame.reason),
        _ => "the relay closed the connection".into(),
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
