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
use rpc::events;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::OnceLock;

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

/// The compact JSON text of an event in "object format" (RFC 44 journal
/// responses): the same bytes as `serde_json::to_string` of
/// [`Event::to_value`], written without building that value.  `None`
/// exactly when `to_value` fails (a timestamp JSON cannot carry).
pub fn object_json(ev: &Event) -> Option<String> {
    if !ev.timestamp.is_finite() {
        return None;
    }
    serde_json::to_string(&ObjectForm(ev)).ok()
}

/// Roster's context key naming who asked for a `drain` or `undrain`
/// (`alice (uid 1000)`, `cert:admin1`, `token:admin`).  Flux prints every
/// context key, so journal readers get it only when they ask for it
/// (`requester` in the request): flux clients see what flux-core sends.
pub const REQUESTER: &str = "requester";

/// [`object_json`] of the event without the [`REQUESTER`] key; `None` when
/// the event has no such key (its usual text is the flux form).
pub fn flux_json(ev: &Event) -> Option<String> {
    if !ev.context.as_ref()?.contains_key(REQUESTER) {
        return None;
    }
    let mut plain = ev.clone();
    if let Some(c) = plain.context.as_mut() {
        c.retain(|k, _| k != REQUESTER);
    }
    object_json(&plain)
}

/// Serialises like the `Value` [`Event::to_value`] builds: `timestamp`,
/// `name`, then `context` when present.
struct ObjectForm<'a>(&'a Event);

impl Serialize for ObjectForm<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ev = self.0;
        let mut m = s.serialize_map(Some(2 + usize::from(ev.context.is_some())))?;
        m.serialize_entry("timestamp", &ev.timestamp)?;
        m.serialize_entry("name", &ev.name)?;
        if let Some(ctx) = &ev.context {
            m.serialize_entry("context", ctx)?;
        }
        m.end()
    }
}

/// Where an entry stands in the persistent log: `log` persisted events
/// (this one included when it is persisted) come at or before it, the
/// last of them with fingerprint `fp` ([`fingerprint`]; 0 when `log` is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogMark {
    pub log: u64,
    pub fp: u64,
}

/// A journal entry's place: its sequence number in this run's journal
/// (1 for the first event ever pushed) and its [`LogMark`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Place {
    pub seq: u64,
    pub mark: LogMark,
}

/// A persisted event's fingerprint: FNV-1a (64 bits) of its name and the
/// bits of its timestamp.  Cheap (no serialisation), and with the log
/// index it names one event of the log (two events with the same name and
/// the same timestamp next to each other are the only ambiguity).
pub fn fingerprint(ev: &Event) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ev
        .name
        .as_bytes()
        .iter()
        .chain([0u8].iter())
        .chain(ev.timestamp.to_bits().to_le_bytes().iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// An event and, once asked for, its [`object_json`] (the journal is
/// append-only, so an event is serialised at most once however many
/// clients read the backlog).
#[derive(Debug, Clone)]
struct Entry {
    event: Event,
    json: OnceLock<Option<Box<str>>>,
    place: Place,
}

impl Entry {
    fn new(event: Event, place: Place) -> Entry {
        Entry {
            event,
            json: OnceLock::new(),
            place,
        }
    }
}

/// Bounded event journal.
#[derive(Debug, Clone)]
pub struct Journal {
    events: VecDeque<Entry>,
    max: usize,
    /// From the newest dropped (or previously summarised) `restart`.
    dropped_restart: Option<(String, String)>,
    /// From the newest dropped (or previously summarised) `resource-define`.
    dropped_method: Option<String>,
    /// Sequence number of the last event pushed (0: none yet).
    last_seq: u64,
    /// Sequence number of the newest event dropped by truncation (0: none);
    /// the `truncate` summary carries it.
    dropped_through: u64,
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
            last_seq: 0,
            dropped_through: 0,
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
        self.events.iter().map(|e| &e.event)
    }

    /// The events, oldest first, each with its [`Place`] and its
    /// [`object_json`].
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&Event, Place, Option<&str>)> + '_ {
        self.events.iter().map(|e| {
            let json = e
                .json
                .get_or_init(|| object_json(&e.event).map(String::into_boxed_str));
            (&e.event, e.place, json.as_deref())
        })
    }

    /// The sequence number of the last event pushed (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The sequence number of the newest event dropped by truncation (0:
    /// nothing dropped): a reader that has not seen it cannot resume.
    pub fn dropped_through(&self) -> u64 {
        self.dropped_through
    }

    /// The newest event, if any.
    pub fn newest(&self) -> Option<&Event> {
        self.events.back().map(|e| &e.event)
    }

    /// The place of the newest event (the default place when empty).
    pub fn last_place(&self) -> Place {
        self.events.back().map(|e| e.place).unwrap_or_default()
    }

    /// Append an event, truncating if the limit is exceeded.
    pub fn push(&mut self, event: Event, state: impl FnOnce() -> TruncateState) {
        let mark = self.last_place().mark;
        self.push_marked(event, mark, state);
    }

    /// Append an event at `mark` in the persistent log; returns its place.
    pub fn push_marked(
        &mut self,
        event: Event,
        mark: LogMark,
        state: impl FnOnce() -> TruncateState,
    ) -> Place {
        self.last_seq += 1;
        let place = Place {
            seq: self.last_seq,
            mark,
        };
        self.events.push_back(Entry::new(event, place));
        if self.events.len() > self.max {
            self.truncate(state());
        }
        place
    }

    fn truncate(&mut self, state: TruncateState) {
        let mut last_ts = None;
        let mut last_place = Place::default();
        while self.events.len() > self.max - 1 {
            let Some(Entry {
                event: ev, place, ..
            }) = self.events.pop_front()
            else {
                break;
            };
            last_ts = Some(ev.timestamp);
            last_place = place;
            let c = ev.context.as_ref();
            match ev.name.as_str() {
                "restart" => {
                    let r: events::Restart = events::read(c).unwrap_or_default();
                    let (ranks, nodelist) = (r.ranks, r.nodelist);
                    self.dropped_restart =
                        Some((ranks.unwrap_or_default(), nodelist.unwrap_or_default()));
                }
                "resource-define" => {
                    let d: events::ResourceDefine = events::read(c).unwrap_or_default();
                    self.dropped_method = d.method;
                }
                _ => {}
            }
        }
        let (ranks, nodelist) = self.dropped_restart.clone().unzip();
        let ctx = events::context(&events::Truncate {
            online: state.online,
            torpid: state.torpid,
            drain: state.drain,
            ranks,
            nodelist,
            r: self.dropped_method.as_ref().and(state.r),
            discovery_method: self.dropped_method.clone(),
        });
        let ts = last_ts.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(0.1);
        // The summary stands where the newest dropped event stood: a reader
        // resuming after it needs nothing that was dropped.
        self.dropped_through = self.dropped_through.max(last_place.seq);
        self.events.push_front(Entry::new(
            Event {
                timestamp: ts,
                name: "truncate".into(),
                context: Some(ctx),
            },
            last_place,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json::Map;

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
    fn object_json_is_the_serialised_object_format() {
        let mut big = Map::new();
        big.insert("z".into(), json!("\u{e9}\"\n"));
        big.insert("a".into(), json!([1, 2.5, -0.0, null, {"k": 1e300}]));
        for ev in [
            ev(1.0, "restart", json!({"ranks": "0-3", "online": ""})),
            ev(
                1763900000.001,
                "drain",
                json!({"idset": "1", "overwrite": 0}),
            ),
            Event::new(0.1, "x", None).unwrap(),
            Event::new(2.5e-7, "y", Some(big)).unwrap(),
            Event {
                timestamp: -3.0,
                name: String::new(),
                context: Some(Map::new()),
            },
        ] {
            let want = serde_json::to_string(&ev.to_value().unwrap()).unwrap();
            assert_eq!(object_json(&ev).as_deref(), Some(want.as_str()));
        }
        for ts in [f64::NAN, f64::INFINITY] {
            let ev = Event {
                timestamp: ts,
                name: "x".into(),
                context: None,
            };
            assert!(ev.to_value().is_err());
            assert_eq!(object_json(&ev), None);
        }
        let mut j = Journal::new(3);
        for i in 0..5 {
            j.push(
                ev(1.0 + f64::from(i), "online", json!({"idset": "0"})),
                state,
            );
        }
        for (e, _, text) in j.entries() {
            let want = serde_json::to_string(&e.to_value().unwrap()).unwrap();
            assert_eq!(text, Some(want.as_str()));
        }
    }
}
