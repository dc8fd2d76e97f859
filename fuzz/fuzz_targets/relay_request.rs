//! What a caller sends the relay comes straight from the internet: the
//! watch over request heads must take any bytes cut at any points, and
//! any Host and path must route to a tunnel with a valid name, or nowhere.
#![no_main]

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use portpreview_server::headscan::{HeadLimits, HeadScan};
use portpreview_server::ingress::{destination, Destination};
use portpreview_shared::name::is_valid;
use tokio::io::{AsyncRead, ReadBuf};

/// A caller's bytes, arriving in the pieces the fuzzer chose.
struct Pieces(VecDeque<Vec<u8>>);

impl AsyncRead for Pieces {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Some(mut piece) = self.0.pop_front() {
            let room = buf.remaining().min(piece.len());
            buf.put_slice(&piece[..room]);
            if room < piece.len() {
                self.0.push_front(piece.split_off(room));
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Bytes to scan, the cuts between reads, and a Host and path to route.
type Input = (Vec<u8>, Vec<u8>, String, String);

fuzz_target!(|input: Input| {
    let (bytes, cuts, host, path) = input;
    let mut pieces = VecDeque::new();
    let mut rest = &bytes[..];
    for cut in cuts.iter().cycle().take(bytes.len()) {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(usize::from(*cut).clamp(1, rest.len()));
        pieces.push_back(piece.to_vec());
        rest = tail;
    }
    if !rest.is_empty() {
        pieces.push_back(rest.to_vec());
    }
    let limits = HeadLimits {
        max_bytes: 512,
        max_headers: 8,
    };
    let (mut scan, verdicts) = HeadScan::new(Pieces(pieces), limits);
    let mut cx = Context::from_waker(Waker::noop());
    let mut buf = [0u8; 64];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut scan).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) if !read.filled().is_empty() => {}
            _ => break,
        }
    }
    for _ in 0..bytes.len() {
        verdicts.pop();
    }

    let Ok(request) = http::Request::builder()
        .uri(path.as_str())
        .header("host", host.as_str())
        .body(())
    else {
        return;
    };
    for domain in [None, Some("relay.example.com")] {
        if let Destination::Tunnel { name, target, .. } = destination(domain, &request) {
            assert!(is_valid(&name), "routed to an invalid name {name:?}");
            assert!(target.starts_with('/'), "a target not in origin form: {target:?}");
        }
    }
});
