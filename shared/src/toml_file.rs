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

/// Reads a secret (a token, a signing secret), which must be a string,
/// refusing any other value without quoting it: the error ends up on a
/// terminal or in a CI log, and a token written without quotes
/// (`token = 12345678`) is still the token. Use with
/// `#[serde(deserialize_with = "…")]`.
pub fn secret_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match <toml::Value as serde::Deserialize>::deserialize(deserializer)? {
        toml::Value::String(secret) => Ok(secret),
        _ => Err(serde::de::Error::custom(UNQUOTED_SECRET)),
    }
}

/// What a secret that is no string is told, its value left out.
const UNQUOTED_SECRET: &str = "a secret is a quoted string; put this one in quotes (its value is not shown)";

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret written without quotes is refused, and not quoted back.
    #[test]
    fn a_secret_that_is_no_string_is_refused_unshown() {
        #[derive(Debug, serde::Deserialize)]
        struct Secrets {
            #[serde(deserialize_with = "secret_string")]
            #[allow(dead_code)]
            token: String,
        }
        for value in ["12345678", "9876543210.98765", "true", "98765432109876543"] {
            let err = parse_toml::<Secrets>(&format!("token = {value}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("a secret is a quoted string"), "{err}");
            assert!(!err.contains(value), "{err}");
        }
        let quoted = parse_toml::<Secrets>("token = \"12345678\"\n").unwrap();
        assert_eq!(quoted.token, "12345678");
    }

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
