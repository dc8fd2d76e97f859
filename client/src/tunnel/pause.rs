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
//! ever. Which of the two happened shows in what the socket holds on
//! waking, when the relay is on this machine. Over a network the close
//! frame of a relay that gave up just before the client woke may still be
//! on its way, so there a pause this long is taken as given up: the safe
//! guess, since a request not forwarded is retried by its provider, and
//! one forwarded twice acts twice.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use portpreview_server::config::{DEFAULT_DEAD_AFTER, DEFAULT_PING_INTERVAL};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};

/// What a read of the socket gives.
pub type Read = Option<Result<Message, tungstenite::Error>>;

/// The soonest a relay with the default settings gives up on a silent
/// client: it checks at each ping, every 5 s, and gives up on a client that
/// has not answered the ping of 10 s before, which a client stopped for
/// less than that has. A shorter pause needs no second look.
const RELAY_MAY_GIVE_UP: Duration = DEFAULT_DEAD_AFTER.saturating_sub(DEFAULT_PING_INTERVAL);

/// How long after such a pause the requests read are taken as ones sent
/// during it, when the relay is taken to have given up without its close
/// frame to show it: what waited in the socket is read at once.
const WAKING: Duration = Duration::from_millis(500);

/// Frames, and bytes of them, read ahead on waking at most. More waiting
/// than this may be a socket that filled during the pause, behind which a
/// relay's close frame could not be sent: the relay is taken to have given
/// up, the safe guess.
const MOST_AHEAD: usize = 256;
const MOST_AHEAD_BYTES: usize = 64 * 1024;

/// A pause long enough for the relay to have given up on this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// How long nothing came from the relay.
    quiet: Duration,
    /// Until when requests read are ones sent during the pause.
    until: Instant,
    /// Whether the relay gave up on this client, and whether its close
    /// frame showed it; `None` until the frames read on waking were looked at.
    relay_gave_up: Option<GaveUp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GaveUp {
    /// The relay still holds its callers.
    No,
    /// Its close frame, or the end of the socket, came behind the requests
    /// sent during the pause: every request before it is one of them.
    Shown,
    /// Taken to have given up, with nothing to show it.
    Guessed,
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

    /// Judges the pause on the frames [`read_ahead`] read at once on
    /// waking, all that the socket held if `whole`: the relay gave up if
    /// they end the session; it is taken to have given up if they may not
    /// be all there was, or if it is not on this machine (`on_loopback`).
    pub fn judge(&mut self, read: &VecDeque<Read>, whole: bool, on_loopback: bool) {
        let verdict = if read.iter().any(|next| !keeps_going(next)) {
            GaveUp::Shown
        } else if whole && on_loopback {
            GaveUp::No
        } else {
            GaveUp::Guessed
        };
        self.relay_gave_up = Some(verdict);
    }

    /// While requests read are ones the relay has answered 502 itself:
    /// how long the pause was.
    pub fn answered_by_the_relay(&self) -> Option<Duration> {
        match self.relay_gave_up? {
            GaveUp::No => None,
            // The session ends at the close frame: whatever comes before it
            // was sent during the pause.
            GaveUp::Shown => Some(self.quiet),
            GaveUp::Guessed => (Instant::now() < self.until).then_some(self.quiet),
        }
    }
}

/// Reads into `read` what the socket already holds, without waiting, and
/// none past the session's end; true when that was all it held, false when
/// it stopped at [`MOST_AHEAD`] frames or [`MOST_AHEAD_BYTES`].
pub fn read_ahead<S>(frames: &mut S, read: &mut VecDeque<Read>) -> bool
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let mut bytes: usize = read.iter().map(size).sum();
    while read.back().is_none_or(keeps_going) {
        if read.len() > MOST_AHEAD || bytes > MOST_AHEAD_BYTES {
            return false;
        }
        match frames.next().now_or_never() {
            Some(next) => {
                bytes += size(&next);
                read.push_back(next);
            }
            None => return true,
        }
    }
    true
}

/// Whether the session goes on after this read: a close frame, an error or
/// the end of the socket ends it.
fn keeps_going(next: &Read) -> bool {
    !matches!(next, None | Some(Err(_)) | Some(Ok(Message::Close(_))))
}

/// Bytes a read holds.
fn size(next: &Read) -> usize {
    match next {
        Some(Ok(message)) => message.len(),
        _ => 0,
    }
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
        pause.judge(&VecDeque::from([binary(), binary()]), true, true);
        assert!(!pause.unjudged());
        assert_eq!(pause.answered_by_the_relay(), None, "the relay still holds its callers");

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary(), Some(Ok(Message::Close(None)))]), true, true);
        assert_eq!(pause.answered_by_the_relay(), Some(Duration::from_secs(12)));
        tokio::time::advance(WAKING).await;
        assert!(
            pause.answered_by_the_relay().is_some(),
            "until the close frame, read at once or not"
        );

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary(), None]), true, true);
        assert!(pause.answered_by_the_relay().is_some(), "the socket closed behind them");

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary()]), false, true);
        assert!(
            pause.answered_by_the_relay().is_some(),
            "more than read: the safe guess"
        );
        tokio::time::advance(WAKING).await;
        assert_eq!(
            pause.answered_by_the_relay(),
            None,
            "what comes later was sent after the pause"
        );

        let mut pause = twelve();
        pause.judge(&VecDeque::from([binary()]), true, false);
        assert!(
            pause.answered_by_the_relay().is_some(),
            "over a network, a close frame may be on its way"
        );
    }

    #[tokio::test]
    async fn reading_ahead_takes_what_is_there_and_stops_at_the_end_or_the_limit() {
        let mut frames = futures_util::stream::iter([
            Ok(Message::binary(b"1".to_vec())),
            Ok(Message::Close(None)),
            Ok(Message::binary(b"past the close".to_vec())),
        ]);
        let mut read = VecDeque::new();
        assert!(read_ahead(&mut frames, &mut read));
        assert_eq!(read.len(), 2, "{read:?}");

        let mut waiting =
            futures_util::stream::iter([Ok(Message::binary(b"1".to_vec()))]).chain(futures_util::stream::pending());
        let mut read = VecDeque::new();
        assert!(read_ahead(&mut waiting, &mut read), "all there was");
        assert_eq!(read.len(), 1, "nothing is waited for");

        let chunk = || Ok(Message::binary(vec![0; 16 * 1024]));
        let mut full = futures_util::stream::iter(std::iter::repeat_with(chunk).take(100));
        let mut read = VecDeque::new();
        assert!(!read_ahead(&mut full, &mut read), "a socket that may have filled");
        assert_eq!(read.len(), 5, "{} frames", read.len());
    }
}
