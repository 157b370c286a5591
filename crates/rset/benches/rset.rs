//! Benchmarks on the shared R16k workloads (see `shared/bench/README.md`).
//!
//! Upstream flux-core 0.88 whole-process figures on the same inputs:
//! `flux R decode` 0.92 s, `decode --short` 0.69 s, `diff R16k R16k_b`
//! 1.28 s, `intersect` 0.96 s, `append lo hi` 0.92 s.
//!
//! Throughput is reported per node (16,384 per operation), so criterion's
//! `thrpt` line gives nodes/s (ns per node = 1e9 / thrpt).
//!
//! The workloads are read from `$SHARED` if set, else from `shared/bench`
//! beside the repository (the same default as `bench/run.sh`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rset::Rset;
use std::hint::black_box;
use std::path::PathBuf;

const NODES: u64 = 16_384;

fn dir() -> PathBuf {
    match std::env::var_os("SHARED") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/bench"
        )),
    }
}

fn load(name: &str) -> Option<String> {
    std::fs::read_to_string(dir().join(name)).ok()
}

fn parse(s: &str) -> Rset {
    match Rset::from_json_str(s) {
        Ok(r) => r,
        Err(e) => panic!("benchmark input does not parse: {e}"),
    }
}

fn benches(c: &mut Criterion) {
    let (Some(a), Some(b), Some(lo), Some(hi)) = (
        load("R16k.json"),
        load("R16k_b.json"),
        load("R16k_lo.json"),
        load("R16k_hi.json"),
    ) else {
        eprintln!(
            "rset bench: workloads not found in {} (set SHARED); nothing measured",
            dir().display()
        );
        return;
    };
    let (ra, rb, rlo, rhi) = (parse(&a), parse(&b), parse(&lo), parse(&hi));
    // The workloads are what shared/bench/README.md says they are.
    assert_eq!(ra.nnodes() as u64, NODES);
    assert_eq!(ra.count("core"), 1_545_024);
    assert_eq!(ra.count("gpu"), 66_816);
    assert_eq!(rb.nnodes() as u64, NODES);
    assert_eq!(rlo.nnodes() + rhi.nnodes(), NODES as usize);
    let mut joined = Rset::new();
    joined.append(&rlo).expect("lo appends");
    joined.append(&rhi).expect("hi appends");
    // (R16k.json lists `gpu` before `core`, the halves `core` first, so
    // compare the canonical short form.)
    assert_eq!(joined.dumps(), ra.dumps(), "lo + hi is R16k");
    let d = ra.diff(&rb).expect("diff");
    assert_eq!(d.count("core"), ra.count("core") - NODES * 48);

    let mut g = c.benchmark_group("rset");
    g.sample_size(20);
    g.throughput(Throughput::Elements(NODES));
    g.bench_function("R16k decode+encode", |bch| {
        bch.iter(|| parse(black_box(&a)).encode())
    });
    g.bench_function("R16k decode+dumps", |bch| {
        bch.iter(|| parse(black_box(&a)).dumps())
    });
    g.bench_function("R16k encode", |bch| bch.iter(|| black_box(&ra).encode()));
    g.bench_function("R16k diff R16k_b", |bch| {
        bch.iter(|| black_box(&ra).diff(black_box(&rb)).map(|r| r.nnodes()))
    });
    g.bench_function("R16k intersect R16k_b", |bch| {
        bch.iter(|| black_box(&ra).intersect(black_box(&rb)).nnodes())
    });
    g.bench_function("append lo+hi", |bch| {
        bch.iter(|| {
            let mut r = Rset::new();
            let _ = r.append(black_box(&rlo));
            let _ = r.append(black_box(&rhi));
            r.nnodes()
        })
    });
    g.bench_function("R16k properties encode", |bch| {
        bch.iter(|| black_box(&ra).properties_encode())
    });
    g.finish();

    // Same-run baseline: parse and re-serialise the same document as a
    // generic serde_json::Value (no R semantics), per node as well.
    let mut g = c.benchmark_group("baseline_serde_json");
    g.sample_size(20);
    g.throughput(Throughput::Elements(NODES));
    g.bench_function("R16k parse+serialise Value", |bch| {
        bch.iter(|| {
            let v: serde_json::Value = serde_json::from_str(black_box(&a)).expect("json");
            serde_json::to_string(&v).expect("json")
        })
    });
    g.finish();
}

criterion_group!(rset_benches, benches);
criterion_main!(rset_benches);
