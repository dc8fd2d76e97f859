//! Fills a history database with synthetic deliveries, for the TUI benchmark
//! and for trying the TUI by hand: `fill_history <DB> [COUNT]`.

use std::path::PathBuf;

use anyhow::Context;
use portpreview::store::{NewDelivery, Outcome, Store};
use portpreview_shared::Header;

const PROVIDERS: [(&str, &str); 4] = [
    ("stripe", "/webhooks/stripe"),
    ("github", "/webhooks/github"),
    ("shopify", "/webhooks/shopify/orders"),
    ("slack", "/slack/events"),
];

fn delivery(i: u64, start_ms: i64) -> (NewDelivery, Outcome) {
    let (provider, path) = PROVIDERS[(i % 4) as usize];
    // Every tenth event is delivered twice, like a provider retry.
    let event = if i % 10 == 9 { i - 1 } else { i };
    let body = format!(
        "{{\"id\":\"evt_{event:08}\",\"type\":\"charge.succeeded\",\"data\":{{\"object\":{{\"amount\":{},\"currency\":\"usd\",\"customer\":\"cus_{:06}\",\"description\":\"synthetic delivery {i}\"}}}}}}",
        (i % 997) * 100,
        i % 5000
    );
    let request = NewDelivery {
        received_at_ms: start_ms + i as i64 * 50,
        tunnel_url: "http://127.0.0.1:8080/t/bench-otter".into(),
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: format!("{path}?n={i}"),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("user-agent", format!("{provider}-webhooks/1.0")),
        ],
        request_body_size: body.len() as u64,
        request_body: body.into_bytes(),
        provider: Some(provider.into()),
        event_key: format!("evt_{event:08}"),
        event_key_source: "body:/id".into(),
        replay_of: None,
        host_preserved: false,
        event_type: Some("charge.succeeded".into()),
    };
    let status = match i % 50 {
        0 => 500,
        1 => 404,
        _ => 200,
    };
    let outcome = Outcome {
        status: Some(status),
        response_headers: vec![Header::new("content-type", "text/plain")],
        response_body: b"ok".to_vec(),
        response_body_size: 2,
        duration_ms: Some(2.0 + (i % 37) as f64),
        error: None,
    };
    (request, outcome)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    // `--help` is no database to make.
    let db = match args.next() {
        Some(db) if !db.starts_with('-') => PathBuf::from(db),
        _ => {
            eprintln!("usage: fill_history <DB> [COUNT]");
            std::process::exit(2);
        }
    };
    let count: u64 = match args.next() {
        Some(n) => n.parse().context("COUNT must be a number")?,
        None => 100_000,
    };
    let store = Store::open(&db).with_context(|| format!("cannot open {}", db.display()))?;
    let start_ms = portpreview::time::now_ms() - count as i64 * 50;
    for i in 0..count {
        let (request, outcome) = delivery(i, start_ms);
        store.insert_delivery(&request, &outcome)?;
    }
    println!("{count} deliveries in {}", db.display());
    Ok(())
}
