//! Frames arrive from the internet (relay side) and from the relay (client
//! side): decoding any bytes must return an error value, never panic, and a
//! frame that decodes must re-encode (encode refuses only what decode
//! refuses) and survive that unchanged in meaning.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use portpreview_shared::codec::{decode, encode, hello_version};
use portpreview_shared::{ClientMessage, ServerMessage};

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    if let Ok((msg, body)) = decode::<ServerMessage>(frame.clone()) {
        let frame = encode(&msg, &body).expect("a decoded server frame re-encodes");
        let again = decode::<ServerMessage>(Bytes::from(frame)).expect("re-encoded server frame decodes");
        assert_eq!(again, (msg, body));
    }
    if let Ok((msg, body)) = decode::<ClientMessage>(frame) {
        let frame = encode(&msg, &body).expect("a decoded client frame re-encodes");
        let again = decode::<ClientMessage>(Bytes::from(frame)).expect("re-encoded client frame decodes");
        assert_eq!(again, (msg, body));
    }
    let _ = hello_version(data);
});
