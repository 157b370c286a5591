//! The Flux local-connector listener (`flux:///path/to.sock`): flux-core's
//! own clients (`FLUX_URI=local:///path/to.sock`) talk to Roster directly.
//!
//! Per connection, as flux-core's connector-local behaves:
//!
//! * the peer's uid comes from `SO_PEERCRED`; the owner (or root) gets
//!   OWNER|LOCAL, anyone else USER|LOCAL; the server writes one byte, `0`
//!   (accepted), or an errno when the credentials cannot be read;
//! * then messages flow both ways, framed by [`fluxmsg`];
//! * `resource.*` requests go to the service as [`rpc::Request`]s of this
//!   connection's [`rpc::ConnId`] with the client's matchtag; `attr.get`
//!   and `config.get` are answered here; `*.disconnect` is ignored (EOF is
//!   the disconnect); every other topic gets ENOSYS "No service matching
//!   X is registered", as a broker without that service answers;
//! * responses carry the request's topic, matchtag and route stack (ROUTE
//!   set; clients send an empty stack), the connection's userid and
//!   rolemask, STREAMING if the request had it, errnum in aux1, and JSON
//!   or error text followed by a NUL;
//! * EOF (or any protocol error, which is logged) ends the connection:
//!   the service gets one [`Incoming::Disconnect`].

use crate::bind::shutdown_signalled;
use crate::{io_text, next_conn_id, Incoming, ListenOptions, SHUTDOWN_GRACE};
use fluxmsg::{flag, role, Message, MsgType, NODEID_ANY};
use rpc::errno::{EHOSTUNREACH, EIO, ENOENT, ENOSYS, EOVERFLOW, EPERM, EPROTO};
use rpc::{wire, Reply, Role, RpcError};
use serde_json::{json, Value};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Largest message accepted from a client.
pub(crate) const MAX_MESSAGE: u32 = fluxmsg::DEFAULT_MAX_MESSAGE;

/// The flux-core version Roster's wire behaviour follows (reported as
/// the `version` attribute, with Roster's own version appended).
const FLUX_VERSION: &str = "0.88.0";

/// How long `attr.get hostlist|size` waits for the service.
const ATTR_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// What every Flux connection of a `run` shares.
pub(crate) struct FluxCtx {
    tx: Sender<Incoming>,
    owner_uid: u32,
}

impl FluxCtx {
    pub(crate) fn new(tx: Sender<Incoming>, opts: &ListenOptions) -> FluxCtx {
        FluxCtx {
            tx,
            owner_uid: opts.owner_uid,
        }
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
pub(crate) async fn serve_connection(
    mut stream: UnixStream,
    uid: Option<u32>,
    ctx: Arc<FluxCtx>,
    local_uri: Arc<str>,
    mut shutdown: watch::Receiver<bool>,
    _live: mpsc::Sender<()>,
) {
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
    let (rd, wr) = stream.into_split();
    let (out, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_loop(wr, out_rx));
    let mut conn = Conn {
        id: next_conn_id(),
        used: false,
        cred: cred.clone(),
        ctx,
        local_uri,
        out,
        tasks: JoinSet::new(),
    };
    tracing::debug!(conn = conn.id, userid, role = ?cred.role, "flux client connected");
    let mut rd = BufReader::new(rd);
    let graceful = loop {
        let read = tokio::select! {
            biased;
            _ = shutdown_signalled(&mut shutdown) => break true,
            r = read_message(&mut rd) => r,
        };
        match read {
            Ok(Some(msg)) => conn.dispatch(msg),
            Ok(None) => {
                tracing::debug!(conn = conn.id, "flux client disconnected");
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
        let _ = ctx.tx.send(Incoming::Disconnect(id));
    }
    drop(out);
    drop(rd);
    // Flush what is queued (a client that only shut down its write side
    // still gets it), but do not wait on a client that stopped reading.
    let mut writer = writer;
    if tokio::time::timeout(SHUTDOWN_GRACE, &mut writer)
        .await
        .is_err()
    {
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
}

/// Read one message; `Ok(None)` on a clean EOF between messages.
async fn read_message(rd: &mut BufReader<OwnedReadHalf>) -> Result<Option<Message>, ReadError> {
    if rd.fill_buf().await?.is_empty() {
        return Ok(None);
    }
    let mut pre = [0u8; fluxmsg::PREAMBLE_SIZE];
    read_exact(rd, &mut pre).await?;
    let len = fluxmsg::decode_preamble(&pre, MAX_MESSAGE)?;
    // Grow with what actually arrives rather than trusting the length.
    let mut body = Vec::with_capacity((len as usize).min(64 << 10));
    let got = rd.take(u64::from(len)).read_to_end(&mut body).await?;
    if got != len as usize {
        return Err(ReadError::Truncated);
    }
    Ok(Some(Message::decode_frames(&body)?))
}

async fn read_exact<R: AsyncRead + Unpin>(rd: &mut R, buf: &mut [u8]) -> Result<(), ReadError> {
    match rd.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(ReadError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// Write encoded messages in order; batch what is queued into one flush.
async fn write_loop(wr: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut w = BufWriter::new(wr);
    while let Some(buf) = rx.recv().await {
        let mut r = w.write_all(&buf).await;
        while r.is_ok() {
            match rx.try_recv() {
                Ok(more) => r = w.write_all(&more).await,
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
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// Tasks carrying replies of requests in flight.
    tasks: JoinSet<()>,
}

impl Conn {
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
        } else if topic == "config.get" {
            local(Ok(json!({}).into()))
        } else if topic == "attr.get" {
            match attr_name(&msg) {
                Err(e) => local(Err(e)),
                Ok(name) => {
                    self.attr_get(name, head, respond);
                    None
                }
            }
        } else if topic.starts_with("resource.") {
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
            let _ = self.out.send(bytes);
        }
    }

    /// Hand a request to the service and relay its replies.
    fn forward(&mut self, payload: Value, head: ReplyHead, respond: bool) {
        let (replies, mut rx) = mpsc::unbounded_channel();
        let req = rpc::Request {
            conn: self.id,
            matchtag: head.matchtag,
            topic: head.topic.clone(),
            payload,
            streaming: head.streaming,
            role: self.cred.role.clone(),
            userid: Some(self.cred.userid),
        };
        if self
            .ctx
            .tx
            .send(Incoming::Request { req, replies })
            .is_err()
        {
            if respond {
                let e = RpcError::new(EIO, "the service is not running");
                let _ = self.out.send(head.encode(&Err(e)));
            }
            return;
        }
        self.used = true;
        if !respond {
            // Fire and forget (e.g. `resource.journal-cancel`).
            return;
        }
        let out = self.out.clone();
        self.tasks.spawn(async move {
            loop {
                let Some(reply) = rx.recv().await else {
                    let what = if head.streaming {
                        "service ended the stream without an end-of-stream reply"
                    } else {
                        "service ended the request without a reply"
                    };
                    let _ = out.send(head.encode(&Err(RpcError::new(EIO, what))));
                    return;
                };
                let end = !head.streaming || reply.is_err();
                if out.send(head.encode(&reply)).is_err() || end {
                    return;
                }
            }
        });
    }

    /// `attr.get`: the broker attributes flux's clients ask for.
    fn attr_get(&mut self, name: String, head: ReplyHead, respond: bool) {
        let fixed = match name.as_str() {
            "rank" | "instance-level" => Some(Ok("0".to_string())),
            "version" => Some(Ok(format!(
                "{FLUX_VERSION}-roster-{}",
                env!("CARGO_PKG_VERSION")
            ))),
            "local-uri" => Some(Ok(self.local_uri.to_string())),
            "hostlist" | "size" => None,
            // parent-uri, jobid, ... do not exist at the top level.
            _ => Some(Err(RpcError::bare(ENOENT))),
        };
        let send = move |out: &mpsc::UnboundedSender<Vec<u8>>, r: Result<String, RpcError>| {
            if respond {
                let reply = r.map(|v| json!({"value": v, "flags": 0}).into());
                let _ = out.send(head.encode(&reply));
            }
        };
        if let Some(r) = fixed {
            send(&self.out, r);
            return;
        }
        // hostlist and size come from the service's R.
        let ctx = Arc::clone(&self.ctx);
        let role = self.cred.role.clone();
        let out = self.out.clone();
        self.tasks.spawn(async move {
            let r = hosts_of_service(&ctx, role).await.map(|hosts| {
                if name == "size" {
                    hosts.len().to_string()
                } else {
                    hosts.encode()
                }
            });
            send(&out, r);
        });
    }
}

/// The `name` of an `attr.get` request.
fn attr_name(msg: &Message) -> Result<String, RpcError> {
    let payload = request_payload(msg)?;
    payload
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| RpcError::new(EPROTO, "attr.get: expected a string \"name\""))
}

/// A request payload: none, or NUL-terminated JSON.
fn request_payload(msg: &Message) -> Result<Value, RpcError> {
    match msg.payload_str() {
        Ok(None) => Ok(Value::Null),
        Ok(Some(s)) => wire::payload_of(s.as_bytes()),
        Err(e) => Err(RpcError::new(EPROTO, e.to_string())),
    }
}

/// Ask the service for `resource.status` on a private connection and
/// read the instance's hosts from its R (`execution.nodelist`).
async fn hosts_of_service(ctx: &FluxCtx, role: Role) -> Result<hostlist::Hostlist, RpcError> {
    let conn = next_conn_id();
    let (replies, mut rx) = mpsc::unbounded_channel();
    let req = rpc::Request {
        conn,
        matchtag: 1,
        topic: "resource.status".into(),
        payload: Value::Null,
        streaming: false,
        role,
        userid: None,
    };
    if ctx.tx.send(Incoming::Request { req, replies }).is_err() {
        return Err(RpcError::new(EIO, "the service is not running"));
    }
    let reply = tokio::time::timeout(ATTR_QUERY_TIMEOUT, rx.recv()).await;
    let _ = ctx.tx.send(Incoming::Disconnect(conn));
    let status = match reply {
        Ok(Some(r)) => r?.into_value(),
        Ok(None) => {
            return Err(RpcError::new(
                EIO,
                "service ended the request without a reply",
            ))
        }
        Err(_) => return Err(RpcError::new(EIO, "the service did not answer in time")),
    };
    let nodelist: Vec<&str> = status
        .pointer("/R/execution/nodelist")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    hostlist::Hostlist::decode(&nodelist.join(","))
        .map_err(|e| RpcError::new(EPROTO, format!("resource.status: bad nodelist: {e}")))
}
