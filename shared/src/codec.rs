//! Frame layout: `[u32 BE header length][postcard header][body bytes]`.
//!
//! Pure functions, no I/O. Decoding never panics: every malformed frame is a
//! [`DecodeError`], and the connection that sent it is closed with its text.
//! Encoding refuses, as an [`EncodeError`], every frame that decoding would
//! refuse: a sender learns that a message does not fit before the peer
//! closes the whole connection over it.

use bytes::Bytes;
use serde::{de::DeserializeOwned, Serialize};

use crate::message::{Framed, CHUNK_SIZE, MAX_HEADER_BYTES};

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the length prefix or the header needs.
    #[error("frame truncated: {0}")]
    Truncated(&'static str),
    /// Header length over [`MAX_HEADER_BYTES`].
    #[error("frame header of {0} bytes is over the limit")]
    HeaderTooLarge(usize),
    /// Body longer than one chunk.
    #[error("frame body of {0} bytes is over the chunk size")]
    BodyTooLarge(usize),
    /// Body bytes on a message that carries none.
    #[error("frame carries {0} body bytes on a message without a body")]
    UnexpectedBody(usize),
    /// The header bytes are not a message of this protocol version.
    #[error("malformed frame header: {0}")]
    Header(String),
}

/// Why a message could not be encoded: its frame would break a limit that
/// [`decode`] enforces, and the peer would close the connection over it.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    /// The encoded header would be over [`MAX_HEADER_BYTES`].
    #[error("frame header of {0} bytes is over the limit of {MAX_HEADER_BYTES}")]
    HeaderTooLarge(usize),
    /// The body is longer than one chunk.
    #[error("frame body of {0} bytes is over the chunk size of {CHUNK_SIZE}")]
    BodyTooLarge(usize),
    /// Body bytes on a message that carries none.
    #[error("{0} body bytes on a message without a body")]
    UnexpectedBody(usize),
}

/// Encodes `msg` and `body` into one frame, or says which limit of
/// [`decode`] the frame would break.
pub fn encode<M: Serialize + Framed>(msg: &M, body: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(4 + msg.encoded_hint() + body.len());
    out.extend_from_slice(&[0; 4]);
    // Serialising our own enums into a Vec cannot fail: no maps with
    // non-string keys, no unsized sequences.
    let mut out = postcard::to_extend(msg, out).unwrap_or_else(|_| unreachable!("postcard to Vec"));
    // Checked in the order `decode` checks, so both name the same limit.
    let header_len = out.len() - 4;
    let prefix = u32::try_from(header_len)
        .ok()
        .filter(|_| header_len <= MAX_HEADER_BYTES)
        .ok_or(EncodeError::HeaderTooLarge(header_len))?;
    if !msg.carries_body() && !body.is_empty() {
        return Err(EncodeError::UnexpectedBody(body.len()));
    }
    if body.len() > CHUNK_SIZE {
        return Err(EncodeError::BodyTooLarge(body.len()));
    }
    out[..4].copy_from_slice(&prefix.to_be_bytes());
    for piece in body.chunks(COPY_PIECE) {
        out.extend_from_slice(piece);
    }
    Ok(out)
}

/// Body bytes go into a frame this many at a time. glibc copies anything
/// from about 2 KiB up with `rep movsb`, which on the AMD EPYC machines the
/// benchmarks run on took the relay 40% of its time for 1 MiB bodies;
/// pieces under that size take its vector loop, which moved the same bytes
/// in a quarter of the time, and costs nothing where `rep movsb` is fast.
const COPY_PIECE: usize = 2048;

/// Decodes one frame into its message and body (a zero-copy slice of it).
pub fn decode<M: DeserializeOwned + Framed>(frame: Bytes) -> Result<(M, Bytes), DecodeError> {
    let (header, body) = split(&frame)?;
    let (msg, rest): (M, _) = postcard::take_from_bytes(header).map_err(|e| DecodeError::Header(e.to_string()))?;
    // Bytes after the message would be kept in memory with the body, which
    // is a slice of the frame, without counting against any window.
    if !rest.is_empty() {
        return Err(DecodeError::Header(format!("{} bytes after the message", rest.len())));
    }
    if !msg.carries_body() && !body.is_empty() {
        return Err(DecodeError::UnexpectedBody(body.len()));
    }
    if body.len() > CHUNK_SIZE {
        return Err(DecodeError::BodyTooLarge(body.len()));
    }
    let start = frame.len() - body.len();
    Ok((msg, frame.slice(start..)))
}

/// Reads the protocol version from a client's first frame, whatever the rest
/// of it holds, so a relay can name the mismatch instead of failing to parse.
pub fn hello_version(frame: &[u8]) -> Option<u32> {
    let (header, _) = split(frame).ok()?;
    let ((variant, protocol), _): ((u32, u32), _) = postcard::take_from_bytes(header).ok()?;
    (variant == 0).then_some(protocol)
}

fn split(frame: &[u8]) -> Result<(&[u8], &[u8]), DecodeError> {
    let Some((prefix, rest)) = frame.split_first_chunk::<4>() else {
        return Err(DecodeError::Truncated("no length prefix"));
    };
    let header_len = u32::from_be_bytes(*prefix) as usize;
    if header_len > MAX_HEADER_BYTES {
        return Err(DecodeError::HeaderTooLarge(header_len));
    }
    if rest.len() < header_len {
        return Err(DecodeError::Truncated("header shorter than its length"));
    }
    Ok(rest.split_at(header_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ClientMessage, Header, ServerMessage, PROTOCOL_VERSION};
    use proptest::prelude::*;

    /// A frame laid out without any of `encode`'s checks: what a broken or
    /// hostile peer could send.
    fn unchecked<M: Serialize>(msg: &M, body: &[u8]) -> Vec<u8> {
        let header = postcard::to_allocvec(msg).unwrap();
        let mut frame = (header.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&header);
        frame.extend_from_slice(body);
        frame
    }

    fn round_trip<M>(msg: M, body: &[u8])
    where
        M: Serialize + DeserializeOwned + Framed + PartialEq + std::fmt::Debug,
    {
        let frame = Bytes::from(encode(&msg, body).expect("encodes"));
        let (back, back_body) = decode::<M>(frame).expect("decodes");
        assert_eq!(back, msg);
        assert_eq!(&back_body[..], body);
    }

    #[test]
    fn every_message_round_trips() {
        round_trip(
            ClientMessage::Hello {
                protocol: PROTOCOL_VERSION,
                client_version: "0.1.0".into(),
                name: Some("calm-otter".into()),
            },
            b"",
        );
        round_trip(
            ClientMessage::ResponseHead {
                stream: 7,
                status: 204,
                headers: vec![
                    Header::new("set-cookie", "a=1"),
                    Header::new("set-cookie", vec![0xff, 0]),
                ],
                end: true,
            },
            b"",
        );
        round_trip(ClientMessage::ResponseBody { stream: 7, end: false }, &[0u8, 1, 2, 255]);
        round_trip(
            ClientMessage::Reset {
                stream: 1,
                reason: "x".into(),
            },
            b"",
        );
        round_trip(
            ClientMessage::Window {
                stream: 1,
                credit: 65536,
            },
            b"",
        );
        round_trip(
            ServerMessage::Welcome {
                protocol: 1,
                name: "n".into(),
                public_url: "http://127.0.0.1:1/t/n".into(),
                resume: "0f1e2d3c".into(),
            },
            b"",
        );
        round_trip(ServerMessage::Refused { reason: "no".into() }, b"");
        round_trip(
            ServerMessage::RequestHead {
                stream: u64::MAX,
                method: "POST".into(),
                target: "/hook?a=1&a=2&%E2%9C%93".into(),
                headers: vec![],
                end: false,
            },
            b"",
        );
        round_trip(
            ServerMessage::RequestHead {
                stream: 4,
                method: "POST".into(),
                target: "/hook".into(),
                headers: vec![Header::new("content-type", "application/json")],
                end: true,
            },
            br#"{"id":"evt_1"}"#,
        );
        round_trip(
            ClientMessage::ResponseHead {
                stream: 4,
                status: 200,
                headers: vec![],
                end: true,
            },
            b"ok",
        );
        round_trip(
            ServerMessage::RequestBody { stream: 3, end: true },
            &vec![9u8; CHUNK_SIZE],
        );
        // Bytes that differ everywhere, over a length no piece size divides:
        // a body copied piece by piece must come back in order and whole.
        let varied: Vec<u8> = (0..CHUNK_SIZE - 3).map(|i| (i % 251) as u8).collect();
        round_trip(ClientMessage::ResponseBody { stream: 3, end: false }, &varied);
        round_trip(
            ServerMessage::Reset {
                stream: 3,
                reason: "gone".into(),
            },
            b"",
        );
        round_trip(ServerMessage::Window { stream: 3, credit: 1 }, b"");
        round_trip(
            ServerMessage::TurnedAway {
                method: "POST".into(),
                target: "/hooks/stripe".into(),
                headers: vec![Header::new("stripe-signature", "t=1,v1=ab")],
                body_size: Some(26_214_401),
                status: 413,
                reason: "request body over the relay's limit of 25 MiB (26214400 bytes)".into(),
                waited_ms: 3,
                told_after_ms: 0,
            },
            b"",
        );
        round_trip(
            ServerMessage::TurnedAway {
                method: "POST".into(),
                target: "/hooks/stripe".into(),
                headers: vec![Header::new("stripe-signature", "t=1,v1=ab")],
                body_size: Some(120),
                status: 503,
                reason: "tunnel shop is reconnecting".into(),
                waited_ms: 0,
                told_after_ms: 41_250,
            },
            b"",
        );
    }

    /// A head's frame is written into the room made for it at first: its
    /// body is never moved to a larger buffer half way.
    #[test]
    fn the_room_made_for_a_head_holds_it() {
        let headers = vec![
            Header::new("host", "relay.example:8080"),
            Header::new("content-type", "application/json"),
            Header::new("stripe-signature", vec![b's'; 300]),
            Header::new("x-forwarded-for", "203.0.113.7"),
        ];
        let request = ServerMessage::RequestHead {
            stream: u64::MAX,
            method: "POST".into(),
            target: "/hooks/stripe?a=1".into(),
            headers: headers.clone(),
            end: true,
        };
        let answer = ClientMessage::ResponseHead {
            stream: u64::MAX,
            status: 200,
            headers,
            end: true,
        };
        assert!(postcard::to_allocvec(&request).unwrap().len() <= request.encoded_hint());
        assert!(postcard::to_allocvec(&answer).unwrap().len() <= answer.encoded_hint());
        let reset = ClientMessage::Reset {
            stream: u64::MAX,
            reason: "x".repeat(100),
        };
        assert!(postcard::to_allocvec(&reset).unwrap().len() <= reset.encoded_hint());
    }

    #[test]
    fn header_values_encode_exactly_as_a_plain_byte_sequence() {
        #[derive(Serialize)]
        struct Plain {
            name: String,
            value: Vec<u8>,
        }
        let value = vec![0u8, 127, 128, 255];
        let plain = Plain {
            name: "x-sig".into(),
            value: value.clone(),
        };
        assert_eq!(
            postcard::to_allocvec(&Header::new("x-sig", value)).unwrap(),
            postcard::to_allocvec(&plain).unwrap()
        );
    }

    #[test]
    fn hello_version_reads_any_client() {
        let frame = encode(
            &ClientMessage::Hello {
                protocol: 42,
                client_version: "9.9".into(),
                name: None,
            },
            b"",
        )
        .unwrap();
        assert_eq!(hello_version(&frame), Some(42));
        let other = encode(&ClientMessage::Window { stream: 1, credit: 1 }, b"").unwrap();
        assert_eq!(hello_version(&other), None);
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert!(matches!(
            decode::<ServerMessage>(Bytes::new()),
            Err(DecodeError::Truncated(_))
        ));
        assert!(matches!(
            decode::<ServerMessage>(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff])),
            Err(DecodeError::HeaderTooLarge(_))
        ));
        assert!(matches!(
            decode::<ServerMessage>(Bytes::from_static(&[0, 0, 0, 9, 1])),
            Err(DecodeError::Truncated(_))
        ));
        let with_body = unchecked(&ServerMessage::Window { stream: 1, credit: 1 }, b"stray");
        assert_eq!(
            decode::<ServerMessage>(Bytes::from(with_body)),
            Err(DecodeError::UnexpectedBody(5))
        );
        let big = unchecked(
            &ServerMessage::RequestBody { stream: 1, end: true },
            &vec![0; CHUNK_SIZE + 1],
        );
        assert_eq!(
            decode::<ServerMessage>(Bytes::from(big)),
            Err(DecodeError::BodyTooLarge(CHUNK_SIZE + 1))
        );
        let big_head = unchecked(
            &ClientMessage::ResponseHead {
                stream: 1,
                status: 200,
                headers: vec![],
                end: true,
            },
            &vec![0; CHUNK_SIZE + 1],
        );
        assert_eq!(
            decode::<ClientMessage>(Bytes::from(big_head)),
            Err(DecodeError::BodyTooLarge(CHUNK_SIZE + 1))
        );
        // A header padded past its message: the padding would ride along
        // with a one-byte body, in memory, counted against nothing.
        let header = postcard::to_allocvec(&ClientMessage::ResponseBody { stream: 1, end: false }).unwrap();
        let padded_len = header.len() + 1000;
        let mut padded = (padded_len as u32).to_be_bytes().to_vec();
        padded.extend_from_slice(&header);
        padded.extend_from_slice(&[0; 1000]);
        padded.push(b'x');
        assert_eq!(
            decode::<ClientMessage>(Bytes::from(padded)),
            Err(DecodeError::Header("1000 bytes after the message".into()))
        );
    }

    /// A response head whose header section encodes to exactly `len` bytes.
    fn head_of_encoded_len(len: usize) -> ClientMessage {
        let head = |value_len: usize| ClientMessage::ResponseHead {
            stream: 1,
            status: 200,
            headers: vec![Header::new("set-cookie", vec![b'c'; value_len])],
            end: true,
        };
        let empty = postcard::to_allocvec(&head(0)).unwrap().len();
        // The value's length prefix grows from one byte to three.
        let msg = head(len - empty - 2);
        assert_eq!(postcard::to_allocvec(&msg).unwrap().len(), len);
        msg
    }

    #[test]
    fn encode_refuses_exactly_at_the_limits_decode_enforces() {
        let at_limit = head_of_encoded_len(MAX_HEADER_BYTES);
        let frame = encode(&at_limit, &vec![1; CHUNK_SIZE]).expect("a frame at both limits");
        assert_eq!(frame.len(), crate::message::MAX_FRAME_BYTES);
        assert!(decode::<ClientMessage>(Bytes::from(frame)).is_ok());

        let over = head_of_encoded_len(MAX_HEADER_BYTES + 1);
        assert_eq!(
            encode(&over, b""),
            Err(EncodeError::HeaderTooLarge(MAX_HEADER_BYTES + 1))
        );
        assert_eq!(
            decode::<ClientMessage>(Bytes::from(unchecked(&over, b""))),
            Err(DecodeError::HeaderTooLarge(MAX_HEADER_BYTES + 1))
        );
        assert_eq!(
            encode(&at_limit, &vec![1; CHUNK_SIZE + 1]),
            Err(EncodeError::BodyTooLarge(CHUNK_SIZE + 1))
        );
        assert_eq!(
            encode(&ClientMessage::Window { stream: 1, credit: 1 }, b"stray"),
            Err(EncodeError::UnexpectedBody(5))
        );
    }

    /// Text mostly short, sometimes long enough to fill a frame header alone.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => ".{0,12}",
            1 => (60_000..70_000usize).prop_map(|n| "x".repeat(n)),
        ]
    }

    /// Up to three headers, whose values together straddle the header limit.
    fn headers() -> impl Strategy<Value = Vec<Header>> {
        let value = prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 0..16),
            1 => (60_000..70_000usize).prop_map(|n| vec![0xa5; n]),
        ];
        proptest::collection::vec(
            (".{0,8}", value).prop_map(|(name, value)| Header::new(name, value)),
            0..4,
        )
    }

    /// Bodies empty, small, or within a couple of bytes of the chunk size.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(Vec::new()),
            proptest::collection::vec(any::<u8>(), 1..16),
            (CHUNK_SIZE - 2..=CHUNK_SIZE + 2).prop_map(|n| vec![7; n]),
        ]
    }

    fn client_message() -> impl Strategy<Value = ClientMessage> {
        prop_oneof![
            (any::<u32>(), text(), proptest::option::of(text())).prop_map(|(protocol, client_version, name)| {
                ClientMessage::Hello {
                    protocol,
                    client_version,
                    name,
                }
            }),
            (any::<u64>(), any::<u16>(), headers(), any::<bool>()).prop_map(|(stream, status, headers, end)| {
                ClientMessage::ResponseHead {
                    stream,
                    status,
                    headers,
                    end,
                }
            }),
            (any::<u64>(), any::<bool>()).prop_map(|(stream, end)| ClientMessage::ResponseBody { stream, end }),
            (any::<u64>(), text()).prop_map(|(stream, reason)| ClientMessage::Reset { stream, reason }),
            (any::<u64>(), any::<u32>()).prop_map(|(stream, credit)| ClientMessage::Window { stream, credit }),
        ]
    }

    fn server_message() -> impl Strategy<Value = ServerMessage> {
        prop_oneof![
            (any::<u32>(), text(), text(), text()).prop_map(|(protocol, name, public_url, resume)| {
                ServerMessage::Welcome {
                    protocol,
                    name,
                    public_url,
                    resume,
                }
            }),
            text().prop_map(|reason| ServerMessage::Refused { reason }),
            (any::<u64>(), text(), text(), headers(), any::<bool>()).prop_map(
                |(stream, method, target, headers, end)| ServerMessage::RequestHead {
                    stream,
                    method,
                    target,
                    headers,
                    end,
                }
            ),
            (any::<u64>(), any::<bool>()).prop_map(|(stream, end)| ServerMessage::RequestBody { stream, end }),
            (any::<u64>(), text()).prop_map(|(stream, reason)| ServerMessage::Reset { stream, reason }),
            (any::<u64>(), any::<u32>()).prop_map(|(stream, credit)| ServerMessage::Window { stream, credit }),
            (
                text(),
                text(),
                headers(),
                any::<Option<u64>>(),
                any::<u16>(),
                text(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(
                    |(method, target, headers, body_size, status, reason, waited_ms, told_after_ms)| {
                        ServerMessage::TurnedAway {
                            method,
                            target,
                            headers,
                            body_size,
                            status,
                            reason,
                            waited_ms,
                            told_after_ms,
                        }
                    }
                ),
        ]
    }

    /// What `encode` accepts, `decode` accepts and gives back unchanged; what
    /// it refuses, `decode` refuses for the same reason.
    fn encode_agrees_with_decode<M>(msg: M, body: &[u8]) -> Result<(), TestCaseError>
    where
        M: Serialize + DeserializeOwned + Framed + PartialEq + std::fmt::Debug,
    {
        let decoded = decode::<M>(Bytes::from(unchecked(&msg, body)));
        match encode(&msg, body) {
            Ok(frame) => {
                prop_assert_eq!(&frame, &unchecked(&msg, body), "the checks change no byte");
                let (back, back_body) = decode::<M>(Bytes::from(frame))
                    .map_err(|err| TestCaseError::fail(format!("encoded, yet decode refuses it: {err}")))?;
                prop_assert_eq!(back, msg);
                prop_assert_eq!(&back_body[..], body);
            }
            Err(refused) => {
                let expected = match refused {
                    EncodeError::HeaderTooLarge(n) => DecodeError::HeaderTooLarge(n),
                    EncodeError::BodyTooLarge(n) => DecodeError::BodyTooLarge(n),
                    EncodeError::UnexpectedBody(n) => DecodeError::UnexpectedBody(n),
                };
                prop_assert_eq!(decoded.err(), Some(expected));
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode::<ServerMessage>(Bytes::from(bytes.clone()));
            let _ = decode::<ClientMessage>(Bytes::from(bytes.clone()));
            let _ = hello_version(&bytes);
        }

        #[test]
        fn client_frames_encode_exactly_when_they_decode(msg in client_message(), body in body()) {
            encode_agrees_with_decode(msg, &body)?;
        }

        #[test]
        fn server_frames_encode_exactly_when_they_decode(msg in server_message(), body in body()) {
            encode_agrees_with_decode(msg, &body)?;
        }

        #[test]
        fn mutated_frames_never_panic(
            stream in any::<u64>(),
            name in ".{0,20}",
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            cut in any::<usize>(),
        ) {
            let mut frame = encode(
                &ServerMessage::RequestHead {
                    stream,
                    method: "POST".into(),
                    target: format!("/{name}"),
                    headers: vec![Header::new(name.clone(), name.as_bytes())],
                    end: false,
                },
                b"",
            )
            .unwrap();
            for (at, byte) in flips {
                let len = frame.len();
                frame[at % len] = byte;
            }
            frame.truncate(cut % (frame.len() + 1));
            let _ = decode::<ServerMessage>(Bytes::from(frame.clone()));
            let _ = decode::<ClientMessage>(Bytes::from(frame));
        }
    }
}
