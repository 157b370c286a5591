//! The HTTP/1.1 responses the listeners write without hyper: a one-shot
//! call's reply ([`crate::quick`]: from a snapshot, or written by the
//! service loop itself) and the refusal of a connection over a cap.  One
//! writer for all of them, which writes what the HTTP path (hyper) sends
//! for the same answer to a `Connection: close` request: the status line,
//! the headers in hyper's order, the body.

use rpc::{wire, Reply, RpcError};

/// The bytes of a complete response with `body` (JSON, or nothing), and
/// `x-roster-errnum` for an error; the connection closes after it.
pub(crate) fn response_bytes(status: u16, errnum: Option<i32>, body: &[u8], date: &str) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut out = Vec::with_capacity(body.len() + 160);
    // Appended piece by piece (no formatting machinery: the service loop
    // writes one of these per call).
    out.extend_from_slice(b"HTTP/1.1 ");
    push_int(&mut out, i64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    if !body.is_empty() {
        out.extend_from_slice(b"content-type: ");
        out.extend_from_slice(wire::JSON.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(n) = errnum {
        out.extend_from_slice(wire::ERRNUM_HEADER.as_bytes());
        out.extend_from_slice(b": ");
        push_int(&mut out, i64::from(n));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\ncontent-length: ");
    push_int(&mut out, i64::try_from(body.len()).unwrap_or(i64::MAX));
    out.extend_from_slice(b"\r\ndate: ");
    out.extend_from_slice(date.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out
}

/// The decimal digits of `n` (with its sign), as `{n}` formats it.
fn push_int(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(idset::decimal(n.unsigned_abs(), &mut [0; 20]));
}

/// The response for one reply of the service (a payload, or an error
/// with its HTTP status).
pub(crate) fn reply_bytes(reply: &Reply, date: &str) -> Vec<u8> {
    match reply {
        Ok(rpc::Payload::Json(s)) if &**s != "null" => {
            response_bytes(200, None, s.as_bytes(), date)
        }
        Ok(p) => response_bytes(200, None, wire::payload_body(p).as_bytes(), date),
        Err(e) => error_bytes(e, date),
    }
}

/// The response for an error.
pub(crate) fn error_bytes(e: &RpcError, date: &str) -> Vec<u8> {
    let body = serde_json::to_string(&wire::error_json(e)).unwrap_or_default();
    response_bytes(
        wire::http_status(e.errnum),
        Some(e.errnum),
        body.as_bytes(),
        date,
    )
}

/// The `date` header's value for now.  It names whole seconds: each
/// thread formats it once a second and copies it for the other replies
/// of that second.
pub(crate) fn date_now() -> String {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static LAST: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let Ok(since) = now.duration_since(UNIX_EPOCH) else {
        return httpdate::fmt_http_date(now);
    };
    let secs = since.as_secs();
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != secs {
            *last = (secs, httpdate::fmt_http_date(now));
        }
        last.1.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Fri, 27 Nov 2026 15:06:58 GMT";

    #[test]
    fn replies_are_written_as_the_http_path_writes_them() {
        let ok: Reply = Ok(rpc::Payload::json("{\"a\":1}"));
        assert_eq!(
            std::str::from_utf8(&reply_bytes(&ok, DATE)).unwrap(),
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\
             content-length: 7\r\ndate: Fri, 27 Nov 2026 15:06:58 GMT\r\n\r\n{\"a\":1}"
        );
        let value: Reply = Ok(serde_json::json!({"a": 1}).into());
        assert_eq!(reply_bytes(&value, DATE), reply_bytes(&ok, DATE));
        let none: Reply = Ok(serde_json::Value::Null.into());
        assert_eq!(
            std::str::from_utf8(&reply_bytes(&none, DATE)).unwrap(),
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\
             date: Fri, 27 Nov 2026 15:06:58 GMT\r\n\r\n"
        );
        let err: Reply = Err(RpcError::new(rpc::errno::EINVAL, "bad"));
        assert_eq!(
            std::str::from_utf8(&reply_bytes(&err, DATE)).unwrap(),
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
             x-roster-errnum: 22\r\nconnection: close\r\ncontent-length: 28\r\n\
             date: Fri, 27 Nov 2026 15:06:58 GMT\r\n\r\n{\"errnum\":22,\"errstr\":\"bad\"}"
        );
    }

    #[test]
    fn numbers_are_written_as_format_writes_them() {
        for n in [0, 7, 10, 99, 200, 503, 65535, -1, -22, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            push_int(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }

    #[test]
    fn the_date_is_the_current_second_formatted_once() {
        let before = std::time::SystemTime::now();
        let a = date_now();
        let b = date_now();
        let after = std::time::SystemTime::now();
        let t = httpdate::parse_http_date(&a).unwrap();
        let second = std::time::Duration::from_secs(1);
        assert!(t + second > before && t <= after, "{a}");
        let tb = httpdate::parse_http_date(&b).unwrap();
        assert!(tb >= t && tb <= after, "{b}");
    }

    #[test]
    fn a_refusal_at_a_cap_is_a_503_with_its_errnum() {
        let e = RpcError::new(rpc::errno::EAGAIN, "too many connections");
        let text = String::from_utf8(error_bytes(&e, DATE)).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nx-roster-errnum: 11\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\n{\"errnum\":11,\"errstr\":\"too many connections\"}"),
            "{text}"
        );
    }
}
