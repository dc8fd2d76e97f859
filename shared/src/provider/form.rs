//! `application/x-www-form-urlencoded` bodies, as Twilio (and Slack slash
//! commands) send them.

/// Decoded name/value pairs in body order; `None` when the body cannot be a
/// form (not UTF-8, or JSON-looking).
pub(crate) fn parse(body: &[u8]) -> Option<Vec<(String, String)>> {
    let text = std::str::from_utf8(body).ok()?;
    let trimmed = text.trim_start();
    if trimmed.is_empty() || trimmed.starts_with(['{', '[']) {
        return None;
    }
    let pairs = text
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            (decode(name), decode(value))
        })
        .collect();
    Some(pairs)
}

/// The first value of `name` in a parsed form.
pub(crate) fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// Percent-decodes one form component (`+` is a space).
fn decode(part: &str) -> String {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => match bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(decoded) => {
                    out.push(decoded);
                    i += 3;
                    continue;
                }
                None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes a form value: every byte but the unreserved ones
/// (letters, digits, `-._~`) as `%XX`.
pub(crate) fn encode(value: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Replaces the value of every `name=` pair whose value is `old` with `new`
/// (an unreserved string), leaving the other bytes untouched.
pub(crate) fn replace_value(body: &[u8], name: &str, old: &str, new: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut changed = false;
    let parts: Vec<String> = text
        .split('&')
        .map(|part| match part.split_once('=') {
            Some((n, v)) if decode(n) == name && decode(v) == old => {
                changed = true;
                format!("{n}={new}")
            }
            _ => part.to_owned(),
        })
        .collect();
    changed.then(|| parts.join("&").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_plus_and_percent() {
        let pairs = parse(b"To=%2B18005551212&Body=hi+there&Bad=%zz&Flag").unwrap();
        assert_eq!(value(&pairs, "To"), Some("+18005551212"));
        assert_eq!(value(&pairs, "Body"), Some("hi there"));
        assert_eq!(value(&pairs, "Bad"), Some("%zz"));
        assert_eq!(value(&pairs, "Flag"), Some(""));
        assert_eq!(parse(br#"{"a":1}"#), None);
    }

    #[test]
    fn replaces_matching_values_only() {
        let body = b"MessageSid=SM1&SmsSid=SM1&AccountSid=AC1";
        let out = replace_value(body, "SmsSid", "SM1", "SM2").unwrap();
        assert_eq!(out, b"MessageSid=SM1&SmsSid=SM2&AccountSid=AC1");
        assert_eq!(replace_value(body, "Nope", "SM1", "SM2"), None);
    }
}
