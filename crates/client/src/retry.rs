//! When a failed call may be sent again, and where: the decision table of
//! [`crate::Client`]'s failover.
//!
//! | how the call failed ([`Failure`]) | read-only request | mutating request |
//! | --- | --- | --- |
//! | no connection (refused, connect timeout, unreachable, no socket) | next server | next server |
//! | EAGAIN "not the leader; the leader is URI" | that leader | that leader |
//! | EAGAIN "not the leader; no leader is elected yet" | next server | next server |
//! | other EAGAIN (a leader stepping down with the request pending, a standby out of touch with etcd) | next server | stop |
//! | connection lost before the reply (reset, EOF) | next server | stop |
//! | anything else (an answer, TLS or token trouble, protocol error) | stop | stop |
//!
//! A mutating request is sent again only when it certainly was not
//! handled: no connection was made, or a standby said it is not the
//! leader (standbys never handle one).  A lost connection or a leader
//! stepping down may have come after the request was applied.
//!
//! Read-only requests ([`is_read_only`]) change nothing, so any transient
//! failure sends them again.

use crate::ClientError;
use rpc::uri::Uri;
use std::io::ErrorKind;

/// Topics that change nothing in the service, safe to send twice: the
/// catalogue's `read_only` ([`rpc::catalog::Topic::read_only`]).
pub fn is_read_only(topic: &str) -> bool {
    rpc::catalog::lookup(topic).is_some_and(|t| t.read_only)
}

/// How a call failed, as far as retrying is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection was made: the request was not sent.
    NotConnected,
    /// A standby answered that it is not the leader (naming it, when one
    /// is elected): it did not handle the request.
    NotLeader(Option<Vec<Uri>>),
    /// EAGAIN for another reason: the request may have been handled.
    Unavailable,
    /// The connection was lost before the reply was complete: the request
    /// may have been handled.
    Lost,
    /// Not transient.
    Final,
}

/// What to do after a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// Try the next server of the list.
    Next,
    /// Try these servers first (the leader a standby named).
    Leader(Vec<Uri>),
    /// Return the error.
    Stop,
}

fn connect_kind_transient(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::ConnectionRefused
            | ErrorKind::TimedOut
            | ErrorKind::NotFound
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::AddrNotAvailable
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
            | ErrorKind::NetworkDown
            | ErrorKind::UnexpectedEof
    )
}

fn lost_kind(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
    )
}

/// Classify a client error.
pub fn classify(e: &ClientError) -> Failure {
    match e {
        ClientError::Connect { source, .. } if connect_kind_transient(source.kind()) => {
            Failure::NotConnected
        }
        ClientError::Rpc(r) if r.errnum == rpc::errno::EAGAIN => {
            let text = r.errstr.as_deref().unwrap_or("");
            if text.starts_with("not the leader") {
                Failure::NotLeader(rpc::uri::leader_redirect(text))
            } else {
                Failure::Unavailable
            }
        }
        ClientError::Lost(_) => Failure::Lost,
        ClientError::Io(io) if lost_kind(io.kind()) => Failure::Lost,
        _ => Failure::Final,
    }
}

/// The decision table (see the module documentation).
pub fn decide(read_only: bool, f: &Failure) -> Retry {
    match f {
        Failure::NotConnected | Failure::NotLeader(None) => Retry::Next,
        Failure::NotLeader(Some(list)) => Retry::Leader(list.clone()),
        Failure::Unavailable | Failure::Lost if read_only => Retry::Next,
        Failure::Unavailable | Failure::Lost | Failure::Final => Retry::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc::errno::{EAGAIN, EINVAL, EPERM};
    use rpc::RpcError;
    use std::io;

    fn connect(kind: ErrorKind) -> ClientError {
        ClientError::Connect {
            uri: Uri::Unix("/x.sock".into()),
            source: io::Error::new(kind, "x"),
        }
    }

    fn eagain(text: &str) -> ClientError {
        ClientError::Rpc(RpcError::new(EAGAIN, text))
    }

    #[test]
    fn classification() {
        for k in [
            ErrorKind::ConnectionRefused,
            ErrorKind::TimedOut,
            ErrorKind::NotFound,
            ErrorKind::HostUnreachable,
        ] {
            assert_eq!(classify(&connect(k)), Failure::NotConnected, "{k:?}");
        }
        // A TLS or permission problem while connecting is not transient.
        assert_eq!(classify(&connect(ErrorKind::InvalidData)), Failure::Final);
        assert_eq!(
            classify(&connect(ErrorKind::PermissionDenied)),
            Failure::Final
        );
        assert_eq!(
            classify(&eagain("not the leader; the leader is unix:///b.sock")),
            Failure::NotLeader(Some(vec![Uri::Unix("/b.sock".into())]))
        );
        assert_eq!(
            classify(&eagain(
                "not the leader; no leader is elected yet, try again"
            )),
            Failure::NotLeader(None)
        );
        assert_eq!(
            classify(&eagain(
                "this server lost the leadership (lease expired): reconnect to the new leader"
            )),
            Failure::Unavailable
        );
        assert_eq!(
            classify(&ClientError::Rpc(RpcError::bare(EAGAIN))),
            Failure::Unavailable
        );
        for k in [
            ErrorKind::ConnectionReset,
            ErrorKind::BrokenPipe,
            ErrorKind::UnexpectedEof,
        ] {
            assert_eq!(
                classify(&ClientError::Io(io::Error::new(k, "x"))),
                Failure::Lost
            );
        }
        assert_eq!(classify(&ClientError::Lost("eof".into())), Failure::Lost);
        for e in [
            ClientError::Rpc(RpcError::new(EINVAL, "bad targets")),
            ClientError::Rpc(RpcError::new(EPERM, "authentication required")),
            ClientError::Protocol("bad reply".into()),
            ClientError::Tls("no CA".into()),
            ClientError::Io(io::Error::other("x")),
        ] {
            assert_eq!(classify(&e), Failure::Final, "{e}");
        }
    }

    #[test]
    fn decision_table() {
        let leader = vec![Uri::Unix("/b.sock".into())];
        let rows: &[(Failure, Retry, Retry)] = &[
            // failure, read-only, mutating
            (Failure::NotConnected, Retry::Next, Retry::Next),
            (
                Failure::NotLeader(Some(leader.clone())),
                Retry::Leader(leader.clone()),
                Retry::Leader(leader.clone()),
            ),
            (Failure::NotLeader(None), Retry::Next, Retry::Next),
            (Failure::Unavailable, Retry::Next, Retry::Stop),
            (Failure::Lost, Retry::Next, Retry::Stop),
            (Failure::Final, Retry::Stop, Retry::Stop),
        ];
        for (f, ro, m) in rows {
            assert_eq!(&decide(true, f), ro, "read-only {f:?}");
            assert_eq!(&decide(false, f), m, "mutating {f:?}");
        }
    }

    #[test]
    fn read_only_topics() {
        for t in ["resource.status", "resource.get", "resource.journal"] {
            assert!(is_read_only(t), "{t}");
        }
        for t in [
            "resource.drain",
            "resource.undrain",
            "resource.acquire",
            "resource.release",
            "resource.reload",
            "resource.journal-cancel",
            "resource.agent",
        ] {
            assert!(!is_read_only(t), "{t}");
        }
    }
}
