//! A pause of this process (ctrl-z on `--no-tui`, a debugger, a laptop
//! asleep) as the session sees it once it runs again.
//!
//! A relay gives up on a silent client 10 to 15 s after its last word (it
//! checks at each ping), answers its callers 502 and closes the socket
//! behind the requests it had sent. Those requests, forwarded late, would
//! be duplicates of the tunnel's own making: the provider retries a
//! delivery whose caller saw it fail. Whether the relay gave up cannot be
//! told from the requests: its close may still be on its way, or held back
//! by a socket the pause filled. So after a pause long enough for it, the
//! client pings the relay, and every request read before the answer waits
//! for it. Whatever a relay that gave up sent before giving up comes
//! before any answer of its: it answers a ping only while its socket is
//! open, after everything it had handed the socket, and sends nothing
//! after. So an answer says that the relay still waits on each of them
//! (and, the ping being a word from the client, will for a while yet):
//! they are forwarded then. A connection that ends first leaves them
//! unforwarded: a request not forwarded is retried by its provider; one
//! forwarded twice acts twice.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use portpreview_server::config::DEFAULT_PING_INTERVAL;
use tokio::time::Instant;

/// The shortest pause a relay with the default settings may give up on
/// this client in. It checks at each ping, every 5 s, and gives up on a
/// client whose last frame is more than 10 s old; the client has then
/// heard nothing for at least a ping's interval, less what delays the
/// frames between the two. Two seconds are left for those: a pause taken
/// for one costs only a round trip of requests not forwarded.
const RELAY_MAY_GIVE_UP: Duration = DEFAULT_PING_INTERVAL.saturating_add(Duration::from_secs(2));

/// How long the relay has to answer the ping after a pause. One that
/// does not (a proxy that drops pings) would leave every request refused:
/// the session is given up instead, and a new one starts clean.
pub const ANSWER_LIMIT: Duration = DEFAULT_PING_INTERVAL.saturating_mul(2);

/// When the relay was last heard from, on two clocks: the monotonic one,
/// and the wall clock, which runs on while a laptop sleeps.
#[derive(Debug, Clone, Copy)]
pub struct Heard {
    at: Instant,
    wall: SystemTime,
}

impl Heard {
    /// Now.
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// The monotonic instant, which the silence limit counts from.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// How long before `now` this was, on whichever clock says longer.
    pub fn before(&self, now: &Heard) -> Duration {
        let wall = now.wall.duration_since(self.wall).unwrap_or_default();
        now.at.saturating_duration_since(self.at).max(wall)
    }
}

/// A pause long enough for the relay to have given up on this client,
/// until the relay answers the ping sent after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// How long nothing came from the relay.
    pub quiet: Duration,
    /// The ping sent after it, whose answer ends it: numbered, so that an
    /// answer to the ping after an earlier pause does not end this one.
    asked: Bytes,
    /// When it was sent.
    asked_at: Instant,
}

impl Pause {
    /// The pause that ends `now`, the `nth` of the session, if the relay was
    /// last `heard` long enough before to have given up on this client; and
    /// the ping to send the relay.
    pub fn noticed(heard: &Heard, now: &Heard, nth: u64) -> Option<(Pause, Bytes)> {
        let quiet = heard.before(now);
        Self::may_have_given_up(quiet).then(|| {
            let asked = Bytes::from(format!("portpreview: back from pause {nth}"));
            let pause = Pause {
                quiet,
                asked: asked.clone(),
                asked_at: now.at,
            };
            (pause, asked)
        })
    }

    /// Whether a relay may have given up on a client it heard nothing
    /// from for `quiet`.
    pub fn may_have_given_up(quiet: Duration) -> bool {
        quiet > RELAY_MAY_GIVE_UP
    }

    /// Whether `pong` answers the ping sent after this pause.
    pub fn answered_by(&self, pong: &[u8]) -> bool {
        pong == self.asked
    }

    /// Whether the relay has taken longer than [`ANSWER_LIMIT`] to answer.
    pub fn unanswered(&self) -> bool {
        self.asked_at.elapsed() > ANSWER_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pause_that_a_relay_may_have_given_up_in_asks_whether_it_did() {
        let heard = Heard::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(Pause::noticed(&heard, &Heard::now(), 1), None, "a ping's interval");
        tokio::time::advance(Duration::from_millis(2_500)).await;
        let now = Heard::now();
        let (pause, ping) = Pause::noticed(&heard, &now, 1).expect("long enough");
        assert_eq!(pause.quiet, Duration::from_millis(7_500));
        assert!(pause.answered_by(&ping));
        assert!(!pause.answered_by(b""), "a pong of the relay's own");
        let (_, earlier) = Pause::noticed(&heard, &now, 0).expect("long enough");
        assert!(!pause.answered_by(&earlier), "the answer to an earlier pause's ping");
        assert!(!pause.unanswered());
        tokio::time::advance(ANSWER_LIMIT + Duration::from_millis(1)).await;
        assert!(pause.unanswered());
    }
}
