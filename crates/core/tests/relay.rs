//! Relay sessions in the service core: a relay speaks for its subtree in
//! batches (hello groups, lively/gone idsets), with a simulated clock.

mod common;

use common::*;
use roster_core::errno::*;
use roster_core::*;
use rpc::{ReplyTo, Role};
use serde_json::{json, Value};

/// `n` nodes sim[0-(n-1)], cores 0-3.
fn inventory(n: u32) -> Inventory {
    inventory_of(&format!("0-{}", n - 1), &[&format!("sim[0-{}]", n - 1)])
}

struct H {
    svc: Service,
    now: f64,
    next_conn: u64,
}

fn start(n: u32, fanout: u32, torpid: f64, offline: f64) -> H {
    let (svc, _) = start_service(Init {
        now: 1000.0,
        inventory: Some(inventory(n)),
        settings: Settings {
            torpid_max: torpid,
            offline_timeout: offline,
            liveness_batch: 0.0,
            relay_fanout: fanout,
            ..Default::default()
        },
        ..Default::default()
    });
    H {
        svc,
        now: 1000.0,
        next_conn: 1,
    }
}

fn stream(conn: u64) -> ReplyTo {
    ReplyTo { conn, matchtag: 1 }
}

impl H {
    fn input(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.svc.handle(self.now, input, &mut out);
        out
    }

    fn hello(&mut self, payload: Value) -> (u64, Result<Value, RpcError>) {
        self.hello_as(Role::Owner, payload)
    }

    fn hello_as(&mut self, role: Role, payload: Value) -> (u64, Result<Value, RpcError>) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let out = self.input(Input::Request(request(
            conn,
            1,
            "resource.agent",
            payload,
            true,
            role,
        )));
        (conn, replies_to(&out, stream(conn)).remove(0))
    }

    fn relay(&mut self, host: &str) -> (u64, Value) {
        let (conn, w) = self.hello(json!({"hostname": host, "relay": true}));
        (conn, w.expect("relay welcome"))
    }

    /// Relay `sim0`, with its children `hello` (a group list) taken in
    /// at the next tick.
    fn relay_with(&mut self, hello: Value) -> u64 {
        let (r0, _) = self.relay("sim0");
        self.line(r0, json!({ "hello": hello }));
        self.advance(0.0);
        r0
    }

    /// Send a session line (one-way); returns what came back on the
    /// relay's stream.
    fn line(&mut self, conn: u64, payload: Value) -> Vec<Result<Value, RpcError>> {
        let out = self.input(Input::SessionLine { conn, payload });
        assert!(
            out.iter()
                .all(|o| !matches!(o, Output::Reply { to, .. } if to.matchtag != 1)),
            "only the session's stream is answered: {out:?}"
        );
        replies_to(&out, stream(conn))
    }

    fn advance(&mut self, secs: f64) -> Vec<Output> {
        self.now += secs;
        self.input(Input::Tick)
    }

    fn online(&self) -> String {
        self.svc.online().encode()
    }
}

fn events(svc: &Service, name: &str) -> Vec<String> {
    svc.journal()
        .events()
        .filter(|e| e.name == name)
        .map(|e| {
            e.get("idset")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn one_relay_brings_131072_nodes_online_in_one_event() {
    let mut h = start(131072, 128, 5.0, 60.0);
    let (conn, w) = h.relay("sim0");
    assert_eq!(w["rank"], 0);
    assert_eq!(w["relay"]["fanout"], 128);
    assert_eq!(w["relay"]["subtree"], "1-131071");
    assert_eq!(w["relay"]["hosts"], "sim[1-131071]");
    let a = h.line(
        conn,
        json!({"hello": [{"ranks": "1-131071", "cores": "0-3"}]}),
    );
    assert_eq!(a, vec![Ok(json!({"accepted": "1-131071"}))]);
    h.advance(0.0);
    assert_eq!(h.online(), "0-131071");
    assert_eq!(events(&h.svc, "online"), vec!["0-131071"]);
    assert_eq!(h.svc.agents(), 1);
    assert!(h.svc.drained().is_empty());
    // One lively line per second, 100-199 stalled: torpid after 5 s.
    for _ in 0..5 {
        h.line(conn, json!({"lively": "1-99,200-131071"}));
        h.advance(1.0);
        assert_eq!(h.svc.torpid().encode(), "");
    }
    h.line(conn, json!({"lively": "1-99,200-131071"}));
    h.advance(0.5);
    assert_eq!(h.svc.torpid().encode(), "100-199");
    assert_eq!(events(&h.svc, "torpid"), vec!["100-199"]);
    // They come back.
    h.line(conn, json!({"lively": "1-131071"}));
    h.advance(0.0);
    assert_eq!(h.svc.torpid().encode(), "");
    assert_eq!(events(&h.svc, "lively"), vec!["100-199"]);
    // A child leaves; then the relay's connection drops: one event.
    h.line(conn, json!({"gone": "77"}));
    h.advance(0.0);
    assert_eq!(events(&h.svc, "offline"), vec!["77"]);
    h.input(Input::Disconnect(conn));
    h.advance(0.0);
    assert_eq!(h.online(), "");
    assert_eq!(events(&h.svc, "offline"), vec!["77", "0-76,78-131071"]);
    assert_eq!(h.svc.agents(), 0);
}

/// Only a relay credential opens a relay session: an agent's certificate
/// gets EPERM naming the role and causes no event; a relay's events for
/// its children name it (`relays` context).
#[test]
fn only_a_relay_credential_may_relay_and_its_events_name_it() {
    // kary:2 over 7 ranks: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6.
    let mut h = start(7, 2, 30.0, 60.0);
    let hello = json!({"hostname": "sim1", "relay": true});
    let (_, r) = h.hello_as(Role::Agent("sim1".into()), hello.clone());
    let e = r.unwrap_err();
    assert_eq!(e.errnum, rpc::errno::EPERM);
    assert!(
        e.message()
            .starts_with("agent hello: a relay session requires the relay role: the certificate of sim1 has the agent role"),
        "{e:?}"
    );
    h.advance(0.0);
    assert_eq!(h.online(), "");
    assert!(events(&h.svc, "online").is_empty());
    // a relay credential speaks for its own host only
    let (_, r) = h.hello_as(
        Role::Relay("sim1".into()),
        json!({"hostname": "sim2", "relay": true}),
    );
    assert_eq!(r.unwrap_err().errnum, rpc::errno::EPERM);
    let (conn, r) = h.hello_as(Role::Relay("sim1".into()), hello);
    assert_eq!(r.unwrap()["relay"]["subtree"], "3-4");
    let a = h.line(conn, json!({"hello": [{"ranks": "3-4", "cores": "0-3"}]}));
    assert_eq!(a, vec![Ok(json!({"accepted": "3-4"}))]);
    let (_, r) = h.hello(json!({"hostname": "sim0"}));
    r.unwrap();
    h.advance(0.0);
    assert_eq!(h.online(), "0-1,3-4");
    let online: Vec<&Value> = h
        .svc
        .journal()
        .events()
        .filter(|e| e.name == "online")
        .map(|e| e.get("relays").unwrap_or(&Value::Null))
        .collect();
    assert_eq!(online, vec![&json!({"sim1": "3-4"})]);
    h.line(conn, json!({"gone": "4"}));
    h.advance(0.0);
    let off = h
        .svc
        .journal()
        .events()
        .find(|e| e.name == "offline")
        .map(|e| e.get("relays").cloned());
    assert_eq!(off, Some(Some(json!({"sim1": "4"}))));
}

#[test]
fn a_relay_speaks_only_for_its_subtree_and_free_ranks() {
    // kary:2 over 7 ranks: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6.
    let mut h = start(7, 2, 30.0, 60.0);
    let (r1, w) = h.relay("sim1");
    assert_eq!(w["relay"]["subtree"], "3-4");
    assert_eq!(w["relay"]["hosts"], "sim[3-4]");
    // A direct agent holds sim4.
    let (_, a4) = h.hello(json!({"hostname": "sim4"}));
    assert_eq!(a4.unwrap()["rank"], 4);
    let a = h.line(r1, json!({"hello": [{"ranks": "2-4"}]}));
    let a = a[0].as_ref().unwrap();
    assert_eq!(a["accepted"], "3");
    let refused = a["refused"].as_array().unwrap();
    assert_eq!(refused[0]["ranks"], "2");
    assert_eq!(refused[0]["errnum"], EPERM);
    assert_eq!(
        refused[0]["errstr"],
        "ranks 2 are not in the subtree of the relay at rank 1 (sim1)"
    );
    assert_eq!(refused[1]["ranks"], "4");
    assert_eq!(refused[1]["errnum"], EEXIST);
    // Re-announcing its own children is accepted again.
    let a = h.line(r1, json!({"hello": [{"ranks": "3"}]}));
    assert_eq!(a, vec![Ok(json!({"accepted": "3"}))]);
    // Relay 0 may speak for everything below it, but not for ranks
    // another relay holds; a direct agent cannot claim them either.
    let (r0, _) = h.relay("sim0");
    let a = h.line(r0, json!({"hello": [{"ranks": "2-3,5"}]}));
    let a = a[0].as_ref().unwrap();
    assert_eq!(a["accepted"], "2,5");
    assert_eq!(a["refused"][0]["ranks"], "3");
    assert_eq!(a["refused"][0]["errnum"], EEXIST);
    let (_, a3) = h.hello(json!({"hostname": "sim3"}));
    assert_eq!(a3.unwrap_err().errnum, EEXIST);
    // A second relay hello for a held rank is refused like an agent's.
    let (_, again) = h.hello(json!({"hostname": "sim1", "relay": true}));
    assert_eq!(again.unwrap_err().errnum, EEXIST);
    h.advance(0.0);
    assert_eq!(h.online(), "0-5");
    // Relay 1 goes: exactly its subtree (1, 3) goes offline.
    h.input(Input::Disconnect(r1));
    h.advance(0.0);
    assert_eq!(h.online(), "0,2,4-5");
    // Its leaf moves to relay 0 (an ancestor).
    let a = h.line(r0, json!({"hello": [{"ranks": "3"}]}));
    assert_eq!(a, vec![Ok(json!({"accepted": "3"}))]);
    h.advance(0.0);
    assert_eq!(h.online(), "0,2-5");
}

#[test]
fn verification_drains_are_answered_per_group() {
    let mut h = start(7, 2, 30.0, 60.0);
    let (r0, _) = h.relay("sim0");
    let a = h.line(
        r0,
        json!({"hello": [{"ranks": "1-2", "cores": "0-3"}, {"ranks": "3-4", "cores": "0-1"}]}),
    );
    let a = a[0].as_ref().unwrap();
    assert_eq!(a["accepted"], "1-4");
    let d = a["drained"].as_array().unwrap();
    assert_eq!(d.len(), 2, "{a}");
    assert_eq!(d[0]["ranks"], "3");
    assert_eq!(d[0]["reason"], "rank 3 (sim3) missing resources: core[2-3]");
    assert_eq!(d[1]["ranks"], "4");
    assert_eq!(h.svc.drained().encode(), "3-4");
    // the drain events name the relay that reported the resources
    let drains: Vec<Value> = h
        .svc
        .journal()
        .events()
        .filter(|e| e.name == "drain")
        .map(|e| e.get("relays").cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(drains, vec![json!({"sim0": "3"}), json!({"sim0": "4"})]);
    // Extra cores are allowed by default.
    let a = h.line(r0, json!({"hello": [{"ranks": "5", "cores": "0-7"}]}));
    assert_eq!(a, vec![Ok(json!({"accepted": "5"}))]);
    // A direct agent hears of its own drain after the welcome.
    let conn = h.next_conn;
    h.next_conn += 1;
    let out = h.input(Input::Request(request(conn, 1, "resource.agent", json!({"hostname": "sim6", "R": {"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["x"],"starttime":0.0,"expiration":0.0}}}), true, Role::Owner)));
    let r = replies_to(&out, stream(conn));
    assert_eq!(r.len(), 2);
    assert_eq!(
        r[1].as_ref().unwrap()["drained"][0]["reason"],
        "rank 6 (sim6) missing resources: core[1-3]"
    );
}

#[test]
fn relay_timers_end_silent_children_then_the_relay() {
    let mut h = start(7, 2, 1.0, 3.0);
    let r0 = h.relay_with(json!([{"ranks": "1-6"}]));
    assert_eq!(h.online(), "0-6");
    // 1-5 keep beating, 6 is silent: torpid, then ended.
    for _ in 0..7 {
        h.line(r0, json!({"lively": "1-5"}));
        let out = h.advance(0.5);
        let r = replies_to(&out, stream(r0));
        if let Some(Ok(v)) = r.first() {
            assert_eq!(v["ended"][0]["ranks"], "6", "{v}");
            assert_eq!(v["ended"][0]["errnum"], ETIMEDOUT);
        }
    }
    assert_eq!(h.online(), "0-5");
    assert_eq!(events(&h.svc, "torpid"), vec!["6"]);
    assert_eq!(events(&h.svc, "offline"), vec!["6"]);
    // The relay falls silent: its stream ends, everything offline.
    let out = h.advance(3.5);
    let r = replies_to(&out, stream(r0));
    assert_eq!(r.last().unwrap().as_ref().unwrap_err().errnum, ETIMEDOUT);
    assert_eq!(h.online(), "");
    assert_eq!(h.svc.agents(), 0);
}

#[test]
fn a_malformed_line_ends_the_relay_session() {
    let mut h = start(7, 2, 30.0, 60.0);
    let r0 = h.relay_with(json!([{"ranks": "1-2"}]));
    let r = h.line(r0, json!({"lively": 5}));
    assert_eq!(
        r.last().unwrap().as_ref().unwrap_err().message(),
        "relay line: lively: invalid type: integer `5`, expected an idset string"
    );
    h.advance(0.0);
    assert_eq!(h.online(), "");
    // A relay flag of the wrong type is a bad hello.
    let (_, e) = h.hello(json!({"hostname": "sim1", "relay": "yes"}));
    assert_eq!(
        e.unwrap_err().message(),
        "agent hello: relay: invalid type: string \"yes\", expected a boolean"
    );
    // Other malformed lines.
    for (bad, text) in [
        (
            json!([1]),
            "relay line: the payload must be a JSON object, not an array",
        ),
        (
            json!({"hello": {}}),
            "relay line: hello: invalid type: map, expected a sequence",
        ),
        (
            json!({"hello": [{}]}),
            "relay line: hello[0]: missing field `ranks`",
        ),
        (
            json!({"gone": "x"}),
            "relay line: gone: invalid idset 'x': ",
        ),
    ] {
        let (r, _) = h.relay("sim0");
        let got = h.line(r, bad);
        let e = got.last().unwrap().as_ref().unwrap_err().message();
        assert!(e.starts_with(text), "{e} vs {text}");
        h.input(Input::Disconnect(r));
    }
}

#[test]
fn the_relays_torpid_idset_marks_ranks_torpid_and_lively() {
    let mut h = start(1024, 1024, 5.0, 60.0);
    let r0 = h.relay_with(json!([{"ranks": "1-1023", "cores": "0-3"}]));
    assert_eq!(h.online(), "0-1023");
    // The relay times its children: 100 stalled leaves are torpid the
    // moment it says so, well before the service's own timer would fire.
    h.advance(1.0);
    h.line(r0, json!({"lively": "1-99,200-1023", "torpid": "100-199"}));
    h.advance(0.0);
    assert_eq!(h.svc.torpid().encode(), "100-199");
    assert_eq!(events(&h.svc, "torpid"), vec!["100-199"]);
    // Lines without the key leave the set alone.
    for _ in 0..3 {
        h.line(r0, json!({"lively": "1-99,200-1023"}));
        h.advance(1.0);
    }
    assert_eq!(h.svc.torpid().encode(), "100-199");
    // Half of them come back: lively again, one event.
    h.line(r0, json!({"lively": "1-149,200-1023", "torpid": "150-199"}));
    h.advance(0.0);
    assert_eq!(h.svc.torpid().encode(), "150-199");
    assert_eq!(events(&h.svc, "lively"), vec!["100-149"]);
    // A relay cannot make its own rank or someone else's torpid.
    let (_, a) = h.hello(json!({"hostname": "sim0"}));
    assert_eq!(a.unwrap_err().errnum, EEXIST);
    h.line(r0, json!({"lively": "1-1023", "torpid": "0,150-199"}));
    h.advance(0.0);
    assert_eq!(h.svc.torpid().encode(), "150-199");
    h.line(r0, json!({"lively": "1-1023", "torpid": ""}));
    h.advance(0.0);
    assert_eq!(h.svc.torpid().encode(), "");
    assert_eq!(events(&h.svc, "lively"), vec!["100-149", "150-199"]);
    // A malformed torpid ends the session like any bad line.
    let r = h.line(r0, json!({"torpid": 3}));
    assert_eq!(
        r.last().unwrap().as_ref().unwrap_err().message(),
        "relay line: torpid: invalid type: integer `3`, expected an idset string"
    );
}

/// `resource.agents` for a relay's children: the time the relay last
/// said they were lively, and the relay that speaks for them; the
/// relay's own rank has its version.
#[test]
fn agents_names_the_relay_and_its_last_lively_line() {
    let mut h = start(7, 2, 30.0, 60.0);
    let (conn, _) = h.hello(json!({"hostname": "sim1", "relay": true, "version": "9.9"}));
    let a = h.line(conn, json!({"hello": [{"ranks": "3-4", "cores": "0-3"}]}));
    assert_eq!(a, vec![Ok(json!({"accepted": "3-4"}))]);
    h.advance(2.0);
    h.line(conn, json!({"lively": "4"}));
    h.advance(1.0);
    let payload = json!({"targets": "0-4"});
    let out = h.input(Input::Request(request(
        99,
        1,
        "resource.agents",
        payload,
        false,
        Role::User,
    )));
    let v = replies_to(&out, stream(99)).remove(0).unwrap();
    assert_eq!(
        v,
        json!({"agents": [
            {"rank": 1, "heartbeat": 1002.0, "version": "9.9", "connected": true},
            {"rank": 3, "heartbeat": 1000.0, "version": null, "via": "sim1", "connected": true},
            {"rank": 4, "heartbeat": 1002.0, "version": null, "via": "sim1", "connected": true},
        ]})
    );
}
