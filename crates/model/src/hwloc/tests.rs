//! hwloc → graph: structure, ids, names, and agreement with flux-core's
//! counts (the `topo` crate) on every fixture.

use super::*;
use rset::Rset;

const TWO_SOCKETS: &str = include_str!("../../tests/data/hwloc/v2-2socket-2gpu.xml");
const RESTRICTED: &str = include_str!("../../tests/data/hwloc/v2-restricted-amd.xml");
const V1_NOHOST: &str = include_str!("../../tests/data/hwloc/v1-nohost.xml");
/// Real `lstopo-no-graphics --of xml` output (hwloc 2.9, a 2-core VM with a
/// virtio disk and NIC), and the same exported as v1.
const LSTOPO: &str = include_str!("../../tests/data/hwloc/lstopo-vm.xml");
const LSTOPO_V1: &str = include_str!("../../tests/data/hwloc/lstopo-vm-v1.xml");

fn paths(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = g.root() {
        g.walk(r, |g, v, _| {
            out.push(g.path(v).unwrap_or_default());
            crate::Visit::Continue
        })
        .unwrap();
    }
    out
}

#[test]
fn v2_sockets_cores_and_gpus_by_locality() {
    let g = Graph::from_hwloc_xml(TWO_SOCKETS, &HwlocOptions::default()).unwrap();
    g.check_invariants().unwrap();
    let want: Vec<String> = [
        "/cluster0",
        "/cluster0/tiny7",
        "/cluster0/tiny7/socket0",
        "/cluster0/tiny7/socket0/core0",
        "/cluster0/tiny7/socket0/core1",
        "/cluster0/tiny7/socket0/core2",
        "/cluster0/tiny7/socket0/core3",
        "/cluster0/tiny7/socket0/gpu0",
        "/cluster0/tiny7/socket1",
        "/cluster0/tiny7/socket1/core4",
        "/cluster0/tiny7/socket1/core5",
        "/cluster0/tiny7/socket1/core6",
        "/cluster0/tiny7/socket1/core7",
        "/cluster0/tiny7/socket1/gpu1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(paths(&g), want);
    let n = g.get(g.lookup("/cluster0/tiny7").unwrap()).unwrap();
    assert_eq!(
        (n.type_name(), n.basename(), n.id()),
        ("node", "tiny", Some(7))
    );
    assert_eq!(n.rank(), Some(0));
    let c = g
        .get(g.lookup("/cluster0/tiny7/socket1/core5").unwrap())
        .unwrap();
    assert_eq!((c.id(), c.rank(), c.size()), (Some(5), Some(0), 1));
    let agg: Vec<(String, u64)> = g.aggregate_all().into_iter().collect();
    assert_eq!(
        agg,
        [
            ("cluster", 1),
            ("core", 8),
            ("gpu", 2),
            ("node", 1),
            ("socket", 2)
        ]
        .iter()
        .map(|&(t, n)| (t.to_string(), n))
        .collect::<Vec<_>>()
    );
}

/// The graph's R is what flux-core derives from the same XML.
#[test]
fn r_agrees_with_flux_core_counts() {
    for (xml, host) in [
        (TWO_SOCKETS, "tiny7"),
        (RESTRICTED, "corona12"),
        (V1_NOHOST, "node0"),
        (LSTOPO, "vm"),
        (LSTOPO_V1, "vm"),
    ] {
        let t = topo::from_hwloc_xml(xml).unwrap();
        let g = Graph::from_hwloc_xml(xml, &HwlocOptions::default()).unwrap();
        let mut children = serde_json::Map::new();
        children.insert("core".into(), t.cores.encode().into());
        if !t.gpus.is_empty() {
            children.insert("gpu".into(), t.gpus.encode().into());
        }
        let want = Rset::from_json(&serde_json::json!({"version":1,"execution":{
            "R_lite":[{"rank":"0","children":children}],"nodelist":[host]}}))
        .unwrap()
        .to_json();
        assert_eq!(g.to_r(None).unwrap(), want, "{host}");
    }
}

#[test]
fn real_lstopo_output() {
    for xml in [LSTOPO, LSTOPO_V1] {
        let g = Graph::from_hwloc_xml(xml, &HwlocOptions::default()).unwrap();
        assert_eq!(
            paths(&g),
            [
                "/cluster0",
                "/cluster0/vm",
                "/cluster0/vm/socket0",
                "/cluster0/vm/socket0/core0",
                "/cluster0/vm/socket0/core1",
            ]
        );
        let n = g.get(g.lookup("/cluster0/vm").unwrap()).unwrap();
        assert_eq!((n.basename(), n.id()), ("vm", None));
    }
}

#[test]
fn allowed_cpuset_drops_packages_and_machine_level_gpus_sit_on_the_node() {
    let g = Graph::from_hwloc_xml(RESTRICTED, &HwlocOptions::default()).unwrap();
    let p = paths(&g);
    assert_eq!(
        p,
        [
            "/cluster0",
            "/cluster0/corona12",
            "/cluster0/corona12/socket0",
            "/cluster0/corona12/socket0/core0",
            "/cluster0/corona12/socket0/core1",
            "/cluster0/corona12/socket0/core2",
            "/cluster0/corona12/socket0/core3",
            // RSMI and OpenCL views of one card count once.
            "/cluster0/corona12/gpu0",
        ]
    );
}

#[test]
fn v1_without_hostname_uses_fallback_or_rank() {
    let g = Graph::from_hwloc_xml(V1_NOHOST, &HwlocOptions::default()).unwrap();
    assert!(g.lookup("/cluster0/node0/socket1/core3").is_some());
    let opts = HwlocOptions {
        rank: 3,
        hostname: Some("fluke42".into()),
        sockets: true,
    };
    let g = Graph::from_hwloc_xml(V1_NOHOST, &opts).unwrap();
    let n = g.get(g.lookup("/cluster0/fluke42").unwrap()).unwrap();
    assert_eq!((n.id(), n.rank()), (Some(42), Some(3)));
    let c = g
        .get(g.lookup("/cluster0/fluke42/socket0/core1").unwrap())
        .unwrap();
    assert_eq!(c.rank(), Some(3));
    let opts = HwlocOptions {
        rank: 3,
        hostname: None,
        sockets: false,
    };
    let g = Graph::from_hwloc_xml(V1_NOHOST, &opts).unwrap();
    assert!(g.lookup("/cluster0/node3/core3").is_some());
    assert!(g.lookup("/cluster0/node3/socket0").is_none());
}

#[test]
fn several_nodes_in_one_cluster_and_matching() {
    let mut g = Graph::new();
    let cl = g.intern("cluster");
    let root = g.add_root(Pool::new(cl).id(0));
    g.add_hwloc_node(root, TWO_SOCKETS, &HwlocOptions::default())
        .unwrap();
    let opts = HwlocOptions {
        rank: 1,
        ..HwlocOptions::default()
    };
    g.add_hwloc_node(root, RESTRICTED, &opts).unwrap();
    g.check_invariants().unwrap();
    // A slot of 5 cores and a gpu fits only on tiny7.
    let req = crate::matcher::Request::slots(1, 5, 1);
    let m = g.match_allocate(&req, 1).unwrap().unwrap();
    assert_eq!(g.path(m.nodes[0]).unwrap(), "/cluster0/tiny7");
    let r = g.to_r(Some(1)).unwrap();
    assert_eq!(
        r["execution"]["R_lite"],
        serde_json::json!([{"rank":"0","children":{"core":"0-4","gpu":"0"}}])
    );
}

#[test]
fn errors_name_the_problem() {
    let e = Graph::from_hwloc_xml("<topology><object", &HwlocOptions::default()).unwrap_err();
    assert!(matches!(e, ModelError::Hwloc(_)), "{e}");
    assert!(
        e.to_string()
            .starts_with("hwloc: hwloc XML syntax error at line 1"),
        "{e}"
    );
    let e = Graph::from_hwloc_xml("<foo/>", &HwlocOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "hwloc: invalid hwloc XML topology at line 1, column 1: root element is <foo>, expected <topology>"
    );
}

#[test]
fn local_topology_is_flat() {
    let t = Topology {
        hostname: Some("here9".into()),
        cores: idset::IdSet::parse("0-3").unwrap(),
        gpus: idset::IdSet::parse("0").unwrap(),
    };
    let g = Graph::from_topology(&t, &HwlocOptions::default()).unwrap();
    assert_eq!(
        paths(&g),
        [
            "/cluster0",
            "/cluster0/here9",
            "/cluster0/here9/core0",
            "/cluster0/here9/core1",
            "/cluster0/here9/core2",
            "/cluster0/here9/core3",
            "/cluster0/here9/gpu0",
        ]
    );
    // And the real machine, whatever it has.
    if let Ok(t) = topo::discover_local() {
        let g = Graph::from_topology(&t, &HwlocOptions::default()).unwrap();
        assert_eq!(
            g.aggregate_all().get("core").copied().unwrap_or(0),
            t.cores.len()
        );
    }
}
