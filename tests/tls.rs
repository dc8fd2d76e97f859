//! A relay serving HTTPS and WSS with a self-signed certificate, a client that
//! trusts it through `--ca-cert`, and a caller that reaches the local handler
//! over TLS.

mod common;

use std::sync::Arc;

use common::caller;
use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn a_webhook_travels_over_tls_end_to_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
    let (relay, cert_path) = tls_relay(dir.path(), &cert.cert.pem(), &cert.key_pair.serialize_pem()).await;
    let handler = LocalHandler::echo().await;
    let relay_url = format!("https://localhost:{}", relay.addr.port());

    let untrusted = TestTunnel::start_with(
        &relay_url,
        &handler.url(),
        TunnelOptions {
            tls: Some(portpreview::tunnel::connect::tls_config(None).expect("default roots")),
            ..TunnelOptions::default()
        },
    )
    .await;
    match untrusted {
        Err(err @ portpreview::tunnel::ConnectError::Certificate(_)) => {
            let said = err.to_string();
            assert!(
                said.starts_with(
                    "the relay's certificate was refused: it is signed by a CA this machine does not trust"
                ),
                "{said}"
            );
            assert!(said.contains("pass --ca-cert FILE"), "the way out is named: {said}");
        }
        Err(other) => panic!("expected a TLS error, got {other}"),
        Ok(_) => panic!("a self-signed relay is refused without --ca-cert"),
    }

    let tls = portpreview::tunnel::connect::tls_config(Some(&cert_path)).expect("trust the relay's CA");
    let tunnel = TestTunnel::start_with(
        &relay_url,
        &handler.url(),
        TunnelOptions {
            tls: Some(tls.clone()),
            ..TunnelOptions::default()
        },
    )
    .await
    .expect("tunnel over wss");
    assert!(
        tunnel.public_url.starts_with("https://localhost:"),
        "{}",
        tunnel.public_url
    );

    let path = format!("/t/{}/secure", tunnel.name());
    let answer = https_post(tls, relay.addr.port(), &path, b"{\"over\":\"tls\"}").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("{\"over\":\"tls\"}"), "{answer}");
    let seen = &handler.requests()[0];
    assert_eq!(seen.header("x-forwarded-proto").as_deref(), Some("https"));
}

/// A relay serving TLS with `cert` and `key` (PEM), written into `dir`;
/// the relay and its certificate's file.
async fn tls_relay(dir: &std::path::Path, cert: &str, key: &str) -> (TestRelay, std::path::PathBuf) {
    let cert_path = dir.join("relay.pem");
    let key_path = dir.join("relay.key");
    std::fs::write(&cert_path, cert).expect("write cert");
    std::fs::write(&key_path, key).expect("write key");
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        tls: Some(portpreview_server::load_tls(&cert_path, &key_path).expect("load TLS")),
        ..Default::default()
    })
    .await;
    (relay, cert_path)
}

/// A self-signed certificate marked as a CA, as `openssl req -x509` makes
/// one, for `localhost`; its PEM and its key's.
fn ca_marked_self_signed() -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("self-signed");
    (cert.pem(), key.serialize_pem())
}

/// A self-signed certificate for `localhost` that is no CA, as a relay's
/// own is; its PEM and its key's. Every one has the same subject.
fn plain_self_signed() -> (String, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed");
    (cert.cert.pem(), cert.key_pair.serialize_pem())
}

/// A relay whose self-signed certificate was made again, the client given
/// the old copy: the issuer's name matches, its key does not. The user is
/// told the file is the wrong one, not rustls's "BadSignature".
#[tokio::test]
async fn an_old_copy_of_a_remade_self_signed_certificate_is_named_as_the_wrong_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = plain_self_signed();
    let (relay, _) = tls_relay(dir.path(), &cert, &key).await;
    let handler = LocalHandler::echo().await;
    let old_path = dir.path().join("old.pem");
    std::fs::write(&old_path, plain_self_signed().0).expect("write the old copy");
    let old = portpreview::tunnel::connect::tls_config(Some(&old_path)).expect("load the old copy");
    let started = TestTunnel::start_with(
        &format!("https://localhost:{}", relay.addr.port()),
        &handler.url(),
        TunnelOptions {
            tls: Some(old),
            ..TunnelOptions::default()
        },
    )
    .await;
    match started {
        Err(err @ portpreview::tunnel::ConnectError::Certificate(_)) => assert!(
            err.to_string().starts_with(&format!(
                "the relay's certificate was refused: it is not the certificate given with --ca-cert {}, nor \
                 signed by it",
                old_path.display()
            )),
            "{err}"
        ),
        Err(other) => panic!("expected a certificate error, got {other}"),
        Ok(_) => panic!("an old copy of the certificate stood in for the relay's"),
    }
}

#[tokio::test]
async fn a_self_signed_certificate_marked_as_a_ca_is_trusted_as_itself() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = ca_marked_self_signed();
    let (relay, cert_path) = tls_relay(dir.path(), &cert, &key).await;
    let handler = LocalHandler::echo().await;
    let relay_url = format!("https://localhost:{}", relay.addr.port());
    let handler_url = handler.url();
    let start = |tls| {
        TestTunnel::start_with(
            &relay_url,
            &handler_url,
            TunnelOptions {
                tls: Some(tls),
                ..TunnelOptions::default()
            },
        )
    };

    // Another certificate of the same kind is no stand-in for the relay's.
    let other_path = dir.path().join("other.pem");
    std::fs::write(&other_path, ca_marked_self_signed().0).expect("write other cert");
    let other = portpreview::tunnel::connect::tls_config(Some(&other_path)).expect("load other");
    match start(other).await {
        Err(err @ portpreview::tunnel::ConnectError::Certificate(_)) => assert_eq!(
            err.to_string(),
            format!(
                "the relay's certificate was refused: it is not the certificate given with --ca-cert {}, nor \
                 signed by it: check that the file holds the relay's current certificate, or the certificate of \
                 the CA that signed it",
                other_path.display()
            ),
            "only the relay's own certificate is trusted as itself, and the user is told the file is the wrong one"
        ),
        Err(other) => panic!("expected a certificate error, got {other}"),
        Ok(_) => panic!("another CA-marked certificate stood in for the relay's"),
    }
    // Without it, the user is told what kind of certificate it is, in words.
    let untrusted = start(portpreview::tunnel::connect::tls_config(None).expect("default roots")).await;
    match untrusted {
        Err(err @ portpreview::tunnel::ConnectError::Certificate(_)) => assert_eq!(
            err.to_string(),
            "the relay's certificate was refused: it is a CA certificate (as `openssl req -x509` makes), which \
             servers may not present; pass it with --ca-cert FILE to trust it as it is"
        ),
        Err(other) => panic!("expected a certificate error, got {other}"),
        Ok(_) => panic!("a CA certificate is refused without --ca-cert"),
    }

    let tls = portpreview::tunnel::connect::tls_config(Some(&cert_path)).expect("trust the relay's certificate");
    let tunnel = start(tls.clone())
        .await
        .expect("tunnel over wss with the relay's own certificate");
    let path = format!("/t/{}/pinned", tunnel.name());
    let answer = https_post(tls, relay.addr.port(), &path, b"{}").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_relay_reached_with_the_wrong_scheme_says_which_to_use() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
    let (tls_relay, cert_path) = tls_relay(dir.path(), &cert.cert.pem(), &cert.key_pair.serialize_pem()).await;
    let plain_relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let tls = portpreview::tunnel::connect::tls_config(Some(&cert_path)).expect("trust the relay's certificate");
    let refusal = |url: String| {
        let options = TunnelOptions {
            tls: Some(tls.clone()),
            ..TunnelOptions::default()
        };
        let handler_url = handler.url();
        async move {
            match TestTunnel::start_with(&url, &handler_url, options).await {
                Err(err @ portpreview::tunnel::ConnectError::WrongScheme { .. }) => {
                    assert!(err.is_fatal(), "no retry can help: {err}");
                    err.to_string()
                }
                Err(other) => panic!("expected the scheme to be named, got {other}"),
                Ok(_) => panic!("{url} is reached with the wrong scheme"),
            }
        }
    };

    let said = refusal(format!("https://localhost:{}", plain_relay.addr.port())).await;
    assert_eq!(
        said,
        format!(
            "wss://localhost:{}/_portpreview/connect did not answer in TLS: if the relay serves plain HTTP, give \
             --server as ws:// or http://",
            plain_relay.addr.port()
        )
    );
    let said = refusal(format!("http://localhost:{}", tls_relay.addr.port())).await;
    assert_eq!(
        said,
        format!(
            "ws://localhost:{}/_portpreview/connect answered that it serves HTTPS only: give --server as wss:// \
             or https://",
            tls_relay.addr.port()
        )
    );

    // A caller in plain HTTP is told so in HTTP, not sent a TLS alert that
    // curl reads as "HTTP/0.9".
    let reply = caller::post(&format!("http://127.0.0.1:{}/t/any/hook", tls_relay.addr.port()), "{}").await;
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (
            400,
            "this relay serves HTTPS only: use https:// (wss:// for a client's --server)\n"
        )
    );
}

async fn https_post(tls: Arc<rustls::ClientConfig>, port: u16, path: &str, body: &[u8]) -> String {
    let connector = tokio_rustls::TlsConnector::from(tls);
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    let mut stream = connector.connect(name, tcp).await.expect("TLS handshake");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body).await.expect("write body");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The binaries as a user runs them: `portpreview-server --tls-cert
/// --tls-key`, and `portpreview http --server https://… --ca-cert FILE`.
/// Without the flag the client says how to trust the relay; with it the
/// tunnel opens over wss and a caller's HTTPS request reaches the handler.
#[tokio::test]
async fn the_relay_and_client_binaries_serve_and_trust_tls_by_their_flags() {
    use common::process::Running;
    let dir = tempfile::tempdir().expect("temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
    let cert_path = dir.path().join("relay.pem");
    let key_path = dir.path().join("relay.key");
    std::fs::write(&cert_path, cert.cert.pem()).expect("write cert");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("write key");
    let (cert_arg, key_arg) = (cert_path.to_str().expect("utf-8"), key_path.to_str().expect("utf-8"));
    let mut relay = Running::start(
        &common::bin::server_bin(),
        &["--listen", "127.0.0.1:0", "--tls-cert", cert_arg, "--tls-key", key_arg],
        dir.path(),
    );
    let line = relay.line_containing("listening on").await;
    let port: u16 = line
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let server = format!("https://localhost:{port}");
    let handler = LocalHandler::echo().await;
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8");

    let refused = tokio::process::Command::new(common::bin::portpreview_bin())
        .args(["http", &handler.url(), "--server", &server, "--no-tui", "--db", db_arg])
        .env("PORTPREVIEW_CONFIG", dir.path().join("config.toml"))
        .env_remove("PORTPREVIEW_SERVER")
        .env_remove("PORTPREVIEW_TOKEN")
        .kill_on_drop(true)
        .output();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(20), refused)
        .await
        .expect("an untrusted relay is given up on at once")
        .expect("run portpreview");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("pass --ca-cert FILE"), "{said}");

    let (_client, url) = Running::tunnel_with(&handler.url(), &server, &db, dir.path(), &["--ca-cert", cert_arg]).await;
    assert!(url.starts_with(&format!("https://localhost:{port}/t/")), "{url}");
    let tls = portpreview::tunnel::connect::tls_config(Some(&cert_path)).expect("trust the relay's certificate");
    let path = url.trim_start_matches(&server).to_string();
    let answer = https_post(tls, port, &format!("{path}/hook"), b"{\"through\":\"binaries\"}").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("{\"through\":\"binaries\"}"), "{answer}");
    assert_eq!(
        handler.requests()[0].header("x-forwarded-proto").as_deref(),
        Some("https")
    );
}
