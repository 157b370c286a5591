//! The resource service as a pure state machine.
//!
//! [`Service::new`] runs flux-core's load sequence on what the shell read
//! from the state directory; [`Service::handle`] takes one [`Input`]
//! (a request, a disconnect, a loaded R for `resource.reload`, shutdown)
//! and the current time, and appends [`Output`]s: events to persist, R to
//! write, replies, log lines.
//!
//! # The durability contract
//! Outputs are ordered.  The shell MUST make every `Persist`, `WriteR` and
//! `WriteCheckpoint` output durable before it sends any `Reply` that comes
//! after it in the output sequence.  The simplest conforming shell (ours)
//! handles a batch of inputs, makes all their persistence outputs durable
//! with one write + fsync (group commit), then sends the batch's replies in
//! order.  Replies are therefore never ahead of the state they acknowledge,
//! and consumers (journal followers, schedulers) never hear of an event
//! that a crash could lose.
//!
//! # Ordering
//! As in flux-core, for a drain the requester is answered first, then the
//! acquirers, then the journal followers.
//!
//! # Resource acquisition
//! `resource.acquire` (both RFC 28 variants), `acquire-cancel`,
//! `acquire-mute`, `release` and `group-set` are served by
//! [`crate::acquire`]; the service calls it from `publish` for every
//! recorded event, so acquire responses always follow the durable event
//! that caused them.  Group changes are not journal events: RFC 44
//! defines a closed set of events and none for groups; the group table is
//! configuration (re-read at every start), and a `resource.group-set`
//! change lasts until the next start or configuration reload.
//!
//! # Layout
//! One module per concern, each adding its handlers to [`Service`]:
//!
//! | module | concern |
//! | --- | --- |
//! | `types` | [`Init`], [`Settings`], [`Input`], [`Output`], [`Inventory`] |
//! | `table` | the topic table: required role, streaming, handler; dispatch |
//! | `load` | start-up: journal from the stored events, exclude, groups, checkpoint + replay, `restart`, `resource-define`; the checkpoint written at shutdown |
//! | `targets` | inventory, host map, exclude/drain/online/torpid/lost sets; target decoding |
//! | `events` | recording events (persist, journal) and publishing them (acquirers, journal followers) |
//! | `status` | `status`, `sched-status`, `get` |
//! | `summary` | `summary`: the status, drain and list views' sets, once per state change |
//! | `drain` | `drain`, `undrain` |
//! | `journal` | `journal`, `journal-cancel` |
//! | `position` | journal positions: resuming a reader after a reconnect, restart or failover |
//! | `reload` | `reload`, `expiration-update` |
//! | `acquire` | `acquire`, `acquire-cancel`, `acquire-mute`, `release`, `group-set` |
//! | `liveness` | online/torpid sets, `monitor-force-up/down`, `monitor-waitup` |
//! | `agents` | `agent`, `agent-heartbeat`, heartbeat timers, discovery, verification |
//! | `relay` | relay sessions: batched hellos, `lively`/`gone` lines, answers routed down |

use crate::acquire::{Acquire, AcquireInfo};
use crate::drain::DrainTable;
use crate::errno::*;
use crate::journal::{Journal, TruncateState};
use crate::monitor::Monitor;
use crate::relays::Relays;
use idset::IdSet;
use rpc::catalog::{self as cat, Call};
use rpc::events as rfc44;
use rpc::{msg, ConnId, Payload, Reply, ReplyTo, Request, Role};
use rset::Rset;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod acquire;
mod agents;
mod drain;
mod events;
mod journal;
mod liveness;
mod load;
mod position;
mod relay;
mod reload;
mod status;
mod summary;
mod table;
mod targets;
mod types;

pub use table::{Topic, TOPICS};
pub use types::{Init, Input, Inventory, Level, Method, Now, Output, Settings, StartError};

use events::Keep;
use position::{Follower, LogIndex};
use targets::TargetState;

/// A deferred `resource.monitor-waitup`.
#[derive(Debug, Clone)]
struct Waitup {
    to: ReplyTo,
    up: u64,
}

/// The resource service state.
#[derive(Debug)]
pub struct Service {
    /// The targets and their sets (read by every subsystem).
    state: TargetState,
    journal: Journal,
    followers: Vec<Follower>,
    /// The persistent log, for journal positions.
    log: LogIndex,
    /// This run's identity ([`Init::run`]).
    run: u64,
    waitups: Vec<Waitup>,
    /// Cached `resource.sched-status` payload, serialised.
    sched_cache: Option<Payload>,
    /// Cached `resource.status` payload, serialised (both caches are
    /// dropped by every recorded event and every new inventory: the only
    /// ways their state changes).
    status_cache: Option<Payload>,
    /// Cached `resource.summary` payloads, without and with the list
    /// part (dropped with the two above).
    summary_cache: [Option<Payload>; 2],
    /// `[queues]` for `config.get`.
    queues: Option<serde_json::Map<String, Value>>,
    stopped: bool,
    /// RFC 28 acquisition (both variants) and resource groups.
    acquire: Acquire,
    /// Agents and their heartbeat timers.
    monitor: Monitor,
    /// What schedulers say they allocated (`resource.allocated-set`), by
    /// credential (`Request::who`, else the uid, else the role): kept
    /// until that credential replaces it, for the life of the service.
    allocated: BTreeMap<String, IdSet>,
    /// Relay sessions (agents speaking for a subtree).
    relays: Relays,
    /// The fan-out of the relay tree (k-ary over ranks).
    relay_fanout: u32,
    verify: Option<rset::VerifyConfig>,
    liveness_batch: f64,
    /// When liveness events were last posted (monotonic seconds).
    liveness_posted: f64,
    /// While the liveness events of a tick are posted: the relays that
    /// spoke for their ranks, by hostname (the events' `relays` context).
    liveness_via: Vec<(String, IdSet)>,
    /// While a relay's hello group is verified: the relay's hostname (the
    /// drain events' `relays` context).
    verify_via: Option<String>,
    /// The monotonic time of the input being handled, seconds
    /// ([`Now::mono`]; never decreases).  Every timer uses it.
    mono: f64,
    /// The last event/drain timestamp handed out: the wall clock, never
    /// going backwards (`max(last, Now::wall)`).
    stamp: f64,
    /// While R is being discovered: each reported rank's R.
    discovered: Option<BTreeMap<u32, Rset>>,
    /// `monitor-force-up`, applied by [`Service::promote`].
    force_up: bool,
    /// Stored events replayed at start plus those followed since
    /// ([`Service::follow`]).
    followed: usize,
}

fn idset_str(ids: &IdSet) -> Value {
    Value::String(ids.encode())
}

/// A `resource-define` context.
fn define(method: &str) -> Map<String, Value> {
    rfc44::context(&rfc44::ResourceDefine {
        method: Some(method.into()),
    })
}

fn proto() -> RpcError {
    RpcError::new(EPROTO, "Protocol error")
}

/// What a handler returns: `Ok(Some(payload))` is the reply; handlers
/// that answered themselves (or defer the answer) return `Ok(None)`; an
/// error is the reply.
type Handled = Result<Option<Payload>, RpcError>;

/// What a bound handler is given besides its typed request: the clock,
/// the request, and the outputs to push to.
struct Ctx<'a> {
    now: f64,
    req: &'a Request,
    out: &'a mut Vec<Output>,
}

impl Service {
    /// Handle one input at time `now` (see [`Now`]: a plain `f64` is the
    /// same seconds on both clocks).
    ///
    /// Handlers get the event timestamp (`now` below): the wall clock
    /// made non-decreasing; the timers read [`Service::mono`].
    pub fn handle(&mut self, now: impl Into<Now>, input: Input, out: &mut Vec<Output>) {
        let Now { mono, wall } = now.into();
        self.mono = self.mono.max(mono.as_secs_f64());
        if wall.is_finite() {
            self.stamp = self.stamp.max(wall);
        }
        let now = self.stamp;
        match input {
            Input::Request(req) => self.request(now, req, out),
            Input::SessionLine { conn, payload } => self.session_input(now, conn, &payload, out),
            Input::Disconnect(conn) => self.disconnect(conn, out),
            Input::Cancel(to) => self.cancel(to, out),
            Input::Tick => self.tick(now, out),
            Input::Reloaded { to, force, result } => self.reloaded(now, to, force, result, out),
            Input::Shutdown => self.shutdown(now, out),
            Input::SetGroups(raw) => self.set_groups(&raw, out),
        }
    }

    fn reply(out: &mut Vec<Output>, to: ReplyTo, reply: Reply) {
        out.push(Output::Reply { to, reply });
    }

    /// The request a `*-cancel {matchtag}` request names: one of the
    /// caller's own connection.
    fn cancel_target(req: &Request, body: msg::CancelRequest) -> ReplyTo {
        ReplyTo {
            conn: req.conn,
            matchtag: body.matchtag,
        }
    }

    fn set_inventory(&mut self, inv: Inventory) {
        self.state.set_inventory(inv);
        self.invalidate_caches();
    }

    /// The state the cached payloads show changed (or may have).
    fn invalidate_caches(&mut self) {
        self.sched_cache = None;
        self.status_cache = None;
        self.summary_cache = Default::default();
    }

    /// The connection went away: drop its requests silently.
    fn disconnect(&mut self, conn: ConnId, out: &mut Vec<Output>) {
        self.followers.retain(|f| f.to.conn != conn);
        self.waitups.retain(|w| w.to.conn != conn);
        // Every client call ends with a disconnect; the up set is
        // computed only when the connection held an acquire (it is
        // needed only then).
        if self.acquire.holds(conn) {
            self.acquire.disconnect(conn, &self.state.truth(), out);
        }
        self.monitor.disconnect(conn);
        self.relays.disconnect(conn);
    }

    /// One request is gone (its connection stays): forget it silently.
    fn cancel(&mut self, to: ReplyTo, out: &mut Vec<Output>) {
        self.followers.retain(|f| f.to != to);
        self.waitups.retain(|w| w.to != to);
        if self.acquire.holds_request(to) {
            self.acquire.gone(to, &self.state.truth(), out);
        }
        // An agent whose stream ended is gone: it goes offline (at the
        // next tick) and its rank is free for a new hello.
        if self.monitor.agent(to.conn).map(|a| a.stream) == Some(to) {
            self.monitor.disconnect(to.conn);
        }
    }

    /// Clean shutdown: end every stream, write the checkpoint.
    fn shutdown(&mut self, now: f64, out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        for f in std::mem::take(&mut self.followers) {
            // A reader that can resume is told to (another server, or
            // this one once restarted, takes it from its last position).
            let end = if f.positions {
                RpcError::new(
                    EAGAIN,
                    "the resource service is stopping: resume from the last position",
                )
            } else {
                RpcError::bare(ENODATA)
            };
            Self::reply(out, f.to, Err(end));
        }
        self.acquire.shutdown(out);
        self.end_agents(out);
        for w in std::mem::take(&mut self.waitups) {
            Self::reply(
                out,
                w.to,
                Err(RpcError::new(ECANCELED, "the resource module was unloaded")),
            );
        }
        out.push(Output::WriteCheckpoint(self.checkpoint(now)));
    }

    /// The monotonic time by which the shell must send [`Input::Tick`]
    /// (on the clock of [`Now::mono`]): the earliest heartbeat deadline,
    /// or the end of the liveness batching interval when transitions are
    /// waiting to be posted.  A tick any time after it (the timers fire
    /// once an agent has been silent for *more* than the limit) does the
    /// work; `None`: nothing is timed, sleep until the next input.
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.stopped {
            return None;
        }
        let mut t = self.monitor.next_check().min(self.relays.next_check());
        if self.monitor.has_changes() || self.relays.has_changes() {
            t = t.min(self.liveness_posted + self.liveness_batch);
        }
        if t.is_nan() || t == f64::INFINITY {
            return None;
        }
        Some(Duration::try_from_secs_f64(t.max(0.0)).unwrap_or(Duration::MAX))
    }

    /// The monotonic time of the latest input, seconds (see [`Now::mono`]).
    pub fn mono(&self) -> f64 {
        self.mono
    }

    // ------------------------------------------------------------------
    // Accessors (for shells and tests)

    pub fn size(&self) -> u32 {
        self.state.size
    }
    pub fn inventory(&self) -> Option<&Inventory> {
        self.state.inventory.as_ref()
    }
    pub fn drained(&self) -> &IdSet {
        self.state.drain.drained()
    }
    pub fn drain_table(&self) -> &DrainTable {
        &self.state.drain
    }
    pub fn excluded(&self) -> &IdSet {
        &self.state.exclude
    }
    pub fn online(&self) -> &IdSet {
        &self.state.online
    }
    pub fn torpid(&self) -> &IdSet {
        &self.state.torpid
    }
    pub fn journal(&self) -> &Journal {
        &self.journal
    }
    /// The number of live journal followers.
    pub fn followers(&self) -> usize {
        self.followers.len()
    }
    /// Targets that went from online to offline (RFC 28 shrink).
    pub fn lost(&self) -> &IdSet {
        &self.state.lost
    }
    /// The targets a scheduler sees as usable (RFC 28 `up`).
    pub fn up(&self) -> IdSet {
        self.state.up()
    }
    /// The live acquires (both RFC 28 variants).
    pub fn acquisitions(&self) -> Vec<AcquireInfo> {
        self.acquire.holders()
    }
    /// The current assignment of targets to resource groups.
    pub fn group_assignment(&self) -> &[(String, IdSet)] {
        self.acquire.assignment()
    }
    /// The targets schedulers say they allocated (`resource.allocated-set`).
    pub fn allocated(&self) -> IdSet {
        let mut all = IdSet::new();
        for ids in self.allocated.values() {
            all.add(ids);
        }
        all
    }
    /// [`Service::allocated`] less the ranks R lacks and the excluded
    /// ones: the `allocated` of `resource.sched-status`.
    fn allocated_valid(&self) -> IdSet {
        let Some(inv) = &self.state.inventory else {
            return IdSet::new();
        };
        let mut ids = self.allocated().intersection(inv.ranks());
        ids.subtract(&self.state.exclude);
        ids
    }
    /// The configured named resource groups.
    pub fn groups(&self) -> &[(String, IdSet)] {
        self.acquire.groups()
    }

    /// The topics whose reply the service keeps serialised between state
    /// changes (see [`Service::ready_reply`]).
    pub const READY_TOPICS: [&'static str; 2] = [cat::Status::TOPIC, cat::SchedStatus::TOPIC];

    /// The reply a request on `topic` (one of [`Service::READY_TOPICS`],
    /// no streaming flag, a role its row of [`TOPICS`] grants) gets now,
    /// if it is kept ready: the shell publishes it for the listeners to
    /// answer without the loop.  `None`: it must be computed by a request
    /// (the state changed since), or the service is stopping.
    pub fn ready_reply(&self, topic: &str) -> Option<Payload> {
        if self.stopped {
            return None;
        }
        match topic {
            cat::Status::TOPIC => self.status_cache.clone(),
            cat::SchedStatus::TOPIC => self.sched_cache.clone(),
            _ => None,
        }
    }

    /// `resource.status` computed afresh, bypassing the cache (tests
    /// compare it with what the cache answers).
    #[doc(hidden)]
    pub fn status_uncached_for_tests(&self) -> Option<Value> {
        self.status().ok()
    }

    /// The text the cache is filled with (tests compare it with the
    /// serialised [`Service::status_uncached_for_tests`]).
    #[doc(hidden)]
    pub fn status_text_for_tests(&self) -> Option<String> {
        self.status_text().ok()
    }

    #[doc(hidden)]
    pub fn truncate_state_for_tests(&self) -> TruncateState {
        self.truncate_state()
    }
}
