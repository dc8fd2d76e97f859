//! The tokens file: which clients may connect and which names they own.
//!
//! ```toml
//! [[token]]
//! token = "pp_3f9a2c1b7e5d4a10"   # sent as `Authorization: Bearer <token>`
//! label = "alice"                 # optional, shown in logs instead of the token
//! names = ["alice", "alice-api"]  # optional, names only this token may claim
//! ```
//!
//! Unknown keys are refused, so a typo never leaves a relay open by mistake.

use std::collections::HashMap;
use std::path::Path;

use portpreview_shared::toml_file::parse_toml;
use serde::Deserialize;

use crate::error::ConfigError;
use crate::names;

/// Tokens shorter than this many characters can be guessed by a caller who
/// tries many: the relay warns of each when it starts. Sixteen random hex
/// digits are 64 bits, as a tunnel's random name; the warning suggests
/// twice that (`openssl rand -hex 16`).
pub const GUESSABLE_BELOW: usize = 16;

/// Identifies a token without revealing it (its position in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenId(usize);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(deserialize_with = "portpreview_shared::toml_file::secret_string")]
    token: String,
    label: Option<String>,
    #[serde(default)]
    names: Vec<String>,
}

/// Accepted tokens and the names reserved for each.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<Accepted>,
    reserved: HashMap<String, TokenId>,
}

#[derive(Clone)]
struct Accepted {
    secret: Vec<u8>,
    label: String,
}

impl Tokens {
    /// Reads and validates a tokens file.
    pub fn load(path: &Path) -> Result<Tokens, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_toml(&text)
    }

    /// The labels of the tokens shorter than [`GUESSABLE_BELOW`].
    pub fn guessable(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            // Bytes are characters: a token is ASCII.
            .filter(|entry| entry.secret.len() < GUESSABLE_BELOW)
            .map(|entry| entry.label.as_str())
    }

    /// Parses and validates the text of a tokens file.
    pub fn from_toml(text: &str) -> Result<Tokens, ConfigError> {
        let file: File = parse_toml(text).map_err(|e| ConfigError::TokensSyntax(e.to_string()))?;
        if file.token.is_empty() {
            return Err(ConfigError::Tokens("no [[token]] entries: nobody could connect".into()));
        }
        let mut entries = Vec::with_capacity(file.token.len());
        let mut reserved = HashMap::new();
        for (index, entry) in file.token.into_iter().enumerate() {
            let id = TokenId(index);
            let label = entry.label.unwrap_or_else(|| format!("token #{}", index + 1));
            // The label stands for the token in the logs and in the errors
            // below: one line, all of it seen.
            if label.trim() != label
                || label.is_empty()
                // As the logs would show it: an emoji's selector is kept.
                || portpreview_shared::sanitize::escape_str(&label) != label
            {
                return Err(ConfigError::Tokens(format!(
                    "label \"{}\": empty, or with spaces around it or control or invisible characters in it",
                    portpreview_shared::sanitize::escape_str(&label)
                )));
            }
            if entry.token.trim().is_empty() || entry.token.chars().any(char::is_whitespace) {
                return Err(ConfigError::Tokens(format!("{label}: empty token or whitespace in it")));
            }
            // A client sends its token in a header, which carries ASCII
            // alone: such a token could never be presented.
            if !entry.token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ConfigError::Tokens(format!(
                    "{label}: the token holds characters past ASCII or control characters, which no client can send"
                )));
            }
            if entries.iter().any(|e: &Accepted| e.secret == entry.token.as_bytes()) {
                return Err(ConfigError::Tokens(format!("{label}: the same token appears twice")));
            }
            if entries.iter().any(|e| e.label == label) {
                return Err(ConfigError::Tokens(format!(
                    "label {label:?} names two tokens: the logs could not tell them apart"
                )));
            }
            for name in entry.names {
                if let Some(why) = names::invalid_reason(&name) {
                    return Err(ConfigError::Tokens(format!("{label}: name {name:?}: {why}")));
                }
                if reserved.insert(name.clone(), id).is_some_and(|other| other != id) {
                    return Err(ConfigError::Tokens(format!("name {name} is reserved twice")));
                }
            }
            entries.push(Accepted {
                secret: entry.token.into_bytes(),
                label,
            });
        }
        Ok(Tokens { entries, reserved })
    }

    /// The token a client presented, if it is one of ours.
    pub fn check(&self, presented: &str) -> Option<TokenId> {
        // Compare against every entry without stopping early, so timing
        // does not tell how close a guess came.
        let mut found = None;
        for (index, entry) in self.entries.iter().enumerate() {
            if constant_time_eq(&entry.secret, presented.as_bytes()) {
                found = Some(TokenId(index));
            }
        }
        found
    }

    /// The token a name is reserved for, if any.
    pub fn reserved_for(&self, name: &str) -> Option<TokenId> {
        self.reserved.get(name).copied()
    }

    /// The log-safe label of a token.
    pub fn label(&self, id: TokenId) -> &str {
        self.entries.get(id.0).map_or("unknown token", |e| e.label.as_str())
    }
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tokens({} tokens, {} reserved names)",
            self.entries.len(),
            self.reserved.len()
        )
    }
}

/// Compares secrets (tokens, resume secrets) in a time that does not tell
/// where they first differ, only whether their lengths do.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [[token]]
        token = "alpha-secret"
        label = "alice"
        names = ["alice"]

        [[token]]
        token = "beta-secret"
    "#;

    /// A label is refused for what the logs would escape in it, and
    /// taken with an emoji as the logs show it.
    #[test]
    fn a_label_is_judged_as_the_logs_show_it() {
        let file = |label: &str| format!("[[token]]\ntoken = \"0123456789abcdef0123\"\nlabel = \"{label}\"\n");
        assert!(Tokens::from_toml(&file("team \u{2764}\u{fe0f}")).is_ok());
        assert!(Tokens::from_toml(&file("team\u{200b}")).is_err());
        assert!(Tokens::from_toml(&file("team\u{fe0f}")).is_err());
    }

    #[test]
    fn a_token_without_quotes_is_refused_unshown() {
        let Err(err) = Tokens::from_toml("[[token]]\ntoken = 12345678\n") else {
            panic!("an unquoted token was taken");
        };
        let err = err.to_string();
        assert!(
            err.contains("a secret is a quoted string") && !err.contains("12345678"),
            "{err}"
        );
    }

    #[test]
    fn tokens_are_checked_and_names_reserved() {
        let tokens = Tokens::from_toml(FILE).unwrap();
        let alice = tokens.check("alpha-secret").unwrap();
        let beta = tokens.check("beta-secret").unwrap();
        assert_ne!(alice, beta);
        assert_eq!(tokens.check("alpha-secreT"), None);
        assert_eq!(tokens.check(""), None);
        assert_eq!(tokens.reserved_for("alice"), Some(alice));
        assert_eq!(tokens.reserved_for("bob"), None);
        assert_eq!(tokens.label(alice), "alice");
        assert_eq!(tokens.label(beta), "token #2");
    }

    #[test]
    fn short_tokens_are_named_by_their_labels() {
        let tokens = Tokens::from_toml(
            "[[token]]\ntoken = \"a\"\nlabel = \"alice\"\n\
             [[token]]\ntoken = \"pp_3f9a2c1b7e5d4a10\"\nlabel = \"bob\"\n\
             [[token]]\ntoken = \"abcdefghi\"\nlabel = \"carol\"\n",
        )
        .unwrap();
        assert_eq!(tokens.guessable().collect::<Vec<_>>(), ["alice", "carol"]);
    }

    #[test]
    fn debug_never_shows_a_token() {
        let tokens = Tokens::from_toml(FILE).unwrap();
        assert!(!format!("{tokens:?}").contains("secret"));
    }

    #[test]
    fn a_list_of_bare_tokens_is_told_the_files_shape() {
        let err = Tokens::from_toml("pp_alice_secret\npp_bob_secret\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid tokens file: line 1"), "{err}");
        assert!(err.contains("[[token]] then token = \"...\""), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_entries_are_refused() {
        for bad in [
            "[[token]]\ntoken = \"a\"\nnmaes = [\"x\"]\n",
            "[[tokens]]\ntoken = \"a\"\n",
            "open = true\n",
            "",
            "[[token]]\ntoken = \"\"\n",
            "[[token]]\ntoken = \"a\"\nnames = [\"Not Valid\"]\n",
            "[[token]]\ntoken = \"a\"\n[[token]]\ntoken = \"a\"\n",
            "[[token]]\ntoken = \"a\"\nnames = [\"x\"]\n[[token]]\ntoken = \"b\"\nnames = [\"x\"]\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"ci\"\n[[token]]\ntoken = \"b\"\nlabel = \"ci\"\n",
            "[[token]]\ntoken = \"a\"\n[[token]]\ntoken = \"b\"\nlabel = \"token #1\"\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"\"\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"alice \"\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"x\\n2026 INFO fake\"\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"\\u200balice\"\n",
            "[[token]]\ntoken = \"a\"\nlabel = \"x\\u2028y\"\n",
            "[[token]]\ntoken = \"\"\nlabel = \"evil\\nINFO fake\"\n",
            "[[token]]\ntoken = \"pp_s3cr3t-\u{fc}nicode\"\n",
            "[[token]]\ntoken = \"pp_s3cr3t\\u0007bell\"\n",
        ] {
            assert!(Tokens::from_toml(bad).is_err(), "accepted {bad:?}");
        }
    }
}
