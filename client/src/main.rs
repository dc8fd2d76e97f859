use std::io::Write;
use std::process::ExitCode;

use portpreview::cli::{self, Cli};

// Per-request work allocates many small, short-lived buffers; mimalloc's
// thread-local free lists serve them far cheaper than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // SAFETY: mi_collect only walks and trims mimalloc's own structures,
    // which it allows from any thread at any time.
    portpreview::memory::set_release(|| unsafe { libmimalloc_sys::mi_collect(true) });
    let cli = Cli::parse_args();
    let json = cli.reports_in_json();
    portpreview::logging::init(&cli);
    if let Err(too_few) = portpreview_shared::open_files::raise_to_enough() {
        portpreview::to_stderr(format_args!("error: {too_few}\n"));
        return ExitCode::from(2);
    }
    // One thread drives the tunnel: on small machines cross-thread wake-ups
    // cost more than they give. The store writer has its own thread.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            portpreview::to_stderr(format_args!("error: cannot start the async runtime: {err}\n"));
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        // The reader of stdout went away (`| head -1`): it has what it wanted.
        Err(err) if portpreview::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            portpreview::to_stderr(format_args!("error: {}\n", portpreview::error_line(&err)));
            if json {
                // Where a supervisor reads the tunnel's news; stderr keeps
                // the line for the person at the terminal.
                let line = portpreview::output::json_error_line(&portpreview::error_text(&err));
                let _ = writeln!(std::io::stdout().lock(), "{line}");
            }
            ExitCode::from(2)
        }
    }
}
