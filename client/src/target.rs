//! The local target: where `portpreview http` forwards every request.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use tokio::net::TcpStream;

/// Opens a TCP connection to a local handler at `host` (brackets allowed)
/// and `port`. `localhost` is loopback on both families (RFC 6761), but a
/// resolver often gives only one, and a handler may listen on only one
/// (Node binds `::1` where that comes first): like curl, both are tried,
/// IPv4 first.
pub async fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if !host.eq_ignore_ascii_case("localhost") {
        return TcpStream::connect((host, port)).await;
    }
    match TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await {
        Err(refused) if refused.kind() == std::io::ErrorKind::ConnectionRefused => {
            TcpStream::connect((Ipv6Addr::LOCALHOST, port))
                .await
                .map_err(|_| refused)
        }
        tried => tried,
    }
}

/// Why a `PORT|URL` argument is not a usable local target.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {what} \"{input}\": {reason}")]
pub struct TargetError {
    what: &'static str,
    input: String,
    reason: &'static str,
}

impl TargetError {
    /// The same error, naming the flag or setting the text came from.
    pub fn named(self, what: &'static str) -> Self {
        Self { what, ..self }
    }

    /// Why the text is no target, without the text.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

/// What a target written without a scheme must hold.
const EXPECTED_FORM: &str = "expected http://host:port[/path], https://host:port[/path], host:port or a port number";

/// How a local handler is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Plain HTTP/1, what a target without a scheme gets.
    #[default]
    Http,
    /// HTTP/1 over TLS.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    /// The port a URL of this scheme means when it names none.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A local HTTP server: scheme, host, port and an optional base path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Plain HTTP or HTTPS.
    pub scheme: Scheme,
    /// Host to connect to (`localhost` when only a port was given).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path prefix put before every forwarded path, a trailing `/` kept as
    /// written (empty for none, or `/` alone).
    pub base_path: String,
}

impl Target {
    /// Parses `3000`, `localhost:3000`, `127.0.0.1:3000`, `http://host:port/base`
    /// or `https://host:port/base`.
    pub fn parse(input: &str) -> Result<Self, TargetError> {
        let fail = |reason| TargetError {
            what: "local target",
            // A password pasted into the URL is not repeated back.
            input: crate::userinfo::hidden(input).into_owned(),
            reason,
        };
        // The handler's own credentials would be sent with every delivery
        // and kept in the history; a handler hears what the caller sends.
        // Checked before anything splits the input: a password may hold `/`.
        if crate::userinfo::present(input) {
            return Err(fail(
                "a user or password in the target is not supported: the caller's Authorization header is forwarded as sent",
            ));
        }
        // Schemes are case-insensitive: HTTP://localhost:3000 is the same URL.
        let scheme = |name: &str| input.get(..name.len()).is_some_and(|s| s.eq_ignore_ascii_case(name));
        let written = [Scheme::Http, Scheme::Https]
            .into_iter()
            .find(|s| scheme(&format!("{s}://")));
        let rest = match written {
            Some(s) => &input[s.as_str().len() + "://".len()..],
            None if input.contains("://") => return Err(fail("only http:// and https:// targets can be forwarded to")),
            None => input,
        };
        let has_scheme = written.is_some();
        let scheme = written.unwrap_or_default();
        // A query or fragment straight after the port ends the authority too.
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(fail("no host or port: write it as http://localhost:3000"));
        }
        let split = match authority.starts_with('[') {
            // An IPv6 address holds colons of its own: a port follows the bracket.
            true => authority
                .rsplit_once("]:")
                .map(|(host, port)| (&authority[..=host.len()], port)),
            false => authority.rsplit_once(':'),
        };
        let (host, port) = match split {
            Some((host, port)) => (host, Some(port)),
            None if authority.chars().all(|c| c.is_ascii_digit()) => ("localhost", Some(authority)),
            // `notaurl` alone is more likely a mistake than a host on port 80.
            None if !has_scheme => return Err(fail(EXPECTED_FORM)),
            None => (authority, None),
        };
        let host = if host.is_empty() { "localhost" } else { host };
        let port: u16 = match port {
            None => scheme.default_port(),
            Some(port) => port
                .parse()
                .map_err(|_| fail("the port must be a number from 1 to 65535"))?,
        };
        if port == 0 {
            return Err(fail("the port must be a number from 1 to 65535"));
        }
        if !portpreview_shared::host::is_host(host) {
            return Err(fail("the host is not a host name or address"));
        }
        // Checked now, not on every request: a path no request line can
        // carry would fail each one, and read as the handler's failure.
        if !path.is_empty() && path.parse::<http::uri::PathAndQuery>().is_err() {
            return Err(fail(
                "a path is written as in a URL: no spaces or control characters (a space is %20)",
            ));
        }
        Ok(Self {
            scheme,
            host: host.to_string(),
            port,
            base_path: if path == "/" { String::new() } else { path.to_string() },
        })
    }

    /// Parses the target of `portpreview http`, which puts each caller's
    /// path and query after the base path: a query or fragment in the base
    /// would land in the middle of every forwarded path.
    pub fn parse_for_tunnel(input: &str) -> Result<Self, TargetError> {
        let target = Self::parse(input)?;
        let fail = |reason| TargetError {
            what: "local target",
            // A password pasted into the URL is not repeated back.
            input: crate::userinfo::hidden(input).into_owned(),
            reason,
        };
        if target.base_path.contains(['?', '#']) {
            return Err(fail(
                "a base path cannot carry a query string or fragment; callers' queries are forwarded as they come",
            ));
        }
        Ok(target)
    }

    /// The `Host` header value for requests to this target.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Request target (path and query) to send for a caller's `path`.
    /// The tunnel's bare URL reaches the base path exactly as written: a
    /// handler at `/webhooks/stripe` may answer 404 or redirect for
    /// `/webhooks/stripe/` (and one at `/webhook/` for `/webhook`), and a
    /// provider counts either as a failed delivery.
    pub fn request_path(&self, path: &str) -> String {
        if self.base_path.is_empty() {
            return path.to_string();
        }
        let rest = path.strip_prefix('/').unwrap_or(path);
        if rest.is_empty() || rest.starts_with('?') {
            return format!("{}{rest}", self.base_path);
        }
        match self.base_path.strip_suffix('/') {
            Some(base) => format!("{base}/{rest}"),
            None => format!("{}/{rest}", self.base_path),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}{}", self.scheme, self.host, self.port, self.base_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_spellings() {
        let port = Target::parse("3000").unwrap();
        assert_eq!((port.host.as_str(), port.port), ("localhost", 3000));
        assert_eq!(
            Target::parse("127.0.0.1:8080").unwrap().to_string(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(Target::parse("HTTP://localhost:4000").unwrap().port, 4000);
        let url = Target::parse("http://localhost:4000/api").unwrap();
        assert_eq!(url.request_path("/hook?a=1"), "/api/hook?a=1");
        assert_eq!(
            url.request_path("/"),
            "/api",
            "the bare tunnel URL is the base path, no slash added"
        );
        assert_eq!(url.request_path("/?a=1"), "/api?a=1");
        let slashed = Target::parse("http://localhost:4000/api/").unwrap();
        assert_eq!(slashed.to_string(), "http://localhost:4000/api/", "shown as written");
        assert_eq!(slashed.request_path("/"), "/api/", "nor a slash taken away");
        assert_eq!(slashed.request_path("/?a=1"), "/api/?a=1");
        assert_eq!(slashed.request_path("/hook"), "/api/hook", "one slash between");
        assert_eq!(
            Target::parse("http://localhost:4000/").unwrap().request_path("/x"),
            "/x"
        );
        assert_eq!(Target::parse("http://[::1]:5000").unwrap().host, "[::1]");
        let implied = Target::parse("http://[::1]/hook").unwrap();
        assert_eq!(
            (implied.host.as_str(), implied.port),
            ("[::1]", 80),
            "the scheme's port"
        );
        assert!(Target::parse("[::1]").is_err(), "no scheme, no port: a mistake");
        assert_eq!(Target::parse("[fe80::1%eth0]:5000").unwrap().port, 5000);
        assert_eq!(Target::parse("http://my_box.local:5000").unwrap().host, "my_box.local");
        assert_eq!(Target::parse("http://example.test").unwrap().port, 80);
        assert_eq!(Target::parse("localhost.:5000").unwrap().host, "localhost.");
        assert_eq!(Target::parse("10.0.0.255:5000").unwrap().host, "10.0.0.255");
        assert_eq!(Target::parse("3com.example:5000").unwrap().host, "3com.example");
    }

    #[test]
    fn rejects_what_cannot_be_forwarded() {
        for bad in [
            "0",
            "70000",
            "ftp://x:1",
            "https://localhost:",
            "localhost:http",
            "a b:1",
            "notaurl",
            "localhost/api",
            "http://ev\u{1b}[31m:1",
            "http://user:pw@host:1",
            "http://[::1:5000",
            "http://[nothex]:5000",
            "-a.example:1",
            "a-.example:1",
            "a..b:1",
            ".a:1",
            "256.1.1.1:1",
            "1.2.3:1",
            "127.1:1",
            "0x7f.0.0.1:1",
            "http://bücher.test:1",
            "http://a;b:1",
            "http://",
            "http:///api",
            "wss://localhost:1",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn https_targets_keep_their_scheme() {
        let implied = Target::parse("https://localhost").unwrap();
        assert_eq!(
            (implied.scheme, implied.host.as_str(), implied.port),
            (Scheme::Https, "localhost", 443),
            "the scheme's port"
        );
        assert_eq!(implied.to_string(), "https://localhost:443");
        let explicit = Target::parse("https://127.0.0.1:8443").unwrap();
        assert_eq!((explicit.scheme, explicit.port), (Scheme::Https, 8443));
        let based = Target::parse_for_tunnel("https://localhost:8443/api/").unwrap();
        assert_eq!(based.base_path, "/api/");
        assert_eq!(based.request_path("/hook"), "/api/hook");
        let shouted = Target::parse("HTTPS://[::1]:5001/hooks").unwrap();
        assert_eq!(shouted.scheme, Scheme::Https, "schemes are case-insensitive");
        assert_eq!(shouted.to_string(), "https://[::1]:5001/hooks");
        for written in [
            "https://localhost:8443",
            "https://[::1]:5001/hooks",
            "http://localhost:3000/api/",
        ] {
            let target = Target::parse(written).unwrap();
            assert_eq!(target.to_string(), written);
            assert_eq!(Target::parse(&target.to_string()).unwrap(), target, "a round trip");
        }
        assert_eq!(
            Target::parse("localhost:8443").unwrap().scheme,
            Scheme::Http,
            "no scheme: plain HTTP"
        );
    }

    #[test]
    fn a_tunnel_target_has_no_query_of_its_own() {
        for bad in [
            "http://localhost:3000/api?x=1",
            "http://localhost:3000/api#top",
            "localhost:3000/?x",
            "localhost:3000?x=1",
            "http://localhost:3000?",
        ] {
            let err = Target::parse_for_tunnel(bad).unwrap_err().to_string();
            assert!(err.contains("query string"), "{bad}: {err}");
        }
        for bad in ["http://localhost:3000/my hooks/", "http://localhost:3000/a\tb"] {
            let err = Target::parse_for_tunnel(bad).unwrap_err().to_string();
            assert!(err.contains("as in a URL"), "{bad:?}: {err}");
        }
        assert!(Target::parse_for_tunnel("http://localhost:3000/my%20hooks/").is_ok());
        assert!(Target::parse_for_tunnel("http://localhost:3000/api/").is_ok());
    }

    #[test]
    fn a_user_or_password_in_the_target_is_refused_as_such() {
        for bad in [
            "http://u:hunter2@localhost:3000",
            "u@localhost:3000/hooks",
            "https://u:hunt/er2@localhost:1",
        ] {
            let err = Target::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("a user or password in the target is not supported"),
                "{bad}: {err}"
            );
            assert!(err.contains("***@localhost:") && !err.contains("hunt"), "{err}");
        }
    }

    #[test]
    fn a_bare_word_is_refused_with_the_forms_that_work() {
        let err = Target::parse("notaurl").unwrap_err().named("--target");
        assert_eq!(
            err.to_string(),
            "invalid --target \"notaurl\": expected http://host:port[/path], https://host:port[/path], host:port or a port number"
        );
    }
}
