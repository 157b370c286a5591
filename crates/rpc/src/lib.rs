//! Transport-neutral RPC layer of Roster.
//!
//! Every listener (HTTP today, the Flux local connector later) turns what
//! arrives on its socket into a [`Request`] (topic, payload, streaming flag,
//! role, and the `(conn, matchtag)` pair that identifies it for
//! cancellation), hands it to the service, and carries each [`Reply`] back.
//! RFC 6 semantics hold whatever the transport:
//!
//! * a non-streaming request gets exactly one reply, a payload or an error;
//! * a streaming request gets zero or more payloads and then exactly one
//!   error, `ENODATA` being the normal end of stream;
//! * when a connection goes away the service is told ([`ConnId`]) and drops
//!   every request of that connection without answering.
//!
//! The [`wire`] module fixes how this maps onto HTTP/1.1 + NDJSON, and
//! [`uri`] the `unix://` / `tcp://` address forms.

pub mod errno;
pub mod uri;
pub mod wire;

pub use errno::RpcError;
use serde_json::Value;

/// Who is asking.  Mirrors Flux's rolemask: the instance owner (the service's
/// own uid, root, or a TCP client with the token) may do everything; a guest
/// (`FLUX_ROLE_USER`) may only read status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Owner,
    Guest,
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
}

/// One reply to a request.  For a streaming request an `Err` ends the
/// stream; for a non-streaming request the single reply ends it.
pub type Reply = Result<Value, RpcError>;

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
