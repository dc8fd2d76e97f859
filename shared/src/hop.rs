//! Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and
//! never travel past it — not through the relay, not into a replay, not into
//! an exported command. This is the rule's only home; every side asks it.

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

/// The hop-by-hop rule for one message: the fixed list, plus every header
/// that message's `Connection` headers name (a sender may declare any header
/// hop-by-hop that way).
#[derive(Debug, Clone, Default)]
pub struct HopFilter {
    named: Vec<String>,
}

impl HopFilter {
    /// Reads the `Connection` headers among `headers` (name, raw value).
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        Self::from_connection(
            headers
                .into_iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
                .map(|(_, value)| value),
        )
    }

    /// Reads the values of a message's `Connection` headers, for a caller
    /// that finds them itself (a header map looks them up by name).
    pub fn from_connection<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let named = values
            .into_iter()
            .flat_map(|value| {
                // Lossy, not strict: a token list with a stray byte still
                // names the headers it can, and dropping too much is safe.
                String::from_utf8_lossy(value)
                    .split(',')
                    .map(|token| token.trim().to_ascii_lowercase())
                    .filter(|token| !token.is_empty())
                    .collect::<Vec<_>>()
            })
            .collect();
        Self { named }
    }

    /// True when a header called `name` must not travel past this hop.
    pub fn drops(&self, name: &str) -> bool {
        is_hop_by_hop(name) || self.named.iter().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// Removes hop-by-hop headers and every header that `Connection` names.
pub fn strip_hop_by_hop(headers: &mut Vec<Header>) {
    let filter = HopFilter::from_headers(headers.iter().map(|h| (h.name.as_str(), h.value.as_slice())));
    headers.retain(|h| !filter.drops(&h.name));
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

    #[test]
    fn every_connection_header_counts_and_odd_bytes_do_not_hide_a_name() {
        let filter = HopFilter::from_headers([
            ("connection", &b"x-a"[..]),
            ("CONNECTION", b"\xff, X-B ,,"),
            ("x-c", b"1"),
        ]);
        assert!(filter.drops("X-A") && filter.drops("x-b") && filter.drops("Upgrade"));
        assert!(!filter.drops("x-c") && !filter.drops("content-type"));
    }
}
