//! TLS settings for local `https://` handlers, built once per process.
//!
//! A handler reached on a loopback address is not verified: local
//! development certificates are self-signed (mkcert without its CA
//! installed, `dotnet dev-certs`, Vite's basic-ssl), and refusing them would
//! leave no way to forward to such a handler. The connection never leaves
//! this machine, and a process there that could answer in the handler's
//! place could as well answer a plain `http://` target. The handshake's own
//! signatures are still checked, so the handler proves it holds the key of
//! the certificate it shows. A handler on any other
//! address is verified against the web's roots, as a browser would.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// The forwarder speaks HTTP/1 only: offering h2 would let a handler pick
/// a protocol it cannot read.
const ALPN: &[u8] = b"http/1.1";

/// Settings for a handler on a loopback address: any certificate.
pub(super) fn loopback() -> Result<Arc<ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier = Arc::new(AnyCertificate(provider.clone()));
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            Ok(with_alpn(config))
        })
        .clone()
}

/// Settings for a handler elsewhere: verified against the web's roots.
pub(super) fn web() -> Result<Arc<ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(with_alpn(config))
        })
        .clone()
}

fn with_alpn(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.alpn_protocols = vec![ALPN.to_vec()];
    Arc::new(config)
}

/// Accepts any certificate; checks handshake signatures with the provider's
/// algorithms (see the module's comment for why).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
