//! RFC 4 allocation data and methods: allocations and reservations (job id
//! -> units) on each pool, shared lists on ancestors, Allocate(N, S),
//! Free(S, [N]), Allocated, Available, the exclusive rule, aggregates kept on
//! inner pools, and an invariant checker.
//!
//! # Time
//! Every job owns one time window `[start, end)`.  An allocated job made by
//! [`Graph::allocate`] covers `[0, u64::MAX)` ("now, until freed"); a
//! reservation ([`Graph::reserve`]) covers a window the caller chooses.  All
//! records of a pool are accounted together: at every instant the units of
//! the records whose windows cover it never exceed `size`.  This is the
//! "same accounting at a future time" the RFC asks of reservations.
//!
//! # The four rules (checked by [`Graph::check_invariants`])
//! 1. At no instant are more than `size` units of a pool recorded.
//! 2. A pool whose units are all held by one job is held *exclusively*; a
//!    pool is *full* at an instant when all its units are held.  No
//!    descendant of a pool carries a record at an instant when that pool is
//!    full (the children are implicitly part of the allocation).  Growing a
//!    job's record to the whole pool absorbs the job's own records below;
//!    other jobs' records below make the request fail with
//!    [`ModelError::Busy`].
//! 3. A pool with descendants holding records of job J lists J in its
//!    shared list (reservations in the reserved-shared list), with the
//!    number of such descendants; the list of a full pool is therefore
//!    empty during the time it is full.
//! 4. Records, shared lists, the job table and the aggregates agree.

use crate::graph::{Graph, VertexId, NONE};
use crate::intern::Sym;
use crate::ModelError;
use std::collections::{BTreeMap, HashMap};

/// A job identifier (Flux job ids are 64-bit).
pub type JobId = u64;

/// Open end of a window.
pub const FOREVER: u64 = u64::MAX;

/// Whether a job's records are allocations (now) or reservations (future).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    Allocated,
    Reserved,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Allocated => "allocated",
            JobKind::Reserved => "reserved",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub kind: JobKind,
    pub start: u64,
    pub end: u64,
    /// Vertices holding records of this job (unordered).
    pub vertices: Vec<u32>,
}

/// Public summary of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub id: JobId,
    pub kind: JobKind,
    pub start: u64,
    pub end: u64,
    /// Pools holding the job's records, in arena order.
    pub vertices: Vec<VertexId>,
}

/// Allocation data of one pool (absent for pools that never held any).
#[derive(Debug, Clone, Default)]
pub(crate) struct Records {
    /// Sum of `allocs` units.
    pub allocated: u64,
    /// Allocations, sorted by job id: (job, units).
    pub allocs: Vec<(JobId, u64)>,
    /// Reservations, sorted by job id: (job, units).
    pub resv: Vec<(JobId, u64)>,
    /// Allocated jobs with records strictly below: (job, number of pools).
    pub shared: Vec<(JobId, u32)>,
    /// Reserved jobs with records strictly below.
    pub rshared: Vec<(JobId, u32)>,
}

/// The allocation (`$a`) or reservation (`$r`) side, by job kind `$k`.
macro_rules! by_kind {
    ($k:expr, $a:expr, $r:expr) => {
        match $k {
            JobKind::Allocated => $a,
            JobKind::Reserved => $r,
        }
    };
}

impl Records {
    fn is_empty(&self) -> bool {
        self.allocs.is_empty()
            && self.resv.is_empty()
            && self.shared.is_empty()
            && self.rshared.is_empty()
    }
    fn list(&self, k: JobKind) -> &Vec<(JobId, u64)> {
        by_kind!(k, &self.allocs, &self.resv)
    }
    fn list_mut(&mut self, k: JobKind) -> &mut Vec<(JobId, u64)> {
        by_kind!(k, &mut self.allocs, &mut self.resv)
    }
    fn shared_list(&self, k: JobKind) -> &Vec<(JobId, u32)> {
        by_kind!(k, &self.shared, &self.rshared)
    }
    fn shared_mut(&mut self, k: JobKind) -> &mut Vec<(JobId, u32)> {
        by_kind!(k, &mut self.shared, &mut self.rshared)
    }
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.allocs.capacity() + self.resv.capacity()) * 16
            + (self.shared.capacity() + self.rshared.capacity()) * 16
    }
}

fn amount_of(list: &[(JobId, u64)], j: JobId) -> u64 {
    list.binary_search_by_key(&j, |e| e.0)
        .ok()
        .and_then(|p| list.get(p))
        .map_or(0, |e| e.1)
}

/// (allocations, reservations) of one pool.
pub(crate) type RecordLists<'a> = (&'a [(JobId, u64)], &'a [(JobId, u64)]);

/// Intersection test of half-open windows.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// A piecewise-constant usage profile: (start, end, units).
type Profile = Vec<(u64, u64, u64)>;

impl Graph {
    // ----- record slots -------------------------------------------------

    fn rec(&self, i: u32) -> Option<&Records> {
        let r = self.v[i as usize].rec;
        if r == NONE {
            None
        } else {
            self.recs.get(r as usize)
        }
    }

    fn rec_mut(&mut self, i: u32) -> &mut Records {
        let r = self.v[i as usize].rec;
        if r != NONE {
            return &mut self.recs[r as usize];
        }
        let slot = match self.free_recs.pop() {
            Some(s) => s,
            None => {
                self.recs.push(Records::default());
                (self.recs.len() - 1) as u32
            }
        };
        self.v[i as usize].rec = slot;
        &mut self.recs[slot as usize]
    }

    /// `f` of `i`'s records; nothing when it has none.
    fn of_rec<T>(&self, i: u32, f: impl FnOnce(&Records) -> Vec<T>) -> Vec<T> {
        self.rec(i).map_or_else(Vec::new, f)
    }

    fn release_rec_if_empty(&mut self, i: u32) {
        let r = self.v[i as usize].rec;
        if r != NONE && self.recs[r as usize].is_empty() {
            self.recs[r as usize] = Records::default();
            self.free_recs.push(r);
            self.v[i as usize].rec = NONE;
        }
    }

    pub(crate) fn own_alloc(&self, i: u32) -> u64 {
        self.rec(i).map_or(0, |r| r.allocated)
    }

    /// Units of `v` offered to new work now: size − allocated, or 0 when
    /// its state is not available (see [`crate::State::is_available`]) or
    /// it is staged.
    pub(crate) fn own_avail(&self, i: u32) -> u64 {
        let x = &self.v[i as usize];
        if !x.state.is_available() || x.flags & crate::graph::flag::STAGED != 0 {
            return 0;
        }
        x.size.saturating_sub(self.own_alloc(i))
    }

    /// Units of `v` not held by allocations now, whatever its state.
    pub(crate) fn unallocated(&self, i: u32) -> u64 {
        self.v[i as usize].size.saturating_sub(self.own_alloc(i))
    }

    /// The first of `i` and its ancestors whose state takes it out of
    /// service, with that state.
    pub(crate) fn out_of_service(&self, i: u32) -> Option<(u32, crate::State)> {
        std::iter::once(i)
            .chain(self.ups(i).map(|a| a.0))
            .map(|a| (a, self.v[a as usize].state))
            .find(|(_, s)| !s.is_available())
    }

    fn window_of(&self, j: JobId) -> (u64, u64) {
        self.jobs.get(&j).map_or((0, FOREVER), |x| (x.start, x.end))
    }

    // ----- public queries -------------------------------------------------

    /// RFC 4 Size.
    pub fn size(&self, v: VertexId) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        Ok(self.v[i as usize].size)
    }

    /// RFC 4 Allocated: units of `v` held by allocations now (its own
    /// records; descendants of an exclusively allocated pool hold none).
    pub fn allocated(&self, v: VertexId) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        Ok(self.own_alloc(i))
    }

    /// Units of `v` held by reservations (summed over all reservations).
    pub fn reserved(&self, v: VertexId) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        Ok(self.rec(i).map_or(0, |r| r.resv.iter().map(|e| e.1).sum()))
    }

    /// RFC 4 Available: size − allocated, and 0 when the pool or an
    /// ancestor is out of service (state other than `up`), staged, or an
    /// ancestor is full now (the composite model makes children of an
    /// unavailable pool unavailable).  Aggregate, Copy and Match use the
    /// same rule.
    pub fn available(&self, v: VertexId) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        Ok(self.eff_avail(i))
    }

    pub(crate) fn eff_avail(&self, i: u32) -> u64 {
        if self.ancestor_full_now(i).is_some() {
            0
        } else {
            self.own_avail(i)
        }
    }

    /// The first ancestor of `i` offering nothing now (full, out of
    /// service or staged).
    pub(crate) fn ancestor_full_now(&self, i: u32) -> Option<u32> {
        self.ups(i).map(|a| a.0).find(|&a| self.own_avail(a) == 0)
    }

    /// The first ancestor of `i` whose units are all allocated now.
    pub(crate) fn ancestor_allocated_now(&self, i: u32) -> Option<u32> {
        self.ups(i).map(|a| a.0).find(|&a| self.unallocated(a) == 0)
    }

    /// Allocations on `v`: (job, units), by job id.
    pub fn allocations(&self, v: VertexId) -> Result<Vec<(JobId, u64)>, ModelError> {
        Ok(self.of_rec(self.check(v)?, |r| r.allocs.clone()))
    }

    /// Reservations on `v`: (job, units), by job id.
    pub fn reservations(&self, v: VertexId) -> Result<Vec<(JobId, u64)>, ModelError> {
        Ok(self.of_rec(self.check(v)?, |r| r.resv.clone()))
    }

    /// Shared list: allocated jobs holding pools below `v`.
    pub fn shared(&self, v: VertexId) -> Result<Vec<JobId>, ModelError> {
        Ok(self.of_rec(self.check(v)?, |r| r.shared.iter().map(|e| e.0).collect()))
    }

    /// Reserved jobs holding pools below `v`.
    pub fn reserved_shared(&self, v: VertexId) -> Result<Vec<JobId>, ModelError> {
        Ok(self.of_rec(self.check(v)?, |r| r.rshared.iter().map(|e| e.0).collect()))
    }

    /// The job holding all of `v` now (the RFC 4 exclusive flag), if any.
    pub fn exclusive(&self, v: VertexId) -> Result<Option<JobId>, ModelError> {
        let i = self.check(v)?;
        let size = self.v[i as usize].size;
        Ok(self.rec(i).and_then(|r| {
            r.allocs
                .iter()
                .find(|e| e.1 == size && size > 0)
                .map(|e| e.0)
        }))
    }

    /// Is `v` allocated now, by its own records or implicitly by an
    /// exclusively allocated ancestor?
    pub fn is_allocated(&self, v: VertexId) -> Result<bool, ModelError> {
        let i = self.check(v)?;
        Ok(self.own_alloc(i) > 0 || self.ancestor_allocated_now(i).is_some())
    }

    /// Summary of a job.
    pub fn job(&self, j: JobId) -> Option<JobInfo> {
        self.jobs.get(&j).map(|x| {
            let mut vs: Vec<VertexId> = x.vertices.iter().map(|&v| VertexId(v)).collect();
            vs.sort();
            JobInfo {
                id: j,
                kind: x.kind,
                start: x.start,
                end: x.end,
                vertices: vs,
            }
        })
    }

    /// All jobs, by id.
    pub fn jobs(&self) -> Vec<JobInfo> {
        let mut ids: Vec<JobId> = self.jobs.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter().filter_map(|j| self.job(j)).collect()
    }

    /// ((allocated units, reserved units) of job `j` on pool `i`, whether
    /// `j` is in one of its shared lists).
    pub(crate) fn job_amounts(&self, i: u32, j: JobId) -> ((u64, u64), bool) {
        match self.rec(i) {
            None => ((0, 0), false),
            Some(r) => (
                (amount_of(&r.allocs, j), amount_of(&r.resv, j)),
                r.shared.binary_search_by_key(&j, |e| e.0).is_ok()
                    || r.rshared.binary_search_by_key(&j, |e| e.0).is_ok(),
            ),
        }
    }

    /// Units of `i` an open-ended allocation made now could take, given
    /// every allocation and reservation on it.
    pub(crate) fn open_free(&self, i: u32) -> u64 {
        let size = self.v[i as usize].size;
        if self.v[i as usize].rec == NONE {
            return size;
        }
        size.saturating_sub(Self::peak(&self.profile(i, None), (0, FOREVER)))
    }

    /// Do reservations exist below `i`?
    pub(crate) fn reserved_below(&self, i: u32) -> bool {
        self.rec(i).is_some_and(|r| !r.rshared.is_empty())
    }

    pub(crate) fn has_reservation(&self, i: u32) -> bool {
        self.rec(i).is_some_and(|r| !r.resv.is_empty())
    }

    pub(crate) fn reservation_units(&self, i: u32) -> Vec<u64> {
        self.of_rec(i, |r| r.resv.iter().map(|e| e.1).collect())
    }

    pub(crate) fn job_units_now(&self, i: u32) -> Vec<u64> {
        self.of_rec(i, |r| r.allocs.iter().map(|e| e.1).collect())
    }

    /// Raw access for serializers: (allocations, reservations) of `i`.
    pub(crate) fn records_of(&self, i: u32) -> RecordLists<'_> {
        match self.rec(i) {
            None => (&[], &[]),
            Some(r) => (&r.allocs, &r.resv),
        }
    }

    /// Raw record insertion for copies: the job entry is created with the
    /// given kind and window when missing.  No capacity checks.
    pub(crate) fn add_record_raw(
        &mut self,
        i: u32,
        kind: JobKind,
        job: JobId,
        n: u64,
        w: (u64, u64),
    ) {
        self.jobs.entry(job).or_insert_with(|| Job {
            kind,
            start: w.0,
            end: w.1,
            vertices: Vec::new(),
        });
        self.add_record(i, kind, job, n);
    }

    pub(crate) fn job_window(&self, j: JobId) -> Option<(JobKind, u64, u64)> {
        self.jobs.get(&j).map(|x| (x.kind, x.start, x.end))
    }

    // ----- usage profile --------------------------------------------------

    /// Usage of pool `i` over time, optionally with a virtual extra record
    /// (start, end, units).
    fn profile(&self, i: u32, extra: Option<(u64, u64, u64)>) -> Profile {
        let mut spans: Vec<(u64, u64, u64)> = Vec::new();
        if let Some(r) = self.rec(i) {
            for &(j, n) in r.allocs.iter().chain(r.resv.iter()) {
                let (s, e) = self.window_of(j);
                spans.push((s, e, n));
            }
        }
        if let Some(x) = extra {
            spans.push(x);
        }
        if spans.is_empty() {
            return Vec::new();
        }
        // Fast path: everything covers the same window.
        let (s0, e0, _) = spans[0];
        if spans.iter().all(|&(s, e, _)| s == s0 && e == e0) {
            return vec![(s0, e0, spans.iter().map(|x| x.2).sum())];
        }
        let mut bounds: Vec<u64> = spans.iter().flat_map(|&(s, e, _)| [s, e]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut out = Vec::with_capacity(bounds.len());
        for w in bounds.windows(2) {
            let (a, b) = (w[0], w[1]);
            let u: u64 = spans
                .iter()
                .filter(|&&(s, e, _)| s <= a && a < e)
                .map(|x| x.2)
                .sum();
            if u > 0 {
                out.push((a, b, u));
            }
        }
        out
    }

    fn peak(profile: &Profile, w: (u64, u64)) -> u64 {
        profile
            .iter()
            .filter(|&&(s, e, _)| overlaps((s, e), w))
            .map(|x| x.2)
            .max()
            .unwrap_or(0)
    }

    /// Is pool `i` full at some instant of `w`?
    pub(crate) fn full_during(&self, i: u32, w: (u64, u64)) -> bool {
        let size = self.v[i as usize].size;
        if size == 0 {
            return true;
        }
        if self.v[i as usize].rec == NONE {
            return false;
        }
        Self::peak(&self.profile(i, None), w) >= size
    }

    /// Intervals during which pool `i` is full.
    fn full_intervals(&self, i: u32, extra: Option<(u64, u64, u64)>) -> Vec<(u64, u64)> {
        let size = self.v[i as usize].size;
        if size == 0 {
            return vec![(0, FOREVER)];
        }
        self.profile(i, extra)
            .into_iter()
            .filter(|x| x.2 >= size)
            .map(|x| (x.0, x.1))
            .collect()
    }

    // ----- Allocate / Reserve -------------------------------------------

    /// RFC 4 Allocate(N, S): allocate `n` units of `v` to job `job` now;
    /// if the job already holds units of `v` its allocation grows by `n`.
    pub fn allocate(&mut self, v: VertexId, n: u64, job: JobId) -> Result<(), ModelError> {
        let w = self.window_of(job);
        let w = if self.jobs.contains_key(&job) {
            w
        } else {
            (0, FOREVER)
        };
        self.record(v, n, job, JobKind::Allocated, w, false)
    }

    /// Allocate `n` units of `v` to `job` for the window `[start, end)`.
    pub fn allocate_span(
        &mut self,
        v: VertexId,
        n: u64,
        job: JobId,
        start: u64,
        end: u64,
    ) -> Result<(), ModelError> {
        self.record(v, n, job, JobKind::Allocated, (start, end), false)
    }

    /// Reserve `n` units of `v` for `job` during `[start, end)`.
    pub fn reserve(
        &mut self,
        v: VertexId,
        n: u64,
        job: JobId,
        start: u64,
        end: u64,
    ) -> Result<(), ModelError> {
        self.record(v, n, job, JobKind::Reserved, (start, end), false)
    }

    /// Check a new record without changing anything; returns the vertices
    /// of the job's records below `v` that would be absorbed.
    fn plan_record(
        &self,
        i: u32,
        n: u64,
        job: JobId,
        kind: JobKind,
        w: (u64, u64),
        strict: bool,
    ) -> Result<Vec<u32>, ModelError> {
        let path = || self.path_of(i);
        if n == 0 {
            return Err(ModelError::Job {
                job,
                reason: format!("zero units requested of {}", path()),
            });
        }
        if w.0 >= w.1 {
            return Err(ModelError::Job {
                job,
                reason: format!("empty window [{}, {})", w.0, w.1),
            });
        }
        if let Some(x) = self.jobs.get(&job) {
            if x.kind != kind {
                return Err(ModelError::Job {
                    job,
                    reason: format!("is {}, not {}", x.kind.as_str(), kind.as_str()),
                });
            }
            if (x.start, x.end) != w {
                return Err(ModelError::Job {
                    job,
                    reason: format!(
                        "window [{}, {}) differs from the job's [{}, {})",
                        w.0, w.1, x.start, x.end
                    ),
                });
            }
        }
        if kind == JobKind::Allocated && !strict {
            if let Some((a, st)) = self.out_of_service(i) {
                return Err(ModelError::Unavailable {
                    path: path(),
                    at: self.path_of(a),
                    state: st.as_str(),
                });
            }
        }
        let size = self.v[i as usize].size;
        let held = self.rec(i).map_or(0, |r| amount_of(r.list(kind), job));
        let prof = self.profile(i, None);
        let peak = Self::peak(&prof, w);
        let free = size.saturating_sub(peak);
        if n > free {
            return Err(ModelError::Insufficient {
                path: path(),
                requested: n,
                available: free,
            });
        }
        for a in self.ups(i) {
            if self.full_during(a.0, w) {
                return Err(ModelError::AncestorFull {
                    path: path(),
                    ancestor: self.path_of(a.0),
                });
            }
        }
        let full = self.full_intervals(i, Some((w.0, w.1, n)));
        if full.is_empty() {
            return Ok(Vec::new());
        }
        let exclusive_to_job = held + n == size;
        let mut absorb_job = false;
        let mut busy = Vec::new();
        if let Some(r) = self.rec(i) {
            for k in [JobKind::Allocated, JobKind::Reserved] {
                for &(kj, _) in r.shared_list(k) {
                    let kw = self.window_of(kj);
                    if !full.iter().any(|&f| overlaps(f, kw)) {
                        continue;
                    }
                    if kj == job && k == kind && exclusive_to_job && !strict {
                        absorb_job = true;
                    } else {
                        busy.push(kj);
                    }
                }
            }
        }
        if !busy.is_empty() {
            busy.sort_unstable();
            busy.dedup();
            return Err(ModelError::Busy {
                path: path(),
                jobs: busy
                    .iter()
                    .map(|j| j.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
        if !absorb_job {
            return Ok(Vec::new());
        }
        let mut below: Vec<u32> = self
            .jobs
            .get(&job)
            .map(|x| x.vertices.clone())
            .unwrap_or_default();
        below.retain(|&d| d != i && self.ups(d).any(|a| a.0 == i));
        Ok(below)
    }

    /// Checked record creation.  `strict` refuses to absorb (used when
    /// loading serialized state, where absorption would lose data).
    pub(crate) fn record(
        &mut self,
        v: VertexId,
        n: u64,
        job: JobId,
        kind: JobKind,
        w: (u64, u64),
        strict: bool,
    ) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let absorb = self.plan_record(i, n, job, kind, w, strict)?;
        for d in absorb {
            self.remove_record(d, kind, job, None);
        }
        self.add_record_raw(i, kind, job, n, w);
        Ok(())
    }

    /// Raw record insertion with bookkeeping (no checks).
    fn add_record(&mut self, i: u32, kind: JobKind, job: JobId, n: u64) {
        let old_avail = self.own_avail(i);
        let r = self.rec_mut(i);
        let list = r.list_mut(kind);
        let created = match list.binary_search_by_key(&job, |e| e.0) {
            Ok(p) => {
                list[p].1 += n;
                false
            }
            Err(p) => {
                list.insert(p, (job, n));
                true
            }
        };
        if kind == JobKind::Allocated {
            r.allocated += n;
        }
        if created {
            if let Some(x) = self.jobs.get_mut(&job) {
                x.vertices.push(i);
            }
            let mut a = self.v[i as usize].parent;
            while a != NONE {
                let sh = self.rec_mut(a).shared_mut(kind);
                match sh.binary_search_by_key(&job, |e| e.0) {
                    Ok(p) => sh[p].1 += 1,
                    Err(p) => sh.insert(p, (job, 1)),
                }
                a = self.v[a as usize].parent;
            }
        }
        if kind == JobKind::Allocated {
            let new_avail = self.own_avail(i);
            self.agg_avail_change(i, old_avail, new_avail);
        }
    }

    /// Raw record removal with bookkeeping; returns the units removed.
    pub(crate) fn remove_record(
        &mut self,
        i: u32,
        kind: JobKind,
        job: JobId,
        n: Option<u64>,
    ) -> u64 {
        let old_avail = self.own_avail(i);
        let r = self.v[i as usize].rec;
        if r == NONE {
            return 0;
        }
        let rec = &mut self.recs[r as usize];
        let list = rec.list_mut(kind);
        let Ok(p) = list.binary_search_by_key(&job, |e| e.0) else {
            return 0;
        };
        let held = list[p].1;
        let take = n.map_or(held, |n| n.min(held));
        let gone = take == held;
        if gone {
            list.remove(p);
        } else {
            list[p].1 -= take;
        }
        if kind == JobKind::Allocated {
            rec.allocated -= take;
        }
        if gone {
            let mut drop_job = false;
            if let Some(x) = self.jobs.get_mut(&job) {
                if let Some(q) = x.vertices.iter().position(|&d| d == i) {
                    x.vertices.swap_remove(q);
                }
                drop_job = x.vertices.is_empty();
            }
            if drop_job {
                self.jobs.remove(&job);
            }
            let mut a = self.v[i as usize].parent;
            while a != NONE {
                let ar = self.v[a as usize].rec;
                if ar != NONE {
                    let sh = self.recs[ar as usize].shared_mut(kind);
                    if let Ok(q) = sh.binary_search_by_key(&job, |e| e.0) {
                        if sh[q].1 <= 1 {
                            sh.remove(q);
                        } else {
                            sh[q].1 -= 1;
                        }
                    }
                    self.release_rec_if_empty(a);
                }
                a = self.v[a as usize].parent;
            }
        }
        if kind == JobKind::Allocated {
            let new_avail = self.own_avail(i);
            self.agg_avail_change(i, old_avail, new_avail);
        }
        self.release_rec_if_empty(i);
        take
    }

    // ----- Free -------------------------------------------------------------

    /// RFC 4 Free(S, [N]).  Without `n`, frees job `job`'s records on `v`
    /// and everywhere below `v`; with `n`, shrinks the job's own record on
    /// `v` by `n` units (`n` must not exceed it).  Works for allocations and
    /// reservations alike.  Returns the units freed on `v` itself plus
    /// below.
    pub fn free(&mut self, v: VertexId, job: JobId, n: Option<u64>) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        let kind = self
            .jobs
            .get(&job)
            .map(|x| x.kind)
            .ok_or(ModelError::NoAllocation {
                path: self.path_of(i),
                job,
            })?;
        let held = self.rec(i).map_or(0, |r| amount_of(r.list(kind), job));
        if let Some(n) = n {
            if held == 0 {
                return Err(ModelError::NoAllocation {
                    path: self.path_of(i),
                    job,
                });
            }
            if n > held || n == 0 {
                return Err(ModelError::FreeTooMany {
                    path: self.path_of(i),
                    job,
                    requested: n,
                    held,
                });
            }
            return Ok(self.remove_record(i, kind, job, Some(n)));
        }
        let mut targets: Vec<u32> = self
            .jobs
            .get(&job)
            .map(|x| x.vertices.clone())
            .unwrap_or_default();
        targets.retain(|&d| d == i || self.ups(d).any(|a| a.0 == i));
        if targets.is_empty() {
            return Err(ModelError::NoAllocation {
                path: self.path_of(i),
                job,
            });
        }
        let mut total = 0;
        for d in targets {
            total += self.remove_record(d, kind, job, None);
        }
        Ok(total)
    }

    /// Free every record of `job`; returns the number of pools released.
    pub fn free_job(&mut self, job: JobId) -> Result<usize, ModelError> {
        let x = self.jobs.get(&job).ok_or(ModelError::NoJob(job))?;
        let kind = x.kind;
        let vs = x.vertices.clone();
        let n = vs.len();
        for d in vs {
            self.remove_record(d, kind, job, None);
        }
        self.jobs.remove(&job);
        Ok(n)
    }

    /// Turn a reservation into an allocation (its window is kept).
    pub fn promote(&mut self, job: JobId) -> Result<(), ModelError> {
        let x = self.jobs.get(&job).ok_or(ModelError::NoJob(job))?;
        if x.kind != JobKind::Reserved {
            return Err(ModelError::Job {
                job,
                reason: "is not a reservation".into(),
            });
        }
        let vs = x.vertices.clone();
        let (s, e) = (x.start, x.end);
        let amounts: Vec<(u32, u64)> = vs
            .iter()
            .map(|&d| (d, self.rec(d).map_or(0, |r| amount_of(&r.resv, job))))
            .collect();
        for &(d, _) in &amounts {
            self.remove_record(d, JobKind::Reserved, job, None);
        }
        self.jobs.insert(
            job,
            Job {
                kind: JobKind::Allocated,
                start: s,
                end: e,
                vertices: Vec::new(),
            },
        );
        for (d, n) in amounts {
            if n > 0 {
                self.add_record(d, JobKind::Allocated, job, n);
            }
        }
        Ok(())
    }

    // ----- aggregates -----------------------------------------------------

    /// Contribution of `i` to its parent's aggregate.
    fn contrib(&self, i: u32) -> Vec<(Sym, u64)> {
        let a = self.own_avail(i);
        if a == 0 {
            return Vec::new();
        }
        let mut out = vec![(self.v[i as usize].ty, a)];
        let ag = self.v[i as usize].agg;
        if ag != NONE {
            if let Some(list) = self.aggs.get(ag as usize) {
                for &(t, n) in list {
                    if n > 0 {
                        add_sym(&mut out, t, n);
                    }
                }
            }
        }
        out
    }

    /// Apply a change of `child`'s contribution to its ancestors' aggregates
    /// (starting at `from`, its parent), stopping above a full pool.
    fn agg_apply(&mut self, child: u32, from: u32, delta: &[(Sym, u64)], add: bool) {
        if delta.is_empty() {
            return;
        }
        let mut cur = from;
        let mut ch = child;
        while cur != NONE {
            let mut ag = self.v[cur as usize].agg;
            if ag == NONE {
                ag = self.aggs.len() as u32;
                self.aggs.push(Vec::new());
                self.v[cur as usize].agg = ag;
            }
            let list = &mut self.aggs[ag as usize];
            for &(t, n) in delta {
                match list.iter_mut().find(|e| e.0 == t) {
                    Some(e) => {
                        e.1 = if add {
                            e.1.saturating_add(n)
                        } else {
                            e.1.saturating_sub(n)
                        }
                    }
                    None => {
                        if add {
                            list.push((t, n))
                        }
                    }
                }
            }
            if !self.fanout.is_empty() {
                self.fanout_update(cur, ch);
            }
            if self.own_avail(cur) == 0 {
                break;
            }
            ch = cur;
            cur = self.v[cur as usize].parent;
        }
    }

    /// The subtree rooted at `i` was linked under its parent (`attached`),
    /// or is about to be unlinked.
    pub(crate) fn agg_link(&mut self, i: u32, attached: bool) {
        let p = self.v[i as usize].parent;
        if p == NONE {
            return;
        }
        let d = self.contrib(i);
        self.agg_apply(i, p, &d, attached);
    }

    /// The units `i` offers changed from `old` to `new` (state, staging).
    pub(crate) fn avail_changed(&mut self, i: u32, old: u64, new: u64) {
        self.agg_avail_change(i, old, new);
    }

    fn agg_avail_change(&mut self, i: u32, old: u64, new: u64) {
        let p = self.v[i as usize].parent;
        if old == new || p == NONE {
            return;
        }
        let ty = self.v[i as usize].ty;
        if old > 0 && new > 0 {
            let (d, add) = if new > old {
                (new - old, true)
            } else {
                (old - new, false)
            };
            self.agg_apply(i, p, &[(ty, d)], add);
            return;
        }
        // Crossing zero: the whole subtree appears or disappears.
        let mut d = vec![(ty, old.max(new))];
        let ag = self.v[i as usize].agg;
        if ag != NONE {
            if let Some(list) = self.aggs.get(ag as usize) {
                for &(t, n) in list {
                    if n > 0 {
                        add_sym(&mut d, t, n);
                    }
                }
            }
        }
        self.agg_apply(i, p, &d, new > old);
    }

    /// Available units of each type strictly below `v` as kept on inner
    /// pools (pruned below full pools), by interned type.
    pub fn available_below(&self, v: VertexId, ty: Sym) -> Result<u64, ModelError> {
        let i = self.check(v)?;
        let ag = self.v[i as usize].agg;
        Ok(if ag == NONE {
            0
        } else {
            self.aggs
                .get(ag as usize)
                .and_then(|l| l.iter().find(|e| e.0 == ty))
                .map_or(0, |e| e.1)
        })
    }

    pub(crate) fn avail_below_raw(&self, i: u32, ty: Sym) -> u64 {
        let ag = self.v[i as usize].agg;
        if ag == NONE {
            return 0;
        }
        self.aggs
            .get(ag as usize)
            .and_then(|l| l.iter().find(|e| e.0 == ty))
            .map_or(0, |e| e.1)
    }

    /// RFC 4 Aggregate: available units by type name in the pool rooted at
    /// `v` (including `v`), zero counts pruned; empty when `v` or an
    /// ancestor is full.
    pub fn aggregate(&self, v: VertexId) -> Result<BTreeMap<String, u64>, ModelError> {
        let i = self.check(v)?;
        let mut out = BTreeMap::new();
        if self.ancestor_full_now(i).is_some() {
            return Ok(out);
        }
        for (t, n) in self.contrib(i) {
            if n > 0 {
                *out.entry(self.syms.resolve(t).to_string()).or_insert(0) += n;
            }
        }
        Ok(out)
    }

    /// Aggregate over every root of the containment hierarchy (vertices
    /// only in another subsystem, such as a power panel, are not
    /// resources of the hierarchy and are not counted).
    pub fn aggregate_all(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for &r in self.containment_roots() {
            for (t, n) in self.contrib(r) {
                if n > 0 {
                    *out.entry(self.syms.resolve(t).to_string()).or_insert(0) += n;
                }
            }
        }
        out
    }

    /// Aggregates computed from scratch (for the invariant check).
    fn aggs_from_scratch(&self) -> HashMap<u32, Vec<(Sym, u64)>> {
        let mut out: HashMap<u32, Vec<(Sym, u64)>> = HashMap::new();
        let order = self.postorder_all();
        for &i in &order {
            let p = self.v[i as usize].parent;
            if p == NONE {
                continue;
            }
            let a = self.own_avail(i);
            if a == 0 {
                continue;
            }
            let mut c = vec![(self.v[i as usize].ty, a)];
            if let Some(l) = out.get(&i) {
                for &(t, n) in l {
                    add_sym(&mut c, t, n);
                }
            }
            let e = out.entry(p).or_default();
            for (t, n) in c {
                add_sym(e, t, n);
            }
        }
        out
    }

    /// Live vertices in post-order (children before parents), every root.
    pub(crate) fn postorder_all(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.live);
        let mut stack: Vec<(u32, bool)> = self.roots.iter().rev().map(|&r| (r, false)).collect();
        while let Some((i, done)) = stack.pop() {
            if done {
                out.push(i);
                continue;
            }
            stack.push((i, true));
            let kids: Vec<u32> = self.kids(i).map(|c| c.0).collect();
            for c in kids.into_iter().rev() {
                stack.push((c, false));
            }
        }
        out
    }

    // ----- invariants -------------------------------------------------------

    /// Verify the structural and allocation invariants; the error names the
    /// first violation found.
    pub fn check_invariants(&self) -> Result<(), ModelError> {
        let bad = |s: String| Err(ModelError::Invariant(s));
        // Structure.
        let mut seen = vec![false; self.v.len()];
        let order = self.postorder_all();
        for &i in &order {
            if !self.is_live(i) {
                return bad(format!("dead vertex {i} reachable"));
            }
            if std::mem::replace(&mut seen[i as usize], true) {
                return bad(format!("vertex {i} reached twice"));
            }
            let mut prev = NONE;
            for c in self.kids(i) {
                let cx = &self.v[c.0 as usize];
                if cx.parent != i || cx.prev != prev {
                    return bad(format!("broken child links at {}", self.path_of(i)));
                }
                prev = c.0;
            }
            if self.v[i as usize].last != prev {
                return bad(format!("broken last-child link at {}", self.path_of(i)));
            }
        }
        if order.len() != self.live {
            return bad(format!(
                "{} reachable vertices but {} live",
                order.len(),
                self.live
            ));
        }
        for &r in &self.roots {
            if self.v[r as usize].parent != NONE {
                return bad(format!("root {r} has a parent"));
            }
        }
        for (i, x) in self.v.iter().enumerate() {
            let dead = x.flags & crate::graph::flag::DEAD != 0;
            if dead && x.rec != NONE {
                return bad(format!("unlinked vertex {i} keeps records"));
            }
        }
        // Records: capacity, sums, sortedness.
        let mut expect_shared: HashMap<(u32, JobKind), BTreeMap<JobId, u32>> = HashMap::new();
        let mut holders: HashMap<JobId, Vec<u32>> = HashMap::new();
        for &i in &order {
            let Some(r) = self.rec(i) else { continue };
            let path = || self.path_of(i);
            let sum: u64 = r.allocs.iter().map(|e| e.1).sum();
            if sum != r.allocated {
                return bad(format!(
                    "{}: allocated {} != sum {}",
                    path(),
                    r.allocated,
                    sum
                ));
            }
            for (k, list) in [
                (JobKind::Allocated, &r.allocs),
                (JobKind::Reserved, &r.resv),
            ] {
                if list.windows(2).any(|w| w[0].0 >= w[1].0) || list.iter().any(|e| e.1 == 0) {
                    return bad(format!(
                        "{}: unsorted or empty {} records",
                        path(),
                        k.as_str()
                    ));
                }
                for &(j, _) in list {
                    match self.jobs.get(&j) {
                        Some(x) if x.kind == k => {}
                        _ => {
                            return bad(format!("{}: job {j} missing or of the wrong kind", path()))
                        }
                    }
                    holders.entry(j).or_default().push(i);
                    for a in self.ups(i) {
                        *expect_shared
                            .entry((a.0, k))
                            .or_default()
                            .entry(j)
                            .or_insert(0) += 1;
                    }
                }
            }
            let size = self.v[i as usize].size;
            let peak = self.profile(i, None).iter().map(|x| x.2).max().unwrap_or(0);
            if peak > size {
                return bad(format!("{}: {} units held of {}", path(), peak, size));
            }
            // Rule 2: nothing below a full pool while it is full.
            let full = self.full_intervals(i, None);
            if !full.is_empty() {
                for k in [JobKind::Allocated, JobKind::Reserved] {
                    for &(j, _) in r.shared_list(k) {
                        let w = self.window_of(j);
                        if full.iter().any(|&f| overlaps(f, w)) {
                            return bad(format!(
                                "{}: full pool has job {j} recorded below it",
                                path()
                            ));
                        }
                    }
                }
            }
        }
        // Rule 3: shared lists exactly as expected.
        for &i in &order {
            for k in [JobKind::Allocated, JobKind::Reserved] {
                let have: BTreeMap<JobId, u32> = self
                    .rec(i)
                    .map(|r| r.shared_list(k).iter().copied().collect())
                    .unwrap_or_default();
                let want = expect_shared.remove(&(i, k)).unwrap_or_default();
                if have != want {
                    return bad(format!(
                        "{}: {} shared list {:?} != expected {:?}",
                        self.path_of(i),
                        k.as_str(),
                        have,
                        want
                    ));
                }
                if let Some(r) = self.rec(i) {
                    if r.shared_list(k).windows(2).any(|w| w[0].0 >= w[1].0) {
                        return bad(format!("{}: unsorted shared list", self.path_of(i)));
                    }
                }
            }
            if let Some(r) = self.rec(i) {
                if r.is_empty() {
                    return bad(format!("{}: empty record slot kept", self.path_of(i)));
                }
            }
        }
        // Job table.
        if holders.len() != self.jobs.len() {
            return bad(format!(
                "{} jobs hold records but the job table has {}",
                holders.len(),
                self.jobs.len()
            ));
        }
        for (j, mut hv) in holders {
            let Some(x) = self.jobs.get(&j) else {
                return bad(format!("job {j} not in the job table"));
            };
            let mut tv = x.vertices.clone();
            hv.sort_unstable();
            tv.sort_unstable();
            if hv != tv {
                return bad(format!("job {j}: vertex index {tv:?} != holders {hv:?}"));
            }
        }
        self.check_fanout().map_err(ModelError::Invariant)?;
        // Aggregates.
        let fresh = self.aggs_from_scratch();
        for &i in &order {
            let mut want: Vec<(Sym, u64)> = fresh.get(&i).cloned().unwrap_or_default();
            want.retain(|e| e.1 > 0);
            want.sort();
            let mut have: Vec<(Sym, u64)> = {
                let ag = self.v[i as usize].agg;
                if ag == NONE {
                    Vec::new()
                } else {
                    self.aggs.get(ag as usize).cloned().unwrap_or_default()
                }
            };
            have.retain(|e| e.1 > 0);
            have.sort();
            if have != want {
                return bad(format!(
                    "{}: aggregate {:?} != recomputed {:?}",
                    self.path_of(i),
                    self.named(&have),
                    self.named(&want)
                ));
            }
        }
        Ok(())
    }

    fn named(&self, l: &[(Sym, u64)]) -> Vec<(String, u64)> {
        l.iter()
            .map(|&(t, n)| (self.syms.resolve(t).to_string(), n))
            .collect()
    }
}

fn add_sym(l: &mut Vec<(Sym, u64)>, t: Sym, n: u64) {
    match l.iter_mut().find(|e| e.0 == t) {
        Some(e) => e.1 += n,
        None => l.push((t, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::{add_sockets, cluster};
    use crate::graph::Pool;

    /// cluster0 > node{0,1} > socket{0,1} > core{0..3} (per socket), plus a
    /// memory pool of 1024 under each socket.
    fn g() -> Graph {
        let (mut g, root) = cluster();
        let mem = g.intern("memory");
        let mb = g.intern("MB");
        for n in 0..2 {
            let p = g.pool("node").id(n).rank(n);
            let node = g.add_child(root, p).unwrap();
            for sock in add_sockets(&mut g, node, 4, None) {
                g.add_child(sock, Pool::new(mem).size(1024).unit(mb))
                    .unwrap();
            }
        }
        g.check_invariants().unwrap();
        g
    }

    fn at(g: &Graph, p: &str) -> VertexId {
        g.lookup(p).unwrap_or_else(|| panic!("no {p}"))
    }

    /// [`g`] and its vertex at `p`.
    fn g_at(p: &str) -> (Graph, VertexId) {
        let g = g();
        let v = at(&g, p);
        (g, v)
    }

    fn agg(g: &Graph, p: &str) -> Vec<(String, u64)> {
        g.aggregate(at(g, p)).unwrap().into_iter().collect()
    }

    fn s(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(a, b)| (a.to_string(), *b)).collect()
    }

    #[test]
    fn out_of_service_pools_leave_available_aggregate_and_copy() {
        let (mut g, n1) = g_at("/cluster0/node1");
        let c = at(&g, "/cluster0/node1/socket0/core1");
        g.allocate(c, 1, 7).unwrap();
        g.set_state(n1, crate::State::Down).unwrap();
        // The down node and all below it count for nothing.
        assert_eq!(g.available(n1).unwrap(), 0);
        assert_eq!(
            g.available(at(&g, "/cluster0/node1/socket1/core5"))
                .unwrap(),
            0
        );
        assert!(agg(&g, "/cluster0/node1").is_empty());
        let a = g.aggregate_all();
        assert_eq!((a["node"], a["core"], a["socket"]), (1, 8, 2));
        assert!(g.copy(n1).is_err());
        assert!(g.copy_all().lookup("/cluster0/node1").is_none());
        // New allocations are refused, naming the state; old ones stay.
        let e = g.allocate(at(&g, "/cluster0/node1/socket1/core5"), 1, 8);
        assert_eq!(
            e.unwrap_err().to_string(),
            "/cluster0/node1/socket1/core5: unavailable because /cluster0/node1 is down"
        );
        assert_eq!(g.allocated(c).unwrap(), 1);
        g.free_job(7).unwrap();
        g.check_invariants().unwrap();
        // Degraded takes nothing new either; up restores everything.
        g.set_state(n1, crate::State::Degraded).unwrap();
        assert_eq!(g.aggregate_all()["core"], 8);
        g.set_state(n1, crate::State::Up).unwrap();
        assert_eq!(g.aggregate_all()["core"], 16);
        // Staging locks a pool out of Available, but its stager may take it.
        let s0 = at(&g, "/cluster0/node0/socket0");
        g.stage(s0).unwrap();
        assert_eq!(g.aggregate_all()["core"], 12);
        g.allocate(s0, 1, 9).unwrap();
        g.unstage_all();
        assert_eq!(g.aggregate_all()["core"], 12);
        g.check_invariants().unwrap();
    }

    #[test]
    fn aggregate_whole_graph() {
        let g = g();
        assert_eq!(
            agg(&g, "/cluster0"),
            s(&[
                ("cluster", 1),
                ("core", 16),
                ("memory", 4096),
                ("node", 2),
                ("socket", 4)
            ])
        );
        assert_eq!(
            agg(&g, "/cluster0/node1/socket0"),
            s(&[("core", 4), ("memory", 1024), ("socket", 1)])
        );
    }

    #[test]
    fn pool_alloc_and_free_like_rdl() {
        // The memory pool example of the RDL tests: size 1024, alloc 512.
        let (mut g, m) = g_at("/cluster0/node0/socket0/memory");
        assert_eq!(g.size(m).unwrap(), 1024);
        assert_eq!(g.allocated(m).unwrap(), 0);
        assert_eq!(g.available(m).unwrap(), 1024);
        g.allocate(m, 512, 1).unwrap();
        assert_eq!(g.available(m).unwrap(), 512);
        assert_eq!(g.allocated(m).unwrap(), 512);
        assert_eq!(agg(&g, "/cluster0/node0")[1], ("memory".into(), 1536));
        g.check_invariants().unwrap();
        // Allocate(N, S) grows an existing allocation.
        g.allocate(m, 100, 1).unwrap();
        assert_eq!(g.allocations(m).unwrap(), vec![(1, 612)]);
        // Another job shares the pool.
        g.allocate(m, 12, 2).unwrap();
        assert_eq!(g.allocations(m).unwrap(), vec![(1, 612), (2, 12)]);
        assert_eq!(g.exclusive(m).unwrap(), None);
        // Free(S, N) shrinks.
        assert_eq!(g.free(m, 1, Some(112)).unwrap(), 112);
        assert_eq!(g.allocations(m).unwrap(), vec![(1, 500), (2, 12)]);
        assert!(matches!(
            g.free(m, 1, Some(501)),
            Err(ModelError::FreeTooMany { held: 500, .. })
        ));
        // Free(S) returns everything.
        assert_eq!(g.free(m, 1, None).unwrap(), 500);
        assert_eq!(g.free(m, 2, None).unwrap(), 12);
        assert_eq!(g.available(m).unwrap(), 1024);
        assert!(g.jobs().is_empty());
        g.check_invariants().unwrap();
    }

    #[test]
    fn never_more_than_size() {
        let (mut g, m) = g_at("/cluster0/node0/socket0/memory");
        g.allocate(m, 1000, 1).unwrap();
        let e = g.allocate(m, 25, 2).unwrap_err();
        assert_eq!(
            e,
            ModelError::Insufficient {
                path: "/cluster0/node0/socket0/memory".into(),
                requested: 25,
                available: 24
            }
        );
        assert_eq!(
            e.to_string(),
            "/cluster0/node0/socket0/memory: requested 25 units but only 24 available"
        );
        g.allocate(m, 24, 2).unwrap();
        g.check_invariants().unwrap();
    }

    #[test]
    fn exclusive_socket_prunes_children_and_shares_up() {
        // RDL test_pool: allocate one socket; its cores and memory vanish
        // from the aggregate.
        let (mut g, s0) = g_at("/cluster0/node0/socket0");
        g.allocate(s0, 1, 7).unwrap();
        assert_eq!(g.exclusive(s0).unwrap(), Some(7));
        assert_eq!(g.available(s0).unwrap(), 0);
        let core = at(&g, "/cluster0/node0/socket0/core1");
        assert_eq!(g.available(core).unwrap(), 0);
        assert!(g.is_allocated(core).unwrap());
        assert_eq!(g.allocated(core).unwrap(), 0);
        assert_eq!(
            agg(&g, "/cluster0/node0"),
            s(&[("core", 4), ("memory", 1024), ("node", 1), ("socket", 1)])
        );
        assert_eq!(g.shared(at(&g, "/cluster0/node0")).unwrap(), vec![7]);
        assert_eq!(g.shared(at(&g, "/cluster0")).unwrap(), vec![7]);
        assert!(g.shared(s0).unwrap().is_empty());
        // Children cannot be allocated now.
        let e = g.allocate(core, 1, 8).unwrap_err();
        assert!(matches!(e, ModelError::AncestorFull { .. }), "{e}");
        // The aggregate of the allocated pool itself is empty.
        assert!(agg(&g, "/cluster0/node0/socket0").is_empty());
        assert!(agg(&g, "/cluster0/node0/socket0/core1").is_empty());
        g.check_invariants().unwrap();
        g.free(s0, 7, None).unwrap();
        assert_eq!(
            agg(&g, "/cluster0/node0"),
            s(&[("core", 8), ("memory", 2048), ("node", 1), ("socket", 2)])
        );
        g.check_invariants().unwrap();
    }

    #[test]
    fn exclusive_absorbs_own_records_and_refuses_others() {
        let (mut g, c0) = g_at("/cluster0/node0/socket0/core0");
        let c1 = at(&g, "/cluster0/node0/socket0/core1");
        let n0 = at(&g, "/cluster0/node0");
        g.allocate(c0, 1, 5).unwrap();
        g.allocate(c1, 1, 6).unwrap();
        assert_eq!(g.shared(n0).unwrap(), vec![5, 6]);
        let e = g.allocate(n0, 1, 5).unwrap_err();
        assert_eq!(
            e,
            ModelError::Busy {
                path: "/cluster0/node0".into(),
                jobs: "6".into()
            }
        );
        g.free_job(6).unwrap();
        g.allocate(n0, 1, 5).unwrap();
        // Job 5's core record was absorbed into the node allocation.
        assert_eq!(g.allocations(c0).unwrap(), vec![]);
        assert_eq!(g.allocations(n0).unwrap(), vec![(5, 1)]);
        assert!(g.shared(n0).unwrap().is_empty());
        assert_eq!(g.shared(at(&g, "/cluster0")).unwrap(), vec![5]);
        assert_eq!(g.job(5).unwrap().vertices, vec![n0]);
        g.check_invariants().unwrap();
    }

    #[test]
    fn free_without_n_frees_the_subtree() {
        let (mut g, n1) = g_at("/cluster0/node1");
        for c in ["core0", "core5"] {
            let s = if c == "core0" { "socket0" } else { "socket1" };
            let v = at(&g, &format!("/cluster0/node1/{s}/{c}"));
            g.allocate(v, 1, 9).unwrap();
        }
        let other = at(&g, "/cluster0/node0/socket0/core0");
        g.allocate(other, 1, 9).unwrap();
        assert_eq!(g.free(n1, 9, None).unwrap(), 2);
        assert_eq!(g.job(9).unwrap().vertices, vec![other]);
        assert!(matches!(
            g.free(n1, 9, None),
            Err(ModelError::NoAllocation { .. })
        ));
        assert!(matches!(
            g.free(n1, 9, Some(1)),
            Err(ModelError::NoAllocation { .. })
        ));
        assert_eq!(g.free_job(9).unwrap(), 1);
        assert_eq!(g.free_job(9), Err(ModelError::NoJob(9)));
        g.check_invariants().unwrap();
    }

    #[test]
    fn zero_requests_and_bad_ids() {
        let (mut g, c0) = g_at("/cluster0/node0/socket0/core0");
        assert!(matches!(g.allocate(c0, 0, 1), Err(ModelError::Job { .. })));
        assert_eq!(
            g.allocate(VertexId(10_000), 1, 1),
            Err(ModelError::NoVertex(10_000))
        );
        assert!(g.jobs().is_empty());
    }

    #[test]
    fn reservations_use_the_same_accounting_in_time() {
        let (mut g, m) = g_at("/cluster0/node0/socket0/memory");
        g.reserve(m, 1024, 20, 100, 200).unwrap();
        // Disjoint window: fine.
        g.reserve(m, 1024, 21, 200, 300).unwrap();
        // Overlapping: refused.
        let e = g.reserve(m, 1, 22, 150, 250).unwrap_err();
        assert!(
            matches!(e, ModelError::Insufficient { available: 0, .. }),
            "{e}"
        );
        // An open-ended allocation overlaps every reservation.
        let e = g.allocate(m, 1, 23).unwrap_err();
        assert!(matches!(e, ModelError::Insufficient { .. }));
        // A bounded allocation before the reservations is fine.
        g.allocate_span(m, 1024, 24, 0, 100).unwrap();
        assert_eq!(g.reserved(m).unwrap(), 2048);
        assert_eq!(g.allocated(m).unwrap(), 1024);
        let sock = at(&g, "/cluster0/node0/socket0");
        assert_eq!(g.reserved_shared(sock).unwrap(), vec![20, 21]);
        assert_eq!(g.shared(sock).unwrap(), vec![24]);
        // The socket cannot be reserved exclusively while its memory is.
        let e = g.reserve(sock, 1, 25, 150, 160).unwrap_err();
        assert!(matches!(e, ModelError::Busy { .. }), "{e}");
        // ...but can be at a time nothing below is held.
        g.reserve(sock, 1, 25, 300, 400).unwrap();
        // Mismatched window or kind for an existing job.
        assert!(matches!(
            g.reserve(m, 1, 25, 0, 10),
            Err(ModelError::Job { .. })
        ));
        assert!(matches!(
            g.allocate(sock, 1, 20),
            Err(ModelError::Job { .. })
        ));
        g.check_invariants().unwrap();
        g.free_job(24).unwrap();
        g.promote(20).unwrap();
        assert_eq!(g.allocations(m).unwrap(), vec![(20, 1024)]);
        assert_eq!(g.reservations(m).unwrap(), vec![(21, 1024)]);
        assert_eq!(g.job(20).unwrap().kind, JobKind::Allocated);
        assert_eq!(g.shared(sock).unwrap(), vec![20]);
        g.check_invariants().unwrap();
        assert!(matches!(g.promote(20), Err(ModelError::Job { .. })));
    }

    #[test]
    fn full_pool_of_several_jobs_blocks_children() {
        let mut g = Graph::new();
        let p = g.pool("rack").size(2);
        let rack = g.add_root(p);
        let p = g.pool("node").id(0);
        let n = g.add_child(rack, p).unwrap();
        g.allocate(rack, 1, 1).unwrap();
        g.allocate(n, 1, 3).unwrap();
        // Filling the rack with a second job would sit above job 3's node.
        let e = g.allocate(rack, 1, 2).unwrap_err();
        assert!(matches!(e, ModelError::Busy { .. }), "{e}");
        g.free_job(3).unwrap();
        g.allocate(rack, 1, 2).unwrap();
        assert_eq!(g.exclusive(rack).unwrap(), None);
        assert_eq!(g.available(n).unwrap(), 0);
        g.check_invariants().unwrap();
    }

    #[test]
    fn invariant_checker_detects_corruption() {
        let (mut g, c0) = g_at("/cluster0/node0/socket0/core0");
        g.allocate(c0, 1, 1).unwrap();
        let mut h = g.clone();
        // Drop the cluster's shared list entry.
        let root = h.v[at(&h, "/cluster0").index()].rec;
        h.recs[root as usize].shared.clear();
        assert!(matches!(
            h.check_invariants(),
            Err(ModelError::Invariant(_))
        ));
        let mut h = g.clone();
        let r = h.v[c0.index()].rec;
        h.recs[r as usize].allocs[0].1 = 2;
        h.recs[r as usize].allocated = 2;
        let e = h.check_invariants().unwrap_err().to_string();
        assert!(e.contains("2 units held of 1"), "{e}");
        let mut h = g.clone();
        let a = h.v[at(&h, "/cluster0").index()].agg;
        h.aggs[a as usize][0].1 += 1;
        assert!(h.check_invariants().is_err());
    }
}
