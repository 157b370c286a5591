//! The topic table: every `resource.*` topic the service answers, once,
//! with the role it requires, whether it may stream, and its handler.
//! [`Service::request`] checks a request against its row and calls the
//! handler; nothing else lists topics.

use super::*;

/// Who may use a topic.  Roles are checked in the order of the table's
/// checks: unknown topic (ENOSYS), then access (EPERM), then the
/// streaming flag (EPROTO).
///
/// New roles (e.g. agent, user, scheduler, admin) are added here and in
/// [`Access::permits`]; the table rows then name the least role each
/// topic needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone who can connect (guests included): the read-only views.
    Guest,
    /// The instance owner only.
    Owner,
}

impl Access {
    /// Whether a requester with `role` may use a topic with this access.
    pub fn permits(self, role: Role) -> bool {
        match self {
            Access::Guest => true,
            Access::Owner => role == Role::Owner,
        }
    }
}

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

use Access::{Guest, Owner};
use Streaming::{One, Stream};

/// Every topic the service answers.
pub static TOPICS: &[Topic] = &[
    row("resource.status", Guest, One, Service::status_rpc),
    row(
        "resource.sched-status",
        Guest,
        One,
        Service::sched_status_rpc,
    ),
    row("resource.get", Owner, One, Service::get_rpc),
    row("resource.drain", Owner, One, Service::drain_rpc),
    row("resource.undrain", Owner, One, Service::undrain_rpc),
    row("resource.journal", Owner, Stream, Service::journal_rpc),
    row(
        "resource.journal-cancel",
        Owner,
        One,
        Service::journal_cancel,
    ),
    row("resource.reload", Owner, One, Service::reload_rpc),
    row(
        "resource.expiration-update",
        Owner,
        One,
        Service::expiration_update,
    ),
    row("resource.monitor-force-up", Owner, One, Service::force_up),
    row(
        "resource.monitor-force-down",
        Owner,
        One,
        Service::force_down,
    ),
    row("resource.monitor-waitup", Owner, One, Service::waitup),
    row("resource.acquire", Owner, Stream, Service::acquire_rpc),
    row(
        "resource.acquire-cancel",
        Owner,
        One,
        Service::acquire_cancel,
    ),
    row("resource.acquire-mute", Owner, One, Service::acquire_mute),
    row("resource.release", Owner, One, Service::release_rpc),
    row("resource.group-set", Owner, One, Service::group_set_rpc),
    row("resource.agent", Owner, Stream, Service::agent_hello),
    row(
        "resource.agent-heartbeat",
        Owner,
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
        if !t.access.permits(req.role) {
            return Err(RpcError::new(EPERM, "Request requires owner credentials"));
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
        assert_eq!(topic("resource.drain").map(|t| t.access), Some(Owner));
        assert_eq!(topic("resource.status").map(|t| t.access), Some(Guest));
        assert!(topic("resource.nosuch").is_none());
    }

    #[test]
    fn access_permits() {
        assert!(Guest.permits(Role::Guest));
        assert!(Guest.permits(Role::Owner));
        assert!(Owner.permits(Role::Owner));
        assert!(!Owner.permits(Role::Guest));
    }
}
