//! What a tunnel name may look like, and how a Host names one: the relay
//! enforces the rule and routes by the Host, and the client checks a
//! requested name before it connects, so a mistake is told as one, and
//! reads the Host alike to record the URL a webhook was called at.

/// Longest tunnel name (one DNS label).
pub const MAX_NAME_LEN: usize = 63;

/// Why a requested name cannot be used; none when it can.
pub fn invalid_reason(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Some(format!("a tunnel name has 1 to {MAX_NAME_LEN} characters"));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !name.chars().all(allowed) {
        return Some("a tunnel name uses only lowercase letters, digits and '-'".to_string());
    }
    // A name is also a DNS label under --domain.
    if name.starts_with('-') || name.ends_with('-') {
        return Some("a tunnel name starts and ends with a letter or digit".to_string());
    }
    // `xn--pypal-4ve` is shown by browsers as `pаypal`, with a Cyrillic
    // `а`: DNS keeps labels with `--` there for such encodings.
    if name.get(2..4) == Some("--") {
        return Some(
            "a tunnel name has no '--' as its third and fourth characters: DNS keeps those for encoded \
             international names (xn--), which browsers show as other letters"
                .to_string(),
        );
    }
    None
}

/// The host name of an `authority` as a caller's Host gives it:
/// `shop.relay.test` of `shop.relay.test.:8080`. Both sides of a tunnel
/// route and record by it, so they must read a Host alike. A DNS name, not
/// an IPv6 literal: a tunnel's host is `<name>.<domain>`.
pub fn host_name(authority: &str) -> &str {
    let name = authority
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(authority, |(name, _)| name);
    // One dot ends a name written in full; `shop.relay.test..` is no name.
    name.strip_suffix('.').unwrap_or(name)
}

/// True when `name` may name a tunnel.
pub fn is_valid(name: &str) -> bool {
    invalid_reason(name).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_loses_its_port_and_trailing_dot() {
        assert_eq!(host_name("shop.relay.test:8080"), "shop.relay.test");
        assert_eq!(host_name("shop.relay.test."), "shop.relay.test");
        assert_eq!(host_name("shop.relay.test.:80"), "shop.relay.test");
        assert_eq!(host_name("relay.test:x"), "relay.test:x", "not a port");
        assert_eq!(host_name("shop.relay.test.."), "shop.relay.test.", "one dot only");
    }

    #[test]
    fn validation_rejects_what_dns_and_paths_cannot_carry() {
        assert!(is_valid("my-app-2"));
        assert!(is_valid(&"a".repeat(63)));
        assert!(!is_valid(""));
        assert!(!is_valid(&"a".repeat(64)));
        assert!(!is_valid("My-App"));
        assert!(!is_valid("a.b"));
        assert!(!is_valid("a/b"));
        assert!(!is_valid("ä"));
        assert!(
            !is_valid("-x-") && !is_valid("-x") && !is_valid("x-"),
            "not a DNS label"
        );
        assert!(!is_valid("xn--pypal-4ve"), "an encoded look-alike");
        assert!(!is_valid("ab--cd"));
        assert!(is_valid("a--b") && is_valid("abc--d"), "'--' elsewhere");
    }
}
