//! `flux resource status` formatting at 131,072 nodes (issue 15): the
//! `resource.status` payload of a large instance (one R_lite entry, one
//! nodelist range) rendered with the default format, as `roster resource
//! status` does after its RPCs:
//!
//! * `all_up`: every node online, nothing drained (the relays bench);
//! * `drained`: 1,030 nodes drained in two drain groups, one rank
//!   allocated (a draining line), some offline;
//! * `drained_spread`: one node in 16 drained (8,192 ranges in one
//!   drain group).
//!
//! The rendering works on idsets and the compressed nodelist, so its cost
//! follows the number of ranges, not of nodes.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use idset::IdSet;
use resource_views::{
    no_env, status_prepare, FixedZone, FormatConfig, StatusInput, StatusOptions, Subcommand,
};
use serde_json::{json, Value};

const N: u32 = 131_072;

fn payload(drain: Value, online: &str, offline: &str) -> Value {
    json!({
        "R": {"version": 1, "execution": {
            "R_lite": [{"rank": format!("0-{}", N - 1), "children": {"core": "0-3"}}],
            "starttime": 0.0, "expiration": 0.0,
            "nodelist": [format!("sim[0-{}]", N - 1)],
        }},
        "online": online, "offline": offline, "exclude": "", "torpid": "",
        "drain": drain,
    })
}

fn bench(c: &mut Criterion) {
    let all = format!("0-{}", N - 1);
    let spread: IdSet = (0..N).step_by(16).collect();
    let cases = [
        ("all_up", payload(json!({}), &all, "")),
        (
            "drained",
            payload(
                json!({
                    "10-19,1000-1999": {"timestamp": 1.7e9, "reason": "fan"},
                    "20-29,120000-120009": {"timestamp": 1.7e9, "reason": "dimm"},
                }),
                "0-100000",
                &format!("100001-{}", N - 1),
            ),
        ),
        (
            "drained_spread",
            payload(
                json!({ spread.encode(): {"timestamp": 1.7e9, "reason": "maint"} }),
                &all,
                "",
            ),
        ),
    ];
    let zone = FixedZone::utc();
    let plan = status_prepare(
        &StatusOptions::default(),
        &FormatConfig::new(Subcommand::Status),
        &no_env,
    );
    let Ok(plan) = plan else {
        return;
    };
    let allocated = IdSet::from_range(15, 15);
    let none = IdSet::new();
    let mut g = c.benchmark_group("status_131072");
    for (name, status) in &cases {
        let input = StatusInput {
            status,
            allocated: &allocated,
            housekeeping: &none,
            config: None,
        };
        g.bench_function(*name, |b| b.iter(|| black_box(plan.render(&input, &zone))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
