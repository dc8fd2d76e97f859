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
//! client pings the relay, and no request read before the answer is
//! forwarded. The relay answers only while its session is alive, and
//! whatever it sent before answering was sent during the pause. A request
//! not forwarded is retried by its provider; one forwarded twice acts twice.

use std::time::Duration;

use bytes::Bytes;
use portpreview_server::config::{DEFAULT_DEAD_AFTER, DEFAULT_PING_INTERVAL};

/// The soonest a relay with the default settings gives up on a silent
/// client: it checks at each ping, every 5 s, and gives up on a client that
/// has not answered the ping of 10 s before. A second less, for the frames
/// on their way between the two; a shorter pause needs no second look.
const RELAY_MAY_GIVE_UP: Duration = DEFAULT_DEAD_AFTER
    .saturating_sub(DEFAULT_PING_INTERVAL)
    .saturating_sub(Duration::from_secs(1));

/// What the client's ping after a pause carries, to know its answer.
const ASKED: &[u8] = b"portpreview: back from a pause";

/// A pause long enough for the relay to have given up on this client,
/// until the relay answers the ping sent after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// How long nothing came from the relay.
    pub quiet: Duration,
}

impl Pause {
    /// The pause that ends now after `quiet` without a frame, if the relay
    /// may have given up on this client in it, and the ping to send the
    /// relay: what it sent before its answer was sent during the pause.
    pub fn noticed(quiet: Duration) -> Option<(Pause, Bytes)> {
        (quiet > RELAY_MAY_GIVE_UP).then(|| (Pause { quiet }, Bytes::from_static(ASKED)))
    }

    /// Whether a pong the relay sent answers the ping sent after a pause.
    pub fn answered_by(pong: &[u8]) -> bool {
        pong == ASKED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_that_a_relay_may_have_given_up_in_asks_whether_it_did() {
        assert_eq!(Pause::noticed(Duration::from_secs(5)), None, "a ping's interval");
        assert_eq!(
            Pause::noticed(Duration::from_secs(9)),
            None,
            "too short for any relay to give up"
        );
        let (pause, ping) = Pause::noticed(Duration::from_millis(9_500)).expect("long enough");
        assert_eq!(pause.quiet, Duration::from_millis(9_500));
        assert!(Pause::answered_by(&ping));
        assert!(!Pause::answered_by(b""), "a pong of the relay's own");
    }
}
