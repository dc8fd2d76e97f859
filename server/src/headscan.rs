//! Spots requests that carry both `Content-Length` and `Transfer-Encoding`.
//!
//! hyper resolves that conflict safely on its own (it ignores the length and
//! closes the connection after the request), but it hides the fact from the
//! service, and the design answers such requests 400. This wrapper watches
//! the raw bytes of each request head on their way into hyper and queues one
//! verdict per head, which the service takes in the same order. It never
//! changes a byte. When it cannot follow the framing (chunked bodies,
//! upgrades, oversized heads), it stops watching and the service sees
//! "no conflict" from then on, leaving hyper's own handling in place.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Verdicts queued ahead of the service before the scan gives up.
const MAX_QUEUED: usize = 64;

/// One verdict per request head, in arrival order.
#[derive(Default)]
pub struct Verdicts(Mutex<VecDeque<bool>>);

impl Verdicts {
    /// Whether the next request (in order) had both framing headers.
    pub fn next_conflicted(&self) -> bool {
        self.queue().pop_front().unwrap_or(false)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<bool>> {
        // Only push and pop happen under this lock; poisoning is harmless.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

enum Phase {
    Head(Vec<u8>),
    Body(u64),
    Off,
}

/// An I/O stream that reports conflicting framing headers to [`Verdicts`].
pub struct HeadScan<IO> {
    io: IO,
    phase: Phase,
    max_head: usize,
    verdicts: Arc<Verdicts>,
}

impl<IO> HeadScan<IO> {
    /// Watches `io`; heads longer than `max_head` end the watch (hyper answers 431).
    pub fn new(io: IO, max_head: usize) -> (Self, Arc<Verdicts>) {
        let verdicts = Arc::new(Verdicts::default());
        let scan = Self {
            io,
            phase: Phase::Head(Vec::new()),
            max_head,
            verdicts: Arc::clone(&verdicts),
        };
        (scan, verdicts)
    }

    fn scan(&mut self, mut input: &[u8]) {
        while !input.is_empty() {
            match &mut self.phase {
                Phase::Off => return,
                Phase::Body(remaining) => {
                    let n = (*remaining).min(input.len() as u64);
                    *remaining -= n;
                    input = &input[n as usize..];
                    if *remaining == 0 {
                        self.phase = Phase::Head(Vec::new());
                    }
                }
                Phase::Head(buf) => {
                    if buf.is_empty() {
                        // Empty lines before a request line are tolerated by parsers.
                        let skip = input.iter().take_while(|b| **b == b'\r' || **b == b'\n').count();
                        input = &input[skip..];
                        if input.is_empty() {
                            return;
                        }
                    }
                    let old_len = buf.len();
                    buf.extend_from_slice(input);
                    let from = old_len.saturating_sub(3);
                    let Some(pos) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") else {
                        if buf.len() > self.max_head {
                            self.phase = Phase::Off;
                        }
                        return;
                    };
                    let end = from + pos + 4;
                    // end > old_len: a terminator wholly inside older bytes was found then.
                    input = input.get(end.saturating_sub(old_len)..).unwrap_or_default();
                    let framing = Framing::of(&buf[..end]);
                    self.phase = self.after(framing);
                }
            }
        }
    }

    fn after(&self, framing: Framing) -> Phase {
        let mut queue = self.verdicts.queue();
        if queue.len() >= MAX_QUEUED {
            return Phase::Off;
        }
        queue.push_back(framing.content_length.is_some() && framing.chunked_or_te);
        match framing {
            Framing { upgrade: true, .. }
            | Framing {
                chunked_or_te: true, ..
            } => Phase::Off,
            Framing {
                content_length: Some(n),
                ..
            } if n > 0 => Phase::Body(n),
            _ => Phase::Head(Vec::new()),
        }
    }
}

struct Framing {
    content_length: Option<u64>,
    chunked_or_te: bool,
    upgrade: bool,
}

impl Framing {
    fn of(head: &[u8]) -> Framing {
        let mut framing = Framing {
            content_length: None,
            chunked_or_te: false,
            upgrade: false,
        };
        for line in head.split(|b| *b == b'\n').skip(1) {
            let Some(colon) = line.iter().position(|b| *b == b':') else {
                continue;
            };
            let name = &line[..colon];
            let value = String::from_utf8_lossy(&line[colon + 1..]);
            let value = value.trim();
            if name.eq_ignore_ascii_case(b"content-length") {
                framing.content_length = framing.content_length.or(value.parse().ok()).or(Some(0));
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                framing.chunked_or_te = true;
            } else if name.eq_ignore_ascii_case(b"upgrade") {
                framing.upgrade = true;
            }
        }
        framing
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for HeadScan<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = result {
            let this = &mut *self;
            this.scan(&buf.filled()[before..]);
        }
        result
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for HeadScan<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts_of(pieces: &[&[u8]]) -> Vec<bool> {
        let (mut scan, verdicts) = HeadScan::new((), 1024);
        for piece in pieces {
            scan.scan(piece);
        }
        let queued = verdicts.queue().len();
        (0..queued).map(|_| verdicts.next_conflicted()).collect()
    }

    #[test]
    fn flags_only_heads_with_both_framing_headers() {
        let clean = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
        let smuggle = b"POST /b HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let mut both = clean.to_vec();
        both.extend_from_slice(b"\r\n");
        both.extend_from_slice(smuggle);
        assert_eq!(verdicts_of(&[&both]), [false, true]);
    }

    #[test]
    fn follows_heads_split_across_reads_and_skips_bodies() {
        let body_looks_like_head = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: x\r\n\r\n";
        let first = format!(
            "POST / HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            body_looks_like_head.len()
        );
        let mut bytes = first.into_bytes();
        bytes.extend_from_slice(body_looks_like_head);
        bytes.extend_from_slice(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
        let pieces: Vec<&[u8]> = bytes.chunks(3).collect();
        assert_eq!(verdicts_of(&pieces), [false, false]);
    }

    #[test]
    fn stops_watching_after_chunked_bodies_and_huge_heads() {
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(verdicts_of(&[chunked, b"GET / HTTP/1.1\r\n\r\n"]), [false]);
        let huge = vec![b'a'; 2000];
        assert!(verdicts_of(&[&huge, b"\r\n\r\n"]).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_in_any_pieces_give_the_same_verdicts(
            heads in proptest::collection::vec(
                (proptest::bool::ANY, proptest::bool::ANY, 0usize..40, "[ -~]{0,20}"),
                1..6,
            ),
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cuts in proptest::collection::vec(1usize..50, 1..20),
        ) {
            let mut bytes = Vec::new();
            for (cl, te, body_len, extra) in &heads {
                bytes.extend_from_slice(b"POST /x HTTP/1.1\r\nX-Extra: ");
                bytes.extend_from_slice(extra.as_bytes());
                bytes.extend_from_slice(b"\r\n");
                if *cl {
                    bytes.extend_from_slice(format!("Content-Length: {body_len}\r\n").as_bytes());
                }
                if *te {
                    bytes.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                }
                bytes.extend_from_slice(b"\r\n");
                if *cl && !*te {
                    bytes.resize(bytes.len() + *body_len, b'\n');
                }
            }
            bytes.extend_from_slice(&noise);
            let whole = verdicts_of(&[&bytes]);
            let mut pieces = Vec::new();
            let mut rest = &bytes[..];
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, tail) = rest.split_at((*cut).min(rest.len()));
                pieces.push(piece);
                rest = tail;
            }
            proptest::prop_assert_eq!(&verdicts_of(&pieces), &whole);
            // Every head up to the first chunked one is judged, and judged right.
            let expected: Vec<bool> = heads
                .iter()
                .scan(false, |stopped, (cl, te, _, _)| {
                    if *stopped {
                        return None;
                    }
                    *stopped = *te;
                    Some(*cl && *te)
                })
                .collect();
            proptest::prop_assert_eq!(&whole[..expected.len().min(whole.len())], &expected[..]);
        }
    }
}
