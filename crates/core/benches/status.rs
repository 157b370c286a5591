//! `resource.status` and `resource.sched-status` at 16,384 nodes, as the
//! service loop answers them and a transport writes them: the core's
//! handling plus the reply's JSON text.
//!
//! Two states: the flood bench's (`sim[0-16383]`, one shape, every node
//! online, nothing drained) and the shared workload's (`R16k.json`, 30
//! shapes, 30% of the nodes drained one by one with 50 reasons: one
//! drain entry per rank).

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use roster_core::{Init, Input, Inventory, Method, Output, Service, Settings};
use rpc::Role;
use serde_json::json;

/// `R16k.json` from the shared workloads (`$SHARED`, else
/// `../shared/bench` beside the checkout), if there.
fn r16k() -> Option<String> {
    let dir = match std::env::var_os("SHARED") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/bench"
        )),
    };
    std::fs::read_to_string(dir.join("R16k.json")).ok()
}

fn homogeneous() -> Inventory {
    let text = json!({"version": 1, "execution": {
        "R_lite": [{"rank": "0-16383", "children": {"core": "0-3"}}],
        "nodelist": ["sim[0-16383]"], "starttime": 0.0, "expiration": 0.0}});
    Inventory::from_json_text(&text.to_string(), Method::Configuration).unwrap()
}

/// The shared drain set: 4,915 ranks (Python's `random.Random(42).sample`
/// is not reproduced; an LCG picks the same count).
fn drain_set() -> Vec<u32> {
    let mut x: u64 = 42;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < 4915 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        picked.insert(((x >> 33) % 16384) as u32);
    }
    picked.into_iter().collect()
}

fn request(tag: u32, topic: &str, payload: serde_json::Value) -> Input {
    Input::Request(common::request(
        u64::from(tag),
        tag,
        topic,
        payload,
        false,
        Role::Owner,
    ))
}

fn service(inv: Inventory, drains: &[u32]) -> Service {
    let mut out = Vec::new();
    let mut svc = Service::new(
        Init {
            now: 1000.0,
            inventory: Some(inv),
            settings: Settings {
                monitor_force_up: true,
                ..Default::default()
            },
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    for (i, r) in drains.iter().enumerate() {
        let p = json!({"targets": r.to_string(), "reason": format!("reason-{}", i % 50)});
        out.clear();
        svc.handle(1001.0 + i as f64, request(1, "resource.drain", p), &mut out);
    }
    svc
}

/// Handle one request and write its reply as a transport would.
fn answer(svc: &mut Service, topic: &str, out: &mut Vec<Output>) -> usize {
    out.clear();
    svc.handle(1e6, request(7, topic, json!({})), out);
    match out.last() {
        Some(Output::Reply { reply: Ok(p), .. }) => p.to_json().len(),
        o => panic!("{o:?}"),
    }
}

fn bench(c: &mut Criterion) {
    let mut cases = vec![("flood", service(homogeneous(), &[]))];
    match r16k() {
        Some(text) => cases.push((
            "r16k-drained",
            service(
                Inventory::from_json_text(&text, Method::Configuration).unwrap(),
                &drain_set(),
            ),
        )),
        None => eprintln!("R16k.json not found (set SHARED): r16k-drained skipped"),
    }
    let mut out = Vec::new();
    for (name, svc) in &cases {
        // What the first status after a state change costs (the cache is
        // rebuilt): the payload built afresh and serialised.
        let text = svc.status_text_for_tests().expect("R is known");
        let value = svc.status_uncached_for_tests().expect("R is known");
        assert_eq!(text, value.to_string(), "{name}: the text is the value's");
        c.bench_function(&format!("{name}/resource.status-uncached"), |b| {
            b.iter(|| svc.status_text_for_tests().map_or(0, |t| t.len()))
        });
        c.bench_function(&format!("{name}/resource.status-as-value"), |b| {
            b.iter(|| {
                let v = svc.status_uncached_for_tests().expect("R is known");
                serde_json::to_string(&v).map_or(0, |s| s.len())
            })
        });
    }
    for (name, mut svc) in cases {
        for topic in ["resource.status", "resource.sched-status"] {
            let n = answer(&mut svc, topic, &mut out);
            eprintln!("{name} {topic}: {n} bytes");
            c.bench_function(&format!("{name}/{topic}"), |b| {
                b.iter(|| answer(&mut svc, topic, &mut out))
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
