//! `resource.status`, `resource.sched-status` and `resource.get`.

use super::*;
use rset::Rset;
use serde_json::json;

impl Service {
    /// `resource.status`: serialised once per state change, every reply
    /// sharing the text (with scattered drains the drain object alone is
    /// hundreds of KB at 16,384 nodes).
    pub(super) fn status_rpc(&mut self, _: msg::Empty) -> Handled {
        if let Some(p) = &self.status_cache {
            return Ok(Some(p.clone()));
        }
        let p = Payload::json(self.status_text()?);
        self.status_cache = Some(p.clone());
        Ok(Some(p))
    }

    /// [`Service::status`] written straight to JSON text: the bytes
    /// `serde_json` writes for that value (key order included), without
    /// building it (with thousands of separate drains the value is
    /// thousands of small maps).
    pub(super) fn status_text(&self) -> Result<String, RpcError> {
        let Some(inv) = &self.state.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        let fail =
            |e: serde_json::Error| RpcError::new(EINVAL, format!("error preparing response: {e}"));
        let mut w: Vec<u8> = Vec::with_capacity(4096);
        w.extend_from_slice(b"{\"R\":");
        match inv.json.as_object() {
            Some(o) => {
                w.push(b'{');
                let mut first = true;
                for (k, v) in o.iter().filter(|(k, _)| k.as_str() != "scheduling") {
                    if !first {
                        w.push(b',');
                    }
                    first = false;
                    serde_json::to_writer(&mut w, k).map_err(fail)?;
                    w.push(b':');
                    serde_json::to_writer(&mut w, v).map_err(fail)?;
                }
                w.push(b'}');
            }
            None => serde_json::to_writer(&mut w, &inv.json).map_err(fail)?,
        }
        w.extend_from_slice(b",\"drain\":");
        self.state.drain.write_status_json(&mut w).map_err(fail)?;
        let offline = self.state.all().difference(&self.state.online);
        for (key, ids) in [
            ("online", &self.state.online),
            ("offline", &offline),
            ("exclude", &self.state.exclude),
            ("torpid", &self.state.torpid),
        ] {
            w.extend_from_slice(b",\"");
            w.extend_from_slice(key.as_bytes());
            w.extend_from_slice(b"\":");
            serde_json::to_writer(&mut w, &ids.encode()).map_err(fail)?;
        }
        w.push(b'}');
        String::from_utf8(w)
            .map_err(|e| RpcError::new(EINVAL, format!("error preparing response: {e}")))
    }

    /// `resource.sched-status` (a cached payload).
    pub(super) fn sched_status_rpc(&mut self, _: msg::Empty) -> Handled {
        self.sched_status().map(Some)
    }

    /// `resource.get`: R and how it was obtained.
    pub(super) fn get_rpc(&mut self, _: msg::Empty) -> Handled {
        match &self.state.inventory {
            None => Err(RpcError::bare(ENOENT)),
            Some(inv) => Ok(Some(
                json!({"R": inv.json, "method": inv.method.as_str()}).into(),
            )),
        }
    }

    pub(super) fn status(&self) -> Result<Value, RpcError> {
        let Some(inv) = &self.state.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        let mut r = inv.json.clone();
        if let Some(o) = r.as_object_mut() {
            o.remove("scheduling");
        }
        let all = self.state.all();
        // Built by moving the parts in (`json!` would copy R and the drain
        // object once more through serde's value serializer).
        let mut m = Map::new();
        m.insert("R".into(), r);
        m.insert("drain".into(), self.state.drain.status_json());
        m.insert("online".into(), Value::String(self.state.online.encode()));
        m.insert(
            "offline".into(),
            Value::String(all.difference(&self.state.online).encode()),
        );
        m.insert("exclude".into(), Value::String(self.state.exclude.encode()));
        m.insert("torpid".into(), Value::String(self.state.torpid.encode()));
        Ok(Value::Object(m))
    }

    /// Serialised once per state change: every reply shares the cached
    /// text (the `down` R after scattered drains is large).
    fn sched_status(&mut self) -> Result<Payload, RpcError> {
        if let Some(p) = &self.sched_cache {
            return Ok(p.clone());
        }
        let (all, down, allocated) = self.sched_sets()?;
        let v = json!({
            "all": all,
            "down": down,
            "allocated": allocated,
        });
        let p = Payload::serialised(&v);
        self.sched_cache = Some(p.clone());
        Ok(p)
    }

    /// The `all`, `down` and `allocated` R of `resource.sched-status`.
    pub(super) fn sched_sets(&self) -> Result<(Value, Value, Value), RpcError> {
        let Some(inv) = &self.state.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        let mut valid = inv.ranks().clone();
        valid.subtract(&self.state.exclude);
        let mut all = inv.rset.copy_ranks(&valid);
        all.set_scheduling(None);
        let mut down_ids = valid.clone();
        down_ids.subtract(&self.state.up());
        let mut down = all.copy_ranks(&down_ids);
        down.set_scheduling(None);
        let allocated = if self.allocated.is_empty() {
            Rset::new()
        } else {
            let mut a = all.copy_ranks(&self.allocated_valid());
            a.set_scheduling(None);
            a
        };
        Ok((all.to_json(), down.to_json(), allocated.to_json()))
    }
}

impl Service {
    /// `resource.allocated-set {targets}`: the targets the caller (a
    /// scheduler) has allocated to jobs, replacing what the same
    /// credential (its certificate or token, else its uid, else its
    /// role) said before; `sched-status` shows the union of every
    /// credential's as `allocated` (flux's scheduler fills that key; here
    /// the scheduler is a client).  Not an event and not persisted: a
    /// restarted service (or a new leader) knows nothing allocated until
    /// the scheduler says it again.
    pub(super) fn allocated_set(&mut self, c: Ctx<'_>, body: msg::AllocatedSetRequest) -> Handled {
        let Ctx { req, .. } = c;
        let ids = if body.targets.trim().is_empty() {
            IdSet::new()
        } else {
            self.state.decode_targets(&body.targets)?
        };
        if let Some(last) = ids.last() {
            if last >= self.state.size {
                return Err(RpcError::new(EINVAL, "idset is out of range"));
            }
        }
        let key = super::drain::requester(req);
        let changed = if ids.is_empty() {
            self.allocated.remove(&key).is_some()
        } else {
            self.allocated.insert(key, ids.clone()).as_ref() != Some(&ids)
        };
        if changed {
            self.invalidate_caches();
        }
        Ok(Some(msg::encode(&msg::Empty {}).into()))
    }

    /// `attr.get {name}`: the broker attributes flux's tools ask for, as
    /// a single-rank Flux instance answers them.  `local-uri` is a fact
    /// of the listener asked, which answers it itself.
    pub(super) fn attr_get(&mut self, body: msg::AttrGetRequest) -> Handled {
        let value = match body.name.as_str() {
            "rank" | "instance-level" => "0".to_string(),
            "version" => format!("{}-roster-{}", rpc::FLUX_VERSION, env!("CARGO_PKG_VERSION")),
            "hostlist" | "size" if self.state.inventory.is_none() => {
                return Err(RpcError::new(ENOENT, "resource set is not known yet"))
            }
            "hostlist" => self.state.nodelist_of(&self.state.all()),
            "size" => {
                let hosts = hostlist::Hostlist::decode(&self.state.nodelist_of(&self.state.all()))
                    .map_or(0, |h| h.len());
                hosts.to_string()
            }
            // parent-uri, jobid, ... do not exist at the top level.
            _ => return Err(RpcError::bare(ENOENT)),
        };
        let reply = msg::AttrGetResponse { value, flags: 0 };
        Ok(Some(msg::encode(&reply).into()))
    }

    /// `config.get`: the instance's configuration as flux's tools read
    /// it (none of theirs applies: `{}`).
    pub(super) fn config_get(&mut self, _: msg::Empty) -> Handled {
        let reply = msg::ConfigGetResponse {
            queues: self.queues.clone(),
        };
        Ok(Some(msg::encode(&reply).into()))
    }
}
