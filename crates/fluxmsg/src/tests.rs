//! Golden byte sequences (from ../shared/reference/flux-wire-clients.md)
//! and unit tests.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn preamble(len: u32) -> Vec<u8> {
    let mut v = PREAMBLE_MAGIC.to_ne_bytes().to_vec();
    v.extend_from_slice(&len.to_be_bytes());
    v
}

/// `flux.Flux().rpc("resource.status")`, byte for byte.
fn status_request_bytes() -> Vec<u8> {
    let mut b = preamble(0x26);
    b.push(0x00);
    b.push(0x0f);
    b.extend_from_slice(b"resource.status");
    b.extend(hex("14 8e 01 01 09 ffffffff 00000000 ffffffff 00000001"));
    b
}

#[test]
fn preamble_is_native_magic_then_big_endian_length() {
    if cfg!(target_endian = "little") {
        assert_eq!(preamble(0x26), hex("12 00 ee ff 00 00 00 26"));
    }
}

#[test]
fn golden_resource_status_request() {
    let bytes = status_request_bytes();
    let (m, used) = decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    assert_eq!(
        m,
        Message {
            msg_type: MsgType::Request,
            flags: 0,
            userid: USERID_UNKNOWN,
            rolemask: 0,
            aux1: NODEID_ANY,
            aux2: 1,
            routes: Some(vec![]),
            topic: Some("resource.status".into()),
            payload: None,
        }
    );
    assert_eq!(m.flags(), flag::TOPIC | flag::ROUTE);
    assert_eq!(m, Message::request("resource.status", 1));
    assert_eq!(m.encode(DEFAULT_MAX_MESSAGE).unwrap(), bytes);
}

/// The successful `resource.drain` response of the reference notes.  The
/// notes print its flags byte as `0a` but name it TOPIC|ROUTE, which is
/// `09`; `0a` (PAYLOAD|ROUTE) would make the topic frame the payload, which
/// the client rejects (EPROTO), so the byte is a transcription slip and
/// the named flags are used here.
#[test]
fn golden_resource_drain_response() {
    let mut bytes = preamble(0x25);
    bytes.push(0x00);
    bytes.push(0x0e);
    bytes.extend_from_slice(b"resource.drain");
    bytes.extend(hex("14 8e 01 02 09 00000000 00000005 00000000 00000001"));
    let mut req = Message::request("resource.drain", 1);
    req.aux1 = 0;
    let mut resp = Message::response_to(&req);
    resp.userid = 0;
    resp.rolemask = role::OWNER | role::LOCAL;
    assert_eq!(resp.encode(DEFAULT_MAX_MESSAGE).unwrap(), bytes);
    let (back, _) = decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap();
    assert_eq!(back, resp);
}

#[test]
fn golden_drain_request_payload_has_trailing_nul() {
    let json = r#"{"targets": "1", "reason": "foo"}"#;
    let mut m = Message::request("resource.drain", 1);
    m.aux1 = 0;
    m.set_payload_str(json);
    assert_eq!(m.payload.as_ref().unwrap().len(), 34);
    let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
    let mut expect = preamble(1 + 15 + 35 + 21);
    expect.push(0);
    expect.push(14);
    expect.extend_from_slice(b"resource.drain");
    expect.push(34);
    expect.extend_from_slice(json.as_bytes());
    expect.push(0);
    expect.extend(hex("14 8e 01 01 0b ffffffff 00000000 00000000 00000001"));
    assert_eq!(bytes, expect);
    assert_eq!(m.payload_str().unwrap(), Some(json));
}

#[test]
fn golden_streaming_journal_and_enodata_end() {
    // resource.journal {} with TOPIC|PAYLOAD|ROUTE|STREAMING.
    let mut req = Message::request("resource.journal", 1);
    req.aux1 = 0;
    req.flags = flag::STREAMING;
    req.set_payload_str("{}");
    assert_eq!(req.flags(), 0x4b);
    let mut end = Message::response_to(&req);
    end.aux1 = 61;
    end.rolemask = 5;
    end.userid = 0;
    let bytes = end.encode(DEFAULT_MAX_MESSAGE).unwrap();
    let mut expect = preamble(1 + 17 + 21);
    expect.push(0);
    expect.push(16);
    expect.extend_from_slice(b"resource.journal");
    expect.extend(hex("14 8e 01 02 49 00000000 00000005 0000003d 00000001"));
    assert_eq!(bytes, expect);
}

#[test]
fn long_frames_use_ff_and_a_big_endian_length() {
    for n in [253usize, 254, 255, 256, 70_000] {
        let mut m = Message::request("t", 2);
        m.payload = Some(vec![b'x'; n]);
        let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
        // preamble, delimiter, topic frame (2), then the payload frame.
        let at = PREAMBLE_SIZE + 1 + 2;
        if n < 255 {
            assert_eq!(bytes[at] as usize, n);
        } else {
            assert_eq!(bytes[at], 0xff);
            assert_eq!(
                u32::from_be_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize,
                n
            );
        }
        assert_eq!(decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0, m);
    }
}

#[test]
fn routes_are_read_up_to_the_first_empty_frame() {
    let mut m = Message::request("a.b", 3);
    m.routes = Some(vec![b"uuid-1".to_vec(), b"uuid-2".to_vec()]);
    let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
    assert_eq!(decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0, m);
    // Without ROUTE there is no delimiter at all.
    m.routes = None;
    let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
    assert_eq!(bytes[PREAMBLE_SIZE], 3);
    assert_eq!(decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0, m);
}

#[test]
fn incomplete_input_asks_for_more() {
    let bytes = status_request_bytes();
    for n in 0..bytes.len() {
        assert_eq!(decode(&bytes[..n], DEFAULT_MAX_MESSAGE), Ok(None), "{n}");
    }
    // Two messages back to back.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    let (_, used) = decode(&two, DEFAULT_MAX_MESSAGE).unwrap().unwrap();
    assert_eq!(used, bytes.len());
}

fn body_err(body: &[u8]) -> DecodeError {
    Message::decode_frames(body).unwrap_err()
}

const PROTO_REQ: &str = "14 8e 01 01 09 ffffffff 00000000 ffffffff 00000001";

#[test]
fn decode_errors_are_precise() {
    // Wrong magic, early and with a full preamble.
    assert_eq!(
        decode(b"GET ", DEFAULT_MAX_MESSAGE),
        Err(DecodeError::BadMagic {
            found: u32::from_ne_bytes(*b"GET ")
        })
    );
    assert!(matches!(
        decode(b"G", DEFAULT_MAX_MESSAGE),
        Err(DecodeError::BadMagic { .. })
    ));
    let mut p = preamble(10);
    p[0] ^= 1;
    assert!(matches!(
        decode_preamble(p[..8].try_into().unwrap(), 100),
        Err(DecodeError::BadMagic { .. })
    ));
    // Oversized length.
    let p = preamble(101);
    assert_eq!(
        decode_preamble(p[..8].try_into().unwrap(), 100),
        Err(DecodeError::TooLarge { len: 101, max: 100 })
    );
    assert_eq!(
        DecodeError::TooLarge { len: 101, max: 100 }.to_string(),
        "message of 101 bytes exceeds the limit of 100 bytes"
    );
    let req = |frames: &str| hex(&format!("{frames} {PROTO_REQ}"));
    let truncated = |needed, available| DecodeError::Truncated {
        index: 0,
        needed,
        available,
    };
    for (frames, want) in [
        (vec![], DecodeError::Empty),
        (hex("05 61 62"), truncated(5, 2)),
        (hex("ff 00 00"), truncated(4, 2)),
        (hex("ff ff ff ff ff 00"), truncated(0xffff_ffff, 1)),
        (hex("02 8e 01"), DecodeError::BadProtoSize(2)),
        (
            hex("14 8f 01 01 00 ffffffff 00000000 ffffffff 00000001"),
            DecodeError::BadProtoMagic(0x8f),
        ),
        (
            hex("14 8e 02 01 00 ffffffff 00000000 ffffffff 00000001"),
            DecodeError::BadProtoVersion(2),
        ),
        (
            hex("14 8e 01 03 00 ffffffff 00000000 ffffffff 00000001"),
            DecodeError::BadType(3),
        ),
        // ROUTE|TOPIC but no delimiter before PROTO.
        (req("01 61"), DecodeError::MissingRouteDelimiter),
        // ROUTE|TOPIC, delimiter, no topic.
        (req("00"), DecodeError::MissingTopic),
        // ROUTE|TOPIC|PAYLOAD, no payload.
        (
            hex("00 01 61 14 8e 01 01 0b ffffffff 00000000 ffffffff 00000001"),
            DecodeError::MissingPayload,
        ),
        (req("00 01 61 01 62 01 63"), DecodeError::TrailingFrames(2)),
        (req("00 01 ff"), DecodeError::TopicNotUtf8),
        (req("00 02 61 00"), DecodeError::TopicNul),
    ] {
        assert_eq!(body_err(&frames), want);
    }
}

#[test]
fn encode_errors() {
    let mut m = Message::request("x", 1);
    m.routes = Some(vec![b"a".to_vec(), vec![]]);
    assert_eq!(
        m.encode(DEFAULT_MAX_MESSAGE),
        Err(EncodeError::EmptyRouteId(1))
    );
    let m = Message::request("x\0y", 1);
    assert_eq!(m.encode(DEFAULT_MAX_MESSAGE), Err(EncodeError::TopicNul));
    let mut m = Message::request("x", 1);
    m.payload = Some(vec![0; 100]);
    assert_eq!(
        m.encode(64),
        Err(EncodeError::TooLarge {
            len: m.frames_len(),
            max: 64
        })
    );
}

#[test]
fn payload_strings() {
    let mut m = Message::request("x", 1);
    assert_eq!(m.payload_str(), Ok(None));
    m.payload = Some(b"{}".to_vec());
    assert_eq!(m.payload_str(), Err(PayloadError::NotTerminated));
    m.payload = Some(vec![]);
    assert_eq!(m.payload_str(), Err(PayloadError::NotTerminated));
    m.payload = Some(vec![0xff, 0]);
    assert_eq!(m.payload_str(), Err(PayloadError::NotUtf8));
    m.set_payload_str("");
    assert_eq!(m.payload, Some(vec![0]));
    assert_eq!(m.payload_str(), Ok(Some("")));
}

#[test]
fn structural_flags_follow_the_fields() {
    let mut m = Message::request("x", 1);
    m.flags = 0xff;
    assert_eq!(m.flags(), !flag::PAYLOAD);
    let bytes = m.encode(DEFAULT_MAX_MESSAGE).unwrap();
    let back = decode(&bytes, DEFAULT_MAX_MESSAGE).unwrap().unwrap().0;
    assert_eq!(back.flags, !flag::STRUCTURAL);
    assert!(back.has_flag(flag::STREAMING | flag::NORESPONSE));
    assert!(!back.has_flag(flag::PAYLOAD));
}
