//! One client's WebSocket session: Hello, the name claim, then routing the
//! client's messages to their streams until the socket ends.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, Stream, StreamExt};
use portpreview_shared::codec;
use portpreview_shared::message::{version_mismatch, PROTOCOL_VERSION, RELAY_SHUTTING_DOWN};
use portpreview_shared::sanitize::escape_str;
use portpreview_shared::stall::overslept;
use portpreview_shared::text::{shorten, truncate};
use portpreview_shared::{ClientMessage, ServerMessage};
use tokio::time::{interval, Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::answer_budget::AnswerBudget;
use crate::held_news::HeldNews;
use crate::names;
use crate::port::StreamPort;
use crate::public_url::PublicUrl;
use crate::registry::{BodyAtOpen, Claimed, Lease, OpenError, Owner, Registry, Tunnel};
use crate::stream::{Streams, CLIENT_GONE, CLIENT_SILENT, CLIENT_STOPPED};
use crate::writer::{self, Outbox};

/// How often a draining session checks whether its requests have finished.
const DRAIN_POLL: Duration = Duration::from_millis(50);
/// How long the writer gets to send a final close frame.
const CLOSE_FLUSH: Duration = Duration::from_secs(2);
/// Random names tried before giving up (a collision of 64-bit names is
/// practically impossible; this only bounds the loop).
const RANDOM_NAME_ATTEMPTS: usize = 8;

/// What a session needs besides its socket.
#[derive(Clone)]
pub struct SessionContext {
    /// The client's address, for the relay's log.
    pub peer: std::net::SocketAddr,
    /// Where names are claimed.
    pub registry: Arc<dyn Registry>,
    /// The token the client connected with.
    pub owner: Owner,
    /// That token's label from the tokens file, for logs: the token itself
    /// is never logged.
    pub token_label: Option<String>,
    /// Resume secret presented in the upgrade, from an earlier `Welcome`.
    pub resume: Option<String>,
    /// Builds the public URL of a name.
    pub public_url: PublicUrl,
    /// Time allowed for the Hello.
    pub hello_timeout: Duration,
    /// Interval between pings.
    pub ping_interval: Duration,
    /// Silence after which the client is dead.
    pub dead_after: Duration,
    /// How long a name is held for a client that went away.
    pub name_grace: Duration,
    /// Requests in flight allowed on the tunnel.
    pub max_in_flight: usize,
    /// What the answers queued for its callers are charged to, relay-wide.
    pub answer_budget: Arc<AnswerBudget>,
    /// Time given to requests in flight when the relay shuts down.
    pub drain_timeout: Duration,
    /// Fires when the relay shuts down.
    pub shutdown: CancellationToken,
    /// Fires when the drain is cut short: the session ends at once, each
    /// request in flight getting the relay's 502 and the client a close
    /// frame with the reason.
    pub cut_short: CancellationToken,
}

struct SessionTunnel {
    streams: Arc<Streams>,
    /// When a refused WebSocket handshake was last told.
    upgrade_told: std::sync::Mutex<Option<Instant>>,
}

/// How often a refused WebSocket handshake is told to the client at most.
const UPGRADE_NEWS_EVERY: Duration = Duration::from_secs(60);

impl Tunnel for SessionTunnel {
    fn open(&self, body: BodyAtOpen) -> Result<StreamPort, OpenError> {
        self.streams.open(body)
    }

    fn tell_turned_away(&self, news: &ServerMessage, body: &[u8]) -> Result<(), codec::EncodeError> {
        self.streams.tell(news, body)
    }

    fn upgrade_is_news(&self) -> bool {
        let mut told = portpreview_shared::sync::lock(&self.upgrade_told);
        let now = Instant::now();
        let news = told.is_none_or(|at| now.duration_since(at) >= UPGRADE_NEWS_EVERY);
        if news {
            *told = Some(now);
        }
        news
    }
}

enum End {
    /// The socket failed or closed without a word; why, from the socket.
    Gone(String),
    /// The client closed the socket on purpose: it is shutting down.
    Goodbye,
    /// Refused, for the reason given, and close frame already queued.
    Refused(String),
    /// The client broke the wire protocol; how, for the log.
    Protocol(String),
    /// A frame or message over the relay's size limit.
    TooLarge(String),
    /// The client stopped answering pings.
    Dead,
    /// The relay is shutting down.
    Shutdown,
}

/// Why the session ended, for the relay's log.
impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Gone(why) => write!(f, "the client went away: {why}"),
            End::Goodbye => f.write_str("the client stopped"),
            End::Refused(reason) => write!(f, "refused: {reason}"),
            End::Protocol(why) => write!(f, "protocol error: {why}"),
            End::TooLarge(why) => write!(f, "frame over the limit: {why}"),
            End::Dead => f.write_str("the client stopped answering pings"),
            End::Shutdown => f.write_str("the relay is shutting down"),
        }
    }
}

/// Serves one client over `socket` until it goes away or the relay stops.
pub async fn serve<S>(socket: S, ctx: SessionContext)
where
    S: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Unpin + Send + 'static,
{
    let (sink, mut incoming) = socket.split();
    let (outbox, inbox) = writer::channel();
    let stop = CancellationToken::new();
    let dead = CancellationToken::new();
    // Owned by this session: should the session future ever be dropped, the
    // writer and its socket go with it.
    let writer = AbortOnDropHandle::new(tokio::spawn(writer::run(sink, inbox, stop.clone(), dead.clone())));

    let streams = Streams::new(outbox.clone(), ctx.max_in_flight, Arc::clone(&ctx.answer_budget));
    let mut silent = false;
    let closing = match hello(&mut incoming, &outbox, &ctx, &streams).await {
        Ok(lease) => {
            let span = tracing::debug_span!("tunnel", tunnel = %lease.name);
            let end = run(&mut incoming, &outbox, &ctx, &streams, &dead)
                .instrument(span.clone())
                .await;
            // Callers in flight learn at once why no answer will come.
            streams.close_all(match end {
                End::Shutdown => "the relay shut down before the tunnel's client answered",
                End::Dead => CLIENT_SILENT,
                End::Goodbye => CLIENT_STOPPED,
                _ => CLIENT_GONE,
            });
            outbox.refuse_streams();
            let name_held = !matches!(end, End::Goodbye | End::Shutdown);
            tracing::info!(tunnel = %lease.name, why = %end, name_held, "tunnel disconnected");
            // A client that said goodbye is not coming back for its name,
            // which is free at once; any other loss holds it for a while.
            match end {
                End::Goodbye => ctx.registry.forget(&lease),
                _ => ctx.registry.release(&lease),
            }
            silent = matches!(end, End::Dead);
            span.in_scope(|| say_goodbye(&outbox, end))
        }
        Err(end) => {
            // Who never got a tunnel, and why: a client older or newer than
            // the relay, a name taken, something that is not a client.
            tracing::info!(peer = %ctx.peer, why = %end, "no tunnel opened");
            say_goodbye(&outbox, end)
        }
    };
    drop(outbox);
    if closing {
        // The writer ends by itself once the close frame is out.
        let _ = tokio::time::timeout(CLOSE_FLUSH, dead.cancelled()).await;
    }
    stop.cancel();
    // A client that stopped reading holds the writer in a write for as
    // long as TCP keeps trying; dropping the handle aborts it, and closes
    // the socket.
    let _ = tokio::time::timeout(CLOSE_FLUSH, writer).await;
    if silent {
        await_close_reply(&mut incoming, ctx.name_grace.min(CLOSE_REPLY_MOST), &ctx.shutdown).await;
    }
}

/// Longest the relay waits for a silent client's close reply: as long as a
/// name is held by default, and no longer, whatever `--grace` says, since
/// the socket holds one of its address's connections meanwhile.
const CLOSE_REPLY_MOST: Duration = Duration::from_secs(60);

/// Keeps reading a client given up on as silent, discarding what it sends,
/// until it answers the close frame, or at most `limit`. A
/// client that was paused (ctrl-z, a debugger) finds on waking the requests
/// sent to it meanwhile, which the relay has answered 502, and records
/// them as not forwarded; it reads them only while its writes (the pongs
/// its WebSocket owes) still land. A socket closed at once answers the
/// first of those writes with a reset, and the client loses what it had not
/// read yet.
async fn await_close_reply<R>(incoming: &mut R, limit: Duration, shutdown: &CancellationToken)
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let replied = async {
        while let Some(Ok(message)) = incoming.next().await {
            if matches!(message, Message::Close(_)) {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(limit, replied) => {}
        () = shutdown.cancelled() => {}
    }
}

/// Queues the close frame `end` calls for; true when there is one to send.
fn say_goodbye(outbox: &Outbox, end: End) -> bool {
    match end {
        End::Gone(why) => {
            tracing::debug!(why, "client went away");
            return false;
        }
        End::Goodbye => {
            tracing::debug!("client said goodbye");
            return false;
        }
        End::Refused(_) => {}
        End::Protocol(why) => {
            tracing::debug!(why, "closing: protocol error");
            outbox.close(CloseCode::Protocol, &why);
        }
        End::TooLarge(why) => {
            tracing::debug!(why, "closing: frame over the limit");
            outbox.close(CloseCode::Size, &why);
        }
        End::Dead => {
            tracing::debug!("closing: client silent");
            outbox.close(CloseCode::Away, "no answer to pings");
        }
        End::Shutdown => outbox.close(CloseCode::Away, RELAY_SHUTTING_DOWN),
    }
    true
}

/// Why a session ends over an error reading the client's socket, before
/// its Hello or after.
fn read_failed(err: WsError) -> End {
    match err {
        // Broken framing is the client's fault, and it hears why, as it
        // does for a malformed message.
        WsError::Capacity(err) => End::TooLarge(err.to_string()),
        // A client killed or cut off: no fault in its framing.
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            End::Gone("the client's connection was reset".into())
        }
        // The same under TLS, which rustls words as a missing close_notify.
        WsError::Io(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            End::Gone("the client's connection was reset".into())
        }
        WsError::Protocol(err) => End::Protocol(format!("invalid WebSocket framing: {err}")),
        // A text message or a close reason that is not UTF-8; tungstenite
        // tells the two apart no further.
        WsError::Utf8(_) => End::Protocol("a text message or close reason that is not UTF-8".into()),
        err => End::Gone(err.to_string()),
    }
}

/// Longest refusal sent: a line for the user, which may quote what the
/// client sent (its version, the name it asked for), and a frame that
/// always fits.
const MAX_REFUSAL: usize = 512;

fn refuse(outbox: &Outbox, reason: String) -> End {
    let reason = truncate(&reason, MAX_REFUSAL).to_string();
    if let Err(err) = outbox.control(&ServerMessage::Refused { reason: reason.clone() }) {
        tracing::error!(%err, "a refusal with a short reason did not fit a frame");
    }
    outbox.close(CloseCode::Policy, &reason);
    End::Refused(reason)
}

/// The session's opening: the client's Hello, its name claimed, the
/// Welcome that tells it so, and news of the requests turned away while
/// the name was held for it; or why the session ends there, the client
/// told when it can be (a name taken, a version to upgrade).
async fn hello<R>(incoming: &mut R, outbox: &Outbox, ctx: &SessionContext, streams: &Arc<Streams>) -> Result<Lease, End>
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let first = first_message(incoming, ctx).await?;
    let requested = requested_name(first, outbox)?;
    let Claimed { lease, missed } = claim(requested, outbox, ctx, streams)?;
    let lease = welcome(lease, outbox, ctx)?;
    tell_missed(missed, streams);
    Ok(lease)
}

/// Tells the client of the requests turned away while its name was held,
/// in the order they came, the way news of any request turned away goes:
/// behind the Welcome, which takes the control queue.
fn tell_missed(missed: Vec<HeldNews>, streams: &Streams) {
    if missed.is_empty() {
        return;
    }
    tracing::debug!(
        count = missed.len(),
        "telling of requests turned away while the name was held"
    );
    for news in missed {
        if let Err(err) = streams.tell(&news.into_message(), &[]) {
            tracing::debug!(%err, "news of a request turned away while the name was held does not fit a frame");
        }
    }
}

/// The client's first binary message, waited for no longer than the
/// Hello may take.
async fn first_message<R>(incoming: &mut R, ctx: &SessionContext) -> Result<Bytes, End>
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    tokio::time::timeout(ctx.hello_timeout, async {
        loop {
            let next = tokio::select! {
                next = incoming.next() => next,
                () = ctx.shutdown.cancelled() => return Err(End::Shutdown),
            };
            match next {
                Some(Ok(Message::Binary(data))) => return Ok(data),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(_)) => return Err(End::Protocol("the first message must be a binary Hello".into())),
                Some(Err(err)) => return Err(read_failed(err)),
                None => return Err(End::Gone("closed before Hello".into())),
            }
        }
    })
    .await
    .map_err(|_| End::Protocol("no Hello in time".into()))?
}

/// Longest client version a refusal repeats.
const MAX_VERSION_SHOWN: usize = 40;

/// The name the Hello in `first` asks for, once its protocol version is
/// this relay's; a client of another version is told which side to upgrade.
fn requested_name(first: Bytes, outbox: &Outbox) -> Result<Option<String>, End> {
    let Some(protocol) = codec::hello_version(&first) else {
        return Err(End::Protocol("the first message must be Hello".into()));
    };
    let decoded = codec::decode::<ClientMessage>(first);
    if protocol != PROTOCOL_VERSION {
        // The client's own words, shown in its terminal and in logs: escaped
        // and of a version's length, as a refused name is quoted.
        let client_version = match &decoded {
            Ok((ClientMessage::Hello { client_version, .. }, _)) => {
                shorten(&escape_str(client_version), MAX_VERSION_SHOWN)
            }
            _ => "unknown".to_owned(),
        };
        return Err(refuse(
            outbox,
            version_mismatch(&client_version, protocol, PROTOCOL_VERSION),
        ));
    }
    match decoded {
        Ok((ClientMessage::Hello { name, .. }, _)) => Ok(name),
        Ok(_) => Err(End::Protocol("the first message must be Hello".into())),
        Err(err) => Err(End::Protocol(err.to_string())),
    }
}

/// Claims the name asked for, or a random one when none was.
fn claim(
    requested: Option<String>,
    outbox: &Outbox,
    ctx: &SessionContext,
    streams: &Arc<Streams>,
) -> Result<Claimed, End> {
    let tunnel: Arc<dyn Tunnel> = Arc::new(SessionTunnel {
        streams: Arc::clone(streams),
        upgrade_told: std::sync::Mutex::new(None),
    });
    if let Some(name) = requested {
        if let Some(why) = names::invalid_reason(&name) {
            return Err(refuse(outbox, names::refusal(&name, &why)));
        }
        return ctx
            .registry
            .claim(&name, ctx.owner, ctx.resume.as_deref(), tunnel)
            .map_err(|err| refuse(outbox, err.to_string()));
    }
    let mut attempts = 0;
    loop {
        match ctx
            .registry
            .claim(&names::random(), ctx.owner, None, Arc::clone(&tunnel))
        {
            Ok(claimed) => return Ok(claimed),
            Err(err) if attempts + 1 >= RANDOM_NAME_ATTEMPTS => return Err(refuse(outbox, err.to_string())),
            Err(_) => attempts += 1,
        }
    }
}

/// Tells the client its tunnel is live, under which name and URL; a
/// Welcome that cannot be sent gives the name back.
fn welcome(lease: Lease, outbox: &Outbox, ctx: &SessionContext) -> Result<Lease, End> {
    let public_url = ctx.public_url.for_name(&lease.name);
    // Named for what it is: `token=` would read as the secret logged.
    let token_label = ctx.token_label.as_deref().map(tracing::field::display);
    tracing::info!(tunnel = %lease.name, token_label, peer = %ctx.peer, %public_url, "tunnel connected");
    let welcome = ServerMessage::Welcome {
        protocol: PROTOCOL_VERSION,
        name: lease.name.clone(),
        public_url,
        resume: lease.resume.clone(),
    };
    // The URL repeats the Host the client upgraded with, which may be long.
    if let Err(err) = outbox.control(&welcome) {
        // A client that resumed its name knows the secret to come back
        // for it; one given a new secret never heard it, so holding the
        // name would only keep it from everyone.
        if ctx.resume.as_deref() == Some(lease.resume.as_str()) {
            ctx.registry.release(&lease);
        } else {
            ctx.registry.forget(&lease);
        }
        return Err(refuse(
            outbox,
            format!("the tunnel's URL does not fit in a frame: {err}"),
        ));
    }
    Ok(lease)
}

async fn run<R>(
    incoming: &mut R,
    outbox: &Outbox,
    ctx: &SessionContext,
    streams: &Streams,
    dead: &CancellationToken,
) -> End
where
    R: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let mut pings = interval(ctx.ping_interval);
    pings.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut drain = interval(DRAIN_POLL);
    let mut drain_deadline: Option<Instant> = None;
    let mut last_heard = Instant::now();
    // Made once, not on every turn of the loop: each one made registers
    // with its token, under a lock, and unregisters when dropped.
    let socket_dead = dead.cancelled();
    let shutting_down = ctx.shutdown.cancelled();
    let cut_short = ctx.cut_short.cancelled();
    tokio::pin!(socket_dead, shutting_down, cut_short);
    loop {
        tokio::select! {
            msg = incoming.next() => {
                last_heard = Instant::now();
                match msg {
                    Some(Ok(Message::Binary(data))) => {
                        let delivered = codec::decode::<ClientMessage>(data)
                            .map_err(|err| err.to_string())
                            .and_then(|(msg, body)| streams.deliver(msg, body).map_err(|err| err.0));
                        if let Err(why) = delivered {
                            return End::Protocol(why);
                        }
                    }
                    Some(Ok(Message::Text(_))) => {
                        return End::Protocol("text messages are not part of the protocol".into())
                    }
                    Some(Ok(Message::Close(Some(frame)))) if frame.code == CloseCode::Away => return End::Goodbye,
                    Some(Ok(Message::Close(_))) => return End::Gone("client closed the socket".into()),
                    Some(Ok(_)) => {}
                    Some(Err(err)) => return read_failed(err),
                    None => return End::Gone("socket closed".into()),
                }
            }
            due = pings.tick() => {
                // The relay itself was not running (stopped, or its machine
                // asleep): the client's frames from that time are still
                // unread, and its silence is counted from now.
                if overslept(due.into_std(), Instant::now().into_std()) {
                    last_heard = Instant::now();
                }
                // Checked once per ping: declaring death when the next check
                // would come too late keeps detection within `dead_after`.
                if last_heard.elapsed() + ctx.ping_interval > ctx.dead_after {
                    return End::Dead;
                }
                outbox.ping();
            }
            () = &mut socket_dead => return End::Gone("socket write failed".into()),
            () = &mut shutting_down, if drain_deadline.is_none() => {
                streams.refuse_new();
                drain_deadline = Some(Instant::now() + ctx.drain_timeout);
            }
            () = &mut cut_short, if drain_deadline.is_some() => return End::Shutdown,
            _ = drain.tick(), if drain_deadline.is_some() => {
                if streams.in_flight() == 0 || drain_deadline.is_some_and(|d| d <= Instant::now()) {
                    return End::Shutdown;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio_tungstenite::tungstenite::{Error as WsError, Message};
    use tokio_util::sync::CancellationToken;

    use super::{await_close_reply, read_failed, run, End, PublicUrl, SessionContext};
    use crate::registry::LocalRegistry;
    use crate::stream::Streams;
    use crate::writer;

    /// A client given up on as silent is read until it answers the close
    /// frame, until the wait's limit, or until the relay stops; never longer.
    #[tokio::test(start_paused = true)]
    async fn a_silent_client_is_read_until_its_close_reply_and_no_longer() {
        use futures_util::StreamExt;
        let never = CancellationToken::new();
        let limit = Duration::from_secs(60);
        let replied = futures_util::stream::iter([
            Ok(Message::Pong(Default::default())),
            Ok(Message::Close(None)),
            Ok(Message::binary(b"after the close".to_vec())),
        ]);
        let mut replied = Box::pin(replied);
        let started = tokio::time::Instant::now();
        await_close_reply(&mut replied, limit, &never).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "ended on the close reply");
        assert!(replied.next().await.is_some(), "and read nothing past it");

        let mut silent = futures_util::stream::pending::<Result<Message, WsError>>();
        await_close_reply(&mut silent, limit, &never).await;
        assert_eq!(started.elapsed(), limit, "ended at the limit");

        let stopping = CancellationToken::new();
        stopping.cancel();
        await_close_reply(&mut silent, limit, &stopping).await;
        assert_eq!(started.elapsed(), limit, "ended at once as the relay stops");
    }

    /// A client cut off is logged the same way over TLS as over TCP, not
    /// in rustls's words about close_notify.
    #[test]
    fn a_client_cut_off_reads_the_same_with_and_without_tls() {
        use tokio_tungstenite::tungstenite::error::ProtocolError;
        let tcp = WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake);
        let tls = WsError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify",
        ));
        for err in [tcp, tls] {
            assert_eq!(
                read_failed(err).to_string(),
                "the client went away: the client's connection was reset"
            );
        }
    }

    /// The relay stopped for 20 s (a `kill -STOP`, its machine asleep) did
    /// not hear the client for its own reason: the silence is counted
    /// from when it runs again, and a client silent since is dead only
    /// `dead_after` later.
    #[tokio::test(start_paused = true)]
    async fn a_pause_of_the_relays_own_is_not_the_clients_silence() {
        let (outbox, _written) = writer::channel();
        let streams = Streams::new(outbox.clone(), 8, crate::answer_budget::AnswerBudget::new(u64::MAX));
        let ctx = SessionContext {
            peer: ([127, 0, 0, 1], 9).into(),
            registry: Arc::new(LocalRegistry::new(Duration::from_secs(60), None)),
            owner: None,
            token_label: None,
            resume: None,
            public_url: PublicUrl {
                scheme: "http",
                domain: None,
                host: "127.0.0.1:9".into(),
                proxied_port: None,
            },
            hello_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(15),
            max_in_flight: 8,
            answer_budget: crate::answer_budget::AnswerBudget::new(u64::MAX),
            drain_timeout: Duration::from_secs(10),
            shutdown: CancellationToken::new(),
            cut_short: CancellationToken::new(),
            name_grace: Duration::from_secs(60),
        };
        let dead = CancellationToken::new();
        let mut silent = futures_util::stream::pending::<Result<Message, WsError>>();
        let started = tokio::time::Instant::now();
        let session = run(&mut silent, &outbox, &ctx, &streams, &dead);
        tokio::pin!(session);
        assert!(futures_util::poll!(session.as_mut()).is_pending());
        // The clock moves with nothing run: the process was stopped.
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(matches!(session.await, End::Dead));
        let lasted = started.elapsed();
        assert!(
            lasted >= Duration::from_secs(30),
            "declared dead {lasted:?} in, not after 15 s of the relay running again at 20 s"
        );
    }
}
