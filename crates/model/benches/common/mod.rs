//! What the model benches share: a counting global allocator (the live
//! heap bytes, for bytes-per-vertex figures) and where the shared
//! workloads are.

use criterion::{black_box, Criterion};
use model::matcher::Request;
use model::Graph;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

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

/// The heap bytes live now.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// `f()`, with how long it took (ms) and the heap bytes it left live.
pub fn measured<T>(f: impl FnOnce() -> T) -> (T, f64, isize) {
    let before = live();
    let t = std::time::Instant::now();
    let v = f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    (v, ms, live() - before)
}

/// Time `match allocate` + free of `req` on `g` (each time the next `job`
/// id); with `must_fit`, a job that does not fit fails the bench.
pub fn bench_allocate_free(
    c: &mut Criterion,
    name: &str,
    g: &mut Graph,
    req: &Request,
    job: &mut u64,
    must_fit: bool,
) {
    c.bench_function(name, |b| {
        b.iter(|| {
            *job += 1;
            let m = g.match_allocate(req, *job).expect("match");
            assert!(!must_fit || m.is_some(), "fits");
            black_box(&m);
            g.free_job(*job).expect("free");
        })
    });
}

/// The shared workloads: `$SHARED`, else `shared/bench` beside the repo.
pub fn shared() -> std::path::PathBuf {
    std::env::var_os("SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/bench").into())
}
