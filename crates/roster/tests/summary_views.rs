//! `roster resource status|drain|list|info` printed from the service's
//! `resource.summary` must be byte for byte what the views compute from
//! `resource.status` and `resource.sched-status` (which they still do
//! when `$FLUX_RESOURCE_LIST_RPC` names the scheduler's RPC): every
//! format and option, on an instance with property sets, node shapes,
//! excluded, offline and variously drained nodes.

mod common;

use common::{roster, start, Scratch};
use serde_json::json;
use std::process::Stdio;

/// 256 nodes `node[001-256]`: four shapes, racks, a few other
/// properties (with `simple`, at most one property a node: the service
/// takes its rank-set path for `list`).
fn r_json(simple: bool) -> String {
    let mut lite = Vec::new();
    for (ranks, cores, gpus) in [
        ("0-63", "0-31", None),
        ("64-127", "0-47", Some("0-1")),
        ("128-191", "0-31", None),
        ("192-255", "0-63", Some("0-3")),
    ] {
        let mut children = json!({"core": cores});
        if let Some(g) = gpus {
            children["gpu"] = json!(g);
        }
        lite.push(json!({"rank": ranks, "children": children}));
    }
    let every16: Vec<String> = (0..256).step_by(16).map(|r| r.to_string()).collect();
    let properties = if simple {
        json!({"rack2": "128-191", "debug": "0-15", "gpu": "64-127,192-255", "bigmem": "16,32,48"})
    } else {
        json!({
            "rack0": "0-63", "rack1": "64-127", "rack2": "128-191", "rack3": "192-255",
            "debug": "0-15", "gpu": "64-127,192-255", "bigmem": every16.join(","),
        })
    };
    json!({
        "version": 1,
        "execution": {
            "R_lite": lite,
            "nodelist": ["node[001-256]"],
            "properties": properties,
            "starttime": 0.0,
            "expiration": 0.0
        }
    })
    .to_string()
}

fn run(uri: &str, args: &[&str], old_path: bool) -> (Option<i32>, String, String) {
    let mut c = roster();
    c.arg("resource")
        .arg("--uri")
        .arg(uri)
        .args(args)
        .env("TZ", "UTC")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("XDG_CONFIG_DIRS", "/nonexistent")
        .env_remove("FLUX_RESOURCE_LIST_RPC")
        .stdin(Stdio::null());
    if old_path {
        c.env("FLUX_RESOURCE_LIST_RPC", "resource.sched-status");
    }
    let o = c.output().expect("run roster resource");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn summary_views_print_what_the_payload_views_print() {
    compare(false);
}

#[test]
fn summary_views_of_single_property_nodes() {
    compare(true);
}

fn compare(simple: bool) {
    let s = Scratch::new(if simple {
        "summary-views-1"
    } else {
        "summary-views"
    });
    let r = s.write("R.json", &r_json(simple));
    let config = format!(
        "[resource]\nnoverify = true\npath = \"{}\"\nexclude = \"250-255\"\n",
        r.display()
    );
    let d = start(&s, &config, &["--monitor-force-up"]);
    let rpc = |topic: &str, p: serde_json::Value| d.rpc(topic, p).expect(topic);
    rpc(
        "resource.drain",
        json!({"targets": "3,5,7-9,70,130-140,200,230", "reason": "maintenance"}),
    );
    rpc(
        "resource.drain",
        json!({"targets": "11,99", "reason": "bad dimm"}),
    );
    rpc("resource.drain", json!({"targets": "17"}));
    for r in [40, 41, 43, 101, 190] {
        rpc(
            "resource.drain",
            json!({"targets": r.to_string(), "reason": format!("reason-{}", r % 3)}),
        );
    }
    rpc(
        "resource.monitor-force-down",
        json!({"ranks": "7,8,99,120-125"}),
    );

    let cases: &[&[&str]] = &[
        &["status"],
        &["status", "-o", "long"],
        &["status", "-s", "all"],
        &["status", "-s", "drain"],
        &["status", "-s", "online,offline"],
        &["status", "-s", "offline"],
        &["status", "-s", "drained", "--skip-empty"],
        &[
            "status",
            "-s",
            "avail,exclude,torpid,allocated,housekeeping",
        ],
        &[
            "status",
            "-o",
            "{state} {reason} {timestamp!d:%FT%T} {nnodes} {ranks} {nodelist}",
        ],
        &["status", "-o", "{state:>12} {nnodes:>6} {nodelist}", "-n"],
        &["status", "-o", "{nodelist}"],
        &["status", "-o", "{reason}"],
        &["status", "-L", "always"],
        &["status", "--json"],
        &["status", "-s", "all", "--json"],
        &["status", "-i", "0-100"],
        &["status", "-i", "node[001-020]", "-o", "long"],
        &["status", "-i", "nosuchhost"],
        &["status", "-s", "bogus"],
        &["status", "-o", "{nosuchfield}"],
        &["drain"],
        &["drain", "-o", "long"],
        &["drain", "-o", "{ranks} {reason}"],
        &["drain", "--json"],
        &["drain", "-i", "1-50"],
        &["drain", "-n"],
        &["list"],
        &["list", "-n"],
        &["list", "--json"],
        &["list", "-s", "all"],
        &["list", "-s", "up,down"],
        &["list", "-s", "up,down", "--json"],
        &["list", "-s", "free,down,allocated", "--skip-empty"],
        &["list", "-s", "down,free"],
        &["list", "-s", "free,free,down"],
        &["list", "-s", "all,down"],
        &["list", "-s", "up,free"],
        &["list", "-o", "{nnodes} {ncores} {ngpus}"],
        &["list", "-s", "all,down", "-o", "{nnodes} {ncores}"],
        &["list", "-o", "{state} {ncores}"],
        &["list", "-o", "{properties} {nnodes}"],
        &["list", "-o", "{properties}"],
        &["list", "-o", "{nodelist}"],
        &["list", "-o", "{ranks}"],
        &[
            "list",
            "-s",
            "down",
            "-o",
            "{state}:{propertiesx}:{queue}:{ranks}:{nodelist}",
        ],
        &["list", "-o", "rlist"],
        &["list", "-o", "{rlist}"],
        &["list", "-i", "0-70"],
        &["list", "-s", "bogus"],
        &["list", "-o", "{nosuchfield}"],
        &["info"],
        &["info", "-s", "down"],
        &["info", "-s", "free,down"],
        &["info", "--json"],
        &["R"],
        &["R", "-s", "down"],
    ];
    for args in cases {
        let new = run(&d.uri, args, false);
        let old = run(&d.uri, args, true);
        assert_eq!(new, old, "roster resource {args:?}");
    }
    // The summary path was taken (the old path computes nothing but
    // what the summary says).
    let st = d
        .rpc("resource.summary", json!({"list": true}))
        .expect("summary");
    assert!(
        st["list"]["down"].as_array().is_some_and(|c| !c.is_empty()),
        "{st}"
    );
}
