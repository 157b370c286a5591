#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! `roster agent` against a real `roster serve`: join, leave, kill -9,
//! SIGSTOP (torpid/lively), offline timeout, service restart, verification
//! drains, token, duplicate and unknown hosts.

mod common;

use common::*;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn agent(s: &Scratch, uri: &str, name: &str, args: &[&str]) -> Agent {
    Agent::spawn(
        s,
        &format!("agent-{name}"),
        &[&["--uri", uri][..], args].concat(),
    )
}

/// An agent for a fake host with cores 0-3 and a fast heartbeat.
fn fake(s: &Scratch, d: &Daemon, host: &str) -> Agent {
    Agent::spawn(s, &format!("agent-{host}"), &node_args(&d.uri, host))
}

fn timers(torpid: &str, offline: &str) -> String {
    format!("torpid-max = \"{torpid}\"\noffline-timeout = \"{offline}\"\n")
}

fn event_names(d: &Daemon) -> Vec<String> {
    d.ok(&["eventlog", "-f", "json"])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let ids = v["context"]["idset"].as_str().unwrap_or("").to_string();
            format!("{} {}", v["name"].as_str().unwrap_or(""), ids)
        })
        .collect()
}

#[test]
fn join_clean_leave_and_kill_9() {
    let s = Scratch::new("agent-join");
    let d = start(&s, &fake_config(3, &timers("30s", "60s")), &[]);
    assert_eq!(d.status()["online"], "");
    let mut a0 = fake(&s, &d, "fake0");
    let a1 = fake(&s, &d, "fake1");
    let a2 = fake(&s, &d, "fake2");
    d.wait_status("online", "0-2", 10.0);
    assert_contains(&a0.log_text(), "fake0 joined as rank 0");
    // Clean leave: offline at once, exit 0.
    a0.signal(libc::SIGTERM);
    assert!(a0.wait().success());
    let t = d.wait_status("online", "1-2", 2.0);
    assert!(t < Duration::from_secs(1), "{t:?}");
    // kill -9: the connection drops, offline at once.
    a1.signal(libc::SIGKILL);
    d.wait_status("online", "2", 2.0);
    drop(a2);
    d.wait_status("online", "", 2.0);
    let evs = event_names(&d);
    // Agents started apart may join in one batch or several.
    let n = evs.len();
    assert_eq!(
        evs[n - 3..],
        ["offline 0", "offline 1", "offline 2"],
        "{evs:?}"
    );
    let mut joined = idset::IdSet::new();
    for e in evs.iter().filter_map(|e| e.strip_prefix("online ")) {
        joined.add(&idset::IdSet::parse(e).unwrap());
    }
    assert_eq!(joined.encode(), "0-2", "{evs:?}");
    // Liveness events are not persisted.
    assert!(stored_events(&s.statedir())
        .iter()
        .all(|e| e["name"] != "online" && e["name"] != "offline"));
    // `roster resource status` sees the offline nodes.
    let out = d.ok(&["status", "-s", "offline", "-no", "{ranks}"]);
    assert_eq!(out.trim(), "0-2");
}

#[test]
fn sigstop_is_torpid_then_lively_then_offline_after_timeout() {
    let s = Scratch::new("agent-torpid");
    let d = start(&s, &fake_config(2, &timers("1s", "4s")), &[]);
    let a0 = fake(&s, &d, "fake0");
    let _a1 = fake(&s, &d, "fake1");
    d.wait_status("online", "0-1", 10.0);
    a0.signal(libc::SIGSTOP);
    let t = d.wait_status("torpid", "0", 4.0);
    assert!(t < Duration::from_millis(2500), "torpid after {t:?}");
    // Torpid: online, not drained, down for scheduling.
    let st = d.status();
    assert_eq!(st["online"], "0-1");
    assert_eq!(st["drain"], json!({}));
    let sched = d.rpc("resource.sched-status", json!({})).unwrap();
    assert_eq!(
        sched["down"]["execution"]["R_lite"][0]["rank"], "0",
        "{sched}"
    );
    a0.signal(libc::SIGCONT);
    d.wait_status("torpid", "", 3.0);
    // Stopped past offline-timeout: offline; continued, it reconnects.
    a0.signal(libc::SIGSTOP);
    d.wait_status("online", "1", 8.0);
    assert_eq!(d.status()["torpid"], "");
    a0.signal(libc::SIGCONT);
    d.wait_status("online", "0-1", 10.0);
    let evs = event_names(&d);
    for want in ["torpid 0", "lively 0", "offline 0"] {
        assert!(evs.iter().any(|e| e == want), "{want}: {evs:?}");
    }
}

#[test]
fn service_restart_agents_reconnect_and_drains_survive() {
    let s = Scratch::new("agent-restart");
    let cfg = fake_config(2, &timers("30s", "60s"));
    let mut d = start(&s, &cfg, &[]);
    let _a0 = fake(&s, &d, "fake0");
    let _a1 = fake(&s, &d, "fake1");
    d.wait_status("online", "0-1", 10.0);
    d.ok(&["drain", "1", "bad", "dimm"]);
    d.stop();
    let d = start(&s, &cfg, &[]);
    d.wait_status("online", "0-1", 15.0);
    let st = d.status();
    assert_eq!(st["drain"]["1"]["reason"], "bad dimm", "{st}");
    // Crash and restart: the same.
    let mut d = d;
    d.crash();
    let d = start(&s, &cfg, &[]);
    d.wait_status("online", "0-1", 15.0);
    assert_eq!(d.status()["drain"]["1"]["reason"], "bad dimm");
}

#[test]
fn verification_mismatch_drains_with_the_upstream_reason() {
    let s = Scratch::new("agent-verify");
    let cfg = "[resource]\n[[resource.config]]\nhosts = \"fake[0-1]\"\ncores = \"0-3\"\n";
    let d = start(&s, cfg, &[]);
    let _a0 = agent(&s, &d.uri, "a0", &["--hostname", "fake0", "--cores", "0-1"]);
    // Extra cores are allowed by default.
    let _a1 = agent(&s, &d.uri, "a1", &["--hostname", "fake1", "--cores", "0-7"]);
    d.wait_status("online", "0-1", 10.0);
    let st = d.status();
    assert_eq!(
        st["drain"]["0"]["reason"], "rank 0 (fake0) missing resources: core[2-3]",
        "{st}"
    );
    assert!(st["drain"].get("1").is_none(), "{st}");
    // Persisted like flux's self-drain: no overwrite key.
    let drains: Vec<_> = stored_events(&s.statedir())
        .into_iter()
        .filter(|e| e["name"] == "drain")
        .collect();
    assert_eq!(drains.len(), 1);
    assert_eq!(
        drains[0]["context"],
        json!({"idset": "0", "nodelist": "fake0", "reason": "rank 0 (fake0) missing resources: core[2-3]", "overwrite": 1})
    );
    assert!(d
        .log_text()
        .contains("draining: rank 0 (fake0) missing resources: core[2-3]"));
}

#[test]
fn noverify_disables_verification() {
    let s = Scratch::new("agent-noverify");
    let d = start(&s, &fake_config(1, ""), &[]);
    let _a0 = agent(&s, &d.uri, "a0", &["--hostname", "fake0", "--cores", "0"]);
    d.wait_status("online", "0", 10.0);
    assert_eq!(d.status()["drain"], json!({}));
}

#[test]
fn refusals_unknown_host_duplicate_rank_wrong_token() {
    let s = Scratch::new("agent-refuse");
    let token = token_file(&s);
    let wrong = s.write("wrong", "nope\n");
    let (d, addr) = start_with_tcp(&s, &fake_config(2, ""), &[]);
    let tcp = format!("tcp://{addr}");
    // Unknown host: refused, with a clear error on both sides.
    let mut a = agent(
        &s,
        &d.uri,
        "unknown",
        &["--hostname", "nosuch", "--cores", "0-3"],
    );
    assert_eq!(a.wait().code(), Some(1));
    assert!(
        a.log_text().contains(
            "the service refused the agent: unknown host nosuch: it is not in the nodelist of R"
        ),
        "{}",
        a.log_text()
    );
    // Duplicate: a second agent for a live rank.
    let _a0 = fake(&s, &d, "fake0");
    d.wait_status("online", "0", 10.0);
    let mut dup = fake(&s, &d, "fake0");
    assert_eq!(dup.wait().code(), Some(1));
    assert!(
        dup.log_text()
            .contains("rank 0 (fake0) is already claimed by a live agent"),
        "{}",
        dup.log_text()
    );
    assert_eq!(d.status()["online"], "0");
    // TCP: without a token the agent does not even try; a wrong token is
    // refused; the right one works.
    let mut a = agent(
        &s,
        &tcp,
        "notoken",
        &["--hostname", "fake1", "--cores", "0-3"],
    );
    assert_eq!(a.wait().code(), Some(1));
    assert_contains(&a.log_text(), "requires --token-file");
    let mut a = agent(
        &s,
        &tcp,
        "wrong",
        &[
            "--hostname",
            "fake1",
            "--cores",
            "0-3",
            "--token-file",
            wrong.to_str().unwrap(),
        ],
    );
    assert_eq!(a.wait().code(), Some(1));
    assert!(a.log_text().contains("bearer token"), "{}", a.log_text());
    let _a1 = agent(
        &s,
        &tcp,
        "right",
        &[
            "--hostname",
            "fake1",
            "--cores",
            "0-3",
            "--token-file",
            token.to_str().unwrap(),
        ],
    );
    d.wait_status("online", "0-1", 10.0);
    // Heartbeats are bound to the session: a bare heartbeat request cannot
    // speak for a rank.
    let e = d
        .rpc("resource.agent-heartbeat", json!({"rank": 1}))
        .unwrap_err();
    assert!(e.to_string().contains("say hello"), "{e}");
}

/// A service configured with `hosts` (cores 0-3) and the `timers`, and
/// `roster agent --simulate hosts` against it; its `heartbeat`, `stall`
/// and `stall-after` options as given.
fn simulated(
    s: &Scratch,
    hosts: &str,
    timers: String,
    [heartbeat, stall, after]: [&str; 3],
) -> (Daemon, Agent) {
    let cfg =
        format!("[resource]\n{timers}[[resource.config]]\nhosts = \"{hosts}\"\ncores = \"0-3\"\n");
    let d = start(s, &cfg, &[]);
    let args = [
        "--simulate",
        hosts,
        "--cores",
        "0-3",
        "--heartbeat",
        heartbeat,
        "--stall",
        stall,
        "--stall-after",
        after,
    ];
    let sim = agent(s, &d.uri, "sim", &args);
    (d, sim)
}

#[test]
fn simulator_many_agents_and_stall() {
    let s = Scratch::new("agent-sim");
    let (d, mut sim) = simulated(&s, "sim[0-199]", timers("1s", "60s"), ["0.2", "10-19", "1"]);
    d.wait_status("online", "0-199", 20.0);
    d.wait_status("torpid", "10-19", 5.0);
    assert_eq!(d.status()["drain"], json!({}));
    sim.signal(libc::SIGKILL);
    let _ = sim.wait();
    d.wait_status("online", "", 3.0);
    assert_contains(&sim.log_text(), "all 200 agents joined");
}

#[test]
fn local_agent_brings_the_embedded_default_online() {
    // No R configured: the service discovers this machine; an agent with
    // no options discovers the same and is verified clean.
    let s = Scratch::new("agent-local");
    let d = start(&s, "[resource]\n", &[]);
    assert_eq!(d.status()["online"], "");
    let _a = agent(&s, &d.uri, "local", &[]);
    d.wait_status("online", "0", 10.0);
    assert_eq!(d.status()["drain"], json!({}));
    assert_eq!(
        d.ok(&["status", "-s", "avail", "-no", "{ranks}"]).trim(),
        "0"
    );
}

/// The acceptance figures at full scale (slow; `ROSTER_BENCH=1`, best in
/// `--release`).  `bench/agents.sh` measures the same with timings.
#[test]
fn scale_16k_agents() {
    if !opted_in("ROSTER_BENCH") {
        return;
    }
    let s = Scratch::new("agent-scale");
    let (d, mut sim) = simulated(
        &s,
        "sim[0-16383]",
        timers("5s", "120s"),
        ["2", "100-199", "15"],
    );
    let t = d.wait_status("online", "0-16383", 10.0);
    eprintln!("all online after {t:?}");
    let start = Instant::now();
    d.wait_status("torpid", "100-199", 30.0);
    eprintln!("torpid after {:?} (stall at 15 s)", start.elapsed() + t);
    sim.signal(libc::SIGKILL);
    let _ = sim.wait();
    let t = d.wait_status("online", "", 2.0);
    eprintln!("all offline after {t:?}");
}

#[test]
fn dynamic_discovery_from_agents_reports() {
    let s = Scratch::new("agent-discover");
    let cfg = s.write(
        "roster.toml",
        "[resource]\ndiscover-hosts = \"fake[0-2]\"\n",
    );
    let sock = s.path("roster.sock");
    let uri = format!("unix://{}", sock.display());
    let spawn = || {
        let log = std::fs::File::create(s.path("serve.log")).unwrap();
        serve_cmd(&s, &uri, &cfg)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let mut d = Daemon {
        child: Some(spawn()),
        uri: uri.clone(),
        sock: sock.clone(),
        log: s.path("serve.log"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    // R is not known until every expected host has reported.
    std::thread::sleep(Duration::from_millis(200));
    assert!(d.rpc("resource.status", json!({})).is_err());
    let _a0 = fake(&s, &d, "fake0");
    let _a1 = fake(&s, &d, "fake1");
    let _a2 = agent(
        &s,
        &uri,
        "fake2",
        &["--hostname", "fake2", "--cores", "0-7", "--gpus", "0"],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.rpc("resource.status", json!({})).is_err() {
        assert!(Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(25));
    }
    d.wait_status("online", "0-2", 10.0);
    let r = d.ok(&["R"]);
    let r: Value = serde_json::from_str(&r).unwrap();
    assert_eq!(r["execution"]["nodelist"], json!(["fake[0-2]"]), "{r}");
    let lite = r["execution"]["R_lite"].to_string();
    assert!(lite.contains("\"core\":\"0-7\""), "{lite}");
    assert!(lite.contains("\"gpu\":\"0\""), "{lite}");
    let stored = stored_events(&s.statedir());
    assert!(
        stored.iter().any(
            |e| e["name"] == "resource-define" && e["context"]["method"] == "dynamic-discovery"
        ),
        "{stored:?}"
    );
    // After a restart the stored R is used (method kvs) at once.
    d.stop();
    d.child = Some(spawn());
    let deadline = Instant::now() + Duration::from_secs(20);
    while d.rpc("resource.status", json!({})).is_err() {
        assert!(Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(25));
    }
    d.wait_status("online", "0-2", 15.0);
    let stored = stored_events(&s.statedir());
    let last_define = stored
        .iter()
        .rev()
        .find(|e| e["name"] == "resource-define")
        .unwrap();
    assert_eq!(last_define["context"]["method"], "kvs");
}

#[test]
fn agent_restarted_at_once_reclaims_its_rank() {
    let s = Scratch::new("agent-reclaim");
    let d = start(&s, &fake_config(1, ""), &[]);
    for round in 0..3 {
        let a = fake(&s, &d, "fake0");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !a.log_text().contains("joined as rank 0") {
            assert!(Instant::now() < deadline, "round {round}: {}", a.log_text());
            std::thread::sleep(Duration::from_millis(10));
        }
        a.signal(libc::SIGKILL);
        // `a` is reaped on drop; the next one starts at once.
    }
    let _last = fake(&s, &d, "fake0");
    d.wait_status("online", "0", 10.0);
}
