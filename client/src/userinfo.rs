//! The user and password a URL may carry, hidden before the URL is shown:
//! an address pasted with credentials must not reach a terminal, a CI log
//! or an error report.

use std::borrow::Cow;

/// `url` with any `user:password@` before its host replaced by `***@`.
pub fn hidden(url: &str) -> Cow<'_, str> {
    let start = url.find("://").map_or(0, |at| at + "://".len());
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |at| start + at);
    match url[start..authority_end].rfind('@') {
        Some(at) => Cow::Owned(format!("{}***{}", &url[..start], &url[start + at..])),
        None => Cow::Borrowed(url),
    }
}

/// True when `url` carries a user or password before its host.
pub fn present(url: &str) -> bool {
    matches!(hidden(url), Cow::Owned(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_credentials_are_hidden() {
        assert_eq!(
            hidden("https://me:pw@relay.test:8443/x"),
            "https://***@relay.test:8443/x"
        );
        assert_eq!(hidden("ws://token@relay.test"), "ws://***@relay.test");
        assert_eq!(hidden("me:p@ss@localhost:3000"), "***@localhost:3000");
        assert_eq!(hidden("http://relay.test/a@b?c=d@e"), "http://relay.test/a@b?c=d@e");
        assert_eq!(hidden("http://relay.test"), "http://relay.test");
        assert!(present("http://u@h") && !present("http://h/@"));
    }
}
