//! The relay addresses a user may give, and the URLs they lead to.

use portpreview_shared::message::CONNECT_PATH;

use super::ConnectError;

/// Turns any accepted relay address into the WebSocket URL of its connect path.
pub fn relay_url(input: &str) -> Result<String, ConnectError> {
    let shown = crate::userinfo::hidden(input);
    if crate::userinfo::present(input) {
        return Err(ConnectError::Credentials(shown.into_owned()));
    }
    let bad = || ConnectError::BadUrl(shown.to_string());
    let (scheme, rest) = input.split_once("://").ok_or_else(bad)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "ws" | "http" => "ws",
        "wss" | "https" => "wss",
        _ => return Err(bad()),
    };
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(CONNECT_PATH).unwrap_or(rest);
    if rest.contains(' ') || !valid_authority(rest.split(['/', '?', '#']).next().unwrap_or_default()) {
        return Err(bad());
    }
    if let Some(at) = shown.find(['?', '#']) {
        // Shown without it: a token put there is no less a secret.
        let (before, after) = shown.split_at(at);
        let mark = after.chars().next().unwrap_or('?');
        return Err(ConnectError::QueryInUrl(format!("{before}{mark}…")));
    }
    Ok(format!("{scheme}://{rest}{CONNECT_PATH}"))
}

/// Whether `authority` is a host with, if any, a port from 1 to 65535. A
/// port past it would otherwise be dropped on the way to the socket, and
/// the client would knock, token and all, on port 80 or 443.
fn valid_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((v6, "")) => (v6, None),
            Some((v6, rest)) => match rest.strip_prefix(':') {
                Some(port) => (v6, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|n| n > 0));
    !host.is_empty() && port_ok
}

/// The tunnel `name` by path on the relay at `connect_url` (as
/// [`relay_url`] makes it): `ws://relay:8080/_portpreview/connect` gives
/// `http://relay:8080/t/<name>`.
pub fn path_url(connect_url: &str, name: &str) -> Option<String> {
    let (scheme, rest) = connect_url.split_once("://")?;
    let scheme = match scheme {
        "ws" => "http",
        "wss" => "https",
        _ => return None,
    };
    let base = rest.strip_suffix(CONNECT_PATH)?;
    Some(format!("{scheme}://{base}/t/{name}"))
}
