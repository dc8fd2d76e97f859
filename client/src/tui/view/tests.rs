//! Whole-screen rendering tests: each screen drawn into a `TestBackend` and
//! compared cell by cell with the expected text.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::Terminal;

use crate::events::TunnelEvent;
use crate::store::Delivery;
use crate::tui::app::{App, Mode};
use crate::tui::source::{test_delivery, MemorySource};

fn app(deliveries: Vec<Delivery>, mode: Mode, width: u16, height: u16) -> App {
    let source = MemorySource::default();
    for d in deliveries {
        source.push(d);
    }
    App::new(Box::new(source), mode, Rect::new(0, 0, width, height)).unwrap()
}

fn live_app(rows: i64, width: u16, height: u16) -> App {
    let mut app = app((1..=rows).map(test_delivery).collect(), Mode::Live, width, height);
    app.on_tunnel_event(
        TunnelEvent::Connected {
            public_url: "http://127.0.0.1:8080/t/calm-otter".into(),
            also_url: None,
            target: "http://127.0.0.1:3000".into(),
        },
        0,
    );
    app
}

/// The notice that the tunnel waits for its name is gone once the tunnel
/// is up; another notice told before it was up stays.
#[test]
fn the_notice_of_a_name_waited_for_goes_when_the_tunnel_is_up() {
    let connected = || TunnelEvent::Connected {
        public_url: "http://127.0.0.1:8080/t/hold".into(),
        also_url: None,
        target: "http://127.0.0.1:3000".into(),
    };
    let mut waiting = app(Vec::new(), Mode::Live, 60, 8);
    let held = TunnelEvent::HeldBack {
        text: "tunnel name \"hold\" is taken: …; waiting for it".into(),
    };
    waiting.on_tunnel_event(held, 0);
    assert!(waiting
        .status
        .as_ref()
        .is_some_and(|s| s.text.contains("waiting for it")));
    waiting.on_tunnel_event(connected(), 1);
    assert_eq!(waiting.status, None, "stale once the tunnel is up");

    let mut other = app(Vec::new(), Mode::Live, 60, 8);
    let unused = TunnelEvent::Notice {
        text: "--ca-cert is not used".into(),
    };
    other.on_tunnel_event(unused, 0);
    other.on_tunnel_event(connected(), 1);
    assert!(
        other.status.as_ref().is_some_and(|s| s.text.contains("--ca-cert")),
        "another notice stays"
    );
}

/// Events dropped while the screen was behind are said, not passed over.
#[test]
fn events_the_screen_missed_are_told_on_the_status_line() {
    let mut app = live_app(3, 100, 12);
    app.on_tunnel_event(TunnelEvent::Missed { count: 40 }, 1);
    let status = app.status.as_ref().map(|s| s.text.as_str()).unwrap_or_default();
    assert!(
        status.starts_with("40 events came faster than the screen took them: rows read again from the history"),
        "{status}"
    );
}

fn press(app: &mut App, keys: &str) {
    for c in keys.chars() {
        app.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

fn enter(app: &mut App) {
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
}

/// Draws `app` as the real loop does.
fn draw(app: &App) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(app.size.width, app.size.height)).unwrap();
    terminal.draw(|frame| frame.render_widget(app, frame.area())).unwrap();
    terminal.backend().buffer().clone()
}

/// The buffer with colours and modifiers dropped, to compare the text.
fn plain(mut buffer: Buffer) -> Buffer {
    for cell in &mut buffer.content {
        cell.set_style(Style::reset());
        cell.modifier = Modifier::empty();
    }
    buffer
}

/// A delivery whose path, header, bodies and error all carry escape sequences.
fn evil() -> Delivery {
    let mut evil = test_delivery(1);
    evil.request.path = "/x\x1b]0;title\x07".into();
    evil.request
        .request_headers
        .push(portpreview_shared::Header::new("x-evil", b"\x1b[2J\x9b".to_vec()));
    evil.request.request_body = "hi\x1b[2J\x1b[31mred\r\nnext\u{9b}\u{202e}".as_bytes().to_vec();
    let outcome = evil.outcome.as_mut().unwrap();
    outcome.response_body = vec![0xff, 0x1b, b'[', b'2', b'J'];
    outcome.error = Some("boom\x1b[0m".into());
    evil
}

/// The live list: tunnel header, newest first, columns for a 100-column screen.
#[test]
fn live_list() {
    let app = live_app(3, 100, 10);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter → http://127.0.0.1:3000                  ",
            " req/s                           0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0                               ",
            "┌ Deliveries 1/3 ──────────────────────────────────────────────────────────────────────────────────┐",
            "│ID Time UTC Method Path                                                St  Took    Provider   Seen│",
            "│#3 02:45:03 POST   /hook/3                                             200   12 ms stripe        1│",
            "│#2 02:45:02 POST   /hook/2                                             200   12 ms stripe        1│",
            "│#1 02:45:01 POST   /hook/1                                             200   12 ms stripe        1│",
            "│                                                                                                  │",
            "└──────────────────────────────────────────────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e export  y curl  ⇥ pane                     ",
        ])
    );
}

/// Enter opens the detail under the list when the screen is tall enough.
#[test]
fn detail_under_list() {
    let mut app = live_app(3, 100, 30);
    press(&mut app, "j");
    enter(&mut app);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter → http://127.0.0.1:3000                  ",
            " req/s                           0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0                               ",
            "┌ Deliveries 2/3 ──────────────────────────────────────────────────────────────────────────────────┐",
            "│ID Time UTC Method Path                                                St  Took    Provider   Seen│",
            "│#3 02:45:03 POST   /hook/3                                             200   12 ms stripe        1│",
            "│#2 02:45:02 POST   /hook/2                                             200   12 ms stripe        1│",
            "│#1 02:45:01 POST   /hook/1                                             200   12 ms stripe        1│",
            "│                                                                                                  │",
            "│                                                                                                  │",
            "│                                                                                                  │",
            "│                                                                                                  │",
            "└──────────────────────────────────────────────────────────────────────────────────────────────────┘",
            "┌ #2  lines 1–15 of 25 ────────────────────────────────────────────────────────────────────────────┐",
            "│#2 POST /hook/2                                                                                   │",
            "│received 2025-11-30 02:45:02.000 UTC                                                              │",
            "│target   http://127.0.0.1:3000                                                                    │",
            "│provider stripe                                                                                   │",
            "│event    evt_2 (body:/id), the only delivery of this event                                        │",
            "│                                                                                                  │",
            "│Request headers (2)                                                                               │",
            "│content-type: application/json                                                                    │",
            "│authorization: Bearer •••••• (masked, 21 bytes)                                                   │",
            "│                                                                                                  │",
            "│Request body (40 bytes, JSON)                                                                     │",
            "│{                                                                                                 │",
            "│  \"id\": \"evt_2\",                                                                                  │",
            "│  \"type\": \"charge.succeeded\"                                                                      │",
            "│}                                                                                                 │",
            "└──────────────────────────────────────────────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e export  y curl  ⇥ pane                     ",
        ])
    );
}

/// Slash turns the footer into the filter prompt.
#[test]
fn filter_prompt() {
    let mut app = live_app(3, 60, 8);
    press(&mut app, "/stripe");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 1/3 ──────────────────────────────────────────┐",
            "│ID Time UTC Method Path                   St  Took    Seen│",
            "│#3 02:45:03 POST   /hook/3                200   12 ms    1│",
            "│#2 02:45:02 POST   /hook/2                200   12 ms    1│",
            "└──────────────────────────────────────────────────────────┘",
            "/stripe▏  Enter apply  Esc cancel                           ",
        ])
    );
}

/// A paste cut at the prompt's limit is said to be, not taken in silence:
/// a shorter filter than meant could match more rows.
#[test]
fn a_paste_past_the_prompts_limit_is_said_to_be_cut() {
    let mut app = live_app(3, 80, 8);
    press(&mut app, &format!("/{}", "a".repeat(1100)));
    let prompt = rows(&plain(draw(&app)))[7].clone();
    assert!(
        prompt.ends_with("aaa▏  1,024 bytes at most: the rest was not taken"),
        "{prompt}"
    );
    app.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
    let prompt = rows(&plain(draw(&app)))[7].clone();
    assert!(!prompt.contains("at most"), "room again: {prompt}");
}

/// While a filter's search runs off the thread the list says so, and the
/// count waits for its own answer.
#[test]
fn a_search_in_flight_shows_as_searching_then_counting() {
    let mut app = live_app(300, 60, 8);
    press(&mut app, "/hook/1");
    enter(&mut app);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 0/searching… filter “hook/1” ─────────────────┐",
            "│Searching for “hook/1”… Esc cancels.                      │",
            "│                                                          │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e ex…",
        ])
    );
    let order = app.take_order().unwrap();
    let mut answers = Vec::new();
    crate::tui::search::run(order.job.unwrap(), app.source(), |answer| answers.push(answer)).unwrap();
    let mut answers = answers.into_iter().map(|answer| crate::tui::search::Found {
        ticket: order.ticket,
        answer,
    });
    app.on_found(answers.next().unwrap());
    let screen = rows(&plain(draw(&app)));
    assert_eq!(
        screen[2],
        "┌ Deliveries 1/counting… filter “hook/1” ──────────────────┐"
    );
    assert!(screen[4].contains("/hook/199"), "{}", screen.join("\n"));
    app.on_found(answers.next().unwrap());
    let screen = rows(&plain(draw(&app)));
    assert_eq!(
        screen[2],
        "┌ Deliveries 1/111 filter “hook/1” ────────────────────────┐"
    );
}

/// Scrolled sideways, the detail's frame says from which column, as lines
/// shorter than that show blank.
#[test]
fn a_detail_scrolled_sideways_says_so_in_its_frame() {
    // Narrow enough that some lines go on past the edge.
    let mut app = live_app(3, 40, 30);
    enter(&mut app);
    let frame = |app: &App| {
        rows(&plain(draw(app)))
            .into_iter()
            .find(|row| row.contains(" #3  lines "))
            .expect("the detail's frame")
    };
    assert!(!frame(&app).contains("from column"), "{}", frame(&app));
    press(&mut app, "ll");
    assert!(
        frame(&app).contains(" #3  lines 1–15 of 25, from column 17 "),
        "{}",
        frame(&app)
    );
    press(&mut app, "hh");
    assert!(!frame(&app).contains("from column"), "{}", frame(&app));
}

/// A filter longer than the title's room is cut with a mark, its closing
/// quote kept inside the frame.
#[test]
fn a_long_filter_is_cut_with_a_mark_in_the_title() {
    let mut app = live_app(3, 60, 8);
    press(&mut app, &format!("/hook/{}", "y".repeat(150)));
    enter(&mut app);
    assert_eq!(
        rows(&plain(draw(&app)))[2],
        "┌ Deliveries 0/searching… filter “hook/yyyyyyyyyyyyyyyyy…” ┐"
    );
}

/// On a narrow screen the filter shows the end of what is typed, where
/// the cursor is.
#[test]
fn a_long_filter_keeps_its_end_in_view() {
    let mut app = live_app(3, 30, 8);
    press(&mut app, "/abcdefghijklmnopqrstuvwxyz0123456789");
    let screen = rows(&plain(draw(&app)));
    assert_eq!(screen[7], "/…jklmnopqrstuvwxyz0123456789▏", "{}", screen.join("\n"));

    // Characters two columns wide: the end and the cursor still show.
    let mut app = live_app(3, 30, 8);
    press(&mut app, "/日本語のテキストをここに入力する終わり");
    let screen = rows(&plain(draw(&app)));
    let shown: String = screen[7].chars().filter(|c| *c != ' ').collect();
    assert!(shown.starts_with("/…") && shown.ends_with("る終わり▏"), "{}", screen[7]);
}

/// Text cut to fit says so with "…", measured in columns: a CJK event key
/// in the list, the header's URL and the help's lines on a narrow screen.
#[test]
fn cut_text_ends_in_an_ellipsis_even_when_its_characters_are_wide() {
    let mut wide = test_delivery(1);
    wide.request.event_key = "evt_日本語日本語日本語日本語".into();
    let app = app(vec![wide], Mode::Live, 120, 10);
    let screen = rows(&plain(draw(&app)));
    assert!(
        // A wide character's second cell is drawn as a space.
        screen
            .iter()
            .any(|row| row.replace(' ', "").contains("evt_日本語日本…1")),
        "{}",
        screen.join("\n")
    );

    // Too narrow for the URL, the brand gives way to it first.
    let screen = rows(&plain(draw(&live_app(3, 55, 12))));
    assert_eq!(screen[0], "● online  http://127.0.0.1:8080/t/calm-otter → http://…");
    // With no room for ` …` after it, the URL ends the line: an ellipsis
    // against it would read as the URL cut.
    let screen = rows(&plain(draw(&live_app(3, 45, 12))));
    assert_eq!(screen[0], "● online  http://127.0.0.1:8080/t/calm-otter ");
    let mut app = live_app(3, 40, 12);
    let screen = rows(&plain(draw(&app)));
    assert_eq!(screen[0], "● online  http://127.0.0.1:8080/t/calm-…");
    press(&mut app, "?");
    let screen = rows(&plain(draw(&app)));
    assert!(
        screen
            .iter()
            .any(|row| row == "│ /          filter: 404, 5xx, err, or…│"),
        "{}",
        screen.join("\n")
    );
    assert!(
        screen
            .iter()
            .any(|row| row.starts_with("┌ Keys (j k scroll, other keys close) ")),
        "a title the box can hold: {}",
        screen.join("\n")
    );
}

/// Question mark shows every key.
#[test]
fn help_overlay() {
    let mut app = live_app(3, 60, 22);
    press(&mut app, "?");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " re┌ Keys (any key closes) ─────────────────────────────┐✗0 ",
            "┌ D│ q          quit                                    │──┐",
            "│ID│ ↑↓ j k     move / scroll                           │en│",
            "│#3│ PgUp PgDn  a page                                  │ 1│",
            "│#2│ g G        newest / oldest; in a detail, top / end │ 1│",
            "│#1│ Home End   as g G                                  │ 1│",
            "│  │ Enter      open the delivery                       │  │",
            "│  │ Tab        switch list / detail                    │  │",
            "│  │ ← → h l    scroll detail sideways                  │  │",
            "│  │ H L 0 $    sideways by a screen; to either edge    │  │",
            "│  │ /          filter: 404, 5xx, err, or any text      │  │",
            "│  │ Esc        stop replay, close detail, clear filter │  │",
            "│  │ r          replay once                             │  │",
            "│  │ R          verdict: N duplicates or a fresh burst  │  │",
            "│  │ e          export json / har / curl                │  │",
            "│  │ y          copy as curl                            │  │",
            "│  │ v          show / mask secrets                     │  │",
            "│  │ ?          this help                               │  │",
            "│  │ ctrl-z     stop as a shell job (tui; fg resumes)   │  │",
            "└──└────────────────────────────────────────────────────┘──┘",
            "j k scroll  any other key closes the help                   ",
        ])
    );
}

/// An empty history says how to fill it.
#[test]
fn empty_history() {
    let app = app(vec![], Mode::Browser { db: "/tmp/h.db".into() }, 60, 15);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  history /tmp/h.db                             ",
            " 0 deliveries                                               ",
            "┌ Deliveries 0/0 ──────────────────────────────────────────┐",
            "│No deliveries in this history yet. Run portpreview http to│",
            "│record some.                                              │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e ex…",
        ])
    );
}

/// The smallest supported screen keeps the essential columns.
#[test]
fn list_at_60x15() {
    let mut app = live_app(30, 60, 15);
    press(&mut app, "jj");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 3/30 ─────────────────────────────────────────┐",
            "│ID  Time UTC Method Path                  St  Took    Seen│",
            "│#30 02:45:30 POST   /hook/30              200   12 ms    1│",
            "│#29 02:45:29 POST   /hook/29              200   12 ms    1│",
            "│#28 02:45:28 POST   /hook/28              200   12 ms    1│",
            "│#27 02:45:27 POST   /hook/27              200   12 ms    1│",
            "│#26 02:45:26 POST   /hook/26              200   12 ms    1│",
            "│#25 02:45:25 POST   /hook/25              200   12 ms    1│",
            "│#24 02:45:24 POST   /hook/24              200   12 ms    1│",
            "│#23 02:45:23 POST   /hook/23              200   12 ms    1│",
            "│#22 02:45:22 POST   /hook/22              200   12 ms    1│",
            "└──────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e ex…",
        ])
    );
}

/// Below 60 columns the path keeps its room: the time, then the duration,
/// give way, and no cell is left with a unit and no number.
#[test]
fn a_narrow_list_keeps_the_path() {
    let screen = rows(&plain(draw(&live_app(3, 50, 10))));
    assert_eq!(screen[3], "│ID Method Path                  St  Took    Seen│");
    assert_eq!(screen[4], "│#3 POST   /hook/3               200   12 ms    1│");
    let screen = rows(&plain(draw(&live_app(3, 30, 10))));
    assert_eq!(screen[3], "│ID Method Path      St  Seen│");
    assert_eq!(screen[4], "│#3 POST   /hook/3   200    1│");
}

/// From 130 columns the list shows each delivery's event type, and the
/// detail names it.
#[test]
fn a_wide_list_shows_event_types_and_the_detail_names_one() {
    let typed = |id: i64, kind: Option<&str>| {
        let mut d = test_delivery(id);
        d.request.event_type = kind.map(str::to_owned);
        d
    };
    let mut app = app(
        vec![typed(1, Some("charge.succeeded")), typed(2, None)],
        Mode::Live,
        140,
        30,
    );
    let screen = rows(&plain(draw(&app)));
    let column = screen[3].find("Type").expect("a Type column");
    let row = |id: &str| {
        screen
            .iter()
            .find(|line| line.starts_with(&format!("│{id} ")))
            .unwrap()
            .clone()
    };
    assert_eq!(
        row("#1").get(column..column + 16),
        Some("charge.succeeded"),
        "{screen:#?}"
    );
    assert_eq!(row("#2").get(column..column + 3), Some("–"), "{screen:#?}");
    let narrow = rows(&plain(draw(&live_app(1, 120, 10))));
    assert!(!narrow[3].contains("Type"), "the path keeps its room: {narrow:#?}");

    press(&mut app, "j");
    enter(&mut app);
    let screen = rows(&plain(draw(&app))).join("\n");
    assert!(screen.contains("type     charge.succeeded"), "{screen}");
}

/// On the smallest screen the detail takes the whole body.
#[test]
fn detail_at_60x15() {
    let mut app = live_app(30, 60, 15);
    enter(&mut app);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ #30  lines 1–10 of 25 ───────────────────────────────────┐",
            "│#30 POST /hook/30                                         │",
            "│received 2025-11-30 02:45:30.000 UTC                      │",
            "│target   http://127.0.0.1:3000                            │",
            "│provider stripe                                           │",
            "│event    evt_30 (body:/id), the only delivery of this eve…│",
            "│                                                          │",
            "│Request headers (2)                                       │",
            "│content-type: application/json                            │",
            "│authorization: Bearer •••••• (masked, 21 bytes)           │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e ex…",
        ])
    );
}

/// Escape sequences in the path, headers, bodies, error and db path are drawn as text.
#[test]
fn escape_sequences_are_drawn_as_text() {
    let mut app = app(
        vec![evil()],
        Mode::Browser {
            db: "/tmp/h.db\x1b[2J".into(),
        },
        80,
        40,
    );
    enter(&mut app);
    press(&mut app, "jjjjjjj");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  history /tmp/h.db\\x1b[2J                                          ",
            " 1 delivery  p50 12 ms  p90 12 ms                                               ",
            "┌ Deliveries 1/1 ──────────────────────────────────────────────────────────────┐",
            "│ID Time UTC Method Path                            St  Took    Provider   Seen│",
            "│#1 02:45:01 POST   /x\\x1b]0;title\\x07              200   12 ms stripe        1│",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "│                                                                              │",
            "└──────────────────────────────────────────────────────────────────────────────┘",
            "┌ #1  lines 5–25 of 25 ────────────────────────────────────────────────────────┐",
            "│event    evt_1 (body:/id), the only delivery of this event                    │",
            "│                                                                              │",
            "│Request headers (3)                                                           │",
            "│content-type: application/json                                                │",
            "│authorization: Bearer •••••• (masked, 21 bytes)                               │",
            "│x-evil: \\x1b[2J\\x9b                                                           │",
            "│                                                                              │",
            "│Request body (25 bytes, text)                                                 │",
            "│hi\\x1b[2J\\x1b[31mred\\r                                                        │",
            "│next\\u{9b}\\u{202e}                                                            │",
            "│                                                                              │",
            "│Response 200 OK  in 12.0 ms                                                   │",
            "│error: boom\\x1b[0m                                                            │",
            "│Response headers (1)                                                          │",
            "│content-type: text/plain                                                      │",
            "│                                                                              │",
            "│Response body (5 bytes, binary)                                               │",
            "│00000000  ff 1b 5b 32 4a                                   ..[2J              │",
            "│                                                                              │",
            "│Replay runs (0)                                                               │",
            "│none yet: r replays once, R runs a verdict                                    │",
            "└──────────────────────────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e export  y curl  ⇥ pane ",
        ])
    );
}

#[test]
fn no_cell_holds_a_control_character() {
    let mut app = app(
        vec![evil()],
        Mode::Browser {
            db: "/tmp/h.db\x1b[2J".into(),
        },
        80,
        40,
    );
    enter(&mut app);
    for _ in 0..30 {
        let screen = draw(&app);
        for cell in &screen.content {
            assert!(
                !cell.symbol().chars().any(char::is_control),
                "{:?} reached a cell",
                cell.symbol()
            );
        }
        press(&mut app, "j");
    }
}

#[test]
fn statuses_are_coloured_by_class() {
    let mut failed = test_delivery(2);
    failed.outcome.as_mut().unwrap().status = Some(503);
    let mut missing = test_delivery(3);
    missing.outcome.as_mut().unwrap().status = Some(404);
    let app = app(vec![test_delivery(1), failed, missing], Mode::Live, 60, 10);
    let screen = draw(&app);
    // Rows start at y=4; the status column starts at x=43 on a 60-column screen.
    let colour = |y: u16| screen[(43, y)].fg;
    assert_eq!(screen[(43, 4)].symbol(), "4");
    assert_eq!(
        (colour(4), colour(5), colour(6)),
        (Color::Yellow, Color::Red, Color::Green)
    );
}

/// A delivery cut off before its answer reads as ended, not in flight:
/// "ERR" with no time, where one waiting reads "…" in both.
#[test]
fn a_delivery_cut_off_reads_as_ended_and_one_in_flight_as_waiting() {
    let mut cut_off = test_delivery(1);
    cut_off.outcome = Some(crate::store::Outcome {
        error: Some("PortPreview stopped before it recorded the answer".into()),
        ..crate::store::Outcome::default()
    });
    let mut waiting = test_delivery(2);
    waiting.outcome = None;
    let app = app(vec![cut_off, waiting], Mode::Live, 72, 10);
    let screen = format!("{:?}", plain(draw(&app)));
    let row = |path: &str| {
        screen
            .lines()
            .find(|l| l.contains(path))
            .unwrap_or_else(|| panic!("{path} in {screen}"))
            .to_owned()
    };
    let (cut_off, waiting) = (row("/hook/1 "), row("/hook/2 "));
    assert!(
        cut_off.contains(" ERR ") && cut_off.contains(" – ") && !cut_off.contains('…'),
        "{cut_off}"
    );
    assert_eq!(waiting.matches(" … ").count(), 2, "{waiting}");
}

#[test]
fn the_selected_row_is_highlighted() {
    let mut app = live_app(3, 60, 10);
    press(&mut app, "j");
    let screen = draw(&app);
    assert!(screen[(1, 5)].modifier.contains(Modifier::REVERSED));
    assert!(!screen[(1, 4)].modifier.contains(Modifier::REVERSED));
}

fn traffic_app() -> App {
    let mut app = live_app(0, 72, 8);
    for (second, status, ms) in [
        (0, 200, 4.0),
        (1, 200, 12.0),
        (1, 404, 30.0),
        (2, 500, 80.0),
        (3, 200, 6.0),
    ] {
        let mut delivery = test_delivery(second * 10 + i64::from(status % 7));
        let outcome = delivery.outcome.as_mut().unwrap();
        outcome.status = Some(status);
        outcome.duration_ms = Some(ms);
        let summary = crate::tui::source::summary_of(&delivery);
        app.on_tunnel_event(
            TunnelEvent::Delivered {
                summary,
                delivery_number: 1,
            },
            second as u64,
        );
    }
    app.on_tunnel_event(
        TunnelEvent::Disconnected {
            reason: "relay went away".into(),
            failed_tries: 0,
            retry_in: std::time::Duration::from_secs(2),
        },
        3,
    );
    app
}

/// The live header: connection state, rate sparkline, percentiles and counters.
#[test]
fn live_header_with_traffic() {
    assert_eq!(
        plain(draw(&traffic_app())),
        Buffer::with_lines([
            "✗ offline, retry in 2s  http://127.0.0.1:8080/t/calm-otter → http://127…",
            " ✗ relay went away                                                      ",
            " req/s                ▄█▄ 1/s  p50 12 ms  p90 80 ms  ✓3 4xx 1 5xx 1 ✗0  ",
            "┌ Deliveries 1/5 ──────────────────────────────────────────────────────┐",
            "│ID  Time UTC Method Path                              St  Took    Seen│",
            "│#34 02:45:34 POST   /hook/34                          200  6.0 ms    1│",
            "└──────────────────────────────────────────────────────────────────────┘",
            "q quit  ? help  / filter  ⏎ open  r replay  R verdict  e export  y curl…",
        ])
    );
}

/// On a narrow screen the counters are cut with a mark, never silently:
/// "5xx 1" cut to "5xx " would read as none.
#[test]
fn narrow_live_counters_end_in_an_ellipsis() {
    let mut app = traffic_app();
    app.resize(Rect::new(0, 0, 50, 8));
    let screen = rows(&plain(draw(&app)));
    assert_eq!(screen[2], " req/s          ▄█▄ 1/s  p50 12 ms  p90 80 ms  ✓3…");
}

/// A subdomain URL needs wildcard DNS: the empty list names the path form
/// beside it, which works without.
#[test]
fn an_empty_live_list_names_both_urls_of_a_subdomain_tunnel() {
    let mut app = app(vec![], Mode::Live, 140, 8);
    app.on_tunnel_event(
        TunnelEvent::Connected {
            public_url: "http://shop.relay.test:8080".into(),
            also_url: Some("http://127.0.0.1:8080/t/shop".into()),
            target: "http://127.0.0.1:3000".into(),
        },
        0,
    );
    let text: String = rows(&plain(draw(&app))).concat();
    assert!(
        text.contains(
            "Send a webhook to http://shop.relay.test:8080 (or http://127.0.0.1:8080/t/shop, which needs no DNS)"
        ),
        "{text}"
    );
    // And in the header, once deliveries fill the list.
    assert!(
        rows(&plain(draw(&app)))[0]
            .contains("http://shop.relay.test:8080 (also http://127.0.0.1:8080/t/shop) → http://127.0.0.1:3000"),
        "{text}"
    );
}

/// With --no-record the counters move and the list stays empty: it says why.
#[test]
fn deliveries_not_recorded_are_explained_in_the_empty_list() {
    let mut app = live_app(0, 72, 8);
    let mut summary = crate::tui::source::summary_of(&test_delivery(1));
    summary.id = 0;
    for second in 0..2 {
        app.on_tunnel_event(
            TunnelEvent::Delivered {
                summary: summary.clone(),
                delivery_number: 1,
            },
            second,
        );
    }
    let screen = plain(draw(&app));
    let text: String = screen.content.iter().map(|c| c.symbol()).collect();
    assert!(text.contains("✓2"), "counted: {text}");
    assert!(
        text.contains("2 deliveries forwarded and not recorded: the counters above show them"),
        "{text}"
    );
    // The header says it too: with older deliveries listed, the list alone
    // would stand still and say nothing.
    assert_eq!(
        rows(&screen)[1].trim_end(),
        " ⚠ 2 deliveries forwarded and not recorded, so not listed"
    );
}

/// Offline: the URL stays in view, the reason has a line of its own
/// under it, and the wait counts down.
#[test]
fn offline_the_retry_counts_down_and_the_reason_has_its_own_line() {
    let mut app = traffic_app();
    app.resize(Rect::new(0, 0, 100, 8));
    let line = |app: &App, y: u16| -> String {
        let screen = plain(draw(app));
        (0..100)
            .map(|x| screen[(x, y)].symbol().to_string())
            .collect::<String>()
            .trim_end()
            .to_owned()
    };
    assert!(
        line(&app, 0).ends_with("retry in 2s  http://127.0.0.1:8080/t/calm-otter → http://127.0.0.1:3000"),
        "{}",
        line(&app, 0)
    );
    assert_eq!(line(&app, 1), " ✗ relay went away");
    app.on_tick(4);
    assert!(line(&app, 0).contains("retry in 1s"), "{}", line(&app, 0));
    app.on_tick(5);
    assert!(line(&app, 0).contains("✗ offline, retrying"), "{}", line(&app, 0));

    // Online again, with a history that takes no writes: both facts in view.
    app.on_tunnel_event(
        TunnelEvent::Connected {
            public_url: "http://127.0.0.1:8080/t/calm-otter".into(),
            also_url: None,
            target: "http://127.0.0.1:3000".into(),
        },
        6,
    );
    app.on_tunnel_event(
        TunnelEvent::HistoryRefusing {
            reason: Some("the history database is locked by another process".into()),
        },
        6,
    );
    assert!(
        line(&app, 0).ends_with("● online  http://127.0.0.1:8080/t/calm-otter → http://127.0.0.1:3000"),
        "{}",
        line(&app, 0)
    );
    let warning =
        " ⚠ history refuses writes, deliveries wait in memory: the history database is locked by another process";
    assert_eq!(
        line(&app, 1),
        warning.chars().take(99).collect::<String>() + "…",
        "cut where the screen ends, and marked"
    );
    assert!(line(&app, 2).starts_with(" req/s"), "{}", line(&app, 2));
}

#[test]
fn shrinking_to_60x15_keeps_the_selection_in_view() {
    let mut app = live_app(300, 120, 40);
    for _ in 0..30 {
        press(&mut app, "j");
    }
    assert_eq!(app.selected_id(), Some(270));
    app.resize(Rect::new(0, 0, 60, 15));
    let screen = plain(draw(&app));
    let text: String = screen.content.iter().map(|c| c.symbol()).collect();
    assert!(text.contains("/hook/270"), "the selected row is on screen");
    let row = 4 + u16::try_from(app.selected - app.offset).unwrap();
    assert!(row < 14, "the selection is inside the list");
    assert!(
        draw(&app)[(1, row)].modifier.contains(Modifier::REVERSED),
        "and highlighted"
    );
    app.resize(Rect::new(0, 0, 120, 40));
    assert_eq!(app.selected_id(), Some(270));
}

/// `R` asks for the attempts, the probe, and with a probe how long the
/// state must hold still, over the list.
#[test]
fn replay_form() {
    let mut app = live_app(3, 60, 16);
    press(&mut app, "R");
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    press(&mut app, "c");
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    press(&mut app, "psql -c 'select count(*) from credits'");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 1/3 ──────────────────────────────────────────┐",
            "│┌ Replay #3 with a verdict ──────────────────────────────┐│",
            "││  attempts  10                                          ││",
            "││  sends     [duplicates]  fresh burst                   ││",
            "││  probe      none   url  [cmd]                          ││",
            "││› check cmd psql -c 'select count(*) from credits'▏     ││",
            "││  settle    300ms                                       ││",
            "││                                                        ││",
            "││Tab field  ←→ choose  Enter run  Esc cancel             ││",
            "│└────────────────────────────────────────────────────────┘│",
            "│                                                          │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "⇥ field  ←→ choose  ⏎ run  Esc cancel                       ",
        ])
    );
}

/// A probe longer than its field shows its end and the cursor, the start
/// marked as cut; each probe kind shows its own text.
#[test]
fn replay_form_probe_keeps_the_end_being_typed_in_view() {
    let mut app = live_app(3, 60, 15);
    press(&mut app, "R");
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    press(&mut app, "u");
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    press(&mut app, "http://127.0.0.1:3000/count");
    app.handle_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::NONE));
    press(&mut app, "c");
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    press(
        &mut app,
        "psql -d shop -c 'select count(*) from credits where order_id = 42'",
    );
    let screen = rows(&draw(&app));
    assert!(
        screen
            .iter()
            .any(|row| row == "││› check cmd …count(*) from credits where order_id = 42'▏││"),
        "{}",
        screen.join("\n")
    );
    app.handle_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::NONE));
    press(&mut app, "u");
    let screen = rows(&draw(&app));
    assert!(
        screen
            .iter()
            .any(|row| row.starts_with("││  check url http://127.0.0.1:3000/count ")),
        "{}",
        screen.join("\n")
    );
}

/// `e` offers the three formats.
#[test]
fn export_form() {
    let mut app = live_app(3, 60, 15);
    press(&mut app, "e");
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 1/3 ──────────────────────────────────────────┐",
            "│ID Time UTC Method Path                   St  Took    Seen│",
            "│#3 02:4┌ Export #3 ───────────────────────────────┐ms    1│",
            "│#2 02:4│ j json  fixture for replay --from, check │ms    1│",
            "│#1 02:4│ h har   HAR 1.2 for browser devtools     │ms    1│",
            "│       │ c curl  shell command                    │       │",
            "│       │                                          │       │",
            "│       │ j h c or Enter write  Esc/q cancel       │       │",
            "│       └──────────────────────────────────────────┘       │",
            "│                                                          │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "j h c ⏎ write  Esc q cancel                                 ",
        ])
    );
}

/// On a screen narrower than a form, its lines end in "…" where they are
/// cut, as every other cut line does.
#[test]
fn forms_on_a_narrow_screen_mark_where_their_lines_are_cut() {
    for (keys, cut) in [
        ("e", "│ j json  fixture for replay --f…│"),
        ("R", "│Tab field  ←→ choose  Enter run…│"),
    ] {
        let mut app = live_app(3, 34, 12);
        press(&mut app, keys);
        let screen = rows(&plain(draw(&app)));
        assert!(
            screen.iter().any(|row| row.contains(cut)),
            "{keys}: {}",
            screen.join("\n")
        );
    }
}

/// On a wide screen a UUID event key and a long provider name show whole.
#[test]
fn a_wide_list_shows_uuid_keys_and_provider_names_whole() {
    let mut github = test_delivery(1);
    github.request.provider = Some("standard-webhooks".into());
    github.request.event_key = "72d3162e-cc78-11e3-81ab-4c9367dc0958".into();
    let screen = format!("{:?}", plain(draw(&app(vec![github.clone()], Mode::Live, 160, 8))));
    assert!(
        screen.contains("72d3162e-cc78-11e3-81ab-4c9367dc0958") && screen.contains("standard-webhooks"),
        "{screen}"
    );
    let narrow = format!("{:?}", plain(draw(&app(vec![github], Mode::Live, 120, 8))));
    assert!(narrow.contains("72d3162e-cc78-1…"), "{narrow}");
}

/// A path too long for its column ends in an ellipsis right at the column's edge.
#[test]
fn a_long_path_is_marked_where_it_is_cut() {
    for width in [60, 100, 120, 160] {
        let mut long = test_delivery(1);
        long.request.path = format!("/webhooks/{}/end", "a".repeat(200));
        let screen = rows(&plain(draw(&app(vec![long], Mode::Live, width, 8))));
        let row = screen
            .iter()
            .find(|row| row.contains("/webhooks/"))
            .unwrap_or_else(|| panic!("no row at {width}:\n{}", screen.join("\n")));
        assert!(
            row.contains("aaa… 200 "),
            "cut right at the column edge, {width} columns: {row}"
        );
        assert!(!row.contains("/end"), "{width} columns: {row}");
    }
}

/// The rows of `buffer` as text.
fn rows(buffer: &Buffer) -> Vec<String> {
    let width = usize::from(buffer.area.width);
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|cell| cell.symbol()).collect())
        .collect()
}

/// A refused `R` form says why in full: on one line when the screen is wide
/// enough, wrapped inside the dialog when it is not.
#[test]
fn replay_form_error_is_never_cut() {
    let message = "attempts: a number from 1 to 100000, as replay --times takes";
    for width in [120, 200] {
        let mut app = live_app(3, width, 20);
        press(&mut app, "R");
        app.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
        app.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
        press(&mut app, "0");
        enter(&mut app);
        let screen = rows(&draw(&app));
        assert!(
            screen.iter().any(|row| row.contains(&format!("│{message}│"))),
            "{width} columns:\n{}",
            screen.join("\n")
        );
    }
    let mut app = live_app(3, 60, 15);
    press(&mut app, "R");
    app.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
    app.handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
    press(&mut app, "0");
    enter(&mut app);
    assert_eq!(
        plain(draw(&app)),
        Buffer::with_lines([
            " PortPreview  ● online  http://127.0.0.1:8080/t/calm-otter …",
            " req/s                 0/s  p50 –  p90 –  ✓0 4xx 0 5xx 0 ✗0 ",
            "┌ Deliveries 1/3 ──────────────────────────────────────────┐",
            "┌ Replay #3 with a verdict ────────────────────────────────┐",
            "│› attempts  0▏                                            │",
            "│  sends     [duplicates]  fresh burst                     │",
            "│  probe     [none]  url   cmd                             │",
            "│                                                          │",
            "│attempts: a number from 1 to 100000, as replay --times    │",
            "│takes                                                     │",
            "└──────────────────────────────────────────────────────────┘",
            "│                                                          │",
            "│                                                          │",
            "└──────────────────────────────────────────────────────────┘",
            "⇥ field  ←→ choose  ⏎ run  Esc cancel                       ",
        ])
    );
}

/// A message longer than the screen is wide wraps above the bottom line,
/// so the part that says what to do is never cut off.
#[test]
fn a_long_message_wraps_and_keeps_its_end() {
    let mut app = live_app(5, 60, 15);
    app.set_status(
        "export failed: delivery #31 was cut short after 26209600 bytes: a replay of the fixture would not send \
         the same body",
        true,
    );
    let screen = rows(&plain(draw(&app)));
    let shown = screen.join("\n");
    assert_eq!(
        screen[13].trim_end(),
        "export failed: delivery #31 was cut short after 26209600",
        "{shown}"
    );
    assert_eq!(
        screen[14].trim_end(),
        "bytes: a replay of the fixture would not send the same body",
        "{shown}"
    );
    assert!(screen[12].starts_with('└'), "the list ends above it: {shown}");
}

/// A message longer than the footer's rows ends in "…" on its last row,
/// so the cut is seen.
#[test]
fn a_message_longer_than_the_footer_says_it_was_cut() {
    let mut app = live_app(5, 40, 20);
    app.set_status(
        "no clipboard here: curl command of #24 written to /tmp/qa/portpreview-24.sh (secrets as received, \
         readable by you only); set PORTPREVIEW_CLIPBOARD=osc52 if your terminal takes OSC 52",
        false,
    );
    let screen = rows(&plain(draw(&app)));
    let last = screen[19].trim_end();
    assert!(last.ends_with('…'), "{}", screen.join("\n"));
    assert!(screen
        .iter()
        .all(|row| ratatui::text::Span::raw(row.as_str()).width() <= 40));
}

/// A content key shows whole where the terminal is wide enough, and cut
/// with `…` where it is not.
#[test]
fn a_content_key_shows_whole_on_a_wide_terminal() {
    let key = format!("sha256:{}", "ab12".repeat(16));
    let mut delivery = test_delivery(1);
    delivery.request.event_key = key.clone();
    let wide = app(vec![delivery.clone()], Mode::Browser { db: "/tmp/h.db".into() }, 220, 8);
    let row = &rows(&plain(draw(&wide)))[4];
    assert!(row.contains(&key), "{row}");
    let narrower = app(vec![delivery], Mode::Browser { db: "/tmp/h.db".into() }, 160, 8);
    let row = &rows(&plain(draw(&narrower)))[4];
    assert!(!row.contains(&key) && row.contains("sha256:ab12"), "{row}");
}

/// A history opened for reading only says so before a replay is sent,
/// whose attempts it cannot keep.
#[test]
fn a_read_only_history_is_marked_in_the_header() {
    let source = MemorySource {
        read_only: true,
        ..MemorySource::default()
    };
    source.push(test_delivery(1));
    let app = App::new(
        Box::new(source),
        Mode::Browser {
            db: "/tmp/ci/h.db".into(),
        },
        Rect::new(0, 0, 60, 8),
    )
    .unwrap();
    assert_eq!(
        rows(&plain(draw(&app)))[0],
        " PortPreview  history /tmp/ci/h.db (read-only)              "
    );
}

/// Browsing, the header draws how the newest deliveries came and how fast
/// they were answered; a filter's count stands alone, as the figures are
/// the whole history's.
#[test]
fn the_browsed_header_shows_how_the_history_came() {
    let deliveries = (1..=5)
        .map(|id| {
            let mut delivery = test_delivery(id);
            // Four in the history's first second, one two seconds on.
            delivery.request.received_at_ms = 1_764_470_700_000 + (id / 5) * 2_000 + id;
            if let Some(outcome) = &mut delivery.outcome {
                outcome.duration_ms = Some(id as f64 * 10.0);
            }
            delivery
        })
        .collect();
    let mut app = app(deliveries, Mode::Browser { db: "/tmp/h.db".into() }, 60, 8);
    assert_eq!(
        rows(&plain(draw(&app)))[1],
        " 5 deliveries █ ▂ per s  p50 30 ms  p90 50 ms               "
    );
    press(&mut app, "/hook/");
    enter(&mut app);
    let order = app.take_order().unwrap();
    let mut answers = Vec::new();
    crate::tui::search::run(order.job.unwrap(), app.source(), |answer| answers.push(answer)).unwrap();
    for answer in answers {
        app.on_found(crate::tui::search::Found {
            ticket: order.ticket,
            answer,
        });
    }
    assert_eq!(rows(&plain(draw(&app)))[1].trim_end(), " 5 matching");
    // The filter off, the figures are back.
    app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(
        rows(&plain(draw(&app)))[1].starts_with(" 5 deliveries █ ▂ per s"),
        "{}",
        rows(&plain(draw(&app)))[1]
    );
}

/// Browsing, a long history path keeps its end: the file's name.
#[test]
fn a_long_history_path_keeps_its_file_name() {
    let db = format!("/tmp/{}history-staging.db", "deep/".repeat(20));
    let app = app((1..=2).map(test_delivery).collect(), Mode::Browser { db }, 60, 8);
    let screen = rows(&plain(draw(&app)));
    let header = screen[0].trim_end();
    assert!(
        header.starts_with(" PortPreview  history …") && header.ends_with("/deep/history-staging.db"),
        "{header}"
    );
    assert_eq!(header.chars().count(), 60, "to the screen's edge: {header}");
}

/// While `v` shows the masked headers, the detail pane says so in its frame.
#[test]
fn shown_secrets_are_announced_on_the_detail_pane() {
    let mut app = live_app(3, 100, 30);
    enter(&mut app);
    press(&mut app, "v");
    let screen = rows(&plain(draw(&app)));
    let frame = screen
        .iter()
        .find(|row| row.contains(" #3  lines "))
        .expect("the detail's frame");
    assert!(frame.contains("secrets shown (v masks)"), "{frame}");
    assert!(screen
        .iter()
        .any(|row| row.contains("authorization: Bearer sk_live_secret")));
    press(&mut app, "v");
    let screen = rows(&plain(draw(&app)));
    assert!(!screen.iter().any(|row| row.contains("secrets shown")));
}

/// A box drawn over a list row full of wide characters keeps its left
/// border at odd and even columns alike: a character whose second half lies
/// under the border is blanked, or the terminal would draw it over the border.
#[test]
fn a_popup_over_wide_characters_keeps_its_left_border() {
    let mut straddled = false;
    for width in [100, 101, 102, 103] {
        for (key, popup_width, popup_height) in [("?", 54, super::help::KEYS.len() as u16 + 2), ("e", 44, 7)] {
            let mut wide = test_delivery(1);
            wide.request.path = format!("/{}", "漢".repeat(80));
            wide.request.event_key = "漢".repeat(40);
            let mut app = app(vec![wide], Mode::Live, width, 12);
            let popup = super::centered(app.size, popup_width, popup_height);
            let under = draw(&app);
            straddled |= (popup.top()..popup.bottom()).any(|y| under[(popup.x - 1, y)].symbol() == "漢");
            press(&mut app, key);
            let screen = draw(&app);
            for y in popup.top()..popup.bottom() {
                let (left, border) = (screen[(popup.x - 1, y)].symbol(), screen[(popup.x, y)].symbol());
                assert!(
                    ["┌", "│", "└"].contains(&border) && left != "漢",
                    "{key} at x {}, row {y}: {left:?} {border:?}\n{}",
                    popup.x,
                    rows(&screen).join("\n")
                );
            }
        }
    }
    assert!(straddled, "some box edge fell on the second half of a wide character");
}

/// A secret in the query string is masked in the list and the detail pane,
/// as credential headers are; `v` shows it, as it shows them.
#[test]
fn a_secret_in_the_query_string_is_masked_until_revealed() {
    let mut carried = test_delivery(1);
    carried.request.path = "/hooks?token=tok_live_42&shop=acme".into();
    let mut app = app(vec![carried], Mode::Live, 120, 30);
    enter(&mut app);
    let screen = rows(&plain(draw(&app))).join("\n");
    assert!(!screen.contains("tok_live_42"), "{screen}");
    assert!(
        screen.matches("/hooks?token=••••••&shop=acme").count() >= 2,
        "list and detail: {screen}"
    );
    press(&mut app, "v");
    let screen = rows(&plain(draw(&app))).join("\n");
    assert!(screen.contains("/hooks?token=tok_live_42&shop=acme"), "{screen}");
}

/// The focused pane's border is bold as well as coloured, so that with
/// NO_COLOR, which takes the colours off, it still shows which pane the
/// keys move.
#[test]
fn the_focused_panes_border_is_bold() {
    let mut app = live_app(3, 160, 30);
    enter(&mut app);
    let bold_corners = |buffer: &Buffer| -> Vec<bool> {
        (0..buffer.area.height)
            .map(|y| &buffer[(0, y)])
            .filter(|cell| cell.symbol() == "┌")
            .map(|cell| cell.modifier.contains(Modifier::BOLD))
            .collect()
    };
    let before = bold_corners(&draw(&app));
    app.handle_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    let after = bold_corners(&draw(&app));
    assert_eq!(before.len(), 2, "the list above the detail");
    assert_eq!(before.iter().filter(|b| **b).count(), 1, "{before:?}");
    assert_eq!(
        after,
        before.iter().map(|b| !b).collect::<Vec<_>>(),
        "Tab moves the bold border"
    );
}
