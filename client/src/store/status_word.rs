//! Words that name deliveries by their answer: `404`, `5xx`, `err`. The
//! TUI's `/` filter and `history --status` read them alike.

use rusqlite::types::Value;

/// Deliveries named by how they were answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusWord {
    /// `404`: answered with exactly this status.
    Exact(u16),
    /// `5xx`: answered with a status of this class (its first digit).
    Class(u8),
    /// `err`, `error`: no status, only an error (refused, timed out, turned
    /// away by the relay), as the table shows it. An answer that broke off
    /// after its status keeps that status, and is found by it.
    Failed,
}

impl StatusWord {
    /// The status word `word` is, case-insensitively; `None` for any other
    /// word.
    pub fn parse(word: &str) -> Option<Self> {
        match word.as_bytes() {
            [first @ b'1'..=b'5', rest @ ..] if rest.eq_ignore_ascii_case(b"xx") => Some(Self::Class(first - b'0')),
            [b'1'..=b'5', b'0'..=b'9', b'0'..=b'9'] => word.parse().ok().map(Self::Exact),
            _ if word.eq_ignore_ascii_case("err") || word.eq_ignore_ascii_case("error") => Some(Self::Failed),
            _ => None,
        }
    }

    /// The SQL condition on the answer `o` (a `LEFT JOIN` of `outcomes`),
    /// with its parameters in order.
    pub(super) fn condition(self) -> (&'static str, Vec<Value>) {
        match self {
            Self::Exact(status) => ("o.status = ?", vec![Value::Integer(status.into())]),
            Self::Class(first) => {
                let low = i64::from(first) * 100;
                (
                    "o.status BETWEEN ? AND ?",
                    vec![Value::Integer(low), Value::Integer(low + 99)],
                )
            }
            // An answer still awaited has no outcome row yet: it is no failure.
            Self::Failed => ("(o.status IS NULL AND o.error IS NOT NULL)", Vec::new()),
        }
    }
}

impl std::fmt::Display for StatusWord {
    /// The word as a user types it: `404`, `5xx`, `error`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact(status) => write!(f, "{status}"),
            Self::Class(first) => write!(f, "{first}xx"),
            Self::Failed => f.write_str("error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classes_and_failures_are_told_from_other_words() {
        let read: Vec<Option<StatusWord>> = ["404", "5xx", "2XX", "err", "ERROR", "100", "599"]
            .into_iter()
            .map(StatusWord::parse)
            .collect();
        assert_eq!(
            read,
            [
                Some(StatusWord::Exact(404)),
                Some(StatusWord::Class(5)),
                Some(StatusWord::Class(2)),
                Some(StatusWord::Failed),
                Some(StatusWord::Failed),
                Some(StatusWord::Exact(100)),
                Some(StatusWord::Exact(599)),
            ]
        );
        for other in [
            "600", "6xx", "0xx", "40", "4040", "4x", "x", "", "errors", " 404", "evt_502",
        ] {
            assert_eq!(StatusWord::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_word_is_written_back_as_typed_in_its_short_form() {
        let written: Vec<String> = ["404", "5XX", "err"]
            .into_iter()
            .map(|word| StatusWord::parse(word).unwrap().to_string())
            .collect();
        assert_eq!(written, ["404", "5xx", "error"]);
    }
}
