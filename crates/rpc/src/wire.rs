//! How the RPC layer maps onto HTTP/1.1 (the `unix://` and `tcp://`
//! listeners).  Server and clients both follow these rules; see
//! ARCHITECTURE.md for a curl walk-through.
//!
//! * **Request**: `POST /v1/<topic>` (e.g. `/v1/resource.drain`).  The body
//!   is the JSON payload; an empty body means "no payload".  The header
//!   [`STREAMING_HEADER`]` : 1` asks for a streaming reply (RFC 6 streaming
//!   flag).  Over TCP, [`AUTH_HEADER`] carries `Bearer <token>`.
//! * **Non-streaming reply**: HTTP 200 with the payload as body (empty body
//!   for an empty payload), or an error status (see [`http_status`]) with
//!   an [error object](error_json) as body and the errno in
//!   [`ERRNUM_HEADER`].
//! * **Streaming reply**: HTTP 200, `Content-Type: application/x-ndjson`,
//!   one JSON value per line.  Exactly one error object ends the stream
//!   (`errnum` 61, ENODATA, is the normal end).  An error object is a JSON
//!   object whose keys are `errnum` (integer) and optionally `errstr`
//!   (string) and nothing else; no resource payload has that shape.
//! * **Cancel**: closing the connection ends every request on it (the
//!   service drops them, RFC 6 disconnect).
//! * Failures before the RPC layer (no token, bad path, bad method, body
//!   not JSON) are answered like RPC errors: status + error object.

use crate::errno::*;
use crate::RpcError;
use serde_json::{Map, Value};

/// Path prefix of every endpoint.
pub const PATH_PREFIX: &str = "/v1/";
/// Request header asking for a streaming reply (value `1`).
pub const STREAMING_HEADER: &str = "x-roster-streaming";
/// Reply header carrying the errno of an error reply.
pub const ERRNUM_HEADER: &str = "x-roster-errnum";
/// Request header for the TCP token (`Bearer <token>`).
pub const AUTH_HEADER: &str = "authorization";
/// Content type of streaming replies.
pub const NDJSON: &str = "application/x-ndjson";
/// Content type of JSON bodies.
pub const JSON: &str = "application/json";
/// Largest request body accepted, in bytes.  R documents for 16k nodes are
/// a few KiB; `resource.reload` carries a path, not R.
pub const MAX_REQUEST_BODY: usize = 16 << 20;

/// The topic of an agent session: a streaming request whose chunked NDJSON
/// body stays open.  Its first line is the request payload (the hello);
/// every later line is delivered as a [`SESSION_LINE_TOPIC`] request on the
/// same connection (matchtags 2, 3, ...), whose replies are discarded.
/// The session ends when the body ends or the connection drops.
pub const SESSION_TOPIC: &str = <crate::catalog::AgentHello as crate::catalog::Call>::TOPIC;
/// The topic of the later lines of a session (heartbeats).
pub const SESSION_LINE_TOPIC: &str = <crate::catalog::SessionLine as crate::catalog::Call>::TOPIC;
/// The `Upgrade` protocol of an agent session that leaves HTTP once its
/// hello is accepted: the request (`Connection: upgrade`, `Upgrade:` this)
/// carries the hello as a complete body; a refused hello is an HTTP error
/// reply; an accepted one is `101 Switching Protocols`, after which the
/// connection is a plain NDJSON stream both ways (the welcome first, then
/// replies from the service; session lines from the agent; the agent's
/// end of stream ends the session).
pub const SESSION_UPGRADE: &str = "roster-agent/1";

/// The endpoint path of a topic.
pub fn path_for(topic: &str) -> String {
    format!("{PATH_PREFIX}{topic}")
}

/// The topic of an endpoint path, if it is one: `/v1/` followed by a
/// non-empty name made of ASCII letters, digits and `.-_`.
pub fn topic_of(path: &str) -> Option<&str> {
    let t = path.strip_prefix(PATH_PREFIX)?;
    let ok = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    ok.then_some(t)
}

/// The error object of an RPC error.
pub fn error_json(e: &RpcError) -> Value {
    let mut m = Map::new();
    m.insert("errnum".into(), Value::from(e.errnum));
    if let Some(s) = &e.errstr {
        m.insert("errstr".into(), Value::from(s.as_str()));
    }
    Value::Object(m)
}

/// Recognize an error object (see the module docs).
pub fn as_error(v: &Value) -> Option<RpcError> {
    let m = v.as_object()?;
    let errnum = m.get("errnum")?.as_i64()?;
    let errstr = match m.get("errstr") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return None,
    };
    let expected = 1 + usize::from(errstr.is_some());
    if m.len() != expected {
        return None;
    }
    Some(RpcError {
        errnum: i32::try_from(errnum).ok()?,
        errstr,
    })
}

fn value_line(v: &Value) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_else(|_| String::from("null"));
    s.push('\n');
    s
}

/// One NDJSON line of a streaming [`crate::Reply`] (with its `\n`): the
/// compact JSON of the reply's value (an error as its error object); a
/// pre-serialised payload is copied as it is.
pub fn reply_line(reply: &crate::Reply) -> String {
    match reply {
        Ok(crate::Payload::Json(s)) => {
            let mut line = String::with_capacity(s.len() + 1);
            line.push_str(s);
            line.push('\n');
            line
        }
        Ok(crate::Payload::Value(v)) => value_line(v),
        Err(e) => value_line(&error_json(e)),
    }
}

/// Decode one NDJSON line of a streaming reply.
pub fn parse_stream_line(line: &str) -> Result<Result<Value, RpcError>, serde_json::Error> {
    let v: Value = serde_json::from_str(line)?;
    Ok(match as_error(&v) {
        Some(e) => Err(e),
        None => Ok(v),
    })
}

/// The body of a non-streaming success: empty for no payload.
pub fn body_of(payload: &Value) -> String {
    if payload.is_null() {
        String::new()
    } else {
        serde_json::to_string(payload).unwrap_or_default()
    }
}

/// [`body_of`] for a reply [`crate::Payload`]: the same bytes; a
/// pre-serialised payload is copied as it is.
pub fn payload_body(payload: &crate::Payload) -> String {
    match payload {
        crate::Payload::Value(v) => body_of(v),
        crate::Payload::Json(s) if &**s == "null" => String::new(),
        crate::Payload::Json(s) => s.to_string(),
    }
}

/// The payload of a request or reply body: empty (or all white space) is
/// no payload.
pub fn payload_of(body: &[u8]) -> Result<Value, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|e| RpcError::new(EPROTO, format!("request body is not JSON: {e}")))
}

/// The HTTP status used for an error reply.
pub fn http_status(errnum: i32) -> u16 {
    match errnum {
        EPERM => 403,
        ENOENT | ENOSYS => 404,
        EEXIST | EBUSY => 409,
        EINVAL | EPROTO | EOVERFLOW => 400,
        EAGAIN => 503,
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One NDJSON line of a streaming reply (with its `\n`).
    fn stream_line(reply: &Result<Value, RpcError>) -> String {
        match reply {
            Ok(v) => value_line(v),
            Err(e) => value_line(&error_json(e)),
        }
    }

    #[test]
    fn topics() {
        assert_eq!(topic_of("/v1/resource.drain"), Some("resource.drain"));
        assert_eq!(topic_of("/v1/"), None);
        assert_eq!(topic_of("/v2/resource.drain"), None);
        assert_eq!(topic_of("/v1/a/b"), None);
        assert_eq!(path_for("resource.status"), "/v1/resource.status");
    }

    #[test]
    fn error_lines_round_trip() {
        let e = RpcError::new(ENODATA, "end");
        let line = stream_line(&Err(e.clone()));
        assert_eq!(line, "{\"errnum\":61,\"errstr\":\"end\"}\n");
        assert_eq!(parse_stream_line(&line).unwrap(), Err(e));
        let bare = RpcError::bare(EBUSY);
        assert_eq!(
            parse_stream_line(&stream_line(&Err(bare.clone()))).unwrap(),
            Err(bare)
        );
    }

    #[test]
    fn payloads_are_not_errors() {
        for v in [
            json!({"events": []}),
            json!({"errnum": 3, "other": 1}),
            json!({"errnum": "x"}),
            json!({"errnum": 3, "errstr": 4}),
            json!(null),
        ] {
            assert_eq!(
                parse_stream_line(&stream_line(&Ok(v.clone()))).unwrap(),
                Ok(v)
            );
        }
    }

    #[test]
    fn bodies() {
        assert_eq!(payload_of(b"").unwrap(), Value::Null);
        assert_eq!(payload_of(b" \n").unwrap(), Value::Null);
        assert_eq!(payload_of(b"{\"a\":1}").unwrap(), json!({"a": 1}));
        assert_eq!(payload_of(b"{").unwrap_err().errnum, EPROTO);
        assert_eq!(body_of(&Value::Null), "");
    }

    #[test]
    fn pre_serialised_payloads_write_the_same_bytes() {
        use crate::Payload;
        for v in [
            json!({"events": [{"timestamp": 1.5, "name": "x", "context": {"a": "\u{e9}\n"}}]}),
            json!({"b": 1, "a": [1.0, -0.0, 1e300, null, true]}),
            json!("s"),
            json!(null),
        ] {
            let json = Payload::serialised(&v);
            let value = Payload::from(v.clone());
            assert_eq!(json, value);
            assert_eq!(json, v);
            assert_eq!(json.to_value(), v);
            assert_eq!(payload_body(&json), body_of(&v));
            assert_eq!(payload_body(&value), body_of(&v));
            assert_eq!(reply_line(&Ok(json.clone())), stream_line(&Ok(v.clone())));
            assert_eq!(reply_line(&Ok(value)), stream_line(&Ok(v.clone())));
            assert_eq!(json.is_null(), v.is_null());
            assert_eq!(json.to_json(), serde_json::to_string(&v).unwrap());
        }
        let e = RpcError::new(ENODATA, "end");
        assert_eq!(reply_line(&Err(e.clone())), stream_line(&Err(e)));
    }
}
