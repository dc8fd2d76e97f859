//! JSON pointers into a body, and replacing one value in the serialized
//! bytes while leaving every other byte as the provider sent it.

use std::ops::Range;

use serde_json::Value;

/// Splits a JSON pointer (`/data/object/id`) into unescaped tokens; the
/// empty pointer means the whole document. `None` when it is not a pointer.
pub(crate) fn parse(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// The value at `tokens`, if any.
pub(crate) fn get<'a>(value: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(value, |v, tok| match v {
        Value::Object(map) => map.get(tok.as_str()),
        Value::Array(items) => items.get(index(tok)?),
        _ => None,
    })
}

fn get_mut<'a>(value: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(value, |v, tok| match v {
        Value::Object(map) => map.get_mut(tok.as_str()),
        Value::Array(items) => items.get_mut(index(tok)?),
        _ => None,
    })
}

/// An array index as RFC 6901 writes it: digits, no leading zero.
fn index(tok: &str) -> Option<usize> {
    let digits = !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit());
    if !digits || (tok.len() > 1 && tok.starts_with('0')) {
        return None;
    }
    tok.parse().ok()
}

/// Why a value could not be replaced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReplaceError {
    /// The body is not JSON.
    NotJson,
    /// Nothing lives at the pointer.
    Missing,
}

/// `body` as a tree; `None` for JSON nested past the 128 levels serde
/// reads, which providers' bodies may be and the event key still reads
/// (see [`span`]).
fn parse_doc(body: &[u8]) -> Result<Option<Value>, ReplaceError> {
    match serde_json::from_slice(body) {
        Ok(doc) => Ok(Some(doc)),
        // serde_json names this error by its message alone.
        Err(err) if err.to_string().starts_with("recursion limit exceeded") => Ok(None),
        Err(_) => Err(ReplaceError::NotJson),
    }
}

/// The value at `tokens` in `body`. Nested past what serde reads, a value
/// too deep to read alone is an empty object or array of its kind: enough
/// to tell it is no ID.
pub(crate) fn value_at(body: &[u8], tokens: &[String]) -> Result<Value, ReplaceError> {
    if let Some(doc) = parse_doc(body)? {
        return get(&doc, tokens).cloned().ok_or(ReplaceError::Missing);
    }
    let found = span(body, tokens)
        .and_then(|range| body.get(range))
        .ok_or(ReplaceError::Missing)?;
    Ok(serde_json::from_slice(found).unwrap_or_else(|_| match found.first() {
        Some(b'[') => Value::Array(Vec::new()),
        _ => Value::Object(serde_json::Map::new()),
    }))
}

/// Replaces the value at `tokens` with `new`. The serialized bytes are
/// edited in place where the value can be located; otherwise the document
/// is re-serialized (in its original key order).
pub(crate) fn replace(body: &mut Vec<u8>, tokens: &[String], new: &Value) -> Result<(), ReplaceError> {
    let new_bytes = serde_json::to_vec(new).map_err(|_| ReplaceError::NotJson)?;
    let Some(mut doc) = parse_doc(body)? else {
        // Too deep to check the edit against a tree: the value is replaced
        // where it lies, as the event key found it.
        let range = span(body, tokens).ok_or(ReplaceError::Missing)?;
        body.splice(range, new_bytes);
        return Ok(());
    };
    let slot = get_mut(&mut doc, tokens).ok_or(ReplaceError::Missing)?;
    *slot = new.clone();
    if let Some(range) = span(body, tokens) {
        let mut spliced = body.clone();
        spliced.splice(range, new_bytes);
        // The splice is trusted only when it means exactly the edited document.
        if serde_json::from_slice::<Value>(&spliced).is_ok_and(|v| v == doc) {
            *body = spliced;
            return Ok(());
        }
    }
    *body = serde_json::to_vec(&doc).map_err(|_| ReplaceError::NotJson)?;
    Ok(())
}

/// Byte range of the value at `tokens` in valid JSON `body`. Like serde, a
/// repeated key means its last occurrence.
pub(crate) fn span(body: &[u8], tokens: &[String]) -> Option<Range<usize>> {
    find(body, 0, tokens, true)
}

/// Byte range of the value at `tokens` in the start of a JSON body cut
/// short: the last occurrence of a key before the cut, whose value must
/// end before it.
pub(crate) fn span_in_start(start: &[u8], tokens: &[String]) -> Option<Range<usize>> {
    find(start, 0, tokens, false)
}

fn find(b: &[u8], at: usize, tokens: &[String], whole: bool) -> Option<Range<usize>> {
    let at = skip_ws(b, at);
    let Some((tok, rest)) = tokens.split_first() else {
        return Some(at..value_end(b, at)?);
    };
    match b.get(at)? {
        b'{' => {
            let mut i = skip_ws(b, at + 1);
            if b.get(i) == Some(&b'}') {
                return None;
            }
            let mut found = None;
            // Whether the members ran to the object's end; in a body cut
            // short they may end at the cut, and what came before it stands.
            let ended = loop {
                let Some(key_end) = string_end(b, i) else {
                    break false;
                };
                let key = b.get(i..key_end)?;
                let matches = if key.contains(&b'\\') {
                    serde_json::from_slice::<String>(key).ok()? == *tok
                } else {
                    key.get(1..key.len() - 1)? == tok.as_bytes()
                };
                i = skip_ws(b, key_end);
                if b.get(i) != Some(&b':') {
                    break false;
                }
                let value_start = skip_ws(b, i + 1);
                if matches {
                    found = Some(value_start);
                }
                let Some(value_end) = value_end(b, value_start) else {
                    break false;
                };
                i = skip_ws(b, value_end);
                match b.get(i) {
                    Some(b',') => i = skip_ws(b, i + 1),
                    Some(b'}') => break true,
                    _ => break false,
                }
            };
            if !ended && whole {
                return None;
            }
            find(b, found?, rest, whole)
        }
        b'[' => {
            let wanted = index(tok)?;
            let mut i = skip_ws(b, at + 1);
            for _ in 0..wanted {
                i = skip_ws(b, value_end(b, i)?);
                if b.get(i) != Some(&b',') {
                    return None;
                }
                i = skip_ws(b, i + 1);
            }
            if b.get(i) == Some(&b']') {
                return None;
            }
            find(b, i, rest, whole)
        }
        _ => None,
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// End (exclusive) of the string starting at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// End (exclusive) of the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let end = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |p| i + p);
            (end > i).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn toks(p: &str) -> Vec<String> {
        parse(p).unwrap()
    }

    #[test]
    fn pointer_tokens_unescape() {
        assert_eq!(toks("/a~1b/c~0d/0"), ["a/b", "c~d", "0"]);
        assert_eq!(toks(""), Vec::<String>::new());
        assert_eq!(parse("type"), None);
    }

    #[test]
    fn replaces_only_the_value_bytes() {
        let mut body = br#"{ "id" : "evt_1",  "data": {"id": "x", "n": [1, {"id": 2}]}}"#.to_vec();
        replace(&mut body, &toks("/id"), &json!("evt_2")).unwrap();
        assert_eq!(body, br#"{ "id" : "evt_2",  "data": {"id": "x", "n": [1, {"id": 2}]}}"#);
        replace(&mut body, &toks("/data/n/1/id"), &json!(7)).unwrap();
        assert_eq!(body, br#"{ "id" : "evt_2",  "data": {"id": "x", "n": [1, {"id": 7}]}}"#);
    }

    #[test]
    fn escaped_and_repeated_keys_follow_serde() {
        let mut body = br#"{"i\u0064":"a","id":"b","s":"}\"{"}"#.to_vec();
        replace(&mut body, &toks("/id"), &json!("c")).unwrap();
        assert_eq!(body, br#"{"i\u0064":"a","id":"c","s":"}\"{"}"#);
    }

    #[test]
    fn missing_and_not_json_are_errors() {
        let mut body = br#"{"a":1}"#.to_vec();
        assert_eq!(replace(&mut body, &toks("/b"), &json!(1)), Err(ReplaceError::Missing));
        assert_eq!(
            replace(&mut b"nope".to_vec(), &toks("/b"), &json!(1)),
            Err(ReplaceError::NotJson)
        );
        assert_eq!(body, br#"{"a":1}"#);
    }

    #[test]
    fn span_never_panics_on_truncated_input() {
        let full = br#"{"a":[1,{"b":"x\"y"}],"c":{}}"#;
        for end in 0..full.len() {
            let _ = span(&full[..end], &toks("/a/1/b"));
            let _ = span(&full[..end], &toks("/c/d"));
        }
        let found = span(full, &toks("/a/1/b")).unwrap();
        assert_eq!(&full[found], br#""x\"y""#);
    }
}
