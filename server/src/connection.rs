//! Accepting connections: caps, TCP_NODELAY, TLS, and one hyper HTTP/1
//! connection each, shut down gracefully with the relay.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::error::RelayError;
use crate::headscan::{HeadLimits, HeadScan};
use crate::ingress::{self, ConnInfo, Relay};
use crate::limits::{ConnectionLimits, Slot};
use crate::linger::{Linger, LingerAsk};
use crate::refusal_log::{CapLog, ExhaustionLog};
use crate::write_stall::{StallNote, WriteStall};

/// Pause after an accept error that more connections will not cure at once
/// (out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Largest read buffer of a connection: room for a head at its limit, and
/// for two protocol chunks of body, without letting bodies pile up.
const READ_BUF: usize = 2 * portpreview_shared::message::CHUNK_SIZE;

/// How long a connection outlives the drain: a tunnel session gives up on
/// its requests in flight when the drain ends, and their callers must still
/// get the 502 that says so, not a connection closed under them.
const ANSWER_AFTER_DRAIN: Duration = Duration::from_secs(1);

/// Accepts connections until the relay shuts down, serving each as a task
/// of `connections`.
pub async fn accept_loop(
    listener: TcpListener,
    relay: Arc<Relay>,
    connections: &TaskTracker,
) -> Result<(), RelayError> {
    let open_files = portpreview_shared::open_files::limit();
    let total = within_open_files(relay.config.max_connections, open_files);
    if total < relay.config.max_connections {
        tracing::warn!(
            open_files = open_files.map(tracing::field::display),
            connections = total,
            "the limit on open files holds the relay to fewer connections than its cap of {}: raise it (ulimit -n) \
             for more",
            relay.config.max_connections
        );
    }
    let limits = ConnectionLimits::new(relay.config.max_connections_per_ip, total);
    let local = listener.local_addr().map_err(RelayError::Accept)?;
    let mut over_the_cap = CapLog::default();
    let mut out_of_files = ExhaustionLog::default();
    let refusals = Arc::new(Semaphore::new(REFUSALS_LINGERING));
    loop {
        let accepted = tokio::select! {
            biased;
            () = relay.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
            // A burst's count is told when its minute is up, not at the
            // next refusal, which may come an hour later or never.
            () = over_the_cap.untold_due() => {
                over_the_cap.tell_if_due();
                continue;
            }
        };
        let (tcp, peer) = match accepted {
            // On a dual-stack socket (`[::]:PORT`) an IPv4 caller arrives as
            // `::ffff:a.b.c.d`; handlers match provider ranges on a.b.c.d.
            Ok((tcp, peer)) => (tcp, SocketAddr::new(peer.ip().to_canonical(), peer.port())),
            Err(err) if is_transient(&err) => {
                if is_exhaustion(&err) {
                    out_of_files.tell(&err);
                } else {
                    tracing::debug!(%err, "accept failed; retrying");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            Err(err) => return Err(RelayError::Accept(err)),
        };
        let Some(slot) = limits.admit(peer.ip()) else {
            over_the_cap.refused(peer);
            // Said, not just closed, so a caller can tell a cap from a
            // crash: a fresh socket takes the bytes at once or not at all.
            // Under TLS they would be noise.
            if relay.config.tls.is_none() && tcp.try_write(OVER_THE_CAP).is_ok() {
                // A caller that wrote its request already would have the
                // close reset the connection, and lose the 503, unless
                // what it sent is read first; a few refusals at a time
                // are, and the rest are closed at once.
                if let Ok(room) = Arc::clone(&refusals).try_acquire_owned() {
                    connections.spawn(close_refused(tcp, relay.shutdown.clone(), room));
                }
            }
            continue;
        };
        // Small frames must not wait for Nagle's algorithm: it costs 40 ms
        // per exchange with delayed ACKs.
        let _ = tcp.set_nodelay(true);
        // Every connection: a client's cannot be told from a caller's
        // until its upgrade, and a caller's answer loses nothing by it.
        if let Err(err) = portpreview_shared::unsent::keep_little_unsent(&tcp) {
            tracing::debug!(%err, "TCP_NOTSENT_LOWAT not set");
        }
        // Behind a wildcard bind, the address this connection actually reached.
        let local = tcp.local_addr().unwrap_or(local);
        let span = tracing::debug_span!("connection", %peer);
        connections.spawn(serve(Arc::clone(&relay), tcp, peer, local, slot).instrument(span));
    }
    over_the_cap.tell_the_rest();
    Ok(())
}

/// Descriptors kept back from connections: the relay's own (its
/// listener, the runtime's, the log's), and those of the connections over
/// the cap being told so ([`REFUSALS_LINGERING`]).
const KEPT_BACK: u64 = 32;

/// Connections over the cap whose close lingers at one time.
const REFUSALS_LINGERING: usize = 16;

/// Closes a connection told it is over the cap, reading what its caller
/// had sent first (see [`crate::linger`]).
async fn close_refused(tcp: TcpStream, shutdown: CancellationToken, _room: OwnedSemaphorePermit) {
    let (mut tcp, ask) = Linger::new(tcp, shutdown);
    ask.ask();
    let _ = tcp.shutdown().await;
}

/// `max` connections, or fewer when the limit on open files would refuse
/// them first: past the cap a caller is told 503 at once, where past the
/// limit it would wait unanswered in the listen queue.
fn within_open_files(max: usize, open_files: Option<u64>) -> usize {
    let Some(limit) = open_files else {
        return max;
    };
    let room = usize::try_from(limit.saturating_sub(KEPT_BACK)).unwrap_or(usize::MAX);
    max.min(room).max(1)
}

/// The first byte a caller sent, without taking it: a TLS handshake starts
/// with 0x16, a request line with its method's capital. `None` when it
/// closed or sent nothing within `patience`.
async fn first_byte(tcp: &TcpStream, patience: std::time::Duration) -> Option<u8> {
    let mut first = [0; 1];
    match tokio::time::timeout(patience, tcp.peek(&mut first)).await {
        Ok(Ok(1)) => Some(first[0]),
        _ => None,
    }
}

/// Answers a request sent in plain HTTP to the TLS port, then closes once
/// the caller has read it.
async fn refuse_plain_http(tcp: TcpStream, shutdown: CancellationToken) {
    let body = format!(
        "{}: use https:// (wss:// for a client's --server)\n",
        portpreview_shared::message::TLS_REQUIRED
    );
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let (mut tcp, ask) = Linger::new(tcp, shutdown);
    ask.ask();
    if tcp.write_all(answer.as_bytes()).await.is_ok() {
        let _ = tcp.shutdown().await;
    }
}

/// The answer to a connection over the per-address or overall cap.
const OVER_THE_CAP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: text/plain; charset=utf-8\r\n\
content-length: 53\r\n\
retry-after: 5\r\n\
connection: close\r\n\r\n\
too many connections to the relay: try again shortly\n";

fn is_transient(err: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        err.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock | TimedOut
    ) || is_exhaustion(err)
}

/// True when the process or system is out of something that finishing
/// connections gives back.
fn is_exhaustion(err: &io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(err)
        .is_some_and(|errno| [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&errno))
}

async fn serve(relay: Arc<Relay>, tcp: TcpStream, peer: SocketAddr, local: SocketAddr, slot: Slot) {
    if relay.config.tls.is_some() {
        match first_byte(&tcp, relay.config.header_read_timeout).await {
            // A TLS alert to a caller that spoke plain HTTP (`http://` for
            // `https://`) reads to curl as "HTTP/0.9": it is told in HTTP.
            Some(byte) if byte.is_ascii_uppercase() => {
                tracing::debug!(%peer, "plain HTTP on the TLS port: answered 400");
                return refuse_plain_http(tcp, relay.shutdown.clone()).await;
            }
            Some(_) => {}
            None => return tracing::debug!(%peer, "closed or silent before a TLS handshake"),
        }
    }
    // Under TLS, on the socket itself: a TLS stream's flush waits for its
    // whole buffer to drain, and would hide progress a slow reader makes.
    let stall = Arc::new(StallNote::default());
    let tcp = WriteStall::new(tcp, relay.config.write_stall_timeout)
        .under(Arc::clone(&relay.answer_budget), Arc::clone(&stall));
    // Also on the socket: what a lingering close throws away needs no
    // TLS record decrypted.
    let (tcp, linger) = Linger::new(tcp, relay.shutdown.clone());
    let Some(tls) = relay.config.tls.clone() else {
        return serve_http(relay, tcp, peer, local, false, slot, (linger, stall)).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    match tokio::time::timeout(relay.config.header_read_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => serve_http(relay, stream, peer, local, true, slot, (linger, stall)).await,
        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

async fn serve_http<IO>(
    relay: Arc<Relay>,
    io: IO,
    peer: SocketAddr,
    local: SocketAddr,
    tls: bool,
    slot: Slot,
    (linger, stall): (LingerAsk, Arc<StallNote>),
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = &relay.config;
    let max_head = config.max_header_bytes;
    let limits = HeadLimits {
        max_bytes: max_head,
        max_headers: config.max_headers,
    };
    let (io, verdicts) = HeadScan::new(io, limits);
    let info = Arc::new(ConnInfo {
        peer,
        peer_ip: peer.ip().to_string(),
        local,
        https: tls || config.behind_https,
        verdicts,
        slot,
        linger,
        stall,
    });
    let shutdown = relay.shutdown.clone();
    let drain = config.drain_timeout;
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_headers(config.max_headers)
        .max_header_size(max_head)
        .max_buf_size(READ_BUF.max(max_head + 1))
        .keep_alive(true);
    let service = service_fn(move |req| {
        let relay = Arc::clone(&relay);
        let info = Arc::clone(&info);
        async move { Ok::<_, Infallible>(ingress::handle(&relay, &info, req).await) }
    });
    let conn = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(drain + ANSWER_AFTER_DRAIN, conn.as_mut()).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(err) = result {
        tracing::trace!(%peer, %err, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use rustix::io::Errno;

    use super::*;

    #[test]
    fn connections_are_capped_below_the_open_file_limit() {
        assert_eq!(within_open_files(10_000, Some(1024)), 1024 - 32);
        assert_eq!(within_open_files(10_000, Some(1 << 20)), 10_000);
        assert_eq!(within_open_files(10_000, None), 10_000, "unlimited");
        assert_eq!(within_open_files(10_000, Some(8)), 1);
    }

    /// Running out of descriptors or memory passes as connections close;
    /// only other failures end the accept loop.
    #[test]
    fn exhaustion_is_waited_out_and_other_failures_are_not() {
        for errno in [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM] {
            assert!(
                is_transient(&io::Error::from_raw_os_error(errno.raw_os_error())),
                "{errno}"
            );
        }
        assert!(is_transient(&io::Error::from(io::ErrorKind::ConnectionReset)));
        assert!(!is_transient(&io::Error::from_raw_os_error(Errno::BADF.raw_os_error())));
    }
}
