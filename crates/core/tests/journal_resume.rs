//! Journal positions: a `resource.journal` reader resumes after a lost
//! connection, a restart (another run on the stored log) or history
//! truncation without a duplicate or a gap, or is told it cannot.

use eventlog::Event;
mod common;

use common::*;
use roster_core::errno::*;
use roster_core::*;
use rpc::{ReplyTo, Role};
use serde_json::{json, Value};

struct H {
    svc: Service,
    now: f64,
    conn: u64,
    /// Every event this run persisted (the shell's log).
    log: Vec<Event>,
}

impl H {
    fn start(run: u64, stored: Vec<Event>, journal_max: usize) -> H {
        let (svc, out) = start_service(Init {
            now: 1000.0 + run as f64 * 100.0,
            inventory: Some(r4()),
            stored_events: stored.clone(),
            settings: Settings {
                journal_max,
                ..Default::default()
            },
            run,
            ..Default::default()
        });
        let mut log = stored;
        log.extend(persisted(&out));
        H {
            svc,
            now: 1000.0 + run as f64 * 100.0,
            conn: 1,
            log,
        }
    }

    fn handle(&mut self, input: Input) -> Vec<Output> {
        self.now += 0.5;
        let mut out = Vec::new();
        self.svc.handle(self.now, input, &mut out);
        self.log.extend(persisted(&out));
        out
    }

    fn journal(&mut self, payload: Value) -> (ReplyTo, Vec<Result<Value, RpcError>>) {
        self.conn += 1;
        let req = request(self.conn, 1, "resource.journal", payload, true, Role::Owner);
        let to = req.reply_to();
        let out = self.handle(Input::Request(req));
        (to, replies_to(&out, to))
    }

    fn drain(&mut self, rank: u32, reason: &str) -> Vec<Output> {
        self.conn += 1;
        let req = request(
            self.conn,
            1,
            "resource.drain",
            json!({"targets": rank.to_string(), "reason": reason, "mode": "overwrite"}),
            false,
            Role::Owner,
        );
        let to = req.reply_to();
        let out = self.handle(Input::Request(req));
        assert_eq!(replies_to(&out, to), vec![Ok(Value::Null)], "{out:?}");
        out
    }
}

/// The events of replies, as `name` or `name:reason`.
fn names(replies: &[Result<Value, RpcError>]) -> Vec<String> {
    replies
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .flat_map(|v| v["events"].as_array().cloned().unwrap_or_default())
        .map(|e| match e["context"]["reason"].as_str() {
            Some(r) => format!("{}:{r}", e["name"].as_str().unwrap_or("")),
            None => e["name"].as_str().unwrap_or("").to_string(),
        })
        .collect()
}

fn last_position(replies: &[Result<Value, RpcError>]) -> Value {
    replies
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .rev()
        .find_map(|v| v.get("position").cloned())
        .expect("a position")
}

#[test]
fn without_a_position_the_journal_is_flux_s() {
    let mut h = H::start(1, Vec::new(), 1000);
    h.drain(1, "a");
    for payload in [Value::Null, json!({})] {
        let (to, r) = h.journal(payload);
        assert_eq!(names(&r)[..3], ["restart", "resource-define", "drain:a"]);
        assert!(r
            .iter()
            .all(|x| x.as_ref().unwrap().get("position").is_none()));
        assert_eq!(r.last().unwrap().as_ref().unwrap(), &json!({"events": []}));
        let out = h.drain(2, "b");
        let live = replies_to(&out, to);
        assert_eq!(names(&live), ["drain:b"]);
        assert!(live[0].as_ref().unwrap().get("position").is_none());
    }
    // A clean stop ends it as flux-core does: ENODATA.
    let (to, _) = h.journal(json!({}));
    let out = h.handle(Input::Shutdown);
    assert_eq!(replies_to(&out, to), vec![Err(RpcError::bare(ENODATA))]);
}

#[test]
fn positions_from_the_start_and_live() {
    let mut h = H::start(7, Vec::new(), 1000);
    h.drain(1, "a");
    let (to, r) = h.journal(json!({"position": null}));
    assert_eq!(names(&r), ["restart", "resource-define", "drain:a"]);
    for x in &r {
        let p = &x.as_ref().unwrap()["position"];
        assert_eq!(p["run"], json!(format!("{:016x}", 7)));
    }
    // The sentinel stands at the newest event.
    let seqs: Vec<u64> = r
        .iter()
        .map(|x| x.as_ref().unwrap()["position"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 3]);
    // log: restart before any persisted event, then resource-define, drain.
    let logs: Vec<u64> = r
        .iter()
        .map(|x| x.as_ref().unwrap()["position"]["log"].as_u64().unwrap())
        .collect();
    assert_eq!(logs, [0, 1, 2, 2]);
    let out = h.drain(2, "b");
    let live = replies_to(&out, to);
    assert_eq!(live[0].as_ref().unwrap()["position"]["seq"], json!(4));
    assert_eq!(live[0].as_ref().unwrap()["position"]["log"], json!(3));
    // A reader that can resume is told to at a clean stop.
    let out = h.handle(Input::Shutdown);
    let end = replies_to(&out, to);
    assert_eq!(end.len(), 1);
    assert_eq!(end[0].as_ref().unwrap_err().errnum, EAGAIN);
}

/// Run 1, whose reader saw `drain:a` and then missed `drain:b` and
/// `drain:c`; the reader's position.
fn reader_missed_b_and_c() -> (H, Value) {
    let mut h = H::start(1, Vec::new(), 1000);
    h.drain(0, "a");
    let (_, r) = h.journal(json!({"position": null}));
    let pos = last_position(&r);
    h.drain(1, "b");
    h.drain(2, "c");
    (h, pos)
}

#[test]
fn resume_on_the_same_run_sends_only_what_was_missed() {
    // The reader's connection dropped; events happened meanwhile.
    let (mut h, pos) = reader_missed_b_and_c();
    let (to, r) = h.journal(json!({ "position": pos }));
    assert_eq!(names(&r), ["drain:b", "drain:c"]);
    assert_eq!(r.last().unwrap().as_ref().unwrap()["events"], json!([]));
    // Resumed at the end: only the sentinel, then live events.
    let pos = last_position(&r);
    let (_, r2) = h.journal(json!({ "position": pos }));
    assert_eq!(names(&r2), Vec::<String>::new());
    assert_eq!(r2.len(), 1);
    let out = h.drain(3, "d");
    assert_eq!(names(&replies_to(&out, to)), ["drain:d"]);
}

#[test]
fn resume_on_another_run_continues_from_the_stored_log() {
    // b and c were acknowledged (persisted) but never seen by the
    // reader: the daemon died before its journal reply went out.
    let (mut a, pos) = reader_missed_b_and_c();
    // The restart: a new run on the stored log.
    let mut b = H::start(2, a.log.clone(), 1000);
    let (_, r) = b.journal(json!({ "position": pos }));
    assert_eq!(
        names(&r),
        ["drain:b", "drain:c", "restart", "resource-define"],
        "no duplicate of drain:a, no gap"
    );
    assert!(r.iter().any(|x| x.as_ref().unwrap().get("R").is_some()));
    assert_eq!(
        r[0].as_ref().unwrap()["position"]["run"],
        json!(format!("{:016x}", 2))
    );
    // A reader positioned on run 1's last persisted event gets run 2 only.
    let (_, full) = a.journal(json!({"position": null}));
    let end_a = last_position(&full);
    let (_, r) = b.journal(json!({ "position": end_a }));
    assert_eq!(names(&r), ["restart", "resource-define"]);
    // A reader that had seen nothing persisted gets everything stored.
    let (_, r) = b.journal(json!({"position": {"run": "ff", "seq": 1, "log": 0}}));
    assert_eq!(
        names(&r),
        [
            "drain:a",
            "drain:b",
            "drain:c",
            "restart",
            "resource-define"
        ]
    );
}

#[test]
fn resume_finds_its_event_after_history_truncation_or_fails_clearly() {
    let mut a = H::start(1, Vec::new(), 1000);
    a.drain(0, "a");
    a.drain(1, "b");
    let (_, r) = a.journal(json!({"position": null}));
    let pos = last_position(&r); // after drain:b (log 3)
    a.drain(2, "c");
    // History dropped the first two events: drain:b is now log event 1.
    let kept: Vec<Event> = a.log[2..].to_vec();
    assert_eq!(kept[0].name, "drain");
    let mut b = H::start(2, kept, 1000);
    let (_, r) = b.journal(json!({ "position": pos }));
    assert_eq!(names(&r), ["drain:c", "restart", "resource-define"]);
    // History dropped drain:b itself: the reader cannot know what it
    // missed.
    let mut c = H::start(3, a.log[3..].to_vec(), 1000);
    let (_, r) = c.journal(json!({ "position": pos }));
    assert_eq!(r.len(), 1);
    let e = r[0].as_ref().unwrap_err();
    assert_eq!(e.errnum, ERANGE);
    assert!(
        e.errstr
            .as_deref()
            .unwrap_or("")
            .contains("truncated by history"),
        "{e:?}"
    );
    assert_eq!(c.svc.followers(), 0);
}

#[test]
fn journal_max_truncation_refuses_a_reader_that_missed_dropped_events() {
    let mut h = H::start(1, Vec::new(), 5);
    let (_, r) = h.journal(json!({"position": null}));
    let early = last_position(&r); // seq 2
    for i in 0..6 {
        h.drain(i % 4, &format!("d{i}"));
    }
    // seq 3..8 are the drains; 5 entries kept: truncate + 4 newest.
    let (_, r) = h.journal(json!({ "position": early }));
    assert_eq!(r[0].as_ref().unwrap_err().errnum, ERANGE);
    let (_, full) = h.journal(json!({"position": null}));
    assert_eq!(
        names(&full),
        ["truncate", "drain:d2", "drain:d3", "drain:d4", "drain:d5"]
    );
    // The truncate summary stands at the newest event it replaced (seq 4):
    // a reader there resumes with the events after it; one before it
    // missed an event that is gone.
    let at = |seq: u64| json!({"position": {"run": "1", "seq": seq, "log": 0}});
    let (_, r) = h.journal(at(4));
    assert_eq!(names(&r), ["drain:d2", "drain:d3", "drain:d4", "drain:d5"]);
    let (_, r) = h.journal(at(3));
    assert_eq!(r[0].as_ref().unwrap_err().errnum, ERANGE);
    let (_, r) = h.journal(at(6));
    assert_eq!(names(&r), ["drain:d4", "drain:d5"]);
}

#[test]
fn bad_positions_are_refused() {
    let mut h = H::start(1, Vec::new(), 100);
    for bad in [
        json!({"position": 3}),
        json!({"position": {"run": "zz", "seq": 1, "log": 0}}),
        json!({"position": {"run": "1", "log": 0}}),
        json!({"position": {"run": "1", "seq": 1, "log": 0, "event": 5}}),
    ] {
        let (_, r) = h.journal(bad.clone());
        assert_eq!(r.len(), 1, "{bad}");
        assert_eq!(r[0].as_ref().unwrap_err().errnum, EPROTO, "{bad}");
    }
    let (_, r) = h.journal(json!({"position": {"run": "1", "seq": 99, "log": 0}}));
    assert_eq!(r[0].as_ref().unwrap_err().errnum, EINVAL);
    assert_eq!(h.svc.followers(), 0);
}
