//! One HTTP connection: requests in, replies out, per [`rpc::wire`].

use crate::bind::shutdown_signalled;
use crate::limits::{
    reply_cost, ConnPermit, Handed, Limits, LoopTx, OutQueue, ReplyReceiver, ReplySender,
};
use crate::{next_conn_id, ListenOptions, SHUTDOWN_GRACE};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HOST, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rpc::errno::{EIO, ENOSYS, EOVERFLOW, EPERM, EPROTO, ETIMEDOUT};
use rpc::{wire, Payload, Reply, Role, RpcError};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

/// The most bytes of a request head (request line and headers) read
/// before the role is known; beyond, hyper answers `431` and closes.
/// (hyper's read buffer; it cannot be under 8 KiB.)
pub(crate) const MAX_HEAD_BYTES: usize = 32 << 10;

/// What every connection of a `run` shares.
pub(crate) struct Ctx {
    tx: LoopTx,
    owner_uid: u32,
    /// Bearer tokens and the role each gives (the owner's first).
    tokens: Vec<(Vec<u8>, Role)>,
    web: Option<Arc<dyn crate::web::WebHandler>>,
    limits: Limits,
    access: Option<crate::TopicAccess>,
    /// `[serve] public-read`: anonymous TLS clients may use the web view.
    public_read: bool,
}

impl Ctx {
    pub(crate) fn new(
        tx: LoopTx,
        opts: &ListenOptions,
        web: Option<Arc<dyn crate::web::WebHandler>>,
    ) -> Ctx {
        let mut tokens: Vec<(Vec<u8>, Role)> = Vec::new();
        if let Some(t) = opts.token.as_ref().filter(|t| !t.is_empty()) {
            tokens.push((t.as_bytes().to_vec(), Role::Owner));
        }
        for (role, t) in &opts.role_tokens {
            if !t.is_empty() {
                tokens.push((t.as_bytes().to_vec(), role.clone()));
            }
        }
        Ctx {
            tx,
            web,
            owner_uid: opts.owner_uid,
            tokens,
            limits: opts.limits.clone(),
            access: opts.access,
            public_read: opts.public_read,
        }
    }

    /// 401 for a client with no role: the message names the role the
    /// topic needs when the service's topic table says (`resource.drain
    /// requires the admin role: authentication required: ...`).
    fn unauthenticated<B>(&self, req: &Request<B>, why: &str) -> Response<ReplyBody> {
        let topic = wire::topic_of(req.uri().path());
        let need = topic
            .zip(self.access)
            .and_then(|(t, f)| (f.0)(t).map(|n| (t, n)));
        unauthorized(match need {
            Some((t, n)) => format!(
                "{t} requires the {} role: authentication required: {why}",
                n.role_name()
            ),
            None => format!("authentication required: {why}"),
        })
    }

    /// The role (and uid) of a Unix-socket peer: the owner and root are
    /// the owner, everyone else a guest.
    pub(crate) fn unix_role(&self, uid: Option<u32>) -> (Role, Option<u32>) {
        match uid {
            Some(u) if u == self.owner_uid || u == 0 => (Role::Owner, Some(u)),
            _ => (Role::Guest, uid),
        }
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The channel to the service loop.
    pub(crate) fn loop_tx(&self) -> &LoopTx {
        &self.tx
    }

    /// The published read-only replies, if the service publishes any.
    pub(crate) fn snapshots(&self) -> Option<&Arc<crate::Snapshots>> {
        self.tx.snapshots()
    }

    /// The role of the bearer token a request carries, if it is one of
    /// ours.
    fn token_role<B>(&self, req: &Request<B>) -> Option<Role> {
        let given = bearer(req)?;
        let mut found = None;
        // Compare with every token (no early exit).
        for (t, role) in &self.tokens {
            if constant_time_eq(given, t) && found.is_none() {
                found = Some(role.clone());
            }
        }
        found
    }
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub(crate) enum Peer {
    /// Unix socket; `uid` from the peer credentials (None if unreadable).
    Unix { uid: Option<u32> },
    /// Plain TCP (loopback only): the bearer token decides.  `local`:
    /// the address the client reached (the Host check of browser routes).
    Tcp { local: Option<SocketAddr> },
    /// TLS: the client certificate (if it presented one) or else the
    /// bearer token decides; `sni` is the server name the client asked
    /// for in its handshake.
    Tls {
        cert: Option<Arc<crate::tls::CertPeer>>,
        sni: Option<Arc<str>>,
        local: Option<SocketAddr>,
    },
}

impl Peer {
    /// Does the request's `Host` name this listener?  Browser routes
    /// refuse it otherwise (a page of another site whose name was made to
    /// resolve to this address, DNS rebinding).  Accepted: the address the
    /// client connected to, `localhost` on loopback, this machine's host
    /// name (short or qualified) and, on TLS, the server name of the
    /// handshake; a request without `Host` (not a browser's) and Unix
    /// sockets (no browser reaches them) are not checked.
    fn host_allowed<B>(&self, req: &Request<B>) -> Result<(), String> {
        let (local, sni) = match self {
            Peer::Unix { .. } => return Ok(()),
            Peer::Tcp { local } => (*local, None),
            Peer::Tls { sni, local, .. } => (*local, sni.as_deref()),
        };
        let Some(host) = req.headers().get(HOST) else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(host.as_bytes()).into_owned();
        let name = host_name(&text);
        let ok = match name.parse::<IpAddr>() {
            Ok(ip) => local.is_some_and(|l| l.ip() == ip),
            Err(_) => {
                (name.eq_ignore_ascii_case("localhost")
                    && local.is_some_and(|l| l.ip().is_loopback()))
                    || sni.is_some_and(|s| s.eq_ignore_ascii_case(name))
                    || this_host_is(name)
            }
        };
        match ok {
            true => Ok(()),
            false => Err(format!(
                "Host '{text}' does not name this listener (a defence against DNS rebinding): \
                 use its address, localhost, this machine's name or the name of its certificate"
            )),
        }
    }
}

/// The host part of a `Host` header value (`name`, `name:port`,
/// `[v6]:port`, `v4:port`).
fn host_name(value: &str) -> &str {
    let v = value.trim();
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match v.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => v,
    }
}

/// Is `name` this machine's host name (as the kernel has it, or its
/// first label)?  A name that merely starts with it is not (`head.evil.example`
/// is another site's).
fn this_host_is(name: &str) -> bool {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let me = HOST.get_or_init(|| match topo::kernel_hostname("/".as_ref()) {
        Ok(Some(h)) => h.trim().to_ascii_lowercase(),
        // Unknown: no name is this host's.
        _ => String::new(),
    });
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let short = me.split('.').next().unwrap_or_default();
    !me.is_empty() && (name == *me || name == short)
}

/// What keeps a connection counted (its place under the connection caps,
/// the listeners' wait for live connections at shutdown): held by the
/// connection's task and, once an agent session left HTTP for its raw
/// stream (see [`crate::upgrade`]), by that session's task.
pub(crate) struct ConnHold {
    _live: mpsc::Sender<()>,
    permit: Option<ConnPermit>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// A request head arrived (the first-request deadline is met).
    seen: AtomicBool,
}

impl ConnHold {
    /// The caller proved a role: it no longer counts as unauthenticated.
    fn authenticated(&self, role: &Role) {
        if *role != Role::Guest {
            if let Some(p) = &self.permit {
                p.authenticated();
            }
        }
    }
}

pub(crate) async fn serve_connection<S>(
    stream: S,
    peer: Peer,
    ctx: Arc<Ctx>,
    mut shutdown: watch::Receiver<bool>,
    live: mpsc::Sender<()>,
    permit: Option<ConnPermit>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // hyper starts this timer as soon as it waits for a head: it bounds
    // both a slow head and a keep-alive connection idle between requests.
    let head_timeout = ctx.limits.request_timeout;
    let auth_timeout = ctx.limits.auth_timeout;
    // An unauthenticated connection must send its first request head by
    // then (`auth-timeout` from its accept).
    let mut deadline = permit.as_ref().and_then(|p| p.auth_deadline(&ctx.limits));
    let hold = Arc::new(ConnHold {
        _live: live,
        permit,
        shutdown: shutdown.clone(),
        seen: AtomicBool::new(false),
    });
    let watch = Arc::clone(&hold);
    let svc = hyper::service::service_fn(move |req| {
        let ctx = Arc::clone(&ctx);
        let peer = peer.clone();
        let hold = Arc::clone(&hold);
        hold.seen.store(true, Ordering::Release);
        async move { Ok::<_, Infallible>(handle(req, peer, &ctx, hold).await) }
    });
    let (lent, claim) = crate::linger::lend(stream);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(lent), svc)
        .with_upgrades();
    let mut conn = Box::pin(conn);
    // Whether the connection ended by itself (and may have a body still
    // arriving), rather than at a deadline or at shutdown.
    let mut linger = false;
    let result = loop {
        let late = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = conn.as_mut() => {
                linger = true;
                break r;
            }
            _ = late => {
                deadline = None;
                let unauth = watch.permit.as_ref().is_some_and(|p| p.is_unauthenticated());
                if unauth && !watch.seen.load(Ordering::Acquire) {
                    tracing::debug!(
                        "closing a connection that sent no request within {}s (auth-timeout)",
                        auth_timeout.as_secs_f64()
                    );
                    break Ok(());
                }
            }
            _ = shutdown_signalled(&mut shutdown) => {
                conn.as_mut().graceful_shutdown();
                break match tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await {
                    Ok(r) => r,
                    Err(_) => {
                        tracing::debug!("dropping a connection still busy at shutdown");
                        Ok(())
                    }
                };
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended with an error: {e}");
    }
    drop(conn);
    // Not when an upgraded session holds the stream now.
    if let Some(stream) = claim.take().filter(|_| linger) {
        crate::linger::close(stream).await;
    }
}

/// Sends the `Disconnect` of a connection id when dropped: after a
/// non-streaming reply, at the end of a stream, or when the client goes
/// away (hyper drops the handler future or the response body).
pub(crate) struct DisconnectGuard {
    pub(crate) conn: rpc::ConnId,
    tx: LoopTx,
    armed: bool,
}

impl DisconnectGuard {
    pub(crate) fn new(conn: rpc::ConnId, tx: LoopTx) -> DisconnectGuard {
        DisconnectGuard {
            conn,
            tx,
            armed: true,
        }
    }

    /// The service needs no `Disconnect`: it took the request's last
    /// reply as one ([`ReplySender::ends_conn`]).
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        // The service may be gone already; nothing to tell then.
        if self.armed {
            self.tx.disconnect(self.conn);
        }
    }
}

/// A response body: a complete one, or NDJSON lines as replies arrive.
pub(crate) enum ReplyBody {
    Full(Option<Bytes>),
    Stream {
        rx: ReplyReceiver,
        /// The request's outbound queue: a reply leaves it when hyper
        /// takes it (hyper polls the body only when it can write).
        queue: Arc<OutQueue>,
        done: bool,
        guard: DisconnectGuard,
    },
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ReplyBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ReplyBody::Stream {
                rx,
                queue,
                done,
                guard,
            } => {
                if *done {
                    return Poll::Ready(None);
                }
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(reply)) => {
                        queue.release(reply_cost(&reply));
                        *done = reply.is_err();
                        let line = wire::reply_line(&reply);
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
                    }
                    Poll::Ready(None) => {
                        *done = true;
                        tracing::warn!(
                            conn = guard.conn,
                            "service dropped a streaming request without an end-of-stream reply"
                        );
                        Poll::Ready(None)
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplyBody::Full(b) => b.is_none(),
            ReplyBody::Stream { done, .. } => *done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ReplyBody::Full(None) => SizeHint::with_exact(0),
            ReplyBody::Stream { .. } => SizeHint::default(),
        }
    }
}

fn json_response(status: StatusCode, body: String) -> Response<ReplyBody> {
    bytes_response(status, Bytes::from(body))
}

/// Pre-serialised JSON shared with other replies, as a body without a copy.
struct SharedJson(Arc<str>);

impl AsRef<[u8]> for SharedJson {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

fn bytes_response(status: StatusCode, body: Bytes) -> Response<ReplyBody> {
    let mut resp = Response::new(ReplyBody::Full((!body.is_empty()).then_some(body)));
    *resp.status_mut() = status;
    if resp.body().size_hint().exact() != Some(0) {
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(wire::JSON));
    }
    resp
}

/// An error reply: `status`, the error object, and the errno header.
pub(crate) fn error_response(status: StatusCode, e: &RpcError) -> Response<ReplyBody> {
    let body = serde_json::to_string(&wire::error_json(e)).unwrap_or_default();
    let mut resp = json_response(status, body);
    resp.headers_mut()
        .insert(wire::ERRNUM_HEADER, HeaderValue::from(e.errnum));
    resp
}

/// An RPC error reply, status per [`wire::http_status`].
pub(crate) fn rpc_error_response(e: &RpcError) -> Response<ReplyBody> {
    let status = StatusCode::from_u16(wire::http_status(e.errnum))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error_response(status, e)
}

fn reply_response(reply: Reply) -> Response<ReplyBody> {
    match reply {
        Ok(Payload::Json(s)) if &*s != "null" => {
            bytes_response(StatusCode::OK, Bytes::from_owner(SharedJson(s)))
        }
        Ok(p) => json_response(StatusCode::OK, wire::payload_body(&p)),
        Err(e) => rpc_error_response(&e),
    }
}

/// Compare without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer<B>(req: &Request<B>) -> Option<&[u8]> {
    let v = req.headers().get(wire::AUTH_HEADER)?.to_str().ok()?;
    let (scheme, given) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| given.trim().as_bytes())
}

/// Does the request carry `Authorization: Bearer <token>`?
#[cfg(test)]
fn authorized<B>(req: &Request<B>, token: &[u8]) -> bool {
    bearer(req).is_some_and(|given| constant_time_eq(given, token))
}

/// 401 with an EPERM error object.
/// The caller's role (and uid, on a Unix socket), decided by the
/// listener: the peer's uid on a Unix socket, the client certificate or
/// else the bearer token on TLS, the bearer token on (loopback) TCP.
/// Missing credentials are refused (`Err`: why, for the 401 text), except with `guest_if_none`
/// (the web routes, see [`crate::web`]) where a request with no
/// certificate role and no `Authorization` header is a guest's; a wrong
/// token is refused either way.
fn caller<B>(
    req: &Request<B>,
    peer: &Peer,
    ctx: &Ctx,
    guest_if_none: bool,
) -> Result<(Role, Option<u32>), String> {
    let anonymous = guest_if_none && req.headers().get(wire::AUTH_HEADER).is_none();
    match peer {
        Peer::Unix { uid } => Ok(ctx.unix_role(*uid)),
        Peer::Tcp { .. } => match ctx.token_role(req) {
            Some(role) => Ok((role, None)),
            None if anonymous => Ok((Role::Guest, None)),
            None => Err("missing or wrong bearer token".into()),
        },
        Peer::Tls { cert, .. } => match (cert.as_deref(), ctx.token_role(req)) {
            (Some(crate::tls::CertPeer { role: Some(r), .. }), _) => Ok((r.clone(), None)),
            (_, Some(role)) => Ok((role, None)),
            // The web routes' data is the RPC's: an anonymous network
            // client reads it only where the site said so.
            (_, None) if anonymous && ctx.public_read => Ok((Role::Guest, None)),
            (_, None) if anonymous => Err("present a client certificate or a bearer token \
                 (anonymous reads of the web view need `public-read = true` in [serve])"
                .into()),
            (Some(c), None) => Err(format!(
                "the certificate of {} maps to no role (see [serve.auth]) \
                 and no valid bearer token was given",
                c.name
            )),
            (None, None) => Err("present a client certificate or a bearer token".into()),
        },
    }
}

fn unauthorized(msg: String) -> Response<ReplyBody> {
    let mut resp = error_response(StatusCode::UNAUTHORIZED, &RpcError::new(EPERM, msg));
    resp.headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

fn wants_streaming<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(wire::STREAMING_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            let v = v.trim();
            v == "1" || v.eq_ignore_ascii_case("true")
        })
        .unwrap_or(false)
}

pub(crate) fn too_large(limit: usize) -> Response<ReplyBody> {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &RpcError::new(
            EOVERFLOW,
            format!("request body exceeds the limit of {limit} bytes"),
        ),
    )
}

pub(crate) fn too_slow(timeout: Duration) -> Response<ReplyBody> {
    error_response(
        StatusCode::REQUEST_TIMEOUT,
        &RpcError::new(
            ETIMEDOUT,
            format!(
                "request body not received within {}s (request-timeout)",
                timeout.as_secs_f64()
            ),
        ),
    )
}

/// The canned answer to a connection refused at a connection cap, written
/// before it is closed.
pub(crate) fn refusal_bytes(e: &RpcError) -> Vec<u8> {
    crate::response::error_bytes(e, &crate::response::date_now())
}

async fn handle(
    req: Request<Incoming>,
    peer: Peer,
    ctx: &Ctx,
    hold: Arc<ConnHold>,
) -> Response<ReplyBody> {
    // hyper bounds what it buffers of a head (MAX_HEAD_BYTES and one
    // read more); this is the exact bound, whatever the reads were.
    let head_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len())
        + req
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>();
    if head_len > MAX_HEAD_BYTES {
        let mut resp = error_response(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &RpcError::new(
                EOVERFLOW,
                format!("request head exceeds the limit of {MAX_HEAD_BYTES} bytes"),
            ),
        );
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return resp;
    }
    if let Some(resp) = web_route(&req, &peer, ctx, &hold).await {
        return resp;
    }
    let (role, userid) = match caller(&req, &peer, ctx, false) {
        Ok(c) => c,
        Err(why) => return ctx.unauthenticated(&req, &why),
    };
    hold.authenticated(&role);
    let path = req.uri().path();
    let Some(topic) = wire::topic_of(path).map(str::to_string) else {
        return error_response(
            StatusCode::NOT_FOUND,
            &RpcError::new(
                ENOSYS,
                format!(
                    "no endpoint {path}: expected POST {}TOPIC",
                    wire::PATH_PREFIX
                ),
            ),
        );
    };
    if req.method() != Method::POST {
        let mut resp = error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &RpcError::new(
                EPROTO,
                format!("method {} is not allowed on {path}: use POST", req.method()),
            ),
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    // A role that may not use the topic at all is refused before a byte
    // of the body is read (the core's own refusal, word for word).
    if let Some(t) = rpc::catalog::lookup(&topic) {
        if !role.grants(t.need) {
            return rpc_error_response(&role.refusal(&topic, t.need));
        }
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    // Checked before a byte of the body is read, by role and topic
    // (`Content-Length` here, `Limited` while reading a chunked body).
    let limit = ctx.limits.body_bytes(&topic, &role);
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    if topic == wire::SESSION_TOPIC {
        if !crate::upgrade::wants_raw_session(&req) {
            return error_response(
                StatusCode::BAD_REQUEST,
                &RpcError::new(
                    EPROTO,
                    format!(
                        "an agent session needs the headers `Connection: upgrade` and `Upgrade: {}`",
                        wire::SESSION_UPGRADE
                    ),
                ),
            );
        }
        return crate::upgrade::upgraded_session(req, role, userid, &ctx.tx, &ctx.limits, hold)
            .await;
    }
    let streaming = wants_streaming(&req);
    let timeout = ctx.limits.request_timeout;
    let collected = tokio::time::timeout(timeout, Limited::new(req.into_body(), limit).collect());
    let body = match collected.await {
        Err(_) => return too_slow(timeout),
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(limit),
        Ok(Err(e)) => {
            tracing::debug!("error reading a request body: {e}");
            return error_response(
                StatusCode::BAD_REQUEST,
                &RpcError::new(EPROTO, format!("error reading request body: {e}")),
            );
        }
    };
    let payload = match wire::payload_of(&body) {
        Ok(v) => v,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e),
    };

    let who = who(&peer, &role);
    dispatch(ctx, topic, payload, streaming, role, (userid, who)).await
}

/// How a TCP or TLS caller is named in the record of a drain: the
/// certificate that gave the role, else the token's role (Unix peers are
/// named from their uid by the shell).
fn who(peer: &Peer, role: &Role) -> Option<Arc<str>> {
    match peer {
        Peer::Unix { .. } => None,
        Peer::Tls { cert: Some(c), .. } if c.role.is_some() => {
            Some(format!("cert:{}", c.name).into())
        }
        Peer::Tcp { .. } | Peer::Tls { .. } => Some(format!("token:{}", role.name()).into()),
    }
}

/// Hand one request to the service and answer with its reply (or, when
/// `streaming`, with NDJSON lines as replies arrive).
async fn dispatch(
    ctx: &Ctx,
    topic: String,
    payload: serde_json::Value,
    streaming: bool,
    role: Role,
    (userid, who): (Option<u32>, Option<Arc<str>>),
) -> Response<ReplyBody> {
    let conn = next_conn_id();
    let queue = OutQueue::new(ctx.limits.outbound_bytes(&role));
    let (replies, mut rx) = ReplySender::new(Arc::clone(&queue), streaming);
    // This request is its connection id's only one: the service takes its
    // last reply as the disconnect.
    let replies = replies.ending_conn();
    let request = rpc::Request {
        conn,
        matchtag: 1,
        topic,
        payload,
        streaming,
        role,
        userid,
        who,
    };
    tracing::debug!(conn, topic = %request.topic, streaming, role = ?request.role, "request");
    let handed = match ctx.tx.request(request, replies) {
        Err(e) => return rpc_error_response(&e.error()),
        Ok(h) => h,
    };
    // Answered from a snapshot: the service never saw the request, there
    // is no Disconnect to send (and never a stream).
    let guard = (handed == Handed::Queued).then(|| DisconnectGuard::new(conn, ctx.tx.clone()));
    if streaming {
        if let Some(guard) = guard {
            return ndjson_stream(rx, queue, guard);
        }
    }
    // If the client goes away meanwhile, hyper drops this future and the
    // guard sends the Disconnect.
    let reply = rx.recv().await;
    if let Some(r) = &reply {
        queue.release(reply_cost(r));
        // The service counts the connection gone with this reply.
        if let Some(g) = guard {
            g.disarm();
        }
    } else {
        drop(guard);
    }
    match reply {
        Some(reply) => reply_response(reply),
        None => rpc_error_response(&RpcError::new(
            EIO,
            "service ended the request without a reply",
        )),
    }
}

/// A `GET` outside the RPC namespace, answered by the installed web
/// handler (no credentials needed: missing ones make a guest, see
/// [`crate::web`]).
async fn web_route<B>(
    req: &Request<B>,
    peer: &Peer,
    ctx: &Ctx,
    hold: &ConnHold,
) -> Option<Response<ReplyBody>> {
    let web = ctx.web.as_ref()?;
    if req.method() != Method::GET || req.uri().path().starts_with(wire::PATH_PREFIX) {
        return None;
    }
    let path = req.uri().path();
    // Probes are for monitoring tools, anyone's; every other route is a
    // browser's: it must name this listener, and its data is the RPC's.
    let browser = !crate::web::PROBES.contains(&path);
    if browser {
        if let Err(why) = peer.host_allowed(req) {
            return Some(error_response(
                StatusCode::MISDIRECTED_REQUEST,
                &RpcError::new(EPERM, why),
            ));
        }
    }
    let anonymous = req.headers().get(wire::AUTH_HEADER).is_none();
    let (caller, userid) = match caller(req, peer, ctx, true) {
        Ok(c) => c,
        Err(_) if anonymous && !browser => (Role::Guest, None),
        Err(why) => return Some(unauthorized(format!("authentication required: {why}"))),
    };
    hold.authenticated(&caller);
    let r = match web.get(path, &caller)? {
        crate::web::WebRoute::Page(r) => r,
        crate::web::WebRoute::Rpc {
            topic,
            streaming,
            role,
        } => {
            let payload = serde_json::Value::Object(Default::default());
            let role = crate::web::cap(&role, &caller);
            let caller = (userid, None);
            return Some(dispatch(ctx, topic.to_string(), payload, streaming, role, caller).await);
        }
    };
    let mut resp = Response::new(ReplyBody::Full((!r.body.is_empty()).then_some(r.body)));
    *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    Some(resp)
}

/// A response whose body is the request's replies as NDJSON lines, as
/// they arrive; `guard` sends the Disconnect when the body is dropped.
fn ndjson_stream(
    rx: ReplyReceiver,
    queue: Arc<OutQueue>,
    guard: DisconnectGuard,
) -> Response<ReplyBody> {
    let mut resp = Response::new(ReplyBody::Stream {
        rx,
        queue,
        done: false,
        guard,
    });
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(wire::NDJSON));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        let req = |v: &str| {
            Request::builder()
                .header("authorization", v)
                .body(())
                .unwrap()
        };
        assert!(authorized(&req("Bearer tok"), b"tok"));
        assert!(authorized(&req("bearer  tok "), b"tok"));
        assert!(!authorized(&req("Bearer tok2"), b"tok"));
        assert!(!authorized(&req("Basic tok"), b"tok"));
        assert!(!authorized(&req("tok"), b"tok"));
        assert!(!authorized(&Request::new(()), b"tok"));
    }

    #[test]
    fn host_header_must_name_the_listener() {
        let req = |h: &str| Request::builder().header("host", h).body(()).unwrap();
        let tcp = Peer::Tcp {
            local: Some("127.0.0.1:8051".parse().unwrap()),
        };
        assert!(tcp.host_allowed(&req("127.0.0.1:8051")).is_ok());
        assert!(tcp.host_allowed(&req("localhost:8051")).is_ok());
        assert!(tcp.host_allowed(&req("LocalHost")).is_ok());
        assert!(tcp.host_allowed(&Request::new(())).is_ok(), "not a browser");
        let e = tcp.host_allowed(&req("evil.example:8051")).unwrap_err();
        assert!(
            e.contains("'evil.example:8051'") && e.contains("DNS rebinding"),
            "{e}"
        );
        assert!(tcp.host_allowed(&req("127.0.0.2:8051")).is_err());
        let tls = Peer::Tls {
            cert: None,
            sni: Some("head.example".into()),
            local: Some("10.0.0.1:8050".parse().unwrap()),
        };
        assert!(tls.host_allowed(&req("head.example:8050")).is_ok());
        assert!(tls.host_allowed(&req("HEAD.example")).is_ok());
        assert!(tls.host_allowed(&req("10.0.0.1")).is_ok());
        assert!(
            tls.host_allowed(&req("localhost:8050")).is_err(),
            "not on loopback"
        );
        assert!(tls.host_allowed(&req("[::1]:8050")).is_err());
        let me = topo::kernel_hostname("/".as_ref()).unwrap();
        let me = me.as_deref().unwrap().trim();
        assert!(tcp.host_allowed(&req(&format!("{me}:8051"))).is_ok());
        let rebound = format!("{me}.evil.example");
        assert!(tcp.host_allowed(&req(&rebound)).is_err(), "{rebound}");
        let unix = Peer::Unix { uid: None };
        assert!(unix.host_allowed(&req("anything")).is_ok());
        for (host, name) in [
            ("[::1]:80", "::1"),
            ("a.b:80", "a.b"),
            ("a.b", "a.b"),
            ("10.0.0.1:8050", "10.0.0.1"),
        ] {
            assert_eq!(host_name(host), name);
        }
    }

    #[test]
    fn streaming_flag() {
        let req = |v: &str| {
            Request::builder()
                .header(wire::STREAMING_HEADER, v)
                .body(())
                .unwrap()
        };
        assert!(wants_streaming(&req("1")));
        assert!(wants_streaming(&req("true")));
        assert!(!wants_streaming(&req("0")));
        assert!(!wants_streaming(&Request::new(())));
    }

    #[test]
    fn error_status_and_header() {
        let r = rpc_error_response(&RpcError::bare(rpc::errno::EBUSY));
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(r.headers()[wire::ERRNUM_HEADER], "16");
        assert_eq!(r.headers()[CONTENT_TYPE], wire::JSON);
        let ok = reply_response(Ok(serde_json::Value::Null.into()));
        assert_eq!(ok.status(), StatusCode::OK);
        assert!(ok.headers().get(CONTENT_TYPE).is_none());
        assert!(ok.body().is_end_stream());
    }
}
