//! Whatever bytes a webhook carries, what the sanitiser prints holds no
//! escape, C0 or C1 control character (only line breaks, where kept).
#![no_main]

use libfuzzer_sys::fuzz_target;
use portpreview_shared::sanitize::{escape_bytes, escape_multiline, escape_str};

fn is_control(c: char) -> bool {
    c.is_control()
}

fuzz_target!(|data: &[u8]| {
    let shown = escape_bytes(data);
    assert!(
        !shown.chars().any(|c| is_control(c) && c != '\n'),
        "escape_bytes let a control character through"
    );
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(
            !escape_str(text).chars().any(is_control),
            "escape_str let a control character through"
        );
        assert!(
            !escape_multiline(text).chars().any(|c| is_control(c) && c != '\n'),
            "escape_multiline let a control character through"
        );
    }
});
