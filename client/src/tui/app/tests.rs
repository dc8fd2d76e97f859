//! The state machine driven by keys and events, no terminal.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;

use super::*;
use crate::tui::dialog::{ExportFormat, Sends};
use crate::tui::pager::PAGE_SIZE;
use crate::tui::search::{self, Answer, Found, Job, Order};
use crate::tui::source::{summary_of, test_delivery, MemorySource};

/// An app over `source` as the loop has it once the worker has answered
/// what opening it asked (the count of a history longer than a page).
fn app_with(source: MemorySource, size: Rect) -> App {
    let mut app = App::new(Box::new(source), Mode::Live, size).unwrap();
    serve(&mut app);
    app
}

fn app(rows: i64) -> App {
    app_with(MemorySource::with_rows(rows), Rect::new(0, 0, 120, 40))
}

fn press(app: &mut App, keys: &str) -> Vec<Effect> {
    keys.chars()
        .filter_map(|c| app.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
        .collect()
}

fn key(app: &mut App, code: KeyCode) -> Option<Effect> {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// Carries out the orders the app gave, as the search worker does, over
/// the app's own source.
fn serve(app: &mut App) {
    while let Some(order) = app.take_order() {
        for found in answers(app, order) {
            app.on_found(found);
        }
    }
}

/// What the worker would answer to `order`.
fn answers(app: &App, order: Order) -> Vec<Found> {
    let mut found = Vec::new();
    if let Some(job) = order.job {
        search::run(job, app.source(), |answer| {
            found.push(Found {
                ticket: order.ticket,
                answer,
            });
        })
        .unwrap();
    }
    found
}

/// Types `text` as the filter, in place of the one shown, and enters it.
fn filter(app: &mut App, text: &str) {
    press(app, "/");
    app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(app, text);
    key(app, KeyCode::Enter);
}

/// A live TUI over a history the test keeps adding to, 120×40.
fn live_over(shared: &std::rc::Rc<MemorySource>) -> App {
    over(shared, Mode::Live)
}

/// An app in `mode` over `shared`, on a 120×40 screen.
fn over(shared: &std::rc::Rc<MemorySource>, mode: Mode) -> App {
    App::new(Box::new(SharedSource(shared.clone())), mode, Rect::new(0, 0, 120, 40)).unwrap()
}

/// The open delivery's pane as text, a line each.
fn detail_text(app: &App) -> String {
    let doc = &app.detail.as_ref().expect("detail open").doc;
    doc.lines.iter().map(|l| l.to_string() + "\n").collect()
}

#[test]
fn moves_with_arrows_vi_keys_pages_and_ends() {
    let mut app = app(1000);
    press(&mut app, "jjj");
    assert_eq!(app.selected_id(), Some(997));
    press(&mut app, "k");
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Up);
    assert_eq!(app.selected, 2);
    key(&mut app, KeyCode::PageDown);
    // 40 rows: 2 header + 1 footer, list border 2 and column titles 1 leave 34.
    assert_eq!(app.selected, 36);
    assert_eq!(app.offset, 3);
    press(&mut app, "G");
    serve(&mut app);
    assert_eq!(app.selected_id(), Some(1));
    assert_eq!(app.selected, 999);
    press(&mut app, "j");
    assert_eq!(app.selected, 999, "stays on the oldest row");
    press(&mut app, "g");
    assert_eq!((app.selected, app.offset), (0, 0));
    assert_eq!(app.selected_id(), Some(1000));
}

/// The list shrinks when the pane opens beside it: the row opened stays
/// in view, the one highlighted, whichever it is.
#[test]
fn the_row_opened_stays_in_view_as_the_list_shrinks() {
    let mut app = app(1000);
    press(&mut app, &"j".repeat(30));
    assert_eq!(app.offset, 0, "row 30 of 34 is in view");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(970));
    let rows = app.list_rows();
    assert!(rows < 30, "the list is shorter beside the pane: {rows}");
    assert!(
        (app.offset..app.offset + rows).contains(&app.selected),
        "row {} shown in {}..{}",
        app.selected,
        app.offset,
        app.offset + rows
    );
}

#[test]
fn enter_opens_detail_tab_switches_esc_closes() {
    let mut app = app(10);
    press(&mut app, "j");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.focus, Focus::Detail);
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(9));
    press(&mut app, "jj");
    assert_eq!(
        app.detail.as_ref().map(|d| d.scroll),
        Some(2),
        "j scrolls the focused detail"
    );
    assert_eq!(app.selected, 1);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.focus, Focus::List);
    press(&mut app, "j");
    assert_eq!(
        app.detail.as_ref().map(|d| (d.doc.id, d.scroll)),
        Some((8, 0)),
        "the detail follows the selection"
    );
    key(&mut app, KeyCode::Esc);
    assert!(app.detail.is_none());
    assert_eq!(app.focus, Focus::List);
}

/// A paste, which the terminal brackets, is never keys: over the list it
/// replays, exports and quits nothing; into the filter it goes as typed,
/// up to its first line break, and Enter is still the user's.
#[test]
fn a_paste_is_text_for_the_filter_and_no_command_elsewhere() {
    let mut app = app(30);
    app.handle_paste("hook/2\nrRyeq");
    assert!(!app.quit);
    assert!(app.overlay.is_none() && app.detail.is_none(), "nothing opened");
    let status = app.status.as_ref().expect("the paste is told of");
    assert_eq!(status.text, "a paste is no command: press / and paste to filter");

    press(&mut app, "/");
    app.handle_paste("hook/2\nq\u{1b}[31m");
    assert!(!app.quit);
    assert!(matches!(&app.overlay, Some(Overlay::Filter(input)) if input.text == "hook/2"));
    assert_eq!(
        app.status.as_ref().map(|s| s.text.as_str()),
        Some("pasted up to the first line break")
    );
    assert_eq!(app.pager.len(), 30, "not applied until Enter");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.pager.search(), Some("hook/2"));
}

/// The replay form takes a pasted count or probe into the field being edited.
#[test]
fn a_paste_fills_the_replay_forms_field() {
    let mut app = app(3);
    press(&mut app, "R");
    // No digit, nothing taken: the suggested count stays.
    app.handle_paste("many");
    let Some(Overlay::Replay(form)) = &app.overlay else {
        panic!("the form is open");
    };
    assert_eq!(form.times.text, "10");
    // As terminals send a line break in a paste, CR; and only the digits,
    // as typing takes only digits there.
    app.handle_paste(" 2x5\r9");
    key(&mut app, KeyCode::Tab);
    app.handle_paste("nothing to take");
    key(&mut app, KeyCode::Tab);
    press(&mut app, "u");
    key(&mut app, KeyCode::Tab);
    app.handle_paste("http://127.0.0.1:9/state\n");
    let Some(Overlay::Replay(form)) = &app.overlay else {
        panic!("the form stays open");
    };
    assert_eq!(form.times.text, "25", "the suggested count replaced");
    assert_eq!(form.probe().map(|p| p.text.as_str()), Some("http://127.0.0.1:9/state"));
}

#[test]
fn slash_filters_and_esc_clears() {
    let mut app = app(30);
    press(&mut app, "/");
    assert!(matches!(app.overlay, Some(Overlay::Filter(_))));
    press(&mut app, "hook/2");
    assert_eq!(app.pager.len(), 30, "nothing applied while typing");
    key(&mut app, KeyCode::Enter);
    assert!(app.overlay.is_none());
    assert_eq!(app.pager.search(), Some("hook/2"));
    serve(&mut app);
    let ids: Vec<i64> = (0..app.pager.len()).map(|i| app.pager.get(i).unwrap().id).collect();
    assert_eq!(ids, vec![29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 2]);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.pager.search(), None);
    assert_eq!(app.pager.len(), 30);
}

#[test]
fn filter_prompt_esc_keeps_the_old_filter() {
    let mut app = app(30);
    press(&mut app, "/");
    press(&mut app, "hook/3");
    key(&mut app, KeyCode::Enter);
    press(&mut app, "/x");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.pager.search(), Some("hook/3"));
    assert!(app.overlay.is_none());
}

#[test]
fn replay_export_and_copy_ask_the_loop() {
    let mut app = app(5);
    assert_eq!(
        press(&mut app, "r"),
        vec![Effect::Replay(ReplayRequest {
            delivery_id: 5,
            times: 1,
            sends: Sends::Duplicates,
            probe: None,
            settle: crate::replay::options::DEFAULT_SETTLE,
        })]
    );
    assert_eq!(press(&mut app, "r"), vec![], "one replay at a time");
    assert!(app.status.as_ref().is_some_and(|s| s.error));
    press(&mut app, "R");
    assert!(app.overlay.is_none(), "no form to fill in that could not run");
    assert!(app
        .status
        .as_ref()
        .is_some_and(|s| s.error && s.text == "a replay is already running"));
    app.on_replay_done(5, Ok("✓ 1 attempt answered 2xx".into()));
    assert!(app.replay.is_none());
    press(&mut app, "jR");
    assert!(matches!(&app.overlay, Some(Overlay::Replay(form)) if form.delivery_id == 4));
    key(&mut app, KeyCode::Backspace);
    key(&mut app, KeyCode::Backspace);
    press(&mut app, "3");
    let effect = key(&mut app, KeyCode::Enter);
    assert_eq!(
        effect,
        Some(Effect::Replay(ReplayRequest {
            delivery_id: 4,
            times: 3,
            sends: Sends::Duplicates,
            probe: None,
            settle: crate::replay::options::DEFAULT_SETTLE,
        }))
    );
    app.on_replay_done(4, Err("nothing answers".into()));
    assert_eq!(
        press(&mut app, "eh"),
        vec![Effect::Export {
            delivery_id: 4,
            format: ExportFormat::Har
        }]
    );
    assert_eq!(press(&mut app, "y"), vec![Effect::CopyCurl { delivery_id: 4 }]);

    // The next `R` opens as the last was sent, for the row now selected,
    // the attempts suggested: typing replaces them.
    press(&mut app, "jR");
    let Some(Overlay::Replay(form)) = &app.overlay else {
        panic!("the replay form: {:?}", app.overlay)
    };
    assert_eq!((form.delivery_id, form.times.text.as_str()), (3, "3"));
    assert!(form.times.suggested);
    press(&mut app, "5");
    // The next field sends never-seen events, the burst at once.
    key(&mut app, KeyCode::Tab);
    press(&mut app, "f");
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        Some(Effect::Replay(ReplayRequest {
            delivery_id: 3,
            times: 5,
            sends: Sends::FreshBurst,
            probe: None,
            settle: crate::replay::options::DEFAULT_SETTLE,
        }))
    );
    assert_eq!(
        app.replay.as_ref().map(|r| r.text.as_str()),
        Some("replaying #3 as fresh events: one alone, then a burst of 5…")
    );
}

#[test]
fn esc_stops_a_running_replay_before_it_closes_anything() {
    let mut app = app(5);
    key(&mut app, KeyCode::Enter);
    assert!(app.detail.is_some());
    press(&mut app, "r");
    app.on_replay_progress("replaying #5: 0/1 attempts answered…".into());
    assert_eq!(key(&mut app, KeyCode::Esc), Some(Effect::StopReplay));
    assert!(app.detail.is_some(), "the first Esc stops the replay only");
    let replay = app.replay.as_ref().expect("still running until the engine stops");
    assert_eq!(replay.text, "stopping the replay of #5…");
    app.on_replay_progress("replaying #5: 1/1 attempts answered…".into());
    assert_eq!(
        app.replay.as_ref().unwrap().text,
        "stopping the replay of #5…",
        "late progress is not shown"
    );
    assert_eq!(key(&mut app, KeyCode::Esc), None, "asked once");
    assert!(app.detail.is_none(), "a second Esc closes the detail");
    app.on_replay_done(5, Ok("… stopped after 0 of 1 attempts".into()));
    assert!(app.replay.is_none());
    assert_eq!(key(&mut app, KeyCode::Esc), None);
}

#[test]
fn help_opens_and_any_key_closes_it() {
    let mut app = app(3);
    press(&mut app, "?");
    assert_eq!(app.overlay, Some(Overlay::Help { first: 0 }));
    press(&mut app, "j");
    assert_eq!(app.overlay, None);
    assert_eq!(app.selected, 0, "the closing key does nothing else");
    press(&mut app, "?q");
    assert_eq!(app.overlay, None, "q closes it like any other key");
    assert!(!app.quit, "and quits nothing");
    press(&mut app, "q");
    assert!(app.quit);
}

#[test]
fn help_cut_by_a_short_screen_scrolls_to_its_last_key() {
    let mut app = app_with(MemorySource::with_rows(3), Rect::new(0, 0, 40, 12));
    press(&mut app, "?");
    let shown = 12 - 2;
    let hidden = crate::tui::view::help::KEYS.len() - shown;
    press(&mut app, &"j".repeat(hidden + 3));
    assert_eq!(
        app.overlay,
        Some(Overlay::Help { first: hidden }),
        "stops at the last key"
    );
    press(&mut app, "k");
    assert_eq!(app.overlay, Some(Overlay::Help { first: hidden - 1 }));
    press(&mut app, "x");
    assert_eq!(app.overlay, None, "any other key closes it");
}

#[test]
fn ctrl_c_quits_even_from_a_form() {
    let mut app = app(3);
    press(&mut app, "/");
    app.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

/// Opening a history longer than a page shows its first page at once and
/// leaves the count to the worker: a million rows take seconds to count.
#[test]
fn opening_a_long_history_counts_it_off_the_screens_thread() {
    let rows = PAGE_SIZE as i64 * 3;
    let mut app = App::new(
        Box::new(MemorySource::with_rows(rows)),
        Mode::Live,
        Rect::new(0, 0, 120, 40),
    )
    .unwrap();
    assert_eq!(app.selected_id(), Some(rows), "the newest row shows at once");
    assert_eq!(app.pager.total(), None);
    assert_eq!(app.waiting(), Some(Waiting::Total));
    let order = app.take_order().expect("a count for the worker");
    assert!(matches!(order.job, Some(Job::Count { .. })), "{order:?}");
    for found in answers(&app, order) {
        app.on_found(found);
    }
    assert_eq!(app.pager.total(), Some(rows as u64));
    assert_eq!(app.waiting(), None);

    let short = App::new(
        Box::new(MemorySource::with_rows(3)),
        Mode::Live,
        Rect::new(0, 0, 120, 40),
    )
    .unwrap();
    assert_eq!(
        short.pager.total(),
        Some(3),
        "a first page that is all of it needs no count"
    );
    assert_eq!(short.waiting(), None);
}

/// Delivery `id` arrives on the live tunnel.
fn deliver(app: &mut App, id: i64) {
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&test_delivery(id)),
            delivery_number: 1,
        },
        0,
    );
}

#[test]
fn live_rows_follow_at_the_top_and_stay_put_below() {
    let mut app = app(200);
    deliver(&mut app, 201);
    assert_eq!(app.selected_id(), Some(201), "at the top, the newest is selected");
    press(&mut app, "jj");
    assert_eq!(app.selected_id(), Some(199));
    deliver(&mut app, 202);
    deliver(&mut app, 203);
    assert_eq!(
        app.selected_id(),
        Some(199),
        "below the top, the selection stays on its row"
    );
    deliver(&mut app, 205);
    deliver(&mut app, 204);
    assert_eq!(app.selected_id(), Some(199), "rows finishing out of order too");
    assert_eq!(app.pager.get(1).map(|r| r.id), Some(204));
    assert_eq!(app.stats.total, 5);
    assert_eq!(app.pager.total(), Some(205));
}

/// Following the newest under a burst, rows arrive between frames: `j`
/// moves from the row the screen showed selected, not from one that came
/// since, which the user never saw.
#[test]
fn a_key_moves_from_the_row_drawn_selected_not_from_one_come_since() {
    let mut app = app(200);
    deliver(&mut app, 201);
    app.drawn();
    deliver(&mut app, 202);
    deliver(&mut app, 203);
    assert_eq!(app.selected_id(), Some(203), "following the newest");
    press(&mut app, "j");
    assert_eq!(
        app.selected_id(),
        Some(200),
        "the row below #201, which the screen showed"
    );
    app.drawn();
    press(&mut app, "k");
    assert_eq!(app.selected_id(), Some(201), "once drawn, keys move from where it is");
}

/// With the newest delivery open on a full list, one more shows above it:
/// the view was at the top, and the open row stays in sight.
#[test]
fn a_new_delivery_shows_above_an_open_one_at_the_top() {
    let mut app = app(200);
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(200));
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&test_delivery(201)),
            delivery_number: 1,
        },
        0,
    );
    assert_eq!(app.selected_id(), Some(200), "the open row stays selected");
    assert_eq!(
        (app.selected, app.offset),
        (1, 0),
        "and the new row is in view above it"
    );
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(200));

    // Scrolled down, the rows in view stay put.
    key(&mut app, KeyCode::Esc);
    press(&mut app, "jjjjjjjjjjjjjjjjjjjjjjjjjjjjjj");
    key(&mut app, KeyCode::Enter);
    let (selected, offset) = (app.selected, app.offset);
    assert!(offset > 0, "scrolled: {offset}");
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&test_delivery(202)),
            delivery_number: 1,
        },
        0,
    );
    assert_eq!((app.selected, app.offset), (selected + 1, offset + 1));
}

#[test]
fn filtered_live_view_fetches_matches_on_tick() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(20));
    let mut app = App::new(
        Box::new(SharedSource(shared.clone())),
        Mode::Live,
        Rect::new(0, 0, 80, 24),
    )
    .unwrap();
    press(&mut app, "/");
    press(&mut app, "hook/2");
    key(&mut app, KeyCode::Enter);
    serve(&mut app);
    assert_eq!(app.pager.len(), 2);
    for id in [21, 30, 25] {
        shared.push(test_delivery(id));
        app.on_tunnel_event(
            TunnelEvent::Delivered {
                summary: summary_of(&test_delivery(id)),
                delivery_number: 1,
            },
            0,
        );
    }
    assert_eq!(app.pager.len(), 2, "matches are the store's to decide");
    app.on_tick(1);
    let ids: Vec<i64> = (0..app.pager.len()).map(|i| app.pager.get(i).unwrap().id).collect();
    assert_eq!(ids, vec![25, 21, 20, 2]);
    assert_eq!(app.selected_id(), Some(25));
}

#[test]
fn detail_scroll_is_bounded() {
    let mut app = app_with(MemorySource::with_rows(3), Rect::new(0, 0, 60, 15));
    key(&mut app, KeyCode::Enter);
    press(&mut app, "G");
    let detail = app.detail.as_ref().unwrap();
    let rows = 15 - 2 - 1 - 2;
    assert_eq!(detail.scroll, detail.doc.lines.len() - rows);
    press(&mut app, "jjj");
    assert_eq!(app.detail.as_ref().unwrap().scroll, detail_len(&app) - rows);
    press(&mut app, "lll");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 0, "every line fits");
    // Among the lines cut at the edge: the replay runs at the end wrap.
    let cut = |app: &mut App, line| {
        let doc = &mut app.detail.as_mut().unwrap().doc;
        doc.lines.insert(0, line);
        doc.wrap_from += 1;
    };
    cut(&mut app, ratatui::text::Line::from("x".repeat(100)));
    press(&mut app, "lll");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 24);
    press(&mut app, &"l".repeat(50));
    let columns = 60 - 2;
    assert_eq!(
        app.detail.as_ref().unwrap().hscroll,
        100 - columns,
        "stops where the widest line's end shows"
    );
    press(&mut app, "h");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 100 - columns - 8, "one step back");
    press(&mut app, "0");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 0, "back to the left edge");
    press(&mut app, "L");
    assert_eq!(
        app.detail.as_ref().unwrap().hscroll,
        100 - columns,
        "a screen, up to the end"
    );
    cut(&mut app, ratatui::text::Line::from("y".repeat(300)));
    press(&mut app, "0L");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, columns, "a screen sideways");
    press(&mut app, "$");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 300 - columns, "to the end");
    press(&mut app, "H");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 300 - 2 * columns, "a screen back");

    // Wide characters take two columns: more are cut before the end shows.
    cut(&mut app, ratatui::text::Line::from(format!("{}END", "中".repeat(300))));
    press(&mut app, &"l".repeat(80));
    let kept = 3 + (columns - 3) / 2;
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 303 - kept, "to where END shows");

    // An emoji of several code points is one character sideways.
    let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
    cut(
        &mut app,
        ratatui::text::Line::from(format!("{}END", family.repeat(400))),
    );
    press(&mut app, "$");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 403 - kept, "to where END shows");

    // With the list's keys, sideways still scrolls the detail: the list has
    // no width to scroll.
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.focus, Focus::List);
    press(&mut app, "0");
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 0);
    key(&mut app, KeyCode::Right);
    assert_eq!(app.detail.as_ref().unwrap().hscroll, 8);
    assert_eq!(app.focus, Focus::List, "the keys stay with the list");
}

fn detail_len(app: &App) -> usize {
    app.detail.as_ref().map_or(0, |d| d.doc.lines.len())
}

#[test]
fn empty_history_has_nothing_to_act_on() {
    let mut app = app(0);
    assert_eq!(press(&mut app, "jGgry"), vec![]);
    key(&mut app, KeyCode::Enter);
    assert!(app.detail.is_none());
    assert!(app.status.as_ref().is_some_and(|s| s.text == "no delivery selected"));
}

#[test]
fn a_flood_of_live_rows_starts_paging_over_only_for_a_follower() {
    let source = std::rc::Rc::new(MemorySource::with_rows(10));
    let mut follower = App::new(
        Box::new(SharedSource(source.clone())),
        Mode::Live,
        Rect::new(0, 0, 80, 24),
    )
    .unwrap();
    let mut reader = App::new(
        Box::new(SharedSource(source.clone())),
        Mode::Live,
        Rect::new(0, 0, 80, 24),
    )
    .unwrap();
    press(&mut reader, "jjj");
    for id in 11..=1200 {
        let delivery = test_delivery(id);
        source.push(delivery.clone());
        let event = TunnelEvent::Delivered {
            summary: summary_of(&delivery),
            delivery_number: 1,
        };
        follower.on_tunnel_event(event.clone(), 0);
        reader.on_tunnel_event(event, 0);
    }
    follower.on_tick(1);
    reader.on_tick(1);
    assert_eq!(follower.selected_id(), Some(1200));
    assert_eq!(follower.pager.len(), PAGE_SIZE, "paging started over from the newest");
    assert_eq!(reader.selected_id(), Some(7), "the reader keeps their row");
    assert_eq!(reader.pager.len(), 1200);
}

/// Browsing while a tunnel in another process records bursts: the
/// reader's row and open delivery stay put however many rows come above.
#[test]
fn browsing_keeps_the_readers_place_through_bursts_another_process_records() {
    let source = std::rc::Rc::new(MemorySource::with_rows(50));
    let mut reader = over(&source, Mode::Browser { db: "h.db".into() });
    press(&mut reader, "jjjjjjjjjj");
    key(&mut reader, KeyCode::Enter);
    assert_eq!(reader.detail.as_ref().map(|d| d.doc.id), Some(40));
    let mut next = 51;
    for second in 1..=8 {
        for _ in 0..300 {
            source.push(test_delivery(next));
            next += 1;
        }
        reader.on_tick(second);
        assert_eq!(reader.selected_id(), Some(40), "after {second} bursts");
        assert_eq!(
            reader.detail.as_ref().map(|d| d.doc.id),
            Some(40),
            "after {second} bursts"
        );
    }
    assert_eq!(reader.pager.position(40), Some(2400 + 10));
}

#[test]
fn an_open_detail_shows_the_answer_once_it_comes() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(3));
    let mut waiting = test_delivery(4);
    waiting.outcome = None;
    shared.push(waiting.clone());
    let mut app = live_over(&shared);
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(4));
    assert!(detail_text(&app).contains("Response: none"), "{}", detail_text(&app));

    let answered = test_delivery(4);
    shared.deliveries.borrow_mut().retain(|d| d.id != 4);
    shared.push(answered.clone());
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&answered),
            delivery_number: 1,
        },
        0,
    );
    assert!(app.on_tick(0), "the screen changed");
    assert!(!detail_text(&app).contains("Response: none"), "{}", detail_text(&app));
    assert!(detail_text(&app).contains("Response 200"), "{}", detail_text(&app));
}

#[test]
fn an_open_detail_counts_a_retry_of_its_event_as_it_comes() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(3));
    let mut app = live_over(&shared);
    key(&mut app, KeyCode::Enter);
    assert!(
        detail_text(&app).contains("the only delivery of this event"),
        "{}",
        detail_text(&app)
    );

    // The sender tries event evt_3 again: the history counts two.
    let mut retry = test_delivery(4);
    retry.request.event_key = "evt_3".into();
    retry.delivery_count = 2;
    shared.deliveries.borrow_mut().iter_mut().for_each(|d| {
        if d.request.event_key == "evt_3" {
            d.delivery_count = 2;
        }
    });
    shared.push(retry.clone());
    // However many events touch it, the open delivery is read once a tick:
    // each read counts its event's deliveries, and a burst of retries
    // read one by one kept the screen and `q` waiting behind them.
    let reads = shared.get_calls.get();
    for _ in 0..50 {
        app.on_tunnel_event(
            TunnelEvent::Delivered {
                summary: summary_of(&retry),
                delivery_number: 2,
            },
            0,
        );
    }
    assert_eq!(shared.get_calls.get(), reads, "not read on each event");
    assert!(app.on_tick(0), "the screen changed");
    assert_eq!(shared.get_calls.get(), reads + 1, "read once on the tick");
    assert!(!app.on_tick(0), "nothing more to read");
    assert_eq!(
        app.detail.as_ref().map(|d| d.doc.id),
        Some(3),
        "the open delivery stays open"
    );
    assert!(detail_text(&app).contains("1st delivery of 2"), "{}", detail_text(&app));
}

/// Under a filter, a retry the filter hides still raises the count shown on
/// the rows of its event it lists: live from the tunnel's news, browsing
/// from the history another process writes.
/// A row a filter listed while it was in flight gets its answer when the
/// tunnel reports it: it used to wait for good, as only newer rows were
/// read again under a filter.
#[test]
fn a_filtered_live_row_listed_in_flight_gets_its_answer() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(20));
    let mut in_flight = test_delivery(21);
    let answer = in_flight.outcome.take();
    shared.push(in_flight.clone());
    let mut app = live_over(&shared);
    serve(&mut app);
    filter(&mut app, "hook/2");
    serve(&mut app);
    let waiting = |app: &App| (0..app.pager.len()).find_map(|i| app.pager.get(i).filter(|r| r.id == 21).cloned());
    assert!(waiting(&app).expect("listed").is_waiting());
    shared.deliveries.borrow_mut().retain(|d| d.id != 21);
    let answered = crate::store::Delivery {
        outcome: answer,
        ..in_flight
    };
    shared.push(answered.clone());
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&answered),
            delivery_number: 1,
        },
        0,
    );
    app.on_tick(1);
    serve(&mut app);
    let row = waiting(&app).expect("still listed");
    assert_eq!((row.status, row.is_waiting()), (Some(200), false));
}

#[test]
fn a_retry_the_filter_hides_still_counts_for_the_rows_it_shows() {
    for mode in [Mode::Live, Mode::Browser { db: "h.db".into() }] {
        let shared = std::rc::Rc::new(MemorySource::with_rows(3));
        let mut app = over(&shared, mode.clone());
        filter(&mut app, "hook/3");
        serve(&mut app);
        assert_eq!(app.pager.len(), 1, "{mode:?}");
        for (id, count) in [(4, 2), (5, 3)] {
            let mut retry = test_delivery(id);
            retry.request.event_key = "evt_3".into();
            retry.request.path = "/other".into();
            retry.delivery_count = count;
            shared.push(retry.clone());
            if mode == Mode::Live {
                app.on_tunnel_event(
                    TunnelEvent::Delivered {
                        summary: summary_of(&retry),
                        delivery_number: count,
                    },
                    0,
                );
            }
        }
        app.on_tick(1);
        serve(&mut app);
        assert_eq!(app.pager.len(), 1, "{mode:?}: the retries are not listed");
        let shown = app.pager.get(0).unwrap();
        assert_eq!((shown.id, app.pager.seen(shown)), (3, 3), "{mode:?}");
    }
}

#[test]
fn ctrl_z_stops_the_browser_but_not_a_live_tunnel() {
    let ctrl_z = KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL);
    let mut live = app(3);
    assert_eq!(live.handle_key(ctrl_z), None);
    assert!(
        live.status
            .as_ref()
            .is_some_and(|s| s.text.contains("would stop the tunnel")),
        "says why not"
    );
    let mut browser = App::new(
        Box::new(MemorySource::with_rows(3)),
        Mode::Browser { db: "h.db".into() },
        Rect::new(0, 0, 80, 24),
    )
    .unwrap();
    assert_eq!(browser.handle_key(ctrl_z), Some(Effect::Suspend));
}

/// A history shared between the test and the app, so the test can add rows.
struct SharedSource(std::rc::Rc<MemorySource>);

impl HistorySource for SharedSource {
    fn list(&self, q: &crate::store::ListQuery) -> anyhow::Result<Vec<crate::store::Summary>> {
        self.0.list(q)
    }
    fn count(&self, q: &crate::store::ListQuery) -> anyhow::Result<u64> {
        self.0.count(q)
    }
    fn page_ends(&self, q: &crate::store::ListQuery, page: usize) -> anyhow::Result<Vec<i64>> {
        self.0.page_ends(q, page)
    }
    fn get(&self, id: i64) -> anyhow::Result<Option<crate::store::Delivery>> {
        self.0.get(id)
    }
    fn delivery_number(&self, id: i64) -> anyhow::Result<i64> {
        self.0.delivery_number(id)
    }
    fn event_count(&self, key: &str, scope: &str) -> anyhow::Result<i64> {
        self.0.event_count(key, scope)
    }
    fn replay_runs(&self, id: i64) -> anyhow::Result<Vec<crate::store::ReplayRun>> {
        self.0.replay_runs(id)
    }
    fn data_version(&self) -> anyhow::Result<i64> {
        self.0.data_version()
    }
    fn oldest_id(&self) -> anyhow::Result<Option<i64>> {
        self.0.oldest_id()
    }
    fn generation(&self) -> u64 {
        self.0.generation()
    }
}

#[test]
fn v_shows_the_secrets_of_the_open_delivery_and_masks_them_again() {
    let mut app = app(3);
    key(&mut app, KeyCode::Enter);
    let detail = |app: &App| -> String {
        let doc = &app.detail.as_ref().expect("a delivery is open").doc;
        doc.lines.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    };
    assert!(
        detail(&app).contains("authorization: Bearer •••••• (masked, 21 bytes)"),
        "{}",
        detail(&app)
    );
    press(&mut app, "jjj");
    press(&mut app, "v");
    assert!(
        detail(&app).contains("authorization: Bearer sk_live_secret"),
        "{}",
        detail(&app)
    );
    assert_eq!(
        app.detail.as_ref().map(|d| d.scroll),
        Some(3),
        "the open delivery keeps its place"
    );
    press(&mut app, "v");
    assert!(!detail(&app).contains("sk_live_secret"), "{}", detail(&app));

    // Shown secrets belong to the delivery they were shown on: closing it
    // masks them, so the next one opened never shows its credentials
    // unasked.
    press(&mut app, "v");
    assert!(detail(&app).contains("sk_live_secret"), "{}", detail(&app));
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Enter);
    assert!(!detail(&app).contains("sk_live_secret"), "{}", detail(&app));

    // With nothing open, v does nothing: secrets are never shown by a key
    // pressed before the delivery they belong to was opened.
    key(&mut app, KeyCode::Esc);
    press(&mut app, "v");
    assert_eq!(app.reveal, None);
    assert!(app
        .status
        .as_ref()
        .is_some_and(|s| s.text.contains("open a delivery first")));
    key(&mut app, KeyCode::Enter);
    assert!(!detail(&app).contains("sk_live_secret"), "{}", detail(&app));
}

/// Another file at the history's path: the list is read again from the
/// top, and the open delivery, whose id now names another, is closed.
#[test]
fn a_replaced_history_is_read_again_from_the_top() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(30));
    let mut app = live_over(&shared);
    press(&mut app, "jjj");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(27));
    let mut other = test_delivery(1);
    other.request.path = "/other".into();
    *shared.deliveries.borrow_mut() = vec![other];
    shared.generation.set(1);
    assert!(app.on_tick(1), "read again");
    assert!(app.detail.is_none(), "no delivery of the old file stays open");
    assert_eq!((app.selected, app.offset, app.pager.len()), (0, 0, 1));
    assert_eq!(app.pager.get(0).map(|s| s.path.as_str()), Some("/other"));
    let status = app.status.as_ref().map(|s| s.text.as_str());
    assert_eq!(
        status,
        Some("the history file was replaced: showing the one now at its path")
    );
}

#[test]
fn a_filter_searches_off_the_thread_and_keys_work_meanwhile() {
    let mut app = app(1000);
    filter(&mut app, "hook/1");
    assert_eq!(app.waiting(), Some(Waiting::Rows), "searching");
    assert!(app.pager.is_empty(), "no rows of the old list under the new filter");
    let order = app.take_order().expect("a search for the worker");
    assert_eq!(
        order.job,
        Some(Job::Search {
            search: "hook/1".into()
        })
    );
    // Keys are taken while the search runs.
    press(&mut app, "?");
    assert_eq!(app.overlay, Some(Overlay::Help { first: 0 }));
    press(&mut app, "x");
    press(&mut app, "jG");
    assert_eq!(app.take_order(), None, "nothing to move through yet");
    // 1, 10…19, 100…199 and 1000 match: the first page comes, then the count.
    let mut found = answers(&app, order).into_iter();
    assert!(app.on_found(found.next().unwrap()));
    assert_eq!(app.pager.len(), PAGE_SIZE);
    assert_eq!(app.selected_id(), Some(1000));
    assert_eq!(app.pager.total(), None);
    assert_eq!(app.waiting(), Some(Waiting::Total));
    assert!(app.on_found(found.next().unwrap()));
    assert_eq!(app.pager.total(), Some(112));
    assert_eq!(app.waiting(), None);
}

#[test]
fn a_superseded_search_is_ignored_when_it_answers_late() {
    let mut app = app(30);
    filter(&mut app, "hook/2");
    let first = app.take_order().unwrap();
    filter(&mut app, "hook/3");
    let second = app.take_order().unwrap();
    assert!(second.ticket > first.ticket);
    let late = answers(&app, first);
    for found in late.clone() {
        assert!(!app.on_found(found), "the first filter's answer is stale");
    }
    assert!(app.pager.is_empty());
    assert_eq!(app.waiting(), Some(Waiting::Rows));
    for found in answers(&app, second) {
        app.on_found(found);
    }
    let ids: Vec<i64> = (0..app.pager.len()).map(|i| app.pager.get(i).unwrap().id).collect();
    assert_eq!(ids, vec![30, 3]);
    for found in late {
        assert!(!app.on_found(found), "still stale once the newer one answered");
    }
    assert_eq!(app.pager.len(), 2);
}

#[test]
fn esc_stops_the_search_in_flight() {
    let mut app = app(30);
    filter(&mut app, "hook/2");
    let search = app.take_order().unwrap();
    key(&mut app, KeyCode::Esc);
    let stop = app.take_order().expect("the worker is told to stop");
    assert_eq!(stop.job, None);
    assert!(stop.ticket > search.ticket);
    assert_eq!(app.waiting(), None);
    assert_eq!(app.pager.search(), None);
    assert_eq!(app.pager.len(), 30, "the whole list at once");
    for found in answers(&app, search) {
        assert!(!app.on_found(found));
    }
    assert_eq!((app.pager.search(), app.pager.len()), (None, 30));
}

#[test]
fn g_waits_for_the_oldest_rows_without_holding_keys() {
    let mut app = app(1000);
    press(&mut app, "G");
    assert_eq!(app.waiting(), Some(Waiting::End));
    assert_eq!(app.selected, 0, "not there yet");
    let order = app.take_order().unwrap();
    press(&mut app, "j");
    assert_eq!(app.selected, 1, "keys work meanwhile");
    app.on_tunnel_event(
        TunnelEvent::Delivered {
            summary: summary_of(&test_delivery(1001)),
            delivery_number: 1,
        },
        0,
    );
    assert_eq!(app.pager.get(0).map(|r| r.id), Some(1001), "and live rows come in");
    for found in answers(&app, order) {
        assert!(app.on_found(found));
    }
    assert_eq!(app.selected_id(), Some(1));
    assert_eq!(app.waiting(), None);
    // Known now: no second trip.
    press(&mut app, "gG");
    assert_eq!(app.take_order(), None);
    assert_eq!(app.selected_id(), Some(1));

    let mut app = self::app(1000);
    press(&mut app, "G");
    let order = app.take_order().unwrap();
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.take_order().map(|o| o.job), Some(None), "Esc stops it");
    for found in answers(&app, order) {
        assert!(!app.on_found(found));
    }
    assert_eq!(app.selected, 0);
}

/// Browsing while another process records faster than the list pages:
/// `G` still reaches the oldest row, rather than being overtaken by the
/// list starting over from the newest.
#[test]
fn g_arrives_while_another_process_records_a_flood() {
    let source = std::rc::Rc::new(MemorySource::with_rows(1000));
    let mut reader = over(&source, Mode::Browser { db: "h.db".into() });
    serve(&mut reader);
    press(&mut reader, "G");
    assert_eq!(reader.waiting(), Some(Waiting::End));
    let order = reader.take_order().unwrap();
    for id in 1001..=2500 {
        source.push(test_delivery(id));
    }
    reader.on_tick(1);
    assert_eq!(reader.take_order(), None, "nothing sent in G's place");
    for found in answers(&reader, order) {
        assert!(reader.on_found(found));
    }
    assert_eq!(reader.selected_id(), Some(1), "at the oldest row");
    reader.on_tick(2);
    assert_eq!(reader.selected_id(), Some(1), "and kept there");
}

/// Rows piling up faster than the list pages: the list starts over from
/// the newest, and its total carries over, the new rows counted apart, so
/// no count of the whole history is asked for each time, and a count in
/// flight is not overtaken by the next.
#[test]
fn the_count_carries_over_while_another_process_records_a_flood() {
    let source = std::rc::Rc::new(MemorySource::with_rows(1000));
    let mut reader = over(&source, Mode::Browser { db: "h.db".into() });
    serve(&mut reader);
    assert_eq!(reader.pager.total(), Some(1000));
    let mut next = 1001;
    let mut flood = |n: i64| {
        for _ in 0..n {
            source.push(test_delivery(next));
            next += 1;
        }
    };
    flood(1500);
    reader.on_tick(1);
    assert_eq!(reader.take_order(), None, "no count asked for");
    assert_eq!(reader.pager.total(), Some(2500));
    assert_eq!(reader.selected_id(), Some(2500), "at the newest");

    // Opened, its count in flight, as rows pour in twice over.
    let mut reader = over(&source, Mode::Browser { db: "h.db".into() });
    let count = reader.take_order().expect("a count");
    flood(1500);
    reader.on_tick(1);
    flood(1500);
    reader.on_tick(2);
    assert_eq!(reader.take_order(), None, "the count in flight is left to finish");
    for found in answers(&reader, count) {
        assert!(reader.on_found(found));
    }
    assert_eq!(reader.pager.total(), Some(5500), "the rows since counted in");
}

/// Esc during a `G` under a filter stops the `G` only: the filter stays,
/// and a second Esc clears it.
#[test]
fn esc_during_g_under_a_filter_keeps_the_filter() {
    let mut app = app(1000);
    filter(&mut app, "hook/");
    let search = app.take_order().unwrap();
    for found in answers(&app, search) {
        app.on_found(found);
    }
    assert_eq!(app.waiting(), None);
    press(&mut app, "G");
    if app.waiting() != Some(Waiting::End) {
        return assert!(app.pager.end_reached(), "G either waits or is there");
    }
    app.take_order().expect("G's order");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.take_order().map(|o| o.job), Some(None), "Esc stops G");
    assert_eq!(app.pager.search(), Some("hook/"), "the filter stays");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.pager.search(), None, "a second Esc clears it");
}

#[test]
fn a_failed_search_says_why() {
    let mut app = app(30);
    filter(&mut app, "hook/2");
    let order = app.take_order().unwrap();
    app.on_found(Found {
        ticket: order.ticket,
        answer: Answer::Failed("the history database is locked by another process".into()),
    });
    assert_eq!(app.waiting(), None);
    let status = app.status.clone().unwrap();
    assert!(status.error && status.text.contains("locked"), "{status:?}");
}

/// Clearing a filter shows the newest page at once and counts the whole
/// history off the thread: on a million rows a count takes seconds.
#[test]
fn clearing_a_filter_counts_the_history_off_the_thread() {
    let mut app = app(1000);
    filter(&mut app, "hook/");
    let search = app.take_order().unwrap();
    for found in answers(&app, search) {
        app.on_found(found);
    }
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.pager.search(), None);
    assert!(!app.pager.is_empty(), "the newest page at once");
    assert_eq!(app.waiting(), Some(Waiting::Total));
    let count = app.take_order().expect("the count is asked of the worker");
    assert!(matches!(count.job, Some(Job::Count { .. })), "{count:?}");
    assert_eq!(app.pager.total(), None);
    for found in answers(&app, count) {
        assert!(app.on_found(found));
    }
    assert_eq!((app.pager.total(), app.waiting()), (Some(1000), None));
}

/// Another process prunes the oldest deliveries while the list is open
/// (`portpreview prune`): the count and the pages read still held them,
/// and `G` went to rows no longer there. The list is read again, and the
/// delivery open stays open where it still is.
#[test]
fn a_prune_beside_the_list_is_followed() {
    for mode in [Mode::Browser { db: "h.db".into() }, Mode::Live] {
        let shared = std::rc::Rc::new(MemorySource::with_rows(50));
        let mut app = over(&shared, mode.clone());
        serve(&mut app);
        assert_eq!(app.pager.total(), Some(50));
        press(&mut app, "jj");
        key(&mut app, KeyCode::Enter);
        assert_eq!(app.selected_id(), Some(48));
        assert!(!app.on_tick(1), "nothing changed");
        shared.deliveries.borrow_mut().retain(|d| d.id > 40);
        assert!(app.on_tick(2), "{mode:?}: the prune is seen");
        let status = app.status.as_ref().map(|s| s.text.clone()).unwrap_or_default();
        assert!(status.contains("pruned"), "{mode:?}: {status}");
        serve(&mut app);
        assert_eq!(app.pager.total(), Some(10), "{mode:?}");
        assert_eq!(app.selected_id(), Some(48), "{mode:?}: the open delivery stays");
        assert!(app.detail.is_some(), "{mode:?}");
        key(&mut app, KeyCode::Esc);
        press(&mut app, "G");
        serve(&mut app);
        assert_eq!(app.selected_id(), Some(41), "{mode:?}: the oldest row left");
    }
}

/// Under a filter too, a prune keeps the open delivery when it is still
/// listed, and goes back to the newest match when it is not.
#[test]
fn a_prune_beside_a_filtered_list_keeps_the_open_delivery_it_spared() {
    for mode in [Mode::Browser { db: "h.db".into() }, Mode::Live] {
        let shared = std::rc::Rc::new(MemorySource::with_rows(50));
        let mut app = over(&shared, mode.clone());
        serve(&mut app);
        filter(&mut app, "hook/4");
        serve(&mut app);
        press(&mut app, "j");
        key(&mut app, KeyCode::Enter);
        assert_eq!(app.selected_id(), Some(48), "{mode:?}");
        shared.deliveries.borrow_mut().retain(|d| d.id > 40);
        assert!(app.on_tick(1), "{mode:?}: the prune is seen");
        serve(&mut app);
        assert_eq!(app.selected_id(), Some(48), "{mode:?}: the open delivery stays");
        assert_eq!(app.detail.as_ref().map(|d| d.doc.id), Some(48), "{mode:?}");
        shared.deliveries.borrow_mut().retain(|d| d.id > 48);
        assert!(app.on_tick(2), "{mode:?}: the second prune is seen");
        serve(&mut app);
        assert_eq!(app.selected_id(), Some(49), "{mode:?}: the newest match");
        assert!(app.detail.is_none(), "{mode:?}: the pruned delivery is closed");
    }
}

/// Browsing beside a tunnel, a burst of more new deliveries than a page
/// (a provider's, a load test) keeps the reader's place and the open
/// delivery, as a few do: it used to close it and go back to the newest.
#[test]
fn a_burst_beside_the_browser_keeps_the_open_delivery() {
    let shared = std::rc::Rc::new(MemorySource::with_rows(300));
    let mut app = over(&shared, Mode::Browser { db: "h.db".into() });
    serve(&mut app);
    press(&mut app, "jjj");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.selected_id(), Some(297));
    for id in 301..=550 {
        shared.push(test_delivery(id));
    }
    assert!(app.on_tick(1));
    serve(&mut app);
    assert_eq!(app.selected_id(), Some(297), "the place is kept");
    assert!(app.detail.is_some(), "the delivery stays open");
    assert_eq!(app.pager.total(), Some(550));
    key(&mut app, KeyCode::Esc);
    press(&mut app, "g");
    assert_eq!(app.selected_id(), Some(550), "the burst is listed above");
}
