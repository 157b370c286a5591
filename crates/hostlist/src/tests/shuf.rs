//! The SHUF workload, shared by the unit tests and the benchmark
//! (`benches/hostlist.rs` includes this file by path).

/// `node1..node{n}` shuffled by Fisher-Yates with a 64-bit LCG (seed 42).
pub(crate) fn shuf(n: usize) -> Vec<String> {
    let mut v: Vec<String> = (1..=n).map(|i| format!("node{i}")).collect();
    let mut x: u64 = 42;
    let mut rnd = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    for i in (1..n).rev() {
        let j = (rnd() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}
