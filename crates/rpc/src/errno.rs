//! Errno values as Flux puts them on the wire (Linux numbering, RFC 6) and
//! the RPC error type.

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const EIO: i32 = 5;
pub const EAGAIN: i32 = 11;
pub const ENOMEM: i32 = 12;
pub const EBUSY: i32 = 16;
pub const EEXIST: i32 = 17;
pub const EINVAL: i32 = 22;
pub const ERANGE: i32 = 34;
pub const ENOSYS: i32 = 38;
pub const ENODATA: i32 = 61;
pub const EPROTO: i32 = 71;
pub const EOVERFLOW: i32 = 75;
pub const ECANCELED: i32 = 125;
pub const EHOSTUNREACH: i32 = 113;
pub const ECONNRESET: i32 = 104;
pub const ETIMEDOUT: i32 = 110;

/// An RPC error as RFC 6 carries it: an errno and an optional text.
/// Displays as the text, or as `strerror(errnum)` when there is none (what
/// flux's clients print).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
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

    /// An error without text (e.g. acquire's EBUSY).
    pub fn bare(errnum: i32) -> Self {
        RpcError {
            errnum,
            errstr: None,
        }
    }

    /// The text a client shows: errstr, else strerror(errnum).
    pub fn message(&self) -> String {
        match &self.errstr {
            Some(s) if !s.is_empty() => s.clone(),
            _ => strerror(self.errnum).to_string(),
        }
    }

    /// Normal end of a stream.
    pub fn is_end_of_stream(&self) -> bool {
        self.errnum == ENODATA
    }
}

/// glibc's `strerror()` text for the errnos Roster uses (Python's
/// `os.strerror`, which flux's CLI prints in `[Errno N] text`).
pub fn strerror(errnum: i32) -> &'static str {
    match errnum {
        EPERM => "Operation not permitted",
        ENOENT => "No such file or directory",
        EIO => "Input/output error",
        EAGAIN => "Resource temporarily unavailable",
        ENOMEM => "Cannot allocate memory",
        EBUSY => "Device or resource busy",
        EEXIST => "File exists",
        EINVAL => "Invalid argument",
        ERANGE => "Numerical result out of range",
        ENOSYS => "Function not implemented",
        ENODATA => "No data available",
        EPROTO => "Protocol error",
        EOVERFLOW => "Value too large for defined data type",
        ECANCELED => "Operation canceled",
        EHOSTUNREACH => "No route to host",
        ECONNRESET => "Connection reset by peer",
        ETIMEDOUT => "Connection timed out",
        _ => "Unknown error",
    }
}

/// An I/O error's text as C tools print `strerror`: without Rust's
/// " (os error N)" suffix (only when there is an OS error to strip).
pub fn io_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) if s.ends_with(')') => s.get(..i).unwrap_or(&s).to_string(),
        _ => s,
    }
}
