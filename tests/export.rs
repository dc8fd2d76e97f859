//! Several deliveries exported at once: deliveries carried by a real tunnel
//! into a real history file, exported by the binary as one HAR file, one
//! curl script that sends them again, or one fixture each in a folder.

mod common;

use common::caller;
use common::history::portpreview_async;
use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::TestTunnel;
use portpreview::fixture::Fixture;
use serde_json::Value;

/// Three deliveries through a tunnel, each to its own path with its own
/// body; their ids in the order they were sent.
async fn three_deliveries(tunnel: &mut TestTunnel) -> Vec<i64> {
    let mut ids = Vec::new();
    for n in 1..=3 {
        let body = format!(r#"{{"id":"evt_export_{n}","type":"invoice.paid"}}"#);
        let reply = caller::send(
            "POST",
            &tunnel.url(&format!("/hooks/{n}?attempt={n}")),
            &[("content-type", b"application/json")],
            body,
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        ids.push(tunnel.next_delivery().await.0.id);
    }
    ids
}

#[tokio::test]
async fn several_deliveries_export_to_a_file_named_har_as_one_har_file_in_the_order_asked() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let ids = three_deliveries(&mut tunnel).await;
    let har_file = tunnel.db.with_file_name("three.har");

    let asked = [ids[2], ids[0], ids[1]].map(|id| id.to_string());
    let mut args = vec!["export".to_string()];
    args.extend(asked.iter().cloned());
    // No --format: a file named .har is a HAR file.
    args.push("-o".to_string());
    args.push(har_file.display().to_string());
    let ran = portpreview_async(&tunnel.db, &args).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stdout, "", "the file, not stdout, has the export");
    assert_eq!(
        ran.stderr,
        format!(
            "Wrote deliveries #{}, #{} and #{} as a HAR file to {}\n",
            asked[0],
            asked[1],
            asked[2],
            har_file.display()
        )
    );

    let har: Value = serde_json::from_str(&std::fs::read_to_string(&har_file).unwrap()).unwrap();
    assert_eq!(har["log"]["version"], "1.2");
    let entries = har["log"]["entries"].as_array().unwrap();
    let shown: Vec<(i64, String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["_portpreview"]["id"].as_i64().unwrap(),
                e["request"]["url"].as_str().unwrap().to_string(),
                e["response"]["content"]["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(i64, String, String)> = [3, 1, 2]
        .map(|n: usize| {
            (
                ids[n - 1],
                format!("{}/hooks/{n}?attempt={n}", handler.url()),
                format!(r#"{{"id":"evt_export_{n}","type":"invoice.paid"}}"#),
            )
        })
        .into();
    assert_eq!(shown, expected, "one entry each, in the order asked, with its answer");
}

#[tokio::test]
async fn several_deliveries_export_as_one_curl_script_that_sends_them_again() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let ids = three_deliveries(&mut tunnel).await;
    let before = handler.requests().len();

    let ran = portpreview_async(
        &tunnel.db,
        &["export", &ids[1].to_string(), &ids[0].to_string(), "--format", "curl"],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.starts_with(&format!("# PortPreview delivery #{}\n", ids[1])),
        "each command is labelled with its delivery: {}",
        ran.stdout
    );
    let script = ran.stdout.clone();
    let sent = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .output()
        .await
        .expect("sh runs");
    assert!(
        sent.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&sent.stderr)
    );

    assert_eq!(
        String::from_utf8_lossy(&sent.stdout),
        "{\"id\":\"evt_export_2\",\"type\":\"invoice.paid\"}\n{\"id\":\"evt_export_1\",\"type\":\"invoice.paid\"}\n",
        "each answer is printed on a line of its own"
    );
    let again: Vec<(String, String)> = handler.requests()[before..]
        .iter()
        .map(|seen| (seen.uri.clone(), String::from_utf8_lossy(&seen.body).into_owned()))
        .collect();
    assert_eq!(
        again,
        [2, 1].map(|n| (
            format!("/hooks/{n}?attempt={n}"),
            format!(r#"{{"id":"evt_export_{n}","type":"invoice.paid"}}"#)
        )),
        "the script sends both, one after the other, as recorded"
    );
}

#[tokio::test]
async fn several_deliveries_export_to_a_folder_as_one_fixture_each() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let ids = three_deliveries(&mut tunnel).await;
    let (first, third) = (ids[0].to_string(), ids[2].to_string());
    let folder = tunnel.db.with_file_name("fixtures");

    // Several fixtures have no one file to go to.
    let ran = portpreview_async(&tunnel.db, &["export", &first, &third]).await;
    assert_eq!(ran.code, 2);
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr,
        "error: a fixture holds one delivery; export several to a folder, one fixture each: -o a folder there already, or a path ending in /\n"
    );

    // A folder not made yet is named by its ending slash; an id given
    // twice, as `{1..3} 3` in a shell may, is one file.
    let named = format!("{}/", folder.display());
    let ran = portpreview_async(&tunnel.db, &["export", &first, &third, &first, "-o", &named]).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    for (id, n) in [(&first, 1), (&third, 3)] {
        let file = folder.join(format!("portpreview-{id}.json"));
        assert!(
            ran.stderr
                .contains(&format!("Wrote delivery #{id} as a fixture to {}\n", file.display())),
            "{}",
            ran.stderr
        );
        let fixture = Fixture::load(&file).expect("a fixture replay --from reads");
        assert_eq!(fixture.path, format!("/hooks/{n}?attempt={n}"));
        assert_eq!(
            fixture.body,
            Some(format!(r#"{{"id":"evt_export_{n}","type":"invoice.paid"}}"#))
        );
    }
    let files = std::fs::read_dir(&folder).unwrap().count();
    assert_eq!(files, 2, "nothing else in the folder");

    // A fixture there may have been edited since: it is never overwritten.
    let edited = folder.join(format!("portpreview-{third}.json"));
    std::fs::write(&edited, "edited by hand").unwrap();
    let ran = portpreview_async(&tunnel.db, &["export", &third, "-o", &named]).await;
    assert_eq!(ran.code, 2);
    assert_eq!(
        ran.stderr,
        format!(
            "error: {} exists: remove it, or export to another folder\n",
            edited.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "edited by hand");

    // One id unknown: nothing is written at all.
    let ran = portpreview_async(&tunnel.db, &["export", &first, "999", "-o", &named, "--format", "har"]).await;
    assert_eq!(ran.code, 2);
    assert_eq!(
        ran.stderr,
        format!("error: no delivery #999 in {}\n", tunnel.db.display())
    );
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        2,
        "no HAR written for #{first}"
    );

    // A file others may read keeps its mode when replaced: said, as a
    // fixture holds every header unmasked.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let shared = folder.join("shared.json");
        std::fs::write(&shared, "").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ran = portpreview_async(&tunnel.db, &["export", &first, "-o", &shared.display().to_string()]).await;
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert!(
            ran.stderr.contains(&format!(
                "warning: {} may be read by others (mode 0644, kept from the file it replaced)",
                shared.display()
            )),
            "{}",
            ran.stderr
        );
        let fresh = folder.join("fresh.json");
        let ran = portpreview_async(&tunnel.db, &["export", &first, "-o", &fresh.display().to_string()]).await;
        assert!(
            !ran.stderr.contains("warning"),
            "a file made new is its owner's: {}",
            ran.stderr
        );
    }
}

/// `export -o /dev/stdout >> app.log` adds the fixture to the log the shell
/// opened, as `cat` would, where replacing the file by its name lost the
/// log; `--junit /dev/stdout` from `check` does the same after its report.
#[tokio::test]
async fn a_standard_stream_sent_to_a_file_is_added_to_not_replaced() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let ids = three_deliveries(&mut tunnel).await;
    let log = tunnel.db.with_file_name("app.log");
    std::fs::write(&log, "line1\nline2\n").expect("the log");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open the log");
    let id = ids[0].to_string();
    let ran = std::process::Command::new(common::bin::portpreview_bin())
        .args(["export", &id, "-o", "/dev/stdout"])
        .env("PORTPREVIEW_DB", &tunnel.db)
        .env("PORTPREVIEW_CONFIG", "/dev/null")
        .stdout(appended)
        .output()
        .expect("export runs");
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let text = std::fs::read_to_string(&log).expect("read the log");
    let fixture = text
        .strip_prefix("line1\nline2\n")
        .unwrap_or_else(|| panic!("the log lost its lines: {text}"));
    let fixture: Value = serde_json::from_str(fixture).expect("the fixture follows");
    assert_eq!(fixture["path"], "/hooks/1?attempt=1");
}
