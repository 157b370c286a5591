//! The topic catalogue: every topic a Roster client may send, once.
//!
//! Each topic is one [`Call`] type here: its name, the role it needs, one
//! reply or a stream, whether it changes nothing (read-only), whether a
//! standby answers it, the largest request body it takes, who serves it,
//! and its typed request and response ([`crate::msg`]).  The service
//! core binds a handler to each topic it serves, the listeners take the
//! role, streaming and size facts from here, the clients build the typed
//! requests, and `.ci/topics.py` fails CI when a topic name is written
//! anywhere else (tests and docs aside).
//!
//! ```
//! use rpc::catalog::{self, Call, Drain};
//! assert_eq!(Drain::TOPIC, "resource.drain");
//! let t = catalog::lookup("resource.drain").unwrap();
//! assert_eq!(t.need, rpc::Need::Admin);
//! assert!(!t.read_only);
//! ```

use crate::msg;
use crate::{Need, Role};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// How a topic answers (RFC 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Exactly one reply.  A request with the streaming flag is refused
    /// with one EPROTO error.
    One,
    /// A stream of replies ended by one error (ENODATA normally).
    Stream,
}

/// Who answers a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The service core (`crates/core`, one handler per topic).
    Service,
    /// Nobody: a flux-core topic that flux's own tools send and that
    /// Roster does not implement (the answer is ENOSYS, as a Flux
    /// instance without that module gives).  Listed so that clients and
    /// metrics name it from here.
    Absent,
}

/// The largest request body of a topic's ordinary requests.
pub const SMALL_BODY: usize = 64 << 10;
/// A body whose only bound is the listener's `max-request-bytes`
/// (targets of a drain may name every host of a big cluster).
pub const CONFIGURED: usize = usize::MAX;

/// The facts of one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topic {
    pub name: &'static str,
    /// The least role it needs (the owner may use every topic; an agent
    /// only its session topics).
    pub need: Need,
    pub shape: Shape,
    /// Changes nothing: a client may send it again after a transient
    /// failure, on another server.
    pub read_only: bool,
    /// A standby of a highly available service answers it from its own
    /// copy of the state (the others are refused "not the leader").
    pub standby: bool,
    /// The largest request body, in bytes, any role may send
    /// ([`CONFIGURED`]: the listener's `max-request-bytes`).
    pub max_body: usize,
    pub server: Server,
    /// A flux-core topic: malformed requests get flux-core's answer
    /// (EPROTO "Protocol error"); Roster's own topics name what was wrong,
    /// after [`Topic::what`].
    pub flux: bool,
    /// What a request is called in error messages (`agent hello`).
    pub what: &'static str,
    /// Its one reply may wait for a later state (not given in the batch
    /// that handles the request): while it waits, the listener watches
    /// for the client's end and tells the service.  The others are
    /// answered in their own batch.
    pub later: bool,
}

impl Topic {
    const fn new(name: &'static str, need: Need, shape: Shape) -> Topic {
        Topic {
            name,
            need,
            shape,
            read_only: false,
            standby: false,
            max_body: SMALL_BODY,
            server: Server::Service,
            flux: true,
            what: name,
            later: false,
        }
    }

    const fn later(mut self) -> Topic {
        self.later = true;
        self
    }

    const fn read_only(mut self) -> Topic {
        self.read_only = true;
        self
    }

    const fn standby(mut self) -> Topic {
        self.read_only = true;
        self.standby = true;
        self
    }

    const fn body(mut self, max: usize) -> Topic {
        self.max_body = max;
        self
    }

    const fn roster(mut self, what: &'static str) -> Topic {
        self.flux = false;
        self.what = what;
        self
    }

    const fn absent(mut self) -> Topic {
        self.server = Server::Absent;
        self
    }

    /// The largest body `role` may send on this topic: 0 when the role
    /// may not use the topic at all (the listener refuses before reading
    /// the body), else [`Topic::max_body`] ([`CONFIGURED`] meaning the
    /// listener's own limit).
    pub fn max_body_for(&self, role: &Role) -> usize {
        if role.grants(self.need) {
            self.max_body
        } else {
            0
        }
    }
}

/// One topic: its facts and its typed payloads.
pub trait Call {
    /// The topic's name, e.g. `resource.drain`.
    const TOPIC: &'static str = Self::INFO.name;
    const INFO: Topic;
    /// The request payload.  Unknown keys are accepted and ignored, as
    /// flux-core's services do; an absent payload reads as `{}`.
    type Request: Serialize + DeserializeOwned;
    /// The payload of each successful reply.
    type Response: Serialize + DeserializeOwned;
}

macro_rules! topics {
    ($( $(#[$doc:meta])* $ty:ident = $info:expr => $req:ty, $resp:ty; )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Call for $ty {
                const INFO: Topic = $info;
                type Request = $req;
                type Response = $resp;
            }
        )*
        /// Every topic, in the catalogue's order.
        pub static TOPICS: &[Topic] = &[$(<$ty as Call>::INFO),*];
    };
}

use Need::{Admin, Agent, Enrol, Read, Scheduler, User};
use Shape::{One, Stream};

topics! {
    /// `resource.status`: R without `scheduling`, drains, online,
    /// offline, excluded and torpid targets.
    Status = Topic::new("resource.status", Read, One).standby()
        => msg::Empty, msg::StatusResponse;
    /// `resource.sched-status`: the scheduler's view (R of all, up,
    /// down, allocated), as flux-core's.
    SchedStatus = Topic::new("resource.sched-status", Read, One).standby()
        => msg::Empty, msg::SchedStatusResponse;
    /// `resource.summary {list?}` (Roster's): the sets `status`, the
    /// drain listing and (asked for) `list` print, computed once per
    /// state change by the service.
    Summary = Topic::new("resource.summary", Read, One).standby().roster("summary")
        => msg::SummaryRequest, msg::SummaryResponse;
    /// `resource.get`: the whole R and its `resource-define` method.
    Get = Topic::new("resource.get", User, One).standby()
        => msg::Empty, msg::GetResponse;
    /// `resource.drain {targets, reason?, mode?}`.
    Drain = Topic::new("resource.drain", Admin, One).body(CONFIGURED)
        => msg::DrainRequest, msg::Empty;
    /// `resource.undrain {targets, reason?, mode?}`.
    Undrain = Topic::new("resource.undrain", Admin, One).body(CONFIGURED)
        => msg::DrainRequest, msg::Empty;
    /// `resource.journal {position?}`: the RFC 44 journal, streamed.
    Journal = Topic::new("resource.journal", User, Stream).read_only()
        => msg::JournalRequest, msg::JournalResponse;
    /// `resource.journal-cancel {matchtag}`: end this connection's
    /// journal stream of that matchtag.
    JournalCancel = Topic::new("resource.journal-cancel", User, One)
        => msg::CancelRequest, msg::Empty;
    /// `resource.reload {path, xml, force}`.
    Reload = Topic::new("resource.reload", Admin, One).later()
        => msg::ReloadRequest, msg::Empty;
    /// `resource.expiration-update {expiration}`.
    ExpirationUpdate = Topic::new("resource.expiration-update", Admin, One)
        => msg::ExpirationRequest, msg::Empty;
    /// `resource.monitor-force-up {ranks?}` (a test hook).
    ForceUp = Topic::new("resource.monitor-force-up", Admin, One)
        => msg::ForceRequest, msg::Empty;
    /// `resource.monitor-force-down {ranks}` (a test hook).
    ForceDown = Topic::new("resource.monitor-force-down", Admin, One)
        => msg::ForceRequest, msg::Empty;
    /// `resource.monitor-waitup {up}`: answered once exactly `up`
    /// targets are online.
    Waitup = Topic::new("resource.monitor-waitup", User, One).read_only().later()
        => msg::WaitupRequest, msg::Empty;
    /// `resource.acquire {group?}` (RFC 28, both variants), streamed.
    Acquire = Topic::new("resource.acquire", Scheduler, Stream)
        => msg::AcquireRequest, msg::AcquireResponse;
    /// `resource.acquire-cancel {matchtag}`.
    AcquireCancel = Topic::new("resource.acquire-cancel", Scheduler, One)
        => msg::CancelRequest, msg::Empty;
    /// `resource.acquire-mute`: no more updates on the caller's acquire
    /// streams (a scheduler unloading).
    AcquireMute = Topic::new("resource.acquire-mute", Scheduler, One)
        => msg::Empty, msg::Empty;
    /// `resource.release {group, targets}` (groups variant).
    Release = Topic::new("resource.release", Scheduler, One).body(CONFIGURED)
        => msg::TargetsOfGroup, msg::Empty;
    /// `resource.group-set {group, targets}` (Roster's: set a group).
    GroupSet = Topic::new("resource.group-set", Scheduler, One).body(CONFIGURED).roster("group-set")
        => msg::TargetsOfGroup, msg::Empty;
    /// `resource.allocated-set {targets}` (Roster's): what a scheduler
    /// has allocated, shown as `allocated` by `sched-status` (by
    /// credential, until replaced; not persisted).
    AllocatedSet = Topic::new("resource.allocated-set", Scheduler, One).body(CONFIGURED).roster("allocated-set")
        => msg::AllocatedSetRequest, msg::Empty;
    /// `resource.agent {hostname, R?, rank?, relay?}`: the hello of an
    /// agent (or relay) session; the welcome and later answers stream.
    AgentHello = Topic::new("resource.agent", Agent, Stream).body(1 << 20).roster("agent hello")
        => msg::AgentHello, msg::AgentAnswer;
    /// `resource.agents {targets?}` (Roster's): each rank's last
    /// heartbeat and agent version (`roster resource show`).
    Agents = Topic::new("resource.agents", User, One).read_only().roster("agents")
        => msg::AgentsRequest, msg::AgentsResponse;
    /// `resource.agent-enrol {hostname, csr}` (Roster's): the agent
    /// certificate of a host of R, signed by the service's CA (`[serve]
    /// enrol-ca`), for the holder of the enrolment token.
    AgentEnrol = Topic::new("resource.agent-enrol", Enrol, One).roster("agent enrol").later()
        => msg::AgentEnrolRequest, msg::AgentEnrolResponse;
    /// A later line of an agent session: a heartbeat (`{}`), or a relay's
    /// batch (`msg::RelayLine`).  One-way: nothing answers it.
    SessionLine = Topic::new("resource.agent-heartbeat", Agent, One).body(1 << 20).roster("relay line")
        => msg::RelayLine, msg::Empty;
    /// `attr.get {name}`: broker attributes flux's tools ask for
    /// (answered by the Flux listener from the service's R).
    AttrGet = Topic::new("attr.get", Read, One).standby()
        => msg::AttrGetRequest, msg::AttrGetResponse;
    /// `config.get`: the instance configuration flux's tools read (the
    /// `[queues]` table, when configured).
    ConfigGet = Topic::new("config.get", Read, One).standby()
        => msg::Empty, msg::ConfigGetResponse;
    /// `job-manager.stats-get`: flux's `resource status` asks it for the
    /// ranks running housekeeping; Roster has no job manager.
    JobStats = Topic::new("job-manager.stats-get", Read, One).standby().absent()
        => msg::Empty, msg::Empty;
    /// `sched.resource-status`: flux's `resource list` tries it before
    /// `resource.sched-status`; Roster has no scheduler module.
    SchedResourceStatus = Topic::new("sched.resource-status", Read, One).standby().absent()
        => msg::Empty, msg::SchedStatusResponse;
}

/// The facts of a topic, if it is one.
pub fn lookup(name: &str) -> Option<&'static Topic> {
    TOPICS.iter().find(|t| t.name == name)
}

/// The largest request body `role` may send on `topic`, known before the
/// body is read: 0 when the role may not use the topic, [`SMALL_BODY`]
/// for a topic not in the catalogue (the answer is ENOSYS anyway), and
/// [`CONFIGURED`] where only the listener's `max-request-bytes` bounds
/// it.  Listeners apply `min(this, their own limit for the role)`.
pub fn max_body(topic: &str, role: &Role) -> usize {
    match lookup(topic) {
        Some(t) => t.max_body_for(role),
        None => SMALL_BODY,
    }
}

/// The service's namespace: a Flux instance with the resource module
/// loaded routes every `resource.*` request to it (an unknown method is
/// the module's ENOSYS, not the broker's).
pub const SERVICE_NAMESPACE: &str = "resource.";

/// Whether the service is where `topic` goes: its namespace, or a topic
/// of another namespace the catalogue says the service answers.
pub fn served(topic: &str) -> bool {
    topic.starts_with(SERVICE_NAMESPACE)
        || lookup(topic).is_some_and(|t| t.server == Server::Service)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Topics a standby answers itself.
    fn standby_topics() -> impl Iterator<Item = &'static Topic> {
        TOPICS
            .iter()
            .filter(|t| t.standby && t.server == Server::Service)
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = TOPICS.iter().map(|t| t.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn standby_topics_change_nothing() {
        for t in TOPICS {
            assert!(!t.standby || t.read_only, "{}", t.name);
            assert!(
                !t.read_only || matches!(t.need, Read | User),
                "{} is read-only but needs {:?}",
                t.name,
                t.need
            );
        }
        let names: Vec<&str> = standby_topics().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                Status::TOPIC,
                SchedStatus::TOPIC,
                Summary::TOPIC,
                Get::TOPIC,
                AttrGet::TOPIC,
                ConfigGet::TOPIC
            ]
        );
    }

    #[test]
    fn bodies_are_bounded_by_role() {
        let agent = Role::Agent("n1".into());
        assert_eq!(max_body(Drain::TOPIC, &agent), 0);
        assert_eq!(max_body(Drain::TOPIC, &Role::Guest), 0);
        assert_eq!(max_body(Drain::TOPIC, &Role::Admin), CONFIGURED);
        assert_eq!(max_body(AgentHello::TOPIC, &agent), 1 << 20);
        assert_eq!(max_body(Status::TOPIC, &agent), 0);
        assert_eq!(max_body(Status::TOPIC, &Role::Guest), SMALL_BODY);
        assert_eq!(max_body("resource.nosuch", &Role::Owner), SMALL_BODY);
        assert_eq!(max_body(Reload::TOPIC, &Role::Owner), SMALL_BODY);
    }
}
