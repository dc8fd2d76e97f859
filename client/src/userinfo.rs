//! The user and password a URL may carry, hidden before the URL is shown:
//! an address pasted with credentials must not reach a terminal, a CI log
//! or an error report.

use std::borrow::Cow;

/// `url` with any `user:password@` before its host replaced by `***@`.
/// A password pasted unencoded may hold `/`, `?` or `#`, which would end
/// the host in a URL: text before an `@` is taken as credentials when it
/// holds none of them, or when what follows its first `:` up to one is no
/// port (`host:3000/@x` is a path).
pub fn hidden(url: &str) -> Cow<'_, str> {
    let start = url.find("://").map_or(0, |at| at + "://".len());
    let rest = &url[start..];
    let credentials = rest
        .match_indices('@')
        .map(|(at, _)| at)
        .rev()
        .find(|&at| is_credentials(&rest[..at]));
    match credentials {
        Some(at) => Cow::Owned(format!("{}***{}", &url[..start], &rest[at..])),
        None => Cow::Borrowed(url),
    }
}

fn is_credentials(before_at: &str) -> bool {
    let Some(delimiter) = before_at.find(['/', '?', '#']) else {
        return true;
    };
    match before_at[..delimiter].split_once(':') {
        Some((_, port)) => port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()),
        None => false,
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
        assert_eq!(hidden("https://u:S3cr3t/Pw@relay.test:1"), "https://***@relay.test:1");
        assert_eq!(hidden("http://bob:pa#SS?w@127.0.0.1:9/x"), "http://***@127.0.0.1:9/x");
        assert_eq!(hidden("u:p/w@localhost:3000"), "***@localhost:3000");
        assert_eq!(hidden("http://localhost:3000/a@b"), "http://localhost:3000/a@b");
        assert_eq!(hidden("http://u@h/x@y"), "http://***@h/x@y");
    }
}
