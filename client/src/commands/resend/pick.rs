//! Which deliveries `resend` sends: one per event, the newest the filters
//! match, and none of an event the handler has answered 2xx since.

use std::collections::HashSet;

use crate::store::{ListQuery, Store, StoreError, Summary};

/// Rows read from the history at a time.
const PAGE: usize = 500;

/// A delivery to send again.
#[derive(Debug, Clone)]
pub struct Event {
    /// As the history lists it.
    pub summary: Summary,
    /// Where it was forwarded when it came.
    pub target: String,
}

/// What the filters matched, sorted for sending.
#[derive(Debug, Default)]
pub struct Picked {
    /// One delivery per event, oldest first: the order the provider sent them.
    pub events: Vec<Event>,
    /// Events whose failure a later delivery or resend made good: a
    /// provider's retry the handler answered 2xx, or an earlier `resend`.
    pub answered_since: usize,
    /// Older deliveries of the events picked (a provider's retries that
    /// failed alike): the event is sent once.
    pub retries: usize,
}

/// Reads every delivery `query` matches (replays never: a resend sends
/// what a provider sent) and picks what to send.
pub fn pick(store: &Store, query: &ListQuery) -> Result<Picked, StoreError> {
    let mut picked = Picked::default();
    let mut seen = HashSet::new();
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
            if summary.is_waiting() {
                continue;
            }
            if !seen.insert((summary.event_key.clone(), summary.event_scope.clone())) {
                picked.retries += 1;
            } else if store.answered_after(&summary.event_key, &summary.event_scope, summary.id)? {
                picked.answered_since += 1;
            } else {
                picked.events.push(Event { summary, target });
            }
        }
        if done {
            break;
        }
    }
    picked.events.reverse();
    Ok(picked)
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
    fn each_failed_event_is_picked_once_oldest_first_unless_answered_since() {
        let store = Store::in_memory().unwrap();
        let add = |d: NewDelivery, status: u16| store.insert_delivery(&d, &answered(status)).unwrap();
        // evt_a failed twice: sent once, as its newest delivery.
        add(delivery("evt_a", "/hooks"), 500);
        let a2 = add(delivery("evt_a", "/hooks"), 503);
        // evt_b failed, then the provider's retry was answered 200.
        add(delivery("evt_b", "/hooks"), 500);
        add(delivery("evt_b", "/hooks"), 200);
        // evt_c was answered 200, then a retry failed: the failure is newer.
        add(delivery("evt_c", "/hooks"), 200);
        let c2 = add(delivery("evt_c", "/hooks"), 500);
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
        assert_eq!(ids, [a2, c2]);
        assert_eq!(picked.retries, 1, "evt_a's first failure");
        assert_eq!(picked.answered_since, 2, "evt_b by its retry, evt_d by a replay");
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
        assert_eq!(picked.answered_since, 0);
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
