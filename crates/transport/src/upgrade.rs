//! The agent session, the one codec for its lines: it leaves HTTP once
//! its hello is accepted ([`wire::SESSION_UPGRADE`]).
//!
//! Keeping the session in HTTP would keep hyper's per-connection state
//! (read and write buffers, the dispatcher, the response body) for the
//! life of the session: about 16 KB per agent, 16k agents on one
//! service.  Here the hello comes as a complete request body; once the
//! service accepted it, the reply is `101 Switching Protocols`, hyper
//! lets go of the connection, and one small task reads NDJSON lines (a
//! partial line is the only buffer kept, freed when empty) and writes the
//! service's replies.  Bounds: the line size (the topic catalogue's body
//! limit for the agent's session), the outbound byte limit (the service
//! ends the stream with EOVERFLOW and the connection is closed), the
//! request timeout (for the hello, and for a reply the agent does not
//! take), and backpressure: while half of `max-queued-requests` wait for
//! the service loop the session reads nothing more from its socket.  A
//! refused hello is an HTTP error with `Connection: close`; a session
//! request without the upgrade headers is refused (400).

use crate::bind::shutdown_signalled;
use crate::http::{
    error_response, rpc_error_response, too_large, too_slow, ConnHold, DisconnectGuard, ReplyBody,
};
use crate::limits::{reply_cost, Limits, LoopTx, OutQueue, ReplyReceiver, ReplySender};
use crate::next_conn_id;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rpc::errno::{ECONNRESET, EIO, ENODATA, EOVERFLOW, EPROTO, ETIMEDOUT};
use rpc::{wire, Reply, Role, RpcError};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// Bytes read from the stream at a time (heartbeats are a few bytes; a
/// longer line is assembled over several reads).
const READ_CHUNK: usize = 512;

/// Read what the stream has (empty: its end), into a buffer that exists
/// only while the read is polled: an idle session holds none.
async fn read_some<S: AsyncRead + Unpin>(io: &mut S) -> std::io::Result<Vec<u8>> {
    std::future::poll_fn(|cx| {
        let mut chunk = [0u8; READ_CHUNK];
        let mut buf = tokio::io::ReadBuf::new(&mut chunk);
        match std::pin::Pin::new(&mut *io).poll_read(cx, &mut buf) {
            std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(Ok(buf.filled().to_vec())),
            std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    })
    .await
}

/// Does the request ask for the raw session (`Connection: upgrade`,
/// `Upgrade: roster-agent/1`)?
pub(crate) fn wants_raw_session<B>(req: &Request<B>) -> bool {
    let has = |name, want: &str| {
        req.headers().get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(want)))
        })
    };
    has(CONNECTION, "upgrade") && has(UPGRADE, wire::SESSION_UPGRADE)
}

/// Answer a session request asking for the raw stream: read the hello
/// (the whole body, within the size limit and the request timeout), hand
/// it to the service, wait for its answer; a refusal is the reply (and
/// the connection closes), a welcome is `101` and the session goes on in
/// a task of its own on the upgraded connection.
pub(crate) async fn upgraded_session(
    mut req: Request<Incoming>,
    role: Role,
    userid: Option<u32>,
    tx: &LoopTx,
    limits: &Limits,
    hold: Arc<ConnHold>,
) -> Response<ReplyBody> {
    let on_upgrade = hyper::upgrade::on(&mut req);
    let limit = limits.body_bytes(wire::SESSION_TOPIC, &role);
    let timeout = limits.request_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let collected =
        tokio::time::timeout_at(deadline, Limited::new(req.into_body(), limit).collect());
    let body = match collected.await {
        Err(_) => return closing(too_slow(timeout)),
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return closing(too_large(limit))
        }
        Ok(Err(e)) => {
            return closing(error_response(
                StatusCode::BAD_REQUEST,
                &RpcError::new(EPROTO, format!("error reading request body: {e}")),
            ))
        }
    };
    let payload = match wire::payload_of(&body) {
        Ok(v) => v,
        Err(e) => return closing(error_response(StatusCode::BAD_REQUEST, &e)),
    };
    let conn = next_conn_id();
    let queue = OutQueue::new(limits.outbound_bytes(&role));
    let (replies, mut rx) = ReplySender::new(Arc::clone(&queue), true);
    let request = session_hello(conn, payload, &role, userid);
    tracing::debug!(conn, ?role, "agent session (raw stream)");
    let end = replies.clone();
    if let Err(e) = tx.request_in_order(request, replies) {
        return closing(rpc_error_response(&e.error()));
    }
    // From here on the service knows the connection: every way out tells
    // it the connection is gone.
    let guard = DisconnectGuard::new(conn, tx.clone());
    let welcome = match tokio::time::timeout_at(deadline, rx.recv()).await {
        Ok(Some(r)) => {
            queue.release(reply_cost(&r));
            r
        }
        Ok(None) => Err(RpcError::new(
            EIO,
            "service ended the request without a reply",
        )),
        Err(_) => Err(RpcError::new(
            ETIMEDOUT,
            format!(
                "no answer to the hello within {}s (request-timeout)",
                timeout.as_secs_f64()
            ),
        )),
    };
    let welcome = match welcome {
        Ok(w) => w,
        Err(e) => {
            drop(guard);
            return closing(rpc_error_response(&e));
        }
    };
    let line_limit = limits.body_bytes(wire::SESSION_LINE_TOPIC, &role);
    let session = RawSession {
        conn,
        tx: tx.clone(),
        limit: line_limit,
        write_timeout: timeout,
        rx,
        queue,
        end,
        _guard: guard,
    };
    tokio::spawn(session.serve(on_upgrade, Ok(welcome), hold));
    let mut resp = Response::new(ReplyBody::Full(None));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    resp.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("upgrade"));
    resp.headers_mut()
        .insert(UPGRADE, HeaderValue::from_static(wire::SESSION_UPGRADE));
    resp
}

/// A reply after which the connection is closed.
fn closing(mut resp: Response<ReplyBody>) -> Response<ReplyBody> {
    resp.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// One accepted session on its raw stream.
pub(crate) struct RawSession {
    pub(crate) conn: rpc::ConnId,
    pub(crate) tx: LoopTx,
    /// Longest session line.
    pub(crate) limit: usize,
    /// Longest a reply may take to be written (the agent must read).
    pub(crate) write_timeout: Duration,
    pub(crate) rx: ReplyReceiver,
    pub(crate) queue: Arc<OutQueue>,
    /// The session's reply sender, to end the stream from this side.
    pub(crate) end: ReplySender,
    /// Sends the connection's `Disconnect` when the session is over.
    pub(crate) _guard: DisconnectGuard,
}

impl RawSession {
    /// The session's task, for its whole life: one future holding the
    /// session once (what an async block captures stays in its task
    /// besides the copy moved into a future it awaits).
    async fn serve(
        mut self,
        on_upgrade: hyper::upgrade::OnUpgrade,
        first: Reply,
        hold: Arc<ConnHold>,
    ) {
        let io = match on_upgrade.await {
            Ok(io) => TokioIo::new(io),
            Err(e) => {
                tracing::debug!(conn = self.conn, "agent session upgrade failed: {e}");
                return;
            }
        };
        let mut shutdown = hold.shutdown.clone();
        tokio::select! {
            _ = self.run(io, first) => {}
            _ = shutdown_signalled(&mut shutdown) => {}
        }
    }

    /// Write `first`, then serve the stream until it ends: the service
    /// ends it (its last reply is written, then the connection is shut
    /// down), or the agent does (end of stream: ENODATA; read error:
    /// ECONNRESET; a bad or oversized line: its error, written to the
    /// agent before the connection closes).
    pub(crate) async fn run<S>(&mut self, mut io: S, first: Reply)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        // Everything held across an await while the session idles is
        // part of its task for hours (16k agents on one service): the
        // read buffer lives only during a poll, and what is seldom
        // awaited (a reply's write with its timer, a line's hand-off
        // that may wait for room) is boxed for the time it takes.
        if !self.write(&mut io, first).await {
            return;
        }
        // The unterminated rest of the input; empty (and unallocated)
        // between lines.
        let mut partial: Vec<u8> = Vec::new();
        let mut reading = true;
        loop {
            let reply = tokio::select! {
                biased;
                reply = self.rx.recv() => reply,
                n = read_some(&mut io), if reading => {
                    let reason = match n {
                        Ok(data) if data.is_empty() => {
                            Some(RpcError::new(ENODATA, "the agent ended its session"))
                        }
                        Ok(data) => Box::pin(self.lines(&mut partial, &data)).await,
                        Err(e) => {
                            tracing::debug!(conn = self.conn, "agent session read error: {e}");
                            Some(RpcError::new(ECONNRESET, "the agent went away"))
                        }
                    };
                    if let Some(reason) = reason {
                        // Stop reading; the stream's last reply (this one,
                        // or the service's if it ended first) closes it.
                        reading = false;
                        partial = Vec::new();
                        let _ = self.end.send(Err(reason));
                    }
                    continue;
                }
            };
            let Some(reply) = reply else { return };
            self.queue.release(reply_cost(&reply));
            let last = reply.is_err();
            if !self.write(&mut io, reply).await {
                return;
            }
            if last {
                let _ = Box::pin(tokio::time::timeout(self.write_timeout, io.shutdown())).await;
                return;
            }
        }
    }

    /// Write one reply line; `false` if the connection is unusable (a
    /// write error, or the agent did not take it within the timeout).
    async fn write<S: AsyncWrite + Unpin>(&self, io: &mut S, reply: Reply) -> bool {
        let line = wire::reply_line(&reply);
        drop(reply);
        let w = async {
            io.write_all(line.as_bytes()).await?;
            io.flush().await
        };
        match Box::pin(tokio::time::timeout(self.write_timeout, w)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(conn = self.conn, "agent session write error: {e}");
                false
            }
            Err(_) => {
                tracing::warn!(
                    conn = self.conn,
                    "closing an agent session that does not read its replies"
                );
                false
            }
        }
    }

    /// Hand the complete lines of `partial` + `data` to the service
    /// (one-way inputs); `Some(error)` ends the session.  Waits while the
    /// service loop is behind ([`LoopTx::session_line`]): nothing more is
    /// read from the agent meanwhile.
    async fn lines(&self, partial: &mut Vec<u8>, mut data: &[u8]) -> Option<RpcError> {
        while let Some(i) = data.iter().position(|&b| b == b'\n') {
            let line: &[u8] = if partial.is_empty() {
                &data[..i]
            } else {
                partial.extend_from_slice(&data[..i]);
                partial
            };
            if line.len() > self.limit {
                return Some(session_line_too_long(self.limit));
            }
            if let Some(e) = self.line(line).await {
                return Some(e);
            }
            *partial = Vec::new();
            data = &data[i + 1..];
        }
        if partial.len() + data.len() > self.limit {
            return Some(session_line_too_long(self.limit));
        }
        partial.extend_from_slice(data);
        None
    }

    async fn line(&self, line: &[u8]) -> Option<RpcError> {
        if self.end.is_ended() {
            // The session's stream is over: nothing more goes to the service.
            return None;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let payload = match wire::payload_of(line) {
            Ok(v) => v,
            Err(e) => return Some(e),
        };
        if self.tx.session_line(self.conn, payload).await.is_err() {
            return Some(RpcError::new(EIO, "the service is not running"));
        }
        None
    }
}

/// The streaming request an agent session's hello becomes (matchtag 1;
/// the session's later lines are numbered from 2),
pub(crate) fn session_hello(
    conn: rpc::ConnId,
    payload: serde_json::Value,
    role: &Role,
    userid: Option<u32>,
) -> rpc::Request {
    rpc::Request {
        conn,
        matchtag: 1,
        topic: wire::SESSION_TOPIC.to_string(),
        payload,
        streaming: true,
        role: role.clone(),
        userid,
        who: None,
    }
}

pub(crate) fn session_line_too_long(limit: usize) -> RpcError {
    RpcError::new(
        EOVERFLOW,
        format!("session line exceeds the limit of {limit} bytes"),
    )
}
