//! `export --format curl`: a self-contained shell command that sends the
//! recorded request again, byte for byte.
//!
//! The body goes through `printf` with octal escapes piped into
//! `curl --data-binary @-`, so any bytes survive (NUL included) and nothing
//! unsafe reaches the terminal that shows the command. It runs in any POSIX
//! shell.
//!
//! curl rewrites some paths it is given in a URL: it percent-encodes bytes
//! past ASCII, cuts at `#`, and refuses spaces and control characters. Such
//! a path goes in `--request-target`, which curl sends as it is, with the
//! URL giving only scheme, host and port.

use std::fmt::Write;

use portpreview_shared::Header;

use crate::replay::attempt::Endpoint;
use crate::store::NewDelivery;
use crate::target::Scheme;

/// The shell command that sends `d` to `path` at `endpoint` (aimed by
/// [`crate::replay::plan::resolve_target`], as a replay would be).
pub fn command(d: &NewDelivery, endpoint: &Endpoint, path: &str) -> String {
    let mut args: Vec<String> = vec!["curl -sS --globoff --path-as-is".into()];
    if d.method.eq_ignore_ascii_case("HEAD") {
        args.push("--head".into());
    } else {
        args.push(format!("-X {}", quote(d.method.as_bytes())));
    }
    // PortPreview does not verify a loopback handler's certificate (local
    // ones are self-signed), and the command must reach the same handler.
    if endpoint.scheme == Scheme::Https && portpreview_shared::host::is_loopback(&endpoint.host) {
        args.push("--insecure".into());
    }
    if curl_keeps(path) {
        args.push(quote(endpoint.url(path).as_bytes()));
    } else {
        args.push(format!("--request-target {}", quote(path.as_bytes())));
        args.push(quote(endpoint.url("").as_bytes()));
    }
    for h in copied_headers(&d.request_headers, d.host_preserved) {
        let mut line = h.name.as_bytes().to_vec();
        if h.value.is_empty() {
            // curl reads `name:` as "send no such header"; `name;` sends it empty.
            line.push(b';');
        } else {
            line.extend_from_slice(b": ");
            line.extend_from_slice(&h.value);
        }
        args.push(format!("-H {}", quote(&line)));
    }
    let has = |name: &str| d.request_headers.iter().any(|h| h.name.eq_ignore_ascii_case(name));
    // curl adds these by itself; an empty value stops it, so the handler
    // sees only the headers the provider sent.
    for (name, curl_default) in [("accept", "Accept:"), ("user-agent", "User-Agent:")] {
        if !has(name) {
            args.push(format!("-H '{curl_default}'"));
        }
    }
    let sends_body = crate::replay::attempt::carries_body(&d.method, &d.request_body);
    if sends_body {
        if !has("content-type") {
            args.push("-H 'Content-Type:'".into());
        }
        // A recorded `Expect: 100-continue` is sent, as the tunnel and a
        // replay send it, but not waited on: curl would wait a second for
        // an interim answer the handler may never give. Without one, curl
        // must not add its own (it does past 1 MiB).
        if has("expect") {
            args.push("--expect100-timeout 0.001".into());
        } else {
            args.push("-H 'Expect:'".into());
        }
        args.push("--data-binary @-".into());
    }
    let curl = args.join(" \\\n  ");
    if !sends_body {
        return format!("{curl}\n");
    }
    format!("printf '{}' \\\n| {curl}\n", printf_format(&d.request_body))
}

/// One shell word for `bytes`: single-quoted when it is safe text, else a
/// `printf` substitution that rebuilds every byte.
pub fn quote(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.is_empty() && !risky_text(text) => format!("'{}'", text.replace('\'', r"'\''")),
        _ => format!("\"$(printf '{}')\"", printf_format(bytes)),
    }
}

/// A `printf` format that prints exactly `bytes`: `%` and `\` doubled, and
/// every byte that is not safe text (or is a combining mark past the few
/// the sanitiser keeps on one letter) written as a three-digit octal escape.
pub fn printf_format(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 16);
    let emit_octal = |out: &mut String, byte: u8| {
        let _ = write!(out, "\\{byte:03o}");
    };
    let mut pile = portpreview_shared::sanitize::Pile::default();
    for (i, chunk) in bytes.utf8_chunks().enumerate() {
        for (j, c) in chunk.valid().char_indices() {
            let first = i == 0 && j == 0;
            let piled = pile.piles_up(c);
            match c {
                '%' => out.push_str("%%"),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push('\n'),
                '\'' => emit_octal(&mut out, b'\''),
                // A leading `-` would read as an option to printf.
                '-' if first => emit_octal(&mut out, b'-'),
                // A pile of marks would smear over the lines around it.
                c if risky(c) || piled => {
                    let mut buf = [0; 4];
                    for &b in c.encode_utf8(&mut buf).as_bytes() {
                        emit_octal(&mut out, b);
                    }
                }
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            emit_octal(&mut out, b);
        }
    }
    out
}

/// Whether curl sends `path` as given when it is part of the URL (with
/// `--globoff --path-as-is`): a path of the characters RFC 3986 allows in
/// a path and query, `[` and `]` included.
fn curl_keeps(path: &str) -> bool {
    path.starts_with('/')
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%[]".contains(&b))
}

/// Characters never written raw: controls (they would act on the terminal
/// showing the command), bidi controls and invisible characters (they
/// would disguise it). `printf` rebuilds them, emoji joiners included.
fn risky(c: char) -> bool {
    portpreview_shared::sanitize::is_hidden_or_control(c)
}

/// True when `text` holds a risky character, or marks piled on one letter
/// past what a terminal draws in place.
fn risky_text(text: &str) -> bool {
    let mut pile = portpreview_shared::sanitize::Pile::default();
    text.chars().any(|c| pile.piles_up(c) || risky(c))
}

/// The headers the command sends: what a replay would send (hop-by-hop
/// ones and those `Connection` names left out, `Content-Length` left to
/// curl, and `Host` too unless the handler got the caller's), so the two
/// never disagree.
pub fn copied_headers(recorded: &[Header], host_preserved: bool) -> Vec<Header> {
    let mut headers = recorded.to_vec();
    crate::replay::attempt::strip_unreplayable(&mut headers, host_preserved);
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            scheme: crate::target::Scheme::Http,
            host: "127.0.0.1".into(),
            port: 1,
        }
    }

    fn run_sh(script: &str) -> Vec<u8> {
        let out = std::process::Command::new("sh").arg("-c").arg(script).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    #[test]
    fn printf_rebuilds_every_byte() {
        let all: Vec<u8> = (0..=255u8).chain(*b"-%s\\n'\"$(x)`\n").collect();
        assert_eq!(run_sh(&format!("printf '{}'", printf_format(&all))), all);
        let text = "-{\"a\":\"b c\"}\nπ 100% \u{202e} \u{200b}\u{feff}\u{e0041}".as_bytes();
        assert_eq!(run_sh(&format!("printf '{}'", printf_format(text))), text);
        let format = printf_format(text);
        assert!(
            !format
                .chars()
                .any(|c| c != '\n' && portpreview_shared::sanitize::is_hidden_or_control(c)),
            "invisible characters are written as escapes: {format:?}"
        );
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        let piled = "evt_a\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}";
        for word in [&b"it's $HOME `x`"[..], b"x-raw: \xff\x01", b"-n", piled.as_bytes()] {
            assert_eq!(run_sh(&format!("printf '%s' {}", quote(word))), word);
        }
        // Marks piled on one letter are rebuilt by printf, not drawn.
        assert!(
            quote(piled.as_bytes()).starts_with("\"$(printf"),
            "{}",
            quote(piled.as_bytes())
        );
    }

    #[test]
    fn the_command_leaves_out_what_a_replay_leaves_out() {
        let d = NewDelivery {
            method: "POST".into(),
            path: "/h".into(),
            request_headers: vec![
                Header::new("Connection", "close, X-Trace"),
                Header::new("x-trace", "abc"),
                Header::new("keep-alive", "timeout=5"),
                Header::new("expect", "100-continue"),
                Header::new("stripe-signature", "t=1,v1=ab"),
            ],
            request_body: b"{}".to_vec(),
            ..NewDelivery::default()
        };
        let cmd = command(&d, &endpoint(), "/h");
        assert!(!cmd.to_ascii_lowercase().contains("x-trace"), "{cmd}");
        assert!(!cmd.to_ascii_lowercase().contains("keep-alive"), "{cmd}");
        assert!(cmd.contains("-H 'stripe-signature: t=1,v1=ab'"), "{cmd}");
        assert!(
            cmd.contains("-H 'expect: 100-continue'") && cmd.contains("--expect100-timeout 0.001"),
            "the recorded Expect is sent, and curl is told not to wait for a 100: {cmd}"
        );
        let without = NewDelivery {
            request_headers: vec![Header::new("content-type", "application/json")],
            ..d
        };
        assert!(
            command(&without, &endpoint(), "/h").contains("-H 'Expect:'"),
            "curl adds none of its own"
        );
    }

    #[test]
    fn a_pile_of_marks_is_rebuilt_by_printf_not_printed() {
        let text = format!("a{}b", "\u{301}".repeat(8));
        let format = printf_format(text.as_bytes());
        assert_eq!(
            format.matches('\u{301}').count(),
            3,
            "as many as the sanitiser keeps: {format}"
        );
        assert_eq!(run_sh(&format!("printf '{format}'")), text.as_bytes());
    }

    #[test]
    fn the_command_is_safe_to_print() {
        let d = NewDelivery {
            method: "POST".into(),
            path: "/h".into(),
            request_headers: vec![Header::new("host", "x"), Header::new("x-esc", "\x1b[2J")],
            request_body: b"\x1b]0;title\x07".to_vec(),
            ..NewDelivery::default()
        };
        let cmd = command(&d, &endpoint(), "/h");
        assert!(!cmd.chars().any(|c| c.is_control() && c != '\n'), "{cmd}");
        assert!(!cmd.contains("-H 'host"), "{cmd}");
        assert!(
            cmd.contains("-H 'Content-Type:'") && cmd.contains("--data-binary @-"),
            "{cmd}"
        );
    }

    #[test]
    fn an_https_loopback_target_is_reached_without_checking_its_certificate() {
        let d = NewDelivery {
            method: "POST".into(),
            ..NewDelivery::default()
        };
        for host in ["localhost", "127.0.0.1", "::1"] {
            let local = Endpoint {
                scheme: Scheme::Https,
                host: host.into(),
                port: 8443,
            };
            let cmd = command(&d, &local, "/hook");
            assert!(cmd.contains("--insecure"), "{cmd}");
            assert!(cmd.contains(&format!("'{}'", local.url("/hook"))), "{cmd}");
            assert!(cmd.contains("'https://"), "{cmd}");
        }
        let remote = Endpoint {
            scheme: Scheme::Https,
            host: "hooks.example.test".into(),
            port: 443,
        };
        let cmd = command(&d, &remote, "/hook");
        assert!(
            !cmd.contains("--insecure") && cmd.contains("'https://hooks.example.test:443/hook'"),
            "{cmd}"
        );
        assert!(!command(&d, &endpoint(), "/hook").contains("--insecure"), "plain HTTP");
    }

    #[test]
    fn a_path_curl_would_rewrite_goes_in_request_target() {
        let d = NewDelivery {
            method: "POST".into(),
            ..NewDelivery::default()
        };
        let plain = command(&d, &endpoint(), "/hooks/it's?a=[1]&b=$HOME%20");
        assert!(
            plain.contains("'http://127.0.0.1:1/hooks/it'\\''s?a=[1]&b=$HOME%20'"),
            "{plain}"
        );
        assert!(!plain.contains("--request-target"), "{plain}");
        for path in [
            "/p\u{9b}31m/\u{202e}?q=\u{9b}",
            "/caf\u{e9}",
            "/a b",
            "/a#b",
            "/a\\b",
            "/a{b}",
            "*",
        ] {
            let cmd = command(&d, &endpoint(), path);
            assert!(cmd.contains("'http://127.0.0.1:1' \\\n"), "{path:?}: {cmd}");
            let target = cmd
                .split("--request-target ")
                .nth(1)
                .and_then(|rest| rest.split(" \\\n").next())
                .unwrap_or_else(|| panic!("{path:?}: {cmd}"));
            assert_eq!(run_sh(&format!("printf '%s' {target}")), path.as_bytes(), "{cmd}");
        }
    }
}
