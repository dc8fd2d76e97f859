//! A pause of this process (ctrl-z on `--no-tui`, a debugger, a laptop
//! asleep) as the session sees it once it runs again: whether the relay
//! gave up on it meanwhile, which decides what becomes of the requests the
//! relay sent during the pause.
//!
//! A relay that gives up on a silent client answers its callers 502, then
//! sends a close frame behind the requests it had sent. Those requests,
//! forwarded late, would be duplicates of the tunnel's own making: the
//! provider retries a delivery whose caller saw it fail. A relay that has
//! not given up still holds its callers, and its requests are forwarded as
//! ever. Which of the two happened shows in what the socket holds on waking.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use portpreview_server::config::{DEFAULT_DEAD_AFTER, DEFAULT_PING_INTERVAL};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};

/// What a read of the socket gives.
pub type Read = Option<Result<Message, tungstenite::Error>>;

/// The soonest a relay with the default settings gives up on a silent
/// client: it checks at each ping, every 5 s, and gives up once an answer
/// to the next could no longer come within 15 s of the client's last frame.
/// A shorter pause needs no second look.
pub const RELAY_MAY_GIVE_UP: Duration = DEFAULT_DEAD_AFTER.saturating_sub(DEFAULT_PING_INTERVAL);

/// The latest it does: past this, it has given up whatever the socket shows
/// (a close frame stuck behind a full socket would not show).
const RELAY_HAS_GIVEN_UP: Duration = DEFAULT_DEAD_AFTER;

/// How long after such a pause the requests read are taken as ones sent
/// during it: what waited in the socket is read at once.
pub const WAKING: Duration = Duration::from_millis(500);

/// Frames read ahead on waking at most. More waiting than this is a pause
/// with traffic the socket could not have held for long: the relay is taken
/// to have given up, as the safe guess (a request not forwarded is retried
/// by its provider; one forwarded twice acts twice).
const MOST_AHEAD: usize = 256;

/// A pause long enough for the relay to have given up on this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// How long nothing came from the relay.
    pub quiet: Duration,
    /// Until when requests read are ones sent during the pause.
    until: Instant,
    /// Whether the relay gave up on this client; `None` until the frames
    /// read on waking have shown it.
    relay_gave_up: Option<bool>,
}

impl Pause {
    /// The pause that ends now after `quiet` without a frame, if the relay
    /// may have given up on this client in it.
    pub fn noticed(quiet: Duration) -> Option<Pause> {
        (quiet > RELAY_MAY_GIVE_UP).then(|| Pause {
            quiet,
            until: Instant::now() + WAKING,
            relay_gave_up: None,
        })
    }

    /// Whether the frames read on waking are still to be looked at.
    pub fn unjudged(&self) -> bool {
        self.relay_gave_up.is_none() && Instant::now() < self.until
    }

    /// Judges the pause on the frames read at once on waking: the relay
    /// gave up if they end the session, or if there were more than
    /// [`MOST_AHEAD`] of them, or if the pause was longer than any relay
    /// with the default settings waits.
    pub fn judge(&mut self, read: &VecDeque<Read>) {
        let ended = read.iter().any(|next| !keeps_going(next));
        let gave_up = ended || read.len() > MOST_AHEAD || self.quiet > RELAY_HAS_GIVEN_UP;
        self.relay_gave_up = Some(gave_up);
    }

    /// While requests read are ones the relay has answered 502 itself:
    /// how long the pause was.
    pub fn answered_by_the_relay(&self) -> Option<Duration> {
        (self.relay_gave_up == Some(true) && Instant::now() < self.until).then_some(self.quiet)
    }
}

/// Reads into `read` what the socket already holds, without waiting:
/// up to one frame past [`MOST_AHEAD`], and none past the session's end.
pub fn read_ahead<S>(frames: &mut S, read: &mut VecDeque<Read>)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    while read.len() <= MOST_AHEAD && read.back().is_none_or(keeps_going) {
        match frames.next().now_or_never() {
            Some(next) => read.push_back(next),
            None => return,
        }
    }
}

/// Whether the session goes on after this read: a close frame, an error or
/// the end of the socket ends it.
fn keeps_going(next: &Read) -> bool {
    !matches!(next, None | Some(Err(_)) | Some(Ok(Message::Close(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary() -> Read {
        Some(Ok(Message::binary(b"frame".to_vec())))
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_is_judged_by_what_the_socket_holds_on_waking() {
        assert_eq!(
            Pause::noticed(Duration::from_secs(9)),
            None,
            "too short for any relay to give up"
        );
        let twelve = || Pause::noticed(Duration::from_secs(12)).expect("long enough");

        let mut pause = twelve();
        assert!(pause.unjudged());
        pause.judge(&VecDeque::from([binary(), binary()]));
        assert_eq!(pause.answered_by_the_relay(), None, "the relay still holds its callers");

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary(), Some(Ok(Message::Close(None)))]));
        assert_eq!(pause.answered_by_the_relay(), Some(Duration::from_secs(12)));
        tokio::time::advance(WAKING).await;
        assert_eq!(
            pause.answered_by_the_relay(),
            None,
            "what comes later was sent after the pause"
        );

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary(), None]));
        assert!(pause.answered_by_the_relay().is_some(), "the socket closed behind them");

        let mut pause = twelve();
        pause.judge(&std::iter::repeat_with(binary).take(MOST_AHEAD + 1).collect());
        assert!(
            pause.answered_by_the_relay().is_some(),
            "too much to tell: the safe guess"
        );

        let mut pause = Pause::noticed(Duration::from_secs(16)).expect("long enough");
        pause.judge(&VecDeque::from([binary()]));
        assert!(
            pause.answered_by_the_relay().is_some(),
            "longer than any default relay waits"
        );
    }

    #[tokio::test]
    async fn reading_ahead_takes_what_is_there_and_stops_at_the_end() {
        let mut frames = futures_util::stream::iter([
            Ok(Message::binary(b"1".to_vec())),
            Ok(Message::Close(None)),
            Ok(Message::binary(b"past the close".to_vec())),
        ]);
        let mut read = VecDeque::new();
        read_ahead(&mut frames, &mut read);
        assert_eq!(read.len(), 2, "{read:?}");

        let mut waiting =
            futures_util::stream::iter([Ok(Message::binary(b"1".to_vec()))]).chain(futures_util::stream::pending());
        let mut read = VecDeque::new();
        read_ahead(&mut waiting, &mut read);
        assert_eq!(read.len(), 1, "nothing is waited for");
    }
}
