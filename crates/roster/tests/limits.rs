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
    let o = roster()
        .args(["serve", "--check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
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
