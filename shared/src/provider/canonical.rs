//! Canonical JSON: object keys sorted, no whitespace. Two bodies that differ
//! only in key order or formatting give the same bytes, so their hashes
//! agree.

use serde_json::Value;

/// Appends the canonical form of `value` to `out`.
pub(crate) fn write(value: &Value, out: &mut Vec<u8>) {
    write_skipping(value, &[], out);
}

/// Like [`write()`], leaving out the top-level members named in `skip`.
fn write_skipping(value: &Value, skip: &[&str], out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().filter(|(k, _)| !skip.contains(&k.as_str())).collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        // Null, booleans and numbers have a single compact form already.
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The canonical form of `value` as bytes.
#[cfg(test)]
pub(crate) fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    out
}

/// The canonical form of `value`, leaving out the top-level members named
/// in `skip` (fields a provider changes on every attempt).
pub(crate) fn to_vec_without(value: &Value, skip: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_skipping(value, skip, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_level_and_drops_whitespace() {
        let value: Value = serde_json::from_str(r#"{ "b": [ {"z":1, "a":2} ], "a": "x\"y" }"#).unwrap();
        assert_eq!(to_vec(&value), br#"{"a":"x\"y","b":[{"a":2,"z":1}]}"#);
    }

    #[test]
    fn skips_only_top_level_members() {
        let value = json!({"signature": {"x": 1}, "data": {"signature": 2}, "a": 1});
        assert_eq!(
            to_vec_without(&value, &["signature"]),
            br#"{"a":1,"data":{"signature":2}}"#
        );
    }

    #[test]
    fn scalars_are_compact() {
        assert_eq!(
            to_vec(&json!([null, true, 1.5, -3, "é"])),
            "[null,true,1.5,-3,\"é\"]".as_bytes()
        );
    }
}
