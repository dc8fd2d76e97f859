//! What a tunnel name may look like: the relay enforces it, and the client
//! checks a requested name before it connects, so a mistake is told as one.

/// Longest tunnel name (one DNS label).
pub const MAX_NAME_LEN: usize = 63;

/// Why a requested name cannot be used; none when it can.
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

#[cfg(test)]
mod tests {
    use super::*;

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
