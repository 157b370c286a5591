//! The service's half of the topic catalogue ([`rpc::catalog`]): a
//! handler bound to each topic the service serves.  The catalogue holds
//! every fact of a topic (role, one reply or a stream, body limit, typed
//! payloads); [`Service::request`] checks a request against it, decodes
//! the typed request and calls the handler.  Nothing else lists topics.

use super::*;
use rpc::catalog::{self as cat, Call, Shape};

/// A bound handler: decodes the topic's typed request, then runs.
type Run = fn(&mut Service, f64, &Request, &mut Vec<Output>) -> Handled;

/// One topic the service serves: its catalogue entry and its handler.
#[derive(Clone, Copy)]
pub struct Topic {
    pub info: &'static cat::Topic,
    run: Run,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("info", self.info)
            .finish_non_exhaustive()
    }
}

/// The typed request of a call, or the error its malformed payload gets:
/// flux-core's bare "Protocol error" on flux topics; on Roster's own, what
/// the request is, the key and the reason.
pub(super) fn decode<C: Call>(payload: &Value) -> Result<C::Request, RpcError> {
    rpc::msg::decode(payload).map_err(|e| {
        if C::INFO.flux {
            proto()
        } else {
            RpcError::new(EPROTO, format!("{}: {e}", C::INFO.what))
        }
    })
}

/// `queries { Call => handler, ... }`: handlers that only read the
/// state, called with the decoded request alone.  Then `Call => handler`
/// or `Call => handler(args)`: the handler is called with the [`Ctx`],
/// the decoded request, then `args`.
macro_rules! bind {
    (
        queries { $($qcall:ident => $query:ident,)* }
        $($call:ident => $handler:ident $(($($arg:expr),*))?,)*
    ) => {
        /// Every topic the service serves, with its handler.
        pub static TOPICS: &[Topic] = &[$(
            Topic {
                info: &<cat::$qcall as Call>::INFO,
                run: |s, _, req, _| s.$query(decode::<cat::$qcall>(&req.payload)?),
            },
        )* $(
            Topic {
                info: &<cat::$call as Call>::INFO,
                run: |s, now, req, out| {
                    let body = decode::<cat::$call>(&req.payload)?;
                    Service::$handler(s, Ctx { now, req, out }, body $(, $($arg),*)?)
                },
            },
        )*];
    };
}

bind! {
    queries {
        Status => status_rpc,
        SchedStatus => sched_status_rpc,
        Get => get_rpc,
        Agents => agents_rpc,
        AttrGet => attr_get,
        ConfigGet => config_get,
        Summary => summary_rpc,
    }
    Drain => drain_rpc(true),
    Undrain => drain_rpc(false),
    Journal => journal_rpc,
    JournalCancel => journal_cancel,
    Reload => reload_rpc,
    ExpirationUpdate => expiration_update,
    ForceUp => force_rpc(true),
    ForceDown => force_rpc(false),
    Waitup => waitup,
    Acquire => acquire_rpc,
    AcquireCancel => acquire_cancel,
    AcquireMute => acquire_mute,
    Release => release_rpc,
    GroupSet => group_set_rpc,
    AllocatedSet => allocated_set,
    AgentHello => agent_hello,
    AgentEnrol => agent_enrol,
}

/// The session line is bound by hand: a relay's malformed line ends its
/// session, so the handler sees the decoding error.  (An agent session's
/// lines come as [`Input::SessionLine`]; this is the same line sent as a
/// request, answered.)
static SESSION_LINE: Topic = Topic {
    info: &<cat::SessionLine as Call>::INFO,
    run: |s, now, req, out| {
        let line = decode::<cat::SessionLine>(&req.payload);
        s.session_line(now, req.conn, line, out)
    },
};

/// The topic's row, if the service serves it.
pub fn topic(name: &str) -> Option<&'static Topic> {
    if name == cat::SessionLine::TOPIC {
        return Some(&SESSION_LINE);
    }
    TOPICS.iter().find(|t| t.info.name == name)
}

impl Service {
    /// Check a request against its catalogue entry and run its handler.
    pub(super) fn request(&mut self, now: f64, req: Request, out: &mut Vec<Output>) {
        let to = req.reply_to();
        let result = self.dispatch(now, &req, out);
        match result {
            Ok(Some(p)) => Self::reply(out, to, Ok(p)),
            Ok(None) => {}
            Err(e) => Self::reply(out, to, Err(e)),
        }
    }

    /// Checks, in this order: unknown topic (ENOSYS), the role (EPERM
    /// naming the missing role), the streaming flag on a one-reply topic
    /// (EPROTO), the payload (EPROTO), then the handler.
    fn dispatch(&mut self, now: f64, req: &Request, out: &mut Vec<Output>) -> Handled {
        if self.stopped {
            return Err(RpcError::new(
                ENOSYS,
                "the resource service is shutting down",
            ));
        }
        let name = req.topic.as_str();
        let Some(t) = topic(name) else {
            // flux-core's answers: a method its resource module lacks, or
            // no such service at all.
            return Err(if name.starts_with(cat::SERVICE_NAMESPACE) {
                RpcError::new(ENOSYS, "unknown service method")
            } else {
                RpcError::new(ENOSYS, format!("No service matching {name} is registered"))
            });
        };
        if !req.role.grants(t.info.need) {
            return Err(req.role.refusal(name, t.info.need));
        }
        if req.streaming && t.info.shape == Shape::One {
            // One error ends the request (and the shell's route for it):
            // a streaming client would otherwise wait for an end of
            // stream that never comes.
            return Err(RpcError::new(
                EPROTO,
                format!("{name} does not accept the streaming RPC flag"),
            ));
        }
        (t.run)(self, now, req, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc::catalog::Server;

    #[test]
    fn every_service_topic_of_the_catalogue_has_one_handler() {
        for t in cat::TOPICS {
            let row = topic(t.name);
            match t.server {
                Server::Service => {
                    let row = row.unwrap_or_else(|| panic!("{} has no handler", t.name));
                    assert_eq!(row.info, t);
                }
                Server::Absent => assert!(row.is_none(), "{}", t.name),
            }
        }
        let served = cat::TOPICS.iter().filter(|t| t.server == Server::Service);
        assert_eq!(TOPICS.len() + 1, served.count());
        assert!(topic("resource.nosuch").is_none());
    }
}
