//! Session unit tests: formatting helpers and a command flow on a small R.

use super::*;

const R4: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],
    "nodelist":["n[0-3]"],"properties":{"ssd":"2-3"}}}"#;

fn session(json: bool) -> Session {
    Session::new(
        Graph::from_r_str(R4, true).unwrap(),
        Format::Rv1Nosched,
        json,
    )
}

fn run(s: &mut Session, line: &str) -> (Outcome, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let o = s.run_line(line, &mut out, &mut err);
    (
        o,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn fmt_g_like_cxx_streams() {
    for (x, want) in [
        (0.0, "0"),
        (0.000123, "0.000123"),
        (1.5e-5, "1.5e-05"),
        (0.1, "0.1"),
        (2.0, "2"),
        (100.0, "100"),
        (123456.0, "123456"),
        (1234567.0, "1.23457e+06"),
        (999999.5, "1e+06"),
        (0.0001, "0.0001"),
        (1.23456789, "1.23457"),
    ] {
        assert_eq!(fmt_g(x), want, "{x}");
    }
}

#[test]
fn abbreviations_and_aliases() {
    assert_eq!(canonical("m"), Some("match"));
    assert_eq!(canonical("cancel"), Some("free"));
    assert_eq!(canonical("c"), Some("free"));
    assert_eq!(canonical("f"), Some("find"));
    assert_eq!(canonical("bogus"), None);
}

#[test]
fn errors_do_not_stop_the_session() {
    let mut s = session(false);
    let (o, out, err) = run(&mut s, "bogus 1 2");
    assert_eq!(o, Outcome::Failed);
    assert_eq!(out, "");
    assert_eq!(err, "ERROR: unknown command 'bogus' (try 'help')\n");
    let (o, _, err) = run(&mut s, "free 7");
    assert_eq!(
        (o, err.as_str()),
        (Outcome::Failed, "ERROR: nonexistent job 7\n")
    );
    let (o, _, err) = run(&mut s, "find");
    assert_eq!(o, Outcome::Failed);
    assert_eq!(err, "ERROR: malformed command: usage: find EXPR\n");
    let (o, _, err) = run(&mut s, "find status=sideways");
    assert_eq!(o, Outcome::Failed);
    assert!(err.starts_with("ERROR: find expression: "), "{err}");
    assert_eq!(run(&mut s, "  # comment").0, Outcome::Ok);
    assert_eq!(run(&mut s, "").0, Outcome::Ok);
    assert_eq!(run(&mut s, "q").0, Outcome::Quit);
    // Still usable.
    let (o, out, _) = run(&mut s, "aggregate /cluster0/n2");
    assert_eq!(o, Outcome::Ok);
    assert_eq!(out, "core: 4\ngpu: 1\nnode: 1\n");
}

#[test]
fn status_property_and_find() {
    let mut s = session(false);
    assert_eq!(run(&mut s, "set-status /cluster0/n1 down").0, Outcome::Ok);
    let (_, out, _) = run(&mut s, "get-status /cluster0/n1");
    assert_eq!(out, "/cluster0/n1 is down\n");
    let (_, out, _) = run(&mut s, "find status=down");
    let mut lines = out.lines();
    let r: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(r["execution"]["nodelist"], json!(["n1"]));
    assert_eq!(lines.next(), Some("INFO: ============================="));
    assert_eq!(lines.next(), Some("INFO: EXPRESSION=\"status=down\""));
    assert_eq!(run(&mut s, "p /cluster0/n0 color=blue").0, Outcome::Ok);
    let (_, out, _) = run(&mut s, "get-property /cluster0/n0");
    assert_eq!(out, "color=blue\n");
    let (_, out, _) = run(&mut s, "g /cluster0/n1");
    assert_eq!(
        out,
        "No properties were found for /cluster0/n1 (vtx's uniq_id=7).\n"
    );
    let (o, _, err) = run(&mut s, "set-property /cluster0/n0 color=");
    assert_eq!(o, Outcome::Failed);
    assert!(err.contains("incorrect input format 'color='"), "{err}");
}

#[test]
fn json_replies_one_line_per_command() {
    let mut s = session(true);
    let (_, out, err) = run(&mut s, "aggregate");
    assert_eq!(err, "");
    let v: Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(
        v,
        json!({"command":"aggregate","path":"/cluster0",
               "aggregate":{"cluster":1,"core":16,"gpu":4,"node":4}})
    );
    let (_, out, _) = run(&mut s, "info 3");
    let v: Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(v, json!({"command":"info 3","error":"nonexistent job 3"}));
    let (_, out, _) = run(&mut s, "remove /cluster0/n3");
    let v: Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(
        v,
        json!({"command":"remove","path":"/cluster0/n3","removed":6})
    );
    assert_eq!(s.graph().aggregate_all()["node"], 3);
}

/// One `--json` command: its reply object.
fn j(s: &mut Session, line: &str) -> Value {
    let (_, out, err) = run(s, line);
    assert_eq!(err, "", "{line}");
    assert_eq!(out.lines().count(), 1, "{line}: {out}");
    serde_json::from_str(out.trim_end()).unwrap()
}

/// The `error` of a command's JSON answer ("" when it has none).
fn error_text(v: &Value) -> &str {
    v["error"].as_str().unwrap_or_default()
}

#[test]
fn down_node_leaves_aggregate_copy_and_match() {
    // The issue's case: a down node still counted.
    let mut s = session(true);
    assert_eq!(j(&mut s, "set-status /cluster0/n2 down")["status"], "down");
    let a = j(&mut s, "aggregate");
    assert_eq!(
        a["aggregate"],
        json!({"cluster":1,"core":12,"gpu":3,"node":3})
    );
    let c = j(&mut s, "copy");
    assert_eq!(c["R"]["execution"]["nodelist"], json!(["n[0-1,3]"]));
    let c = j(&mut s, "copy /cluster0/n2");
    assert!(error_text(&c).contains("/cluster0/n2"), "{c}");
    assert_eq!(j(&mut s, "available /cluster0/n2/core0")["available"], 0);
    let e = j(&mut s, "allocate /cluster0/n2/core0 1 5");
    assert_eq!(
        e["error"],
        "/cluster0/n2/core0: unavailable because /cluster0/n2 is down"
    );
    // degraded is accepted, as the help says, and takes nothing new.
    j(&mut s, "set-status /cluster0/n2 degraded");
    assert_eq!(j(&mut s, "get-status /cluster0/n2")["status"], "degraded");
    assert_eq!(j(&mut s, "aggregate")["aggregate"]["node"], 3);
    j(&mut s, "set-status /cluster0/n2 up");
    assert_eq!(j(&mut s, "aggregate")["aggregate"]["node"], 4);
    let e = j(&mut s, "set-status /cluster0/n2 sideways");
    assert_eq!(e["error"], "unrecognized status 'sideways'");
}

#[test]
fn help_matches_what_is_accepted() {
    let help = commands_help();
    for &(name, abbr, args, _) in COMMANDS {
        let line = format!("  {name} ({abbr}) {args}");
        assert!(help.lines().any(|l| l == line.trim_end()), "{name}");
        assert_eq!(canonical(name), Some(name));
        assert_eq!(canonical(abbr), Some(name));
    }
    // Every state the model knows is listed and accepted by set-status.
    let spec = COMMANDS.iter().find(|c| c.0 == "set-status").unwrap().2;
    let mut s = session(false);
    for st in model::State::ALL {
        assert!(spec.contains(st.as_str()), "{st}");
        let (o, _, err) = run(&mut s, &format!("set-status /cluster0/n0 {st}"));
        assert_eq!(o, Outcome::Ok, "{st}: {err}");
    }
    assert_eq!(canonical("unlink"), Some("remove"));
    assert_eq!(canonical("merge"), Some("attach"));
}

#[test]
fn size_allocated_available_allocate_grows_and_partial_free() {
    let mut s = session(true);
    let gpu = "/cluster0/n1/gpu0";
    assert_eq!(j(&mut s, "size /cluster0/n1")["size"], 1);
    assert_eq!(j(&mut s, &format!("available {gpu}"))["available"], 1);
    // A pool of several units: merge a memory pool via attach is heavy;
    // use the root cluster's cores through a node-sized allocation.
    let r = j(&mut s, "allocate /cluster0/n0/core0 1 10");
    assert_eq!(
        (r["held"].clone(), r["available"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(j(&mut s, "allocated /cluster0/n0/core0")["allocated"], 1);
    let e = j(&mut s, "allocate /cluster0/n0/core0 1 10");
    assert!(
        error_text(&e).contains("requested 1 units but only 0 available"),
        "{e}"
    );
    // Allocate grows an existing allocation of the same job elsewhere.
    j(&mut s, "allocate /cluster0/n0/core1 1 10");
    let l = j(&mut s, "list");
    assert_eq!(l["jobs"][0]["jobid"], 10);
    assert_eq!(l["jobs"][0]["status"], "ALLOCATED");
    // Partial free of one pool, then the rest of the subtree.
    let f = j(&mut s, "free /cluster0/n0/core1 10 1");
    assert_eq!(f["freed"], 1);
    let e = j(&mut s, "free /cluster0/n0/core0 10 2");
    assert_eq!(
        e["error"],
        "/cluster0/n0/core0: cannot free 2 units of job 10, which holds 1"
    );
    let f = j(&mut s, "free /cluster0/n0 10");
    assert_eq!(
        (f["freed"].clone(), f["status"].clone()),
        (json!(1), json!("CANCELED"))
    );
    let e = j(&mut s, "free /cluster0/n0 10");
    assert!(error_text(&e).contains("job 10 holds nothing here"), "{e}");
    // The next matched job is numbered after the allocated one.
    let e = j(&mut s, "allocate /cluster0/n0/core0 0 11");
    assert_eq!(e["error"], "invalid unit count '0' (a positive integer)");
}

#[test]
fn tags_stage_reserve_promote_pool_and_duplicate() {
    let mut s = session(true);
    j(&mut s, "tag /cluster0/n1 maint");
    j(&mut s, "tag /cluster0/n1 owner=ops");
    let t = j(&mut s, "get-tags /cluster0/n1");
    assert_eq!(t["tags"], json!({"maint": null, "owner": "ops"}));
    j(&mut s, "untag /cluster0/n1 maint");
    assert_eq!(
        j(&mut s, "get-tags /cluster0/n1")["tags"],
        json!({"owner": "ops"})
    );
    assert_eq!(
        j(&mut s, "untag /cluster0/n1 maint")["error"],
        "/cluster0/n1 has no tag 'maint'"
    );
    // Staged: out of Available until unstaged.
    j(&mut s, "stage /cluster0/n3");
    assert_eq!(j(&mut s, "aggregate")["aggregate"]["node"], 3);
    assert_eq!(j(&mut s, "pool /cluster0/n3")["staged"], true);
    j(&mut s, "unstage all");
    assert_eq!(j(&mut s, "aggregate")["aggregate"]["node"], 4);
    // Reservations in time, then promotion.
    let r = j(&mut s, "reserve /cluster0/n2 1 20 100 200");
    assert_eq!(
        (r["start"].clone(), r["end"].clone()),
        (json!(100), json!(200))
    );
    let e = j(&mut s, "reserve /cluster0/n2 1 21 150 250");
    assert!(error_text(&e).contains("only 0 available"), "{e}");
    j(&mut s, "reserve /cluster0/n2 1 21 200 250");
    let p = j(&mut s, "pool /cluster0/n2");
    assert_eq!(p["reservations"], json!({"20": 1, "21": 1}));
    assert_eq!(p["available"], 1);
    assert_eq!(j(&mut s, "info 20")["status"], "RESERVED");
    j(&mut s, "promote 20");
    let p = j(&mut s, "pool /cluster0/n2");
    assert_eq!(p["allocations"], json!({"20": 1}));
    assert_eq!(p["exclusive"], 20);
    assert_eq!(j(&mut s, "pool /cluster0")["shared"], json!([20]));
    assert_eq!(j(&mut s, "info 20")["status"], "ALLOCATED");
    let e = j(&mut s, "promote 20");
    assert_eq!(e["error"], "job 20 is not a reservation");
    // Duplicate: everything, records included.
    let d = j(&mut s, "duplicate");
    let g2 = Graph::from_jgf(&d["jgf"]).unwrap();
    assert_eq!(g2.len(), s.graph().len());
    assert_eq!(g2.jobs(), s.graph().jobs());
    let p = j(&mut s, "pool /cluster0/n1/core2");
    assert_eq!(p["uri"], "containment:/cluster0/n1/core2");
    assert_eq!(p["parent"], "/cluster0/n1");
    assert_eq!(
        (p["type"].clone(), p["size"].clone()),
        (json!("core"), json!(1))
    );
}

#[test]
fn save_and_load_keep_the_whole_state() {
    let dir = std::env::temp_dir().join(format!("roster-graph-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("state.json");
    let f = f.to_str().unwrap();
    let mut s = session(true);
    j(&mut s, "allocate /cluster0/n0/core0 1 4");
    j(&mut s, "reserve /cluster0/n1 1 5 10 20");
    j(&mut s, "tag /cluster0/n2 maint=yes");
    j(&mut s, "set-status /cluster0/n3 down");
    let r = j(&mut s, &format!("save {f}"));
    assert_eq!(
        (r["vertices"].clone(), r["jobs"].clone()),
        (json!(25), json!(2))
    );
    let g = Graph::from_jgf_str(&std::fs::read_to_string(f).unwrap()).unwrap();
    let mut t = Session::new(g, Format::Rv1Nosched, true);
    assert_eq!(j(&mut t, "aggregate"), j(&mut s, "aggregate"));
    assert_eq!(
        j(&mut t, "get-tags /cluster0/n2")["tags"],
        json!({"maint": "yes"})
    );
    assert_eq!(j(&mut t, "get-status /cluster0/n3")["status"], "down");
    assert_eq!(j(&mut t, "info 5")["status"], "RESERVED");
    // Loaded jobs can be freed; new ids come after them.
    assert_eq!(j(&mut t, "free 4")["status"], "CANCELED");
    let e = j(&mut s, &format!("save {}/no/such/dir/x", dir.display()));
    assert!(error_text(&e).starts_with("can't write "), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
