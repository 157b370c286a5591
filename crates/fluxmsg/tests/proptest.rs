//! Property tests: encode/decode round trips, and arbitrary bytes never
//! panic the decoder.

use fluxmsg::{decode, flag, Message, MsgType, DEFAULT_MAX_MESSAGE};
use proptest::prelude::*;

fn msg_type() -> impl Strategy<Value = MsgType> {
    prop_oneof![
        Just(MsgType::Request),
        Just(MsgType::Response),
        Just(MsgType::Event),
        Just(MsgType::Control),
    ]
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    // Mostly short frames, sometimes across the 255-byte boundary.
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => proptest::collection::vec(any::<u8>(), 240..max),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        msg_type(),
        any::<u8>(),
        any::<[u32; 4]>(),
        proptest::option::of(proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..40),
            0..4,
        )),
        proptest::option::of("[^\0]{0,300}"),
        proptest::option::of(bytes(600)),
    )
        .prop_map(|(msg_type, flags, aux, routes, topic, payload)| Message {
            msg_type,
            flags: flags & !flag::STRUCTURAL,
            userid: aux[0],
            rolemask: aux[1],
            aux1: aux[2],
            aux2: aux[3],
            routes,
            topic,
            payload,
        })
}

proptest! {
    #[test]
    fn decode_encode_round_trip(m in message()) {
        let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
        prop_assert_eq!(bytes.len() as u64, m.frames_len() + 8);
        let (back, used) = decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(&back, &m);
        // Every proper prefix is "not yet".
        let cut = bytes.len() / 2;
        prop_assert_eq!(decode(&bytes[..cut], DEFAULT_MAX_MESSAGE), Ok(None));
    }

    #[test]
    fn string_payload_round_trip(s in "[^\0]{0,100}") {
        let mut m = Message::request("t.x", 1);
        m.set_payload_str(&s);
        let back = decode(&m.encode(DEFAULT_MAX_MESSAGE).unwrap(), DEFAULT_MAX_MESSAGE)
            .unwrap().unwrap().0;
        prop_assert_eq!(back.payload_str().unwrap(), Some(s.as_str()));
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(m) = Message::decode_frames(&data) {
            // Whatever decodes re-encodes to something that decodes the same.
            let again = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
            prop_assert_eq!(decode(&again, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0, m);
        }
        let _ = decode(&data, 64);
    }

    #[test]
    fn mutated_messages_never_panic(m in message(), at in any::<usize>(), byte in any::<u8>()) {
        let mut bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
        let i = at % bytes.len();
        bytes[i] = byte;
        if let Ok(Some((m2, _))) = decode(&bytes, DEFAULT_MAX_MESSAGE) {
            let again = m2.encode(DEFAULT_MAX_MESSAGE).unwrap();
            prop_assert_eq!(decode(&again, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0, m2);
        }
    }
}
