//! A minimal webhook handler for the benchmarks: reads the whole body and
//! answers `200 ok`. Usage: `bench_handler 127.0.0.1:0` (prints its address).

use std::convert::Infallible;
use std::process::ExitCode;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const USAGE: &str = "usage: bench_handler [ADDR]  (default 127.0.0.1:0; prints the address it listens on, \
                     then answers every request 200 ok)";

async fn handle(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let _ = request.into_body().collect().await;
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen = match args.as_slice() {
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [] => "127.0.0.1:0",
        [addr] if !addr.starts_with('-') => addr.as_str(),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match serve(listen) {
        Ok(()) => ExitCode::SUCCESS,
        // Bad input is told apart from a port in use: either way one line.
        Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => {
            eprintln!("error: {listen:?} is not an address like 127.0.0.1:0 (bench_handler --help)");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("error: cannot listen on {listen}: {err}");
            ExitCode::FAILURE
        }
    }
}

fn serve(listen: &str) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(listen).await?;
        println!("{}", listener.local_addr()?);
        loop {
            let (socket, _) = listener.accept().await?;
            socket.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service_fn(handle))
                    .await;
            });
        }
    })
}
