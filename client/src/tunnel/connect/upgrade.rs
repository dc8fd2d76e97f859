//! What a refused or failed WebSocket upgrade means, as a [`ConnectError`].

use std::time::Duration;

use http::StatusCode;
use portpreview_shared::text::shorten;
use tokio_tungstenite::tungstenite;

use super::{answer, pinned, ConnectError, ConnectOptions, MAX_QUOTED};

/// What the user is told when reaching the relay at `options` failed with
/// `err`: a refusal's reason and what to change, or a cause worth retrying.
pub(super) fn upgrade_error(err: tungstenite::Error, options: &ConnectOptions) -> ConnectError {
    match err {
        tungstenite::Error::Http(response) => match response.status() {
            // Without a token the fix is to get one, not to check it.
            StatusCode::UNAUTHORIZED if options.token.is_none() => ConnectError::TokenRequired,
            StatusCode::UNAUTHORIZED => ConnectError::Unauthorized,
            StatusCode::CONFLICT => match &options.name {
                Some(name) => ConnectError::NameTaken {
                    name: name.clone(),
                    why: relay_reason(&response),
                    free_in: retry_after(&response),
                },
                // A relay picks a free name when none is asked for: a 409
                // then names no name of the user's.
                None => ConnectError::Refused(format!("{} (409)", relay_reason(&response))),
            },
            // The relay's reason when it gives one (its connection cap); a
            // proxy in front may answer as well (the relay behind it down),
            // so what answered is not called the relay, and its error page
            // is told by its title.
            status if status.is_server_error() => {
                let told = format!("the server there answered {}", answer::told(&response));
                match retry_after(&response) {
                    Some(retry_in) if status == StatusCode::SERVICE_UNAVAILABLE => {
                        ConnectError::Busy { told, retry_in }
                    }
                    _ => ConnectError::Unreachable(told),
                }
            }
            // A relay switches protocols or says no; anything else that
            // answers (a web server, the handler itself) is no relay, and
            // its page says nothing about the tunnel.
            status if status.is_success() || status.is_redirection() => ConnectError::NotARelay {
                url: options.url.clone(),
                status: status.to_string(),
            },
            // The relay's own 404 for a path it does not serve: the address
            // given was not the relay's root.
            StatusCode::NOT_FOUND => ConnectError::Refused(format!(
                "{} answered 404: give --server as the relay's address, with no path but the one it is served \
                 under (none unless a proxy puts it under one)",
                options.url
            )),
            status => ConnectError::Refused(match answer::plain_reason(&response) {
                // The relay's own "expected a WebSocket upgrade" to what this
                // client sent as one: something in between dropped its headers.
                // A TLS relay's answer to a ws:// upgrade.
                Some(reason)
                    if status == StatusCode::BAD_REQUEST
                        && reason.starts_with(portpreview_shared::message::TLS_REQUIRED) =>
                {
                    return ConnectError::WrongScheme {
                        url: options.url.clone(),
                        why: "answered that it serves HTTPS only: give --server as wss:// or https://",
                    };
                }
                Some(reason)
                    if status == StatusCode::BAD_REQUEST && reason.starts_with("expected a WebSocket upgrade") =>
                {
                    format!(
                        "{reason} ({status}): a proxy in front of the relay must pass the Upgrade and Connection \
                         headers on"
                    )
                }
                Some(reason) => format!("{reason} ({status})"),
                None => format!("{} answered {}", options.url, answer::told(&response)),
            }),
        },
        tungstenite::Error::Url(e) => ConnectError::BadUrl(e.to_string()),
        tungstenite::Error::Tls(e) => ConnectError::Tls(e.to_string()),
        // rustls's verdicts arrive as I/O errors; no retry can change them.
        tungstenite::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset && tls_error(&e).is_none() => {
            ConnectError::Unreachable(CLOSED_UNANSWERED.into())
        }
        tungstenite::Error::Io(e) => match tls_error(&e) {
            Some(rustls::Error::InvalidCertificate(problem)) => ConnectError::Certificate(certificate_problem(problem)),
            Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
                ConnectError::WrongScheme {
                    url: options.url.clone(),
                    why: "did not answer in TLS: if the relay serves plain HTTP, give --server as ws:// or http://",
                }
            }
            _ => ConnectError::Unreachable(e.to_string()),
        },
        // What a TLS server sends to a plain HTTP request: no `HTTP/` at all.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(httparse::Error::Version))
            if options.url.starts_with("ws://") =>
        {
            ConnectError::WrongScheme {
                url: options.url.clone(),
                why: "did not answer in HTTP: if the relay serves TLS, give --server as wss:// or https://",
            }
        }
        // An answer in HTTP, broken further on (a header value no HTTP
        // allows): TLS is no cure for that.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(broken)) => {
            ConnectError::NotARelay {
                url: options.url.clone(),
                status: format!("in malformed HTTP ({broken})"),
            }
        }
        // Every relay speaks HTTP/1.1; an older server is something else.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::WrongHttpVersion) => ConnectError::NotARelay {
            url: options.url.clone(),
            status: "in HTTP/1.0".into(),
        },
        // Closed after the upgrade went out, with no answer at all: what
        // a proxy in front does when nothing listens behind it.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HandshakeIncomplete) => {
            ConnectError::Unreachable(CLOSED_UNANSWERED.into())
        }
        other => ConnectError::Unreachable(other.to_string()),
    }
}

/// Why an upgrade got no answer at all, its connection closed or reset
/// instead: what a proxy in front does when nothing listens behind it.
const CLOSED_UNANSWERED: &str =
    "the connection closed before any answer came: a proxy in front of a relay that is down?";

/// The wait a refusal's `Retry-After` asks for, in whole seconds as the
/// relay sends it: at least a second, so that a relay answering 0 is not
/// asked again in a loop.
fn retry_after<T>(response: &tungstenite::http::Response<T>) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.max(1)))
}

/// The rustls error inside an I/O error, if any.
fn tls_error(err: &std::io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

/// What is wrong with the relay's certificate, and what to do about it.
fn certificate_problem(problem: &rustls::CertificateError) -> String {
    if let Some(file) = pinned::not_the_given_certificate(problem) {
        let file = portpreview_shared::sanitize::escape_str(&file.display().to_string()).into_owned();
        format!(
            "it is not the certificate given with --ca-cert {file}, nor signed by it: check that the file holds \
             the relay's current certificate, or the certificate of the CA that signed it"
        )
    } else if pinned::is_ca_used_as_end_entity(problem) {
        "it is a CA certificate (as `openssl req -x509` makes), which servers may not present; pass it with \
         --ca-cert FILE to trust it as it is"
            .into()
    } else if matches!(problem, rustls::CertificateError::UnknownIssuer) {
        "it is signed by a CA this machine does not trust; pass --ca-cert FILE with the relay's certificate \
         or that of the CA that signed it"
            .into()
    } else {
        problem.to_string()
    }
}

/// The plain-text reason in a relay's refusal, escaped, on one line.
fn relay_reason(response: &tungstenite::http::Response<Option<Vec<u8>>>) -> String {
    let body = response
        .body()
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    shorten(&portpreview_shared::sanitize::escape_str(body.trim()), MAX_QUOTED)
}
