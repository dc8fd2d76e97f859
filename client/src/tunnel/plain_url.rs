//! A relay reached over TLS that names its tunnels by plain `http://`
//! URLs: TLS ends at a proxy in front of it, and the relay was not told.

/// The warning for a tunnel whose relay was reached at `connect_url` and
/// named it `public_url`, when the two disagree that way. A client that
/// reached a relay behind an HTTPS proxy at its plain port, from inside
/// its network, gets an `https://` URL: that is as meant, and not warned of.
pub fn warning(connect_url: &str, public_url: &str) -> Option<String> {
    let over_tls = connect_url.get(..6).is_some_and(|s| s.eq_ignore_ascii_case("wss://"));
    let plain = public_url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    (over_tls && plain).then(|| {
        "the relay was reached over TLS but sees plain HTTP, so this tunnel's http:// URL may not work: \
         if it is behind an HTTPS proxy, start it with --behind-https-proxy"
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::warning;

    #[test]
    fn only_a_plain_url_from_a_relay_reached_over_tls_is_warned_of() {
        let wss = "wss://relay.test:21320/_portpreview/connect";
        let said = warning(wss, "http://alice.relay.test:21320").expect("warned");
        assert!(said.contains("--behind-https-proxy"), "{said}");
        assert!(!said.contains('\n'), "one line: {said}");
        assert!(warning(wss, "http://relay.test:21320/t/alice").is_some());
        assert_eq!(warning(wss, "https://alice.relay.test"), None);
        // Inside the relay's network, at its plain port behind the proxy.
        let ws = "ws://10.0.0.5:8080/_portpreview/connect";
        assert_eq!(warning(ws, "https://alice.relay.test"), None);
        assert_eq!(warning(ws, "http://alice.relay.test:8080"), None);
    }
}
