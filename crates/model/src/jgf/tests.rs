use super::*;
use crate::graph::tests::cluster;
use crate::graph::Pool;
use proptest::prelude::*;

/// Our own fixture in the compact form Fluxion writes today
/// (`emit_vtx_base`): defaults left out, containment edges bare.
const FLUXION_COMPACT: &str = r#"{"graph":{"nodes":[
{"id":"0","metadata":{"type":"cluster","id":0,"rank":-1,"paths":{"containment":"/cluster0"}}},
{"id":"1","metadata":{"type":"node","basename":"fluke","id":7,"rank":0,"properties":{"gpu-a100":""},"paths":{"containment":"/cluster0/fluke7"}}},
{"id":"2","metadata":{"type":"core","id":0,"rank":0,"exclusive":true,"paths":{"containment":"/cluster0/fluke7/core0"}}},
{"id":"3","metadata":{"type":"core","id":1,"rank":0,"paths":{"containment":"/cluster0/fluke7/core1"}}},
{"id":"4","metadata":{"type":"memory","id":0,"rank":0,"unit":"GB","size":16,"paths":{"containment":"/cluster0/fluke7/memory0"}}},
{"id":"5","metadata":{"type":"node","basename":"fluke","name":"login","id":8,"rank":1,"paths":{"containment":"/cluster0/login"}}},
{"id":"6","metadata":{"type":"gpu","id":0,"rank":1,"paths":{"containment":"/cluster0/login/gpu0"}}}
],"edges":[
{"source":"0","target":"1"},{"source":"0","target":"5"},{"source":"1","target":"2"},
{"source":"1","target":"3"},{"source":"1","target":"4"},{"source":"5","target":"6"}
]}}"#;

/// The verbose form Fluxion wrote before 2024-09 (every key, `uniq_id`,
/// 2022-style edge metadata, a reverse `in` edge).
const FLUXION_VERBOSE: &str = r#"{"graph":{"nodes":[
{"id":"10","metadata":{"type":"cluster","basename":"tiny","name":"tiny0","id":0,"uniq_id":10,"rank":-1,"exclusive":false,"unit":"","size":1,"paths":{"containment":"/tiny0"}}},
{"id":"11","metadata":{"type":"node","basename":"node","name":"node1","id":1,"uniq_id":11,"rank":3,"exclusive":false,"unit":"","size":1,"properties":null,"paths":{"containment":"/tiny0/node1"}}},
{"id":"12","metadata":{"type":"core","basename":"core","name":"core5","id":5,"uniq_id":12,"rank":3,"exclusive":false,"unit":"","size":1,"status":1,"paths":{"containment":"/tiny0/node1/core5"}}}
],"edges":[
{"source":"10","target":"11","metadata":{"name":{"containment":"contains"}}},
{"source":"11","target":"10","metadata":{"name":{"containment":"in"}}},
{"source":"11","target":"12","metadata":{"subsystem":"containment"}}
],"directed":true}}"#;

/// Power subsystem: a panel outside containment feeding PDUs and nodes.
const POWER: &str = r#"{"graph":{"nodes":[
{"id":"0","metadata":{"type":"cluster","id":0,"rank":-1,"paths":{"containment":"/power0"}}},
{"id":"1","metadata":{"type":"rack","id":0,"rank":-1,"paths":{"containment":"/power0/rack0"}}},
{"id":"2","metadata":{"type":"pdu","id":0,"rank":-1,"paths":{"containment":"/power0/rack0/pdu0","power":"/powerpanel0/pdu0"}}},
{"id":"3","metadata":{"type":"node","id":0,"rank":-1,"paths":{"containment":"/power0/rack0/node0","power":"/powerpanel0/pdu0/node0"}}},
{"id":"4","metadata":{"type":"powerpanel","id":0,"rank":-1,"paths":{"power":"/powerpanel0"}}}
],"edges":[
{"source":"0","target":"1"},{"source":"1","target":"2"},{"source":"1","target":"3"},
{"source":"4","target":"2","metadata":{"subsystem":"power"}},
{"source":"2","target":"3","metadata":{"subsystem":"power"}}
]}}"#;

#[test]
fn reads_fluxion_compact_form_with_defaults() {
    let g = Graph::from_jgf_str(FLUXION_COMPACT).unwrap();
    assert_eq!(g.len(), 7);
    g.check_invariants().unwrap();
    let n = g.get(g.lookup("/cluster0/fluke7").unwrap()).unwrap();
    assert_eq!(n.type_name(), "node");
    assert_eq!(n.basename(), "fluke");
    assert_eq!(n.name(), "fluke7");
    assert_eq!(n.id(), Some(7));
    assert_eq!(n.rank(), Some(0));
    assert_eq!(n.uniq_id(), 1);
    assert_eq!(n.size(), 1);
    assert_eq!(n.unit(), "");
    assert_eq!(n.property("gpu-a100"), Some(""));
    let c0 = g.get(g.lookup("/cluster0/fluke7/core0").unwrap()).unwrap();
    assert!(c0.exclusive_marker());
    assert_eq!(c0.basename(), "core");
    let m = g
        .get(g.lookup("/cluster0/fluke7/memory0").unwrap())
        .unwrap();
    assert_eq!((m.size(), m.unit()), (16, "GB"));
    let login = g.get(g.lookup("/cluster0/login").unwrap()).unwrap();
    assert_eq!((login.name().as_ref(), login.id()), ("login", Some(8)));
    assert_eq!(
        g.aggregate_all().into_iter().collect::<Vec<_>>(),
        vec![
            ("cluster".into(), 1),
            ("core".into(), 2),
            ("gpu".into(), 1),
            ("memory".into(), 16),
            ("node".into(), 2)
        ]
    );
}

/// Read in Fluxion's compact form, written with every RFC 20 key, read
/// back to the same graph (issue 26, item 4).
#[test]
fn fluxion_compact_form_is_written_with_every_rfc20_key() {
    let compact_in: Value = serde_json::from_str(FLUXION_COMPACT).unwrap();
    assert!(check_rfc20(&compact_in).is_err());
    let g = Graph::from_jgf_str(FLUXION_COMPACT).unwrap();
    for style in [JgfStyle::Scheduling, JgfStyle::Full] {
        let v = g.to_jgf(style);
        check_rfc20(&v).unwrap();
        let h = Graph::from_jgf(&v).unwrap();
        assert_eq!(h.to_jgf(style), v);
    }
    let v = g.to_jgf(JgfStyle::Scheduling);
    assert_eq!(
        v["graph"]["nodes"][1]["metadata"],
        serde_json::json!({"type": "node", "uuid": "1", "basename": "fluke", "name": "fluke7",
            "id": 7, "uniq_id": 1, "rank": 0, "properties": {"gpu-a100": ""}, "unit": "",
            "exclusive": false, "size": 1, "paths": {"containment": "/cluster0/fluke7"}})
    );
    assert_eq!(
        v["graph"]["edges"][0],
        serde_json::json!({"source": "0", "target": "1",
            "metadata": {"subsystem": "containment", "relationship": "contains"}})
    );
    // the graph read back is the one read from the compact form
    let h = Graph::from_jgf(&v).unwrap();
    assert_eq!(h.aggregate_all(), g.aggregate_all());
    assert_eq!(
        h.to_jgf_string(JgfStyle::Full),
        g.to_jgf_string(JgfStyle::Full)
    );
}

#[test]
fn reads_fluxion_verbose_form() {
    let g = Graph::from_jgf_str(FLUXION_VERBOSE).unwrap();
    assert_eq!(g.len(), 3);
    let root = g.root().unwrap();
    assert_eq!(g.path(root).unwrap(), "/tiny0");
    let c = g.get(g.lookup("/tiny0/node1/core5").unwrap()).unwrap();
    assert_eq!(c.state(), State::Down);
    assert_eq!(c.uniq_id(), 12);
    assert_eq!(c.rank(), Some(3));
    // The reverse edge was ignored: one root, node1 below it.
    assert_eq!(g.roots().count(), 1);
    // `directed` on the graph is not vertex data; nothing else is kept.
    assert!(g.extra.is_empty());
    // Written compactly, it reads back to the same graph.
    let h = Graph::from_jgf_str(&g.to_jgf_string(JgfStyle::Scheduling)).unwrap();
    assert_eq!(
        h.to_jgf_string(JgfStyle::Scheduling),
        g.to_jgf_string(JgfStyle::Scheduling)
    );
    // The compact form drops status (Fluxion never writes it); Full keeps it.
    let f = Graph::from_jgf_str(&g.to_jgf_string(JgfStyle::Full)).unwrap();
    let c = f.get(f.lookup("/tiny0/node1/core5").unwrap()).unwrap();
    assert_eq!(c.state(), State::Down);
}

#[test]
fn reads_power_subsystem() {
    let g = Graph::from_jgf_str(POWER).unwrap();
    assert_eq!(g.len(), 5);
    let panel = VertexId(4);
    let p = g.get(panel).unwrap();
    assert!(!p.in_containment());
    assert_eq!(
        p.subsystem_paths().collect::<Vec<_>>(),
        vec![("power", "/powerpanel0")]
    );
    assert_eq!(g.lookup("/powerpanel0"), None);
    let edges: Vec<_> = g
        .edges()
        .map(|e| (e.source.0, e.target.0, e.subsystem))
        .collect();
    assert_eq!(edges, vec![(4, 2, "power"), (2, 3, "power")]);
    // the whole-graph aggregate is the containment root's: no power panel
    let root = g.containment_root().unwrap();
    assert_eq!(g.path(root).unwrap(), "/power0");
    assert_eq!(g.aggregate_all(), g.aggregate(root).unwrap());
    assert_eq!(g.aggregate_all().get("powerpanel"), None);
    let v = g.to_jgf(JgfStyle::Scheduling);
    check_rfc20(&v).unwrap();
    assert_eq!(
        v["graph"]["edges"][3]["metadata"],
        serde_json::json!({"subsystem": "power", "relationship": "supplies_to"})
    );
    assert_eq!(Graph::from_jgf(&v).unwrap().to_jgf(JgfStyle::Scheduling), v);
    let full = g.to_jgf_string(JgfStyle::Full);
    let h = Graph::from_jgf_str(&full).unwrap();
    assert_eq!(h.to_jgf_string(JgfStyle::Full), full);
}

#[test]
fn fluxion_id_defaults() {
    // No `id`: a node takes its name's digits, anything else its uniq id.
    let s = r#"{"graph":{"nodes":[
      {"id":"0","metadata":{"type":"cluster","paths":{"containment":"/cluster0"}}},
      {"id":"1","metadata":{"type":"node","basename":"cab","name":"cab1234","exclusive":true,"paths":{"containment":"/cluster0/cab1234"}}},
      {"id":"41","metadata":{"type":"core","paths":{"containment":"/cluster0/cab1234/core41"}}}
    ],"edges":[{"source":"1","target":"41"},{"source":"0","target":"1"}]}}"#;
    let g = Graph::from_jgf_str(s).unwrap();
    let n = g.get(g.lookup("/cluster0/cab1234").unwrap()).unwrap();
    assert_eq!(n.id(), Some(1234));
    assert!(!n.has_custom_name());
    assert_eq!(n.rank(), None);
    let c = g
        .get(g.lookup("/cluster0/cab1234/core41").unwrap())
        .unwrap();
    assert_eq!((c.id(), c.uniq_id()), (Some(41), 41));
    assert!(g.path_override.is_empty());
}

#[test]
fn string_ids_and_unknown_keys_are_kept() {
    let s = r#"{"graph":{"nodes":[
      {"id":"root-a","metadata":{"type":"cluster","id":0,"paths":{"containment":"/cluster0"},"agfilter":{"core":"used:0, total:1"}}},
      {"id":"c0","metadata":{"type":"core","id":0,"uuid":"c0","paths":{"containment":"/cluster0/core0"}}}
    ],"edges":[{"source":"root-a","target":"c0"}]}}"#;
    let g = Graph::from_jgf_str(s).unwrap();
    let r = g.get(g.root().unwrap()).unwrap();
    assert_eq!(r.uuid(), "root-a");
    let full = g.to_jgf_string(JgfStyle::Full);
    assert!(
        full.contains(r#""agfilter":{"core":"used:0, total:1"}"#),
        "{full}"
    );
    let h = Graph::from_jgf_str(&full).unwrap();
    assert_eq!(h.to_jgf_string(JgfStyle::Full), full);
    let flux = g.to_jgf_string(JgfStyle::Scheduling);
    assert!(
        flux.starts_with(r#"{"graph":{"nodes":[{"id":"root-a","#),
        "{flux}"
    );
}

#[test]
fn partial_graph_keeps_explicit_paths() {
    // A sub-tree whose root is not a top-level path (as in a find output
    // without its ancestors).
    let s = r#"{"graph":{"nodes":[
      {"id":"5","metadata":{"type":"socket","id":1,"rank":-1,"paths":{"containment":"/cluster0/node3/socket1"}}},
      {"id":"6","metadata":{"type":"core","id":9,"rank":-1,"paths":{"containment":"/cluster0/node3/socket1/core9"}}}
    ],"edges":[{"source":"5","target":"6"}]}}"#;
    let g = Graph::from_jgf_str(s).unwrap();
    let c = g.lookup("/cluster0/node3/socket1/core9").unwrap();
    assert_eq!(g.path(c).unwrap(), "/cluster0/node3/socket1/core9");
    let v = g.to_jgf(JgfStyle::Scheduling);
    check_rfc20(&v).unwrap();
    assert_eq!(
        v["graph"]["nodes"][1]["metadata"]["paths"],
        serde_json::json!({"containment": "/cluster0/node3/socket1/core9"})
    );
    let h = Graph::from_jgf(&v).unwrap();
    assert_eq!(h.to_jgf(JgfStyle::Scheduling), v);
}

#[test]
fn errors_name_the_offending_input() {
    let e = |s: &str| Graph::from_jgf_str(s).unwrap_err().to_string();
    assert_eq!(e("{}"), "JGF: missing required key 'graph'");
    assert_eq!(
        e(r#"{"graph":{"nodes":[]}}"#),
        "JGF: 'graph' lacks an 'edges' array"
    );
    assert!(e("{").starts_with("JGF: invalid JSON"));
    let node =
        |md: &str| format!(r#"{{"graph":{{"nodes":[{{"id":"7","metadata":{md}}}],"edges":[]}}}}"#);
    assert_eq!(
        e(&node(r#"{"paths":{}}"#)),
        "JGF: node 0 (id \"7\"): missing key 'type'"
    );
    assert_eq!(
        e(&node(r#"{"type":"core"}"#)),
        "JGF: node 0 (id \"7\"): missing 'paths' object"
    );
    assert_eq!(
        e(&node(r#"{"type":"core","paths":{},"size":-2}"#)),
        "JGF: node 0 (id \"7\"): negative size -2"
    );
    assert_eq!(
        e(&node(r#"{"type":"core","paths":{},"properties":{"a":1}}"#)),
        "JGF: node 0 (id \"7\"): property 'a' must be a string"
    );
    assert_eq!(
        e(&node(r#"{"type":"core","paths":{},"rank":"3"}"#)),
        "JGF: node 0 (id \"7\"): key 'rank' must be an integer"
    );
    assert_eq!(
        e(&node(r#"{"type":"core","paths":{},"status":7}"#)),
        "JGF: node 0 (id \"7\"): unknown status 7"
    );
    assert_eq!(
        e(r#"{"graph":{"nodes":[{"id":"x","metadata":{"type":"core","paths":{}}}],"edges":[]}}"#),
        "JGF: node 0 (id \"x\"): no 'id', and no integer uniq id to default it from"
    );
    let two = r#"{"id":"1","metadata":{"type":"a","id":1,"paths":{"containment":"/a1"}}},
                 {"id":"2","metadata":{"type":"b","id":2,"paths":{"containment":"/a1/b2"}}}"#;
    let with = |nodes: &str, edges: &str| {
        format!(r#"{{"graph":{{"nodes":[{nodes}],"edges":[{edges}]}}}}"#)
    };
    assert_eq!(
        e(&with(&format!("{two},{two}"), "")),
        "JGF: node 2 (id \"1\"): duplicate vertex id"
    );
    assert_eq!(
        e(&with(two, r#"{"source":"1","target":"9"}"#)),
        "JGF: edge 0: target vertex \"9\" not found"
    );
    assert_eq!(
        e(&with(
            two,
            r#"{"source":"1","target":"2"},{"source":"2","target":"1"}"#
        )),
        "JGF: edge 1: containment cycle through \"1\""
    );
    let three = format!(
        r#"{two},{{"id":"3","metadata":{{"type":"c","id":3,"paths":{{"containment":"/c3"}}}}}}"#
    );
    assert_eq!(
        e(&with(
            &three,
            r#"{"source":"1","target":"2"},{"source":"3","target":"2"}"#
        )),
        "JGF: edge 1: vertex \"2\" has two containment parents"
    );
    assert_eq!(
        e(&node(r#"{"type":"core","paths":{},"allocations":{"5":2}}"#)),
        "JGF: vertex \"7\": /core7: requested 2 units but only 1 available"
    );
    assert_eq!(
        e(&node(
            r#"{"type":"core","paths":{},"reservations":{"5":1}}"#
        )),
        "JGF: reservation of job 5 has no window in graph metadata"
    );
}

#[test]
fn records_below_an_exclusive_pool_are_rejected_on_load() {
    let s = r#"{"graph":{"nodes":[
      {"id":"0","metadata":{"type":"node","id":0,"paths":{"containment":"/node0"},"allocations":{"1":1}}},
      {"id":"1","metadata":{"type":"core","id":0,"paths":{"containment":"/node0/core0"},"allocations":{"1":1}}}
    ],"edges":[{"source":"0","target":"1"}]}}"#;
    let e = Graph::from_jgf_str(s).unwrap_err().to_string();
    assert!(e.contains("fully allocated"), "{e}");
}

fn rich() -> Graph {
    let (mut g, root) = cluster();
    let fluke = g.intern("fluke");
    let mem = g.intern("memory");
    let gb = g.intern("GB");
    let mut cores = Vec::new();
    for n in 0..2 {
        let p = g.pool("node").basename(fluke).id(n);
        let node = g.add_child(root, p).unwrap();
        g.set_property(node, "arch", "x86_64").unwrap();
        for c in 0..3 {
            let p = g.pool("core").id(c).rank(n);
            cores.push(g.add_child(node, p).unwrap());
        }
        g.add_child(node, Pool::new(mem).size(64).unit(gb).rank(n))
            .unwrap();
    }
    let p = g.pool("switch").name("ib-sw\"1\"");
    let sw = g.add_root(p);
    g.set_containment_member(sw, false).unwrap();
    g.set_subsystem_path(sw, "network", "/ib-sw\"1\"").unwrap();
    g.add_edge(sw, VertexId(1), "network", "connects").unwrap();
    g.tag(cores[0], "maint", None).unwrap();
    g.tag(cores[1], "owner", Some("ops\n")).unwrap();
    g.allocate(cores[0], 1, 100).unwrap();
    g.allocate(cores[4], 1, 100).unwrap();
    let m = g.lookup("/cluster0/fluke1/memory").unwrap();
    g.allocate(m, 10, 101).unwrap();
    g.reserve(m, 54, 102, 50, 90).unwrap();
    g.allocate_span(cores[5], 1, 103, 0, 40).unwrap();
    // States last: allocating on an out-of-service pool is refused.
    g.set_state(cores[2], State::Degraded).unwrap();
    g.set_state(VertexId(1), State::Down).unwrap();
    g.stage(cores[3]).unwrap();
    g.check_invariants().unwrap();
    g
}

#[test]
fn full_round_trip_loses_nothing() {
    let g = rich();
    let s = g.to_jgf_string(JgfStyle::Full);
    let h = Graph::from_jgf_str(&s).unwrap();
    h.check_invariants().unwrap();
    assert_eq!(h.to_jgf_string(JgfStyle::Full), s);
    assert_eq!(h.jobs(), g.jobs());
    for v in g.vertices() {
        assert_eq!(h.allocations(v).unwrap(), g.allocations(v).unwrap());
        assert_eq!(h.reservations(v).unwrap(), g.reservations(v).unwrap());
        assert_eq!(h.shared(v).unwrap(), g.shared(v).unwrap());
        let (a, b) = (g.get(v).unwrap(), h.get(v).unwrap());
        assert_eq!(a.tags().collect::<Vec<_>>(), b.tags().collect::<Vec<_>>());
        assert_eq!(a.state(), b.state());
        assert_eq!(a.staged(), b.staged());
        assert_eq!(a.uri(), b.uri());
    }
    assert_eq!(h.aggregate_all(), g.aggregate_all());
    assert_eq!(h.edges().count(), 1);
    // The RFC 20 keys are all present, and edges carry both metadata keys.
    let v = g.to_jgf(JgfStyle::Full);
    check_rfc20(&v).unwrap();
    let e = &v["graph"]["edges"][0]["metadata"];
    assert_eq!(e["subsystem"], "containment");
    assert_eq!(e["relationship"], "contains");
    assert_eq!(v["graph"]["metadata"]["jobs"]["102"]["kind"], "reserved");
}

#[test]
fn custom_hierarchy_round_trips() {
    let mut g = rich();
    g.set_hierarchy("default");
    let s = g.to_jgf_string(JgfStyle::Full);
    assert!(s.contains(r#""paths":{"default":"/cluster0"}"#));
    let h = Graph::from_jgf_str(&s).unwrap();
    assert_eq!(h.hierarchy(), "default");
    assert_eq!(h.to_jgf_string(JgfStyle::Full), s);
}

#[test]
fn scheduling_style_is_fluxion_readable_shape() {
    let g = rich();
    let v = g.to_jgf(JgfStyle::Scheduling);
    let n0 = &v["graph"]["nodes"][0];
    assert_eq!(n0["id"], "0");
    assert_eq!(
        n0["metadata"],
        serde_json::json!({"type":"cluster","uuid":"0","basename":"cluster","name":"cluster0",
            "id":0,"uniq_id":0,"rank":-1,"properties":{},"unit":"","exclusive":false,"size":1,
            "paths":{"containment":"/cluster0"}})
    );
    check_rfc20(&v).unwrap();
    let mem = v["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["metadata"]["type"] == "memory")
        .unwrap();
    // Unassigned id: written as -1 with the name spelled out.
    assert_eq!(mem["metadata"]["id"], -1);
    assert_eq!(mem["metadata"]["name"], "memory");
    assert_eq!(mem["metadata"]["size"], 64);
    assert_eq!(mem["metadata"]["unit"], "GB");
    assert_eq!(
        v["graph"]["edges"][0]["metadata"]["relationship"],
        "contains"
    );
    // Reading it back gives the same pools (lossy only for RFC 4 extras).
    let h = Graph::from_jgf(&v).unwrap();
    assert_eq!(
        h.to_jgf_string(JgfStyle::Scheduling),
        g.to_jgf_string(JgfStyle::Scheduling)
    );
    let m = h.get(h.lookup("/cluster0/fluke1/memory").unwrap()).unwrap();
    assert_eq!((m.id(), m.name().as_ref()), (None, "memory"));
}

fn arb_graph() -> impl Strategy<Value = Graph> {
    let node = (
        0..4usize,
        1..5u64,
        proptest::bool::ANY,
        0..3u8,
        "[a-z]{1,3}",
    );
    proptest::collection::vec(node, 1..25).prop_map(|spec| {
        let (mut g, root) = cluster();
        let mut vs = vec![root];
        for (k, (parent, size, named, kind, word)) in spec.into_iter().enumerate() {
            let par = vs[parent % vs.len()];
            let ty = ["node", "core", "gpu"][kind as usize];
            let mut p = g.pool(ty).id(k as i64).size(size).rank((k % 3) as i64);
            if named {
                p = p.name(format!("{word}-{k}"));
            }
            let v = g.add_child(par, p).unwrap();
            if k % 4 == 0 {
                g.set_property(v, &word, "x").unwrap();
            }
            if k % 5 == 1 {
                g.tag(v, "t", if named { Some("v") } else { None }).unwrap();
            }
            let _ = g.allocate(v, 1 + (k as u64 % size), (k % 3) as u64 + 1);
            vs.push(v);
        }
        g
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn full_round_trip_is_identity(g in arb_graph()) {
        let s = g.to_jgf_string(JgfStyle::Full);
        prop_assert_eq!(check_rfc20(&serde_json::from_str(&s).unwrap()), Ok(()));
        let h = Graph::from_jgf_str(&s).unwrap();
        h.check_invariants().unwrap();
        prop_assert_eq!(h.to_jgf_string(JgfStyle::Full), s);
        prop_assert_eq!(h.jobs(), g.jobs());
    }

    #[test]
    fn scheduling_round_trip_is_identity(g in arb_graph()) {
        let s = g.to_jgf_string(JgfStyle::Scheduling);
        prop_assert_eq!(check_rfc20(&serde_json::from_str(&s).unwrap()), Ok(()));
        let h = Graph::from_jgf_str(&s).unwrap();
        prop_assert_eq!(h.to_jgf_string(JgfStyle::Scheduling), s);
        prop_assert_eq!(h.len(), g.len());
        for v in g.vertices() {
            let hv = h.lookup(&g.path(v).unwrap()).unwrap();
            prop_assert_eq!(h.size(hv).unwrap(), g.size(v).unwrap());
            prop_assert_eq!(h.get(hv).unwrap().name(), g.get(v).unwrap().name());
        }
    }
}
