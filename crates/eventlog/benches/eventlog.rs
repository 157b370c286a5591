//! Eventlog workloads at El Capitan scale: upstream issue #6132 reports a
//! resource.eventlog of more than 86,000 entries replayed at every start.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use eventlog::{decode_log, encode_log, Event, EventLogFile};
use serde_json::json;

const N: usize = 86_000;

fn drains(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let name = if i % 2 == 0 { "drain" } else { "undrain" };
            Event::with_context(
                1_733_965_155.627_215_9 + i as f64 * 0.013,
                name,
                json!({
                    "idset": format!("{}", i % 16384),
                    "nodelist": format!("elcap{}", i % 16384),
                    "reason": "unkillable processes for job ƒ4zX8UnMMxj",
                    "overwrite": 0
                }),
            )
            .unwrap_or_else(|e| panic!("bench input: {e}"))
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let events = drains(N);
    let log = encode_log(&events).unwrap_or_default();
    assert_eq!(decode_log(&log).map(|v| v.len()).ok(), Some(N));

    let mut g = c.benchmark_group("eventlog");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("encode_86k", |b| {
        b.iter(|| black_box(encode_log(black_box(&events))))
    });
    g.bench_function("decode_86k", |b| {
        b.iter(|| black_box(decode_log(black_box(&log))))
    });

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("resource.eventlog");
    std::fs::write(&path, &log).unwrap_or_else(|e| panic!("write: {e}"));
    g.bench_function("open_replay_86k", |b| {
        b.iter(|| black_box(EventLogFile::open(&path).map(|o| o.events.len())))
    });
    g.finish();

    // Group commit: one fdatasync per batch, whatever its size.
    let mut g = c.benchmark_group("eventlog_commit");
    g.sample_size(10);
    let path = dir.path().join("commit.eventlog");
    let mut file = EventLogFile::open(&path)
        .unwrap_or_else(|e| panic!("open: {e}"))
        .log;
    for batch in [1usize, 100] {
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(format!("append_batch_{batch}"), |b| {
            b.iter(|| file.append_batch(black_box(&events[..batch])))
        });
    }
    g.finish();
}

criterion_group!(eventlog_benches, benches);
criterion_main!(eventlog_benches);
