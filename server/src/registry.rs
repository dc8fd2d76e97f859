//! Who holds which tunnel name, and where requests for a name go.
//!
//! Both sit behind traits so that a cluster of relays can later share them
//! (NATS key-value claims with a lease, request-reply per tunnel); the
//! in-process map here is the single-machine implementation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portpreview_shared::codec::EncodeError;
use portpreview_shared::ServerMessage;

use crate::held_news::{HeldNews, Missed, MAX_BYTES};
use crate::port::StreamPort;
use crate::tokens::{constant_time_eq, TokenId, Tokens};

/// Who is claiming a name: the token they connected with, if the relay has tokens.
pub type Owner = Option<TokenId>;

/// A tunnel that requests can be sent to: the "send this request there" step.
pub trait Tunnel: Send + Sync {
    /// Opens a new stream for one request whose body the relay holds as `body` says.
    fn open(&self, body: BodyAtOpen) -> Result<StreamPort, OpenError>;

    /// Tells the client of a request the relay answered itself
    /// ([`ServerMessage::TurnedAway`]), if it can take the news now: a
    /// caller's answer never waits on a slow client for it. Fails only when
    /// the news does not fit in a frame. `body` is the request's, when the
    /// relay read it whole.
    fn tell_turned_away(&self, news: &ServerMessage, body: &[u8]) -> Result<(), EncodeError>;

    /// Whether a refused WebSocket handshake is news to tell now. A client
    /// that retries its socket every second (a dev server's live reload)
    /// would fill the history with the same refusal: one a minute says it.
    fn upgrade_is_news(&self) -> bool {
        true
    }
}

/// How much of a request's body has come when its stream opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyAtOpen {
    /// All of it (or there is none): the stream's request side is done
    /// once its head is sent.
    Whole,
    /// The rest is still arriving from the caller, to be sent as it comes.
    Arriving,
}

/// Why a stream could not be opened on a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Too many requests already in flight on this tunnel.
    #[error("too many requests in flight")]
    Busy,
    /// Too many requests on this tunnel whose bodies are still arriving:
    /// the rest of its places are kept for requests that came whole.
    #[error("too many request bodies still arriving")]
    Uploading,
    /// The tunnel's client went away.
    #[error("tunnel closed")]
    Gone,
    /// The relay is shutting down and takes no new requests.
    #[error("relay shutting down")]
    ShuttingDown,
}

/// Where requests for a name go right now.
#[derive(Clone)]
pub enum Route {
    /// A live tunnel.
    Live(Arc<dyn Tunnel>),
    /// The owner disconnected and the name is held for it: callers get
    /// 503, and news of them is kept for its return ([`Registry::hold_news`]).
    Reconnecting,
    /// Nobody holds the name.
    Unknown,
}

/// Why a name cannot be claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Another client holds it live (HTTP 409).
    #[error("name {0} is in use")]
    InUse(String),
    /// Its client went away and it is held for that client's return (HTTP 409).
    #[error("name {name} is held for the client that last had it, which went away without saying goodbye; it is free in {seconds_left} s")]
    Held {
        /// The name.
        name: String,
        /// Whole seconds until anyone may claim it, rounded up.
        seconds_left: u64,
    },
    /// Its client went away and it is held for that client's token, not
    /// the claimant's (HTTP 409). Not to be waited for: it is another
    /// user's URL, which their provider may still be sending to.
    #[error("name {name} is held for another token's client, which went away; it is free in {seconds_left} s, but it is their URL")]
    HeldForAnother {
        /// The name.
        name: String,
        /// Whole seconds until anyone may claim it, rounded up.
        seconds_left: u64,
    },
    /// The tokens file reserves it for another token (HTTP 403).
    #[error("name {0} is reserved for another token")]
    Reserved(String),
}

/// What a claim gives: the lease, and news of the requests turned away
/// while the name was held for the claimant, to be told after its Welcome.
#[derive(Debug)]
pub struct Claimed {
    /// Proof of the claim.
    pub lease: Lease,
    /// News kept while the name was held, oldest first; none for a name
    /// that was not held for this claimant.
    pub missed: Vec<HeldNews>,
}

/// Proof of a claim, given back on release.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    /// The name claimed.
    pub name: String,
    /// Secret the client presents to reclaim the name after a disconnect.
    pub resume: String,
    id: u64,
}

/// Without the resume secret: whoever reads a log line could take the
/// name while its client is away.
impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("resume", &"***")
            .field("id", &self.id)
            .finish()
    }
}

/// Name claims with a grace period after disconnect.
pub trait Registry: Send + Sync {
    /// Whether `owner` (holding `resume` from an earlier claim, if any) could
    /// claim `name` now, without claiming it.
    fn check(&self, name: &str, owner: Owner, resume: Option<&str>) -> Result<(), ClaimError>;
    /// Claims `name` for a live tunnel. A claimant taking back a name held
    /// for it gets the news kept meanwhile; anyone else's claim frees them.
    fn claim(
        &self,
        name: &str,
        owner: Owner,
        resume: Option<&str>,
        tunnel: Arc<dyn Tunnel>,
    ) -> Result<Claimed, ClaimError>;
    /// Puts a claimed name into its grace period (the client went away).
    fn release(&self, lease: &Lease);
    /// Frees a claimed name at once: its client said goodbye, so nobody
    /// is coming back for it.
    fn forget(&self, lease: &Lease);
    /// Where requests for `name` go.
    fn route(&self, name: &str) -> Route;
    /// Keeps `news` of a request turned away while `name` is held, for the
    /// client that claims it back. False when it was dropped: the name is
    /// not held, or the news is past the bounds of [`crate::held_news`].
    fn hold_news(&self, name: &str, news: HeldNews) -> bool;
}

enum Slot {
    Live {
        lease: u64,
        owner: Owner,
        resume: String,
        tunnel: Arc<dyn Tunnel>,
    },
    Grace {
        owner: Owner,
        resume: String,
        until: Instant,
        missed: Missed,
    },
}

/// The names, and the bytes of news kept across them.
#[derive(Default)]
struct Names {
    slots: HashMap<String, Slot>,
    held_bytes: usize,
}

impl Names {
    /// Puts `slot` under `name`, freeing the news of the slot it replaces,
    /// which it gives back.
    fn put(&mut self, name: &str, slot: Slot) -> Option<Slot> {
        let replaced = self.slots.insert(name.to_string(), slot);
        self.freed(replaced.as_ref());
        replaced
    }

    /// Removes `name`'s slot, freeing its news.
    fn remove(&mut self, name: &str) {
        let removed = self.slots.remove(name);
        self.freed(removed.as_ref());
    }

    /// Drops names whose grace is over, with their news.
    fn sweep(&mut self, now: Instant) {
        let mut freed = 0;
        self.slots.retain(|_, slot| match slot {
            Slot::Grace { until, missed, .. } if *until <= now => {
                freed += missed.bytes();
                false
            }
            _ => true,
        });
        self.held_bytes = self.held_bytes.saturating_sub(freed);
    }

    fn freed(&mut self, slot: Option<&Slot>) {
        if let Some(Slot::Grace { missed, .. }) = slot {
            self.held_bytes = self.held_bytes.saturating_sub(missed.bytes());
        }
    }
}

/// The single-relay registry: a map behind a mutex.
pub struct LocalRegistry {
    names: Mutex<Names>,
    next_lease: AtomicU64,
    grace: Duration,
    tokens: Option<Tokens>,
}

impl LocalRegistry {
    /// A registry holding names for `grace` after disconnect, honouring the
    /// reservations of `tokens`.
    pub fn new(grace: Duration, tokens: Option<Tokens>) -> Self {
        Self {
            names: Mutex::new(Names::default()),
            next_lease: AtomicU64::new(1),
            grace,
            tokens,
        }
    }

    fn names(&self) -> std::sync::MutexGuard<'_, Names> {
        // A panic while holding this lock cannot leave an entry half-made
        // (each step of an update inserts, removes or drops whole entries),
        // so a poisoned lock is still usable; at worst the count of news
        // bytes is off, and only the relay-wide bound with it.
        portpreview_shared::sync::lock(&self.names)
    }

    fn check_locked(
        &self,
        slots: &HashMap<String, Slot>,
        name: &str,
        owner: Owner,
        resume: Option<&str>,
    ) -> Result<(), ClaimError> {
        if let Some(reserved) = self.tokens.as_ref().and_then(|t| t.reserved_for(name)) {
            if owner != Some(reserved) {
                return Err(ClaimError::Reserved(name.to_string()));
            }
        }
        let proves =
            |held: &str| resume.is_some_and(|presented| constant_time_eq(presented.as_bytes(), held.as_bytes()));
        match slots.get(name) {
            None => Ok(()),
            // The owner is back before its old socket was noticed dead: the
            // new session takes over, and the old one's lease goes stale.
            Some(Slot::Live { resume: held, .. }) if proves(held) => Ok(()),
            Some(Slot::Live { .. }) => Err(ClaimError::InUse(name.to_string())),
            Some(Slot::Grace { until, .. }) if *until <= Instant::now() => Ok(()),
            Some(Slot::Grace { resume: held, .. }) if proves(held) => Ok(()),
            // With tokens, the token itself proves who owned the name.
            Some(Slot::Grace {
                owner: Some(held_by), ..
            }) if owner == Some(*held_by) => Ok(()),
            Some(Slot::Grace {
                owner: Some(_), until, ..
            }) if owner.is_some() => Err(ClaimError::HeldForAnother {
                name: name.to_string(),
                seconds_left: seconds_until(*until),
            }),
            Some(Slot::Grace { until, .. }) => Err(ClaimError::Held {
                name: name.to_string(),
                seconds_left: seconds_until(*until),
            }),
        }
    }
}

/// Whole seconds until `until`, rounded up.
fn seconds_until(until: Instant) -> u64 {
    until
        .saturating_duration_since(Instant::now())
        .as_millis()
        .div_ceil(1000) as u64
}

impl Registry for LocalRegistry {
    fn check(&self, name: &str, owner: Owner, resume: Option<&str>) -> Result<(), ClaimError> {
        self.check_locked(&self.names().slots, name, owner, resume)
    }

    fn claim(
        &self,
        name: &str,
        owner: Owner,
        resume: Option<&str>,
        tunnel: Arc<dyn Tunnel>,
    ) -> Result<Claimed, ClaimError> {
        let mut names = self.names();
        self.check_locked(&names.slots, name, owner, resume)?;
        let lease = self.next_lease.fetch_add(1, Ordering::Relaxed);
        let resume = new_resume_secret();
        let live = Slot::Live {
            lease,
            owner,
            resume: resume.clone(),
            tunnel,
        };
        // Taken after the check: a grace that ran out meanwhile let anyone
        // claim, and its news are not theirs.
        let now = Instant::now();
        let missed = match names.put(name, live) {
            Some(Slot::Grace { until, missed, .. }) => {
                if missed.dropped() > 0 {
                    tracing::debug!(tunnel = %name, dropped = missed.dropped(), "news dropped while the name was held");
                }
                if until > now {
                    missed.into_news()
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        };
        let lease = Lease {
            name: name.to_string(),
            resume,
            id: lease,
        };
        Ok(Claimed { lease, missed })
    }

    fn release(&self, lease: &Lease) {
        let now = Instant::now();
        let mut names = self.names();
        if let Some(Slot::Live {
            lease: held,
            owner,
            resume,
            ..
        }) = names.slots.get(&lease.name)
        {
            if *held == lease.id {
                let grace = Slot::Grace {
                    owner: *owner,
                    resume: resume.clone(),
                    until: now + self.grace,
                    missed: Missed::default(),
                };
                names.put(&lease.name, grace);
            }
        }
        // Sweeping here keeps the map bounded by the names claimed within one
        // grace period, without a timer task of its own.
        names.sweep(now);
    }

    fn forget(&self, lease: &Lease) {
        let mut names = self.names();
        if matches!(names.slots.get(&lease.name), Some(Slot::Live { lease: held, .. }) if *held == lease.id) {
            names.remove(&lease.name);
        }
    }

    fn route(&self, name: &str) -> Route {
        match self.names().slots.get(name) {
            Some(Slot::Live { tunnel, .. }) => Route::Live(Arc::clone(tunnel)),
            Some(Slot::Grace { until, .. }) if *until > Instant::now() => Route::Reconnecting,
            _ => Route::Unknown,
        }
    }

    fn hold_news(&self, name: &str, news: HeldNews) -> bool {
        let now = Instant::now();
        let mut guard = self.names();
        let names = &mut *guard;
        // Names whose grace is over hold bytes until a release sweeps
        // them: swept here only when their bytes are in the way.
        if names.held_bytes + news.size() > MAX_BYTES {
            names.sweep(now);
        }
        let room = MAX_BYTES.saturating_sub(names.held_bytes);
        let Some(Slot::Grace { until, missed, .. }) = names.slots.get_mut(name) else {
            return false;
        };
        if *until <= now {
            return false;
        }
        let size = news.size();
        if !missed.keep(news, room) {
            tracing::debug!(tunnel = %name, dropped = missed.dropped(), "news of a request turned away while the name is held dropped: over the bounds");
            return false;
        }
        names.held_bytes += size;
        true
    }
}

#[cfg(test)]
impl LocalRegistry {
    /// Bytes of news kept across every held name.
    fn held_bytes(&self) -> usize {
        self.names().held_bytes
    }

    /// Ends `name`'s grace now, as time passing would.
    fn expire_now(&self, name: &str) {
        if let Some(Slot::Grace { until, .. }) = self.names().slots.get_mut(name) {
            *until = Instant::now();
        }
    }
}

/// 128 random bits, hex: unguessable, and plain text for a header.
fn new_resume_secret() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::held_news::MAX_BYTES_PER_NAME;

    struct Nowhere;
    impl Tunnel for Nowhere {
        fn open(&self, _: BodyAtOpen) -> Result<StreamPort, OpenError> {
            Err(OpenError::Gone)
        }
        fn tell_turned_away(&self, _: &ServerMessage, _: &[u8]) -> Result<(), EncodeError> {
            Ok(())
        }
    }

    fn tunnel() -> Arc<dyn Tunnel> {
        Arc::new(Nowhere)
    }

    fn tokens() -> Tokens {
        Tokens::from_toml("[[token]]\ntoken = \"a\"\nnames = [\"alice\"]\n[[token]]\ntoken = \"b\"\n").unwrap()
    }

    #[test]
    fn a_live_name_cannot_be_claimed_twice() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        reg.claim("app", None, None, tunnel()).unwrap();
        assert_eq!(reg.check("app", None, None), Err(ClaimError::InUse("app".into())));
        assert!(reg.claim("app", None, None, tunnel()).is_err());
        assert!(matches!(reg.route("app"), Route::Live(_)));
        assert!(matches!(reg.route("other"), Route::Unknown));
    }

    #[test]
    fn released_names_are_held_for_their_owner_only() {
        let t = tokens();
        let (a, b) = (t.check("a"), t.check("b"));
        let reg = LocalRegistry::new(Duration::from_secs(60), Some(t));
        let lease = reg.claim("shop", b, None, tunnel()).unwrap().lease;
        reg.release(&lease);
        assert!(matches!(reg.route("shop"), Route::Reconnecting));
        assert!(
            matches!(reg.check("shop", a, None), Err(ClaimError::HeldForAnother { name, seconds_left: 59..=60 }) if name == "shop"),
            "another token's, not to be waited for"
        );
        reg.claim("shop", b, None, tunnel()).unwrap();
        assert!(matches!(reg.route("shop"), Route::Live(_)));
    }

    #[test]
    fn a_forgotten_name_is_free_at_once_and_a_stale_lease_forgets_nothing() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let lease = reg.claim("app", None, None, tunnel()).unwrap().lease;
        reg.forget(&lease);
        assert!(matches!(reg.route("app"), Route::Unknown));
        let again = reg.claim("app", None, None, tunnel()).unwrap().lease;
        reg.forget(&lease);
        assert!(
            matches!(reg.route("app"), Route::Live(_)),
            "the old lease is not the live one"
        );
        reg.release(&again);
        assert!(matches!(reg.route("app"), Route::Reconnecting));
    }

    #[test]
    fn a_held_name_goes_back_only_to_the_holder_of_its_resume_secret() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let lease = reg.claim("app", None, None, tunnel()).unwrap().lease;
        assert_eq!(lease.resume.len(), 32);
        reg.release(&lease);
        for guess in [None, Some("guess")] {
            assert!(
                matches!(reg.check("app", None, guess), Err(ClaimError::Held { .. })),
                "{guess:?}"
            );
        }
        let back = reg.claim("app", None, Some(&lease.resume), tunnel()).unwrap().lease;
        assert_ne!(back.resume, lease.resume, "each claim gets a fresh secret");
    }

    #[test]
    fn the_owner_may_take_over_a_name_whose_old_socket_is_not_yet_noticed_dead() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let old = reg.claim("app", None, None, tunnel()).unwrap().lease;
        assert!(reg.claim("app", None, None, tunnel()).is_err());
        let new = reg.claim("app", None, Some(&old.resume), tunnel()).unwrap().lease;
        reg.release(&old);
        assert!(
            matches!(reg.route("app"), Route::Live(_)),
            "the stale lease of {new:?} frees nothing"
        );
    }

    #[test]
    fn grace_expires_and_stale_leases_do_nothing() {
        let reg = LocalRegistry::new(Duration::ZERO, None);
        let old = reg.claim("app", None, None, tunnel()).unwrap().lease;
        reg.release(&old);
        assert!(matches!(reg.route("app"), Route::Unknown));
        let new = reg.claim("app", None, None, tunnel()).unwrap().lease;
        reg.release(&old);
        assert!(
            matches!(reg.route("app"), Route::Live(_)),
            "an old lease must not free {new:?}"
        );
    }

    /// News of a request to `target` turned away, with `pad` bytes of headers.
    fn news(target: &str, pad: usize) -> HeldNews {
        HeldNews::new(ServerMessage::TurnedAway {
            method: "POST".into(),
            target: target.into(),
            headers: vec![portpreview_shared::Header::new("x-pad", vec![b'p'; pad])],
            body_size: Some(2),
            status: 503,
            reason: "tunnel app is reconnecting".into(),
            waited_ms: 0,
            told_after_ms: 0,
        })
        .unwrap()
    }

    fn targets(missed: Vec<HeldNews>) -> Vec<String> {
        missed
            .into_iter()
            .map(|news| match news.into_message() {
                ServerMessage::TurnedAway { target, .. } => target,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// `name` claimed, then lost: held for its client, whose lease this is.
    fn held(reg: &LocalRegistry, name: &str, owner: Owner) -> Lease {
        let lease = reg.claim(name, owner, None, tunnel()).unwrap().lease;
        reg.release(&lease);
        lease
    }

    #[test]
    fn a_held_name_keeps_32_news_for_its_client_in_order_and_drops_the_33rd() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let lease = held(&reg, "app", None);
        for i in 0..32 {
            assert!(reg.hold_news("app", news(&format!("/{i}"), 10)), "news {i}");
        }
        assert!(!reg.hold_news("app", news("/32", 10)), "the 33rd is dropped");
        assert!(
            !reg.hold_news("nobody", news("/x", 10)),
            "a name not held keeps nothing"
        );
        assert!(!reg.hold_news("app", news("/33", 10)));
        let back = reg.claim("app", None, Some(&lease.resume), tunnel()).unwrap();
        let reasons: Vec<String> = (back.missed.iter())
            .map(|news| match news.clone().into_message() {
                ServerMessage::TurnedAway { reason, .. } => reason,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(reasons[0], "tunnel app is reconnecting");
        assert_eq!(
            reasons[31],
            "tunnel app is reconnecting; after it, 2 more requests got this answer while the name was held, too \
             many to be told one by one",
            "the last one told counts those dropped"
        );
        let expected: Vec<String> = (0..32).map(|i| format!("/{i}")).collect();
        assert_eq!(targets(back.missed), expected);
        assert_eq!(reg.held_bytes(), 0, "handed over, they are the relay's no more");
        assert!(
            !reg.hold_news("app", news("/live", 10)),
            "a live name's news go to its tunnel"
        );
        reg.release(&back.lease);
        let again = reg.claim("app", None, Some(&back.lease.resume), tunnel()).unwrap();
        assert!(again.missed.is_empty(), "news are told once");
    }

    #[test]
    fn a_token_taking_back_its_held_name_gets_its_news() {
        let t = tokens();
        let b = t.check("b");
        let reg = LocalRegistry::new(Duration::from_secs(60), Some(t));
        held(&reg, "shop", b);
        assert!(reg.hold_news("shop", news("/hook", 10)));
        let back = reg.claim("shop", b, None, tunnel()).unwrap();
        assert_eq!(targets(back.missed), ["/hook"]);
    }

    #[test]
    fn a_held_names_news_stop_at_64_kib() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let lease = held(&reg, "app", None);
        assert!(reg.hold_news("app", news("/big", 40 * 1024)));
        assert!(!reg.hold_news("app", news("/bigger", 40 * 1024)), "past 64 KiB");
        assert!(reg.hold_news("app", news("/small", 10)), "a small one still fits");
        let too_big = news("/alone", 64 * 1024);
        assert!(too_big.size() > MAX_BYTES_PER_NAME);
        let other = held(&reg, "other", None);
        assert!(!reg.hold_news("other", too_big), "never kept, however empty the name");
        let back = reg.claim("app", None, Some(&lease.resume), tunnel()).unwrap();
        assert_eq!(targets(back.missed), ["/big", "/small"]);
        assert!(reg
            .claim("other", None, Some(&other.resume), tunnel())
            .unwrap()
            .missed
            .is_empty());
    }

    #[test]
    fn news_across_every_held_name_stop_at_2_mib() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let full = news("/full", 63 * 1024);
        let names = MAX_BYTES / full.size();
        assert_eq!(names, 32, "each name holds {} bytes", full.size());
        let leases: Vec<Lease> = (0..=names).map(|i| held(&reg, &format!("app{i}"), None)).collect();
        for i in 0..names {
            assert!(reg.hold_news(&format!("app{i}"), full.clone()), "name {i}");
        }
        let last = format!("app{names}");
        assert!(!reg.hold_news(&last, full.clone()), "past 2 MiB across the relay");
        assert_eq!(reg.held_bytes(), names * full.size());
        // One client back frees its share for the others.
        let first = &leases[0];
        let back = reg.claim(&first.name, None, Some(&first.resume), tunnel()).unwrap();
        assert_eq!(back.missed.len(), 1);
        assert!(reg.hold_news(&last, full));
    }

    #[test]
    fn held_news_are_freed_when_the_grace_ends_and_never_go_to_whoever_claims_next() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        held(&reg, "app", None);
        assert!(reg.hold_news("app", news("/hook", 10)));
        reg.expire_now("app");
        assert!(!reg.hold_news("app", news("/late", 10)), "no longer held");
        let stranger = reg.claim("app", None, None, tunnel()).unwrap();
        assert!(stranger.missed.is_empty(), "someone else's news");
        assert_eq!(reg.held_bytes(), 0);

        held(&reg, "gone", None);
        assert!(reg.hold_news("gone", news("/hook", 10)));
        reg.expire_now("gone");
        // Any release sweeps the names whose grace is over.
        reg.release(&stranger.lease);
        assert_eq!(reg.held_bytes(), 0);
        assert!(matches!(reg.route("gone"), Route::Unknown));
    }

    #[test]
    fn reserved_names_belong_to_their_token() {
        let t = tokens();
        let (a, b) = (t.check("a"), t.check("b"));
        let reg = LocalRegistry::new(Duration::from_secs(60), Some(t));
        assert_eq!(reg.check("alice", b, None), Err(ClaimError::Reserved("alice".into())));
        reg.claim("alice", a, None, tunnel()).unwrap();
    }
}
