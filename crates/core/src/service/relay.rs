//! Relay sessions (see [`rpc::relay`] for the protocol and the tree): a
//! relay says hello like an agent with `"relay": true`, is welcomed with
//! its subtree, then speaks for its children in batches: `hello` groups,
//! `lively`, `gone` and `torpid` idsets.  Everything here works on idsets, so a
//! batch of 131,072 children costs a few range operations, not a message
//! per node.  Answers (`accepted`, `refused`, `drained`, `ended`) go on
//! the relay's stream.

use super::*;
use crate::monitor::Changes;

/// The `drained` answer: ranks drained by verification, and why.
pub(super) fn drained_answer(ranks: IdSet, reason: String) -> Payload {
    let a = msg::AgentAnswer {
        drained: Some(vec![msg::RanksDrained { ranks, reason }]),
        ..msg::AgentAnswer::default()
    };
    msg::encode(&a).into()
}

/// Only a relay credential (or the owner) may open a relay session: an
/// agent's certificate speaks for its own host, never for a subtree.
pub(super) fn may_relay(role: &Role, out: &mut Vec<Output>) -> Result<(), RpcError> {
    rpc::relay::may_relay(role).inspect_err(|e| {
        out.push(Output::Log {
            level: Level::Warn,
            msg: format!("refused a relay: {}", e.message()),
        })
    })
}

/// What one line's hellos came to.
#[derive(Default)]
struct Answer {
    accepted: IdSet,
    refused: Vec<msg::RanksError>,
    drained: Vec<msg::RanksDrained>,
}

impl Service {
    /// The ranks of `ids` that R knows, and their hostnames in rank order.
    fn known_hosts(&self, ids: &IdSet) -> (IdSet, String) {
        let mut known = IdSet::new();
        let mut hl = hostlist::Hostlist::new();
        for &(lo, hi) in ids.ranges() {
            for (r, h) in self.state.hosts.range(lo..=hi) {
                known.insert_range(*r, *r);
                hl.push(h);
            }
        }
        (known, hl.encode())
    }

    /// Accept a relay at `rank` (its hello was checked like an agent's):
    /// welcome it with its subtree, then verify its own R.
    pub(super) fn relay_hello(
        &mut self,
        now: f64,
        rank: u32,
        host: &str,
        to: ReplyTo,
        actual: Option<Rset>,
        out: &mut Vec<Output>,
    ) -> Handled {
        let fanout = self.relay_fanout;
        let (subtree, hosts) =
            self.known_hosts(&rpc::relay::subtree(rank, fanout, self.state.size));
        out.push(Output::Log {
            level: Level::Debug,
            msg: format!(
                "relay for rank {rank} ({host}) joined, speaking for up to {} ranks",
                subtree.len()
            ),
        });
        let welcome = self.welcome(
            rank,
            host,
            Some(msg::RelayWelcome {
                fanout,
                subtree: subtree.clone(),
                hosts,
            }),
        );
        self.relays.hello(self.mono, rank, to, subtree);
        self.welcomed(now, rank, &welcome, actual, to, out)
    }

    /// A line of the relay session answered on `stream`: `gone`, then
    /// `hello`, then `lively`, then `torpid` (any of them; every line is
    /// also the relay's own heartbeat).  A malformed line ends the session
    /// (EPROTO): the relay reconnects and announces its children again.
    pub(super) fn relay_line(
        &mut self,
        now: f64,
        conn: ConnId,
        stream: ReplyTo,
        line: Result<msg::RelayLine, RpcError>,
        out: &mut Vec<Output>,
    ) -> Handled {
        match line.and_then(|line| self.relay_line_inner(now, conn, line, out)) {
            Ok(answer) => {
                let a = msg::AgentAnswer {
                    accepted: Some(answer.accepted).filter(|a| !a.is_empty()),
                    refused: Some(answer.refused).filter(|r| !r.is_empty()),
                    drained: Some(answer.drained).filter(|d| !d.is_empty()),
                    ..msg::AgentAnswer::default()
                };
                if a != msg::AgentAnswer::default() {
                    Self::reply(out, stream, Ok(msg::encode(&a).into()));
                }
                Ok(Some(Value::Null.into()))
            }
            Err(e) => {
                if let Some(s) = self.relays.disconnect(conn) {
                    out.push(Output::Log {
                        level: Level::Warn,
                        msg: format!("relay for rank {}: {}; session ended", s.rank, e.message()),
                    });
                }
                Self::reply(out, stream, Err(e.clone()));
                Err(e)
            }
        }
    }

    fn relay_line_inner(
        &mut self,
        now: f64,
        conn: ConnId,
        line: msg::RelayLine,
        out: &mut Vec<Output>,
    ) -> Result<Answer, RpcError> {
        let msg::RelayLine {
            gone,
            hello,
            lively,
            torpid,
        } = line;
        if let Some(g) = &gone {
            let lost = self.relays.gone(conn, g);
            if !lost.is_empty() {
                out.push(Output::Log {
                    level: Level::Debug,
                    msg: format!("relay: ranks {lost} left"),
                });
            }
        }
        let mut answer = Answer::default();
        for g in hello.unwrap_or_default() {
            self.relay_group(now, conn, g, &mut answer, out)?;
        }
        self.relays
            .heard(self.mono, conn, lively.as_ref().unwrap_or(&IdSet::new()));
        if let Some(t) = &torpid {
            self.relays.report_torpid(conn, t);
        }
        Ok(answer)
    }

    /// One `hello` group `{ranks, cores?, gpus?}`: refuse the ranks
    /// outside the relay's subtree (EPERM) or held by another agent
    /// (EEXIST), accept the rest and verify them.
    fn relay_group(
        &mut self,
        now: f64,
        conn: ConnId,
        g: msg::HelloGroup,
        answer: &mut Answer,
        out: &mut Vec<Output>,
    ) -> Result<(), RpcError> {
        let msg::HelloGroup { ranks, cores, gpus } = g;
        let gpus = gpus.unwrap_or_default();
        let Some(s) = self.relays.session(conn) else {
            return Err(proto());
        };
        let (own, subtree, owned) = (s.rank, &s.subtree, s.owned());
        let outside = ranks.difference(subtree);
        let mut ok = ranks.intersection(subtree);
        if !outside.is_empty() {
            let host = self.state.nodelist_of(&IdSet::from_range(own, own));
            let e = RpcError::new(
                EPERM,
                format!(
                    "ranks {outside} are not in the subtree of the relay at rank {own} ({host})"
                ),
            );
            answer.refused.push(msg::RanksError::new(outside, &e));
        }
        // Held by another relay, or by a direct agent.
        let mut taken = ok.intersection(self.relays.claimed());
        taken.subtract(owned);
        if !self.monitor.is_empty() {
            for r in ok.iter() {
                if self.monitor.owner(r).is_some() {
                    taken.insert(r);
                }
            }
        }
        if !taken.is_empty() {
            ok.subtract(&taken);
            let hosts = self.state.nodelist_of(&taken);
            let e = RpcError::new(
                EEXIST,
                format!("ranks {taken} ({hosts}) are already claimed by a live agent"),
            );
            answer.refused.push(msg::RanksError::new(taken, &e));
        }
        if self.discovered.is_some() && cores.is_none() && !ok.is_empty() {
            let e = RpcError::new(
                EPROTO,
                "agent hello: R is required while resources are discovered",
            );
            answer.refused.push(msg::RanksError::new(ok, &e));
            return Ok(());
        }
        if ok.is_empty() {
            return Ok(());
        }
        self.relays.join(self.mono, conn, &ok);
        answer.accepted.add(&ok);
        if let Some(cores) = cores {
            self.verify_via = Some(
                self.state
                    .hosts
                    .get(&own)
                    .map_or_else(|| format!("rank {own}"), |h| h.to_string()),
            );
            self.relay_verify(now, &ok, &cores, &gpus, answer, out);
            self.verify_via = None;
        }
        Ok(())
    }

    /// Verify a group of ranks reporting the same cores and GPUs: ranks
    /// whose expected children are exactly those pass without building R
    /// (the common case); the others go through [`rset::verify`] one by one.
    fn relay_verify(
        &mut self,
        now: f64,
        ranks: &IdSet,
        cores: &IdSet,
        gpus: &IdSet,
        answer: &mut Answer,
        out: &mut Vec<Output>,
    ) {
        let single = |svc: &Service, r: u32| {
            let host = svc.state.hosts.get(&r).map(|h| h.to_string());
            let mut one = Rset::new();
            one.append_node(host.as_deref(), r, cores, gpus).ok()?;
            Some(one)
        };
        if self.discovered.is_some() {
            for r in ranks.iter() {
                if let Some(one) = single(self, r) {
                    self.discovered_rank(now, r, one, out);
                }
            }
            return;
        }
        let (Some(_), Some(inv)) = (&self.verify, &self.state.inventory) else {
            return;
        };
        let mut slow = Vec::new();
        for r in ranks.iter() {
            let same = inv.rset.node_info(r).is_some_and(|n| {
                let mut core_ok = cores.is_empty();
                let mut gpu_ok = gpus.is_empty();
                let others_empty = n.children.iter().all(|(name, ids)| match name.as_str() {
                    "core" => {
                        core_ok = ids == cores;
                        true
                    }
                    "gpu" => {
                        gpu_ok = ids == gpus;
                        true
                    }
                    _ => ids.is_empty(),
                });
                others_empty && core_ok && gpu_ok
            });
            if !same {
                slow.push(r);
            }
        }
        for r in slow {
            let Some(one) = single(self, r) else { continue };
            if let Some(reason) = self.verify_agent(now, r, &one, out) {
                match answer.drained.iter_mut().find(|d| d.reason == reason) {
                    Some(d) => {
                        d.ranks.insert(r);
                    }
                    None => answer.drained.push(msg::RanksDrained {
                        ranks: IdSet::from_range(r, r),
                        reason,
                    }),
                }
            }
        }
    }

    /// The relays' timers: children silent past `offline-timeout` are
    /// dropped (the relay is told, `ended`); a silent relay loses its
    /// whole session.
    pub(super) fn relay_tick(&mut self, out: &mut Vec<Output>) {
        let tout = self.monitor.offline_timeout();
        for e in self.relays.tick(self.mono) {
            let hosts = self.state.nodelist_of(&e.ranks);
            out.push(Output::Log {
                level: Level::Warn,
                msg: format!(
                    "ranks {} ({hosts}): no heartbeat through the relay at rank {} for more than {tout}s, marking them offline",
                    e.ranks, e.rank
                ),
            });
            let err = RpcError::new(
                ETIMEDOUT,
                format!(
                    "no heartbeat for more than {tout}s: ranks {} are offline",
                    e.ranks
                ),
            );
            if e.whole {
                Self::reply(out, e.stream, Err(err));
            } else {
                let a = msg::AgentAnswer {
                    ended: Some(vec![msg::RanksError::new(e.ranks, &err)]),
                    ..msg::AgentAnswer::default()
                };
                Self::reply(out, e.stream, Ok(msg::encode(&a).into()));
            }
        }
    }

    /// Which relay (by hostname) spoke for which of the ranks in `sets`.
    pub(super) fn relays_via(&mut self, sets: &[&IdSet]) -> Vec<(String, IdSet)> {
        let mut changed = IdSet::new();
        for s in sets {
            changed.add(s);
        }
        self.relays
            .take_via(&changed)
            .into_iter()
            .map(|(rank, ids)| {
                let host = self
                    .state
                    .hosts
                    .get(&rank)
                    .map_or_else(|| format!("rank {rank}"), |h| h.to_string());
                (host, ids)
            })
            .collect()
    }

    /// The liveness transitions of direct agents and relays together.  A
    /// rank that moved between them within one batch is up if someone
    /// holds it now.
    pub(super) fn take_liveness_changes(&mut self) -> Changes {
        let m = self.monitor.take_changes();
        if self.relays.is_empty() && self.relays.claimed().is_empty() {
            let r = self.relays.take_changes();
            if r.is_empty() {
                return m;
            }
            return merge(m, r, |_| false);
        }
        let r = self.relays.take_changes();
        let claimed = self.relays.claimed().clone();
        let monitor = &self.monitor;
        merge(m, r, |x| claimed.contains(x) || monitor.owner(x).is_some())
    }
}

fn merge(m: Changes, r: Changes, held: impl Fn(u32) -> bool) -> Changes {
    let mut up = m.up.union(&r.up);
    let mut down = m.down.union(&r.down);
    let both = up.intersection(&down);
    for x in both.iter() {
        if held(x) {
            down.remove(x);
        } else {
            up.remove(x);
        }
    }
    let torpid = m.torpid.union(&r.torpid);
    let mut lively = m.lively.union(&r.lively);
    lively.subtract(&torpid);
    Changes {
        up,
        down,
        torpid,
        lively,
    }
}
