//! Agents on the service side: `resource.agent` (the hello that binds a
//! connection to a rank), `resource.agent-heartbeat`, the liveness timers
//! ([`Input::Tick`](super::Input::Tick)) and the verification of each
//! agent's R against the inventory (flux-core's topo.c self-drain).

use super::*;
use crate::monitor::Changes;
use relay::drained_answer;

/// The largest agent R accepted (one node, so a few KiB at most).
const MAX_AGENT_R_ITEMS: u64 = 1 << 20;

fn bad_hello(msg: impl Into<String>) -> RpcError {
    RpcError::new(EPROTO, format!("agent hello: {}", msg.into()))
}

impl Service {
    /// `resource.agent {hostname, R?, rank?}`: map the hostname to a rank
    /// through R's nodelist (the first rank of that host without a live
    /// agent, or the `rank` asked for), accept the agent, reply
    /// `{rank, hostname, size, heartbeat, torpid-max, offline-timeout}` on
    /// the stream (which stays open until the agent leaves), and verify
    /// its R.
    pub(super) fn agent_hello(&mut self, c: Ctx<'_>, hello: msg::AgentHello) -> Handled {
        let Ctx { now, req, out } = c;
        if !req.streaming {
            return Err(RpcError::new(
                EPROTO,
                "resource.agent requires streaming RPC flag",
            ));
        }
        if self.monitor.agent(req.conn).is_some() || self.relays.session(req.conn).is_some() {
            return Err(bad_hello("this connection has said hello already"));
        }
        let host = hello.hostname.as_str();
        if host.is_empty() {
            return Err(bad_hello("hostname (a non-empty string) is required"));
        }
        // An agent authenticated by its certificate speaks for its own
        // host only.
        if let Some(own) = req.role.agent_host() {
            if *own != *host {
                let msg =
                    format!("agent hello: the certificate of {own} may not speak for host {host}");
                out.push(Output::Log {
                    level: Level::Warn,
                    msg: format!("refused an agent: {msg}"),
                });
                return Err(RpcError::new(EPERM, msg));
            }
        }
        if self.state.inventory.is_none() && self.discovered.is_none() {
            return Err(RpcError::new(
                ENOENT,
                "R is unavailable for mapping hostnames to ranks",
            ));
        }
        let Some(ranks) = self.state.host_ranks.get(host) else {
            return Err(RpcError::new(
                ENOENT,
                format!("unknown host {host}: it is not in the nodelist of R"),
            ));
        };
        let rank = match hello.rank {
            Some(r) => {
                if !ranks.contains(&r) {
                    return Err(RpcError::new(
                        EINVAL,
                        format!("rank {r} is not a rank of host {host}"),
                    ));
                }
                if self.rank_claimed(r) {
                    return Err(RpcError::new(
                        EEXIST,
                        format!("rank {r} ({host}) is already claimed by a live agent"),
                    ));
                }
                r
            }
            None => match ranks.iter().find(|r| !self.rank_claimed(**r)) {
                Some(r) => *r,
                None => {
                    let all = IdSet::from_sorted_ranges(ranks.iter().map(|r| (*r, *r)))
                        .unwrap_or_default();
                    let what = if all.len() == 1 {
                        format!("rank {all} ({host}) is")
                    } else {
                        format!("every rank of host {host} ({all}) is")
                    };
                    return Err(RpcError::new(
                        EEXIST,
                        format!("{what} already claimed by a live agent"),
                    ));
                }
            },
        };
        let actual = match &hello.r {
            None | Some(Value::Null) => None,
            Some(r) => Some(Self::agent_r(r, host, rank)?),
        };
        if self.discovered.is_some() && actual.is_none() {
            return Err(bad_hello("R is required while resources are discovered"));
        }
        let version = match hello.version.as_deref() {
            Some(v) if v.len() > msg::MAX_AGENT_VERSION || v.chars().any(char::is_control) => {
                return Err(bad_hello(format!(
                    "version: at most {} bytes of printable text",
                    msg::MAX_AGENT_VERSION
                )))
            }
            v => v.map(Arc::<str>::from),
        };
        let to = req.reply_to();
        if hello.relay {
            relay::may_relay(&req.role, out)?;
            self.relay_hello(now, rank, host, to, actual, out)?;
            self.monitor.set_version(rank, version);
            return Ok(None);
        }
        self.monitor.hello(self.mono, rank, to);
        self.monitor.set_version(rank, version);
        out.push(Output::Log {
            level: Level::Debug,
            msg: format!("agent for rank {rank} ({host}) joined"),
        });
        let welcome = self.welcome(rank, host, None);
        self.welcomed(now, rank, &welcome, actual, to, out)
    }

    /// `resource.agents {targets?}`: each rank's last heartbeat (the wall
    /// clock of the input that brought it: the monotonic age subtracted
    /// from the current stamp), the agent's version, the relay speaking
    /// for it.  Ranks no agent or relay ever held since the start are
    /// left out.
    pub(super) fn agents_rpc(&mut self, body: msg::AgentsRequest) -> Handled {
        let all = self.state.all();
        let targets = match body.targets {
            Some(t) => t.intersection(&all),
            None => all,
        };
        let wall = |mono: f64| self.stamp - (self.mono - mono).max(0.0);
        let mut infos: BTreeMap<u32, msg::AgentInfo> = BTreeMap::new();
        for (relay, t, ids) in self.relays.heard_of(&targets) {
            let via = self.state.hosts.get(&relay).map(|h| h.to_string());
            for rank in ids.iter() {
                infos.insert(
                    rank,
                    msg::AgentInfo {
                        rank,
                        heartbeat: Some(wall(t)),
                        version: None,
                        via: if rank == relay { None } else { via.clone() },
                        connected: true,
                    },
                );
            }
        }
        for rank in targets.iter() {
            let Some(seen) = self.monitor.seen(rank) else {
                continue;
            };
            let e = infos.entry(rank).or_insert_with(|| msg::AgentInfo {
                rank,
                heartbeat: seen.last.map(wall),
                connected: seen.connected,
                ..msg::AgentInfo::default()
            });
            e.version = seen.version.as_deref().map(str::to_string);
        }
        let resp = msg::AgentsResponse {
            agents: infos.into_values().collect(),
        };
        Ok(Some(msg::encode(&resp).into()))
    }

    /// `resource.agent-enrol {hostname, csr}`: the host must be one of R
    /// (an enrolment token obtains no certificate for any other name);
    /// the shell checks the request against the name, signs it with its
    /// CA (or refuses: no CA, enrolled already) and answers.
    pub(super) fn agent_enrol(&mut self, c: Ctx<'_>, body: msg::AgentEnrolRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let host = body.hostname.as_str();
        if host.is_empty() {
            return Err(RpcError::new(
                EPROTO,
                "agent enrol: hostname (a non-empty string) is required",
            ));
        }
        if !self.state.host_ranks.contains_key(host) {
            let msg = format!("agent enrol: unknown host {host}: it is not in the nodelist of R");
            out.push(Output::Log {
                level: Level::Warn,
                msg: format!(
                    "refused an enrolment by {}: {msg}",
                    super::drain::requester(req)
                ),
            });
            return Err(RpcError::new(ENOENT, msg));
        }
        out.push(Output::Enrol {
            to: req.reply_to(),
            hostname: host.to_string(),
            csr: body.csr,
            requester: super::drain::requester(req),
        });
        Ok(None)
    }

    /// Send the welcome (agent or relay); then what the node reported is
    /// its share of R while R is discovered, else it is verified, and a
    /// node drained for it is told why on its stream `to`.
    pub(super) fn welcomed(
        &mut self,
        now: f64,
        rank: u32,
        welcome: &msg::AgentAnswer,
        actual: Option<Rset>,
        to: ReplyTo,
        out: &mut Vec<Output>,
    ) -> Handled {
        Self::reply(out, to, Ok(msg::encode(welcome).into()));
        let Some(actual) = actual else {
            return Ok(None);
        };
        if self.discovered.is_some() {
            self.discovered_rank(now, rank, actual, out);
        } else if let Some(reason) = self.verify_agent(now, rank, &actual, out) {
            let d = drained_answer(IdSet::from_range(rank, rank), reason);
            Self::reply(out, to, Ok(d));
        }
        Ok(None)
    }

    /// The first answer of an agent (or relay) session.
    pub(super) fn welcome(
        &self,
        rank: u32,
        host: &str,
        relay: Option<msg::RelayWelcome>,
    ) -> msg::AgentAnswer {
        msg::AgentAnswer {
            rank: Some(rank),
            hostname: Some(host.to_string()),
            size: Some(self.state.size),
            heartbeat: Some(self.monitor.heartbeat_period()),
            torpid_max: Some(self.monitor.torpid_max()),
            offline_timeout: Some(self.monitor.offline_timeout()),
            relay,
            ..msg::AgentAnswer::default()
        }
    }

    /// Whether a live agent or relay speaks for `rank`.
    pub(super) fn rank_claimed(&self, rank: u32) -> bool {
        self.monitor.owner(rank).is_some() || self.relays.claimed().contains(rank)
    }

    /// Dynamic discovery: targets are the expected hosts, rank i being
    /// host i, until every rank has reported its R.
    pub(super) fn expect_hosts(&mut self, hosts: Vec<String>) {
        let size = u32::try_from(hosts.len()).unwrap_or(u32::MAX);
        self.state.size = size;
        self.state.drain.resize(size);
        self.state.host_ranks.clear();
        self.state.hosts.clear();
        for (rank, h) in (0..size).zip(hosts) {
            let h: Arc<str> = Arc::from(h.as_str());
            self.state.hosts.insert(rank, h.clone());
            self.state.host_ranks.entry(h).or_default().push(rank);
        }
        self.discovered = Some(std::collections::BTreeMap::new());
    }

    /// One rank's R during discovery; once every rank has reported,
    /// assemble R and define it (`resource-define {method:
    /// "dynamic-discovery"}`, R written to the state directory).
    pub(super) fn discovered_rank(&mut self, now: f64, rank: u32, r: Rset, out: &mut Vec<Output>) {
        let Some(found) = self.discovered.as_mut() else {
            return;
        };
        found.insert(rank, r);
        if found.len() < self.state.size as usize {
            return;
        }
        let mut all = Rset::new();
        for r in found.values() {
            if let Err(e) = all.append(r) {
                out.push(Output::Log {
                    level: Level::Error,
                    msg: format!("dynamic discovery: cannot assemble R: {e}"),
                });
                return;
            }
        }
        self.discovered = None;
        let inv = Inventory::from_rset(all, Method::DynamicDiscovery);
        out.push(Output::WriteR(inv.json.clone()));
        self.set_inventory(inv);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "dynamic discovery: all {} ranks reported, R defined",
                self.state.size
            ),
        });
        self.post(
            now,
            "resource-define",
            define(Method::DynamicDiscovery.as_str()),
            Keep::Persist,
            out,
        );
    }

    /// The agent's R (one node, any rank) as a node of `rank` on `host`.
    fn agent_r(r: &Value, host: &str, rank: u32) -> Result<Rset, RpcError> {
        let (cores, gpus) = Rset::one_node(r, MAX_AGENT_R_ITEMS).map_err(bad_hello)?;
        let mut single = Rset::new();
        single
            .append_node(Some(host), rank, &cores, &gpus)
            .map_err(|e| bad_hello(format!("invalid R: {e}")))?;
        Ok(single)
    }

    /// Verify an agent's R; on a mismatch drain its rank with the
    /// verification message as reason (a persisted `drain` event with
    /// `overwrite` 1, which RFC 44 requires and flux-core's self-drain
    /// leaves out).  Excluded ranks and
    /// ranks already drained for the same reason are left alone.
    /// Returns the reason when the rank is drained for it.
    pub(super) fn verify_agent(
        &mut self,
        now: f64,
        rank: u32,
        actual: &Rset,
        out: &mut Vec<Output>,
    ) -> Option<String> {
        let (Some(cfg), Some(inv)) = (&self.verify, &self.state.inventory) else {
            return None;
        };
        let v = rset::verify(&inv.rset, actual, Some(cfg));
        if v.rc == 0 || self.state.exclude.contains(rank) {
            return None;
        }
        out.push(Output::Log {
            level: Level::Error,
            msg: format!("draining: {}", v.message),
        });
        if let Some(d) = self.state.drain.get(rank) {
            if d.reason.as_deref() == Some(v.message.as_str()) {
                return Some(v.message);
            }
        }
        let ids = IdSet::from_range(rank, rank);
        self.state.drain.apply_drain(&ids, now, Some(&v.message), 1);
        let c = rfc44::context(&rfc44::Drain {
            idset: ids.encode(),
            nodelist: self.state.nodelist_of(&ids),
            reason: Some(v.message.clone()),
            overwrite: Some(1), // RFC 44: REQUIRED; as applied above
            // Roster's own key: the relay that reported these resources.
            relays: self
                .verify_via
                .as_ref()
                .map(|relay| std::iter::once((relay.clone(), idset_str(&ids))).collect()),
            requester: None,
        });
        self.post(now, "drain", c, Keep::Persist, out);
        Some(v.message)
    }

    /// A later line of an agent session (`resource.agent-heartbeat`):
    /// the agent of this connection is alive; a relay's line carries its
    /// children.
    pub(super) fn session_line(
        &mut self,
        now: f64,
        conn: ConnId,
        line: Result<msg::RelayLine, RpcError>,
        out: &mut Vec<Output>,
    ) -> Handled {
        if let Some(s) = self.relays.session(conn) {
            return self.relay_line(now, conn, s.stream, line, out);
        }
        match self.monitor.heard(self.mono, conn) {
            Some(_) => Ok(Some(Value::Null.into())),
            None => Err(RpcError::new(
                EPROTO,
                "no agent on this connection: say hello (resource.agent) first",
            )),
        }
    }

    /// [`Input::SessionLine`]: [`Service::session_line`] with nobody to
    /// answer.
    pub(super) fn session_input(
        &mut self,
        now: f64,
        conn: ConnId,
        payload: &Value,
        out: &mut Vec<Output>,
    ) {
        if !self.stopped {
            let line = table::decode::<cat::SessionLine>(payload);
            let _ = self.session_line(now, conn, line, out);
        }
    }

    /// Run the timers, end the streams of agents that timed out, and post
    /// the accumulated liveness transitions (unless some were posted less
    /// than `liveness_batch` ago: they wait for a later tick).  Timers and
    /// batching run on the monotonic clock; `now` only stamps the events.
    pub(super) fn tick(&mut self, now: f64, out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        let mono = self.mono;
        for a in self.monitor.tick(mono) {
            let host = self.state.nodelist_of(&IdSet::from_range(a.rank, a.rank));
            out.push(Output::Log {
                level: Level::Warn,
                msg: format!(
                    "rank {} ({host}): no heartbeat for more than {}s, marking it offline",
                    a.rank,
                    self.monitor.offline_timeout()
                ),
            });
            Self::reply(
                out,
                a.stream,
                Err(RpcError::new(
                    ETIMEDOUT,
                    format!(
                        "no heartbeat for more than {}s: rank {} is offline",
                        self.monitor.offline_timeout(),
                        a.rank
                    ),
                )),
            );
        }
        self.relay_tick(out);
        if mono - self.liveness_posted < self.liveness_batch {
            return;
        }
        let Changes {
            up,
            down,
            torpid,
            lively,
        } = self.take_liveness_changes();
        if up.is_empty() && down.is_empty() && torpid.is_empty() && lively.is_empty() {
            return;
        }
        self.liveness_posted = mono;
        self.liveness_via = self.relays_via(&[&up, &down, &torpid, &lively]);
        if !up.is_empty() || !down.is_empty() {
            let mut new = self.state.online.union(&up);
            new.subtract(&down);
            if new != self.state.online {
                self.set_online(now, new, out);
            }
        }
        if !torpid.is_empty() || !lively.is_empty() {
            let mut new = self.state.torpid.union(&torpid);
            new.subtract(&lively);
            self.set_torpid(now, new, out);
        }
        self.liveness_via.clear();
    }

    /// Shutdown: end every agent stream (agents reconnect to the next
    /// instance of the service).
    pub(super) fn end_agents(&mut self, out: &mut Vec<Output>) {
        let mut streams = self.monitor.streams();
        streams.extend(self.relays.streams());
        for to in streams {
            Self::reply(
                out,
                to,
                Err(RpcError::new(ECANCELED, "the resource module was unloaded")),
            );
        }
    }

    /// The number of live agent sessions (relays count as one each).
    pub fn agents(&self) -> usize {
        self.monitor.len() + self.relays.len()
    }
}
