//! RFC 28 resource acquisition: the published variant ("v1", flux-core's
//! `{resources, up}` / `{up, down, shrink, expiration}` stream) and the
//! groups draft (`{"group": G}`, typed `grow`/`shrink`/`online`/`offline`
//! responses acknowledged by `resource.release`), served by one state
//! machine.
//!
//! # Model
//! * The *universe* is the inventory's targets minus the excluded ones
//!   and, once shrink mode is on (a `resource-define` whose method is not
//!   `configuration`, as in flux-core), minus the *lost* targets (those
//!   that went from online to offline).
//! * Configuration ([`Settings::groups`](crate::Settings), `resource.group-set`,
//!   [`Input::SetGroups`](crate::Input)) gives the *desired* membership:
//!   named groups, and `default` for every target of the universe in no
//!   named group.
//! * The *assignment* gives each target of the universe to exactly one
//!   group; it follows the desired membership, except that a target held
//!   by a scheduler only leaves its group once that scheduler released it.
//!   So a target is never held by two groups at once.
//! * At most one acquire per group.  A v1 acquire holds `default`.
//!
//! # Moving targets between groups
//! When a target's desired group differs from its assigned group:
//! * if the assigned group is held through the groups variant, its holder
//!   gets `{type:"shrink", targets}` (once) and the target stays assigned
//!   until the holder sends `resource.release`;
//! * if it is held by a v1 scheduler, the target leaves at once and the
//!   next update response carries it in `shrink` (and in `down` if it was
//!   up): v1 schedulers never release;
//! * if the group is not held, the target moves at once.
//!
//! A target that joins a held group is announced with a `grow` response
//! (groups variant).  The v1 protocol cannot grow, so a target that joins
//! `default` while a v1 scheduler holds it is *parked*: assigned to
//! `default`, not handed out, given at the next acquire.  (This is also
//! flux-core's behaviour for a lost target that comes back: it never
//! returns within the acquire session.)
//!
//! Every change the responses describe comes from the service's truth at
//! the time of the update: `online` = assigned, not pending shrink, and up
//! (up = not drained, online, not torpid).
//!
//! # Choices where flux-core has no equivalent
//! * `resource.reload` answers EBUSY while a v1 acquire is held (as
//!   flux-core); group holders do not block it: targets the new R adds
//!   are grown, targets it drops are shrunk (and must be released).  A
//!   target whose content changed keeps its old description in the
//!   holder's view.
//! * In shrink mode a lost target is shrunk from its group holder like a
//!   group move, and granted again (grow) if it rejoins.
//! * `resource.acquire-mute` silences both variants (shrinks included, so
//!   no release can follow); it is meant for shutdown.
//! * `resource-update` (expiration) is reported to v1 holders only: the
//!   groups draft has no response type for it.
//! * Excluded targets belong to no group, whatever the configuration says.
//! * The group table is configuration, not state: group changes are not
//!   RFC 44 events (RFC 44 defines none), and a `resource.group-set` lasts
//!   until the next start or configuration reload.

use crate::errno::*;
use crate::service::{Inventory, Output};
use eventlog::Event;
use idset::IdSet;
use rpc::ReplyTo;
use serde_json::{json, Map, Value};

mod update;

/// The group every target belongs to unless another group names it.
pub const DEFAULT_GROUP: &str = "default";

/// A bad `[resource.groups]` table (or `resource.group-set` request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// One group's name or targets are unusable.
    #[error("resource group '{group}' = \"{spec}\": {reason}")]
    Spec {
        group: String,
        spec: String,
        reason: String,
    },
    /// Two groups name the same targets.
    #[error("resource groups '{first}' and '{second}' overlap on targets {targets}")]
    Overlap {
        first: String,
        second: String,
        targets: String,
    },
}

/// Check decoded groups: names non-empty, not `default`, not repeated;
/// no target in two groups.
pub fn check_groups(
    raw: &[(String, String)],
    decoded: &[(String, IdSet)],
) -> Result<(), GroupError> {
    for (i, (name, ids)) in decoded.iter().enumerate() {
        let spec = raw.get(i).map(|(_, s)| s.clone()).unwrap_or_default();
        let bad = |reason: &str| GroupError::Spec {
            group: name.clone(),
            spec: spec.clone(),
            reason: reason.to_string(),
        };
        if name.is_empty() {
            return Err(bad("a group name must not be empty"));
        }
        if name == DEFAULT_GROUP {
            return Err(bad(
                "the name 'default' is reserved for the targets of no other group",
            ));
        }
        for (other, oids) in &decoded[..i] {
            if other == name {
                return Err(bad("the group is listed twice"));
            }
            let common = oids.intersection(ids);
            if !common.is_empty() {
                return Err(GroupError::Overlap {
                    first: other.clone(),
                    second: name.clone(),
                    targets: common.encode(),
                });
            }
        }
    }
    Ok(())
}

/// What the acquire machinery needs to know of the service state.
#[derive(Debug)]
pub struct Truth<'a> {
    pub inventory: Option<&'a Inventory>,
    pub exclude: &'a IdSet,
    pub lost: &'a IdSet,
    pub drained: &'a IdSet,
    pub online: &'a IdSet,
    pub torpid: &'a IdSet,
    /// [`Truth::up`], computed at its first use: only started acquires
    /// need it, and after a drain of scattered ranks it is a walk over
    /// every range of the drained set (each drain posts an event that
    /// brings the acquires up to date, with or without acquires).
    up: std::cell::OnceCell<IdSet>,
}

impl<'a> Truth<'a> {
    pub fn new(
        inventory: Option<&'a Inventory>,
        exclude: &'a IdSet,
        lost: &'a IdSet,
        drained: &'a IdSet,
        online: &'a IdSet,
        torpid: &'a IdSet,
    ) -> Truth<'a> {
        Truth {
            inventory,
            exclude,
            lost,
            drained,
            online,
            torpid,
            up: std::cell::OnceCell::new(),
        }
    }

    /// The service's up set (valid − excluded − drained − offline −
    /// torpid): the targets a scheduler sees as usable (RFC 28 `up`).
    pub fn up(&self) -> &IdSet {
        self.up.get_or_init(|| {
            let Some(inv) = self.inventory else {
                return IdSet::new();
            };
            let mut up = inv.ranks().clone();
            up.subtract(self.exclude);
            up.subtract(self.drained);
            up = up.intersection(self.online);
            up.subtract(self.torpid);
            up
        })
    }

    /// [`Truth::up`], owned.
    pub fn into_up(self) -> IdSet {
        self.up();
        self.up.into_inner().unwrap_or_default()
    }
}

/// One acquire, as the service sees it (for shells and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct AcquireInfo {
    pub to: ReplyTo,
    pub group: String,
    /// Requested with the v1 (no `group`) payload.
    pub v1: bool,
    /// The first response has been produced.
    pub started: bool,
    /// Targets the scheduler may use (granted, not shrunk).
    pub all: IdSet,
    /// Of those, the ones reported up / online.
    pub online: IdSet,
    /// Shrunk, waiting for `resource.release` (groups variant only).
    pub pending_shrink: IdSet,
}

#[derive(Debug, Clone)]
struct Holder {
    to: ReplyTo,
    /// The credential that asked (`rpc::Request::who`), for a mute by the
    /// same scheduler from another connection.
    who: Option<std::sync::Arc<str>>,
    group: String,
    v1: bool,
    started: bool,
    /// Handed to the scheduler and not released.
    granted: IdSet,
    /// Shrunk and not yet released (subset of `granted`).
    shrunk: IdSet,
    /// Reported up/online (subset of `granted − shrunk`).
    online: IdSet,
    /// v1: targets taken away since the last response.
    v1_shrink: IdSet,
    /// v1: targets in the first `resources` that were lost then (never
    /// granted, never up; flux-core's quirk).  Reported in `shrink` if
    /// they stop belonging to `default` (another group, a reload).
    ghost: IdSet,
}

impl Holder {
    fn info(&self) -> AcquireInfo {
        AcquireInfo {
            to: self.to,
            group: self.group.clone(),
            v1: self.v1,
            started: self.started,
            all: self.granted.difference(&self.shrunk),
            online: self.online.clone(),
            pending_shrink: self.shrunk.clone(),
        }
    }
}

/// The acquire state machine.  The service calls it after each event is
/// recorded (from `publish`, after the requester's reply and before the
/// journal followers), and for the acquire-family requests.
#[derive(Debug, Default)]
pub struct Acquire {
    /// Named groups as configured (file order), targets decoded.
    desired: Vec<(String, IdSet)>,
    /// Who has each target now (every group with targets, `default` too).
    assigned: Vec<(String, IdSet)>,
    holders: Vec<Holder>,
    muted: bool,
    /// Connections whose acquires are muted (`resource.acquire-mute` by a
    /// scheduler: its own streams only).
    muted_conns: Vec<rpc::ConnId>,
    /// Credentials that muted their acquires: later acquires of theirs
    /// start muted too.
    muted_who: Vec<std::sync::Arc<str>>,
    shrink_mode: bool,
}

fn idstr(ids: &IdSet) -> Value {
    Value::String(ids.encode())
}

/// R restricted to some targets: verbatim when nothing is removed and
/// `reencode` is false, else re-encoded (times and scheduling kept).
fn subset_r(inv: &Inventory, ids: &IdSet, reencode: bool) -> Value {
    let ranks = inv.ranks().clone();
    if !reencode && *ids == ranks {
        return inv.json.clone();
    }
    let mut r = inv.rset.clone();
    r.remove_ranks(&ranks.difference(ids));
    r.to_json()
}

impl Acquire {
    /// A machine with these (already checked) named groups.
    pub fn new(groups: Vec<(String, IdSet)>) -> Acquire {
        Acquire {
            desired: groups,
            ..Default::default()
        }
    }

    /// The named groups as currently configured.
    pub fn groups(&self) -> &[(String, IdSet)] {
        &self.desired
    }

    /// The current assignment of targets to groups (non-empty groups).
    pub fn assignment(&self) -> &[(String, IdSet)] {
        &self.assigned
    }

    /// The targets assigned to a group now.
    pub fn members(&self, group: &str) -> IdSet {
        self.assigned
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    }

    /// Every live acquire.
    pub fn holders(&self) -> Vec<AcquireInfo> {
        self.holders.iter().map(Holder::info).collect()
    }

    /// A v1 acquire has started (flux-core refuses `resource.reload`
    /// then; one still waiting for R does not block the reload that
    /// defines it).
    pub fn v1_held(&self) -> bool {
        self.holders.iter().any(|h| h.v1 && h.started)
    }

    fn known_group(&self, group: &str) -> bool {
        group == DEFAULT_GROUP
            || self.desired.iter().any(|(g, _)| g == group)
            || self.assigned.iter().any(|(g, _)| g == group)
    }

    fn emit(&self, out: &mut Vec<Output>, to: ReplyTo, payload: Value) {
        if !self.muted && !self.muted_conns.contains(&to.conn) {
            out.push(Output::Reply {
                to,
                reply: Ok(payload.into()),
            });
        }
    }

    fn universe(&self, t: &Truth) -> IdSet {
        let Some(inv) = t.inventory else {
            return IdSet::new();
        };
        let mut u = inv.ranks().clone();
        u.subtract(t.exclude);
        if self.shrink_mode {
            u.subtract(t.lost);
        }
        u
    }

    fn desired_set(&self, group: &str, universe: &IdSet) -> IdSet {
        if group == DEFAULT_GROUP {
            let mut u = universe.clone();
            for (_, s) in &self.desired {
                u.subtract(s);
            }
            u
        } else {
            self.desired
                .iter()
                .find(|(g, _)| g == group)
                .map(|(_, s)| s.intersection(universe))
                .unwrap_or_default()
        }
    }

    fn started_holder(&self, group: &str) -> Option<usize> {
        self.holders
            .iter()
            .position(|h| h.started && h.group == group)
    }

    fn assigned_mut(&mut self, group: &str) -> &mut IdSet {
        let pos = match self.assigned.iter().position(|(g, _)| g == group) {
            Some(p) => p,
            None => {
                self.assigned.push((group.to_string(), IdSet::new()));
                self.assigned.len() - 1
            }
        };
        &mut self.assigned[pos].1
    }

    /// `resource.acquire`: `{}` or no payload (v1, holds `default`), or
    /// `{"group": G}`.  Responses are produced here (or once R is known).
    pub fn acquire(
        &mut self,
        to: ReplyTo,
        group: Option<String>,
        who: Option<std::sync::Arc<str>>,
        t: &Truth,
        out: &mut Vec<Output>,
    ) -> Result<(), RpcError> {
        let (group, v1) = match group {
            None => (DEFAULT_GROUP.to_string(), true),
            Some(g) => (g, false),
        };
        if !self.known_group(&group) {
            return Err(RpcError::new(
                ENOENT,
                format!("unknown resource group '{group}'"),
            ));
        }
        if self.holders.iter().any(|h| h.group == group) {
            return Err(RpcError::bare(EBUSY));
        }
        if who.as_ref().is_some_and(|w| self.muted_who.contains(w))
            && !self.muted_conns.contains(&to.conn)
        {
            self.muted_conns.push(to.conn);
        }
        self.holders.push(Holder {
            to,
            who,
            group,
            v1,
            started: false,
            granted: IdSet::new(),
            shrunk: IdSet::new(),
            online: IdSet::new(),
            v1_shrink: IdSet::new(),
            ghost: IdSet::new(),
        });
        self.update(t, out);
        Ok(())
    }

    /// End the acquires `pick` selects (cancel or disconnect); their
    /// targets become acquirable again.  Returns where they were answering.
    fn end(
        &mut self,
        pick: impl Fn(&Holder) -> bool,
        t: &Truth,
        out: &mut Vec<Output>,
    ) -> Vec<ReplyTo> {
        let mut ended = Vec::new();
        self.holders.retain(|h| {
            if pick(h) {
                ended.push(h.to);
                false
            } else {
                true
            }
        });
        if !ended.is_empty() {
            self.update(t, out);
        }
        ended
    }

    /// `resource.acquire-cancel {matchtag}`: the acquire ends with ENODATA.
    pub fn cancel(&mut self, target: ReplyTo, t: &Truth, out: &mut Vec<Output>) {
        let mut pre = Vec::new();
        let ended = self.end(|h| h.to == target, t, &mut pre);
        for to in ended {
            out.push(Output::Reply {
                to,
                reply: Err(RpcError::bare(ENODATA)),
            });
        }
        out.extend(pre);
    }

    /// Does connection `conn` hold an acquire?
    pub fn holds(&self, conn: rpc::ConnId) -> bool {
        self.holders.iter().any(|h| h.to.conn == conn)
    }

    /// Is request `to` a live acquire?
    pub fn holds_request(&self, to: ReplyTo) -> bool {
        self.holders.iter().any(|h| h.to == to)
    }

    /// Request `to` is gone (its stream was ended by the transport): the
    /// acquire ends silently, as on a disconnect.
    pub fn gone(&mut self, to: ReplyTo, t: &Truth, out: &mut Vec<Output>) {
        self.end(|h| h.to == to, t, out);
    }

    /// The client went away: its acquires end silently.
    pub fn disconnect(&mut self, conn: rpc::ConnId, t: &Truth, out: &mut Vec<Output>) {
        self.end(|h| h.to.conn == conn, t, out);
        self.muted_conns.retain(|c| *c != conn);
    }

    /// `resource.acquire-mute` by the instance owner: no acquire response
    /// from now on, to anyone (flux-core's).
    pub fn mute(&mut self) {
        self.muted = true;
    }

    /// `resource.acquire-mute` by anyone else: no response from now on to
    /// the caller's own acquires: those of connection `conn`, and, when
    /// the caller is named (`who`: its certificate or token), those the
    /// same credential holds on other connections (the scheduler's stream
    /// and its `roster resource acquire-mute` are two connections) and
    /// opens later.  Every other scheduler's stream keeps flowing.
    pub fn mute_caller(&mut self, conn: rpc::ConnId, who: Option<std::sync::Arc<str>>) {
        let mut conns = vec![conn];
        if let Some(w) = who {
            conns.extend(
                self.holders
                    .iter()
                    .filter(|h| h.who.as_ref() == Some(&w))
                    .map(|h| h.to.conn),
            );
            if !self.muted_who.contains(&w) {
                self.muted_who.push(w);
            }
        }
        for c in conns {
            if !self.muted_conns.contains(&c) {
                self.muted_conns.push(c);
            }
        }
    }

    /// `resource.release {group, targets}`: validate, answer `to` with an
    /// empty payload, then hand the targets to their new groups.
    pub fn release(
        &mut self,
        to: ReplyTo,
        group: &str,
        targets: &IdSet,
        t: &Truth,
        out: &mut Vec<Output>,
    ) -> Result<(), RpcError> {
        let Some(h) = self
            .holders
            .iter()
            .position(|h| h.group == group && h.started)
        else {
            return Err(RpcError::new(
                EINVAL,
                format!("resource group '{group}' is not acquired"),
            ));
        };
        if targets.is_empty() {
            return Err(RpcError::new(EINVAL, "idset is empty"));
        }
        let holder = &mut self.holders[h];
        let bad = targets.difference(&holder.shrunk);
        if !bad.is_empty() {
            let (s, verb) = if bad.len() > 1 {
                ("s", "are")
            } else {
                ("", "is")
            };
            return Err(RpcError::new(
                EINVAL,
                format!("target{s} {bad} of group '{group}' {verb} not pending shrink"),
            ));
        }
        holder.shrunk.subtract(targets);
        holder.granted.subtract(targets);
        if let Some((_, s)) = self.assigned.iter_mut().find(|(g, _)| g == group) {
            s.subtract(targets);
        }
        out.push(Output::Reply {
            to,
            reply: Ok(Value::Null.into()),
        });
        self.update(t, out);
        Ok(())
    }

    /// Replace the named groups (configuration reload, `resource.group-set`).
    pub fn set_groups(&mut self, groups: Vec<(String, IdSet)>, t: &Truth, out: &mut Vec<Output>) {
        self.desired = groups;
        self.update(t, out);
    }

    /// The named groups after `resource.group-set {group, targets}`: the
    /// group gets exactly `targets`, which leave every other named group.
    pub fn groups_with(&self, group: &str, targets: &IdSet) -> Vec<(String, IdSet)> {
        let mut groups = self.desired.clone();
        let mut found = false;
        for (g, s) in &mut groups {
            if g == group {
                *s = targets.clone();
                found = true;
            } else {
                s.subtract(targets);
            }
        }
        if !found {
            groups.push((group.to_string(), targets.clone()));
        }
        groups
    }

    /// Module unload: every acquire ends with ECANCELED.
    pub fn shutdown(&mut self, out: &mut Vec<Output>) {
        for h in std::mem::take(&mut self.holders) {
            out.push(Output::Reply {
                to: h.to,
                reply: Err(RpcError::new(ECANCELED, "the resource module was unloaded")),
            });
        }
    }
}
