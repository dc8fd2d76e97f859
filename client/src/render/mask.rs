//! Secrets in headers, and in query strings: masked on screen and in HAR
//! unless `--reveal`.
//!
//! The store keeps every header as received, so replays stay exact; only
//! what is shown is masked.

use std::borrow::Cow;
use std::fmt::Write;

use portpreview_shared::sanitize::escape_runs;
use portpreview_shared::Header;

/// What a masked value shows instead of the secret.
pub const MASK: &str = "••••••";

/// True when the header carries a credential or a signature.
pub fn is_sensitive(name: &str) -> bool {
    portpreview_shared::provider::is_sensitive_header(name)
}

/// The value to show: masked when sensitive and not revealed. An
/// `Authorization` keeps its scheme (`Bearer ••••••`), which helps debugging
/// and gives nothing away.
pub fn shown_value(header: &Header, reveal: bool) -> Cow<'_, [u8]> {
    if reveal || !is_sensitive(&header.name) {
        return Cow::Borrowed(&header.value);
    }
    let scheme = header
        .name
        .eq_ignore_ascii_case("authorization")
        .then(|| header.value.split(|&b| b == b' ').next())
        .flatten()
        .filter(|scheme| scheme.len() < header.value.len() && scheme.iter().all(u8::is_ascii_alphabetic));
    if let Some(scheme) = scheme {
        return Cow::Owned([scheme, b" ", MASK.as_bytes()].concat());
    }
    if header.name.to_ascii_lowercase().contains("signature") {
        if let Some(timed) = signing_time_kept(&header.value) {
            return Cow::Owned(timed);
        }
    }
    Cow::Owned(MASK.as_bytes().to_vec())
}

/// A signature that carries when it was made (Stripe's `t=1700000000,v1=…`,
/// Paddle's `ts=1700000000;h1=…`) with that time kept and every other part
/// masked: the time is the usual reason a replay is refused, and it signs
/// nothing. `None` when the value names no such time.
fn signing_time_kept(value: &[u8]) -> Option<Vec<u8>> {
    // What names a part (`v1`, `h1`), as opposed to the start of a secret
    // that holds `=` itself (base64 padding).
    let is_label = |name: &[u8]| {
        (1..=3).contains(&name.len())
            && name[0].is_ascii_lowercase()
            && name.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    let is_time = |part: &[u8]| {
        let digits = part.strip_prefix(b"t=").or_else(|| part.strip_prefix(b"ts="));
        digits.is_some_and(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
    };
    // Each part with the separator after it, if any; spaces before a part
    // are kept as they came.
    let parts: Vec<(&[u8], &[u8])> = value
        .split_inclusive(|&b| b == b',' || b == b';')
        .map(|part| match part.split_last() {
            Some((b',' | b';', text)) => (text, &part[text.len()..]),
            _ => (part, &[][..]),
        })
        .collect();
    if !parts.iter().any(|(text, _)| is_time(text.trim_ascii_start())) {
        return None;
    }
    let mut shown = Vec::with_capacity(value.len());
    for (text, separator) in parts {
        let part = text.trim_ascii_start();
        shown.extend_from_slice(&text[..text.len() - part.len()]);
        match part.iter().position(|&b| b == b'=') {
            _ if is_time(part) => shown.extend_from_slice(part),
            Some(at) if is_label(&part[..at]) => shown.extend_from_slice(&[&part[..=at], MASK.as_bytes()].concat()),
            _ => shown.extend_from_slice(MASK.as_bytes()),
        }
        shown.extend_from_slice(separator);
    }
    Some(shown)
}

/// A path and query as shown: the values of query parameters named like
/// credentials (`?token=…`, `api_key`, `sig`…) masked unless `reveal`.
/// Senders that cannot set a header carry their secret in the URL, and a
/// URL is on screen more often than any header.
pub fn shown_path(path: &str, reveal: bool) -> Cow<'_, str> {
    let Some((route, query)) = path.split_once('?') else {
        return Cow::Borrowed(path);
    };
    // Pairs end at `&`, or at `;` as some frameworks read them too.
    let pairs = || query.split_inclusive(['&', ';']);
    if reveal || !pairs().any(|pair| masks(pair).is_some()) {
        return Cow::Borrowed(path);
    }
    let mut shown = format!("{route}?");
    for pair in pairs() {
        match masks(pair) {
            Some(name) => {
                let separator = pair.strip_suffix(['&', ';']).map_or("", |rest| &pair[rest.len()..]);
                shown.push_str(&format!("{name}={MASK}{separator}"));
            }
            None => shown.push_str(pair),
        }
    }
    Cow::Owned(shown)
}

/// The name of a query pair `name=value` (its separator may follow) whose
/// value is a credential. A name is read as the handler will read it,
/// percent-decoded: `%74oken` is `token`.
fn masks(pair: &str) -> Option<&str> {
    let (name, value) = pair.split_once('=')?;
    let value = value.trim_end_matches(['&', ';']);
    let decoded = percent_decoded(name).to_ascii_lowercase();
    let credential = is_sensitive(&decoded) || matches!(decoded.as_str(), "key" | "sig" | "auth" | "pass" | "pwd");
    (credential && !value.is_empty()).then_some(name)
}

/// `text` with each `%XX` escape decoded; bytes that are not UTF-8 once
/// decoded are replaced (they match no name).
pub(super) fn percent_decoded(text: &str) -> Cow<'_, str> {
    match percent_decoded_bytes(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
    }
}

/// `text` with each `%XX` escape decoded, as the bytes they stand for.
pub(super) fn percent_decoded_bytes(text: &str) -> Cow<'_, [u8]> {
    if !text.contains('%') {
        return Cow::Borrowed(text.as_bytes());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// Header value bytes as one terminal-safe line: escaped text, with any
/// byte that is not UTF-8 shown as `\xNN`.
pub fn escape_value(bytes: &[u8]) -> String {
    value_runs(bytes).iter().map(|(run, _)| run.as_ref()).collect()
}

/// [`escape_value`] in runs, as [`escape_runs`] gives them: `(text, false)`
/// kept as it came, `(escapes, true)` standing for what it hides, bytes
/// that are not UTF-8 among them. For a display that shows escapes apart.
pub fn value_runs(bytes: &[u8]) -> Vec<(Cow<'_, str>, bool)> {
    let mut runs = Vec::new();
    for chunk in bytes.utf8_chunks() {
        let text = escape_runs(chunk.valid(), false);
        runs.extend(text.into_iter().filter(|(run, _)| !run.is_empty()));
        if !chunk.invalid().is_empty() {
            let mut hex = String::with_capacity(4 * chunk.invalid().len());
            for b in chunk.invalid() {
                let _ = write!(hex, "\\x{b:02x}");
            }
            runs.push((Cow::Owned(hex), true));
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_query_string_are_masked_and_the_rest_kept() {
        assert_eq!(
            shown_path("/hooks?token=s3cr3t&shop=a&api_key=k1&key=k2&sig=ab&x-token=&jwt=e.y.j&signing_key=k3&client_assertion=e.y.j", false),
            format!("/hooks?token={MASK}&shop=a&api_key={MASK}&key={MASK}&sig={MASK}&x-token=&jwt={MASK}&signing_key={MASK}&client_assertion={MASK}")
        );
        assert_eq!(
            shown_path("/hooks?Access_Token=t&page=2", false),
            format!("/hooks?Access_Token={MASK}&page=2")
        );
        // As a handler reads them: names percent-decoded, `;` a separator too.
        assert_eq!(
            shown_path("/h?%74oken=t&api%5Fkey=k&k%65y=x&page=1", false),
            format!("/h?%74oken={MASK}&api%5Fkey={MASK}&k%65y={MASK}&page=1")
        );
        assert_eq!(
            shown_path("/h?token=a;key=b;page=3", false),
            format!("/h?token={MASK};key={MASK};page=3")
        );
        assert_eq!(
            shown_path("/h?%zz=1&%=2&key=3", false),
            format!("/h?%zz=1&%=2&key={MASK}")
        );
        for kept in [
            "/hooks",
            "/hooks?page=2&sort=id",
            "/hooks?token",
            "/token/abc?monkey=1",
            "/h?token=&page=1",
        ] {
            assert!(matches!(shown_path(kept, false), Cow::Borrowed(_)), "{kept}");
        }
        assert_eq!(shown_path("/hooks?token=s3cr3t", true), "/hooks?token=s3cr3t");
    }

    fn shown(name: &str, value: &str, reveal: bool) -> String {
        String::from_utf8(shown_value(&Header::new(name, value), reveal).into_owned()).unwrap()
    }

    #[test]
    fn secrets_are_masked_unless_revealed() {
        assert_eq!(shown("Authorization", "Bearer sk_live_1", false), "Bearer ••••••");
        assert_eq!(shown("authorization", "sk_live_1", false), MASK);
        assert_eq!(shown("stripe-signature", "v1=abc", false), MASK);
        assert_eq!(shown("cookie", "session=1", false), MASK);
        assert_eq!(shown("cookie", "session=1", true), "session=1");
        assert_eq!(shown("content-type", "text/plain", false), "text/plain");
        assert_eq!(shown("X-Webhook-Secret", "s3cr3t", false), MASK);
        for invented in [
            "X-Api-Token",
            "X-Session-Token",
            "X-Amz-Security-Token",
            "X-Goog-Channel-Token",
            "X-Token",
            "X-Private-Key",
            "X-Session-Id",
            "X-Client-Credentials",
            "Cookie2",
            "X-JWT-Assertion",
            "X-Signing-Key",
            "X-Client-Assertion",
            "X-Amzn-Oidc-Data",
        ] {
            assert_eq!(shown(invented, "tok-123", false), MASK, "{invented}");
        }
        // When a signature was made helps with one that expired; it is no secret.
        assert_eq!(shown("x-signature-ed25519", "ab12", false), MASK);
        assert_eq!(shown("x-signature-timestamp", "1700000000", false), "1700000000");
        assert_eq!(
            shown("X-Twilio-Email-Event-Webhook-Timestamp", "1700000000", false),
            "1700000000"
        );
    }

    #[test]
    fn a_signature_keeps_when_it_was_made_and_masks_the_rest() {
        assert_eq!(
            shown("Stripe-Signature", "t=1700000000,v1=abc,v0=def", false),
            "t=1700000000,v1=••••••,v0=••••••"
        );
        assert_eq!(
            shown("Paddle-Signature", "ts=1700000000;h1=abc", false),
            "ts=1700000000;h1=••••••"
        );
        assert_eq!(
            shown("stripe-signature", "t=1700000000, v1=abc", false),
            "t=1700000000, v1=••••••"
        );
        // A time part that is not a number shows nothing; nor does a
        // credential that only looks like one.
        assert_eq!(shown("stripe-signature", "t=soon,v1=abc", false), MASK);
        // A part that is no `name=value` is masked whole, whatever `=` it holds.
        assert_eq!(
            shown("x-custom-signature", "t=1700000000,U0VDUkVUOUJBU0U2NA==", false),
            "t=1700000000,••••••"
        );
        assert_eq!(
            shown("stripe-signature", "t=1700000000,SECRET22=v1", false),
            "t=1700000000,••••••"
        );
        assert_eq!(shown("x-api-key", "t=1700000000", false), MASK);
        assert_eq!(shown("stripe-signature", "t=1,v1=abc", true), "t=1,v1=abc");
    }

    #[test]
    fn values_print_safely() {
        assert_eq!(escape_value(b"plain"), "plain");
        assert_eq!(escape_value(b"a\x1b[2Jb\xffc"), "a\\x1b[2Jb\\xffc");
    }
}
