//! The URL a tunnel is reached at, as this relay forms it.

/// How public URLs are formed on this relay.
#[derive(Debug, Clone)]
pub struct PublicUrl {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// With `--domain`: URLs are `<name>.<domain>`.
    pub domain: Option<String>,
    /// Otherwise: the Host the client connected to; URLs are `<host>/t/<name>`.
    pub host: String,
    /// Behind an HTTPS proxy (`--behind-https-proxy`), the relay's own
    /// plain port. A client inside the relay's network that reached it
    /// there names that port in its Host, but callers reach `<domain>` at
    /// the proxy, on https's own port: a domain URL never names it. (A
    /// path URL names the address the client reached, port and all.)
    pub proxied_port: Option<u16>,
}

impl PublicUrl {
    /// The URL that reaches tunnel `name`. Under `--domain` it keeps the
    /// port the client reached the relay on, unless it is the scheme's own:
    /// a relay on :8080 is not reached at `http://shop.relay.test`.
    pub fn for_name(&self, name: &str) -> String {
        match &self.domain {
            Some(domain) => match self.port().filter(|port| !self.unnamed(*port)) {
                Some(port) => format!("{}://{name}.{domain}:{port}", self.scheme),
                None => format!("{}://{name}.{domain}", self.scheme),
            },
            None => format!("{}://{}/t/{name}", self.scheme, self.host),
        }
    }

    /// Whether a URL leaves `port` out: the scheme's own, or the relay's
    /// plain port behind its proxy.
    fn unnamed(&self, port: u16) -> bool {
        port == self.default_port() || Some(port) == self.proxied_port
    }

    /// The port named in the Host the client connected to, if any.
    fn port(&self) -> Option<u16> {
        let (before, port) = self.host.rsplit_once(':')?;
        // `[::1]` alone has colons but no port.
        let bracketed_or_plain = before.ends_with(']') || !before.contains(':');
        bracketed_or_plain.then(|| port.parse().ok()).flatten()
    }

    fn default_port(&self) -> u16 {
        if self.scheme == "https" {
            443
        } else {
            80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PublicUrl;

    #[test]
    fn a_subdomain_url_keeps_the_port_the_relay_was_reached_on() {
        let url = |scheme, host: &str| {
            PublicUrl {
                scheme,
                domain: Some("relay.test".into()),
                host: host.into(),
                proxied_port: None,
            }
            .for_name("shop")
        };
        assert_eq!(url("http", "127.0.0.1:18080"), "http://shop.relay.test:18080");
        assert_eq!(url("https", "relay.test:8443"), "https://shop.relay.test:8443");
        assert_eq!(url("https", "[::1]:8443"), "https://shop.relay.test:8443");
        assert_eq!(url("http", "relay.test"), "http://shop.relay.test");
        assert_eq!(url("http", "relay.test:80"), "http://shop.relay.test");
        assert_eq!(url("https", "relay.test:443"), "https://shop.relay.test");
        assert_eq!(url("http", "[::1]"), "http://shop.relay.test");
        let path = PublicUrl {
            scheme: "http",
            domain: None,
            host: "127.0.0.1:9".into(),
            proxied_port: None,
        };
        assert_eq!(path.for_name("shop"), "http://127.0.0.1:9/t/shop");
    }

    #[test]
    fn behind_an_https_proxy_a_domain_url_never_names_the_relays_own_plain_port() {
        let url = |domain: Option<&str>, host: &str| {
            PublicUrl {
                scheme: "https",
                domain: domain.map(str::to_string),
                host: host.into(),
                proxied_port: Some(8080),
            }
            .for_name("shop")
        };
        assert_eq!(url(Some("relay.test"), "10.0.0.5:8080"), "https://shop.relay.test");
        assert_eq!(
            url(Some("relay.test"), "relay.test:8443"),
            "https://shop.relay.test:8443"
        );
        assert_eq!(url(None, "10.0.0.5:8080"), "https://10.0.0.5:8080/t/shop");
    }
}
