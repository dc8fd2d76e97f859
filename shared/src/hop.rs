//! Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and
//! never travel past it — not through the relay, not into a replay.

use crate::message::Header;

/// Headers that always describe one hop.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

/// True for a header that always describes one hop (any case).
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|hop| hop.eq_ignore_ascii_case(name))
}

/// Removes hop-by-hop headers and every header that `Connection` names.
pub fn strip_hop_by_hop(headers: &mut Vec<Header>) {
    let named: Vec<String> = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| {
            String::from_utf8_lossy(&h.value)
                .split(',')
                .map(|token| token.trim().to_ascii_lowercase())
                .filter(|token| !token.is_empty())
                .collect::<Vec<_>>()
        })
        .collect();
    headers.retain(|h| !is_hop_by_hop(&h.name) && !named.iter().any(|n| n.eq_ignore_ascii_case(&h.name)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_go() {
        let mut headers = vec![
            Header::new("Connection", "keep-alive, X-Trace"),
            Header::new("x-trace", "1"),
            Header::new("Transfer-Encoding", "chunked"),
            Header::new("content-type", "application/json"),
            Header::new("x-dup", "a"),
            Header::new("x-dup", "b"),
        ];
        strip_hop_by_hop(&mut headers);
        let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["content-type", "x-dup", "x-dup"]);
    }
}
