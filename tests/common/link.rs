//! A TCP link that holds back everything it carries, both ways, for a
//! fixed time: a relay on the other side of the world.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

/// A link to a relay that lasts as long as it does.
pub struct FarLink {
    /// Where to connect instead of the relay.
    pub addr: SocketAddr,
    _carrying: AbortOnDropHandle<()>,
}

/// A link to `to` that carries each byte `delay` after it came.
pub async fn far_link(to: SocketAddr, delay: Duration) -> FarLink {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let carrying = tokio::spawn(async move {
        let mut links = tokio::task::JoinSet::new();
        while let Ok((near, _)) = listener.accept().await {
            let Ok(far) = TcpStream::connect(to).await else {
                continue;
            };
            let (near_read, near_write) = near.into_split();
            let (far_read, far_write) = far.into_split();
            links.spawn(hold_back(near_read, far_write, delay));
            links.spawn(hold_back(far_read, near_write, delay));
        }
    });
    FarLink {
        addr,
        _carrying: AbortOnDropHandle::new(carrying),
    }
}

/// Copies `from` to `to`, each piece `delay` after it was read; closes
/// `to` once everything `from` sent is written.
async fn hold_back(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (pieces, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(read @ 1..) = from.read(&mut buf).await {
            if pieces.send((Instant::now() + delay, buf[..read].to_vec())).is_err() {
                return;
            }
        }
    };
    let writing = async move {
        while let Some((at, piece)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&piece).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}
