//! Keeping a finished run in the history, and reading from it what a
//! handler had before a run. `replay` and the TUI both call [`record`],
//! so a run leaves the same rows whichever one started it.

use super::{HadBefore, Report};
use crate::store::{ListQuery, NewDelivery, Outcome, ReplayRun, Store, StoreError};

/// Deliveries of one event read back to find one its handler answered:
/// the newest, where an event's retries and replays gather.
const EARLIER_LOOKED_AT: usize = 200;

/// How the history shows the handler `request` goes to (`target`, else
/// where it went) answering its event 2xx before: the delivery itself, a
/// provider's retry of it, or an attempt of an earlier replay, sent to the
/// same `host:port` and path. `None` when it shows none, or the request
/// is no event.
pub fn had_before(store: &Store, request: &NewDelivery, target: Option<&str>) -> Option<HadBefore> {
    if request.event_key.is_empty() {
        return None;
    }
    let wanted = handler_at(&request.target, target, &request.path)?;
    let scope = request.event_scope();
    let query = ListQuery {
        event_key: Some(request.event_key.clone()),
        include_replays: true,
        limit: Some(EARLIER_LOOKED_AT),
        ..ListQuery::default()
    };
    // A history that cannot be read tells nothing: the run goes on without it.
    let earlier = store.list_with_targets(&query).ok()?;
    let (answered, _) = (earlier.into_iter()).find(|(summary, recorded)| {
        summary.event_scope == scope
            && matches!(summary.status, Some(200..=299))
            && handler_at(recorded, None, &summary.path).as_ref() == Some(&wanted)
    })?;
    Some(HadBefore::InHistory(answered.id))
}

/// The handler a request recorded for `recorded` and `path` goes to, with
/// `flag` (`--target`) given or not: its `host:port` (as
/// [`Endpoint::handler`](super::attempt::Endpoint::handler) writes it)
/// and path.
fn handler_at(recorded: &str, flag: Option<&str>, path: &str) -> Option<(String, String)> {
    let (endpoint, path) = super::plan::resolve_target(recorded, flag, path).ok()?;
    Some((endpoint.handler(), path))
}

/// Stores the attempts of `report` as deliveries that replay `delivery_id`,
/// and the run with its verdict, all or nothing. Returns the IDs the
/// attempts were stored under, in their order.
pub fn record(store: &Store, delivery_id: i64, started_at_ms: i64, report: &Report) -> Result<Vec<i64>, StoreError> {
    let run = ReplayRun {
        id: 0,
        delivery_id,
        started_at_ms,
        times: report.times,
        concurrency: report.concurrency,
        idempotent: report.idempotent,
        summary: report.summary_line(),
        report_json: report.to_json().to_string(),
    };
    let attempts = report.attempts.iter().map(|attempt| {
        let answer = &attempt.answer;
        let outcome = Outcome {
            status: answer.status,
            response_headers: answer.headers.clone(),
            response_body: answer.body.clone(),
            response_body_size: answer.body_size,
            duration_ms: Some(attempt.duration_ms()),
            error: answer.error.clone(),
        };
        // Made one at a time as they are stored: a large body is copied
        // for its row, never once for every attempt at the same time.
        (attempt.request_as_sent(), outcome)
    });
    store.insert_replay(&run, attempts)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::replay::attempt::Answer;
    use crate::replay::{Attempt, Role};
    use crate::store::{ListQuery, NewDelivery};

    fn delivery() -> NewDelivery {
        NewDelivery {
            target: "http://127.0.0.1:3000".into(),
            method: "POST".into(),
            path: "/hook".into(),
            request_body: b"{\"id\":\"evt_1\"}".to_vec(),
            request_body_size: 14,
            event_key: "evt_1".into(),
            ..NewDelivery::default()
        }
    }

    fn report(statuses: &[u16]) -> Report {
        let attempts = statuses
            .iter()
            .zip(1..)
            .map(|(&status, n)| Attempt {
                n,
                role: Role::Replay,
                request: NewDelivery {
                    request_body: Vec::new(),
                    ..delivery()
                },
                body: delivery().request_body.into(),
                answer: Answer {
                    status: Some(status),
                    body: b"ok".to_vec(),
                    body_size: 2,
                    duration: Duration::from_millis(3),
                    ..Answer::default()
                },
                step: 0,
                state_changed: None,
            })
            .collect();
        Report {
            idempotent: Some(false),
            checks: Vec::new(),
            attempts,
            warnings: Vec::new(),
            provider: None,
            event_key: "evt_1".into(),
            retry_window: None,
            target: "http://127.0.0.1:3000/hook".into(),
            times: statuses.len() as u32,
            concurrency: 1,
            fresh: false,
            signed: None,
            state: None,
            elapsed: Duration::from_millis(9),
            event_type: None,
            edits: Vec::new(),
            recorded_as: Vec::new(),
        }
    }

    fn replays_of(store: &Store, id: i64) -> Vec<Option<u16>> {
        let query = ListQuery {
            include_replays: true,
            ..ListQuery::default()
        };
        let mut rows: Vec<_> = store
            .list(&query)
            .unwrap()
            .into_iter()
            .filter(|row| row.replay_of == Some(id))
            .collect();
        rows.sort_by_key(|row| row.id);
        rows.into_iter().map(|row| row.status).collect()
    }

    #[test]
    fn a_run_is_stored_with_every_attempt_as_a_replay_of_the_delivery() {
        let store = Store::in_memory().unwrap();
        let id = store.insert_request(&delivery()).unwrap();
        let ids = record(&store, id, 1_700_000_000_000, &report(&[200, 409])).unwrap();
        let runs = store.replay_runs(id).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].times, runs[0].idempotent), (2, Some(false)));
        assert_eq!(replays_of(&store, id), [Some(200), Some(409)]);
        let statuses: Vec<_> = ids
            .iter()
            .map(|&attempt| store.get(attempt).unwrap().unwrap().outcome.and_then(|o| o.status))
            .collect();
        assert_eq!(
            statuses,
            [Some(200), Some(409)],
            "the IDs given back are the attempts', in order"
        );
        assert_eq!(store.get(id).unwrap().unwrap().delivery_count, 1);
    }

    #[test]
    fn a_run_that_cannot_be_stored_leaves_none_of_its_attempts() {
        let store = Store::in_memory().unwrap();
        // No delivery 7: the run's row breaks its foreign key.
        assert!(record(&store, 7, 0, &report(&[200, 200])).is_err());
        assert!(replays_of(&store, 7).is_empty());
    }
}
