#![no_main]
//! Decode arbitrary bytes as a stream of Flux messages (preamble + frames,
//! as the local connector reads them): never a panic; whatever decodes
//! must re-encode to bytes that decode to the same message.
use fluxmsg::{decode, Message, DEFAULT_MAX_MESSAGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A small limit so that "too large" paths are exercised too.
    let max = if data.first().is_some_and(|b| b & 1 == 1) {
        DEFAULT_MAX_MESSAGE
    } else {
        512
    };
    let mut rest = data;
    while let Ok(Some((m, used))) = decode(rest, max) {
        check(&m);
        rest = &rest[used..];
    }
    // The bare frame decoder on the whole input as well.
    if let Ok(m) = Message::decode_frames(data) {
        check(&m);
    }
});

fn check(m: &Message) {
    let bytes = m.encode(DEFAULT_MAX_MESSAGE).expect("a decoded message re-encodes");
    let (again, used) = decode(&bytes, DEFAULT_MAX_MESSAGE)
        .expect("re-encoded bytes decode")
        .expect("re-encoded bytes are complete");
    assert_eq!(used, bytes.len());
    assert_eq!(&again, m);
    let _ = m.payload_str();
}
