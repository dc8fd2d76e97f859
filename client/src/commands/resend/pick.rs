//! Which deliveries `resend` sends: one per event, the newest the filters
//! match, in the order the events first came, and none of an event the
//! handler has answered 2xx, or may be handling now.

use std::collections::HashMap;

use crate::store::recorder::ORPHANED;
use crate::store::{EventState, ListQuery, Store, StoreError, Summary};

/// Rows read from the history at a time.
const PAGE: usize = 500;

/// A delivery to send again.
#[derive(Debug, Clone)]
pub struct Event {
    /// As the history lists it.
    pub summary: Summary,
    /// Where it was forwarded when it came.
    pub target: String,
    /// Which delivery of its event it was, as `history --json` gives it.
    pub delivery_number: Option<i64>,
    /// The id of the event's first delivery the filters matched: events
    /// go in the order they first came, so that a retry of an early event
    /// does not send it after a later one (an update before its create).
    first_id: i64,
}

/// What the filters matched, sorted for sending.
#[derive(Debug, Default)]
pub struct Picked {
    /// One delivery per event, in the order the events first came.
    pub events: Vec<Event>,
    /// Events another delivery or a replay answered 2xx: a provider's
    /// retry that got through, or an earlier `resend`.
    pub answered: usize,
    /// Events a provider's retry is delivering now, still unanswered.
    pub awaited: usize,
    /// Deliveries whose answer nobody knows: PortPreview stopped before it
    /// recorded it, and the handler may well have answered 2xx.
    pub unknown: usize,
    /// Older deliveries of the events picked (a provider's retries that
    /// failed alike): the event is sent once.
    pub retries: usize,
    /// Events picked, then passed over as their turn came (counted among
    /// the above too).
    pub skipped_while_sending: usize,
}

impl Picked {
    /// Counts an event picked, then found answered or awaited as its turn came.
    pub fn note_passed_over(&mut self, state: EventState) {
        match state {
            EventState::Answered => self.answered += 1,
            EventState::Awaited => self.awaited += 1,
            EventState::Unanswered => return,
        }
        self.skipped_while_sending += 1;
    }
}

/// What became of an event already looked at.
enum Seen {
    /// Picked, at this place in [`Picked::events`].
    Picked(usize),
    PassedOver,
}

/// Reads every delivery `query` matches (replays never: a resend sends
/// what a provider sent) and picks what to send.
pub fn pick(store: &Store, query: &ListQuery) -> Result<Picked, StoreError> {
    let mut picked = Picked::default();
    let mut seen = HashMap::new();
    let mut before_id = None;
    loop {
        let page = store.list_with_targets(&ListQuery {
            limit: Some(PAGE),
            before_id,
            include_replays: false,
            ..query.clone()
        })?;
        let done = page.len() < PAGE;
        before_id = page.last().map(|(s, _)| s.id);
        // Newest first: the first row of an event is the one sent.
        for (summary, target) in page {
            let event = event_of(&summary);
            match seen.get(&event) {
                Some(Seen::Picked(at)) => {
                    picked.retries += 1;
                    if let Some(picked) = picked.events.get_mut(*at) {
                        picked.first_id = summary.id;
                    }
                    continue;
                }
                Some(Seen::PassedOver) => continue,
                None => {}
            }
            let state = match summary.error.as_deref() {
                Some(ORPHANED) => None,
                _ => Some(state(store, &summary)?),
            };
            let place = match state {
                None => {
                    picked.unknown += 1;
                    Seen::PassedOver
                }
                Some(EventState::Answered) => {
                    picked.answered += 1;
                    Seen::PassedOver
                }
                Some(EventState::Awaited) => {
                    picked.awaited += 1;
                    Seen::PassedOver
                }
                Some(EventState::Unanswered) => {
                    picked.events.push(Event {
                        first_id: summary.id,
                        delivery_number: Some(store.delivery_number(summary.id)?),
                        summary,
                        target,
                    });
                    Seen::Picked(picked.events.len() - 1)
                }
            };
            seen.insert(event, place);
        }
        if done {
            break;
        }
    }
    picked.events.sort_by_key(|e| e.first_id);
    Ok(picked)
}

/// What became of the event of `summary` beside it, read again right
/// before it is sent: a provider's retry may have got through meanwhile.
pub fn state(store: &Store, summary: &Summary) -> Result<EventState, StoreError> {
    store.event_state(&summary.event_key, &summary.event_scope, summary.id)
}

/// What tells one event from another: its key and scope, or, for a
/// delivery with no key (a bodiless request), the delivery itself.
fn event_of(s: &Summary) -> (String, String) {
    match s.event_key.is_empty() {
        true => (String::new(), format!("#{}", s.id)),
        false => (s.event_key.clone(), s.event_scope.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::delivery;
    use crate::store::{NewDelivery, Outcome, StatusWord};

    fn answered(status: u16) -> Outcome {
        Outcome {
            status: Some(status),
            duration_ms: Some(1.0),
            ..Outcome::default()
        }
    }

    fn failed() -> ListQuery {
        ListQuery {
            status: vec![StatusWord::Class(5), StatusWord::Failed],
            ..ListQuery::default()
        }
    }

    #[test]
    fn each_failed_event_is_picked_once_in_the_order_it_came_unless_answered_elsewhere() {
        let store = Store::in_memory().unwrap();
        let add = |d: NewDelivery, status: u16| store.insert_delivery(&d, &answered(status)).unwrap();
        // evt_a failed twice (the provider retried), evt_f between them:
        // evt_a is sent once, as its newest delivery, and first.
        add(delivery("evt_a", "/hooks"), 500);
        let f = add(delivery("evt_f", "/hooks"), 500);
        let a2 = add(delivery("evt_a", "/hooks"), 503);
        // evt_b failed, then the provider's retry was answered 200.
        add(delivery("evt_b", "/hooks"), 500);
        add(delivery("evt_b", "/hooks"), 200);
        // evt_c was answered 200, then a retry failed: the handler had it.
        add(delivery("evt_c", "/hooks"), 200);
        add(delivery("evt_c", "/hooks"), 500);
        // evt_d failed, and a replay of it was answered 200 since.
        let d1 = add(delivery("evt_d", "/hooks"), 500);
        add(
            NewDelivery {
                replay_of: Some(d1),
                ..delivery("evt_d", "/hooks")
            },
            200,
        );
        // evt_e was answered 200 only: no failure to send.
        add(delivery("evt_e", "/hooks"), 200);
        let picked = pick(&store, &failed()).unwrap();
        let ids: Vec<i64> = picked.events.iter().map(|e| e.summary.id).collect();
        assert_eq!(ids, [a2, f]);
        assert_eq!(picked.retries, 1, "evt_a's first failure");
        assert_eq!(
            picked.answered, 3,
            "evt_b by its retry, evt_c before, evt_d by a replay"
        );
    }

    #[test]
    fn a_retry_in_flight_or_an_answer_unknown_is_no_event_to_send() {
        let store = Store::in_memory().unwrap();
        store
            .insert_delivery(&delivery("evt_g", "/hooks"), &answered(500))
            .unwrap();
        // The provider's retry is on its way to the handler.
        store.insert_request(&delivery("evt_g", "/hooks")).unwrap();
        let lost = Outcome {
            error: Some(ORPHANED.into()),
            ..Outcome::default()
        };
        store.insert_delivery(&delivery("evt_h", "/hooks"), &lost).unwrap();
        let picked = pick(&store, &failed()).unwrap();
        assert!(picked.events.is_empty(), "{:?}", picked.events);
        assert_eq!((picked.awaited, picked.unknown), (1, 1));
    }

    #[test]
    fn requests_without_a_key_are_each_an_event_of_their_own() {
        let store = Store::in_memory().unwrap();
        let keyless = |path: &str| NewDelivery {
            method: "GET".into(),
            request_body: Vec::new(),
            provider: None,
            event_key: String::new(),
            event_key_source: String::new(),
            ..delivery("", path)
        };
        let favicon = store.insert_delivery(&keyless("/favicon.ico"), &answered(502)).unwrap();
        let cron = store.insert_delivery(&keyless("/cron"), &answered(502)).unwrap();
        store.insert_delivery(&keyless("/health"), &answered(200)).unwrap();
        let picked = pick(&store, &failed()).unwrap();
        let ids: Vec<i64> = picked.events.iter().map(|e| e.summary.id).collect();
        assert_eq!(ids, [favicon, cron]);
        assert_eq!((picked.retries, picked.answered), (0, 0));
    }

    #[test]
    fn a_replay_of_another_body_does_not_count_as_the_event_answered() {
        let store = Store::in_memory().unwrap();
        let id = store
            .insert_delivery(&delivery("evt_a", "/hooks"), &answered(500))
            .unwrap();
        // A --body-file or --fresh replay carries another event's key.
        let edited = NewDelivery {
            replay_of: Some(id),
            ..delivery("evt_other", "/hooks")
        };
        store.insert_delivery(&edited, &answered(200)).unwrap();
        let picked = pick(&store, &failed()).unwrap();
        assert_eq!(picked.events.len(), 1);
        assert_eq!(picked.answered, 0);
    }

    #[test]
    fn more_than_a_page_of_failures_is_read_whole() {
        let store = Store::in_memory().unwrap();
        for n in 0..(PAGE + 20) {
            store
                .insert_delivery(&delivery(&format!("evt_{n}"), "/hooks"), &answered(500))
                .unwrap();
        }
        let picked = pick(&store, &failed()).unwrap();
        assert_eq!(picked.events.len(), PAGE + 20);
        assert!(
            picked.events.windows(2).all(|w| w[0].summary.id < w[1].summary.id),
            "oldest first"
        );
    }
}
