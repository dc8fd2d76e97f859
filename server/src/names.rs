//! Tunnel names: what a valid one looks like and how random ones are made.

use rand::Rng;

/// Longest tunnel name (one DNS label).
pub const MAX_NAME_LEN: usize = 63;

const ADJECTIVES: &[&str] = &[
    "amber", "bold", "brave", "brisk", "calm", "clever", "cosy", "crisp", "eager", "fair", "fond", "gentle", "glad",
    "grand", "happy", "jolly", "keen", "kind", "lively", "lucky", "merry", "mild", "neat", "noble", "proud", "quick",
    "quiet", "rapid", "shy", "sunny", "swift", "tidy", "vivid", "warm", "wise", "witty",
];

const ANIMALS: &[&str] = &[
    "badger", "beaver", "bison", "crane", "eagle", "ferret", "finch", "fox", "gecko", "heron", "ibex", "koala",
    "lemur", "lynx", "marten", "mole", "moose", "newt", "otter", "owl", "panda", "puffin", "quail", "raven", "robin",
    "seal", "shrew", "stoat", "swan", "tapir", "tern", "toad", "trout", "vole", "walrus", "wren",
];

/// Why a requested name cannot be used.
pub fn invalid_reason(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Some(format!("a tunnel name has 1 to {MAX_NAME_LEN} characters"));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !name.chars().all(allowed) {
        return Some("a tunnel name uses only lowercase letters, digits and '-'".to_string());
    }
    // A name is also a DNS label under --domain.
    if name.starts_with('-') || name.ends_with('-') {
        return Some("a tunnel name starts and ends with a letter or digit".to_string());
    }
    None
}

/// True when `name` may name a tunnel.
pub fn is_valid(name: &str) -> bool {
    invalid_reason(name).is_none()
}

/// A readable random name with 64 bits of randomness, e.g. `calm-otter-3f9a2c1b7e5d4a10`.
pub fn random() -> String {
    let mut rng = rand::thread_rng();
    let adjective = ADJECTIVES[rng.gen_range(0..ADJECTIVES.len())];
    let animal = ANIMALS[rng.gen_range(0..ANIMALS.len())];
    let secret: u64 = rng.gen();
    format!("{adjective}-{animal}-{secret:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_names_are_valid_and_distinct() {
        let a = random();
        let b = random();
        assert!(is_valid(&a), "{a}");
        assert_ne!(a, b);
        let hex = a.rsplit('-').next().unwrap();
        assert_eq!(hex.len(), 16, "64 bits of hex in {a}");
    }

    #[test]
    fn validation_rejects_what_dns_and_paths_cannot_carry() {
        assert!(is_valid("my-app-2"));
        assert!(is_valid(&"a".repeat(63)));
        assert!(!is_valid(""));
        assert!(!is_valid(&"a".repeat(64)));
        assert!(!is_valid("My-App"));
        assert!(!is_valid("a.b"));
        assert!(!is_valid("a/b"));
        assert!(!is_valid("ä"));
        assert!(
            !is_valid("-x-") && !is_valid("-x") && !is_valid("x-"),
            "not a DNS label"
        );
    }
}
