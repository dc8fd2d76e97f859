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
    // A deploy script that passes the wrong file is told which one.
    let named = [cert, key].map(|path| path.display().to_string());
    configure(&cert_pem, &key_pem, [&named[0], &named[1]])
}

/// Builds a server config from PEM text already in memory.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    configure(cert_pem, key_pem, ["the certificate file", "the key file"])
}

/// [`server_config`], naming the certificate and key files as `files` says.
fn configure(cert_pem: &[u8], key_pem: &[u8], files: [&str; 2]) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let [cert_file, key_file] = files;
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| ConfigError::Tls(format!("certificate in {cert_file}: {e}")))?;
    if chain.is_empty() {
        // A DER file, as `openssl x509 -outform DER` writes, holds one
        // but no PEM armour.
        let pem = match cert_pem.windows(10).any(|w| w == b"-----BEGIN") {
            true => "",
            false => " (the relay reads PEM, -----BEGIN CERTIFICATE-----; from DER: openssl x509 -inform DER -in CERT -out CERT.pem)",
        };
        return Err(ConfigError::Tls(format!("no certificate found in {cert_file}{pem}")));
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| ConfigError::Tls(format!("private key in {key_file}: {e}")))?
        .ok_or_else(|| {
            // rustls reads no encrypted key, and skips one as if absent.
            let why = if key_pem.windows(9).any(|w| w == b"ENCRYPTED") {
                format!(
                    "the private key in {key_file} is encrypted, which the relay cannot read: decrypt it once \
                     (openssl pkey -in KEY -out KEY.plain) and pass that file, readable only by the relay's user"
                )
            } else {
                format!("no private key found in {key_file}")
            };
            ConfigError::Tls(why)
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| ConfigError::Tls(pairing_error(&e, files)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why a certificate and a key could not be paired, in the user's words
/// rather than rustls's (`keys may not be consistent: KeyMismatch`).
fn pairing_error(err: &rustls::Error, [cert_file, key_file]: [&str; 2]) -> String {
    match err {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            format!("the private key in {key_file} does not match the certificate (the first one in {cert_file})")
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
            "invalid TLS configuration: the private key in the key file does not match the certificate \
             (the first one in the certificate file)"
        );
    }

    #[test]
    fn an_encrypted_key_is_named_as_such_with_how_to_decrypt_it() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        // The PEM label is what tells it: rustls skips such a block.
        let encrypted = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let err = server_config(cert.cert.pem().as_bytes(), encrypted).expect_err("an encrypted key is refused");
        assert!(
            err.to_string().contains("the private key in the key file is encrypted"),
            "{err}"
        );
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

    /// Files swapped or mistyped: the error names the one at fault.
    #[test]
    fn a_file_holding_no_certificate_or_no_key_is_named() {
        let dir = std::env::temp_dir().join(format!("portpreview-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pair = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.key_pair.serialize_pem()).unwrap();
        assert!(load_tls(&cert, &key).is_ok());
        let err = load_tls(&key, &key).expect_err("a key is no certificate");
        assert_eq!(
            err.to_string(),
            format!("invalid TLS configuration: no certificate found in {}", key.display())
        );
        let err = load_tls(&cert, &cert).expect_err("a certificate is no key");
        assert_eq!(
            err.to_string(),
            format!("invalid TLS configuration: no private key found in {}", cert.display())
        );
        let other = dir.join("other.pem");
        let stranger = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(&other, stranger.key_pair.serialize_pem()).unwrap();
        let err = load_tls(&cert, &other).expect_err("another certificate's key");
        assert_eq!(
            err.to_string(),
            format!(
                "invalid TLS configuration: the private key in {} does not match the certificate (the first one in {})",
                other.display(),
                cert.display()
            )
        );
        let der = dir.join("cert.der");
        std::fs::write(&der, pair.cert.der()).unwrap();
        let err = load_tls(&der, &key).expect_err("DER is not PEM");
        assert!(err.to_string().contains("the relay reads PEM"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
