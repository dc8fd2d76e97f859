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
    /// The owner disconnected and the name is held for it.
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
    /// The tokens file reserves it for another token (HTTP 403).
    #[error("name {0} is reserved for another token")]
    Reserved(String),
}

/// Proof of a claim, given back on release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The name claimed.
    pub name: String,
    /// Secret the client presents to reclaim the name after a disconnect.
    pub resume: String,
    id: u64,
}

/// Name claims with a grace period after disconnect.
pub trait Registry: Send + Sync {
    /// Whether `owner` (holding `resume` from an earlier claim, if any) could
    /// claim `name` now, without claiming it.
    fn check(&self, name: &str, owner: Owner, resume: Option<&str>) -> Result<(), ClaimError>;
    /// Claims `name` for a live tunnel.
    fn claim(
        &self,
        name: &str,
        owner: Owner,
        resume: Option<&str>,
        tunnel: Arc<dyn Tunnel>,
    ) -> Result<Lease, ClaimError>;
    /// Puts a claimed name into its grace period (the client went away).
    fn release(&self, lease: &Lease);
    /// Frees a claimed name at once: its client said goodbye, so nobody
    /// is coming back for it.
    fn forget(&self, lease: &Lease);
    /// Where requests for `name` go.
    fn route(&self, name: &str) -> Route;
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
    },
}

/// The single-relay registry: a map behind a mutex.
pub struct LocalRegistry {
    slots: Mutex<HashMap<String, Slot>>,
    next_lease: AtomicU64,
    grace: Duration,
    tokens: Option<Tokens>,
}

impl LocalRegistry {
    /// A registry holding names for `grace` after disconnect, honouring the
    /// reservations of `tokens`.
    pub fn new(grace: Duration, tokens: Option<Tokens>) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            next_lease: AtomicU64::new(1),
            grace,
            tokens,
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // A panic while holding this lock cannot leave an entry half-made
        // (each step of an update inserts, removes or drops whole entries),
        // so a poisoned lock is still usable.
        portpreview_shared::sync::lock(&self.slots)
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
            Some(Slot::Grace { until, .. }) => Err(ClaimError::Held {
                name: name.to_string(),
                seconds_left: until
                    .saturating_duration_since(Instant::now())
                    .as_millis()
                    .div_ceil(1000) as u64,
            }),
        }
    }
}

impl Registry for LocalRegistry {
    fn check(&self, name: &str, owner: Owner, resume: Option<&str>) -> Result<(), ClaimError> {
        self.check_locked(&self.slots(), name, owner, resume)
    }

    fn claim(
        &self,
        name: &str,
        owner: Owner,
        resume: Option<&str>,
        tunnel: Arc<dyn Tunnel>,
    ) -> Result<Lease, ClaimError> {
        let mut slots = self.slots();
        self.check_locked(&slots, name, owner, resume)?;
        let lease = self.next_lease.fetch_add(1, Ordering::Relaxed);
        let resume = new_resume_secret();
        slots.insert(
            name.to_string(),
            Slot::Live {
                lease,
                owner,
                resume: resume.clone(),
                tunnel,
            },
        );
        Ok(Lease {
            name: name.to_string(),
            resume,
            id: lease,
        })
    }

    fn release(&self, lease: &Lease) {
        let now = Instant::now();
        let mut slots = self.slots();
        if let Some(Slot::Live {
            lease: held,
            owner,
            resume,
            ..
        }) = slots.get(&lease.name)
        {
            if *held == lease.id {
                let grace = Slot::Grace {
                    owner: *owner,
                    resume: resume.clone(),
                    until: now + self.grace,
                };
                slots.insert(lease.name.clone(), grace);
            }
        }
        // Sweeping here keeps the map bounded by the names claimed within one
        // grace period, without a timer task of its own.
        slots.retain(|_, slot| !matches!(slot, Slot::Grace { until, .. } if *until <= now));
    }

    fn forget(&self, lease: &Lease) {
        let mut slots = self.slots();
        if matches!(slots.get(&lease.name), Some(Slot::Live { lease: held, .. }) if *held == lease.id) {
            slots.remove(&lease.name);
        }
    }

    fn route(&self, name: &str) -> Route {
        match self.slots().get(name) {
            Some(Slot::Live { tunnel, .. }) => Route::Live(Arc::clone(tunnel)),
            Some(Slot::Grace { until, .. }) if *until > Instant::now() => Route::Reconnecting,
            _ => Route::Unknown,
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
        let lease = reg.claim("shop", b, None, tunnel()).unwrap();
        reg.release(&lease);
        assert!(matches!(reg.route("shop"), Route::Reconnecting));
        assert!(
            matches!(reg.check("shop", a, None), Err(ClaimError::Held { name, seconds_left: 59..=60 }) if name == "shop")
        );
        reg.claim("shop", b, None, tunnel()).unwrap();
        assert!(matches!(reg.route("shop"), Route::Live(_)));
    }

    #[test]
    fn a_forgotten_name_is_free_at_once_and_a_stale_lease_forgets_nothing() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let lease = reg.claim("app", None, None, tunnel()).unwrap();
        reg.forget(&lease);
        assert!(matches!(reg.route("app"), Route::Unknown));
        let again = reg.claim("app", None, None, tunnel()).unwrap();
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
        let lease = reg.claim("app", None, None, tunnel()).unwrap();
        assert_eq!(lease.resume.len(), 32);
        reg.release(&lease);
        for guess in [None, Some("guess")] {
            assert!(
                matches!(reg.check("app", None, guess), Err(ClaimError::Held { .. })),
                "{guess:?}"
            );
        }
        let back = reg.claim("app", None, Some(&lease.resume), tunnel()).unwrap();
        assert_ne!(back.resume, lease.resume, "each claim gets a fresh secret");
    }

    #[test]
    fn the_owner_may_take_over_a_name_whose_old_socket_is_not_yet_noticed_dead() {
        let reg = LocalRegistry::new(Duration::from_secs(60), None);
        let old = reg.claim("app", None, None, tunnel()).unwrap();
        assert!(reg.claim("app", None, None, tunnel()).is_err());
        let new = reg.claim("app", None, Some(&old.resume), tunnel()).unwrap();
        reg.release(&old);
        assert!(
            matches!(reg.route("app"), Route::Live(_)),
            "the stale lease of {new:?} frees nothing"
        );
    }

    #[test]
    fn grace_expires_and_stale_leases_do_nothing() {
        let reg = LocalRegistry::new(Duration::ZERO, None);
        let old = reg.claim("app", None, None, tunnel()).unwrap();
        reg.release(&old);
        assert!(matches!(reg.route("app"), Route::Unknown));
        let new = reg.claim("app", None, None, tunnel()).unwrap();
        reg.release(&old);
        assert!(
            matches!(reg.route("app"), Route::Live(_)),
            "an old lease must not free {new:?}"
        );
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
