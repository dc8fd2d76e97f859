//! An exchange's way into the history: the request, recorded before the
//! handler sees it or as the handler reads it, then its answer.

use std::sync::{Arc, Mutex};

use portpreview_shared::sync::lock;

use super::{Head, Line, Shared};
use crate::events::report_delivered;
use crate::store::recorder::{AnsweredTicket, RecordError, Ticket};
use crate::store::{size_past_cut, NewDelivery, Outcome, Summary};
use crate::tunnel::body::{Capture, Held};

/// A request not yet recorded, kept outside its exchange so that an
/// exchange cut off while recording waits for room (a stop) still leaves
/// it to the history. A body streaming to the handler moves in once the
/// handler has read it.
pub(super) struct Unrecorded {
    request: NewDelivery,
    /// What the handler reads, until it is moved into `request`.
    capture: Option<Arc<Mutex<Capture>>>,
    declared: u64,
    /// The room the moved body holds in the budget.
    room: Held,
}

impl Unrecorded {
    /// `request` with the body `capture` kept, of the size its caller `declared`.
    pub(super) fn captured(mut request: NewDelivery, capture: Capture, declared: u64) -> Unrecorded {
        let room = body_into(&mut request, capture, declared);
        Unrecorded {
            request,
            capture: None,
            declared,
            room,
        }
    }

    /// `request`, whose body is what the handler reads through `capture`.
    pub(super) fn streamed(request: NewDelivery, capture: Arc<Mutex<Capture>>, declared: u64) -> Unrecorded {
        Unrecorded {
            request,
            capture: Some(capture),
            declared,
            room: Held::default(),
        }
    }

    /// Moves what the handler has read so far into the request, once.
    fn settle(&mut self) {
        if let Some(capture) = self.capture.take() {
            let capture = std::mem::take(&mut *lock(&capture));
            self.room = body_into(&mut self.request, capture, self.declared);
        }
    }
}

/// Moves the body `capture` kept into `request`; a body that never went by
/// whole keeps the size its caller `declared`, so the history shows it cut
/// short. Without a declared size (chunked) it is recorded one byte longer
/// than what came: its true size is unknown, but it was cut, and replay
/// must refuse it. Returns the room the bytes hold in the budget.
fn body_into(request: &mut NewDelivery, capture: Capture, declared: u64) -> Held {
    let complete = capture.complete;
    let (bytes, size, room) = capture.into_parts();
    request.request_body_size = if complete {
        size
    } else {
        declared.max(size_past_cut(size))
    };
    request.request_body = bytes;
    room
}

/// Records the request in `slot`. Cut off while it waits for room or writes
/// the body, it leaves the request in `slot` for the next call.
pub(super) async fn record_kept(shared: &Shared, slot: &mut Option<Unrecorded>) -> Option<Ticket> {
    let recorder = shared.recorder.as_ref()?;
    let unrecorded = slot.as_mut()?;
    unrecorded.settle();
    let staged = recorder.stage(&unrecorded.request).await;
    let unrecorded = slot.take()?;
    recorded(
        shared,
        staged.and_then(|staged| recorder.append_request(staged, unrecorded.request)),
    )
}

pub(super) async fn record(shared: &Shared, request: NewDelivery) -> Option<Ticket> {
    let recorder = shared.recorder.as_ref()?;
    recorded(shared, recorder.record_request(request).await)
}

/// The ticket of a recorded request; a failure costs the history, never the forwarding.
fn recorded(shared: &Shared, result: Result<Ticket, RecordError>) -> Option<Ticket> {
    match result {
        Ok(ticket) => {
            shared.recording_worked();
            Some(ticket)
        }
        Err(err) => {
            shared.recording_failed(&err);
            None
        }
    }
}

pub(super) fn new_delivery(shared: &Shared, head: Head, received_at_ms: i64) -> NewDelivery {
    if shared.recorder.is_none() {
        // Nothing will store it: the URL called and the target, worked out
        // and formatted for every request, would only be dropped.
        return NewDelivery {
            received_at_ms,
            method: head.method,
            path: head.target,
            request_headers: head.headers,
            ..NewDelivery::default()
        };
    }
    let host_preserved = shared.preserves_host(&head.headers);
    let tunnel_url = {
        let announced = lock(&shared.public_url);
        called_url(&head.headers, &announced).unwrap_or_else(|| announced.clone())
    };
    NewDelivery {
        received_at_ms,
        host_preserved,
        tunnel_url,
        target: shared.forwarder.target_url().to_owned(),
        method: head.method,
        path: head.target,
        request_headers: head.headers,
        ..NewDelivery::default()
    }
}

/// The URL the caller called, before the path the handler got, from the
/// relay's forwarding headers: Twilio and Square sign it, and a relay
/// reached under another name (`localhost`, its IP, a port a proxy maps),
/// or by `/t/<name>` beside `--domain`, is not at the tunnel's `announced`
/// URL. The relay names the prefix that routed by path; a Host that
/// routed names the tunnel's own host, as announced. None when neither
/// can be told (a relay that sends no prefix), or the Host is no URL's.
fn called_url(headers: &[portpreview_shared::Header], announced: &str) -> Option<String> {
    use portpreview_shared::name::host_name;
    use portpreview_shared::provider::header;
    let text = |name| header(headers, name).and_then(|v| std::str::from_utf8(v).ok());
    let proto = text("x-forwarded-proto").filter(|p| matches!(*p, "http" | "https"))?;
    let host = text("x-forwarded-host").filter(|host| {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\'))
    })?;
    // Joined rather than formatted: one allocation of the right size, on
    // every recorded request.
    if let Some(prefix) = text("x-forwarded-prefix") {
        return Some([proto, "://", host, prefix].concat());
    }
    let announced_host = announced.split_once("://")?.1;
    let routed_by_host = !announced_host.contains('/')
        && host_name(host).eq_ignore_ascii_case(host_name(announced_host))
        && !host_name(host).is_empty();
    routed_by_host.then(|| [proto, "://", host].concat())
}

/// Hands the answer to the history, whose writer reports the delivery once
/// it is stored; a delivery the history will not report is reported here.
/// What names it in the history, to amend it, once its answer is there.
pub(super) async fn finish(
    shared: &Shared,
    line: Line,
    outcome: Outcome,
    ticket: Option<Ticket>,
) -> Option<AnsweredTicket> {
    let unrecorded = Summary {
        id: 0,
        received_at_ms: line.received_at_ms,
        method: line.method,
        path: line.path,
        status: outcome.status,
        duration_ms: outcome.duration_ms,
        provider: None,
        event_type: None,
        event_key: String::new(),
        event_key_source: String::new(),
        event_scope: String::new(),
        delivery_count: 1,
        error: outcome.error.clone(),
        replay_of: None,
    };
    if let (Some(recorder), Some(ticket)) = (&shared.recorder, ticket) {
        let answered = ticket.answered();
        match recorder.record_outcome(ticket, outcome).await {
            Ok(()) => return Some(answered),
            Err(err) => shared.recording_failed(&err),
        }
    }
    report_delivered(&shared.events, unrecorded);
    None
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::events::TunnelEvent;
    use crate::forward::Forwarder;
    use crate::target::Target;
    use crate::tunnel::exchange::HostHeader;
    use crate::tunnel::Stop;

    /// The URL recorded is the one the caller called: the relay's host as
    /// the caller named it, and the prefix that routed it.
    #[test]
    fn the_called_url_comes_from_the_relays_forwarding_headers() {
        let headers = |pairs: &[(&str, &str)]| -> Vec<portpreview_shared::Header> {
            pairs
                .iter()
                .map(|(n, v)| portpreview_shared::Header::new(*n, v.as_bytes()))
                .collect()
        };
        let routed = [
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "relay.example:8443"),
            ("x-forwarded-prefix", "/t/shop"),
        ];
        let announced = "https://shop.relay.example:8443";
        assert_eq!(
            called_url(&headers(&routed), announced).as_deref(),
            Some("https://relay.example:8443/t/shop")
        );
        // The Host named the tunnel: the URL is as the caller wrote it,
        // its port included (a proxy in front maps 443 to the relay's).
        let by_host = [routed[0], ("x-forwarded-host", "Shop.Relay.Example")];
        assert_eq!(
            called_url(&headers(&by_host), announced).as_deref(),
            Some("https://Shop.Relay.Example")
        );
        // A relay that says nothing of a prefix, reached at another host:
        // nothing to go by but the announced URL.
        assert_eq!(called_url(&headers(&routed[..2]), announced), None);
        assert_eq!(called_url(&headers(&routed[..2]), "http://127.0.0.1:9/t/shop"), None);
        for host in ["", "evil.example/x", "a b", "user@relay"] {
            let odd = [routed[0], ("x-forwarded-host", host), routed[2]];
            assert_eq!(called_url(&headers(&odd), announced), None, "{host:?}");
        }
    }

    /// A full disk fails every delivery's recording: the display is told
    /// once, and once more when recording works again.
    #[test]
    fn recording_that_fails_is_told_once_per_change() {
        let (events, mut shown) = crate::events::queue(16);
        let shared = Shared {
            forwarder: Forwarder::new(Target::parse("127.0.0.1:9").expect("target")),
            recorder: None,
            events,
            host_header: HostHeader::Rewrite,
            local_timeout: Duration::from_secs(1),
            public_url: Default::default(),
            stop: Stop::default(),
            not_recording: Default::default(),
            relay_in_process: false,
        };
        let full = || RecordError::Inbox(std::io::Error::from_raw_os_error(28));
        for _ in 0..3 {
            assert!(recorded(&shared, Err(full())).is_none());
        }
        shared.recording_worked();
        shared.recording_worked();
        let told: Vec<TunnelEvent> = std::iter::from_fn(|| shown.try_recv()).collect();
        assert_eq!(
            told,
            [
                TunnelEvent::NotRecording {
                    reason: Some("cannot write the history inbox: No space left on device (os error 28)".into())
                },
                TunnelEvent::NotRecording { reason: None },
            ]
        );
    }
}
