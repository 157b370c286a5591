//! RFC 20's MUSTs where flux-core is lenient, through every way R gets
//! into Roster: `roster graph`, `roster serve --check` (a configured
//! `path`), `resource reload`; and reload keeping `attributes` (issue 26).

mod common;

use common::{check_fails, fake_config, roster, start, Out, Scratch};
use serde_json::{json, Value};

const EXPIRATION_RULE: &str =
    "\"If starttime is also set, expiration MUST be greater than starttime.\"";

/// Bad R and the reason every entry point must give.
fn bad_rs() -> Vec<(Value, String)> {
    let node = json!([{"rank": "0", "children": {"core": "0-1"}}]);
    vec![
        (
            json!({"version": 1, "execution": {"R_lite": {}, "nodelist": ["n0"]}}),
            r#"R execution.R_lite={}: RFC 20: "R_lite is a strict list of dictionaries""#.into(),
        ),
        (
            json!({"version": 1, "execution": {"R_lite": node, "nodelist": ["n0"],
                   "starttime": 100.0, "expiration": 50.0}}),
            format!("R execution.expiration=50.0: RFC 20: {EXPIRATION_RULE}"),
        ),
        (
            json!({"version": 1, "execution": {"R_lite": node, "nodelist": ["n0"],
                   "starttime": 100.0, "expiration": 100.0}}),
            format!("R execution.expiration=100.0: RFC 20: {EXPIRATION_RULE}"),
        ),
        (
            json!({"version": 1, "execution": {"R_lite": node, "nodelist": ["n0"],
                   "properties": {"x!y": "0"}}}),
            r#"invalid character '!' in property "x!y""#.into(),
        ),
        (
            json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "x-y"}}],
                   "nodelist": ["n0"]}}),
            r#"rank 0: invalid core idset "x-y""#.into(),
        ),
    ]
}

/// `roster graph -L R ARGS`.
fn graph(r: &std::path::Path, args: &[&str]) -> Out {
    let o = roster().args(["graph", "-L"]).arg(r).args(args).output();
    o.expect("run roster graph").into()
}

#[test]
fn serve_check_refuses_what_rfc20_forbids() {
    let s = Scratch::new("rrules-check");
    for (i, (r, why)) in bad_rs().into_iter().enumerate() {
        let rpath = s.write(&format!("r{i}.json"), &r.to_string());
        let cfg = s.write(
            &format!("c{i}.toml"),
            &format!(
                "[resource]\nnoverify = true\npath = \"{}\"\n",
                rpath.display()
            ),
        );
        let err = check_fails(&cfg);
        assert!(err.contains(&why), "{r}: {err}");
    }
}

#[test]
fn graph_refuses_what_rfc20_forbids() {
    let s = Scratch::new("rrules-graph");
    for (i, (r, why)) in bad_rs().into_iter().enumerate() {
        let rpath = s.write(&format!("r{i}.json"), &r.to_string());
        for fmt in ["rv1", "rv1exec"] {
            let o = graph(&rpath, &["-f", fmt, "copy"]);
            assert_ne!(o.code, 0, "{fmt} {r}");
            assert!(o.stderr.contains(&why), "{fmt} {r}: {}", o.stderr);
        }
    }
}

/// RFC 20: an R of `version` and `scheduling` alone is valid; `graph -f
/// rv1` loads it (issue 26, item 1).
#[test]
fn graph_loads_an_r_of_version_and_scheduling() {
    let s = Scratch::new("rrules-sched");
    let r = s.write(
        "r.json",
        &json!({"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3", "gpu": "0"}}],
                "nodelist": ["n[0-1]"]}})
        .to_string(),
    );
    let o = graph(&r, &["-F", "jgf", "copy"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let jgf: Value = serde_json::from_str(&o.stdout).unwrap();
    model::jgf::check_rfc20(&jgf).unwrap();
    let only = s.write(
        "only.json",
        &json!({"version": 1, "scheduling": jgf}).to_string(),
    );
    let o = graph(&only, &["-f", "rv1", "aggregate"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let out = o.stdout;
    assert!(out.contains("core") && out.contains('8'), "{out}");
    // rv1exec needs execution, and says so
    let o = graph(&only, &["-f", "rv1exec", "aggregate"]);
    assert_ne!(o.code, 0);
    let err = o.stderr;
    assert!(err.contains("Object item not found: execution"), "{err}");
}

#[test]
fn reload_names_what_is_wrong_and_keeps_attributes() {
    let s = Scratch::new("rrules-reload");
    let d = start(&s, &fake_config(2, ""), &["--monitor-force-up"]);
    for (i, (r, why)) in bad_rs().into_iter().enumerate() {
        let p = s.write(&format!("bad{i}.json"), &r.to_string());
        let (code, err) = d.fails(&["reload", p.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!("{}: {why}", p.display())),
            "{r}: {err}"
        );
    }
    // attributes are stored verbatim (flux-core stores a reloaded R as is)
    let attrs = json!({"system": {"scheduler": {"queue": "debug", "n": [1, 2.5, null]}},
                       "user": {"note": "kept"}});
    let good = json!({"version": 1,
        "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}],
                      "nodelist": ["new[0-1]"], "starttime": 0.0, "expiration": 0.0},
        "attributes": attrs});
    let p = s.write("good.json", &good.to_string());
    d.ok(&["reload", p.to_str().unwrap()]);
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(s.statedir().join("resource.R")).unwrap())
            .unwrap();
    assert_eq!(stored["attributes"], attrs);
    let got = d.client().get().expect("get");
    assert_eq!(got["R"]["attributes"], attrs);
}
