//! What a session's exchanges know of its contact with the relay: whether
//! an answer sent after a pause went to a relay that still waited for it.
//!
//! A request forwarded before a pause of this process may be answered by
//! its handler during it, and the answer is sent on waking. A relay that
//! gave up on the tunnel meanwhile has answered its caller 502 and closed
//! the connection: the answer reaches nobody, and the history must not
//! show it as delivered. As for the requests read after a pause (see
//! [`super::pause`]), the ping the session sends then says which: a relay
//! that answers it still held the tunnel when it read the answer, sent
//! before the ping or kept waiting by it. So the exchange waits for that
//! answer, or for the connection to end first, before it records its own.

use std::time::Duration;

use tokio::sync::watch;

use super::pause::{Heard, Pause};

/// How long an exchange waits to learn whether its answer reached a relay
/// still waiting: the session ends a connection whose relay has not
/// answered its ping by then (silent for its limit, or slow past
/// [`super::pause::ANSWER_LIMIT`]), which tells the exchange at once; this
/// only bounds the wait should that word never come.
const LEARN_LIMIT: Duration = Duration::from_secs(30);

/// The session's side: it notes each word from the relay, each pause and
/// its answer, and the end.
pub struct Contact {
    word: watch::Sender<Word>,
    /// Whether pauses count: a relay in this process pauses with it.
    watching: bool,
}

/// An exchange's side: what the session has noted.
#[derive(Clone)]
pub struct Heeded {
    word: watch::Receiver<Word>,
    watching: bool,
}

#[derive(Debug)]
struct Word {
    /// When the relay last sent a frame, or this process ran again after a pause.
    heard: Heard,
    /// The last pause noticed, until the relay answers the ping sent after it.
    pause: Option<Pause>,
    /// Pauses noticed so far, which number the pings sent after them.
    noticed: u64,
    /// The connection has ended.
    over: bool,
}

impl Word {
    /// Whether the relay has answered the ping after the `nth` pause noticed.
    fn answered(&self, nth: u64) -> bool {
        self.noticed >= nth && self.pause.is_none()
    }
}

impl Contact {
    /// Contact as a session starts: the relay heard from now. Pauses count
    /// only when `watching`.
    pub fn new(watching: bool) -> Self {
        let (word, _) = watch::channel(Word {
            heard: Heard::now(),
            pause: None,
            noticed: 0,
            over: false,
        });
        Self { word, watching }
    }

    /// What the exchanges read.
    pub fn heeded(&self) -> Heeded {
        Heeded {
            word: self.word.subscribe(),
            watching: self.watching,
        }
    }

    /// When the relay was last heard from.
    pub fn heard(&self) -> Heard {
        self.word.borrow().heard
    }

    /// Notes that the relay was heard from `now`, or that this process ran
    /// again then. After a pause long enough for the relay to have given
    /// up on this client, returns the ping that asks whether it did.
    pub fn hear(&self, now: Heard) -> Option<bytes::Bytes> {
        let mut ping = None;
        // Nobody waits on a word alone: no wake-up for each frame.
        self.word.send_if_modified(|word| {
            let noticed = match self.watching {
                true => Pause::noticed(&word.heard, &now, word.noticed),
                false => None,
            };
            if let Some((pause, asked)) = noticed {
                word.pause = Some(pause);
                word.noticed += 1;
                ping = Some(asked);
            }
            word.heard = now;
            false
        });
        ping
    }

    /// Whether a pause waits for the relay's answer to its ping: what is
    /// read meanwhile is held (see [`super::pause`]).
    pub fn pausing(&self) -> bool {
        self.word.borrow().pause.is_some()
    }

    /// How long the relay was quiet before the pause that waits, if one does.
    pub fn quiet(&self) -> Duration {
        self.word
            .borrow()
            .pause
            .as_ref()
            .map_or(Duration::ZERO, |pause| pause.quiet)
    }

    /// Whether the relay has taken too long to answer the ping after the pause.
    pub fn unanswered(&self) -> bool {
        self.word.borrow().pause.as_ref().is_some_and(Pause::unanswered)
    }

    /// Takes `pong` from the relay: true when it answers the ping sent after
    /// the pause that waits, which it ends.
    pub fn ends_pause(&self, pong: &[u8]) -> bool {
        self.word.send_if_modified(|word| {
            let answered = word.pause.as_ref().is_some_and(|pause| pause.answered_by(pong));
            if answered {
                word.pause = None;
            }
            answered
        })
    }

    /// The connection has ended: nothing more will answer a ping.
    pub fn over(&self) {
        self.word.send_modify(|word| word.over = true);
    }
}

impl Heeded {
    /// For an answer sent just now: `None` when it went to a relay still
    /// waiting for it, as far as a pause of this process can tell; or, when
    /// the relay may have given up on the tunnel first, how long it had
    /// been quiet. After a pause long enough for that, this waits until
    /// the relay answers the ping sent after it, or the connection ends.
    pub async fn gave_up(&self) -> Option<Duration> {
        if !self.watching {
            return None;
        }
        let (nth, quiet) = {
            let word = self.word.borrow();
            match &word.pause {
                Some(pause) => (word.noticed, pause.quiet),
                None => {
                    // A pause the session has yet to notice: it will, at its
                    // next word from the relay or the end of its silence, and
                    // ask.
                    let quiet = word.heard.before(&Heard::now());
                    if !Pause::may_have_given_up(quiet) {
                        return None;
                    }
                    (word.noticed + 1, quiet)
                }
            }
        };
        let mut word = self.word.clone();
        let learnt = async {
            // A session gone without a word is an end too.
            let word = word.wait_for(|word| word.answered(nth) || word.over).await;
            word.is_ok_and(|word| word.answered(nth))
        };
        let still_waited = tokio::time::timeout(LEARN_LIMIT, learnt).await.unwrap_or(false);
        (!still_waited).then_some(quiet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer sent with the relay heard from lately went to it; one sent
    /// after a long silence waits for the relay's answer to the ping, and
    /// went to it only if that comes before the end.
    #[tokio::test(start_paused = true)]
    async fn an_answer_after_a_pause_waits_to_learn_whether_the_relay_still_waited() {
        let contact = Contact::new(true);
        let heeded = contact.heeded();
        assert_eq!(heeded.gave_up().await, None, "heard from just now");

        // Paused: the exchange runs before the session has noticed.
        tokio::time::advance(Duration::from_secs(20)).await;
        let waiting = tokio::spawn({
            let heeded = heeded.clone();
            async move { heeded.gave_up().await }
        });
        tokio::task::yield_now().await;
        let ping = contact.hear(Heard::now()).expect("the session notices and pings");
        assert!(contact.pausing());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits for the relay's answer");
        assert!(!contact.ends_pause(b""), "a pong of the relay's own");
        assert!(contact.ends_pause(&ping));
        assert!(!contact.pausing());
        assert_eq!(waiting.await.expect("the exchange"), None);

        // Noticed first, then the connection ends before the answer.
        tokio::time::advance(Duration::from_secs(12)).await;
        assert!(contact.hear(Heard::now()).is_some());
        assert_eq!(contact.quiet(), Duration::from_secs(12));
        let waiting = tokio::spawn({
            let heeded = heeded.clone();
            async move { heeded.gave_up().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        contact.over();
        assert_eq!(waiting.await.expect("the exchange"), Some(Duration::from_secs(12)));
    }

    /// A relay in this process pauses with it, and gives up on nothing.
    #[tokio::test(start_paused = true)]
    async fn a_relay_in_this_process_is_never_doubted() {
        let contact = Contact::new(false);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(contact.hear(Heard::now()).is_none());
        assert_eq!(contact.heeded().gave_up().await, None);
    }

    /// The wait is bounded should no word ever come.
    #[tokio::test(start_paused = true)]
    async fn no_word_at_all_is_doubt_in_the_end() {
        let contact = Contact::new(true);
        tokio::time::advance(Duration::from_secs(20)).await;
        let quiet = contact.heeded().gave_up().await;
        assert_eq!(quiet, Some(Duration::from_secs(20)));
    }
}
