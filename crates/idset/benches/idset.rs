//! idset workloads of shared/bench/README.md (the inputs upstream libidset was timed on).
//!
//! A = { i in [0, 1100000) : i % 11 != 10 } (1,000,000 ids, 100,000 holes)
//! B = { i in [0, 1100000) : i % 11 != 5 }

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use idset::IdSet;
use std::collections::BTreeSet;

fn set_without(residue: u32) -> IdSet {
    (0..1_100_000u32).filter(|i| i % 11 != residue).collect()
}

fn benches(c: &mut Criterion) {
    let a = set_without(10);
    let b = set_without(5);
    let a_str = a.encode();
    assert_eq!(a.len(), 1_000_000);
    assert_eq!(a_str.len(), 1_397_976);
    assert_eq!(a.union(&b).len(), 1_100_000);
    assert_eq!(a.difference(&b).len(), 100_000);

    let mut g = c.benchmark_group("idset");
    g.throughput(Throughput::Elements(a.len()));
    g.bench_function("decode_encode_A", |bch| {
        bch.iter(|| {
            let s = IdSet::parse(black_box(&a_str)).unwrap_or_default();
            black_box(s.encode())
        })
    });
    g.bench_function("decode_A", |bch| {
        bch.iter(|| black_box(IdSet::parse(black_box(&a_str))))
    });
    g.bench_function("encode_A", |bch| bch.iter(|| black_box(a.encode())));
    g.bench_function("union_A_B", |bch| {
        bch.iter(|| black_box(a.union(black_box(&b))))
    });
    g.bench_function("difference_A_B", |bch| {
        bch.iter(|| black_box(a.difference(black_box(&b))))
    });
    g.bench_function("intersection_A_B", |bch| {
        bch.iter(|| black_box(a.intersection(black_box(&b))))
    });
    g.finish();

    // Same-run baseline: the obvious per-id representation (BTreeSet<u32>),
    // so RESULTS.md can state a ratio measured on this machine in this run.
    let ba: BTreeSet<u32> = a.iter().collect();
    let bb: BTreeSet<u32> = b.iter().collect();
    let mut g = c.benchmark_group("baseline_btreeset");
    g.throughput(Throughput::Elements(a.len()));
    g.sample_size(10);
    g.bench_function("decode_encode_A", |bch| {
        bch.iter(|| {
            let s = naive_parse(black_box(&a_str));
            black_box(naive_encode(&s))
        })
    });
    g.bench_function("union_A_B", |bch| {
        bch.iter(|| black_box(ba.union(black_box(&bb)).copied().collect::<BTreeSet<u32>>()))
    });
    g.bench_function("difference_A_B", |bch| {
        bch.iter(|| {
            black_box(
                ba.difference(black_box(&bb))
                    .copied()
                    .collect::<BTreeSet<u32>>(),
            )
        })
    });
    g.finish();
}

fn naive_parse(s: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for tok in s.split(',').filter(|t| !t.is_empty()) {
        let (lo, hi) = match tok.split_once('-') {
            Some((l, h)) => (l.parse().unwrap_or(0), h.parse().unwrap_or(0)),
            None => {
                let v = tok.parse().unwrap_or(0);
                (v, v)
            }
        };
        out.extend(lo..=hi);
    }
    out
}

fn naive_encode(s: &BTreeSet<u32>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut it = s.iter().copied().peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi += 1;
            it.next();
        }
        if !out.is_empty() {
            out.push(',');
        }
        if hi > lo {
            let _ = write!(out, "{lo}-{hi}");
        } else {
            let _ = write!(out, "{lo}");
        }
    }
    out
}

criterion_group!(idset_benches, benches);
criterion_main!(idset_benches);
