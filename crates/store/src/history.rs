//! `resource.eventlog` history truncation at start (flux-core's
//! `truncate.c`), as pure functions.

use eventlog::Event;

/// The timestamp before which `resource.eventlog` events are dropped at
/// start, or `None` when the log must not be truncated.
///
/// * `now`: the current time (seconds since the epoch).
/// * `history`: the configured `history` in seconds; `None` (or an
///   infinite value) is `"inf"`, which never truncates.
/// * `checkpoint_ts`: the drain checkpoint's timestamp, 0 without a
///   checkpoint.
///
/// The cutoff is the checkpoint timestamp, pulled back to `now - history`
/// when `history` is non-zero and `now - history` lies strictly between 0
/// and the checkpoint timestamp (flux-core compares with `>` and `<`), so
/// that at least `history` seconds are kept but nothing newer than the
/// checkpoint is ever dropped.  Without a checkpoint the cutoff is 0 and
/// nothing is dropped.
pub fn history_cutoff(now: f64, history: Option<f64>, checkpoint_ts: f64) -> Option<f64> {
    let history = history.filter(|h| !h.is_infinite())?;
    let mut cutoff = checkpoint_ts;
    if history != 0.0 {
        let keep_from = now - history;
        if keep_from > 0.0 && keep_from < checkpoint_ts {
            cutoff = keep_from;
        }
    }
    Some(cutoff)
}

/// The events to keep: those whose timestamp is not before `cutoff`, in
/// order.  (An event exactly at the cutoff is kept.)
pub fn truncate_history(events: Vec<Event>, cutoff: f64) -> Vec<Event> {
    let mut events = events;
    // flux-core drops `timestamp < cutoff`; a NaN timestamp compares as
    // unordered and is kept.
    events.retain(|e| e.timestamp.partial_cmp(&cutoff) != Some(std::cmp::Ordering::Less));
    events
}

/// The timestamp of a drain checkpoint (`{"timestamp": f, ...}`), 0 when
/// there is no checkpoint or it has no numeric timestamp.
pub fn checkpoint_timestamp(checkpoint: Option<&serde_json::Value>) -> f64 {
    checkpoint
        .and_then(|c| c.get("timestamp"))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: f64 = 86400.0;
    const NOW: f64 = 1_760_000_000.0;

    fn ev(ts: f64, name: &str) -> Event {
        Event {
            timestamp: ts,
            name: name.to_string(),
            context: None,
        }
    }

    fn names(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn inf_never_truncates() {
        assert_eq!(history_cutoff(NOW, None, NOW - 10.0), None);
        assert_eq!(history_cutoff(NOW, Some(f64::INFINITY), NOW - 10.0), None);
        assert_eq!(history_cutoff(NOW, None, 0.0), None);
    }

    #[test]
    fn no_checkpoint_drops_nothing() {
        // t2319: the first load after an upgrade (no checkpoint) keeps all.
        for h in [0.0, 90.0 * DAY, 1.0] {
            assert_eq!(history_cutoff(NOW, Some(h), 0.0), Some(0.0));
        }
        let events = vec![ev(1000.0, "drain"), ev(NOW - 1.0, "undrain")];
        assert_eq!(truncate_history(events.clone(), 0.0), events);
    }

    #[test]
    fn history_zero_truncates_to_the_checkpoint() {
        // t2319: history=0 → nothing older than the checkpoint survives.
        let ckpt = NOW - 100.0;
        let cutoff = history_cutoff(NOW, Some(0.0), ckpt);
        assert_eq!(cutoff, Some(ckpt));
        let events = vec![
            ev(1000.0, "drain"),
            ev(ckpt - 0.5, "undrain"),
            ev(ckpt, "resource-define"),
            ev(ckpt + 1.0, "drain"),
        ];
        let kept = truncate_history(events, ckpt);
        assert_eq!(names(&kept), ["resource-define", "drain"]);
    }

    #[test]
    fn history_keeps_recent_events_older_than_the_checkpoint() {
        // t2319: history="100d", events at t=1000 and at now; the
        // checkpoint was written at the previous unload (now - 1).
        let ckpt = NOW - 1.0;
        let cutoff = history_cutoff(NOW, Some(100.0 * DAY), ckpt);
        assert_eq!(cutoff, Some(NOW - 100.0 * DAY));
        let events = vec![ev(1000.0, "old"), ev(NOW - 5.0, "recent")];
        let kept = truncate_history(events, cutoff.unwrap_or(0.0));
        assert_eq!(names(&kept), ["recent"]);
        // An event 99 days old is kept, one 101 days old is not.
        let events = vec![ev(NOW - 101.0 * DAY, "a"), ev(NOW - 99.0 * DAY, "b")];
        assert_eq!(names(&truncate_history(events, NOW - 100.0 * DAY)), ["b"]);
    }

    #[test]
    fn never_drops_events_newer_than_the_checkpoint() {
        // The checkpoint is older than now - history: cutoff stays at the
        // checkpoint.
        let ckpt = NOW - 200.0 * DAY;
        assert_eq!(history_cutoff(NOW, Some(90.0 * DAY), ckpt), Some(ckpt));
        // now - history before the epoch: the checkpoint again.
        assert_eq!(history_cutoff(1000.0, Some(90.0 * DAY), 500.0), Some(500.0));
    }

    #[test]
    fn boundaries_are_strict_as_upstream() {
        // now - history == 0: flux-core requires > 0, so the checkpoint.
        assert_eq!(history_cutoff(100.0, Some(100.0), 50.0), Some(50.0));
        // now - history == checkpoint: either way the checkpoint.
        assert_eq!(history_cutoff(100.0, Some(50.0), 50.0), Some(50.0));
        // Just inside.
        assert_eq!(history_cutoff(100.0, Some(51.0), 50.0), Some(49.0));
        assert_eq!(history_cutoff(100.0, Some(99.0), 50.0), Some(1.0));
    }

    #[test]
    fn checkpoint_timestamps() {
        assert_eq!(checkpoint_timestamp(None), 0.0);
        let c = json!({"timestamp": 1234.0, "drain_state": {}});
        assert_eq!(checkpoint_timestamp(Some(&c)), 1234.0);
        let c = json!({"timestamp": 99, "drain_state": {}});
        assert_eq!(checkpoint_timestamp(Some(&c)), 99.0);
        assert_eq!(checkpoint_timestamp(Some(&json!({"drain_state": {}}))), 0.0);
        assert_eq!(checkpoint_timestamp(Some(&json!([]))), 0.0);
    }

    #[test]
    fn truncation_keeps_order_and_nan() {
        let events = vec![
            ev(5.0, "a"),
            ev(1.0, "b"),
            ev(f64::NAN, "c"),
            ev(7.0, "d"),
            ev(3.0, "e"),
        ];
        assert_eq!(names(&truncate_history(events, 4.0)), ["a", "c", "d"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        #[test]
        fn cutoff_never_exceeds_the_checkpoint(
            now in 0.0f64..2e9, history in 0.0f64..1e9, ckpt in 0.0f64..2e9,
        ) {
            let c = history_cutoff(now, Some(history), ckpt);
            proptest::prop_assert!(c.is_some_and(|c| c <= ckpt && c >= 0.0));
            // And at least `history` seconds are kept when the checkpoint
            // allows it.
            if let Some(c) = c {
                if history > 0.0 && now - history > 0.0 {
                    proptest::prop_assert!(c <= now - history || c == ckpt);
                }
            }
        }

        #[test]
        fn truncation_is_a_filter(ts in proptest::collection::vec(0.0f64..100.0, 0..30), cutoff in 0.0f64..100.0) {
            let events: Vec<Event> = ts.iter().map(|&t| ev(t, "x")).collect();
            let kept = truncate_history(events, cutoff);
            let want: Vec<f64> = ts.iter().copied().filter(|&t| t >= cutoff).collect();
            let got: Vec<f64> = kept.iter().map(|e| e.timestamp).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
