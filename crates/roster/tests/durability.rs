//! Clock-safe replay (under libfaketime) and sparse ranks, on the real
//! daemon.
//!
//! The faketime tests need the Debian package `faketime` (libfaketime):
//! without it they are skipped with a message, unless `CI=true`, where a
//! missing library fails them.

mod common;

use common::*;
use serde_json::json;
use std::path::PathBuf;

fn drained(d: &Daemon) -> String {
    d.ok(&["status", "-s", "drain", "-no", "{ranks} {reason}"])
        .trim()
        .to_string()
}

fn libfaketime() -> Option<PathBuf> {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/lib64/faketime/libfaketime.so.1",
    ];
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("libfaketime not found (apt-get install faketime)");
        }
        eprintln!("SKIPPED: libfaketime not found (apt-get install faketime)");
    }
    found
}

/// A clean stop with the clock one day ahead, a restart at the true
/// time, a drain (acknowledged), SIGKILL, a restart: the drain is there,
/// in the state and on disk.
fn clock_ahead_at_stop(history: &str) {
    let Some(lib) = libfaketime() else { return };
    let lib = lib.display().to_string();
    let s = Scratch::new(&format!("faketime-{history}"));
    let cfg = fake_config(4, &format!("history = \"{history}\""));
    let ahead = [
        ("LD_PRELOAD", lib.as_str()),
        ("FAKETIME", "+1d"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ("FAKETIME_DONT_RESET", "1"),
    ];
    let mut d = start_env(&s, &cfg, &[], &ahead);
    d.ok(&["drain", "0", "ahead"]);
    // The clock really was ahead: the drain is stamped a day from now.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let evs = stored_events(&s.statedir());
    let ts = evs
        .iter()
        .rev()
        .find(|e| e["name"] == "drain")
        .and_then(|e| e["timestamp"].as_f64())
        .unwrap_or(0.0);
    assert!(
        ts > now + 80_000.0,
        "libfaketime had no effect: {ts} vs {now}"
    );
    assert!(d.stop().success(), "{}", d.log_text());

    // The true time: drain, and crash before any clean stop.
    let mut d = start(&s, &cfg, &[]);
    d.ok(&["drain", "1", "true time"]);
    d.crash();

    let d = start(&s, &cfg, &[]);
    assert_eq!(drained(&d), "0 ahead\n1 true time", "{}", d.log_text());
    let on_disk = stored_events(&s.statedir());
    assert!(
        on_disk
            .iter()
            .any(|e| e["name"] == "drain" && e["context"]["reason"] == "true time"),
        "history {history}: the acknowledged drain was deleted from disk"
    );
}

#[test]
fn clock_ahead_at_clean_stop_keeps_a_later_drain() {
    clock_ahead_at_stop("inf");
}

#[test]
fn clock_ahead_at_clean_stop_keeps_a_later_drain_with_history_1d() {
    clock_ahead_at_stop("1d");
}

#[test]
fn clock_ahead_at_clean_stop_keeps_a_later_drain_with_history_0() {
    clock_ahead_at_stop("0");
}

// ------------------------------------------------------------ sparse ranks

/// One node at the largest RFC 22 id.
const BIG_R: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"2147483646","children":{"core":"0-3"}}],"starttime":0.0,"expiration":0.0,"nodelist":["big"]}}"#;

/// The daemon's peak resident memory, in kB (VmHWM).
fn peak_kb(d: &Daemon) -> u64 {
    let pid = d.child.as_ref().map(|c| c.id()).unwrap_or(0);
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `resource.status` answers, the big rank can be drained and shows as
/// drained, and the daemon stayed small (a structure sized by the rank
/// would need tens of GB and abort).  The CLI views show the rank with
/// its host (R's nodelist is mapped by position among R's ranks, which
/// for flux's dense ranks is flux's index by rank).
fn check_big(d: &Daemon) {
    let st = d.status();
    assert_eq!(
        st["R"]["execution"]["R_lite"][0]["rank"], "2147483646",
        "{st}"
    );
    d.ok(&["drain", "2147483646", "far"]);
    let st = d.status();
    assert_eq!(st["drain"]["2147483646"]["reason"], "far", "{st}");
    assert_eq!(
        d.ok(&["status", "-no", "{state} {ranks} {nodelist}"]),
        "drained* 2147483646 big\n"
    );
    assert_eq!(
        d.ok(&["drain", "-no", "{nodelist} {ranks} {reason}"]),
        "big 2147483646 far\n"
    );
    d.ok(&["undrain", "2147483646"]);
    let st = d.status();
    assert_eq!(st["drain"], json!({}), "{st}");
    let kb = peak_kb(d);
    assert!(kb > 0 && kb < 200_000, "peak RSS {kb} kB");
}

#[test]
fn sparse_rank_from_configuration() {
    let s = Scratch::new("sparse-config");
    let r = s.write("R.json", BIG_R);
    let cfg = format!("[resource]\nnoverify = true\npath = \"{}\"\n", r.display());
    let d = start(&s, &cfg, &[]);
    check_big(&d);
}

#[test]
fn sparse_rank_from_stored_r() {
    let s = Scratch::new("sparse-stored");
    std::fs::write(s.statedir().join("resource.R"), BIG_R).expect("write resource.R");
    let d = start(&s, "[resource]\nnoverify = true\n", &[]);
    check_big(&d);
}

#[test]
fn sparse_rank_from_parent_r() {
    let s = Scratch::new("sparse-parent");
    let r = s.write("R.json", BIG_R);
    let d = start(
        &s,
        "[resource]\nnoverify = true\n",
        &["--parent-R", r.to_str().expect("utf-8 path")],
    );
    check_big(&d);
}

#[test]
fn sparse_rank_through_reload() {
    let s = Scratch::new("sparse-reload");
    let r = s.write("R.json", BIG_R);
    let d = start(&s, &fake_config(4, ""), &[]);
    d.ok(&["reload", "-f", r.to_str().expect("utf-8 path")]);
    check_big(&d);
}

/// The eventlog is preallocated while the daemon runs (zeros after the
/// last event, so that an acknowledged append changes no file size); a
/// SIGKILL leaves that room, which the next start takes without a
/// warning; a clean stop cuts it.
#[test]
fn eventlog_room_while_running_cut_at_a_clean_stop() {
    let s = Scratch::new("eventlog-room");
    let cfg = fake_config(4, "");
    let log = s.statedir().join("resource.eventlog");
    let bytes = || std::fs::read(&log).unwrap();
    let mut d = start(&s, &cfg, &[]);
    d.ok(&["drain", "0", "one"]);
    d.ok(&["drain", "1", "two"]);
    let b = bytes();
    let end = b.iter().rposition(|&c| c == b'\n').unwrap() + 1;
    assert!(b.len() - end >= 64 * 1024, "room: {} bytes", b.len() - end);
    assert!(b[end..].iter().all(|&c| c == 0));
    d.crash();
    let mut d = start(&s, &cfg, &[]);
    assert_eq!(drained(&d), "0 one\n1 two", "{}", d.log_text());
    assert!(!d.log_text().contains("torn"), "{}", d.log_text());
    d.ok(&["drain", "2", "three"]);
    assert!(d.stop().success(), "{}", d.log_text());
    let b = bytes();
    assert_eq!(b.last(), Some(&b'\n'));
    assert!(!b.contains(&0));
    assert_eq!(
        stored_events(&s.statedir()).len(),
        String::from_utf8(b).unwrap().lines().count()
    );
    let d = start(&s, &cfg, &[]);
    assert_eq!(drained(&d), "0 one\n1 two\n2 three", "{}", d.log_text());
}
