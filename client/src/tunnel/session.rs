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
use super::exchange::{self, Head, Shared, Steering, NO_STREAM, RELAY_SHUT_DOWN};
use super::in_flight::{InFlight, Joined};
use super::outbox::Outbox;
use super::pause::{Heard, Pause};
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
    /// When the relay last sent a frame: the silence limit counts from it.
    last_heard: Heard,
    /// A pause of this process long enough for the relay to have given up
    /// on it, until the relay answers the ping sent after it: the requests
    /// read meanwhile wait for that answer (see [`super::pause`]).
    pause: Option<Pause>,
    /// The requests read during the pause, whose exchanges wait until the
    /// relay answers: what to record of each, should it never forward.
    held: HashMap<StreamId, HeldRequest>,
    /// Pauses so far, which number the pings sent after them.
    pauses: u64,
    /// Body chunks read during a pause, for requests forwarded before it
    /// and those held, kept until the relay answers: if it gave up, their
    /// callers have their 502, and a body that ends would have the handler
    /// act on it.
    /// Each with the way to its exchange, as a stream whose end is held
    /// takes no more.
    held_bodies: Vec<(StreamId, Chunk, mpsc::UnboundedSender<Chunk>)>,
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
        last_heard: Heard::now(),
        pause: None,
        pauses: 0,
        held: HashMap::new(),
        held_bodies: Vec::new(),
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
    let stop_asked = stop.asked.cancelled();
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
                let quiet_until = session.last_heard.at() + RELAY_SILENCE_LIMIT;
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
        // The relay never answered: it may have given up on the tunnel and
        // answered their callers 502, so what was held is not forwarded.
        let quiet = self.pause.as_ref().map_or(Duration::ZERO, |pause| pause.quiet);
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
        let now = Heard::now();
        // A relay in this process was paused with it, and gave up on nothing.
        let noticed = if self.shared.relay_in_process {
            None
        } else {
            Pause::noticed(&self.last_heard, &now, self.pauses)
        };
        if let Some((pause, ping)) = noticed {
            self.pauses += 1;
            self.pause = Some(pause);
            self.outbox.send_raw(Message::Ping(ping));
        }
        self.last_heard = now;
    }

    /// Takes one read of the socket: a message, or how it ended.
    fn received(&mut self, next: Option<Result<Message, tungstenite::Error>>) -> ControlFlow<SessionEnd> {
        let message = match next {
            None => return ControlFlow::Break(SessionEnd::Lost("the relay closed the connection".into())),
            Some(Err(err)) => return ControlFlow::Break(SessionEnd::Lost(read_failed(err))),
            Some(Ok(message)) => message,
        };
        self.heard_from_relay();
        if self.pause.as_ref().is_some_and(Pause::unanswered) {
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
            Message::Pong(pong) if self.pause.as_ref().is_some_and(|pause| pause.answered_by(&pong)) => {
                self.pause = None;
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
            return ControlFlow::Continue(());
        }
        // Counted by the exchanges that run: one whose stream the relay has
        // reset goes on to give the handler's answer to the history.
        if self.exchanges.len() >= MAX_STREAMS {
            tracing::debug!(
                stream,
                "the relay sent more requests at once than a tunnel carries; answered 503"
            );
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
        let cleared = self.pause.is_some().then(|| {
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
            return;
        }
        let record = exchange::turned_away(self.shared.clone(), head, body, when, why);
        self.exchanges.spawn(record);
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
        if self.pause.is_some() {
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
mod tests {
    use futures_util::SinkExt;
    use portpreview_shared::message::ClientMessage;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    use super::*;
    use crate::forward::Forwarder;
    use crate::target::Target;
    use crate::tunnel::Stop;

    /// A relay cut off says so the same way over TLS as over TCP, not in
    /// rustls's words about close_notify.
    #[test]
    fn a_relay_cut_off_reads_the_same_with_and_without_tls() {
        let tcp = tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake);
        let tls = tungstenite::Error::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify",
        ));
        assert_eq!(read_failed(tcp), "the relay's connection was reset");
        assert_eq!(read_failed(tls), "the relay's connection was reset");
    }

    /// A session over an in-memory socket, and the relay's end of it.
    async fn session() -> (
        impl std::future::Future<Output = (SessionEnd, JoinSet<StreamId>)>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        session_timing_out_after(Duration::from_secs(1)).await
    }

    /// A session whose exchanges wait `local_timeout` for the handler.
    async fn session_timing_out_after(
        local_timeout: Duration,
    ) -> (
        impl std::future::Future<Output = (SessionEnd, JoinSet<StreamId>)>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        session_forwarding_to("127.0.0.1:9", local_timeout).await
    }

    /// A session forwarding to `target`.
    async fn session_forwarding_to(
        target: &str,
        local_timeout: Duration,
    ) -> (
        impl std::future::Future<Output = (SessionEnd, JoinSet<StreamId>)>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let socket = WebSocketStream::from_raw_socket(ours, Role::Client, None).await;
        let relay = WebSocketStream::from_raw_socket(theirs, Role::Server, None).await;
        let (events, _) = mpsc::channel(16);
        let shared = Arc::new(Shared {
            forwarder: Forwarder::new(Target::parse(target).expect("target")),
            recorder: None,
            events,
            host_header: exchange::HostHeader::Rewrite,
            local_timeout,
            public_url: Default::default(),
            not_recording: Default::default(),
            stop: Stop::default(),
            relay_in_process: false,
        });
        (serve(socket, shared), relay)
    }

    #[tokio::test(start_paused = true)]
    async fn a_relay_is_given_up_on_after_the_silence_limit_from_its_last_frame() {
        let (serving, mut relay) = session().await;
        let started = Instant::now();
        let relay_side = async {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_secs(10)).await;
                relay.send(Message::Ping(Default::default())).await.expect("ping");
            }
            // Keep reading (the pongs) so the socket stays open, silent.
            while relay.next().await.is_some() {}
        };
        let end = tokio::select! {
            (end, _) = serving => end,
            () = relay_side => panic!("the session closed the socket without ending"),
        };
        assert_eq!(end, SessionEnd::Lost("the relay was silent for 15s".into()));
        // 15 s after the last frame at 20 s, and a last chance.
        let lasted = started.elapsed();
        let due = Duration::from_secs(35) + LAST_CHANCE;
        assert!(
            lasted >= due && lasted < due + Duration::from_secs(1),
            "ended {lasted:?} in, not 15 s (and its last chance) after the last frame at 20 s"
        );
    }

    /// The tunnel stopped for 20 s (a laptop asleep) did not hear the relay
    /// for its own reason: the silence is counted from when it runs again.
    #[tokio::test(start_paused = true)]
    async fn a_pause_of_the_tunnels_own_is_not_the_relays_silence() {
        let (serving, mut relay) = session().await;
        tokio::pin!(serving);
        let started = Instant::now();
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        // The clock moves with nothing run: the process was stopped.
        tokio::time::advance(Duration::from_secs(20)).await;
        let end = tokio::select! {
            (end, _) = serving => end,
            () = async { while relay.next().await.is_some() {} } => panic!("the session closed the socket without ending"),
        };
        assert_eq!(end, SessionEnd::Lost("the relay was silent for 15s".into()));
        let lasted = started.elapsed();
        assert!(
            lasted >= Duration::from_secs(35),
            "ended {lasted:?} in, not 15 s after the tunnel ran again at 20 s"
        );
    }

    /// A frame the protocol forbids closes the connection with a reason the
    /// relay can log, not a bare reset.
    #[tokio::test]
    async fn a_malformed_frame_closes_the_socket_saying_why() {
        let (serving, relay) = session().await;
        let (end, close) = closed_after(serving, relay, vec![Message::Text("hello".into())]).await;
        assert!(matches!(end, SessionEnd::Malformed(_)), "{end:?}");
        assert!(close.reason.starts_with("malformed frame from the relay"), "{close:?}");
    }

    /// Empty body chunks that end nothing are no body: a flood of them would
    /// queue without bound, as the window counts bytes.
    #[tokio::test]
    async fn an_empty_body_chunk_that_ends_nothing_is_refused() {
        let (serving, relay) = session().await;
        let head = post_without_its_body();
        let empty = ServerMessage::RequestBody { stream: 1, end: false };
        let (end, close) = closed_after(serving, relay, vec![frame(&head, b""), frame(&empty, b"")]).await;
        assert!(matches!(end, SessionEnd::Malformed(_)), "{end:?}");
        assert!(close.reason.contains("an empty request body chunk"), "{close:?}");
    }

    /// A body chunk read during a pause is checked as it comes, not when
    /// the relay answers the ping: one that never answers could otherwise
    /// queue what the protocol forbids for as long as the client waits.
    #[tokio::test(start_paused = true)]
    async fn a_body_chunk_read_during_a_pause_is_checked_as_it_comes() {
        let (serving, mut relay) = session_timing_out_after(Duration::from_secs(60)).await;
        tokio::pin!(serving);
        relay.send(frame(&post_without_its_body(), b"")).await.expect("sent");
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(12)).await;
        let empty = ServerMessage::RequestBody { stream: 1, end: false };
        relay.send(frame(&empty, b"")).await.expect("sent");
        // The relay reads nothing more, so the client's ping goes unanswered.
        let (end, _) = serving.await;
        assert!(
            matches!(&end, SessionEnd::Malformed(why) if why.contains("an empty request body chunk")),
            "{end:?}"
        );
    }

    /// What comes for a stream after its body's end is dropped, during a
    /// pause as at any time: the window no longer bounds it, and held, it
    /// would pile up until the relay answered.
    #[tokio::test(start_paused = true)]
    async fn a_body_past_its_end_during_a_pause_is_dropped_not_held() {
        let (serving, mut relay) = session_timing_out_after(Duration::from_secs(60)).await;
        tokio::pin!(serving);
        relay.send(frame(&post_without_its_body(), b"")).await.expect("sent");
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(12)).await;
        let end = ServerMessage::RequestBody { stream: 1, end: true };
        let relay_side = async {
            relay.send(frame(&end, b"x")).await.expect("sent");
            // Past the stream's whole window, each chunk claiming to end it.
            let chunk = vec![b'y'; 60 * 1024];
            for _ in 0..20 {
                relay.send(frame(&end, &chunk)).await.expect("sent");
            }
            // The relay reads nothing more: the client's ping goes unanswered.
            std::future::pending::<()>().await;
        };
        let ended = tokio::select! {
            (ended, _) = serving => ended,
            () = relay_side => unreachable!(),
        };
        // Given up on as silent, not closed over a body beyond its window.
        assert!(matches!(ended, SessionEnd::Lost(_)), "{ended:?}");
    }

    /// Stream 0 is no stream: a request on it would share the number of
    /// the requests the relay turned away.
    #[tokio::test]
    async fn a_request_on_stream_0_is_refused() {
        let (serving, relay) = session().await;
        let head = ServerMessage::RequestHead {
            stream: 0,
            method: "GET".into(),
            target: "/".into(),
            headers: vec![],
            end: true,
        };
        let (end, close) = closed_after(serving, relay, vec![frame(&head, b"")]).await;
        assert!(matches!(end, SessionEnd::Malformed(_)), "{end:?}");
        assert!(close.reason.contains("stream 0"), "{close:?}");
    }

    /// `message` and `body` as one binary frame from the relay.
    fn frame(message: &ServerMessage, body: &[u8]) -> Message {
        Message::Binary(codec::encode(message, body).expect("a frame").into())
    }

    /// A POST whose body is still to come, on stream 1.
    fn post_without_its_body() -> ServerMessage {
        ServerMessage::RequestHead {
            stream: 1,
            method: "POST".into(),
            target: "/hook".into(),
            headers: vec![],
            end: false,
        }
    }

    /// Sends `messages` as the relay, and returns how the session ended and
    /// the close frame it sent.
    async fn closed_after(
        serving: impl std::future::Future<Output = (SessionEnd, JoinSet<StreamId>)>,
        mut relay: WebSocketStream<tokio::io::DuplexStream>,
        messages: Vec<Message>,
    ) -> (SessionEnd, CloseFrame) {
        let relay_side = async {
            for message in messages {
                relay.send(message).await.expect("sent");
            }
            loop {
                match relay.next().await {
                    Some(Ok(Message::Close(frame))) => return frame,
                    Some(Ok(_)) => {}
                    _ => return None,
                }
            }
        };
        let ((end, _), close) = tokio::join!(serving, relay_side);
        let close = close.expect("a close frame");
        assert_eq!(close.code, CloseCode::Protocol);
        (end, close)
    }

    /// Sends `message` as the relay, and reads the client's frames until
    /// one answers a stream: its stream and status.
    async fn answer_to(
        relay: &mut WebSocketStream<tokio::io::DuplexStream>,
        message: ServerMessage,
    ) -> (StreamId, u16) {
        relay.send(frame(&message, b"")).await.expect("sent");
        loop {
            match relay.next().await {
                Some(Ok(Message::Binary(frame))) => {
                    let (message, _) = codec::decode::<ClientMessage>(frame).expect("a valid frame");
                    if let ClientMessage::ResponseHead { stream, status, .. } = message {
                        return (stream, status);
                    }
                }
                Some(Ok(_)) => continue,
                other => panic!("the session ended without answering: {other:?}"),
            }
        }
    }

    /// The client forwards to its own target alone: a full URL in a head
    /// from the relay (a hostile one) is refused, never put in the request
    /// line a handler acting as a proxy would follow.
    #[tokio::test]
    async fn a_request_target_that_is_no_path_is_refused() {
        let (serving, mut relay) = session().await;
        let head = ServerMessage::RequestHead {
            stream: 1,
            method: "GET".into(),
            target: "http://169.254.169.254/latest/meta-data/".into(),
            headers: vec![],
            end: true,
        };
        let answered = tokio::select! {
            answered = answer_to(&mut relay, head) => answered,
            (end, _) = serving => panic!("the session ended first: {end:?}"),
        };
        // Refused before any connection: the target's port has no handler,
        // which would answer 502.
        assert_eq!(answered, (1, 400));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_body_that_never_comes_is_answered_within_the_local_timeout() {
        let (serving, mut relay) = session().await;
        let started = Instant::now();
        let head = post_without_its_body();
        let answered = tokio::select! {
            answered = answer_to(&mut relay, head) => answered,
            (end, _) = serving => panic!("the session ended first: {end:?}"),
        };
        assert_eq!(answered, (1, 408));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(1) && waited < Duration::from_secs(2),
            "answered {waited:?} in, not after the local timeout of 1 s"
        );
    }

    /// A GET on `stream`, whole.
    fn get(stream: StreamId) -> ServerMessage {
        ServerMessage::RequestHead {
            stream,
            method: "GET".into(),
            target: "/hook".into(),
            headers: vec![],
            end: true,
        }
    }

    /// A handler that takes connections and never answers, and whether
    /// anything has connected to it.
    fn listening_handler() -> (std::net::TcpListener, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.set_nonblocking(true).expect("non-blocking");
        let target = listener.local_addr().expect("its address").to_string();
        (listener, target)
    }

    /// Runs the exchanges a session left until they end, then says whether
    /// any of them connected to `handler`.
    async fn reached(handler: &std::net::TcpListener, mut left: JoinSet<StreamId>) -> bool {
        while left.join_next().await.is_some() {}
        match handler.accept() {
            Ok(_) => true,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(err) => panic!("accept failed: {err}"),
        }
    }

    /// Lets the session run a while with the relay reading nothing, time
    /// for a request taken for cleared to reach `handler`; then takes the
    /// relay away: the session ends as lost, and nothing reached `handler`.
    async fn gone_without_forwarding(
        mut serving: Pin<&mut impl std::future::Future<Output = (SessionEnd, JoinSet<StreamId>)>>,
        relay: WebSocketStream<tokio::io::DuplexStream>,
        handler: &std::net::TcpListener,
    ) {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            (end, _) = serving.as_mut() => panic!("the session ended first: {end:?}"),
        }
        drop(relay);
        let (end, left) = serving.await;
        assert!(matches!(end, SessionEnd::Lost(_)), "{end:?}");
        assert!(!reached(handler, left).await, "a request held was forwarded");
    }

    /// The answer to the ping after one pause, read after a second pause,
    /// does not end the second: what the relay sent during it may have
    /// been answered 502 by then. A relay gone before it answers the
    /// second ping leaves the request unforwarded.
    #[tokio::test(start_paused = true)]
    async fn an_answer_to_an_earlier_pause_does_not_end_the_next() {
        let (handler, target) = listening_handler();
        let (serving, mut relay) = session_forwarding_to(&target, Duration::from_secs(1)).await;
        tokio::pin!(serving);
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(12)).await;
        relay.send(Message::Ping(Default::default())).await.expect("a ping");
        let asked = tokio::select! {
            next = relay.next() => next,
            (end, _) = serving.as_mut() => panic!("the session ended first: {end:?}"),
        };
        assert!(matches!(asked, Some(Ok(Message::Ping(_)))), "{asked:?}");
        // The second pause: its answer comes after it, ahead of a request,
        // and then the relay is gone without answering the second ping.
        tokio::time::advance(Duration::from_secs(12)).await;
        relay.flush().await.expect("the answer sent");
        relay.send(frame(&get(1), b"")).await.expect("sent");
        gone_without_forwarding(serving, relay, &handler).await;
    }

    /// What the client reads after a pause in which the relay may have
    /// given up on it waits until the relay answers the ping the client
    /// sends on waking: a relay that answers had not given up, and its
    /// caller still waits. So it is forwarded then, as is what comes after.
    #[tokio::test(start_paused = true)]
    async fn a_request_read_after_a_pause_is_forwarded_once_the_relay_answers() {
        let (serving, mut relay) = session().await;
        tokio::pin!(serving);
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        // Past the 10 s a relay may wait, within the 15 s of silence the
        // client waits: the process was stopped.
        tokio::time::advance(Duration::from_secs(12)).await;
        let relay_side = async {
            relay.send(frame(&get(1), b"")).await.expect("sent");
            let (mut pinged, mut told) = (false, None);
            while told.is_none() {
                match relay.next().await {
                    // Answered by the relay's WebSocket on its next read or write.
                    Some(Ok(Message::Ping(_))) => pinged = true,
                    Some(Ok(Message::Binary(frame))) => {
                        told = Some(codec::decode::<ClientMessage>(frame).expect("a valid frame").0);
                    }
                    Some(Ok(_)) => continue,
                    other => panic!("the session ended: {other:?}"),
                }
            }
            (pinged, told, answer_to(&mut relay, get(3)).await)
        };
        let (pinged, told, answered) = tokio::select! {
            told = relay_side => told,
            (end, _) = serving => panic!("the session ended first: {end:?}"),
        };
        assert!(pinged, "the relay was asked first");
        // Forwarded to a port nothing listens on: the client's own 502.
        assert!(
            matches!(
                &told,
                Some(ClientMessage::ResponseHead {
                    stream: 1,
                    status: 502,
                    ..
                })
            ),
            "{told:?}"
        );
        assert_eq!(answered, (3, 502));
    }

    /// A relay that closes the connection instead of answering the ping
    /// may have answered the callers 502: what it sent is never forwarded.
    #[tokio::test(start_paused = true)]
    async fn a_request_read_after_a_pause_is_never_forwarded_if_the_relay_goes_away() {
        let (handler, target) = listening_handler();
        let (serving, mut relay) = session_forwarding_to(&target, Duration::from_secs(1)).await;
        tokio::pin!(serving);
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(12)).await;
        relay.send(frame(&get(1), b"")).await.expect("sent");
        // The relay reads nothing, so the ping goes unanswered.
        gone_without_forwarding(serving, relay, &handler).await;
    }

    /// A request the relay drops during the pause (its caller gone) is
    /// not forwarded when the relay answers the ping.
    #[tokio::test(start_paused = true)]
    async fn a_request_reset_during_a_pause_is_not_forwarded_when_the_relay_answers() {
        let (handler, target) = listening_handler();
        let (serving, mut relay) = session_forwarding_to(&target, Duration::from_secs(1)).await;
        tokio::pin!(serving);
        assert!(futures_util::poll!(serving.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(12)).await;
        let reset = ServerMessage::Reset {
            stream: 1,
            reason: "the caller went away before the answer".into(),
        };
        let relay_side = async {
            relay.send(frame(&get(1), b"")).await.expect("sent");
            relay.send(frame(&reset, b"")).await.expect("sent");
            while !matches!(relay.next().await, Some(Ok(Message::Ping(_)))) {}
            // Reading on sends the answer; then time for a request taken
            // for cleared to reach the handler.
            let _ = tokio::time::timeout(Duration::from_millis(500), relay.next()).await;
            relay
        };
        let relay = tokio::select! {
            relay = relay_side => relay,
            (end, _) = serving.as_mut() => panic!("the session ended first: {end:?}"),
        };
        gone_without_forwarding(serving, relay, &handler).await;
    }
}
