//! Read-only replies answered by the listeners themselves.
//!
//! The service loop handles requests one at a time on one thread.  Cheap
//! read-only topics whose reply the service keeps serialised
//! (`resource.status`, `resource.sched-status`) would otherwise queue
//! behind everything else the loop has to do, and each would cost two
//! thread hand-offs.  [`Snapshots`] holds the last reply the service
//! published for each such topic; a listener answers a request from it on
//! the spot, when:
//!
//! * the topic has a published reply (the service clears it whenever the
//!   state it shows changes, so an absent reply sends the request to the
//!   loop, which computes it afresh and publishes it again);
//! * the request does not carry the streaming flag (that is an EPROTO
//!   error, which the service gives);
//! * the caller's role grants the topic's need (otherwise the service
//!   gives the refusal);
//! * nothing else of the caller's is in flight on the same connection (a
//!   Flux client may pipeline a drain and a status: the status must see
//!   the drain, so it takes the loop, in order).
//!
//! Read-your-writes across requests holds because the service publishes
//! (or clears) every snapshot *before* it delivers a batch's replies: once
//! a client has the reply to its drain, every snapshot it can read is at
//! least as new as that drain.

use rpc::{Need, Payload, Request, Role};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Called for each request answered from a snapshot: its topic and how
/// long the answer took (for the service's metrics).
pub type Observer = Arc<dyn Fn(&'static str, Duration) + Send + Sync>;

struct Slot {
    topic: &'static str,
    need: Need,
    reply: RwLock<Option<Payload>>,
}

/// The published replies of the read-only topics (see the module docs).
pub struct Snapshots {
    slots: Vec<Slot>,
    observer: Option<Observer>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let topics: Vec<_> = self
            .slots
            .iter()
            .map(|s| {
                (
                    s.topic,
                    s.reply.read().map(|r| r.is_some()).unwrap_or(false),
                )
            })
            .collect();
        f.debug_struct("Snapshots")
            .field("topics", &topics)
            .finish_non_exhaustive()
    }
}

impl Snapshots {
    /// Slots for `topics` (each with the least role it needs), all empty.
    pub fn new(topics: &[(&'static str, Need)], observer: Option<Observer>) -> Arc<Snapshots> {
        Arc::new(Snapshots {
            slots: topics
                .iter()
                .map(|&(topic, need)| Slot {
                    topic,
                    need,
                    reply: RwLock::new(None),
                })
                .collect(),
            observer,
        })
    }

    /// The topics that have a slot.
    pub fn topics(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.slots.iter().map(|s| s.topic)
    }

    /// Set (or clear, with `None`) the reply of `topic`; a topic without a
    /// slot is ignored.
    pub fn publish(&self, topic: &str, reply: Option<Payload>) {
        if let Some(s) = self.slots.iter().find(|s| s.topic == topic) {
            match s.reply.write() {
                Ok(mut r) => *r = reply,
                Err(poisoned) => *poisoned.into_inner() = reply,
            }
        }
    }

    /// Clear every reply (the service stops, or stops answering).
    pub fn clear(&self) {
        for s in &self.slots {
            self.publish(s.topic, None);
        }
    }

    /// The reply for `req` if it may be answered from a snapshot (the
    /// caller has checked that nothing else of its connection is in
    /// flight).
    pub(crate) fn answer(&self, req: &Request) -> Option<(&'static str, Payload)> {
        self.answer_for(&req.topic, &req.role, req.streaming)
    }

    /// [`Snapshots::answer`] from the parts of a request that decide.
    pub(crate) fn answer_for(
        &self,
        topic: &str,
        role: &Role,
        streaming: bool,
    ) -> Option<(&'static str, Payload)> {
        if streaming {
            return None;
        }
        let s = self.slots.iter().find(|s| s.topic == topic)?;
        if !role.grants(s.need) {
            return None;
        }
        let reply = match s.reply.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }?;
        Some((s.topic, reply))
    }

    /// Tell the observer of one answer.
    pub(crate) fn answered(&self, topic: &'static str, took: Duration) {
        if let Some(o) = &self.observer {
            o(topic, took);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn req(topic: &str, role: Role, streaming: bool) -> Request {
        Request {
            conn: 1,
            matchtag: 1,
            topic: topic.into(),
            payload: Value::Null,
            streaming,
            role,
            userid: None,
            who: None,
        }
    }

    #[test]
    fn answers_only_published_topics_for_allowed_non_streaming_requests() {
        let s = Snapshots::new(
            &[
                ("resource.status", Need::Read),
                ("resource.other", Need::Admin),
            ],
            None,
        );
        let status = req("resource.status", Role::Guest, false);
        assert!(s.answer(&status).is_none(), "nothing published yet");
        s.publish("resource.status", Some(Payload::json("{\"a\":1}")));
        s.publish("resource.other", Some(Payload::json("{}")));
        s.publish("resource.unknown", Some(Payload::json("{}")));
        let (topic, p) = s.answer(&status).expect("published");
        assert_eq!(topic, "resource.status");
        assert!(matches!(p, Payload::Json(t) if &*t == "{\"a\":1}"));
        assert!(
            s.answer(&req("resource.status", Role::Guest, true))
                .is_none(),
            "the streaming flag is the service's EPROTO"
        );
        assert!(
            s.answer(&req("resource.other", Role::Guest, false))
                .is_none(),
            "a guest's refusal is the service's"
        );
        assert!(s
            .answer(&req("resource.other", Role::Owner, false))
            .is_some());
        assert!(s
            .answer(&req("resource.unknown", Role::Owner, false))
            .is_none());
        s.publish("resource.status", None);
        assert!(s.answer(&status).is_none(), "cleared");
        s.clear();
        assert!(s
            .answer(&req("resource.other", Role::Owner, false))
            .is_none());
    }

    #[test]
    fn the_observer_hears_each_answer() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let s = Snapshots::new(
            &[("resource.status", Need::Read)],
            Some(Arc::new(move |t, _| log.lock().unwrap().push(t))),
        );
        s.answered("resource.status", Duration::ZERO);
        assert_eq!(*seen.lock().unwrap(), ["resource.status"]);
    }
}
