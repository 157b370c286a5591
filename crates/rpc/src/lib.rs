//! Transport-neutral RPC layer of Roster.
//!
//! Every listener (HTTP/NDJSON on unix:// and tcp://, the Flux local
//! connector on flux://) turns what arrives on its socket into a
//! [`Request`] (topic, payload, streaming flag, role, and the
//! `(conn, matchtag)` pair that identifies it for cancellation), hands it
//! to the service, and carries each [`Reply`] back.
//! RFC 6 semantics hold whatever the transport:
//!
//! * a non-streaming request gets exactly one reply, a payload or an error;
//! * a streaming request gets zero or more payloads and then exactly one
//!   error, `ENODATA` being the normal end of stream;
//! * when a connection goes away the service is told ([`ConnId`]) and drops
//!   every request of that connection without answering.
//!
//! The [`wire`] module fixes how this maps onto HTTP/1.1 + NDJSON, and
//! [`uri`] the `unix://` / `tcp://` / `tls://` / `flux://` address forms.

pub mod catalog;
pub mod errno;
pub mod events;
pub mod msg;
pub mod relay;
pub mod uri;
pub mod wire;

pub use errno::RpcError;
use serde_json::Value;
use std::sync::Arc;

/// The flux-core version whose wire behaviour Roster follows (reported,
/// with Roster's own version appended, as the `version` attribute).
pub const FLUX_VERSION: &str = "0.88.0";

/// Who is asking: the one role a connection's credentials carry.
///
/// Unix-socket peers are [`Role::Owner`] (the service's own uid or root)
/// or [`Role::Guest`] (any other uid), as Flux's rolemask owner/user.
/// TLS clients get their role from their certificate or from the token
/// they present (see `[serve.auth]`); a bearer token on loopback TCP too.
/// What each role may do is [`Role::grants`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// Everything, including an agent session for any host.
    Owner,
    /// Changes to the inventory's state (drain, undrain, reload,
    /// expiration-update, monitor-force-*), and what a user may read.
    Admin,
    /// The scheduler protocol (acquire, release, group-set), and what a
    /// user may read.
    Scheduler,
    /// Reading: status, sched-status, get, the journal (eventlog).
    User,
    /// A Unix-socket peer that is not the owner: status and sched-status
    /// only (flux-core's guest rule).
    Guest,
    /// The agent of the host named: its own agent session, nothing else.
    Agent(Arc<str>),
    /// The agent of the host named that may also open a relay session
    /// (speak for the subtree the service assigns it): `[serve.auth]
    /// relay`, or a certificate with `OU=relay`.
    Relay(Arc<str>),
    /// The holder of the enrolment token (`[serve.auth]
    /// enrol-token-file`): it may only ask for the agent certificate of a
    /// host of the cluster (`resource.agent-enrol`), nothing else.
    Enrol,
}

/// What a request needs, one per topic (see [`Role::grants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// Anyone but an agent (guests too): status, sched-status.
    Read,
    /// The `user` role (or better): get, journal, monitor-waitup.
    User,
    /// The `scheduler` role: acquire, release, group-set.
    Scheduler,
    /// The `admin` role: drain, undrain, reload, expiration-update,
    /// monitor-force-up/down.
    Admin,
    /// An agent (or the owner): the agent session.
    Agent,
    /// The enrolment token (or the owner): an agent certificate.
    Enrol,
}

impl Need {
    /// The role that would satisfy it, as error messages name it.
    pub fn role_name(self) -> &'static str {
        match self {
            Need::Read | Need::User => "user",
            Need::Scheduler => "scheduler",
            Need::Admin => "admin",
            Need::Agent => "agent",
            Need::Enrol => "enrol",
        }
    }
}

impl Role {
    /// Does this role allow what `need` asks for?
    pub fn grants(&self, need: Need) -> bool {
        match (self, need) {
            (Role::Owner, _) => true,
            (Role::Agent(_) | Role::Relay(_), n) => n == Need::Agent,
            (Role::Enrol, n) => n == Need::Enrol,
            (_, Need::Read) => true,
            (Role::Admin | Role::Scheduler | Role::User, Need::User) => true,
            (Role::Admin, Need::Admin) => true,
            (Role::Scheduler, Need::Scheduler) => true,
            _ => false,
        }
    }

    /// The role's name (`owner`, `admin`, `scheduler`, `user`, `guest`,
    /// `agent`).
    pub fn name(&self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Scheduler => "scheduler",
            Role::User => "user",
            Role::Guest => "guest",
            Role::Agent(_) => "agent",
            Role::Relay(_) => "relay",
            Role::Enrol => "enrol",
        }
    }

    /// The host an agent or relay credential speaks for.
    pub fn agent_host(&self) -> Option<&str> {
        match self {
            Role::Agent(h) | Role::Relay(h) => Some(h),
            _ => None,
        }
    }

    /// The refusal of a request this role may not make: EPERM naming the
    /// missing role.  Guests (Unix peers) get flux-core's text.
    pub fn refusal(&self, topic: &str, need: Need) -> RpcError {
        match self {
            Role::Guest => RpcError::new(errno::EPERM, "Request requires owner credentials"),
            Role::Agent(host) | Role::Relay(host) => RpcError::new(
                errno::EPERM,
                format!(
                    "{topic} requires the {} role: this client is the {} of {host}, which may only hold its own agent session",
                    need.role_name(),
                    self.name()
                ),
            ),
            r => RpcError::new(
                errno::EPERM,
                format!(
                    "{topic} requires the {} role (this client has the {} role)",
                    need.role_name(),
                    r.name()
                ),
            ),
        }
    }
}

/// One client connection (assigned by the listener, unique for the life of
/// the service process).  All outstanding requests of a connection end
/// silently when it disconnects.
pub type ConnId = u64;

/// A request as the service core sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub conn: ConnId,
    /// Identifies the request within its connection, for replies and for
    /// `*-cancel {matchtag}` requests.  Listeners without matchtags number
    /// requests themselves.
    pub matchtag: u32,
    /// e.g. `resource.drain`.
    pub topic: String,
    /// The JSON payload; `Value::Null` when the request carried none.
    pub payload: Value,
    /// The client asked for a streaming reply (RFC 6 `FLUX_MSGFLAG_STREAMING`).
    pub streaming: bool,
    pub role: Role,
    /// The client's uid when the transport knows it (Unix peer credentials).
    pub userid: Option<u32>,
    /// Who sent it, when the transport or the shell can name them beyond
    /// the uid: `cert:NAME` (a TLS client certificate), `token:ROLE` (a
    /// bearer token), `alice (uid 1000)` (the shell resolved the uid).
    /// Recorded as the requester of a drain or undrain; `None`: the core
    /// names the uid, else the role.
    pub who: Option<Arc<str>>,
}

/// The payload of a successful reply: a JSON value, or the same value
/// already serialised.
///
/// [`Payload::Json`] lets the service serialise a large or often repeated
/// payload once (a cached `resource.sched-status`, a journal batch sent to
/// many followers) and have every transport write those bytes as they are.
/// Both forms mean the same JSON value; transports put exactly the bytes
/// `serde_json::to_string` would produce for the value on the wire, so the
/// choice never changes what a client receives.
///
/// The value is boxed: a `serde_json::Value` is 72 bytes (an ordered map
/// inline), and every open request's reply queue reserves room for 32
/// replies up front (tokio's channel block): 2.3 KB per agent session
/// unboxed, 1 KB boxed (a reply is then 32 bytes).
#[derive(Debug, Clone)]
pub enum Payload {
    Value(Box<Value>),
    /// Compact JSON text (as `serde_json::to_string` writes it) of a value
    /// other than `null`, shared between replies.
    Json(Arc<str>),
}

impl Payload {
    /// Pre-serialised JSON; see [`Payload::Json`] for what `text` must be.
    pub fn json(text: impl Into<Arc<str>>) -> Payload {
        Payload::Json(text.into())
    }

    /// Serialise `v` once (compact, as the transports would).
    pub fn serialised(v: &Value) -> Payload {
        let text = serde_json::to_string(v).unwrap_or_else(|_| String::from("null"));
        Payload::Json(text.into())
    }

    /// True for the empty payload (`null`).
    pub fn is_null(&self) -> bool {
        match self {
            Payload::Value(v) => v.is_null(),
            Payload::Json(s) => &**s == "null",
        }
    }

    /// The payload as a value (parses the text of [`Payload::Json`]; text
    /// that is not JSON, which the service never produces, reads as
    /// `null`).
    pub fn to_value(&self) -> Value {
        match self {
            Payload::Value(v) => (**v).clone(),
            Payload::Json(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        }
    }

    /// [`Payload::to_value`], taking ownership.
    pub fn into_value(self) -> Value {
        match self {
            Payload::Value(v) => *v,
            json @ Payload::Json(_) => json.to_value(),
        }
    }

    /// The compact JSON text of the payload (`null` for no payload).
    pub fn to_json(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Payload::Value(v) => serde_json::to_string(v)
                .unwrap_or_else(|_| String::from("null"))
                .into(),
            Payload::Json(s) => std::borrow::Cow::Borrowed(s),
        }
    }
}

impl From<Value> for Payload {
    fn from(v: Value) -> Payload {
        Payload::Value(Box::new(v))
    }
}

/// Equal when they mean the same JSON value, whatever their forms.
impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        match (self, other) {
            (Payload::Value(a), Payload::Value(b)) => a == b,
            (Payload::Json(a), Payload::Json(b)) if a == b => true,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl PartialEq<Value> for Payload {
    fn eq(&self, other: &Value) -> bool {
        match self {
            Payload::Value(v) => **v == *other,
            Payload::Json(_) => self.to_value() == *other,
        }
    }
}

/// One reply to a request.  For a streaming request an `Err` ends the
/// stream; for a non-streaming request the single reply ends it.
pub type Reply = Result<Payload, RpcError>;

/// Where a reply goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    pub conn: ConnId,
    pub matchtag: u32,
}

impl Request {
    pub fn reply_to(&self) -> ReplyTo {
        ReplyTo {
            conn: self.conn,
            matchtag: self.matchtag,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_grant_what_they_name() {
        use Need::*;
        let agent = Role::Agent("n1".into());
        for need in [Read, User, Scheduler, Admin, Agent] {
            assert!(Role::Owner.grants(need));
            assert_eq!(agent.grants(need), need == Agent, "{need:?}");
        }
        assert!(Role::Guest.grants(Read));
        assert!(!Role::Guest.grants(User));
        assert!(Role::User.grants(User) && !Role::User.grants(Scheduler));
        assert!(Role::Scheduler.grants(Scheduler) && !Role::Scheduler.grants(Admin));
        assert!(Role::Admin.grants(Admin) && !Role::Admin.grants(Scheduler));
        assert!(!Role::Admin.grants(Agent));
    }

    #[test]
    fn refusals_name_the_missing_role() {
        let e = Role::Scheduler.refusal("resource.drain", Need::Admin);
        assert_eq!(e.errnum, errno::EPERM);
        assert_eq!(
            e.message(),
            "resource.drain requires the admin role (this client has the scheduler role)"
        );
        let e = Role::Agent("n1".into()).refusal("resource.drain", Need::Admin);
        assert!(e.message().contains("agent of n1"), "{}", e.message());
        let e = Role::Guest.refusal("resource.drain", Need::Admin);
        assert_eq!(e.message(), "Request requires owner credentials");
    }
}
