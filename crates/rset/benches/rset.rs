//! Benchmarks on the shared R16k workloads (see /work/shared/bench/README.md).
//!
//! Upstream flux-core 0.88 whole-process figures on the same inputs:
//! `flux R decode` 0.92 s, `decode --short` 0.69 s, `diff R16k R16k_b`
//! 1.28 s, `intersect` 0.96 s, `append lo hi` 0.92 s.

use criterion::{criterion_group, criterion_main, Criterion};
use rset::Rset;
use std::hint::black_box;

const DIR: &str = "/work/shared/bench";

fn load(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("{DIR}/{name}")).ok()
}

fn benches(c: &mut Criterion) {
    let (Some(a), Some(b), Some(lo), Some(hi)) = (
        load("R16k.json"),
        load("R16k_b.json"),
        load("R16k_lo.json"),
        load("R16k_hi.json"),
    ) else {
        eprintln!("benchmark inputs not found in {DIR}; skipping");
        return;
    };
    let parse = |s: &str| Rset::from_json_str(s).unwrap_or_default();
    let (ra, rb, rlo, rhi) = (parse(&a), parse(&b), parse(&lo), parse(&hi));

    c.bench_function("R16k decode+encode", |bch| {
        bch.iter(|| black_box(parse(black_box(&a))).encode())
    });
    c.bench_function("R16k decode+dumps", |bch| {
        bch.iter(|| black_box(parse(black_box(&a))).dumps())
    });
    c.bench_function("R16k encode", |bch| bch.iter(|| black_box(&ra).encode()));
    c.bench_function("R16k diff R16k_b", |bch| {
        bch.iter(|| black_box(&ra).diff(black_box(&rb)).map(|r| r.nnodes()))
    });
    c.bench_function("R16k intersect R16k_b", |bch| {
        bch.iter(|| black_box(&ra).intersect(black_box(&rb)).nnodes())
    });
    c.bench_function("append lo+hi", |bch| {
        bch.iter(|| {
            let mut r = Rset::new();
            let _ = r.append(black_box(&rlo));
            let _ = r.append(black_box(&rhi));
            r.nnodes()
        })
    });
    c.bench_function("R16k properties encode", |bch| {
        bch.iter(|| black_box(&ra).properties_encode())
    });
}

criterion_group! {
    name = rset_benches;
    config = Criterion::default().sample_size(20);
    targets = benches
}
criterion_main!(rset_benches);
