//! Webhook handlers with real side effects, for the replay and check tests.
//!
//! Each one is a hyper server on 127.0.0.1:0 with its own SQLite file in a
//! temporary directory: an `account` balance that deliveries credit and an
//! `events` table of handled event IDs. `GET /state` answers the balance as
//! text (for `--check-url`), and `state.txt` beside the database holds the
//! same text (for `--check-cmd 'cat …'`). Each runs on its own thread and
//! runtime so a test can block on the `portpreview` process; it stops on drop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use rusqlite::{params, Connection, OptionalExtension};
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How a handler treats a delivery.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Credits the account on every delivery: duplicates pay twice.
    CreditsEveryDelivery,
    /// `INSERT OR IGNORE` on the event ID and credits only when inserted, in one transaction.
    DedupsInOneTransaction,
    /// Dedups, but answers 409 to a duplicate (the provider retries it).
    ConflictOnDuplicate,
    /// `INSERT OR IGNORE` on the payment's ID (`data.object.id`), not the
    /// event's, and credits only when inserted: one credit a payment,
    /// however many events name it.
    DedupsOnPayment,
    /// Checks for the event ID, waits, then inserts and credits: a race under concurrency.
    CheckThenInsert {
        /// Time between the check and the insert.
        gap: Duration,
    },
    /// Verifies `Stripe-Signature` (300 s tolerance, 400 on failure), then dedups.
    VerifiesStripeSignature {
        /// The `whsec_…` secret.
        secret: String,
    },
    /// Answers 200 at once and dedups and credits later, as a queue worker would.
    Deferred {
        /// Time between the answer and the work.
        delay: Duration,
    },
    /// Records a new event at once and credits it once, later, as a
    /// handler that books the credit from a queue: one event's work,
    /// written in two places at two times.
    WritesTwice {
        /// Time between the answer and the credit.
        delay: Duration,
    },
    /// Handles a new event; never answers a duplicate, as a handler stuck
    /// on the row lock its first delivery left behind.
    HangsOnDuplicate,
    /// Answers its first delivery 500 having done nothing (its database
    /// was down), then dedups: correct, once the first failure is retried.
    FailsFirstThenDedups {
        /// Set once the first delivery has failed.
        failed: Arc<std::sync::atomic::AtomicBool>,
    },
    /// Answers its first delivery 500 having done nothing, then credits
    /// every delivery after: the provider's second retry pays again.
    FailsFirstThenCredits {
        /// Set once the first delivery has failed.
        failed: Arc<std::sync::atomic::AtomicBool>,
    },
    /// Credits its first delivery, then answers it 500 without noting the
    /// event handled (the card charged, the save failed); then dedups: the
    /// retry charges again.
    CreditsThenFailsFirst {
        /// Set once the first delivery has failed.
        failed: Arc<std::sync::atomic::AtomicBool>,
    },
    /// Dedups and credits its first delivery, then answers it 500 (the
    /// answer lost after the commit): the retry finds the event handled.
    DedupsThenFailsFirst {
        /// Set once the first delivery has failed.
        failed: Arc<std::sync::atomic::AtomicBool>,
    },
    /// Dedups, but takes this long to answer.
    Slow {
        /// Delay before the answer.
        delay: Duration,
    },
}

/// How a handler takes its connections.
#[derive(Debug, Clone, Copy)]
enum Serving {
    /// Each on its own task, as most servers do.
    Concurrently,
    /// Each served to its end before the next is accepted.
    OneConnectionAtATime,
}

/// A running handler; stops when dropped.
pub struct Handler {
    /// Where it listens.
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
}

struct Shared {
    behaviour: Behaviour,
    db: Mutex<Connection>,
    state_file: PathBuf,
    /// Filler before the balance in the state text.
    state_padding: usize,
    /// The state text also names the last event credited and when, as a
    /// `SELECT balance, last_event, updated_at` probe would.
    state_names_last_event: bool,
    /// Deliveries that have arrived (state reads aside), answered or not.
    arrived: std::sync::atomic::AtomicUsize,
    /// Reads of the ticking state, which it prints: a request counter.
    ticks: std::sync::atomic::AtomicUsize,
}

impl Handler {
    /// Starts a handler with a fresh database (balance 0).
    pub fn start(behaviour: Behaviour) -> Self {
        Self::with_padded_state(behaviour, 0)
    }

    /// Starts a handler whose state text opens with `padding` bytes of
    /// filler, as a dump of a large table would: only a probe that reads
    /// that far sees the balance.
    pub fn with_padded_state(behaviour: Behaviour, padding: usize) -> Self {
        Self::launch(behaviour, padding, Serving::Concurrently, false)
    }

    /// Starts a handler whose state text names, after the balance, the
    /// last event credited and the time in milliseconds it was credited at.
    pub fn naming_last_event(behaviour: Behaviour) -> Self {
        Self::launch(behaviour, 0, Serving::Concurrently, true)
    }

    /// Starts a handler that serves one connection at a time, keeping each
    /// alive until its client closes it, as Python's `http.server` and
    /// `php -S` do.
    pub fn one_connection_at_a_time(behaviour: Behaviour) -> Self {
        Self::launch(behaviour, 0, Serving::OneConnectionAtATime, false)
    }

    fn launch(behaviour: Behaviour, padding: usize, serving: Serving, state_names_last_event: bool) -> Self {
        let dir = tempfile::tempdir().expect("handler temp dir");
        let db_path = dir.path().join("handler.db");
        let conn = Connection::open(&db_path).expect("open handler database");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE account (balance INTEGER NOT NULL, last_event TEXT NOT NULL, credited_at INTEGER NOT NULL);
             INSERT INTO account VALUES (0, '-', 0);
             CREATE TABLE events (id TEXT PRIMARY KEY);
             CREATE TABLE events_unchecked (id TEXT NOT NULL);
             CREATE TABLE event_credits (id TEXT PRIMARY KEY, credits INTEGER NOT NULL);",
        )
        .expect("handler schema");
        let shared = Arc::new(Shared {
            behaviour,
            db: Mutex::new(conn),
            state_file: dir.path().join("state.txt"),
            state_padding: padding,
            state_names_last_event,
            arrived: Default::default(),
            ticks: Default::default(),
        });
        shared.write_state_file();
        let shared_view = shared.clone();
        let shutdown = CancellationToken::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stop = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("handler runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind handler");
                ready_tx
                    .send(listener.local_addr().expect("handler address"))
                    .expect("report address");
                let respond = move |request| {
                    let shared = shared.clone();
                    async move { respond(request, &shared).await }
                };
                match serving {
                    Serving::Concurrently => super::local::serve_http(listener, respond, stop).await,
                    Serving::OneConnectionAtATime => {
                        super::local::serve_http_one_connection_at_a_time(listener, respond, stop).await;
                    }
                }
            });
        });
        let addr = ready_rx.recv().expect("handler started");
        Self {
            addr,
            dir,
            shutdown,
            thread: Some(thread),
            shared: shared_view,
        }
    }

    /// Deliveries that have arrived so far, answered or still hanging. A
    /// sequential replay sends its next attempt only once it has read the
    /// answer to the last: an arrival proves the answers before it came.
    pub fn arrived(&self) -> usize {
        self.shared.arrived.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL that prints the state, for `--check-url`.
    pub fn state_url(&self) -> String {
        format!("http://{}/state", self.addr)
    }

    /// The state with a line that moves on every read, with nothing sent,
    /// as a probe printing a request counter or a clock does: `balance: 0`
    /// then `uptime_ticks: N`. A counter, not a clock, so that no two reads
    /// print the same however fast or slow the machine is.
    pub fn ticking_state_url(&self) -> String {
        format!("http://{}/state/ticking", self.addr)
    }

    /// The state as a JSON document, pretty-printed as most web frameworks
    /// print one: the balance and the IDs of the events handled.
    pub fn json_state_url(&self) -> String {
        format!("http://{}/state.json", self.addr)
    }

    /// The credits given each event, one `evt_…|credits` row per event as
    /// `sqlite3` prints `SELECT id, credits FROM event_credits`.
    pub fn rows_url(&self) -> String {
        format!("http://{}/rows", self.addr)
    }

    /// The same rows with the amount credited, in cents, before the event
    /// ID, as `SELECT amount, event_id FROM credits` prints them.
    pub fn amounts_url(&self) -> String {
        format!("http://{}/amounts", self.addr)
    }

    /// The IDs of the events acted on, one a line, once each time: a blank
    /// line when there are none yet, as Python's `print("\\n".join(ids))`
    /// prints.
    pub fn ids_url(&self) -> String {
        format!("http://{}/ids", self.addr)
    }

    /// The file that holds the state, for `--check-cmd 'cat …'`.
    pub fn state_file(&self) -> PathBuf {
        self.dir.path().join("state.txt")
    }

    /// The handler's database file.
    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("handler.db")
    }

    /// The balance, read from the database file.
    pub fn balance(&self) -> i64 {
        balance_at(&self.db_path())
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The balance in a handler database.
pub fn balance_at(path: &Path) -> i64 {
    let conn = Connection::open(path).expect("open handler database");
    conn.query_row("SELECT balance FROM account", [], |row| row.get(0))
        .expect("balance")
}

/// Credits the account for an event, and counts the credit against the event's row.
fn credit_in(db: &Connection, event_id: &str) {
    db.execute(
        "UPDATE account SET balance = balance + 1, last_event = ?1, credited_at = ?2",
        params![event_id, now_ms()],
    )
    .expect("credit");
    db.execute(
        "INSERT INTO event_credits VALUES (?1, 1) ON CONFLICT (id) DO UPDATE SET credits = credits + 1",
        params![event_id],
    )
    .expect("count the credit");
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Shared {
    fn state(&self) -> String {
        let db = self.db.lock().expect("db lock");
        let (balance, last, at): (i64, String, i64) = db
            .query_row("SELECT balance, last_event, credited_at FROM account", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .expect("balance");
        let mut text = format!("{}balance: {balance}\n", ".".repeat(self.state_padding));
        if self.state_names_last_event {
            text.push_str(&format!("last_event: {last}\ncredited_at: {at}\n"));
        }
        text
    }

    fn json_state(&self) -> String {
        let db = self.db.lock().expect("db lock");
        let balance: i64 = db
            .query_row("SELECT balance FROM account", [], |row| row.get(0))
            .expect("balance");
        let mut handled = db
            .prepare("SELECT id FROM events UNION SELECT id FROM events_unchecked")
            .expect("events query");
        let events: Vec<String> = handled
            .query_map([], |row| row.get(0))
            .expect("events")
            .collect::<Result<_, _>>()
            .expect("event ids");
        serde_json::to_string_pretty(&serde_json::json!({"balance": balance, "events": events})).expect("json")
    }

    fn rows(&self) -> String {
        self.query_rows("SELECT id, credits FROM event_credits ORDER BY rowid")
    }

    fn amounts(&self) -> String {
        self.query_rows("SELECT credits * 100, id FROM event_credits ORDER BY rowid")
    }

    /// `sqlite3`'s default output of a query of two columns.
    fn query_rows(&self, query: &str) -> String {
        let db = self.db.lock().expect("db lock");
        let mut rows = db.prepare(query).expect("rows query");
        let rows: Vec<String> = rows
            .query_map([], |row| {
                let column = |n| row.get::<_, rusqlite::types::Value>(n);
                Ok(format!("{}|{}\n", shown(column(0)?), shown(column(1)?)))
            })
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("row text");
        rows.concat()
    }

    fn ids(&self) -> String {
        let db = self.db.lock().expect("db lock");
        let mut ids = db
            .prepare("SELECT id FROM events UNION ALL SELECT id FROM events_unchecked")
            .expect("ids query");
        let ids: Vec<String> = ids
            .query_map([], |row| row.get(0))
            .expect("ids")
            .collect::<Result<_, _>>()
            .expect("id text");
        format!("{}\n", ids.join("\n"))
    }

    fn write_state_file(&self) {
        std::fs::write(&self.state_file, self.state()).expect("write state file");
    }

    fn credit(&self, event_id: &str) {
        credit_in(&self.db.lock().expect("db lock"), event_id);
        self.write_state_file();
    }

    /// Inserts the event and credits once, in one transaction; false when already handled.
    fn dedup_and_credit(&self, event_id: &str) -> bool {
        let inserted = {
            let mut db = self.db.lock().expect("db lock");
            let tx = db.transaction().expect("begin");
            let inserted = tx
                .execute("INSERT OR IGNORE INTO events (id) VALUES (?1)", params![event_id])
                .expect("insert event")
                == 1;
            if inserted {
                credit_in(&tx, event_id);
            }
            tx.commit().expect("commit");
            inserted
        };
        self.write_state_file();
        inserted
    }

    async fn handle(self: &Arc<Self>, event_id: &str, headers: &http::HeaderMap, body: &[u8]) -> (u16, String) {
        match &self.behaviour {
            Behaviour::CreditsEveryDelivery => {
                self.credit(event_id);
                (200, "credited".into())
            }
            Behaviour::DedupsInOneTransaction => {
                let new = self.dedup_and_credit(event_id);
                (200, if new { "credited" } else { "already handled" }.into())
            }
            Behaviour::DedupsOnPayment => {
                let payment = payment_id(body).unwrap_or_else(|| event_id.to_owned());
                let new = self.dedup_and_credit(&payment);
                (200, if new { "credited" } else { "payment already handled" }.into())
            }
            Behaviour::FailsFirstThenDedups { failed } => {
                if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return (500, "database unavailable".into());
                }
                let new = self.dedup_and_credit(event_id);
                (200, if new { "credited" } else { "already handled" }.into())
            }
            Behaviour::FailsFirstThenCredits { failed } => {
                if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return (500, "database unavailable".into());
                }
                self.credit(event_id);
                (200, "credited".into())
            }
            Behaviour::CreditsThenFailsFirst { failed } => {
                if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    self.credit(event_id);
                    return (500, "charged, then could not save the event".into());
                }
                let new = self.dedup_and_credit(event_id);
                (200, if new { "credited" } else { "already handled" }.into())
            }
            Behaviour::DedupsThenFailsFirst { failed } => {
                let new = self.dedup_and_credit(event_id);
                if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return (500, "saved, then failed to answer".into());
                }
                (200, if new { "credited" } else { "already handled" }.into())
            }
            Behaviour::ConflictOnDuplicate => {
                if self.dedup_and_credit(event_id) {
                    (200, "credited".into())
                } else {
                    (409, "duplicate event".into())
                }
            }
            Behaviour::CheckThenInsert { gap } => {
                let seen: Option<i64> = self
                    .db
                    .lock()
                    .expect("db lock")
                    .query_row(
                        "SELECT 1 FROM events_unchecked WHERE id = ?1",
                        params![event_id],
                        |row| row.get(0),
                    )
                    .optional()
                    .expect("check event");
                if seen.is_some() {
                    return (200, "already handled".into());
                }
                tokio::time::sleep(*gap).await;
                self.db
                    .lock()
                    .expect("db lock")
                    .execute("INSERT INTO events_unchecked (id) VALUES (?1)", params![event_id])
                    .expect("insert event");
                self.credit(event_id);
                (200, "credited".into())
            }
            Behaviour::VerifiesStripeSignature { secret } => {
                let header = headers
                    .get("stripe-signature")
                    .map(|v| v.as_bytes())
                    .unwrap_or_default();
                if let Err(reason) = verify_stripe(secret, header, body) {
                    return (400, reason);
                }
                self.dedup_and_credit(event_id);
                (200, "credited".into())
            }
            Behaviour::Deferred { delay } => {
                let (shared, delay, event_id) = (self.clone(), *delay, event_id.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    shared.dedup_and_credit(&event_id);
                });
                (200, "queued".into())
            }
            Behaviour::WritesTwice { delay } => {
                let new = self
                    .db
                    .lock()
                    .expect("db lock")
                    .execute("INSERT OR IGNORE INTO events (id) VALUES (?1)", params![event_id])
                    .expect("insert event")
                    == 1;
                if new {
                    let (shared, delay, event_id) = (self.clone(), *delay, event_id.to_string());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        shared.credit(&event_id);
                    });
                }
                (200, if new { "queued" } else { "already handled" }.into())
            }
            Behaviour::HangsOnDuplicate => {
                if self.dedup_and_credit(event_id) {
                    (200, "credited".into())
                } else {
                    std::future::pending().await
                }
            }
            Behaviour::Slow { delay } => {
                tokio::time::sleep(*delay).await;
                self.dedup_and_credit(event_id);
                (200, "credited".into())
            }
        }
    }
}

/// Stripe's check, as its SDKs do it: `t` within 300 s, and an HMAC-SHA256 of
/// `"{t}.{body}"` under the whole secret string equal to one of the `v1` values.
pub fn verify_stripe(secret: &str, header: &[u8], body: &[u8]) -> Result<(), String> {
    let header = std::str::from_utf8(header).map_err(|_| "signature header is not text".to_string())?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<u64>().ok(),
            Some(("v1", v)) => signatures.push(v.to_string()),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or("no timestamp in Stripe-Signature")?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    if now.abs_diff(timestamp) > 300 {
        return Err("timestamp outside the tolerance zone".into());
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    let expected = hex::encode(mac.finalize().into_bytes());
    if signatures.contains(&expected) {
        Ok(())
    } else {
        Err("no signatures found matching the expected signature".into())
    }
}

async fn respond(request: Request<Incoming>, shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    let (status, text) = if parts.method == hyper::Method::GET && parts.uri.path() == "/state" {
        (200, shared.state())
    } else if parts.method == hyper::Method::GET && parts.uri.path() == "/state/ticking" {
        let tick = shared.ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (200, format!("{}uptime_ticks: {tick}\n", shared.state()))
    } else if parts.method == hyper::Method::GET && parts.uri.path() == "/state.json" {
        (200, shared.json_state())
    } else if parts.method == hyper::Method::GET && parts.uri.path() == "/rows" {
        (200, shared.rows())
    } else if parts.method == hyper::Method::GET && parts.uri.path() == "/amounts" {
        (200, shared.amounts())
    } else if parts.method == hyper::Method::GET && parts.uri.path() == "/ids" {
        (200, shared.ids())
    } else {
        shared.arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match event_id(&body) {
            Some(id) => shared.handle(&id, &parts.headers, &body).await,
            None => (400, "no event id in the body".into()),
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(text)))
        .expect("valid handler response")
}

/// The event ID a handler keys on: Stripe's `id`, Slack's `event_id`.
fn event_id(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value
        .get("id")
        .or_else(|| value.get("event_id"))
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The ID of what a Stripe event is about (`data.object.id`: a payment).
fn payment_id(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.pointer("/data/object/id")?.as_str().map(str::to_string)
}

/// A column's value as `sqlite3` prints it.
fn shown(value: rusqlite::types::Value) -> String {
    match value {
        rusqlite::types::Value::Integer(n) => n.to_string(),
        rusqlite::types::Value::Text(text) => text,
        other => format!("{other:?}"),
    }
}

/// The Stripe secret of `provider_vectors.json`.
pub const STRIPE_SECRET: &str = "whsec_portpreview_test_secret_0123456789";

/// The Stripe event of `provider_vectors.json`.
pub const STRIPE_BODY: &str = r#"{"id":"evt_1PortPreviewTest","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_123","object":"payment_intent"}}}"#;

/// Its signature, made in 2023: long outside Stripe's 300 s tolerance.
pub const STRIPE_STALE_SIGNATURE: &str =
    "t=1700000000,v1=014449e1a98a749a81fb0f479dc425e60f3643b0745f56d0561a432a5bd17e00";

/// The Slack event of `provider_vectors.json`.
pub const SLACK_BODY: &str = r#"{"token":"x","team_id":"T1","api_app_id":"A1","event":{"type":"app_mention","text":"hi"},"type":"event_callback","event_id":"Ev0PORTPREVIEW","event_time":1700000000}"#;

/// A Stripe delivery as the tunnel records it, aimed at `target`.
pub fn stripe_delivery(target: &str) -> portpreview::store::NewDelivery {
    use portpreview_shared::Header;
    portpreview::store::NewDelivery {
        received_at_ms: 1_700_000_000_000,
        tunnel_url: "http://127.0.0.1:9/t/calm-otter".into(),
        target: target.into(),
        method: "POST".into(),
        path: "/webhooks/stripe".into(),
        request_headers: vec![
            Header::new("host", "relay.example.com"),
            Header::new("user-agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
            Header::new("content-type", "application/json; charset=utf-8"),
            Header::new("content-length", STRIPE_BODY.len().to_string()),
            Header::new("stripe-signature", STRIPE_STALE_SIGNATURE),
        ],
        request_body: STRIPE_BODY.as_bytes().to_vec(),
        request_body_size: STRIPE_BODY.len() as u64,
        provider: Some("stripe".into()),
        event_key: "evt_1PortPreviewTest".into(),
        event_key_source: "body:/id".into(),
        replay_of: None,
        host_preserved: false,
        event_type: Some("payment_intent.succeeded".into()),
    }
}

/// A Slack Events API delivery as the tunnel records it, aimed at `target`.
pub fn slack_delivery(target: &str) -> portpreview::store::NewDelivery {
    use portpreview_shared::Header;
    portpreview::store::NewDelivery {
        path: "/slack/events".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new(
                "x-slack-signature",
                "v0=11ae90294b18553e97e51ed61315328f61b3bb8fc47e0ac40f9b5e7e4b8ec667",
            ),
            Header::new("x-slack-request-timestamp", "1700000000"),
        ],
        request_body: SLACK_BODY.as_bytes().to_vec(),
        request_body_size: SLACK_BODY.len() as u64,
        provider: Some("slack".into()),
        event_key: "Ev0PORTPREVIEW".into(),
        event_key_source: "body:/event_id".into(),
        ..stripe_delivery(target)
    }
}
