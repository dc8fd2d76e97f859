//! Reading a TOML file with errors told on one line.
//!
//! The `toml` crate's own message spans several lines with an excerpt of
//! the file; a command's error is one line, so the position is given
//! instead: "line 4, column 1: unknown field `timez`, …".

/// Why a TOML file was refused, on one line: "line 4, column 1: unknown field `timez`, …".
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", where_in_file(*.line_column))]
pub struct TomlError {
    /// 1-based line and column of the offending text, when known.
    line_column: Option<(usize, usize)>,
    /// What the parser said, without its source excerpt.
    message: String,
}

fn where_in_file(line_column: Option<(usize, usize)>) -> String {
    line_column.map_or_else(String::new, |(line, column)| format!("line {line}, column {column}: "))
}

/// Parses a TOML file's text, refusing it with a [`TomlError`].
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, TomlError> {
    toml::from_str(text).map_err(|err: toml::de::Error| {
        let line_column = err.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (line, column)
        });
        let message = crate::text::plain_types(&err.message().split_whitespace().collect::<Vec<_>>().join(" "));
        TomlError { line_column, message }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Config {
        server: Option<String>,
        token: Option<String>,
    }

    #[test]
    fn a_toml_error_is_one_line_with_its_position() {
        let err = parse_toml::<Config>("server = \"ws://x\"\n\nsever = \"typo\"\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("line 3, column 1: unknown field `sever`, expected"),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Counted {
        times: u32,
    }

    #[test]
    fn a_number_given_as_text_is_told_in_plain_words() {
        let err = parse_toml::<Counted>("times = \"3\"\n").unwrap_err().to_string();
        assert!(err.contains("expected a whole number") && !err.contains("u32"), "{err}");
    }
}
