//! The one task that writes to a client's WebSocket.
//!
//! Everything else hands it messages over two queues. The stream queue
//! carries what concerns streams: requests' heads (a small body riding in
//! each) and news of requests turned away in its head lane, request bodies
//! and resets in its body lane ([`room`]: heads are written first, and
//! never wait for uploads to drain). Heads and bodies wait for room in it
//! (backpressure); a reset never waits, as it is sent from places that
//! cannot, and takes the place of its stream's body still queued: on a
//! slow link, an upload its caller left stops at once. The control
//! queue carries window grants, pings and close frames, which their own
//! protocol bounds and which go first. The writer writes every ready
//! message and then flushes once: flushing per frame costs a syscall per
//! request, batching was worth +43% at 50 concurrent.

use futures_util::{Sink, SinkExt};
use portpreview_shared::codec::{self, EncodeError};
use portpreview_shared::message::Framed;
use portpreview_shared::room::{self, Lane, Lines, Room, Taken};
use portpreview_shared::text::truncate;
use portpreview_shared::{ServerMessage, StreamId};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Room in the stream queue before senders wait, in units: a frame takes
/// one, and one more for every [`ROOM_UNIT`] of body it carries. So 64
/// small heads fit, or 12 heads with full bodies: a client that stops
/// reading leaves at most 1 MiB queued, where a count of frames alone let
/// 64 chunks of 64 KiB hold 4 MiB for every stalled tunnel.
pub const QUEUE_ROOM: usize = 64;

/// The part of [`QUEUE_ROOM`] bodies may take: 9 full chunks. The rest is
/// kept for heads, so that uploads filling the queue for a slow client do
/// not hold a new request back until they drain.
const BODY_ROOM: usize = 48;

/// Bytes of body that take one unit of [`QUEUE_ROOM`].
const ROOM_UNIT: usize = 16 * 1024;

/// Messages written between two flushes at most, so one flush is never
/// postponed indefinitely by a busy queue.
const MAX_BATCH: usize = 256;

/// Longest close reason WebSocket allows, in bytes.
const MAX_CLOSE_REASON: usize = 123;

/// Longest reset reason sent: the client keeps a line of it, and the frame
/// always fits.
const MAX_RESET_REASON: usize = 200;

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum SendError {
    /// The writer went away: the socket is closed.
    #[error("the tunnel's socket is closed")]
    Closed,
    /// The message does not fit in a frame the client accepts; sent anyway,
    /// the client would close the whole session over it.
    #[error("the message does not fit in a frame: {0}")]
    Unframable(#[from] EncodeError),
}

/// Where the rest of the session sends what the writer should write.
#[derive(Clone)]
pub struct Outbox {
    streams: mpsc::UnboundedSender<Queued>,
    room: Room,
    control: mpsc::UnboundedSender<Message>,
}

/// A frame on the stream queue.
struct Queued {
    frame: Message,
    part: Part,
    /// The units of room it holds, given back once the writer writes it.
    room: usize,
}

/// What a frame on the stream queue does for its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Starts something: a request's head, news of a request turned away.
    Head,
    /// Carries a piece of a stream's request body.
    Body(StreamId),
    /// Ends a stream: its body still queued is not written.
    Reset(StreamId),
}

impl Part {
    fn lane(self) -> Lane {
        match self {
            Part::Head => Lane::Head,
            Part::Body(_) | Part::Reset(_) => Lane::Body,
        }
    }
}

/// The writer's end of an [`Outbox`].
pub struct Inbox {
    streams: mpsc::UnboundedReceiver<Queued>,
    /// What was taken from the stream queue, still to be written.
    lines: Lines<Queued>,
    /// Room for heads and bodies still to be queued: the stream queue's
    /// bound for all but resets, which the relay sends at most twice per
    /// stream, and only for streams whose heads left.
    room: Room,
    control: mpsc::UnboundedReceiver<Message>,
}

/// A connected outbox and inbox.
pub fn channel() -> (Outbox, Inbox) {
    let (streams_tx, streams) = mpsc::unbounded_channel();
    let (control_tx, control) = mpsc::unbounded_channel();
    let room = Room::new(QUEUE_ROOM, BODY_ROOM);
    (
        Outbox {
            streams: streams_tx,
            room: room.clone(),
            control: control_tx,
        },
        Inbox {
            streams,
            lines: Lines::default(),
            room,
            control,
        },
    )
}

/// The units of room a frame carrying `body` takes.
fn room_for(body: &[u8]) -> u32 {
    room::units(body.len(), ROOM_UNIT, QUEUE_ROOM)
}

impl Outbox {
    /// Queues a request's head, a small body riding in it, waiting for room.
    pub async fn send_head<M: Serialize + Framed>(&self, msg: &M, body: &[u8]) -> Result<(), SendError> {
        self.send(msg, body, Part::Head).await
    }

    /// Queues a piece of `stream`'s request body, the last with `end`,
    /// waiting for room in the bodies' part of the queue.
    pub async fn send_body(&self, stream: StreamId, chunk: &[u8], end: bool) -> Result<(), SendError> {
        let msg = ServerMessage::RequestBody { stream, end };
        self.send(&msg, chunk, Part::Body(stream)).await
    }

    async fn send<M: Serialize + Framed>(&self, msg: &M, body: &[u8], part: Part) -> Result<(), SendError> {
        // Closed along with the writer's end: nobody will make room again.
        let taken = self
            .room
            .take(room_for(body), part.lane())
            .await
            .map_err(|_| SendError::Closed)?;
        // Encoded once there is room, not before: a crowd of uploads
        // waiting for room would each hold a copy of its next chunk.
        let frame = Message::Binary(codec::encode(msg, body)?.into());
        self.queue_holding(frame, part, taken)
    }

    /// Queues a message that may be large in the head lane if it has room
    /// now; returns whether it did. For what is worth telling but not
    /// worth waiting for: a client too slow to take it loses only news.
    pub fn try_send<M: Serialize + Framed>(&self, msg: &M, body: &[u8]) -> Result<bool, SendError> {
        let taken = match self.room.try_take(room_for(body), Lane::Head) {
            Ok(taken) => taken,
            Err(tokio::sync::TryAcquireError::NoPermits) => return Ok(false),
            // Closed along with the writer's end.
            Err(tokio::sync::TryAcquireError::Closed) => return Err(SendError::Closed),
        };
        let frame = Message::Binary(codec::encode(msg, body)?.into());
        self.queue_holding(frame, Part::Head, taken).map(|()| true)
    }

    /// Queues `frame`, in the room `taken` holds, which the writer gives
    /// back once it writes the frame.
    fn queue_holding(&self, frame: Message, part: Part, taken: Taken<'_>) -> Result<(), SendError> {
        let room = taken.keep();
        self.streams.send(Queued { frame, part, room }).map_err(|_| {
            self.room.give_back(room, part.lane());
            SendError::Closed
        })
    }

    /// Queues a small control frame without waiting. A closed writer means
    /// the session is over, with nothing left to tell; only a message too
    /// large for a frame is an error.
    pub fn control(&self, msg: &ServerMessage) -> Result<(), EncodeError> {
        let _ = self.control.send(Message::Binary(codec::encode(msg, b"")?.into()));
        Ok(())
    }

    /// Queues a stream reset without waiting, behind the stream's head if
    /// it is still queued, in place of its body still queued: the client
    /// never sees a reset before its request, nor a body after it, and a
    /// slow link carries no more of a body nobody will answer.
    pub fn reset(&self, stream: StreamId, reason: &str) {
        let msg = ServerMessage::Reset {
            stream,
            reason: truncate(reason, MAX_RESET_REASON).to_string(),
        };
        let frame = match codec::encode(&msg, b"") {
            Ok(frame) => Message::Binary(frame.into()),
            Err(err) => {
                tracing::error!(%err, stream, "a reset with a short reason did not fit a frame");
                return;
            }
        };
        let _ = self.streams.send(Queued {
            frame,
            part: Part::Reset(stream),
            room: 0,
        });
    }

    /// Refuses every head and body still to come: the session is over.
    /// Senders waiting for room hear it now, not at their deadline, when
    /// a client that stopped reading holds the writer in a write.
    pub fn refuse_streams(&self) {
        self.room.close();
    }

    /// Queues a WebSocket ping.
    pub fn ping(&self) {
        let _ = self.control.send(Message::Ping(bytes::Bytes::new()));
    }

    /// Queues a close frame with a reason; the writer stops after it.
    pub fn close(&self, code: CloseCode, reason: &str) {
        let _ = self.control.send(close_message(code, reason));
    }
}

/// A close frame with its reason cut to what the protocol allows.
pub fn close_message(code: CloseCode, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: truncate(reason, MAX_CLOSE_REASON).to_string().into(),
    }))
}

impl Inbox {
    /// The next frame ready to be written, if any: control first, then
    /// heads, then bodies and resets.
    fn try_next(&mut self) -> Option<Message> {
        if let Ok(msg) = self.control.try_recv() {
            return Some(msg);
        }
        // Everything queued so far, which the room bounds: a body is
        // written only once no head queued before it is left.
        while let Ok(queued) = self.streams.try_recv() {
            self.line_up(queued);
        }
        let queued = self.lines.pop()?;
        self.room.give_back(queued.room, queued.part.lane());
        Some(queued.frame)
    }

    /// Puts a frame taken from the stream queue in its line; a reset
    /// takes its stream's body out of the line, and gives back its room.
    fn line_up(&mut self, queued: Queued) {
        if let Part::Reset(stream) = queued.part {
            let room = &self.room;
            self.lines.retain(Lane::Body, |waiting| {
                let dropped = waiting.part == Part::Body(stream);
                if dropped {
                    room.give_back(waiting.room, Lane::Body);
                }
                !dropped
            });
        }
        self.lines.push(queued.part.lane(), queued);
    }

    /// Whether every outbox is gone and everything queued was taken.
    fn drained(&self) -> bool {
        self.lines.is_empty() && self.control.is_closed() && self.streams.is_closed()
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        // Senders waiting for room learn that the writer is gone.
        self.room.close();
    }
}

/// Writes until a close frame was sent, every outbox is gone, the socket
/// fails or `stop` fires. Cancels `dead` when it ends, so the session
/// notices a socket that can no longer be written.
pub async fn run<S>(mut sink: S, mut inbox: Inbox, stop: CancellationToken, dead: CancellationToken)
where
    S: Sink<Message> + Unpin,
    S::Error: std::fmt::Display,
{
    let result = write_loop(&mut sink, &mut inbox, &stop).await;
    if let Err(err) = result {
        tracing::debug!(%err, "tunnel socket write failed");
    }
    let _ = sink.close().await;
    dead.cancel();
}

async fn write_loop<S>(sink: &mut S, inbox: &mut Inbox, stop: &CancellationToken) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    // Made once: each one made registers with the token under its lock.
    let stopped = stop.cancelled();
    tokio::pin!(stopped);
    loop {
        let first = match inbox.try_next() {
            Some(msg) => msg,
            None => tokio::select! {
                biased;
                Some(msg) = inbox.control.recv() => msg,
                Some(queued) = inbox.streams.recv() => {
                    inbox.line_up(queued);
                    continue;
                }
                () = &mut stopped => return Ok(()),
                // Reached only when every queue gave `None` above: every
                // outbox is gone and everything it queued was written.
                () = std::future::ready(()), if inbox.drained() => return Ok(()),
            },
        };
        let mut closing = matches!(first, Message::Close(_));
        sink.feed(first).await?;
        let mut batched = 1;
        while !closing && batched < MAX_BATCH {
            let Some(next) = inbox.try_next() else { break };
            closing = matches!(next, Message::Close(_));
            sink.feed(next).await?;
            batched += 1;
        }
        sink.flush().await?;
        if closing {
            return Ok(());
        }
    }
}

#[cfg(test)]
impl Inbox {
    /// The stream and reason of every reset queued so far, in order.
    pub(crate) fn drain_resets(&mut self) -> Vec<(StreamId, String)> {
        let mut frames = Vec::new();
        while let Ok(queued) = self.streams.try_recv() {
            frames.push(queued.frame);
        }
        while let Ok(frame) = self.control.try_recv() {
            frames.push(frame);
        }
        frames
            .into_iter()
            .filter_map(|frame| match frame {
                Message::Binary(bytes) => codec::decode::<ServerMessage>(bytes).ok(),
                _ => None,
            })
            .filter_map(|(msg, _)| match msg {
                ServerMessage::Reset { stream, reason } => Some((stream, reason)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    #[tokio::test]
    async fn writes_in_order_and_stops_after_close() {
        let (outbox, inbox) = channel();
        let (tx, mut rx) = mpsc::channel::<Message>(16);
        let tx = tokio_util::sync::PollSender::new(tx);
        outbox
            .send_head(&ServerMessage::Window { stream: 1, credit: 5 }, b"")
            .await
            .unwrap();
        outbox.ping();
        let dead = CancellationToken::new();
        let writer = tokio::spawn(run(tx, inbox, CancellationToken::new(), dead.clone()));
        tokio::task::yield_now().await;
        outbox.close(CloseCode::Away, &"é".repeat(100));
        outbox.ping();
        writer.await.unwrap();
        assert!(dead.is_cancelled());
        let mut written = Vec::new();
        while let Some(msg) = rx.recv().await {
            written.push(msg);
        }
        assert_eq!(written.len(), 3, "nothing after the close frame: {written:?}");
        assert!(matches!(written[0], Message::Ping(_)), "control goes first");
        assert!(matches!(written[1], Message::Binary(_)));
        let Message::Close(Some(frame)) = &written[2] else {
            panic!("{written:?}")
        };
        assert!(frame.reason.len() <= MAX_CLOSE_REASON);
    }

    fn head(stream: StreamId) -> ServerMessage {
        ServerMessage::RequestHead {
            stream,
            method: "POST".into(),
            target: "/".into(),
            headers: vec![],
            end: true,
        }
    }

    /// The first `count` messages the writer writes from `inbox`.
    async fn written(inbox: Inbox, count: usize) -> Vec<ServerMessage> {
        let (tx, mut rx) = mpsc::channel::<Message>(4 * QUEUE_ROOM);
        let tx = tokio_util::sync::PollSender::new(tx);
        let stop = CancellationToken::new();
        let writer = tokio::spawn(run(tx, inbox, stop.clone(), CancellationToken::new()));
        let mut messages = Vec::new();
        while messages.len() < count {
            match rx.recv().await.expect("the writer writes them all") {
                Message::Binary(frame) => {
                    messages.push(codec::decode::<ServerMessage>(frame).expect("a valid frame").0)
                }
                _ => continue,
            }
        }
        stop.cancel();
        writer.await.expect("the writer stops");
        messages
    }

    /// What each message is, and for which stream.
    fn kinds(messages: &[ServerMessage]) -> Vec<(&'static str, StreamId)> {
        messages
            .iter()
            .map(|m| match m {
                ServerMessage::RequestHead { stream, .. } => ("head", *stream),
                ServerMessage::RequestBody { stream, .. } => ("body", *stream),
                ServerMessage::Reset { stream, .. } => ("reset", *stream),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_reset_never_overtakes_the_head_queued_before_it() {
        let (outbox, inbox) = channel();
        for stream in 1..=QUEUE_ROOM as StreamId {
            outbox.send_head(&head(stream), b"").await.unwrap();
        }
        // The queue is full, the last stream's head at its back: a reset
        // that could not wait for room must still come after that head.
        outbox.reset(QUEUE_ROOM as StreamId, "no answer in time");
        let messages = written(inbox, QUEUE_ROOM + 1).await;
        let position = |wanted: fn(&ServerMessage) -> bool| messages.iter().position(wanted);
        let head_at =
            position(|m| matches!(m, ServerMessage::RequestHead { stream, .. } if *stream == QUEUE_ROOM as StreamId));
        let reset_at = position(|m| matches!(m, ServerMessage::Reset { .. }));
        assert!(
            matches!((head_at, reset_at), (Some(h), Some(r)) if h < r),
            "head at {head_at:?}, reset at {reset_at:?}"
        );
    }

    #[tokio::test]
    async fn the_writer_ends_once_every_outbox_is_gone() {
        let (outbox, inbox) = channel();
        outbox.send_head(&head(1), b"").await.unwrap();
        outbox.ping();
        drop(outbox);
        let (tx, mut rx) = mpsc::channel::<Message>(16);
        let tx = tokio_util::sync::PollSender::new(tx);
        let dead = CancellationToken::new();
        let writer = run(tx, inbox, CancellationToken::new(), dead.clone());
        tokio::time::timeout(std::time::Duration::from_secs(5), writer)
            .await
            .expect("the writer ends without being stopped");
        assert!(dead.is_cancelled(), "the session hears that the writer is done");
        let mut written = Vec::new();
        while let Some(msg) = rx.recv().await {
            written.push(msg);
        }
        assert_eq!(written.len(), 2, "what was queued is written first: {written:?}");
    }

    /// A socket whose client stopped reading: no write ever completes.
    struct Stuck;

    impl Sink<Message> for Stuck {
        type Error = std::convert::Infallible;

        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }

        fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), Self::Error> {
            Ok(())
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn a_sender_waiting_for_room_hears_the_session_end_while_the_writer_is_stuck() {
        let (outbox, inbox) = channel();
        let (stop, dead) = (CancellationToken::new(), CancellationToken::new());
        let writer = tokio::spawn(run(Stuck, inbox, stop, dead));
        for stream in 1..=QUEUE_ROOM as StreamId {
            outbox.send_head(&head(stream), b"").await.unwrap();
        }
        let sender = outbox.clone();
        let waiting = tokio::spawn(async move {
            // The writer takes one frame, and is stuck writing it.
            sender.send_head(&head(0), b"").await?;
            sender.send_head(&head(0), b"").await
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "no room: the sender waits");
        outbox.refuse_streams();
        let heard = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("heard at once, not at its deadline");
        assert!(matches!(heard.unwrap(), Err(SendError::Closed)));
        assert!(!writer.is_finished(), "the writer is still stuck in its write");
        writer.abort();
    }

    /// Room is counted in body bytes as well as frames: a client that
    /// stops reading leaves at most 1 MiB queued for it, not 64 chunks of
    /// 64 KiB, and bodies leave room for new requests beside them.
    #[tokio::test]
    async fn a_client_that_stops_reading_holds_little_and_heads_still_find_room() {
        use futures_util::FutureExt;
        use portpreview_shared::message::CHUNK_SIZE;

        let (outbox, inbox) = channel();
        let writer = tokio::spawn(run(Stuck, inbox, CancellationToken::new(), CancellationToken::new()));
        let chunk = vec![b'x'; CHUNK_SIZE];
        let mut queued = 0;
        // Until a send has to wait for room.
        while let Some(sent) = outbox.send_body(1, &chunk, false).now_or_never() {
            sent.unwrap();
            queued += chunk.len();
            assert!(queued <= 4 * 1024 * 1024, "{queued} bytes queued, and still room");
            tokio::task::yield_now().await;
        }
        // One chunk may be in the stuck writer's hands, out of the queue.
        assert!(
            (9 * CHUNK_SIZE..=10 * CHUNK_SIZE).contains(&queued),
            "{queued} bytes queued"
        );
        // Small heads take one unit each, beside the bodies.
        for stream in 2..QUEUE_ROOM as StreamId - BODY_ROOM as StreamId + 2 {
            assert!(
                outbox.send_head(&head(stream), b"").now_or_never().is_some(),
                "head {stream} waits"
            );
        }
        writer.abort();
    }

    #[tokio::test]
    async fn heads_are_written_before_bodies_and_resets_after_their_heads() {
        let (outbox, inbox) = channel();
        outbox.send_head(&head(1), b"").await.unwrap();
        outbox.send_body(1, &[b'x'; 100], false).await.unwrap();
        outbox.send_body(1, &[b'y'; 100], false).await.unwrap();
        outbox.send_head(&head(2), b"").await.unwrap();
        outbox.reset(2, "the caller left");
        outbox.send_body(1, &[b'z'; 100], false).await.unwrap();
        outbox.send_head(&head(3), b"").await.unwrap();
        let order = kinds(&written(inbox, 7).await);
        assert_eq!(
            order,
            [
                ("head", 1),
                ("head", 2),
                ("head", 3),
                ("body", 1),
                ("body", 1),
                ("reset", 2),
                ("body", 1)
            ]
        );
    }

    /// A reset takes the place of its stream's body still queued, and
    /// gives back its room: a caller who leaves an upload on a slow link
    /// holds neither the link nor the queue any longer.
    #[tokio::test]
    async fn a_reset_takes_the_place_of_its_streams_queued_body() {
        use futures_util::FutureExt;
        use portpreview_shared::message::CHUNK_SIZE;

        let (outbox, inbox) = channel();
        let chunk = vec![b'x'; CHUNK_SIZE];
        outbox.send_head(&head(1), b"").await.unwrap();
        outbox.send_head(&head(2), b"").await.unwrap();
        outbox.send_body(2, b"kept", false).await.unwrap();
        // Until stream 1's body fills the bodies' part of the queue.
        while let Some(sent) = outbox.send_body(1, &chunk, false).now_or_never() {
            sent.unwrap();
        }
        outbox.reset(1, "the caller left");
        outbox.send_body(2, b"end", true).await.unwrap();
        let mut inbox = inbox;
        let first = inbox.try_next().expect("a frame to write");
        // Stream 2's two pieces hold a unit each; stream 1's body none.
        let room = outbox.room.try_take(BODY_ROOM as u32 - 2, Lane::Body);
        assert!(room.is_ok(), "the dropped body's room came back");
        drop(room);
        let Message::Binary(first) = first else {
            panic!("{first:?}")
        };
        let first = codec::decode::<ServerMessage>(first).expect("a valid frame").0;
        let mut order = kinds(&[first]);
        order.extend(kinds(&written(inbox, 4).await));
        assert_eq!(
            order,
            [("head", 1), ("head", 2), ("body", 2), ("reset", 1), ("body", 2)]
        );
    }

    #[tokio::test]
    async fn a_sender_waiting_for_room_hears_when_the_writer_is_gone() {
        let (outbox, inbox) = channel();
        for stream in 1..=QUEUE_ROOM as StreamId {
            outbox.send_head(&head(stream), b"").await.unwrap();
        }
        let waiting = tokio::spawn(async move { outbox.send_head(&head(0), b"").await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no room: the sender waits");
        drop(inbox);
        assert!(matches!(waiting.await.unwrap(), Err(SendError::Closed)));
    }
}
