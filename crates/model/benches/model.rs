#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! Resource graph benchmarks on a 16,384 nodes x 2 sockets x 48 cores +
//! 4 GPUs machine (1,687,553 pools), and on the shared R16k.json.
//!
//! Besides the criterion timings this prints the measured heap bytes per
//! pool (a counting global allocator wraps the system allocator).

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use model::matcher::Request;
use model::{Graph, Pool};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

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
    let before = LIVE.load(Ordering::Relaxed);
    let t = Instant::now();
    let g = build();
    let el = t.elapsed();
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    eprintln!(
        "generated graph: {} pools, built in {:.1} ms, {} heap bytes = {:.1} bytes/pool (estimate {:.1})",
        g.len(),
        el.as_secs_f64() * 1e3,
        bytes,
        bytes as f64 / g.len() as f64,
        g.memory_bytes() as f64 / g.len() as f64
    );
    if let Ok(r) = std::fs::read_to_string(shared().join("R16k.json")) {
        let before = LIVE.load(Ordering::Relaxed);
        let t = Instant::now();
        let g = Graph::from_r_str(&r, true).expect("R16k");
        let el = t.elapsed();
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        eprintln!(
            "R16k.json: {} pools, built in {:.1} ms, {:.1} bytes/pool",
            g.len(),
            el.as_secs_f64() * 1e3,
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

/// The shared workloads: `$SHARED`, else `shared/bench` beside the repo.
fn shared() -> std::path::PathBuf {
    std::env::var_os("SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/bench").into())
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
    c.bench_function("allocate+free 1-slot 8-core job (empty)", |b| {
        b.iter(|| {
            job += 1;
            let m = g.match_allocate(&slot8, job).expect("match");
            black_box(&m);
            g.free_job(job).expect("free");
        })
    });

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
    c.bench_function("allocate+free 1-slot 8-core job (half full)", |b| {
        b.iter(|| {
            job += 1;
            let m = half.match_allocate(&slot8, job).expect("match");
            black_box(&m);
            half.free_job(job).expect("free");
        })
    });

    let node4 = Request::nodes(4, 1, 1, 0, true);
    c.bench_function("allocate+free 4-node exclusive job", |b| {
        b.iter(|| {
            job += 1;
            let m = g.match_allocate(&node4, job).expect("match");
            black_box(&m);
            g.free_job(job).expect("free");
        })
    });

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
