#![allow(unsafe_code)] // the counting allocator of `common`
//! What `roster graph --follow` (its graph follower) does with R16k, timed
//! step by step on the model calls it makes: build the graph from the
//! first `resource.acquire` response (JSON text → graph, target index),
//! apply a one-target `down`/`up` update (set_state on the node), and
//! `match allocate` + free of a 1-node exclusive job with 30 % of the
//! nodes drained (down).  Prints heap bytes per vertex (counting
//! allocator) before and after the drain.
//!
//! The drain set: 4,915 of 16,384 ranks drawn by a 64-bit LCG (seed 42),
//! not Python's `random.Random(42)`: the count and spread match the
//! shared README's set, the exact ranks do not.

mod common;
use common::{bench_allocate_free, live, measured, shared};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use model::matcher::Request;
use model::{Graph, State};
use std::time::{Duration, Instant};

/// The first acquire response as the service sends it: `{resources, up}`.
fn first_response(r: &str) -> String {
    format!("{{\"resources\": {r}, \"up\": \"0-16383\"}}")
}

/// What the follower does with the first response.
fn build(text: &str) -> (Graph, std::collections::BTreeMap<i64, model::VertexId>) {
    let v: serde_json::Value = serde_json::from_str(text).expect("JSON");
    let g = Graph::from_r_value(&v["resources"], true).expect("R16k");
    let t = g.target_roots();
    (g, t)
}

fn drain_set() -> Vec<i64> {
    let mut x: u64 = 42;
    let mut picked = vec![false; 16_384];
    let mut out = Vec::new();
    while out.len() < 4_915 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = ((x >> 33) % 16_384) as usize;
        if !picked[r] {
            picked[r] = true;
            out.push(r as i64);
        }
    }
    out.sort_unstable();
    out
}

fn benches(c: &mut Criterion) {
    let Ok(r) = std::fs::read_to_string(shared().join("R16k.json")) else {
        eprintln!("R16k.json not found (set SHARED): follower benches skipped");
        return;
    };
    let text = first_response(&r);
    // Same-run baseline: parse the response as generic JSON only.
    c.bench_function("baseline: parse the R16k first response as JSON", |b| {
        b.iter(|| black_box(serde_json::from_str::<serde_json::Value>(&text).unwrap()))
    });
    c.bench_function(
        "follower: first graph from the R16k acquire response",
        |b| b.iter(|| black_box(build(&text))),
    );

    let before = live();
    let ((mut g, targets), ms, bytes) = measured(|| build(&text));
    eprintln!(
        "follower: {} vertices built in {:.1} ms; heap {} B = {:.1} B/vertex (graph + target index)",
        g.len(),
        ms,
        bytes,
        bytes as f64 / g.len() as f64
    );

    let n = targets[&8_000];
    let mut down = false;
    c.bench_function("follower: apply a one-target down/up update", |b| {
        b.iter(|| {
            down = !down;
            g.set_state(n, if down { State::Down } else { State::Up })
                .unwrap();
        })
    });
    if down {
        g.set_state(n, State::Up).unwrap();
    }

    let drained = drain_set();
    let t0 = Instant::now();
    for r in &drained {
        g.set_state(targets[r], State::Down).unwrap();
    }
    eprintln!(
        "follower: 30% drain ({} targets) applied in {:.2} ms ({:.2} µs/target); {} nodes available",
        drained.len(),
        t0.elapsed().as_secs_f64() * 1e3,
        t0.elapsed().as_secs_f64() * 1e6 / drained.len() as f64,
        g.aggregate_all()["node"]
    );
    let bytes = live() - before;
    eprintln!(
        "follower: after the drain heap {} B = {:.1} B/vertex",
        bytes,
        bytes as f64 / g.len() as f64
    );
    let req = Request::nodes(1, 1, 1, 0, true);
    let mut job = 1u64;
    bench_allocate_free(
        c,
        "follower: match allocate+free 1-node exclusive, 30% drained",
        &mut g,
        &req,
        &mut job,
        true,
    );
    // Half the up nodes busy: the first fit walks past them.
    let mut hj = 1u64 << 40;
    for _ in 0..5_000 {
        hj += 1;
        g.match_allocate(&req, hj).expect("match").expect("fits");
    }
    bench_allocate_free(
        c,
        "follower: match allocate+free 1-node exclusive, 30% drained, 5000 nodes busy",
        &mut g,
        &req,
        &mut job,
        true,
    );
}

criterion_group! {
    name = follower;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(follower);
