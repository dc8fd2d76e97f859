//! A listing's filters as the SQL condition that applies them.

use rusqlite::types::Value;

use super::{ListQuery, StatusWord};

/// The SQL condition and its parameters for a listing.
pub(super) fn where_clause(q: &ListQuery) -> (String, Vec<Value>) {
    let mut terms = vec!["1".to_owned()];
    let mut values = Vec::new();
    if let Some(before) = q.before_id {
        terms.push("d.id < ?".into());
        values.push(Value::Integer(before));
    }
    if let Some(after) = q.after_id {
        terms.push("d.id > ?".into());
        values.push(Value::Integer(after));
    }
    if !q.providers.is_empty() {
        let any: Vec<&str> = q
            .providers
            .iter()
            .map(|provider| match provider.as_str() {
                super::UNKNOWN_PROVIDER => "d.provider IS NULL",
                named => {
                    values.push(Value::Text(named.to_owned()));
                    "d.provider = ?"
                }
            })
            .collect();
        terms.push(format!("({})", any.join(" OR ")));
    }
    // A key as the table shows it, cut and ending in `…`, matches the keys
    // it is the start of.
    match q.event_key.as_deref().map(|key| (key, key.strip_suffix('…'))) {
        Some((_, Some(start))) if !start.is_empty() => {
            let (low, high) = key_range(start);
            terms.push("d.event_key >= ? AND d.event_key < ?".into());
            values.push(Value::Text(low));
            values.push(Value::Text(high));
        }
        Some((key, _)) => {
            terms.push("d.event_key = ?".into());
            values.push(Value::Text(key.to_owned()));
        }
        None => {}
    }
    if let Some(wanted) = &q.event_type {
        terms.push(format!(
            "EXISTS (SELECT 1 FROM event_types t WHERE t.delivery_id = d.id AND {TYPE_MATCHES})"
        ));
        values.extend(type_globs(wanted).map(Value::Text));
    }
    if !q.status.is_empty() {
        let mut any = Vec::new();
        for word in &q.status {
            let (condition, params) = word.condition();
            any.push(condition);
            values.extend(params);
        }
        terms.push(format!("({})", any.join(" OR ")));
    }
    if let Some(since) = q.received_since_ms {
        // No index: a walk down the ids reads the time beside each, as a
        // provider filter does, and never a body.
        terms.push("d.received_at_ms >= ?".into());
        values.push(Value::Integer(since));
    }
    if !q.include_replays {
        terms.push("d.replay_of IS NULL".into());
    }
    // After the cheaper tests, so the glob sees only the rows they leave.
    if let Some(glob) = &q.path {
        terms.push(format!("{}(?, d.path)", super::functions::PATH_GLOB));
        values.push(Value::Text(glob.clone()));
    }
    for term in search_terms(q.search.as_deref().unwrap_or_default()) {
        match term {
            SearchTerm::Status(word) => {
                let (condition, params) = word.condition();
                terms.push(condition.into());
                values.extend(params);
            }
            SearchTerm::Text(text) => {
                // Numbered as their places in `values`, as every bare `?`
                // is: SQLite numbers a bare `?` one past the largest number
                // given so far, so the terms after these still bind in order.
                let n = values.len() + 1;
                let b = n + 1;
                // Retries and replays share one stored copy of a large body:
                // searched once in `bodies`, not once for every row using it.
                // LIKE reads a body as text, which ends at its first NUL byte:
                // past one, as in a binary body, the bytes are searched as
                // they are (`instr`), in the case typed. Header lists are
                // stored encoded, their values as sent among length bytes:
                // read the same two ways.
                let either_way =
                    |column: &str| format!("CAST({column} AS TEXT) LIKE ?{n} ESCAPE '\\' OR instr({column}, ?{b}) > 0");
                terms.push(format!(
                    "(d.path LIKE ?{n} ESCAPE '\\' OR d.method LIKE ?{n} ESCAPE '\\'
                      OR d.provider LIKE ?{n} ESCAPE '\\' OR d.event_key LIKE ?{n} ESCAPE '\\'
                      OR EXISTS (SELECT 1 FROM event_types t WHERE t.delivery_id = d.id
                          AND t.event_type LIKE ?{n} ESCAPE '\\')
                      OR o.error LIKE ?{n} ESCAPE '\\'
                      OR {} OR {} OR {} OR {}
                      OR d.request_body_id IN (SELECT id FROM bodies WHERE {})
                      OR o.response_body_id IN (SELECT id FROM bodies WHERE {}))",
                    either_way("d.request_body"),
                    either_way("d.request_headers"),
                    either_way("o.response_body"),
                    either_way("o.response_headers"),
                    either_way("data"),
                    either_way("data"),
                ));
                values.push(Value::Text(format!("%{}%", escape_like(text))));
                values.push(Value::Blob(text.as_bytes().to_vec()));
            }
        }
    }
    (terms.join(" AND "), values)
}

/// The condition on an event type `t` that [`type_globs`] fill in, in order.
pub(super) const TYPE_MATCHES: &str = "(t.event_type GLOB ? OR t.event_type GLOB ? OR t.event_type GLOB ?)";

/// An event type as SQLite's GLOB reads it, three ways for
/// [`TYPE_MATCHES`]: `*` and `?` as written, a `[` as itself (as `--path`
/// takes it, so that one glob syntax holds), and a type the table showed
/// cut, ending in `…`, as the types it begins. A type written whole names
/// the types under it too: `pull_request` is also GitHub's
/// `pull_request.opened`, `invoice` Stripe's `invoice.paid`, `orders`
/// Shopify's `orders/create`.
pub(super) fn type_globs(wanted: &str) -> [String; 3] {
    if let Some(start) = wanted.strip_suffix('…') {
        let glob = format!("{}*", start.replace('[', "[[]"));
        return [glob.clone(), glob.clone(), glob];
    }
    let glob = wanted.replace('[', "[[]");
    if wanted.contains(['*', '?']) {
        return [glob.clone(), glob.clone(), glob];
    }
    [format!("{glob}.*"), format!("{glob}/*"), glob]
}

/// One word of a search; all words must match. A status is matched as a
/// status only: `502` finding every event key with 502 in its hash would
/// bury the one delivery that failed.
#[derive(Debug, PartialEq)]
enum SearchTerm<'a> {
    /// `404`, `5xx`, `err`: how the delivery was answered.
    Status(StatusWord),
    /// Anything else, in the path, method, provider, event type, event key,
    /// error, a header value or either body.
    Text(&'a str),
}

impl<'a> SearchTerm<'a> {
    fn parse(word: &'a str) -> Self {
        StatusWord::parse(word).map_or(Self::Text(word), Self::Status)
    }
}

/// The terms of a search: its words, split at whitespace, except that a
/// run in double quotes is one term of text, spaces and all, and never a
/// status: `"199"` finds an order number in a body, `"err"` a word. A
/// quote left open runs to the end.
fn search_terms(search: &str) -> Vec<SearchTerm<'_>> {
    let mut terms = Vec::new();
    let mut rest = search.trim_start();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let (phrase, after) = quoted.split_once('"').unwrap_or((quoted, ""));
            if !phrase.is_empty() {
                terms.push(SearchTerm::Text(phrase));
            }
            rest = after;
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            terms.push(SearchTerm::parse(&rest[..end]));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
    }
    terms
}

/// The words of `search` read as statuses (`404`, `5xx`, `error`): a
/// search that found nothing says which, as `internal error` reads as
/// the text `internal` in a delivery that got no answer.
pub fn status_words(search: &str) -> Vec<StatusWord> {
    (search_terms(search).into_iter())
        .filter_map(|term| match term {
            SearchTerm::Status(word) => Some(word),
            SearchTerm::Text(_) => None,
        })
        .collect()
}

/// The bounds of the event keys that begin with `start`, as a range the
/// event key index can walk: the last character there is, U+10FFFF, ends it.
pub(super) fn key_range(start: &str) -> (String, String) {
    (start.to_owned(), format!("{start}\u{10FFFF}"))
}

/// Makes `%`, `_` and `\` match themselves in a LIKE pattern.
fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
