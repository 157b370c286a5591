//! The Flux local-connector listener (`flux:///path/to.sock`): flux-core's
//! own clients (`FLUX_URI=local:///path/to.sock`) talk to Roster directly.
//!
//! Per connection, as flux-core's connector-local behaves:
//!
//! * the peer's uid comes from `SO_PEERCRED`; the owner (or root) gets
//!   OWNER|LOCAL, anyone else USER|LOCAL; the server writes one byte, `0`
//!   (accepted), or an errno when the credentials cannot be read;
//! * then messages flow both ways, framed by [`fluxmsg`];
//! * requests on the catalogue's service topics ([`rpc::catalog`]:
//!   `resource.*`, `attr.get`, `config.get`) go to the service as
//!   [`rpc::Request`]s of this connection's [`rpc::ConnId`] with the
//!   client's matchtag; `attr.get local-uri`, a fact of this listener, is
//!   answered here; `*.disconnect` is ignored (EOF is the disconnect);
//!   every other topic gets ENOSYS "No service matching X is registered",
//!   as a broker without that service answers;
//! * responses carry the request's topic, matchtag and route stack (ROUTE
//!   set; clients send an empty stack), the connection's userid and
//!   rolemask, STREAMING if the request had it, errnum in aux1, and JSON
//!   or error text followed by a NUL;
//! * EOF (or any protocol error, which is logged) ends the connection:
//!   the service gets one [`Incoming::Disconnect`].

use crate::bind::shutdown_signalled;
use crate::limits::{reply_cost, Limits, LoopTx, OutQueue, ReplySender};
use crate::{io_text, next_conn_id, ListenOptions, SHUTDOWN_GRACE};
use fluxmsg::{flag, role, Message, MsgType, NODEID_ANY};
use rpc::catalog::{self, Call};
use rpc::errno::{EAGAIN, EHOSTUNREACH, EIO, ENOSYS, EOVERFLOW, EPERM, EPROTO};
use rpc::{wire, Reply, Role, RpcError};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
    WriteHalf,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Largest message accepted from a client (whatever `max-request-bytes`).
pub(crate) const MAX_MESSAGE: u32 = fluxmsg::DEFAULT_MAX_MESSAGE;

/// What every Flux connection of a `run` shares.
pub(crate) struct FluxCtx {
    tx: LoopTx,
    owner_uid: u32,
    limits: Limits,
}

impl FluxCtx {
    pub(crate) fn new(tx: LoopTx, opts: &ListenOptions) -> FluxCtx {
        FluxCtx {
            tx,
            owner_uid: opts.owner_uid,
            limits: opts.limits.clone(),
        }
    }
}

/// An encoded message for the writer and what it costs against the
/// connection's outbound queue.
type Out = (Vec<u8>, usize);

/// Queue `bytes` for the writer, charged to `queue`; a client over its
/// outbound limit is marked for closing instead.
fn push_to(out: &mpsc::UnboundedSender<Out>, queue: &OutQueue, bytes: Vec<u8>) {
    let cost = bytes.len();
    if !queue.charge(cost) {
        queue.set_overflow();
        return;
    }
    if out.send((bytes, cost)).is_err() {
        queue.release(cost);
    }
}

/// Counts one request in flight for as long as it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(n: &Arc<AtomicUsize>) -> InFlight {
        n.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(n))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Who the peer is, fixed at accept time.
#[derive(Debug, Clone)]
struct Cred {
    userid: u32,
    role: Role,
    rolemask: u32,
}

/// Serve one accepted connection until EOF, a protocol error or shutdown.
/// `uid` is the peer's uid (None: unreadable, the client is refused);
/// `local_uri` is what `attr.get local-uri` answers.
pub(crate) async fn serve_connection<S>(
    mut stream: S,
    uid: Option<u32>,
    ctx: Arc<FluxCtx>,
    local_uri: Arc<str>,
    mut shutdown: watch::Receiver<bool>,
    _live: mpsc::Sender<()>,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let Some(userid) = uid else {
        // flux-core's handshake: a non-zero byte is the errno.
        let _ = stream.write_all(&[EPERM as u8]).await;
        return;
    };
    let cred = if userid == ctx.owner_uid || userid == 0 {
        Cred {
            userid,
            role: Role::Owner,
            rolemask: role::OWNER | role::LOCAL,
        }
    } else {
        Cred {
            userid,
            role: Role::Guest,
            rolemask: role::USER | role::LOCAL,
        }
    };
    if let Err(e) = stream.write_all(&[0]).await {
        tracing::debug!(
            "flux client went away during the handshake: {}",
            io_text(&e)
        );
        return;
    }
    let (rd, wr) = tokio::io::split(stream);
    let queue = OutQueue::new(ctx.limits.outbound_bytes(&cred.role));
    let (out, out_rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(write_loop(wr, out_rx, Arc::clone(&queue)));
    let limits = ctx.limits.clone();
    let max_len = u32::try_from(limits.request_bytes(&cred.role))
        .unwrap_or(u32::MAX)
        .min(MAX_MESSAGE);
    let mut conn = Conn {
        id: next_conn_id(),
        used: false,
        cred: cred.clone(),
        ctx,
        local_uri,
        out,
        queue: Arc::clone(&queue),
        inflight: Arc::new(AtomicUsize::new(0)),
        tasks: JoinSet::new(),
    };
    tracing::debug!(conn = conn.id, userid, role = ?cred.role, "flux client connected");
    let mut rd = BufReader::new(rd);
    let graceful = loop {
        // A client that does not read its replies gets no more requests
        // read: it costs nothing more, and is dropped if it stays so.
        if queue.queued() > queue.limit() / 2 {
            let drained = tokio::select! {
                biased;
                _ = shutdown_signalled(&mut shutdown) => break true,
                d = queue.drained(limits.request_timeout) => d,
            };
            if !drained {
                tracing::warn!(
                    conn = conn.id,
                    "dropping flux client: it does not read its replies ({} bytes queued for {}s, max-outbound-bytes {})",
                    queue.queued(),
                    limits.request_timeout.as_secs_f64(),
                    queue.limit()
                );
                queue.set_overflow();
                break false;
            }
        }
        let read = tokio::select! {
            biased;
            _ = shutdown_signalled(&mut shutdown) => break true,
            _ = queue.overflowed() => {
                tracing::warn!(
                    conn = conn.id,
                    "dropping flux client: it does not read its replies ({} bytes queued, max-outbound-bytes {})",
                    queue.queued(),
                    queue.limit()
                );
                break false;
            }
            r = read_message(&mut rd, max_len, &limits, &conn.inflight) => r,
        };
        match read {
            Ok(Some(msg)) => conn.dispatch(msg),
            Ok(None) => {
                tracing::debug!(conn = conn.id, "flux client disconnected");
                break false;
            }
            Err(ReadError::Idle) => {
                tracing::debug!(conn = conn.id, "closing an idle flux client");
                break false;
            }
            Err(e) => {
                tracing::warn!(conn = conn.id, "dropping flux client: {e}");
                break false;
            }
        }
    };
    if graceful {
        // Let requests in flight finish; streams are cut after the grace.
        let tasks = &mut conn.tasks;
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
    }
    conn.tasks.abort_all();
    let Conn {
        id, used, ctx, out, ..
    } = conn;
    if used {
        // The service may be gone already; nothing to tell then.
        ctx.tx.disconnect(id);
    }
    drop(out);
    drop(rd);
    // Flush what is queued (a client that only shut down its write side
    // still gets it), but do not wait on a client that stopped reading.
    let mut writer = writer;
    let flushed = !queue.is_overflowed()
        && tokio::time::timeout(SHUTDOWN_GRACE, &mut writer)
            .await
            .is_ok();
    if !flushed {
        writer.abort();
    }
}

/// Errors that end a connection.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("{0}")]
    Decode(#[from] fluxmsg::DecodeError),
    #[error("connection closed in the middle of a message")]
    Truncated,
    #[error("read error: {}", io_text(.0))]
    Io(#[from] std::io::Error),
    #[error("message not received within {0}s (request-timeout)")]
    Slow(f64),
    #[error("idle")]
    Idle,
}

/// Read one message; `Ok(None)` on a clean EOF between messages.  Longer
/// messages than `max_len` end the connection before their body is read.
/// Between messages, a connection that is not `busy` (no request in
/// flight, no open stream) for `idle_timeout` gets [`ReadError::Idle`];
/// once a message started, it must be complete within `request_timeout`.
async fn read_message<R: AsyncRead + Unpin>(
    rd: &mut BufReader<R>,
    max_len: u32,
    limits: &Limits,
    inflight: &AtomicUsize,
) -> Result<Option<Message>, ReadError> {
    loop {
        match tokio::time::timeout(limits.idle_timeout, rd.fill_buf()).await {
            Ok(r) => {
                if r?.is_empty() {
                    return Ok(None);
                }
                break;
            }
            Err(_) if inflight.load(Ordering::Acquire) > 0 => continue,
            Err(_) => return Err(ReadError::Idle),
        }
    }
    let timeout = limits.request_timeout;
    tokio::time::timeout(timeout, async {
        let mut pre = [0u8; fluxmsg::PREAMBLE_SIZE];
        read_exact(rd, &mut pre).await?;
        let len = fluxmsg::decode_preamble(&pre, max_len)?;
        // Grow with what actually arrives rather than trusting the length.
        let mut body = Vec::with_capacity((len as usize).min(64 << 10));
        let got = rd.take(u64::from(len)).read_to_end(&mut body).await?;
        if got != len as usize {
            return Err(ReadError::Truncated);
        }
        Ok(Some(Message::decode_frames(&body)?))
    })
    .await
    .unwrap_or(Err(ReadError::Slow(timeout.as_secs_f64())))
}

async fn read_exact<R: AsyncRead + Unpin>(rd: &mut R, buf: &mut [u8]) -> Result<(), ReadError> {
    match rd.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(ReadError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// Write encoded messages in order; batch what is queued into one flush.
/// What is written leaves the connection's outbound queue.
async fn write_loop<W: AsyncWrite>(
    wr: WriteHalf<W>,
    mut rx: mpsc::UnboundedReceiver<Out>,
    queue: Arc<OutQueue>,
) {
    let mut w = BufWriter::new(wr);
    while let Some((buf, cost)) = rx.recv().await {
        let mut r = w.write_all(&buf).await;
        queue.release(cost);
        while r.is_ok() {
            match rx.try_recv() {
                Ok((more, cost)) => {
                    r = w.write_all(&more).await;
                    queue.release(cost);
                }
                Err(_) => break,
            }
        }
        if let Err(e) = r.and(w.flush().await) {
            tracing::debug!("cannot write to a flux client: {}", io_text(&e));
            return;
        }
    }
}

/// How replies to one request are addressed.
#[derive(Debug, Clone)]
struct ReplyHead {
    topic: String,
    matchtag: u32,
    routes: Vec<Vec<u8>>,
    streaming: bool,
    cred: Cred,
}

impl ReplyHead {
    /// The encoded response carrying `reply`.
    fn encode(&self, reply: &Reply) -> Vec<u8> {
        let mut m = Message {
            msg_type: MsgType::Response,
            flags: if self.streaming { flag::STREAMING } else { 0 },
            userid: self.cred.userid,
            rolemask: self.cred.rolemask,
            aux1: 0,
            aux2: self.matchtag,
            routes: Some(self.routes.clone()),
            topic: Some(self.topic.clone()),
            payload: None,
        };
        match reply {
            Ok(p) if p.is_null() => {}
            Ok(p) => m.set_payload_str(&p.to_json()),
            Err(e) => {
                m.aux1 = u32::try_from(e.errnum).unwrap_or(EPROTO as u32);
                if let Some(s) = e.errstr.as_deref().filter(|s| !s.is_empty()) {
                    m.set_payload_str(s);
                }
            }
        }
        match m.encode(u32::MAX) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(topic = %self.topic, "cannot encode a response: {e}");
                m.payload = None;
                m.aux1 = EOVERFLOW as u32;
                m.set_payload_str(&format!("response cannot be sent: {e}"));
                m.encode(u32::MAX).unwrap_or_default()
            }
        }
    }
}

/// One client connection.
struct Conn {
    id: rpc::ConnId,
    /// A request of this connection reached the service.
    used: bool,
    cred: Cred,
    ctx: Arc<FluxCtx>,
    local_uri: Arc<str>,
    out: mpsc::UnboundedSender<Out>,
    /// The bytes queued for this client, written or not.
    queue: Arc<OutQueue>,
    /// Requests waiting for their last reply (streams included).
    inflight: Arc<AtomicUsize>,
    /// Tasks carrying replies of requests in flight.
    tasks: JoinSet<()>,
}

impl Conn {
    /// Queue a reply made here.
    fn push(&self, bytes: Vec<u8>) {
        push_to(&self.out, &self.queue, bytes);
    }

    fn dispatch(&mut self, msg: Message) {
        // Reap finished reply tasks so the set stays small.
        while self.tasks.try_join_next().is_some() {}
        if msg.msg_type != MsgType::Request {
            tracing::debug!(
                conn = self.id,
                "ignoring a {} from a flux client",
                msg.msg_type
            );
            return;
        }
        let head = ReplyHead {
            topic: msg.topic.clone().unwrap_or_default(),
            matchtag: msg.matchtag(),
            routes: msg.routes.clone().unwrap_or_default(),
            streaming: msg.has_flag(flag::STREAMING),
            cred: self.cred.clone(),
        };
        let respond = !msg.has_flag(flag::NORESPONSE);
        let topic = head.topic.as_str();
        tracing::debug!(
            conn = self.id,
            topic,
            matchtag = head.matchtag,
            "flux request"
        );
        let local = |r: Reply| respond.then(|| head.encode(&r));
        let immediate = if msg.topic.is_none() {
            local(Err(RpcError::new(EPROTO, "request has no topic")))
        } else if msg.has_flag(flag::UPSTREAM) || !matches!(msg.nodeid(), 0 | NODEID_ANY) {
            // A single-rank instance: no other rank, nothing upstream.
            local(Err(RpcError::bare(EHOSTUNREACH)))
        } else if topic.ends_with(".disconnect") {
            // Clients never send these; EOF is the disconnect.
            None
        } else if let Some(uri) = self.local_uri_asked(&msg) {
            // The one broker attribute that is a fact of this listener.
            let reply = rpc::msg::AttrGetResponse {
                value: uri,
                flags: 0,
            };
            local(Ok(rpc::msg::encode(&reply).into()))
        } else if respond && self.inflight.load(Ordering::Acquire) >= self.ctx.limits.max_inflight {
            local(Err(RpcError::new(
                EAGAIN,
                format!(
                    "too many requests in flight on this connection: {} (max-inflight)",
                    self.ctx.limits.max_inflight
                ),
            )))
        } else if catalog::served(topic) {
            match request_payload(&msg) {
                Err(e) => local(Err(e)),
                Ok(payload) => {
                    self.forward(payload, head, respond);
                    None
                }
            }
        } else {
            local(Err(RpcError::new(
                ENOSYS,
                format!("No service matching {topic} is registered"),
            )))
        };
        if let Some(bytes) = immediate {
            self.push(bytes);
        }
    }

    /// Hand a request to the service and relay its replies.
    fn forward(&mut self, payload: Value, head: ReplyHead, respond: bool) {
        let (replies, mut rx) = ReplySender::new(Arc::clone(&self.queue), head.streaming);
        let req = rpc::Request {
            conn: self.id,
            matchtag: head.matchtag,
            topic: head.topic.clone(),
            payload,
            streaming: head.streaming,
            role: self.cred.role.clone(),
            userid: Some(self.cred.userid),
            who: None,
        };
        // A request that follows others still in flight on this
        // connection takes the loop, in order (see `crate::snapshot`).
        let handed = if self.inflight.load(Ordering::Acquire) > 0 {
            self.ctx.tx.request_in_order(req, replies)
        } else {
            self.ctx.tx.request(req, replies).map(|_| ())
        };
        if let Err(e) = handed {
            if respond {
                self.push(head.encode(&Err(e.error())));
            }
            return;
        }
        self.used = true;
        if !respond {
            // Fire and forget (e.g. `resource.journal-cancel`).
            return;
        }
        let out = self.out.clone();
        let inflight = InFlight::new(&self.inflight);
        self.tasks.spawn(async move {
            let _inflight = inflight;
            loop {
                let Some(reply) = rx.recv().await else {
                    let what = if head.streaming {
                        "service ended the stream without an end-of-stream reply"
                    } else {
                        "service ended the request without a reply"
                    };
                    let _ = out.send((head.encode(&Err(RpcError::new(EIO, what))), 0));
                    return;
                };
                let end = !head.streaming || reply.is_err();
                let cost = reply_cost(&reply);
                if out.send((head.encode(&reply), cost)).is_err() || end {
                    return;
                }
            }
        });
    }

    /// The listener's own address, when `msg` is `attr.get local-uri`.
    fn local_uri_asked(&self, msg: &Message) -> Option<String> {
        if msg.topic.as_deref() != Some(catalog::AttrGet::TOPIC) {
            return None;
        }
        let payload = request_payload(msg).ok()?;
        let req: rpc::msg::AttrGetRequest = rpc::msg::decode(&payload).ok()?;
        (req.name == "local-uri").then(|| self.local_uri.to_string())
    }
}

/// A request payload: none, or NUL-terminated JSON.
fn request_payload(msg: &Message) -> Result<Value, RpcError> {
    match msg.payload_str() {
        Ok(None) => Ok(Value::Null),
        Ok(Some(s)) => wire::payload_of(s.as_bytes()),
        Err(e) => Err(RpcError::new(EPROTO, e.to_string())),
    }
}
