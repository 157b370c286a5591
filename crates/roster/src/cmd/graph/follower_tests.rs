use super::*;
use model::matcher::Request;
use serde_json::json;

fn ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap()
}

fn r(ranks: &str, hosts: &str) -> Value {
    json!({"version": 1, "execution": {"R_lite": [{"rank": ranks, "children": {"core": "0-3"}}],
           "nodelist": [hosts], "starttime": 0.0, "expiration": 0.0}})
}

fn nodes(f: &Follower) -> u64 {
    f.graph().aggregate_all().get("node").copied().unwrap_or(0)
}

fn node_req() -> Request {
    Request::nodes(1, 1, 1, 0, true)
}

/// Match one node for `jobid` on the live graph: its path.
fn match_node(f: &mut Follower, jobid: u64) -> String {
    let m = f.graph_mut().match_allocate(&node_req(), jobid);
    let m = m.unwrap().expect("a node matched");
    f.graph().path(m.nodes[0]).unwrap()
}

#[test]
fn v1_builds_then_follows_up_down_and_shrink() {
    let mut f = Follower::new(None);
    let a = f
        .apply(&json!({"resources": r("0-3", "n[0-3]"), "up": "0-2"}))
        .unwrap();
    assert!(a.built);
    assert_eq!(a.down, ids("3"));
    assert_eq!(nodes(&f), 3);
    let n3 = f.graph().lookup("/cluster0/n3").unwrap();
    assert_eq!(f.graph().get(n3).unwrap().state(), State::Down);
    // drain (down) leaves Available at once; up brings it back
    let a = f.apply(&json!({"down": "1"})).unwrap();
    assert_eq!((a.down.clone(), a.built), (ids("1"), false));
    assert_eq!(nodes(&f), 2);
    let n1 = f.graph().lookup("/cluster0/n1").unwrap();
    assert_eq!(f.graph().available(n1).unwrap(), 0);
    f.apply(&json!({"up": "1,3"})).unwrap();
    assert_eq!(nodes(&f), 4);
    // match on the live graph, then the node it took is lost (v1 shrink)
    assert_eq!(match_node(&mut f, 7), "/cluster0/n0");
    let a = f.apply(&json!({"down": "0", "shrink": "0"})).unwrap();
    assert_eq!(a.doomed, vec![7]);
    assert!(a.removed.is_empty());
    assert_eq!(f.shrinking(), &ids("0"));
    // up for a shrunk target is ignored
    f.apply(&json!({"up": "0"})).unwrap();
    assert_eq!(nodes(&f), 3);
    // once the job is freed, the lost node goes; v1 has nothing to release
    assert_eq!(f.free_job(7).unwrap(), ids("0"));
    assert!(f.graph().lookup("/cluster0/n0").is_none());
    assert!(f.releasable().is_empty());
    let a = f.apply(&json!({"expiration": 100.0})).unwrap();
    assert_eq!(a.response, Response::Expiration(100.0));
    f.graph().check_invariants().unwrap();
}

#[test]
fn groups_grow_offline_shrink_release() {
    let mut f = Follower::new(Some("batch"));
    let a = f
        .apply(&json!({"type": "grow", "resources": r("0-3", "n[0-3]"), "online": "0-2", "offline": "3"}))
        .unwrap();
    assert!(a.built);
    assert_eq!(nodes(&f), 3);
    f.apply(&json!({"type": "offline", "targets": "2"}))
        .unwrap();
    f.apply(&json!({"type": "online", "targets": "3"})).unwrap();
    assert_eq!(nodes(&f), 3);
    assert_eq!(match_node(&mut f, 1), "/cluster0/n0");
    // shrink 0-1: 1 is free → unlinked and releasable; 0 is held → doomed
    let a = f
        .apply(&json!({"type": "shrink", "targets": "0-1"}))
        .unwrap();
    assert_eq!((a.removed.clone(), a.doomed.clone()), (ids("1"), vec![1]));
    assert_eq!(f.releasable(), &ids("1"));
    assert!(f.graph().lookup("/cluster0/n1").is_none());
    // nothing new lands on the held, shrunk node
    assert!(f
        .graph_mut()
        .match_allocate(&node_req(), 2)
        .unwrap()
        .is_some());
    assert_eq!(f.graph().job(2).unwrap().vertices.len(), 1);
    let held2 = f
        .graph()
        .path(f.graph().job(2).unwrap().vertices[0])
        .unwrap();
    assert_eq!(held2, "/cluster0/n3");
    f.released(&ids("1")).unwrap();
    assert!(f.released(&ids("1")).is_err(), "released twice");
    assert_eq!(f.free_job(1).unwrap(), ids("0"));
    assert_eq!(f.releasable(), &ids("0"));
    f.released(&ids("0")).unwrap();
    // grow brings a target back, offline
    let a = f
        .apply(&json!({"type": "grow", "resources": r("1", "n1"), "online": "", "offline": "1"}))
        .unwrap();
    assert!(!a.built);
    let n1 = f.graph().lookup("/cluster0/n1").expect("n1 merged back");
    assert_eq!(f.graph().get(n1).unwrap().state(), State::Down);
    f.apply(&json!({"type": "online", "targets": "1"})).unwrap();
    assert_eq!(f.graph().available(n1).unwrap(), 1);
    f.graph().check_invariants().unwrap();
}

#[test]
fn restart_rebuilds_and_keeps_running_jobs() {
    let mut f = Follower::new(None);
    f.apply(&json!({"resources": r("0-3", "n[0-3]"), "up": "0-3"}))
        .unwrap();
    f.graph_mut()
        .match_allocate(&node_req(), 5)
        .unwrap()
        .unwrap();
    f.graph_mut()
        .match_allocate(&Request::slots(1, 2, 0), 6)
        .unwrap()
        .unwrap();
    f.restart();
    // the service came back with 0-2 only, 2 down
    let a = f
        .apply(&json!({"resources": r("0-2", "n[0-2]"), "up": "0-1"}))
        .unwrap();
    assert!(a.built);
    assert!(a.doomed.is_empty());
    assert_eq!(f.graph().jobs().len(), 2);
    let n0 = f.graph().lookup("/cluster0/n0").unwrap();
    assert_eq!(f.graph().exclusive(n0).unwrap(), Some(5));
    assert_eq!(nodes(&f), 1, "n0 held, n2 down: only n1 offers");
    // a job on a vanished node is doomed
    f.restart();
    let a = f
        .apply(&json!({"resources": r("1-2", "n[1-2]"), "up": "1-2"}))
        .unwrap();
    assert!(a.doomed.contains(&5), "{a:?}");
    f.graph().check_invariants().unwrap();
}

#[test]
fn scheduling_jgf_is_used_when_present() {
    let mut g = Graph::from_r_value(&r("0-1", "n[0-1]"), true).unwrap();
    let n1 = g.lookup("/cluster0/n1").unwrap();
    g.set_property(n1, "fast", "").unwrap();
    let mut rr = r("0-1", "n[0-1]");
    rr["scheduling"] = g.to_jgf(model::jgf::JgfStyle::Full);
    let mut f = Follower::new(None);
    f.apply(&json!({"resources": rr, "up": "0-1"})).unwrap();
    let n1 = f.graph().lookup("/cluster0/n1").unwrap();
    assert_eq!(f.graph().get(n1).unwrap().property("fast"), Some(""));
    // protocol errors are reported, not applied
    assert!(matches!(
        f.apply(&json!({"up": 3})),
        Err(FollowError::Protocol(_))
    ));
}

/// The service drops an excluded rank from R_lite and keeps the whole
/// `scheduling` JGF: that rank is down and never allocated, even when an
/// update names it (issue 26, item 7).
#[test]
fn excluded_rank_of_a_scheduling_graph_is_never_allocated() {
    let g = Graph::from_r_value(&r("0-2", "n[0-2]"), true).unwrap();
    let mut rr = r("0-1", "n[0-1]");
    rr["scheduling"] = g.to_jgf(model::jgf::JgfStyle::Scheduling);
    let mut f = Follower::new(None);
    f.apply(&json!({"resources": rr.clone(), "up": ""}))
        .unwrap();
    // nothing online: nothing to allocate
    assert_eq!(f.graph_mut().match_allocate(&node_req(), 1).unwrap(), None);
    f.apply(&json!({"up": "0-1"})).unwrap();
    let n2 = f.graph().lookup("/cluster0/n2").unwrap();
    assert_eq!(f.graph().get(n2).unwrap().state(), State::Down);
    assert_eq!(nodes(&f), 2);
    let all3 = Request::nodes(3, 1, 1, 0, true);
    assert_eq!(f.graph_mut().match_allocate(&all3, 2).unwrap(), None);
    for job in 3..5 {
        let m = f
            .graph_mut()
            .match_allocate(&node_req(), job)
            .unwrap()
            .unwrap();
        assert_ne!(f.graph().path(m.nodes[0]).unwrap(), "/cluster0/n2");
    }
    assert_eq!(f.graph_mut().match_allocate(&node_req(), 9).unwrap(), None);
    // after a restart, the rebuilt graph fences it again
    f.restart();
    f.apply(&json!({"resources": rr, "up": "0-1"})).unwrap();
    let n2 = f.graph().lookup("/cluster0/n2").unwrap();
    assert_eq!(f.graph().get(n2).unwrap().state(), State::Down);
}
