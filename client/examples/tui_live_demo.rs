//! The live TUI fed by synthetic traffic, to try it without a tunnel:
//! `tui_live_demo <DB> [PER_SECOND]` records a delivery every so often into
//! `DB` and reports it to `portpreview::tui::run_live`, as `http` does.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use portpreview::events::{report, TunnelEvent};
use portpreview::store::{ListQuery, NewDelivery, Outcome, Store};
use portpreview_shared::Header;
use tokio_util::sync::CancellationToken;

fn delivery(n: u64) -> (NewDelivery, Outcome) {
    let event = n / 3; // every event is delivered up to three times
    let body = format!("{{\"id\":\"evt_demo_{event}\",\"type\":\"invoice.paid\",\"n\":{n}}}");
    let request = NewDelivery {
        received_at_ms: portpreview::time::now_ms(),
        tunnel_url: "http://127.0.0.1:8080/t/demo-otter".into(),
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: format!("/webhooks/stripe?n={n}"),
        request_headers: vec![Header::new("content-type", "application/json")],
        request_body_size: body.len() as u64,
        request_body: body.into_bytes(),
        provider: Some("stripe".into()),
        event_key: format!("evt_demo_{event}"),
        event_key_source: "body:/id".into(),
        replay_of: None,
        host_preserved: false,
        event_type: Some("invoice.paid".into()),
    };
    let outcome = Outcome {
        status: Some(if n.is_multiple_of(7) { 500 } else { 200 }),
        duration_ms: Some(3.0 + (n % 40) as f64),
        ..Outcome::default()
    };
    (request, outcome)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    // `--help` is no database to make.
    let db = match args.next() {
        Some(db) if !db.starts_with('-') => PathBuf::from(db),
        _ => {
            eprintln!("usage: tui_live_demo <DB> [PER_SECOND]");
            std::process::exit(2);
        }
    };
    let per_second: u64 = args
        .next()
        .map_or(Ok(5), |n| n.parse())
        .context("PER_SECOND must be a number")?;
    let store = Store::open(&db)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let (events, receiver) = portpreview::events::queue(1024);
        let shutdown = CancellationToken::new();
        let feed = async {
            report(
                &events,
                TunnelEvent::Connected {
                    public_url: "http://127.0.0.1:8080/t/demo-otter".into(),
                    also_url: None,
                    target: "http://127.0.0.1:3000".into(),
                },
            );
            let mut tick = tokio::time::interval(Duration::from_millis(1000 / per_second.max(1)));
            for n in 0.. {
                tick.tick().await;
                let (request, outcome) = delivery(n);
                let id = store.insert_delivery(&request, &outcome)?;
                let query = ListQuery {
                    limit: Some(1),
                    before_id: Some(id + 1),
                    ..ListQuery::default()
                };
                if let Some(summary) = store.list(&query)?.pop() {
                    let delivery_number = summary.delivery_count;
                    report(
                        &events,
                        TunnelEvent::Delivered {
                            summary,
                            delivery_number,
                        },
                    );
                    if events.is_closed() {
                        break;
                    }
                }
            }
            anyhow::Ok(())
        };
        tokio::select! {
            result = portpreview::tui::run_live(&db, receiver, shutdown.clone()) => result.map(drop),
            result = feed => result,
        }
    })
}
