//! Group-commit cost of the state directory: one durable append
//! (write + fdatasync) of a single drain event, and of a batch of 100.
//!
//! The directory is created under `$ROSTER_STORE_BENCH_DIR` if set (point
//! it at the file system the daemon will use), else the system temporary
//! directory.  On tmpfs the fdatasync is free and the figures mean little.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use eventlog::Event;
use serde_json::json;
use store::StateDir;

fn drain(i: usize) -> Event {
    let ctx = json!({
        "idset": i.to_string(),
        "nodelist": format!("node{i}"),
        "reason": "bench drain",
        "overwrite": 0,
    });
    match Event::with_context(1_760_000_000.0 + i as f64 * 0.001, "drain", ctx) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("ROSTER_STORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    match tempfile::tempdir_in(&base) {
        Ok(d) => d,
        Err(e) => panic!("tempdir in {}: {e}", base.display()),
    }
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_append");
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(4));
    g.warm_up_time(Duration::from_secs(1));

    for batch in [1usize, 100] {
        let dir = bench_dir();
        let (mut sd, _) = match StateDir::open(dir.path()) {
            Ok(x) => x,
            Err(e) => panic!("{e}"),
        };
        let events: Vec<Event> = (0..batch).map(drain).collect();
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(format!("append_{batch}_fdatasync"), |b| {
            b.iter(|| {
                if let Err(e) = sd.append(black_box(&events)) {
                    panic!("{e}");
                }
            })
        });
    }
    g.finish();
}

criterion_group!(store_benches, benches);
criterion_main!(store_benches);
