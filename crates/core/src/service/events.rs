//! Events: recording them (persisted or in-memory, always journaled) and
//! publishing them to the subscribers (acquirers, then journal followers).

use super::*;
use crate::journal::{self, LogMark, Place};
use eventlog::Event;

/// A journal response, `{"events":[...]}` plus `"R"` when given (and
/// `"position"` for a reader that asked for positions), from serialised
/// events ([`journal::object_json`]) and R: the bytes `serde_json` writes
/// for the same object built as a value.
pub(super) fn events_payload(events: &[&str], r: Option<&str>, position: Option<&str>) -> Payload {
    let len = events.iter().map(|e| e.len() + 1).sum::<usize>()
        + r.map_or(0, |r| r.len() + 5)
        + position.map_or(0, |p| p.len() + 12);
    let mut s = String::with_capacity(len + 16);
    s.push_str("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(e);
    }
    s.push(']');
    if let Some(r) = r {
        s.push_str(",\"R\":");
        s.push_str(r);
    }
    if let Some(p) = position {
        s.push_str(",\"position\":");
        s.push_str(p);
    }
    s.push('}');
    Payload::json(s)
}

/// How [`Service::post`] keeps an event: every event is journaled; a
/// persisted one is also written to the log, and an acknowledged one
/// answers the request that caused it once durable (by the output order).
#[derive(Clone, Copy)]
pub(super) enum Keep {
    Journal,
    Persist,
    Ack(ReplyTo),
}

/// R as compact JSON text.
pub(super) fn r_text(inv: &Inventory) -> String {
    inv.json.to_string()
}

impl Service {
    pub(super) fn truncate_state(&self) -> TruncateState {
        self.state.truncate_state()
    }

    /// Append to the journal at `mark` in the persistent log.
    pub(super) fn journal_push(&mut self, ev: Event, mark: LogMark) -> Place {
        // The truncate summary needs the current state; computed lazily.
        let state = &self.state;
        self.journal
            .push_marked(ev, mark, || state.truncate_state())
    }

    /// Create an event: persist it if asked, append it to the journal,
    /// answer the request it acknowledges, then [`Service::publish`] it.
    pub(super) fn post(
        &mut self,
        now: f64,
        name: &str,
        c: Map<String, Value>,
        keep: Keep,
        out: &mut Vec<Output>,
    ) {
        // The caller changed the state this event records (even if the
        // event cannot be built).
        self.invalidate_caches();
        let recorded = match Event::new(now, name, Some(c)) {
            Ok(ev) => {
                let mark = if let Keep::Journal = keep {
                    self.log.mark()
                } else {
                    out.push(Output::Persist(ev.clone()));
                    self.log.persisted(&ev)
                };
                // Published from the journal's copy (no clone of its
                // context), unless a journal of one event replaces it
                // with its `truncate` summary at once.
                let own = (self.journal.max() < 2).then(|| ev.clone());
                let place = self.journal_push(ev, mark);
                Some((own, place))
            }
            Err(e) => {
                out.push(Output::Log {
                    level: Level::Error,
                    msg: format!("cannot post {name} event: {e}"),
                });
                None
            }
        };
        if let Keep::Ack(to) = keep {
            Self::reply(out, to, Ok(Value::Null.into()));
        }
        if let Some((own, place)) = recorded {
            self.publish(own.as_ref(), place, out);
        }
    }

    /// Tell the subscribers about an event (after the requester's reply):
    /// the acquirers first, then the journal followers.  The event is
    /// `own`, else the journal's newest (just pushed).
    fn publish(&mut self, own: Option<&Event>, place: Place, out: &mut Vec<Output>) {
        let Some(ev) = own.or_else(|| self.journal.newest()) else {
            return;
        };
        self.acquire.on_event(ev, &self.state.truth(), out);
        if self.followers.is_empty() {
            return;
        }
        // Serialised once; every follower's reply shares the text.
        let Some(v) = journal::object_json(ev) else {
            return;
        };
        let r = match &self.state.inventory {
            Some(inv) if ev.name == "resource-define" => Some(r_text(inv)),
            _ => None,
        };
        // Flux's form (without Roster's requester) when it differs.
        let flux = journal::flux_json(ev);
        let mut payloads: [[Option<Payload>; 2]; 2] = Default::default();
        for f in &self.followers {
            let text = match &flux {
                Some(plain) if !f.requester => plain,
                _ => &v,
            };
            let slot = &mut payloads[usize::from(f.positions)][usize::from(f.requester)];
            let payload = slot.get_or_insert_with(|| {
                let pos = f.positions.then(|| self.position_text(place));
                events_payload(&[text], r.as_deref(), pos.as_deref())
            });
            out.push(Output::Reply {
                to: f.to,
                reply: Ok(payload.clone()),
            });
        }
    }
}
