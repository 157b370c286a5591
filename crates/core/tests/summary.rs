//! `resource.summary` after random event sequences: the summary the
//! service keeps between state changes equals one recomputed from
//! scratch, both from the service's state and (the client's way) from
//! the `resource.status` and `resource.sched-status` replies; and a
//! restart replaying the stored events summarises the drains the same.

mod common;

use eventlog::Event;
use proptest::prelude::*;
use roster_core::*;
use rpc::msg::{self, DrainGroup, ListCell, ListSummary, StatusSummary, SummaryResponse};
use rpc::{Payload, Role};
use rset::{RSummary, Rset};
use serde_json::{json, Value};

/// 16 nodes, two shapes, at most one property a node (the service's
/// summary takes its rank-set path).
const R16_SIMPLE: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-7","children":{"core":"0-3"}},{"rank":"8-15","children":{"core":"0-7","gpu":"0-1"}}],"nodelist":["node[0-15]"],"properties":{"batch":"5-9","gpu":"2,12-15","debug":"0,11"},"starttime":0.0,"expiration":0.0}}"#;

/// 16 nodes, two shapes, three properties (some nodes have two, some
/// none: the general path).
const R16: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-7","children":{"core":"0-3"}},{"rank":"8-15","children":{"core":"0-7","gpu":"0-1"}}],"nodelist":["node[0-15]"],"properties":{"batch":"0-11","gpu":"8-15","debug":"0-1,12"},"starttime":0.0,"expiration":0.0}}"#;

struct H {
    svc: Service,
    now: f64,
    conn: u64,
    persisted: Vec<Event>,
}

impl H {
    fn start(r: &str, exclude: Option<String>, stored: Vec<Event>, force_up: bool) -> H {
        let mut out = Vec::new();
        let inv = Inventory::from_json_text(r, Method::Configuration).expect("R");
        let settings = Settings {
            exclude,
            monitor_force_up: force_up,
            ..Default::default()
        };
        let svc = Service::new(
            Init {
                now: 999.0,
                inventory: Some(inv),
                settings,
                stored_events: stored.clone(),
                ..Default::default()
            },
            &mut out,
        )
        .expect("start");
        let mut h = H {
            svc,
            now: 1000.0,
            conn: 1,
            persisted: stored,
        };
        h.keep(&out);
        h
    }

    fn keep(&mut self, out: &[Output]) {
        for o in out {
            if let Output::Persist(e) = o {
                self.persisted.push(e.clone());
            }
        }
    }

    fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, String> {
        self.now += 1.0;
        self.conn += 1;
        let req = common::request(self.conn, 1, topic, payload, false, Role::Owner);
        let to = req.reply_to();
        let mut out = Vec::new();
        self.svc.handle(self.now, Input::Request(req), &mut out);
        self.keep(&out);
        out.into_iter()
            .find_map(|o| match o {
                Output::Reply { to: t, reply } if t == to => {
                    Some(reply.map(Payload::into_value).map_err(|e| e.to_string()))
                }
                _ => None,
            })
            .unwrap_or_else(|| Err("no reply".into()))
    }

    fn summary(&mut self) -> SummaryResponse {
        let v = self
            .rpc("resource.summary", json!({"list": true}))
            .expect("summary");
        msg::decode(&v).expect("summary shape")
    }
}

/// The status part as a client computes it from `resource.status`.
fn status_from_reply(st: &Value, ss: &Value) -> StatusSummary {
    let r = RSummary::from_json(&st["R"]).expect("R");
    let drain = st["drain"]
        .as_object()
        .expect("drain")
        .iter()
        .map(|(ranks, e)| DrainGroup {
            ranks: ranks.clone(),
            timestamp: e["timestamp"].as_f64().expect("timestamp"),
            reason: e["reason"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    let s = |k: &str| st[k].as_str().unwrap_or("").to_string();
    StatusSummary {
        ranks: r.ranks.encode(),
        nodelist: r.nodelist.map(|h| h.encode()).unwrap_or_default(),
        online: s("online"),
        offline: s("offline"),
        exclude: s("exclude"),
        torpid: s("torpid"),
        allocated: Rset::from_json(&ss["allocated"])
            .expect("allocated")
            .ranks()
            .encode(),
        drain,
    }
}

/// The list part as `flux resource list` computes it from
/// `resource.sched-status` (what `resource.allocated-set` said is
/// `allocated`).
fn list_from_reply(ss: &Value) -> ListSummary {
    let read = |k: &str| Rset::from_json(&ss[k]).expect("R");
    let (all, down, allocated) = (read("all"), read("down"), read("allocated"));
    let up = all.copy_diff(&down).expect("up");
    let free = if allocated.is_empty() {
        all.copy_diff_copy(&down).expect("free")
    } else {
        up.copy_diff(&allocated).expect("free")
    };
    let cells = |r: &Rset| -> Vec<ListCell> {
        r.split_by_properties()
            .expect("split")
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(|mut s| {
                let properties = s.property_names_in_list_order();
                s.sort_by_rank();
                ListCell {
                    properties,
                    ranks: s.ranks().encode(),
                    nodelist: s.nodelist().map(|h| h.encode()).unwrap_or_default(),
                    nnodes: s.nnodes() as u64,
                    ncores: s.count("core"),
                    ngpus: s.count("gpu"),
                }
            })
            .collect()
    };
    ListSummary {
        all: cells(&all),
        down: cells(&down),
        allocated: cells(&allocated),
        up: cells(&up),
        free: cells(&free),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Drain(Vec<u32>, u8, u8),
    Undrain(Vec<u32>, u8),
    Up(Vec<u32>),
    /// A scheduler's `resource.allocated-set`.
    Allocate(Vec<u32>),
    Down(Vec<u32>),
}

fn ranks() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(0u32..16, 1..6)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (ranks(), 0u8..4, 0u8..4).prop_map(|(r, reason, mode)| Op::Drain(r, reason, mode)),
        2 => (ranks(), 0u8..3).prop_map(|(r, mode)| Op::Undrain(r, mode)),
        1 => ranks().prop_map(Op::Up),
        1 => ranks().prop_map(Op::Down),
        1 => ranks().prop_map(Op::Allocate),
    ]
}

fn idset(r: &[u32]) -> String {
    let mut ids = idset::IdSet::new();
    for &x in r {
        ids.insert(x);
    }
    ids.encode()
}

fn apply(h: &mut H, op: &Op) {
    let _ = match op {
        Op::Drain(r, reason, mode) => {
            let mut p = json!({"targets": idset(r)});
            if *reason > 0 {
                p["reason"] = json!(format!("reason {reason}"));
            }
            match mode {
                1 => p["mode"] = json!("update"),
                2 => p["mode"] = json!("overwrite"),
                3 => p["mode"] = json!("force-overwrite"),
                _ => {}
            }
            h.rpc("resource.drain", p)
        }
        Op::Undrain(r, mode) => {
            let mut p = json!({"targets": idset(r)});
            if *mode > 0 {
                p["mode"] = json!(if *mode == 1 { "update" } else { "force" });
            }
            h.rpc("resource.undrain", p)
        }
        Op::Up(r) => h.rpc("resource.monitor-force-up", json!({"ranks": idset(r)})),
        Op::Down(r) => h.rpc("resource.monitor-force-down", json!({"ranks": idset(r)})),
        Op::Allocate(r) => h.rpc("resource.allocated-set", json!({"targets": idset(r)})),
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn kept_summary_equals_one_from_scratch(
        simple in any::<bool>(),
        exclude in proptest::option::of(ranks()),
        ops in proptest::collection::vec(op(), 0..24),
    ) {
        let exclude = exclude.map(|r| idset(&r));
        let r = if simple { R16_SIMPLE } else { R16 };
        let mut h = H::start(r, exclude.clone(), Vec::new(), true);
        h.summary(); // the summary is kept from here on
        for op in &ops {
            apply(&mut h, op);
            let kept = h.summary();
            let fresh = h.svc.summary(true).expect("summary");
            prop_assert_eq!(&kept, &fresh, "after {:?}", op);
            let st = h.rpc("resource.status", json!({})).expect("status");
            let ss = h.rpc("resource.sched-status", json!({})).expect("sched-status");
            prop_assert_eq!(kept.status.as_ref(), Some(&status_from_reply(&st, &ss)), "after {:?}", op);
            prop_assert_eq!(kept.list.as_ref(), Some(&list_from_reply(&ss)), "after {:?}", op);
            // Without the list part, the same status part.
            let v = h.rpc("resource.summary", json!({})).expect("summary");
            let short: SummaryResponse = msg::decode(&v).expect("shape");
            prop_assert_eq!(&short.status, &kept.status);
            prop_assert!(short.list.is_none());
        }
        // A restart replaying the stored events drains the same ranks
        // for the same reasons (excluded ranks are undrained at start).
        let before = h.summary();
        let stored = std::mem::take(&mut h.persisted);
        let mut again = H::start(r, exclude.clone(), stored, true);
        let after = again.summary();
        let excluded = idset::IdSet::parse(exclude.as_deref().unwrap_or("")).expect("exclude");
        let drains = |s: &SummaryResponse| {
            s.status.as_ref().map(|st| {
                st.drain
                    .iter()
                    .filter_map(|g| {
                        let ranks = idset::IdSet::parse(&g.ranks).expect("ranks").difference(&excluded);
                        (!ranks.is_empty()).then(|| (ranks.encode(), g.reason.clone()))
                    })
                    .collect::<std::collections::BTreeSet<_>>()
            })
        };
        prop_assert_eq!(drains(&before), drains(&after));
    }
}
