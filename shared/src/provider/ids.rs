//! Random identifiers shaped like the ones providers issue, so a handler
//! that validates an ID's format still accepts a fresh one.

use rand::distributions::{Alphanumeric, DistString};
use rand::Rng;

/// A random version 4 UUID, lowercase.
pub(crate) fn uuid() -> String {
    let mut b: [u8; 16] = rand::thread_rng().gen();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// `len` random ASCII letters and digits.
pub(crate) fn alnum(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), len)
}

/// `len` random lowercase letters and digits.
pub(crate) fn lower_alnum(len: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    pick(CHARS, len)
}

/// `len` random uppercase letters and digits.
pub(crate) fn upper_alnum(len: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    pick(CHARS, len)
}

/// `len` random lowercase hex digits.
pub(crate) fn hex_digits(len: usize) -> String {
    pick(b"0123456789abcdef", len)
}

/// `len` random decimal digits, the first one not zero.
pub(crate) fn digits(len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len.max(1))
        .map(|i| {
            char::from(
                b'0' + if i == 0 {
                    rng.gen_range(1..10)
                } else {
                    rng.gen_range(0..10)
                },
            )
        })
        .collect()
}

fn pick(chars: &[u8], len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| char::from(chars[rng.gen_range(0..chars.len())]))
        .collect()
}

/// A new ID shaped like `old`: a UUID stays a UUID, digits stay digits,
/// and a prefix such as `evt_`, or Twilio's `CA` before hex digits, is kept
/// in front of a random tail, hex digits where the old tail had them.
pub(crate) fn like(old: &str) -> String {
    if is_uuid(old) {
        let new = uuid();
        return if old.bytes().any(|b| b.is_ascii_uppercase()) {
            new.to_ascii_uppercase()
        } else {
            new
        };
    }
    if !old.is_empty() && old.bytes().all(|b| b.is_ascii_digit()) {
        return digits(old.len());
    }
    let (prefix, tail) = match old.rfind('_') {
        Some(i) => old.split_at(i + 1),
        None => old.split_at(old.bytes().take_while(u8::is_ascii_uppercase).count()),
    };
    let hex = |s: &str| s.len() >= 8 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match hex(tail) {
        true => format!("{prefix}{}", hex_digits(tail.len())),
        // Letters alone before no hex digits are no prefix.
        false if !old.contains('_') => alnum(old.len().max(16)),
        false => format!("{prefix}{}", alnum(tail.len().max(16))),
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let id = uuid();
        assert!(is_uuid(&id), "{id}");
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(uuid(), id);
    }

    #[test]
    fn new_ids_keep_the_old_shape() {
        assert!(is_uuid(&like("72d3162e-cc78-11e3-81ab-4c9367dc0958")));
        assert!(is_uuid(&like("72D3162E-CC78-11E3-81AB-4C9367DC0958")));
        let snowflake = like("1175540000000000000");
        assert_eq!(snowflake.len(), 19);
        assert!(snowflake.bytes().all(|b| b.is_ascii_digit()) && !snowflake.starts_with('0'));
        let evt = like("evt_1PortPreviewTest");
        assert!(evt.starts_with("evt_") && evt.len() == 20, "{evt}");
        assert_ne!(like("evt_1PortPreviewTest"), evt);
        assert_eq!(like("x").len(), 16);
        let call = like("CA1234567890abcdef1234567890abcdef");
        assert!(call.starts_with("CA") && call.len() == 34, "{call}");
        assert!(
            call[2..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{call}"
        );
        assert_ne!(call, like("CA1234567890abcdef1234567890abcdef"));
        let word = like("ABCDEFGH");
        assert_eq!(word.len(), 16, "letters alone are all tail: {word}");
        assert!(hex_digits(32).bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(upper_alnum(10)
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert!(lower_alnum(10)
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    }
}
