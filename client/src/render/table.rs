//! The `history` table: one sanitised line per delivery.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::pad;

use super::mask::shown_path;
use crate::store::Summary;
use crate::time::rfc3339_ms;

/// Widest path shown before it is cut with `…`.
const PATH_WIDTH: usize = 40;
/// Widest event key shown before it is cut with `…`: a UUID fits whole.
const KEY_WIDTH: usize = 36;
/// Widest event type shown before it is cut with `…`: most fit whole
/// (`invoice.payment_action_required`), and a cut one is taken back by
/// `--type`.
const TYPE_WIDTH: usize = 32;

/// The table's header line, over lines of [`line()`], newest first.
pub fn header() -> String {
    format!(
        "{:>7}  {:<24}  {:<7} {:<PATH_WIDTH$} {:>6} {:>10}  {:<17} {:<TYPE_WIDTH$} {:<KEY_WIDTH$} {:>8}\n",
        "ID", "RECEIVED", "METHOD", "PATH", "STATUS", "DURATION", "PROVIDER", "TYPE", "EVENT", "DELIVERY"
    )
}

/// One delivery as a table line; `number` is its place among its event's
/// deliveries, shown as `2 of 3` when the event came more than once.
/// Credentials in the path's query are masked unless `reveal`.
pub fn line(s: &Summary, number: Option<i64>, reveal: bool) -> String {
    let status = match (s.status, &s.error, s.duration_ms) {
        (Some(status), _, _) => status.to_string(),
        (None, Some(_), _) => "error".into(),
        (None, None, None) => "…".into(),
        (None, None, Some(_)) => "-".into(),
    };
    let duration = s
        .duration_ms
        .map_or_else(|| "-".into(), |ms| crate::time::ShortDuration(ms).to_string());
    let provider = s.provider.as_deref().unwrap_or("-");
    let kind = s.event_type.as_deref().unwrap_or("-");
    let event = match s.replay_of {
        Some(original) => format!("replay of #{original}"),
        None => escape_str(&s.event_key).into_owned(),
    };
    // A replay attempt is no delivery of the provider's: it has no place
    // among them.
    let delivery = match (number, s.delivery_count) {
        _ if s.replay_of.is_some() => "-".to_string(),
        (Some(number), count) if count > 1 => format!("{number} of {count}"),
        (_, count) => count.to_string(),
    };
    // Untrusted cells are cut and padded in columns, not characters: `{:<40}`
    // counts a CJK character as one column and a combining mark as one,
    // and would push or pull every later column out of line.
    format!(
        "{:>7}  {:<24}  {} {} {:>6} {:>10}  {} {} {} {:>8}",
        format!("#{}", s.id),
        rfc3339_ms(s.received_at_ms),
        pad(&escape_str(&s.method), 7),
        pad(&escape_str(&shown_path(&s.path, reveal)), PATH_WIDTH),
        status,
        duration,
        pad(&escape_str(provider), 17),
        pad(&escape_str(kind), TYPE_WIDTH),
        pad(&event, KEY_WIDTH),
        delivery,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> Summary {
        Summary {
            id: 12,
            received_at_ms: 1_700_000_000_000,
            method: "POST".into(),
            path: "/webhooks/\x1b[31mstripe".into(),
            status: Some(200),
            duration_ms: Some(14.2),
            provider: Some("stripe".into()),
            event_type: Some("invoice.paid".into()),
            event_key: "evt_1NqLongLongLongLongLongLongLongLongLong".into(),
            event_key_source: "body:/id".into(),
            event_scope: String::new(),
            delivery_count: 2,
            error: None,
            replay_of: None,
        }
    }

    #[test]
    fn a_line_is_safe_and_cut() {
        let shown = line(&summary(), Some(1), false);
        assert!(
            shown.contains("#12") && shown.contains(" 200 ") && shown.contains("14 ms"),
            "{shown}"
        );
        assert!(
            shown.contains("\\x1b[31mstripe") && !shown.contains('\u{1b}'),
            "{shown}"
        );
        assert!(shown.contains("evt_1NqLong") && shown.contains('…'), "{shown}");
    }

    #[test]
    fn wide_and_combining_text_keeps_the_columns_in_line() {
        let header = header();
        let status_at = header.find("STATUS").expect("a STATUS column") + "STATUS".len();
        let delivery_at = header.find("DELIVERY").expect("a DELIVERY column") + "DELIVERY".len();
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        for (path, key) in [
            ("/漢字漢字漢字漢字".to_owned(), "evt_漢字".to_owned()),
            (
                "/漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字".to_owned(),
                "漢".repeat(30),
            ),
            (
                format!("/e{}", "\u{301}".repeat(50)),
                format!("evt_e{}", "\u{301}".repeat(50)),
            ),
            (format!("/{}", family.repeat(30)), family.repeat(30)),
        ] {
            let row = Summary {
                path: path.clone(),
                event_key: key,
                ..summary()
            };
            let shown = line(&row, Some(1), false);
            let columns_to = |needle: &str| {
                let at = shown.find(needle).expect("the cell is shown");
                portpreview_shared::text::columns(&shown[..at + needle.len()])
            };
            assert_eq!(columns_to(" 200"), status_at, "STATUS under its header: {shown}");
            assert_eq!(columns_to("1 of 2"), delivery_at, "DELIVERY under its header: {shown}");
            assert!(
                !shown.replace(family, "").contains('\u{200d}'),
                "no emoji cut in half: {shown}"
            );
        }
    }

    #[test]
    fn errors_show_as_such() {
        let failed = Summary {
            status: None,
            error: Some("refused".into()),
            ..summary()
        };
        assert!(line(&failed, Some(1), false).contains("error"));
    }

    #[test]
    fn a_replay_attempt_has_no_place_among_the_deliveries() {
        let attempt = Summary {
            replay_of: Some(3),
            ..summary()
        };
        let shown = line(&attempt, None, false);
        assert!(shown.contains("replay of #3"), "{shown}");
        assert!(shown.trim_end().ends_with(" -"), "{shown}");
        assert!(line(&summary(), Some(2), false).trim_end().ends_with("2 of 2"));
    }
}
