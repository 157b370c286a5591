//! `roster graph --follow` against a real `roster serve` with simulated
//! agents: the graph is built from the first acquire response and every
//! later response is applied to it while commands are answered.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A running `roster graph --follow URI --json`: commands in, one JSON
/// object per line out (command replies and `{"event": ...}` reports).
struct Follow {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
}

impl Follow {
    fn start(d: &Daemon, extra: &[&str]) -> Follow {
        let mut child = roster()
            .args(["graph", "--json", "--follow", &d.uri])
            .args(extra)
            .env_remove("ROSTER_TOKEN_FILE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn roster graph --follow");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Follow { child, stdin, rx }
    }

    fn next(&self) -> Value {
        self.rx
            .recv_timeout(Duration::from_secs(15))
            .expect("output from roster graph --follow within 15 s")
    }

    /// The next acquire event (other events, e.g. lost, are skipped and
    /// returned in order by `events`).
    fn event(&self, kind: &str) -> Value {
        loop {
            let v = self.next();
            if v["event"] == kind {
                return v;
            }
            assert!(
                v.get("event").is_some(),
                "a command reply while waiting for {kind}: {v}"
            );
        }
    }

    /// Run one command; its reply (events arriving first are skipped).
    fn cmd(&mut self, line: &str) -> Value {
        let si = self.stdin.as_mut().unwrap();
        writeln!(si, "{line}").unwrap();
        si.flush().unwrap();
        loop {
            let v = self.next();
            if v.get("event").is_none() {
                return v;
            }
        }
    }

    fn aggregate(&mut self) -> Value {
        self.cmd("aggregate")["aggregate"].clone()
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `roster agent` for `fake{i}` of `d` (its log in `s`).
fn agent(s: &Scratch, d: &Daemon, i: u32) -> Agent {
    let host = format!("fake{i}");
    Agent::spawn(s, &host, &node_args(&d.uri, &host))
}

fn node_jobspec(s: &Scratch) -> String {
    let js = json!({"version": 1, "resources": [{"type": "node", "count": 1, "exclusive": true,
        "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0}}});
    s.write("node.json", &js.to_string())
        .to_str()
        .unwrap()
        .to_string()
}

const TIMERS: &str = "torpid-max = \"30s\"\noffline-timeout = \"60s\"\n";

#[test]
fn v1_follow_drain_undrain_agent_loss_and_service_restart() {
    let s = Scratch::new("follow-v1");
    let mut d = start(&s, &fake_config(3, TIMERS), &[]);
    let mut agents: Vec<Agent> = (0..3).map(|i| agent(&s, &d, i)).collect();
    d.wait_status("online", "0-2", 15.0);
    let js = node_jobspec(&s);
    let mut f = Follow::start(&d, &[]);
    let e = f.event("acquire");
    assert_eq!(
        (e["type"].clone(), e["built"].clone()),
        (json!("initial"), json!(true))
    );
    assert_eq!(f.aggregate(), json!({"cluster": 1, "core": 12, "node": 3}));
    // drain → the node leaves Available as the update is applied
    d.ok(&["drain", "1", "maintenance"]);
    let e = f.event("acquire");
    assert_eq!(e["down"], "1");
    let lat = e["latency_us"].as_u64().unwrap();
    assert!(lat < 10_000, "update applied {lat} µs after it arrived");
    assert_eq!(f.cmd("available /cluster0/fake1")["available"], 0);
    assert_eq!(f.aggregate()["node"], 2);
    // a match avoids it
    let m = f.cmd(&format!("match allocate {js}"));
    assert_eq!(m["status"], "ALLOCATED");
    assert_eq!(m["R"]["execution"]["nodelist"], json!(["fake0"]));
    let m = f.cmd(&format!("match allocate {js}"));
    assert_eq!(m["R"]["execution"]["nodelist"], json!(["fake2"]));
    let m = f.cmd(&format!("match allocate {js}"));
    assert_eq!(m["status"], "NOMATCH");
    // undrain → back
    d.ok(&["undrain", "1"]);
    assert_eq!(f.event("acquire")["up"], "1");
    assert_eq!(f.cmd("available /cluster0/fake1")["available"], 1);
    assert_eq!(f.cmd("free 1")["status"], "CANCELED");
    // an agent killed → offline → down in the graph
    agents[2].kill();
    assert_eq!(f.event("acquire")["down"], "2");
    assert_eq!(f.cmd("get-status /cluster0/fake2")["status"], "down");
    // job 2 still holds the down node (no exception in v1)
    assert_eq!(f.cmd("info 2")["status"], "ALLOCATED");
    // service restart: the follower reconnects, rebuilds, keeps its jobs
    assert!(d.stop().success());
    let lost = f.event("lost");
    assert!(lost["reason"].is_string(), "{lost}");
    d = start(&s, &fake_config(3, TIMERS), &[]);
    let e = f.event("acquire");
    assert_eq!(e["built"], true, "{e}");
    assert_eq!(e["doomed"], json!([]));
    assert_eq!(f.cmd("info 2")["status"], "ALLOCATED");
    let p = f.cmd("pool /cluster0/fake2");
    assert_eq!(p["allocations"], json!({"2": 1}));
    assert_eq!(p["exclusive"], 2);
    assert_eq!(p["state"], "down");
    // the agents come back (two of them): the follower sees them up
    d.wait_status("online", "0-1", 15.0);
    agents.truncate(2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.aggregate()["node"] != 2 {
        assert!(Instant::now() < deadline, "fake0 and fake1 never came up");
        std::thread::sleep(Duration::from_millis(25));
    }
    let m = f.cmd(&format!("match allocate {js}"));
    assert_eq!(m["R"]["execution"]["nodelist"], json!(["fake0"]));
    assert_eq!(m["jobid"], 4, "job ids continue after the restart");
}

#[test]
fn groups_two_followers_hand_a_target_over_with_release() {
    let s = Scratch::new("follow-groups");
    let cfg = fake_config(4, "[resource.groups]\nlogin = \"fake[0-1]\"\n");
    let d = start(&s, &cfg, &["--monitor-force-up"]);
    let mut login = Follow::start(&d, &["--group", "login"]);
    let e = login.event("acquire");
    assert_eq!(
        (e["type"].clone(), e["built"].clone()),
        (json!("grow"), json!(true))
    );
    let mut dflt = Follow::start(&d, &["--group", "default"]);
    dflt.event("acquire");
    assert_eq!(login.aggregate()["node"], 2);
    assert_eq!(dflt.aggregate()["node"], 2);
    // a job holds fake1 in the login group
    assert_eq!(login.cmd("allocate /cluster0/fake1 1 9")["held"], 1);
    // group-set login = fake0: fake1 shrinks from login; the job is doomed
    d.client().group_set("login", "0").unwrap();
    let e = login.event("acquire");
    assert_eq!(
        (e["type"].clone(), e["doomed"].clone()),
        (json!("shrink"), json!([9]))
    );
    assert_eq!(e["removed"], "");
    assert_eq!(login.cmd("available /cluster0/fake1")["available"], 0);
    // freeing it lets the target go: unlinked, released, granted to default
    assert_eq!(login.cmd("free 9")["status"], "CANCELED");
    let r = login.event("release");
    assert_eq!(
        (r["group"].clone(), r["targets"].clone()),
        (json!("login"), json!("1"))
    );
    assert!(r.get("error").is_none(), "{r}");
    let e = dflt.event("acquire");
    assert_eq!(e["type"], "grow");
    assert_eq!(dflt.aggregate()["node"], 3);
    assert_eq!(dflt.cmd("available /cluster0/fake1")["available"], 1);
    let p = login.cmd("pool /cluster0/fake1");
    assert!(p["error"].as_str().unwrap().contains("fake1"), "{p}");
    assert_eq!(login.aggregate()["node"], 1);
}

/// The service drops an excluded rank from R_lite and keeps the whole
/// `scheduling` JGF: the follower's graph has that node down, with no
/// node online nothing is allocated, and once all are up the excluded
/// node is still never given out (issue 26, item 7).
#[test]
fn excluded_rank_of_a_scheduling_r_is_never_allocated() {
    let s = Scratch::new("follow-excluded");
    let plain = json!({"version": 1, "execution": {
        "R_lite": [{"rank": "0-2", "children": {"core": "0-3"}}],
        "nodelist": ["fake[0-2]"], "starttime": 0.0, "expiration": 0.0}});
    let jgf = model::Graph::from_r_value(&plain, false)
        .unwrap()
        .to_jgf(model::jgf::JgfStyle::Scheduling);
    let mut r = plain.clone();
    r["scheduling"] = jgf;
    let rpath = s.write("R.json", &r.to_string());
    let cfg = format!(
        "[resource]\nnoverify = true\nexclude = \"2\"\npath = \"{}\"\n{TIMERS}",
        rpath.display()
    );
    let d = start(&s, &cfg, &[]);
    let js = node_jobspec(&s);
    let mut f = Follow::start(&d, &[]);
    let e = f.event("acquire");
    assert_eq!(e["built"], true, "{e}");
    // nothing online: no match, the excluded node included
    assert_eq!(f.cmd("get-status /cluster0/fake2")["status"], "down");
    assert_eq!(f.cmd(&format!("match allocate {js}"))["status"], "NOMATCH");
    let agents: Vec<Agent> = (0..3).map(|i| agent(&s, &d, i)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.aggregate()["node"] != 2 {
        assert!(Instant::now() < deadline, "fake0 and fake1 never came up");
        std::thread::sleep(Duration::from_millis(25));
    }
    for want in ["fake0", "fake1"] {
        let m = f.cmd(&format!("match allocate {js}"));
        assert_eq!(m["R"]["execution"]["nodelist"], json!([want]), "{m}");
    }
    assert_eq!(f.cmd(&format!("match allocate {js}"))["status"], "NOMATCH");
    assert_eq!(f.cmd("get-status /cluster0/fake2")["status"], "down");
    drop(agents);
}
