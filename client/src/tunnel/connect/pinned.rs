//! Trusting a relay's certificate given with `--ca-cert` as itself.
//!
//! `openssl req -x509` makes a self-signed certificate marked as a CA, and
//! WebPKI refuses a CA certificate presented by a server
//! (`CaUsedAsEndEntity`) even when it is the very one the user trusts. A
//! certificate the relay presents that is, byte for byte, one of those in
//! the `--ca-cert` file is therefore accepted as it is; anything else is
//! checked the WebPKI way, against the web's roots and that file's CAs.
//! Handshake signatures are checked the same way either way, so only the
//! holder of that certificate's key can pass.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

/// The relay presented a certificate that is none of those in the file
/// given with `--ca-cert`, nor signed by one of them.
#[derive(Debug, thiserror::Error)]
#[error("the relay's certificate is not the one given with --ca-cert {}, nor signed by it", .0.display())]
pub struct NotTheGivenCertificate(pub Arc<std::path::Path>);

/// Whether WebPKI refused `problem` for want of a trusted issuer. A bad
/// signature is one: an issuer of the same name as one given, whose key
/// did not sign it, as when the file holds an old copy of a self-signed
/// certificate since made again.
fn is_untrusted(problem: &CertificateError) -> bool {
    matches!(
        problem,
        CertificateError::UnknownIssuer | CertificateError::BadSignature
    ) || is_ca_used_as_end_entity(problem)
}

/// Whether WebPKI refused a CA certificate presented as the server's own,
/// as `openssl req -x509` makes them; rustls passes that on wrapped.
pub fn is_ca_used_as_end_entity(problem: &CertificateError) -> bool {
    matches!(problem, CertificateError::Other(other)
        if matches!(other.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)))
}

/// The file given with `--ca-cert`, when the verifier below refused the
/// relay for being none of its certificates.
pub fn not_the_given_certificate(problem: &CertificateError) -> Option<&std::path::Path> {
    match problem {
        CertificateError::Other(other) => other.0.downcast_ref::<NotTheGivenCertificate>().map(|not| &*not.0),
        _ => None,
    }
}

/// WebPKI verification, with the user's own certificates accepted as themselves.
#[derive(Debug)]
pub struct Verifier {
    web_pki: Arc<WebPkiServerVerifier>,
    trusted: Option<Trusted>,
}

/// The certificates given with `--ca-cert`, and the file they came from,
/// named when the relay is none of them.
#[derive(Debug)]
pub struct Trusted {
    /// The `--ca-cert` file.
    pub file: Arc<std::path::Path>,
    /// Its certificates.
    pub certs: Vec<CertificateDer<'static>>,
}

impl Verifier {
    /// Checks with `web_pki`, accepting any of the `trusted` certificates
    /// as itself.
    pub fn new(web_pki: Arc<WebPkiServerVerifier>, trusted: Option<Trusted>) -> Self {
        Self { web_pki, trusted }
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .web_pki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Ok(verified) => Ok(verified),
            Err(_)
                if self
                    .trusted
                    .iter()
                    .flat_map(|trusted| &trusted.certs)
                    .any(|cert| cert.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            // Trust was the problem, and the user named what to trust:
            // saying "pass --ca-cert" again would not help them.
            Err(rustls::Error::InvalidCertificate(problem)) if is_untrusted(&problem) => match &self.trusted {
                Some(trusted) => Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(
                    Arc::new(NotTheGivenCertificate(Arc::clone(&trusted.file))),
                )))),
                None => Err(rustls::Error::InvalidCertificate(problem)),
            },
            Err(err) => Err(err),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.web_pki.supported_verify_schemes()
    }
}
