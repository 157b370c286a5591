//! The core's two clocks: timers on the monotonic clock, timestamps from
//! the wall clock made non-decreasing.  A simulated clock steps the wall
//! clock back and forward while monotonic time runs on.

use eventlog::Event;
mod common;

use common::*;
use roster_core::errno::*;
use roster_core::*;
use rpc::{ReplyTo, Role};
use serde_json::{json, Value};
use std::time::Duration;

const HOUR: f64 = 3600.0;
const DAY: f64 = 86400.0;
const WALL0: f64 = 1_700_000_000.0;

fn inventory() -> Inventory {
    inventory_of("0-4", &["fake[0-4]"])
}

/// A service and a simulated clock: `mono` seconds since start, the wall
/// clock `wall` (stepped at will).
struct H {
    svc: Service,
    mono: f64,
    wall: f64,
    next_conn: u64,
    next_tag: u32,
    log: Vec<Output>,
}

fn start_with(init: Init) -> H {
    let (svc, out) = start_service(init);
    H {
        svc,
        mono: 0.0,
        wall: WALL0,
        next_conn: 1,
        next_tag: 1,
        log: out,
    }
}

fn start(torpid: f64, offline: f64, batch: f64) -> H {
    start_with(Init {
        now: WALL0,
        mono: Duration::ZERO,
        inventory: Some(inventory()),
        settings: Settings {
            torpid_max: torpid,
            offline_timeout: offline,
            liveness_batch: batch,
            ..Default::default()
        },
        ..Default::default()
    })
}

impl H {
    fn now(&self) -> Now {
        Now::new(Duration::from_secs_f64(self.mono), self.wall)
    }

    fn input(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.svc.handle(self.now(), input, &mut out);
        self.log.extend(out.iter().cloned());
        out
    }

    fn request(&mut self, conn: u64, topic: &str, payload: Value, streaming: bool) -> ReplyTo {
        let tag = self.next_tag;
        self.next_tag += 1;
        let req = request(conn, tag, topic, payload, streaming, Role::Owner);
        let to = req.reply_to();
        self.input(Input::Request(req));
        self.input(Input::Tick);
        to
    }

    fn join(&mut self, host: &str) -> (u64, ReplyTo) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let to = self.request(conn, "resource.agent", json!({"hostname": host}), true);
        assert!(replies_to(&self.log, to)[0].is_ok(), "{host} accepted");
        (conn, to)
    }

    fn drain(&mut self, targets: &str, reason: &str) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let to = self.request(
            conn,
            "resource.drain",
            json!({"targets": targets, "reason": reason, "mode": "force-overwrite"}),
            false,
        );
        assert_eq!(replies_to(&self.log, to), vec![Ok(Value::Null)], "drain");
    }

    fn names(&self) -> Vec<String> {
        self.svc
            .journal()
            .events()
            .map(|e| e.name.clone())
            .collect()
    }
}

fn non_decreasing(ts: &[f64]) -> bool {
    ts.windows(2).all(|w| w[0] <= w[1])
}

#[test]
fn wall_clock_steps_neither_fire_timers_nor_reorder_events() {
    let mut h = start(30.0, 60.0, 0.0);
    let agents: Vec<_> = ["fake0", "fake1", "fake2", "fake3"]
        .iter()
        .map(|host| h.join(host))
        .collect();
    assert_eq!(h.svc.online().encode(), "0-3");
    // 200 s of heartbeats every 5 s; the wall clock steps back an hour at
    // 40 s and forward a day at 120 s; a drain every 20 s.
    for step in 1..=40 {
        h.mono += 5.0;
        h.wall += 5.0;
        if step == 8 {
            h.wall -= HOUR;
        }
        if step == 24 {
            h.wall += DAY;
        }
        for (conn, _) in &agents {
            let to = h.request(*conn, "resource.agent-heartbeat", json!({}), false);
            assert_eq!(replies_to(&h.log, to), vec![Ok(Value::Null)]);
        }
        if step % 4 == 0 {
            h.drain("4", &format!("step {step}"));
        }
        h.input(Input::Tick);
        assert_eq!(h.svc.online().encode(), "0-3", "step {step}");
        assert!(h.svc.torpid().is_empty(), "step {step}");
    }
    let names = h.names();
    assert!(
        !names.iter().any(|n| n == "torpid" || n == "offline"),
        "{names:?}"
    );
    // Every agent stream is still open.
    for (_, stream) in &agents {
        assert!(replies_to(&h.log, *stream).iter().all(Result::is_ok));
    }
    // Ten drains, recorded and persisted with non-decreasing timestamps;
    // those after the step back carry the last stamp until the wall
    // clock catches up, those after the step forward the new time.
    let drains: Vec<Event> = persisted(&h.log)
        .into_iter()
        .filter(|e| e.name == "drain")
        .collect();
    assert_eq!(drains.len(), 10);
    let ts: Vec<f64> = drains.iter().map(|e| e.timestamp).collect();
    assert!(non_decreasing(&ts), "{ts:?}");
    assert_eq!(ts[1], WALL0 + 35.0, "stuck at the last stamp: {ts:?}");
    assert_eq!(ts[5], WALL0 + 120.0 - HOUR + DAY, "{ts:?}");
    let all: Vec<f64> = h.svc.journal().events().map(|e| e.timestamp).collect();
    assert!(non_decreasing(&all), "{all:?}");
    assert_eq!(
        h.svc.drain_table().get(4).map(|d| d.reason.clone()),
        Some(Some("step 40".into()))
    );
    assert_eq!(h.svc.drain_table().get(4).map(|d| d.timestamp), Some(ts[9]));
}

#[test]
fn heartbeat_lateness_is_detected_on_the_monotonic_clock() {
    let mut h = start(30.0, 60.0, 0.0);
    let (conn, stream) = h.join("fake0");
    let (conn1, _) = h.join("fake1");
    // The wall clock steps back a day and stays there: the monotonic clock
    // still says fake0 has been silent for 31 s (fake1 keeps beating).
    h.wall -= DAY;
    for _ in 0..6 {
        h.mono += 5.5;
        h.request(conn1, "resource.agent-heartbeat", json!({}), false);
    }
    h.input(Input::Tick);
    assert_eq!(h.svc.torpid().encode(), "0");
    assert_eq!(h.svc.online().encode(), "0-1");
    // 61 s of silence: offline, its stream ended with ETIMEDOUT.
    for _ in 0..6 {
        h.mono += 5.0;
        h.request(conn1, "resource.agent-heartbeat", json!({}), false);
    }
    h.input(Input::Tick);
    assert_eq!(h.svc.online().encode(), "1");
    let end = replies_to(&h.log, stream).pop().unwrap().unwrap_err();
    assert_eq!(end.errnum, ETIMEDOUT);
    // The heartbeat of the expired agent is refused (it must say hello).
    let to = h.request(conn, "resource.agent-heartbeat", json!({}), false);
    assert_eq!(
        replies_to(&h.log, to)[0].as_ref().unwrap_err().errnum,
        EPROTO
    );
    let names = h.names();
    assert!(names.contains(&"torpid".to_string()), "{names:?}");
    assert!(names.contains(&"offline".to_string()), "{names:?}");
    let all: Vec<f64> = h.svc.journal().events().map(|e| e.timestamp).collect();
    assert!(non_decreasing(&all), "{all:?}");
}

#[test]
fn next_deadline_follows_the_timers_and_the_liveness_batch() {
    let mut h = start(30.0, 60.0, 0.0);
    assert_eq!(h.svc.next_deadline(), None, "no agents: nothing timed");
    h.mono = 100.0;
    let (conn, _) = h.join("fake0");
    assert_eq!(h.svc.next_deadline(), Some(Duration::from_secs(130)));
    h.mono = 110.0;
    h.request(conn, "resource.agent-heartbeat", json!({}), false);
    // The deadline is a lower bound: a tick at 130 s recomputes it.
    h.mono = 130.5;
    h.input(Input::Tick);
    assert!(h.svc.torpid().is_empty());
    assert_eq!(h.svc.next_deadline(), Some(Duration::from_secs(140)));
    h.mono = 140.5;
    h.input(Input::Tick);
    assert_eq!(h.svc.torpid().encode(), "0");
    // Torpid: only the offline timer is left.
    assert_eq!(h.svc.next_deadline(), Some(Duration::from_secs(170)));
    // A wall-clock step changes nothing.
    h.wall += DAY;
    h.input(Input::Tick);
    assert_eq!(h.svc.next_deadline(), Some(Duration::from_secs(170)));
    h.mono = 170.5;
    h.input(Input::Tick);
    assert!(h.svc.online().is_empty());
    assert_eq!(h.svc.next_deadline(), None);

    // With a batching interval, waiting transitions make a deadline.
    let mut h = start(0.0, 0.0, 1.0);
    h.mono = 10.0;
    h.join("fake0"); // posted at once (nothing posted before)
    assert_eq!(h.svc.online().encode(), "0");
    assert_eq!(h.svc.next_deadline(), None);
    h.mono = 10.5;
    h.join("fake1"); // within the interval: waits
    assert_eq!(h.svc.online().encode(), "0");
    assert_eq!(h.svc.next_deadline(), Some(Duration::from_secs(11)));
    h.mono = 11.0;
    h.input(Input::Tick);
    assert_eq!(h.svc.online().encode(), "0-1");
    assert_eq!(h.svc.next_deadline(), None);
}

#[test]
fn timestamps_after_a_restart_do_not_go_before_the_stored_log() {
    // The last stop happened with the clock a day ahead; the restart is
    // at the true time.
    let ahead = WALL0 + DAY;
    let stored = vec![Event::new(
        ahead,
        "drain",
        Some(
            json!({"idset": "1", "nodelist": "fake1", "reason": "r", "overwrite": 0})
                .as_object()
                .unwrap()
                .clone(),
        ),
    )
    .unwrap()];
    let mut h = start_with(Init {
        now: WALL0,
        inventory: Some(inventory()),
        stored_events: stored,
        checkpoint: Some(json!({"timestamp": ahead + 1.0, "drain_state": {}})),
        replay_from: Some(0),
        ..Default::default()
    });
    assert_eq!(h.svc.drained().encode(), "1");
    h.mono = 1.0;
    h.drain("2", "after restart");
    let ts: Vec<f64> = persisted(&h.log).iter().map(|e| e.timestamp).collect();
    assert!(ts.iter().all(|t| *t >= ahead + 1.0), "{ts:?}");
    let all: Vec<f64> = h.svc.journal().events().map(|e| e.timestamp).collect();
    assert!(non_decreasing(&all), "{all:?}");
}
