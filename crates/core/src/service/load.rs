//! Start-up (flux-core's load sequence) and the drain checkpoint.
//!
//! [`Service::new`] builds the journal from the stored events, decodes
//! exclude and the resource groups, restores the drain state (checkpoint,
//! then the events not older than it, with rank remapping through the
//! stored nodelists), undrains excluded targets, posts `online`/`restart`
//! and defines R.  [`Service::checkpoint`] is the document written at a
//! clean shutdown and read back here.

use super::*;
use crate::acquire::Acquire;
use crate::journal::LogMark;
use eventlog::Event;

impl Service {
    /// Start: build the journal from the stored events, parse the exclude
    /// set, restore drain state (checkpoint + replay with rank remapping),
    /// undrain excluded targets, post `online`/`restart`, and define R.
    pub fn new(init: Init, out: &mut Vec<Output>) -> Result<Service, StartError> {
        let start = Now::new(init.mono, init.now);
        let mut svc = Service::follower(init)?;
        svc.promote(start, out);
        Ok(svc)
    }

    /// A hot standby's core (etcd backend): the first half of
    /// [`Service::new`] (journal from the stored events, exclude, groups,
    /// checkpoint + replay), posting nothing.  [`Service::follow`] applies
    /// the events the leader records afterwards, as they arrive;
    /// [`Service::promote`] makes it the serving core (the second half of
    /// [`Service::new`]) with no replay.  Until promoted it answers the
    /// read-only requests from its state.
    pub fn follower(init: Init) -> Result<Service, StartError> {
        // Timestamps never go backwards: not before the last stored event
        // or the checkpoint (a clock that was ahead at the last stop).
        let last_ts = init
            .stored_events
            .iter()
            .map(|e| e.timestamp)
            .chain(
                init.checkpoint
                    .as_ref()
                    .and_then(|c| c.get("timestamp"))
                    .and_then(Value::as_f64),
            )
            .filter(|t| t.is_finite())
            .fold(0.0, f64::max);
        let now = if init.now.is_finite() {
            init.now.max(last_ts)
        } else {
            last_ts
        };
        let mut svc = Service {
            state: TargetState::new(),
            journal: Journal::new(init.settings.journal_max),
            followers: Vec::new(),
            log: LogIndex::new(init.settings.journal_max),
            run: init.run,
            waitups: Vec::new(),
            sched_cache: None,
            status_cache: None,
            summary_cache: Default::default(),
            stopped: false,
            acquire: Acquire::default(),
            monitor: Monitor::new(init.settings.torpid_max, init.settings.offline_timeout),
            allocated: BTreeMap::new(),
            relays: Relays::new(init.settings.torpid_max, init.settings.offline_timeout),
            relay_fanout: init.settings.relay_fanout.max(1),
            queues: init.settings.queues.clone(),
            verify: init.settings.verify.clone(),
            liveness_batch: init.settings.liveness_batch,
            liveness_posted: f64::NEG_INFINITY,
            liveness_via: Vec::new(),
            verify_via: None,
            mono: init.mono.as_secs_f64(),
            stamp: now,
            discovered: None,
            force_up: init.settings.monitor_force_up,
            followed: init.stored_events.len(),
        };
        if let Some(inv) = init.inventory {
            svc.set_inventory(inv);
        } else if let Some(hosts) = init.discover_hosts {
            svc.expect_hosts(hosts);
        }
        // 1. The journal starts with the stored history, minus the
        // historical resource-define entries.  The journal looks at the
        // service state only when it overflows; when the history fits, the
        // events are moved in right after the replay below (same journal,
        // no copy of every stored event).
        // Each stored event's mark in the log (for journal positions).
        let stored = init.stored_events;
        let marks: Vec<LogMark> = stored
            .iter()
            .map(|ev| svc.log.stored(ev, ev.name != "resource-define"))
            .collect();
        let fits = stored
            .iter()
            .filter(|ev| ev.name != "resource-define")
            .count()
            <= svc.journal.max();
        if !fits {
            for (ev, mark) in stored.iter().zip(&marks) {
                if ev.name != "resource-define" {
                    svc.journal_push(ev.clone(), *mark);
                }
            }
        }
        // 2. Exclude.
        if let Some(spec) = &init.settings.exclude {
            svc.state.exclude = svc.state.decode_exclude(spec)?;
        }
        // 2b. Resource groups (RFC 28).
        let groups = svc.state.decode_groups(&init.settings.groups)?;
        svc.acquire = Acquire::new(groups);
        // 3. Drain state: checkpoint, then the events after it: by
        // position when the checkpoint has one, else by timestamp.
        let mut cp_ts = 0.0;
        let mut from = None;
        if let Some(cp) = &init.checkpoint {
            cp_ts = svc.restore_checkpoint(cp)?;
            from = init.replay_from;
        }
        for (i, ev) in stored.iter().enumerate() {
            let summarised = match from {
                Some(n) => i < n,
                None => ev.timestamp < cp_ts,
            };
            if summarised {
                continue;
            }
            svc.replay(i + 1, ev)?;
        }
        if fits {
            for (ev, mark) in stored.into_iter().zip(marks) {
                if ev.name != "resource-define" {
                    svc.journal_push(ev, mark);
                }
            }
        }
        Ok(svc)
    }

    /// Apply events the leader recorded (a hot standby tailing the
    /// replicated log), in order, as the replay of [`Service::new`] does:
    /// the drain state, the journal, the timestamps.  Errors name the
    /// event's position in the whole log followed so far.
    pub fn follow(&mut self, events: &[Event]) -> Result<(), StartError> {
        for ev in events {
            self.followed += 1;
            self.replay(self.followed, ev)?;
            if ev.timestamp.is_finite() {
                self.stamp = self.stamp.max(ev.timestamp);
            }
            // A followed event is stored in the log this core will serve
            // from (a reader of the leader's run resumes by its mark).
            let journaled = ev.name != "resource-define";
            let mark = self.log.stored(ev, journaled);
            if journaled {
                self.journal_push(ev.clone(), mark);
            }
        }
        if !events.is_empty() {
            self.invalidate_caches();
        }
        Ok(())
    }

    /// Become the serving core (the second half of [`Service::new`]):
    /// undrain excluded targets, post `online` (monitor-force-up) and
    /// `restart`, define R.  Called once, on a [`Service::follower`].
    pub fn promote(&mut self, now: impl Into<Now>, out: &mut Vec<Output>) {
        let Now { mono, wall } = now.into();
        self.mono = self.mono.max(mono.as_secs_f64());
        if wall.is_finite() {
            self.stamp = self.stamp.max(wall);
        }
        let now = self.stamp;
        let svc = self;
        let reconcile = svc.state.drain.drained().intersection(&svc.state.exclude);
        if !reconcile.is_empty() {
            svc.state.drain.apply_undrain(&reconcile);
            let c = rfc44::context(&rfc44::Undrain {
                idset: reconcile.encode(),
                nodelist: svc.state.nodelist_of(&reconcile),
                ..Default::default()
            });
            svc.post(now, "undrain", c, Keep::Persist, out);
        }
        // 4. Liveness.
        if svc.force_up && svc.state.size > 0 {
            let all = IdSet::from_range(0, svc.state.size - 1);
            svc.state.online = all.clone();
            svc.post(
                now,
                "online",
                rfc44::context(&rfc44::Liveness {
                    idset: all.encode(),
                    relays: None,
                }),
                Keep::Journal,
                out,
            );
        }
        let ranks = if svc.state.size > 0 {
            IdSet::from_range(0, svc.state.size - 1)
        } else {
            IdSet::new()
        };
        let c = rfc44::context(&rfc44::Restart {
            ranks: Some(ranks.encode()),
            online: Some(svc.state.online.encode()),
            nodelist: Some(svc.state.nodelist_of(&ranks)),
        });
        svc.post(now, "restart", c, Keep::Journal, out);
        // 5. Define R.
        if let Some(inv) = &svc.state.inventory {
            let method = inv.method;
            if method != Method::Kvs {
                out.push(Output::WriteR(inv.json.clone()));
            }
            let c = define(method.as_str());
            svc.post(now, "resource-define", c, Keep::Persist, out);
        }
    }

    /// The number of events replayed or followed so far.
    pub fn followed(&self) -> usize {
        self.followed
    }

    /// Restore the drain state of a checkpoint; returns its timestamp.
    fn restore_checkpoint(&mut self, cp: &Value) -> Result<f64, StartError> {
        let ts = cp.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0);
        let Some(state) = cp.get("drain_state").and_then(Value::as_object) else {
            return Ok(ts);
        };
        for (key, entry) in state {
            let bad = || StartError::Checkpoint(key.clone());
            let ids = IdSet::parse(key).map_err(|_| bad())?;
            let t = entry
                .get("timestamp")
                .and_then(Value::as_f64)
                .ok_or_else(bad)?;
            let reason = match entry.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(Value::String(s)) => Some(s.as_str()),
                Some(_) => return Err(bad()),
            };
            let nodelist = match entry.get("nodelist") {
                Some(Value::String(s)) => s.as_str(),
                _ => return Err(bad()),
            };
            let targets = self.state.remap(&ids, nodelist);
            if !targets.is_empty() {
                self.state.drain.apply_drain(&targets, t, reason, 1);
            }
        }
        Ok(ts)
    }

    /// Apply one stored event (line `line` of the eventlog) to the drain
    /// state.
    fn replay(&mut self, line: usize, ev: &Event) -> Result<(), StartError> {
        let err = |reason: &str| StartError::Replay {
            line,
            reason: reason.to_string(),
        };
        let c = ev.context.as_ref();
        let what = match ev.name.as_str() {
            "drain" => "drain parse error",
            "undrain" => "undrain parse error",
            _ => return Ok(()),
        };
        let bad = || err(what);
        // The targets first (an undrain reads only them), then, for a drain
        // of targets this instance still has, the reason and mode.
        let u: rfc44::Undrain = rfc44::read(c).ok_or_else(bad)?;
        let ids = IdSet::parse(&u.idset).map_err(|_| bad())?;
        let targets = self.state.remap(&ids, &u.nodelist);
        if targets.is_empty() {
            return Ok(());
        }
        if ev.name == "undrain" {
            self.state.drain.apply_undrain(&targets);
            return Ok(());
        }
        let d: rfc44::Drain = rfc44::read(c).ok_or_else(bad)?;
        let overwrite = d.overwrite.unwrap_or(1);
        if overwrite > 2 {
            return Err(bad());
        }
        let reason = d.reason.as_deref();
        self.state
            .drain
            .apply_drain(&targets, ev.timestamp, reason, overwrite);
        Ok(())
    }

    /// The drain checkpoint: groups of (rounded timestamp, reason) with
    /// their nodelists.
    pub fn checkpoint(&self, now: f64) -> Value {
        let mut state = Map::new();
        for (ids, ts, reason) in self.state.drain.groups() {
            state.insert(
                ids.encode(),
                json!({
                    "timestamp": ts,
                    "reason": reason.as_deref().unwrap_or(""),
                    "nodelist": self.state.nodelist_of(&ids),
                }),
            );
        }
        json!({"timestamp": now, "drain_state": state})
    }
}
