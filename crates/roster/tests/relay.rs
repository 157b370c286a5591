#![allow(unsafe_code)] // kill(2) on our own children
//! Agent relays with real processes on loopback: a 3-level tree of
//! `roster agent --relay` and leaf agents (kary:2 over fake[0-6]), a relay
//! restart, a leaf moving to another relay, the simulator's relays.

mod common;

use common::*;
use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Proc {
    child: Option<Child>,
    log: std::path::PathBuf,
}

impl Proc {
    fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(s: &Scratch, name: &str, args: &[&str]) -> Proc {
    let log = s.path(&format!("{name}.log"));
    let child = roster()
        .arg("agent")
        .args(args)
        .env_remove("ROSTER_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn roster agent");
    Proc {
        child: Some(child),
        log,
    }
}

fn sock(s: &Scratch, name: &str) -> String {
    format!("unix://{}", s.path(&format!("{name}.sock")).display())
}

/// A relay for `host` below `parent`, listening on `<host>.sock`.
fn relay(s: &Scratch, parent: &str, host: &str) -> Proc {
    let listen = sock(s, host);
    spawn(
        s,
        host,
        &[
            "--uri",
            parent,
            "--relay",
            "--listen",
            &listen,
            "--hostname",
            host,
            "--cores",
            "0-3",
            "--heartbeat",
            "0.2",
        ],
    )
}

fn leaf(s: &Scratch, parent: &str, host: &str) -> Proc {
    spawn(
        s,
        &format!("{host}-leaf"),
        &[
            "--uri",
            parent,
            "--hostname",
            host,
            "--cores",
            "0-3",
            "--heartbeat",
            "0.2",
        ],
    )
}

fn status(d: &Daemon) -> Value {
    d.rpc("resource.status", json!({})).expect("status")
}

fn wait_status(d: &Daemon, key: &str, want: &str, secs: f64) -> Duration {
    let start = Instant::now();
    loop {
        let st = status(d);
        if st[key] == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs_f64(secs),
            "{key} is {} after {secs} s, wanted {want}; log:\n{}",
            st[key],
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn config(n: u32, extra: &str) -> String {
    format!(
        "[resource]\n{extra}\n[serve]\nrelay-fanout = 2\n[[resource.config]]\nhosts = \"fake[0-{}]\"\ncores = \"0-3\"\n",
        n - 1
    )
}

fn wait_log(p: &Proc, text: &str, secs: f64) {
    let start = Instant::now();
    while !p.log_text().contains(text) {
        assert!(
            start.elapsed() < Duration::from_secs_f64(secs),
            "no '{text}' in:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_level_tree_restart_and_a_leaf_moving() {
    // kary:2 over 7 ranks: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6.
    let s = Scratch::new("relay-tree");
    let d = start(
        &s,
        &config(7, "torpid-max = \"1s\"\noffline-timeout = \"10s\""),
        &[],
    );
    let r0 = relay(&s, &d.uri, "fake0");
    let mut r1 = relay(&s, &sock(&s, "fake0"), "fake1");
    let _r2 = relay(&s, &sock(&s, "fake0"), "fake2");
    let l3 = leaf(&s, &sock(&s, "fake1"), "fake3");
    let _l4 = leaf(&s, &sock(&s, "fake1"), "fake4");
    let _l5 = leaf(&s, &sock(&s, "fake2"), "fake5");
    let _l6 = leaf(&s, &sock(&s, "fake2"), "fake6");
    wait_status(&d, "online", "0-6", 15.0);
    wait_log(
        &r0,
        "fake0 joined as rank 0 (relay for up to 6 ranks below it)",
        1.0,
    );
    wait_log(
        &r1,
        "fake1 joined as rank 1 (relay for up to 2 ranks below it)",
        1.0,
    );
    wait_log(&l3, "fake3 joined as rank 3", 1.0);
    // One session at the service: the top relay.
    assert!(status(&d)["torpid"] == "", "{}", status(&d));
    // Heartbeats flow through two relays: nobody turns torpid.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(status(&d)["torpid"], "");
    assert_eq!(status(&d)["online"], "0-6");

    // A stalled leaf turns torpid through the relays, then lively.
    l3.signal(libc::SIGSTOP);
    wait_status(&d, "torpid", "3", 4.0);
    l3.signal(libc::SIGCONT);
    wait_status(&d, "torpid", "", 3.0);

    // kill -9 of a mid relay: exactly its subtree (1, 3, 4) goes offline.
    r1.kill();
    let t = wait_status(&d, "online", "0,2,5-6", 2.0);
    assert!(t < Duration::from_secs(2), "{t:?}");
    // Restarted: its leaves reconnect and the subtree is back.
    let r1b = relay(&s, &sock(&s, "fake0"), "fake1");
    wait_status(&d, "online", "0-6", 8.0);
    wait_log(&r1b, "joined as rank 1", 1.0);

    // A leaf moves: fake4 leaves relay 1 for relay 0 (an ancestor); a
    // relay it does not belong under refuses it.
    drop(_l4);
    wait_status(&d, "online", "0-3,5-6", 2.0);
    let mut wrong = leaf(&s, &sock(&s, "fake2"), "fake4");
    wait_log(
        &wrong,
        "host fake4 is not in the subtree of the relay at rank 2 (fake2)",
        5.0,
    );
    wrong.kill();
    let _l4b = leaf(&s, &sock(&s, "fake0"), "fake4");
    wait_status(&d, "online", "0-6", 5.0);
    // No verification drains: every node reported cores 0-3.
    assert_eq!(status(&d)["drain"], json!({}));

    // kill -9 of the top relay: everything offline at once.
    drop(r0);
    wait_status(&d, "online", "", 2.0);
}

#[test]
fn relay_reconnects_to_a_restarted_service_and_reannounces() {
    let s = Scratch::new("relay-restart-service");
    let cfg = config(3, "");
    let mut d = start(&s, &cfg, &[]);
    let _r0 = relay(&s, &d.uri, "fake0");
    let _l1 = leaf(&s, &sock(&s, "fake0"), "fake1");
    let _l2 = leaf(&s, &sock(&s, "fake0"), "fake2");
    wait_status(&d, "online", "0-2", 10.0);
    d.stop();
    let d = start(&s, &cfg, &[]);
    // The leaves never left the relay; the relay announces them again.
    wait_status(&d, "online", "0-2", 10.0);
}

#[test]
fn verification_drain_reaches_the_leaf_through_the_relay() {
    let s = Scratch::new("relay-verify");
    let d = start(&s, &config(3, ""), &[]);
    let _r0 = relay(&s, &d.uri, "fake0");
    let l1 = spawn(
        &s,
        "fake1-leaf",
        &[
            "--uri",
            &sock(&s, "fake0"),
            "--hostname",
            "fake1",
            "--cores",
            "0-1",
        ],
    );
    wait_status(&d, "online", "0-1", 10.0);
    let st = status(&d);
    assert_eq!(
        st["drain"]["1"]["reason"], "rank 1 (fake1) missing resources: core[2-3]",
        "{st}"
    );
    wait_log(
        &l1,
        "fake1 is drained: rank 1 (fake1) missing resources: core[2-3]",
        5.0,
    );
}

#[test]
fn simulator_relays_in_one_process() {
    let s = Scratch::new("relay-sim");
    let d = start(
        &s,
        "[resource]\ntorpid-max = \"1s\"\n[serve]\nrelay-fanout = 4\n[[resource.config]]\nhosts = \"sim[0-999]\"\ncores = \"0-3\"\n",
        &[],
    );
    let mut sim = spawn(
        &s,
        "sim",
        &[
            "--uri",
            &d.uri,
            "--simulate",
            "sim[0-999]",
            "--relays",
            "21",
            "--cores",
            "0-3",
            "--stall",
            "500-509",
            "--stall-after",
            "1",
        ],
    );
    wait_status(&d, "online", "0-999", 20.0);
    wait_status(&d, "torpid", "500-509", 5.0);
    assert_eq!(status(&d)["drain"], json!({}));
    sim.kill();
    wait_status(&d, "online", "", 3.0);
    assert!(
        sim.log_text().contains("all 1000 agents joined"),
        "{}",
        sim.log_text()
    );
}

/// The acceptance figures at full scale (slow; `ROSTER_SCALE_TESTS=1`,
/// best in `--release`).  `bench/relays.sh` measures the same with
/// timings and a relay killed in a process of its own.
#[test]
fn scale_131072_nodes_through_relays() {
    if std::env::var("ROSTER_SCALE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set ROSTER_SCALE_TESTS=1");
        return;
    }
    let s = Scratch::new("relay-scale");
    let d = start(
        &s,
        "[resource]\ntorpid-max = \"5s\"\noffline-timeout = \"120s\"\n[[resource.config]]\nhosts = \"sim[0-131071]\"\ncores = \"0-3\"\n",
        &[],
    );
    let mut sim = spawn(
        &s,
        "sim",
        &[
            "--uri",
            &d.uri,
            "--simulate",
            "sim[0-131071]",
            "--relays",
            "129",
            "--cores",
            "0-3",
            "--stall",
            "20000-20099",
            "--stall-after",
            "12",
        ],
    );
    let t = wait_status(&d, "online", "0-131071", 10.0);
    eprintln!("all online after {t:?}");
    wait_status(&d, "torpid", "20000-20099", 25.0);
    sim.kill();
    let t = wait_status(&d, "online", "", 2.0);
    eprintln!("all offline after {t:?}");
}
