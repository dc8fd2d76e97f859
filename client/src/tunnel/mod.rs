//! The tunnel: connect to the relay, serve the session, reconnect with
//! backoff when the relay goes away, and get the same name back.

mod awake;
mod backoff;
mod body;
pub mod connect;
mod contact;
mod exchange;
mod frame_writer;
mod in_flight;
mod outage;
mod outbox;
mod pause;
mod persist;
mod plain_url;
mod respond;
mod session;

use std::sync::Arc;
use std::time::Duration;

use portpreview_shared::message::StreamId;
use portpreview_shared::sync::lock;
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

pub use backoff::Backoff;
pub use connect::{ConnectError, ConnectOptions, Welcome};
pub use exchange::HostHeader;
use exchange::Shared;
pub use session::{SessionEnd, DRAIN_LIMIT};

use crate::events::{report, Events, TunnelEvent};
use crate::forward::Forwarder;
use crate::store::recorder::Recorder;
use crate::target::Target;

/// How long past [`DRAIN_LIMIT`] exchanges left by a lost session are
/// waited for, to record that they were cut off.
const SETTLE_MARGIN: Duration = Duration::from_millis(500);

/// How long reconnecting keeps asking for a name the relay holds (409).
/// A welcome lost on its way leaves the relay holding the name for a
/// connection the client never saw, under a resume secret it never got:
/// the name is free once that connection's grace period ends (a minute by
/// default). Past this, another client has it, and waiting would not help.
/// A start the relay holds back (a held name, a busy relay) waits as long.
const NAME_HELD_PATIENCE: Duration = Duration::from_secs(300);

/// How long reconnecting keeps asking for a name a live client has (409
/// without a time it is free). The relay hands a live name to the client
/// proving its resume secret; the one case of its own it refuses is a
/// connection whose welcome never arrived, which the relay finds dead
/// within its ping timeout (15 s) and holds from then on. Past this,
/// another client has the URL, and the user must hear so now, not after
/// [`NAME_HELD_PATIENCE`].
const NAME_IN_USE_PATIENCE: Duration = Duration::from_secs(45);

/// The longest a start held back waits before it asks again, whatever
/// the relay said: a relay restarted meanwhile has forgotten the hold, and
/// the name is free at once.
const HELD_BACK_RECHECK: Duration = Duration::from_secs(5);

/// Default time the local handler has to answer before the caller gets 504.
/// Under the relay's own 30 s so the caller hears the local reason.
pub const DEFAULT_LOCAL_TIMEOUT: Duration = Duration::from_secs(28);

/// Everything a tunnel needs.
pub struct TunnelConfig {
    /// How to reach the relay.
    pub connect: ConnectOptions,
    /// Where requests go.
    pub target: Target,
    /// Host header policy.
    pub host_header: HostHeader,
    /// How long the local handler may take.
    pub local_timeout: Duration,
    /// The relay runs in this process: stopped with it, it never gives up
    /// on the tunnel for a pause of the process (see `pause`).
    pub relay_in_process: bool,
}

/// How the user stops a tunnel, as a relay is stopped: `drain` takes no
/// new requests and gives those in flight up to [`DRAIN_LIMIT`] to finish;
/// `now` (ctrl-c a second time) cuts them off as well.
pub use portpreview_server::Stop;

/// Resolves when requests still in flight are cut off: [`DRAIN_LIMIT`]
/// after the user asked to stop, or at once when asked again.
pub async fn drain_over(stop: &Stop) {
    stop.drain.cancelled().await;
    tokio::select! {
        () = tokio::time::sleep(DRAIN_LIMIT) => {}
        () = stop.now.cancelled() => {}
    }
}

/// Runs the tunnel until `stop` is asked. Fails when the first connection cannot
/// be made or the relay refuses the tunnel; later drops are retried.
pub async fn run(
    config: TunnelConfig,
    recorder: Option<Recorder>,
    events: Events,
    stop: Stop,
) -> Result<(), ConnectError> {
    let target = config.target.to_string();
    let shared = Arc::new(Shared {
        forwarder: Forwarder::new(config.target),
        recorder,
        events: events.clone(),
        host_header: config.host_header,
        local_timeout: config.local_timeout,
        public_url: Default::default(),
        not_recording: Default::default(),
        stop: stop.clone(),
        relay_in_process: config.relay_in_process,
    });
    let mut unfinished = Unfinished::default();
    let result = serve_until_stopped(config.connect, target, &shared, events.clone(), &stop, &mut unfinished).await;
    unfinished.settle(&events).await;
    shared.forwarder.close().await;
    result
}

/// Exchanges whose relay connection was lost while their handlers worked.
/// They go on while the tunnel reconnects, to record the handlers' answers.
#[derive(Default)]
struct Unfinished(Vec<JoinSet<StreamId>>);

impl Unfinished {
    /// Keeps the exchanges a lost session left, and lets go of finished ones.
    fn keep(&mut self, left: JoinSet<StreamId>) {
        self.prune();
        if !left.is_empty() {
            self.0.push(left);
        }
    }

    /// Lets go of the exchanges that have finished.
    fn prune(&mut self) {
        self.0.retain_mut(|set| {
            while set.try_join_next().is_some() {}
            !set.is_empty()
        });
    }

    /// Gives them up to [`DRAIN_LIMIT`], as any exchange gets at shutdown,
    /// and says so, as a live session does: each records its handler's
    /// answer, or that it was cut off ([`drain_over`]).
    async fn settle(mut self, events: &Events) {
        self.prune();
        let in_flight: usize = self.0.iter().map(JoinSet::len).sum();
        if in_flight == 0 {
            return;
        }
        report(
            events,
            TunnelEvent::Stopping {
                in_flight,
                within: DRAIN_LIMIT,
            },
        );
        let finished = async {
            for mut set in self.0 {
                while set.join_next().await.is_some() {}
            }
        };
        // The exchanges end themselves at the limit; the margin lets them
        // record that before they are dropped.
        let _ = tokio::time::timeout(DRAIN_LIMIT + SETTLE_MARGIN, finished).await;
    }
}

/// Serves one session on a task of its own. Every frame and every answer
/// wakes the session; on the task that runs the tunnel, each wake-up would
/// also poll what is joined beside it (the signal watch, the display),
/// registering each of their waits again. A panic in the session ends the
/// tunnel with an error rather than unwinding through it: the live TUI,
/// on a thread of its own, then gives the terminal back and the reason is
/// printed. Dropping the tunnel ends the session.
async fn serve_session(
    socket: connect::RelaySocket,
    shared: Arc<Shared>,
) -> Result<(SessionEnd, JoinSet<StreamId>), ConnectError> {
    session_outcome(tokio::spawn(session::serve(socket, shared))).await
}

async fn session_outcome(
    session: tokio::task::JoinHandle<(SessionEnd, JoinSet<StreamId>)>,
) -> Result<(SessionEnd, JoinSet<StreamId>), ConnectError> {
    match AbortOnDropHandle::new(session).await {
        Ok(ended) => Ok(ended),
        Err(err) if err.is_panic() => {
            let payload = err.into_panic();
            Err(ConnectError::Internal(crate::panic_message(&*payload).to_owned()))
        }
        // Only the runtime shutting down cancels it, and takes this task too.
        Err(_) => Ok((SessionEnd::Lost("the session was cut off".into()), JoinSet::new())),
    }
}

async fn serve_until_stopped(
    mut options: ConnectOptions,
    target: String,
    shared: &Arc<Shared>,
    events: Events,
    stop: &Stop,
    unfinished: &mut Unfinished,
) -> Result<(), ConnectError> {
    let mut backoff = Backoff::default();
    let mut connected_once = false;
    let mut failed_tries = 0;
    let mut name_held_since = None;
    let mut name_in_use_since = None;
    let mut held_back_since = None;
    let mut warned_plain_url = false;
    loop {
        let attempt = tokio::select! {
            () = stop.drain.cancelled() => return Ok(()),
            attempt = connect::connect(&options) => attempt,
        };
        let reason = match attempt {
            Ok((socket, welcome)) => {
                connected_once = true;
                failed_tries = 0;
                name_held_since = None;
                name_in_use_since = None;
                let up_since = tokio::time::Instant::now();
                // Ask for the same name next time, with the proof that it is
                // ours, so the URL survives reconnects.
                options.name = Some(welcome.name.clone());
                options.resume = Some(welcome.resume.clone());
                lock(&shared.public_url).clone_from(&welcome.public_url);
                let also_url = connect::path_url(&options.url, &welcome.name)
                    .filter(|by_path| !welcome.public_url.contains("/t/") && *by_path != welcome.public_url);
                let plain_url = plain_url::warning(&options.url, &welcome.public_url).filter(|_| !warned_plain_url);
                report(
                    &events,
                    TunnelEvent::Connected {
                        public_url: welcome.public_url,
                        also_url,
                        target: target.clone(),
                    },
                );
                // Once: each reconnect prints the same URL again.
                if let Some(text) = plain_url {
                    warned_plain_url = true;
                    report(&events, TunnelEvent::Notice { text });
                }
                let (end, left) = serve_session(socket, shared.clone()).await?;
                backoff.connection_ended(up_since.elapsed());
                unfinished.keep(left);
                match end {
                    SessionEnd::Shutdown => return Ok(()),
                    SessionEnd::Refused(reason) => return Err(ConnectError::Refused(reason)),
                    SessionEnd::Lost(reason) | SessionEnd::Malformed(reason) => reason,
                }
            }
            Err(err) => {
                // Told once: a relay asking again and again is waited on quietly.
                let first_held_back = held_back_since.is_none();
                if let Some(wait) = wait_at_start(&err, connected_once, &mut held_back_since) {
                    if first_held_back {
                        report(
                            &events,
                            TunnelEvent::HeldBack {
                                text: held_back_text(&err),
                            },
                        );
                    }
                    tokio::select! {
                        () = stop.drain.cancelled() => return Ok(()),
                        () = tokio::time::sleep(wait.min(HELD_BACK_RECHECK)) => continue,
                    }
                }
                // A 409 for the name this client had: see NAME_HELD_PATIENCE
                // and NAME_IN_USE_PATIENCE.
                let in_use = matches!(err, ConnectError::NameTaken { free_in: None, .. });
                if !in_use {
                    name_in_use_since = None;
                }
                let in_use_for = in_use.then(|| {
                    name_in_use_since
                        .get_or_insert_with(tokio::time::Instant::now)
                        .elapsed()
                });
                let own_name_held = connected_once
                    && matches!(err, ConnectError::NameTaken { .. })
                    && in_use_for.is_none_or(|waited| waited < NAME_IN_USE_PATIENCE)
                    && name_held_since.get_or_insert_with(tokio::time::Instant::now).elapsed() < NAME_HELD_PATIENCE;
                let mut err = err;
                if let (ConnectError::NameTaken { why, .. }, Some(waited)) = (&mut err, in_use_for) {
                    if connected_once && !own_name_held {
                        why.push_str(&format!(
                            ": another client has had it for {} s while this one reconnected, and the URL now \
                             reaches that client",
                            waited.as_secs()
                        ));
                    }
                }
                // A page where the relay was, once it has served this tunnel:
                // a proxy's while the relay behind it restarts.
                let page_meanwhile = connected_once && matches!(err, ConnectError::NotARelay { .. });
                // Waiting out a hold or a busy relay, which may restart
                // meanwhile: its moments down are waited through, as a
                // reconnect's are, within the same patience.
                let down_while_held_back =
                    !err.is_fatal() && held_back_since.is_some_and(|since| since.elapsed() < NAME_HELD_PATIENCE);
                let waited_out = own_name_held || page_meanwhile || down_while_held_back;
                if !waited_out && (err.is_fatal() || !connected_once) {
                    return Err(err);
                }
                failed_tries += 1;
                match &err {
                    // Its own name, waited for: no advice to ask for another.
                    ConnectError::NameTaken {
                        name,
                        why,
                        free_in: None,
                    } => format!(
                        "tunnel name {name:?} is in use (409): {why}; asking for it again, as the relay may not yet \
                         know this client's last connection is gone"
                    ),
                    ConnectError::NameTaken { name, why, .. } => {
                        format!("tunnel name {name:?} is held (409): {why}; asking for it again")
                    }
                    _ => err.to_string(),
                }
            }
        };
        let retry_in = backoff.next_delay();
        tracing::info!(%reason, ?retry_in, failed_tries, "relay connection lost; reconnecting");
        report(
            &events,
            TunnelEvent::Disconnected {
                reason,
                failed_tries,
                retry_in,
            },
        );
        tokio::select! {
            () = stop.drain.cancelled() => return Ok(()),
            () = tokio::time::sleep(retry_in) => {}
        }
    }
}

/// How long to wait at the start when the relay says when to ask again:
/// for a name it holds for the client that last had it (most often this
/// one, started again after a crash or a kill, whose user wants the URL
/// their provider is set up with), or while it is busy. Within
/// [`NAME_HELD_PATIENCE`] of the first such answer only; `None` for
/// anything else, which stays the error it is.
fn wait_at_start(
    err: &ConnectError,
    connected_once: bool,
    held_since: &mut Option<tokio::time::Instant>,
) -> Option<Duration> {
    let wait = err.told_to_wait()?;
    if connected_once {
        return None;
    }
    let waited = held_since.get_or_insert_with(tokio::time::Instant::now).elapsed();
    // The relay's figure may be any number at all.
    waited
        .checked_add(wait)
        .is_some_and(|done| done <= NAME_HELD_PATIENCE)
        .then_some(wait)
}

/// The notice for a start the relay holds back.
fn held_back_text(err: &ConnectError) -> String {
    match err {
        ConnectError::NameTaken { name, why, .. } => {
            format!("tunnel name {name:?} is taken: {why}; waiting for it (ctrl-c stops; --name asks for another)")
        }
        other => format!("{other}; trying again when it says (ctrl-c stops)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_name_held_at_the_start_is_waited_for_within_patience() {
        let held = |secs| ConnectError::NameTaken {
            name: "hooks".into(),
            why: "held".into(),
            free_in: Some(Duration::from_secs(secs)),
        };
        let mut since = None;
        assert_eq!(
            wait_at_start(&held(56), false, &mut since),
            Some(Duration::from_secs(56))
        );
        assert_eq!(
            wait_at_start(&held(56), true, &mut None),
            None,
            "a reconnect waits its own way"
        );
        let live = ConnectError::NameTaken {
            name: "hooks".into(),
            why: "in use".into(),
            free_in: None,
        };
        assert_eq!(
            wait_at_start(&live, false, &mut None),
            None,
            "a live client's name is never free"
        );
        tokio::time::advance(NAME_HELD_PATIENCE - Duration::from_secs(10)).await;
        assert_eq!(
            wait_at_start(&held(10), false, &mut since),
            Some(Duration::from_secs(10))
        );
        assert_eq!(wait_at_start(&held(11), false, &mut since), None, "past patience");
        assert_eq!(
            wait_at_start(&held(u64::MAX), false, &mut since),
            None,
            "a relay's wait of ages, after a wait"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_relay_at_the_start_is_waited_on() {
        let busy = ConnectError::Busy {
            told: "ws://relay (the server there answered 503 Service Unavailable: try again shortly)".into(),
            retry_in: Duration::from_secs(5),
        };
        assert_eq!(wait_at_start(&busy, false, &mut None), Some(Duration::from_secs(5)));
        assert_eq!(
            wait_at_start(&busy, true, &mut None),
            None,
            "a reconnect backs off its own way"
        );
        assert_eq!(
            held_back_text(&busy),
            "cannot reach the relay: ws://relay (the server there answered 503 Service Unavailable: try again \
             shortly); trying again when it says (ctrl-c stops)"
        );
    }

    #[tokio::test]
    async fn a_panic_in_the_session_ends_the_tunnel_with_an_error() {
        let session = tokio::spawn(async {
            if true {
                panic!("a broken invariant");
            }
            (SessionEnd::Shutdown, JoinSet::new())
        });
        let err = session_outcome(session).await.err().map(|err| err.to_string());
        assert_eq!(
            err.as_deref(),
            Some("internal error in the tunnel, which stopped: a broken invariant")
        );
    }
}
