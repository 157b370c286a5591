//! Relay sessions on the service side: which ranks each relay speaks
//! for, when each was last heard of, and the liveness transitions they
//! cause, all as idsets (a relay may speak for 100k+ ranks; nothing here
//! costs per rank).
//!
//! A relay session owns its own rank and the children it announced and
//! the service accepted.  Its heartbeat timers are kept as *cohorts*:
//! disjoint idsets of owned ranks, each with the time its ranks were last
//! heard of.  A `lively` line moves its ranks into a new cohort; a cohort
//! older than `torpid_max` is torpid, one older than `offline_timeout`
//! expires (its ranks go offline; if the relay's own rank is among them,
//! the whole session expires).  With every child heartbeating there are
//! one or two cohorts per relay; stalled children stay behind in theirs.
//!
//! Torpid children are the relay's call: it times its children's
//! heartbeats itself and reports the ranks it finds torpid (a `torpid`
//! idset, [`Relays::report_torpid`]).  A rank is torpid while the relay
//! reports it, or while the service itself has heard nothing of it for
//! `torpid_max` (the fallback for a relay that fell silent, children and
//! all); it is lively again once neither holds.
//!
//! Like [`crate::monitor::Monitor`], nothing here reads a clock: every
//! call takes `now`.

use crate::monitor::Changes;
use idset::IdSet;
use rpc::{ConnId, ReplyTo};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// One relay session.
#[derive(Debug, Clone)]
pub struct RelaySession {
    /// The relay's own rank.
    pub rank: u32,
    /// Its `resource.agent` stream (answers go there).
    pub stream: ReplyTo,
    /// The ranks it may speak for (its subtree, own rank excluded).
    pub subtree: IdSet,
    /// The ranks it speaks for now (own rank included).
    owned: IdSet,
    /// Owned ranks by the time they were last heard of (oldest first,
    /// disjoint, their union is `owned`).
    cohorts: VecDeque<(f64, IdSet)>,
    /// Owned ranks the service heard nothing of for `torpid_max`.
    silent: IdSet,
    /// Owned ranks the relay reports torpid (its own rank excluded).
    reported: IdSet,
    /// Owned ranks now torpid: `silent` ∪ `reported`.
    torpid: IdSet,
}

impl RelaySession {
    pub fn owned(&self) -> &IdSet {
        &self.owned
    }

    /// Recompute `torpid` from `silent` and `reported`, recording the
    /// transitions.
    fn settle(&mut self, ch: &mut Changes) {
        let now = self.silent.union(&self.reported);
        let became = now.difference(&self.torpid);
        let recovered = self.torpid.difference(&now);
        net(&mut ch.torpid, &mut ch.lively, &became);
        net(&mut ch.lively, &mut ch.torpid, &recovered);
        self.torpid = now;
    }
}

/// Ranks a relay session lost to its timers.
#[derive(Debug, Clone, PartialEq)]
pub struct Expired {
    pub stream: ReplyTo,
    /// The relay's own rank.
    pub rank: u32,
    pub ranks: IdSet,
    /// The relay itself fell silent: the session is over.
    pub whole: bool,
}

/// Every relay session, and the ranks they hold.
#[derive(Debug, Default)]
pub struct Relays {
    torpid_max: f64,
    offline_timeout: f64,
    sessions: HashMap<ConnId, RelaySession>,
    /// The union of every session's `owned`.
    claimed: IdSet,
    changes: Changes,
    next_check: f64,
    /// Ranks sessions lost since the last [`Relays::take_via`], by the
    /// relay's own rank (they are no longer in any session's `owned`).
    departed: Vec<(u32, IdSet)>,
}

/// Record `ids` going up (`up`) or down in a pair of netted sets: the
/// last transition of a rank wins.
fn net(add: &mut IdSet, remove: &mut IdSet, ids: &IdSet) {
    if ids.is_empty() {
        return;
    }
    add.add(ids);
    remove.subtract(ids);
}

impl Relays {
    /// The same timers as the monitor's (seconds; 0 disables).
    pub fn new(torpid_max: f64, offline_timeout: f64) -> Relays {
        let sane = |t: f64| if t.is_finite() && t > 0.0 { t } else { 0.0 };
        Relays {
            torpid_max: sane(torpid_max),
            offline_timeout: sane(offline_timeout),
            next_check: f64::INFINITY,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// No timer fires before this time (monotonic seconds).
    pub fn next_check(&self) -> f64 {
        self.next_check
    }

    /// Whether transitions wait for [`Relays::take_changes`].
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// The ranks every relay together speaks for.
    pub fn claimed(&self) -> &IdSet {
        &self.claimed
    }

    /// The ranks of `targets` relays speak for now, with when each was
    /// last heard of (monotonic seconds) and the relay's own rank: one
    /// entry per cohort met, O(sessions × cohorts) range operations.
    pub fn heard_of(&self, targets: &IdSet) -> Vec<(u32, f64, IdSet)> {
        let mut out = Vec::new();
        if !self.claimed.intersects(targets) {
            return out;
        }
        for s in self.sessions.values() {
            if !s.owned.intersects(targets) {
                continue;
            }
            for (t, ids) in &s.cohorts {
                let mine = ids.intersection(targets);
                if !mine.is_empty() {
                    out.push((s.rank, *t, mine));
                }
            }
        }
        out
    }

    pub fn session(&self, conn: ConnId) -> Option<&RelaySession> {
        self.sessions.get(&conn)
    }

    /// Every relay's stream (for shutdown).
    pub fn streams(&self) -> Vec<ReplyTo> {
        let mut v: Vec<ReplyTo> = self.sessions.values().map(|s| s.stream).collect();
        v.sort_by_key(|t| (t.conn, t.matchtag));
        v
    }

    /// Accept a relay for `rank` (free: the caller checked) on its
    /// stream's connection, speaking for `subtree`.
    pub fn hello(&mut self, now: f64, rank: u32, stream: ReplyTo, subtree: IdSet) {
        let own = IdSet::from_range(rank, rank);
        self.claimed.add(&own);
        net(&mut self.changes.up, &mut self.changes.down, &own);
        self.sessions.insert(
            stream.conn,
            RelaySession {
                rank,
                stream,
                subtree,
                owned: own.clone(),
                cohorts: VecDeque::from([(now, own)]),
                silent: IdSet::new(),
                reported: IdSet::new(),
                torpid: IdSet::new(),
            },
        );
        self.arm(now);
    }

    /// A timer may fire as early as `last` + the shortest timer.
    fn arm(&mut self, last: f64) {
        let t = [self.torpid_max, self.offline_timeout]
            .into_iter()
            .filter(|t| *t > 0.0)
            .fold(f64::INFINITY, f64::min);
        self.next_check = self.next_check.min(last + t);
    }

    /// The relay on `conn` now also speaks for `ranks` (accepted
    /// children, free or already its own: the caller checked).
    pub fn join(&mut self, now: f64, conn: ConnId, ranks: &IdSet) {
        let Some(s) = self.sessions.get_mut(&conn) else {
            return;
        };
        let new = ranks.difference(&s.owned);
        s.owned.add(&new);
        self.claimed.add(&new);
        net(&mut self.changes.up, &mut self.changes.down, &new);
        // Joining again (a re-announce) counts as being heard.
        self.heard(now, conn, ranks);
    }

    /// The relay on `conn` heard from `ranks` (only its owned ranks
    /// count) and from itself.  Returns false if `conn` has no relay.
    pub fn heard(&mut self, now: f64, conn: ConnId, ranks: &IdSet) -> bool {
        let Some(s) = self.sessions.get_mut(&conn) else {
            return false;
        };
        let mut heard = ranks.intersection(&s.owned);
        heard.insert(s.rank);
        for (_, ids) in s.cohorts.iter_mut() {
            ids.subtract(&heard);
        }
        s.cohorts.retain(|(_, ids)| !ids.is_empty());
        match s.cohorts.back_mut() {
            Some((t, ids)) if *t >= now => ids.add(&heard),
            _ => s.cohorts.push_back((now, heard.clone())),
        }
        if s.silent.intersects(&heard) {
            s.silent.subtract(&heard);
            s.settle(&mut self.changes);
        }
        self.arm(now);
        true
    }

    /// The relay on `conn` reports `ranks` as every torpid rank below it
    /// (only its owned ranks count, its own rank never: that is the
    /// service's to time).  Ranks it no longer reports are lively again
    /// unless the service's own timer holds them.  Returns false if
    /// `conn` has no relay.
    pub fn report_torpid(&mut self, conn: ConnId, ranks: &IdSet) -> bool {
        let Some(s) = self.sessions.get_mut(&conn) else {
            return false;
        };
        let mut reported = ranks.intersection(&s.owned);
        reported.remove(s.rank);
        if reported != s.reported {
            s.reported = reported;
            s.settle(&mut self.changes);
        }
        true
    }

    /// Children of the relay on `conn` left (its own rank cannot).
    /// Returns the ranks that went offline.
    pub fn gone(&mut self, conn: ConnId, ranks: &IdSet) -> IdSet {
        let Some(s) = self.sessions.get_mut(&conn) else {
            return IdSet::new();
        };
        let mut lost = ranks.intersection(&s.owned);
        lost.remove(s.rank);
        Self::drop_ranks(s, &mut self.claimed, &mut self.changes, &lost);
        if !lost.is_empty() {
            self.departed.push((s.rank, lost.clone()));
        }
        lost
    }

    fn drop_ranks(s: &mut RelaySession, claimed: &mut IdSet, ch: &mut Changes, lost: &IdSet) {
        if lost.is_empty() {
            return;
        }
        s.owned.subtract(lost);
        claimed.subtract(lost);
        for (_, ids) in s.cohorts.iter_mut() {
            ids.subtract(lost);
        }
        s.cohorts.retain(|(_, ids)| !ids.is_empty());
        s.silent.subtract(lost);
        s.reported.subtract(lost);
        let was_torpid = s.torpid.intersection(lost);
        s.torpid.subtract(lost);
        net(&mut ch.down, &mut ch.up, lost);
        net(&mut ch.lively, &mut ch.torpid, &was_torpid);
    }

    /// The connection is gone: the relay and everything it spoke for go
    /// offline.
    pub fn disconnect(&mut self, conn: ConnId) -> Option<RelaySession> {
        let mut s = self.sessions.remove(&conn)?;
        let all = s.owned.clone();
        Self::drop_ranks(&mut s, &mut self.claimed, &mut self.changes, &all);
        self.departed.push((s.rank, all.clone()));
        s.owned = all;
        Some(s)
    }

    /// Run the timers: ranks silent for longer than `torpid_max` become
    /// torpid; those silent for longer than `offline_timeout` are dropped
    /// and returned (the whole session when the relay itself is silent).
    pub fn tick(&mut self, now: f64) -> Vec<Expired> {
        if now < self.next_check {
            return Vec::new();
        }
        let (tmax, tout) = (self.torpid_max, self.offline_timeout);
        let mut next = f64::INFINITY;
        let mut out = Vec::new();
        let mut whole = Vec::new();
        for (conn, s) in self.sessions.iter_mut() {
            if tout > 0.0 {
                let mut expired = IdSet::new();
                while let Some((t, _)) = s.cohorts.front() {
                    if now - *t <= tout {
                        break;
                    }
                    if let Some((_, ids)) = s.cohorts.pop_front() {
                        expired.add(&ids);
                    }
                }
                if expired.contains(s.rank) {
                    // disconnect() below drops everything it owns.
                    whole.push(*conn);
                    continue;
                }
                if !expired.is_empty() {
                    Self::drop_ranks(s, &mut self.claimed, &mut self.changes, &expired);
                    self.departed.push((s.rank, expired.clone()));
                    out.push(Expired {
                        stream: s.stream,
                        rank: s.rank,
                        ranks: expired,
                        whole: false,
                    });
                }
            }
            let mut silent = false;
            for (t, ids) in s.cohorts.iter() {
                if tmax > 0.0 && now - *t > tmax {
                    if !s.silent.is_superset(ids) {
                        s.silent.add(ids);
                        silent = true;
                    }
                } else {
                    if tmax > 0.0 {
                        next = next.min(t + tmax);
                    }
                    break;
                }
            }
            if silent {
                s.settle(&mut self.changes);
            }
            if tout > 0.0 {
                if let Some((t, _)) = s.cohorts.front() {
                    next = next.min(t + tout);
                }
            }
        }
        self.next_check = next;
        for conn in whole {
            if let Some(s) = self.disconnect(conn) {
                out.push(Expired {
                    stream: s.stream,
                    rank: s.rank,
                    ranks: s.owned,
                    whole: true,
                });
            }
        }
        out.sort_by_key(|e| e.rank);
        out
    }

    /// The transitions since the last call (netted per rank).
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// Which relay spoke for which ranks of `changed` (ranks that changed
    /// state since the last call), by the relay's own rank: the relays
    /// holding them now, and those that lost them since the last call (a
    /// rank that moved counts for both).  A relay's own rank is its own
    /// doing, not counted.
    pub fn take_via(&mut self, changed: &IdSet) -> BTreeMap<u32, IdSet> {
        let departed = std::mem::take(&mut self.departed);
        let mut via: BTreeMap<u32, IdSet> = BTreeMap::new();
        if changed.is_empty() {
            return via;
        }
        let held = self.sessions.values().map(|s| (s.rank, &s.owned));
        for (rank, ids) in held.chain(departed.iter().map(|(r, ids)| (*r, ids))) {
            let mut mine = ids.intersection(changed);
            mine.remove(rank);
            if !mine.is_empty() {
                via.entry(rank).or_default().add(&mine);
            }
        }
        via
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    fn to(conn: ConnId) -> ReplyTo {
        ReplyTo { conn, matchtag: 1 }
    }

    /// Relays with the timers `(torpid_max, offline_timeout)` and one
    /// relay, of `rank` on `conn`, that said hello at `now` for all of
    /// `subtree`.
    fn one_relay(timers: (f64, f64), now: f64, rank: u32, conn: ConnId, subtree: &str) -> Relays {
        let mut r = Relays::new(timers.0, timers.1);
        r.hello(now, rank, to(conn), ids(subtree));
        r.join(now, conn, &ids(subtree));
        r
    }

    #[test]
    fn via_names_the_relay_of_each_changed_rank() {
        let mut r = Relays::new(2.0, 5.0);
        r.hello(100.0, 1, to(7), ids("3-4"));
        r.hello(100.0, 2, to(8), ids("5-6"));
        r.join(100.0, 7, &ids("3-4"));
        r.join(100.0, 8, &ids("5"));
        let c = r.take_changes();
        let changed = c.up.union(&c.down);
        let via = r.take_via(&changed);
        // own ranks (1, 2) are not a relay's doing for a child
        assert_eq!(via.len(), 2);
        assert_eq!(via[&1].encode(), "3-4");
        assert_eq!(via[&2].encode(), "5");
        // a child gone and a whole relay gone still name their relay
        r.gone(7, &ids("4"));
        r.disconnect(8);
        let c = r.take_changes();
        let via = r.take_via(&c.down);
        assert_eq!(via[&1].encode(), "4");
        assert_eq!(via[&2].encode(), "5");
        // nothing changed: nothing named, and the departed are forgotten
        assert!(r.take_via(&IdSet::new()).is_empty());
        assert!(!r.take_via(&ids("0-10")).contains_key(&2));
    }

    #[test]
    fn join_beat_torpid_expire() {
        let mut r = one_relay((2.0, 5.0), 100.0, 0, 7, "1-131071");
        let c = r.take_changes();
        assert_eq!(c.up.encode(), "0-131071");
        assert_eq!(r.claimed().len(), 131072);
        // Everyone but 100-199 heard every second.
        for t in 1..=3 {
            let mut l = ids("1-131071");
            l.subtract(&ids("100-199"));
            r.heard(100.0 + f64::from(t), 7, &l);
            assert!(r.tick(100.0 + f64::from(t)).is_empty());
        }
        assert_eq!(r.take_changes().torpid.encode(), "100-199");
        assert!(r.session(7).unwrap().cohorts.len() <= 3);
        // Heard again: lively.
        r.heard(103.5, 7, &ids("150"));
        assert_eq!(r.take_changes().lively.encode(), "150");
        // 100-149,151-199 expire after 5 s; the relay stays.
        r.heard(105.5, 7, &ids("1-99,200-131071"));
        let e = r.tick(105.5);
        assert_eq!(e.len(), 1);
        assert!(!e[0].whole);
        assert_eq!(e[0].ranks.encode(), "100-149,151-199");
        let c = r.take_changes();
        assert_eq!(c.down.encode(), "100-149,151-199");
        assert_eq!(c.lively.encode(), "100-149,151-199");
        assert_eq!(r.claimed().len(), 131072 - 99);
        // The relay falls silent: the whole session expires.
        let e = r.tick(111.0);
        assert_eq!(e.len(), 1);
        assert!(e[0].whole);
        assert_eq!(r.take_changes().down.len(), 131072 - 99);
        assert!(r.is_empty());
        assert!(r.claimed().is_empty());
    }

    #[test]
    fn gone_and_disconnect_net_with_joins() {
        let mut r = one_relay((0.0, 0.0), 1.0, 1, 3, "3-4");
        r.take_changes();
        // The relay's own rank cannot go.
        assert_eq!(r.gone(3, &ids("1,3")).encode(), "3");
        r.join(1.0, 3, &ids("3"));
        let c = r.take_changes();
        assert_eq!(c.up.encode(), "3");
        assert!(c.down.is_empty());
        let s = r.disconnect(3).unwrap();
        assert_eq!(s.owned().encode(), "1,3-4");
        assert_eq!(r.take_changes().down.encode(), "1,3-4");
        assert!(r.tick(1e9).is_empty());
        assert!(!r.heard(2.0, 3, &ids("3")));
    }

    #[test]
    fn the_relays_torpid_report_and_the_services_own_timer() {
        let mut r = one_relay((2.0, 10.0), 100.0, 0, 7, "1-1023");
        r.take_changes();
        // The relay reports 100-199 torpid (its own rank and ranks it
        // does not hold are ignored): torpid at once, no timer needed.
        r.heard(100.5, 7, &ids("1-1023"));
        assert!(r.report_torpid(7, &ids("0,100-199,5000")));
        assert!(r.tick(100.5).is_empty());
        let c = r.take_changes();
        assert_eq!(c.torpid.encode(), "100-199");
        assert!(c.lively.is_empty());
        assert_eq!(r.session(7).unwrap().torpid.encode(), "100-199");
        // The same report again changes nothing; a smaller one revives.
        r.report_torpid(7, &ids("100-199"));
        assert!(r.take_changes().is_empty());
        r.report_torpid(7, &ids("100-149"));
        let c = r.take_changes();
        assert_eq!(c.lively.encode(), "150-199");
        assert!(c.torpid.is_empty());
        // The relay falls silent: after torpid_max the service's own timer
        // makes everything it speaks for torpid, its own rank included.
        assert!(r.tick(102.4).is_empty());
        assert!(r.take_changes().is_empty());
        r.tick(102.6);
        let c = r.take_changes();
        assert_eq!(c.torpid.encode(), "0-99,150-1023");
        // It speaks again, still reporting 100-149: only those stay.
        r.heard(103.0, 7, &ids("1-99,150-1023"));
        r.report_torpid(7, &ids("100-149"));
        let c = r.take_changes();
        assert_eq!(c.lively.encode(), "0-99,150-1023");
        assert_eq!(r.session(7).unwrap().torpid.encode(), "100-149");
        // Heard but still reported: the relay's word holds.
        r.heard(103.5, 7, &ids("100-149"));
        assert!(r.take_changes().is_empty());
        r.report_torpid(7, &IdSet::new());
        assert_eq!(r.take_changes().lively.encode(), "100-149");
        // A reported rank that leaves goes offline (and out of the
        // torpid set, as when a timer ends it).
        r.report_torpid(7, &ids("300"));
        r.take_changes();
        r.gone(7, &ids("300"));
        let c = r.take_changes();
        assert_eq!(c.down.encode(), "300");
        assert_eq!(c.lively.encode(), "300");
        assert!(c.torpid.is_empty(), "{c:?}");
        assert!(r.session(7).unwrap().torpid.is_empty());
        assert!(!r.report_torpid(8, &ids("1")));
    }
}
