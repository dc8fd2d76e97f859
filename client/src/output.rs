//! Deliveries as lines, for `--no-tui` and for stdout that is not a terminal.

use std::io::Write;
use std::time::Duration;

use portpreview_shared::duration::format_duration;
use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::{counted, shorten};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::events::{EventFeed, TunnelEvent};
use crate::render::mask::shown_path;
use crate::store::{Summary, UNKNOWN_PROVIDER};
use crate::time::{ordinal, ShortDuration};

/// Line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per delivery.
    Text,
    /// One JSON object per line.
    Json,
}

/// Longest event key shown whole on a line.
const KEY_WIDTH: usize = 24;

/// Widest event type shown on a line before it is cut with `…`: a real
/// one fits whole.
const TYPE_WIDTH: usize = 40;

/// Longest method shown whole on a line: HTTP's are a few letters, and any
/// token is one, as long as a relay sends it.
const METHOD_WIDTH: usize = 24;

/// Longest path shown whole on a line: a 60 KB query would otherwise
/// be one line of 60,000 characters. `show` has it whole.
const PATH_WIDTH: usize = 200;

/// Failed reconnect tries each get a line up to this many; after that,
/// one in this many does. At the backoff's cap that is about a line a
/// minute, so a tunnel left running against a relay that is down for the
/// night does not fill the terminal with thousands of the same line.
const EVERY_TRY_UNTIL: u32 = 8;

/// How long the output thread lets events gather after writing a burst.
/// Waking it costs the tunnel a cross-thread wake-up; a person reading the
/// lines does not notice a few milliseconds.
const GATHER: Duration = Duration::from_millis(10);

/// How long the last lines get to go out once the tunnel has ended.
const DRAIN: Duration = Duration::from_secs(1);

/// Prints every event until the channel closes.
///
/// The lines are written by a thread of their own. A stdout that nobody
/// reads (a pipe into a pager that is not being scrolled, a terminal on
/// hold) blocks whoever writes to it; on the tunnel's thread that would
/// stop every delivery. Behind such a stdout, events wait in their bounded
/// channel and are then dropped, and the tunnel goes on. Once the tunnel has
/// ended (`ended` fires), the lines still queued get `DRAIN` to go out, so
/// a stdout that nobody reads never keeps the process from exiting.
pub async fn print_events(events: EventFeed, format: LogFormat, ended: CancellationToken) {
    let (done, printed) = oneshot::channel::<()>();
    let spawned = std::thread::Builder::new().name("output".into()).spawn(move || {
        write_events(events, format);
        let _ = done.send(());
    });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the output thread; deliveries are not printed");
        ended.cancelled().await;
        return;
    }
    let drained = async {
        ended.cancelled().await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        _ = printed => {}
        () = drained => tracing::debug!("stdout is not being read; the last lines are dropped"),
    }
}

/// Writes every event until the channel closes, flushing once per burst of
/// ready events rather than once per line. Blocks: runs on its own thread.
fn write_events(mut events: EventFeed, format: LogFormat) {
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    // Set when the relay connection was lost: with stdout in a file, the
    // reconnecting lines on stderr would otherwise end on a failure.
    let mut lost = false;
    while let Some(first) = events.blocking_recv() {
        let mut next = Some(first);
        while let Some(event) = next {
            match (&event, format) {
                (TunnelEvent::Disconnected { .. }, _) => lost = true,
                (TunnelEvent::Connected { public_url, .. }, LogFormat::Text) if std::mem::take(&mut lost) => {
                    let _ = stdout.flush();
                    crate::to_stderr(format_args!("reconnected: forwarding {public_url} again\n"));
                }
                _ => {}
            }
            let line = match format {
                LogFormat::Text => text_line(&event),
                LogFormat::Json => json_line(&event).map(Line::Out),
            };
            match line {
                // A request in flight: its line comes with its answer.
                None => {}
                // A closed stdout (a pipe into `head`) must not stop the tunnel.
                Some(Line::Out(line)) => {
                    let _ = writeln!(stdout, "{line}");
                }
                Some(Line::Err(line)) => {
                    // What went to stdout before it comes first where both
                    // reach one terminal or file (`2>&1`).
                    let _ = stdout.flush();
                    crate::to_stderr(format_args!("{line}\n"));
                }
            }
            next = events.try_recv();
        }
        let _ = stdout.flush();
        std::thread::sleep(GATHER);
    }
}

/// A line for the user, and where it goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// To stdout: what a script reading the output wants.
    Out(String),
    /// To stderr: news about the connection, not a delivery.
    Err(String),
}

/// The text form of an event; none for a request still in flight.
pub fn text_line(event: &TunnelEvent) -> Option<Line> {
    let line = match event {
        TunnelEvent::Connected {
            public_url,
            also_url,
            target,
        } => Line::Out(match also_url {
            Some(also) => format!("Forwarding {public_url} (also {also}) -> {target}"),
            None => format!("Forwarding {public_url} -> {target}"),
        }),
        TunnelEvent::Waiting { .. } => return None,
        TunnelEvent::Stopping { in_flight, within } if within.is_zero() => Line::Err(format!(
            "stopping now: {} in flight {} cut off",
            counted(*in_flight, "request", "requests"),
            if *in_flight == 1 { "is" } else { "are" },
        )),
        TunnelEvent::Stopping { in_flight, within } => Line::Err(format!(
            "stopping: {} in flight {} up to {} to finish; a second signal (ctrl-c, SIGTERM) stops at once",
            counted(*in_flight, "request", "requests"),
            if *in_flight == 1 { "gets" } else { "get" },
            format_duration(*within)
        )),
        TunnelEvent::HistoryRefusing { reason: Some(reason) } => Line::Err(format!(
            // Not "in its inbox": a full disk refuses that too, as said just before.
            "the history refuses writes ({}); deliveries wait to be stored, and are shown once they are; the tunnel keeps forwarding",
            escape_str(reason)
        )),
        TunnelEvent::HistoryRefusing { reason: None } => Line::Err("the history takes deliveries again".into()),
        TunnelEvent::NotRecording { reason: Some(reason) } => Line::Err(format!(
            "deliveries are not recorded ({}); the tunnel keeps forwarding",
            escape_str(reason)
        )),
        TunnelEvent::NotRecording { reason: None } => Line::Err("deliveries are recorded again".into()),
        TunnelEvent::Notice { text } | TunnelEvent::HeldBack { text } => {
            Line::Err(format!("warning: {}", escape_str(text)))
        }
        TunnelEvent::Missed { count } => Line::Err(format!(
            "warning: {} not printed, as stdout was read more slowly than they came; `portpreview history` lists \
             the recorded deliveries",
            counted(*count, "line", "lines")
        )),
        TunnelEvent::Disconnected {
            reason,
            failed_tries,
            retry_in,
        } => {
            // Jittered to the nanosecond: written as the deliveries' times are.
            let retry_in = ShortDuration::from(*retry_in);
            let reason = escape_str(reason);
            Line::Err(match *failed_tries {
                0 => format!("relay connection lost ({reason}); reconnecting in {retry_in}"),
                n if n < EVERY_TRY_UNTIL || n % EVERY_TRY_UNTIL == 0 => {
                    let from_now = if n == EVERY_TRY_UNTIL {
                        format!(", and from now on a line every {EVERY_TRY_UNTIL} tries")
                    } else {
                        String::new()
                    };
                    format!("still reconnecting: try {n} failed ({reason}); next in {retry_in}{from_now}")
                }
                _ => return None,
            })
        }
        TunnelEvent::Delivered {
            summary,
            delivery_number,
        } => Line::Out(delivery_line(summary, *delivery_number)),
        // Its number among its event's deliveries was on the line it amends.
        TunnelEvent::Amended { summary, .. } => Line::Out(format!("{}  (amended)", delivery_line(summary, 1))),
    };
    Some(line)
}

/// `#12  POST /webhooks/stripe  200  14 ms  stripe invoice.paid evt_1Nq… (2nd delivery)`
pub fn delivery_line(summary: &Summary, delivery_number: i64) -> String {
    use std::fmt::Write as _;
    // Written into one string as it goes, not put together from a string
    // for each part: a line is written for every delivery. Writing to a
    // String cannot fail.
    let mut line = String::with_capacity(96);
    match summary.id {
        id if id > 0 => _ = write!(line, "#{id}"),
        _ => line.push_str("#-"),
    }
    line.push_str("  ");
    line.push_str(&shorten(&escape_str(&summary.method), METHOD_WIDTH));
    line.push(' ');
    line.push_str(&shorten(&escape_str(&shown_path(&summary.path, false)), PATH_WIDTH));
    line.push_str("  ");
    match summary.status {
        Some(status) => _ = write!(line, "{status}"),
        None => line.push_str("---"),
    }
    line.push_str("  ");
    if let Some(ms) = summary.duration_ms {
        _ = write!(line, "{}", ShortDuration(ms));
    }
    if let Some(provider) = &summary.provider {
        _ = write!(line, "  {provider}");
        if let Some(kind) = &summary.event_type {
            _ = write!(line, " {}", shorten(&escape_str(kind), TYPE_WIDTH));
        }
        if !summary.event_key.is_empty() {
            _ = write!(line, " {}", shorten(&escape_str(&summary.event_key), KEY_WIDTH));
        }
        if delivery_number > 1 {
            _ = write!(line, " ({} delivery)", ordinal(delivery_number));
        }
    } else if let Some(kind) = &summary.event_type {
        // Named as `--provider unknown` names such senders: a type alone
        // where a provider goes (`{"event":"github"}`) reads as one.
        _ = write!(line, "  {UNKNOWN_PROVIDER} {}", shorten(&escape_str(kind), TYPE_WIDTH));
    }
    if summary.provider.is_none() && delivery_number > 1 {
        // No provider, no event ID: say what made it the same event.
        let same = if summary.event_key_source.starts_with("sha256:fields") {
            "same key fields"
        } else {
            // Fields that change per attempt (a timestamp) left out.
            "same content"
        };
        _ = write!(line, "  ({} delivery, {same})", ordinal(delivery_number));
    }
    if let Some(error) = &summary.error {
        _ = write!(line, "  error: {}", escape_str(error));
    }
    line
}

/// The JSON form of an event, one object per line; none for a request
/// still in flight.
pub fn json_line(event: &TunnelEvent) -> Option<String> {
    let value = match event {
        TunnelEvent::Connected {
            public_url,
            also_url,
            target,
        } => json!({
            "event": "tunnel", "public_url": public_url, "also_url": also_url, "target": target,
        }),
        TunnelEvent::Waiting { .. } => return None,
        TunnelEvent::Stopping { in_flight, within } => json!({
            "event": "stopping", "in_flight": in_flight, "within_ms": within.as_millis() as u64,
        }),
        TunnelEvent::HistoryRefusing { reason } => json!({
            "event": "history", "refusing_writes": reason.is_some(), "reason": reason,
        }),
        TunnelEvent::NotRecording { reason } => json!({
            "event": "recording", "recording": reason.is_none(), "reason": reason,
        }),
        TunnelEvent::Notice { text } | TunnelEvent::HeldBack { text } => {
            json!({ "event": "warning", "message": text })
        }
        TunnelEvent::Missed { count } => json!({ "event": "missed", "count": count }),
        TunnelEvent::Disconnected {
            reason,
            failed_tries,
            retry_in,
        } => json!({
            "event": "disconnected", "reason": reason, "failed_tries": failed_tries,
            "retry_in_ms": retry_in.as_millis() as u64,
        }),
        TunnelEvent::Amended { summary, .. } => json!({
            "event": "amended",
            "id": summary.id,
            "status": summary.status,
            "error": summary.error,
        }),
        TunnelEvent::Delivered {
            summary,
            delivery_number,
        } => {
            // A delivery that is not in the history (`--no-record`, or its
            // write failed) has no ID, and no event was worked out or
            // counted for it: null, never an ID 0 a script could look up.
            let recorded = summary.id > 0;
            let known = |text: &str| recorded.then(|| text.to_owned());
            json!({
                "event": "delivery",
                "id": recorded.then_some(summary.id),
                "received_at": crate::time::rfc3339_ms(summary.received_at_ms),
                "method": summary.method,
                "path": summary.path,
                "status": summary.status,
                "duration_ms": summary.duration_ms.map(crate::time::round_ms),
                "provider": summary.provider,
                "event_type": summary.event_type,
                "event_key": known(&summary.event_key),
                "event_key_source": known(&summary.event_key_source),
                "delivery_number": recorded.then_some(delivery_number),
                "error": summary.error,
            })
        }
    };
    Some(crate::render::json::to_terminal_line(&value))
}

/// The JSON line that ends the stream when the tunnel cannot go on (the
/// relay refused it, the target is no address): `message` as the text
/// form's `error:` line has it, before escaping.
pub fn json_error_line(message: &str) -> String {
    crate::render::json::to_terminal_line(&json!({ "event": "error", "message": message }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> Summary {
        Summary {
            id: 12,
            received_at_ms: 0,
            method: "POST".into(),
            path: "/webhooks/stripe".into(),
            status: Some(200),
            duration_ms: Some(14.2),
            provider: Some("stripe".into()),
            event_type: Some("invoice.paid".into()),
            event_key: "evt_1NqPortPreviewTestEventKey".into(),
            event_key_source: "body:/id".into(),
            event_scope: String::new(),
            delivery_count: 2,
            error: None,
            replay_of: None,
        }
    }

    #[test]
    fn a_delivery_outside_the_history_has_no_id_and_no_event_in_json() {
        let unrecorded = Summary {
            id: 0,
            provider: None,
            event_key: String::new(),
            event_key_source: String::new(),
            delivery_count: 1,
            ..summary()
        };
        let line = json_line(&TunnelEvent::delivered(unrecorded)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        for field in ["id", "event_key", "event_key_source", "delivery_number"] {
            assert!(value[field].is_null(), "{field}: {line}");
        }
        let line = json_line(&TunnelEvent::delivered(summary())).unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (value["id"].as_i64(), value["event_key_source"].as_str()),
            (Some(12), Some("body:/id"))
        );
    }

    #[test]
    fn an_amended_delivery_is_shown_again_and_says_so() {
        let amended = TunnelEvent::Amended {
            summary: Summary {
                status: None,
                error: Some("the caller went away before the answer".into()),
                ..summary()
            },
            was: 200,
        };
        assert_eq!(
            text_line(&amended),
            Some(Line::Out(
                "#12  POST /webhooks/stripe  ---  14 ms  stripe invoice.paid evt_1NqPortPreviewTestE…  \
                 error: the caller went away before the answer  (amended)"
                    .into()
            ))
        );
        let value: serde_json::Value = serde_json::from_str(&json_line(&amended).unwrap()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "event": "amended", "id": 12, "status": null, "error": "the caller went away before the answer",
            })
        );
    }

    #[test]
    fn a_notice_is_a_warning_on_stderr_and_in_json() {
        let notice = TunnelEvent::Notice {
            text: "--ca-cert is not used\x1b[2J".into(),
        };
        assert_eq!(
            text_line(&notice),
            Some(Line::Err("warning: --ca-cert is not used\\x1b[2J".into()))
        );
        let value: serde_json::Value = serde_json::from_str(&json_line(&notice).unwrap()).unwrap();
        assert_eq!(value["event"], "warning");
        assert_eq!(value["message"], "--ca-cert is not used\x1b[2J");
    }

    #[test]
    fn line_reads_like_the_design() {
        assert_eq!(
            delivery_line(&summary(), 2),
            "#12  POST /webhooks/stripe  200  14 ms  stripe invoice.paid evt_1NqPortPreviewTestE… (2nd delivery)"
        );
        let untyped = Summary {
            event_type: None,
            ..summary()
        };
        assert_eq!(
            delivery_line(&untyped, 1),
            "#12  POST /webhooks/stripe  200  14 ms  stripe evt_1NqPortPreviewTestE…"
        );
        let typed_unknown = Summary {
            provider: None,
            event_type: Some("order.shipped".into()),
            event_key: "0d4725013a4ffc0".into(),
            event_key_source: "sha256:body".into(),
            ..summary()
        };
        assert_eq!(
            delivery_line(&typed_unknown, 2),
            "#12  POST /webhooks/stripe  200  14 ms  unknown order.shipped  (2nd delivery, same content)"
        );
        let unknown = Summary {
            provider: None,
            event_type: None,
            event_key: "0d4725013a4ffc0".into(),
            event_key_source: "sha256:body".into(),
            ..summary()
        };
        assert_eq!(
            delivery_line(&unknown, 3),
            "#12  POST /webhooks/stripe  200  14 ms  (3rd delivery, same content)"
        );
        let by_fields = Summary {
            event_key_source: "sha256:fields(type,/order/id)".into(),
            ..unknown
        };
        assert!(delivery_line(&by_fields, 2).ends_with("  (2nd delivery, same key fields)"));
    }

    #[test]
    fn a_very_long_method_is_cut_on_its_line() {
        let long = Summary {
            method: "G".repeat(50_000),
            ..summary()
        };
        let line = delivery_line(&long, 1);
        assert!(
            line.starts_with(&format!("#12  {}… /webhooks", "G".repeat(23))),
            "{line:.80}"
        );
    }

    #[test]
    fn a_very_long_path_is_cut_on_its_line() {
        let long = Summary {
            method: "GET".into(),
            path: format!("/p?q={}", "a".repeat(60_000)),
            ..summary()
        };
        let line = delivery_line(&long, 1);
        assert!(line.chars().count() < 400, "{}", line.len());
        assert!(
            line.starts_with("#12  GET /p?q=aaa") && line.contains("a…  200"),
            "{line}"
        );
    }

    #[test]
    fn connection_news_goes_to_stderr_and_deliveries_to_stdout() {
        let lost = TunnelEvent::Disconnected {
            reason: "gone".into(),
            failed_tries: 0,
            retry_in: Duration::from_millis(250),
        };
        assert_eq!(
            text_line(&lost),
            Some(Line::Err("relay connection lost (gone); reconnecting in 250 ms".into()))
        );
        let still = TunnelEvent::Disconnected {
            reason: "refused".into(),
            failed_tries: 3,
            retry_in: Duration::from_millis(4_000),
        };
        assert_eq!(
            text_line(&still),
            Some(Line::Err(
                "still reconnecting: try 3 failed (refused); next in 4.0 s".into()
            )),
            "one 'lost' line, then the tries"
        );
        let tries: Vec<u32> = (1..=40)
            .filter(|&failed_tries| {
                let next = TunnelEvent::Disconnected {
                    reason: "refused".into(),
                    failed_tries,
                    retry_in: Duration::from_secs(10),
                };
                text_line(&next).is_some()
            })
            .collect();
        assert_eq!(
            tries,
            [1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32, 40],
            "a relay down for long gets a line about once a minute"
        );
        let refusing = TunnelEvent::HistoryRefusing {
            reason: Some("locked".into()),
        };
        assert!(
            matches!(text_line(&refusing), Some(Line::Err(line)) if line.starts_with("the history refuses writes (locked)"))
        );
        let full = TunnelEvent::NotRecording {
            reason: Some("cannot write the history inbox: No space left on device".into()),
        };
        assert_eq!(
            text_line(&full),
            Some(Line::Err(
                "deliveries are not recorded (cannot write the history inbox: No space left on device); \
                 the tunnel keeps forwarding"
                    .into()
            ))
        );
        assert_eq!(
            json_line(&full).map(|line| serde_json::from_str::<serde_json::Value>(&line).unwrap()),
            Some(serde_json::json!({"event": "recording", "recording": false,
                "reason": "cannot write the history inbox: No space left on device"}))
        );
        let again = TunnelEvent::NotRecording { reason: None };
        assert_eq!(
            text_line(&again),
            Some(Line::Err("deliveries are recorded again".into()))
        );
        let delivered = TunnelEvent::delivered(summary());
        assert!(matches!(text_line(&delivered), Some(Line::Out(line)) if line.starts_with("#12  POST")));
        let waiting = TunnelEvent::Waiting { summary: summary() };
        assert_eq!(
            (text_line(&waiting), json_line(&waiting)),
            (None, None),
            "its line comes with its answer"
        );
    }

    #[test]
    fn escape_sequences_in_paths_are_shown_escaped() {
        let mut s = summary();
        s.path = "/\x1b[2Jboom".into();
        assert!(delivery_line(&s, 1).contains("/\\x1b[2Jboom"));
    }

    #[test]
    fn a_secret_in_the_query_string_is_masked_on_the_line() {
        let mut s = summary();
        s.path = "/hooks?token=tok_live_42&shop=acme".into();
        let line = delivery_line(&s, 1);
        assert!(line.contains("/hooks?token=••••••&shop=acme"), "{line}");
    }

    #[test]
    fn json_lines_carry_no_raw_c1_or_bidi_control() {
        let mut s = summary();
        s.path = "/p\u{9b}31m/\u{202e}".into();
        let line = json_line(&TunnelEvent::delivered(s)).unwrap();
        assert!(line.contains(r"/p\u009b31m/\u202e"), "{line}");
        assert!(!line.contains('\n'), "one line");
    }
}
