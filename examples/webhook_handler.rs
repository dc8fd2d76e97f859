//! A webhook handler to try PortPreview on: it credits an account 100 for
//! every delivery of a Stripe-like event, as a handler without a dedup key
//! does, or, with `--dedup`, once per event ID. `GET /balance` prints the
//! balance, the state `replay --check-url` reads.
//!
//! ```sh
//! cargo run --release --example webhook_handler -- 3000          # credits every delivery
//! cargo run --release --example webhook_handler -- 3000 --dedup  # credits each event once
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const USAGE: &str = "usage: webhook_handler [PORT] [--dedup]  (default port 3000; POST an event to credit 100, \
                     GET /balance to read the balance)";

/// What the handler has done: its side effect, and the events it has seen.
#[derive(Default)]
pub struct Ledger {
    balance: u64,
    seen: HashSet<String>,
}

/// Answers one request: an event is credited (once per ID when `dedup`),
/// `GET /balance` reads the balance.
async fn handle(
    request: Request<Incoming>,
    ledger: Arc<Mutex<Ledger>>,
    dedup: bool,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let answer = |status: StatusCode, text: String| {
        let mut response = Response::new(Full::new(Bytes::from(text)));
        *response.status_mut() = status;
        Ok(response)
    };
    if request.method() == Method::GET && request.uri().path() == "/balance" {
        let balance = ledger.lock().map_or(0, |ledger| ledger.balance);
        return answer(StatusCode::OK, format!("balance: {balance}\n"));
    }
    if request.method() != Method::POST {
        return answer(StatusCode::NOT_FOUND, "POST an event, or GET /balance\n".into());
    }
    let Ok(body) = request.into_body().collect().await.map(|body| body.to_bytes()) else {
        return answer(StatusCode::BAD_REQUEST, "the body broke off\n".into());
    };
    let id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|event| event.get("id")?.as_str().map(str::to_owned));
    let Some(id) = id else {
        return answer(StatusCode::BAD_REQUEST, "expected a JSON event with an \"id\"\n".into());
    };
    let Ok(mut ledger) = ledger.lock() else {
        return answer(StatusCode::INTERNAL_SERVER_ERROR, "the ledger is broken\n".into());
    };
    // The check and the credit under one lock, as a database transaction
    // would hold them: checked apart, two copies of one event sent at once
    // could both pass the check.
    if !dedup || ledger.seen.insert(id) {
        ledger.balance += 100;
    }
    answer(StatusCode::OK, "{\"received\":true}\n".into())
}

/// Serves requests on `listener` until the process ends.
pub async fn serve(listener: TcpListener, dedup: bool) -> std::io::Result<()> {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    loop {
        let (socket, _) = listener.accept().await?;
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(request, ledger.clone(), dedup));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

#[allow(dead_code)] // The e2e test of the tour serves this handler itself.
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let dedup = args.iter().any(|arg| arg == "--dedup");
    let port = match args
        .iter()
        .filter(|arg| *arg != "--dedup")
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => 3000,
        [port] => match port.parse::<u16>() {
            Ok(port) => port,
            Err(_) => {
                eprintln!("error: {port:?} is not a port; {USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("error: {USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let credits = match dedup {
            true => "each event once",
            false => "every delivery",
        };
        println!("listening on http://localhost:{port}: credits 100 for {credits}; GET /balance reads it");
        serve(listener, dedup).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: cannot listen on 127.0.0.1:{port}: {err}");
            ExitCode::FAILURE
        }
    }
}
