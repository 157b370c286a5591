//! Agents and liveness in the service core, with a simulated clock.

mod common;

use common::*;
use eventlog::Event;
use roster_core::errno::*;
use roster_core::*;
use rpc::{ReplyTo, Request, Role};
use serde_json::{json, Value};

/// fake[0-3], cores 0-3; fake3 appears twice (ranks 3 and 4).
fn inventory() -> Inventory {
    inventory_of("0-4", &["fake[0-3]", "fake3"])
}

struct H {
    svc: Service,
    now: f64,
    next_conn: u64,
    /// Everything the service output, for event checks.
    log: Vec<Output>,
}

fn start(settings: Settings) -> H {
    let (svc, _) = start_service(Init {
        now: 1000.0,
        inventory: Some(inventory()),
        settings,
        ..Default::default()
    });
    H {
        svc,
        now: 1000.0,
        next_conn: 1,
        log: Vec::new(),
    }
}

fn settings(torpid: f64, offline: f64) -> Settings {
    Settings {
        torpid_max: torpid,
        offline_timeout: offline,
        liveness_batch: 0.0,
        ..Default::default()
    }
}

fn local_r(cores: &str) -> Value {
    json!({"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":cores}}],"nodelist":["whatever"],"starttime":0.0,"expiration":0.0}})
}

impl H {
    fn input(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.svc.handle(self.now, input, &mut out);
        self.log.extend(out.iter().cloned());
        out
    }

    /// Say hello on a fresh connection; returns (conn, first reply).
    fn hello(&mut self, payload: Value, role: Role) -> (u64, Result<Value, RpcError>) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let req = request(conn, 1, "resource.agent", payload, true, role);
        let out = self.input(Input::Request(req));
        let to = ReplyTo { conn, matchtag: 1 };
        let first = replies_to(&out, to).into_iter().next().expect("a reply");
        (conn, first)
    }

    /// Why an owner's hello is refused: errno and message.
    fn refused(&mut self, hello: Value) -> (i32, String) {
        let e = self.hello(hello, Role::Owner).1.unwrap_err();
        (e.errnum, e.errstr.unwrap_or_default())
    }

    fn join(&mut self, host: &str) -> (u64, u32) {
        let (conn, r) = self.hello(json!({"hostname": host}), Role::Owner);
        let r = r.expect("accepted");
        (conn, r["rank"].as_u64().unwrap() as u32)
    }

    /// Agents of `hosts` join, then a tick; their connections.
    fn joined<const N: usize>(&mut self, hosts: [&str; N]) -> [u64; N] {
        let conns = hosts.map(|host| self.join(host).0);
        self.tick();
        conns
    }

    /// The `name` events persisted so far.
    fn persisted(&self, name: &str) -> Vec<Event> {
        self.log
            .iter()
            .filter_map(|o| match o {
                Output::Persist(e) if e.name == name => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    fn heartbeat(&mut self, conn: u64, tag: u32) -> Result<Value, RpcError> {
        let req = request(
            conn,
            tag,
            "resource.agent-heartbeat",
            json!({}),
            false,
            Role::Owner,
        );
        let out = self.input(Input::Request(req));
        replies_to(
            &out,
            ReplyTo {
                conn,
                matchtag: tag,
            },
        )
        .into_iter()
        .next()
        .expect("a heartbeat reply")
    }

    fn tick(&mut self) -> Vec<Output> {
        self.input(Input::Tick)
    }

    fn advance(&mut self, secs: f64) -> Vec<Output> {
        self.now += secs;
        self.tick()
    }
}

fn journal_tail(svc: &Service, n: usize) -> Vec<(String, String)> {
    let evs: Vec<_> = svc.journal().events().collect();
    evs[evs.len().saturating_sub(n)..]
        .iter()
        .map(|e| {
            let id = e
                .get("idset")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            (e.name.clone(), id)
        })
        .collect()
}

fn ev(name: &str, ids: &str) -> (String, String) {
    (name.to_string(), ids.to_string())
}

/// The errno ending the agent stream (matchtag 1) of connection `conn`:
/// its only reply in `out`.
fn stream_end(out: &[Output], conn: u64) -> i32 {
    let end = replies_to(out, ReplyTo { conn, matchtag: 1 });
    assert_eq!(end.len(), 1, "{end:?}");
    end[0].clone().unwrap_err().errnum
}

#[test]
fn an_agent_certificate_speaks_for_its_own_host_only() {
    let mut h = start(settings(30.0, 60.0));
    let (_, r) = h.hello(json!({"hostname": "fake1"}), Role::Agent("fake0".into()));
    let e = r.unwrap_err();
    assert_eq!(e.errnum, rpc::errno::EPERM);
    assert_eq!(
        e.message(),
        "agent hello: the certificate of fake0 may not speak for host fake1"
    );
    assert!(
        h.log.iter().any(|o| matches!(o, Output::Log { msg, .. }
            if msg == "refused an agent: agent hello: the certificate of fake0 may not speak for host fake1")),
        "the refusal is logged by the service"
    );
    let (conn, r) = h.hello(json!({"hostname": "fake0"}), Role::Agent("fake0".into()));
    assert_eq!(r.unwrap()["rank"], 0);
    h.tick();
    assert_eq!(h.svc.online().encode(), "0");
    // Its heartbeats (same connection) are accepted.
    assert!(h.heartbeat(conn, 2).is_ok());
    // A user or admin credential cannot hold an agent session.
    for role in [Role::Admin, Role::User, Role::Scheduler, Role::Guest] {
        let (_, r) = h.hello(json!({"hostname": "fake2"}), role.clone());
        assert_eq!(r.unwrap_err().errnum, rpc::errno::EPERM, "{role:?}");
    }
}

#[test]
fn a_session_line_is_a_one_way_heartbeat() {
    let mut h = start(settings(2.0, 60.0));
    let (conn, rank) = h.join("fake1");
    h.tick();
    let no_reply = |out: &[Output]| !out.iter().any(|o| matches!(o, Output::Reply { .. }));
    for _ in 0..3 {
        h.now += 1.5;
        let out = h.input(Input::SessionLine {
            conn,
            payload: json!({}),
        });
        assert!(no_reply(&out), "{out:?}");
        h.tick();
        assert!(h.svc.torpid().is_empty());
    }
    h.advance(2.5);
    assert_eq!(h.svc.torpid().encode(), rank.to_string());
    // A line where no agent said hello: nothing to answer, nothing done.
    let out = h.input(Input::SessionLine {
        conn: 999,
        payload: json!({}),
    });
    assert!(no_reply(&out), "{out:?}");
}

#[test]
fn hello_maps_hosts_to_ranks_and_batches_online() {
    let mut h = start(settings(30.0, 60.0));
    let (_, r0) = h.join("fake0");
    let (_, r1) = h.join("fake1");
    // fake3 has ranks 3 and 4: the first free one each time.
    let (_, r3) = h.join("fake3");
    let (_, r4) = h.join("fake3");
    assert_eq!((r0, r1, r3, r4), (0, 1, 3, 4));
    // Not online before the tick that ends the batch.
    assert!(h.svc.online().is_empty());
    h.tick();
    assert_eq!(h.svc.online().encode(), "0-1,3-4");
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("online", "0-1,3-4")]);
    assert_eq!(h.svc.agents(), 4);
    // The hello reply carries the rank and the timers.
    let (_, r) = h.hello(json!({"hostname": "fake2"}), Role::Owner);
    let r = r.unwrap();
    assert_eq!(r["rank"], 2);
    assert_eq!(r["hostname"], "fake2");
    assert_eq!(r["size"], 5);
    assert_eq!(r["torpid-max"], 30.0);
    assert_eq!(r["heartbeat"], 5.0);
}

#[test]
fn refusals() {
    let mut h = start(settings(30.0, 60.0));
    assert_eq!(
        h.refused(json!({"hostname": "nosuch"})),
        (
            ENOENT,
            "unknown host nosuch: it is not in the nodelist of R".into()
        )
    );
    assert_eq!(h.refused(json!({})).0, EPROTO);
    // Guests may not be agents.
    let (_, e) = h.hello(json!({"hostname": "fake0"}), Role::Guest);
    assert_eq!(e.unwrap_err().errnum, EPERM);
    // A second agent for a live rank.
    h.join("fake0");
    assert_eq!(
        h.refused(json!({"hostname": "fake0"})),
        (
            EEXIST,
            "rank 0 (fake0) is already claimed by a live agent".into()
        )
    );
    h.join("fake3");
    h.join("fake3");
    assert_eq!(
        h.refused(json!({"hostname": "fake3"})).1,
        "every rank of host fake3 (3-4) is already claimed by a live agent"
    );
    // An explicit rank must belong to the host.
    assert_eq!(h.refused(json!({"hostname": "fake1", "rank": 2})).0, EINVAL);
    assert_eq!(
        h.refused(json!({"hostname": "fake1", "rank": -1})).0,
        EPROTO
    );
    // R with two nodes.
    let two = json!({"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"starttime":0.0,"expiration":0.0}});
    let (errnum, msg) = h.refused(json!({"hostname": "fake1", "R": two}));
    assert_eq!(errnum, EPROTO);
    assert!(msg.contains("exactly one node"), "{msg}");
    // Non-streaming hello.
    let out = h.input(Input::Request(request(
        999,
        1,
        "resource.agent",
        json!({"hostname": "fake1"}),
        false,
        Role::Owner,
    )));
    assert_eq!(
        replies_to(
            &out,
            ReplyTo {
                conn: 999,
                matchtag: 1
            }
        )[0]
        .clone()
        .unwrap_err()
        .errnum,
        EPROTO
    );
    // A heartbeat on a connection without an agent: an agent cannot speak
    // for a rank it does not own.
    assert_eq!(h.heartbeat(12345, 2).unwrap_err().errnum, EPROTO);
    h.tick();
    assert_eq!(h.svc.online().encode(), "0,3-4");
}

#[test]
fn disconnect_is_offline_and_leave_rejoin_nets_out() {
    let mut h = start(settings(30.0, 60.0));
    let [c0, c1] = h.joined(["fake0", "fake1"]);
    h.input(Input::Disconnect(c0));
    h.input(Input::Disconnect(c1));
    h.tick();
    assert!(h.svc.online().is_empty());
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("offline", "0-1")]);
    // Leave and rejoin within a batch: no event.
    let (c0, _) = h.join("fake0");
    h.tick();
    let n = h.svc.journal().events().count();
    h.input(Input::Disconnect(c0));
    h.join("fake0");
    h.tick();
    assert_eq!(h.svc.journal().events().count(), n);
    assert_eq!(h.svc.online().encode(), "0");
}

#[test]
fn torpid_then_lively_then_offline_timeout() {
    let mut h = start(settings(2.0, 5.0));
    let [c0, c1, c2] = h.joined(["fake0", "fake1", "fake2"]);
    assert_eq!(h.svc.up().encode(), "0-2");
    // 0 keeps beating, 1 and 2 go silent.
    for _ in 0..3 {
        h.now += 0.6;
        h.heartbeat(c0, 2).unwrap();
        h.tick();
    }
    assert!(h.svc.torpid().is_empty());
    h.now += 0.6; // 2.4 s after hello
    h.heartbeat(c0, 3).unwrap();
    h.tick();
    assert_eq!(h.svc.torpid().encode(), "1-2");
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("torpid", "1-2")]);
    // Torpid: down for scheduling, not drained, still online.
    assert_eq!(h.svc.up().encode(), "0");
    assert!(h.svc.drained().is_empty());
    assert_eq!(h.svc.online().encode(), "0-2");
    let ss = {
        let out = h.input(Input::Request(request(
            500,
            1,
            "resource.status",
            json!({}),
            false,
            Role::Owner,
        )));
        replies_to(
            &out,
            ReplyTo {
                conn: 500,
                matchtag: 1,
            },
        )[0]
        .clone()
        .unwrap()
    };
    assert_eq!(ss["torpid"], "1-2");
    // 1 comes back.
    h.heartbeat(c1, 2).unwrap();
    h.tick();
    assert_eq!(h.svc.torpid().encode(), "2");
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("lively", "1")]);
    // 2 stays silent past offline-timeout: its stream ends, it goes
    // offline and is no longer torpid.
    h.now += 1.0; // 3.4
    h.heartbeat(c0, 4).unwrap();
    h.heartbeat(c1, 3).unwrap();
    h.tick();
    h.now += 1.7; // 5.1
    h.heartbeat(c0, 5).unwrap();
    h.heartbeat(c1, 4).unwrap();
    let out = h.tick();
    assert_eq!(stream_end(&out, c2), ETIMEDOUT);
    assert_eq!(h.svc.online().encode(), "0-1");
    assert!(h.svc.torpid().is_empty());
    assert_eq!(
        journal_tail(&h.svc, 2),
        vec![ev("offline", "2"), ev("lively", "2")]
    );
    // Its heartbeats no longer count; a late Disconnect changes nothing.
    assert_eq!(h.heartbeat(c2, 9).unwrap_err().errnum, EPROTO);
    h.input(Input::Disconnect(c2));
    h.tick();
    assert_eq!(h.svc.online().encode(), "0-1");
    // The rank is free again.
    let (_, r) = h.join("fake2");
    assert_eq!(r, 2);
}

#[test]
fn timers_can_be_disabled() {
    let mut h = start(settings(0.0, 0.0));
    h.join("fake0");
    h.tick();
    h.advance(1e6);
    assert!(h.svc.torpid().is_empty());
    assert_eq!(h.svc.online().encode(), "0");
}

#[test]
fn verification_drains_with_the_upstream_reason() {
    let mut h = start(settings(30.0, 60.0));
    // Matching R: no drain.
    let (_, r) = h.hello(
        json!({"hostname": "fake0", "R": local_r("0-3")}),
        Role::Owner,
    );
    r.unwrap();
    // Extra cores are allowed by the module default.
    let (_, r) = h.hello(
        json!({"hostname": "fake1", "R": local_r("0-7")}),
        Role::Owner,
    );
    r.unwrap();
    assert!(h.svc.drained().is_empty());
    // Missing cores: accepted, online, drained with flux's text.
    let (_, r) = h.hello(
        json!({"hostname": "fake2", "R": local_r("0-1")}),
        Role::Owner,
    );
    r.unwrap();
    let drains = h.persisted("drain");
    assert_eq!(drains.len(), 1);
    let ctx = drains[0].context.clone().unwrap();
    assert_eq!(
        serde_json::to_value(&ctx).unwrap(),
        json!({"idset": "2", "nodelist": "fake2", "reason": "rank 2 (fake2) missing resources: core[2-3]", "overwrite": 1})
    );
    assert_eq!(h.svc.drained().encode(), "2");
    h.tick();
    assert_eq!(h.svc.online().encode(), "0-2");
    assert_eq!(h.svc.up().encode(), "0-1");
    // Same mismatch again (a reconnect): no second event.
    let before = h.svc.journal().events().count();
    let (c3, _) = h.hello(
        json!({"hostname": "fake3", "R": local_r("0-3")}),
        Role::Owner,
    );
    h.input(Input::Disconnect(c3));
    let after = h.svc.journal().events().count();
    assert_eq!(before, after);
}

#[test]
fn noverify_and_strict_modes() {
    let mut h = start(Settings {
        verify: None,
        liveness_batch: 0.0,
        ..Default::default()
    });
    h.hello(json!({"hostname": "fake2", "R": local_r("0")}), Role::Owner)
        .1
        .unwrap();
    assert!(h.svc.drained().is_empty());

    let mut h = start(Settings {
        verify: Some(rset::VerifyConfig::from_json(Some(&json!(true))).unwrap()),
        ..Default::default()
    });
    h.hello(
        json!({"hostname": "fake1", "R": local_r("0-7")}),
        Role::Owner,
    )
    .1
    .unwrap();
    assert_eq!(h.svc.drained().encode(), "1");
    let info = h.svc.drain_table().get(1).unwrap().clone();
    assert_eq!(
        info.reason.as_deref(),
        Some("rank 1 (fake1) has extra resources: core[4-7]")
    );
}

#[test]
fn shutdown_ends_agent_streams() {
    let mut h = start(settings(30.0, 60.0));
    let (c0, _) = h.join("fake0");
    let out = h.input(Input::Shutdown);
    assert_eq!(stream_end(&out, c0), ECANCELED);
}

#[test]
fn many_agents_one_event_each_way() {
    let text = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-16383","children":{"core":"0-3"}}],"nodelist":["n[0-16383]"],"starttime":0.0,"expiration":0.0}}"#;
    let mut out = Vec::new();
    let mut svc = Service::new(
        Init {
            now: 0.0,
            inventory: Some(Inventory::from_json_text(text, Method::Configuration).unwrap()),
            settings: settings(30.0, 60.0),
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    let before = svc.journal().events().count();
    for i in 0..16384u32 {
        let req = request(
            10 + u64::from(i),
            1,
            "resource.agent",
            json!({"hostname": format!("n{i}")}),
            true,
            Role::Owner,
        );
        svc.handle(1.0, Input::Request(req), &mut out);
    }
    svc.handle(1.0, Input::Tick, &mut out);
    assert_eq!(svc.online().encode(), "0-16383");
    // Beat all but 100 (ranks 1000-1099).
    for i in (0..16384u32).filter(|i| !(1000..1100).contains(i)) {
        let req = request(
            10 + u64::from(i),
            2,
            "resource.agent-heartbeat",
            Value::Null,
            false,
            Role::Owner,
        );
        svc.handle(20.0, Input::Request(req), &mut out);
    }
    svc.handle(31.5, Input::Tick, &mut out);
    assert_eq!(svc.torpid().encode(), "1000-1099");
    for i in 0..16384u64 {
        svc.handle(32.0, Input::Disconnect(10 + i), &mut out);
    }
    svc.handle(32.0, Input::Tick, &mut out);
    let names: Vec<_> = svc
        .journal()
        .events()
        .skip(before)
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(names, ["online", "torpid", "offline", "lively"]);
}

#[test]
fn transitions_close_in_time_share_one_event() {
    let mut h = start(Settings {
        liveness_batch: 0.1,
        ..Default::default()
    });
    let before = h.svc.journal().events().count();
    h.join("fake0");
    h.tick();
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("online", "0")]);
    // Within 0.1 s of that post: held back.
    h.now += 0.05;
    h.join("fake1");
    h.tick();
    h.now += 0.03;
    h.join("fake2");
    h.tick();
    assert_eq!(h.svc.online().encode(), "0");
    h.now += 0.03;
    h.tick();
    assert_eq!(h.svc.online().encode(), "0-2");
    assert_eq!(journal_tail(&h.svc, 1), vec![ev("online", "1-2")]);
    assert_eq!(h.svc.journal().events().count(), before + 2);
}

#[test]
fn dynamic_discovery_assembles_r_from_the_agents() {
    let (svc, _) = start_service(Init {
        now: 1.0,
        settings: settings(30.0, 60.0),
        discover_hosts: Some(vec!["d0".into(), "d1".into()]),
        ..Default::default()
    });
    let mut h = H {
        svc,
        now: 2.0,
        next_conn: 1,
        log: Vec::new(),
    };
    assert!(h.svc.inventory().is_none());
    assert_eq!(h.svc.size(), 2);
    let restart = h.svc.journal().events().last().unwrap().clone();
    assert_eq!(restart.name, "restart");
    assert_eq!(restart.get("nodelist"), Some(&json!("d[0-1]")));
    // R is required meanwhile.
    let (_, e) = h.hello(json!({"hostname": "d0"}), Role::Owner);
    assert_eq!(e.unwrap_err().errnum, EPROTO);
    let (c0, r) = h.hello(json!({"hostname": "d0", "R": local_r("0-3")}), Role::Owner);
    assert_eq!(r.unwrap()["rank"], 0);
    assert!(h.svc.inventory().is_none());
    h.tick();
    assert_eq!(h.svc.online().encode(), "0");
    let (_, r) = h.hello(json!({"hostname": "d1", "R": local_r("0-7")}), Role::Owner);
    assert_eq!(r.unwrap()["rank"], 1);
    let inv = h.svc.inventory().expect("R defined");
    assert_eq!(inv.method, Method::DynamicDiscovery);
    assert_eq!(inv.rset.ranks().encode(), "0-1");
    assert_eq!(inv.rset.count("core"), 12);
    assert_eq!(inv.rset.hostname(1), Some("d1"));
    let written: Vec<_> = h
        .log
        .iter()
        .filter(|o| matches!(o, Output::WriteR(_)))
        .collect();
    assert_eq!(written.len(), 1);
    let defined = h.persisted("resource-define");
    assert_eq!(defined.len(), 1);
    assert_eq!(defined[0].get("method"), Some(&json!("dynamic-discovery")));
    // Later agents are verified against it.
    h.input(Input::Disconnect(c0));
    h.hello(json!({"hostname": "d0", "R": local_r("0-1")}), Role::Owner)
        .1
        .unwrap();
    assert_eq!(h.svc.drained().encode(), "0");
}

impl H {
    fn agents(&mut self, payload: Value, role: Role) -> Result<Value, RpcError> {
        let conn = self.next_conn;
        self.next_conn += 1;
        let req = request(conn, 1, "resource.agents", payload, false, role);
        let out = self.input(Input::Request(req));
        replies_to(&out, ReplyTo { conn, matchtag: 1 })
            .into_iter()
            .next()
            .expect("a reply")
    }
}

/// `resource.agents`: each rank's last heartbeat on the service's clock
/// (kept after the agent leaves) and the version its hello said.
#[test]
fn agents_report_last_heartbeat_and_version() {
    let mut h = start(settings(30.0, 60.0));
    let (c0, r) = h.hello(
        json!({"hostname": "fake0", "version": "1.2.3"}),
        Role::Owner,
    );
    assert_eq!(r.unwrap()["rank"], 0);
    let (c1, _) = h.join("fake1");
    h.advance(5.0);
    assert!(h.heartbeat(c0, 2).is_ok());
    h.advance(3.0);
    let v = h.agents(json!({}), Role::User).unwrap();
    assert_eq!(
        v,
        json!({"agents": [
            {"rank": 0, "heartbeat": 1005.0, "version": "1.2.3", "connected": true},
            {"rank": 1, "heartbeat": 1000.0, "version": null, "connected": true},
        ]})
    );
    // gone: the last heartbeat stays, not connected
    h.input(Input::Disconnect(c1));
    h.advance(1.0);
    let v = h.agents(json!({"targets": "1-2"}), Role::User).unwrap();
    assert_eq!(
        v,
        json!({"agents": [
            {"rank": 1, "heartbeat": 1000.0, "version": null, "connected": false},
        ]})
    );
    let _ = c0;
    // a version that is not a short printable text is refused
    let long = "x".repeat(65);
    for bad in [json!(long), json!("1.0\n"), json!(3)] {
        let (_, r) = h.hello(json!({"hostname": "fake2", "version": bad}), Role::Owner);
        assert_eq!(r.unwrap_err().errnum, EPROTO, "{bad}");
    }
    // guests may not read it; a bad idset is the request's error
    let e = h.agents(json!({}), Role::Guest).unwrap_err();
    assert_eq!(e.errnum, EPERM);
    let e = h.agents(json!({"targets": "x"}), Role::User).unwrap_err();
    assert_eq!(e.errnum, EPROTO);
    assert!(e.message().starts_with("agents: "), "{}", e.message());
}

impl H {
    fn call_on(
        &mut self,
        conn: u64,
        topic: &str,
        payload: Value,
        role: Role,
    ) -> Result<Value, RpcError> {
        let req = Request {
            // one credential per connection number below 100
            who: (conn < 100).then(|| format!("cert:sched{conn}").into()),
            ..request(conn, 7, topic, payload, false, role)
        };
        let out = self.input(Input::Request(req));
        replies_to(&out, ReplyTo { conn, matchtag: 7 })
            .into_iter()
            .next()
            .expect("a reply")
    }

    fn allocated_ranks(&mut self) -> String {
        let v = self
            .call_on(900, "resource.sched-status", json!({}), Role::Guest)
            .unwrap();
        let r = rset::Rset::from_json(&v["allocated"]).unwrap();
        r.ranks().encode()
    }
}

/// `resource.allocated-set`: a scheduler's allocation shows in
/// `sched-status` (the union of every credential's), replaced by the same
/// credential's next call, kept when its connection closes; only a
/// scheduler may say it.
#[test]
fn allocated_set_feeds_sched_status() {
    let mut h = start(settings(30.0, 60.0));
    let set = |h: &mut H, conn: u64, targets: &str, role: Role| {
        let payload = json!({"targets": targets});
        h.call_on(conn, "resource.allocated-set", payload, role)
    };
    assert_eq!(h.allocated_ranks(), "");
    set(&mut h, 50, "1-2", Role::Scheduler).unwrap();
    assert_eq!(h.allocated_ranks(), "1-2");
    set(&mut h, 51, "fake0", Role::Scheduler).unwrap();
    assert_eq!(h.allocated_ranks(), "0-2");
    set(&mut h, 50, "2", Role::Scheduler).unwrap();
    assert_eq!(h.allocated_ranks(), "0,2");
    h.input(Input::Disconnect(51));
    assert_eq!(h.allocated_ranks(), "0,2");
    set(&mut h, 51, "", Role::Scheduler).unwrap();
    assert_eq!(h.allocated_ranks(), "2");
    set(&mut h, 50, "", Role::Scheduler).unwrap();
    assert_eq!(h.allocated_ranks(), "");
    let e = set(&mut h, 52, "1", Role::User).unwrap_err();
    assert_eq!(e.errnum, EPERM);
    let e = set(&mut h, 52, "9", Role::Owner).unwrap_err();
    assert_eq!(e.errnum, EINVAL);
    let e = h
        .call_on(52, "resource.allocated-set", json!({}), Role::Owner)
        .unwrap_err();
    assert_eq!(e.errnum, EPROTO);
    assert_eq!(h.allocated_ranks(), "");
}

/// `resource.agent-enrol`: the enrolment role reaches it and nothing
/// else; a host of R is handed to the shell to sign (`Output::Enrol`,
/// naming who asked), any other name is refused.
#[test]
fn agent_enrol_is_for_hosts_of_r_and_the_enrol_role() {
    let mut h = start(settings(30.0, 60.0));
    let enrol = |h: &mut H, host: &str, role: Role| {
        let payload = json!({"hostname": host, "csr": "PEM"});
        let req = Request {
            who: Some("token:enrol".into()),
            ..request(70, 1, "resource.agent-enrol", payload, false, role)
        };
        h.input(Input::Request(req))
    };
    let out = enrol(&mut h, "fake2", Role::Enrol);
    let asked: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Enrol {
                hostname,
                csr,
                requester,
                ..
            } => Some((hostname.as_str(), csr.as_str(), requester.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![("fake2", "PEM", "token:enrol")]);
    let out = enrol(&mut h, "nothere", Role::Enrol);
    let r = replies_to(
        &out,
        ReplyTo {
            conn: 70,
            matchtag: 1,
        },
    );
    let e = r[0].clone().unwrap_err();
    assert_eq!(e.errnum, ENOENT);
    assert_eq!(
        e.message(),
        "agent enrol: unknown host nothere: it is not in the nodelist of R"
    );
    // other roles may not enrol; the enrol role may do nothing else
    for role in [Role::User, Role::Admin, Role::Agent("fake2".into())] {
        let out = enrol(&mut h, "fake2", role.clone());
        let r = replies_to(
            &out,
            ReplyTo {
                conn: 70,
                matchtag: 1,
            },
        );
        assert_eq!(r[0].clone().unwrap_err().errnum, EPERM, "{role:?}");
    }
    for topic in [
        "resource.status",
        "resource.sched-status",
        "resource.agents",
    ] {
        let e = h.call_on(71, topic, json!({}), Role::Enrol).unwrap_err();
        assert_eq!(e.errnum, EPERM, "{topic}");
    }
    let (_, r) = h.hello(json!({"hostname": "fake2"}), Role::Enrol);
    assert_eq!(r.unwrap_err().errnum, EPERM);
}
