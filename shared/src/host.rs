//! What a host may look like where PortPreview takes one: a local target
//! the client connects to, and the Host header a caller sends the relay,
//! which the handler is told again as `X-Forwarded-Host`.

/// A DNS name or IPv4 address in ASCII, or an IPv6 address in brackets
/// (with an optional zone, `[fe80::1%eth0]`): what a socket can connect
/// to, and nothing that could end a URL or a shell word early.
pub fn is_host(host: &str) -> bool {
    match host.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')) {
        Some(inner) => {
            let (address, zone) = inner.split_once('%').unwrap_or((inner, "x"));
            address.parse::<std::net::Ipv6Addr>().is_ok()
                && !zone.is_empty()
                && zone
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        None if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') => host.parse::<std::net::Ipv4Addr>().is_ok(),
        None => is_dns_name(host),
    }
}

/// Whether `host` (an IPv6 address with or without brackets) names this
/// machine's loopback: `localhost`, `127.0.0.1`, `127.8.9.1`, `[::1]`.
pub fn is_loopback(host: &str) -> bool {
    names_localhost_or(host, |ip| ip.is_loopback())
}

/// Whether `host` is one of the names a local handler is reached by:
/// `localhost`, `127.0.0.1` or `::1` (bracketed or not). The rest of the
/// loopback (`127.0.0.2`) may be another process's.
pub fn is_localhost(host: &str) -> bool {
    names_localhost_or(host, |ip| {
        ip == std::net::Ipv4Addr::LOCALHOST || ip == std::net::Ipv6Addr::LOCALHOST
    })
}

/// Whether `host`, without its brackets and one trailing dot, is
/// `localhost` or an address `address` takes (IPv4-mapped ones as IPv4).
fn names_localhost_or(host: &str, address: impl Fn(std::net::IpAddr) -> bool) -> bool {
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    let name = host.strip_suffix('.').unwrap_or(host);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| address(ip.to_canonical()))
}

/// A DNS name as a resolver takes it: labels of 1 to 63 letters, digits,
/// `-` or `_`, none starting or ending with `-`, with at most one dot at
/// the end (`localhost.`). What fails here would only fail later, on every
/// request, as a name that does not resolve.
fn is_dns_name(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    // A name ending in a number is an address written short (`127.1`,
    // `0x7f.0.0.1`), which resolvers read differently: not taken.
    let numeric_end = name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    !name.is_empty()
        && !numeric_end
        && name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        })
}

/// Whether `value` is a Host header's `host [ ":" port ]`, or empty, as
/// RFC 9112 allows when the target names no authority. Handlers build URLs
/// and pages from it (it reaches them again as `X-Forwarded-Host`), so it
/// holds only what a host name or an IP address is written with: no
/// quotes, markup, spaces or control bytes. Its length is the head
/// limit's to judge, not a resolver's.
pub fn is_host_header(value: &[u8]) -> bool {
    let name_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
    let (host_ok, port) = match value {
        [] => return true,
        [b'[', rest @ ..] => match rest.iter().position(|&b| b == b']') {
            // An IPv6 address, with its zone (`%25eth0`) perhaps.
            Some(end) => (
                end > 0 && rest[..end].iter().all(|b| name_byte(b) || matches!(b, b':' | b'%')),
                &rest[end + 1..],
            ),
            None => return false,
        },
        _ => match value.iter().rposition(|&b| b == b':') {
            Some(colon) => (colon > 0 && value[..colon].iter().all(name_byte), &value[colon..]),
            None => (value.iter().all(name_byte), &[][..]),
        },
    };
    let port_ok = match port {
        [] => true,
        // A port URL parsers take: a number up to 65535 (`host:`, empty,
        // is one RFC 3986 allows).
        [b':'] => true,
        [b':', digits @ ..] => {
            digits.iter().all(u8::is_ascii_digit)
                && std::str::from_utf8(digits).is_ok_and(|port| port.parse::<u16>().is_ok())
        }
        _ => false,
    };
    host_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_loopback_is_the_loopback() {
        for host in [
            "localhost",
            "LocalHost.",
            "127.0.0.1",
            "127.8.9.1",
            "::1",
            "[::1]",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback(host), "{host:?}");
        }
        for host in ["localhost.example", "10.0.0.1", "[::2]", "example.com", "", "[::1"] {
            assert!(!is_loopback(host), "{host:?}");
        }
    }

    #[test]
    fn a_host_header_is_a_name_or_an_address_with_a_port_perhaps() {
        for host in [
            "shop.relay.test",
            "shop.relay.test:8080",
            "SHOP.Relay.Test.",
            "host:",
            "127.0.0.1:3000",
            "[::1]",
            "[::1]:80",
            "[fe80::1%eth0]:80",
            "host:65535",
            "my_host.local",
            "xn--bcher-kva.example",
            "",
        ] {
            assert!(is_host_header(host.as_bytes()), "{host:?}");
        }
        for host in [
            "evil.com/\"><script>",
            "evil.com'onmouseover=alert(1)",
            "x\u{202e}:99",
            "a b",
            "host:80x",
            "::1",
            "[::1",
            "[]",
            "[::1]x",
            "user@host",
            "host\x1b[31m",
            "host/path",
            "host?q",
            ":80",
            "host:65536",
            "host:99999999999999999999",
            "host:+80",
        ] {
            assert!(!is_host_header(host.as_bytes()), "{host:?}");
        }
        assert!(!is_host_header(b"x\xff.example"));
    }
}
