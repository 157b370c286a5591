//! Property tests: codec round trip, set algebra against a naive per-rank
//! model, and robustness of the parser on mutated input.

use crate::Rset;
use idset::IdSet;
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// rank -> child name -> ids
type Model = BTreeMap<u32, BTreeMap<String, BTreeSet<u32>>>;

const NAMES: [&str; 4] = ["core", "gpu", "nic", "fpga"];

fn ids_str(s: &BTreeSet<u32>) -> String {
    IdSet::from_sorted_ranges(s.iter().map(|&i| (i, i)))
        .unwrap_or_default()
        .encode()
}

/// A model where every node has at least one id.
fn model_strategy(max_rank: u32) -> impl Strategy<Value = Model> {
    prop::collection::btree_map(
        0..max_rank,
        prop::collection::btree_map(
            prop::sample::select(NAMES.to_vec()).prop_map(str::to_string),
            prop::collection::btree_set(0u32..12, 0..5),
            1..3,
        ),
        0..8,
    )
    .prop_map(|m| {
        m.into_iter()
            .filter(|(_, c)| c.values().any(|s| !s.is_empty()))
            .collect()
    })
}

/// R JSON for a model, one R_lite entry per rank (entries in random-ish
/// but deterministic order), with optional hostnames.
fn model_json(m: &Model, hosts: bool) -> Value {
    let mut r_lite = Vec::new();
    for (rank, children) in m.iter().rev() {
        let mut c = Map::new();
        for (name, ids) in children {
            c.insert(name.clone(), Value::String(ids_str(ids)));
        }
        r_lite.push(json!({"rank": rank.to_string(), "children": Value::Object(c)}));
    }
    let mut exec = Map::new();
    exec.insert("R_lite".into(), Value::Array(r_lite));
    if hosts {
        let names: Vec<String> = m.keys().map(|r| format!("h{r}")).collect();
        exec.insert("nodelist".into(), json!([names.join(",")]));
    }
    json!({"version": 1, "execution": Value::Object(exec)})
}

fn to_model(r: &Rset) -> Model {
    r.node_infos()
        .into_iter()
        .map(|n| {
            let c = n
                .children
                .into_iter()
                .filter(|(_, s)| !s.is_empty())
                .map(|(k, s)| (k, s.iter().collect()))
                .collect();
            (n.rank, c)
        })
        .collect()
}

fn build(m: &Model, hosts: bool) -> Rset {
    Rset::from_json(&model_json(m, hosts)).unwrap_or_default()
}

/// The model without empty children.
fn norm(m: &Model) -> Model {
    m.iter()
        .map(|(r, c)| {
            let c: BTreeMap<String, BTreeSet<u32>> = c
                .iter()
                .filter(|(_, s)| !s.is_empty())
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect();
            (*r, c)
        })
        .collect()
}

fn model_diff(a: &Model, b: &Model) -> Model {
    let mut out = Model::new();
    for (rank, ca) in a {
        let mut c = ca.clone();
        if let Some(cb) = b.get(rank) {
            for (name, ids) in cb {
                if let Some(x) = c.get_mut(name) {
                    *x = x.difference(ids).copied().collect();
                }
            }
        }
        c.retain(|_, s| !s.is_empty());
        if !c.is_empty() {
            out.insert(*rank, c);
        }
    }
    out
}

fn model_intersect(a: &Model, b: &Model) -> Model {
    let mut out = Model::new();
    for (rank, cb) in b {
        let Some(ca) = a.get(rank) else { continue };
        let mut c = BTreeMap::new();
        for (name, ids) in ca {
            if let Some(o) = cb.get(name) {
                let x: BTreeSet<u32> = ids.intersection(o).copied().collect();
                if !x.is_empty() {
                    c.insert(name.clone(), x);
                }
            }
        }
        if !c.is_empty() {
            out.insert(*rank, c);
        }
    }
    out
}

fn model_union(a: &Model, b: &Model) -> Model {
    let mut out = model_diff(a, b);
    for (rank, cb) in b {
        let c = out.entry(*rank).or_default();
        for (name, ids) in cb {
            c.entry(name.clone())
                .or_default()
                .extend(ids.iter().copied());
        }
        c.retain(|_, s| !s.is_empty());
        c.retain(|_, s| !s.is_empty());
    }
    out
}

fn overlaps(a: &Model, b: &Model) -> bool {
    b.iter().any(|(rank, cb)| {
        a.get(rank).is_some_and(|ca| {
            cb.iter().any(|(n, ids)| {
                ca.get(n)
                    .is_some_and(|x| !x.is_empty() && !x.is_disjoint(ids))
            })
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn encode_decode_round_trip(
        m in model_strategy(40),
        hosts in any::<bool>(),
        start in prop::option::of(1.0f64..2e9),
        nslots in 0i32..5,
        sched in prop::option::of(any::<i32>()),
        prop_ranks in prop::collection::vec(0u32..40, 0..4),
    ) {
        let mut r = build(&m, hosts);
        if let Some(t) = start {
            r.set_starttime(t);
            r.set_expiration(t + 0.5);
        }
        r.set_nslots(nslots);
        r.set_scheduling(sched.map(|s| json!({"k": s})));
        let present: Vec<u32> = prop_ranks.into_iter().filter(|p| m.contains_key(p)).collect();
        if !present.is_empty() {
            let ids = IdSet::from_sorted_ranges({
                let mut v = present.clone();
                v.sort_unstable();
                v.dedup();
                v.into_iter().map(|i| (i, i))
            }).unwrap_or_default();
            prop_assert!(r.add_property("p", &ids.encode()).is_ok());
        }
        let text = r.encode();
        let back = Rset::from_json_str(&text);
        prop_assert!(back.is_ok(), "{text}");
        let back = back.unwrap_or_default();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(to_model(&back), norm(&m));
        // The short form survives the round trip (empty children, which
        // the encoding drops, split groups, so compare without them).
        let mut sorted = build(&norm(&m), hosts);
        sorted.sort_by_rank();
        prop_assert_eq!(back.dumps(), sorted.dumps());
    }

    #[test]
    fn algebra_matches_model(a in model_strategy(16), b in model_strategy(16)) {
        let (ra, rb) = (build(&a, false), build(&b, false));
        let d = ra.diff(&rb);
        prop_assert!(d.is_ok());
        prop_assert_eq!(to_model(&d.unwrap_or_default()), model_diff(&a, &b));
        prop_assert_eq!(to_model(&ra.intersect(&rb)), model_intersect(&a, &b));
        prop_assert_eq!(to_model(&ra), norm(&a));
        let u = ra.union(&rb);
        prop_assert!(u.is_ok());
        let u = u.unwrap_or_default();
        prop_assert_eq!(to_model(&u), model_union(&a, &b));
        // add == union
        let mut added = ra.clone();
        prop_assert!(added.add(&rb).is_ok());
        prop_assert_eq!(to_model(&added), model_union(&a, &b));
        // append succeeds exactly when no ids overlap
        let mut app = ra.clone();
        let res = app.append(&rb);
        prop_assert_eq!(res.is_err(), overlaps(&a, &b));
        if res.is_ok() {
            prop_assert_eq!(to_model(&app), model_union(&a, &b));
        }
        // copy_ranks / remove_ranks partition the set
        let keep = IdSet::from_range(0, 7);
        let c = ra.copy_ranks(&keep);
        let mut rest = ra.clone();
        let removed = rest.remove_ranks(&keep);
        prop_assert_eq!(removed, c.nnodes());
        prop_assert_eq!(c.nnodes() + rest.nnodes(), ra.nnodes());
        // the encoding round-trips after every operation
        for r in [&u, &c, &rest] {
            let back = Rset::from_json_str(&r.encode()).unwrap_or_default();
            prop_assert_eq!(to_model(&back), to_model(r));
        }
    }

    #[test]
    fn remap_renumbers(m in model_strategy(30)) {
        let mut r = build(&m, true);
        r.remap();
        let n = m.len() as u32;
        let ranks: Vec<u32> = to_model(&r).keys().copied().collect();
        prop_assert_eq!(ranks, (0..n).collect::<Vec<_>>());
        for info in r.node_infos() {
            for (name, ids) in info.children {
                if name != "gpu" && !ids.is_empty() {
                    prop_assert_eq!(ids.first(), Some(0));
                    prop_assert_eq!(ids.last().map(u64::from), Some(ids.len() - 1));
                }
            }
        }
    }

    #[test]
    fn parser_never_panics_on_mutations(
        m in model_strategy(8),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    ) {
        let mut bytes = crate::json::dumps(&model_json(&m, true)).into_bytes();
        for (idx, byte, kind) in edits {
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let i = idx.index(bytes.len());
            match kind {
                0 => bytes[i] = byte,
                1 => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
        }
        if let Ok(r) = Rset::from_json_bytes(&bytes) {
            let _ = r.encode();
            let _ = r.dumps();
            let _ = r.diff(&r);
            let _ = r.intersect(&r);
            let mut x = r.clone();
            x.remap();
            let _ = x.encode();
        }
    }

    #[test]
    fn parser_never_panics_on_odd_values(v in odd_r()) {
        match Rset::from_json(&v) {
            Ok(r) => {
                let _ = r.encode();
                let _ = r.dumps();
                let _ = r.union(&r);
            }
            Err(e) => {
                // Every error renders, and says something.
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        (-1e3f64..1e3).prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "0",
            "0-3",
            "",
            "x",
            "1,3",
            "[0-2147483647]",
            "foo[0-3]",
            "a,b"
        ])
        .prop_map(|s| Value::String(s.into())),
    ]
}

/// R-shaped documents with arbitrary types in every slot.
fn odd_r() -> impl Strategy<Value = Value> {
    let any_json = leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec!["core", "gpu", "rank", "children", "x"])
                    .prop_map(str::to_string),
                inner,
                0..3
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (
        prop::sample::select(vec![json!(1), json!(2), json!(1.0), json!("1")]),
        prop::collection::vec(
            (leaf(), any_json.clone()).prop_map(|(rank, children)| json!({"rank": rank, "children": children})),
            0..4,
        ),
        any_json.clone(),
        any_json,
    )
        .prop_map(|(version, entries, nodelist, props)| {
            json!({"version": version, "execution": {"R_lite": entries, "nodelist": nodelist, "properties": props}})
        })
}

/// A model with properties `p0`..`p3` (and hostnames `h<rank>`, one of
/// which may also be a property name) over its ranks.
fn with_props(m: &Model, props: &[(usize, u32)], host_prop: bool) -> Rset {
    let mut v = model_json(m, true);
    let mut table: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for &(p, r) in props {
        if m.contains_key(&r) {
            table.entry(format!("p{p}")).or_default().insert(r);
        }
    }
    if host_prop {
        if let Some(&r) = m.keys().next() {
            table.entry(format!("h{r}")).or_default().insert(r);
        }
    }
    let obj: Map<String, Value> = table
        .iter()
        .map(|(k, s)| (k.clone(), Value::String(ids_str(s))))
        .collect();
    if !obj.is_empty() {
        if let Some(e) = v.get_mut("execution").and_then(Value::as_object_mut) {
            e.insert("properties".into(), Value::Object(obj));
        }
    }
    Rset::from_json(&v).unwrap_or_default()
}

/// `copy_matching` as it was before remembering outcomes per table state:
/// every node is probed.
fn copy_matching_reference(r: &Rset, c: &crate::Constraint) -> Rset {
    let mut result = Rset::new();
    for n in r.nodes.iter() {
        let mut probe = crate::node::Node {
            rank: n.rank,
            hostname: n.hostname.clone(),
            children: crate::zhash::ZTable::new(),
            props: n.props.clone(),
        };
        if c.matches(&mut probe) {
            let mut copy = n.copy();
            copy.props = probe.props.dup();
            let _ = result.add_node_new(copy);
        }
    }
    if !result.is_empty() {
        result.scheduling.clone_from(&r.scheduling);
    }
    result
}

/// Everything order-sensitive that can be printed of a set.
fn shown(r: &Rset) -> (String, String, Vec<String>, i64) {
    (r.encode(), r.dumps(), r.property_names(), r.core_avail())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The fast paths `flux resource list` uses agree with the operations
    /// they replace, including list and table order.
    #[test]
    fn list_fast_paths_match_reference(
        a in model_strategy(24),
        b in model_strategy(24),
        props in prop::collection::vec((0usize..4, 0u32..24), 0..40),
        host_prop in any::<bool>(),
        cons in prop::collection::vec(
            prop::collection::vec((0usize..5, any::<bool>()), 0..4), 1..5),
    ) {
        let ra = with_props(&a, &props, host_prop);
        let rb = with_props(&b, &props, false);
        // copy_diff == copy_constraint({}).diff()
        let reference = ra.copy_constraint(&json!({})).and_then(|c| c.diff(&rb));
        match (reference, ra.copy_diff(&rb)) {
            (Ok(x), Ok(y)) => prop_assert_eq!(shown(&x), shown(&y)),
            (Err(x), Err(y)) => prop_assert_eq!(x.to_string(), y.to_string()),
            (x, y) => prop_assert!(false, "{:?} vs {:?}", x.is_ok(), y.is_ok()),
        }
        // removing whole nodes (and parts of nodes) of `a` itself
        let sub = ra.copy_matching_ranks(&crate::Constraint::Empty, &IdSet::from_sorted_ranges(
            a.keys().filter(|r| *r % 3 != 0).map(|&r| (r, r))).unwrap_or_default());
        let mut part = sub.clone();
        part.append(&rb).ok();
        for other in [&rb, &sub, &part, &Rset::new()] {
            let reference = ra.copy_diff(other).and_then(|up| up.copy_diff(&Rset::new()));
            match (reference, ra.copy_diff_copy(other)) {
                (Ok(x), Ok(y)) => prop_assert_eq!(shown(&x), shown(&y)),
                (Err(x), Err(y)) => prop_assert_eq!(x.to_string(), y.to_string()),
                (x, y) => prop_assert!(false, "{:?} vs {:?}", x.is_ok(), y.is_ok()),
            }
        }
        for other in [&sub, &part] {
            let reference = ra.copy_constraint(&json!({})).and_then(|c| c.diff(other));
            match (reference, ra.copy_diff(other)) {
                (Ok(x), Ok(y)) => prop_assert_eq!(shown(&x), shown(&y)),
                (Err(x), Err(y)) => prop_assert_eq!(x.to_string(), y.to_string()),
                (x, y) => prop_assert!(false, "{:?} vs {:?}", x.is_ok(), y.is_ok()),
            }
        }
        // property_names == the names of properties()
        let names: Vec<String> = ra.properties().into_iter().map(|(n, _)| n).collect();
        prop_assert_eq!(ra.property_names(), names);
        // copy_matching (remembering outcomes) == probing every node, and
        // copy_matching_groups == copy_matching_ranks per group
        let mut compiled = Vec::new();
        for c in &cons {
            let p: Vec<Value> = c
                .iter()
                .map(|&(i, neg)| {
                    let n = if i == 4 { format!("h{}", a.keys().next().copied().unwrap_or(0)) } else { format!("p{i}") };
                    Value::String(if neg { format!("^{n}") } else { n })
                })
                .collect();
            let c = crate::Constraint::from_json(&json!({ "properties": p }));
            prop_assert!(c.is_ok());
            if let Ok(c) = c {
                prop_assert_eq!(shown(&ra.copy_matching(&c)), shown(&copy_matching_reference(&ra, &c)));
                compiled.push(c);
            }
        }
        let group = |rank: u32| Some(rank as usize % (compiled.len() + 1)).filter(|&g| g < compiled.len());
        let groups = ra.copy_matching_groups(&compiled, group);
        prop_assert_eq!(groups.len(), compiled.len());
        for (i, (c, g)) in compiled.iter().zip(&groups).enumerate() {
            let ranks: Vec<u32> = ra.ranks().iter().filter(|&r| group(r) == Some(i)).collect();
            let ids = IdSet::from_sorted_ranges(ranks.into_iter().map(|r| (r, r))).unwrap_or_default();
            prop_assert_eq!(shown(g), shown(&ra.copy_matching_ranks(c, &ids)));
        }
        // check_copyable fails exactly where diff does
        prop_assert_eq!(ra.check_copyable().is_ok(), ra.diff(&Rset::new()).is_ok());
    }
}
