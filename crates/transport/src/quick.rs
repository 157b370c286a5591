//! One-shot read-only requests answered as they are accepted.
//!
//! `roster resource status`, monitoring probes and schedulers polling
//! `sched-status` open a Unix-socket connection, send one request with
//! `Connection: close`, read the reply and close.  When such a request is
//! already complete in the socket as the connection is accepted, and its
//! reply can come from a published snapshot (see [`crate::snapshot`]),
//! the accept loop answers it on the spot: no task, no registration with
//! the event loop, no HTTP connection state.  In a burst of 100 fresh
//! connections, where about two in three are answered this way, that is
//! a third less of the daemon's CPU per call (bench/RESULTS.md), and the
//! burst is served in the order it connected without a task hand-off per
//! call.  The others were accepted before their client had written its
//! request: their task waits for it a little ([`answer_when_in`]) and
//! answers it the same way, which saves the HTTP connection (another
//! 15 % of the daemon's CPU per call in that burst).
//!
//! A one-shot request without a snapshot (a drain, `resource.get`) that
//! the caller's role may send is taken the same way and handed to the
//! service loop with its connection ([`dispatch`], [`hand_over`]): no
//! task, no registration with the event loop.  The loop writes the reply
//! on the socket itself as it sends it, right after the batch's
//! `fdatasync` ([`DirectReply`]), and the connection closes as the
//! request ends: a client call costs no HTTP connection either, and no
//! wake-up of another thread stands between the commit and the client's
//! reply, nor follows it.  A topic whose reply may wait
//! (`rpc::catalog::Topic::later`) keeps a task that watches for its
//! client's end meanwhile.
//!
//! Anything else is declined *before a byte is consumed*: the request is
//! only peeked at, so a declined connection goes to the normal HTTP path
//! (`http::serve_connection`) exactly as it arrived, and that path gives
//! every answer this one does not (errors, refusals, streams, keep-alive,
//! pipelining, bodies still on their way).  Declined are:
//!
//! * a request not entirely in the socket within [`WAIT_FOR_REQUEST`] of
//!   its connection's accept, or followed by more bytes;
//! * anything but `POST /v1/TOPIC` in HTTP/1.1 with `Connection: close`,
//!   where TOPIC has a published snapshot the caller's role may read, or
//!   is a topic of the catalogue (not the agent session) the role may
//!   use;
//! * `Transfer-Encoding`, `Expect`, `Upgrade` or the streaming header;
//! * a body over the caller's request limit, or that is not JSON; a reply
//!   over the caller's outbound limit.
//!
//! The reply is the same bytes the HTTP path sends for it (status line,
//! headers in the same order, body).  When the socket cannot take it all
//! at once the rest is written by a task bounded by `request-timeout`.

use crate::http::Ctx;
use crate::limits::ConnPermit;
use crate::response;
use rpc::wire;
use rustix::net::{RecvFlags, SendFlags};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::sync::mpsc;

/// The most of a request looked at: a one-shot status request is well
/// under 200 bytes; anything longer takes the normal path.
const PEEK_BYTES: usize = 2048;

/// The most headers a request answered here may carry.
const MAX_HEADERS: usize = 24;

/// What [`try_answer`] did with a connection.
pub(crate) enum Answer {
    /// Answered (or its client is gone): nothing more to do.
    Done,
    /// The request is not all in the socket yet: nothing was consumed.
    NotYet(UnixStream, ConnPermit),
    /// Not for this path: serve it over HTTP, nothing was consumed.
    Declined(UnixStream, ConnPermit),
}

/// A request that qualifies, as parsed from the peeked bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OneShot<'a> {
    pub(crate) topic: &'a str,
    /// Bytes of the whole request (head and body).
    pub(crate) len: usize,
    pub(crate) body: &'a [u8],
}

/// How the bytes a socket holds parse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed<'a> {
    /// One complete one-shot request.
    OneShot(OneShot<'a>),
    /// A head not complete yet (it may still qualify).
    Partial,
    /// Anything else (see the module docs).
    Other,
}

/// Parse `bytes` (everything the socket holds) as one complete one-shot
/// request.
pub(crate) fn parse(bytes: &[u8]) -> Parsed<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(bytes) {
        Ok(httparse::Status::Complete(head)) => one_shot(&req, head, bytes),
        Ok(httparse::Status::Partial) => Parsed::Partial,
        Err(_) => Parsed::Other,
    }
}

/// What a complete head (the first `head` of `bytes`) makes of `bytes`.
fn one_shot<'a>(req: &httparse::Request<'_, 'a>, head: usize, bytes: &'a [u8]) -> Parsed<'a> {
    let (Some("POST"), Some(1), Some(topic)) =
        (req.method, req.version, req.path.and_then(wire::topic_of))
    else {
        return Parsed::Other;
    };
    let mut length: Option<usize> = None;
    let mut close = false;
    for h in req.headers.iter() {
        let name = h.name;
        let value = std::str::from_utf8(h.value).ok();
        if name.eq_ignore_ascii_case("content-length") {
            let v = value.map(str::trim).unwrap_or_default();
            match v.parse() {
                Ok(n) if length.is_none() && v.bytes().all(|b| b.is_ascii_digit()) => {
                    length = Some(n)
                }
                _ => return Parsed::Other,
            }
        } else if name.eq_ignore_ascii_case("connection") {
            let Some(v) = value else { return Parsed::Other };
            close |= v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"));
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("expect")
            || name.eq_ignore_ascii_case("upgrade")
            || name.eq_ignore_ascii_case(wire::STREAMING_HEADER)
        {
            return Parsed::Other;
        }
    }
    let Some(len) = head.checked_add(length.unwrap_or(0)) else {
        return Parsed::Other;
    };
    if !close || len > PEEK_BYTES || len < bytes.len() {
        Parsed::Other
    } else if len > bytes.len() {
        Parsed::Partial
    } else {
        Parsed::OneShot(OneShot {
            topic,
            len,
            body: &bytes[head..],
        })
    }
}

/// What must hold of [`parse`] for any input (the fuzz target and the
/// property tests): no panic, and a request taken is exactly the input,
/// with a valid topic and the body at its end.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn check(input: &[u8]) {
    if let Parsed::OneShot(one) = parse(input) {
        assert_eq!(one.len, input.len(), "a one-shot request is all the input");
        assert!(input.ends_with(one.body), "the body ends the input");
        assert_eq!(
            wire::topic_of(&wire::path_for(one.topic)),
            Some(one.topic),
            "a valid topic"
        );
    }
}

/// What one look at a connection's socket found.
enum Look {
    /// Answered: the reply, and how much of it the socket took.
    Answered(Vec<u8>, usize),
    /// The client is gone (or the socket failed) while being answered.
    Gone,
    /// The request is not all in the socket yet: nothing was consumed.
    NotYet,
    /// Not for this path: nothing was consumed.
    Declined,
    /// A one-shot request for the service loop, taken out of the socket:
    /// [`dispatch`] hands it over and writes its reply.
    Taken(rpc::Request),
}

/// Look at the request waiting on a non-blocking Unix connection and
/// answer it if it is a one-shot read-only request with a published
/// reply (`when` names the path in the log: "at accept", "after a wait").
fn look(fd: BorrowedFd<'_>, uid: Option<u32>, ctx: &Ctx, when: &str) -> Look {
    let Some(snapshots) = ctx.snapshots() else {
        return Look::Declined;
    };
    let start = Instant::now();
    let mut buf = [0u8; PEEK_BYTES];
    let n = match rustix::net::recv(fd, &mut buf[..], RecvFlags::PEEK) {
        Ok((n, _)) if n > 0 => n,
        Err(rustix::io::Errno::AGAIN) => return Look::NotYet,
        // EOF or an error: the HTTP path says what it says to those.
        _ => return Look::Declined,
    };
    let one = match parse(&buf[..n]) {
        Parsed::OneShot(one) => one,
        // A head that does not fit a peek is never one of ours: more
        // bytes would not make it fit, so waiting for them would only
        // leave it unanswered.
        Parsed::Partial if n == buf.len() => return Look::Declined,
        Parsed::Partial => return Look::NotYet,
        Parsed::Other => return Look::Declined,
    };
    let (role, userid) = ctx.unix_role(uid);
    if one.body.len() > ctx.limits().body_bytes(one.topic, &role) {
        return Look::Declined;
    }
    let Ok(body) = wire::payload_of(one.body) else {
        return Look::Declined;
    };
    let Some((topic, payload)) = snapshots.answer_for(one.topic, &role, false) else {
        // For the service loop, when the role may use the topic (a
        // refusal, an unknown topic, an agent session: the HTTP path's
        // answers).
        if one.topic == wire::SESSION_TOPIC
            || !rpc::catalog::lookup(one.topic).is_some_and(|t| role.grants(t.need))
        {
            return Look::Declined;
        }
        let req = rpc::Request {
            conn: crate::next_conn_id(),
            matchtag: 1,
            topic: one.topic.to_string(),
            payload: body,
            streaming: false,
            role,
            userid,
            who: None,
        };
        let len = one.len;
        return match take(fd, &mut buf, len) {
            true => Look::Taken(req),
            false => Look::Gone,
        };
    };
    // The published text itself (no copy), or the body the HTTP path
    // would make of another payload.
    let body = match &payload {
        rpc::Payload::Json(s) if &**s != "null" => std::borrow::Cow::Borrowed(&**s),
        p => std::borrow::Cow::Owned(wire::payload_body(p)),
    };
    if body.is_empty() || body.len() > ctx.limits().outbound_bytes(&role) {
        return Look::Declined;
    }
    // From here on the request is ours: take it out of the socket.
    let len = one.len;
    if !take(fd, &mut buf, len) {
        return Look::Gone;
    }
    let out = response::response_bytes(200, None, body.as_bytes(), &response::date_now());
    let sent = match rustix::net::send(fd, &out, SendFlags::NOSIGNAL) {
        Ok(k) => k,
        Err(rustix::io::Errno::AGAIN) => 0,
        Err(_) => return Look::Gone,
    };
    snapshots.answered(topic, start.elapsed());
    tracing::debug!(topic, "answered {when}");
    Look::Answered(out, sent)
}

/// Take the `len` bytes of a request (all in the socket) out of it;
/// `false` if the client is gone.
fn take(fd: BorrowedFd<'_>, buf: &mut [u8; PEEK_BYTES], len: usize) -> bool {
    let mut taken = 0;
    while taken < len {
        match rustix::net::recv(fd, &mut buf[taken..len], RecvFlags::empty()) {
            Ok((0, _)) | Err(_) => return false,
            Ok((k, _)) => taken += k,
        }
    }
    true
}

/// Hand a request taken out of its socket to the service loop at once,
/// and wait for its reply in a task of its own (no HTTP connection state:
/// a third of the daemon's work per call, see bench/RESULTS.md).  The
/// service loop writes the reply on the socket itself as it sends it
/// ([`DirectReply`]); the task writes what the socket did not take, or
/// the reply the loop did not write, and closes.  The connection id is the request's own: the service takes its
/// reply as the disconnect; a client gone before it (end of stream while
/// waiting) is told to the service as usual.
fn dispatch(
    stream: UnixStream,
    req: rpc::Request,
    ctx: &Ctx,
    hold: (ConnPermit, mpsc::Sender<()>),
) {
    if !rpc::catalog::lookup(&req.topic).is_some_and(|t| t.later) {
        hand_over(stream, req, ctx, hold);
        return;
    }
    let stream = match tokio::net::UnixStream::from_std(stream) {
        Ok(s) => s,
        // Closed unanswered, as a connection that cannot be registered
        // is on the HTTP path.
        Err(e) => {
            tracing::warn!(
                topic = %req.topic,
                "cannot serve a connection: {}",
                crate::io_text(&e)
            );
            return;
        }
    };
    // Handed over here, before the task is spawned: the loop is woken
    // first thing.
    let handed = hand(stream, req, ctx.loop_tx(), ctx.limits());
    let tx = ctx.loop_tx().clone();
    let timeout = ctx.limits().request_timeout;
    tokio::spawn(async move {
        let _hold = hold;
        finish(handed, &tx, timeout).await;
    });
}

/// Hand a one-shot call answered in its own batch (not a topic whose
/// reply may wait, `rpc::catalog::Topic::later`) to the service loop
/// together with its connection: no task, and the socket is never
/// registered with the runtime.  The loop writes the reply and the
/// connection closes when the request's sender is dropped, right after
/// ([`Direct::Owned`]); only the rest of a reply the socket did not take
/// at once, or a reply too big to write on the loop, goes to a task.
/// That is the runtime's part of a durable drain down to its accept and
/// parse: no wake-up of a worker for the reply, no `epoll_ctl` either
/// way.
fn hand_over(
    stream: UnixStream,
    req: rpc::Request,
    ctx: &Ctx,
    hold: (ConnPermit, mpsc::Sender<()>),
) {
    let limits = ctx.limits();
    let queue = crate::limits::OutQueue::new(limits.outbound_bytes(&req.role));
    let (replies, rx) = crate::limits::ReplySender::new(queue, false);
    let direct = DirectReply::owned(stream, Box::new(hold), rx, limits.request_timeout);
    let replies = replies.ending_conn().writing_to(Arc::clone(&direct));
    if let Err(e) = ctx.loop_tx().request(req, replies) {
        direct.write(&Err(e.error()));
    }
}

/// A connection the service loop owns until its reply is written (see
/// [`hand_over`]).
struct Owned {
    stream: UnixStream,
    /// The connection's place (its permit, the listener's count of live
    /// connections): given back when it closes.
    hold: Box<dyn std::any::Any + Send>,
    rt: tokio::runtime::Handle,
    timeout: Duration,
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owned")
            .field("stream", &self.stream)
            .finish()
    }
}

impl Owned {
    /// Write `out` without blocking; a task writes what the socket did
    /// not take (within `request-timeout`), else the connection closes
    /// here.
    fn write(self, out: Vec<u8>) {
        let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        let sent = match rustix::net::send(self.stream.as_fd(), &out, flags) {
            Ok(k) => k,
            Err(rustix::io::Errno::AGAIN) => 0,
            // The client is gone.
            Err(_) => out.len(),
        };
        if sent < out.len() {
            self.later(move |_| out, sent);
        }
    }

    /// In a task: make the bytes (`make`, given the date text) and write
    /// them from `sent` on, within `request-timeout`, then close.
    fn later(self, make: impl FnOnce(&str) -> Vec<u8> + Send + 'static, sent: usize) {
        let Owned {
            stream,
            hold,
            rt,
            timeout,
            ..
        } = self;
        rt.spawn(async move {
            let _hold = hold;
            let Ok(s) = tokio::net::UnixStream::from_std(stream) else {
                return;
            };
            let out = make(&response::date_now());
            write_rest(&s, &out[sent..], timeout).await;
        });
    }
}

/// A one-shot call handed to the service loop (or refused), its reply
/// still to come.
struct Handed {
    stream: Arc<tokio::net::UnixStream>,
    direct: Arc<DirectReply>,
    replies: crate::limits::ReplyReceiver,
    conn: rpc::ConnId,
    /// The answer of a request the loop's queue refused.
    refused: Option<rpc::RpcError>,
}

/// Hand a one-shot call to the service loop, with a sender that writes
/// its reply on the socket ([`DirectReply`]).
fn hand(
    stream: tokio::net::UnixStream,
    req: rpc::Request,
    tx: &crate::limits::LoopTx,
    limits: &crate::Limits,
) -> Handed {
    let conn = req.conn;
    let stream = Arc::new(stream);
    let direct = Arc::new(DirectReply::new(Arc::clone(&stream)));
    let queue = crate::limits::OutQueue::new(limits.outbound_bytes(&req.role));
    let (replies, rx) = crate::limits::ReplySender::new(queue, false);
    let replies = replies.ending_conn().writing_to(Arc::clone(&direct));
    let refused = tx.request(req, replies).err().map(|e| e.error());
    Handed {
        stream,
        direct,
        replies: rx,
        conn,
        refused,
    }
}

/// Wait for a handed call's reply (or its client's end, told to the
/// service as a disconnect), write what the loop did not, and close.
async fn finish(h: Handed, tx: &crate::limits::LoopTx, timeout: Duration) {
    let Handed {
        stream,
        direct,
        replies: mut rx,
        conn,
        refused,
    } = h;
    let reply = match refused {
        Some(e) => Err(e),
        None => {
            let mut watching = true;
            loop {
                tokio::select! {
                    biased;
                    r = rx.recv() => break r.unwrap_or_else(|| {
                        tx.disconnect(conn);
                        Err(rpc::RpcError::new(
                            rpc::errno::EIO,
                            "service ended the request without a reply",
                        ))
                    }),
                    r = stream.readable(), if watching => {
                        // After a whole `Connection: close` request only
                        // its end may come: then the client is gone.
                        let peek = || rustix::net::recv(stream.as_fd(), &mut [0u8; 1][..], RecvFlags::PEEK);
                        match (r, peek()) {
                            (Err(_), _) | (_, Ok((0, _))) | (_, Err(rustix::io::Errno::CONNRESET)) => {
                                direct.take();
                                tx.disconnect(conn);
                                return;
                            }
                            (_, Err(rustix::io::Errno::AGAIN)) => {
                                // A spurious wake-up: wait for the next.
                                let _ = stream.try_io(Interest::READABLE, || -> io::Result<()> {
                                    Err(io::ErrorKind::WouldBlock.into())
                                });
                            }
                            // More bytes: ignored, as the HTTP path does
                            // after a `close`.
                            _ => watching = false,
                        }
                    }
                }
            }
        }
    };
    let rest = match direct.take() {
        Some(rest) => rest,
        None => response::reply_bytes(&reply, &response::date_now()),
    };
    write_rest(&stream, &rest, timeout).await;
}

/// A reply written on its socket by the service loop itself, as it sends
/// it ([`crate::limits::ReplySender::send`]) right after the batch's
/// `fdatasync`: the client has it without waiting for the connection's
/// task to be woken first.  Only for a one-shot call's reply (its
/// connection closes after it) that is not too big to write on the loop.
#[derive(Debug)]
pub(crate) struct DirectReply {
    state: std::sync::Mutex<Direct>,
    /// A connection the loop owns: the receiving end of its replies, kept
    /// as long as the sender, so that the reply the loop wrote counts as
    /// delivered (the service then ends the connection as usual).
    _rx: Option<crate::limits::ReplyReceiver>,
}

#[derive(Debug)]
enum Direct {
    /// No reply yet: the socket to write it on (shared with the task).
    Waiting(Arc<tokio::net::UnixStream>),
    /// No reply yet, and no task: the connection is the loop's until its
    /// reply is written ([`hand_over`]).
    Owned(Box<Owned>),
    /// Written by the loop: what the socket did not take (for the task).
    Written(Vec<u8>),
    /// The task writes the reply, or the client is gone.
    Off,
}

/// The largest reply (as [`crate::limits::reply_cost`] counts) the loop
/// writes itself; a bigger one is left to the connection's task.
pub(crate) const DIRECT_MAX: usize = 16 * 1024;

impl DirectReply {
    fn new(stream: Arc<tokio::net::UnixStream>) -> DirectReply {
        DirectReply {
            state: std::sync::Mutex::new(Direct::Waiting(stream)),
            _rx: None,
        }
    }

    /// For a connection the service loop owns until its reply is written
    /// ([`hand_over`]; called within the runtime, which writes what the
    /// loop cannot).
    fn owned(
        stream: UnixStream,
        hold: Box<dyn std::any::Any + Send>,
        rx: crate::limits::ReplyReceiver,
        timeout: Duration,
    ) -> Arc<DirectReply> {
        Arc::new(DirectReply {
            state: std::sync::Mutex::new(Direct::Owned(Box::new(Owned {
                stream,
                hold,
                rt: tokio::runtime::Handle::current(),
                timeout,
            }))),
            _rx: Some(rx),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Direct> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write `reply` on the socket, unless the task took over.  Never
    /// blocks: what the socket does not take at once is left to the task.
    pub(crate) fn write(&self, reply: &rpc::Reply) {
        let mut state = self.lock();
        if matches!(&*state, Direct::Owned(_)) {
            if let Direct::Owned(o) = std::mem::replace(&mut *state, Direct::Off) {
                o.write(response::reply_bytes(reply, &response::date_now()));
            }
            return;
        }
        let Direct::Waiting(stream) = &*state else {
            return;
        };
        let out = response::reply_bytes(reply, &response::date_now());
        let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        let sent = match rustix::net::send(stream.as_fd(), &out, flags) {
            Ok(k) => k,
            Err(rustix::io::Errno::AGAIN) => 0,
            // The client is gone: nothing more to write.
            Err(_) => out.len(),
        };
        let rest = match sent {
            0 => out,
            k if k < out.len() => out[k..].to_vec(),
            _ => Vec::new(),
        };
        *state = Direct::Written(rest);
    }

    /// A reply too big to write on the loop: a connection the loop owns
    /// has it written by a task (the others by their own task).
    pub(crate) fn too_big(&self, reply: &rpc::Reply) {
        let mut state = self.lock();
        if matches!(&*state, Direct::Owned(_)) {
            if let Direct::Owned(o) = std::mem::replace(&mut *state, Direct::Off) {
                let reply = reply.clone();
                o.later(move |date| response::reply_bytes(&reply, date), 0);
            }
        }
    }

    /// For the task: what is left to write of the reply the loop wrote
    /// (`None`: it wrote none, the task writes it); the loop writes
    /// nothing from now on.
    fn take(&self) -> Option<Vec<u8>> {
        match std::mem::replace(&mut *self.lock(), Direct::Off) {
            Direct::Written(rest) => Some(rest),
            Direct::Waiting(_) | Direct::Owned(_) | Direct::Off => None,
        }
    }
}

impl Drop for DirectReply {
    /// A connection the loop owned whose request ended without a reply
    /// (the service stopped): told so, as the task would tell it.
    fn drop(&mut self) {
        let state = std::mem::replace(&mut *self.lock(), Direct::Off);
        if let Direct::Owned(o) = state {
            let e: rpc::Reply = Err(rpc::RpcError::new(
                rpc::errno::EIO,
                "service ended the request without a reply",
            ));
            o.write(response::reply_bytes(&e, &response::date_now()));
        }
    }
}

/// Answer the request on a just-accepted (non-blocking) Unix connection
/// if it is a one-shot read-only request with a published reply; else
/// hand the connection back untouched.  `permit` and `live` keep the
/// connection counted while the rest of a reply is still being written.
pub(crate) fn try_answer(
    stream: UnixStream,
    uid: Option<u32>,
    ctx: &Ctx,
    permit: ConnPermit,
    live: &mpsc::Sender<()>,
) -> Answer {
    match look(stream.as_fd(), uid, ctx, "at accept") {
        Look::Answered(out, sent) => {
            if sent < out.len() {
                finish_later(
                    stream,
                    out,
                    sent,
                    ctx.limits().request_timeout,
                    permit,
                    live.clone(),
                );
            }
            Answer::Done
        }
        Look::Gone => Answer::Done,
        Look::NotYet => Answer::NotYet(stream, permit),
        Look::Declined => Answer::Declined(stream, permit),
        Look::Taken(req) => {
            dispatch(stream, req, ctx, (permit, live.clone()));
            Answer::Done
        }
    }
}

/// How long a connection accepted before its request was all in waits
/// for it here before it goes to the HTTP path.  A client writes its
/// request right after connecting, so this is plenty; a slower one is
/// served by the HTTP path all the same.
const WAIT_FOR_REQUEST: Duration = Duration::from_millis(100);

/// The most looks at a request arriving in pieces.
const MAX_LOOKS: usize = 4;

/// For a connection [`try_answer`] found without its whole request:
/// wait (at most [`WAIT_FOR_REQUEST`], [`MAX_LOOKS`] looks) for the
/// request and answer it as [`try_answer`] would, which costs the daemon
/// a good deal less than an HTTP connection.  `None`: answered (the rest
/// of a reply the socket could not take at once is written within
/// `request-timeout`), or the client is gone.  `Some`: serve the
/// connection over HTTP; nothing was consumed.
pub(crate) async fn answer_when_in(
    stream: tokio::net::UnixStream,
    uid: Option<u32>,
    ctx: &Ctx,
) -> Option<tokio::net::UnixStream> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_REQUEST;
    for _ in 0..MAX_LOOKS {
        if !matches!(
            tokio::time::timeout_at(deadline, stream.readable()).await,
            Ok(Ok(()))
        ) {
            return Some(stream);
        }
        // Still arriving: the readiness is cleared, so the next wait is
        // for more bytes.
        let seen = stream.try_io(Interest::READABLE, || {
            match look(stream.as_fd(), uid, ctx, "after a wait") {
                Look::NotYet => Err(io::ErrorKind::WouldBlock.into()),
                other => Ok(other),
            }
        });
        match seen {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) | Ok(Look::Declined) | Ok(Look::NotYet) => return Some(stream),
            Ok(Look::Gone) => return None,
            Ok(Look::Taken(req)) => {
                let handed = hand(stream, req, ctx.loop_tx(), ctx.limits());
                finish(handed, ctx.loop_tx(), ctx.limits().request_timeout).await;
                return None;
            }
            Ok(Look::Answered(out, sent)) => {
                if sent < out.len() {
                    write_rest(&stream, &out[sent..], ctx.limits().request_timeout).await;
                }
                return None;
            }
        }
    }
    Some(stream)
}

/// Write the rest of a reply the socket could not take at once, within
/// `timeout`, then close.
fn finish_later(
    stream: UnixStream,
    out: Vec<u8>,
    sent: usize,
    timeout: Duration,
    permit: ConnPermit,
    live: mpsc::Sender<()>,
) {
    tokio::spawn(async move {
        let _hold = (permit, live);
        let Ok(s) = tokio::net::UnixStream::from_std(stream) else {
            return;
        };
        write_rest(&s, &out[sent..], timeout).await;
    });
}

/// Write `rest`, the part of an answer the socket could not take at
/// once, within `timeout` (logged if it is not taken).
async fn write_rest(stream: &tokio::net::UnixStream, mut rest: &[u8], timeout: Duration) {
    let write = async {
        while !rest.is_empty() {
            stream.writable().await?;
            match stream.try_write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => rest = &rest[k..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok::<_, io::Error>(())
    };
    let r = tokio::time::timeout(timeout, write).await;
    if !matches!(r, Ok(Ok(()))) {
        tracing::debug!("a reply answered without HTTP was not taken within {timeout:?}");
    }
}

/// Accept one connection of a non-blocking Unix listener, itself
/// non-blocking and close-on-exec.
pub(crate) fn accept(listener: &std::os::unix::net::UnixListener) -> io::Result<UnixStream> {
    use rustix::net::SocketFlags;
    let fd = rustix::net::accept_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)?;
    Ok(UnixStream::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &[u8] =
        b"POST /v1/resource.status HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}";

    fn one_shot(bytes: &[u8]) -> OneShot<'_> {
        match parse(bytes) {
            Parsed::OneShot(one) => one,
            other => panic!("{other:?}: {:?}", String::from_utf8_lossy(bytes)),
        }
    }

    #[test]
    fn a_complete_one_shot_post_qualifies() {
        let one = one_shot(STATUS);
        assert_eq!(one.topic, "resource.status");
        assert_eq!(one.len, STATUS.len());
        assert_eq!(one.body, b"{}");
        let no_body =
            b"POST /v1/resource.sched-status HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n";
        let one = one_shot(no_body);
        assert_eq!((one.topic, one.body), ("resource.sched-status", &b""[..]));
    }

    #[test]
    fn a_request_still_arriving_may_qualify_later() {
        let text = std::str::from_utf8(STATUS).unwrap();
        for cut in [1, 20, text.len() - 3, text.len() - 1] {
            assert_eq!(parse(&STATUS[..cut]), Parsed::Partial, "{:?}", &text[..cut]);
        }
    }

    #[test]
    fn anything_else_is_declined() {
        let text = std::str::from_utf8(STATUS).unwrap();
        let long = format!("{text}{}", " ".repeat(PEEK_BYTES));
        let declined = [
            // more bytes after the request; a request longer than a peek
            &format!("{text}POST"),
            &long.replacen(
                "content-length: 2",
                &format!("content-length: {}", PEEK_BYTES + 2),
                1,
            ),
            // not a one-shot POST to an RPC path
            &text.replace("POST", "GET"),
            &text.replace("HTTP/1.1", "HTTP/1.0"),
            &text.replace("/v1/resource.status", "/v1/resource.status?x=1"),
            &text.replace("/v1/", "/metrics/"),
            &text.replace("connection: close", "connection: keep-alive"),
            &text.replace("connection: close\r\n", ""),
            // what only the HTTP path handles
            &text.replace("host:", "transfer-encoding: chunked\r\nhost:"),
            &text.replace("host:", "expect: 100-continue\r\nhost:"),
            &text.replace("host:", "upgrade: roster-agent/1\r\nhost:"),
            &text.replace("host:", "x-roster-streaming: 0\r\nhost:"),
            &text.replace(
                "content-length: 2",
                "content-length: 2\r\ncontent-length: 2",
            ),
            &text.replace("content-length: 2", "content-length: +2"),
            &text.replace(
                "content-length: 2",
                "content-length: 99999999999999999999999",
            ),
            "garbage\r\n\r\n",
        ];
        for d in declined {
            assert_eq!(parse(d.as_bytes()), Parsed::Other, "{d:?}");
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes: no panic; a request taken is all of them.
        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            check(&bytes);
        }

        /// A well-formed one-shot request with any headers of ours around
        /// it qualifies, whatever the case of the names; every proper
        /// prefix of it is still arriving.
        #[test]
        fn well_formed_requests_qualify(
            topic in "[a-z][a-z.-]{0,20}",
            body in "[{}\\[\\]0-9a-z\" :,]{0,40}",
            upper in proptest::bool::ANY,
            extra in proptest::collection::vec("[a-w][a-z-]{0,10}: [ -~]{0,20}", 0..5),
        ) {
            for h in &extra {
                let name = h.split(':').next().unwrap_or_default();
                proptest::prop_assume!(!["content-length", "connection", "expect", "transfer-encoding", "upgrade"].contains(&name));
            }
            let conn = if upper { "Connection: Close" } else { "connection: close" };
            let mut text = format!("POST /v1/{topic} HTTP/1.1\r\n{conn}\r\n");
            for h in &extra {
                text.push_str(h);
                text.push_str("\r\n");
            }
            text.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
            let bytes = text.as_bytes();
            let one = one_shot(bytes);
            proptest::prop_assert_eq!(one.topic, topic.as_str());
            proptest::prop_assert_eq!(one.body, body.as_bytes());
            for cut in 0..bytes.len() {
                proptest::prop_assert_eq!(parse(&bytes[..cut]), Parsed::Partial);
            }
        }
    }

    /// The two ends of a connection, the service's shared as a one-shot
    /// call's is, and a sender whose last reply is written on it.
    fn direct_pair() -> (
        Arc<tokio::net::UnixStream>,
        tokio::net::UnixStream,
        Arc<DirectReply>,
        crate::limits::ReplySender,
        crate::limits::ReplyReceiver,
    ) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let ours = Arc::new(ours);
        let direct = Arc::new(DirectReply::new(Arc::clone(&ours)));
        let (tx, rx) = crate::limits::ReplySender::unbounded(false);
        (ours, theirs, direct.clone(), tx.writing_to(direct), rx)
    }

    /// What the client reads until the end (the service's end dropped).
    async fn read_all(mut theirs: tokio::net::UnixStream) -> String {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        theirs.read_to_end(&mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    fn undated(text: &str) -> String {
        text.split("\r\n")
            .filter(|l| !l.starts_with("date: "))
            .collect::<Vec<_>>()
            .join("\r\n")
    }

    #[tokio::test]
    async fn the_sender_writes_a_one_shot_reply_before_its_task_wakes() {
        let (ours, theirs, direct, tx, mut rx) = direct_pair();
        // Sent from another thread, as the service loop does.
        std::thread::spawn(move || tx.send(Ok(rpc::Payload::json("{\"a\":1}"))).unwrap())
            .join()
            .unwrap();
        // On the socket already; the task only learns it is written.
        let mut first = [0u8; 15];
        theirs.readable().await.unwrap();
        assert_eq!(theirs.try_read(&mut first).unwrap(), 15);
        assert_eq!(&first, b"HTTP/1.1 200 OK");
        let reply = rx.recv().await.unwrap();
        assert_eq!(direct.take(), Some(Vec::new()), "nothing left to write");
        drop(ours);
        let rest = read_all(theirs).await;
        let want = response::reply_bytes(&reply, "x");
        assert_eq!(
            undated(&format!("HTTP/1.1 200 OK{rest}")),
            undated(std::str::from_utf8(&want).unwrap())
        );
    }

    #[tokio::test]
    async fn what_the_socket_does_not_take_is_left_to_the_task() {
        let (ours, theirs, direct, tx, mut rx) = direct_pair();
        socket2::SockRef::from(&*ours)
            .set_send_buffer_size(4096)
            .unwrap();
        let body = format!("\"{}\"", "x".repeat(DIRECT_MAX - 200));
        let reply: rpc::Reply = Ok(rpc::Payload::json(body.as_str()));
        tx.send(reply.clone()).unwrap();
        let rest = direct.take().expect("written in part by the sender");
        assert!(
            !rest.is_empty(),
            "the socket took it all: make the reply bigger"
        );
        assert!(rx.recv().await.is_some());
        let reader = tokio::spawn(read_all(theirs));
        write_rest(&ours, &rest, Duration::from_secs(10)).await;
        drop(ours);
        let got = reader.await.unwrap();
        let want = response::reply_bytes(&reply, "x");
        assert_eq!(undated(&got), undated(std::str::from_utf8(&want).unwrap()));
    }

    /// A connection the loop owns ([`hand_over`]): the client's end, the
    /// sender, and the receiving end of the connection's place (closed
    /// when the connection is given back).
    fn owned_pair() -> (
        tokio::net::UnixStream,
        crate::limits::ReplySender,
        std::sync::mpsc::Receiver<()>,
    ) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.set_nonblocking(true).unwrap();
        let (live, gone) = std::sync::mpsc::channel::<()>();
        let (tx, rx) = crate::limits::ReplySender::unbounded(false);
        let direct = DirectReply::owned(ours, Box::new(live), rx, Duration::from_secs(10));
        let tx = tx.ending_conn().writing_to(direct);
        let theirs = tokio::net::UnixStream::from_std(theirs).unwrap();
        (theirs, tx, gone)
    }

    fn given_back(gone: &std::sync::mpsc::Receiver<()>) -> bool {
        matches!(
            gone.recv_timeout(Duration::from_secs(10)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        )
    }

    #[tokio::test]
    async fn an_owned_connection_is_answered_and_closed_by_the_sender() {
        let (theirs, tx, gone) = owned_pair();
        let reply: rpc::Reply = Ok(rpc::Payload::json("{\"a\":1}"));
        // From another thread, as the service loop does; the sender is
        // still alive (the loop drops it after), yet the reply is whole
        // and the connection closed: no task.
        let sent = reply.clone();
        let tx = std::thread::spawn(move || {
            tx.send(sent).unwrap();
            tx
        })
        .join()
        .unwrap();
        assert!(given_back(&gone));
        let got = read_all(theirs).await;
        let want = response::reply_bytes(&reply, "x");
        assert_eq!(undated(&got), undated(std::str::from_utf8(&want).unwrap()));
        drop(tx);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn an_owned_connection_gets_a_big_or_partial_reply_from_a_task() {
        // Over DIRECT_MAX, and more than a small socket buffer takes.
        for (size, buffer) in [(DIRECT_MAX + 10, None), (DIRECT_MAX - 200, Some(4096))] {
            let (theirs, tx, gone) = owned_pair();
            if let Some(b) = buffer {
                socket2::SockRef::from(&theirs)
                    .set_recv_buffer_size(b)
                    .unwrap();
            }
            let body = format!("\"{}\"", "x".repeat(size));
            let reply: rpc::Reply = Ok(rpc::Payload::json(body.as_str()));
            let sent = reply.clone();
            std::thread::spawn(move || tx.send(sent).unwrap())
                .join()
                .unwrap();
            let got = read_all(theirs).await;
            let want = response::reply_bytes(&reply, "x");
            assert_eq!(undated(&got), undated(std::str::from_utf8(&want).unwrap()));
            assert!(given_back(&gone));
        }
    }

    #[tokio::test]
    async fn an_owned_connection_dropped_without_a_reply_is_told_so() {
        let (theirs, tx, gone) = owned_pair();
        std::thread::spawn(move || drop(tx)).join().unwrap();
        assert!(given_back(&gone));
        let got = read_all(theirs).await;
        assert!(got.starts_with("HTTP/1.1 500"), "{got}");
        assert!(
            got.ends_with(r#"{"errnum":5,"errstr":"service ended the request without a reply"}"#),
            "{got}"
        );
    }

    #[tokio::test]
    async fn a_big_reply_or_a_client_gone_is_not_written_by_the_sender() {
        // Over DIRECT_MAX: the task writes it.
        let (ours, theirs, direct, tx, mut rx) = direct_pair();
        let big = format!("\"{}\"", "x".repeat(DIRECT_MAX));
        tx.send(Ok(rpc::Payload::json(big.as_str()))).unwrap();
        assert!(rx.recv().await.is_some());
        assert_eq!(direct.take(), None);
        drop(ours);
        assert_eq!(read_all(theirs).await, "");
        // The task took over (its client went away): nothing written.
        let (ours, theirs, direct, tx, _rx) = direct_pair();
        assert_eq!(direct.take(), None);
        tx.send(Ok(rpc::Payload::json("1"))).unwrap();
        drop(ours);
        assert_eq!(read_all(theirs).await, "");
    }
}
