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
            target: "http://127.0.0.1:3000".into(),
        },
        0,
    );
    app
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

fn print(buffer: &Buffer) -> String {
    let width = usize::from(buffer.area.width);
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn dump() {
    let a = live_app(3, 120, 12);
    println!("{}", print(&plain(draw(&a))));
}
