#![allow(unsafe_code)] // the counting allocator of `common`
//! Resource graph benchmarks on a 16,384 nodes x 2 sockets x 48 cores +
//! 4 GPUs machine (1,687,553 pools), and on the shared R16k.json.
//!
//! Besides the criterion timings this prints the measured heap bytes per
//! pool (a counting global allocator wraps the system allocator).

mod common;
use common::{bench_allocate_free, measured, shared};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use model::matcher::Request;
use model::{Graph, Pool};
use std::time::{Duration, Instant};

const NODES: i64 = 16_384;

/// cluster0 > node{0..16383} > socket{0,1} > core{0..95} (48 per socket)
/// and gpu{0..3} (2 per socket).
fn build() -> Graph {
    let per_node = 1 + 2 + 96 + 4;
    let mut g = Graph::with_capacity(1 + NODES as usize * per_node);
    let cluster = g.intern("cluster");
    let node = g.intern("node");
    let socket = g.intern("socket");
    let core = g.intern("core");
    let gpu = g.intern("gpu");
    let root = g.add_root(Pool::new(cluster).id(0));
    for n in 0..NODES {
        let nv = g
            .add_child(root, Pool::new(node).id(n).rank(n))
            .expect("node");
        for s in 0..2 {
            let sv = g
                .add_child(nv, Pool::new(socket).id(s).rank(n))
                .expect("socket");
            for c in 0..48 {
                g.add_child(sv, Pool::new(core).id(s * 48 + c).rank(n))
                    .expect("core");
            }
            for k in 0..2 {
                g.add_child(sv, Pool::new(gpu).id(s * 2 + k).rank(n))
                    .expect("gpu");
            }
        }
    }
    g
}

fn report_memory() {
    let (g, ms, bytes) = measured(build);
    eprintln!(
        "generated graph: {} pools, built in {:.1} ms, {} heap bytes = {:.1} bytes/pool (estimate {:.1})",
        g.len(),
        ms,
        bytes,
        bytes as f64 / g.len() as f64,
        g.memory_bytes() as f64 / g.len() as f64
    );
    if let Ok(r) = std::fs::read_to_string(shared().join("R16k.json")) {
        let (g, ms, bytes) = measured(|| Graph::from_r_str(&r, true).expect("R16k"));
        eprintln!(
            "R16k.json: {} pools, built in {:.1} ms, {:.1} bytes/pool",
            g.len(),
            ms,
            bytes as f64 / g.len() as f64
        );
        drop(g);
    }
    drop(g);
}

fn fill_report() {
    let mut g = build();
    let req = Request::nodes(1, 1, 1, 0, true);
    let t = Instant::now();
    let mut n = 0u64;
    while g.match_allocate(&req, n + 1).expect("allocate").is_some() {
        n += 1;
    }
    eprintln!(
        "fill: {} one-node exclusive jobs in {:.1} ms",
        n,
        t.elapsed().as_secs_f64() * 1e3
    );
}

fn benches(c: &mut Criterion) {
    report_memory();
    fill_report();

    // Same-run baseline: the bare memory traffic of as many records of the
    // graph's size per pool (80 bytes), pushed into a Vec.
    c.bench_function("baseline: push 1.69M 80-byte records", |b| {
        b.iter(|| {
            let n = 1 + NODES as usize * (1 + 2 + 96 + 4);
            let mut v: Vec<[u64; 10]> = Vec::with_capacity(n);
            for i in 0..n as u64 {
                v.push([i; 10]);
            }
            black_box(v)
        })
    });

    c.bench_function("build 16k x 2 x 48 + 4 gpu", |b| {
        b.iter(|| black_box(build()))
    });

    if let Ok(r) = std::fs::read_to_string(shared().join("R16k.json")) {
        c.bench_function("build from R16k.json", |b| {
            b.iter(|| black_box(Graph::from_r_str(&r, true).expect("R16k")))
        });
    }

    let mut g = build();
    let slot8 = Request::slots(1, 8, 0);
    let mut job = 1u64;
    bench_allocate_free(
        c,
        "allocate+free 1-slot 8-core job (empty)",
        &mut g,
        &slot8,
        &mut job,
        false,
    );

    // Half the machine busy with 8-core jobs spread over every node.
    let mut half = build();
    // Far from the ids the timed loops use (they run for millions of iterations).
    let mut hj = 1u64 << 40;
    for _ in 0..(NODES as u64 * 6) {
        hj += 1;
        half.match_allocate(&slot8, hj)
            .expect("match")
            .expect("fits");
    }
    bench_allocate_free(
        c,
        "allocate+free 1-slot 8-core job (half full)",
        &mut half,
        &slot8,
        &mut job,
        false,
    );

    let node4 = Request::nodes(4, 1, 1, 0, true);
    bench_allocate_free(
        c,
        "allocate+free 4-node exclusive job",
        &mut g,
        &node4,
        &mut job,
        false,
    );

    c.bench_function("fill 16384 one-node jobs", |b| {
        b.iter_batched(
            build,
            |mut g| {
                let req = Request::nodes(1, 1, 1, 0, true);
                let mut n = 0u64;
                while g.match_allocate(&req, n + 1).expect("allocate").is_some() {
                    n += 1;
                }
                assert_eq!(n, NODES as u64);
                g
            },
            BatchSize::PerIteration,
        )
    });

    c.bench_function("copy whole graph", |b| b.iter(|| black_box(g.copy_all())));
}

criterion_group! {
    name = model;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(model);
