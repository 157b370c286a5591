//! The online and torpid sets and the requests that read or force them:
//! `resource.monitor-force-up`, `monitor-force-down`, `monitor-waitup`.
//! (Agents and their heartbeat timers are in `agents`.)

use super::*;

impl Service {
    /// `resource.monitor-force-up {ranks?}` (`up`) /
    /// `resource.monitor-force-down {ranks}`: test hooks that change the
    /// online set.
    pub(super) fn force_rpc(&mut self, c: Ctx<'_>, body: msg::ForceRequest, up: bool) -> Handled {
        let Ctx { now, out, .. } = c;
        self.force(now, body.ranks.as_deref(), up, out)?;
        Ok(Some(Value::Null.into()))
    }

    fn force(
        &mut self,
        now: f64,
        ranks: Option<&str>,
        up: bool,
        out: &mut Vec<Output>,
    ) -> Result<(), RpcError> {
        let all = if self.state.size > 0 {
            IdSet::from_range(0, self.state.size - 1)
        } else {
            IdSet::new()
        };
        let ranks = match ranks {
            None if up => all.clone(),
            Some(s) => IdSet::parse(s).map_err(|e| RpcError::new(EINVAL, e.to_string()))?,
            None => return Err(proto()),
        };
        let ranks = ranks.intersection(&all);
        if up {
            self.set_online(now, self.state.online.union(&ranks), out);
        } else {
            self.set_online(now, self.state.online.difference(&ranks), out);
        }
        Ok(())
    }

    /// Replace the online set, posting `offline` then `online` for the
    /// differences (one event each, batching simultaneous transitions).
    pub fn set_online(&mut self, now: f64, new: IdSet, out: &mut Vec<Output>) {
        let joined = new.difference(&self.state.online);
        let left = self.state.online.difference(&new);
        self.state.online = new;
        self.invalidate_caches();
        self.state.lost.add(&left);
        self.state.lost.subtract(&joined);
        self.post_liveness(now, "offline", &left, out);
        self.post_liveness(now, "online", &joined, out);
        self.check_waitups(out);
    }

    /// Post an in-memory liveness event (`online`, `offline`, `torpid`,
    /// `lively`) for `ids`, unless it is empty.
    fn post_liveness(&mut self, now: f64, name: &str, ids: &IdSet, out: &mut Vec<Output>) {
        if !ids.is_empty() {
            // Roster's own key: the relays that reported these ranks,
            // `{"HOST": "IDSET", ...}` (absent when no relay did).
            let via: rfc44::Relays = self
                .liveness_via
                .iter()
                .filter_map(|(host, v)| {
                    let mine = v.intersection(ids);
                    (!mine.is_empty()).then(|| (host.clone(), idset_str(&mine)))
                })
                .collect();
            let c = rfc44::context(&rfc44::Liveness {
                idset: ids.encode(),
                relays: (!via.is_empty()).then_some(via),
            });
            self.post(now, name, c, Keep::Journal, out);
        }
    }

    /// Replace the torpid set, posting `torpid` for the targets that
    /// became torpid and `lively` for those that recovered.
    pub fn set_torpid(&mut self, now: f64, new: IdSet, out: &mut Vec<Output>) {
        let became = new.difference(&self.state.torpid);
        let recovered = self.state.torpid.difference(&new);
        self.state.torpid = new;
        self.invalidate_caches();
        self.post_liveness(now, "torpid", &became, out);
        self.post_liveness(now, "lively", &recovered, out);
    }

    /// `resource.monitor-waitup {up}`: answered once exactly `up`
    /// targets are online.
    pub(super) fn waitup(&mut self, c: Ctx<'_>, body: msg::WaitupRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let (to, up) = (req.reply_to(), body.up);
        if up < 0 || up > i64::from(self.state.size) {
            return Err(RpcError::new(EPROTO, "up value is out of range"));
        }
        self.waitups.push(Waitup { to, up: up as u64 });
        self.check_waitups(out);
        Ok(None)
    }

    fn check_waitups(&mut self, out: &mut Vec<Output>) {
        let n = self.state.online.len();
        self.waitups.retain(|w| {
            if w.up == n {
                out.push(Output::Reply {
                    to: w.to,
                    reply: Ok(Value::Null.into()),
                });
                false
            } else {
                true
            }
        });
    }
}
