//! Tunnel names: how random ones are made, the rule every name follows, and how a Host names one.

use rand::Rng;

pub use portpreview_shared::name::{host_name, invalid_reason, is_valid};

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

/// A readable random name with 64 bits of randomness, e.g. `calm-otter-3f9a2c1b7e5d4a10`.
pub fn random() -> String {
    let mut rng = rand::thread_rng();
    let adjective = ADJECTIVES[rng.gen_range(0..ADJECTIVES.len())];
    let animal = ANIMALS[rng.gen_range(0..ANIMALS.len())];
    let secret: u64 = rng.gen();
    format!("{adjective}-{animal}-{secret:016x}")
}

/// The refusal of an invalid name, quoting no more of it than a valid
/// name could hold: the reason must fit a WebSocket close frame.
pub fn refusal(name: &str, why: &str) -> String {
    let quoted = portpreview_shared::text::shorten(name, portpreview_shared::name::MAX_NAME_LEN + 1);
    format!("name {quoted:?} is not valid: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_quotes_only_the_start_of_a_long_name() {
        let long = "a".repeat(5000);
        let why = invalid_reason(&long).unwrap();
        assert_eq!(
            refusal(&long, &why),
            format!(
                "name \"{}…\" is not valid: a tunnel name has 1 to 63 characters",
                "a".repeat(63)
            )
        );
        assert_eq!(refusal("Bad", "lowercase"), "name \"Bad\" is not valid: lowercase");
    }

    #[test]
    fn random_names_are_valid_and_distinct() {
        let a = random();
        let b = random();
        assert!(is_valid(&a), "{a}");
        assert_ne!(a, b);
        let hex = a.rsplit('-').next().unwrap();
        assert_eq!(hex.len(), 16, "64 bits of hex in {a}");
    }

    /// A name is all that stands between a caller and someone else's
    /// tunnel on an open relay: one that repeats, or whose random part
    /// hardly varies, can be guessed.
    #[test]
    fn a_thousand_random_names_never_repeat_and_their_random_part_varies() {
        let names: Vec<String> = (0..1000).map(|_| random()).collect();
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "a name came twice");
        let random_part = |name: &str| name.rsplit('-').next().unwrap().to_owned();
        // Each hex digit is as likely as any other at every place: among
        // 1000 names, a place shows at most 8 of the 16 only if the random
        // part is stuck or barely random.
        for digit in [0, 7, 15] {
            let seen: std::collections::HashSet<char> = names
                .iter()
                .map(|name| random_part(name).chars().nth(digit).unwrap())
                .collect();
            assert!(seen.len() > 8, "digit {digit} of the random part took only {seen:?}");
        }
    }
}
