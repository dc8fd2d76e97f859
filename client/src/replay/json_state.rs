//! A probe that prints JSON, as lines that compare well. Pretty-printed
//! JSON moves a comma to the line before each element added, and a map
//! printed in hash order reads differently each time with nothing done:
//! either would pass for a side effect. So keys are sorted, a list of
//! strings, objects or lists is taken as the set of what it holds (a
//! duplicate shows as an element more, wherever it lands) while one
//! holding numbers keeps its order (`[count, sum]`, a row of columns),
//! every value is a line of its own under its key, and
//! each list and object says how many entries it holds, a count that moves
//! by one for each entry added.
//!
//! ```text
//! {"processed": ["evt_2", "evt_1"], "balance": 200}
//!
//! balance: 200
//! processed: [2]
//!   - "evt_1"
//!   - "evt_2"
//! ```

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

/// How a JSON list opens in this form: `- [2]`, its size.
pub const LIST_OPENING: &str = "- [";

/// An empty JSON list in this form.
pub const EMPTY_LIST: &str = "- [0]\n";

/// `text` in that form when it is a JSON object or array; `None` otherwise.
pub fn lines(text: &str) -> Option<String> {
    // A byte-order mark (PowerShell, some Windows tools) opens no document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let node = Node::read(raw)?;
    let mut out = String::new();
    match &node {
        Node::Object(_) => entries(&node, 0, &mut out),
        _ => write(None, &node, 0, &mut out),
    }
    Some(out)
}

/// Whether `text` is in this form with a list or an object in it: each
/// entry two spaces deeper than the list or object it belongs to, which
/// is followed by as many entries as it says it holds. Such a text has an
/// order of its own, whatever order the document was printed in: lines
/// moved between its entries are another state, a value that moved from
/// one record to another. Flat `name: value` lines, which a text probe
/// prints too, do not count.
pub fn is_nested(text: &str) -> bool {
    // Entries still owed by each list or object open, innermost last.
    let mut owed: Vec<usize> = Vec::new();
    let mut nested = false;
    for line in text.lines() {
        while owed.last() == Some(&0) {
            owed.pop();
        }
        let indent = "  ".repeat(owed.len());
        let Some(entry) = line.strip_prefix(indent.as_str()).filter(|e| !e.starts_with(' ')) else {
            return false;
        };
        let Some(value) = entry_value(entry) else {
            return false;
        };
        if let Some(owed) = owed.last_mut() {
            *owed -= 1;
        }
        if let Some(size) = size_of(value) {
            nested = true;
            owed.push(size);
        }
    }
    while owed.last() == Some(&0) {
        owed.pop();
    }
    nested && owed.is_empty()
}

/// What an entry holds: the value after `- ` or after its label.
fn entry_value(entry: &str) -> Option<&str> {
    if let Some(value) = entry.strip_prefix("- ") {
        return Some(value);
    }
    // A quoted label may hold `: ` itself.
    let after_label = match entry.strip_prefix('"') {
        Some(quoted) => {
            let mut escaped = false;
            let mut close = None;
            for (at, c) in quoted.char_indices() {
                if !escaped && c == '"' {
                    close = Some(at);
                    break;
                }
                escaped = !escaped && c == '\\';
            }
            &quoted[close? + 1..]
        }
        None => &entry[entry.find(':')?..],
    };
    after_label.strip_prefix(": ")
}

/// The size a list (`[2]`) or an object (`{2}`) says it holds.
fn size_of(value: &str) -> Option<usize> {
    let inner = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .or_else(|| value.strip_prefix('{').and_then(|v| v.strip_suffix('}')))?;
    inner.parse().ok()
}

/// A JSON value as read, its numbers as printed: a balance in wei, or a
/// decimal of more digits than a float holds, would otherwise read the
/// same after a change to its last digits.
enum Node {
    Object(BTreeMap<String, Node>),
    Array(Vec<Node>),
    /// A string, written as JSON writes it.
    Text(String),
    /// A number, `true`, `false` or `null`, as printed.
    Literal(String),
}

impl Node {
    /// The value `raw` holds; `None` when it is no JSON.
    fn read(raw: &RawValue) -> Option<Node> {
        let text = raw.get();
        Some(match text.as_bytes().first()? {
            b'{' => Node::Object(
                serde_json::from_str::<BTreeMap<String, &RawValue>>(text)
                    .ok()?
                    .into_iter()
                    .map(|(key, value)| Some((key, Node::read(value)?)))
                    .collect::<Option<_>>()?,
            ),
            b'[' => Node::Array(
                serde_json::from_str::<Vec<&RawValue>>(text)
                    .ok()?
                    .into_iter()
                    .map(Node::read)
                    .collect::<Option<_>>()?,
            ),
            b'"' => Node::Text(Value::String(serde_json::from_str(text).ok()?).to_string()),
            _ => Node::Literal(text.to_owned()),
        })
    }
}

/// One value under `label` (`None` for an element of a list) at `depth`.
fn write(label: Option<&str>, node: &Node, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let label = match label {
        Some(key) => format!("{key}:"),
        None => "-".to_owned(),
    };
    match node {
        Node::Array(items) => {
            out.push_str(&format!("{indent}{label} [{}]\n", items.len()));
            entries(node, depth + 1, out);
        }
        Node::Object(map) => {
            out.push_str(&format!("{indent}{label} {{{}}}\n", map.len()));
            entries(node, depth + 1, out);
        }
        Node::Text(scalar) | Node::Literal(scalar) => out.push_str(&format!("{indent}{label} {scalar}\n")),
    }
}

/// The entries of a list or an object, in an order that does not depend
/// on the order they were printed in.
fn entries(node: &Node, depth: usize, out: &mut String) {
    let mut blocks: Vec<String> = match node {
        Node::Array(items) => items
            .iter()
            .map(|item| {
                let mut block = String::new();
                write(None, item, depth, &mut block);
                block
            })
            .collect(),
        Node::Object(map) => map
            .iter()
            .map(|(key, item)| {
                let mut block = String::new();
                write(Some(&label(key)), item, depth, &mut block);
                block
            })
            .collect(),
        Node::Text(_) | Node::Literal(_) => Vec::new(),
    };
    let positional = matches!(node, Node::Array(items) if items.iter().any(|item| matches!(item, Node::Literal(_))));
    if !positional {
        blocks.sort_unstable();
    }
    out.extend(blocks);
}

/// A key as it reads on its line: as it is, unless it could be taken for
/// something else (a line break, a `:` of its own, nothing at all).
fn label(key: &str) -> String {
    let plain = !key.is_empty() && !key.contains([':', '"']) && !key.chars().any(char::is_whitespace);
    match plain {
        true => key.to_owned(),
        false => Value::String(key.to_owned()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_and_lists_read_as_sets() {
        let shuffled = lines(r#"{"processed": ["evt_2", "evt_1"], "balance": 200}"#).unwrap();
        assert_eq!(shuffled, "balance: 200\nprocessed: [2]\n  - \"evt_1\"\n  - \"evt_2\"\n");
        let pretty = "{\n  \"balance\": 200,\n  \"processed\": [\n    \"evt_1\",\n    \"evt_2\"\n  ]\n}\n";
        assert_eq!(lines(pretty).unwrap(), shuffled, "however it was printed");
    }

    #[test]
    fn a_list_of_numbers_keeps_its_columns_in_order() {
        assert_eq!(lines("[500,100]").unwrap(), "- [2]\n  - 500\n  - 100\n");
        assert_eq!(
            lines(r#"{"rows": [[2, 100], [1, 300]]}"#).unwrap(),
            "rows: [2]\n  - [2]\n    - 1\n    - 300\n  - [2]\n    - 2\n    - 100\n",
            "rows in any order, each row's columns in theirs"
        );
    }

    #[test]
    fn nested_values_keep_their_place_under_their_keys() {
        let nested = lines(r#"[{"id": 1, "tags": {}}, {"id": 2, "note": "a b", "odd key": null}]"#).unwrap();
        assert_eq!(
            nested,
            "- [2]\n  - {2}\n    id: 1\n    tags: {0}\n  - {3}\n    \"odd key\": null\n    id: 2\n    note: \"a b\"\n"
        );
    }

    #[test]
    fn a_list_opens_with_its_size() {
        assert_eq!(lines("[]").unwrap(), EMPTY_LIST);
        assert!(lines("[1]").unwrap().starts_with(LIST_OPENING));
    }

    #[test]
    fn numbers_read_as_printed_however_long() {
        assert_eq!(
            lines(r#"{"balance_wei": 100000000000000000003000, "rate": 0.10000000000000000001}"#).unwrap(),
            "balance_wei: 100000000000000000003000\nrate: 0.10000000000000000001\n"
        );
        assert_ne!(
            lines(r#"{"balance_wei": 100000000000000000000000}"#),
            lines(r#"{"balance_wei": 100000000000000000001000}"#)
        );
    }

    #[test]
    fn a_nested_document_is_told_from_flat_lines_and_dumps() {
        let methods = r#"{"payment_methods": {"pm_1": {"default": true}, "pm_2": {"default": false}}}"#;
        assert!(is_nested(&lines(methods).unwrap()));
        assert!(is_nested(&lines("[500, 100]").unwrap()));
        assert!(is_nested(&lines(r#"{"a:b": [1], "c": {}}"#).unwrap()));
        assert!(!is_nested(&lines(r#"{"balance": 200}"#).unwrap()), "flat");
        assert!(!is_nested("balance: 200\nemails: 3\n"));
        assert!(!is_nested(" id | amount\n----+-------\n  1 |    100\n"), "a psql dump");
        assert!(!is_nested("rows: [2]\n  - 1\n"), "an entry short");
    }

    #[test]
    fn a_byte_order_mark_before_the_document_is_no_part_of_it() {
        assert_eq!(lines("\u{feff}{\"balance\": 5}\n").unwrap(), "balance: 5\n");
    }

    #[test]
    fn what_is_not_a_json_document_is_left_alone() {
        assert_eq!(lines("balance: 200\n"), None);
        assert_eq!(lines("42"), None, "a bare number reads as it is");
        assert_eq!(lines("{not json"), None);
    }
}
