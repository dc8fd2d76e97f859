//! A crowd of callers that ask for large answers and never read them
//! cannot make the relay hold their answers: past its budget it cuts them,
//! telling the tunnel's client why, while a caller reading beside them
//! gets its whole answer.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use portpreview_server::RelayConfig;
use portpreview_shared::message::{CHUNK_SIZE, STREAM_WINDOW};
use portpreview_shared::{ClientMessage, Header, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Every answer's size: GitHub's largest body.
const ANSWER: usize = 25 * 1024 * 1024;

/// Longest the whole exchange may take before the test calls it a hang:
/// without the budget, the deaf callers would be held for the hour-long
/// write-stall limit.
const WHOLE_EXCHANGE: Duration = Duration::from_secs(120);

/// Callers that never read.
const DEAF: usize = 6;

/// The answer's byte at `offset`: a pattern a cut or a reordering shows in.
fn byte_at(offset: usize) -> u8 {
    (offset % 251) as u8
}

/// A caller that asks for `path` on a socket that takes next to nothing,
/// and then reads nothing.
async fn deaf_caller(relay: &Relay, path: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut deaf = socket.connect(relay.addr).await.unwrap();
    let ask = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", relay.addr);
    deaf.write_all(ask.as_bytes()).await.unwrap();
    deaf
}

/// A caller that reads its answer as fast as it comes.
async fn reading_caller(relay: std::net::SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let tcp = TcpStream::connect(relay).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(path)
        .header("host", relay.to_string())
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// One answer the fake client is sending: how far it got, and what the
/// relay lets it send.
struct Sending {
    sent: usize,
    credit: usize,
}

impl Sending {
    fn new() -> Self {
        Sending {
            sent: 0,
            credit: STREAM_WINDOW as usize,
        }
    }

    /// Sends what the credit allows.
    async fn send(&mut self, client: &mut FakeClient, stream: u64) {
        while self.sent < ANSWER && self.credit > 0 {
            let len = CHUNK_SIZE.min(self.credit).min(ANSWER - self.sent);
            let chunk: Vec<u8> = (self.sent..self.sent + len).map(byte_at).collect();
            self.sent += len;
            self.credit -= len;
            let body = ClientMessage::ResponseBody {
                stream,
                end: self.sent == ANSWER,
            };
            client.send(&body, &chunk).await;
        }
    }
}

/// Answers `stream` with the head of a 25 MiB answer.
async fn answer_head(client: &mut FakeClient, stream: u64) {
    let head = ClientMessage::ResponseHead {
        stream,
        status: 200,
        headers: vec![Header::new("content-length", ANSWER.to_string())],
        end: false,
    };
    client.send(&head, b"").await;
}

#[tokio::test]
async fn callers_that_read_nothing_are_shed_past_the_budget_and_a_reader_gets_its_whole_answer() {
    // A budget below one window: a single deaf caller's full queue keeps
    // the relay over half of it, so every deaf caller is shed, whatever
    // order they are cut in. The usual write-stall limit stays far off:
    // only the budget cuts anyone here.
    let config = RelayConfig {
        answer_budget: u64::from(STREAM_WINDOW) / 2,
        write_stall_timeout: Duration::from_secs(3600),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("hoard")).await;

    let mut deaf_callers = Vec::new();
    for n in 0..DEAF {
        deaf_callers.push(deaf_caller(&relay, &format!("/t/hoard/deaf/{n}")).await);
    }
    let mut answers = HashMap::new();
    let mut deaf_asked = 0;
    let mut reader = None;
    let mut reader_stream = None;
    let mut shed = Vec::new();
    let reader_sent = |answers: &HashMap<u64, Sending>, stream: Option<u64>| {
        stream.is_some_and(|stream| answers.get(&stream).is_none_or(|answer| answer.sent == ANSWER))
    };
    // The pings every few seconds keep each message's wait short of a
    // hang: the whole exchange is bounded instead, far above its length.
    let exchange = async {
        while shed.len() < DEAF || !reader_sent(&answers, reader_stream) {
            match client.message().await {
                (ServerMessage::RequestHead { stream, target, .. }, _) => {
                    if target == "/whole" {
                        reader_stream = Some(stream);
                    } else {
                        assert!(target.starts_with("/deaf/"), "{target}");
                        deaf_asked += 1;
                    }
                    answer_head(&mut client, stream).await;
                    answers.insert(stream, Sending::new());
                }
                (ServerMessage::Window { stream, credit }, _) => {
                    if let Some(answer) = answers.get_mut(&stream) {
                        answer.credit += credit as usize;
                    }
                }
                (ServerMessage::Reset { stream, reason }, _) => {
                    assert_ne!(
                        Some(stream),
                        reader_stream,
                        "the reader's answer was given up: {reason}"
                    );
                    assert!(
                        reason.starts_with("the relay cut the caller off: it read none of the answer"),
                        "{reason}"
                    );
                    answers.remove(&stream);
                    shed.push(stream);
                }
                other => panic!("{other:?}"),
            }
            for (&stream, answer) in answers.iter_mut() {
                answer.send(&mut client, stream).await;
            }
            // Each deaf caller's window on its way, the reader asks beside them.
            if deaf_asked == DEAF && reader.is_none() {
                reader = Some(tokio::spawn(reading_caller(relay.addr, "/t/hoard/whole")));
            }
        }
    };
    tokio::time::timeout(WHOLE_EXCHANGE, exchange)
        .await
        .expect("the deaf callers were not all shed, or the reader's answer not all sent");

    let reader = reader.expect("the reader asked");
    let (status, body) = tokio::time::timeout(HANG, reader)
        .await
        .expect("the reader hung")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(body.len(), ANSWER, "the reader's whole answer");
    assert!(
        body.iter().enumerate().all(|(offset, byte)| *byte == byte_at(offset)),
        "intact"
    );

    // The deaf callers' connections were cut, their answers far from whole.
    for mut deaf in deaf_callers {
        let mut got = 0;
        let mut buf = vec![0u8; 64 * 1024];
        let ended = tokio::time::timeout(HANG, async {
            loop {
                match deaf.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "a deaf caller's connection is still open");
        assert!(got < ANSWER, "a deaf caller had its whole answer ({got} bytes)");
    }
}
