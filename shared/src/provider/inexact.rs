//! Numbers in JSON text that a parsed body does not hold as written.
//!
//! A body is parsed into 64-bit integers and floats, so
//! `123456789012345678901234567890` and `…999` become one float, and
//! canonical JSON alone would give two events one key. The numbers that
//! lose digits this way are found in the text itself and added to the
//! hash, so such bodies stay apart. A number a float holds as written
//! (`1.5`, `0.1`, a timestamp printed by any JSON library) adds nothing:
//! keys of ordinary bodies stay what they have always been.

/// The number tokens of valid JSON `text`, in order, whose value a 64-bit
/// integer or float does not hold exactly. A token anywhere under a
/// top-level member named in `skip` is left out, as canonical JSON leaves
/// that member out (fields that change on every attempt).
pub(crate) fn numbers<'a>(text: &'a [u8], skip: &[&str]) -> Vec<&'a [u8]> {
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut top_is_object = false;
    // At depth 1 of a top-level object: whether the next string is a
    // member's name, and the name of the member being read.
    let mut expecting_name = false;
    let mut skipping = false;
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => {
                let end = string_end(text, i);
                if depth == 1 && top_is_object && expecting_name {
                    skipping = member_name(&text[i..end]).is_some_and(|name| skip.contains(&name.as_str()));
                    expecting_name = false;
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                if depth == 0 {
                    top_is_object = b == b'{';
                    expecting_name = top_is_object;
                }
                depth += 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 && top_is_object => expecting_name = true,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while text
                    .get(i)
                    .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    i += 1;
                }
                let token = &text[start..i];
                if !(skipping || held_exactly(token)) {
                    found.push(token);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// End (exclusive) of the string starting at `start`, or of the text.
fn string_end(text: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while let Some(&b) = text.get(j) {
        match b {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    text.len()
}

/// A member's name from its quoted form, escapes decoded.
fn member_name(quoted: &[u8]) -> Option<String> {
    serde_json::from_slice(quoted).ok()
}

/// Whether parsing `token` keeps its value: an integer that fits 64 bits,
/// or a float whose shortest form is the very number written.
fn held_exactly(token: &[u8]) -> bool {
    let Ok(token) = std::str::from_utf8(token) else {
        return false;
    };
    if !token.contains(['.', 'e', 'E']) && (token.parse::<u64>().is_ok() || token.parse::<i64>().is_ok()) {
        return true;
    }
    match token.parse::<f64>() {
        Ok(float) if float.is_finite() => decimal(token) == decimal(&format!("{float:e}")),
        _ => false,
    }
}

/// A decimal number's sign, significant digits and power of ten, so that
/// `1500`, `1.5e3` and `15.00e2` compare equal.
fn decimal(number: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (
            mantissa,
            exponent.strip_prefix('+').unwrap_or(exponent).parse::<i64>().ok()?,
        ),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let significant = digits.trim_start_matches('0');
    let trimmed = significant.trim_end_matches('0');
    let power = exponent
        .checked_sub(i64::try_from(fraction.len()).ok()?)?
        .checked_add(i64::try_from(significant.len() - trimmed.len()).ok()?)?;
    if trimmed.is_empty() {
        return Some((negative, String::new(), 0));
    }
    Some((negative, trimmed.to_owned(), power))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str, skip: &[&str]) -> Vec<String> {
        numbers(text.as_bytes(), skip)
            .into_iter()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect()
    }

    #[test]
    fn numbers_a_parse_holds_add_nothing() {
        let held = r#"{"a":1,"b":-3,"c":1.5,"d":0.1,"e":1.5e3,"f":1733450000.1234567,"g":18446744073709551615,
            "h":-9223372036854775808,"i":1e23,"j":-0,"k":0.0,"l":[2.5E-3,100],"m":"123456789012345678901234567890"}"#;
        assert_eq!(found(held, &[]), Vec::<String>::new());
    }

    #[test]
    fn numbers_a_parse_changes_are_found_in_order() {
        let text = r#"{"big":123456789012345678901234567890,"n":[-9223372036854775809,0.30000000000000001],
            "tiny":1e-400,"s":"1e-400 in a string","u":18446744073709551616}"#;
        assert_eq!(
            found(text, &[]),
            [
                "123456789012345678901234567890",
                "-9223372036854775809",
                "0.30000000000000001",
                "1e-400",
                "18446744073709551616"
            ]
        );
    }

    #[test]
    fn members_skipped_are_skipped_whole_and_only_at_the_top() {
        let text = r#"{"timestamp":{"at":1.00000000000000001},"data":{"timestamp":2.00000000000000001},
            "t\u0069mestamp":3.00000000000000001,"x":"\"timestamp\"","y":4.00000000000000001}"#;
        assert_eq!(
            found(text, &["timestamp"]),
            ["2.00000000000000001", "4.00000000000000001"]
        );
        let array = r#"[{"timestamp":1.00000000000000001}]"#;
        assert_eq!(found(array, &["timestamp"]), ["1.00000000000000001"]);
    }

    #[test]
    fn decimals_compare_by_value() {
        assert_eq!(decimal("1500"), decimal("1.5e3"));
        assert_eq!(decimal("15.00e2"), decimal("1.5E+3"));
        assert_ne!(decimal("1500"), decimal("15000"));
        assert_eq!(decimal("0.000"), Some((false, String::new(), 0)));
        assert_eq!(decimal("1e99999999999999999999"), None);
    }
}
