//! Plain `GET` routes outside the RPC namespace (`/metrics`, `/healthz`,
//! `/readyz`, ...), answered by a handler the daemon installs with
//! [`crate::Listeners::with_web`].
//!
//! These routes are read-only and need no credentials, on TCP listeners
//! too: bind TCP to loopback (or firewall it) if the metrics must stay
//! private.  Paths under [`rpc::wire::PATH_PREFIX`] never reach the handler.

use bytes::Bytes;

/// The answer to one `GET`.
#[derive(Debug, Clone)]
pub struct WebResponse {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    pub body: Bytes,
}

impl WebResponse {
    /// A 200 reply.
    pub fn ok(content_type: &'static str, body: impl Into<Bytes>) -> WebResponse {
        WebResponse {
            status: 200,
            content_type,
            body: body.into(),
        }
    }
}

impl std::fmt::Debug for dyn WebHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebHandler")
    }
}

/// What a `GET` route answers with.
#[derive(Debug, Clone)]
pub enum WebRoute {
    /// A complete reply.
    Page(WebResponse),
    /// A read-only RPC on the caller's behalf, with an empty payload,
    /// answered like `POST /v1/TOPIC` (NDJSON lines when `streaming`).
    /// The handler picks the role: only topics that change nothing may
    /// be offered here.
    Rpc {
        topic: &'static str,
        streaming: bool,
        role: rpc::Role,
    },
}

/// Serves the non-RPC `GET` routes.
pub trait WebHandler: Send + Sync + 'static {
    /// The route for `path`, or `None` if the handler has no such route
    /// (the listener then answers as for any unknown path).
    fn get(&self, path: &str) -> Option<WebRoute>;
}
