//! The in-memory resource journal (RFC 44): every event, persistent or not,
//! bounded by `journal-max`.
//!
//! When the journal grows past its limit, the oldest events are dropped until
//! `max - 1` remain and a `truncate` event is put first, so the journal then
//! holds exactly `max` events and begins with `truncate` (flux-core's rule,
//! checked by t2355). Unlike flux-core, whose `truncate` has no context, ours
//! carries the context RFC 44 specifies: the current `online`, `torpid` and
//! `drain` state, plus `ranks`/`nodelist` when a `restart` was dropped and
//! `discovery-method`/`R` when a `resource-define` was dropped.

use eventlog::Event;
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// The state summarised into a `truncate` event, supplied by the caller.
#[derive(Debug, Clone, Default)]
pub struct TruncateState {
    /// Currently online targets (idset string).
    pub online: String,
    /// Currently torpid targets (idset string).
    pub torpid: String,
    /// The drain object, as in `resource.status`.
    pub drain: Value,
    /// The current inventory R, attached when a `resource-define` was dropped.
    pub r: Option<Value>,
}

/// Bounded event journal.
#[derive(Debug, Clone)]
pub struct Journal {
    events: VecDeque<Event>,
    max: usize,
    /// From the newest dropped (or previously summarised) `restart`.
    dropped_restart: Option<(Value, Value)>,
    /// From the newest dropped (or previously summarised) `resource-define`.
    dropped_method: Option<Value>,
}

/// Default `journal-max` (flux-core's).
pub const DEFAULT_JOURNAL_MAX: usize = 100_000;

impl Journal {
    /// An empty journal holding at most `max` events (`max` is at least 1).
    pub fn new(max: usize) -> Self {
        Journal {
            events: VecDeque::new(),
            max: max.max(1),
            dropped_restart: None,
            dropped_method: None,
        }
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Number of events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events, oldest first.
    pub fn events(&self) -> impl ExactSizeIterator<Item = &Event> + '_ {
        self.events.iter()
    }

    /// Append an event, truncating if the limit is exceeded.
    pub fn push(&mut self, event: Event, state: impl FnOnce() -> TruncateState) {
        self.events.push_back(event);
        if self.events.len() > self.max {
            self.truncate(state());
        }
    }

    /// Change the limit (configuration reload), truncating if needed.
    pub fn set_max(&mut self, max: usize, state: impl FnOnce() -> TruncateState) {
        self.max = max.max(1);
        if self.events.len() > self.max {
            self.truncate(state());
        }
    }

    fn truncate(&mut self, state: TruncateState) {
        let mut last_ts = None;
        while self.events.len() > self.max - 1 {
            let Some(ev) = self.events.pop_front() else {
                break;
            };
            last_ts = Some(ev.timestamp);
            match ev.name.as_str() {
                "restart" => {
                    let ranks = ev
                        .get("ranks")
                        .cloned()
                        .unwrap_or(Value::String(String::new()));
                    let nodelist = ev
                        .get("nodelist")
                        .cloned()
                        .unwrap_or(Value::String(String::new()));
                    self.dropped_restart = Some((ranks, nodelist));
                }
                "resource-define" => {
                    self.dropped_method = ev.get("method").cloned();
                }
                _ => {}
            }
        }
        let mut ctx = Map::new();
        ctx.insert("online".into(), Value::String(state.online));
        ctx.insert("torpid".into(), Value::String(state.torpid));
        ctx.insert("drain".into(), state.drain);
        if let Some((ranks, nodelist)) = &self.dropped_restart {
            ctx.insert("ranks".into(), ranks.clone());
            ctx.insert("nodelist".into(), nodelist.clone());
        }
        if let Some(method) = &self.dropped_method {
            ctx.insert("discovery-method".into(), method.clone());
            if let Some(r) = state.r {
                ctx.insert("R".into(), r);
            }
        }
        let ts = last_ts.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(0.1);
        self.events.push_front(Event {
            timestamp: ts,
            name: "truncate".into(),
            context: Some(ctx),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(ts: f64, name: &str, ctx: Value) -> Event {
        Event::with_context(ts, name, ctx).unwrap()
    }

    fn state() -> TruncateState {
        TruncateState {
            online: "0-3".into(),
            torpid: "".into(),
            drain: json!({}),
            r: Some(json!({"version": 1})),
        }
    }

    #[test]
    fn truncation_invariant() {
        let mut j = Journal::new(5);
        j.push(
            ev(
                1.0,
                "restart",
                json!({"ranks": "0-3", "online": "", "nodelist": "n[0-3]"}),
            ),
            state,
        );
        j.push(
            ev(2.0, "resource-define", json!({"method": "configuration"})),
            state,
        );
        for i in 0..3 {
            j.push(
                ev(3.0 + f64::from(i), "online", json!({"idset": "0"})),
                state,
            );
        }
        assert_eq!(j.len(), 5);
        assert_eq!(j.events().next().unwrap().name, "restart");
        for i in 0..10 {
            j.push(
                ev(
                    10.0 + f64::from(i),
                    "drain",
                    json!({"idset": "1", "nodelist": "n1"}),
                ),
                state,
            );
            assert_eq!(j.len(), 5);
            let first = j.events().next().unwrap();
            assert_eq!(first.name, "truncate");
            // Only one truncate event, always first.
            assert_eq!(j.events().filter(|e| e.name == "truncate").count(), 1);
        }
        let first = j.events().next().unwrap();
        assert_eq!(first.timestamp, 15.0, "timestamp of the last dropped event");
        assert_eq!(first.get("ranks"), Some(&json!("0-3")));
        assert_eq!(first.get("nodelist"), Some(&json!("n[0-3]")));
        assert_eq!(first.get("discovery-method"), Some(&json!("configuration")));
        assert_eq!(first.get("R"), Some(&json!({"version": 1})));
        assert_eq!(first.get("online"), Some(&json!("0-3")));
    }

    #[test]
    fn set_max_truncates_immediately() {
        let mut j = Journal::new(100);
        for i in 0..10 {
            j.push(
                ev(1.0 + f64::from(i), "online", json!({"idset": "0"})),
                state,
            );
        }
        j.set_max(9, state);
        assert_eq!(j.len(), 9);
        assert_eq!(j.events().next().unwrap().name, "truncate");
        assert_eq!(j.events().next().unwrap().get("ranks"), None);
    }
}
