//! `Content-Length` read as hyper's server reads it, so the relay's
//! checks of answers, its scan of request heads and the client agree with
//! the parser that frames the bytes.

/// `Content-Length` values that declare no one length: hyper refuses a
/// request carrying them, and an answer carrying them cannot be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Content-Length is not one number")]
pub struct NotOneLength;

/// The one length `values` (each `Content-Length` line's value) declare,
/// or `None` when there is no line: each must be digits alone, whitespace
/// around them aside, and all equal. `+5`, `0x5`, `5, 5` (a list RFC 9110
/// lets a recipient refuse, as hyper's server does; its client takes it)
/// or two lines `5` and `6` declare nothing.
pub fn declared<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<u64>, NotOneLength> {
    let mut declared = None;
    for value in values {
        let digits = value.trim_ascii();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(NotOneLength);
        }
        let length = std::str::from_utf8(digits)
            .ok()
            .and_then(|digits| digits.parse::<u64>().ok())
            .ok_or(NotOneLength)?;
        match declared {
            None => declared = Some(length),
            Some(first) if first == length => {}
            Some(_) => return Err(NotOneLength),
        }
    }
    Ok(declared)
}

/// Bytes of the values an error message shows at most.
const SHOWN: usize = 200;

/// `values` as an error message shows them: escaped, joined with `, `, cut
/// to 200 bytes (a hostile peer's lengths may be long).
pub fn shown<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> String {
    let joined = values.into_iter().collect::<Vec<_>>().join(&b", "[..]);
    crate::text::truncate(&crate::sanitize::escape_bytes(&joined), SHOWN).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(values: &[&str]) -> Result<Option<u64>, NotOneLength> {
        declared(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn one_length_however_often_it_is_repeated() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(read(&["5"]), Ok(Some(5)));
        assert_eq!(read(&[" 5\r"]), Ok(Some(5)), "as a raw header line ends");
        assert_eq!(read(&["5", "5"]), Ok(Some(5)));
        assert_eq!(read(&["005"]), Ok(Some(5)));
    }

    #[test]
    fn anything_else_declares_no_length() {
        for values in [
            &["+5"][..],
            &["-5"],
            &["0x5"],
            &["5 5"],
            &["5, 5"],
            &["5, 6"],
            &["5", "6"],
            &["5,"],
            &[""],
            &["99999999999999999999999"],
        ] {
            assert_eq!(read(values), Err(NotOneLength), "{values:?}");
        }
    }
}
