//! Criterion benchmarks on the shared workloads of `shared/bench/README.md`
//! (upstream flux-core 0.88 figures on a 2-core machine in brackets):
//!
//! * decode+encode `node[00001-16384]` [10.6 µs];
//! * decode+encode FRAG, every 3rd host of `node[1-100000]` as one comma list
//!   (33,334 hosts) [25.7 ms];
//! * sort+uniq SHUF, `node1..node100000` shuffled by Fisher-Yates with a
//!   64-bit LCG seeded 42 [235 ms].
//!
//! Throughput is reported per host, so criterion's `thrpt` line gives hosts/s
//! (ns per host = 1e9 / thrpt).

#[path = "../src/tests/shuf.rs"]
mod shuf;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hostlist::Hostlist;

fn frag() -> String {
    (1..=100_000)
        .step_by(3)
        .map(|i| format!("node{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn shuf() -> String {
    shuf::shuf(100_000).join(",")
}

fn decode_encode(s: &str) -> String {
    match Hostlist::decode(s) {
        Ok(h) => h.encode(),
        Err(e) => panic!("benchmark input does not decode: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hostlist");

    let r16k = "node[00001-16384]";
    g.throughput(Throughput::Elements(16_384));
    g.bench_function("decode_encode/node[00001-16384]", |b| {
        b.iter(|| decode_encode(black_box(r16k)))
    });

    let frag = frag();
    assert_eq!(frag.len(), 329_638);
    assert_eq!(Hostlist::decode(&frag).map(|h| h.len()).ok(), Some(33_334));
    g.throughput(Throughput::Elements(33_334));
    g.bench_function("decode_encode/FRAG", |b| {
        b.iter(|| decode_encode(black_box(&frag)))
    });

    let shuf = shuf();
    assert!(shuf.starts_with("node84994,node1589,node75535,"));
    let decoded = Hostlist::decode(&shuf).unwrap_or_default();
    assert_eq!(decoded.len(), 100_000);
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("sort_uniq/SHUF", |b| {
        b.iter_batched(
            || decoded.clone(),
            |mut h| {
                h.sort();
                h.uniq();
                h
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("decode_sort_uniq_encode/SHUF", |b| {
        b.iter(|| {
            let mut h = Hostlist::decode(black_box(&shuf)).unwrap_or_default();
            h.sort();
            h.uniq();
            h.encode()
        })
    });
    g.finish();

    // Same-run baseline: the obvious representation (one String per host,
    // split on ',' and joined back; plain byte-order sort + dedup instead of
    // hostlist's numeric-aware sort), so RESULTS.md can state a ratio
    // measured on this machine in this run.
    let mut g = c.benchmark_group("baseline_vec_string");
    g.throughput(Throughput::Elements(33_334));
    g.bench_function("split_join/FRAG", |b| {
        b.iter(|| {
            let v: Vec<String> = black_box(&frag).split(',').map(str::to_owned).collect();
            v.join(",")
        })
    });
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("split_sort_dedup_join/SHUF", |b| {
        b.iter(|| {
            let mut v: Vec<String> = black_box(&shuf).split(',').map(str::to_owned).collect();
            v.sort_unstable();
            v.dedup();
            v.join(",")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
