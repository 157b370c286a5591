//! The service loop's input lanes: client requests go before agent lines
//! and guest floods.
//!
//! Everything the listeners send arrives on one channel, in arrival
//! order.  Handled in that order, a client's `resource.status` waits
//! behind every heartbeat line taken in the same batch (up to a thousand
//! with 16k agents) and behind a guest's flood.  The loop sorts what it
//! takes into three lanes instead:
//!
//! * **client**: requests of authenticated roles (owner, admin,
//!   scheduler, user), batched up to [`MAX_CLIENT_BATCH`];
//! * **agent**: agent sessions (hellos and their lines), in chunks of
//!   [`AGENT_CHUNK`];
//! * **guest**: requests of guests, in chunks of [`AGENT_CHUNK`].
//!
//! Each batch is the waiting clients' if there are any, except that after
//! a client batch the next one goes to the agent or guest lane when either
//! waits (they alternate), so neither clients nor agents can starve the
//! other: a client waits for at most one agent or guest chunk.  Within a
//! lane the order is the arrival order.  A `Disconnect` goes to the lane
//! of the requests of its connection still waiting (so it never overtakes
//! them), else to the lane the connection's session was in (agent), else
//! to the client lane.  A connection's requests are all of one lane (a
//! connection has one role; an agent session's lines share its hello's
//! topic family).

use std::collections::{HashMap, VecDeque};

use rpc::{wire, ConnId, Role};
use transport::Incoming;

/// Most client requests handled in one batch.
pub const MAX_CLIENT_BATCH: usize = 1024;
/// Most agent lines (or guest requests) handled in one batch: what a
/// client request may have to wait for.
pub const AGENT_CHUNK: usize = 256;

/// Which lane an input waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Client,
    Agent,
    Guest,
}

impl Lane {
    /// The lane of a request.
    pub fn of(req: &rpc::Request) -> Lane {
        if req.topic == wire::SESSION_TOPIC || req.topic == wire::SESSION_LINE_TOPIC {
            Lane::Agent
        } else if req.role == Role::Guest {
            Lane::Guest
        } else {
            Lane::Client
        }
    }
}

/// Inputs taken from the listeners and not yet handled.
#[derive(Debug, Default)]
pub struct Lanes {
    client: VecDeque<Incoming>,
    agent: VecDeque<Incoming>,
    guest: VecDeque<Incoming>,
    /// Requests waiting per connection, and their lane.
    waiting: HashMap<ConnId, (Lane, usize)>,
    /// The lane of the last batch.
    last: Option<Lane>,
    /// The last of agent / guest served (they alternate).
    last_bulk: Option<Lane>,
}

impl Lanes {
    /// Inputs waiting, all lanes.
    pub fn len(&self) -> usize {
        self.client.len() + self.agent.len() + self.guest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queue one input; `agent_conn` says whether a connection with
    /// nothing waiting is an agent session's (for its `Disconnect`).
    pub fn push(&mut self, msg: Incoming, agent_conn: impl Fn(ConnId) -> bool) {
        let lane = match &msg {
            Incoming::Request { req, .. } => self.wait(req.conn, Lane::of(req)),
            Incoming::SessionLine { conn, .. } => self.wait(*conn, Lane::Agent),
            Incoming::Disconnect(conn) => match self.waiting.get(conn) {
                Some((lane, _)) => *lane,
                None if agent_conn(*conn) => Lane::Agent,
                None => Lane::Client,
            },
            // The loop drops wake-ups before they reach a lane.
            Incoming::Wake => return,
        };
        self.queue(lane).push_back(msg);
    }

    /// One more input waits from `conn`; its lane is its first one's.
    fn wait(&mut self, conn: ConnId, lane: Lane) -> Lane {
        let w = self.waiting.entry(conn).or_insert((lane, 0));
        w.1 += 1;
        w.0
    }

    fn queue(&mut self, lane: Lane) -> &mut VecDeque<Incoming> {
        match lane {
            Lane::Client => &mut self.client,
            Lane::Agent => &mut self.agent,
            Lane::Guest => &mut self.guest,
        }
    }

    /// The lane the next batch comes from (see the module doc).
    fn next_lane(&self) -> Option<Lane> {
        let bulk = match (self.agent.is_empty(), self.guest.is_empty()) {
            (true, true) => None,
            (false, true) => Some(Lane::Agent),
            (true, false) => Some(Lane::Guest),
            (false, false) if self.last_bulk == Some(Lane::Agent) => Some(Lane::Guest),
            (false, false) => Some(Lane::Agent),
        };
        if self.client.is_empty() || (self.last == Some(Lane::Client) && bulk.is_some()) {
            bulk
        } else {
            Some(Lane::Client)
        }
    }

    /// The next batch to handle (empty when nothing waits).
    pub fn next_batch(&mut self) -> Vec<Incoming> {
        let Some(lane) = self.next_lane() else {
            return Vec::new();
        };
        let max = match lane {
            Lane::Client => MAX_CLIENT_BATCH,
            Lane::Agent | Lane::Guest => AGENT_CHUNK,
        };
        self.last = Some(lane);
        if lane != Lane::Client {
            self.last_bulk = Some(lane);
        }
        let q = self.queue(lane);
        let n = q.len().min(max);
        let batch: Vec<Incoming> = q.drain(..n).collect();
        for m in &batch {
            let conn = match m {
                Incoming::Request { req, .. } => req.conn,
                Incoming::SessionLine { conn, .. } => *conn,
                _ => continue,
            };
            if let Some(w) = self.waiting.get_mut(&conn) {
                w.1 -= 1;
                if w.1 == 0 {
                    self.waiting.remove(&conn);
                }
            }
        }
        batch
    }

    /// Everything still waiting, clients first (the etcd backend hands it
    /// to the next leader).
    pub fn take_all(&mut self) -> Vec<Incoming> {
        self.waiting.clear();
        let mut all: Vec<Incoming> = self.client.drain(..).collect();
        all.extend(self.agent.drain(..));
        all.extend(self.guest.drain(..));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport::{QueueSlot, ReplySender};

    fn req(conn: ConnId, topic: &str, role: Role) -> Incoming {
        Incoming::Request {
            req: rpc::Request {
                conn,
                matchtag: 1,
                topic: topic.into(),
                payload: serde_json::Value::Null,
                streaming: false,
                role,
                userid: None,
                who: None,
            },
            replies: ReplySender::unbounded(false).0,
            slot: QueueSlot::unbounded(),
        }
    }

    /// A later line of an agent session (one-way).
    fn line(conn: ConnId) -> Incoming {
        Incoming::SessionLine {
            conn,
            payload: serde_json::json!({}),
            slot: QueueSlot::unbounded(),
        }
    }

    fn describe(batch: &[Incoming]) -> Vec<(ConnId, &'static str)> {
        batch
            .iter()
            .map(|m| match m {
                Incoming::Request { req, .. } => (
                    req.conn,
                    match Lane::of(req) {
                        Lane::Client => "client",
                        Lane::Agent => "agent",
                        Lane::Guest => "guest",
                    },
                ),
                Incoming::SessionLine { conn, .. } => (*conn, "agent"),
                Incoming::Disconnect(c) => (*c, "disconnect"),
                Incoming::Wake => (0, "wake"),
            })
            .collect()
    }

    #[test]
    fn a_client_request_goes_before_waiting_agent_lines() {
        let mut l = Lanes::default();
        for c in 0..1000 {
            l.push(line(c), |_| false);
        }
        l.push(req(5000, "resource.status", Role::Owner), |_| false);
        l.push(Incoming::Disconnect(5000), |_| false);
        let b = l.next_batch();
        assert_eq!(describe(&b), [(5000, "client"), (5000, "disconnect")]);
        // Then the agent lines, a chunk at a time, in arrival order.
        let b = l.next_batch();
        assert_eq!(b.len(), AGENT_CHUNK);
        assert_eq!(describe(&b)[0], (0, "agent"));
        assert_eq!(
            describe(&b)[AGENT_CHUNK - 1],
            (AGENT_CHUNK as u64 - 1, "agent")
        );
        // A client arriving meanwhile waits for one chunk at most.
        l.push(req(5001, "resource.sched-status", Role::User), |_| false);
        assert_eq!(describe(&l.next_batch()), [(5001, "client")]);
        assert_eq!(l.len(), 1000 - AGENT_CHUNK);
    }

    #[test]
    fn clients_cannot_starve_agents_nor_agents_guests() {
        let mut l = Lanes::default();
        for c in 0..3000 {
            l.push(req(c, "resource.status", Role::Owner), |_| false);
        }
        for c in 10_000..10_010 {
            l.push(line(c), |_| false);
        }
        for c in 20_000..20_010 {
            l.push(req(c, "resource.status", Role::Guest), |_| false);
        }
        let lanes: Vec<_> = std::iter::from_fn(|| {
            let b = l.next_batch();
            (!b.is_empty()).then(|| (describe(&b)[0].1, b.len()))
        })
        .collect();
        assert_eq!(
            lanes,
            [
                ("client", 1024),
                ("agent", 10),
                ("client", 1024),
                ("guest", 10),
                ("client", 952)
            ]
        );
    }

    #[test]
    fn a_disconnect_never_overtakes_its_requests() {
        let mut l = Lanes::default();
        let agent = |c| c == 7;
        // Agent hello and lines still waiting: the disconnect follows them.
        l.push(req(1, wire::SESSION_TOPIC, Role::Owner), agent);
        l.push(line(1), agent);
        l.push(Incoming::Disconnect(1), agent);
        // A guest's pipelined requests, then its disconnect.
        l.push(req(2, "resource.status", Role::Guest), agent);
        l.push(Incoming::Disconnect(2), agent);
        // An agent session with nothing waiting: the agent lane.
        l.push(Incoming::Disconnect(7), agent);
        // Anything else: the client lane.
        l.push(Incoming::Disconnect(8), agent);
        assert_eq!(describe(&l.next_batch()), [(8, "disconnect")]);
        assert_eq!(
            describe(&l.next_batch()),
            [
                (1, "agent"),
                (1, "agent"),
                (1, "disconnect"),
                (7, "disconnect")
            ]
        );
        assert_eq!(describe(&l.next_batch()), [(2, "guest"), (2, "disconnect")]);
        assert!(l.is_empty() && l.next_batch().is_empty());
        assert!(l.waiting.is_empty());
    }
}
