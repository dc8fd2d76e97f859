//! A relay behind a proxy: one that ends TLS in front of it, and one that
//! does not pass a WebSocket upgrade's own headers on. What a
//! misconfiguration looks like from the client, and how it is told.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};
use portpreview::events::TunnelEvent;
use portpreview_server::RelayConfig;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

/// What the client is told when TLS ends at a proxy and the relay was not
/// started with `--behind-https-proxy`.
const PLAIN_URL_WARNING: &str = "start it with --behind-https-proxy";

#[tokio::test]
async fn a_relay_behind_an_https_proxy_without_its_flag_is_warned_of_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let handler = LocalHandler::echo().await;
    let (tls, ca_cert) = proxy_tls(dir.path());

    // The misconfiguration: callers reach the proxy over HTTPS, the relay
    // names its tunnels http:// on the proxy's port.
    let relay = TestRelay::start().await;
    let proxy = Proxy::start(relay.addr, Some(tls.clone()), &[]).await;
    let mut tunnel = TestTunnel::start_with(&proxy.https_url(), &handler.url(), over_tls(&ca_cert))
        .await
        .expect("tunnel through the proxy");
    assert!(tunnel.public_url.starts_with("http://"), "{}", tunnel.public_url);
    match tunnel.next_event().await {
        TunnelEvent::Notice { text } => {
            assert!(text.contains("reached over TLS"), "{text}");
            assert!(text.contains(PLAIN_URL_WARNING), "{text}");
        }
        other => panic!("expected the warning right after the URL, got {other:?}"),
    }
    tunnel.stop().await.expect("clean stop");

    // Started with the flag: an https:// URL, nothing to warn of.
    let behind = TestRelay::with_config(RelayConfig {
        behind_https: true,
        ..RelayConfig::default()
    })
    .await;
    let proxy = Proxy::start(behind.addr, Some(tls), &[]).await;
    let tunnel = TestTunnel::start_with(&proxy.https_url(), &handler.url(), over_tls(&ca_cert))
        .await
        .expect("tunnel through the proxy");
    assert!(tunnel.public_url.starts_with("https://"), "{}", tunnel.public_url);
    assert_no_warning(tunnel, behind.addr).await;

    // A client inside the network, at the relay's plain port, gets the
    // proxy's https:// URL: as meant, and not warned of either.
    let inside = TestTunnel::start(&behind.http_url(), &handler.url()).await;
    assert!(inside.public_url.starts_with("https://"), "{}", inside.public_url);
    assert_no_warning(inside, behind.addr).await;
}

/// The first event after the tunnel's URL is a delivery, not a warning.
async fn assert_no_warning(mut tunnel: TestTunnel, relay: SocketAddr) {
    let path = format!("/t/{}/hook", tunnel.name());
    let request =
        format!("POST {path} HTTP/1.1\r\nHost: {relay}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}");
    let answer = common::caller::raw(relay, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    match tunnel.next_event().await {
        TunnelEvent::Waiting { .. } | TunnelEvent::Delivered { .. } => {}
        other => panic!("expected the delivery, got {other:?}"),
    }
    tunnel.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_proxy_that_drops_the_upgrade_headers_is_named() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let proxy = Proxy::start(relay.addr, None, &["upgrade", "connection"]).await;
    let refused = TestTunnel::start_with(&proxy.http_url(), &handler.url(), TunnelOptions::default()).await;
    let said = match refused {
        Err(err) => err.to_string(),
        Ok(tunnel) => panic!("a tunnel opened at {} without an upgrade", tunnel.public_url),
    };
    assert!(said.starts_with("the relay refused the tunnel: "), "{said}");
    assert!(
        said.contains("arrived without its Upgrade and Connection headers")
            && said.contains("a proxy in front of the relay must pass both on"),
        "{said}"
    );
    assert!(said.ends_with("(400 Bad Request)"), "{said}");
}

/// TLS settings for a proxy on `localhost`, and the file its client trusts.
fn proxy_tls(dir: &std::path::Path) -> (Arc<rustls::ServerConfig>, std::path::PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
    let cert_path = dir.join("proxy.pem");
    let key_path = dir.join("proxy.key");
    std::fs::write(&cert_path, cert.cert.pem()).expect("write cert");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("write key");
    let tls = portpreview_server::load_tls(&cert_path, &key_path).expect("load TLS");
    (tls, cert_path)
}

/// Tunnel options trusting the proxy's certificate.
fn over_tls(ca_cert: &std::path::Path) -> TunnelOptions {
    TunnelOptions {
        tls: Some(portpreview::tunnel::connect::tls_config(Some(ca_cert)).expect("trust the proxy")),
        ..TunnelOptions::default()
    }
}

/// A proxy on loopback in front of a relay, passing bytes on as they come
/// but for the headers it leaves out of each connection's first request
/// head; it ends TLS when given its settings. Stops on drop.
struct Proxy {
    addr: SocketAddr,
    _task: AbortOnDropHandle<()>,
}

impl Proxy {
    async fn start(
        relay: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        dropped: &'static [&'static str],
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let task = tokio::spawn(async move {
            // Dropped with the accept loop, so each connection ends with the proxy.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                pass_on(tls, relay, dropped).await;
                            }
                        }
                        None => pass_on(tcp, relay, dropped).await,
                    }
                });
            }
        });
        Self {
            addr,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// Its address as a client's `--server`, over TLS, by the name its
    /// certificate has.
    fn https_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// Its address as a client's `--server`, in plain HTTP.
    fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Passes a caller's connection on to the relay, its first request head
/// without the `dropped` headers.
async fn pass_on(mut caller: impl AsyncRead + AsyncWrite + Unpin, relay: SocketAddr, dropped: &[&str]) {
    let Some(head) = common::caller::read_head(&mut caller).await else {
        return;
    };
    let head = String::from_utf8_lossy(&head);
    let kept: String = head
        .split_inclusive("\r\n")
        .filter(|line| {
            let name = line.split(':').next().unwrap_or_default().trim();
            !dropped.iter().any(|d| name.eq_ignore_ascii_case(d))
        })
        .collect();
    let Ok(mut upstream) = TcpStream::connect(relay).await else {
        return;
    };
    if upstream.write_all(kept.as_bytes()).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut caller, &mut upstream).await;
    }
}
