//! The TLS settings a `wss://` relay is reached with.

use std::path::Path;
use std::sync::Arc;

use super::{pinned, ConnectError};

/// TLS settings trusting the web's roots plus the certificates of an
/// optional PEM file: as CAs, and each also as itself, so a self-signed
/// relay certificate marked as a CA is trusted when it is the one given.
pub fn tls_config(ca_cert: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut trusted = None;
    if let Some(path) = ca_cert {
        let mut certs = Vec::new();
        let pem = crate::input_file::read_file(path, crate::input_file::MAX_SETTINGS_FILE)
            .map_err(|e| ConnectError::Tls(format!("cannot read the CA certificate {}: {e}", path.display())))?;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| ConnectError::Tls(format!("{}: {e}", path.display())))?;
            roots
                .add(cert.clone())
                .map_err(|e| ConnectError::Tls(format!("{}: {e}", path.display())))?;
            certs.push(cert);
        }
        if certs.is_empty() {
            return Err(ConnectError::Tls(format!(
                "{} holds no PEM certificate",
                path.display()
            )));
        }
        trusted = Some(pinned::Trusted {
            file: Arc::from(path),
            certs,
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let web_pki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ConnectError::Tls(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnectError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(pinned::Verifier::new(web_pki, trusted)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}
