//! The real binaries, as a user runs them: local mode with nothing else
//! running, a client or a relay killed with SIGKILL, the relay's memory under
//! a big upload.

mod common;

use std::time::{Duration, Instant};

use common::bin::{portpreview_bin, server_bin};
use common::caller;
use common::local::{Answer, LocalHandler};
use common::process::{output_of, Running};
use common::relay::TestRelay;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn portpreview_http_works_on_its_own_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let mut client = Running::start(
        &portpreview_bin(),
        &["http", &port, "--no-tui", "--db", db.to_str().expect("utf-8 path")],
        dir.path(),
    );
    let banner = client.line_containing("Forwarding").await;
    let url = banner
        .split_whitespace()
        .nth(1)
        .expect("public URL on the first line")
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.contains("/t/"), "{banner}");
    assert!(banner.ends_with(&format!("-> http://localhost:{port}")), "{banner}");

    let reply = caller::post(&format!("{url}/webhooks/test"), r#"{"hello":"world"}"#).await;
    assert_eq!((reply.status, reply.text().as_str()), (200, r#"{"hello":"world"}"#));
    let line = client.next_line().await;
    assert!(line.starts_with("#1  POST /webhooks/test  200  "), "{line}");

    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    let listed = common::history::portpreview_async(&db, &["history", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).expect("a JSON array");
    assert_eq!(
        (
            rows[0]["path"].as_str(),
            rows[0]["status"].as_u64(),
            rows.as_array().map(Vec::len)
        ),
        (Some("/webhooks/test"), Some(200), Some(1)),
        "the delivery is in the history once the tunnel has stopped: {rows}"
    );
}

/// A local relay listening on every address prints a URL a caller can
/// use, not `http://0.0.0.0:…`.
#[tokio::test]
async fn a_local_relay_on_every_address_prints_a_url_that_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let handler = LocalHandler::echo().await;
    let (mut client, url) = Running::local_tunnel(handler.port(), "0.0.0.0:0", &db, dir.path()).await;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let reply = caller::post(&format!("{url}/hook"), "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

#[tokio::test]
async fn a_client_killed_mid_request_gets_its_caller_a_502_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::slow(Duration::from_secs(20)).await;
    let db = dir.path().join("history.db");
    let (client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let url = format!("{url}/slow");
    let call = tokio::spawn(async move { caller::post(&url, "{}").await });
    handler.wait_for_request().await;
    let killed = Instant::now();
    client.signal("KILL");
    let reply = call.await.expect("caller task");
    assert_eq!(reply.status, 502, "{}", reply.text());
    // At once, not when the handler would have answered (20 s) or the
    // relay's answer timeout runs out (30 s); the bound leaves a loaded
    // machine room to spare.
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "502 took {:?}",
        killed.elapsed()
    );
}

/// A tunnel killed while another process held the history's write lock
/// leaves the deliveries its callers had answered in its inbox. A reader
/// cannot move them in under that lock: it leaves them out and says so,
/// and once the lock is free the next one moves them in.
#[tokio::test]
async fn deliveries_a_killed_tunnel_left_under_anothers_lock_are_told_of_then_moved_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let blocker = rusqlite::Connection::open(&db).expect("open the history");
    blocker.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    for n in 0..3 {
        let reply = caller::post(&format!("{url}/hook"), format!(r#"{{"id":"evt_orphan_{n}"}}"#)).await;
        assert_eq!(reply.status, 200, "forwarding goes on while the history is locked");
    }
    client.signal("KILL");
    assert_eq!(
        client.exit_code(Duration::from_secs(10)).await,
        None,
        "killed, no exit code"
    );

    let listed = common::history::portpreview_async(&db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout.trim(), "[]");
    assert_eq!(
        listed.stderr,
        "note: 3 deliveries a tunnel that stopped left in its inbox are not in the history yet: another process \
         holds the history's write lock, and the next command to open it once the lock is free moves them in\n"
    );
    blocker.execute_batch("ROLLBACK").expect("let go of the lock");
    let listed = common::history::portpreview_async(&db, &["history", "--json"]).await;
    assert_eq!(
        (listed.code, listed.stderr.as_str()),
        (
            0,
            "note: a tunnel stopped without a word (killed, or its machine went down) before it recorded the \
             answers to 3 deliveries; they are in the history now, as \"PortPreview stopped before it recorded the \
             answer\", whatever their callers heard\n"
        )
    );
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    // Their answers died with the tunnel, in memory: the history says so.
    let errors: Vec<&serde_json::Value> = rows
        .as_array()
        .expect("a list")
        .iter()
        .map(|row| &row["error"])
        .collect();
    assert_eq!(
        errors, ["PortPreview stopped before it recorded the answer"; 3],
        "{rows:#}"
    );
    // Said once: moved in, they are the history's like any other.
    let listed = common::history::portpreview_async(&db, &["history"]).await;
    assert_eq!((listed.code, listed.stderr.as_str()), (0, ""));
}

/// A request in flight when its client is killed gets its caller a 502,
/// and a new client that takes the name over is never handed it: a
/// provider retries on its own, and a replay must be asked for.
#[tokio::test]
async fn a_request_in_flight_when_its_client_is_killed_never_reaches_the_next_client_of_the_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A short hold on a killed client's name, so the next one gets it soon.
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        grace: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let release = tokio_util::sync::CancellationToken::new();
    let handler = LocalHandler::holding("/in-flight", release.clone()).await;
    let db = dir.path().join("history.db");
    let named = ["--name", "killed-mid-request"];
    let (client, url) = Running::tunnel_with(&handler.url(), &relay.http_url(), &db, dir.path(), &named).await;
    let in_flight = format!("{url}/in-flight");
    let call = tokio::spawn(async move { caller::post(&in_flight, r#"{"id":"evt_killed_once"}"#).await });
    handler.wait_for_request().await;
    client.signal("KILL");
    let reply = call.await.expect("caller task");
    assert_eq!(reply.status, 502, "{}", reply.text());

    let options = common::tunnel::TunnelOptions {
        name: Some("killed-mid-request".into()),
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let next = loop {
        match common::tunnel::TestTunnel::start_with(&relay.http_url(), &handler.url(), options.clone()).await {
            Ok(tunnel) => break tunnel,
            Err(portpreview::tunnel::ConnectError::NameTaken { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("the next client did not get the name: {err}"),
        }
    };
    assert_eq!(next.public_url, url, "the same name, the same URL");
    // Answered through the new client: whatever the relay would hand it of
    // its own accord came before.
    let after = caller::post(&next.url("/after"), r#"{"id":"evt_after_takeover"}"#).await;
    assert_eq!(after.status, 200, "{}", after.text());
    release.cancel();
    let again = caller::post(&next.url("/after"), r#"{"id":"evt_after_release"}"#).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(
        handler.arrivals("evt_killed_once"),
        1,
        "the request in flight reached a handler once: {:?}",
        handler.requests()
    );
}

#[tokio::test]
async fn a_handler_still_at_work_when_the_relay_dies_has_its_answer_recorded_as_never_delivered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (relay, addr) = Running::relay(dir.path()).await;
    // Slow enough that the relay is dead before the handler answers.
    let handler = LocalHandler::start(|_| Answer {
        status: 201,
        body: b"charged".to_vec(),
        delay: Duration::from_secs(3),
        ..Answer::default()
    })
    .await;
    let mut tunnel = common::tunnel::TestTunnel::start(&format!("http://{addr}"), &handler.url()).await;
    let mut caller = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let request = format!(
        "POST /t/{}/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name()
    );
    caller.write_all(request.as_bytes()).await.expect("send");
    handler.wait_for_request().await;
    relay.signal("KILL");

    // The tunnel keeps reporting its reconnection attempts; the delivery
    // must come among them, once the handler has answered.
    let (summary, _) = tokio::time::timeout(Duration::from_secs(20), tunnel.next_delivery())
        .await
        .expect("the delivery is reported");
    let reason = "the connection to the relay ended before the answer; \
                  the handler then answered 201, which reached no caller";
    assert!(summary.id > 0, "{summary:?}");
    assert_eq!((summary.status, summary.error.as_deref()), (None, Some(reason)));
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store.get(summary.id).expect("read").expect("the delivery");
    let outcome = stored.outcome.expect("the answer is stored");
    assert_eq!(outcome.error.as_deref(), Some(reason));
    assert_eq!(outcome.response_body, b"charged", "what the handler said is kept");
}

/// Stopped while the relay is gone, the client still gives the handler at
/// work the time any request in flight gets, and records its answer: the
/// first half of the duplicate the provider will send.
#[tokio::test]
async fn stopped_while_the_relay_is_gone_a_handler_at_work_still_has_its_answer_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (relay, addr) = Running::relay(dir.path()).await;
    let handler = LocalHandler::start(|_| Answer {
        status: 201,
        delay: Duration::from_secs(2),
        ..Answer::default()
    })
    .await;
    let db = dir.path().join("history.db");
    let relay_url = format!("http://{addr}");
    let args = [
        "http",
        &handler.url(),
        "--server",
        &relay_url,
        "--db",
        db.to_str().expect("utf-8 path"),
        "--log-format",
        "json",
    ];
    let mut client = Running::start(&portpreview_bin(), &args, dir.path());
    let tunnel: serde_json::Value =
        serde_json::from_str(&client.line_containing(r#""event":"tunnel""#).await).expect("JSON line");
    let url = tunnel["public_url"].as_str().expect("public_url");
    let path = url
        .split_once("/t/")
        .map(|(_, name)| format!("/t/{name}/slow"))
        .expect("a /t/ URL");
    let mut caller = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let request = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}");
    caller.write_all(request.as_bytes()).await.expect("send");
    handler.wait_for_request().await;
    relay.signal("KILL");
    let lost: serde_json::Value =
        serde_json::from_str(&client.line_containing(r#""event":"disconnected""#).await).expect("JSON line");
    assert_eq!(
        lost["reason"], "the relay's connection was reset",
        "not a framing error"
    );
    client.signal("TERM");

    let stopping: serde_json::Value =
        serde_json::from_str(&client.line_containing(r#""event":"stopping""#).await).expect("JSON line");
    assert_eq!(
        (stopping["in_flight"].as_u64(), stopping["within_ms"].as_u64()),
        (Some(1), Some(3000))
    );
    let delivery: serde_json::Value =
        serde_json::from_str(&client.line_containing(r#""event":"delivery""#).await).expect("JSON line");
    assert_eq!(
        delivery["error"],
        "the connection to the relay ended before the answer; the handler then answered 201, which reached no caller"
    );
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

#[tokio::test]
async fn a_25_mib_upload_barely_moves_the_relays_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (relay, addr) = Running::relay(dir.path()).await;
    let handler = LocalHandler::start(|seen| Answer {
        status: 200,
        body: seen.body.len().to_string().into_bytes(),
        ..Answer::default()
    })
    .await;
    let tunnel = common::tunnel::TestTunnel::start(&format!("http://{addr}"), &handler.url()).await;
    // Warm up the paths a request takes, then measure the peak around the upload.
    assert_eq!(
        caller::post(&tunnel.url("/warm"), vec![1u8; 256 * 1024]).await.status,
        200
    );
    let before = relay.memory_kib("VmHWM");
    let reply = caller::post(&tunnel.url("/upload"), vec![7u8; 25 * 1024 * 1024]).await;
    assert_eq!((reply.status, reply.text()), (200, (25 * 1024 * 1024).to_string()));
    let grown = relay.memory_kib("VmHWM").saturating_sub(before);
    assert!(
        grown < 4 * 1024,
        "the relay's peak memory grew by {grown} KiB for a 25 MiB body: it buffers"
    );
}

#[tokio::test]
async fn log_format_json_prints_the_tunnel_then_one_object_per_delivery() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let mut client = Running::start(
        &portpreview_bin(),
        &[
            "--db",
            db.to_str().expect("utf-8 path"),
            "http",
            &port,
            "--log-format",
            "json",
        ],
        dir.path(),
    );
    let tunnel: serde_json::Value = serde_json::from_str(&client.next_line().await).expect("JSON line");
    assert_eq!(tunnel["event"], "tunnel");
    let url = tunnel["public_url"].as_str().expect("public_url").to_string();

    let github: [(&str, &[u8]); 2] = [
        ("x-github-event", b"push"),
        ("x-github-delivery", b"72d3162e-cc78-11e3-81ab-4c9367dc0958"),
    ];
    let reply = caller::send("POST", &format!("{url}/gh?x=1"), &github, "{}").await;
    assert_eq!(reply.status, 200);
    let line = client.next_line().await;
    let delivery: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
    assert_eq!(delivery["event"], "delivery");
    let duration = line
        .split("\"duration_ms\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .expect("duration_ms");
    assert!(
        duration.split('.').nth(1).is_none_or(|decimals| decimals.len() <= 3),
        "duration_ms to the microsecond: {line}"
    );
    assert_eq!(delivery["id"], 1);
    assert_eq!(delivery["method"], "POST");
    assert_eq!(delivery["path"], "/gh?x=1");
    assert_eq!(delivery["status"], 200);
    assert_eq!(delivery["provider"], "github");
    assert_eq!(delivery["event_key"], "72d3162e-cc78-11e3-81ab-4c9367dc0958");
    assert_eq!(delivery["delivery_number"], 1);
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

#[tokio::test]
async fn a_stdout_nobody_reads_never_stalls_the_tunnel() {
    use futures_util::StreamExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    // After the banner nobody reads stdout again, as with a pager that is
    // never scrolled: the pipe fills after a few hundred lines.
    let (mut client, url) = Running::tunnel(
        &handler.url(),
        &relay.http_url(),
        &dir.path().join("history.db"),
        dir.path(),
    )
    .await;
    let path = format!("/hooks/{}", "x".repeat(200));
    let burst = futures_util::stream::iter(0..800)
        .map(|i| {
            let call = format!("{url}{path}?n={i}");
            async move { caller::post(&call, "{}").await }
        })
        .buffer_unordered(8)
        .map(|reply| reply.status)
        .collect::<Vec<u16>>();
    let statuses = tokio::time::timeout(Duration::from_secs(60), burst)
        .await
        .expect("every delivery answered while stdout stays full");
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");

    client.signal("TERM");
    assert_eq!(
        client.exit_code(Duration::from_secs(10)).await,
        Some(0),
        "a full stdout does not keep the tunnel from stopping"
    );
}

#[tokio::test]
async fn lines_a_slow_stdout_missed_are_counted_once_it_catches_up() {
    use futures_util::StreamExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let db_arg = db.to_str().expect("utf-8 path");
    let args = [
        "http",
        &handler.url(),
        "--server",
        &relay.http_url(),
        "--log-format",
        "json",
        "--db",
        db_arg,
    ];
    let mut client = Running::start(&portpreview_bin(), &args, dir.path());
    let tunnel: serde_json::Value = serde_json::from_str(&client.next_line().await).expect("JSON line");
    let url = tunnel["public_url"].as_str().expect("public_url").to_owned();
    // Past the pipe's room and the tunnel's queue of 4,096 events to its
    // display, which nobody reads meanwhile.
    const SENT: usize = 4_600;
    let burst = futures_util::stream::iter(0..SENT)
        .map(|i| {
            let call = format!("{url}/hooks?n={i}");
            async move { caller::post(&call, "{}").await.status }
        })
        .buffer_unordered(16)
        .collect::<Vec<u16>>();
    let statuses = tokio::time::timeout(Duration::from_secs(120), burst)
        .await
        .expect("every delivery answered while stdout stays full");
    assert!(statuses.iter().all(|&s| s == 200));

    let (mut printed, mut missed) = (0, 0);
    while missed == 0 || printed + missed < SENT {
        let line: serde_json::Value = serde_json::from_str(&client.next_line().await).expect("JSON line");
        match line["event"].as_str() {
            Some("delivery") => printed += 1,
            Some("missed") => missed += line["count"].as_u64().expect("count") as usize,
            _ => {}
        }
    }
    assert!(printed < SENT, "the display fell behind: {printed} of {SENT} printed");
    assert_eq!(printed + missed, SENT, "each delivery printed or counted, once");
    let out = output_of(std::process::Command::new(portpreview_bin()).args([
        "--db",
        db.to_str().expect("utf-8 path"),
        "history",
        "--json",
        "--limit",
        "10000",
    ]));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("history JSON");
    assert_eq!(
        listed.len(),
        SENT,
        "the history has the deliveries whose lines were missed"
    );
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

/// A relay process that takes only `token`, and the address it listens on.
async fn relay_taking_a_token(token: &str, dir: &std::path::Path) -> (Running, String) {
    let tokens = dir.join("tokens.toml");
    std::fs::write(&tokens, format!("[[token]]\ntoken = \"{token}\"\n")).expect("tokens file");
    let tokens_arg = tokens.to_str().expect("utf-8 path");
    let mut relay = Running::start(&server_bin(), &["--listen", "127.0.0.1:0", "--tokens", tokens_arg], dir);
    let line = relay.line_containing("listening on").await;
    let address = line.rsplit(' ').next().expect("address").to_string();
    (relay, address)
}

#[tokio::test]
async fn the_config_files_token_goes_only_to_the_config_files_relay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut relay, address) = relay_taking_a_token("team-token", dir.path()).await;
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let db = dir.path().join("history.db");
    let db = db.to_str().expect("utf-8 path");
    let config = dir.path().join("config.toml");
    let stderr = dir.path().join("client.log");
    let tunnel = |server: &str| {
        let log = std::fs::File::create(&stderr).expect("log file");
        let args = ["http", &port, "--server", server, "--no-tui", "--db", db];
        Running::start_with_stderr(&portpreview_bin(), &args, dir.path(), log.into())
    };

    // The token kept for the team's relay is not handed to another one.
    std::fs::write(
        &config,
        "server = \"https://relay.team.example\"\ntoken = \"team-token\"\n",
    )
    .expect("config");
    let mut elsewhere = tunnel(&format!("http://{address}"));
    assert_eq!(elsewhere.exit_code(Duration::from_secs(20)).await, Some(2));
    let said = std::fs::read_to_string(&stderr).expect("client log");
    assert!(
        said.contains(
            "the config file's token is not sent: it is for https://relay.team.example, and this tunnel uses"
        ),
        "{said}"
    );
    // Not told to add the token the file holds.
    assert!(
        said.contains("this relay requires a token, and the config file ")
            && said.contains(" keeps its token for its own server: pass --token")
            && !said.contains("add token ="),
        "{said}"
    );

    // The same relay written another way is the config file's own.
    std::fs::write(
        &config,
        format!("server = \"http://{address}\"\ntoken = \"team-token\"\n"),
    )
    .expect("config");
    let mut own = tunnel(&format!("ws://{address}/"));
    own.line_containing("Forwarding").await;
    own.signal("TERM");
    assert_eq!(own.exit_code(Duration::from_secs(10)).await, Some(0));
    let said = std::fs::read_to_string(&stderr).expect("client log");
    assert!(!said.contains("not sent"), "{said}");
    relay.signal("TERM");
    let _ = relay.exit_code(Duration::from_secs(10)).await;
}

/// A user who keeps the relay and its token out of the command line, in
/// the environment or the config file, gets a tunnel through that relay:
/// no `--server` or `--token` is needed.
#[tokio::test]
async fn the_relay_and_its_token_can_come_from_the_environment_or_the_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut relay, address) = relay_taking_a_token("team-token", dir.path()).await;
    let relay_url = format!("http://{address}");
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let db = dir.path().join("history.db");
    let db = db.to_str().expect("utf-8 path");
    let config = dir.path().join("config.toml");
    let server_line = format!("server = \"{relay_url}\"\n");
    let server_and_token = format!("{server_line}token = \"team-token\"\n");

    // (what the config file holds, what the environment holds)
    let env_only = [
        ("PORTPREVIEW_SERVER", relay_url.as_str()),
        ("PORTPREVIEW_TOKEN", "team-token"),
    ];
    let token_from_env = [("PORTPREVIEW_TOKEN", "team-token")];
    let ways: [(&str, &[(&str, &str)]); 3] = [
        ("", &env_only),
        (&server_line, &token_from_env),
        (&server_and_token, &[]),
    ];
    for (in_config, in_env) in ways {
        std::fs::write(&config, in_config).expect("config file");
        let args = ["http", &port, "--no-tui", "--db", db];
        let mut client = Running::start_with_env(
            &portpreview_bin(),
            &args,
            dir.path(),
            std::process::Stdio::inherit(),
            in_env,
        );
        let banner = client.line_containing("Forwarding").await;
        let url = banner.split_whitespace().nth(1).expect("public URL").to_owned();
        // A tunnel that ignored the relay it was given would be a local
        // one, on another port of 127.0.0.1.
        assert!(
            url.starts_with(&format!("{relay_url}/t/")),
            "config {in_config:?}, env {in_env:?}: {banner}"
        );
        assert!(banner.ends_with(&format!("-> http://localhost:{port}")), "{banner}");
        let reply = caller::post(&format!("{url}/hook"), "from-the-relay").await;
        assert_eq!(
            (reply.status, reply.text().as_str()),
            (200, "from-the-relay"),
            "config {in_config:?}, env {in_env:?}"
        );
        client.signal("TERM");
        assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    }
    relay.signal("TERM");
    let _ = relay.exit_code(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn the_relay_logs_who_connected_by_token_label_and_neither_side_logs_the_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\ntoken = \"s3cret-token-value\"\nlabel = \"alice\"\nnames = [\"alice-api\"]\n\n\
         [[token]]\ntoken = \"b0b-token-value-0\"\nlabel = \"bob\"\n",
    )
    .expect("tokens file");
    let log = dir.path().join("relay.log");
    let tokens_arg = tokens.to_str().expect("utf-8 path");
    let mut relay = Running::start_with_env(
        &common::bin::server_bin(),
        &["--listen", "127.0.0.1:0", "--tokens", tokens_arg],
        dir.path(),
        std::fs::File::create(&log).expect("log file").into(),
        &[("PORTPREVIEW_LOG", "trace")],
    );
    let line = relay.line_containing("listening on").await;
    let relay_url = format!("http://{}", line.rsplit(' ').next().expect("address"));
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let db = dir.path().join("history.db");
    let db = db.to_str().expect("utf-8 path");

    // A tunnel to this relay with `token`, then `more` flags.
    let tunnel_args = |token: &str, more: &[&str]| -> Vec<String> {
        let common = ["http", &port, "--server", &relay_url, "--token", token, "--no-tui"];
        common.iter().chain(more).map(|s| s.to_string()).collect()
    };
    let mut refused = Running::start(
        &portpreview_bin(),
        &as_strs(&tunnel_args("not-it", &["--no-record"])),
        dir.path(),
    );
    assert_eq!(refused.exit_code(Duration::from_secs(20)).await, Some(2));
    let client_log = dir.path().join("client.log");
    let mut client = Running::start_with_env(
        &portpreview_bin(),
        &as_strs(&tunnel_args("s3cret-token-value", &["--db", db])),
        dir.path(),
        std::fs::File::create(&client_log).expect("log file").into(),
        &[("PORTPREVIEW_LOG", "trace")],
    );
    let url = client.public_url().await;
    // What callers send the relay carries, and never logs.
    let headers: &[(&str, &[u8])] = &[
        ("authorization", b"Bearer caller-credential"),
        ("stripe-signature", b"t=1,v1=caller-signature"),
    ];
    let reply = common::caller::send("POST", &format!("{url}/hook"), headers, "caller-body").await;
    assert_eq!(reply.status, 200);
    let name = url.rsplit('/').next().expect("tunnel name");
    let mut taken_args = tunnel_args("s3cret-token-value", &["--no-record", "--name"]);
    taken_args.push(name.to_owned());
    let mut taken = Running::start(&portpreview_bin(), &as_strs(&taken_args), dir.path());
    assert_eq!(taken.exit_code(Duration::from_secs(20)).await, Some(2));
    let mut reserved = Running::start(
        &portpreview_bin(),
        &as_strs(&tunnel_args(
            "b0b-token-value-0",
            &["--no-record", "--name", "alice-api"],
        )),
        dir.path(),
    );
    assert_eq!(reserved.exit_code(Duration::from_secs(20)).await, Some(2));
    client.signal("TERM");
    let _ = client.exit_code(Duration::from_secs(10)).await;
    relay.signal("TERM");
    let _ = relay.exit_code(Duration::from_secs(10)).await;

    let logged = std::fs::read_to_string(&log).expect("relay log");
    assert!(logged.contains("TRACE"), "the relay logged at trace: {logged}");
    for secret in ["caller-credential", "caller-signature", "caller-body"] {
        assert!(
            !logged.contains(secret),
            "the relay's trace log shows {secret}: {logged}"
        );
    }
    assert!(
        logged
            .lines()
            .any(|l| l.contains("tunnel connected") && l.contains("token_label=alice")),
        "{logged}"
    );
    // Each client turned away is a line with who and why.
    assert!(
        logged.lines().any(|l| l.contains("client refused")
            && l.contains("peer=127.0.0.1:")
            && l.contains("status=401")
            && l.contains("missing or invalid token")),
        "{logged}"
    );
    assert!(
        logged.lines().any(|l| l.contains("client refused")
            && l.contains("token_label=alice")
            && l.contains("status=409")
            && l.contains(&format!("name {name} is in use"))),
        "{logged}"
    );
    // Behind a proxy every peer is the proxy: the label says who tried.
    assert!(
        logged.lines().any(|l| l.contains("client refused")
            && l.contains("token_label=bob")
            && l.contains("status=403")
            && l.contains("alice-api is reserved")),
        "{logged}"
    );
    assert!(
        !logged
            .lines()
            .any(|l| l.contains("status=401") && l.contains("token_label=")),
        "an invalid token has no label: {logged}"
    );
    assert!(
        logged.lines().any(|l| l.contains("tunnel disconnected")
            && l.contains("the client stopped")
            && l.contains("name_held=false")),
        "the relay logs the client leaving as well: {logged}"
    );
    assert!(
        !logged.contains("s3cret-token-value") && !logged.contains("b0b-token-value") && !logged.contains("not-it"),
        "{logged}"
    );
    let client_logged = std::fs::read_to_string(&client_log).expect("client log");
    assert!(
        client_logged.contains("TRACE"),
        "the client logged at trace: {client_logged}"
    );
    assert!(
        !client_logged.contains("s3cret-token-value"),
        "not even a trace log shows the token: {client_logged}"
    );
}

#[tokio::test]
async fn a_local_timeout_past_the_relays_wait_and_a_token_are_warned_about_where_nothing_uses_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let relay_url = relay.http_url();
    let warning = "--local-timeout 45s is longer than a PortPreview relay waits for an answer by default (30s, its \
                   --request-timeout): unless it was started with a longer one, callers get the relay's 504 first";
    for (name, server) in [("remote", Some(relay_url.as_str())), ("local", None)] {
        let db = dir.path().join(format!("{name}.db"));
        let log = dir.path().join(format!("{name}.log"));
        let mut args = vec!["http", &port, "--no-tui", "--local-timeout", "45s", "--token", "t0k3n"];
        args.extend(["--db", db.to_str().expect("utf-8 path")]);
        match server {
            Some(server) => args.extend(["--server", server, "--key-fields", "type"]),
            None => args.extend(["--no-record", "--key-fields", "type"]),
        }
        let mut client = Running::start_logging(&portpreview_bin(), &args, dir.path(), &log);
        let url = client.public_url().await;
        let reply = caller::post(&format!("{url}/hook"), "{}").await;
        assert_eq!(reply.status, 200, "{name}: {}", reply.text());
        let logged = std::fs::read_to_string(&log).expect("client log");
        // The in-process relay is told to wait longer instead.
        assert_eq!(logged.contains(warning), server.is_some(), "{name}: {logged:?}");
        // Only a relay given by --server is sent the token.
        assert_eq!(
            logged.contains("--token (or PORTPREVIEW_TOKEN) is not used"),
            server.is_none(),
            "{name}: {logged:?}"
        );
        // Nothing makes event keys without a history.
        assert_eq!(
            logged.contains("--key-fields is not used"),
            server.is_none(),
            "{name}: {logged:?}"
        );
    }
}

/// A limit on open files too low for a tunnel is told in one line before
/// anything starts, while reading the history still works under it.
#[cfg(unix)]
#[test]
fn a_tunnel_under_too_low_an_open_file_limit_says_so_and_reading_still_works() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let under = |args: &[&str]| {
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", r#"ulimit -n 20 && exec "$0" "$@""#])
            .arg(portpreview_bin())
            .args(args)
            .arg("--db")
            .arg(&db)
            .env_remove("PORTPREVIEW_SERVER");
        output_of(&mut command)
    };
    let out = under(&["http", "3000", "--no-tui"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "error: this process may open only 20 files (ulimit -n); a tunnel needs at least 32\n"
    );
    portpreview::store::Store::open(&db).expect("a history");
    let out = under(&["history"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A tunnel with its relay in-process, at the fewest open files it runs
/// with, answers callers one after another: its relay's share of the
/// files is not all taken by the tunnel's own connection, which left every
/// caller a 503. Under that, it says so before starting.
#[cfg(unix)]
#[tokio::test]
async fn a_local_tunnel_at_its_fewest_open_files_answers_callers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let db = db.to_str().expect("utf-8 path");
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let bin = portpreview_bin();
    let bin = bin.to_str().expect("utf-8 path");
    let under = |limit: u64| format!(r#"ulimit -n {limit} && exec "$0" "$@""#);
    let too_few = under(32);
    let args = |shell_line| ["-c", shell_line, bin, "http", &port, "--no-tui", "--db", db];
    let out = output_of(
        std::process::Command::new("sh")
            .args(args(&too_few))
            .env_remove("PORTPREVIEW_SERVER"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "error: this process may open only 32 files (ulimit -n); a tunnel with its relay in-process needs at \
         least 40\n"
    );
    let fewest = under(40);
    let mut client = Running::start(std::path::Path::new("sh"), &args(&fewest), dir.path());
    let url = client.public_url().await;
    for n in 1..=3 {
        let reply = caller::post(&format!("{url}/hook/{n}"), r#"{"n":1}"#).await;
        assert_eq!(reply.status, 200, "caller {n}: {}", reply.text());
    }
}

#[test]
fn a_name_the_relay_would_refuse_is_told_before_connecting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("an empty config file");
    // Local mode and a relay nobody listens on: the name is refused first
    // either way, a look-alike encoded name too.
    let refused = [
        ("é", "lowercase letters, digits and '-'"),
        ("xn--pypal-4ve", "no '--' as its third and fourth characters"),
    ];
    for ((name, why), server) in refused
        .into_iter()
        .flat_map(|r| [(r, None), (r, Some("http://127.0.0.1:9"))])
    {
        let mut command = std::process::Command::new(portpreview_bin());
        command
            .args(["http", "3000", "--no-tui", "--name", name, "--db"])
            .arg(&db);
        if let Some(server) = server {
            command.args(["--server", server]);
        }
        let out = output_of(
            command
                .env("PORTPREVIEW_CONFIG", &config)
                .env_remove("PORTPREVIEW_SERVER"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{server:?}: {stderr}");
        assert!(stderr.contains(why), "{server:?}: {stderr}");
        assert!(!stderr.contains("relay"), "not a connection problem: {stderr}");
    }
}

/// A `--ca-cert` naming no file is refused as the flags are read, by the
/// flag's name, as the config file's `ca_cert` is: not once a `wss://`
/// relay is dialled, as a TLS failure.
#[test]
fn a_ca_cert_naming_no_file_is_refused_by_its_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("relay-ca.pem");
    let out = output_of(
        std::process::Command::new(portpreview_bin())
            .args(["http", "3000", "--no-tui", "--server", "wss://127.0.0.1:9", "--ca-cert"])
            .arg(&missing)
            .arg("--db")
            .arg(dir.path().join("history.db")),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: invalid value '{}' for '--ca-cert <FILE>': no file there; see portpreview http --help\n",
            missing.display()
        )
    );
}

/// A relay address pasted with a user and password is refused, by flag,
/// environment or config file, and the password is shown nowhere.
#[test]
fn a_relay_address_with_credentials_is_refused_without_showing_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("config file");
    let with_server = dir.path().join("server.toml");
    std::fs::write(&with_server, "server = \"https://me:hunter2@127.0.0.1:9\"\n").expect("config file");
    let url = "https://me:hunter2@127.0.0.1:9";
    type Run<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a std::path::Path);
    let runs: [Run; 3] = [
        (&["--server", url], &[], &empty),
        (&[], &[("PORTPREVIEW_SERVER", url)], &empty),
        (&[], &[], &with_server),
    ];
    for (args, env, config) in runs {
        let out = output_of(
            std::process::Command::new(portpreview_bin())
                .args(["http", "3000", "--no-tui", "--db"])
                .arg(&db)
                .args(args)
                .env_remove("PORTPREVIEW_SERVER")
                .envs(env.iter().copied())
                .env("PORTPREVIEW_CONFIG", config),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains("https://***@127.0.0.1:9"), "{stderr}");
        assert!(stderr.contains("--token"), "says what to do instead: {stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

/// A relay address or token in the environment set to bytes that are not
/// UTF-8 is named; clap's own error names no argument for it.
#[test]
fn a_relay_address_or_token_not_in_utf8_is_named() {
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("an empty config file");
    for var in ["PORTPREVIEW_SERVER", "PORTPREVIEW_TOKEN"] {
        let out = output_of(
            std::process::Command::new(portpreview_bin())
                .args(["http", "3000", "--no-tui", "--db"])
                .arg(&db)
                .env_remove("PORTPREVIEW_SERVER")
                .env_remove("PORTPREVIEW_TOKEN")
                .env(var, std::ffi::OsStr::from_bytes(b"http://relay\xff"))
                .env("PORTPREVIEW_CONFIG", &config),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {stderr}");
        assert_eq!(
            stderr,
            format!("error: {var} is set, but not to UTF-8 text; see portpreview http --help\n")
        );
    }
}

/// A relay port out of range was dropped on the way to the socket, so the
/// client tried port 80 or 443, token and all; it is refused as typed.
#[test]
fn a_relay_address_with_a_port_out_of_range_is_refused_as_typed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("config file");
    for server in [
        "http://127.0.0.1:90136",
        "wss://127.0.0.1:70000",
        "http://127.0.0.1:abc",
    ] {
        let out = output_of(
            std::process::Command::new(portpreview_bin())
                .args(["http", "3000", "--no-tui", "--server", server, "--db"])
                .arg(&db)
                .env_remove("PORTPREVIEW_SERVER")
                .env("PORTPREVIEW_CONFIG", &empty),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{server}: {stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!(
                "error: invalid relay address \"{server}\": use ws://, wss://, http:// or https:// followed by host:port \
                 (a port from 1 to 65535); see portpreview http --help"
            ),
        );
    }
}

/// A mistyped command or flag is refused in one line, with clap's tip and
/// which `--help` to read, for each binary.
#[test]
fn a_mistyped_command_or_flag_is_refused_in_one_line() {
    let runs = [
        (
            portpreview_bin(),
            vec!["histroy"],
            "(a similar subcommand exists: 'history'); see portpreview --help",
        ),
        (
            portpreview_bin(),
            vec!["history", "--bogus"],
            "'--bogus' found; see portpreview history --help",
        ),
        (
            portpreview_bin(),
            vec!["http"],
            "not provided: <PORT|URL>; see portpreview http --help",
        ),
        (
            portpreview_bin(),
            vec!["replay", "2", "--fresh-field", "/id"],
            "not provided: --fresh; see portpreview replay --help",
        ),
        (
            server_bin(),
            vec!["--bogus"],
            "'--bogus' found; see portpreview-server --help",
        ),
        (
            server_bin(),
            vec!["--listen", "127.0.0.1:0", "--max-connections-per-ip", "many"],
            "expected a whole number of connections, 1 or more; see portpreview-server --help",
        ),
        (
            portpreview_bin(),
            vec!["http", "3000", "--local-timeout", "30000000000000d"],
            "longer than a day: give a duration like 30s or 5m; see portpreview http --help",
        ),
        (
            portpreview_bin(),
            vec!["history", "--limit", "all"],
            "expected a whole number of deliveries, or 0 for all; see portpreview history --help",
        ),
        // An unset variable in CI: no key would name every keyless delivery.
        (
            portpreview_bin(),
            vec!["replay", ""],
            "or --latest; see portpreview replay --help",
        ),
        (
            portpreview_bin(),
            vec!["history", "--event", " "],
            "is empty: give an event key as history lists it; see portpreview history --help",
        ),
        (
            portpreview_bin(),
            vec!["replay", "2", "--times", "2.0"],
            "expected a whole number from 1 to 100000; see portpreview replay --help",
        ),
        (
            portpreview_bin(),
            vec!["check", "a.json", "--concurrency", "99999999999999999999"],
            "expected a whole number from 1 to 512; see portpreview check --help",
        ),
        (
            portpreview_bin(),
            vec!["replay", "2", "--drop-header", ""],
            "\"\" is not a header name; see portpreview replay --help",
        ),
        (
            portpreview_bin(),
            vec!["check", "a.json", "--check-url", "ftp://localhost:3000/state"],
            "is not one a request can go to: http:// or https://, host and port, then a path with no spaces or \
             control characters (localhost:3000/state and 3000/state are plain HTTP); see portpreview check --help",
        ),
        // A password in a URL flag is not repeated back.
        (
            portpreview_bin(),
            vec!["replay", "2", "--check-url", "http://admin:s3cret@localhost:1/state"],
            "'http://***@localhost:1/state' for '--check-url <URL>': the check URL \"http://***@localhost:1/state\" \
             carries a user or password, which is not sent: give the probe an address without; see portpreview replay --help",
        ),
        // Refused after clap, told as it tells its own.
        (
            portpreview_bin(),
            vec!["replay", "2", "--fresh"],
            "cannot show the handler acting twice; see portpreview replay --help",
        ),
        (
            portpreview_bin(),
            vec!["http", "99999"],
            "the port must be a number from 1 to 65535; see portpreview http --help",
        ),
    ];
    for (bin, args, said) in runs {
        let out = std::process::Command::new(bin).args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.trim_end().ends_with(said),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{args:?}: {stderr}");
    }
}

/// An argument that is not UTF-8 (a mangled file name, say) is refused
/// as any mistyped one is, wherever it stands.
#[test]
fn an_argument_that_is_not_utf8_is_refused_in_one_line() {
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"\xff");
    let runs: [&[&std::ffi::OsStr]; 3] = [
        &[odd],
        &[odd, "history".as_ref()],
        &["-x".as_ref(), odd, "replay".as_ref(), "4".as_ref()],
    ];
    for args in runs {
        let out = std::process::Command::new(portpreview_bin())
            .args(args)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.trim_end().ends_with("see portpreview --help"),
            "{args:?}: {stderr}"
        );
    }
}

/// `portpreview` with no command is asked for help, not mistaken: it gets
/// the help whole, on stderr, as a shell script's `$?` still sees 2.
#[test]
fn no_command_prints_the_help() {
    // Also with PORTPREVIEW_DB set in the shell, or only --db given.
    let bare = std::process::Command::new(portpreview_bin())
        .env_remove("PORTPREVIEW_DB")
        .output();
    let with_env = std::process::Command::new(portpreview_bin())
        .env("PORTPREVIEW_DB", "/tmp/x.db")
        .output();
    let with_flag = std::process::Command::new(portpreview_bin())
        .args(["--db", "/tmp/x.db"])
        .output();
    for out in [bare, with_env, with_flag] {
        let out = out.expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("Usage: portpreview [OPTIONS] <COMMAND>"), "{stderr}");
        for command in ["http", "history", "replay", "check", "tui"] {
            assert!(
                stderr.lines().any(|l| l.trim_start().starts_with(command)),
                "{command}: {stderr}"
            );
        }
        // Where settings nobody typed come from, but not the value of one.
        assert!(
            stderr.contains("config.toml") && stderr.contains("PORTPREVIEW_CONFIG"),
            "{stderr}"
        );
        assert!(!stderr.contains("/tmp/x.db"), "{stderr}");
    }
}

/// A refusal about a relay address, a token or a history path that came
/// from a variable or the config file names it: the user typed none of
/// them this time, and may have forgotten setting them.
#[tokio::test]
async fn a_refusal_names_the_variable_or_config_file_its_value_came_from() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("config file");
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    let dead = format!("http://{nobody}");
    let with_server = dir.path().join("server.toml");
    std::fs::write(&with_server, format!("server = \"{dead}\"\n")).expect("config file");
    let tokens = portpreview_server::Tokens::from_toml("[[token]]\ntoken = \"right\"\n").expect("tokens");
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        tokens: Some(tokens),
        ..Default::default()
    })
    .await;
    let guarded = relay.http_url();
    let missing = dir.path().join("none.db");
    let missing = missing.to_str().expect("UTF-8 path");

    type Run<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a std::path::Path, String);
    fn http<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        [&["http", "3000", "--no-tui"][..], extra].concat()
    }
    let runs: Vec<Run> = vec![
        (
            http(&["--server", &dead]),
            vec![],
            &empty,
            "cannot reach the relay".into(),
        ),
        (
            http(&[]),
            vec![("PORTPREVIEW_SERVER", &dead)],
            &empty,
            "; the relay address comes from PORTPREVIEW_SERVER".into(),
        ),
        (
            http(&[]),
            vec![],
            &with_server,
            format!(
                "; the relay address comes from the config file {}",
                with_server.display()
            ),
        ),
        (
            http(&["--server", &guarded, "--token", "wrong"]),
            vec![],
            &empty,
            "the relay refused the token from --token (401)".into(),
        ),
        (
            http(&["--server", &guarded]),
            vec![("PORTPREVIEW_TOKEN", "wrong")],
            &empty,
            "the relay refused the token from PORTPREVIEW_TOKEN (401)".into(),
        ),
        (
            http(&["--server", &guarded]),
            vec![("PORTPREVIEW_TOKEN", "t\u{f6}ken-secret")],
            &empty,
            "the token from PORTPREVIEW_TOKEN holds characters a header cannot carry".into(),
        ),
        (
            http(&["--server", &guarded, "--token", "t\u{f6}ken-secret"]),
            vec![],
            &empty,
            "the token from --token holds characters a header cannot carry".into(),
        ),
        (
            vec!["history", "--db", missing],
            vec![],
            &empty,
            "no history database at".into(),
        ),
        (
            vec!["history"],
            vec![("PORTPREVIEW_DB", missing)],
            &empty,
            "; the path comes from PORTPREVIEW_DB".into(),
        ),
    ];
    for (args, env, config, said) in runs {
        let mut command = tokio::process::Command::new(portpreview_bin());
        command
            .args(&args)
            .env_remove("PORTPREVIEW_SERVER")
            .env_remove("PORTPREVIEW_TOKEN")
            .env_remove("PORTPREVIEW_DB")
            .envs(env.iter().copied())
            .env("PORTPREVIEW_CONFIG", config);
        if args[0] == "http" {
            command.arg("--db").arg(&db);
        }
        let out = command.output().await.expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&said), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("secret"), "a token is never shown: {stderr}");
        if env.is_empty() && config == empty {
            assert!(!stderr.contains("comes from"), "typed, so nothing to explain: {stderr}");
        }
    }
}

#[test]
fn a_refused_argument_is_quoted_with_its_control_characters_escaped() {
    // C1 CSI (U+009B) starts an escape sequence on many terminals, as ESC [ does.
    let hostile = "7\u{9b}2J\u{1b}]52;c;aGk=\u{7}";
    let runs = [
        (portpreview_bin(), vec!["show", hostile]),
        (portpreview_bin(), vec!["history", "--limit", hostile]),
        (server_bin(), vec!["--listen", hostile]),
    ];
    for (bin, args) in runs {
        let out = std::process::Command::new(bin).args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: invalid value"), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "{args:?}: one line, as every refusal: {stderr}"
        );
        assert!(
            !stderr.chars().any(|c| c.is_control() && c != '\n'),
            "{args:?}: a control character reached the terminal: {stderr:?}"
        );
        // Whole, where clap quotes the value as given: its own rendering
        // would strip the escape sequence and quote another value.
        assert!(
            stderr.contains("'7\\u{9b}2J\\x1b]52;c;aGk=\\x07'"),
            "{args:?}: shown escaped: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_name_held_for_a_killed_client_says_so_and_is_waited_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A short hold, which the client started again waits out.
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        grace: Duration::from_secs(3),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let db = dir.path().join("history.db");
    let db = db.to_str().expect("utf-8 path");
    let args = [
        "http",
        &port,
        "--server",
        &relay.http_url(),
        "--name",
        "held-hooks",
        "--no-tui",
        "--db",
        db,
    ];
    let mut first = Running::start(&portpreview_bin(), &args, dir.path());
    let url = first.public_url().await;
    first.signal("KILL");
    let _ = first.exit_code(Duration::from_secs(10)).await;
    // While the name is held, its callers hear that it is coming back,
    // never another client's content.
    // (Until the relay has read the dead socket's end, a caller may still
    // get the 502 of a client gone mid-request.)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let reply = loop {
        let reply = caller::post(&format!("{url}/hook"), "x").await;
        if reply.status != 502 || std::time::Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (reply.status, reply.text().trim_end()),
        (503, "tunnel held-hooks is reconnecting")
    );

    let log = dir.path().join("second.log");
    let mut second = Running::start_logging(&portpreview_bin(), &args, dir.path(), &log);
    // Rather than exit, leaving its user to retry by hand, it waits for
    // the hold to end, and serves the same URL.
    assert_eq!(second.public_url().await, url, "the same name, the same URL");
    let said = std::fs::read_to_string(&log).expect("stderr");
    assert!(
        said.starts_with(
            "warning: tunnel name \"held-hooks\" is taken: name held-hooks is held for the client that last had it, \
             which went away without saying goodbye; it is free in "
        ) && said.contains(" s; waiting for it (ctrl-c stops; --name asks for another)"),
        "{said}"
    );
    let reply = caller::post(&format!("{url}/after"), "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// A relay restarted while a client waits out a name it held: the new
/// relay holds nothing, and the client, asking again every few seconds
/// rather than once when the old hold would have ended, and waiting
/// through the moments the relay is down, has the name.
#[tokio::test]
async fn a_name_waited_for_is_taken_once_a_restarted_relay_has_forgotten_the_hold() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A hold of two minutes, within the five a start waits.
    let config = || portpreview_server::RelayConfig {
        grace: Duration::from_secs(120),
        ..Default::default()
    };
    let relay = TestRelay::with_config(config()).await;
    let address = relay.http_url().trim_start_matches("http://").to_owned();
    let handler = LocalHandler::echo().await;
    let owned = named_tunnel(&handler, &relay, "kept-hooks", &dir.path().join("history.db"));
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut first = Running::start(&portpreview_bin(), &args, dir.path());
    let url = first.public_url().await;
    first.signal("KILL");
    let _ = first.exit_code(Duration::from_secs(10)).await;

    let log = dir.path().join("second.log");
    let mut second = Running::start_logging(&portpreview_bin(), &args, dir.path(), &log);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .expect("stderr")
        .contains("waiting for it")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the hold was met: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.stop().await;
    // Down across one of the client's re-asks, as a restart may be.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .expect("the relay's port again");
    let _relay = TestRelay::on(listener, config());
    // Within the 30 s a line is waited for, not the two minutes of the old hold.
    assert_eq!(second.public_url().await, url, "the same name, the same URL");
    let reply = caller::post(&format!("{url}/after"), "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// A client stopped (a laptop asleep) past its relay's ping timeout and
/// hold comes back to find its name taken by another client: its URL
/// now reaches that client, which it says, not that the name is held for
/// it, and it stops asking within a minute rather than five.
#[tokio::test]
async fn a_client_back_from_sleep_to_find_its_name_taken_says_so_and_stops() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Found dead within a second and a half, held for half a second more.
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        ping_interval: Duration::from_millis(500),
        dead_after: Duration::from_millis(1500),
        grace: Duration::from_millis(500),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let first_dir = dir.path().join("first");
    std::fs::create_dir(&first_dir).expect("first's folder");
    let owned = named_tunnel(&handler, &relay, "shared", &first_dir.join("history.db"));
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let log = first_dir.join("stderr.log");
    let mut asleep = Running::start_logging(&portpreview_bin(), &args, &first_dir, &log);
    let url = asleep.public_url().await;
    asleep.signal("STOP");
    // The relay gives the sleeper up, then its hold ends: the name is free.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = caller::post(&format!("{url}/hook"), "x").await;
        if reply.status == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {}: {}",
            reply.status,
            reply.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let owned = named_tunnel(&handler, &relay, "shared", &dir.path().join("history.db"));
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut other = Running::start(&portpreview_bin(), &args, dir.path());
    assert_eq!(other.public_url().await, url, "the other client has the URL");

    asleep.signal("CONT");
    assert_eq!(asleep.exit_code(Duration::from_secs(90)).await, Some(2));
    let said = std::fs::read_to_string(&log).expect("stderr");
    assert!(
        said.contains("tunnel name \"shared\" is in use (409): name shared is in use; asking for it again"),
        "{said}"
    );
    let last = said.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "error: tunnel name \"shared\" is taken (409): name shared is in use: another client has had it for "
        ) && last.ends_with(
            " s while this one reconnected, and the URL now reaches that client; ask for another with --name"
        ),
        "{said}"
    );
    let reply = caller::post(&format!("{url}/after"), "{}").await;
    assert_eq!(reply.status, 200, "the other client still serves it: {}", reply.text());
}

/// `http` to `handler` through `relay`, under `name`, printing lines,
/// recording into `db`.
fn named_tunnel(handler: &LocalHandler, relay: &TestRelay, name: &str, db: &std::path::Path) -> Vec<String> {
    let db = db.to_str().expect("utf-8 path");
    [
        "http",
        &handler.port().to_string(),
        "--server",
        &relay.http_url(),
        "--name",
        name,
        "--no-tui",
        "--db",
        db,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// With stdout in a file, stderr tells of a lost relay connection and of
/// its return, not only of the tries that failed.
#[tokio::test]
async fn stderr_says_when_the_relay_connection_is_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let address = relay.http_url().trim_start_matches("http://").to_owned();
    let handler = LocalHandler::echo().await;
    let owned = named_tunnel(&handler, &relay, "comes-back", &dir.path().join("history.db"));
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let log = dir.path().join("stderr.log");
    let mut client = Running::start_logging(&portpreview_bin(), &args, dir.path(), &log);
    let url = client.public_url().await;
    relay.stop().await;
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .expect("the relay's port again");
    let _relay = TestRelay::on(listener, Default::default());
    assert_eq!(client.public_url().await, url, "back on its name");
    let said = std::fs::read_to_string(&log).expect("stderr");
    let lost = said.find("relay connection lost").expect("the loss told");
    let back = said
        .find(&format!("reconnected: forwarding {url} again\n"))
        .unwrap_or_else(|| panic!("the return told: {said}"));
    assert!(lost < back, "{said}");
}

/// `portpreview http` whose handler holds one request for 30 s, far longer
/// than the 3 s the client gives requests in flight when it is stopped.
struct StuckRequest {
    dir: tempfile::TempDir,
    _relay: TestRelay,
    _handler: LocalHandler,
    client: Running,
    call: tokio::task::JoinHandle<caller::Reply>,
    /// The tunnel's public URL.
    url: String,
}

impl StuckRequest {
    /// Starts the client with `extra` arguments and sends the request.
    async fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let relay = TestRelay::start().await;
        let handler = LocalHandler::slow(Duration::from_secs(30)).await;
        let (target, relay_url) = (handler.url(), relay.http_url());
        let db = dir.path().join("history.db");
        let mut args = vec!["http", &target, "--server", &relay_url, "--no-tui"];
        args.extend(["--db", db.to_str().expect("utf-8 path")]);
        args.extend(extra);
        let stderr = std::fs::File::create(dir.path().join("client.log")).expect("log file");
        let mut client = Running::start_with_stderr(&portpreview_bin(), &args, dir.path(), stderr.into());
        // The public URL is the first one printed, as text or as JSON.
        let connected = client.line_containing("/t/").await;
        let url = connected
            .split(|c: char| c.is_whitespace() || c == '"')
            .find(|word| word.starts_with("http://"))
            .expect("public URL")
            .to_string();
        let slow = format!("{url}/slow");
        let call = tokio::spawn(async move { caller::post(&slow, "{}").await });
        handler.wait_for_request().await;
        Self {
            dir,
            _relay: relay,
            _handler: handler,
            client,
            call,
            url,
        }
    }

    /// What the client wrote on stderr.
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("client.log")).expect("stderr")
    }

    /// The outcome the history recorded for the request.
    fn recorded_error(&self) -> Option<String> {
        let db = self.dir.path().join("history.db");
        let store = portpreview::store::Store::open_existing(&db).expect("open the history");
        let listed = store.list(&portpreview::store::ListQuery::default()).expect("read");
        assert_eq!(listed.len(), 1, "{listed:?}");
        listed[0].error.clone()
    }
}

#[tokio::test]
async fn a_request_in_flight_when_the_user_stops_the_tunnel_is_recorded_as_stopped() {
    let mut stuck = StuckRequest::start(&[]).await;
    stuck.client.signal("TERM");
    assert_eq!(stuck.client.exit_code(Duration::from_secs(20)).await, Some(0));
    assert_eq!((&mut stuck.call).await.expect("caller task").status, 502);
    let said = stuck.stderr();
    assert!(
        said.contains("stopping: 1 request in flight gets up to 3s to finish"),
        "the wait is explained: {said}"
    );
    assert!(!said.contains("DEBUG"), "no debug lines unless asked: {said}");
    assert_eq!(
        stuck.recorded_error().as_deref(),
        Some("PortPreview was stopped before the answer came"),
        "the user stopped it; the relay did not go away"
    );
}

/// A request that comes while the tunnel finishes what is in flight is
/// answered 503 and kept in the history with why, as every request the
/// tunnel read is.
#[tokio::test]
async fn a_request_that_comes_while_the_tunnel_stops_is_turned_away_and_recorded() {
    let mut stuck = StuckRequest::start(&[]).await;
    stuck.client.signal("TERM");
    while !stuck.stderr().contains("stopping: 1 request in flight") {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let late = caller::post(&format!("{}/late", stuck.url), "{\"late\":true}").await;
    assert_eq!(late.status, 503);
    assert_eq!(
        String::from_utf8_lossy(&late.body),
        "portpreview: the tunnel's client is shutting down\n"
    );
    assert_eq!(stuck.client.exit_code(Duration::from_secs(20)).await, Some(0));

    let db = stuck.dir.path().join("history.db");
    let store = portpreview::store::Store::open_existing(&db).expect("open the history");
    let listed = store.list(&portpreview::store::ListQuery::default()).expect("read");
    let late = listed
        .iter()
        .find(|d| d.path == "/late")
        .expect("the late request is recorded");
    assert_eq!(late.status, None);
    assert_eq!(
        late.error.as_deref(),
        Some("PortPreview was stopping: it answered the caller 503, and the request was not forwarded")
    );
    let stored = store.get(late.id).expect("read").expect("the delivery");
    assert_eq!(stored.request.request_body, b"{\"late\":true}");
}

#[tokio::test]
async fn asked_to_stop_twice_the_tunnel_cuts_off_what_is_in_flight() {
    let mut stuck = StuckRequest::start(&["--log-format", "json"]).await;
    stuck.client.signal("INT");
    let draining = stuck.client.line_containing(r#""event":"stopping""#).await;
    assert!(draining.contains(r#""within_ms":3000"#), "{draining}");
    // A moment later: at once, it would be taken for the same ctrl-c.
    tokio::time::sleep(portpreview_server::signal::SIGNAL_SETTLE * 2).await;
    stuck.client.signal("INT");
    let cut_off = stuck.client.line_containing(r#""event":"stopping""#).await;
    assert!(
        cut_off.contains(r#""in_flight":1"#) && cut_off.contains(r#""within_ms":0"#),
        "the second ctrl-c cuts the request off: {cut_off}"
    );
    assert_eq!(
        stuck.client.exit_code(Duration::from_secs(20)).await,
        Some(130),
        "a stop cut short is not a clean exit"
    );
    assert_eq!((&mut stuck.call).await.expect("caller task").status, 502);
    assert_eq!(
        stuck.recorded_error().as_deref(),
        Some("PortPreview was stopped before the answer came")
    );
}

/// One ctrl-c can come twice at once: from the terminal, and passed on by
/// a wrapper such as npm to its child. Taken for two, it would cut off
/// every request in flight on every ctrl-c under such a wrapper.
#[tokio::test]
async fn two_signals_at_once_are_one_stop_that_waits_for_what_is_in_flight() {
    let mut stuck = StuckRequest::start(&["--log-format", "json"]).await;
    stuck.client.signal_twice("INT");
    let draining = stuck.client.line_containing(r#""event":"stopping""#).await;
    assert!(draining.contains(r#""within_ms":3000"#), "{draining}");
    assert_eq!(
        stuck.client.exit_code(Duration::from_secs(20)).await,
        Some(0),
        "the stop waited its 3 s, as for one ctrl-c"
    );
    assert_eq!(
        stuck.recorded_error().as_deref(),
        Some("PortPreview was stopped before the answer came")
    );
}

#[tokio::test]
async fn a_relay_whose_log_cannot_be_written_still_hosts_tunnels_and_stops_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let handler = LocalHandler::echo().await;
    // A log on a full disk: every line the relay writes fails.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let mut relay = Running::start_with_stderr(&server_bin(), &["--listen", "127.0.0.1:0"], dir.path(), full.into());
    let line = relay.line_containing("listening on").await;
    let addr = line.rsplit(' ').next().expect("address").to_string();
    for round in 0..2 {
        let (mut client, url) = Running::tunnel_with(
            &handler.url(),
            &format!("http://{addr}"),
            &dir.path().join("history.db"),
            dir.path(),
            &["--name", "logless", "--no-record"],
        )
        .await;
        let reply = caller::post(&format!("{url}/hook"), "{}").await;
        assert_eq!(reply.status, 200, "round {round}: {}", reply.text());
        client.signal("TERM");
        assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    }
    relay.signal("TERM");
    assert_eq!(relay.exit_code(Duration::from_secs(20)).await, Some(0));
}

#[tokio::test]
async fn asked_to_stop_twice_the_relay_stops_at_once_and_sighup_asks_as_ctrl_c_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let handler = LocalHandler::slow(Duration::from_secs(30)).await;
    let (mut relay, addr) = Running::relay(dir.path()).await;
    let (_client, url) = Running::tunnel_with(
        &handler.url(),
        &format!("http://{addr}"),
        &dir.path().join("history.db"),
        dir.path(),
        &["--no-record"],
    )
    .await;
    let call = tokio::spawn(async move { caller::post(&format!("{url}/slow"), "{}").await });
    handler.wait_for_request().await;
    // One hang-up of a terminal can reach the relay twice at once.
    relay.signal_twice("HUP");
    // The first signal drains: the relay is still there for the request in
    // flight, well within its 10 s drain.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        relay.child.try_wait().expect("poll the relay").is_none(),
        "SIGHUP drains first"
    );
    let asked = Instant::now();
    relay.signal("INT");
    assert_eq!(
        relay.exit_code(Duration::from_secs(5)).await,
        Some(130),
        "a second signal stops the relay at once, and says the stop was cut short"
    );
    assert!(asked.elapsed() < Duration::from_secs(3), "{:?}", asked.elapsed());
    let reply = call.await.expect("caller task");
    assert_eq!(reply.status, 502, "the request cut off is told why: {}", reply.text());
    assert!(reply.text().contains("the relay shut down"), "{}", reply.text());
}

#[test]
fn a_tunnel_that_cannot_start_ends_its_json_stream_with_the_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    let db = dir.path().join("history.db");
    // A config file others may read is warned of as the tunnel's set-up
    // warnings are: a JSON line, not a line of text among them.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[secrets]\nstripe = \"whsec_x\"\n").expect("config file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = output_of(
        std::process::Command::new(portpreview_bin())
            .args(["http", "9", "--log-format", "json", "--server"])
            .arg(format!("http://{closed}"))
            .arg("--db")
            .arg(&db)
            .env("PORTPREVIEW_CONFIG", &config),
    );
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    #[cfg(unix)]
    {
        let first: serde_json::Value = serde_json::from_str(stdout.lines().next().expect("a line")).expect("JSON");
        assert_eq!(first["event"], "warning", "{stdout}");
        assert!(
            first["message"]
                .as_str()
                .expect("a message")
                .ends_with("may be read by other users (mode 0644), and holds signing secrets: chmod 600 it"),
            "{stdout}"
        );
    }
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line on stdout")).expect("JSON");
    assert_eq!(last["event"], "error", "{stdout}");
    let message = last["message"].as_str().expect("a message");
    assert!(message.starts_with("cannot reach the relay"), "{message}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("error: {message}")),
        "stderr keeps the line: {stderr}"
    );
}

/// A command line refused before anything runs is a JSON line too, when
/// the words given ask for JSON lines: a supervisor reading stdout would
/// otherwise see nothing at all.
#[test]
fn a_refused_command_line_ends_its_json_stream_with_the_error() {
    let out = output_of(
        std::process::Command::new(portpreview_bin())
            .args(["http", "3000", "--log-format", "json", "--name", "BAD_NAME"])
            .env("PORTPREVIEW_CONFIG", "/dev/null"),
    );
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: serde_json::Value = serde_json::from_str(stdout.trim_end()).expect("one JSON line");
    assert_eq!(line["event"], "error", "{stdout}");
    let message = line["message"].as_str().expect("a message");
    assert!(
        message.starts_with("invalid value 'BAD_NAME' for '--name <NAME>'"),
        "{message}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr, format!("error: {message}\n"), "stderr keeps the line");
}

/// A tunnel left idle after a burst of large uploads hands their memory
/// back: the allocator keeps freed pages for reuse, and an idle client sat
/// on 150 MiB after eight 25 MiB uploads.
#[tokio::test]
async fn an_idle_tunnel_gives_back_the_memory_a_burst_of_uploads_took() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let db = dir.path().join("history.db");
    let (client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let body = bytes::Bytes::from(vec![b'x'; 8 * 1024 * 1024]);
    let uploads: Vec<_> = (0..8)
        .map(|_| {
            let (url, body) = (format!("{url}/upload"), body.clone());
            tokio::spawn(async move { caller::post(&url, body).await.status })
        })
        .collect();
    for upload in uploads {
        assert_eq!(upload.await.expect("caller"), 200);
    }
    let peak = client.memory_kib("VmHWM");
    assert!(peak > 60 * 1024, "the burst took memory: {peak} KiB at peak");
    // Handed back once the history writer has been idle for a second.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let held = client.memory_kib("VmRSS");
        if held < 40 * 1024 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still holding {held} KiB after the burst (peak {peak} KiB)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A tunnel stopped (`ctrl-z`) longer than the relay waits for a silent
/// client: the relay answers the webhook sent meanwhile 502, and the
/// tunnel, running again, does not send it to the handler after all (the
/// provider's retry would be a duplicate of the tunnel's own making), but
/// keeps it in the history with why.
#[tokio::test]
async fn a_webhook_sent_while_the_tunnel_was_stopped_is_not_forwarded_when_it_runs_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;

    client.signal("STOP");
    let started = Instant::now();
    // Spread over the pause, before the relay gives up: every one waits in
    // the socket, and the first few read on waking end the connection.
    let mut sent = tokio::task::JoinSet::new();
    for n in 0..8 {
        let url = format!("{url}/webhooks/stopped/{n}");
        sent.spawn(async move {
            tokio::time::sleep(Duration::from_millis(900 * n)).await;
            caller::post(&url, "{}").await
        });
    }
    while let Some(reply) = sent.join_next().await {
        let reply = reply.expect("a caller");
        assert_eq!(reply.status, 502);
        assert_eq!(
            String::from_utf8_lossy(&reply.body),
            "the tunnel's client stopped answering while the request was in flight (paused, or its network \
             stalled)\n"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "the relay waited for its pings first"
    );
    client.signal("CONT");

    // Each is recorded beside the others: their lines come in any order.
    let mut unseen: std::collections::BTreeSet<String> = (0..8).map(|n| format!("/webhooks/stopped/{n}")).collect();
    while !unseen.is_empty() {
        let line = client.line_containing("/webhooks/stopped/").await;
        assert!(
            line.contains("not forwarded: read after ")
                && line.contains("s without a word from the relay (PortPreview paused"),
            "{line}"
        );
        let path = line
            .split_whitespace()
            .find(|word| word.starts_with("/webhooks/stopped/"));
        assert!(path.is_some_and(|path| unseen.remove(path)), "once each: {line}");
    }
    assert!(handler.requests().is_empty(), "the handler never had them");
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    let listed = common::history::portpreview_async(&db, &["history", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).expect("a JSON array");
    let mut paths: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["path"].as_str())
        .collect();
    paths.sort_unstable();
    let sent: Vec<String> = (0..8).map(|n| format!("/webhooks/stopped/{n}")).collect();
    assert_eq!(paths, sent, "{rows}");
    for row in rows.as_array().unwrap() {
        assert!(
            row["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("not forwarded: read after ")
                    && e.contains("s without a word from the relay (PortPreview paused")),
            "{rows}"
        );
    }
}

/// A tunnel stopped while its handler works on a request, longer than
/// the relay waits for a silent client: the relay answers the caller 502,
/// and the handler's 200, sent when the tunnel runs again, reaches nobody.
/// The history keeps the answer but not as delivered, or a provider's
/// retry would look like the second delivery of an event that had
/// succeeded.
#[tokio::test]
async fn an_answer_sent_after_a_pause_the_relay_gave_up_in_is_not_taken_as_delivered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::slow(Duration::from_secs(2)).await;
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;

    let slow = format!("{url}/webhooks/slow");
    let sent = tokio::spawn(async move { caller::post(&slow, "{}").await });
    handler.wait_for_request().await;
    client.signal("STOP");
    let reply = sent.await.expect("the caller");
    assert_eq!(reply.status, 502, "the relay gave up on the tunnel: {}", reply.text());
    client.signal("CONT");

    let line = client.line_containing("/webhooks/slow").await;
    assert!(line.contains("/webhooks/slow  ---  "), "no caller had the 200: {line}");
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    let listed = common::history::portpreview_async(&db, &["history", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).expect("a JSON array");
    let [row] = rows.as_array().expect("an array").as_slice() else {
        panic!("one delivery: {rows}");
    };
    assert_eq!(row["status"], serde_json::Value::Null, "{row}");
    let error = row["error"].as_str().unwrap_or_default();
    // Which the tunnel learns first, the answer or the relay's close, is
    // the order its sockets are read in on waking.
    assert!(
        error.contains("the handler then answered 200, which reached no caller")
            || (error.starts_with("the handler answered 200 after ")
                && error.ends_with("it may have answered the caller 502, and this answer then reached no caller")),
        "{row}"
    );
    assert_eq!(handler.requests().len(), 1, "forwarded once");
}

/// The in-process relay is stopped with the tunnel, and gives up on
/// nothing: what a caller sent while both were stopped is forwarded once
/// they run again.
#[tokio::test]
async fn a_webhook_sent_while_a_local_tunnel_was_stopped_is_forwarded_when_it_runs_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let handler = LocalHandler::echo().await;
    let (mut client, url) = Running::local_tunnel(handler.port(), "127.0.0.1:0", &db, dir.path()).await;
    // A caller that keeps its connection alive (as HTTP clients' pools
    // do) sends on it again during the pause: past the 10 s a public
    // relay lets a connection sit idle, which the local one does not hold
    // against it.
    let uri: http::Uri = url.parse().expect("the tunnel's URL");
    let authority = uri.authority().expect("a host").to_string();
    let post = |path: &str| {
        format!(
            "POST {}{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 2\r\n\r\n{{}}",
            uri.path()
        )
    };
    let mut kept = tokio::net::TcpStream::connect(&authority).await.expect("connect");
    kept.write_all(post("/webhooks/before").as_bytes())
        .await
        .expect("write");
    let before = answer_on(&mut kept).await;
    assert!(before.starts_with("HTTP/1.1 200"), "{before}");
    client.signal("STOP");
    let held = format!("{url}/webhooks/held");
    let sent = tokio::spawn(async move { caller::post(&held, "{}").await });
    kept.write_all(post("/webhooks/kept").as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_secs(12)).await;
    client.signal("CONT");
    let reply = sent.await.expect("the caller");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let again = answer_on(&mut kept).await;
    assert!(again.starts_with("HTTP/1.1 200"), "the kept-alive caller: {again}");
    let mut seen: Vec<String> = handler.requests().iter().map(|r| r.uri.clone()).collect();
    seen.sort();
    assert_eq!(
        seen,
        ["/webhooks/before", "/webhooks/held", "/webhooks/kept"],
        "each forwarded once"
    );
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

/// The in-process relay is stopped with the tunnel, and so is its wait
/// for an answer: a request whose handler answered during a pause longer
/// than that wait (30 s) reaches its caller with the handler's answer once
/// both run again, as the history says, rather than the relay's 504.
#[tokio::test]
async fn an_answer_given_while_a_local_tunnel_was_stopped_reaches_its_caller() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let handler = LocalHandler::slow(Duration::from_secs(1)).await;
    let (mut client, url) = Running::local_tunnel(handler.port(), "127.0.0.1:0", &db, dir.path()).await;
    let slow = format!("{url}/webhooks/slow");
    let sent = tokio::spawn(async move { caller::post(&slow, "{}").await });
    handler.wait_for_request().await;
    client.signal("STOP");
    tokio::time::sleep(Duration::from_secs(32)).await;
    client.signal("CONT");
    let reply = sent.await.expect("the caller");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let line = client.line_containing("/webhooks/slow").await;
    assert!(line.contains("/webhooks/slow  200  "), "{line}");
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

/// Reads one answer from `stream`: its head and as many body bytes as its
/// Content-Length says.
async fn answer_on(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    let whole = async {
        loop {
            let text = String::from_utf8_lossy(&read).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = caller::declared_length(&text[..end]);
                if read.len() >= end + 4 + length {
                    return text;
                }
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return format!("closed after {text:?}"),
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), whole)
        .await
        .expect("an answer within 30 s")
}

/// A tunnel stopped long enough for its relay to have given up on it, and
/// here one that waits 30 s and has not: the request sent meanwhile waits
/// on waking until the relay answers the ping the client sends, which
/// tells that the relay had not answered its caller 502; then it goes to
/// the handler, and so does the next request.
#[tokio::test]
async fn a_tunnel_back_from_a_pause_forwards_what_its_relay_still_holds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        dead_after: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;

    client.signal("STOP");
    let held = format!("{url}/webhooks/held");
    let sent = tokio::spawn(async move { caller::post(&held, "{}").await });
    tokio::time::sleep(Duration::from_secs(11)).await;
    client.signal("CONT");
    // Long enough for a relay to have given up, but this one answers the
    // ping: its caller still waits, and gets the handler's answer.
    let held = sent.await.expect("the caller");
    assert_eq!(held.status, 200, "{}", held.text());
    let line = client.line_containing("/webhooks/held").await;
    assert!(line.contains(" 200 "), "{line}");
    let reply = caller::post(&format!("{url}/webhooks/after"), "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let seen: Vec<String> = handler.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        seen,
        ["/webhooks/held", "/webhooks/after"],
        "each reached the handler once"
    );
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
}

/// A history named in a folder that does not exist (a typo, often) is
/// made there, and the tunnel says so before it forwards.
#[tokio::test]
async fn a_history_named_in_a_missing_folder_is_made_there_with_a_note() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("typo/histroy/h.db");
    let log = dir.path().join("stderr.log");
    let handler = LocalHandler::echo().await;
    let port = handler.port().to_string();
    let db_arg = db.to_str().expect("utf-8 path");
    let args = [
        "http",
        &port,
        "--no-tui",
        "--local-listen",
        "127.0.0.1:0",
        "--db",
        db_arg,
    ];
    let mut client = Running::start_logging(&portpreview_bin(), &args, dir.path(), &log);
    let url = client.public_url().await;
    let reply = caller::post(&format!("{url}/hook"), "{}").await;
    assert_eq!(reply.status, 200);
    client.line_containing("POST /hook").await;
    let said = std::fs::read_to_string(&log).expect("stderr");
    assert!(
        said.starts_with(&format!(
            "note: made {} for the history, as it did not exist\n",
            dir.path().join("typo/histroy").display()
        )),
        "{said}"
    );
    assert!(db.is_file(), "the history is there");
}

/// `--help` and `--version` on a stdout that cannot take them (a full
/// disk) fail as every command's output does, rather than exit 0 having
/// printed nothing: the relay's too.
#[test]
fn help_and_version_on_a_full_stdout_fail_in_one_line() {
    let runs = [
        (portpreview_bin(), &["--help"][..]),
        (portpreview_bin(), &["--version"]),
        (portpreview_bin(), &["history", "--help"]),
        (server_bin(), &["--help"]),
        (server_bin(), &["--version"]),
    ];
    for (bin, args) in runs {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = std::process::Command::new(bin)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(full)
            .output()
            .expect("run portpreview");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: cannot write to stdout: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}
