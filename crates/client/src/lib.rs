//! Client library for Roster's RPCs over `unix://`, `tls://` and `tcp://`
//! (HTTP/1.1 with the conventions of [`rpc::wire`]).
//!
//! `tls://HOST:PORT` needs the CA certificate that signed the service's
//! certificate ([`TlsFiles`]: `--ca` or `$ROSTER_CA`) and may present a
//! client certificate (`$ROSTER_CERT`, `$ROSTER_KEY`), whose role the
//! service decides; a bearer token can be sent instead or as well.
//!
//! [`Client`] is async (tokio); [`blocking::Client`] wraps it with its own
//! current-thread runtime for synchronous callers such as the CLI.
//!
//! Every call opens one connection and closes it when the reply is read;
//! a [`ReplyStream`] keeps its connection until it is dropped, and dropping
//! it is how a stream is cancelled (the service sees the disconnect).
//!
//! ```no_run
//! let c = client::blocking::Client::from_env(None, None)?;
//! println!("{}", c.status()?);
//! for update in c.journal()? {
//!     println!("{}", update?);
//! }
//! # Ok::<(), client::ClientError>(())
//! ```

pub mod acquire;
pub mod blocking;
mod conn;
pub mod journal;
pub mod retry;

pub use conn::Connection;
use conn::Exchange;
use rpc::catalog::{self as cat, Call};
use rpc::msg;
use rpc::uri::{Servers, Step, Uri, UriError};
use rpc::RpcError;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use acquire::{AcquireStream, Acquisition, Response as AcquireResponse};
pub use journal::JournalFollower;
pub use rpc::msg::{DrainEntry, StatusResponse as Status};

/// Environment variable naming the token file for `tcp://` services.
pub const TOKEN_FILE_ENV: &str = "ROSTER_TOKEN_FILE";
/// Environment variable naming the CA certificate (PEM) that signed the
/// certificate of a `tls://` service.
pub const CA_ENV: &str = "ROSTER_CA";
/// Environment variables naming this client's certificate and key (PEM)
/// for `tls://` services.
pub const CERT_ENV: &str = "ROSTER_CERT";
pub const KEY_ENV: &str = "ROSTER_KEY";

/// The files a `tls://` client uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed the service's certificate.
    pub ca: Option<PathBuf>,
    /// This client's certificate chain and key (both or neither).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl TlsFiles {
    /// Each file not given here from its environment variable
    /// ([`CA_ENV`], [`CERT_ENV`], [`KEY_ENV`]).
    pub fn or_env(self) -> TlsFiles {
        TlsFiles {
            ca: self.ca.or_else(|| env_path(CA_ENV)),
            cert: self.cert.or_else(|| env_path(CERT_ENV)),
            key: self.key.or_else(|| env_path(KEY_ENV)),
        }
    }

    /// The rustls client configuration.
    pub fn config(&self) -> Result<Arc<tls::rustls::ClientConfig>, ClientError> {
        let Some(ca) = &self.ca else {
            return Err(ClientError::Tls(format!(
                "a tls:// service needs the CA certificate that signed its certificate: \
                 give --ca FILE or set {CA_ENV}"
            )));
        };
        let identity = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ClientError::Tls(format!(
                    "a client certificate needs its key too (--key or {KEY_ENV})"
                )))
            }
            (None, Some(_)) => {
                return Err(ClientError::Tls(format!(
                    "a client key needs its certificate too (--cert or {CERT_ENV})"
                )))
            }
        };
        tls::client_config(ca, identity).map_err(|e| ClientError::Tls(e.to_string()))
    }
}

/// The URIs a client uses (high availability: `--uri` / `$ROSTER_URI`
/// may be a comma list of the servers, tried in order): the explicit
/// list, else `$ROSTER_URI`, else the embedded default's socket.  Never
/// empty.
pub fn resolve_uris(explicit: Option<&str>) -> Result<Vec<Uri>, UriError> {
    match explicit {
        Some(u) => rpc::uri::parse_list(u),
        None => match std::env::var(URI_ENV) {
            Ok(u) if !u.is_empty() => rpc::uri::parse_list(&u),
            _ => Ok(vec![process_env().default_uri()]),
        },
    }
}

/// Environment variable naming the service a client talks to.
pub const URI_ENV: &str = "ROSTER_URI";

/// The default-location inputs of this process: `$XDG_RUNTIME_DIR`,
/// `$XDG_STATE_HOME`, `$HOME` (absolute ones only) and the real uid.
pub fn process_env() -> rpc::uri::Env {
    let get = |k: &str| env_path(k).filter(|p| p.is_absolute());
    rpc::uri::Env {
        xdg_runtime_dir: get("XDG_RUNTIME_DIR"),
        xdg_state_home: get("XDG_STATE_HOME"),
        home: get("HOME"),
        uid: current_uid(),
    }
}

/// The real uid of this process (owner of `/proc/self`).
pub fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(Path::new("/proc/self"))
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

/// Errors of client calls.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service could not be reached.
    #[error("cannot connect to {uri}: {}", io_text(.source))]
    Connect {
        uri: Uri,
        #[source]
        source: io::Error,
    },
    /// The service answered with an error (displays as its errstr, or
    /// `strerror(errnum)` when it has none).
    #[error("{0}")]
    Rpc(RpcError),
    /// The service's answer did not follow the wire conventions.
    #[error("{0}")]
    Protocol(String),
    /// The connection failed mid-call.
    #[error("{}", io_text(.0))]
    Io(io::Error),
    /// The connection was closed before the reply was complete (the
    /// service stopped or failed over): the request may have been handled.
    #[error("{0}")]
    Lost(String),
    /// The service URI (argument or `ROSTER_URI`) is malformed.
    #[error("{0}")]
    Uri(UriError),
    /// TLS files missing, unreadable or unusable.
    #[error("{0}")]
    Tls(String),
    /// The token file could not be read, or is empty.
    #[error("cannot read token file {}: {}", path.display(), io_text(.source))]
    TokenFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ClientError {
    /// The errno this error stands for: the RPC's errnum, the OS error of
    /// a failed connection or read, `EPROTO` for protocol violations,
    /// `EINVAL` for a bad URI.
    pub fn errnum(&self) -> i32 {
        match self {
            ClientError::Rpc(e) => e.errnum,
            ClientError::Connect { source, .. }
            | ClientError::Io(source)
            | ClientError::TokenFile { source, .. } => {
                source.raw_os_error().unwrap_or(rpc::errno::EIO)
            }
            ClientError::Protocol(_) => rpc::errno::EPROTO,
            ClientError::Lost(_) => rpc::errno::ECONNRESET,
            ClientError::Uri(_) | ClientError::Tls(_) => rpc::errno::EINVAL,
        }
    }
}

impl From<RpcError> for ClientError {
    fn from(e: RpcError) -> Self {
        ClientError::Rpc(e)
    }
}

pub(crate) use rpc::errno::io_text;

/// Methods of [`Client`] sending one request, built by the request type's
/// `new` from their arguments, and returning nothing of the reply.
macro_rules! unit_calls {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $call:ty, $req:ty;)*) => {$(
        $(#[$doc])*
        pub async fn $name(&self, $($arg: $ty),*) -> Result<(), ClientError> {
            self.call::<$call>(&<$req>::new($($arg),*)).await.map(drop)
        }
    )*};
}

/// A client of one Roster service.  Cheap to clone; holds no connection.
#[derive(Clone)]
pub struct Client {
    /// The service's servers (several: a highly available one).
    servers: Servers,
    token: Option<String>,
    tls: Option<Arc<tls::rustls::ClientConfig>>,
}

/// How long a client of several servers keeps trying them (and following
/// a standby's redirect) while no leader answers: a failover.
pub const FAILOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl PartialEq for Client {
    fn eq(&self, o: &Client) -> bool {
        self.servers == o.servers
            && self.token == o.token
            && match (&self.tls, &o.tls) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

impl Eq for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", self.uri())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Read a token file: its content without surrounding white space; an
/// empty file is an error.
pub fn read_token_file(path: &Path) -> Result<String, ClientError> {
    let err = |source| ClientError::TokenFile {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(err)?;
    let token = text.trim();
    if token.is_empty() {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the file is empty",
        )));
    }
    Ok(token.to_string())
}

impl Client {
    /// A client of the service at `uri`, without a token.
    pub fn new(uri: Uri) -> Client {
        Client::with_uris(vec![uri])
    }

    /// A client of a highly available service: `uris` are its servers,
    /// tried in order; a standby's "not the leader; the leader is URI"
    /// answer is followed.  Panics never; an empty list is the default
    /// socket's service.
    pub fn with_uris(uris: Vec<Uri>) -> Client {
        let mut it = uris.into_iter();
        let first = it.next().unwrap_or_else(|| process_env().default_uri());
        Client {
            servers: Servers::new(first, it.collect()),
            token: None,
            tls: None,
        }
    }

    /// The servers this client tries, in order (see [`Servers`]).
    pub fn servers(&self) -> &Servers {
        &self.servers
    }

    /// Run `call` on the servers until one answers, retrying as the
    /// decision table of [`retry`] says for a `read_only` request or a
    /// mutating one, where the walk of [`Servers`] says.  With one
    /// server: a standby's redirect is followed once, and a read-only
    /// request whose connection was lost is sent once more; a server that
    /// cannot be reached is an error at once.  With several: the next
    /// server (the leader a redirect names first) is tried, round after
    /// round, for up to [`FAILOVER_WAIT`].
    async fn failover<T, F, Fut>(&self, read_only: bool, call: F) -> Result<T, ClientError>
    where
        F: Fn(Uri) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        use retry::{classify, decide, Failure, Retry};
        let several = self.servers.several();
        let deadline = std::time::Instant::now() + FAILOVER_WAIT;
        let mut servers = self.servers.clone();
        let mut retried = false;
        loop {
            let err = match call(servers.current().clone()).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let failure = classify(&err);
            let step = match decide(read_only, &failure) {
                Retry::Leader(list) => servers.failed(list.first()),
                Retry::Next => servers.failed(None),
                Retry::Stop => return Err(err),
            };
            if !several {
                // One more try at most: the leader, or the same server.
                if retried || !(step == Step::Leader || failure == Failure::Lost) {
                    return Err(err);
                }
                retried = true;
            } else if std::time::Instant::now() >= deadline {
                return Err(err);
            } else if step == Step::Round {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }

    /// The same client with its server list rotated to start at the
    /// server after `uri` (a follower moving on from a server that failed).
    pub fn starting_after(&self, uri: &Uri) -> Client {
        Client {
            servers: self.servers.starting_after(uri),
            ..self.clone()
        }
    }

    /// Use this TLS configuration for `tls://` (see [`TlsFiles::config`]).
    pub fn with_tls(mut self, config: Arc<tls::rustls::ClientConfig>) -> Client {
        self.tls = Some(config);
        self
    }

    /// Send `Authorization: Bearer <token>` (needed for the owner role
    /// over TCP).
    pub fn with_token(mut self, token: String) -> Client {
        self.token = Some(token);
        self
    }

    /// The service URI: `explicit_uri`, else `$ROSTER_URI`, else the
    /// default socket ([`resolve_uris`]).  The token: read from
    /// `token_file`, else from the file named by `$ROSTER_TOKEN_FILE`,
    /// else none.  For `tls://`, the TLS files from the environment.
    pub fn from_env(
        explicit_uri: Option<&str>,
        token_file: Option<&Path>,
    ) -> Result<Client, ClientError> {
        Client::from_env_tls(explicit_uri, token_file, TlsFiles::default())
    }

    /// [`Client::from_env`] with TLS files given explicitly (each missing
    /// one taken from the environment, see [`TlsFiles::or_env`]); they
    /// are only read for a `tls://` URI.
    pub fn from_env_tls(
        explicit_uri: Option<&str>,
        token_file: Option<&Path>,
        tls_files: TlsFiles,
    ) -> Result<Client, ClientError> {
        let uris = resolve_uris(explicit_uri).map_err(ClientError::Uri)?;
        let any_tls = uris.iter().any(|u| matches!(u, Uri::Tls { .. }));
        let tls = if any_tls {
            Some(tls_files.or_env().config()?)
        } else {
            None
        };
        let env_file = std::env::var_os(TOKEN_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let token = match token_file.map(Path::to_path_buf).or(env_file) {
            Some(p) => Some(read_token_file(&p)?),
            None => None,
        };
        Ok(Client {
            token,
            tls,
            ..Client::with_uris(uris)
        })
    }

    /// The service URI (the first server).
    pub fn uri(&self) -> &Uri {
        self.servers.current()
    }

    /// A connection kept open for many requests (see [`Connection`]).
    pub async fn connect(&self) -> Result<Connection, ClientError> {
        Connection::open(self.uri(), self.tls.as_ref(), self.token.as_deref()).await
    }

    /// The TLS configuration (for `tls://`).
    pub fn tls_config(&self) -> Option<&Arc<tls::rustls::ClientConfig>> {
        self.tls.as_ref()
    }

    /// One request, one reply.  `Value::Null` means no payload, both in
    /// the request and in the returned reply.  For the catalogue's topics,
    /// [`Client::call`] is the typed form.
    pub async fn rpc(&self, topic: &str, payload: Value) -> Result<Value, ClientError> {
        let payload = &payload;
        self.failover(retry::is_read_only(topic), |uri| async move {
            let (tls, token) = (self.tls.as_ref(), self.token.as_deref());
            conn::call(&uri, tls, token, topic, payload).await
        })
        .await
    }

    /// A streaming request.  An error the service answers before the
    /// stream starts (authentication, bad topic...) is returned here;
    /// afterwards see [`ReplyStream::next`].  For the catalogue's topics,
    /// [`Client::open`] is the typed form.
    pub async fn stream(&self, topic: &str, payload: Value) -> Result<ReplyStream, ClientError> {
        let payload = &payload;
        self.failover(retry::is_read_only(topic), |uri| async move {
            let (tls, token) = (self.tls.as_ref(), self.token.as_deref());
            let ex = Exchange::start(&uri, tls, token, topic, payload, true).await?;
            ex.into_stream(uri).await
        })
        .await
    }

    /// One typed request of the catalogue ([`rpc::catalog`]), one typed
    /// reply: `client.call::<Drain>(&DrainRequest { .. })`.
    pub async fn call<C: Call>(&self, req: &C::Request) -> Result<C::Response, ClientError> {
        let reply = self.rpc(C::TOPIC, msg::encode(req)).await?;
        msg::decode_reply(C::TOPIC, &reply).map_err(ClientError::Protocol)
    }

    /// A typed streaming request of the catalogue (each response is a
    /// `C::Response`; see [`rpc::msg::decode_reply`]).
    pub async fn open<C: Call>(&self, req: &C::Request) -> Result<ReplyStream, ClientError> {
        self.stream(C::TOPIC, msg::encode(req)).await
    }

    /// `resource.status` (`call::<Status>` for the typed [`Status`]).
    pub async fn status(&self) -> Result<Value, ClientError> {
        self.rpc(cat::Status::TOPIC, Value::Null).await
    }

    /// `resource.sched-status`: `{all, down, allocated}`, each an R.
    pub async fn sched_status(&self) -> Result<Value, ClientError> {
        self.rpc(cat::SchedStatus::TOPIC, Value::Null).await
    }

    unit_calls! {
        /// `resource.drain {targets, reason?, mode?}`; `mode` is `update`,
        /// `overwrite` or `force-overwrite`.
        drain(targets: &str, reason: Option<&str>, mode: Option<&str>)
            => cat::Drain, msg::DrainRequest;
        /// `resource.undrain {targets, reason?, mode?}`.
        undrain(targets: &str, reason: Option<&str>, mode: Option<&str>)
            => cat::Undrain, msg::DrainRequest;
    }

    /// `resource.reload {path, xml, force}`.  `path` is sent as given
    /// (flux's CLI resolves it with `realpath` first).
    pub async fn reload(
        &self,
        path: impl AsRef<Path>,
        xml: bool,
        force: bool,
    ) -> Result<(), ClientError> {
        let path = path.as_ref().to_string_lossy().into_owned();
        let req = msg::ReloadRequest { path, xml, force };
        self.call::<cat::Reload>(&req).await.map(drop)
    }

    /// `resource.expiration-update {expiration}`.
    pub async fn expiration_update(&self, expiration: f64) -> Result<(), ClientError> {
        let req = msg::ExpirationRequest { expiration };
        self.call::<cat::ExpirationUpdate>(&req).await.map(drop)
    }

    /// `resource.get`: `{R, method}`.
    pub async fn get(&self) -> Result<Value, ClientError> {
        self.rpc(cat::Get::TOPIC, Value::Null).await
    }

    /// `resource.journal` (payload `{}`): `{events:[...], R?}` updates,
    /// the backlog, then the `{events:[]}` sentinel, then live events.
    pub async fn journal(&self) -> Result<ReplyStream, ClientError> {
        self.open::<cat::Journal>(&msg::JournalRequest::default())
            .await
    }

    /// `resource.journal` read by a [`JournalFollower`]: resumed from its
    /// last position after a restart or failover (opened now).
    pub async fn follow_journal(&self) -> Result<JournalFollower, ClientError> {
        JournalFollower::new(self.clone()).open().await
    }

    /// `resource.acquire`: payload `{}`, or `{"group": G}` for a resource
    /// group (RFC 28 groups draft).
    pub async fn acquire(&self, group: Option<&str>) -> Result<ReplyStream, ClientError> {
        let req = msg::AcquireRequest {
            group: group.map(str::to_string),
        };
        self.open::<cat::Acquire>(&req).await
    }

    unit_calls! {
        /// `resource.release {group, targets}` (RFC 28 groups draft).
        release(group: &str, targets: &str) => cat::Release, msg::TargetsOfGroup;
        /// `resource.group-set {group, targets}` (Roster): resource group
        /// `group` gets exactly `targets` (idset or hostlist; empty to empty
        /// the group), which leave any other named group.  Holders losing
        /// targets get a `shrink`, gainers a `grow` once they are released.
        group_set(group: &str, targets: &str) => cat::GroupSet, msg::TargetsOfGroup;
    }

    /// `resource.monitor-force-up {ranks}`.
    pub async fn monitor_force_up(&self, ranks: &str) -> Result<(), ClientError> {
        let req = msg::ForceRequest {
            ranks: Some(ranks.to_string()),
        };
        self.call::<cat::ForceUp>(&req).await.map(drop)
    }

    /// `resource.monitor-force-down {ranks}`.
    pub async fn monitor_force_down(&self, ranks: &str) -> Result<(), ClientError> {
        let req = msg::ForceRequest {
            ranks: Some(ranks.to_string()),
        };
        self.call::<cat::ForceDown>(&req).await.map(drop)
    }

    /// `resource.acquire-mute` (payload `{}`).
    pub async fn acquire_mute(&self) -> Result<(), ClientError> {
        self.call::<cat::AcquireMute>(&msg::Empty {})
            .await
            .map(drop)
    }
}

/// The replies of a streaming request, read line by line as they arrive.
/// Dropping it closes the connection, which cancels the request.
#[derive(Debug)]
pub struct ReplyStream {
    inner: conn::LineStream,
    /// The server that answered.
    uri: Uri,
}

impl ReplyStream {
    /// The server this stream comes from.
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The next payload; `None` once the stream ended normally (ENODATA)
    /// or after an error was returned.  Any other error reply comes as
    /// `Some(Err(ClientError::Rpc(..)))`.  A stream that ends without an
    /// error reply yields `Some(Err(ClientError::Protocol(..)))`.
    #[allow(clippy::should_implement_trait)]
    pub async fn next(&mut self) -> Option<Result<Value, ClientError>> {
        self.inner.next().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_and_errnums() {
        let e = ClientError::Connect {
            uri: Uri::Unix("/run/roster.sock".into()),
            source: io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            e.to_string(),
            "cannot connect to unix:///run/roster.sock: No such file or directory"
        );
        assert_eq!(e.errnum(), 2);
        let e = ClientError::Rpc(RpcError::bare(rpc::errno::EBUSY));
        assert_eq!(e.to_string(), "Device or resource busy");
        assert_eq!(e.errnum(), 16);
        let e = ClientError::Rpc(RpcError::new(22, "bad targets"));
        assert_eq!(e.to_string(), "bad targets");
        assert_eq!(
            ClientError::Protocol("x".into()).errnum(),
            rpc::errno::EPROTO
        );
    }

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tok");
        std::fs::write(&p, "abc\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "abc");
        std::fs::write(&p, " \n").unwrap();
        let e = read_token_file(&p).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
        let missing = dir.path().join("nope");
        let e = read_token_file(&missing).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read token file {}: No such file or directory",
                missing.display()
            )
        );
        let c = Client::from_env(Some("tcp://h:1"), Some(&p));
        assert!(c.is_err());
        std::fs::write(&p, "tok").unwrap();
        let c = Client::from_env(Some("tcp://h:1"), Some(&p)).unwrap();
        assert_eq!(c.token.as_deref(), Some("tok"));
        assert!(!format!("{c:?}").contains("tok\""));
        assert!(matches!(
            Client::from_env(Some("bogus"), None),
            Err(ClientError::Uri(_))
        ));
    }
}
