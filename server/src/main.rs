//! `portpreview-server`: the relay binary. Parses flags, sets up logging and
//! runs the library's relay until ctrl-c or SIGTERM.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use portpreview_server::tokens::GUESSABLE_BELOW;
use portpreview_server::{load_tls, RelayConfig, Tokens};
use portpreview_shared::usage::one_line;

/// The PortPreview relay: public URLs streamed over WebSocket to portpreview clients.
#[derive(Debug, Parser)]
#[command(name = "portpreview-server", version)]
struct Args {
    /// Address to listen on: 0.0.0.0:8080, [::]:8080, 127.0.0.1:8080. A host
    /// name listens on the first address it resolves to only (localhost:
    /// usually 127.0.0.1, not ::1).
    #[arg(long, value_name = "ADDR", value_parser = portpreview_server::config::listen_address)]
    listen: SocketAddr,
    /// Serve tunnels as <name>.<DOMAIN> too (needs wildcard DNS).
    #[arg(long, value_name = "DOMAIN", value_parser = portpreview_server::config::domain_name)]
    domain: Option<String>,
    /// TOML file of accepted client tokens; without it the relay is open.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// PEM certificate chain; serves https/wss with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Callers reach this relay over HTTPS at a proxy in front of it that
    /// speaks plain HTTP to it: the tunnels' URLs and X-Forwarded-Proto
    /// say https.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    behind_https_proxy: bool,
    /// Open connections (callers and tunnels) allowed from one IP address.
    #[arg(long, value_name = "N", default_value_t = portpreview_server::config::DEFAULT_MAX_CONNECTIONS_PER_IP,
          allow_negative_numbers = true, value_parser = at_least_one)]
    max_connections_per_ip: usize,
    /// How long a caller waits for the tunnel's answer before the relay
    /// answers 504 (a webhook sender gives up after 10 to 30 s).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = portpreview_server::config::wait)]
    request_timeout: Duration,
    /// Largest request body relayed; a larger one gets 413 (25MiB is the
    /// largest GitHub sends).
    #[arg(long, value_name = "SIZE", default_value = "25MiB", value_parser = portpreview_server::config::body_limit)]
    max_body: u64,
    /// How long a name is held for its client after it drops, so that it
    /// gets its URL back on reconnecting.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = portpreview_server::config::wait)]
    grace: Duration,
}

// Under load glibc's malloc took about a tenth of the relay's time, mostly
// for hyper's per-request buffers; mimalloc serves them far cheaper.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        // One line, with controls in the refused value escaped. clap's
        // plain rendering would strip escape sequences from the value it
        // quotes, and its styles are written into an error as it is made:
        // parsed again in plain styles, every escape in it is the user's.
        Err(err) if err.use_stderr() => {
            let code = ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
            let plain = Args::command().styles(clap::builder::Styles::plain());
            let rendered = match plain.try_get_matches() {
                Err(again) if again.kind() == err.kind() => again.render().ansi().to_string(),
                _ => err.render().to_string(),
            };
            // Nothing is left to tell when stderr itself cannot be written.
            let _ = write!(std::io::stderr(), "{}", one_line(&rendered, "portpreview-server"));
            return code;
        }
        // `--help` and `--version`, on stdout: one that cannot take them
        // fails in one line (a reader gone is no failure).
        Err(err) => {
            let printed = err.print().and_then(|()| std::io::stdout().flush());
            return match printed {
                Err(failed) if failed.kind() != std::io::ErrorKind::BrokenPipe => {
                    let _ = writeln!(std::io::stderr(), "error: cannot write to stdout: {failed}");
                    ExitCode::from(2)
                }
                _ => ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(0)),
            };
        }
    };
    init_logging();
    // Every tunnel and every caller holds a socket.
    if let Err(too_few) = portpreview_shared::open_files::raise_to_enough() {
        let _ = writeln!(std::io::stderr(), "error: {too_few}");
        return ExitCode::from(2);
    }
    // Anything that keeps the relay from starting is the caller's to fix
    // (a flag, a file, an address in use): exit 2, as for bad flags. Exit 1
    // is left for a relay that fails while it serves.
    let started = config(&args).and_then(|config| start(args.listen, config));
    let relay = match started {
        Ok(relay) => relay,
        Err(err) => {
            report(&err);
            return ExitCode::from(2);
        }
    };
    match relay.serve() {
        Ok(Stopped::Drained) => ExitCode::SUCCESS,
        // As for a shell job stopped by ctrl-c: the requests cut off are
        // not a clean exit.
        Ok(Stopped::Cut) => ExitCode::from(130),
        Err(err) => {
            report(&err);
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr at the level `PORTPREVIEW_LOG` asks for.
fn init_logging() {
    use tracing_subscriber::filter::{EnvFilter, FilterExt, Targets};
    use tracing_subscriber::prelude::*;
    let written = std::env::var_os("PORTPREVIEW_LOG").map(|text| text.to_string_lossy().into_owned());
    let shown = |text: &str| portpreview_shared::sanitize::escape_str(text).into_owned();
    // Told before the first line it would have changed, as the client tells it.
    let asked = match written.as_deref().map(|text| (text, EnvFilter::try_new(text))) {
        Some((text, Ok(asked))) => {
            if let Some(why) = portpreview_shared::log_filter::doubt(text) {
                let _ = writeln!(std::io::stderr(), "warning: PORTPREVIEW_LOG={}: {why}", shown(text));
            }
            asked
        }
        Some((text, Err(err))) => {
            let _ = writeln!(
                std::io::stderr(),
                "warning: PORTPREVIEW_LOG={} is not a log filter ({}): logging at info",
                shown(text),
                shown(&err.to_string())
            );
            EnvFilter::new("portpreview_server=info")
        }
        None => EnvFilter::new("portpreview_server=info"),
    };
    // tungstenite traces every frame whole: the requests the relay carries,
    // their Authorization, Cookie and signature headers included. A cap, not
    // a directive: `tungstenite=debug` would raise it from the default too.
    let no_frame_traces = Targets::new()
        .with_default(tracing::Level::TRACE)
        .with_target("tungstenite", tracing::Level::DEBUG)
        .with_target("tokio_tungstenite", tracing::Level::DEBUG);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr on a full disk or a
        // closed pipe) is dropped; tracing's own report of it would panic.
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry()
        .with(layer.with_filter(asked.and(no_frame_traces)))
        .init();
}

/// The reason the relay could not start or went down, on stderr if it can
/// still be written.
fn report(err: &anyhow::Error) {
    let _ = writeln!(std::io::stderr(), "error: {err:#}");
}

/// A connection limit: zero would accept connections only to drop every one.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("a limit of 0 would refuse every connection: give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a whole number of connections, 1 or more".into()),
    }
}

fn config(args: &Args) -> anyhow::Result<RelayConfig> {
    let mut config = RelayConfig {
        behind_https: args.behind_https_proxy,
        max_connections_per_ip: args.max_connections_per_ip,
        request_timeout: args.request_timeout,
        max_body: args.max_body,
        grace: args.grace,
        ..RelayConfig::default()
    };
    config.domain.clone_from(&args.domain);
    if let Some(path) = &args.tokens {
        let tokens = Tokens::load(path).with_context(|| format!("--tokens {}", path.display()))?;
        for label in tokens.guessable() {
            tracing::warn!(
                label,
                "a token shorter than {GUESSABLE_BELOW} characters can be guessed, and whoever guesses it connects \
                 as its owner: make one with `openssl rand -hex 16`"
            );
        }
        if let Some(mode) = portpreview_shared::file_mode::open_to_others(path) {
            tracing::warn!(
                path = %path.display(),
                "the tokens file may be {} by other users (mode {mode:04o}), and whoever reads a token connects \
                 as its owner: chmod 600 it",
                portpreview_shared::file_mode::reached_as(mode)
            );
        }
        config.tokens = Some(tokens);
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(load_tls(cert, key).context("--tls-cert/--tls-key")?);
    }
    Ok(config)
}

/// A relay bound to its address, ready to serve.
struct Relay {
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    config: RelayConfig,
}

/// Checks the settings and binds the address; prints nothing yet.
fn start(listen: SocketAddr, config: RelayConfig) -> anyhow::Result<Relay> {
    // One thread beat the multi-thread scheduler on 2 cores: no cross-thread wake-ups.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Refused before the listening line, so nobody is told it serves.
    config.validate().context("invalid relay settings")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(listen))
        .with_context(|| format!("cannot listen on {listen}"))?;
    Ok(Relay {
        runtime,
        listener,
        config,
    })
}

/// How long a stop cut short waits for the 502s and close frames to go out.
const CUT_SHORT_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How serving ended, once asked to stop.
enum Stopped {
    /// The requests in flight finished, or the drain timeout ran out.
    Drained,
    /// A second signal stopped the relay before the drain was done.
    Cut,
}

impl Relay {
    /// Says where it listens, then serves until ctrl-c, SIGTERM or SIGHUP
    /// and the requests in flight have drained, or a second signal.
    fn serve(self) -> anyhow::Result<Stopped> {
        let Relay {
            runtime,
            listener,
            config,
        } = self;
        let drain = config.drain_timeout;
        runtime.block_on(async move {
            let addr = listener.local_addr().context("listener address")?;
            // Who started the relay may have stopped reading its output
            // (`| head -1`, a full log disk): serving goes on regardless.
            let _ = writeln!(std::io::stdout(), "portpreview-server listening on {addr}");
            let stop = portpreview_server::Stop::default();
            let serving = portpreview_server::run_until(listener, config, stop.clone());
            tokio::pin!(serving);
            // A signal only asks the relay to stop; it then drains and returns.
            tokio::select! {
                result = &mut serving => return result.context("relay failed").map(|()| Stopped::Drained),
                () = portpreview_server::signal::shutdown_signal() => {}
            }
            // Under systemd or Docker the signal is a SIGTERM, not a ctrl-c.
            tracing::info!(
                "shutting down: requests in flight get up to {}s; a second signal (ctrl-c, SIGTERM) stops at once",
                drain.as_secs()
            );
            stop.drain.cancel();
            // A second signal is the operator's "now": the drain ends at once.
            let second = portpreview_server::signal::second_shutdown_signal();
            tokio::select! {
                result = &mut serving => {
                    tracing::info!("stopped");
                    result.context("relay failed").map(|()| Stopped::Drained)
                }
                () = second => {
                    tracing::warn!("stopping at once: requests still in flight get 502");
                    stop.now.cancel();
                    // Their answers and the clients' close frames take
                    // moments; a socket that takes none is not waited for.
                    let _ = tokio::time::timeout(CUT_SHORT_LIMIT, serving).await;
                    Ok(Stopped::Cut)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults the help shows are the relay's own.
    #[test]
    fn limits_left_out_are_the_relays_defaults() {
        let args = Args::parse_from(["portpreview-server", "--listen", "127.0.0.1:0"]);
        let given = config(&args).expect("config");
        let defaults = RelayConfig::default();
        assert_eq!(
            (given.request_timeout, given.max_body, given.grace),
            (defaults.request_timeout, defaults.max_body, defaults.grace)
        );
        let args = Args::parse_from([
            "portpreview-server",
            "--listen",
            "127.0.0.1:0",
            "--request-timeout",
            "45s",
            "--max-body",
            "50MiB",
            "--grace",
            "5m",
        ]);
        let given = config(&args).expect("config");
        assert_eq!(given.request_timeout, Duration::from_secs(45));
        assert_eq!(given.max_body, 50 * 1024 * 1024);
        assert_eq!(given.grace, Duration::from_secs(300));
    }

    /// `localhost:8080` listens on one of localhost's addresses: the help
    /// offers addresses that say what they bind, and says so of a name.
    #[test]
    fn the_listen_help_says_a_host_name_binds_one_address() {
        let command = Args::command();
        let listen = command
            .get_arguments()
            .find(|arg| arg.get_id() == "listen")
            .expect("--listen");
        let help = listen.get_long_help().or(listen.get_help()).expect("help").to_string();
        assert!(!help.contains("localhost:8080"), "{help}");
        assert!(help.contains("first address it resolves to only"), "{help}");
    }

    /// A relay behind an HTTPS proxy serves no TLS itself: half a TLS
    /// setting beside the flag is refused, not ignored.
    #[test]
    fn behind_an_https_proxy_takes_no_tls_files() {
        let parse =
            |extra: &[&str]| Args::try_parse_from([&["portpreview-server", "--listen", "127.0.0.1:0"], extra].concat());
        let args = parse(&["--behind-https-proxy"]).expect("the flag alone");
        assert!(config(&args).expect("config").behind_https);
        for tls in [
            &["--tls-key", "k.pem"][..],
            &["--tls-cert", "c.pem", "--tls-key", "k.pem"],
        ] {
            let refused = parse(&[&["--behind-https-proxy"][..], tls].concat()).expect_err("refused");
            assert_eq!(refused.kind(), clap::error::ErrorKind::ArgumentConflict, "{tls:?}");
        }
    }
}
