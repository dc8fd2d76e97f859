//! Store throughput: N deliveries through the `Recorder`, inbox and writer
//! thread, as the tunnel sends them, then the first history page of the
//! result, as the TUI opens it, and a listing filtered down to nothing.
//!
//! `cargo run --release -p portpreview --example store_bench -- [N] [DB] [PAD]`
//!
//! PAD is the padding in each request body in bytes (default 900, bodies of
//! about 1 KiB); large bodies show what each delivery costs in the WAL.

use std::path::PathBuf;
use std::time::Instant;

use portpreview::store::{ListQuery, NewDelivery, Outcome, Recorder, Store, WriterNews};
use portpreview_shared::Header;

fn delivery(n: usize, body_pad: &str) -> NewDelivery {
    // One delivery in ten is a retry of an earlier event, as providers send them.
    let event = if n % 10 == 9 { n - 9 } else { n };
    let body = format!(r#"{{"id":"evt_{event:012}","object":"event","type":"charge.succeeded","pad":"{body_pad}"}}"#);
    NewDelivery {
        received_at_ms: 1_700_000_000_000 + n as i64,
        tunnel_url: "http://127.0.0.1:8080/t/calm-otter-3f9a2c1b7e".into(),
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: "/webhooks/stripe".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("user-agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
            Header::new(
                "stripe-signature",
                "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            ),
        ],
        request_body_size: body.len() as u64,
        request_body: body.into_bytes(),
        // Left empty: the writer thread detects provider and key, as in the tunnel.
        ..NewDelivery::default()
    }
}

fn answer() -> Outcome {
    Outcome {
        status: Some(200),
        response_body: b"ok".to_vec(),
        response_body_size: 2,
        duration_ms: Some(1.0),
        ..Outcome::default()
    }
}

fn main() -> anyhow::Result<()> {
    const USAGE: &str = "usage: store_bench [N] [DB] [PAD]";
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().is_some_and(|first| first.starts_with('-')) {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let number = |what: &str, text: Option<String>, default: usize| -> usize {
        text.map_or(default, |text| {
            text.parse().unwrap_or_else(|_| {
                eprintln!("{what} must be a whole number, not {text:?}; {USAGE}");
                std::process::exit(2)
            })
        })
    };
    let total = number("N", args.next(), 100_000);
    let db = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("portpreview-store-bench-{}.db", std::process::id())));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let pad_bytes = number("PAD", args.next(), 900);
    let pad = "x".repeat(pad_bytes);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (reports, mut reported) = tokio::sync::mpsc::unbounded_channel();
    let (recorder, handle) = Recorder::start(&db, Vec::new(), move |news| {
        if let WriterNews::Stored(summary) = news {
            let _ = reports.send(summary.id > 0);
        }
    })?;
    let started = Instant::now();
    let failures = runtime.block_on(async {
        let mut failures = 0;
        let mut sent = 0;
        for n in 0..total {
            // As in the tunnel: the request, then its answer once the caller has it.
            let Ok(ticket) = recorder.record_request(delivery(n, &pad)).await else {
                failures += 1;
                continue;
            };
            match recorder.record_outcome(ticket, answer()).await {
                Ok(()) => sent += 1,
                Err(_) => failures += 1,
            }
        }
        // Done once every delivery is stored with its answer.
        for _ in 0..sent {
            match reported.recv().await {
                Some(true) => {}
                Some(false) => failures += 1,
                None => break,
            }
        }
        failures
    });
    let recorded_in = started.elapsed();
    handle.shutdown();
    let flushed_in = started.elapsed();

    let opened = Instant::now();
    let store = Store::open(&db)?;
    let page = store.list(&ListQuery {
        limit: Some(50),
        ..ListQuery::default()
    })?;
    let first_page = opened.elapsed();
    let count = store.count(&ListQuery::default())?;
    // A filter no delivery matches walks the whole history, as `history
    // --provider` does for a provider seldom seen: what passing a row costs.
    let walked = Instant::now();
    let matched = store
        .list(&ListQuery {
            providers: vec!["github".into()],
            limit: Some(50),
            ..ListQuery::default()
        })?
        .len();
    let walk = walked.elapsed();

    let per_second = total as f64 / recorded_in.as_secs_f64();
    println!("deliveries           {total} ({failures} not recorded)");
    println!(
        "recorded in          {:.3} s ({:.3} s with the writer stopped)",
        recorded_in.as_secs_f64(),
        flushed_in.as_secs_f64()
    );
    println!(
        "deliveries/s         {per_second:.0} (target >= 20000: {})",
        if per_second >= 20_000.0 { "ok" } else { "MISSED" }
    );
    println!("rows in history      {count}");
    println!(
        "open + first page    {:.1} ms for {} rows (target < 300 ms)",
        first_page.as_secs_f64() * 1e3,
        page.len()
    );
    println!(
        "filtered walk        {:.1} ms over {count} rows ({matched} matched)",
        walk.as_secs_f64() * 1e3
    );
    println!("database             {}", db.display());
    Ok(())
}
