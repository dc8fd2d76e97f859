//! Opens N idle tunnels to a relay and holds them, to measure the relay's
//! memory per tunnel. Usage: `idle_tunnels ws://127.0.0.1:PORT N`; prints
//! `ready N` once all are open, then holds them until stdin closes.

use futures_util::StreamExt;
use portpreview::tunnel::connect::{self, ConnectOptions};
use tokio::io::AsyncReadExt;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let relay = args.next().unwrap_or_else(|| "ws://127.0.0.1:8080".into());
    let count: usize = args.next().unwrap_or_else(|| "1000".into()).parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let options = ConnectOptions {
            url: connect::relay_url(&relay)?,
            token: None,
            name: None,
            resume: None,
            tls: None,
        };
        let mut holders = tokio::task::JoinSet::new();
        for _ in 0..count {
            let (mut socket, _) = connect::connect(&options).await?;
            // Reading answers the relay's pings, so the tunnel stays alive.
            holders.spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
        }
        println!("ready {count}");
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
        holders.shutdown().await;
        Ok(())
    })
}
