//! Relay settings with named defaults.

use std::sync::Arc;
use std::time::Duration;

use portpreview_shared::message::{MAX_HEADER_BYTES, MAX_IN_FLIGHT};

use crate::error::ConfigError;
use crate::tokens::Tokens;

/// How long a caller's request waits for the client's answer before 504.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request body relayed (GitHub's limit) before 413.
pub const DEFAULT_MAX_BODY: u64 = 25 * 1024 * 1024;
/// Requests in flight on one tunnel before 503.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// How long a name stays held for its client after a disconnect.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);
/// Interval between WebSocket pings to each client.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(5);
/// Silence after which a client is declared dead (design: at most 15 s).
pub const DEFAULT_DEAD_AFTER: Duration = Duration::from_secs(15);
/// Time a caller has to send a whole request head; also the keep-alive idle limit.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write to a caller (or client) may wait before its connection
/// is dropped, as nginx's `send_timeout`. The kernel takes more bytes once
/// a third of the socket's send buffer is free, so a reader that drains a
/// large answer slowly sees long waits between writes too: a minute lets
/// one taking a few KB a second through, and still ends a caller that
/// reads nothing.
pub const DEFAULT_WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Answer bytes the relay holds for callers that have not taken them yet,
/// all streams together, before it cuts the callers that read nothing
/// ([`crate::RelayConfig::answer_budget`]). Answers taken as they come
/// hold next to nothing, so normal use stays far below it, within the
/// relay's 16 MiB; it bounds abuse instead: each stream may queue a 1 MiB
/// window, and 64 of them full is a large crowd of stalled callers, where
/// the connection caps alone would let some ten thousand hold 10 GB.
pub const DEFAULT_ANSWER_BUDGET: u64 = 64 * 1024 * 1024;
/// Open connections allowed from one IP address.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 512;
/// Open connections allowed in total.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Headers per request before 431.
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Bytes of request head (request line plus headers) before 431. Half the
/// protocol's frame header limit: the relay adds forwarding headers, one of
/// them repeating the Host.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// How long shutdown waits for requests in flight before closing anyway.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
pub use portpreview_shared::duration::MAX_WAIT;

/// Everything [`crate::run`] needs to know besides its listener.
#[derive(Clone)]
pub struct RelayConfig {
    /// Enables subdomain routing `<name>.<domain>` and URLs of that form.
    pub domain: Option<String>,
    /// Accepted client tokens and their reserved names; `None` is an open relay.
    pub tokens: Option<Tokens>,
    /// Serves https/wss when set.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Callers and clients reach the relay over HTTPS at a proxy in front
    /// of it, which hands it plain HTTP: the URLs it gives and the
    /// `X-Forwarded-Proto` it sets say https, as they do under `tls`.
    pub behind_https: bool,
    /// The client did not answer within this: 504.
    pub request_timeout: Duration,
    /// Request bodies over this many bytes: 413.
    pub max_body: u64,
    /// Requests in flight per tunnel over this: 503. Three quarters of it
    /// at most may be requests whose bodies are still arriving.
    pub max_in_flight: usize,
    /// How long a name is held after its client disconnects.
    pub grace: Duration,
    /// Interval between pings to each client.
    pub ping_interval: Duration,
    /// A client silent for this long is declared dead (keep it a few `ping_interval`s).
    pub dead_after: Duration,
    /// Time allowed to read a request head (and to sit idle between requests).
    pub header_read_timeout: Duration,
    /// Time a write may wait without a byte taken before the connection is
    /// dropped, so a peer that never reads frees what its answer holds.
    pub write_stall_timeout: Duration,
    /// Answer bytes queued for callers, relay-wide, past which a caller
    /// that has read nothing for two seconds is cut off instead of after
    /// `write_stall_timeout`.
    pub answer_budget: u64,
    /// Open connections allowed from one IP address.
    pub max_connections_per_ip: usize,
    /// Open connections allowed in total.
    pub max_connections: usize,
    /// Headers per request before 431.
    pub max_headers: usize,
    /// Bytes of request head before 431. At most the protocol's frame
    /// header limit ([`MAX_HEADER_BYTES`]): a larger head could never reach
    /// a client. A head within it that still does not fit once framed gets
    /// a 431 too.
    pub max_header_bytes: usize,
    /// How long shutdown waits for requests in flight.
    pub drain_timeout: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            domain: None,
            tokens: None,
            tls: None,
            behind_https: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_body: DEFAULT_MAX_BODY,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            grace: DEFAULT_GRACE,
            ping_interval: DEFAULT_PING_INTERVAL,
            dead_after: DEFAULT_DEAD_AFTER,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            write_stall_timeout: DEFAULT_WRITE_STALL_TIMEOUT,
            answer_budget: DEFAULT_ANSWER_BUDGET,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_headers: DEFAULT_MAX_HEADERS,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

impl RelayConfig {
    /// Refuses settings the relay cannot honour.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Zero would accept connections only to drop every one of them.
        if self.max_connections_per_ip == 0 || self.max_connections == 0 {
            return Err(ConfigError::Limit(
                "connection limits must allow at least one connection".into(),
            ));
        }
        // Each of these at zero would refuse every request it governs.
        let counts = [
            ("max_in_flight", self.max_in_flight),
            ("max_headers", self.max_headers),
            ("max_header_bytes", self.max_header_bytes),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, count)| *count == 0) {
            return Err(ConfigError::Limit(format!("{name} must be above zero")));
        }
        let waits = [
            ("request_timeout", self.request_timeout),
            ("header_read_timeout", self.header_read_timeout),
            ("write_stall_timeout", self.write_stall_timeout),
            ("ping_interval", self.ping_interval),
            ("dead_after", self.dead_after),
            ("grace", self.grace),
            ("drain_timeout", self.drain_timeout),
        ];
        if let Some((name, wait)) = waits.iter().find(|(_, wait)| *wait > MAX_WAIT) {
            return Err(ConfigError::Limit(format!(
                "{name} of {wait:?} is over the longest wait the relay takes, a day"
            )));
        }
        if self.request_timeout.is_zero()
            || self.header_read_timeout.is_zero()
            || self.write_stall_timeout.is_zero()
            || self.ping_interval.is_zero()
        {
            return Err(ConfigError::Limit(
                "request_timeout, header_read_timeout, write_stall_timeout and ping_interval must be above zero".into(),
            ));
        }
        // A client is heard from at most once a ping: a shorter silence
        // allowed would declare every client dead at its first ping.
        if self.dead_after <= self.ping_interval {
            return Err(ConfigError::Limit(format!(
                "dead_after ({:?}) must be longer than ping_interval ({:?})",
                self.dead_after, self.ping_interval
            )));
        }
        if self.max_in_flight > MAX_IN_FLIGHT {
            return Err(ConfigError::Limit(format!(
                "max_in_flight of {} is over the {MAX_IN_FLIGHT} requests a client takes at once",
                self.max_in_flight
            )));
        }
        if self.max_header_bytes > MAX_HEADER_BYTES {
            return Err(ConfigError::Limit(format!(
                "max_header_bytes of {} is over the {MAX_HEADER_BYTES} bytes a frame header carries to a client",
                self.max_header_bytes
            )));
        }
        Ok(())
    }
}

impl std::fmt::Debug for RelayConfig {
    // Tokens and key material stay out of Debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayConfig")
            .field("domain", &self.domain)
            .field("tokens", &self.tokens)
            .field("tls", &self.tls.is_some())
            .field("behind_https", &self.behind_https)
            .field("request_timeout", &self.request_timeout)
            .field("max_body", &self.max_body)
            .field("max_in_flight", &self.max_in_flight)
            .field("grace", &self.grace)
            .field("ping_interval", &self.ping_interval)
            .field("dead_after", &self.dead_after)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("write_stall_timeout", &self.write_stall_timeout)
            .field("answer_budget", &self.answer_budget)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .finish_non_exhaustive()
    }
}

/// A `--domain` as the relay matches Host headers against: lowercase,
/// without a trailing dot.
pub fn domain_name(text: &str) -> Result<String, String> {
    const AN_ADDRESS: &str = "an IP address, not a domain name: <name>.DOMAIN URLs need a name with wildcard DNS \
                              (/t/<name> URLs work without --domain)";
    let domain = text.trim().trim_end_matches('.').to_ascii_lowercase();
    // An IPv6 address holds colons, and would read as a port below.
    let bare = domain.trim_start_matches('[').split(']').next().unwrap_or_default();
    if bare.parse::<std::net::Ipv6Addr>().is_ok() {
        return Err(AN_ADDRESS.into());
    }
    // The three likeliest slips: the public URL pasted, the port added,
    // the wildcard DNS record copied.
    if let Some((scheme, rest)) = domain.split_once("://") {
        return Err(format!(
            "a URL, not a domain name: give the host alone (--domain {}); the relay's URLs take {scheme}:// from \
             how it serves (https:// with --tls-cert or --behind-https-proxy)",
            rest.split(['/', ':']).next().unwrap_or_default()
        ));
    }
    if let Some((host, _)) = domain.split_once(':') {
        // Told to drop the port, an address would then be refused as one.
        domain_name(host)?;
        return Err(format!(
            "a port does not belong in --domain (--domain {host}): public URLs keep the port clients reach the \
             relay on"
        ));
    }
    if let Some(rest) = domain.strip_prefix("*.") {
        return Err(format!(
            "the wildcard is DNS's part: give the domain it covers (--domain {rest}), and point *.{rest} at this relay"
        ));
    }
    // DNS labels: letters, digits and inner hyphens.
    let valid = !domain.is_empty()
        && domain.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    // No top-level domain is all digits: this is an IPv4 address, and
    // `<name>.127.0.0.1` would be a URL no resolver answers.
    let numeric = domain
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()));
    match (valid, numeric) {
        (true, false) => Ok(domain),
        (true, true) => Err(AN_ADDRESS.into()),
        (false, _) => Err("not a domain name".into()),
    }
}

/// An address to listen on, a host name (`localhost:8080`) resolved to its
/// first address.
pub fn listen_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let resolved = text
        .to_socket_addrs()
        .map_err(|err| format!("not an address like 0.0.0.0:8080 or 127.0.0.1:8080 ({err})"))?;
    resolved
        .into_iter()
        .next()
        .ok_or_else(|| format!("{text} resolves to no address"))
}

/// Largest `--max-body`: past any body a webhook sender posts, and
/// still a size whose upload the answer timeout can cover.
pub const MAX_BODY_LIMIT: u64 = 1024 * 1024 * 1024;

/// `--request-timeout` and `--grace`: a duration within a day, above
/// zero, read as the client's timeouts are.
pub fn wait(text: &str) -> Result<Duration, String> {
    portpreview_shared::duration::parse_wait(text)
}

/// `--max-body`: bytes, or a number of KiB, MiB or GiB (`25MiB`), up to
/// [`MAX_BODY_LIMIT`].
pub fn body_limit(text: &str) -> Result<u64, String> {
    const A_SIZE: &str = "expected a size like 25MiB, 512KiB or 1GiB, or a number of bytes";
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1024,
        "mib" => 1024 * 1024,
        "gib" => 1024 * 1024 * 1024,
        // Decimal units would be read as binary ones by some and not by others.
        "k" | "kb" | "m" | "mb" | "g" | "gb" => return Err(format!("{A_SIZE} (KiB, MiB and GiB count in 1024s)")),
        _ => return Err(A_SIZE.into()),
    };
    let bytes = (number.parse::<u64>().ok())
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| A_SIZE.to_owned())?;
    match bytes {
        0 => Err("a limit of 0 would refuse every request with a body".into()),
        n if n > MAX_BODY_LIMIT => Err("over 1GiB, the largest body limit the relay takes".into()),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_as_an_operator_writes_them() {
        assert_eq!(wait("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(wait("2m"), Ok(Duration::from_secs(120)));
        assert!(wait("0s").unwrap_err().starts_with("no time at all"));
        assert_eq!(
            wait("2d").unwrap_err(),
            "longer than a day: give a duration like 30s or 5m"
        );
        assert!(wait("30").unwrap_err().starts_with("30 has no unit"));
        assert_eq!(body_limit("25MiB"), Ok(25 * 1024 * 1024));
        assert_eq!(body_limit("512 KiB"), Ok(512 * 1024));
        assert_eq!(body_limit("1000"), Ok(1000));
        assert!(body_limit("25MB").unwrap_err().contains("1024s"));
        assert!(body_limit("10kb").unwrap_err().contains("1024s"));
        assert_eq!(body_limit("25mib"), Ok(25 * 1024 * 1024));
        assert!(body_limit("2GiB").unwrap_err().starts_with("over 1GiB"));
        assert!(body_limit("0").is_err());
        assert!(body_limit("lots").unwrap_err().starts_with("expected a size"));
    }

    /// A domain is matched as DNS writes it; the slips an operator makes
    /// most are each told what to drop.
    #[test]
    fn a_domain_given_as_a_url_a_host_and_port_or_a_wildcard_is_told_what_to_drop() {
        assert_eq!(domain_name("Relay.Example.TEST."), Ok("relay.example.test".into()));
        let said = |text| domain_name(text).unwrap_err();
        assert!(
            said("https://relay.example.test/")
                .starts_with("a URL, not a domain name: give the host alone (--domain relay.example.test)"),
            "{}",
            said("https://relay.example.test/")
        );
        assert!(said("relay.example.test:8080")
            .starts_with("a port does not belong in --domain (--domain relay.example.test)"));
        assert!(said("*.relay.example.test")
            .starts_with("the wildcard is DNS's part: give the domain it covers (--domain relay.example.test)"));
        for address in ["10.0.0.1", "10.0.0.1:80", "::1", "[::1]", "[::1]:8080"] {
            assert!(
                said(address).starts_with("an IP address, not a domain name"),
                "{address}: {}",
                said(address)
            );
        }
        assert_eq!(said("-relay.example.test"), "not a domain name");
        assert_eq!(said("relay_example"), "not a domain name");
    }

    #[test]
    fn the_head_limit_may_not_exceed_what_a_frame_carries() {
        assert!(RelayConfig::default().validate().is_ok());
        let at_limit = RelayConfig {
            max_header_bytes: MAX_HEADER_BYTES,
            ..RelayConfig::default()
        };
        assert!(at_limit.validate().is_ok());
        let over = RelayConfig {
            max_header_bytes: MAX_HEADER_BYTES + 1,
            ..RelayConfig::default()
        };
        let err = over.validate().expect_err("a head limit no frame can carry");
        assert!(err.to_string().contains("max_header_bytes"), "{err}");
        let closed = RelayConfig {
            max_connections_per_ip: 0,
            ..RelayConfig::default()
        };
        assert!(closed.validate().is_err(), "a relay that drops everyone");
        let crowded = RelayConfig {
            max_in_flight: MAX_IN_FLIGHT + 1,
            ..RelayConfig::default()
        };
        let err = crowded.validate().expect_err("more than a client takes");
        assert!(err.to_string().contains("max_in_flight"), "{err}");
        for zeroed in [
            RelayConfig {
                max_in_flight: 0,
                ..RelayConfig::default()
            },
            RelayConfig {
                max_headers: 0,
                ..RelayConfig::default()
            },
            RelayConfig {
                max_header_bytes: 0,
                ..RelayConfig::default()
            },
        ] {
            let err = zeroed.validate().expect_err("a relay that refuses every request");
            assert!(err.to_string().contains("must be above zero"), "{err}");
        }
    }

    /// Waits the relay's clock arithmetic cannot take, or that would end
    /// every session at once, are refused before the relay starts.
    #[test]
    fn waits_out_of_range_are_refused() {
        let refused = |config: RelayConfig| config.validate().expect_err("refused").to_string();
        let long = refused(RelayConfig {
            request_timeout: Duration::from_secs(u64::MAX / 4),
            ..RelayConfig::default()
        });
        assert!(long.contains("request_timeout") && long.contains("a day"), "{long}");
        let zero = refused(RelayConfig {
            ping_interval: Duration::ZERO,
            ..RelayConfig::default()
        });
        assert!(zero.contains("above zero"), "{zero}");
        let never_waits = refused(RelayConfig {
            write_stall_timeout: Duration::ZERO,
            ..RelayConfig::default()
        });
        assert!(never_waits.contains("write_stall_timeout"), "{never_waits}");
        let deaf = refused(RelayConfig {
            ping_interval: Duration::from_secs(15),
            ..RelayConfig::default()
        });
        assert!(deaf.contains("dead_after"), "{deaf}");
        assert!(RelayConfig {
            request_timeout: MAX_WAIT,
            ..RelayConfig::default()
        }
        .validate()
        .is_ok());
    }
}
