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
    let after_a_sleep = tungstenite::Error::Io(std::io::Error::from_raw_os_error(32));
    assert_eq!(
        read_failed(after_a_sleep),
        "the relay's connection was closed under it (Broken pipe (os error 32))"
    );
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
    let (events, _) = crate::events::queue(16);
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
async fn answer_to(relay: &mut WebSocketStream<tokio::io::DuplexStream>, message: ServerMessage) -> (StreamId, u16) {
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
