//! `portpreview http <PORT|URL>`: forward a public URL to a local port.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use portpreview_server::config::DEFAULT_REQUEST_TIMEOUT;
use portpreview_server::RelayConfig;
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::CONNECT_PATH;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Secret};
use crate::events::{report, EventFeed, Events, TunnelEvent};
use crate::origin::Origin;
use crate::output::{self, LogFormat};
use crate::store::{Recorder, RecorderHandle, WriterNews};
use crate::target::Target;
use crate::time::MAX_WAIT;
use crate::tunnel::{self, connect, ConnectError, ConnectOptions, HostHeader, TunnelConfig};

/// Deliveries the display may fall behind by before events are dropped.
const EVENT_QUEUE: usize = 4096;

/// How much longer than the handler may take the in-process relay waits
/// for an answer: the client's own 504, which says the handler was too
/// slow, reaches the caller and the history first.
const LOCAL_RELAY_MARGIN: Duration = Duration::from_secs(2);

/// Arguments of `portpreview http`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Local port or URL to forward to (3000, localhost:3000, `[::1]:3000`, http://127.0.0.1:3000, https://localhost:8443, or with a base path put before every forwarded path: http://localhost:4000/api). Without a scheme: plain HTTP. An https:// handler on a loopback address is not checked against its certificate (local ones are self-signed); one elsewhere must present a certificate the web's roots vouch for.
    #[arg(value_name = "PORT|URL")]
    pub target: String,
    /// Relay to use (ws://, wss://, http:// or https://); else the config file's server; none: run one in-process.
    #[arg(long, value_name = "URL", env = "PORTPREVIEW_SERVER", hide_env_values = true)]
    pub server: Option<String>,
    /// Tunnel name to ask for: 1 to 63 lowercase letters, digits and '-', not starting or ending with '-', without '--' third and fourth.
    // Hyphens allowed so that `--name -ab` gets the name's own reason,
    // not clap's guess that `-a` is a flag.
    #[arg(long, value_name = "NAME", value_parser = parse_name, allow_hyphen_values = true)]
    pub name: Option<String>,
    /// Token for the relay (a flag shows in the process list: PORTPREVIEW_TOKEN or the config file does not); else the config file's token, sent only to the config file's server.
    #[arg(long, env = "PORTPREVIEW_TOKEN", hide_env_values = true, value_parser = crate::cli::parse_secret_text, allow_hyphen_values = true)]
    pub token: Option<crate::config::Secret>,
    /// Extra CA certificate (PEM) to trust for a wss:// relay; else the config file's ca_cert.
    #[arg(long, value_name = "FILE", value_parser = parse_ca_cert)]
    pub ca_cert: Option<PathBuf>,
    /// Host header sent to the local handler.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = HostHeader::Rewrite)]
    pub host_header: HostHeader,
    /// Print one line per delivery instead of the TUI.
    #[arg(long)]
    pub no_tui: bool,
    /// How --no-tui lines are written: text, or json (one object a line, for scripts; turns the TUI off).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Forward without recording: nothing reaches the history.
    #[arg(long)]
    pub no_record: bool,
    /// Body fields that identify an event without an ID, comma-separated (names or JSON pointers: type,/data/object/id).
    #[arg(long, value_delimiter = ',', value_name = "FIELDS", value_parser = parse_key_field)]
    pub key_fields: Vec<String>,
    /// How long the local handler may take before the caller gets 504.
    #[arg(long, value_parser = crate::time::parse_wait, default_value = "28s", value_name = "DURATION", allow_hyphen_values = true)]
    pub local_timeout: Duration,
    /// Address of the in-process relay when no --server is given.
    #[arg(long, default_value = DEFAULT_LOCAL_LISTEN, value_name = "ADDR", value_parser = parse_listen)]
    pub local_listen: String,
}

impl Args {
    /// True when deliveries will be shown in the TUI.
    pub fn uses_tui(&self) -> bool {
        !self.no_tui && self.log_format == LogFormat::Text && crate::tui::terminal::can_draw()
    }
}

/// A `--ca-cert` file, refused while flags are read when there is none,
/// as the config file's `ca_cert` is: its certificates are read once a
/// `wss://` relay is dialled.
fn parse_ca_cert(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match path.is_file() {
        true => Ok(path),
        false if path.is_dir() => Err("a folder: name the PEM file in it".into()),
        false => Err("no file there".into()),
    }
}

/// A `--local-listen` address, checked as the relay's `--listen` is, and
/// kept as written: a name (`localhost:4000`) is resolved again to bind.
fn parse_listen(text: &str) -> Result<String, String> {
    portpreview_server::config::listen_address(text).map(|_| text.to_owned())
}

/// The fewest open files a tunnel runs with: the history's files, the
/// relay connection, and in local mode the relay's own listener and the
/// tunnel's connection to it, with room for callers and the handler.
const TUNNEL_FEWEST_FILES: u64 = 32;

/// The fewest open files a tunnel runs with whose relay is in-process: its
/// relay takes half of what is left past [`TUNNEL_FEWEST_FILES`] for
/// connections, the tunnel's own among them, and at 32 that left the
/// tunnel's alone, every caller answered 503. At 40 there are four.
const LOCAL_RELAY_FEWEST_FILES: u64 = 40;

/// Where the in-process relay listens unless `--local-listen` says otherwise.
const DEFAULT_LOCAL_LISTEN: &str = "127.0.0.1:0";

/// Runs the tunnel until ctrl-c, SIGTERM or (in the TUI) `q`.
/// `from_env` names the variables that gave flags their values.
///
/// `new_folder` is the missing folder a history the user named is made in,
/// said once it is made.
pub async fn run(
    args: Args,
    db: &Path,
    new_folder: Option<PathBuf>,
    config: Config,
    from_env: &[&str],
) -> anyhow::Result<ExitCode> {
    portpreview_shared::open_files::enough_for(TUNNEL_FEWEST_FILES, "a tunnel").map_err(anyhow::Error::msg)?;
    let server_origin = Origin::of(
        "--server",
        "PORTPREVIEW_SERVER",
        from_env,
        args.server.is_some(),
        config.server.is_some(),
    );
    let token_origin = Origin::of(
        "--token",
        "PORTPREVIEW_TOKEN",
        from_env,
        args.token.is_some(),
        config.token.is_some(),
    );
    let setup = set_up(&args, config, &server_origin).await?;

    // The history is opened once the setup above can no longer fail, so an
    // error there never leaves a writer to stop on the way out.
    let (events_tx, events_rx) = crate::events::queue(EVENT_QUEUE);
    for text in setup.notices {
        // The queue is new and empty: these fit.
        report(&events_tx, TunnelEvent::Notice { text });
    }
    let (recorder, recorder_handle) = (!args.no_record)
        .then(|| start_recorder(db, &args.key_fields, &events_tx))
        .transpose()?
        .unzip();
    if let Some(mode) = recorder.as_ref().and_then(|_| crate::private_file::open_to_others(db)) {
        let path = db.display();
        let text = format!(
            "the history {path} may be read by other users (mode {mode:o}), and it keeps every payload and \
             signature: chmod 600 {path}"
        );
        report(&events_tx, TunnelEvent::Notice { text });
    }
    if let Some(dir) = new_folder.filter(|dir| dir.is_dir()) {
        crate::to_stderr(format_args!(
            "note: made {} for the history, as it did not exist\n",
            portpreview_shared::sanitize::escape_str(&dir.display().to_string())
        ));
    }
    let running = Running {
        tunnel_config: setup.tunnel_config,
        local_relay: setup.local_relay,
        recorder,
        recorder_handle,
        events: (events_tx, events_rx),
    };
    running
        .serve(&args, db, |err| explain_refusal(err, &server_origin, &token_origin))
        .await
}

/// What the flags and the config file make of a tunnel, before anything runs.
struct Setup {
    tunnel_config: TunnelConfig,
    /// The in-process relay's listener, when no relay is named.
    local_relay: Option<TcpListener>,
    /// Flags given that this run does not use, said once it starts.
    notices: Vec<String>,
}

async fn set_up(args: &Args, config: Config, server_origin: &Origin) -> anyhow::Result<Setup> {
    // Checked here, not by clap: its refusal would repeat a password
    // given in the URL, which this one hides.
    let target =
        Target::parse_for_tunnel(&args.target).map_err(|err| anyhow::anyhow!("{err}; see portpreview http --help"))?;
    let mut notices: Vec<String> = config.open_to_others.iter().cloned().collect();
    if args.no_record && !args.key_fields.is_empty() {
        notices.push(
            "--key-fields is not used: they make event keys for the history, and --no-record keeps none".to_owned(),
        );
    }
    let (url, local_relay) = match args.server.clone().or_else(|| config.server.clone()) {
        Some(server) => {
            notices.extend(unused_with_a_relay(args, server_origin));
            let url = connect::relay_url(&server).map_err(|err| match server_origin {
                // Typed just now: a bad flag, told as clap tells its own.
                Origin::Flag(_) => anyhow::anyhow!("{err}; see portpreview http --help"),
                _ => server_origin.explain(err.into(), RELAY_ADDRESS),
            })?;
            (url, None)
        }
        None => {
            if args.token.is_some() {
                notices.push(
                    "--token (or PORTPREVIEW_TOKEN) is not used: the in-process relay asks for none, and no --server \
                     names a relay that would"
                        .to_owned(),
                );
            }
            portpreview_shared::open_files::enough_for(LOCAL_RELAY_FEWEST_FILES, "a tunnel with its relay in-process")
                .map_err(anyhow::Error::msg)?;
            let (url, listener) = bind_local_relay(&args.local_listen).await?;
            (url, Some(listener))
        }
    };
    let tls = match url.starts_with("wss://") {
        true => Some(connect::tls_config(
            args.ca_cert.as_deref().or(config.ca_cert.as_deref()),
        )?),
        false => {
            if args.ca_cert.is_some() {
                notices.push(
                    "--ca-cert is not used: it is trusted for a wss:// relay, and this one is reached without TLS"
                        .to_owned(),
                );
            }
            None
        }
    };
    let token = args
        .token
        .clone()
        .or_else(|| config_token(&config, args.server.as_deref(), &mut notices));
    let tunnel_config = TunnelConfig {
        connect: ConnectOptions {
            url,
            token,
            name: args.name.clone(),
            resume: None,
            tls,
        },
        target,
        host_header: args.host_header,
        local_timeout: args.local_timeout,
        relay_in_process: local_relay.is_some(),
    };
    Ok(Setup {
        tunnel_config,
        local_relay,
        notices,
    })
}

/// What flags for the in-process relay say when a relay is named, by
/// `origin`: a flag, a variable or the config file.
fn unused_with_a_relay(args: &Args, origin: &Origin) -> Vec<String> {
    let mut notices = Vec::new();
    if args.local_timeout > DEFAULT_REQUEST_TIMEOUT {
        notices.push(format!(
            "--local-timeout {} is longer than a PortPreview relay waits for an answer by default ({}, its \
             --request-timeout): unless it was started with a longer one, callers get the relay's 504 first",
            format_duration(args.local_timeout),
            format_duration(DEFAULT_REQUEST_TIMEOUT),
        ));
    }
    if args.local_listen != DEFAULT_LOCAL_LISTEN {
        notices.push(format!(
            "--local-listen is not used: it places the in-process relay, and {origin} names a relay"
        ));
    }
    notices
}

/// Listens for the in-process relay on `listen`; returns the URL the
/// tunnel connects to.
async fn bind_local_relay(listen: &str) -> anyhow::Result<(String, TcpListener)> {
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on \"{listen}\" for the local relay"))?;
    let mut address = listener.local_addr()?;
    // Listening on every address (0.0.0.0) is no address to call: the
    // tunnel, and the URL it prints, go through loopback.
    if address.ip().is_unspecified() {
        let loopback = match address {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        };
        address.set_ip(loopback);
    }
    Ok((format!("ws://{address}{CONNECT_PATH}"), listener))
}

/// Opens the history at `db` for recording, its writer reporting to `events`.
fn start_recorder(db: &Path, key_fields: &[String], events: &Events) -> anyhow::Result<(Recorder, RecorderHandle)> {
    // Weak: once the tunnel and its stop are done with the display, the
    // display ends, though a writer left behind by a stop asked for now
    // still runs.
    let events = events.downgrade();
    let report = move |news: WriterNews| {
        if let Some(events) = events.upgrade() {
            report(&events, news.into());
        }
    };
    Recorder::start(db, key_fields.to_vec(), report).map_err(|err| {
        // Locked or out of room now, it may not be in a minute; the tunnel
        // itself needs none of it.
        let passing = err.is_busy_or_full();
        let err = err.for_command(db);
        match passing {
            true => anyhow::anyhow!("{err}: try again, or forward without recording with --no-record"),
            false => err,
        }
    })
}

/// A tunnel ready to run, with what runs beside it.
struct Running {
    tunnel_config: TunnelConfig,
    local_relay: Option<TcpListener>,
    recorder: Option<Recorder>,
    recorder_handle: Option<RecorderHandle>,
    events: (Events, EventFeed),
}

impl Running {
    /// Runs the in-process relay (if any), the tunnel, the display and the
    /// signal watch together, and stops them in the order each needs: the
    /// history's last rows reach the display, the tunnel's goodbye reaches
    /// the relay. A tunnel that could not connect is told by `refused`.
    async fn serve(
        self,
        args: &Args,
        db: &Path,
        refused: impl FnOnce(ConnectError) -> anyhow::Error,
    ) -> anyhow::Result<ExitCode> {
        let Running {
            tunnel_config,
            local_relay,
            recorder,
            recorder_handle,
            events: (events_tx, events_rx),
        } = self;
        let use_tui = args.uses_tui();
        let stop = tunnel::Stop::default();
        let shutdown = stop.drain.clone();
        let relay_shutdown = CancellationToken::new();
        let tunnel_ended = CancellationToken::new();

        let relay = async {
            match local_relay {
                Some(listener) => {
                    let loopback = listener.local_addr().is_ok_and(|addr| addr.ip().is_loopback());
                    let open_files = portpreview_shared::open_files::limit();
                    let config = local_relay_config(args.local_timeout, loopback, open_files);
                    let result = portpreview_server::run(listener, config, relay_shutdown.clone()).await;
                    // Without its relay the tunnel could only retry forever.
                    if result.is_err() {
                        shutdown.cancel();
                    }
                    result.context("the local relay failed")
                }
                None => Ok(()),
            }
        };
        let tunnel = async {
            let notices = events_tx.clone();
            let result = tunnel::run(tunnel_config, recorder, events_tx, stop.clone()).await;
            shutdown.cancel();
            if let Some(handle) = recorder_handle {
                // The last deliveries are stored and reported, and the
                // writer's hold on the display's channel ends, before the
                // display stops.
                if store_the_last(handle, &notices, &stop.now).await == Stored::CutShort {
                    stop.now.cancel();
                }
            }
            drop(notices);
            tunnel_ended.cancel();
            // The local relay outlives the tunnel so the tunnel's goodbye is heard.
            relay_shutdown.cancel();
            result
        };
        let display = async {
            if !use_tui {
                output::print_events(events_rx, args.log_format, tunnel_ended.clone()).await;
                return anyhow::Ok(());
            }
            let result = crate::tui::run_live(db, events_rx, shutdown.clone()).await;
            // Quitting the TUI ends the tunnel. What it says while it stops
            // (a wait for requests in flight, how they ended) goes to the
            // terminal the TUI gave back.
            shutdown.cancel();
            let rest = result?;
            if let Some(rest) = rest {
                output::print_events(rest, args.log_format, tunnel_ended.clone()).await;
            }
            Ok(())
        };
        let signals = async {
            let signalled = tokio::select! {
                () = portpreview_server::signal::shutdown_signal() => {
                    shutdown.cancel();
                    true
                }
                () = shutdown.cancelled() => false,
            };
            // Asked again while requests in flight finish: stop without
            // them. Right after a signal, another is the same one passed
            // on twice. After the TUI ended (a quit, or its terminal
            // closed), ctrl-c is the user's; a hangup is only that
            // terminal closing, which ended the TUI or came after it.
            let again = async {
                match signalled {
                    true => portpreview_server::signal::second_shutdown_signal().await,
                    false => portpreview_server::signal::interrupt_or_terminate().await,
                }
            };
            tokio::select! {
                () = again => stop.now.cancel(),
                () = tunnel_ended.cancelled() => {}
            }
        };
        let (relay, tunnel, display, ()) = tokio::join!(relay, tunnel, display, signals);
        // The tunnel's refusal comes first: it is what the user must act on.
        tunnel.map_err(refused)?;
        relay?;
        display?;
        // A stop is a normal end; a second ctrl-c dropped requests in
        // flight, and a script waiting on the tunnel should know it was
        // cut short.
        if stop.now.is_cancelled() {
            return Ok(ExitCode::from(130));
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// How long the history's writer may take to store the last deliveries
/// before the user hears why the tunnel has not ended.
const SLOW_LAST_STORE: Duration = Duration::from_secs(1);

/// How [`store_the_last`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Stored {
    /// Everything the writer had is in the history or its inbox.
    Whole,
    /// The user stopped the wait: what the writer held in memory is lost.
    CutShort,
}

/// Stops the history's writer once it has stored the last deliveries.
/// Should that take a while (another process holds the history's lock,
/// which the writer waits up to 5 s for), says so. A stop asked for `now`
/// meanwhile, or a ctrl-c or SIGTERM once it said so, ends the wait at
/// once, leaving the deliveries in the history's inbox for the next
/// command to move in, without the answers the writer held. A stop asked
/// for now before the wait began still gives the writer its chance: most
/// often it takes milliseconds.
async fn store_the_last(handle: RecorderHandle, events: &Events, now: &CancellationToken) -> Stored {
    let (stopped, done) = tokio::sync::oneshot::channel();
    // A thread of its own, not the runtime's blocking pool, which the
    // runtime waits for as it ends: a stop asked for now must not.
    let spawned = std::thread::Builder::new().name("history-stop".into()).spawn(move || {
        handle.shutdown();
        let _ = stopped.send(());
    });
    if let Err(err) = spawned {
        // The handle went with the closure: the writer stops on its own.
        tracing::warn!(%err, "cannot wait for the history writer to stop");
        return Stored::Whole;
    }
    let asked_before = now.is_cancelled();
    tokio::pin!(done);
    tokio::select! {
        _ = &mut done => return Stored::Whole,
        () = now.cancelled(), if !asked_before => return Stored::CutShort,
        () = tokio::time::sleep(SLOW_LAST_STORE) => {}
    }
    let text = "the history has not taken the last deliveries yet (another process may hold its lock); waiting for \
                it, or ctrl-c to stop now and leave them in its inbox, where the next command finds them";
    report(events, TunnelEvent::Notice { text: text.into() });
    tokio::select! {
        _ = done => Stored::Whole,
        () = now.cancelled(), if !asked_before => Stored::CutShort,
        () = portpreview_server::signal::interrupt_or_terminate() => Stored::CutShort,
    }
}

/// Names in a refusal what the user may not know they gave: the variable
/// or the config file the relay address or the token came from.
fn explain_refusal(err: ConnectError, server: &Origin, token: &Origin) -> anyhow::Error {
    match err {
        ConnectError::Unauthorized => anyhow::anyhow!("the relay refused the token from {token} (401)"),
        ConnectError::UnsendableToken => anyhow::anyhow!(
            "cannot open the tunnel: the token from {token} holds characters a header cannot carry (spaces, control \
             characters or letters past ASCII)"
        ),
        // The file holds a token, withheld from a relay it does not name:
        // adding one, as the general advice says, would change nothing.
        ConnectError::TokenRequired if matches!(token, Origin::ConfigFile(_)) => anyhow::anyhow!(
            "this relay requires a token, and {token} keeps its token for its own server: pass --token or set \
             PORTPREVIEW_TOKEN, or write this relay's address, as given here, as the file's server"
        ),
        ConnectError::TokenRequired
        | ConnectError::NameTaken { .. }
        | ConnectError::Tls(_)
        | ConnectError::Internal(_) => err.into(),
        _ => server.explain(err.into(), RELAY_ADDRESS),
    }
}

/// What [`Origin::explain`] says came from elsewhere.
const RELAY_ADDRESS: &str = "the relay address";

/// The config file's token, for the config file's relay only: a token
/// kept for a team's relay is not handed to another one named by
/// `--server` or `PORTPREVIEW_SERVER`.
fn config_token(config: &Config, server: Option<&str>, notices: &mut Vec<String>) -> Option<Secret> {
    let token = config.token.clone()?;
    let (Some(chosen), Some(own)) = (server, config.server.as_deref()) else {
        return Some(token);
    };
    if same_relay(chosen, own) {
        return Some(token);
    }
    notices.push(format!(
        "the config file's token is not sent: it is for {own}, and this tunnel uses {chosen} \
         (--token or PORTPREVIEW_TOKEN sends one)"
    ));
    None
}

/// Whether two relay addresses reach one relay: `https://Relay.example`
/// and `wss://relay.example:443/` do.
fn same_relay(a: &str, b: &str) -> bool {
    let origin = |input: &str| {
        let uri: http::Uri = connect::relay_url(input).ok()?.parse().ok()?;
        let secure = uri.scheme_str() == Some("wss");
        let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
        Some((secure, uri.host()?.to_ascii_lowercase(), port, uri.path().to_owned()))
    };
    origin(a).is_some_and(|a| Some(a) == origin(b))
}

/// The in-process relay's settings: it waits for answers a little longer
/// than the handler may take, so a `--local-timeout` past the usual 30 s
/// is honoured in local mode. On loopback its callers are on this
/// machine, no crowd to guard against: a connection may sit idle (or
/// half-sent) for the hour PortPreview may be stopped (ctrl-z, a
/// debugger), where a public relay closes it after 10 s, and so resets a
/// request a kept-alive caller sent during the pause. A `--local-listen`
/// open to the network keeps the public relay's limit. Its callers'
/// connections share `open_files` with the connections to the handler,
/// one for each request they send, and with the process's own: they get
/// half of what the tunnel's own leave, so that past it a caller is told
/// 503, not every request 502 for want of a socket.
fn local_relay_config(local_timeout: Duration, loopback: bool, open_files: Option<u64>) -> RelayConfig {
    let defaults = RelayConfig::default();
    let half = open_files.map_or(usize::MAX, |limit| {
        usize::try_from(limit.saturating_sub(TUNNEL_FEWEST_FILES) / 2).unwrap_or(usize::MAX)
    });
    RelayConfig {
        max_connections: defaults.max_connections.min(half).max(1),
        request_timeout: (local_timeout + LOCAL_RELAY_MARGIN).clamp(DEFAULT_REQUEST_TIMEOUT, MAX_WAIT),
        header_read_timeout: if loopback {
            LOCAL_IDLE
        } else {
            defaults.header_read_timeout
        },
        ..defaults
    }
}

/// How long the in-process relay lets a caller's connection sit idle.
const LOCAL_IDLE: Duration = Duration::from_secs(60 * 60);

/// A `--name` the relay would refuse is told here, before any connection,
/// in the relay's own words.
fn parse_name(name: &str) -> Result<String, String> {
    match portpreview_shared::name::invalid_reason(name) {
        Some(why) => Err(why),
        None => Ok(name.to_string()),
    }
}

/// One `--key-fields` entry: a member name, or a JSON pointer (`/data/id`)
/// whose escapes are `~0` and `~1`. A typo would otherwise key every
/// event on a field no body has, without a word.
fn parse_key_field(text: &str) -> Result<String, String> {
    let field = text.trim();
    if field.is_empty() {
        return Err(
            "an empty field name: give names or JSON pointers separated by single commas, with none at either end"
                .into(),
        );
    }
    if field.starts_with('/') {
        let mut escapes = field.split('~').skip(1);
        if escapes.any(|after| !(after.starts_with('0') || after.starts_with('1'))) {
            return Err(format!(
                "{field:?} is not a JSON pointer: '~' is written ~0 and '/' inside a name ~1"
            ));
        }
    }
    Ok(field.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_is_the_same_however_its_address_is_written() {
        assert!(same_relay("https://Relay.example", "wss://relay.example:443/"));
        assert!(same_relay(
            "http://relay.example/_portpreview/connect",
            "ws://RELAY.example:80"
        ));
        assert!(!same_relay("https://relay.example", "http://relay.example"));
        assert!(!same_relay("wss://relay.example", "wss://relay.example.evil"));
        assert!(!same_relay("wss://relay.example:8443", "wss://relay.example"));
        assert!(!same_relay("not a url", "not a url"));
    }

    #[test]
    fn the_local_relay_outwaits_the_handlers_timeout() {
        let waits = |secs| local_relay_config(Duration::from_secs(secs), true, None).request_timeout;
        assert_eq!(waits(28), DEFAULT_REQUEST_TIMEOUT, "the default stays as every relay's");
        assert_eq!(waits(5), DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(waits(90), Duration::from_secs(92));
    }

    #[test]
    fn only_a_local_relay_on_loopback_lets_connections_idle_for_long() {
        let idle = |loopback| local_relay_config(Duration::from_secs(28), loopback, None).header_read_timeout;
        assert_eq!(idle(true), LOCAL_IDLE);
        assert_eq!(idle(false), RelayConfig::default().header_read_timeout);
    }

    #[test]
    fn a_local_relays_callers_get_half_the_open_files() {
        let cap = |limit| local_relay_config(Duration::from_secs(28), true, limit).max_connections;
        assert_eq!(cap(Some(1024)), (1024 - 32) / 2);
        assert_eq!(
            cap(Some(LOCAL_RELAY_FEWEST_FILES)),
            4,
            "the tunnel's own connection and three callers'"
        );
        assert_eq!(cap(None), RelayConfig::default().max_connections, "unlimited");
        assert_eq!(cap(Some(1 << 20)), RelayConfig::default().max_connections);
    }

    #[test]
    fn key_fields_are_names_or_json_pointers() {
        assert_eq!(parse_key_field(" type "), Ok("type".into()));
        assert_eq!(parse_key_field("/data/a~1b~0c"), Ok("/data/a~1b~0c".into()));
        assert!(parse_key_field("").unwrap_err().contains("an empty field name"));
        assert!(parse_key_field("/bad~2").unwrap_err().contains("is not a JSON pointer"));
        assert!(parse_key_field("/trailing~").is_err());
    }
}
