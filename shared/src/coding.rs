//! A body's `Content-Encoding` undone: how the client shows a compressed
//! body, and reads the event in it for its key.

use std::io::Read;

use crate::sanitize::escape_str;
use crate::Header;

/// Most bytes a compressed body is inflated to: past it the encoded bytes
/// are shown and keyed, so a small bomb cannot fill the memory.
const MAX_DECODED: u64 = 16 * 1024 * 1024;

/// What undoing a body's `Content-Encoding` came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoding {
    /// No coding this tool undoes, or a body not stored whole.
    NotCoded,
    /// The body as the handler meant it.
    Done {
        /// The coding undone, lowercased.
        coding: String,
        /// The decoded bytes.
        plain: Vec<u8>,
    },
    /// The body says it is coded and is not: shown as sent, with why.
    Failed {
        /// The coding it claims.
        coding: String,
        /// What stopped the decoder.
        why: String,
    },
}

impl Decoding {
    /// The line shown above a body that claims a coding it does not have.
    pub fn failure_note(&self) -> Option<String> {
        match self {
            Decoding::Failed { coding, why } => Some(format!(
                "(sent as {}, but it does not decode: {}; shown as sent)",
                escape_str(coding),
                escape_str(why)
            )),
            _ => None,
        }
    }
}

/// Undoes a body's `Content-Encoding` (gzip, deflate) when it is stored
/// whole, as the handler meant it to be read and as its event is keyed.
/// Bodies stored cut short are left as they are, and so are other codings:
/// br, zstd and compress as [`Decoding::Failed`], so that views say why
/// the body looks like noise.
pub fn decode(headers: &[Header], bytes: &[u8], size: u64) -> Decoding {
    let Some(coding) = headers
        .iter()
        .rev()
        .find(|h| h.name.eq_ignore_ascii_case("content-encoding"))
        .and_then(|h| std::str::from_utf8(&h.value).ok())
        .map(|v| v.trim().to_ascii_lowercase())
    else {
        return Decoding::NotCoded;
    };
    if bytes.is_empty() || (bytes.len() as u64) < size {
        return Decoding::NotCoded;
    }
    let reader: Box<dyn Read + '_> = match coding.as_str() {
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
        // RFC 9110's deflate is zlib-wrapped; some servers send it raw.
        "deflate" if bytes.first().is_some_and(|b| b & 0x0f == 8) => Box::new(flate2::read::ZlibDecoder::new(bytes)),
        "deflate" => Box::new(flate2::read::DeflateDecoder::new(bytes)),
        "br" | "zstd" | "compress" | "x-compress" => {
            return Decoding::Failed {
                coding,
                why: "PortPreview decodes gzip and deflate only".into(),
            }
        }
        _ => return Decoding::NotCoded,
    };
    let mut plain = Vec::new();
    match reader.take(MAX_DECODED + 1).read_to_end(&mut plain) {
        Err(err) => Decoding::Failed {
            coding,
            why: err.to_string(),
        },
        Ok(_) if plain.len() as u64 > MAX_DECODED => Decoding::Failed {
            coding,
            why: format!("it inflates past {} MiB", MAX_DECODED / (1024 * 1024)),
        },
        Ok(_) => Decoding::Done { coding, plain },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coding_left_undecoded_says_so() {
        let decoded = decode(&[Header::new("Content-Encoding", "br")], b"\x0b\x02\x80", 3);
        assert_eq!(
            decoded.failure_note().as_deref(),
            Some("(sent as br, but it does not decode: PortPreview decodes gzip and deflate only; shown as sent)")
        );
        let identity = decode(&[Header::new("Content-Encoding", "identity")], b"{}", 2);
        assert!(identity.failure_note().is_none());
    }

    fn compressed(coding: &str, text: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let level = flate2::Compression::default();
        match coding {
            "gzip" => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            "zlib" => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            _ => {
                let mut e = flate2::write::DeflateEncoder::new(Vec::new(), level);
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
        }
    }

    #[test]
    fn gzip_and_deflate_answers_are_undone_and_others_shown_as_sent() {
        let text = br#"{"received":true}"#;
        for (coding, header) in [
            ("gzip", "gzip"),
            ("gzip", "X-Gzip"),
            ("zlib", "deflate"),
            ("raw", "deflate"),
        ] {
            let body = compressed(coding, text);
            let headers = [Header::new("Content-Encoding", header)];
            assert_eq!(
                decode(&headers, &body, body.len() as u64),
                Decoding::Done {
                    coding: header.to_ascii_lowercase(),
                    plain: text.to_vec()
                },
                "{header}"
            );
            // Stored cut: the start of a stream is not the body.
            assert_eq!(
                decode(&headers, &body[..4], body.len() as u64),
                Decoding::NotCoded,
                "{header}"
            );
        }
        assert!(matches!(
            decode(&[Header::new("content-encoding", "br")], b"\x1b\x00", 2),
            Decoding::Failed { coding, .. } if coding == "br"
        ));
        assert!(matches!(
            decode(&[Header::new("content-encoding", "gzip")], b"not gzip", 8),
            Decoding::Failed { .. }
        ));
        // A handler that labels plain JSON gzip: the user must learn why it shows raw.
        let mislabelled = br#"{"plain": true}"#;
        let note = decode(&[Header::new("content-encoding", "gzip")], mislabelled, 15).failure_note();
        assert_eq!(
            note.as_deref(),
            Some("(sent as gzip, but it does not decode: invalid gzip header; shown as sent)")
        );
        assert_eq!(decode(&[], text, text.len() as u64), Decoding::NotCoded);
    }
}
