#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! `roster serve` under systemd's notify protocol: READY=1 only once the
//! socket answers, WATCHDOG=1 pings, STOPPING=1 on SIGTERM, in that order;
//! and the shipped units pass `systemd-analyze verify` where available.

mod common;

use common::*;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn notify_socket_gets_ready_watchdog_stopping_in_order() {
    let s = Scratch::new("notify");
    let cfg = s.write("roster.toml", &fake_config(3, ""));
    let notify = s.path("notify.sock");
    let rx = UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sock = s.path("roster.sock");
    let uri = format!("unix://{}", sock.display());
    let mut child = roster()
        .arg("serve")
        .arg("--statedir")
        .arg(s.statedir())
        .arg("--listen")
        .arg(&uri)
        .arg("--config")
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let mut recv = || loop {
        match rx.recv(&mut buf) {
            Ok(n) => break String::from_utf8_lossy(&buf[..n]).to_string(),
            // a signal to the test process (not a failure)
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("a notification: {e}"),
        }
    };
    let first = recv();
    assert!(first.starts_with("READY=1\n"), "{first:?}");
    assert!(first.contains("STATUS=serving 3 targets"), "{first:?}");
    // ready means served: the socket answers at once
    let c = client::blocking::Client::new(rpc::uri::Uri::parse(&uri).unwrap());
    c.rpc("resource.status", serde_json::json!({}))
        .expect("status right after READY=1");
    // 200 ms watchdog: pings every ~100 ms from the service loop
    assert_eq!(recv(), "WATCHDOG=1");
    assert_eq!(recv(), "WATCHDOG=1");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let rest: Vec<String> = std::iter::from_fn(|| {
        let m = recv();
        (m != "STOPPING=1").then_some(m)
    })
    .collect();
    assert!(rest.iter().all(|m| m == "WATCHDOG=1"), "{rest:?}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn units_pass_systemd_analyze_verify() {
    let have = Command::new("sh")
        .args(["-c", "command -v systemd-analyze"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("systemd-analyze missing (Debian package `systemd`) and CI=true");
        }
        eprintln!("!!! SKIPPING: systemd-analyze not installed");
        return;
    }
    let units = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/systemd");
    let s = Scratch::new("units");
    // ExecStart must exist: point it at the test binary in a copy.
    for name in ["roster.service", "roster-agent.service"] {
        let text = std::fs::read_to_string(format!("{units}/{name}")).unwrap();
        assert!(text.contains("/usr/local/bin/roster "), "{name}");
        let text = text.replace(
            "/usr/local/bin/roster ",
            &format!("{} ", env!("CARGO_BIN_EXE_roster")),
        );
        s.write(name, &text);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(s.path("roster.service"))
        .arg(s.path("roster-agent.service"))
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Lines about the host's own units are not ours.
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("roster")).collect();
    assert!(out.status.success() && ours.is_empty(), "{err}");
}
