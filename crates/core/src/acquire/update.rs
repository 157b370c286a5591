//! Bringing the acquires up to date: after every recorded event (and
//! every acquire-family request) the assignment moves towards the desired
//! groups, pending acquires start, and each holder is told what changed
//! (see the parent module's docs for the model).

use super::*;
use rpc::events;

impl Acquire {
    /// Move targets towards their desired groups (see the module docs).
    fn reconcile(&mut self, t: &Truth, out: &mut Vec<Output>) {
        let universe = self.universe(t);
        // 1. Targets in the wrong group leave it, or are shrunk.
        for i in 0..self.assigned.len() {
            let group = self.assigned[i].0.clone();
            let want = self.desired_set(&group, &universe);
            let wrong = self.assigned[i].1.difference(&want);
            if wrong.is_empty() {
                continue;
            }
            match self.started_holder(&group) {
                Some(h) if !self.holders[h].v1 => {
                    let holder = &mut self.holders[h];
                    let ungranted = wrong.difference(&holder.granted);
                    let new = wrong
                        .intersection(&holder.granted)
                        .difference(&holder.shrunk);
                    holder.shrunk.add(&new);
                    holder.online.subtract(&new);
                    let to = holder.to;
                    self.assigned[i].1.subtract(&ungranted);
                    if !new.is_empty() {
                        self.emit(out, to, json!({"type": "shrink", "targets": idstr(&new)}));
                    }
                }
                Some(h) => {
                    let holder = &mut self.holders[h];
                    let given = wrong.intersection(&holder.granted);
                    holder.granted.subtract(&given);
                    holder.v1_shrink.add(&given);
                    self.assigned[i].1.subtract(&wrong);
                }
                None => self.assigned[i].1.subtract(&wrong),
            }
        }
        // 1b. A v1 holder's ghosts that left `default` are shrunk.
        if let Some(h) = self.holders.iter().position(|h| h.v1 && h.started) {
            if !self.holders[h].ghost.is_empty() {
                let mut valid = t.inventory.map(|i| i.ranks().clone()).unwrap_or_default();
                valid.subtract(t.exclude);
                let want = self.desired_set(DEFAULT_GROUP, &valid);
                let holder = &mut self.holders[h];
                let gone = holder.ghost.difference(&want);
                holder.ghost.subtract(&gone);
                holder.v1_shrink.add(&gone);
            }
        }
        // 2. Unassigned targets of the universe join their desired group.
        let mut free = universe.clone();
        for (_, s) in &self.assigned {
            free.subtract(s);
        }
        if !free.is_empty() {
            let mut names: Vec<String> = self.desired.iter().map(|(g, _)| g.clone()).collect();
            names.push(DEFAULT_GROUP.to_string());
            for group in names {
                let add = free.intersection(&self.desired_set(&group, &universe));
                if add.is_empty() {
                    continue;
                }
                free.subtract(&add);
                self.assigned_mut(&group).add(&add);
                if let Some(h) = self.started_holder(&group) {
                    if !self.holders[h].v1 {
                        self.holders[h].granted.add(&add);
                        let online = add.intersection(t.up());
                        self.holders[h].online.add(&online);
                        let to = self.holders[h].to;
                        if let Some(inv) = t.inventory {
                            let payload = json!({
                                "type": "grow",
                                "resources": subset_r(inv, &add, true),
                                "online": idstr(&online),
                                "offline": idstr(&add.difference(&online)),
                            });
                            self.emit(out, to, payload);
                        }
                    }
                }
            }
        }
        self.assigned.retain(|(_, s)| !s.is_empty());
    }

    /// Produce the first response of acquires waiting for R.
    fn start_pending(&mut self, t: &Truth, out: &mut Vec<Output>) {
        let Some(inv) = t.inventory else { return };
        for i in 0..self.holders.len() {
            if self.holders[i].started {
                continue;
            }
            let group = self.holders[i].group.clone();
            let granted = self.members(&group);
            let online = granted.intersection(t.up());
            let holder = &mut self.holders[i];
            holder.started = true;
            holder.granted = granted.clone();
            holder.online = online.clone();
            let to = holder.to;
            let payload = if holder.v1 {
                // flux-core's quirk: targets already lost are in
                // `resources` (never up; shrunk only if they leave
                // `default`).  Not those another group still holds.
                let mut ids = granted.clone();
                if self.shrink_mode {
                    let mut valid = inv.ranks().clone();
                    valid.subtract(t.exclude);
                    let mut ghosts = self.desired_set(DEFAULT_GROUP, &valid).intersection(t.lost);
                    for (_, s) in &self.assigned {
                        ghosts.subtract(s);
                    }
                    ids.add(&ghosts);
                }
                let reencode = !t.exclude.is_empty();
                self.holders[i].ghost = ids.difference(&granted);
                json!({"resources": subset_r(inv, &ids, reencode), "up": idstr(&online)})
            } else {
                json!({
                    "type": "grow",
                    "resources": subset_r(inv, &granted, true),
                    "online": idstr(&online),
                    "offline": idstr(&granted.difference(&online)),
                })
            };
            self.emit(out, to, payload);
        }
    }

    /// Report availability transitions to every started acquire.
    fn report(&mut self, t: &Truth, out: &mut Vec<Output>) {
        let mut pending = Vec::new();
        for holder in &mut self.holders {
            if !holder.started {
                continue;
            }
            let cur = holder
                .granted
                .difference(&holder.shrunk)
                .intersection(t.up());
            let joined = cur.difference(&holder.online);
            let left = holder.online.difference(&cur);
            holder.online = cur;
            if holder.v1 {
                let shrink = std::mem::take(&mut holder.v1_shrink);
                let mut m = Map::new();
                if !joined.is_empty() {
                    m.insert("up".into(), idstr(&joined));
                }
                if !left.is_empty() {
                    m.insert("down".into(), idstr(&left));
                }
                if !shrink.is_empty() {
                    m.insert("shrink".into(), idstr(&shrink));
                }
                if !m.is_empty() {
                    pending.push((holder.to, Value::Object(m)));
                }
            } else {
                if !left.is_empty() {
                    pending.push((
                        holder.to,
                        json!({"type": "offline", "targets": idstr(&left)}),
                    ));
                }
                if !joined.is_empty() {
                    pending.push((
                        holder.to,
                        json!({"type": "online", "targets": idstr(&joined)}),
                    ));
                }
            }
        }
        for (to, payload) in pending {
            self.emit(out, to, payload);
        }
    }

    /// Bring every acquire up to date with the service's truth.
    pub fn update(&mut self, t: &Truth, out: &mut Vec<Output>) {
        if t.inventory.is_none() {
            return;
        }
        self.reconcile(t, out);
        self.start_pending(t, out);
        self.report(t, out);
    }

    /// An event was recorded (and, if persistent, will be durable before
    /// any output that follows).
    pub fn on_event(&mut self, ev: &Event, t: &Truth, out: &mut Vec<Output>) {
        match ev.name.as_str() {
            "resource-define" => {
                let d: events::ResourceDefine =
                    events::read(ev.context.as_ref()).unwrap_or_default();
                if d.method.as_deref() != Some("configuration") {
                    self.shrink_mode = true;
                }
                if t.inventory.is_none() {
                    let err = RpcError::new(ENOENT, "resource discovery failed or interrupted");
                    for h in std::mem::take(&mut self.holders) {
                        out.push(Output::Reply {
                            to: h.to,
                            reply: Err(err.clone()),
                        });
                    }
                    return;
                }
            }
            "resource-update" => {
                let u: events::ResourceUpdate =
                    events::read(ev.context.as_ref()).unwrap_or_default();
                if let Some(exp) = u.expiration {
                    if exp >= 0.0 {
                        let tos: Vec<ReplyTo> = self
                            .holders
                            .iter()
                            .filter(|h| h.v1 && h.started)
                            .map(|h| h.to)
                            .collect();
                        for to in tos {
                            self.emit(out, to, json!({ "expiration": exp }));
                        }
                    }
                }
            }
            _ => {}
        }
        self.update(t, out);
    }
}
