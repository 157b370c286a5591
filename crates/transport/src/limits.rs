//! The bounds of the listeners: what one connection may queue, how many
//! connections a listener and a peer may hold, how many requests wait for
//! the service loop, how long a request may take to arrive.
//!
//! Every bound has a clear answer for the client that reaches it (see
//! [`Limits`]); none of them ever blocks the service loop.

use crate::snapshot::Snapshots;
use crate::Incoming;
use rpc::errno::{EAGAIN, EOVERFLOW};
use rpc::{Payload, Reply, RpcError};
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The listeners' limits (`[serve]` keys of the same names, kebab-case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections one listener holds at once; beyond, a new connection is
    /// answered EAGAIN (HTTP 503, Flux handshake errno) and closed.
    pub max_connections: usize,
    /// Connections one peer holds at once, over all listeners: a non-owner
    /// uid on Unix sockets, an IP address on TCP.  The owner (and root) on
    /// Unix sockets is not counted.  Same answer as `max_connections`.
    pub max_connections_per_peer: usize,
    /// Connections one IP address holds at once before they authenticated
    /// (TCP and TLS: before a client certificate with a role or a valid
    /// bearer token); an authenticated connection stops counting here.
    /// Same answer as `max_connections` (a TLS client is closed without one).
    pub max_unauthenticated_per_peer: usize,
    /// Time a TCP or TLS connection has from its accept to complete the TLS
    /// handshake and send its first request head (unless it authenticated
    /// with its certificate); then it is closed.
    pub auth_timeout: Duration,
    /// Requests of one Flux connection waiting for their last reply
    /// (streams included); beyond, a request is answered EAGAIN at once.
    pub max_inflight: usize,
    /// Bytes of replies one connection (HTTP: one request) may have queued
    /// and not yet written because the client does not read.  Beyond, a
    /// stream is ended with EOVERFLOW naming the limit; a connection with
    /// non-streaming replies is closed.
    pub max_outbound_bytes: usize,
    /// The same for a guest's connection (default smaller: a guest may
    /// hold `max_connections_per_peer` of them).
    pub max_guest_outbound_bytes: usize,
    /// Largest request body (HTTP) or message (Flux) of the owner.
    pub max_request_bytes: usize,
    /// Largest request of a guest, checked before it is read (HTTP: 413
    /// from `Content-Length` or while reading; Flux: the connection is
    /// closed on the preamble).
    pub max_guest_request_bytes: usize,
    /// Requests handed to the service loop and not yet taken by it (all
    /// listeners); beyond, a request is answered EAGAIN (HTTP 503).
    pub max_queued_requests: usize,
    /// Time a request (HTTP head and body, Flux message) may take to arrive
    /// once it started; an HTTP connection waiting for its next request head
    /// is closed after this time too.
    pub request_timeout: Duration,
    /// A Flux connection without requests in flight or open streams and
    /// silent this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 32768,
            max_connections_per_peer: 64,
            max_unauthenticated_per_peer: 8,
            auth_timeout: Duration::from_secs(10),
            max_inflight: 1024,
            max_outbound_bytes: 8 << 20,
            max_guest_outbound_bytes: 1 << 20,
            max_request_bytes: rpc::wire::MAX_REQUEST_BODY,
            max_guest_request_bytes: 64 << 10,
            max_queued_requests: 32768,
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

impl Limits {
    /// The outbound queue limit of a role.
    /// Only unauthenticated peers (guests) get the guest limits: every
    /// authenticated role (owner, admin, scheduler, user, agent) may need
    /// whole R documents (reload -f, acquire, the journal's resource-define).
    pub(crate) fn outbound_bytes(&self, role: &rpc::Role) -> usize {
        match role {
            rpc::Role::Guest => self.max_guest_outbound_bytes.min(self.max_outbound_bytes),
            _ => self.max_outbound_bytes,
        }
    }

    /// The request size limit of a role, whatever the topic (a Flux
    /// message, read before its topic is known).
    pub(crate) fn request_bytes(&self, role: &rpc::Role) -> usize {
        match role {
            rpc::Role::Guest => self.max_guest_request_bytes.min(self.max_request_bytes),
            _ => self.max_request_bytes,
        }
    }

    /// The largest body `role` may send on `topic`: the topic catalogue's
    /// bound ([`rpc::catalog::max_body`]) within the configured ones;
    /// checked before a byte of the body is read.
    pub(crate) fn body_bytes(&self, topic: &str, role: &rpc::Role) -> usize {
        rpc::catalog::max_body(topic, role).min(self.request_bytes(role))
    }
}

/// What a reply costs against [`Limits::max_outbound_bytes`]: about its
/// encoded size, without encoding it.
pub fn reply_cost(reply: &Reply) -> usize {
    const OVERHEAD: usize = 64;
    OVERHEAD
        + match reply {
            Ok(Payload::Json(s)) => s.len(),
            Ok(Payload::Value(v)) => value_cost(v),
            Err(e) => e.errstr.as_deref().map_or(0, str::len),
        }
}

fn value_cost(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| value_cost(x) + 1).sum::<usize>(),
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, x)| k.len() + 4 + value_cost(x))
                .sum::<usize>()
        }
    }
}

/// The outbound queue of one connection: bytes of replies accepted for it
/// and not yet written.
#[derive(Debug)]
pub(crate) struct OutQueue {
    queued: AtomicUsize,
    limit: usize,
    overflow: AtomicBool,
    notify: Notify,
}

impl OutQueue {
    pub(crate) fn new(limit: usize) -> Arc<OutQueue> {
        Arc::new(OutQueue {
            queued: AtomicUsize::new(0),
            limit,
            overflow: AtomicBool::new(false),
            notify: Notify::new(),
        })
    }

    /// Take `cost` bytes if they fit (a reply always fits an empty queue).
    pub(crate) fn charge(&self, cost: usize) -> bool {
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q == 0 || q.saturating_add(cost) <= self.limit).then(|| q.saturating_add(cost))
            })
            .is_ok()
    }

    /// Take `cost` bytes whatever the queue holds (a stream's final error).
    fn charge_anyway(&self, cost: usize) {
        self.queued.fetch_add(cost, Ordering::AcqRel);
    }

    /// `cost` bytes were written (or dropped).
    pub(crate) fn release(&self, cost: usize) {
        let _ = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(cost))
            });
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The client stopped reading: its connection is to be closed.
    pub(crate) fn set_overflow(&self) {
        self.overflow.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Resolves once less than half the limit is queued, or `false`
    /// after `timeout` (the client has not read for that long).
    pub(crate) async fn drained(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.queued() > self.limit / 2 {
            if tokio::time::Instant::now() >= deadline || self.is_overflowed() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    pub(crate) fn is_overflowed(&self) -> bool {
        self.overflow.load(Ordering::Acquire)
    }

    /// Resolves once [`OutQueue::set_overflow`] was called.
    pub(crate) async fn overflowed(&self) {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.is_overflowed() {
                return;
            }
            n.await;
        }
    }
}

/// The error ending a stream whose reader fell behind.
pub fn overflow_error(limit: usize) -> RpcError {
    RpcError::new(
        EOVERFLOW,
        format!(
            "client is not reading its replies: more than {limit} bytes queued (max-outbound-bytes)"
        ),
    )
}

/// Why [`ReplySender::send`] did not queue a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyRefused {
    /// The listener side is gone (client disconnected).
    #[error("the client is gone")]
    Closed,
    /// The client does not read: the queue is over its limit.  A stream
    /// has been ended with [`overflow_error`]; a connection with a
    /// non-streaming reply is being closed.
    #[error("the client's outbound queue is full")]
    Overflow,
}

/// Where the service sends the replies of one request.  Never blocks:
/// a reply that does not fit the connection's outbound queue is refused
/// (and the client told, see [`ReplyRefused::Overflow`]).
#[derive(Debug)]
pub struct ReplySender {
    chan: Arc<ReplyChan>,
    queue: Arc<OutQueue>,
    streaming: bool,
    /// The request's connection ends with its last reply (an HTTP
    /// request has a connection id of its own): the service takes that
    /// reply as the connection's `Disconnect` ([`ReplySender::ends_conn`]).
    ends_conn: bool,
    /// A one-shot call's socket: the last reply is written on it right
    /// where it is sent (see [`crate::quick::DirectReply`]).
    direct: Option<Arc<crate::quick::DirectReply>>,
}

/// The replies of one request between the service and its listener: a
/// queue that holds no memory while it is empty (an idle agent session
/// keeps one for hours; a tokio channel would keep a block of 32 reply
/// slots and its cache-padded state, 1.5 KB, for each).
#[derive(Debug, Default)]
struct ReplyChan {
    state: Mutex<ChanState>,
    /// Live [`ReplySender`]s of the request (clones included).
    senders: AtomicUsize,
    /// The [`ReplyReceiver`] is gone.
    receiver_gone: AtomicBool,
    /// The request's last reply was queued or refused.
    ended: AtomicBool,
}

#[derive(Debug, Default)]
struct ChanState {
    replies: std::collections::VecDeque<Reply>,
    /// The receiver waiting for a reply (or for the last sender to go).
    waker: Option<std::task::Waker>,
}

impl ReplyChan {
    fn lock(&self) -> std::sync::MutexGuard<'_, ChanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self, mut state: std::sync::MutexGuard<'_, ChanState>) {
        let waker = state.waker.take();
        drop(state);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The listener's end of a request's replies ([`ReplySender`]): `None`
/// once every sender is gone and every reply was taken.
#[derive(Debug)]
pub struct ReplyReceiver {
    chan: Arc<ReplyChan>,
}

/// Why [`ReplyReceiver::try_recv`] gave no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    #[error("no reply queued")]
    Empty,
    #[error("every sender is gone")]
    Disconnected,
}

impl ReplyReceiver {
    /// The next reply; `Ready(None)` when there will be none.
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Reply>> {
        let mut s = self.chan.lock();
        match self.take(&mut s) {
            Ok(r) => std::task::Poll::Ready(Some(r)),
            Err(TryRecvError::Disconnected) => std::task::Poll::Ready(None),
            Err(TryRecvError::Empty) => {
                match &mut s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                std::task::Poll::Pending
            }
        }
    }

    /// Wait for the next reply (`None`: there will be none).
    pub async fn recv(&mut self) -> Option<Reply> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next reply if one is queued.
    pub fn try_recv(&mut self) -> Result<Reply, TryRecvError> {
        let mut s = self.chan.lock();
        self.take(&mut s)
    }

    /// Is no reply queued?
    pub fn is_empty(&self) -> bool {
        self.chan.lock().replies.is_empty()
    }

    fn take(&self, s: &mut ChanState) -> Result<Reply, TryRecvError> {
        if let Some(r) = s.replies.pop_front() {
            if s.replies.is_empty() {
                // Idle again: hold no memory.
                s.replies = std::collections::VecDeque::new();
            }
            return Ok(r);
        }
        match self.chan.senders.load(Ordering::Acquire) {
            0 => Err(TryRecvError::Disconnected),
            _ => Err(TryRecvError::Empty),
        }
    }
}

impl Drop for ReplyReceiver {
    fn drop(&mut self) {
        self.chan.receiver_gone.store(true, Ordering::Release);
        let dropped = std::mem::take(&mut self.chan.lock().replies);
        drop(dropped);
    }
}

impl Clone for ReplySender {
    fn clone(&self) -> Self {
        self.chan.senders.fetch_add(1, Ordering::AcqRel);
        ReplySender {
            chan: Arc::clone(&self.chan),
            queue: Arc::clone(&self.queue),
            streaming: self.streaming,
            ends_conn: self.ends_conn,
            direct: self.direct.clone(),
        }
    }
}

impl Drop for ReplySender {
    fn drop(&mut self) {
        if self.chan.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one: a waiting receiver learns there is no more.
            let s = self.chan.lock();
            self.chan.wake(s);
        }
    }
}

impl ReplySender {
    pub(crate) fn new(queue: Arc<OutQueue>, streaming: bool) -> (ReplySender, ReplyReceiver) {
        let chan = Arc::new(ReplyChan {
            senders: AtomicUsize::new(1),
            ..ReplyChan::default()
        });
        let s = ReplySender {
            chan: Arc::clone(&chan),
            queue,
            streaming,
            ends_conn: false,
            direct: None,
        };
        (s, ReplyReceiver { chan })
    }

    /// The sender of a request that is its connection's only one: once
    /// its last reply is queued, the service treats the connection as gone
    /// (no `Disconnect` comes for it then; one still may, if the client
    /// went away first, and a second is harmless).
    pub(crate) fn ending_conn(mut self) -> ReplySender {
        self.ends_conn = true;
        self
    }

    /// The sender of a one-shot call whose last reply (unless bigger than
    /// [`crate::quick::DIRECT_MAX`]) is written on its socket by whoever
    /// sends it (the service loop), before its receiver is woken.
    pub(crate) fn writing_to(mut self, direct: Arc<crate::quick::DirectReply>) -> ReplySender {
        self.direct = Some(direct);
        self
    }

    /// Does the connection end with this request's last reply?  The
    /// service then handles the disconnect itself, right after
    /// delivering that reply: one wake-up of the service loop less per
    /// client call.
    pub fn ends_conn(&self) -> bool {
        self.ends_conn
    }

    /// A sender whose queue has no byte limit (tests, internal requests).
    pub fn unbounded(streaming: bool) -> (ReplySender, ReplyReceiver) {
        ReplySender::new(OutQueue::new(usize::MAX), streaming)
    }

    /// A sender whose connection may queue at most `limit` bytes of
    /// replies (tests of a client that does not read).
    pub fn limited(limit: usize, streaming: bool) -> (ReplySender, ReplyReceiver) {
        ReplySender::new(OutQueue::new(limit), streaming)
    }

    /// Queue `reply` for the receiver; `false` if it is gone.
    fn push(&self, reply: Reply) -> bool {
        if self.chan.receiver_gone.load(Ordering::Acquire) {
            return false;
        }
        let mut s = self.chan.lock();
        s.replies.push_back(reply);
        self.chan.wake(s);
        true
    }

    /// Queue one reply for the client.
    pub fn send(&self, reply: Reply) -> Result<(), ReplyRefused> {
        if self.chan.ended.load(Ordering::Acquire) || self.is_closed() {
            return Err(ReplyRefused::Closed);
        }
        let cost = reply_cost(&reply);
        let last = !self.streaming || reply.is_err();
        if !self.queue.charge(cost) {
            self.chan.ended.store(true, Ordering::Release);
            if self.streaming {
                let e: Reply = Err(overflow_error(self.queue.limit()));
                let c = reply_cost(&e);
                self.queue.charge_anyway(c);
                if !self.push(e) {
                    self.queue.release(c);
                }
            } else {
                self.queue.set_overflow();
            }
            return Err(ReplyRefused::Overflow);
        }
        if last {
            self.chan.ended.store(true, Ordering::Release);
            if let Some(d) = &self.direct {
                if cost <= crate::quick::DIRECT_MAX {
                    d.write(&reply);
                } else {
                    d.too_big(&reply);
                }
            }
        }
        if self.push(reply) {
            Ok(())
        } else {
            self.queue.release(cost);
            Err(ReplyRefused::Closed)
        }
    }

    /// Is the receiving side gone?
    pub fn is_closed(&self) -> bool {
        self.chan.receiver_gone.load(Ordering::Acquire)
    }

    /// A handle to watch this request's outbound queue (metrics) that
    /// does not keep the request open.
    pub fn probe(&self) -> QueueProbe {
        QueueProbe {
            queue: Arc::clone(&self.queue),
            chan: Arc::clone(&self.chan),
        }
    }

    /// Was the request's last reply queued (or refused), or is the
    /// receiving side gone?
    pub fn is_ended(&self) -> bool {
        self.chan.ended.load(Ordering::Acquire) || self.is_closed()
    }
}

/// Watches the outbound queue of one request's connection without
/// keeping the request open: live while a [`ReplySender`] of the request
/// exists (the service holds it until the last reply) and its last reply
/// was not sent.
#[derive(Debug, Clone)]
pub struct QueueProbe {
    queue: Arc<OutQueue>,
    chan: Arc<ReplyChan>,
}

impl QueueProbe {
    /// Is the request still open?
    pub fn is_live(&self) -> bool {
        !self.chan.ended.load(Ordering::Acquire)
            && self.chan.senders.load(Ordering::Acquire) > 0
            && !self.chan.receiver_gone.load(Ordering::Acquire)
    }

    /// Bytes of replies queued for the connection and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.queue.queued()
    }

    /// The same number for every request sharing one queue (one
    /// connection), so that a sum counts each queue once.
    pub fn queue_id(&self) -> usize {
        Arc::as_ptr(&self.queue) as usize
    }
}

/// A place in the listener → service-loop queue; dropping it (the loop
/// took the request) frees it.
#[derive(Debug)]
pub struct QueueSlot(Option<Arc<LoopQueue>>);

/// The count of requests waiting for the service loop, and the agent
/// sessions waiting for it to go down.
#[derive(Debug)]
pub(crate) struct LoopQueue {
    queued: AtomicUsize,
    /// At this many waiting requests agent sessions stop reading: half
    /// of `max-queued-requests`, the other half is the clients'.
    session_room: usize,
    room: Notify,
}

impl QueueSlot {
    /// A slot not counted anywhere (tests, internal requests).
    pub fn unbounded() -> QueueSlot {
        QueueSlot(None)
    }
}

impl Drop for QueueSlot {
    fn drop(&mut self) {
        if let Some(q) = &self.0 {
            // Waking is for the one crossing below the sessions' mark
            // only: the loop drops a slot per request.
            if q.queued.fetch_sub(1, Ordering::AcqRel) == q.session_room {
                q.room.notify_waiters();
            }
        }
    }
}

/// Why a request did not reach the service loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// [`Limits::max_queued_requests`] requests are waiting.
    Busy(usize),
    /// The service loop is gone.
    Gone,
}

impl Refused {
    pub(crate) fn error(self) -> RpcError {
        match self {
            Refused::Busy(n) => RpcError::new(
                EAGAIN,
                format!(
                    "service is busy: {n} requests are queued (max-queued-requests), try again"
                ),
            ),
            Refused::Gone => RpcError::new(rpc::errno::EIO, "the service is not running"),
        }
    }
}

/// The listeners' side of the channel to the service loop.
#[derive(Debug, Clone)]
pub(crate) struct LoopTx {
    tx: std::sync::mpsc::Sender<Incoming>,
    queue: Arc<LoopQueue>,
    limit: usize,
    snapshots: Option<Arc<Snapshots>>,
}

/// Where [`LoopTx::request`] put a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handed {
    /// Queued for the service loop: a Disconnect must follow.
    Queued,
    /// Answered at once from a published snapshot (its reply is on the
    /// reply channel); the service never saw it.
    Answered,
}

impl LoopTx {
    pub(crate) fn new(
        tx: std::sync::mpsc::Sender<Incoming>,
        limit: usize,
        snapshots: Option<Arc<Snapshots>>,
    ) -> LoopTx {
        LoopTx {
            tx,
            queue: Arc::new(LoopQueue {
                queued: AtomicUsize::new(0),
                session_room: (limit / 2).max(1),
                room: Notify::new(),
            }),
            limit,
            snapshots,
        }
    }

    pub(crate) fn snapshots(&self) -> Option<&Arc<Snapshots>> {
        self.snapshots.as_ref()
    }

    /// Hand a request to the service, refused when the queue is full; a
    /// read-only request with a published reply is answered at once
    /// (see [`crate::snapshot`]).  The caller must have nothing else of
    /// the connection in flight (else: [`LoopTx::request_in_order`]).
    pub(crate) fn request(
        &self,
        req: rpc::Request,
        replies: ReplySender,
    ) -> Result<Handed, Refused> {
        if let Some(s) = &self.snapshots {
            if let Some((topic, reply)) = s.answer(&req) {
                // A refused reply (the client is gone, or over its
                // outbound limit) is the listener's to handle, as it is
                // for the loop's replies.  (No clock read for requests
                // that go to the loop.)
                let start = std::time::Instant::now();
                let _ = replies.send(Ok(reply));
                s.answered(topic, start.elapsed());
                return Ok(Handed::Answered);
            }
        }
        self.request_in_order(req, replies).map(|()| Handed::Queued)
    }

    /// Hand a request to the service loop (never from a snapshot: the
    /// connection has other requests in flight that it must follow).
    pub(crate) fn request_in_order(
        &self,
        req: rpc::Request,
        replies: ReplySender,
    ) -> Result<(), Refused> {
        let n = self.queue.queued.fetch_add(1, Ordering::AcqRel);
        let slot = QueueSlot(Some(Arc::clone(&self.queue)));
        if n >= self.limit {
            return Err(Refused::Busy(self.limit));
        }
        self.tx
            .send(Incoming::Request { req, replies, slot })
            .map_err(|_| Refused::Gone)
    }

    /// Hand a line of an admitted agent session to the service, once
    /// fewer than half of `max-queued-requests` are waiting: the session
    /// does not read its socket meanwhile (TCP backpressure on the agent),
    /// and the other half stays free for clients.  Never refused for a
    /// full queue: a lost heartbeat would mark the node.
    pub(crate) async fn session_line(
        &self,
        conn: rpc::ConnId,
        payload: serde_json::Value,
    ) -> Result<(), Refused> {
        let q = &self.queue;
        while q.queued.load(Ordering::Acquire) >= q.session_room {
            let room = q.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if q.queued.load(Ordering::Acquire) < q.session_room {
                break;
            }
            // The wake-up is a slot crossing the mark; the timeout is a
            // backstop.
            let _ = tokio::time::timeout(Duration::from_millis(100), room).await;
        }
        q.queued.fetch_add(1, Ordering::AcqRel);
        let slot = QueueSlot(Some(Arc::clone(q)));
        self.tx
            .send(Incoming::SessionLine {
                conn,
                payload,
                slot,
            })
            .map_err(|_| Refused::Gone)
    }

    /// Tell the service a connection is gone (never refused).
    pub(crate) fn disconnect(&self, conn: rpc::ConnId) {
        let _ = self.tx.send(Incoming::Disconnect(conn));
    }
}

/// Who counts against [`Limits::max_connections_per_peer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PeerKey {
    Uid(u32),
    Ip(IpAddr),
}

/// Connection counts: per listener and per peer.
#[derive(Debug, Default)]
pub(crate) struct PeerCounts {
    per_peer: Mutex<HashMap<PeerKey, usize>>,
    /// The same for connections not yet authenticated.
    unauth: Mutex<HashMap<PeerKey, usize>>,
}

impl PeerCounts {
    /// Count one more connection of `key` in `map`, unless `cap` are held.
    fn take(map: &Mutex<HashMap<PeerKey, usize>>, key: PeerKey, cap: usize) -> bool {
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.entry(key).or_insert(0);
        if *c >= cap {
            return false;
        }
        *c += 1;
        true
    }

    fn give_back(map: &Mutex<HashMap<PeerKey, usize>>, key: PeerKey) {
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&key);
            }
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CapReached {
    Listener(usize),
    Peer(usize),
    Unauthenticated(usize),
}

impl CapReached {
    pub(crate) fn error(self) -> RpcError {
        match self {
            CapReached::Listener(n) => RpcError::new(
                EAGAIN,
                format!("too many connections: this listener holds {n} (max-connections)"),
            ),
            CapReached::Peer(n) => RpcError::new(
                EAGAIN,
                format!("too many connections from this peer: {n} (max-connections-per-peer)"),
            ),
            CapReached::Unauthenticated(n) => RpcError::new(
                EAGAIN,
                format!(
                    "too many unauthenticated connections from this peer: {n} \
                     (max-unauthenticated-per-peer)"
                ),
            ),
        }
    }
}

/// An admitted connection; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct ConnPermit {
    listener: Arc<AtomicUsize>,
    counts: Arc<PeerCounts>,
    peer: Option<PeerKey>,
    /// Counted against [`Limits::max_unauthenticated_per_peer`] (until
    /// [`ConnPermit::authenticated`]).
    unauth: Option<PeerKey>,
    unauth_held: AtomicBool,
    accepted: std::time::Instant,
}

impl ConnPermit {
    /// When an unauthenticated connection must have completed its TLS
    /// handshake and sent its first request head ([`Limits::auth_timeout`]
    /// from its accept); `None` for a connection known at accept.
    pub(crate) fn auth_deadline(&self, limits: &Limits) -> Option<tokio::time::Instant> {
        self.unauth?;
        let at = tokio::time::Instant::from_std(self.accepted);
        Some(at + limits.auth_timeout)
    }

    /// The connection proved who it is (a certificate with a role, a valid
    /// token): it no longer counts as unauthenticated.
    pub(crate) fn authenticated(&self) {
        if let Some(key) = self.unauth {
            if self.unauth_held.swap(false, Ordering::AcqRel) {
                PeerCounts::give_back(&self.counts.unauth, key);
            }
        }
    }

    /// Is the connection still unauthenticated?
    pub(crate) fn is_unauthenticated(&self) -> bool {
        self.unauth_held.load(Ordering::Acquire)
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        self.listener.fetch_sub(1, Ordering::AcqRel);
        self.authenticated();
        if let Some(key) = self.peer {
            PeerCounts::give_back(&self.counts.per_peer, key);
        }
    }
}

/// Who is connecting, as far as the listener knows at accept time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Known by its credentials (a Unix peer): `None` is not counted per
    /// peer (the owner, root).
    Known(Option<PeerKey>),
    /// Not yet authenticated (TCP, TLS): counted per address under both
    /// caps until it authenticates.
    Unknown(PeerKey),
}

/// Admit a connection on a listener with `open` connections: the one
/// place every listener kind asks (`max-connections`, then
/// `max-connections-per-peer`, then `max-unauthenticated-per-peer`).
pub(crate) fn admit(
    open: &Arc<AtomicUsize>,
    counts: &Arc<PeerCounts>,
    caller: Caller,
    limits: &Limits,
) -> Result<ConnPermit, CapReached> {
    let n = open.fetch_add(1, Ordering::AcqRel);
    let mut permit = ConnPermit {
        listener: Arc::clone(open),
        counts: Arc::clone(counts),
        peer: None,
        unauth: None,
        unauth_held: AtomicBool::new(false),
        accepted: std::time::Instant::now(),
    };
    if n >= limits.max_connections {
        return Err(CapReached::Listener(limits.max_connections));
    }
    let (key, unauth) = match caller {
        Caller::Known(key) => (key, None),
        Caller::Unknown(key) => (Some(key), Some(key)),
    };
    if let Some(key) = key {
        if !PeerCounts::take(&counts.per_peer, key, limits.max_connections_per_peer) {
            return Err(CapReached::Peer(limits.max_connections_per_peer));
        }
        permit.peer = Some(key);
    }
    if let Some(key) = unauth {
        let cap = limits.max_unauthenticated_per_peer;
        if !PeerCounts::take(&counts.unauth, key, cap) {
            return Err(CapReached::Unauthenticated(cap));
        }
        permit.unauth = Some(key);
        permit.unauth_held.store(true, Ordering::Release);
    }
    Ok(permit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_come_in_order_then_none_once_every_sender_is_gone() {
        let (s, mut rx) = ReplySender::unbounded(true);
        let s2 = s.clone();
        assert!(rx.is_empty());
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
        s.send(Ok(json!(1).into())).unwrap();
        s2.send(Ok(json!(2).into())).unwrap();
        assert!(!rx.is_empty());
        drop(s);
        assert!(rx.try_recv().is_ok_and(|r| r == Ok(json!(1).into())));
        assert!(rx.try_recv().is_ok_and(|r| r == Ok(json!(2).into())));
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty), "s2 lives");
        drop(s2);
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Disconnected));
        // A waiting receiver is woken by a reply and by the last sender's end.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let (s, mut rx) = ReplySender::unbounded(true);
            let t = tokio::spawn(async move { (rx.recv().await, rx.recv().await) });
            tokio::task::yield_now().await;
            s.send(Ok(json!("x").into())).unwrap();
            tokio::task::yield_now().await;
            drop(s);
            let (first, end) = t.await.unwrap();
            assert_eq!(first, Some(Ok(json!("x").into())));
            assert_eq!(end, None);
        });
    }

    #[test]
    fn a_sender_sees_its_receiver_gone() {
        let (s, rx) = ReplySender::unbounded(false);
        assert!(!s.is_closed());
        drop(rx);
        assert!(s.is_closed() && s.is_ended());
        assert_eq!(s.send(Ok(json!(1).into())), Err(ReplyRefused::Closed));
        // Only the senders of an HTTP request end their connection.
        assert!(!s.ends_conn());
        assert!(ReplySender::unbounded(false).0.ending_conn().ends_conn());
    }

    #[test]
    fn queue_refuses_beyond_the_limit_but_takes_one_big_reply() {
        let q = OutQueue::new(100);
        assert!(q.charge(500), "an empty queue takes any reply");
        assert!(!q.charge(1));
        q.release(500);
        assert!(q.charge(60));
        assert!(q.charge(40));
        assert!(!q.charge(1));
        q.release(100);
        assert_eq!(q.queued(), 0);
    }

    #[test]
    fn probe_sees_the_queue_and_the_end_of_the_request() {
        let q = OutQueue::new(10_000);
        let (s, mut rx) = ReplySender::new(Arc::clone(&q), true);
        let (s2, _rx2) = ReplySender::new(Arc::clone(&q), true);
        let p = s.probe();
        assert!(p.is_live());
        assert_eq!(
            p.queue_id(),
            s2.probe().queue_id(),
            "one queue per connection"
        );
        assert_eq!(p.queued_bytes(), 0);
        s.send(Ok(json!({"a": "x".repeat(200)}).into())).unwrap();
        assert!(p.queued_bytes() >= 200, "{}", p.queued_bytes());
        assert!(p.is_live(), "a stream stays open after a response");
        // the probe does not keep the request open
        drop(s);
        assert!(!p.is_live());
        assert!(rx.try_recv().is_ok());
        // an error ends a stream even while its sender is kept
        let (s3, _rx3) = ReplySender::new(Arc::clone(&q), true);
        let p3 = s3.probe();
        s3.send(Err(rpc::RpcError::bare(rpc::errno::ENODATA)))
            .unwrap();
        assert!(!p3.is_live());
        // the receiving side gone
        let (s4, rx4) = ReplySender::new(q, true);
        let p4 = s4.probe();
        drop(rx4);
        assert!(!p4.is_live());
    }

    #[test]
    fn streaming_overflow_ends_the_stream_with_the_limit_named() {
        let q = OutQueue::new(100);
        let (s, mut rx) = ReplySender::new(Arc::clone(&q), true);
        assert_eq!(s.send(Ok(json!({"a": "x".repeat(200)}).into())), Ok(()));
        assert_eq!(
            s.send(Ok(json!({"b": 1}).into())),
            Err(ReplyRefused::Overflow)
        );
        assert_eq!(s.send(Ok(json!(1).into())), Err(ReplyRefused::Closed));
        assert!(rx.try_recv().unwrap().is_ok());
        let e = rx.try_recv().unwrap().unwrap_err();
        assert_eq!(e.errnum, EOVERFLOW);
        assert!(e.errstr.unwrap().contains("100 bytes"));
        assert!(
            !q.is_overflowed(),
            "a stream's overflow ends only the stream"
        );
    }

    #[test]
    fn non_streaming_overflow_marks_the_connection() {
        let q = OutQueue::new(100);
        let (a, _ra) = ReplySender::new(Arc::clone(&q), false);
        let (b, _rb) = ReplySender::new(Arc::clone(&q), false);
        assert_eq!(a.send(Ok(json!("x".repeat(200)).into())), Ok(()));
        assert_eq!(a.send(Ok(json!(1).into())), Err(ReplyRefused::Closed));
        assert_eq!(b.send(Ok(json!(1).into())), Err(ReplyRefused::Overflow));
        assert!(q.is_overflowed());
    }

    #[test]
    fn loop_queue_is_bounded_and_slots_free_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let l = LoopTx::new(tx, 2, None);
        let q = OutQueue::new(1000);
        let req = || rpc::Request {
            conn: 1,
            matchtag: 1,
            topic: "resource.status".into(),
            payload: Value::Null,
            streaming: false,
            role: rpc::Role::Owner,
            userid: None,
            who: None,
        };
        let s = || ReplySender::new(Arc::clone(&q), false).0;
        assert!(l.request(req(), s()).is_ok());
        assert!(l.request(req(), s()).is_ok());
        let e = l.request(req(), s()).unwrap_err();
        assert_eq!(e, Refused::Busy(2));
        assert_eq!(e.error().errnum, EAGAIN);
        drop(rx.recv().unwrap());
        assert!(l.request(req(), s()).is_ok());
    }

    #[tokio::test]
    async fn session_lines_wait_for_room_instead_of_queueing() {
        let (tx, rx) = std::sync::mpsc::channel();
        let l = LoopTx::new(tx, 4, None);
        let q = OutQueue::new(1000);
        let s = || ReplySender::new(Arc::clone(&q), false).0;
        l.session_line(1, json!({})).await.unwrap();
        l.session_line(1, json!({})).await.unwrap();
        // Half the queue is the sessions': the next line waits ...
        let l2 = l.clone();
        let waiting = tokio::spawn(async move { l2.session_line(1, json!({})).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a third line waits for room");
        // ... while clients still get the other half.
        let client = rpc::Request {
            conn: 2,
            matchtag: 1,
            topic: rpc::wire::SESSION_LINE_TOPIC.into(),
            payload: Value::Null,
            streaming: false,
            role: rpc::Role::Owner,
            userid: None,
            who: None,
        };
        assert!(l.request_in_order(client, s()).is_ok());
        // The loop takes two (one still leaves half the queue full): the
        // line goes in.
        drop(rx.recv().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "still half full");
        drop(rx.recv().unwrap());
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the loop took a request")
            .unwrap()
            .unwrap();
    }

    #[test]
    fn connection_caps() {
        let open = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(PeerCounts::default());
        let limits = Limits {
            max_connections: 3,
            max_connections_per_peer: 2,
            ..Limits::default()
        };
        let k = Caller::Known(Some(PeerKey::Uid(1000)));
        let a = admit(&open, &counts, k, &limits).unwrap();
        let _b = admit(&open, &counts, k, &limits).unwrap();
        assert_eq!(
            admit(&open, &counts, k, &limits).unwrap_err(),
            CapReached::Peer(2)
        );
        let owner = Caller::Known(None);
        let _c = admit(&open, &counts, owner, &limits).unwrap();
        assert_eq!(
            admit(&open, &counts, owner, &limits).unwrap_err(),
            CapReached::Listener(3)
        );
        drop(a);
        let _d = admit(&open, &counts, k, &limits).unwrap();
        assert_eq!(open.load(Ordering::Acquire), 3);
    }

    #[test]
    fn unauthenticated_connections_have_their_own_smaller_cap() {
        let open = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(PeerCounts::default());
        let limits = Limits {
            max_connections_per_peer: 3,
            max_unauthenticated_per_peer: 2,
            ..Limits::default()
        };
        let ip = PeerKey::Ip(IpAddr::from([127, 0, 0, 1]));
        let other = Caller::Unknown(PeerKey::Ip(IpAddr::from([127, 0, 0, 2])));
        let a = admit(&open, &counts, Caller::Unknown(ip), &limits).unwrap();
        let b = admit(&open, &counts, Caller::Unknown(ip), &limits).unwrap();
        assert!(a.is_unauthenticated());
        assert_eq!(
            admit(&open, &counts, Caller::Unknown(ip), &limits).unwrap_err(),
            CapReached::Unauthenticated(2)
        );
        assert!(
            admit(&open, &counts, other, &limits).is_ok(),
            "another address has its own count"
        );
        // Authenticated: no longer counted as such (twice is once).
        a.authenticated();
        a.authenticated();
        assert!(!a.is_unauthenticated());
        let c = admit(&open, &counts, Caller::Unknown(ip), &limits).unwrap();
        // ... but still under the per-peer cap.
        c.authenticated();
        assert_eq!(
            admit(&open, &counts, Caller::Unknown(ip), &limits).unwrap_err(),
            CapReached::Peer(3)
        );
        drop((a, b, c));
        let m = counts.unauth.lock().unwrap();
        assert!(m.is_empty(), "{m:?}");
        assert!(counts.per_peer.lock().unwrap().is_empty());
        assert_eq!(open.load(Ordering::Acquire), 0);
    }

    #[test]
    fn costs_grow_with_the_payload() {
        let small = reply_cost(&Ok(json!({"a": 1}).into()));
        let big = reply_cost(&Ok(json!({"a": "x".repeat(1000)}).into()));
        assert!(big > small + 900);
        let shared = reply_cost(&Ok(Payload::json("x".repeat(1000))));
        assert!(shared >= 1000);
    }
}
