//! A journal follower across daemon restarts: the client library's
//! `JournalFollower` and `roster resource eventlog -F` resume from their
//! last position, with no event twice and none missed.

mod common;

use common::{event_names, fake_config, line_channel, recv_until, start, Daemon, Scratch};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

/// Receive events until `last` arrives (panics after 30 s); the
/// follower's resume count (after each response) is kept in `resumes`.
fn until(rx: &mpsc::Receiver<String>, last: &str, resumes: &mut u64) -> Vec<String> {
    recv_until(rx, last, Duration::from_secs(30), |n| {
        let Some(count) = n.strip_prefix("--resumes ") else {
            return false;
        };
        *resumes = count.trim_end_matches("--").parse().unwrap_or(0);
        true
    })
}

/// A daemon of 4 fake nodes with rank 0 drained (`before`): its scratch
/// directory, its configuration (to start it again) and the daemon.
fn drained_before(name: &str) -> (Scratch, String, Daemon) {
    let s = Scratch::new(name);
    let cfg = fake_config(4, "");
    let d = start(&s, &cfg, &[]);
    d.ok(&["drain", "0", "before"]);
    (s, cfg, d)
}

#[test]
fn follower_resumes_across_a_crash_and_a_clean_restart() {
    let (s, cfg, mut d) = drained_before("journal-resume");
    let mut f = d.client().follow_journal().expect("journal");
    let (tx, rx) = mpsc::channel();
    // The reader thread is left behind at the end (it would try to
    // resume on the stopped daemon for a while).
    std::thread::spawn(move || {
        while let Some(r) = f.next() {
            let Ok(v) = r else { return };
            if v["events"].as_array().is_some_and(Vec::is_empty) {
                let _ = tx.send("--sentinel--".to_string());
            }
            for n in event_names(&v) {
                let _ = tx.send(n);
            }
            let _ = tx.send(format!("--resumes {}--", f.resumes()));
        }
    });
    let mut resumes = 0;
    let backlog = until(&rx, "--sentinel--", &mut resumes);
    assert_eq!(
        backlog,
        ["restart", "resource-define", "drain:before", "--sentinel--"]
    );
    d.ok(&["drain", "1", "a"]);
    assert_eq!(until(&rx, "drain:a", &mut resumes), ["drain:a"]);
    assert_eq!(resumes, 0);

    // A crash: the stream is cut; the follower retries until the daemon
    // is back, then resumes after drain:a.
    d.crash();
    let mut d = start(&s, &cfg, &[]);
    d.ok(&["drain", "2", "b"]);
    assert_eq!(
        until(&rx, "drain:b", &mut resumes),
        ["restart", "resource-define", "drain:b"],
        "no drain twice, no second sentinel, nothing missed"
    );

    // A clean stop: a resumable reader is told to resume (EAGAIN), not
    // ended.
    assert!(d.stop().success());
    let d = start(&s, &cfg, &[]);
    d.ok(&["drain", "3", "c"]);
    assert_eq!(
        until(&rx, "drain:c", &mut resumes),
        ["restart", "resource-define", "drain:c"]
    );
    // One resume per restart, give or take one: after a clean stop's
    // EAGAIN the follower may reach the stopping daemon before its
    // listeners close, and that stream is cut at once (resumed again,
    // still with no event twice and none missed, as checked above).
    assert!(
        (2..=4).contains(&resumes),
        "one resume per restart (plus at most one per stop race): {resumes}"
    );
}

#[test]
fn eventlog_follow_survives_a_restart() {
    let (s, cfg, mut d) = drained_before("journal-resume-cli");
    let mut cli = d.spawn_resource(&[
        "eventlog",
        "-F",
        "-f",
        "json",
        "-t",
        "60s",
        "-w",
        "drain",
        "-m",
        "reason=after",
    ]);
    let mut lines = BufReader::new(cli.stdout.take().expect("stdout")).lines();
    // The backlog is printed: the follower is connected.
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.expect("line");
        let done = l.contains("\"before\"");
        seen.push(l);
        if done {
            break;
        }
    }
    d.crash();
    let d = start(&s, &cfg, &[]);
    d.ok(&["drain", "1", "after"]);
    for l in lines {
        seen.push(l.expect("line"));
    }
    let status = cli.wait().expect("wait eventlog");
    let mut err = String::new();
    if let Some(mut e) = cli.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "eventlog: {status:?} {err}");
    // The daemon was not back at the first try: the wait was said, once.
    assert_eq!(
        err.matches("roster-resource: WARNING: the journal stream ended (")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("trying to resume it for up to 30 s"), "{err}");
    let names: Vec<String> = seen
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("json line"))
        .map(|v| {
            let name = v["name"].as_str().unwrap_or("").to_string();
            match v["context"]["reason"].as_str() {
                Some(r) => format!("{name}:{r}"),
                None => name,
            }
        })
        .collect();
    assert_eq!(
        names,
        [
            "restart",
            "resource-define",
            "drain:before",
            "restart",
            "resource-define",
            "drain:after"
        ],
        "{seen:#?}"
    );
}

#[test]
fn eventlog_follow_says_at_once_that_it_waits_for_a_stopped_service() {
    let s = Scratch::new("journal-resume-said");
    let mut d = start(&s, &fake_config(2, ""), &[]);
    let mut cli = d.spawn_resource(&["eventlog", "-F"]);
    let mut out = BufReader::new(cli.stdout.take().expect("stdout")).lines();
    // The backlog is printed: the follower is connected.
    let first = out.next().expect("a line").expect("line");
    assert!(first.contains("restart"), "{first}");
    let rx = line_channel(cli.stderr.take().expect("stderr"));
    assert!(d.stop().success());
    // Said within seconds, not after the 30 s of trying.
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a warning on stderr while resuming");
    let _ = cli.kill();
    let _ = cli.wait();
    assert!(
        line.starts_with("roster-resource: WARNING: the journal stream ended (")
            && line.ends_with("trying to resume it for up to 30 s"),
        "{line}"
    );
}
