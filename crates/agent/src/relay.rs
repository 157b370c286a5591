//! `roster agent --relay`: an agent that also accepts child agents (real
//! agents, further relays, or virtual leaves of the simulator) and speaks
//! upward for them in batches (see [`rpc::relay`] for the protocol and
//! the tree).
//!
//! Children connect to the relay's listener exactly as they would to the
//! service (`POST /v1/resource.agent`, served by the `transport` crate),
//! so a plain `roster agent --uri RELAY` works unchanged.  The relay:
//!
//! * maps each child's hostname to a rank of its subtree (the welcome
//!   the service gave it lists the subtree's hosts), refusing hosts
//!   outside it (EPERM) and ranks another child holds (EEXIST);
//! * sends the children's hellos upward in groups of identical resources
//!   (one `hello` line per batch of arrivals), and one `lively` line per
//!   heartbeat period with the idset of the children heard from;
//! * times its children's heartbeats itself: a child silent for the
//!   service's `torpid-max` is torpid, and the line after every change
//!   carries the `torpid` idset of every torpid rank below the relay
//!   (what child relays report included), so the service marks them
//!   torpid (and lively again) without a timer per rank;
//! * reports a child whose session ends (`gone`) at once, so the service
//!   marks it offline within its usual bound;
//! * routes the service's answers (`accepted`, `refused`, `ended`,
//!   `drained`) to the child that holds the ranks: a welcome or an error
//!   ending a leaf's session, the same lines forwarded to a child relay;
//! * when its parent goes away, keeps its children connected, reconnects
//!   with backoff (to the next server of a comma list, or straight to the
//!   leader a standby names) and announces them all again.
//!
//! [`RelayState`] is the bookkeeping, free of IO; [`run_relay`] drives it.

use crate::session::Session;
use crate::{pause, stopped, AgentConfig, AgentError, BACKOFF_MIN, EEXIST_RETRIES};
use hostlist::Hostlist;
use idset::IdSet;
use rpc::errno::{EEXIST, ENOSYS, EPERM, EPROTO};
use rpc::uri::{Step, Uri};
use rpc::{msg, ConnId, Request, Role, RpcError};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use transport::{Incoming, ReplySender};
pub use transport::{ListenOptions, TlsListen};

/// The longest period between a relay's lines.
const RELAY_BEAT_MAX: Duration = Duration::from_millis(500);

/// What the service (or the parent relay) told this relay.
#[derive(Debug, Clone)]
pub struct Welcome {
    pub rank: u32,
    pub hostname: String,
    pub fanout: u32,
    /// A child silent for longer is torpid (`None`: the service does not
    /// mark ranks torpid).
    pub torpid_max: Option<Duration>,
    /// The ranks this relay may speak for (its own excluded).
    pub subtree: IdSet,
    /// Their hostnames, in rank order.
    pub hosts: Vec<String>,
    /// The welcome as received (copied into the children's welcomes).
    pub raw: msg::AgentAnswer,
}

impl Welcome {
    pub fn parse(v: &Value) -> Result<Welcome, AgentError> {
        let bad = |what: &str| AgentError::Protocol(format!("relay welcome: {what}: {v}"));
        let raw: msg::AgentAnswer = msg::decode(v).map_err(|e| bad(&e.to_string()))?;
        let rank = raw.rank.ok_or_else(|| bad("no rank"))?;
        let Some(r) = &raw.relay else {
            return Err(AgentError::Protocol(
                "the service does not know relays (no relay in its welcome)".into(),
            ));
        };
        let hosts = Hostlist::decode(&r.hosts).map_err(|e| bad(&format!("hosts: {e}")))?;
        let hosts: Vec<String> = hosts.iter().collect();
        if hosts.len() as u64 != r.subtree.len() {
            return Err(bad("hosts do not match the subtree"));
        }
        Ok(Welcome {
            rank,
            hostname: raw.hostname.clone().unwrap_or_default(),
            fanout: r.fanout,
            torpid_max: raw
                .torpid_max
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64),
            subtree: r.subtree.clone(),
            hosts,
            raw,
        })
    }
}

/// Virtual leaves (the simulator): hosts served by this relay without a
/// connection each.
#[derive(Debug, Clone)]
pub struct Leaves {
    /// Candidate hosts: those of this relay's subtree that are not below
    /// another relay of the same process are this relay's leaves.
    pub hosts: Arc<HashSet<String>>,
    /// Hostnames of every relay of the process.
    pub relays: Arc<Vec<String>>,
    pub cores: IdSet,
    pub gpus: IdSet,
    /// Ranks that stop being heard from at `stall_at`.
    pub stall: IdSet,
    pub stall_at: Instant,
}

/// The resources a child reported, as a hello group key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Res {
    /// `None`: no R (not verified).
    cores: Option<String>,
    gpus: String,
}

#[derive(Debug)]
enum Kind {
    Leaf,
    /// A child relay and the ranks below it.
    Relay {
        subtree: IdSet,
        /// Ranks it announced and the service has not answered yet.
        pending: IdSet,
        /// Ranks the service accepted.
        owned: IdSet,
        /// What it last reported torpid (within its subtree).
        torpid: IdSet,
    },
}

#[derive(Debug)]
struct Child {
    rank: u32,
    host: String,
    stream: ReplySender,
    joined: bool,
    kind: Kind,
    /// When its last line (hello, heartbeat, batch) arrived.
    last: Instant,
}

/// Counters of a relay (virtual leaves), for the simulator's report.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LeafCounts {
    pub accepted: u64,
    pub refused: u64,
    pub errors: Vec<String>,
}

/// A relay's bookkeeping: children, the ranks they hold, what is waiting
/// to go upward.  No IO: children are answered through their
/// [`ReplySender`]s (which never block); lines for the parent are taken
/// with [`RelayState::take_up`] and [`RelayState::beat`].
#[derive(Debug, Default)]
pub struct RelayState {
    welcome: Option<Welcome>,
    /// host → its ranks in the subtree.
    host_ranks: HashMap<String, Vec<u32>>,
    children: HashMap<ConnId, Child>,
    /// rank → the child (leaf or relay) whose own rank it is.
    by_rank: HashMap<u32, ConnId>,
    /// Every rank held below this relay (children's own ranks, what
    /// child relays announced, virtual leaves).
    claimed: IdSet,
    /// Announced ranks by resources (for announcing again).
    groups: BTreeMap<Res, IdSet>,
    /// Not yet sent upward.
    hello_up: BTreeMap<Res, IdSet>,
    gone_up: IdSet,
    /// Leaves heard from since the last beat.
    heard: IdSet,
    /// What child relays heard (and themselves): sent on at once, so a
    /// rank's liveness is not delayed by a period per level.
    lively_up: IdSet,
    /// Hellos that arrived before the first welcome.
    waiting: Vec<(Request, ReplySender, Instant)>,
    leaves: Option<Leaves>,
    /// This relay's virtual leaves (ranks), and those accepted.
    virtual_ranks: IdSet,
    virtual_joined: IdSet,
    /// Torpid ranks found at the last beat: silent children (a child
    /// relay with what it holds) and stalled virtual leaves.
    torpid_here: IdSet,
    /// The `torpid` idset last sent upward.
    torpid_sent: IdSet,
    /// The torpid set may differ from `torpid_sent`.
    torpid_dirty: bool,
    pub counts: LeafCounts,
}

/// An answer for a child.
fn answer(a: msg::AgentAnswer) -> rpc::Payload {
    msg::encode(&a).into()
}

/// The `accepted` answer.
fn accepted(ranks: IdSet) -> rpc::Payload {
    answer(msg::AgentAnswer {
        accepted: Some(ranks),
        ..Default::default()
    })
}

/// The cores and GPUs of a one-node R (as `local_r` writes it).
fn res_of_r(r: Option<&Value>) -> Result<Res, RpcError> {
    let Some(r) = r.filter(|r| !r.is_null()) else {
        return Ok(Res {
            cores: None,
            gpus: String::new(),
        });
    };
    let (cores, gpus) = rset::Rset::one_node(r, 1 << 20)
        .map_err(|e| RpcError::new(EPROTO, format!("agent hello: {e}")))?;
    Ok(Res {
        cores: Some(cores.encode()),
        gpus: gpus.encode(),
    })
}

impl RelayState {
    pub fn new(leaves: Option<Leaves>) -> RelayState {
        RelayState {
            leaves,
            ..Default::default()
        }
    }

    pub fn welcome(&self) -> Option<&Welcome> {
        self.welcome.as_ref()
    }

    /// The service (re)welcomed this relay: learn the subtree, and
    /// announce every child again (and the virtual leaves).  Hellos that
    /// waited for the first welcome are handled now.
    pub fn set_welcome(&mut self, w: Welcome) {
        let first = self.welcome.is_none();
        if first
            || self.welcome.as_ref().map(|o| (&o.subtree, o.fanout)) != Some((&w.subtree, w.fanout))
        {
            self.host_ranks.clear();
            for (rank, host) in w.subtree.iter().zip(&w.hosts) {
                self.host_ranks.entry(host.clone()).or_default().push(rank);
            }
        }
        if first {
            if let Some(l) = &self.leaves {
                let mut mine = IdSet::new();
                for (rank, host) in w.subtree.iter().zip(&w.hosts) {
                    if l.hosts.contains(host) {
                        mine.insert(rank);
                    }
                }
                for r in l.relays.iter() {
                    for &rank in self.host_ranks.get(r).map(Vec::as_slice).unwrap_or(&[]) {
                        mine.remove(rank);
                        mine.subtract(&rpc::relay::subtree(rank, w.fanout, u32::MAX));
                    }
                }
                let res = Res {
                    cores: Some(l.cores.encode()),
                    gpus: l.gpus.encode(),
                };
                mine.subtract(&self.claimed);
                self.claimed.add(&mine);
                self.groups.entry(res).or_default().add(&mine);
                self.virtual_ranks = mine;
            }
        }
        self.welcome = Some(w);
        // Everything is announced again (the service may be new).
        self.hello_up = self.groups.clone();
        self.gone_up = IdSet::new();
        self.heard = IdSet::new();
        // The (new) session knows of no torpid rank yet.
        self.torpid_sent = IdSet::new();
        self.torpid_dirty = true;
        for c in self.children.values_mut() {
            if let Kind::Relay { pending, owned, .. } = &mut c.kind {
                pending.add(owned);
                owned.clear();
            }
        }
        for (req, stream, at) in std::mem::take(&mut self.waiting) {
            self.hello(req, stream, at);
        }
    }

    /// One message from the listener, arrived at `now`.
    pub fn incoming(&mut self, m: Incoming, now: Instant) {
        match m {
            Incoming::Request { req, replies, slot } => {
                drop(slot);
                if req.topic == rpc::wire::SESSION_TOPIC {
                    self.hello(req, replies, now);
                } else {
                    let _ = replies.send(Err(RpcError::new(
                        ENOSYS,
                        format!(
                            "{} is a relay: it answers agent sessions only",
                            self.welcome
                                .as_ref()
                                .map_or("this", |w| w.hostname.as_str())
                        ),
                    )));
                }
            }
            Incoming::SessionLine { conn, payload, .. } => self.line(conn, &payload, now),
            Incoming::Disconnect(conn) => self.lost(conn),
            Incoming::Wake => {}
        }
    }

    fn refuse(stream: &ReplySender, e: RpcError) {
        let _ = stream.send(Err(e));
    }

    /// A child's hello.
    fn hello(&mut self, req: Request, stream: ReplySender, now: Instant) {
        if !matches!(req.role, Role::Owner | Role::Agent(_) | Role::Relay(_)) {
            return Self::refuse(&stream, RpcError::new(EPERM, "a relay accepts agents only"));
        }
        let Some(w) = &self.welcome else {
            self.waiting.push((req, stream, now));
            return;
        };
        let hello: msg::AgentHello = match msg::decode(&req.payload) {
            Ok(h) => h,
            Err(e) => {
                return Self::refuse(&stream, RpcError::new(EPROTO, format!("agent hello: {e}")))
            }
        };
        let host = hello.hostname.as_str();
        if host.is_empty() {
            return Self::refuse(
                &stream,
                RpcError::new(
                    EPROTO,
                    "agent hello: hostname (a non-empty string) is required",
                ),
            );
        }
        // As at the service: an agent certificate speaks for its own host
        // (a relay's, for the subtree below that host).
        if let Some(own) = req.role.agent_host() {
            if *own != *host {
                return Self::refuse(
                    &stream,
                    RpcError::new(
                        EPERM,
                        format!(
                            "agent hello: the certificate of {own} may not speak for host {host}"
                        ),
                    ),
                );
            }
        }
        let relay = hello.relay;
        if relay {
            if let Err(e) = rpc::relay::may_relay(&req.role) {
                return Self::refuse(&stream, e);
            }
        }
        let res = match res_of_r(hello.r.as_ref()) {
            Ok(r) => r,
            Err(e) => return Self::refuse(&stream, e),
        };
        let Some(ranks) = self.host_ranks.get(host) else {
            return Self::refuse(
                &stream,
                RpcError::new(
                    EPERM,
                    format!(
                        "host {host} is not in the subtree of the relay at rank {} ({})",
                        w.rank, w.hostname
                    ),
                ),
            );
        };
        let rank = match hello.rank {
            Some(r) => match ranks.iter().find(|x| **x == r) {
                Some(r) if !self.claimed.contains(*r) => *r,
                Some(r) => {
                    return Self::refuse(
                        &stream,
                        RpcError::new(
                            EEXIST,
                            format!("rank {r} ({host}) is already claimed by a live agent"),
                        ),
                    )
                }
                None => {
                    return Self::refuse(
                        &stream,
                        RpcError::new(
                            rpc::errno::EINVAL,
                            format!("rank {r} is not a rank of host {host}"),
                        ),
                    )
                }
            },
            None => match ranks.iter().find(|r| !self.claimed.contains(**r)) {
                Some(r) => *r,
                None => {
                    return Self::refuse(
                        &stream,
                        RpcError::new(
                            EEXIST,
                            format!(
                                "rank {} ({host}) is already claimed by a live agent",
                                ranks[0]
                            ),
                        ),
                    )
                }
            },
        };
        let kind = if relay {
            Kind::Relay {
                subtree: rpc::relay::subtree(rank, w.fanout, u32::MAX).intersection(&w.subtree),
                pending: IdSet::new(),
                owned: IdSet::new(),
                torpid: IdSet::new(),
            }
        } else {
            Kind::Leaf
        };
        let one = IdSet::from_range(rank, rank);
        self.claimed.add(&one);
        self.groups.entry(res.clone()).or_default().add(&one);
        self.hello_up.entry(res).or_default().add(&one);
        self.by_rank.insert(rank, req.conn);
        self.children.insert(
            req.conn,
            Child {
                rank,
                host: host.to_string(),
                stream,
                joined: false,
                kind,
                last: now,
            },
        );
    }

    /// A child's session line: a leaf's heartbeat, or a child relay's
    /// batch.
    fn line(&mut self, conn: ConnId, payload: &Value, now: Instant) {
        let Some(c) = self.children.get_mut(&conn) else {
            return;
        };
        if !c.joined {
            return;
        }
        c.last = now;
        if matches!(c.kind, Kind::Leaf) {
            self.heard.insert(c.rank);
            return;
        }
        self.lively_up.insert(c.rank);
        if let Err(e) = self.relay_line(conn, payload) {
            if let Some(c) = self.children.get(&conn) {
                Self::refuse(&c.stream, e);
            }
            self.lost(conn);
        }
    }

    fn relay_line(&mut self, conn: ConnId, p: &Value) -> Result<(), RpcError> {
        let line: msg::RelayLine =
            msg::decode(p).map_err(|e| RpcError::new(EPROTO, format!("relay line: {e}")))?;
        let msg::RelayLine {
            gone,
            lively,
            torpid: torpid_now,
            hello: groups,
        } = line;
        let Some(Child {
            kind:
                Kind::Relay {
                    subtree,
                    pending,
                    owned,
                    torpid,
                },
            stream,
            ..
        }) = self.children.get_mut(&conn)
        else {
            return Ok(());
        };
        if let Some(g) = gone {
            let mine = g.intersection(&pending.union(owned));
            pending.subtract(&mine);
            let up = mine.intersection(owned);
            owned.subtract(&mine);
            self.claimed.subtract(&mine);
            for ids in self.groups.values_mut() {
                ids.subtract(&mine);
            }
            for ids in self.hello_up.values_mut() {
                ids.subtract(&mine);
            }
            self.gone_up.add(&up);
        }
        let mut refused = Vec::new();
        for g in groups.unwrap_or_default() {
            let ranks = g.ranks;
            let cores = g.cores.map(|c| c.encode());
            let gpus = g.gpus.map(|c| c.encode()).unwrap_or_default();
            let outside = ranks.difference(subtree);
            if !outside.is_empty() {
                let e = RpcError::new(
                    EPERM,
                    format!("ranks {outside} are not in the subtree of this relay's child"),
                );
                refused.push(msg::RanksError::new(outside, &e));
            }
            let mut ok = ranks.intersection(subtree);
            let mut taken = ok.intersection(&self.claimed);
            taken.subtract(pending);
            taken.subtract(owned);
            if !taken.is_empty() {
                let e = RpcError::new(
                    EEXIST,
                    format!("ranks {taken} are already claimed by a live agent"),
                );
                ok.subtract(&taken);
                refused.push(msg::RanksError::new(taken, &e));
            }
            let fresh = ok.difference(owned);
            pending.add(&fresh);
            self.claimed.add(&ok);
            let res = Res { cores, gpus };
            self.groups.entry(res.clone()).or_default().add(&ok);
            self.hello_up.entry(res).or_default().add(&ok);
        }
        if !refused.is_empty() {
            let _ = stream.send(Ok(answer(msg::AgentAnswer {
                refused: Some(refused),
                ..Default::default()
            })));
        }
        if let Some(l) = lively {
            self.lively_up.add(&l.intersection(owned));
        }
        if let Some(t) = torpid_now {
            let t = t.intersection(subtree);
            if t != *torpid {
                *torpid = t;
                self.torpid_dirty = true;
            }
        }
        Ok(())
    }

    /// A child's session ended: its ranks are gone.
    fn lost(&mut self, conn: ConnId) {
        if self.waiting.iter().any(|(r, _, _)| r.conn == conn) {
            self.waiting.retain(|(r, _, _)| r.conn != conn);
            return;
        }
        let Some(c) = self.children.remove(&conn) else {
            return;
        };
        if self.by_rank.get(&c.rank) == Some(&conn) {
            self.by_rank.remove(&c.rank);
        }
        let mut all = IdSet::from_range(c.rank, c.rank);
        let mut up = if c.joined { all.clone() } else { IdSet::new() };
        if let Kind::Relay { pending, owned, .. } = &c.kind {
            all.add(pending);
            all.add(owned);
            up.add(owned);
        }
        self.claimed.subtract(&all);
        for ids in self.groups.values_mut() {
            ids.subtract(&all);
        }
        for ids in self.hello_up.values_mut() {
            ids.subtract(&all);
        }
        self.gone_up.add(&up);
        self.torpid_here.subtract(&all);
        self.torpid_dirty = true;
    }

    /// Every torpid rank below this relay now: what the last beat found,
    /// and what child relays report of the ranks they hold.
    pub fn torpid(&self) -> IdSet {
        let mut t = self.torpid_here.clone();
        for c in self.children.values() {
            if let Kind::Relay {
                pending,
                owned,
                torpid,
                ..
            } = &c.kind
            {
                if !torpid.is_empty() {
                    t.add(&torpid.intersection(&pending.union(owned)));
                }
            }
        }
        t.intersection(&self.claimed)
    }

    /// Find the torpid ranks at `now`: joined children silent for longer
    /// than `torpid-max` (a child relay with everything it holds), and
    /// virtual leaves stalled that long.
    fn find_torpid(&mut self, now: Instant) {
        let Some(tmax) = self.welcome.as_ref().and_then(|w| w.torpid_max) else {
            return;
        };
        let mut t = IdSet::new();
        for c in self.children.values() {
            if !c.joined || now.saturating_duration_since(c.last) <= tmax {
                continue;
            }
            t.insert(c.rank);
            if let Kind::Relay { pending, owned, .. } = &c.kind {
                t.add(pending);
                t.add(owned);
            }
        }
        if let Some(l) = &self.leaves {
            if !l.stall.is_empty() && now.saturating_duration_since(l.stall_at) > tmax {
                t.add(&self.virtual_joined.intersection(&l.stall));
            }
        }
        if t != self.torpid_here {
            self.torpid_here = t;
            self.torpid_dirty = true;
        }
    }

    /// What is waiting to go upward (hellos and departures), as one line.
    pub fn take_up(&mut self) -> Option<Value> {
        let line = self.take_up_line();
        (line != msg::RelayLine::default()).then(|| msg::encode(&line))
    }

    fn take_up_line(&mut self) -> msg::RelayLine {
        let groups: Vec<msg::HelloGroup> = std::mem::take(&mut self.hello_up)
            .into_iter()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(res, ranks)| {
                let parse = |s: &str| IdSet::parse(s).unwrap_or_default();
                let cores = res.cores.as_deref().map(parse);
                let gpus = Some(res.gpus.as_str())
                    .filter(|g| cores.is_some() && !g.is_empty())
                    .map(parse);
                msg::HelloGroup { ranks, cores, gpus }
            })
            .collect();
        let take = |ids: &mut IdSet| Some(std::mem::take(ids)).filter(|i| !i.is_empty());
        let mut line = msg::RelayLine {
            hello: Some(groups).filter(|g| !g.is_empty()),
            gone: take(&mut self.gone_up),
            lively: take(&mut self.lively_up),
            torpid: None,
        };
        if self.torpid_dirty && self.welcome.is_some() {
            self.torpid_dirty = false;
            let t = self.torpid();
            if t != self.torpid_sent {
                line.torpid = Some(t.clone());
                self.torpid_sent = t;
            }
        }
        line
    }

    /// The heartbeat line: what is waiting, plus every child heard from
    /// since the last beat and the virtual leaves not stalled.
    pub fn beat(&mut self, now: Instant) -> Value {
        self.find_torpid(now);
        let mut lively = std::mem::take(&mut self.heard);
        lively.add(&std::mem::take(&mut self.lively_up));
        let mut line = self.take_up_line();
        if let Some(l) = &self.leaves {
            if now >= l.stall_at && !l.stall.is_empty() {
                lively.add(&self.virtual_joined.difference(&l.stall));
            } else {
                lively.add(&self.virtual_joined);
            }
        }
        line.lively = Some(lively).filter(|l| !l.is_empty());
        msg::encode(&line)
    }

    /// A welcome for a child at `rank`.
    fn child_welcome(&self, c: &Child) -> Value {
        let Some(w) = &self.welcome else {
            return Value::Null;
        };
        let mut a = w.raw.clone();
        a.rank = Some(c.rank);
        a.hostname = Some(c.host.clone());
        a.relay = match &c.kind {
            Kind::Relay { subtree, .. } => {
                let mut hl = Hostlist::new();
                let mut known = IdSet::new();
                for r in subtree.iter() {
                    if let Some(i) = w.subtree.position(r) {
                        if let Some(h) = w.hosts.get(i as usize) {
                            hl.push(h);
                            known.insert(r);
                        }
                    }
                }
                Some(msg::RelayWelcome {
                    fanout: w.fanout,
                    subtree: known,
                    hosts: hl.encode(),
                })
            }
            Kind::Leaf => None,
        };
        msg::encode(&a)
    }

    /// An answer from the parent: route it to the children holding the
    /// ranks.  A malformed answer is ignored (the parent is the service,
    /// or a relay of the same build).
    pub fn answer(&mut self, v: &Value) {
        let Ok(a) = msg::decode::<msg::AgentAnswer>(v) else {
            return;
        };
        if let Some(acc) = &a.accepted {
            self.accepted(acc);
        }
        for (refused, list) in [(true, &a.refused), (false, &a.ended)] {
            for e in list.iter().flatten() {
                let err = RpcError::new(e.errnum, e.errstr.clone());
                self.ended(refused, &e.ranks, &err);
            }
        }
        for d in a.drained.iter().flatten() {
            self.route(&d.ranks, |part| msg::AgentAnswer {
                drained: Some(vec![msg::RanksDrained {
                    ranks: part.clone(),
                    reason: d.reason.clone(),
                }]),
                ..Default::default()
            });
        }
    }

    /// Forward a line built from the part of `ids` each child holds.
    fn route(&mut self, ids: &IdSet, line: impl Fn(&IdSet) -> msg::AgentAnswer) {
        for c in self.children.values() {
            let mut part = IdSet::new();
            if ids.contains(c.rank) {
                part.insert(c.rank);
            }
            if let Kind::Relay { pending, owned, .. } = &c.kind {
                part.add(&ids.intersection(&pending.union(owned)));
            }
            if !part.is_empty() {
                let _ = c.stream.send(Ok(answer(line(&part))));
            }
        }
    }

    fn accepted(&mut self, acc: &IdSet) {
        let mut orphans = acc.intersection(&self.claimed);
        orphans = acc.difference(&orphans);
        let mut welcomes = Vec::new();
        for (conn, c) in self.children.iter_mut() {
            if acc.contains(c.rank) && !c.joined {
                c.joined = true;
                welcomes.push(*conn);
            }
            if let Kind::Relay { pending, owned, .. } = &mut c.kind {
                let part = acc.intersection(pending);
                if !part.is_empty() {
                    pending.subtract(&part);
                    owned.add(&part);
                    if c.joined && !welcomes.contains(conn) {
                        let _ = c.stream.send(Ok(accepted(part)));
                    }
                }
            }
        }
        for conn in welcomes {
            let Some(c) = self.children.get(&conn) else {
                continue;
            };
            let w = self.child_welcome(c);
            let _ = c.stream.send(Ok(w.into()));
            if let Kind::Relay { owned, .. } = &c.kind {
                // Ranks the child announced before its own welcome (none
                // normally: a relay speaks once welcomed).
                if !owned.is_empty() {
                    let _ = c.stream.send(Ok(accepted(owned.clone())));
                }
            }
        }
        let v = acc.intersection(&self.virtual_ranks);
        let fresh = v.difference(&self.virtual_joined);
        self.counts.accepted += fresh.len();
        self.virtual_joined.add(&v);
        // Accepted ranks nobody here holds any more: they left meanwhile.
        self.gone_up.add(&orphans);
    }

    /// Ranks refused (`refused`) or ended by the parent: a child holding
    /// its own rank there gets the error; a child relay, the same answer
    /// for its part.
    fn ended(&mut self, refused: bool, ids: &IdSet, e: &RpcError) {
        let mut gone = Vec::new();
        for (conn, c) in self.children.iter_mut() {
            if ids.contains(c.rank) {
                let _ = c.stream.send(Err(e.clone()));
                gone.push(*conn);
                continue;
            }
            if let Kind::Relay { pending, owned, .. } = &mut c.kind {
                let part = ids.intersection(&pending.union(owned));
                if !part.is_empty() {
                    pending.subtract(&part);
                    owned.subtract(&part);
                    let list = Some(vec![msg::RanksError::new(part, e)]);
                    let a = if refused {
                        msg::AgentAnswer {
                            refused: list,
                            ..Default::default()
                        }
                    } else {
                        msg::AgentAnswer {
                            ended: list,
                            ..Default::default()
                        }
                    };
                    let _ = c.stream.send(Ok(answer(a)));
                }
            }
        }
        for conn in gone {
            // Their ranks are no longer held; the service dropped them
            // already, so nothing goes upward.
            if let Some(c) = self.children.remove(&conn) {
                self.by_rank.remove(&c.rank);
                let mut all = IdSet::from_range(c.rank, c.rank);
                if let Kind::Relay { pending, owned, .. } = &c.kind {
                    all.add(pending);
                    all.add(owned);
                    self.gone_up.add(owned);
                }
                self.claimed.subtract(&all);
                for g in self.groups.values_mut() {
                    g.subtract(&all);
                }
            }
        }
        let v = ids.intersection(&self.virtual_ranks);
        if !v.is_empty() {
            self.counts.refused += v.len();
            if self.counts.errors.len() < 5 {
                self.counts
                    .errors
                    .push(format!("ranks {v}: {}", e.message()));
            }
            self.virtual_ranks.subtract(&v);
            self.virtual_joined.subtract(&v);
        }
        self.claimed.subtract(ids);
        for g in self.groups.values_mut() {
            g.subtract(ids);
        }
        self.torpid_here.subtract(ids);
        self.torpid_dirty = true;
    }
}

/// How a relay is run.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Its own hello and its parent (the service or another relay).
    pub agent: AgentConfig,
    /// Where children connect.
    pub listen: Vec<Uri>,
    /// Roles and limits of the children's listener (TCP needs a token).
    pub listen_opts: transport::ListenOptions,
    pub leaves: Option<Leaves>,
}

/// What happens to a relay, for logging.
#[derive(Debug, Clone)]
pub enum RelayEvent {
    Joined(Box<Welcome>),
    Lost {
        reason: String,
    },
    Retrying {
        error: String,
        delay: Duration,
    },
    /// Virtual leaves were accepted or refused (totals).
    Leaves {
        accepted: u64,
        refused: u64,
        errors: Vec<String>,
    },
    Drained {
        reason: String,
    },
}

enum Up {
    Welcome(Value),
    Answer(Value),
    Lost(String),
    Retrying(String, Duration),
    Fatal(AgentError),
}

/// The connection to the parent: (re)connect with backoff, send lines,
/// hand answers back.  Lines queued while disconnected are dropped (the
/// relay announces everything again on the next welcome).  With several
/// servers (a highly available service), each failure moves on to the
/// next, and a standby's redirect goes straight to the leader it names.
async fn upstream(
    cfg: AgentConfig,
    hello: Value,
    mut lines: mpsc::UnboundedReceiver<Value>,
    events: mpsc::UnboundedSender<Up>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut claimed = 0;
    let mut servers = cfg.servers.clone();
    loop {
        let opened = tokio::select! {
            r = Session::open(servers.current(), cfg.tls.as_ref(), cfg.token.as_deref(), &hello, None) => r,
            _ = stopped(&mut stop) => return,
        };
        if let Err(e) = &opened {
            if servers.failed(e.leader().as_ref()) == Step::Leader {
                continue;
            }
        }
        let no_leader =
            matches!(&opened, Err(AgentError::Refused(e)) if e.errnum == rpc::errno::EAGAIN);
        match opened {
            Ok((session, welcome)) => {
                servers.opened();
                backoff = BACKOFF_MIN;
                claimed = 0;
                while lines.try_recv().is_ok() {}
                if events.send(Up::Welcome(welcome)).is_err() {
                    return;
                }
                let (mut rd, mut tx) = session.split();
                let ev = events.clone();
                let (done_tx, mut done_rx) = mpsc::channel::<String>(1);
                let reader = tokio::spawn(async move {
                    let reason = loop {
                        match rd.next_line().await {
                            Ok(Some(Ok(v))) => {
                                if ev.send(Up::Answer(v)).is_err() {
                                    break "stopping".to_string();
                                }
                            }
                            Ok(Some(Err(e))) => break e.message(),
                            Ok(None) => break "the service ended the session".to_string(),
                            Err(e) => break e.to_string(),
                        }
                    };
                    let _ = done_tx.send(reason).await;
                });
                let reason = loop {
                    tokio::select! {
                        l = lines.recv() => match l {
                            Some(v) => {
                                if let Err(e) = tx.line(&v).await {
                                    break e.to_string();
                                }
                            }
                            None => return,
                        },
                        r = done_rx.recv() => break r.unwrap_or_default(),
                        _ = stopped(&mut stop) => {
                            tx.leave().await;
                            reader.abort();
                            return;
                        }
                    }
                };
                reader.abort();
                if events.send(Up::Lost(reason)).is_err() {
                    return;
                }
            }
            Err(AgentError::Refused(e)) if e.errnum == EEXIST && claimed < EEXIST_RETRIES => {
                claimed += 1;
                let _ = events.send(Up::Retrying(e.message(), backoff));
            }
            Err(e) if e.is_permanent() => {
                let _ = events.send(Up::Fatal(e));
                return;
            }
            Err(e) => {
                let _ = events.send(Up::Retrying(e.to_string(), backoff));
            }
        }
        if !pause(&mut backoff, no_leader || servers.several(), &mut stop).await {
            return;
        }
    }
}

/// Run a relay until `stop` (then leave cleanly) or a permanent refusal
/// of its own hello.  The children's listener is bound first, so
/// children may connect at once (their hellos wait for the relay's own
/// welcome).
pub async fn run_relay(
    cfg: RelayConfig,
    stop: watch::Receiver<bool>,
    mut report: impl FnMut(RelayEvent),
) -> Result<(), AgentError> {
    let listeners = transport::Listeners::bind(&cfg.listen, &cfg.listen_opts)
        .map_err(|e| AgentError::Setup(e.to_string()))?;
    let (std_tx, std_rx) = std::sync::mpsc::channel::<Incoming>();
    let (in_tx, mut in_rx) = mpsc::unbounded_channel::<Incoming>();
    std::thread::Builder::new()
        .name("relay-listener".into())
        .spawn(move || {
            while let Ok(m) = std_rx.recv() {
                if in_tx.send(m).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| AgentError::Setup(format!("cannot start a thread: {e}")))?;
    let (lstop_tx, lstop_rx) = watch::channel(false);
    let listener = tokio::spawn(listeners.run(std_tx, lstop_rx));

    let hello = msg::encode(&msg::AgentHello {
        relay: true,
        ..cfg.agent.hello()
    });
    let (line_tx, line_rx) = mpsc::unbounded_channel::<Value>();
    let (up_tx, mut up_rx) = mpsc::unbounded_channel::<Up>();
    let up = tokio::spawn(upstream(
        cfg.agent.clone(),
        hello,
        line_rx,
        up_tx,
        stop.clone(),
    ));

    let mut state = RelayState::new(cfg.leaves.clone());
    let mut connected = false;
    let mut stop = stop;
    let mut period = Duration::from_secs(5);
    let mut beat = tokio::time::interval(period);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_counts = (0u64, 0u64);
    let result = loop {
        tokio::select! {
            m = in_rx.recv() => {
                let Some(m) = m else { break Ok(()) };
                let now = Instant::now();
                state.incoming(m, now);
                let mut n = 0;
                while n < 4096 {
                    let Ok(m) = in_rx.try_recv() else { break };
                    state.incoming(m, now);
                    n += 1;
                }
            }
            u = up_rx.recv() => match u {
                None => break Ok(()),
                Some(Up::Welcome(v)) => match Welcome::parse(&v) {
                    Ok(w) => {
                        connected = true;
                        // A relay's line is cheap (one per relay): beat
                        // often enough that forwarding adds little to
                        // a rank's torpid time.
                        period = cfg.agent.heartbeat.unwrap_or_else(|| {
                            crate::suggested_period(&w.raw).min(RELAY_BEAT_MAX)
                        });
                        beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        report(RelayEvent::Joined(Box::new(w.clone())));
                        state.set_welcome(w);
                    }
                    Err(e) => break Err(e),
                },
                Some(Up::Answer(v)) => {
                    if let Some(own) = state.welcome().map(|w| w.rank) {
                        for reason in crate::drained_reasons(&v, Some(own)) {
                            report(RelayEvent::Drained { reason });
                        }
                    }
                    state.answer(&v);
                }
                Some(Up::Lost(reason)) => {
                    connected = false;
                    report(RelayEvent::Lost { reason });
                }
                Some(Up::Retrying(error, delay)) => report(RelayEvent::Retrying { error, delay }),
                Some(Up::Fatal(e)) => break Err(e),
            },
            _ = beat.tick() => {
                if connected {
                    let _ = line_tx.send(state.beat(Instant::now()));
                }
            }
            _ = stopped(&mut stop) => break Ok(()),
        }
        if connected {
            if let Some(v) = state.take_up() {
                let _ = line_tx.send(v);
            }
        }
        let c = (state.counts.accepted, state.counts.refused);
        if c != last_counts {
            last_counts = c;
            report(RelayEvent::Leaves {
                accepted: c.0,
                refused: c.1,
                errors: state.counts.errors.clone(),
            });
        }
    };
    // Let the upstream task leave cleanly (it watches `stop` too).
    drop(line_tx);
    let _ = tokio::time::timeout(Duration::from_millis(500), up).await;
    let _ = lstop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_millis(200), listener).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use transport::QueueSlot;

    fn welcome(rank: u32, subtree: &str, hosts: &str) -> Welcome {
        Welcome::parse(&json!({
            "rank": rank, "hostname": format!("sim{rank}"), "size": 7, "heartbeat": 1.0,
            "torpid-max": 4.0, "offline-timeout": 8.0,
            "relay": {"fanout": 2, "subtree": subtree, "hosts": hosts},
        }))
        .unwrap()
    }

    struct Kid {
        conn: ConnId,
        rx: transport::ReplyReceiver,
    }

    impl Kid {
        fn replies(&mut self) -> Vec<Result<Value, RpcError>> {
            let mut v = Vec::new();
            while let Ok(r) = self.rx.try_recv() {
                v.push(r.map(rpc::Payload::into_value));
            }
            v
        }
    }

    fn hello(s: &mut RelayState, conn: ConnId, payload: Value) -> Kid {
        hello_at(s, conn, payload, Instant::now())
    }

    fn hello_at(s: &mut RelayState, conn: ConnId, payload: Value, at: Instant) -> Kid {
        let (tx, rx) = ReplySender::unbounded(true);
        s.incoming(
            Incoming::Request {
                req: Request {
                    conn,
                    matchtag: 1,
                    topic: rpc::wire::SESSION_TOPIC.into(),
                    payload,
                    streaming: true,
                    role: Role::Owner,
                    userid: None,
                    who: None,
                },
                replies: tx,
                slot: QueueSlot::unbounded(),
            },
            at,
        );
        Kid { conn, rx }
    }

    fn line(s: &mut RelayState, kid: &Kid, payload: Value) {
        line_at(s, kid, payload, Instant::now())
    }

    fn line_at(s: &mut RelayState, kid: &Kid, payload: Value, at: Instant) {
        let line = Incoming::SessionLine {
            conn: kid.conn,
            payload,
            slot: QueueSlot::unbounded(),
        };
        s.incoming(line, at);
    }

    #[test]
    fn leaves_join_beat_leave_and_are_announced_again() {
        let mut s = RelayState::new(None);
        // A hello before the relay's own welcome waits for it.
        let mut a = hello(&mut s, 1, json!({"hostname": "sim3"}));
        assert!(a.replies().is_empty());
        s.set_welcome(welcome(1, "3-4", "sim[3-4]"));
        let mut b = hello(
            &mut s,
            2,
            json!({"hostname": "sim4", "R": crate::local_r("x", &IdSet::parse("0-3").unwrap(), &IdSet::new()).unwrap()}),
        );
        let mut out = hello(&mut s, 3, json!({"hostname": "sim5"}));
        let e = out.replies().remove(0).unwrap_err();
        assert_eq!(e.errnum, EPERM);
        assert_eq!(
            e.message(),
            "host sim5 is not in the subtree of the relay at rank 1 (sim1)"
        );
        let mut dup = hello(&mut s, 4, json!({"hostname": "sim4"}));
        assert_eq!(dup.replies().remove(0).unwrap_err().errnum, EEXIST);
        assert_eq!(
            s.take_up(),
            Some(json!({"hello": [{"ranks": "3"}, {"ranks": "4", "cores": "0-3"}]}))
        );
        s.answer(&json!({"accepted": "3-4", "drained": [{"ranks": "4", "reason": "bad"}]}));
        let w = a.replies().remove(0).unwrap();
        assert_eq!(w["rank"], 3);
        assert_eq!(w["hostname"], "sim3");
        assert!(w.get("relay").is_none());
        let r = b.replies();
        assert_eq!(r[0].as_ref().unwrap()["rank"], 4);
        assert_eq!(r[1].as_ref().unwrap()["drained"][0]["reason"], "bad");
        line(&mut s, &a, json!({}));
        assert_eq!(s.beat(Instant::now()), json!({"lively": "3"}));
        assert_eq!(s.beat(Instant::now()), json!({}));
        // The parent is new: everything is announced again.
        s.set_welcome(welcome(1, "3-4", "sim[3-4]"));
        assert_eq!(
            s.take_up(),
            Some(json!({"hello": [{"ranks": "3"}, {"ranks": "4", "cores": "0-3"}]}))
        );
        // A leaf leaves: gone at once.
        s.incoming(Incoming::Disconnect(a.conn), Instant::now());
        assert_eq!(s.take_up(), Some(json!({"gone": "3"})));
        // The service ends the other (offline-timeout): its stream ends.
        s.answer(&json!({"ended": [{"ranks": "4", "errnum": 110, "errstr": "silent"}]}));
        assert_eq!(b.replies().remove(0).unwrap_err().message(), "silent");
        assert_eq!(s.children.len(), 0);
        assert_eq!(s.take_up(), None);
    }

    #[test]
    fn child_relays_speak_for_their_subtree_only() {
        // kary:2 over 15 ranks; this relay is rank 0.
        let mut s = RelayState::new(None);
        s.set_welcome(welcome(0, "1-14", "sim[1-14]"));
        let mut r1 = hello(&mut s, 1, json!({"hostname": "sim1", "relay": true}));
        assert_eq!(s.take_up(), Some(json!({"hello": [{"ranks": "1"}]})));
        s.answer(&json!({"accepted": "1"}));
        let w = r1.replies().remove(0).unwrap();
        assert_eq!(w["relay"]["subtree"], "3-4,7-10");
        assert_eq!(w["relay"]["hosts"], "sim[3-4,7-10]");
        line(
            &mut s,
            &Kid {
                conn: 1,
                rx: ReplySender::unbounded(false).1,
            },
            json!({"hello": [{"ranks": "2-4", "cores": "0"}]}),
        );
        let r = r1.replies().remove(0).unwrap();
        assert_eq!(r["refused"][0]["ranks"], "2");
        assert_eq!(r["refused"][0]["errnum"], EPERM);
        assert_eq!(
            s.take_up(),
            Some(json!({"hello": [{"ranks": "3-4", "cores": "0"}], "lively": "1"}))
        );
        // A leaf cannot take a rank the child relay announced.
        let mut l = hello(&mut s, 2, json!({"hostname": "sim3"}));
        assert_eq!(l.replies().remove(0).unwrap_err().errnum, EEXIST);
        s.answer(&json!({"accepted": "3-4", "drained": [{"ranks": "4", "reason": "r"}]}));
        let r = r1.replies();
        assert_eq!(r[0].as_ref().unwrap(), &json!({"accepted": "3-4"}));
        assert_eq!(r[1].as_ref().unwrap()["drained"][0]["ranks"], "4");
        line(
            &mut s,
            &Kid {
                conn: 1,
                rx: ReplySender::unbounded(false).1,
            },
            json!({"lively": "2-4"}),
        );
        assert_eq!(s.beat(Instant::now()), json!({"lively": "1,3-4"}));
        line(
            &mut s,
            &Kid {
                conn: 1,
                rx: ReplySender::unbounded(false).1,
            },
            json!({"gone": "4"}),
        );
        assert_eq!(s.take_up(), Some(json!({"gone": "4", "lively": "1"})));
        // The child relay goes: its rank and what it held.
        s.incoming(Incoming::Disconnect(1), Instant::now());
        assert_eq!(s.take_up(), Some(json!({"gone": "1,3"})));
        // Now the leaf may take sim3.
        let mut l = hello(&mut s, 3, json!({"hostname": "sim3"}));
        assert!(l.replies().is_empty());
        assert_eq!(s.take_up(), Some(json!({"hello": [{"ranks": "3"}]})));
    }

    #[test]
    fn virtual_leaves_skip_other_relays_subtrees_and_stall() {
        let hosts: HashSet<String> = (0..15).map(|i| format!("sim{i}")).collect();
        let leaves = Leaves {
            hosts: Arc::new(hosts),
            relays: Arc::new(vec!["sim0".into(), "sim2".into()]),
            cores: IdSet::parse("0-3").unwrap(),
            gpus: IdSet::new(),
            stall: IdSet::parse("3").unwrap(),
            stall_at: Instant::now() + Duration::from_secs(3600),
        };
        let mut s = RelayState::new(Some(leaves));
        s.set_welcome(welcome(0, "1-14", "sim[1-14]"));
        // sim2 is a relay of the process: 2 and 5-6, 11-14 are not ours.
        assert_eq!(s.virtual_ranks.encode(), "1,3-4,7-10");
        assert_eq!(
            s.take_up(),
            Some(json!({"hello": [{"ranks": "1,3-4,7-10", "cores": "0-3"}]}))
        );
        s.answer(&json!({"accepted": "1,3-4,7-9", "refused": [{"ranks": "10", "errnum": 17, "errstr": "taken"}]}));
        assert_eq!(s.virtual_joined.len(), 6);
        assert_eq!(s.counts.refused, 1);
        assert_eq!(s.beat(Instant::now()), json!({"lively": "1,3-4,7-9"}));
        // Stalled past torpid-max (4 s): reported torpid, once.
        let later = Instant::now() + Duration::from_secs(7200);
        assert_eq!(s.beat(later), json!({"lively": "1,4,7-9", "torpid": "3"}));
        assert_eq!(s.beat(later), json!({"lively": "1,4,7-9"}));
    }

    #[test]
    fn silent_children_are_reported_torpid_and_lively_again() {
        // kary:2 over 15 ranks; this relay is rank 0, torpid-max 4 s.
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut s = RelayState::new(None);
        s.set_welcome(welcome(0, "1-14", "sim[1-14]"));
        let l2 = hello_at(&mut s, 2, json!({"hostname": "sim2"}), at(0.0));
        let r1 = hello_at(
            &mut s,
            1,
            json!({"hostname": "sim1", "relay": true}),
            at(0.0),
        );
        s.take_up();
        s.answer(&json!({"accepted": "1-2"}));
        line_at(&mut s, &r1, json!({"hello": [{"ranks": "3-4"}]}), at(0.1));
        s.take_up();
        s.answer(&json!({"accepted": "3-4"}));
        // Both speak every second for 4 s; then the leaf falls silent.
        for i in 1..=4 {
            line_at(&mut s, &l2, json!({}), at(f64::from(i)));
            line_at(&mut s, &r1, json!({"lively": "3-4"}), at(f64::from(i)));
            assert!(s.beat(at(f64::from(i))).get("torpid").is_none());
        }
        for i in 5..=8 {
            line_at(&mut s, &r1, json!({"lively": "3-4"}), at(f64::from(i)));
            let v = s.beat(at(f64::from(i)));
            assert!(v.get("torpid").is_none(), "at {i} s: {v}");
        }
        // 4.5 s after its last heartbeat: torpid, in this beat only.
        line_at(&mut s, &r1, json!({"lively": "3-4"}), at(8.5));
        assert_eq!(s.beat(at(8.5)), json!({"lively": "1,3-4", "torpid": "2"}));
        line_at(&mut s, &r1, json!({"lively": "3-4"}), at(9.0));
        assert_eq!(s.beat(at(9.0)), json!({"lively": "1,3-4"}));
        // The child relay reports its leaf 4 torpid: sent on at once,
        // merged with this relay's own finding.
        line_at(&mut s, &r1, json!({"lively": "3", "torpid": "4"}), at(9.2));
        assert_eq!(s.take_up(), Some(json!({"lively": "1,3", "torpid": "2,4"})));
        // The leaf speaks again: lively, and no longer torpid.
        line_at(&mut s, &l2, json!({}), at(9.5));
        assert_eq!(s.beat(at(9.5)), json!({"lively": "2", "torpid": "4"}));
        // The child relay falls silent: it and what it holds are torpid.
        line_at(&mut s, &l2, json!({}), at(12.0));
        line_at(&mut s, &l2, json!({}), at(14.0));
        assert_eq!(s.beat(at(14.0)), json!({"lively": "2", "torpid": "1,3-4"}));
        // It goes: its ranks are gone and out of the torpid set.
        s.incoming(Incoming::Disconnect(r1.conn), at(14.2));
        assert_eq!(s.take_up(), Some(json!({"gone": "1,3-4", "torpid": ""})));
        // A new parent session hears the torpid set again.
        s.set_welcome(welcome(0, "1-14", "sim[1-14]"));
        assert_eq!(
            s.beat(at(20.0)),
            json!({"hello": [{"ranks": "2"}], "torpid": "2"})
        );
    }
}
