//! A scheduler's RFC 4 graph fed by RFC 28: [`Follower`] builds the
//! resource graph from the first `resource.acquire` response and applies
//! every later one to it, while the caller matches, allocates and frees on
//! the same graph.
//!
//! * The first response (v1 `{resources, up}` or the groups variant's
//!   first `grow`) builds the graph from R, using its JGF `scheduling` key
//!   when present.  Each execution target is the highest pool of its rank
//!   (the `node`).  A target of the JGF that R_lite does not list (the
//!   service drops excluded ranks from R_lite and keeps the whole JGF, as
//!   flux-core does) is down and never brought up.
//! * `up`/`online` set a target's state to `up`; `down`/`offline` (which
//!   cover drained and excluded targets as well as crashed ones) set it to
//!   `down`.  A down pool and everything below it leave Available,
//!   Aggregate, Copy and Match at once; allocations on it stay (RFC 28: no
//!   exception is raised; the execution system handles it).
//! * `grow` merges the new R into the graph (targets `offline` are down).
//! * `shrink` (groups) follows the draft's rule: a shrunk target is never
//!   allocated again; if jobs hold it, they are reported in
//!   [`Applied::doomed`] (the scheduler raises a fatal exception on them)
//!   and the target stays, down, until they are freed; a target free of
//!   jobs is unlinked from the graph and becomes *releasable*: the caller
//!   sends `resource.release {group, targets}` for
//!   [`Follower::releasable`] and then calls [`Follower::released`].  v1
//!   `shrink` (targets lost for good) is applied the same way, without a
//!   release.
//! * After a lost connection (service restart), [`Follower::restart`]
//!   makes the next response a first one again: the graph is rebuilt from
//!   it and the running jobs are carried over pool by pool
//!   ([`model::Graph::adopt_jobs`]); jobs whose pools are gone are
//!   reported as doomed.
//!
//! The type is sans-IO: the caller reads responses and sends releases (see
//! `roster graph --follow`).

use client::acquire::{Acquisition, Response};
use client::ClientError;
use idset::IdSet;
use model::{Graph, JobId, ModelError, State, VertexId};
use serde_json::Value;
use std::collections::BTreeMap;

/// Errors of the follower.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The response did not follow RFC 28.
    #[error("{0}")]
    Protocol(#[from] ClientError),
    /// The R of a response could not be made into (or merged with) the
    /// graph.
    #[error("resource.acquire: {0}")]
    Model(#[from] ModelError),
}

/// What one response did to the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The response, decoded.
    pub response: Response,
    /// The graph was (re)built from this response.
    pub built: bool,
    /// Targets whose state changed, by new state.
    pub up: IdSet,
    pub down: IdSet,
    /// Targets unlinked from the graph by this response.
    pub removed: IdSet,
    /// Jobs holding shrunk (or vanished) resources: the scheduler should
    /// raise a fatal exception on them; their targets go once freed.
    pub doomed: Vec<JobId>,
    /// Reservations dropped with unlinked targets.
    pub dropped_reservations: Vec<JobId>,
}

impl Applied {
    /// `response` having changed nothing (yet).
    fn nothing(response: Response) -> Applied {
        Applied {
            response,
            built: false,
            up: IdSet::new(),
            down: IdSet::new(),
            removed: IdSet::new(),
            doomed: Vec::new(),
            dropped_reservations: Vec::new(),
        }
    }
}

/// An RFC 4 graph following one acquire (see the module documentation).
#[derive(Debug, Clone)]
pub struct Follower {
    group: Option<String>,
    view: Acquisition,
    graph: Graph,
    /// rank → target pool.
    targets: BTreeMap<i64, VertexId>,
    /// Shrunk targets still held by jobs.
    shrinking: IdSet,
    /// Shrunk targets unlinked and not yet released (groups only).
    releasable: IdSet,
    built: bool,
    resuming: bool,
}

impl Follower {
    /// A follower for an acquire of `group` (`None`: the v1 protocol).
    pub fn new(group: Option<&str>) -> Follower {
        Follower {
            group: group.map(str::to_string),
            view: Acquisition::new(group),
            graph: Graph::new(),
            targets: BTreeMap::new(),
            shrinking: IdSet::new(),
            releasable: IdSet::new(),
            built: false,
            resuming: false,
        }
    }

    /// The graph (empty until the first response).
    #[cfg(test)]
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph, to match, allocate and reserve on.  Free jobs with
    /// [`Follower::free_job`] so that shrunk targets are let go.
    pub fn graph_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }

    /// The acquire view (targets granted, up, pending shrink).
    pub fn view(&self) -> &Acquisition {
        &self.view
    }

    /// The graph has been built from a first response.
    pub fn is_built(&self) -> bool {
        self.built
    }

    /// The group followed (`default` for v1).
    pub fn group(&self) -> &str {
        self.view.group()
    }

    /// Shrunk targets still held by jobs.
    #[cfg(test)]
    pub fn shrinking(&self) -> &IdSet {
        &self.shrinking
    }

    /// Shrunk targets now free, to send in `resource.release`.
    pub fn releasable(&self) -> &IdSet {
        &self.releasable
    }

    /// Note a successful `resource.release` of `targets`.
    pub fn released(&mut self, targets: &IdSet) -> Result<(), ClientError> {
        self.view.released(targets)?;
        self.releasable.subtract(targets);
        Ok(())
    }

    /// The connection was lost: the next response starts a new acquire
    /// (the graph is rebuilt from it, keeping the running jobs).
    pub fn restart(&mut self) {
        self.view = Acquisition::new(self.group.as_deref());
        self.resuming = self.built;
        self.shrinking = IdSet::new();
        self.releasable = IdSet::new();
    }

    /// Apply one `resource.acquire` response payload.
    pub fn apply(&mut self, payload: &Value) -> Result<Applied, FollowError> {
        let resp = self.view.apply(payload)?;
        let mut out = Applied::nothing(resp.clone());
        let first = !self.built || self.resuming;
        match &resp {
            Response::Initial { resources, up } => {
                self.build(resources, &mut out)?;
                let all = self.view.all().clone();
                self.set_states(&all.difference(up), State::Down, &mut out);
                self.set_states(&up.intersection(&all), State::Up, &mut out);
            }
            Response::Grow {
                resources,
                targets,
                online,
                offline,
            } => {
                if first || self.graph.is_empty() {
                    self.build(resources, &mut out)?;
                } else {
                    let g = Graph::from_r_value(resources, true)?;
                    // Targets shrunk but still held come back: nothing to add.
                    self.graph.merge(&g, None)?;
                    self.shrinking.subtract(targets);
                    self.releasable.subtract(targets);
                    self.targets = self.graph.target_roots();
                }
                self.set_states(offline, State::Down, &mut out);
                self.set_states(&online.intersection(targets), State::Up, &mut out);
            }
            Response::Update { up, down, shrink } => {
                self.set_states(down, State::Down, &mut out);
                self.set_states(&up.difference(shrink), State::Up, &mut out);
                self.shrink(shrink, false, &mut out);
            }
            Response::Expiration(_) => {}
            Response::Shrink(t) => self.shrink(t, true, &mut out),
            Response::Online(t) => self.set_states(t, State::Up, &mut out),
            Response::Offline(t) => self.set_states(t, State::Down, &mut out),
        }
        Ok(out)
    }

    fn build(&mut self, resources: &Value, out: &mut Applied) -> Result<(), FollowError> {
        let mut g = Graph::from_r_value(resources, true)?;
        if self.resuming {
            out.doomed = g.adopt_jobs(&self.graph);
        }
        self.graph = g;
        self.targets = self.graph.target_roots();
        self.built = true;
        self.resuming = false;
        out.built = true;
        Ok(())
    }

    fn set_states(&mut self, t: &IdSet, st: State, out: &mut Applied) {
        for r in t.iter() {
            // A shrunk target held by jobs stays down, and so does one
            // the acquire does not grant (a rank of the `scheduling` JGF
            // that R_lite leaves out: excluded).
            if st == State::Up && (self.shrinking.contains(r) || !self.view.all().contains(r)) {
                continue;
            }
            let Some(&v) = self.targets.get(&i64::from(r)) else {
                continue;
            };
            let Some(cur) = self.graph.get(v).map(|p| p.state()) else {
                continue;
            };
            if cur != st && self.graph.set_state(v, st).is_ok() {
                match st {
                    State::Up => {
                        out.up.insert(r);
                    }
                    _ => {
                        out.down.insert(r);
                    }
                }
            }
        }
    }

    fn shrink(&mut self, t: &IdSet, release: bool, out: &mut Applied) {
        if t.is_empty() {
            return;
        }
        self.set_states(t, State::Down, out);
        for r in t.iter() {
            let Some(&v) = self.targets.get(&i64::from(r)) else {
                continue;
            };
            let (al, _) = self.graph.holders(v).unwrap_or_default();
            if al.is_empty() {
                self.remove_target(r, v, release, out);
            } else {
                self.shrinking.insert(r);
                for j in al {
                    if !out.doomed.contains(&j) {
                        out.doomed.push(j);
                    }
                }
            }
        }
        if !release {
            // v1: nothing to release; held targets are removed when freed.
            self.releasable = IdSet::new();
        }
        out.doomed.sort_unstable();
    }

    fn remove_target(&mut self, r: u32, v: VertexId, release: bool, out: &mut Applied) {
        let (_, rs) = self.graph.holders(v).unwrap_or_default();
        for j in rs {
            if !out.dropped_reservations.contains(&j) {
                out.dropped_reservations.push(j);
            }
        }
        if self.graph.unlink(v).is_ok() {
            self.targets.remove(&i64::from(r));
            out.removed.insert(r);
            if release && !self.view.is_v1() {
                self.releasable.insert(r);
            }
        }
        self.shrinking.remove(r);
    }

    /// Free every record of `job` (RFC 4 Free on the whole job); shrunk
    /// targets left without jobs are unlinked and become releasable.
    /// Returns the targets unlinked.
    #[cfg(test)]
    pub fn free_job(&mut self, job: JobId) -> Result<IdSet, ModelError> {
        self.graph.free_job(job)?;
        Ok(self.settle())
    }

    /// Unlink shrunk targets that no job holds any more (after frees made
    /// directly on [`Follower::graph_mut`]).  Returns the targets unlinked.
    pub fn settle(&mut self) -> IdSet {
        let mut out = Applied::nothing(Response::Expiration(0.0));
        let release = !self.view.is_v1();
        let held: Vec<u32> = self.shrinking.iter().collect();
        for r in held {
            let Some(&v) = self.targets.get(&i64::from(r)) else {
                self.shrinking.remove(r);
                continue;
            };
            if self
                .graph
                .holders(v)
                .map(|h| h.0.is_empty())
                .unwrap_or(true)
            {
                self.remove_target(r, v, release, &mut out);
            }
        }
        out.removed
    }
}

#[cfg(test)]
#[path = "follower_tests.rs"]
mod tests;
