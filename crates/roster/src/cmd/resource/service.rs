//! The RPCs `roster resource` makes, behind a small trait so that the
//! subcommands can be tested against a fake service.

use rpc::catalog::{self as cat, Call};
use rpc::errno::EPROTO;
use rpc::msg;
use rpc::RpcError;
use serde_json::Value;
use std::time::Duration;

/// Why an RPC produced no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SvcError {
    /// The service could not be reached: `cannot connect to URI: reason`.
    Connect(String),
    /// The service answered with an error (errno and optional text).
    Rpc(RpcError),
}

impl SvcError {
    /// The errno (`EPROTO` for failures outside the RPC layer).
    pub fn errnum(&self) -> i32 {
        match self {
            SvcError::Connect(_) => EPROTO,
            SvcError::Rpc(e) => e.errnum,
        }
    }

    /// What flux's `CLIMain` prints for the exception (`strerror`): the
    /// error text, else `strerror(errno)`.
    pub fn message(&self) -> String {
        match self {
            SvcError::Connect(m) => m.clone(),
            SvcError::Rpc(e) => e.message(),
        }
    }

    /// `str(OSError)`: `[Errno N] text`.
    pub fn os_error_str(&self) -> String {
        match self {
            SvcError::Connect(m) => m.clone(),
            SvcError::Rpc(e) => format!("[Errno {}] {}", e.errnum, e.message()),
        }
    }

    /// An error reply.
    #[cfg(test)]
    pub fn rpc(errnum: i32, errstr: &str) -> SvcError {
        SvcError::Rpc(RpcError::new(errnum, errstr))
    }
}

/// One message of a streaming reply, as the reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// A response payload.
    Payload(Value),
    /// The stream ended with this error (ENODATA is the normal end).
    End(SvcError),
    /// Nothing arrived within the timeout given to [`ReplyStream::next`].
    Timeout,
}

/// The responses of a streaming RPC.
pub trait ReplyStream {
    /// The next response, waiting at most `timeout` (forever if None).
    /// After `End`, further calls return `End` again.
    fn next(&mut self, timeout: Option<Duration>) -> StreamItem;
}

/// The service, as `roster resource` uses it.  Implementations connect
/// lazily: nothing happens until the first RPC, as with `flux.Flux()`
/// being created only once a subcommand needs it.
pub trait Service {
    /// A request with one response.  `Value::Null` means no payload (in
    /// both directions).
    fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, SvcError>;
    /// A streaming request.
    fn stream(&mut self, topic: &str, payload: Value) -> Result<Box<dyn ReplyStream>, SvcError>;
    /// The `resource.journal` stream (flux's request by default; Roster's
    /// client resumes it across restarts and failovers).
    fn journal(&mut self) -> Result<Box<dyn ReplyStream>, SvcError> {
        open::<cat::Journal>(self, &Default::default())
    }
    /// Roster's `resource.summary` (what `status` and `list` print,
    /// computed by the service), from a service that may offer it; `None`
    /// when it does not (ENOSYS from a Flux instance or an older Roster,
    /// any other failure) or is not asked (a scripted test service
    /// without one).
    fn summary(&mut self, _req: &msg::SummaryRequest) -> Option<Value> {
        None
    }
}

/// A typed request of the catalogue, one reply.
pub fn call<C: Call>(
    svc: &mut (impl Service + ?Sized),
    req: &C::Request,
) -> Result<Value, SvcError> {
    svc.rpc(C::TOPIC, msg::encode(req))
}

/// A typed streaming request of the catalogue.
pub fn open<C: Call>(
    svc: &mut (impl Service + ?Sized),
    req: &C::Request,
) -> Result<Box<dyn ReplyStream>, SvcError> {
    svc.stream(C::TOPIC, msg::encode(req))
}
