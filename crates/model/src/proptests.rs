//! Random sequences of allocate / reserve / free / copy / merge / unlink /
//! promote never break the invariants, and the structural methods agree
//! with each other (a copy aggregates like the original, regrafting a
//! subtree restores the aggregate and the jobs).

use crate::alloc::JobKind;
use crate::graph::tests::{add_sockets, cluster};
use crate::graph::{Graph, Pool, State, VertexId};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn base() -> Graph {
    let (mut g, root) = cluster();
    let mem = g.intern("memory");
    for n in 0..3 {
        let p = g
            .pool("node")
            .id(n)
            .rank(n)
            .size(if n == 0 { 2 } else { 1 });
        let node = g.add_child(root, p).unwrap();
        for sock in add_sockets(&mut g, node, 3, Some(n)) {
            g.add_child(sock, Pool::new(mem).size(8).rank(n)).unwrap();
        }
    }
    g
}

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        v: usize,
        n: u64,
        job: u64,
    },
    Reserve {
        v: usize,
        n: u64,
        job: u64,
        start: u64,
        len: u64,
    },
    Free {
        v: usize,
        job: u64,
        n: Option<u64>,
    },
    FreeJob {
        job: u64,
    },
    Promote {
        job: u64,
    },
    Unlink {
        v: usize,
    },
    Regraft {
        v: usize,
    },
    CopyCheck {
        v: usize,
    },
    FindCheck,
    SetState {
        v: usize,
        state: usize,
    },
    Stage {
        v: usize,
        on: bool,
    },
    /// Available, Aggregate, Copy and Match agree on every pool.
    Agree,
    MatchAlloc {
        slots: u32,
        cores: u32,
        nodes: u32,
        exclusive: bool,
        job: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..64usize, 1..4u64, 1..6u64).prop_map(|(v, n, job)| Op::Alloc { v, n, job }),
        2 => (0..64usize, 1..4u64, 6..9u64, 0..40u64, 1..30u64)
            .prop_map(|(v, n, job, start, len)| Op::Reserve { v, n, job, start, len }),
        3 => (0..64usize, 1..9u64, proptest::option::of(1..3u64))
            .prop_map(|(v, job, n)| Op::Free { v, job, n }),
        1 => (1..9u64).prop_map(|job| Op::FreeJob { job }),
        1 => (6..9u64).prop_map(|job| Op::Promote { job }),
        1 => (1..64usize).prop_map(|v| Op::Unlink { v }),
        1 => (1..64usize).prop_map(|v| Op::Regraft { v }),
        1 => (0..64usize).prop_map(|v| Op::CopyCheck { v }),
        1 => Just(Op::FindCheck),
        2 => (0..64usize, 0..8usize).prop_map(|(v, state)| Op::SetState { v, state }),
        1 => (0..64usize, proptest::bool::ANY).prop_map(|(v, on)| Op::Stage { v, on }),
        2 => Just(Op::Agree),
        3 => (1..4u32, 1..5u32, 0..3u32, proptest::bool::ANY, 20..26u64)
            .prop_map(|(slots, cores, nodes, exclusive, job)| Op::MatchAlloc { slots, cores, nodes, exclusive, job }),
    ]
}

fn pick(g: &Graph, k: usize) -> Option<VertexId> {
    let live: Vec<VertexId> = g.vertices().collect();
    if live.is_empty() {
        None
    } else {
        live.get(k % live.len()).copied()
    }
}

fn job_sizes(g: &Graph) -> BTreeMap<u64, (JobKind, usize)> {
    g.jobs()
        .into_iter()
        .map(|j| (j.id, (j.kind, j.vertices.len())))
        .collect()
}

fn apply(g: &mut Graph, op: &Op) -> Result<(), TestCaseError> {
    match *op {
        Op::Alloc { v, n, job } => {
            if let Some(v) = pick(g, v) {
                let before = g.allocated(v).unwrap_or(0);
                let avail = g.available(v).unwrap_or(0);
                let staged = std::iter::once(v)
                    .chain(g.ancestors(v))
                    .any(|a| g.get(a).unwrap().staged());
                if g.allocate(v, n, job).is_ok() {
                    // Allocate may take a staged pool (the stager's lock).
                    prop_assert!(staged || n <= avail, "allocated {n} with {avail} available");
                    prop_assert_eq!(g.allocated(v).unwrap(), before + n);
                }
            }
        }
        Op::Reserve {
            v,
            n,
            job,
            start,
            len,
        } => {
            if let Some(v) = pick(g, v) {
                let _ = g.reserve(v, n, job, start, start + len);
            }
        }
        Op::Free { v, job, n } => {
            if let Some(v) = pick(g, v) {
                let _ = g.free(v, job, n);
            }
        }
        Op::FreeJob { job } => {
            let had = g.job(job).is_some();
            prop_assert_eq!(g.free_job(job).is_ok(), had);
            prop_assert!(g.job(job).is_none());
        }
        Op::Promote { job } => {
            let _ = g.promote(job);
        }
        Op::Unlink { v } => {
            if let Some(v) = pick(g, v) {
                let before = g.len();
                let n = g.unlink(v).unwrap();
                prop_assert_eq!(g.len(), before - n);
            }
        }
        Op::Regraft { v } => {
            let Some(v) = pick(g, v) else { return Ok(()) };
            if g.parent(v).is_none() {
                return Ok(());
            }
            // Take the subtree (with its ancestors and records) out and
            // merge it back: aggregate and jobs are restored.
            let mut keep = vec![false; g.arena_len()];
            for a in g.ancestors(v) {
                keep[a.index()] = true;
            }
            g.preorder_from(v.0, &mut |i| keep[i as usize] = true);
            let piece = g.extract(&|i| keep[i as usize], None, true);
            piece
                .check_invariants()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let agg = g.aggregate_all();
            let jobs = job_sizes(g);
            let len = g.len();
            let path = g.path(v).unwrap();
            g.unlink(v).unwrap();
            g.merge(&piece, None)
                .map_err(|e| TestCaseError::fail(format!("merge {path}: {e}")))?;
            prop_assert_eq!(g.len(), len);
            prop_assert_eq!(g.aggregate_all(), agg);
            prop_assert_eq!(job_sizes(g), jobs);
            prop_assert!(g.lookup(&path).is_some());
        }
        Op::CopyCheck { v } => {
            let Some(v) = pick(g, v) else { return Ok(()) };
            match g.copy(v) {
                Ok(c) => {
                    c.check_invariants()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert!(c.jobs().is_empty());
                    let cv = c.lookup(&g.path(v).unwrap()).unwrap();
                    prop_assert_eq!(c.aggregate(cv).unwrap(), g.aggregate(v).unwrap());
                    for x in c.vertices() {
                        prop_assert_eq!(c.allocated(x).unwrap(), 0);
                        prop_assert!(c.size(x).unwrap() > 0);
                    }
                }
                Err(_) => prop_assert_eq!(g.available(v).unwrap(), 0),
            }
        }
        Op::MatchAlloc {
            slots,
            cores,
            nodes,
            exclusive,
            job,
        } => {
            let req = if nodes == 0 {
                crate::matcher::Request::slots(slots, cores, 0)
            } else {
                crate::matcher::Request::nodes(nodes, slots, cores, 0, exclusive)
            };
            let had = g.job(job).is_some();
            let before = g.aggregate_all().get("core").copied().unwrap_or(0);
            let found = g.match_request(&req).is_some();
            match g.match_allocate(&req, job) {
                Ok(Some(m)) => {
                    prop_assert!(!had && found);
                    prop_assert!(g.satisfiable(&req));
                    let after = g.aggregate_all().get("core").copied().unwrap_or(0);
                    let taken: u64 = if m.exclusive {
                        before - after
                    } else {
                        m.units.iter().map(|u| u.1).sum()
                    };
                    prop_assert!(taken >= u64::from(slots * cores.max(1)) || m.exclusive);
                    prop_assert!(before - after >= u64::from(slots * cores));
                }
                Ok(None) => prop_assert!(!found),
                Err(_) => prop_assert!(had),
            }
        }
        Op::SetState { v, state } => {
            if let Some(v) = pick(g, v) {
                // Bias towards up so that graphs do not go all down.
                let st = State::ALL.get(state).copied().unwrap_or(State::Up);
                g.set_state(v, st).unwrap();
                if !st.is_available() {
                    prop_assert_eq!(g.available(v).unwrap(), 0);
                    prop_assert!(g.aggregate(v).unwrap().is_empty());
                    prop_assert!(g.copy(v).is_err());
                    prop_assert!(g.allocate(v, 1, 1).is_err());
                }
            }
        }
        Op::Stage { v, on } => {
            if let Some(v) = pick(g, v) {
                if on {
                    g.stage(v).unwrap();
                    prop_assert_eq!(g.available(v).unwrap(), 0);
                } else {
                    g.unstage(v).unwrap();
                }
            }
        }
        Op::Agree => agree(g)?,
        Op::FindCheck => {
            let f = g.find(&crate::Pred::True);
            f.check_invariants()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(f.aggregate_all(), g.aggregate_all());
            prop_assert_eq!(job_sizes(&f), job_sizes(g));
        }
    }
    Ok(())
}

/// Available, Aggregate, Copy and Match tell the same story about every
/// pool: a pool offers units iff Copy keeps it; Aggregate of a pool is
/// its own available units plus those of its offering children; Copy
/// aggregates like the original; and (without reservations, which only
/// Match looks ahead at) a one-node request of `c` cores on node `n`
/// matches iff Aggregate(n) counts at least `c` cores.
fn agree(g: &mut Graph) -> Result<(), TestCaseError> {
    let all: Vec<VertexId> = g.vertices().collect();
    let core = "core".to_string();
    for &v in &all {
        let avail = g.available(v).unwrap();
        let agg = g.aggregate(v).unwrap();
        let ty = g.get(v).unwrap().type_name().to_string();
        prop_assert_eq!(agg.get(&ty).copied().unwrap_or(0) >= avail, true);
        match g.copy(v) {
            Ok(c) => {
                prop_assert!(avail > 0, "copy of unavailable {}", g.path(v).unwrap());
                let cv = c.lookup(&g.path(v).unwrap()).unwrap();
                prop_assert_eq!(c.aggregate(cv).unwrap(), agg.clone());
                // Nothing out of service or staged survives a copy.
                for x in c.vertices() {
                    let p = c.get(x).unwrap();
                    prop_assert!(p.state().is_available() && !p.staged() || c.is_ancestor(x, cv));
                }
            }
            Err(_) => {
                prop_assert_eq!(avail, 0);
                prop_assert!(agg.is_empty());
            }
        }
        if avail == 0 {
            prop_assert!(agg.is_empty());
        }
        // Sum rule: own units + what the offering children offer.
        if avail > 0 {
            let mut sum: BTreeMap<String, u64> = BTreeMap::new();
            *sum.entry(ty.clone()).or_insert(0) += avail;
            for c in g.children(v).collect::<Vec<_>>() {
                for (t, n) in g.aggregate(c).unwrap() {
                    *sum.entry(t).or_insert(0) += n;
                }
            }
            prop_assert_eq!(sum, agg.clone());
        }
        let no_resv = g.jobs().iter().all(|j| j.kind == JobKind::Allocated);
        if ty == "node" && no_resv {
            let rank = g.get(v).unwrap().raw_rank();
            let have = agg.get(&core).copied().unwrap_or(0);
            for c in [1u32, 2, 3] {
                let mut req = crate::matcher::Request::nodes(1, 1, c, 0, false);
                req.constraint = Some(crate::matcher::Constraint::Ranks(vec![
                    idset::IdSet::parse(&rank.to_string()).unwrap(),
                ]));
                let m = g.match_request(&req).is_some();
                prop_assert_eq!(
                    m,
                    have >= u64::from(c),
                    "node {} offers {} cores; match of {} says {}",
                    g.path(v).unwrap(),
                    have,
                    c,
                    m
                );
            }
        }
    }
    let roots: Vec<VertexId> = g.roots().collect();
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for r in roots {
        for (t, n) in g.aggregate(r).unwrap() {
            *total.entry(t).or_insert(0) += n;
        }
    }
    prop_assert_eq!(total, g.aggregate_all());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_operations(ops in proptest::collection::vec(op(), 1..40)) {
        let mut g = base();
        for op in &ops {
            apply(&mut g, op)?;
            if let Err(e) = g.check_invariants() {
                return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
            }
        }
        // Freeing every job restores the full aggregate.
        let jobs: Vec<u64> = g.jobs().iter().map(|j| j.id).collect();
        for j in jobs {
            g.free_job(j).unwrap();
        }
        g.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
        agree(&mut g)?;
        let all: Vec<VertexId> = g.vertices().collect();
        for &v in &all {
            g.set_state(v, State::Up).unwrap();
            g.unstage(v).unwrap();
        }
        for v in g.vertices() {
            prop_assert_eq!(g.available(v).unwrap(), g.size(v).unwrap());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Save (full JGF) then load gives back the same state: the same
    /// document, aggregates, jobs with windows, records, states and tags.
    #[test]
    fn save_and_load_round_trip(ops in proptest::collection::vec(op(), 1..30), tags in proptest::collection::vec((0..64usize, "[a-z]{1,4}", proptest::option::of("[ -~]{0,6}")), 0..4)) {
        let mut g = base();
        for op in &ops {
            apply(&mut g, op)?;
        }
        for (v, k, val) in &tags {
            if let Some(v) = pick(&g, *v) {
                g.tag(v, k, val.as_deref()).unwrap();
            }
        }
        let text = g.to_jgf_string(crate::jgf::JgfStyle::Full);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(crate::jgf::check_rfc20(&v), Ok(()));
        let h = Graph::from_jgf_str(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        h.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(h.to_jgf_string(crate::jgf::JgfStyle::Full), text);
        prop_assert_eq!(h.aggregate_all(), g.aggregate_all());
        prop_assert_eq!(h.jobs().len(), g.jobs().len());
        for (a, b) in g.jobs().iter().zip(h.jobs().iter()) {
            prop_assert_eq!((a.id, a.kind, a.start, a.end), (b.id, b.kind, b.start, b.end));
        }
        for v in g.vertices() {
            let p = g.path(v).unwrap();
            let w = h.lookup(&p).unwrap();
            prop_assert_eq!(g.allocations(v).unwrap(), h.allocations(w).unwrap());
            prop_assert_eq!(g.reservations(v).unwrap(), h.reservations(w).unwrap());
            prop_assert_eq!(g.available(v).unwrap(), h.available(w).unwrap());
            let (x, y) = (g.get(v).unwrap(), h.get(w).unwrap());
            prop_assert_eq!(x.state(), y.state());
            prop_assert_eq!(x.staged(), y.staged());
            let mut tx: Vec<_> = x.tags().collect();
            let mut ty: Vec<_> = y.tags().collect();
            tx.sort();
            ty.sort();
            prop_assert_eq!(tx, ty);
        }
    }
}
