//! `[serve]` limits reach the real daemon's listeners.

mod common;

use common::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn serve_limit_keys_are_checked_and_applied() {
    let s = Scratch::new("limits");
    let bad = s.write(
        "bad.toml",
        &format!("{}[serve]\nmax-inflight = 0\n", fake_config(2, "")),
    );
    let err = check_fails(&bad);
    assert!(
        err.contains("[serve]: max-inflight must be at least 1, got 0"),
        "{err}"
    );

    let mut d = start(
        &s,
        &format!("{}[serve]\nrequest-timeout = \"1s\"\n", fake_config(2, "")),
        &[],
    );
    // A body that never completes is answered 408 after request-timeout.
    let mut c = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    c.write_all(b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n{")
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("within 1s (request-timeout)"), "{text}");
    assert!(start.elapsed() >= Duration::from_millis(900));
    // The daemon is fine.
    assert!(d.rpc("resource.status", serde_json::json!({})).is_ok());
    d.stop();
}

/// The streaming flag on a one-reply topic is answered with one EPROTO
/// error on both listeners, and the request's place is freed (with
/// `max-inflight = 1`, the next request on the same Flux connection is
/// served, not refused EAGAIN).
#[test]
fn streaming_flag_on_a_one_reply_topic_is_refused_with_eproto() {
    let s = Scratch::new("stream-eproto");
    let cfg = format!("{}[serve]\nmax-inflight = 1\n", fake_config(2, ""));
    let (d, mut c) = start_flux(&s, &cfg);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for tag in [3, 5] {
        flux_wire::request_flags(&mut c, "resource.status", Some("{}"), tag, 0x40);
        let (frames, errnum, t) = flux_wire::response(&mut c);
        assert_eq!((errnum, t), (71, tag), "EPROTO for tag {tag}");
        assert_eq!(
            frames[2],
            b"resource.status does not accept the streaming RPC flag\0".to_vec()
        );
        // The next request on this connection is served: nothing more
        // arrives for the refused one, and it holds no in-flight slot.
        flux_wire::request(&mut c, "resource.status", Some("{}"), tag + 1);
        let (_, errnum, t) = flux_wire::response(&mut c);
        assert_eq!((errnum, t), (0, tag + 1));
    }

    // HTTP: `x-roster-streaming: 1` → one NDJSON error line, stream ends.
    let mut h = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
    h.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    h.write_all(
        b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\nx-roster-streaming: 1\r\n\
          content-length: 2\r\nconnection: close\r\n\r\n{}",
    )
    .unwrap();
    let mut text = String::new();
    h.read_to_string(&mut text).unwrap();
    assert!(
        text.contains("resource.status does not accept the streaming RPC flag"),
        "{text}"
    );
    assert!(text.contains("71"), "{text}");
    // Through the client's streaming call as well.
    let err = match d.client().stream("resource.status", serde_json::json!({})) {
        Err(e) => e,
        Ok(mut st) => {
            let e = st.next().expect("one reply").expect_err("an error");
            assert!(st.next().is_none(), "the stream ended");
            e
        }
    };
    match err {
        client::ClientError::Rpc(e) => assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (
                71,
                Some("resource.status does not accept the streaming RPC flag")
            )
        ),
        e => panic!("{e:?}"),
    }
}
