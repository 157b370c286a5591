#![no_main]
//! Decode arbitrary text as an RFC 18 eventlog; every event that decodes
//! must encode and decode back to itself.
use eventlog::{decode_log, Event};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = Event::decode(text);
    let Ok(events) = decode_log(text) else { return };
    for e in &events {
        let line = e.encode().expect("decoded event must encode");
        let again = Event::decode(&line).expect("encoded event must decode");
        assert_eq!(&again, e);
    }
});
