//! The errno values Flux puts on the wire (Linux numbering, as RFC 6 says).

pub const ENOENT: i32 = 2;
pub const EEXIST: i32 = 17;
pub const EINVAL: i32 = 22;
pub const ENOSYS: i32 = 38;
pub const ENODATA: i32 = 61;
pub const EPROTO: i32 = 71;
pub const ECANCELED: i32 = 125;
pub const EBUSY: i32 = 16;
pub const EPERM: i32 = 1;

/// An RPC error as RFC 6 carries it: an errno and an optional human-readable text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.errstr.as_deref().unwrap_or("(no message)"))]
pub struct RpcError {
    pub errnum: i32,
    pub errstr: Option<String>,
}

impl RpcError {
    pub fn new(errnum: i32, errstr: impl Into<String>) -> Self {
        RpcError {
            errnum,
            errstr: Some(errstr.into()),
        }
    }
    pub fn bare(errnum: i32) -> Self {
        RpcError {
            errnum,
            errstr: None,
        }
    }
}
