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
