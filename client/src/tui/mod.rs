//! The terminal UI: live deliveries during `portpreview http`, and a
//! browser over the stored history (`portpreview tui`).
//!
//! `app` holds the state and the key handling, `view` draws it, and the
//! loop below feeds one to the other: terminal keys, tunnel events, a tick,
//! a running replay and the answers of searches run off its thread (see
//! [`search`]), in one `select!`.

pub mod app;
pub mod detail;
pub mod dialog;
mod effects;
pub mod export;
pub mod format;
pub mod pager;
pub mod search;
pub mod source;
pub mod stats;
pub mod terminal;
pub mod view;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use ratatui::layout::Rect;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::events::{EventFeed, TunnelEvent};
use crate::store::{Store, StoreError};
use source::FollowedStore;

use app::{App, Effect, Mode};
use effects::{Effects, ReplayDone, ReplayTask};
use search::SearchWorker;
use terminal::TerminalGuard;

/// Set to `1` to quit right after the first frame (benchmarks time the open).
pub const EXIT_AFTER_FIRST_FRAME_ENV: &str = "PORTPREVIEW_TUI_EXIT_AFTER_FIRST_FRAME";
/// How often the header's rate and the live rows are brought up to date.
const TICK: Duration = Duration::from_millis(200);
/// Longest wait, when the TUI closes, for a stopped replay to save its run.
const REPLAY_SAVE_WAIT: Duration = Duration::from_secs(10);
/// Tunnel events taken in one go before the screen is considered again.
const EVENT_BATCH: usize = 1024;

/// Shows deliveries live as `events` reports them, until the user quits or
/// `shutdown` is cancelled. Returns the events, once the terminal is given
/// back, so that what the tunnel says while it stops can still be printed.
///
/// Paging the history and drawing a frame take milliseconds, so the TUI runs
/// on a thread and runtime of its own: on the tunnel's thread every frame
/// would hold up the requests in flight.
pub async fn run_live(db: &Path, events: EventFeed, shutdown: CancellationToken) -> anyhow::Result<Option<EventFeed>> {
    let db = db.to_path_buf();
    let (done, finished) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("tui".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the TUI's runtime")
                .and_then(|runtime| runtime.block_on(run(&db, Mode::Live, Some(events), shutdown)));
            let _ = done.send(result);
        })
        .context("cannot start the TUI's thread")?;
    match finished.await {
        Ok(result) => result,
        // The thread panicked: its result went with it, and once the
        // sender is dropped the thread is all but gone, so the join to
        // read why blocks no longer than its unwinding.
        Err(_) => {
            let why = match thread.join() {
                Err(payload) => crate::panic_message(&*payload).to_owned(),
                Ok(()) => "it ended without a word".to_owned(),
            };
            Err(anyhow::anyhow!("the TUI stopped on an internal error: {why}"))
        }
    }
}

/// Browses the history in `db` until the user quits or the process is
/// asked to stop (SIGTERM, SIGHUP), giving the terminal back either way.
pub async fn run_browser(db: &Path) -> anyhow::Result<()> {
    let mode = Mode::Browser {
        db: db.display().to_string(),
    };
    let shutdown = CancellationToken::new();
    let browse = run(db, mode, None, shutdown.clone());
    crate::signalled::finish_early_on_signal(browse, &shutdown)
        .await
        .map(drop)
}

async fn run(
    db: &Path,
    mode: Mode,
    events: Option<EventFeed>,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<EventFeed>> {
    // Browsing opens the history as the reading commands do, never waiting
    // on another process's lock. Live, the recorder has made the history
    // already; with --no-record there may be none, and none is made: an
    // empty one in memory stands in.
    let open: fn(&Path) -> Result<Store, StoreError> = match mode {
        Mode::Browser { .. } => Store::open_existing,
        Mode::Live if db.exists() => Store::open,
        Mode::Live => |_| Store::in_memory(),
    };
    let store = open(db).map_err(|err| err.for_command(db))?;
    // A history replaced while the tunnel runs is made again by its
    // writer alone: opened from here, it would be created beside the
    // writer's own start of it.
    let follow: fn(&Path) -> Result<Store, StoreError> = match mode {
        Mode::Live if db.exists() => Store::open_made,
        _ => open,
    };
    let source = FollowedStore::new(store, follow);
    let (width, height) = crossterm::terminal::size().context("cannot read the terminal size")?;
    let app = App::new(Box::new(source), mode, Rect::new(0, 0, width, height))
        .map_err(|err| err.context(format!("cannot read the history in {}", db.display())))?;
    let mut terminal = TerminalGuard::enter().context("cannot set up the terminal")?;
    let (effects, progress) = Effects::new(db.to_path_buf());
    let (searches, found) = SearchWorker::start(db.to_path_buf(), follow)?;
    let mut event_loop = EventLoop {
        app,
        effects,
        progress,
        searches,
        found,
        replay: None,
        events,
        started: Instant::now(),
        exit_after_first_frame: std::env::var(EXIT_AFTER_FIRST_FRAME_ENV).is_ok_and(|v| v == "1"),
    };
    // The guard restores the terminal when it drops, whatever the result.
    let result = event_loop.run(&mut terminal, shutdown).await;
    let replay = event_loop.stop_replay(&mut terminal).await;
    drop(terminal);
    if let Some(line) = replay {
        crate::to_stderr(format_args!("{line}\n"));
    }
    result.map(|()| event_loop.events.take())
}

/// The end of the TUI an error with the terminal brings: none for a
/// terminal that is gone, which ends it as a quit does (and the hangup
/// that usually comes with it), else the error, saying what failed.
fn unless_gone(err: std::io::Error, what: &'static str) -> anyhow::Result<()> {
    match terminal::is_gone(&err) {
        true => Ok(()),
        false => Err(anyhow::Error::new(err).context(what)),
    }
}

struct EventLoop {
    app: App,
    effects: Effects,
    progress: mpsc::UnboundedReceiver<String>,
    /// Runs filters and `G` off this thread; dropped with the loop, it
    /// stops the one in flight and ends its thread.
    searches: SearchWorker,
    found: mpsc::UnboundedReceiver<search::Found>,
    replay: Option<ReplayTask>,
    events: Option<EventFeed>,
    started: Instant,
    exit_after_first_frame: bool,
}

impl EventLoop {
    async fn run(&mut self, terminal: &mut TerminalGuard, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut keys = EventStream::new();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut dirty = true;
        let mut events_pending = false;
        let mut continued = signals(SIGCONT);
        // Sent as a signal (`kill -TSTP`), not typed: raw mode makes ctrl-z a key.
        let mut stop_asked = signals(SIGTSTP);
        loop {
            // Without SIGCONT to wait for, a stop can only be taken as over.
            if terminal.is_given_back() && continued.is_none() {
                if let Err(err) = terminal.resume() {
                    return unless_gone(err, "cannot take the terminal back");
                }
            }
            if dirty && !terminal.is_given_back() {
                if let Err(err) = terminal.draw_widget(&self.app) {
                    return unless_gone(err, "cannot draw");
                }
                self.app.drawn();
                dirty = false;
                if self.exit_after_first_frame {
                    return Ok(());
                }
            }
            if self.app.quit {
                return Ok(());
            }
            if let Some(order) = self.app.take_order() {
                self.searches.send(order);
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                event = next_event(&mut self.events) => match event {
                    Some(event) => {
                        self.take_events(event);
                        events_pending = true;
                    }
                    // The tunnel is gone; what was recorded can still be browsed.
                    None => self.events = None,
                },
                // Not while the shell has the terminal: a terminal closed
                // meanwhile reads as an end of file that crossterm reads
                // again and again without returning, and the process,
                // continued by the shell's hangup, would spin for good.
                input = keys.next(), if !terminal.is_given_back() => match input {
                    Some(Ok(Event::Key(key))) => {
                        if let Some(effect) = self.app.handle_key(key) {
                            self.effects.start(effect, &mut self.app, terminal, &mut self.replay);
                        }
                        dirty = true;
                    }
                    Some(Ok(Event::Paste(text))) => {
                        self.app.handle_paste(&text);
                        dirty = true;
                    }
                    Some(Ok(Event::Resize(width, height))) => {
                        self.app.resize(Rect::new(0, 0, width, height));
                        dirty = true;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => return unless_gone(err, "cannot read the terminal"),
                    None => return Ok(()),
                },
                _ = tick.tick() => {
                    let second = self.started.elapsed().as_secs();
                    let reread = self.app.on_tick(second);
                    // Live: the rate moves every second; events are drawn at most once a tick.
                    dirty |= reread || events_pending || self.app.mode == Mode::Live;
                    events_pending = false;
                }
                // Stopped from outside (SIGSTOP) and continued: the shell
                // took the terminal meanwhile.
                Some(()) = next_signal(&mut continued) => {
                    if let Err(err) = terminal.resume() {
                        return unless_gone(err, "cannot take the terminal back");
                    }
                    dirty = true;
                }
                Some(()) = next_signal(&mut stop_asked) => {
                    self.effects.start(Effect::Suspend, &mut self.app, terminal, &mut self.replay);
                    dirty = true;
                }
                Some(found) = self.found.recv() => {
                    dirty |= self.app.on_found(found);
                }
                Some(text) = self.progress.recv() => {
                    self.app.on_replay_progress(text);
                    dirty = true;
                }
                ReplayDone { delivery_id, result } = next_replay_done(&mut self.replay) => {
                    self.replay = None;
                    self.app.on_replay_done(delivery_id, result);
                    dirty = true;
                }
            }
        }
    }

    /// Stops a replay still running when the TUI closes, as Esc does, and
    /// waits for it to save what was answered: the handler acted on those
    /// attempts, so quitting must not lose them. Returns the line that
    /// says how the run ended, for the terminal once it is given back.
    async fn stop_replay(&mut self, terminal: &mut TerminalGuard) -> Option<String> {
        let task = self.replay.take()?;
        task.stop.cancel();
        self.app
            .set_status("stopping the replay and saving what was answered…", false);
        // The screen may be gone (a closed terminal), or the shell's (a
        // stopped job); the run is saved regardless.
        if !terminal.is_given_back() {
            let _ = terminal.draw_widget(&self.app);
        }
        let line = match tokio::time::timeout(REPLAY_SAVE_WAIT, task.done).await {
            Ok(ReplayDone { delivery_id, result }) => app::replay_line(delivery_id, &result),
            Err(_) => format!(
                "the replay was not saved within {}; its attempts are not in the history",
                portpreview_shared::duration::format_duration(REPLAY_SAVE_WAIT)
            ),
        };
        Some(line)
    }

    /// Takes `first` and whatever else is already queued, up to a batch.
    fn take_events(&mut self, first: TunnelEvent) {
        let second = self.started.elapsed().as_secs();
        self.app.on_tunnel_event(first, second);
        let Some(events) = &mut self.events else { return };
        for _ in 0..EVENT_BATCH {
            match events.try_recv() {
                Some(event) => self.app.on_tunnel_event(event, second),
                None => break,
            }
        }
    }
}

#[cfg(unix)]
const SIGCONT: i32 = rustix::process::Signal::CONT.as_raw();
#[cfg(unix)]
const SIGTSTP: i32 = rustix::process::Signal::TSTP.as_raw();
#[cfg(not(unix))]
const SIGCONT: i32 = 0;
#[cfg(not(unix))]
const SIGTSTP: i32 = 0;

/// Deliveries of signal `number`, when it can be listened for.
#[cfg(unix)]
fn signals(number: i32) -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::from_raw(number)).ok()
}

#[cfg(not(unix))]
fn signals(_: i32) -> Option<()> {
    None
}

/// The next delivery of a signal; never without a listener.
#[cfg(unix)]
async fn next_signal(signals: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signals {
        Some(signals) => signals.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn next_signal(_: &mut Option<()>) -> Option<()> {
    std::future::pending().await
}

/// The next tunnel event; never resolves when there is no tunnel.
async fn next_event(events: &mut Option<EventFeed>) -> Option<TunnelEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// The running replay's end; never resolves when none runs.
async fn next_replay_done(replay: &mut Option<ReplayTask>) -> ReplayDone {
    match replay {
        Some(task) => (&mut task.done).await,
        None => std::future::pending().await,
    }
}
