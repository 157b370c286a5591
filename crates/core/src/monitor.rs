//! Execution-target liveness (flux-core's monitor.c, with Roster's agents
//! in place of the broker groups).
//!
//! An agent says hello on a connection (a `resource.agent` streaming
//! request) and is given a rank; everything it says afterwards arrives on
//! that connection, so an agent can only ever speak for its own rank.
//! [`Monitor`] keeps, per connection, the rank and the time the agent was
//! last heard from, and decides:
//!
//! * **online** when an agent is accepted;
//! * **offline** when its connection drops, or when it has been silent for
//!   longer than `offline_timeout` (its stream is then ended);
//! * **torpid** when it has been silent for longer than `torpid_max`,
//!   **lively** when it is heard from again (or goes offline).
//!
//! Transitions are not applied one by one: they accumulate and
//! [`Monitor::take_changes`] hands them to the service at the end of a
//! batch, so simultaneous transitions post one event with one idset.
//!
//! The monitor never reads a clock: every call takes `now`, monotonic
//! seconds (the service hands it [`crate::Now::mono`]).

use idset::IdSet;
use rpc::{ConnId, ReplyTo};
use std::collections::{BTreeMap, HashMap};

/// Default `torpid-max`, seconds.
pub const DEFAULT_TORPID_MAX: f64 = 30.0;
/// Default `offline-timeout`, seconds.
pub const DEFAULT_OFFLINE_TIMEOUT: f64 = 60.0;
/// Default interval between liveness event posts, seconds.
pub const DEFAULT_LIVENESS_BATCH: f64 = 0.1;

/// One accepted agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub rank: u32,
    /// Its `resource.agent` stream.
    pub stream: ReplyTo,
    /// When it was last heard from.
    pub last: f64,
    pub torpid: bool,
}

/// Liveness transitions accumulated since the last [`Monitor::take_changes`]
/// (last transition of a rank wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    pub up: IdSet,
    pub down: IdSet,
    pub torpid: IdSet,
    pub lively: IdSet,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.up.is_empty()
            && self.down.is_empty()
            && self.torpid.is_empty()
            && self.lively.is_empty()
    }
}

/// Agents by connection, rank ownership and heartbeat timers.
#[derive(Debug)]
pub struct Monitor {
    torpid_max: f64,
    offline_timeout: f64,
    agents: HashMap<ConnId, Agent>,
    owners: HashMap<u32, ConnId>,
    /// rank → online (true) / offline (false), since the last take.
    online_changes: BTreeMap<u32, bool>,
    /// rank → torpid (true) / lively (false), since the last take.
    torpid_changes: BTreeMap<u32, bool>,
    /// No timer can fire before this time.
    next_check: f64,
    /// rank → when its last agent was last heard from, and the version
    /// its hello said (kept after the agent leaves; one entry per rank
    /// an agent ever held).
    seen: HashMap<u32, Seen>,
}

/// What is known of the last agent of a rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Monotonic seconds (`None`: a relay's rank, timed by the relays).
    pub last: Option<f64>,
    pub version: Option<std::sync::Arc<str>>,
    /// An agent holds the rank now.
    pub connected: bool,
}

fn ids_where(m: &BTreeMap<u32, bool>, want: bool) -> IdSet {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for (&r, &v) in m {
        if v != want {
            continue;
        }
        match ranges.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(r) => last.1 = r,
            _ => ranges.push((r, r)),
        }
    }
    IdSet::from_sorted_ranges(ranges).unwrap_or_default()
}

impl Monitor {
    /// `torpid_max` and `offline_timeout` in seconds; 0 (or less, or not
    /// finite) disables that timer.
    pub fn new(torpid_max: f64, offline_timeout: f64) -> Monitor {
        let sane = |t: f64| if t.is_finite() && t > 0.0 { t } else { 0.0 };
        Monitor {
            torpid_max: sane(torpid_max),
            offline_timeout: sane(offline_timeout),
            agents: HashMap::new(),
            owners: HashMap::new(),
            online_changes: BTreeMap::new(),
            torpid_changes: BTreeMap::new(),
            next_check: f64::INFINITY,
            seen: HashMap::new(),
        }
    }

    /// What is known of `rank`'s agent (its last heartbeat, live or
    /// not), if an agent ever held it.
    pub fn seen(&self, rank: u32) -> Option<Seen> {
        let mut s = self.seen.get(&rank)?.clone();
        if let Some(a) = self.owner(rank).and_then(|c| self.agents.get(&c)) {
            s.last = Some(a.last);
            s.connected = true;
        }
        Some(s)
    }

    /// The version the agent of `rank` said in its hello.
    pub fn set_version(&mut self, rank: u32, version: Option<std::sync::Arc<str>>) {
        self.seen.entry(rank).or_default().version = version;
    }

    pub fn torpid_max(&self) -> f64 {
        self.torpid_max
    }

    pub fn offline_timeout(&self) -> f64 {
        self.offline_timeout
    }

    /// The heartbeat period an agent should use: a quarter of the shortest
    /// enabled timer, between 0.1 s and 5 s (5 s with no timers).
    pub fn heartbeat_period(&self) -> f64 {
        let shortest = [self.torpid_max, self.offline_timeout]
            .into_iter()
            .filter(|t| *t > 0.0)
            .fold(f64::INFINITY, f64::min);
        if shortest.is_finite() {
            (shortest / 4.0).clamp(0.1, 5.0)
        } else {
            5.0
        }
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The connection of the live agent that owns `rank`.
    pub fn owner(&self, rank: u32) -> Option<ConnId> {
        self.owners.get(&rank).copied()
    }

    pub fn agent(&self, conn: ConnId) -> Option<&Agent> {
        self.agents.get(&conn)
    }

    /// Every live agent's stream (for shutdown).
    pub fn streams(&self) -> Vec<ReplyTo> {
        let mut v: Vec<ReplyTo> = self.agents.values().map(|a| a.stream).collect();
        v.sort_by_key(|t| (t.conn, t.matchtag));
        v
    }

    /// No timer fires before this time (`INFINITY`: none is running).  A
    /// tick after it may find nothing to do (the agent was heard from).
    pub fn next_check(&self) -> f64 {
        self.next_check
    }

    /// Whether transitions wait for [`Monitor::take_changes`].
    pub fn has_changes(&self) -> bool {
        !self.online_changes.is_empty() || !self.torpid_changes.is_empty()
    }

    /// Accept an agent for `rank` on its stream's connection.  The caller
    /// has checked that the rank is free.
    pub fn hello(&mut self, now: f64, rank: u32, stream: ReplyTo) {
        self.agents.insert(
            stream.conn,
            Agent {
                rank,
                stream,
                last: now,
                torpid: false,
            },
        );
        self.owners.insert(rank, stream.conn);
        self.seen.entry(rank).or_default().last = Some(now);
        self.online_changes.insert(rank, true);
        if let Some(t) = self.first_deadline(now, false) {
            self.next_check = self.next_check.min(t);
        }
    }

    /// The agent on `conn` was heard from.  Returns its rank, or None if
    /// the connection has no accepted agent.
    pub fn heard(&mut self, now: f64, conn: ConnId) -> Option<u32> {
        let a = self.agents.get_mut(&conn)?;
        a.last = a.last.max(now);
        if a.torpid {
            a.torpid = false;
            self.torpid_changes.insert(a.rank, false);
            // Its torpid deadline is in the future again.
            let t = a.last + self.torpid_max;
            self.next_check = self.next_check.min(t);
        }
        Some(a.rank)
    }

    /// The connection is gone: its agent (if any) goes offline.
    pub fn disconnect(&mut self, conn: ConnId) -> Option<Agent> {
        let a = self.agents.remove(&conn)?;
        self.forget(&a);
        Some(a)
    }

    fn forget(&mut self, a: &Agent) {
        if self.owners.get(&a.rank) == Some(&a.stream.conn) {
            self.owners.remove(&a.rank);
            let s = self.seen.entry(a.rank).or_default();
            s.last = Some(s.last.map_or(a.last, |l| l.max(a.last)));
            s.connected = false;
        }
        self.online_changes.insert(a.rank, false);
        if a.torpid {
            self.torpid_changes.insert(a.rank, false);
        }
    }

    /// The earliest time a timer of an agent last heard at `last` fires.
    fn first_deadline(&self, last: f64, torpid: bool) -> Option<f64> {
        let mut t = f64::INFINITY;
        if self.torpid_max > 0.0 && !torpid {
            t = t.min(last + self.torpid_max);
        }
        if self.offline_timeout > 0.0 {
            t = t.min(last + self.offline_timeout);
        }
        t.is_finite().then_some(t)
    }

    /// Run the timers: agents silent for longer than `torpid_max` become
    /// torpid; those silent for longer than `offline_timeout` are dropped
    /// and returned (the caller ends their streams).
    pub fn tick(&mut self, now: f64) -> Vec<Agent> {
        if now < self.next_check {
            return Vec::new();
        }
        let mut next = f64::INFINITY;
        let mut expired = Vec::new();
        let (tmax, tout) = (self.torpid_max, self.offline_timeout);
        for a in self.agents.values_mut() {
            let silent = now - a.last;
            if tout > 0.0 && silent > tout {
                expired.push(a.stream.conn);
                continue;
            }
            if tmax > 0.0 && !a.torpid && silent > tmax {
                a.torpid = true;
                self.torpid_changes.insert(a.rank, true);
            }
            if tmax > 0.0 && !a.torpid {
                next = next.min(a.last + tmax);
            }
            if tout > 0.0 {
                next = next.min(a.last + tout);
            }
        }
        self.next_check = next;
        let mut out = Vec::with_capacity(expired.len());
        for conn in expired {
            if let Some(a) = self.agents.remove(&conn) {
                self.forget(&a);
                out.push(a);
            }
        }
        out.sort_by_key(|a| a.rank);
        out
    }

    /// The transitions since the last call, netted per rank.
    pub fn take_changes(&mut self) -> Changes {
        let c = Changes {
            up: ids_where(&self.online_changes, true),
            down: ids_where(&self.online_changes, false),
            torpid: ids_where(&self.torpid_changes, true),
            lively: ids_where(&self.torpid_changes, false),
        };
        self.online_changes.clear();
        self.torpid_changes.clear();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(conn: ConnId) -> ReplyTo {
        ReplyTo { conn, matchtag: 1 }
    }

    #[test]
    fn timers_and_netting() {
        let mut m = Monitor::new(2.0, 5.0);
        assert_eq!(m.heartbeat_period(), 0.5);
        m.hello(100.0, 3, to(1));
        m.hello(100.0, 4, to(2));
        let c = m.take_changes();
        assert_eq!(c.up.encode(), "3-4");
        assert!(c.down.is_empty());
        // Nothing before the deadline.
        assert!(m.tick(101.9).is_empty());
        assert!(m.take_changes().is_empty());
        m.heard(101.5, 2);
        assert!(m.tick(102.1).is_empty());
        assert_eq!(m.take_changes().torpid.encode(), "3");
        // Heard again: lively.
        assert_eq!(m.heard(103.0, 1), Some(3));
        assert_eq!(m.take_changes().lively.encode(), "3");
        // Both silent until the offline timeout.
        m.tick(104.0);
        let expired = m.tick(108.1);
        assert_eq!(
            expired.iter().map(|a| a.rank).collect::<Vec<_>>(),
            vec![3, 4]
        );
        let c = m.take_changes();
        assert_eq!(c.down.encode(), "3-4");
        assert!(c.torpid.is_empty());
        assert!(m.is_empty());
        assert_eq!(m.owner(3), None);
    }

    #[test]
    fn leave_and_rejoin_in_one_batch_nets_out() {
        let mut m = Monitor::new(0.0, 0.0);
        assert_eq!(m.heartbeat_period(), 5.0);
        m.hello(1.0, 0, to(1));
        m.take_changes();
        assert!(m.disconnect(1).is_some());
        assert!(m.disconnect(1).is_none());
        m.hello(1.1, 0, to(2));
        let c = m.take_changes();
        assert_eq!(c.up.encode(), "0");
        assert!(c.down.is_empty());
        assert_eq!(m.owner(0), Some(2));
        // Timers disabled: never torpid.
        assert!(m.tick(1e9).is_empty());
        assert!(m.take_changes().is_empty());
    }
}
