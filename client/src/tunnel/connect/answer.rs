//! What answered the upgrade in place of a relay's 101, told in a line: a
//! relay's plain-text reason as it came, a proxy's error page by its title
//! or its status alone.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::shorten;
use tokio_tungstenite::tungstenite::http::{header, Response, StatusCode};

/// The longest reason told as it came; every one a relay gives is shorter.
const MAX_REASON: usize = 300;

/// The longest page title told.
const MAX_TITLE: usize = 80;

/// An answer to the upgrade, as the client read it.
pub type Answer = Response<Option<Vec<u8>>>;

/// The reason in the answer's body, escaped, when it is what a relay gives:
/// one short line of plain text that says more than the status.
pub fn plain_reason(response: &Answer) -> Option<String> {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/plain"));
    let body = String::from_utf8_lossy(response.body().as_deref()?);
    let reason = body.trim();
    let one_line = !reason.is_empty() && !reason.contains(['\n', '\r']) && reason.chars().count() <= MAX_REASON;
    (plain && one_line && !repeats_status(reason, response.status())).then(|| escape_str(reason).into_owned())
}

/// The answer in a few words: its status, then the relay's reason or the
/// title of the page that came instead (a proxy's error page), if it says
/// more than the status.
pub fn told(response: &Answer) -> String {
    let status = response.status();
    if let Some(reason) = plain_reason(response) {
        return format!("{status}: {reason}");
    }
    match page_title(response) {
        Some(title) => format!("{status}, a page titled \"{title}\""),
        None => status.to_string(),
    }
}

/// The `<title>` of an HTML page in the body, on one line, escaped and cut
/// short, unless it only repeats the status (nginx's "502 Bad Gateway").
fn page_title(response: &Answer) -> Option<String> {
    let body = String::from_utf8_lossy(response.body().as_deref()?);
    // ASCII lowercasing keeps every byte where it was.
    let lower = body.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = body[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty() && !repeats_status(&title, response.status())).then(|| shorten(&escape_str(&title), MAX_TITLE))
}

/// Whether `text` says only what `status` does: "Bad Gateway", "502 Bad Gateway".
fn repeats_status(text: &str, status: StatusCode) -> bool {
    text.eq_ignore_ascii_case(&status.to_string())
        || status.canonical_reason().is_some_and(|r| text.eq_ignore_ascii_case(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, content_type: Option<&str>, body: &str) -> Answer {
        let mut builder = Response::builder().status(status);
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        builder.body(Some(body.as_bytes().to_vec())).expect("response")
    }

    #[test]
    fn a_relays_reason_is_told_as_it_came() {
        let relay = answer(
            503,
            Some("text/plain; charset=utf-8"),
            "too many connections to the relay: try again shortly\n",
        );
        assert_eq!(
            told(&relay),
            "503 Service Unavailable: too many connections to the relay: try again shortly"
        );
    }

    /// nginx's own 502 page, as a proxy in front of a relay that is down
    /// answers the upgrade.
    #[test]
    fn a_proxys_error_page_is_told_by_its_status_or_title() {
        let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad \
                     Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n";
        assert_eq!(told(&answer(502, Some("text/html"), nginx)), "502 Bad Gateway");
        let maintenance = "<!DOCTYPE html><html><head>\n<TITLE lang=en>\n  Down for\n maintenance\x1b[2J </TITLE>";
        assert_eq!(
            told(&answer(503, Some("text/html; charset=utf-8"), maintenance)),
            "503 Service Unavailable, a page titled \"Down for maintenance\\x1b[2J\""
        );
        let long = format!("<title>{}</title>", "x".repeat(500));
        assert!(told(&answer(502, Some("text/html"), &long)).len() < 120);
        // Traefik's plain-text "Bad Gateway" says nothing the status does not.
        assert_eq!(
            told(&answer(502, Some("text/plain; charset=utf-8"), "Bad Gateway")),
            "502 Bad Gateway"
        );
        assert_eq!(told(&answer(504, None, "")), "504 Gateway Timeout");
        let lines = "upstream failed\nretry later\n";
        assert_eq!(told(&answer(502, Some("text/plain"), lines)), "502 Bad Gateway");
        assert_eq!(
            told(&answer(502, Some("text/plain"), &"y".repeat(400))),
            "502 Bad Gateway"
        );
    }
}
