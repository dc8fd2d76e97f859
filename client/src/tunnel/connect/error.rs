//! Why a tunnel could not be opened, as the user is told.

use std::time::Duration;

/// Why the tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The relay address is not one the client understands.
    #[error("invalid relay address \"{0}\": use ws://, wss://, http:// or https:// followed by host:port (a port from 1 to 65535)")]
    BadUrl(String),
    /// The relay address carries a query or a fragment, which the relay
    /// never reads: a token put there would not be sent either.
    #[error(
        "invalid relay address \"{0}\": a query or fragment is not sent to the relay (a path is, before \
         /_portpreview/connect); give its token with --token or PORTPREVIEW_TOKEN"
    )]
    QueryInUrl(String),
    /// The relay address carries a user or password, which is never sent.
    #[error(
        "the relay address {0:?} carries a user or password, which PortPreview does not send: \
         give the relay's token with --token or PORTPREVIEW_TOKEN"
    )]
    Credentials(String),
    /// The relay wants a token and none was sent (401).
    #[error(
        "this relay requires a token: pass --token, set PORTPREVIEW_TOKEN, or add token = \"…\" to the config file (it goes only to the file's own server)"
    )]
    TokenRequired,
    /// The relay refused the token that was sent (401).
    #[error("the relay refused the token (401): check --token, PORTPREVIEW_TOKEN or the config file's token")]
    Unauthorized,
    /// The name is held by another client, or for one that went away (409).
    #[error("tunnel name {name:?} is taken (409): {why}; ask for another with --name")]
    NameTaken {
        /// The name asked for.
        name: String,
        /// The relay's reason, one line.
        why: String,
        /// When the name is free, when the relay says (a name held for a
        /// client that went away): none while a live client has it.
        free_in: Option<Duration>,
    },
    /// What answered at the relay's address is no relay: a web server, or
    /// the local handler itself.
    #[error("{url} is not a PortPreview relay: it answered {status} where a relay opens a WebSocket; check --server")]
    NotARelay {
        /// The address tried.
        url: String,
        /// What it answered instead.
        status: String,
    },
    /// The relay refused the tunnel after the hello (version, name…).
    #[error("the relay refused the tunnel: {0}")]
    Refused(String),
    /// The relay's answer to the hello is not one this client can use: a
    /// broken or hostile relay, or another program.
    #[error("the relay's answer to the hello cannot be used: {0}")]
    BadWelcome(String),
    /// The relay speaks another protocol version; which side to upgrade.
    #[error("{0}")]
    Incompatible(String),
    /// The token holds what no header can carry: no relay was asked.
    #[error(
        "cannot open the tunnel: the token holds characters a header cannot carry (spaces, control characters or \
         letters past ASCII)"
    )]
    UnsendableToken,
    /// What the client would send cannot be sent: no relay was asked.
    #[error("cannot open the tunnel: {0}")]
    Unsendable(String),
    /// A TLS setting could not be used.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The relay's certificate was refused.
    #[error("the relay's certificate was refused: {0}")]
    Certificate(String),
    /// The address says TLS and the relay speaks plain HTTP, or the other
    /// way round.
    #[error("{url} {why}")]
    WrongScheme {
        /// The address tried.
        url: String,
        /// What answered, and the scheme to use instead.
        why: &'static str,
    },
    /// The relay could not be reached or the socket broke; worth retrying.
    #[error("cannot reach the relay: {0}")]
    Unreachable(String),
    /// The relay, or a proxy in front of it, is busy and says when to come
    /// back (503 with `Retry-After`): its connection cap, say.
    #[error("cannot reach the relay: {told}")]
    Busy {
        /// What answered, one line.
        told: String,
        /// When to try again.
        retry_in: Duration,
    },
    /// The tunnel's session panicked: a bug in PortPreview, not something
    /// the user can change.
    #[error("internal error in the tunnel, which stopped: {0}")]
    Internal(String),
}

impl ConnectError {
    /// True when retrying cannot help: the user must change something.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ConnectError::Unreachable(_) | ConnectError::Busy { .. })
    }

    /// How long the relay asked the client to wait before it asks again, when
    /// it said: a name held for a client that went away, or a busy relay.
    pub fn told_to_wait(&self) -> Option<Duration> {
        match self {
            ConnectError::NameTaken { free_in, .. } => *free_in,
            ConnectError::Busy { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }
}
