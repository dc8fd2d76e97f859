//! Header lists as stored in SQLite: an ordered postcard-encoded list of
//! (name, raw value bytes), so repeated headers and non-UTF-8 values survive.

use portpreview_shared::Header;

/// Encodes headers in order, names and raw values exactly.
pub fn encode(headers: &[Header]) -> Vec<u8> {
    // Encoding a Vec of plain structs into memory cannot fail.
    postcard::to_allocvec(headers).unwrap_or_default()
}

/// Decodes a stored header list.
pub fn decode(blob: &[u8]) -> Result<Vec<Header>, postcard::Error> {
    postcard::from_bytes(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_and_raw_bytes_survive() {
        let headers = vec![
            Header::new("x-a", "1"),
            Header::new("set-cookie", "a=1"),
            Header::new("x-bin", vec![0xff, 0x00, 0x1b, b'z']),
            Header::new("set-cookie", "b=2"),
        ];
        assert_eq!(decode(&encode(&headers)).unwrap(), headers);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<Header>::new());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode(&[0x05, 0xff]).is_err());
    }
}
