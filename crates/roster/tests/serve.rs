#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! `roster serve` end to end: the real daemon on a temporary state
//! directory and Unix socket, driven by `roster resource` and the client
//! library.  Vectors follow flux-core's t2311/t2319/t2355.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;

fn drained(d: &Daemon) -> String {
    d.ok(&["status", "-s", "drain", "-no", "{ranks}"])
        .trim()
        .to_string()
}

#[test]
fn check_validates_config_and_exits() {
    let s = Scratch::new("check");
    let o = check(&s.write("good.toml", &fake_config(4, "")));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("R has 4 nodes (0-3)"), "{out}");

    for (name, text, want) in [
        (
            "bad.toml",
            "[resource]\nnoverify = true\nbogus-key = 1\n".to_string(),
            "bogus-key",
        ),
        (
            "badx.toml",
            fake_config(4, "exclude = \"fake[3-4]\""),
            "invalid hosts: fake4",
        ),
        (
            "badr.toml",
            "[[resource.config]]\nhosts = \"foo[\"\ncores = \"0\"\n".to_string(),
            "invalid hostlist 'foo['",
        ),
    ] {
        let err = check_fails(&s.write(name, &text));
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn drain_undrain_matrix_through_the_cli() {
    let s = Scratch::new("matrix");
    let d = start(&s, &fake_config(4, ""), &["--monitor-force-up"]);
    // no reason, then a reason can be added
    d.ok(&["drain", "1"]);
    d.ok(&["drain", "1", "first", "reason"]);
    let (code, err) = d.fails(&["drain", "0-1", "again"]);
    assert_eq!(code, 1);
    assert!(err.contains("rank 1 already drained"), "{err}");
    // --update keeps the reason of 1 and drains 0
    d.ok(&["drain", "-u", "0-1", "update"]);
    let listing = d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"]);
    assert!(listing.contains("0 update"), "{listing}");
    assert!(listing.contains("1 first reason"), "{listing}");
    // --force overwrites the reason
    d.ok(&["drain", "-f", "1", "forced"]);
    let listing = d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"]);
    assert!(listing.contains("1 forced"), "{listing}");
    // hostnames map to ranks; unknown hosts are named
    d.ok(&["drain", "fake3", "by", "host"]);
    assert_eq!(drained(&d), "0-1,3");
    let (_, err) = d.fails(&["drain", "fake[7-8]"]);
    assert!(err.contains("invalid hosts: fake[7-8]"), "{err}");
    let (_, err) = d.fails(&["drain", "0-4"]);
    assert!(err.contains("idset is out of range"), "{err}");
    // undrain: strict check, then any mode clears
    let (_, err) = d.fails(&["undrain", "0-2"]);
    assert!(err.contains("rank 2 not drained"), "{err}");
    d.ok(&["undrain", "0-1"]);
    d.ok(&["undrain", "-f", "0-3"]);
    assert_eq!(drained(&d), "");
    // the persistent log holds exactly the acknowledged mutations
    let names: Vec<String> = stored_events(&s.statedir())
        .iter()
        .map(|e| e["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        names,
        [
            "resource-define",
            "drain",
            "drain",
            "drain",
            "drain",
            "drain",
            "undrain",
            "undrain"
        ]
    );
}

#[test]
fn exclude_by_hostlist_and_idset() {
    let s = Scratch::new("exclude");
    let cfg = fake_config(4, "exclude = \"fake[0,2]\"");
    let d = start(&s, &cfg, &["--monitor-force-up"]);
    assert_eq!(
        d.ok(&["status", "-s", "exclude", "-no", "{ranks}"]).trim(),
        "0,2"
    );
    let (_, err) = d.fails(&["drain", "0"]);
    assert!(err.contains("rank 0 excluded"), "{err}");
    drop(d);
    let s2 = Scratch::new("exclude-bad");
    let err = start_refused(&s2, &fake_config(4, "exclude = \"9\""), &[]);
    assert!(err.contains("exclude"), "{err}");
}

#[test]
fn drained_then_excluded_is_undrained_at_restart() {
    let s = Scratch::new("exclude-drained");
    let mut d = start(&s, &fake_config(4, ""), &[]);
    d.ok(&["drain", "1", "x"]);
    d.stop();
    let mut d = start(&s, &fake_config(4, "exclude = \"1\""), &[]);
    assert_eq!(drained(&d), "");
    d.stop();
    let d = start(&s, &fake_config(4, ""), &[]);
    assert_eq!(drained(&d), "");
    let last = stored_events(&s.statedir())
        .into_iter()
        .rfind(|e| e["name"] == "undrain")
        .expect("undrain posted");
    assert_eq!(last["context"], json!({"idset": "1", "nodelist": "fake1"}));
}

#[test]
fn reload_and_expiration_update() {
    let s = Scratch::new("reload");
    let d = start(&s, &fake_config(4, ""), &["--monitor-force-up"]);
    let r2 = s.write(
        "r2.json",
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-7"}}],"nodelist":["new[0-1]"],"starttime":0.0,"expiration":0.0}}"#,
    );
    d.ok(&["reload", r2.to_str().unwrap()]);
    assert_eq!(
        d.ok(&["list", "-s", "all", "-no", "{nnodes} {ncores} {nodelist}"])
            .trim(),
        "2 16 new[0-1]"
    );
    let big = s.write(
        "big.json",
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-9","children":{"core":"0"}}],"starttime":0.0,"expiration":0.0}}"#,
    );
    let (_, err) = d.fails(&["reload", big.to_str().unwrap()]);
    assert!(err.contains("contains ranks execeeding size"), "{err}");
    let (_, err) = d.fails(&["reload", "/nonexistent/R.json"]);
    assert!(err.contains("/nonexistent/R.json"), "{err}");
    // reload is durable: resource.R and a resource-define{reload}
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(s.statedir().join("resource.R")).unwrap())
            .unwrap();
    assert_eq!(stored["execution"]["nodelist"], json!(["new[0-1]"]));
    let ev = stored_events(&s.statedir());
    assert_eq!(ev.last().unwrap()["context"], json!({"method": "reload"}));

    d.client()
        .expiration_update(1234.0)
        .expect("expiration-update");
    let r = d.client().get().expect("get");
    assert_eq!(r["R"]["execution"]["expiration"], json!(1234.0));
    let ev = stored_events(&s.statedir());
    assert_eq!(ev.last().unwrap()["name"], "resource-update");
    assert_eq!(ev.last().unwrap()["context"], json!({"expiration": 1234.0}));
    let err = d
        .rpc("resource.expiration-update", json!({"expiration": "soon"}))
        .unwrap_err();
    assert_eq!(err.errnum(), 71);
}

/// The journal's responses up to and including the sentinel.
fn backlog(d: &Daemon) -> Vec<Value> {
    let mut out = Vec::new();
    for r in d.client().journal().expect("journal") {
        let v = r.expect("journal response");
        let done = v["events"].as_array().is_some_and(|a| a.is_empty());
        out.push(v);
        if done {
            break;
        }
    }
    out
}

#[test]
fn journal_shape_and_truncation_invariant() {
    let s = Scratch::new("journal");
    let d = start(&s, &fake_config(4, "journal-max = 6"), &[]);
    let b = backlog(&d);
    // restart, then resource-define alone with R, then the sentinel
    assert_eq!(b.len(), 3, "{b:?}");
    assert_eq!(b[0]["events"][0]["name"], "restart");
    assert_eq!(
        b[0]["events"][0]["context"],
        json!({"ranks": "0-3", "online": "", "nodelist": "fake[0-3]"})
    );
    assert_eq!(b[1]["events"][0]["name"], "resource-define");
    assert_eq!(b[1]["events"].as_array().unwrap().len(), 1);
    assert!(b[1]["R"]["execution"].is_object());
    assert_eq!(b[2], json!({"events": []}));
    for i in 0..4 {
        d.ok(&["drain", &i.to_string(), "t"]);
        d.ok(&["undrain", &i.to_string()]);
    }
    let events: Vec<Value> = backlog(&d)
        .iter()
        .flat_map(|r| r["events"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(events[0]["name"], "truncate");
    // RFC 44: the truncate summary carries the state it replaces
    let c = &events[0]["context"];
    assert!(c["online"].is_string() && c["torpid"].is_string(), "{c}");
    assert!(c["drain"].is_object(), "{c}");
    assert_eq!(events[5]["name"], "undrain");
    // the persistent log is not truncated by journal-max
    assert_eq!(stored_events(&s.statedir()).len(), 9);
}

#[test]
fn journal_streams_live_events_and_ends_at_shutdown() {
    let s = Scratch::new("journal-live");
    let mut d = start(&s, &fake_config(2, ""), &[]);
    let mut j = d.client().journal().expect("journal");
    loop {
        let v = j.next().unwrap().unwrap();
        if v["events"].as_array().is_some_and(|a| a.is_empty()) {
            break;
        }
    }
    d.ok(&["drain", "1", "live"]);
    let v = j.next().unwrap().unwrap();
    assert_eq!(v["events"][0]["name"], "drain");
    assert_eq!(v["events"][0]["context"]["reason"], "live");
    d.client().monitor_force_up("0-1").unwrap();
    let v = j.next().unwrap().unwrap();
    assert_eq!(v["events"][0]["name"], "online");
    assert_eq!(v["events"][0]["context"], json!({"idset": "0-1"}));
    d.client().monitor_force_down("1").unwrap();
    let v = j.next().unwrap().unwrap();
    assert_eq!(v["events"][0]["name"], "offline");
    assert!(d.stop().success());
    // shutdown ends the stream with ENODATA: the iterator just ends
    assert!(j.next().is_none());
}

#[test]
fn restart_restores_drains_and_journal_order() {
    let s = Scratch::new("restart");
    let mut d = start(&s, &fake_config(4, ""), &[]);
    d.ok(&["drain", "0", "testing"]);
    d.ok(&["drain", "2-3", "other"]);
    d.ok(&["drain", "-ff", "3", "forced"]);
    let before = d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"]);
    assert!(d.stop().success());
    assert!(s.statedir().join("checkpoint.resource").exists());
    let mut d = start(&s, &fake_config(4, ""), &[]);
    assert_eq!(
        d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"]),
        before
    );
    // t2355: the replayed drain comes before restart, and this load's
    // resource-define (method configuration) is last
    let text = d.ok(&["eventlog"]);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(names.first(), Some(&"drain"), "{text}");
    assert_eq!(names.last(), Some(&"resource-define"), "{text}");
    d.stop();
    // without a config the stored R is used: method kvs
    let d2 = {
        let mut c = roster();
        let sock = s.path("kvs.sock");
        let uri = format!("unix://{}", sock.display());
        c.arg("serve")
            .arg("--statedir")
            .arg(s.statedir())
            .arg("--listen")
            .arg(&uri)
            .stderr(std::process::Stdio::null());
        let child = c.spawn().unwrap();
        let d = Daemon {
            child: Some(child),
            uri,
            sock,
            log: s.path("none.log"),
        };
        let t0 = std::time::Instant::now();
        while d.rpc("resource.get", json!({})).is_err() {
            assert!(t0.elapsed().as_secs() < 20, "kvs daemon did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        d
    };
    assert_eq!(d2.client().get().unwrap()["method"], "kvs");
    assert_eq!(
        d2.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"]),
        before
    );
}

/// A scratch directory whose state directory holds the eventlog `text`.
fn with_eventlog(name: &str, text: &str) -> Scratch {
    let s = Scratch::new(name);
    std::fs::write(s.statedir().join("resource.eventlog"), text).unwrap();
    s
}

fn drained_after_replay(events: &[Value], checkpoint: Option<Value>) -> String {
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    let s = with_eventlog("remap", &text);
    if let Some(cp) = checkpoint {
        std::fs::write(s.statedir().join("checkpoint.resource"), cp.to_string()).unwrap();
    }
    let d = start(&s, &fake_config(4, "history = \"inf\""), &[]);
    drained(&d)
}

fn drain_ev(ts: f64, idset: &str, nodelist: &str) -> Value {
    json!({"timestamp": ts, "name": "drain",
           "context": {"idset": idset, "nodelist": nodelist, "reason": "r"}})
}

#[test]
fn replay_remaps_ranks_through_the_stored_nodelist() {
    assert_eq!(
        drained_after_replay(&[drain_ev(1.0, "1-2", "fake[1-2]")], None),
        "1-2"
    );
    assert_eq!(
        drained_after_replay(&[drain_ev(1.0, "1-2", "fake[2-3]")], None),
        "2-3"
    );
    assert_eq!(
        drained_after_replay(&[drain_ev(1.0, "1-2", "fake[3-4]")], None),
        "3"
    );
    assert_eq!(
        drained_after_replay(&[drain_ev(1.0, "42", "fake42")], None),
        ""
    );
    // checkpoint-era entry: rank 0 recorded on fake3
    let cp = json!({"timestamp": 5.0, "drain_state":
        {"0": {"timestamp": 2.0, "reason": "cp", "nodelist": "fake3"}}});
    assert_eq!(drained_after_replay(&[], Some(cp)), "3");
    // events older than the checkpoint are skipped
    let cp = json!({"timestamp": 5.0, "drain_state": {}});
    assert_eq!(
        drained_after_replay(&[drain_ev(1.0, "1", "fake1")], Some(cp)),
        ""
    );
}

#[test]
fn torn_last_line_is_dropped_and_corrupt_lines_refuse_start() {
    let good = drain_ev(1.0, "1", "fake1").to_string();
    let s = with_eventlog("torn", &format!("{good}\n{{\"timestamp\":2.0,\"na"));
    let d = start(&s, &fake_config(4, "history = \"inf\""), &[]);
    assert_eq!(drained(&d), "1");
    assert!(d.log_text().contains("torn"), "{}", d.log_text());
    drop(d);

    let bad = json!({"timestamp": 1.0, "name": "drain", "context": {"idset": "1"}});
    for (name, log, want) in [
        (
            "corrupt",
            format!("{good}\nnot json\n{good}\n"),
            "resource.eventlog line 2",
        ),
        (
            "parse-error",
            format!("{bad}\n"),
            "line 1: drain parse error",
        ),
    ] {
        let err = start_refused(&with_eventlog(name, &log), &fake_config(4, ""), &[]);
        assert!(err.contains(want), "{name}: {err}");
    }
}

#[test]
fn history_zero_truncates_the_log_but_keeps_drain_state() {
    let s = Scratch::new("history");
    let mut d = start(&s, &fake_config(4, ""), &[]);
    d.ok(&["drain", "1-2", "kept"]);
    assert!(d.stop().success());
    let d = start(&s, &fake_config(4, "history = \"0\""), &[]);
    assert_eq!(drained(&d), "1-2");
    let names: Vec<Value> = stored_events(&s.statedir())
        .into_iter()
        .map(|e| e["name"].clone())
        .collect();
    assert!(!names.contains(&json!("drain")), "{names:?}");
    drop(d);
    // and once more: the state still comes from the checkpoint
    let d = start(&s, &fake_config(4, "history = \"0\""), &[]);
    assert_eq!(drained(&d), "1-2");
}

#[test]
fn second_daemon_on_the_same_statedir_is_refused() {
    let s = Scratch::new("lock");
    let _d = start(&s, &fake_config(2, ""), &[]);
    let o = roster()
        .args(["serve", "--statedir"])
        .arg(s.statedir())
        .arg("--listen")
        .arg(format!("unix://{}", s.path("other.sock").display()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is in use by another roster serve (pid"),
        "{err}"
    );
}

#[test]
fn guests_read_status_only_and_tcp_needs_the_token() {
    let s = Scratch::new("roles");
    let token = token_file(&s);
    // a token others can read is refused
    let loose = s.write("loose-token", "s3cret\n");
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let o = roster()
        .args(["serve", "--check", "--token-file"])
        .arg(&loose)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("mode 0644 (chmod 600 it)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (d, addr) = start_with_tcp(&s, &fake_config(2, ""), &[]);
    let tcp = format!("tcp://{addr}");
    // TCP without the token: refused; with it: owner
    let o = roster()
        .args(["resource", "--uri", &tcp, "drain", "1"])
        .env_remove("ROSTER_TOKEN_FILE")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "resource.drain requires the admin role: authentication required: \
             missing or wrong bearer token"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = roster()
        .args(["resource", "--uri", &tcp, "drain", "1", "via", "tcp"])
        .env("ROSTER_TOKEN_FILE", &token)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // another uid on the Unix socket is a guest (needs root to test)
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: skipping the guest-uid part");
        return;
    }
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let guest = |args: &[&str]| {
        roster()
            .arg("resource")
            .arg("--uri")
            .arg(&d.uri)
            .args(args)
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    let o = guest(&["status", "-no", "{nnodes}"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for args in [
        &["drain", "0", "guest"][..],
        &["undrain", "1"][..],
        &["reload", "/etc/hostname"][..],
        &["eventlog"][..],
    ] {
        let o = guest(args);
        assert_eq!(o.status.code(), Some(1), "guest {args:?} was not refused");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("Request requires owner credentials"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(drained(&d), "1");
}

/// Drain ranks while killing the daemon with SIGKILL at random moments;
/// every acknowledged drain must be there after the restart.  10 rounds by
/// default; `ROSTER_CRASH_ROUNDS=200` (set by `bench/crash.sh`) for the
/// full run.
#[test]
fn crash_loses_no_acknowledged_drain() {
    let rounds = env_number("ROSTER_CRASH_ROUNDS", 10);
    let nodes = 16384u32;
    let s = Scratch::new("crash");
    let config = fake_config(nodes, "");
    let mut acked: Vec<u32> = Vec::new();
    let mut next = 0u32;
    let mut rand = xorshift();
    for round in 0..rounds {
        let mut d = start(&s, &config, &[]);
        // everything acknowledged so far survived
        let now = drained(&d);
        let want = idset_of(&acked);
        assert_eq!(
            now, want,
            "round {round}: acknowledged drains lost (or extra ones)"
        );
        // drain from a thread; kill after a random delay
        let uri = d.uri.clone();
        let first = next;
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let c = client::blocking::Client::new(rpc::uri::Uri::parse(&uri).unwrap());
            let mut r = first;
            while r < nodes {
                match c.drain(&r.to_string(), Some("crash test"), None) {
                    Ok(()) => {
                        if tx.send(r).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
                r += 1;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(5 + rand() % 40));
        d.crash();
        let _ = worker.join();
        let got: Vec<u32> = rx.try_iter().collect();
        assert!(
            next + (got.len() as u32) < nodes,
            "ran out of ranks to drain"
        );
        next = got.last().map_or(next, |l| l + 1);
        // a drain may have become durable without its reply arriving:
        // skip that rank in the next round's expectations by re-reading it
        acked.extend(got);
        let mut d = start(&s, &config, &[]);
        let now = drained(&d);
        let have = parse_ids(&now);
        for r in &acked {
            assert!(
                have.contains(r),
                "round {round}: acknowledged drain of {r} lost"
            );
        }
        // adopt an unacknowledged-but-durable drain (crash between fsync
        // and reply) so the next round's equality check holds
        for r in have {
            if !acked.contains(&r) {
                acked.push(r);
                next = next.max(r + 1);
            }
        }
        acked.sort_unstable();
        d.stop();
    }
    assert!(!acked.is_empty(), "no drain was ever acknowledged");
    eprintln!(
        "crash test: {rounds} rounds, {} drains acknowledged, none lost",
        acked.len()
    );
}

fn parse_ids(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                out.extend(a..=b);
            }
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

fn idset_of(ids: &[u32]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[test]
fn sighup_applies_group_changes_with_shrink_release_grow() {
    let s = Scratch::new("groups");
    let conf = |batch: &str| fake_config(4, &format!("[resource.groups]\nbatch = \"{batch}\"\n"));
    let d = start(&s, &conf("2-3"), &["--monitor-force-up"]);
    let c = d.client();
    let mut batch = c.acquire(Some("batch")).expect("acquire batch");
    let first = batch.next().unwrap().unwrap();
    assert_eq!(first["type"], "grow");
    assert_eq!(first["online"], "2-3");
    let c2 = d.client();
    let mut default = c2.acquire(Some("default")).expect("acquire default");
    let first = default.next().unwrap().unwrap();
    assert_eq!(first["type"], "grow");
    assert_eq!(first["online"], "0-1");
    // move target 3 to default: batch is asked to shrink it
    s.write("roster.toml", &conf("2"));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(d.child.as_ref().unwrap().id() as i32, libc::SIGHUP) };
    let shrink = batch.next().unwrap().unwrap();
    assert_eq!(shrink, json!({"type": "shrink", "targets": "3"}));
    // releasing something else is refused, naming the targets
    let err = d.client().release("batch", "2").unwrap_err();
    assert!(err.to_string().contains('2'), "{err}");
    d.client().release("batch", "3").expect("release");
    let grow = default.next().unwrap().unwrap();
    assert_eq!(grow["type"], "grow");
    assert_eq!(grow["online"], "3");
    assert_contains(&d.log_text(), "SIGHUP: reloaded");
}

#[test]
fn flux_clients_reach_the_same_service() {
    let s = Scratch::new("flux");
    let (d, mut c) = start_flux(&s, &fake_config(4, ""));
    flux_wire::request(
        &mut c,
        "resource.drain",
        Some(r#"{"targets":"2","reason":"via flux"}"#),
        7,
    );
    let (frames, errnum, tag) = flux_wire::response(&mut c);
    assert_eq!((errnum, tag), (0, 7));
    assert_eq!(frames, vec![b"".to_vec(), b"resource.drain".to_vec()]);
    // the HTTP side sees it, and it is durable
    assert_eq!(
        d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"])
            .trim(),
        "2 via flux"
    );
    assert_eq!(
        stored_events(&s.statedir()).last().unwrap()["name"],
        "drain"
    );
    // the same errors as over HTTP
    flux_wire::request(&mut c, "resource.drain", Some(r#"{"targets":"2"}"#), 8);
    let (frames, errnum, _) = flux_wire::response(&mut c);
    assert_eq!(errnum, 17);
    assert_eq!(frames[2], b"rank 2 already drained\0".to_vec());
    flux_wire::request(&mut c, "resource.status", None, 9);
    let (frames, errnum, _) = flux_wire::response(&mut c);
    assert_eq!(errnum, 0);
    let v: Value = serde_json::from_slice(frames[2].strip_suffix(&[0]).unwrap()).unwrap();
    assert_eq!(v["drain"]["2"]["reason"], "via flux");
}

/// A mistyped key or table in the configuration: the error as before,
/// then a hint naming the file, the line and the nearest known name.
#[test]
fn config_typo_gets_did_you_mean_with_file_and_line() {
    let s = Scratch::new("config-typo");
    let cfg = s.write(
        "c.toml",
        "[resource]\nnoverify = true\nexclud = \"a1\"\n\n[[resource.config]]\nhosts = \"a[0-1]\"\ncores = \"0-1\"\n",
    );
    let err = check_fails(&cfg);
    let f = cfg.display();
    assert_eq!(
        err,
        format!(
            "roster serve: {f}: [resource]: unknown key 'exclud'\n\
             roster serve: hint: {f}:3: did you mean 'exclude'?\n"
        )
    );
    let cfg = s.write(
        "d.toml",
        "[[resource.config]]\nhosts = \"a[0-1]\"\n[serv]\nstatedir = \"/x\"\n",
    );
    let o = check(&cfg);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.ends_with(&format!(
            "roster serve: hint: {}:3: did you mean 'serve'?\n",
            cfg.display()
        )),
        "{err}"
    );
}

/// `roster serve [--check]` on `cfg`, with the state directory of `s`.
fn serve_once(s: &Scratch, cfg: &std::path::Path, check: bool) -> Out {
    let mut c = roster();
    c.arg("serve").arg("--statedir").arg(s.statedir());
    c.arg("--config").arg(cfg);
    if check {
        c.arg("--check");
    }
    c.output().unwrap().into()
}

/// `roster serve --check` and `roster serve` on the same configuration:
/// both must refuse it, with the same message (containing `want`), and
/// exit 1; nothing is started.
fn refused_by_check_and_serve(name: &str, serve_toml: &str, want: &str) {
    let s = Scratch::new(name);
    let token = token_file(&s);
    let serve_toml = serve_toml.replace("TOKEN", token.to_str().unwrap());
    let cfg = s.write(
        "roster.toml",
        &(fake_config(2, "") + "[serve]\n" + &serve_toml),
    );
    let check = serve_once(&s, &cfg, true);
    assert_eq!(check.code, 1, "{name}: --check passed: {}", check.stderr);
    assert!(check.stderr.contains(want), "{name}: {}", check.stderr);
    let serve = serve_once(&s, &cfg, false);
    assert_eq!(serve.code, 1, "{name}: {}", serve.stderr);
    let last = |t: &str| t.lines().last().unwrap_or("").to_string();
    assert_eq!(last(&serve.stderr), last(&check.stderr), "{name}");
    // refused before the state directory was touched
    let log = s.statedir().join("resource.eventlog");
    assert!(!log.exists(), "{name}");
}

/// Listeners a configuration may not have: TLS without a certificate,
/// TCP without a token, plain TCP off loopback.
#[test]
fn check_refuses_unsafe_listeners() {
    for (name, serve_toml, want) in [
        (
            "check-tls-cert",
            "listen = [\"tls://127.0.0.1:8050\"]\ntoken-file = \"TOKEN\"\n",
            "a TLS listener needs a certificate and key (tls-cert, tls-key)",
        ),
        (
            "check-tcp-token",
            "listen = [\"tcp://127.0.0.1:8051\"]\n",
            "TCP listener requires a token file",
        ),
        (
            "check-tcp-any",
            "listen = [\"tcp://0.0.0.0:8051\"]\ntoken-file = \"TOKEN\"\n",
            "plain TCP is only allowed on loopback addresses",
        ),
    ] {
        refused_by_check_and_serve(name, serve_toml, want);
    }
}

#[test]
fn check_refuses_tls_without_client_authentication() {
    let s = Scratch::new("check-tls-pki");
    let pki = localhost_pki(&s);
    refused_by_check_and_serve(
        "check-tls-auth",
        &format!(
            "listen = [\"tls://127.0.0.1:8050\"]\n{}",
            cert_and_key(&pki)
        ),
        "TLS clients could not authenticate",
    );
}

#[cfg(not(feature = "etcd"))]
#[test]
fn check_refuses_the_etcd_backend_of_a_build_without_it() {
    refused_by_check_and_serve(
        "check-etcd",
        "backend = \"etcd\"\netcd-endpoints = [\"http://127.0.0.1:2379\"]\n",
        "this roster was built without the etcd backend",
    );
}

/// A restart right after the old daemon logged "stopped" finds the state
/// directory free, although the old process still gives its connections
/// their shutdown grace (here a TLS connection that never starts its
/// handshake keeps it up to 3 s).
#[test]
fn restart_right_after_stopped_finds_the_statedir_free() {
    let s = Scratch::new("restart-at-once");
    let pki = localhost_pki(&s);
    let port = free_port();
    let cfg = fake_config(2, "")
        + &format!(
            "[serve]\n{}tls-client-ca = \"{pki}/ca.pem\"\n",
            cert_and_key(&pki)
        );
    let mut d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
    let idle = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut old = d.child.take().unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(old.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !d.log_text().contains("stopped; drain checkpoint written") {
        assert!(std::time::Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // at once, on another socket (the old one may still be there)
    let sock = s.path("second.sock");
    let log = s.path("second.log");
    let mut second = serve_cmd(
        &s,
        &format!("unix://{}", sock.display()),
        &s.path("roster.toml"),
    )
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let uri = rpc::uri::Uri::parse(&format!("unix://{}", sock.display())).unwrap();
    let c = client::blocking::Client::new(uri);
    while c.rpc("resource.status", json!({})).is_err() {
        assert!(
            std::time::Instant::now() < deadline && second.try_wait().unwrap().is_none(),
            "the restart failed:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = second.kill();
    let _ = second.wait();
    drop(idle);
    assert!(old.wait().unwrap().success());
}

/// A `path` that cannot be opened is reported at the line that sets it
/// (not jansson's "line -1"), by --check and by serve.
#[test]
fn a_missing_path_names_its_line() {
    let s = Scratch::new("missing-path");
    let cfg = s.write(
        "roster.toml",
        "# the cluster\n[resource]\npath = \"/nonexistent/R.json\"\n",
    );
    for check in [true, false] {
        let Out {
            code, stderr: err, ..
        } = serve_once(&s, &cfg, check);
        assert_eq!(code, 1, "--check {check}");
        assert_eq!(
            err.lines().last().unwrap_or(""),
            format!(
                "roster serve: {}:3: /nonexistent/R.json: unable to open /nonexistent/R.json: No such file or directory",
                cfg.display()
            ),
            "{err}"
        );
    }
}
