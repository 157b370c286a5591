//! The service core driven directly, with a simulated clock.

use eventlog::Event;
mod common;

use common::*;
use roster_core::errno::*;
use roster_core::*;
use rpc::catalog::Shape;
use rpc::{ReplyTo, Request, Role};
use serde_json::{json, Value};

struct Harness {
    svc: Service,
    now: f64,
    next_conn: u64,
}

fn start_with(init: Init) -> (Harness, Vec<Output>) {
    let (svc, out) = start_service(init);
    (
        Harness {
            svc,
            now: 1000.0,
            next_conn: 1,
        },
        out,
    )
}

/// R4 at 5.0 with `settings`.
fn r4_with(settings: Settings) -> Init {
    Init {
        now: 5.0,
        inventory: Some(r4()),
        settings,
        ..Default::default()
    }
}

fn start() -> Harness {
    start_with(Init {
        now: 999.0,
        inventory: Some(r4()),
        ..Default::default()
    })
    .0
}

impl Harness {
    fn req(
        &mut self,
        topic: &str,
        payload: Value,
        role: Role,
        streaming: bool,
    ) -> (ReplyTo, Vec<Output>) {
        self.now += 1.0;
        let conn = self.next_conn;
        self.next_conn += 1;
        let req = request(conn, 1, topic, payload, streaming, role);
        let to = req.reply_to();
        let mut out = Vec::new();
        self.svc.handle(self.now, Input::Request(req), &mut out);
        (to, out)
    }

    /// A non-streaming owner request.
    fn owner(&mut self, topic: &str, payload: Value) -> (ReplyTo, Vec<Output>) {
        self.req(topic, payload, Role::Owner, false)
    }

    /// A non-streaming owner RPC: its single reply.
    fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, RpcError> {
        let (to, out) = self.owner(topic, payload);
        let replies: Vec<_> = replies_to(&out, to);
        assert_eq!(replies.len(), 1, "{topic}: {out:?}");
        replies.into_iter().next().unwrap()
    }

    /// An RPC that must succeed; its reply.
    fn ok(&mut self, topic: &str, payload: Value) -> Value {
        self.rpc(topic, payload).unwrap()
    }

    /// The error a drain of rank 1 gets as `role`.
    fn drain_as(&mut self, role: Role) -> (i32, String) {
        let (to, out) = self.req("resource.drain", json!({"targets": "1"}), role, false);
        err(replies_to(&out, to).remove(0))
    }

    /// `resource.status`'s `drain`.
    fn drain_status(&mut self) -> Value {
        self.ok("resource.status", Value::Null)["drain"].clone()
    }

    /// The drain and undrain events of the journal.
    fn drain_events(&self) -> Vec<Event> {
        self.svc
            .journal()
            .events()
            .filter(|e| e.name == "drain" || e.name == "undrain")
            .cloned()
            .collect()
    }
}

fn err(r: Result<Value, RpcError>) -> (i32, String) {
    let e = r.unwrap_err();
    (e.errnum, e.errstr.unwrap_or_default())
}

#[test]
fn start_defines_r_and_posts_restart() {
    let (h, out) = start_with(Init {
        now: 5.0,
        inventory: Some(r4()),
        ..Default::default()
    });
    assert!(matches!(out[0], Output::WriteR(_)));
    let p = persisted(&out);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].name, "resource-define");
    assert_eq!(p[0].get("method"), Some(&json!("configuration")));
    let names: Vec<_> = h.svc.journal().events().map(|e| e.name.clone()).collect();
    assert_eq!(names, ["restart", "resource-define"]);
    let restart = h.svc.journal().events().next().unwrap();
    assert_eq!(restart.get("ranks"), Some(&json!("0-3")));
    assert_eq!(restart.get("online"), Some(&json!("")));
    assert_eq!(restart.get("nodelist"), Some(&json!("fake[0-3]")));
}

#[test]
fn force_up_posts_online_before_restart() {
    let (h, _) = start_with(r4_with(Settings {
        monitor_force_up: true,
        ..Default::default()
    }));
    let names: Vec<_> = h.svc.journal().events().map(|e| e.name.clone()).collect();
    assert_eq!(names, ["online", "restart", "resource-define"]);
    assert_eq!(h.svc.up().encode(), "0-3");
}

#[test]
fn drain_persists_before_reply_and_reply_before_followers() {
    let mut h = start();
    let (jto, jout) = h.req("resource.journal", Value::Null, Role::Owner, true);
    assert_eq!(replies_to(&jout, jto).len(), 3); // restart batch, define, sentinel
    let (to, out) = h.owner("resource.drain", json!({"targets": "1", "reason": "x"}));
    let pos_persist = out
        .iter()
        .position(|o| matches!(o, Output::Persist(_)))
        .unwrap();
    let pos_reply = out
        .iter()
        .position(|o| matches!(o, Output::Reply { to: t, .. } if *t == to))
        .unwrap();
    let pos_follow = out
        .iter()
        .position(|o| matches!(o, Output::Reply { to: t, .. } if *t == jto))
        .unwrap();
    assert!(pos_persist < pos_reply && pos_reply < pos_follow, "{out:?}");
    let ev = &persisted(&out)[0];
    assert_eq!(ev.name, "drain");
    assert_eq!(
        Value::Object(ev.context.clone().unwrap()),
        json!({"idset": "1", "nodelist": "fake1", "reason": "x", "overwrite": 0,
               "requester": "role owner"})
    );
    // Byte for byte, keys in flux-core's order.
    assert_eq!(
        serde_json::to_string(ev.context.as_ref().unwrap()).unwrap(),
        r#"{"idset":"1","nodelist":"fake1","reason":"x","overwrite":0,"requester":"role owner"}"#
    );
}

/// The events of the journal replies in `out` to `to`.
fn journal_events(out: &[Output], to: ReplyTo) -> Vec<Value> {
    replies_to(out, to)
        .into_iter()
        .flat_map(|r| r.unwrap()["events"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn drains_record_their_requester_for_roster_readers_only() {
    let mut h = start();
    let who = |h: &mut Harness, topic: &str, payload: Value, userid, who: Option<&str>| {
        h.now += 1.0;
        let req = Request {
            userid,
            who: who.map(Into::into),
            ..request(100 + h.now as u64, 1, topic, payload, false, Role::Admin)
        };
        let mut out = Vec::new();
        h.svc.handle(h.now, Input::Request(req), &mut out);
        out
    };
    let (flux, _) = h.req("resource.journal", json!({}), Role::Owner, true);
    let (roster, _) = h.req(
        "resource.journal",
        json!({"requester": true}),
        Role::Owner,
        true,
    );
    let drain = json!({"targets": "1", "reason": "fan"});
    let out = who(
        &mut h,
        "resource.drain",
        drain,
        Some(0),
        Some("cert:admin1"),
    );
    assert_eq!(
        persisted(&out)[0].get("requester"),
        Some(&json!("cert:admin1"))
    );
    assert!(
        out.iter().any(|o| matches!(o, Output::Log { msg, .. }
            if msg.starts_with("drain idset=1") && msg.ends_with("requester=cert:admin1"))),
        "{out:?}"
    );
    let live_flux = journal_events(&out, flux);
    assert_eq!(
        live_flux[0]["context"],
        json!({"idset": "1", "nodelist": "fake1", "reason": "fan", "overwrite": 0})
    );
    assert_eq!(
        journal_events(&out, roster)[0]["context"]["requester"],
        "cert:admin1"
    );
    let out = who(
        &mut h,
        "resource.undrain",
        json!({"targets": "1"}),
        Some(1000),
        None,
    );
    assert_eq!(
        persisted(&out)[0].get("requester"),
        Some(&json!("uid 1000"))
    );
    // The backlog: the same rule.
    let (late_flux, out) = h.req("resource.journal", json!({}), Role::Owner, true);
    let evs = journal_events(&out, late_flux);
    let drains: Vec<_> = evs.iter().filter(|e| e["name"] != "restart").collect();
    assert!(
        drains
            .iter()
            .all(|e| e["context"].get("requester").is_none()),
        "{evs:?}"
    );
    let (late, out) = h.req(
        "resource.journal",
        json!({"requester": true}),
        Role::Owner,
        true,
    );
    let named: Vec<_> = journal_events(&out, late)
        .into_iter()
        .filter_map(|e| e["context"].get("requester").cloned())
        .collect();
    assert_eq!(named, [json!("cert:admin1"), json!("uid 1000")]);
}

#[test]
fn drain_undrain_matrix() {
    let mut h = start();
    assert_eq!(
        h.rpc("resource.drain", json!({"targets": "1", "reason": "r"})),
        Ok(Value::Null)
    );
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": "0-1"}))),
        (EEXIST, "rank 1 already drained".into())
    );
    // update drains the undrained rank, keeps the other's reason
    assert_eq!(
        h.rpc(
            "resource.drain",
            json!({"targets": "0-1", "reason": "new", "mode": "update"})
        ),
        Ok(Value::Null)
    );
    let st = h.rpc("resource.status", Value::Null).unwrap();
    let drain = st["drain"].as_object().unwrap();
    let reasons: Vec<_> = drain
        .values()
        .map(|v| v["reason"].as_str().unwrap().to_string())
        .collect();
    assert!(
        reasons.contains(&"r".to_string()) && reasons.contains(&"new".to_string()),
        "{st}"
    );
    // hostnames
    assert_eq!(
        h.rpc("resource.drain", json!({"targets": "fake3"})),
        Ok(Value::Null)
    );
    assert_eq!(h.svc.drained().encode(), "0-1,3");
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": "fake[3-5]"}))),
        (EINVAL, "invalid targets: invalid hosts: fake[4-5]".into())
    );
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": ""}))),
        (EINVAL, "idset is empty".into())
    );
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": "0-4"}))),
        (EINVAL, "idset is out of range".into())
    );
    assert_eq!(err(h.rpc("resource.drain", json!({}))).0, EPROTO);
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": "2", "mode": "bad"}))),
        (EINVAL, "Invalid mode specified".into())
    );
    // undrain
    assert_eq!(
        err(h.rpc("resource.undrain", json!({"targets": "1-2"}))),
        (EEXIST, "rank 2 not drained".into())
    );
    assert_eq!(
        h.rpc("resource.undrain", json!({"targets": "0-1"})),
        Ok(Value::Null)
    );
    assert_eq!(
        err(h.rpc("resource.undrain", json!({"targets": "1", "mode": "force"}))),
        (EINVAL, "invalid undrain mode 'force' specified".into())
    );
    assert_eq!(
        h.rpc(
            "resource.undrain",
            json!({"targets": "0-3", "mode": "update"})
        ),
        Ok(Value::Null)
    );
    assert!(h.svc.drained().is_empty());
}

#[test]
fn roles_and_unknown_topics() {
    let mut h = start();
    assert_eq!(
        h.drain_as(Role::Guest),
        (EPERM, "Request requires owner credentials".into())
    );
    for t in [
        "resource.journal",
        "resource.reload",
        "resource.undrain",
        "resource.get",
    ] {
        let (to, out) = h.req(t, json!({}), Role::Guest, true);
        assert_eq!(
            replies_to(&out, to)[0].clone().unwrap_err().errnum,
            EPERM,
            "{t}"
        );
    }
    let (to, out) = h.req("resource.status", Value::Null, Role::Guest, false);
    assert!(replies_to(&out, to)[0].is_ok());
    assert_eq!(
        err(h.rpc("kvs.lookup", json!({}))),
        (
            ENOSYS,
            "No service matching kvs.lookup is registered".into()
        )
    );
    assert_eq!(err(h.rpc("resource.nope", json!({}))).0, ENOSYS);
}

#[test]
fn roles_of_tls_clients() {
    let mut h = start();
    let agent = Role::Agent("fake0".into());
    use Role::{Admin, Guest, Scheduler, User};
    let everyone = &[User, Scheduler, Admin, Guest][..];
    let readers = &[User, Scheduler, Admin][..];
    // (topic, payload, streaming, roles allowed besides the owner)
    let table: Vec<(&str, Value, bool, &[Role])> = vec![
        ("resource.status", json!({}), false, everyone),
        ("resource.sched-status", json!({}), false, everyone),
        ("resource.get", json!({}), false, readers),
        ("resource.journal", json!({}), true, readers),
        ("resource.acquire", json!({}), true, &[Scheduler]),
        (
            "resource.group-set",
            json!({"group": "g", "targets": "0"}),
            false,
            &[Scheduler],
        ),
        ("resource.drain", json!({"targets": "1"}), false, &[Admin]),
        ("resource.undrain", json!({"targets": "1"}), false, &[Admin]),
        (
            "resource.monitor-force-up",
            json!({"ranks": "0"}),
            false,
            &[Admin],
        ),
        (
            "resource.expiration-update",
            json!({"expiration": 0.0}),
            false,
            &[Admin],
        ),
    ];
    let all = [
        Role::User,
        Role::Scheduler,
        Role::Admin,
        Role::Guest,
        agent.clone(),
    ];
    for (topic, payload, streaming, allowed) in table {
        for role in &all {
            let (to, out) = h.req(topic, payload.clone(), role.clone(), streaming);
            let first = replies_to(&out, to).into_iter().next();
            let refused = matches!(&first, Some(Err(e)) if e.errnum == EPERM);
            assert_eq!(
                refused,
                !allowed.contains(role),
                "{topic} as {role:?}: {first:?}"
            );
            if refused {
                let msg = first.unwrap().unwrap_err().message();
                if *role != Role::Guest {
                    assert!(msg.starts_with(&format!("{topic} requires the ")), "{msg}");
                }
            }
            // End what was accepted (streams, groups).
            h.svc
                .handle(h.now, Input::Disconnect(to.conn), &mut Vec::new());
        }
    }
    assert_eq!(
        h.drain_as(Role::Scheduler),
        (
            EPERM,
            "resource.drain requires the admin role (this client has the scheduler role)".into()
        )
    );
    assert_eq!(
        h.drain_as(agent),
        (
            EPERM,
            "resource.drain requires the admin role: this client is the agent of fake0, which may only hold its own agent session".into()
        )
    );
}

#[test]
fn status_shape() {
    let mut h = start();
    h.ok("resource.drain", json!({"targets": "0-1", "reason": "a"}));
    let st = h.rpc("resource.status", Value::Null).unwrap();
    assert_eq!(st["online"], json!(""));
    assert_eq!(st["offline"], json!("0-3"));
    assert_eq!(st["exclude"], json!(""));
    assert_eq!(st["torpid"], json!(""));
    assert_eq!(st["drain"]["0-1"]["reason"], json!("a"));
    assert!(st["R"].get("scheduling").is_none());
    let keys: Vec<_> = st.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        ["R", "drain", "online", "offline", "exclude", "torpid"]
    );
}

#[test]
fn journal_backlog_batches_and_sentinel() {
    let mut h = start();
    for i in 0..250 {
        let t = format!("{}", i % 4);
        h.ok(
            "resource.drain",
            json!({"targets": t, "mode": "force-overwrite"}),
        );
    }
    let (to, out) = h.req("resource.journal", Value::Null, Role::Owner, true);
    let r = replies_to(&out, to);
    let sizes: Vec<usize> = r
        .iter()
        .map(|x| x.as_ref().unwrap()["events"].as_array().unwrap().len())
        .collect();
    // restart (1) then define alone, then 250 drains: 100,100,50, then sentinel
    assert_eq!(sizes, [1, 1, 100, 100, 50, 0]);
    assert!(r[1].as_ref().unwrap().get("R").is_some());
    assert!(r[0].as_ref().unwrap().get("R").is_none());
    // not streaming: EPROTO
    let (to, out) = h.owner("resource.journal", Value::Null);
    assert_eq!(
        err(replies_to(&out, to).remove(0)),
        (EPROTO, "journal requires streaming RPC flag".into())
    );
}

#[test]
fn journal_cancel_and_disconnect() {
    let mut h = start();
    let (jto, _) = h.req("resource.journal", Value::Null, Role::Owner, true);
    assert_eq!(h.svc.followers(), 1);
    // cancel from another connection does nothing
    let (_, out) = h.owner("resource.journal-cancel", json!({"matchtag": 1}));
    assert!(replies_to(&out, jto).is_empty());
    let mut out = Vec::new();
    let req = request(
        jto.conn,
        2,
        "resource.journal-cancel",
        json!({"matchtag": 1}),
        false,
        Role::Owner,
    );
    h.svc.handle(2000.0, Input::Request(req), &mut out);
    assert_eq!(replies_to(&out, jto), vec![Err(RpcError::bare(ENODATA))]);
    assert_eq!(h.svc.followers(), 0);
    let (jto2, _) = h.req("resource.journal", Value::Null, Role::Owner, true);
    let mut out = Vec::new();
    h.svc.handle(2001.0, Input::Disconnect(jto2.conn), &mut out);
    assert!(out.is_empty());
    assert_eq!(h.svc.followers(), 0);
}

#[test]
fn truncation_invariant() {
    let (mut h, _) = start_with(r4_with(Settings {
        journal_max: 10,
        ..Default::default()
    }));
    for i in 0..30 {
        let t = format!("{}", i % 4);
        h.ok("resource.drain", json!({"targets": t, "mode": "update"}));
        if i >= 8 {
            assert_eq!(h.svc.journal().len(), 10);
            assert_eq!(h.svc.journal().events().next().unwrap().name, "truncate");
        }
    }
}

/// The RFC 44 truncate decision (README, "Journal"): the summary holds
/// the state when it is made (the REQUIRED keys are "currently"
/// available, torpid, drained), stamped with the last dropped event's time.
/// Events kept after it may repeat part of that state; a reader applying
/// the summary and then every kept event ends in the service's state,
/// because each event sets its targets' state (checked here on random
/// drain/undrain sequences).
#[test]
fn truncate_summary_then_kept_events_replay_to_the_current_state() {
    use std::collections::BTreeMap;
    type Drains = BTreeMap<u32, (f64, String)>;
    fn expand(obj: &Value) -> Drains {
        let mut m = Drains::new();
        for (ids, v) in obj.as_object().unwrap() {
            for r in idset::IdSet::parse(ids).unwrap().iter() {
                let reason = v["reason"].as_str().unwrap().to_string();
                m.insert(r, (v["timestamp"].as_f64().unwrap(), reason));
            }
        }
        m
    }
    let mut seed = 0x2026_1128_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..20 {
        let (mut h, _) = start_with(r4_with(Settings {
            journal_max: 6,
            ..Default::default()
        }));
        for i in 0..40 {
            h.now += 1.0;
            let lo = next(4) as u32;
            let hi = lo + next(4 - u64::from(lo)) as u32;
            let targets = format!("{lo}-{hi}");
            let _ = if next(3) == 0 {
                h.rpc(
                    "resource.undrain",
                    json!({"targets": targets, "mode": "force"}),
                )
            } else {
                let mode = ["update", "overwrite", "force-overwrite"][next(3) as usize];
                let reason = format!("r{round}.{i}");
                h.rpc(
                    "resource.drain",
                    json!({"targets": targets, "mode": mode, "reason": reason}),
                )
            };
        }
        let events: Vec<Event> = h.svc.journal().events().cloned().collect();
        let (first, kept) = events.split_first().unwrap();
        assert_eq!(first.name, "truncate", "round {round}");
        let status = h.rpc("resource.status", Value::Null).unwrap();
        let now = expand(&status["drain"]);
        // the summary is the current drain state
        let mut state = expand(first.get("drain").unwrap());
        assert_eq!(state, now, "round {round}: summary");
        assert_eq!(first.get("online"), Some(&status["online"]));
        assert_eq!(first.get("torpid"), Some(&status["torpid"]));
        // it carries the time of the last event it replaced: before the kept ones
        assert!(first.timestamp < kept[0].timestamp, "round {round}");
        for e in kept {
            let ids = idset::IdSet::parse(e.get("idset").unwrap().as_str().unwrap()).unwrap();
            match e.name.as_str() {
                "undrain" => ids.iter().for_each(|r| {
                    state.remove(&r);
                }),
                "drain" => {
                    let ow = e.get("overwrite").and_then(Value::as_u64).unwrap();
                    let reason = e.get("reason").unwrap().as_str().unwrap().to_string();
                    for r in ids.iter() {
                        match state.get_mut(&r) {
                            Some(_) if ow == 0 => {}
                            Some(d) => {
                                d.1.clone_from(&reason);
                                if ow == 2 {
                                    d.0 = e.timestamp;
                                }
                            }
                            None => {
                                state.insert(r, (e.timestamp, reason.clone()));
                            }
                        }
                    }
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert_eq!(state, now, "round {round}: replayed");
    }
}

fn ev(ts: f64, name: &str, c: Value) -> Event {
    Event::with_context(ts, name, c).unwrap()
}

fn replayed(events: Vec<Event>, checkpoint: Option<Value>) -> String {
    let (h, _) = start_with(Init {
        now: 10_000.0,
        inventory: Some(r4()),
        stored_events: events,
        checkpoint,
        ..Default::default()
    });
    h.svc.drained().encode()
}

#[test]
fn replay_remap_table() {
    let d = |ids: &str, nl: &str| {
        ev(
            100.0,
            "drain",
            json!({"idset": ids, "nodelist": nl, "reason": "x", "overwrite": 0}),
        )
    };
    assert_eq!(replayed(vec![d("1-2", "fake[1-2]")], None), "1-2");
    assert_eq!(replayed(vec![d("1-2", "fake[2-3]")], None), "2-3");
    assert_eq!(replayed(vec![d("1-2", "fake[3-4]")], None), "3");
    assert_eq!(replayed(vec![d("42", "fake42")], None), "");
    let cp = |nl: &str| json!({"timestamp": 50.0, "drain_state": {"0": {"timestamp": 40.0, "reason": "c", "nodelist": nl}}});
    assert_eq!(replayed(vec![], Some(cp("fake3"))), "3");
    assert_eq!(replayed(vec![], Some(cp("fake13"))), "");
}

/// Ranks 0-1 drained (`a`), then 1-2 (`b`, mode update).
fn drained_a_then_b() -> Harness {
    let mut h = start();
    h.ok("resource.drain", json!({"targets": "0-1", "reason": "a"}));
    h.ok(
        "resource.drain",
        json!({"targets": "1-2", "reason": "b", "mode": "update"}),
    );
    h
}

#[test]
fn replay_modes_match_live() {
    let mut h = drained_a_then_b();
    h.ok(
        "resource.drain",
        json!({"targets": "0", "reason": "c", "mode": "overwrite"}),
    );
    h.ok(
        "resource.drain",
        json!({"targets": "2", "mode": "force-overwrite"}),
    );
    h.ok("resource.undrain", json!({"targets": "1"}));
    let live = h.drain_status();
    let events = h.drain_events();
    let (mut h2, _) = start_with(Init {
        now: 99_999.0,
        inventory: Some(r4()),
        stored_events: events,
        ..Default::default()
    });
    assert_eq!(h2.drain_status(), live);
}

/// A hot standby (etcd backend): a follower core fed the leader's events
/// one batch at a time, then promoted, is the core a restart would build
/// from the whole log (drain state, journal, the start-up events), with
/// nothing replayed at promotion.
#[test]
fn follower_fed_live_then_promoted_equals_a_restart() {
    let mut h = drained_a_then_b();
    h.ok("resource.undrain", json!({"targets": "0"}));
    h.ok("resource.drain", json!({"targets": "3", "reason": "d"}));
    let events = h.drain_events();
    assert_eq!(events.len(), 4);
    let init = |stored: Vec<Event>| Init {
        now: 99_999.0,
        inventory: Some(r4()),
        stored_events: stored,
        ..Default::default()
    };
    // The standby started when the log had one event; the rest arrive.
    let mut f = Service::follower(init(events[..1].to_vec())).expect("follower");
    assert_eq!(f.followed(), 1);
    assert_eq!(f.drained().encode(), "0-1");
    f.follow(&events[1..3]).unwrap();
    assert_eq!(f.drained().encode(), "1-2", "followed events apply at once");
    f.follow(&events[3..]).unwrap();
    assert_eq!(f.followed(), 4);
    let mut out_f = Vec::new();
    f.promote(99_999.0, &mut out_f);
    let (restarted, out_r) = start_with(init(events.clone()));
    let names = |out: &[Output]| -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Output::Persist(e) => Some(e.name.clone()),
                Output::WriteR(_) => Some("R".into()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(names(&out_f), names(&out_r));
    assert!(!names(&out_f).is_empty());
    let mut hf = Harness {
        svc: f,
        now: 100_000.0,
        next_conn: 1,
    };
    let mut hr = Harness {
        svc: restarted.svc,
        now: 100_000.0,
        next_conn: 1,
    };
    assert_eq!(
        hf.rpc("resource.status", Value::Null).unwrap(),
        hr.rpc("resource.status", Value::Null).unwrap()
    );
    let journal =
        |h: &Harness| -> Vec<String> { h.svc.journal().events().map(|e| e.name.clone()).collect() };
    assert_eq!(journal(&hf), journal(&hr));
    // A bad event is refused with its position in the followed log.
    let bad = ev(1.0, "drain", json!({"idset": 7}));
    let e = hf.svc.follow(&[bad]).unwrap_err();
    assert!(e.to_string().contains("line 5"), "{e}");
}

#[test]
fn replay_errors_refuse_start() {
    let mut out = Vec::new();
    let bad = Init {
        now: 5.0,
        inventory: Some(r4()),
        stored_events: vec![ev(1.0, "drain", json!({"idset": "1"}))],
        ..Default::default()
    };
    let e = Service::new(bad, &mut out).unwrap_err();
    assert_eq!(e.to_string(), "resource.eventlog line 1: drain parse error");
}

#[test]
fn excluded_drains_are_undrained_at_start() {
    let (h, out) = start_with(Init {
        now: 5.0,
        inventory: Some(r4()),
        settings: Settings {
            exclude: Some("fake1".into()),
            ..Default::default()
        },
        stored_events: vec![ev(
            1.0,
            "drain",
            json!({"idset": "1", "nodelist": "fake1", "overwrite": 0}),
        )],
        ..Default::default()
    });
    assert_eq!(h.svc.excluded().encode(), "1");
    assert!(h.svc.drained().is_empty());
    let p = persisted(&out);
    assert_eq!(p[0].name, "undrain");
    assert_eq!(
        Value::Object(p[0].context.clone().unwrap()),
        json!({"idset": "1", "nodelist": "fake1"})
    );
    let mut out = Vec::new();
    let e = Service::new(
        r4_with(Settings {
            exclude: Some("7".into()),
            ..Default::default()
        }),
        &mut out,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "error decoding exclude set 7: exclude set 7 is out of range"
    );
}

#[test]
fn excluded_targets_cannot_be_drained_without_mode() {
    let (mut h, _) = start_with(r4_with(Settings {
        exclude: Some("0".into()),
        ..Default::default()
    }));
    h.ok("resource.drain", json!({"targets": "1", "reason": "x"}));
    assert_eq!(
        err(h.rpc("resource.drain", json!({"targets": "0-1"}))),
        (EEXIST, "ranks 0-1 already drained or excluded".into())
    );
}

#[test]
fn checkpoint_round_trip() {
    let mut h = start();
    h.ok(
        "resource.drain",
        json!({"targets": "0,2", "reason": "keep me"}),
    );
    h.ok("resource.drain", json!({"targets": "3"}));
    let before = h.drain_status();
    let mut out = Vec::new();
    h.svc.handle(5000.0, Input::Shutdown, &mut out);
    let cp = out
        .iter()
        .find_map(|o| match o {
            Output::WriteCheckpoint(v) => Some(v.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(cp["drain_state"]["0,2"]["nodelist"], json!("fake[0,2]"));
    // a restart with only the checkpoint (history truncated away)
    let (mut h2, _) = start_with(Init {
        now: 6000.0,
        inventory: Some(r4()),
        checkpoint: Some(cp),
        ..Default::default()
    });
    assert_eq!(h2.drain_status(), before);
}

#[test]
fn shutdown_ends_streams() {
    let mut h = start();
    let (jto, _) = h.req("resource.journal", Value::Null, Role::Owner, true);
    let mut out = Vec::new();
    h.svc.handle(3000.0, Input::Shutdown, &mut out);
    assert_eq!(replies_to(&out, jto), vec![Err(RpcError::bare(ENODATA))]);
}

/// RFC 20: expiration MUST be greater than starttime; an update that
/// would break it is refused (the stored R would not load again).
#[test]
fn expiration_update_keeps_expiration_after_starttime() {
    let text = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3"}}],"nodelist":["fake[0-3]"],"starttime":2000.0,"expiration":0.0}}"#;
    let (mut h, _) = start_with(Init {
        now: 999.0,
        inventory: Some(Inventory::from_json_text(text, Method::Configuration).unwrap()),
        ..Default::default()
    });
    for bad in [1500.0, 2000.0] {
        let (errno, msg) = err(h.rpc("resource.expiration-update", json!({"expiration": bad})));
        assert_eq!(errno, EINVAL);
        assert_eq!(
            msg,
            format!("expiration={bad} is not after starttime=2000: RFC 20: \"If starttime is also set, expiration MUST be greater than starttime.\"")
        );
    }
    h.ok("resource.expiration-update", json!({"expiration": 2000.5}));
    // 0 unsets it
    h.ok("resource.expiration-update", json!({"expiration": 0.0}));
}

#[test]
fn expiration_update_and_get() {
    let mut h = start();
    assert_eq!(
        err(h.rpc("resource.expiration-update", json!({}))).0,
        EPROTO
    );
    let (to, out) = h.owner("resource.expiration-update", json!({"expiration": 1234.0}));
    assert!(replies_to(&out, to)[0].is_ok());
    assert!(matches!(out[0], Output::WriteR(_)));
    assert_eq!(persisted(&out)[0].name, "resource-update");
    let g = h.rpc("resource.get", Value::Null).unwrap();
    assert_eq!(g["method"], json!("configuration"));
    assert_eq!(g["R"]["execution"]["expiration"], json!(1234.0));
}

#[test]
fn reload_checks_size() {
    let mut h = start();
    let (to, out) = h.owner(
        "resource.reload",
        json!({"path": "/x", "xml": false, "force": false}),
    );
    assert!(matches!(out[0], Output::LoadR { .. }));
    assert!(replies_to(&out, to).is_empty());
    let big = rset::Rset::from_json_str(
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-7","children":{"core":"0"}}]}}"#,
    )
    .unwrap();
    let mut out = Vec::new();
    h.svc.handle(
        3000.0,
        Input::Reloaded {
            to,
            force: false,
            result: Ok(big.clone()),
        },
        &mut out,
    );
    assert_eq!(
        err(replies_to(&out, to).remove(0)).1,
        "resource object contains ranks execeeding size=4 (override with -f))"
    );
    let mut out = Vec::new();
    h.svc.handle(
        3001.0,
        Input::Reloaded {
            to,
            force: true,
            result: Ok(big),
        },
        &mut out,
    );
    assert!(replies_to(&out, to)[0].is_ok());
    assert_eq!(persisted(&out)[0].get("method"), Some(&json!("reload")));
    assert_eq!(h.svc.size(), 8);
}

#[test]
fn force_down_and_waitup() {
    let (mut h, _) = start_with(r4_with(Settings {
        monitor_force_up: true,
        ..Default::default()
    }));
    let (wto, out) = h.owner("resource.monitor-waitup", json!({"up": 2}));
    assert!(replies_to(&out, wto).is_empty());
    let (_, out) = h.owner("resource.monitor-force-down", json!({"ranks": "2-3"}));
    assert_eq!(replies_to(&out, wto), vec![Ok(Value::Null)]);
    assert_eq!(h.svc.online().encode(), "0-1");
    let names: Vec<_> = h.svc.journal().events().map(|e| e.name.clone()).collect();
    assert_eq!(names.last().unwrap(), "offline");
    let ss = h.rpc("resource.sched-status", Value::Null).unwrap();
    assert_eq!(ss["down"]["execution"]["R_lite"][0]["rank"], json!("2-3"));
}

/// Replay starts at the checkpoint's position in the log when it has one,
/// whatever the timestamps: a drain acknowledged after a clean stop made
/// with the clock ahead is older than the checkpoint, yet after it.
#[test]
fn replay_by_checkpoint_position_not_by_timestamp() {
    let cp = json!({"timestamp": 90_000.0, "drain_state": {
        "0": {"timestamp": 80_000.0, "reason": "ahead", "nodelist": "fake0"}}});
    let before = ev(
        80_000.0,
        "drain",
        json!({"idset": "0", "nodelist": "fake0", "reason": "ahead", "overwrite": 0}),
    );
    let after = ev(
        1_000.0,
        "drain",
        json!({"idset": "1", "nodelist": "fake1", "reason": "true time", "overwrite": 0}),
    );
    let start = |replay_from| {
        let (h, _) = start_with(Init {
            now: 10_000.0,
            inventory: Some(r4()),
            stored_events: vec![before.clone(), after.clone()],
            checkpoint: Some(cp.clone()),
            replay_from,
            ..Default::default()
        });
        h.svc.drained().encode()
    };
    // With the position (1 event summarised), the later drain is replayed.
    assert_eq!(start(Some(1)), "0-1");
    // A checkpoint without a position falls back to timestamps, which is
    // how the drain was lost before.
    assert_eq!(start(None), "0");
}

#[test]
fn streaming_flag_on_a_one_reply_topic_is_one_eproto() {
    let mut h = start();
    for t in TOPICS
        .iter()
        .map(|t| t.info)
        .filter(|t| t.shape == Shape::One)
    {
        let (to, out) = h.req(t.name, json!({"targets": "0"}), Role::Owner, true);
        let replies = replies_to(&out, to);
        assert_eq!(replies.len(), 1, "{}: {out:?}", t.name);
        assert_eq!(
            err(replies.into_iter().next().unwrap()),
            (
                EPROTO,
                format!("{} does not accept the streaming RPC flag", t.name)
            ),
        );
        // Nothing else happened: no event, no other reply.
        assert_eq!(out.len(), 1, "{}: {out:?}", t.name);
    }
    assert!(h.svc.drained().is_empty());
    // The permission check comes first: a guest is refused with EPERM.
    let (to, out) = h.req("resource.drain", json!({}), Role::Guest, true);
    assert_eq!(
        err(replies_to(&out, to).remove(0)).0,
        EPERM,
        "guest on an owner topic"
    );
    let (to, out) = h.req("resource.status", json!({}), Role::Guest, true);
    assert_eq!(
        err(replies_to(&out, to).remove(0)),
        (
            EPROTO,
            "resource.status does not accept the streaming RPC flag".into()
        )
    );
    // Without the flag the same request is answered normally.
    let (to, out) = h.req("resource.status", json!({}), Role::Guest, false);
    assert!(replies_to(&out, to).remove(0).is_ok());
}

/// `Input::Cancel`: one request whose stream the transport ended (a
/// reader that fell behind) is forgotten at once, its connection staying.
#[test]
fn a_cancelled_stream_is_dropped_at_once() {
    let mut h = start();
    let (journal, out) = h.req("resource.journal", json!({}), Role::Owner, true);
    assert!(!replies_to(&out, journal).is_empty());
    let (acquire, out) = h.req("resource.acquire", json!({}), Role::Owner, true);
    assert_eq!(replies_to(&out, acquire).len(), 1);
    let (agent, out) = h.req(
        "resource.agent",
        json!({"hostname": "fake0"}),
        Role::Owner,
        true,
    );
    assert!(replies_to(&out, agent)[0].is_ok());
    let mut out = Vec::new();
    h.svc.handle(h.now, Input::Tick, &mut out);
    assert_eq!(h.svc.online().encode(), "0");
    assert_eq!((h.svc.followers(), h.svc.acquisitions().len()), (1, 1));

    for to in [journal, acquire, agent] {
        let mut out = Vec::new();
        h.svc.handle(h.now, Input::Cancel(to), &mut out);
        assert!(replies_to(&out, to).is_empty(), "silently: {out:?}");
    }
    assert_eq!(h.svc.followers(), 0);
    assert!(h.svc.acquisitions().is_empty());
    assert_eq!(h.svc.agents(), 0);
    let mut out = Vec::new();
    h.now += 1.0; // past the liveness batching interval
    h.svc.handle(h.now, Input::Tick, &mut out);
    assert!(h.svc.online().is_empty(), "the agent went offline");
    // Nothing more goes to the cancelled requests.
    let (_, out) = h.owner("resource.drain", json!({"targets": "1"}));
    for to in [journal, acquire, agent] {
        assert!(replies_to(&out, to).is_empty(), "{out:?}");
    }
    // A new acquire is not refused as busy, and fake0 can say hello again.
    let (to, out) = h.req("resource.acquire", json!({}), Role::Owner, true);
    assert!(replies_to(&out, to)[0].is_ok(), "{out:?}");
    let (to, out) = h.req(
        "resource.agent",
        json!({"hostname": "fake0"}),
        Role::Owner,
        true,
    );
    assert!(replies_to(&out, to)[0].is_ok(), "{out:?}");
    // Cancelling an unknown request is harmless.
    let mut out = Vec::new();
    h.svc.handle(
        h.now,
        Input::Cancel(ReplyTo {
            conn: 999,
            matchtag: 9,
        }),
        &mut out,
    );
    assert!(out.is_empty());
}

/// `resource.status` is cached between state changes: after every kind of
/// change the cached answer is the freshly computed one.
#[test]
fn cached_status_follows_every_state_change() {
    let mut h = start();
    let ops: Vec<(&str, Value)> = vec![
        ("resource.drain", json!({"targets": "1", "reason": "a"})),
        (
            "resource.drain",
            json!({"targets": "1-2", "reason": "b", "mode": "overwrite"}),
        ),
        (
            "resource.drain",
            json!({"targets": "2", "reason": "c", "mode": "force-overwrite"}),
        ),
        ("resource.drain", json!({"targets": "2"})), // error: already drained
        ("resource.undrain", json!({"targets": "1"})),
        ("resource.monitor-force-up", json!({})),
        ("resource.monitor-force-down", json!({"ranks": "0,3"})),
        ("resource.expiration-update", json!({"expiration": 12345.0})),
        (
            "resource.undrain",
            json!({"targets": "0-3", "mode": "force"}),
        ),
        ("resource.monitor-force-up", json!({"ranks": "3"})),
        (
            "resource.drain",
            json!({"targets": "0,3", "reason": "a \"quoted\"\treason \u{1F600} \\ </end>"}),
        ),
        ("resource.drain", json!({"targets": "1"})), // no reason
    ];
    let status = |h: &mut Harness| {
        let (to, out) = h.req("resource.status", json!({}), Role::Guest, false);
        replies_to(&out, to).remove(0).unwrap()
    };
    for (topic, p) in ops {
        status(&mut h); // the cache is filled
        let _ = h.owner(topic, p.clone());
        let cached = status(&mut h);
        let fresh = h.svc.status_uncached_for_tests();
        assert_eq!(Some(&cached), fresh.as_ref(), "after {topic} {p}");
        // The text written directly is what serde_json writes for it.
        assert_eq!(
            h.svc.status_text_for_tests(),
            fresh.map(|v| v.to_string()),
            "after {topic} {p}"
        );
    }
    // Agents: hello, torpid, offline.
    status(&mut h);
    let (agent, _) = h.req(
        "resource.agent",
        json!({"hostname": "fake2"}),
        Role::Owner,
        true,
    );
    let mut out = Vec::new();
    h.now += 1.0;
    h.svc.handle(h.now, Input::Tick, &mut out);
    assert_eq!(Some(status(&mut h)), h.svc.status_uncached_for_tests());
    h.svc.handle(h.now, Input::Disconnect(agent.conn), &mut out);
    h.now += 1.0;
    h.svc.handle(h.now, Input::Tick, &mut out);
    assert_eq!(Some(status(&mut h)), h.svc.status_uncached_for_tests());
}

/// The status text leaves R's `scheduling` key out and keeps the other
/// keys in their order, as the value would.
#[test]
fn status_text_leaves_scheduling_out() {
    let text = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}}],"nodelist":["fake[0-1]"],"starttime":0.0,"expiration":0.0},"scheduling":{"graph":{"nodes":[]}},"zzz":[1,2.5,"x"]}"#;
    let inv = Inventory::from_json_text(text, Method::Configuration).unwrap();
    let (h, _) = start_with(Init {
        now: 5.0,
        inventory: Some(inv),
        ..Default::default()
    });
    let fresh = h.svc.status_uncached_for_tests().unwrap();
    assert!(fresh["R"].get("scheduling").is_none());
    let t = h.svc.status_text_for_tests().unwrap();
    assert_eq!(t, fresh.to_string());
    assert!(
        !t.contains("scheduling") && t.contains(r#""zzz":[1,2.5,"x"]"#),
        "{t}"
    );
}

#[test]
fn broker_attributes_and_config_come_from_the_service() {
    let mut h = start();
    let mut ask = |payload: Value| {
        let (to, out) = h.req("attr.get", payload, Role::Guest, false);
        replies_to(&out, to).remove(0)
    };
    let attr = |name: &str| json!({ "name": name });
    assert_eq!(
        ask(attr("rank")).unwrap(),
        json!({"value": "0", "flags": 0})
    );
    assert_eq!(ask(attr("instance-level")).unwrap()["value"], "0");
    let version = ask(attr("version")).unwrap();
    assert!(version["value"]
        .as_str()
        .unwrap()
        .starts_with("0.88.0-roster-"));
    assert_eq!(ask(attr("hostlist")).unwrap()["value"], "fake[0-3]");
    assert_eq!(ask(attr("size")).unwrap()["value"], "4");
    // Not an attribute of a top-level instance: bare ENOENT.
    let e = ask(attr("parent-uri")).unwrap_err();
    assert_eq!((e.errnum, e.errstr), (ENOENT, None));
    // No name: flux-core's bare protocol error.
    assert_eq!(err(ask(json!({}))), (EPROTO, "Protocol error".into()));
    assert_eq!(
        err(ask(json!({"name": 3}))),
        (EPROTO, "Protocol error".into())
    );
    let (to, out) = h.req("config.get", Value::Null, Role::Guest, false);
    assert_eq!(replies_to(&out, to).remove(0).unwrap(), json!({}));
    // Another service's topic that Roster lacks: the broker's ENOSYS.
    let (to, out) = h.owner("job-manager.stats-get", Value::Null);
    assert_eq!(
        err(replies_to(&out, to).remove(0)),
        (
            ENOSYS,
            "No service matching job-manager.stats-get is registered".into()
        )
    );
}
