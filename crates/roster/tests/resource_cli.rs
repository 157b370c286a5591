//! `roster resource` against a real `roster serve` on a temporary state
//! directory: drain/undrain, status, the drain listing, list/R and the
//! eventlog, checked against flux-core's t2311/t2355 expectations.

mod common;

use common::{fake_config, Daemon, Out, Scratch};
use std::io::{BufRead, BufReader};

/// A daemon on `fake[0-3]`, all online (the daemon is dropped before its
/// directory).
struct Server {
    d: Daemon,
    _dir: Scratch,
}

fn start(name: &str) -> Option<Server> {
    let dir = Scratch::new(&format!("rescli-{name}"));
    let d = common::start(&dir, &fake_config(4, ""), &["--monitor-force-up"]);
    Some(Server { d, _dir: dir })
}

fn run(s: &Server, args: &[&str]) -> Out {
    s.d.resource(args).into()
}

fn ok(s: &Server, args: &[&str]) -> String {
    let o = run(s, args);
    assert_eq!(o.code, 0, "roster resource {args:?}: {}", o.stderr);
    o.stdout
}

#[test]
fn drain_undrain_status_and_listing() {
    let Some(s) = start("drain") else { return };
    assert_eq!(
        ok(&s, &["status", "-no", "{state} {nnodes} {nodelist}"]),
        "avail 4 fake[0-3]\n"
    );
    // t2311: drain works with no reason, then a reason can be added
    assert_eq!(ok(&s, &["drain", "1"]), "");
    assert_eq!(ok(&s, &["status", "-s", "drain", "-no", "{ranks}"]), "1\n");
    assert_eq!(ok(&s, &["drain", "1", "test_reason_01"]), "");
    // ... but not replaced without --force
    let o = run(&s, &["drain", "0-1", "test_reason_fail"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 17] rank 1 already drained\n\
         roster-resource: INFO: Use --force to overwrite existing drain reason\n"
    );
    assert_eq!(
        ok(&s, &["drain", "-n", "-o", "{ranks} {reason}"]),
        "1 test_reason_01\n"
    );
    assert_eq!(
        ok(&s, &["drain", "--force", "1", "test_reason_updated"]),
        ""
    );
    assert!(ok(&s, &["drain"]).contains("test_reason_updated"));
    let listing = ok(&s, &["drain"]);
    let mut lines = listing.lines();
    assert_eq!(
        lines.next(),
        Some("TIME         STATE    REASON                         NODELIST")
    );
    let line = lines.next().unwrap_or("");
    assert!(
        line.ends_with(" drained  test_reason_updated            fake1"),
        "{line}"
    );
    // --update drains only the undrained rank
    assert_eq!(
        ok(&s, &["drain", "--update", "0-1", "test_reason_update"]),
        ""
    );
    assert_eq!(ok(&s, &["status", "-s", "drain", "-no", "{nnodes}"]), "2\n");
    assert_eq!(
        ok(&s, &["list", "-n", "-s", "down", "-o", "{nnodes}"]),
        "2\n"
    );
    // undrain fails if any rank is not drained
    let o = run(&s, &["undrain", "0-2"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "roster-resource: ERROR: rank 2 not drained\n");
    assert_eq!(ok(&s, &["undrain", "0-1", "all", "done"]), "");
    assert_eq!(ok(&s, &["status", "-s", "drain", "-no", "{nnodes}"]), "0\n");
    assert_eq!(ok(&s, &["undrain", "--force", "0-1"]), "");
    // hostnames work as targets
    assert_eq!(ok(&s, &["drain", "fake[2-3]", "maint"]), "");
    assert_eq!(
        ok(&s, &["status", "-s", "drain", "-no", "{ranks} {nodelist}"]),
        "2-3 fake[2-3]\n"
    );
    assert_eq!(ok(&s, &["undrain", "fake[2-3]"]), "");
}

#[test]
fn list_info_and_r() {
    let Some(s) = start("list") else { return };
    assert_eq!(ok(&s, &["info"]), "4 Nodes, 16 Cores, 0 GPUs\n");
    assert_eq!(
        ok(&s, &["list", "-no", "{state} {nnodes} {ncores} {nodelist}"]),
        "free 4 16 fake[0-3]\nallocated 0 0 \ndown 0 0 \n"
    );
    let r = ok(&s, &["R", "-i", "fake[0-1]"]);
    let v: serde_json::Value = serde_json::from_str(r.trim_end()).expect("R is JSON");
    assert_eq!(v["execution"]["R_lite"][0]["rank"], "0-1");
    assert_eq!(v["execution"]["nodelist"][0], "fake[0-1]");
}

#[test]
fn eventlog_backlog_wait_and_include() {
    let Some(s) = start("eventlog") else { return };
    assert_eq!(ok(&s, &["drain", "0", "testing"]), "");
    assert_eq!(ok(&s, &["undrain", "0"]), "");
    let json = ok(&s, &["eventlog", "-f", "json"]);
    let events: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(names.contains(&"resource-define"), "{names:?}");
    let drain = events
        .iter()
        .find(|e| e["name"] == "drain")
        .expect("a drain event");
    assert_eq!(drain["context"]["idset"], "0");
    assert_eq!(drain["context"]["reason"], "testing");
    // the backlog is in time order
    let ts: Vec<f64> = events
        .iter()
        .filter_map(|e| e["timestamp"].as_f64())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
    // --wait implies --follow and stops at the matching event
    let o = run(
        &s,
        &[
            "eventlog",
            "-f",
            "json",
            "--wait=drain",
            "-m",
            "reason=testing",
            "-t",
            "10",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o
        .stdout
        .lines()
        .last()
        .unwrap_or("")
        .contains("\"testing\""));
    // never satisfied: fails after the timeout
    let o = run(
        &s,
        &[
            "eventlog",
            "--wait=drain",
            "--match-context=reason=nonexistent",
            "--timeout=0.5",
        ],
    );
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "roster-resource: ERROR: ETIMEDOUT\n");
    // --include keeps events about rank 0 only
    let inc = ok(&s, &["eventlog", "--include=0", "-f", "json"]);
    for line in inc.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let ids = e["context"]["idset"]
            .as_str()
            .or(e["context"]["ranks"].as_str())
            .unwrap_or("");
        let set = idset_contains_0(ids);
        assert!(set, "{line}");
    }
    let o = run(&s, &["eventlog", "--include=42"]);
    assert_eq!(o.code, 1);
    // a follower sees a live drain
    let mut child =
        s.d.spawn_resource(&["eventlog", "-HF", "--wait=drain", "-m", "reason=live"]);
    let (reader, _) = first_line(&mut child);
    assert_eq!(ok(&s, &["drain", "2", "live"]), "");
    let status = child.wait().expect("follower exits");
    assert!(status.success());
    let mut rest = String::new();
    for l in reader.lines().map_while(Result::ok) {
        rest = l;
    }
    assert!(rest.contains("drain") && rest.contains("live"), "{rest}");
}

/// The stdout of `child` and the first line read from it.
fn first_line(child: &mut std::process::Child) -> (BufReader<std::process::ChildStdout>, String) {
    let mut reader = BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    (reader, first)
}

fn idset_contains_0(s: &str) -> bool {
    s.split(',').any(|part| match part.split_once('-') {
        Some((a, _)) => a == "0",
        None => part == "0",
    })
}

#[test]
fn acquire_streams_json_lines_and_release_answers() {
    let Some(s) = start("acquire") else { return };
    let mut child = s.d.spawn_resource(&["acquire"]);
    let (mut reader, first) = first_line(&mut child);
    let v: serde_json::Value = serde_json::from_str(first.trim_end()).expect("first line is JSON");
    assert!(v.is_object(), "{first}");
    // one compact object per line
    assert!(
        !first.trim_end().contains('\n') && !first.contains(": "),
        "{first}"
    );
    assert_eq!(ok(&s, &["drain", "1", "for acquire"]), "");
    let mut second = String::new();
    let _ = reader.read_line(&mut second);
    let v: serde_json::Value =
        serde_json::from_str(second.trim_end()).expect("second line is JSON");
    assert!(v.to_string().contains('1'), "{second}");
    let _ = child.kill();
    let _ = child.wait();
    // release of targets never shrunk is refused by the service
    let o = run(&s, &["release", "default", "3"]);
    assert_ne!(o.code, 2, "{}", o.stderr);
    assert!(
        o.code == 0 || o.stderr.starts_with("roster-resource: ERROR: "),
        "{}",
        o.stderr
    );
}

#[test]
fn json_output_of_status_drain_and_list() {
    let Some(s) = start("json") else { return };
    assert_eq!(ok(&s, &["drain", "1-2", "fan"]), "");
    let doc = |args: &[&str]| -> serde_json::Value {
        let text = ok(&s, args);
        assert_eq!(text.lines().count(), 1, "{text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let status = doc(&["status", "--json"]);
    assert_eq!(status["version"], 1);
    let lines = status["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{status}");
    assert_eq!(lines[0]["state"], "avail");
    assert_eq!(lines[0]["nodelist"], "fake[0,3]");
    assert_eq!(lines[1]["state"], "drained");
    assert_eq!(lines[1]["online"], true);
    assert_eq!(lines[1]["ranks"], "1-2");
    assert_eq!(lines[1]["reason"], "fan");
    assert!(lines[1]["timestamp"].as_f64().unwrap() > 1.0e9, "{status}");

    let drain = doc(&["drain", "--json"]);
    assert_eq!(drain["lines"], serde_json::json!([lines[1]]));

    // the scheduler's view: drained nodes are down
    let list = doc(&["list", "--json", "-s", "up,down"]);
    let lines = list["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{list}");
    assert_eq!(lines[0]["state"], "up");
    assert_eq!(lines[0]["ranks"], "0,3");
    assert_eq!(lines[1]["state"], "down");
    assert_eq!(lines[1]["nnodes"], 2);
    assert_eq!(lines[1]["nodelist"], "fake[1-2]");
}

#[test]
fn out_of_range_and_mistyped_targets_get_a_hint() {
    let Some(s) = start("hints") else { return };
    let o = run(&s, &["drain", "7"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 22] idset is out of range\n\
         roster-resource: INFO: valid targets: ranks 0-3 or hosts fake[0-3]\n"
    );
    let o = run(&s, &["drain", "fkae2", "x"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "roster-resource: ERROR: [Errno 22] invalid targets: invalid hosts: fkae2\n\
         roster-resource: INFO: valid targets: ranks 0-3 or hosts fake[0-3]\n\
         roster-resource: INFO: did you mean 'fake2' (for 'fkae2')?\n"
    );
    assert_eq!(ok(&s, &["drain", "-no", "{ranks}"]), "");
}
