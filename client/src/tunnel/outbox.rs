//! The one queue every stream writes its frames to; the session's writer
//! drains it onto the socket, answers' heads and window grants before
//! answers' bodies ([`room`]): on a slow uplink, a webhook's answer does
//! not wait behind a large download, nor an upload for its window.

use portpreview_shared::codec::{self, EncodeError};
use portpreview_shared::message::{ClientMessage, Header, StreamId};
use portpreview_shared::room::{self, Lane, Lines, Room};
use portpreview_shared::text::truncate;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Longest reason the client puts in an answer of its own: a line for a
/// person to read, and a frame that always fits.
const MAX_REASON: usize = 1024;

/// Room for answers queued before the exchanges sending them wait, in
/// [`ROOM_UNIT`]s: a relay that stops reading its socket holds this much
/// of them, not every answer its requests make. Far more than one socket
/// takes at a time.
const ROOM: usize = 16 * 1024;

/// The part of [`ROOM`] answers' bodies may take, about one stream's
/// window; the rest is kept for answers' heads. Exchanges waiting for it
/// get it in turn, chunk by chunk, so answers going up a slow link share
/// it. With room for every stream's window, each exchange queued its whole
/// window at once, and on a slow uplink the last of a dozen 1 MiB answers
/// waited past the relay's patience (30 s) for its first byte and was cut.
const BODY_ROOM: usize = 1024;

/// Bytes of an answer that take one unit of [`ROOM`].
const ROOM_UNIT: usize = 1024;

/// Sends frames to the relay. Answers (heads and bodies) wait for room in
/// the queue; the small frames besides them (window grants, resets, the
/// client's own short answers) do not, and come one for each frame or
/// request the relay sends, or fewer.
#[derive(Clone)]
pub struct Outbox {
    queue: mpsc::UnboundedSender<Queued>,
    room: Room,
}

/// A frame queued, with the room it holds until the writer takes it.
struct Queued {
    message: Message,
    lane: Lane,
    room: usize,
}

/// The writer's end of an [`Outbox`].
pub struct Queue {
    queue: mpsc::UnboundedReceiver<Queued>,
    /// What was taken from the queue, still to be written.
    lines: Lines<Queued>,
    room: Room,
}

impl Queue {
    /// The next frame, once there is one; `None` once every outbox is gone
    /// and every frame was taken.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            if let Some(message) = self.try_recv() {
                return Some(message);
            }
            let queued = self.queue.recv().await?;
            self.lines.push(queued.lane, queued);
        }
    }

    /// The next frame if one is queued: a head if any is, as every frame
    /// queued so far is sorted into its lane first.
    pub fn try_recv(&mut self) -> Option<Message> {
        while let Ok(queued) = self.queue.try_recv() {
            self.lines.push(queued.lane, queued);
        }
        let queued = self.lines.pop()?;
        self.room.give_back(queued.room, queued.lane);
        Some(queued.message)
    }
}

/// The lane of `message`: bodies and resets go on with an answer already
/// begun, heads and window grants come first.
fn lane_of(message: &ClientMessage) -> Lane {
    match message {
        ClientMessage::ResponseBody { .. } | ClientMessage::Reset { .. } => Lane::Body,
        ClientMessage::Hello { .. } | ClientMessage::ResponseHead { .. } | ClientMessage::Window { .. } => Lane::Head,
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Answers waiting for room learn that the session is over.
        self.room.close();
    }
}

/// Why an answer's frame was not queued.
#[derive(Debug)]
pub enum Unqueued {
    /// The relay would refuse it.
    Unframable(EncodeError),
    /// The connection to the relay has ended: the frame would reach no one.
    Closed,
}

impl Outbox {
    /// An outbox and the queue its writer drains.
    pub fn new() -> (Self, Queue) {
        let (tx, rx) = mpsc::unbounded_channel();
        let room = Room::new(ROOM, BODY_ROOM);
        let queue = Queue {
            queue: rx,
            lines: Lines::default(),
            room: room.clone(),
        };
        (Self { queue: tx, room }, queue)
    }

    /// Queues one frame. A message the relay would refuse is not queued:
    /// the relay closes the whole session over such a frame, so the error
    /// goes back to the one stream that built it. A closed session drops
    /// the frame, as the stream is gone too.
    pub fn send(&self, message: &ClientMessage, body: &[u8]) -> Result<(), EncodeError> {
        let frame = codec::encode(message, body)?;
        let _ = self.queue_holding(Message::Binary(frame.into()), lane_of(message), 0);
        Ok(())
    }

    /// [`Outbox::send`] for an answer's head or body, once the queue has
    /// room for it.
    pub async fn send_answer(&self, message: &ClientMessage, body: &[u8]) -> Result<(), Unqueued> {
        let lane = lane_of(message);
        let Ok(taken) = self.room.take(room::units(body.len(), ROOM_UNIT, ROOM), lane).await else {
            return Err(Unqueued::Closed);
        };
        let frame = codec::encode(message, body).map_err(Unqueued::Unframable)?;
        match self.queue_holding(Message::Binary(frame.into()), lane, taken.keep()) {
            true => Ok(()),
            false => Err(Unqueued::Closed),
        }
    }

    /// Queues `message`; false when the writer is gone with its session.
    fn queue_holding(&self, message: Message, lane: Lane, room: usize) -> bool {
        if self.queue.send(Queued { message, lane, room }).is_err() {
            // The writer is gone, and with it the room's owner.
            self.room.give_back(room, lane);
            return false;
        }
        true
    }

    /// Grants the relay `credit` more request-body bytes on `stream`.
    pub fn grant(&self, stream: StreamId, credit: usize) {
        let credit = u32::try_from(credit).unwrap_or(u32::MAX);
        self.send_built_to_fit(&ClientMessage::Window { stream, credit }, &[]);
    }

    /// Answers `stream` itself with `status` and a one-line plain-text reason.
    pub fn answer(&self, stream: StreamId, status: u16, reason: &str) {
        let (head, body) = own_answer(stream, status, reason);
        self.send_built_to_fit(&head, body.as_bytes());
    }

    /// Answers 503 to a request the client takes no more of, when the
    /// queue has room: only a relay that sends requests but reads no
    /// answers fills it, and it gets no answer to such a request, whose
    /// caller then hears the relay's own at its timeout.
    pub fn turn_away(&self, stream: StreamId, reason: &str) {
        let Ok(taken) = self.room.try_take(1, Lane::Head) else {
            tracing::debug!(
                stream,
                "a request turned away is not answered: the relay reads no answers"
            );
            return;
        };
        let (head, body) = own_answer(stream, 503, reason);
        match codec::encode(&head, body.as_bytes()) {
            Ok(frame) => {
                let _ = self.queue_holding(Message::Binary(frame.into()), Lane::Head, taken.keep());
            }
            Err(err) => tracing::error!(%err, "an answer of the client's own was over the protocol's limits"),
        }
    }

    /// Abandons `stream` after its answer's head has gone: the relay cuts
    /// the caller's response off instead of ending it.
    pub fn reset(&self, stream: StreamId, reason: &str) {
        let reset = ClientMessage::Reset {
            stream,
            reason: truncate(reason, MAX_REASON).to_owned(),
        };
        self.send_built_to_fit(&reset, &[]);
    }

    /// Sends a frame whose size the client bounds itself (window grants,
    /// its own short answers, body chunks cut to the chunk size): one that
    /// does not fit is a bug in the client, logged rather than ending the
    /// session.
    pub fn send_built_to_fit(&self, message: &ClientMessage, body: &[u8]) {
        if let Err(err) = self.send(message, body) {
            tracing::error!(%err, "a frame the client sized itself was over the protocol's limits");
        }
    }

    /// Queues a raw WebSocket message (close frames), behind every body.
    pub fn send_raw(&self, message: Message) {
        let _ = self.queue_holding(message, Lane::Body, 0);
    }
}

/// The head and body of an answer of the client's own: `status` and a
/// one-line plain-text reason.
fn own_answer(stream: StreamId, status: u16, reason: &str) -> (ClientMessage, String) {
    let body = format!("portpreview: {}\n", truncate(reason, MAX_REASON));
    let headers = vec![
        Header::new("content-type", "text/plain; charset=utf-8"),
        Header::new("content-length", body.len().to_string()),
    ];
    let head = ClientMessage::ResponseHead {
        stream,
        status,
        headers,
        end: true,
    };
    (head, body)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use portpreview_shared::message::MAX_HEADER_BYTES;

    use super::*;

    fn decoded(message: Option<Message>) -> (ClientMessage, Bytes) {
        let Some(Message::Binary(frame)) = message else {
            panic!("expected a binary frame, got {message:?}");
        };
        codec::decode::<ClientMessage>(frame).expect("a frame the relay accepts")
    }

    /// A relay that reads nothing holds [`ROOM`] of answers, not every
    /// answer its requests make: answers then wait, its requests past the
    /// limit go unanswered, and window grants and resets still go. Bodies
    /// leave room for heads, which the writer takes first.
    #[tokio::test]
    async fn answers_wait_for_room_that_the_writer_gives_back() {
        use futures_util::FutureExt;

        let (outbox, mut queue) = Outbox::new();
        let chunk = vec![b'a'; portpreview_shared::message::CHUNK_SIZE];
        let body = |stream| ClientMessage::ResponseBody { stream, end: false };
        let mut queued = 0;
        while let Some(sent) = outbox.send_answer(&body(1), &chunk).now_or_never() {
            sent.unwrap();
            queued += chunk.len();
            assert!(queued <= 2 * ROOM * ROOM_UNIT, "{queued} bytes queued, and still room");
            // The runtime's budget for a task's turn would make a wait of
            // what is no wait for room.
            tokio::task::yield_now().await;
        }
        assert!(queued > BODY_ROOM * ROOM_UNIT * 9 / 10, "{queued} bytes queued");
        // Room for heads beside the bodies.
        outbox.turn_away(2, "the tunnel's client has 2048 requests in flight already");
        outbox.grant(3, 1000);
        outbox.reset(4, "cut");
        let waiting = tokio::spawn({
            let outbox = outbox.clone();
            let chunk = chunk.clone();
            async move { outbox.send_answer(&body(5), &chunk).await }
        });
        let mut frames: Vec<ClientMessage> = Vec::new();
        while let Some(frame) = queue.try_recv() {
            frames.push(decoded(Some(frame)).0);
        }
        waiting.await.unwrap().unwrap();
        assert!(
            matches!(
                frames[0],
                ClientMessage::ResponseHead {
                    stream: 2,
                    status: 503,
                    ..
                }
            ),
            "{:?}",
            &frames[..2]
        );
        assert!(matches!(frames[1], ClientMessage::Window { stream: 3, .. }));
        assert!(matches!(
            frames[frames.len() - 1],
            ClientMessage::Reset { stream: 4, .. }
        ));
        assert!(matches!(
            decoded(queue.try_recv()).0,
            ClientMessage::ResponseBody { stream: 5, .. }
        ));

        // Heads fill what the bodies leave: a request turned away then
        // goes unanswered.
        let head = |stream| ClientMessage::ResponseHead {
            stream,
            status: 200,
            headers: vec![],
            end: true,
        };
        // The last units by answers with no body.
        for piece in [&chunk[..], b""] {
            while let Some(sent) = outbox.send_answer(&head(6), piece).now_or_never() {
                sent.unwrap();
                tokio::task::yield_now().await;
            }
        }
        outbox.turn_away(7, "shutting down");
        let mut frames = Vec::new();
        while let Some(frame) = queue.try_recv() {
            frames.push(decoded(Some(frame)).0);
        }
        assert!(
            !frames
                .iter()
                .any(|f| matches!(f, ClientMessage::ResponseHead { stream: 7, .. })),
            "no room for the 503"
        );

        // The session over, an answer waiting for room stops waiting, and
        // says it went nowhere.
        while let Some(sent) = outbox.send_answer(&body(8), &chunk).now_or_never() {
            sent.unwrap();
            tokio::task::yield_now().await;
        }
        let waiting = tokio::spawn({
            let (outbox, chunk) = (outbox.clone(), chunk.clone());
            async move { outbox.send_answer(&body(9), &chunk).await }
        });
        drop(queue);
        assert!(matches!(waiting.await.unwrap(), Err(Unqueued::Closed)));
        assert!(matches!(
            outbox.send_answer(&body(10), &chunk).await,
            Err(Unqueued::Closed)
        ));
    }

    #[test]
    fn a_head_over_the_limit_is_refused_and_nothing_is_queued() {
        let (outbox, mut queue) = Outbox::new();
        let head = ClientMessage::ResponseHead {
            stream: 3,
            status: 200,
            headers: vec![Header::new("set-cookie", vec![b'a'; MAX_HEADER_BYTES])],
            end: true,
        };
        assert!(matches!(
            outbox.send(&head, b""),
            Err(EncodeError::HeaderTooLarge(size)) if size > MAX_HEADER_BYTES
        ));
        assert!(queue.try_recv().is_none(), "no frame the relay would refuse");
    }

    #[test]
    fn an_answer_of_its_own_always_fits_whatever_the_reason() {
        let (outbox, mut queue) = Outbox::new();
        outbox.answer(5, 502, &"é".repeat(200_000));
        let (head, body) = decoded(queue.try_recv());
        assert!(matches!(
            head,
            ClientMessage::ResponseHead {
                stream: 5,
                status: 502,
                end: true,
                ..
            }
        ));
        assert!(body.len() <= MAX_REASON + "portpreview: \n".len());
        assert!(std::str::from_utf8(&body).is_ok(), "cut on a character boundary");
    }
}
