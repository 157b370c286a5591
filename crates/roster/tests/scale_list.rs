//! `roster resource list` at 131,072 nodes (64 cores and 4 GPUs each)
//! with 39,321 random ranks drained: the down set's nodelist holds more
//! than 10,240 ranges under one prefix, more than one bracket may hold
//! (flux's hostlist limit, kept by the decoder), so the encoder splits
//! it into brackets the decoder accepts.  Slow in a debug build: run with
//! `ROSTER_SCALE_TESTS=1`.

mod common;

use common::{opted_in, start, Scratch};
use idset::IdSet;
use serde_json::json;

/// A small deterministic generator (xorshift64*): no dependency for one test.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// `count` distinct ranks below `n`, at random.
fn random_ranks(n: u32, count: usize, seed: u64) -> IdSet {
    let mut all: Vec<u32> = (0..n).collect();
    let mut rng = Rng(seed);
    // partial Fisher-Yates: the first `count` slots are the sample
    for i in 0..count {
        let j = i + rng.below((all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    let mut set = IdSet::new();
    for &r in &all[..count] {
        set.insert(r);
    }
    set
}

#[test]
fn list_of_131072_nodes_with_30_percent_drained() {
    if !opted_in("ROSTER_SCALE_TESTS") {
        return;
    }
    let s = Scratch::new("scale-list");
    let cfg = "[[resource.config]]\nhosts = \"node[0-131071]\"\ncores = \"0-63\"\ngpus = \"0-3\"\n";
    let d = start(&s, cfg, &["--monitor-force-up"]);
    let drained = random_ranks(131_072, 39_321, 0x5eed_2611);
    assert_eq!(drained.len(), 39_321);
    d.rpc(
        "resource.drain",
        json!({"targets": drained.to_string(), "reason": "scale", "mode": "overwrite"}),
    )
    .expect("drain");

    let text = d.ok(&["list", "--json", "-s", "up,down"]);
    let doc: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {}", &text[..200]));
    let lines = doc["lines"].as_array().expect("lines");
    let line = |state: &str| {
        lines
            .iter()
            .find(|l| l["state"] == state)
            .unwrap_or_else(|| panic!("no {state} line: {:?}", &text[..200.min(text.len())]))
    };
    let down = line("down");
    assert_eq!(down["nnodes"], 39_321);
    assert_eq!(down["ncores"], 39_321 * 64);
    assert_eq!(down["ngpus"], 39_321 * 4);
    assert_eq!(down["ranks"], drained.to_string());
    let up = line("up");
    assert_eq!(up["nnodes"], 131_072 - 39_321);
    assert_eq!(up["ncores"], (131_072 - 39_321) * 64);

    // the table agrees too
    let table = d.ok(&["list", "-s", "down", "-no", "{nnodes} {ncores} {ngpus}"]);
    assert_eq!(
        table.trim(),
        format!("39321 {} {}", 39_321 * 64, 39_321 * 4)
    );
}
