//! The topic table: every `resource.*` topic the service answers, once,
//! with the role it requires, whether it may stream, and its handler.
//! [`Service::request`] checks a request against its row and calls the
//! handler; nothing else lists topics.

use super::*;

/// Who may use a topic: the least role it needs ([`rpc::Need`]; the
/// owner may use every topic, an agent only its session).  Checks run in
/// this order: unknown topic (ENOSYS), then the role (EPERM naming the
/// missing role), then the streaming flag on a one-reply topic (EPROTO),
/// then the handler.
pub use rpc::Need as Access;

/// How a topic answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streaming {
    /// Exactly one reply.  A request with the streaming flag is refused
    /// with one EPROTO error (a streaming client would otherwise wait for
    /// an end of stream that never comes).
    One,
    /// A stream of replies ended by one error.  Whether the flag is
    /// required is the handler's decision (flux-core: the journal and the
    /// agent hello refuse a request without it; acquire accepts it).
    Stream,
}

/// A handler: the service, the time, the request, the outputs.
pub type Handler = fn(&mut Service, f64, &Request, &mut Vec<Output>) -> Handled;

/// One row of the topic table.
#[derive(Clone, Copy)]
pub struct Topic {
    pub name: &'static str,
    pub access: Access,
    pub streaming: Streaming,
    handler: Handler,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("access", &self.access)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

const fn row(name: &'static str, access: Access, streaming: Streaming, handler: Handler) -> Topic {
    Topic {
        name,
        access,
        streaming,
        handler,
    }
}

use rpc::Need::{Admin, Agent, Read, Scheduler, User};
use Streaming::{One, Stream};

/// Every topic the service answers.
pub static TOPICS: &[Topic] = &[
    row("resource.status", Read, One, Service::status_rpc),
    row(
        "resource.sched-status",
        Read,
        One,
        Service::sched_status_rpc,
    ),
    row("resource.get", User, One, Service::get_rpc),
    row("resource.drain", Admin, One, Service::drain_rpc),
    row("resource.undrain", Admin, One, Service::undrain_rpc),
    row("resource.journal", User, Stream, Service::journal_rpc),
    row(
        "resource.journal-cancel",
        User,
        One,
        Service::journal_cancel,
    ),
    row("resource.reload", Admin, One, Service::reload_rpc),
    row(
        "resource.expiration-update",
        Admin,
        One,
        Service::expiration_update,
    ),
    row("resource.monitor-force-up", Admin, One, Service::force_up),
    row(
        "resource.monitor-force-down",
        Admin,
        One,
        Service::force_down,
    ),
    row("resource.monitor-waitup", User, One, Service::waitup),
    row("resource.acquire", Scheduler, Stream, Service::acquire_rpc),
    row(
        "resource.acquire-cancel",
        Scheduler,
        One,
        Service::acquire_cancel,
    ),
    row(
        "resource.acquire-mute",
        Scheduler,
        One,
        Service::acquire_mute,
    ),
    row("resource.release", Scheduler, One, Service::release_rpc),
    row("resource.group-set", Scheduler, One, Service::group_set_rpc),
    row("resource.agent", Agent, Stream, Service::agent_hello),
    row(
        "resource.agent-heartbeat",
        Agent,
        One,
        Service::agent_heartbeat,
    ),
];

/// The row of a topic.
pub fn topic(name: &str) -> Option<&'static Topic> {
    TOPICS.iter().find(|t| t.name == name)
}

impl Service {
    /// Check a request against its row of [`TOPICS`] and run its handler.
    pub(super) fn request(&mut self, now: f64, req: Request, out: &mut Vec<Output>) {
        let to = req.reply_to();
        let result = self.dispatch(now, &req, out);
        match result {
            Ok(Some(p)) => Self::reply(out, to, Ok(p)),
            Ok(None) => {}
            Err(e) => Self::reply(out, to, Err(e)),
        }
    }

    fn dispatch(&mut self, now: f64, req: &Request, out: &mut Vec<Output>) -> Handled {
        if self.stopped {
            return Err(RpcError::new(
                ENOSYS,
                "the resource service is shutting down",
            ));
        }
        let name = req.topic.as_str();
        if !name.starts_with("resource.") {
            return Err(RpcError::new(
                ENOSYS,
                format!("No service matching {name} is registered"),
            ));
        }
        let Some(t) = topic(name) else {
            return Err(RpcError::new(ENOSYS, "unknown service method"));
        };
        if !req.role.grants(t.access) {
            return Err(req.role.refusal(name, t.access));
        }
        if req.streaming && t.streaming == Streaming::One {
            // One error ends the request (and the shell's route for it):
            // a streaming client would otherwise wait for an end of
            // stream that never comes.
            return Err(RpcError::new(
                EPROTO,
                format!("{name} does not accept the streaming RPC flag"),
            ));
        }
        (t.handler)(self, now, req, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_unique_and_in_the_resource_namespace() {
        let mut names: Vec<&str> = TOPICS.iter().map(|t| t.name).collect();
        assert!(names.iter().all(|n| n.starts_with("resource.")));
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a topic is listed twice");
        assert_eq!(topic("resource.drain").map(|t| t.access), Some(Admin));
        assert_eq!(topic("resource.status").map(|t| t.access), Some(Read));
        assert_eq!(topic("resource.agent").map(|t| t.access), Some(Agent));
        assert!(topic("resource.nosuch").is_none());
    }

    #[test]
    fn every_role_need_is_named() {
        // The table names a need for every topic and the owner passes all.
        for t in TOPICS {
            assert!(Role::Owner.grants(t.access), "{}", t.name);
        }
        assert!(Role::Guest.grants(Read));
        assert!(!Role::Guest.grants(User));
        assert!(!Role::Scheduler.grants(Admin));
        assert!(Role::Admin.grants(User));
        assert!(!Role::Agent("n1".into()).grants(Read));
        assert!(Role::Agent("n1".into()).grants(Agent));
        assert!(!Role::User.grants(Scheduler));
    }
}
