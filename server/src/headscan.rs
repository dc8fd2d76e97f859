//! Watches each request head on its way into hyper.
//!
//! Two things hyper does on its own and hides from the service:
//! - It resolves a request carrying both `Content-Length` and
//!   `Transfer-Encoding` safely (it ignores the length and closes the
//!   connection after the request), but the design answers such requests
//!   400. This wrapper queues one verdict per head, which the service takes
//!   in the same order.
//! - It refuses a head over the relay's limits (too many bytes, too many
//!   headers), or one it cannot frame (a `Content-Length` that is not one
//!   number, or too large to count, a header line folded onto the one
//!   before), with a bare 431 or 400 before the service ever sees it. The
//!   relay's own answers say why in plain text, so when the scan has seen
//!   such a head, hyper's bodiless answer is replaced on its way out by one
//!   that names what was wrong.
//!
//! Apart from that one answer it never changes a byte. When it cannot follow
//! the framing (chunked bodies, upgrades), it stops watching, and the
//! verdict of the last head it saw says so: the service closes the
//! connection after answering that request, so no later head on it goes
//! unjudged.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use portpreview_shared::content_length::{self, NotOneLength};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::body::PLAIN_TEXT;

/// Verdicts queued ahead of the service before the scan gives up.
const MAX_QUEUED: usize = 64;

/// The limits on a request head that hyper enforces.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// Bytes of request line and headers.
    pub max_bytes: usize,
    /// Header lines.
    pub max_headers: usize,
}

/// Why hyper refuses the head the scan has just seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    TooLong,
    /// Too long within its request line: the target is what is too long.
    TargetTooLong,
    TooMany,
    /// A `Content-Length` hyper cannot count to (2^64 − 2 or more).
    LengthTooLarge,
    /// `Content-Length` lines that declare no one number.
    NotOneLength,
    /// A header line that starts with a space or a tab: obsolete line
    /// folding, which HTTP/1.1 forbids in requests.
    Folded,
}

impl Refusal {
    /// A head over `limits.max_bytes` so far, `head`: too long in its
    /// request line, or in its headers.
    fn too_long(head: &[u8], limits: HeadLimits) -> Refusal {
        let line_ends = head.iter().take(limits.max_bytes).any(|&b| b == b'\n');
        if line_ends {
            Refusal::TooLong
        } else {
            Refusal::TargetTooLong
        }
    }

    /// The start of hyper's own answer to a head refused so.
    fn hypers_status(self) -> &'static [u8] {
        match self {
            Refusal::NotOneLength | Refusal::Folded => b"HTTP/1.1 400 ",
            Refusal::TooLong | Refusal::TargetTooLong | Refusal::TooMany | Refusal::LengthTooLarge => b"HTTP/1.1 431 ",
        }
    }

    /// The answer the relay gives in place of hyper's bare one.
    fn answer(self, limits: HeadLimits) -> Vec<u8> {
        let (status, why) = match self {
            Refusal::TooLong => (
                "431 Request Header Fields Too Large",
                format!("request head over the relay's limit of {} bytes", limits.max_bytes),
            ),
            Refusal::TargetTooLong => (
                "414 URI Too Long",
                format!(
                    "request target (path and query) over the relay's limit of {} bytes for a request head",
                    limits.max_bytes
                ),
            ),
            Refusal::TooMany => (
                "431 Request Header Fields Too Large",
                format!("more request headers than the relay's limit of {}", limits.max_headers),
            ),
            Refusal::LengthTooLarge => (
                "413 Content Too Large",
                "the request declares a body too large to count (Content-Length of 2^64 - 2 bytes or more)".to_owned(),
            ),
            Refusal::NotOneLength => (
                "400 Bad Request",
                "the request's Content-Length is not one number: each value must be digits alone, all equal".to_owned(),
            ),
            Refusal::Folded => (
                "400 Bad Request",
                "a request header line starts with a space or a tab (obsolete line folding): write each header \
                 on one line"
                    .to_owned(),
            ),
        };
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {PLAIN_TEXT}\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{why}\n",
            why.len() + 1
        )
        .into_bytes()
    }
}

/// The relay's answer, part written, standing in for hyper's.
struct Explaining {
    answer: Vec<u8>,
    written: usize,
    /// Length of hyper's answer, reported written once ours is.
    replaces: usize,
}

/// What the scan saw of one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The head had both `Content-Length` and `Transfer-Encoding`.
    pub conflicted: bool,
    /// The scan stopped watching after this head (a chunked body, an
    /// upgrade, too many heads queued): its answer must close the
    /// connection, or the next head would pass unjudged.
    pub last_watched: bool,
}

impl Verdict {
    /// For a request the scan never saw.
    const UNWATCHED: Verdict = Verdict {
        conflicted: false,
        last_watched: true,
    };
}

/// One verdict per request head, in arrival order.
#[derive(Default)]
pub struct Verdicts(Mutex<VecDeque<Verdict>>);

impl Verdicts {
    /// The verdict on the next request, in order.
    pub fn pop(&self) -> Verdict {
        self.queue().pop_front().unwrap_or(Verdict::UNWATCHED)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Verdict>> {
        // Only push and pop happen under this lock; poisoning is harmless.
        portpreview_shared::sync::lock(&self.0)
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
    limits: HeadLimits,
    verdicts: Arc<Verdicts>,
    /// Set once a head over the limits has been read: hyper answers it 431
    /// and closes the connection.
    refusal: Option<Refusal>,
    explaining: Option<Explaining>,
}

impl<IO> HeadScan<IO> {
    /// Watches `io`, whose heads hyper holds to `limits`.
    pub fn new(io: IO, limits: HeadLimits) -> (Self, Arc<Verdicts>) {
        let verdicts = Arc::new(Verdicts::default());
        let scan = Self {
            io,
            phase: Phase::Head(Vec::new()),
            limits,
            verdicts: Arc::clone(&verdicts),
            refusal: None,
            explaining: None,
        };
        (scan, verdicts)
    }

    /// Ends the watch on a head hyper will refuse.
    fn refuse(&mut self, why: Refusal) {
        self.refusal = Some(why);
        self.phase = Phase::Off;
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
                        // A head that came whole in one read, as most do, is
                        // looked at where it lies: only a head split across
                        // reads is gathered.
                        if let Some(end) = head_end(input, 0) {
                            if !self.head_ended(&input[..end]) {
                                return;
                            }
                            input = &input[end..];
                            continue;
                        }
                    }
                    let old_len = buf.len();
                    buf.extend_from_slice(input);
                    // The longest terminator, `\n\r\n`, may have begun in the
                    // last two bytes already scanned.
                    let Some(end) = head_end(buf, old_len.saturating_sub(2)) else {
                        // hyper's checks: a partial head at the limit, a whole one over it.
                        if buf.len() >= self.limits.max_bytes {
                            let why = Refusal::too_long(buf, self.limits);
                            self.refuse(why);
                        } else if too_many_lines(buf, self.limits.max_headers) {
                            // The parser stops at the header past its limit,
                            // whether or not the head has ended.
                            self.refuse(Refusal::TooMany);
                        }
                        return;
                    };
                    let head = std::mem::take(buf);
                    if !self.head_ended(&head[..end]) {
                        return;
                    }
                    // end > old_len: a terminator wholly inside older bytes was found then.
                    input = input.get(end.saturating_sub(old_len)..).unwrap_or_default();
                }
            }
        }
    }

    /// Takes the whole head `head`: queues its verdict and follows its
    /// body, or notes the refusal hyper will give it. False when refused.
    fn head_ended(&mut self, head: &[u8]) -> bool {
        if head.len() > self.limits.max_bytes {
            let why = Refusal::too_long(head, self.limits);
            self.refuse(why);
            return false;
        }
        let framing = Framing::of(head);
        if framing.headers > self.limits.max_headers {
            self.refuse(Refusal::TooMany);
            return false;
        }
        if let Some(why) = framing.unframable() {
            self.refuse(why);
            return false;
        }
        self.phase = self.after(framing);
        true
    }

    fn after(&self, framing: Framing) -> Phase {
        let mut queue = self.verdicts.queue();
        if queue.len() >= MAX_QUEUED {
            if let Some(last) = queue.back_mut() {
                last.last_watched = true;
            }
            return Phase::Off;
        }
        let conflicted = framing.has_content_length && framing.chunked_or_te;
        let next = match framing {
            // hyper refuses a length it cannot read and closes the
            // connection; the scan has nothing more to follow.
            Framing {
                content_length: Err(NotOneLength),
                ..
            }
            | Framing { upgrade: true, .. }
            | Framing {
                chunked_or_te: true, ..
            } => Phase::Off,
            Framing {
                content_length: Ok(Some(n)),
                ..
            } if n > 0 => Phase::Body(n),
            _ => Phase::Head(Vec::new()),
        };
        queue.push_back(Verdict {
            conflicted,
            last_watched: matches!(next, Phase::Off),
        });
        next
    }
}

/// Where the head in `buf` ends (just past its blank line), looking for
/// the blank line's start from `from` on. hyper's parser, httparse, ends
/// each line at `\n` with or without a `\r` before it, so a head may end
/// `\r\n\r\n`, `\n\n`, `\n\r\n` or `\r\n\n`: every one holds a `\n`
/// followed by an optional `\r` and a `\n`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    // memchr, not a loop over bytes: every request's head is searched.
    for offset in memchr::memchr_iter(b'\n', buf.get(from..)?) {
        let newline = from + offset;
        match (buf.get(newline + 1), buf.get(newline + 2)) {
            (Some(b'\n'), _) => return Some(newline + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(newline + 3),
            // Not a blank line, or not known yet: the next scan starts at
            // most two bytes back, so it sees this `\n` again.
            _ => {}
        }
    }
    None
}

/// Whether the whole lines of a head still arriving hold more headers than
/// `limit`.
fn too_many_lines(partial: &[u8], limit: usize) -> bool {
    let whole = partial
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&[][..], |at| &partial[..at]);
    Framing::of(whole).headers > limit
}

/// The length of hyper's own answer to a head it refused, when `out` starts
/// with one: `status` (`HTTP/1.1 431 `) with no body. No answer the service
/// gives looks like it: the relay's say why, and a tunnel's is only
/// replaced after the scan saw a refused head, which ends the connection.
fn bare_answer(out: &[u8], status: &[u8]) -> Option<usize> {
    if !out.starts_with(status) {
        return None;
    }
    let end = out.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let empty = b"\r\ncontent-length: 0\r\n";
    out[..end]
        .windows(empty.len())
        .any(|w| w.eq_ignore_ascii_case(empty))
        .then_some(end)
}

struct Framing {
    /// Whether the head has a `Content-Length` line, whatever its value.
    has_content_length: bool,
    /// The length it declares, as hyper reads it.
    content_length: Result<Option<u64>, NotOneLength>,
    chunked_or_te: bool,
    upgrade: bool,
    /// Header lines, as hyper counts them against its limit.
    headers: usize,
    /// A header line starts with a space or a tab.
    folded: bool,
}

impl Framing {
    fn of(head: &[u8]) -> Framing {
        let lines = || {
            header_lines(head).filter_map(|line| {
                let colon = memchr::memchr(b':', line)?;
                Some((&line[..colon], &line[colon + 1..]))
            })
        };
        let mut framing = Framing {
            has_content_length: false,
            content_length: Ok(None),
            chunked_or_te: false,
            upgrade: false,
            headers: 0,
            folded: false,
        };
        for line in header_lines(head) {
            // One pass over the lines, as each request's head is read.
            framing.folded |= line.first().is_some_and(|b| *b == b' ' || *b == b'\t');
            let Some(colon) = memchr::memchr(b':', line) else {
                continue;
            };
            let name = &line[..colon];
            framing.headers += 1;
            if name.eq_ignore_ascii_case(b"content-length") {
                framing.has_content_length = true;
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                framing.chunked_or_te = true;
            } else if name.eq_ignore_ascii_case(b"upgrade") {
                framing.upgrade = true;
            }
        }
        if framing.has_content_length {
            framing.content_length = content_length::declared(
                lines()
                    .filter(|(name, _)| name.eq_ignore_ascii_case(b"content-length"))
                    .map(|(_, value)| value),
            );
        }
        framing
    }
}

impl Framing {
    /// Why hyper refuses a head it cannot frame, as it would. With a
    /// `Transfer-Encoding`, hyper may skip the `Content-Length` lines, so
    /// only a head without one is judged by them.
    fn unframable(&self) -> Option<Refusal> {
        if self.folded {
            return Some(Refusal::Folded);
        }
        match self.content_length {
            _ if self.chunked_or_te => None,
            Err(NotOneLength) => Some(Refusal::NotOneLength),
            // hyper keeps the two largest lengths for bodies it frames
            // otherwise, and refuses them as too large.
            Ok(Some(n)) if n >= u64::MAX - 1 => Some(Refusal::LengthTooLarge),
            Ok(_) => None,
        }
    }
}

/// The lines of `head` after its request line, split at each `\n` as
/// `split` would (the part after the last one included), found by memchr.
fn header_lines(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut ends = memchr::memchr_iter(b'\n', head).chain(std::iter::once(head.len()));
    let mut start = ends.next().map(|request_line_end| request_line_end + 1);
    std::iter::from_fn(move || {
        let from = start?;
        let end = ends.next()?;
        start = Some(end + 1);
        Some(&head[from..end])
    })
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
        let this = &mut *self;
        if let (Some(refusal), None) = (this.refusal, &this.explaining) {
            if let Some(replaces) = bare_answer(buf, refusal.hypers_status()) {
                this.explaining = Some(Explaining {
                    answer: refusal.answer(this.limits),
                    written: 0,
                    replaces,
                });
            }
        }
        let Some(explaining) = &mut this.explaining else {
            return Pin::new(&mut this.io).poll_write(cx, buf);
        };
        // hyper offers the same bytes again until they are reported written.
        while explaining.written < explaining.answer.len() {
            match Pin::new(&mut this.io).poll_write(cx, &explaining.answer[explaining.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => explaining.written += n,
                other => return other,
            }
        }
        let replaced = explaining.replaces;
        this.explaining = None;
        this.refusal = None;
        Poll::Ready(Ok(replaced))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.refusal.is_none() {
            return Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        }
        // hyper's answer comes whole in one slice; a short write is allowed.
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
        self.poll_write(cx, first)
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const LIMITS: HeadLimits = HeadLimits {
        max_bytes: 1024,
        max_headers: 8,
    };

    proptest::proptest! {
        /// The header lines are the ones `split` gives after the request
        /// line, whatever the bytes.
        #[test]
        fn header_lines_are_split_at_each_newline(head in proptest::collection::vec(
            proptest::sample::select(vec![b'\n', b'\r', b':', b'a']), 0..40)
        ) {
            let split: Vec<&[u8]> = head.split(|b| *b == b'\n').skip(1).collect();
            let found: Vec<&[u8]> = header_lines(&head).collect();
            proptest::prop_assert_eq!(found, split);
        }
    }

    /// What hyper writes when it refuses a head.
    const HYPERS_431: &[u8] =
        b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 22:23:16 GMT\r\n\r\n";

    /// Sends `request` through a scan and writes `answer` back through it:
    /// what the caller receives.
    async fn answered(request: &[u8], answer: &[u8]) -> String {
        let (caller, relay_side) = tokio::io::duplex(64 * 1024);
        let (mut scan, _) = HeadScan::new(relay_side, LIMITS);
        let (mut caller_read, mut caller_write) = tokio::io::split(caller);
        caller_write.write_all(request).await.unwrap();
        let mut seen = vec![0; request.len()];
        scan.read_exact(&mut seen).await.unwrap();
        scan.write_all(answer).await.unwrap();
        scan.shutdown().await.unwrap();
        let mut received = String::new();
        caller_read.read_to_string(&mut received).await.unwrap();
        received
    }

    #[tokio::test]
    async fn hypers_bare_431_says_which_limit_the_head_went_over() {
        let long = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(2000));
        let received = answered(long.as_bytes(), HYPERS_431).await;
        assert!(received.starts_with("HTTP/1.1 431 "), "{received}");
        assert!(
            received.ends_with("\r\n\r\nrequest head over the relay's limit of 1024 bytes\n"),
            "{received}"
        );
        assert!(received.contains("content-length: 50\r\n"), "{received}");

        let target = format!("GET /?q={} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(2000));
        let received = answered(target.as_bytes(), HYPERS_431).await;
        assert!(received.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{received}");
        assert!(received.contains("request target (path and query) over"), "{received}");

        let many: String = (0..9).map(|n| format!("X-{n}: 1\r\n")).collect();
        let received = answered(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(), HYPERS_431).await;
        assert!(
            received.ends_with("more request headers than the relay's limit of 8\n"),
            "{received}"
        );
        // The parser refuses a head past the limit before it has ended, as
        // when thousands of headers arrive over several reads.
        let received = answered(format!("GET / HTTP/1.1\r\n{many}X-Ten").as_bytes(), HYPERS_431).await;
        assert!(
            received.ends_with("more request headers than the relay's limit of 8\n"),
            "{received}"
        );
    }

    #[tokio::test]
    async fn answers_to_heads_within_the_limits_pass_untouched() {
        let few: String = (0..8).map(|n| format!("X-{n}: 1\r\n")).collect();
        let head = format!("GET / HTTP/1.1\r\n{few}\r\n");
        // A tunnel's handler may answer 431 or 400 with no body: that is its answer.
        let received = answered(head.as_bytes(), HYPERS_431).await;
        assert_eq!(received.as_bytes(), HYPERS_431);
        let received = answered(head.as_bytes(), HYPERS_400).await;
        assert_eq!(received.as_bytes(), HYPERS_400);
        // A length hyper reads past a Transfer-Encoding is not judged by it.
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5, 6\r\n\r\n";
        let received = answered(chunked, HYPERS_400).await;
        assert_eq!(received.as_bytes(), HYPERS_400);
    }

    /// What hyper writes when it cannot frame a head.
    const HYPERS_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 22:23:16 GMT\r\n\r\n";

    #[tokio::test]
    async fn hypers_bare_answer_to_a_head_it_cannot_frame_says_why() {
        let huge = b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n";
        let received = answered(huge, HYPERS_431).await;
        assert!(received.starts_with("HTTP/1.1 413 Content Too Large\r\n"), "{received}");
        let counted = b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551613\r\n\r\n";
        assert_eq!(Framing::of(counted).unframable(), None, "hyper counts to 2^64 - 3");
        let two = b"POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n";
        let received = answered(two, HYPERS_400).await;
        assert!(
            received.starts_with("HTTP/1.1 400 Bad Request\r\n") && received.contains("is not one number"),
            "{received}"
        );
        let folded = b"GET / HTTP/1.1\r\nX-A: 1\r\n\tmore\r\n\r\n";
        let received = answered(folded, HYPERS_400).await;
        assert!(received.contains("obsolete line folding"), "{received}");
    }

    #[test]
    fn counts_header_lines_as_hyper_does() {
        assert_eq!(Framing::of(b"GET / HTTP/1.1\r\n\r\n").headers, 0);
        assert_eq!(Framing::of(b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n").headers, 2);
        assert_eq!(bare_answer(HYPERS_431, b"HTTP/1.1 431 "), Some(HYPERS_431.len()));
        assert_eq!(
            bare_answer(b"HTTP/1.1 431 X\r\ncontent-length: 5\r\n\r\nhello", b"HTTP/1.1 431 "),
            None
        );
        assert_eq!(
            bare_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", b"HTTP/1.1 431 "),
            None
        );
    }

    fn verdicts_of(pieces: &[&[u8]]) -> Vec<bool> {
        let (mut scan, verdicts) = HeadScan::new((), LIMITS);
        for piece in pieces {
            scan.scan(piece);
        }
        let queued = verdicts.queue().len();
        (0..queued).map(|_| verdicts.pop().conflicted).collect()
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
    fn finds_the_end_of_a_head_as_httparse_does() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: 1\r\n\r\nbody", 0), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: 1\n\nbody", 0), Some(21));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: 1\n\r\nbody", 0), Some(22));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: 1\r\n\nbody", 0), Some(23));
        // A `\r` is no line end by itself.
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: 1\r\r\n", 0), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: 1\n", 0), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: 1\n\r", 0), None);
    }

    #[test]
    fn judges_heads_with_bare_line_feeds() {
        let smuggle = b"POST /b HTTP/1.1\nContent-Length: 4\nTransfer-Encoding: chunked\n\n0\r\n\r\n";
        assert_eq!(verdicts_of(&[smuggle]), [true]);
        let mixed = b"POST /b HTTP/1.1\r\nContent-Length: 4\nTransfer-Encoding: chunked\r\n\n0\r\n\r\n";
        assert_eq!(verdicts_of(&[mixed]), [true]);
        // Split at every byte, so a terminator straddles two reads.
        let pieces: Vec<&[u8]> = smuggle.chunks(1).collect();
        assert_eq!(verdicts_of(&pieces), [true]);
        let pieces: Vec<&[u8]> = mixed.chunks(1).collect();
        assert_eq!(verdicts_of(&pieces), [true]);
    }

    #[test]
    fn skips_the_body_after_a_head_with_bare_line_feeds() {
        // A body past the head's limit: a scan that missed the head's end
        // would count it as head and call the head too long.
        let body = vec![b'x'; 4 * LIMITS.max_bytes];
        let mut bytes = format!("POST / HTTP/1.1\ncontent-length: {}\n\n", body.len()).into_bytes();
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(b"GET /next HTTP/1.1\nContent-Length: 1\nTransfer-Encoding: x\n\n");
        let (mut scan, verdicts) = HeadScan::new((), LIMITS);
        for piece in bytes.chunks(100) {
            scan.scan(piece);
        }
        assert_eq!(scan.refusal, None, "no head went over the limit");
        assert_eq!((verdicts.pop().conflicted, verdicts.pop().conflicted), (false, true));
    }

    #[test]
    fn stops_watching_after_chunked_bodies_and_huge_heads() {
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(verdicts_of(&[chunked, b"GET / HTTP/1.1\r\n\r\n"]), [false]);
        let (mut scan, verdicts) = HeadScan::new((), LIMITS);
        scan.scan(b"GET / HTTP/1.1\r\n\r\n");
        scan.scan(chunked);
        let seen = (verdicts.pop(), verdicts.pop(), verdicts.pop());
        assert!(!seen.0.last_watched, "a plain head leaves the scan watching");
        assert!(seen.1.last_watched, "the chunked head is the last one judged");
        assert_eq!(seen.2, Verdict::UNWATCHED);
        let huge = vec![b'a'; 2000];
        assert!(verdicts_of(&[&huge, b"\r\n\r\n"]).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_in_any_pieces_give_the_same_verdicts(
            heads in proptest::collection::vec(
                (proptest::bool::ANY, proptest::bool::ANY, 0usize..40, "[ -~]{0,20}", proptest::bool::ANY),
                1..6,
            ),
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cuts in proptest::collection::vec(1usize..50, 1..20),
        ) {
            let mut bytes = Vec::new();
            for (cl, te, body_len, extra, bare_lf) in &heads {
                let eol = if *bare_lf { "\n" } else { "\r\n" };
                bytes.extend_from_slice(format!("POST /x HTTP/1.1{eol}X-Extra: {extra}{eol}").as_bytes());
                if *cl {
                    bytes.extend_from_slice(format!("Content-Length: {body_len}{eol}").as_bytes());
                }
                if *te {
                    bytes.extend_from_slice(format!("Transfer-Encoding: chunked{eol}").as_bytes());
                }
                bytes.extend_from_slice(eol.as_bytes());
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
                .scan(false, |stopped, (cl, te, _, _, _)| {
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
