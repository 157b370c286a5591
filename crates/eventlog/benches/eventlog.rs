//! Eventlog workloads at El Capitan scale: upstream issue #6132 reports a
//! resource.eventlog of more than 86,000 entries replayed at every start.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use eventlog::{decode_log, encode_log, Event};
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

    g.finish();
}

criterion_group!(eventlog_benches, benches);
criterion_main!(eventlog_benches);
