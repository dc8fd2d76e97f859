//! TLS for https/wss: a rustls server config from PEM files.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ConfigError;

/// Builds a server config (ring provider, HTTP/1.1 over ALPN) from a PEM
/// certificate chain and a PEM private key.
pub fn load_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    server_config(&cert_pem, &key_pem)
}

/// Builds a server config from PEM text already in memory.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| ConfigError::Tls(format!("certificate: {e}")))?;
    if chain.is_empty() {
        return Err(ConfigError::Tls("no certificate found in the certificate file".into()));
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| ConfigError::Tls(format!("private key: {e}")))?
        .ok_or_else(|| {
            // rustls reads no encrypted key, and skips one as if absent.
            let why = if key_pem.windows(9).any(|w| w == b"ENCRYPTED") {
                "the private key is encrypted, which the relay cannot read: decrypt it once \
                 (openssl pkey -in KEY -out KEY.plain) and pass that file, readable only by the relay's user"
            } else {
                "no private key found in the key file"
            };
            ConfigError::Tls(why.into())
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| ConfigError::Tls(pairing_error(&e)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why a certificate and a key could not be paired, in the user's words
/// rather than rustls's (`keys may not be consistent: KeyMismatch`).
fn pairing_error(err: &rustls::Error) -> String {
    match err {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not match the certificate (the first one in the certificate file)".into()
        }
        other => other.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_pair_loads() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let config = server_config(cert.cert.pem().as_bytes(), cert.key_pair.serialize_pem().as_bytes());
        assert!(config.is_ok());
    }

    #[test]
    fn a_key_of_another_certificate_is_named_as_such() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let err = server_config(cert.cert.pem().as_bytes(), other.key_pair.serialize_pem().as_bytes())
            .expect_err("a mismatched pair is refused");
        assert_eq!(
            err.to_string(),
            "invalid TLS configuration: the private key does not match the certificate \
             (the first one in the certificate file)"
        );
    }

    #[test]
    fn an_encrypted_key_is_named_as_such_with_how_to_decrypt_it() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        // The PEM label is what tells it: rustls skips such a block.
        let encrypted = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let err = server_config(cert.cert.pem().as_bytes(), encrypted).expect_err("an encrypted key is refused");
        assert!(err.to_string().contains("the private key is encrypted"), "{err}");
        assert!(err.to_string().contains("openssl pkey"), "{err}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(server_config(b"nope", b"nope").is_err());
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        assert!(server_config(cert.cert.pem().as_bytes(), b"").is_err());
        let missing = load_tls(Path::new("/nonexistent/cert.pem"), Path::new("/nonexistent/key"));
        assert!(matches!(missing, Err(ConfigError::Read { .. })));
    }
}
