//! Roster's listeners: HTTP/1.1 over Unix (`unix://`) and TCP
//! (`tcp://`) sockets, speaking the conventions of [`rpc::wire`], and
//! flux-core's local connector over a Unix socket (`flux://`, see the
//! `flux` module: real `flux` clients with `FLUX_URI=local://PATH`).
//!
//! The listeners do no RPC work themselves.  Each HTTP request becomes one
//! [`rpc::Request`] (a fresh [`rpc::ConnId`], matchtag 1) delivered as an
//! [`Incoming::Request`] on a std channel, together with the sender on which
//! the service answers.  When the request is over (its reply was written,
//! the stream ended, or the client went away) the listener sends exactly one
//! [`Incoming::Disconnect`] for its connection id, so the service can drop
//! whatever it still holds for it (RFC 6 disconnect semantics).
//!
//! Requests that fail before reaching the RPC layer (authentication, bad
//! path or method, oversized or non-JSON body) are answered here, with an
//! HTTP status and an error object as [`rpc::wire`] prescribes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), transport::TransportError> {
//! use transport::{Incoming, ListenOptions, Listeners};
//! let uri = rpc::uri::Uri::parse("unix:///tmp/roster-demo/roster.sock").unwrap();
//! let listeners = Listeners::bind(&[uri], &ListenOptions::default())?;
//! let (tx, rx) = std::sync::mpsc::channel::<Incoming>();
//! let (_stop, shutdown) = tokio::sync::watch::channel(false);
//! std::thread::spawn(move || {
//!     while let Ok(msg) = rx.recv() {
//!         if let Incoming::Request { req, replies, .. } = msg {
//!             let _ = replies.send(Ok(serde_json::json!({"topic": req.topic}).into()));
//!         }
//!     }
//! });
//! listeners.run(tx, shutdown).await
//! # }
//! ```

mod bind;
mod flux;
mod http;
mod limits;
mod linger;
mod quick;
mod response;
mod snapshot;
pub mod web;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod tls;
mod upgrade;

use rpc::uri::Uri;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use bind::{check as check_listen, Listeners};
pub use limits::{
    overflow_error, reply_cost, Limits, QueueProbe, QueueSlot, ReplyReceiver, ReplyRefused,
    ReplySender, TryRecvError,
};
pub use snapshot::{Observer, Snapshots};
pub use tls::TlsListen;

/// What a listener hands to the service loop.
#[derive(Debug)]
pub enum Incoming {
    /// A request and the channel its replies go to.  A non-streaming
    /// request takes the first reply only; a streaming one takes replies
    /// until the first `Err`.
    ///
    /// `slot` holds the request's place in the bounded listener → loop
    /// queue ([`Limits::max_queued_requests`]): drop it once the request
    /// is taken off the channel.
    Request {
        req: rpc::Request,
        replies: ReplySender,
        slot: QueueSlot,
    },
    /// A later line of an admitted agent session (a heartbeat, or a
    /// relay's line): one-way, nothing answers it.  `slot` as for
    /// `Request`.
    SessionLine {
        conn: rpc::ConnId,
        payload: serde_json::Value,
        slot: QueueSlot,
    },
    /// The connection is gone: drop every request it still has, without
    /// replying.  Sent once per [`rpc::ConnId`] handed out in a `Request`,
    /// unless the request's [`ReplySender::ends_conn`] (the service then
    /// takes its last reply as the disconnect; a `Disconnect` may still
    /// come if the client went away meanwhile, and a second is harmless).
    Disconnect(rpc::ConnId),
    /// Not from a listener: the shell wakes the loop that reads this
    /// channel (a signal's request, work finished off the loop) so that
    /// it does not poll.  Carries nothing; the loop checks its flags.
    Wake,
}

/// How the listeners decide roles and set up their sockets.
#[derive(Clone, PartialEq, Eq)]
pub struct ListenOptions {
    /// The instance owner: Unix peers with this uid (or uid 0) get
    /// [`rpc::Role::Owner`], every other uid [`rpc::Role::Guest`].
    pub owner_uid: u32,
    /// The bearer token that gives TCP and TLS clients the owner role
    /// (`Authorization: Bearer <token>`).
    pub token: Option<String>,
    /// More bearer tokens, each giving its role (`[serve.auth]`
    /// `user-token-file` and the like).
    pub role_tokens: Vec<(rpc::Role, String)>,
    /// TLS for `tls://` listeners (needed to bind one).
    pub tls: Option<TlsListen>,
    /// Permission bits of Unix sockets (default `0o666`: anyone may
    /// connect; roles restrict what guests may do).
    pub socket_mode: u32,
    /// Connection, queue, size and time limits.
    pub limits: Limits,
    /// What each topic needs (the service's topic table): a request whose
    /// role the topic's need does not grant is refused before its body is
    /// read, and the refusal of a client with no role at all (no token, no
    /// certificate) names the role it would need.  `None`: neither.
    pub access: Option<TopicAccess>,
    /// `[serve] public-read`: anonymous TLS clients may use the web view
    /// (the page, `/api/status`) as guests; otherwise they need a role.
    pub public_read: bool,
}

/// The service's topic table as the listeners see it: what a topic needs.
/// There is one per process, so two are always equal (it is not part of
/// what comparing two [`ListenOptions`] is about).
#[derive(Clone, Copy)]
pub struct TopicAccess(pub fn(&str) -> Option<rpc::Need>);

impl PartialEq for TopicAccess {
    fn eq(&self, _: &TopicAccess) -> bool {
        true
    }
}

impl Eq for TopicAccess {}

impl fmt::Debug for TopicAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TopicAccess")
    }
}

impl Default for ListenOptions {
    /// The current process's uid as owner, no token, mode `0o666`.
    fn default() -> Self {
        ListenOptions {
            owner_uid: current_uid(),
            token: None,
            role_tokens: Vec::new(),
            tls: None,
            socket_mode: 0o666,
            limits: Limits::default(),
            access: None,
            public_read: false,
        }
    }
}

impl fmt::Debug for ListenOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenOptions")
            .field("owner_uid", &self.owner_uid)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "role_tokens",
                &self
                    .role_tokens
                    .iter()
                    .map(|(r, _)| r.name())
                    .collect::<Vec<_>>(),
            )
            .field("tls", &self.tls)
            .field("socket_mode", &format_args!("{:#o}", self.socket_mode))
            .field("limits", &self.limits)
            .field("access", &self.access.is_some())
            .field("public_read", &self.public_read)
            .finish()
    }
}

/// Errors setting up or running the listeners.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Something accepts connections on the Unix socket already.
    #[error("address {uri} is in use by another process")]
    InUse { uri: Uri },
    /// The socket path exists and is not a socket (never removed).
    #[error("cannot listen on {uri}: {} exists and is not a socket", path.display())]
    NotASocket { uri: Uri, path: std::path::PathBuf },
    /// `tcp://` without a (non-empty) token.
    #[error("cannot listen on {uri}: TCP listener requires a token file")]
    TokenRequired { uri: Uri },
    /// `tcp://` on an address other than loopback.
    #[error(
        "cannot listen on {uri}: plain TCP is only allowed on loopback addresses (127.0.0.0/8, ::1), \
         because tokens and requests would cross the network unencrypted; \
         use tls://{host_port} with tls-cert and tls-key (see `roster serve ca`)"
    )]
    PlainTcpOffLoopback { uri: Uri, host_port: String },
    /// `tls://` without the service's certificate and key.
    #[error(
        "cannot listen on {uri}: a TLS listener needs a certificate and key (tls-cert, tls-key)"
    )]
    TlsNotConfigured { uri: Uri },
    /// `tls://` with no way for a client to authenticate.
    #[error(
        "cannot listen on {uri}: TLS clients could not authenticate: \
         configure tls-client-ca (client certificates) or a token file"
    )]
    TlsNoAuth { uri: Uri },
    /// A URI form this crate does not listen on.
    #[error("cannot listen on {uri}: this kind of listener is not supported")]
    Unsupported { uri: Uri },
    /// Creating, binding or configuring the socket failed.
    #[error("cannot listen on {uri}: {}", io_text(.source))]
    Bind {
        uri: Uri,
        #[source]
        source: io::Error,
    },
    /// An I/O failure while running.
    #[error("{context}: {}", io_text(.source))]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// How long in-flight requests may take to finish after shutdown is
/// signalled before their connections are dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id, unique for the life of the process.  Every
/// listener of the service (including ones outside this crate) must draw
/// its ids from here so that they never collide.
pub fn next_conn_id() -> rpc::ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// The real uid of this process (owner of `/proc/self`).
pub fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

pub(crate) use rpc::errno::io_text;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_ids_are_fresh() {
        let a = next_conn_id();
        let b = next_conn_id();
        assert!(b > a);
    }

    #[test]
    fn options_debug_hides_token() {
        let o = ListenOptions {
            owner_uid: 5,
            token: Some("sekrit".into()),
            role_tokens: vec![(rpc::Role::Admin, "sekrit2".into())],
            tls: None,
            socket_mode: 0o600,
            limits: Limits::default(),
            access: None,
            public_read: false,
        };
        let s = format!("{o:?}");
        assert!(!s.contains("sekrit"), "{s}");
        assert!(s.contains("admin"), "{s}");
        assert!(s.contains("0o600"), "{s}");
    }

    #[test]
    fn error_texts() {
        let uri = Uri::Unix("/run/r.sock".into());
        assert_eq!(
            TransportError::InUse { uri: uri.clone() }.to_string(),
            "address unix:///run/r.sock is in use by another process"
        );
        assert_eq!(
            TransportError::Bind {
                uri,
                source: io::Error::from_raw_os_error(13)
            }
            .to_string(),
            "cannot listen on unix:///run/r.sock: Permission denied"
        );
        let tcp = Uri::Tcp {
            host: "127.0.0.1".into(),
            port: 80,
        };
        assert_eq!(
            TransportError::TokenRequired { uri: tcp }.to_string(),
            "cannot listen on tcp://127.0.0.1:80: TCP listener requires a token file"
        );
    }
}
