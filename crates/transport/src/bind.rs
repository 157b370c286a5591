//! Binding the sockets and the accept loops.

use crate::flux::FluxCtx;
use crate::http::{serve_connection, Ctx, Peer};
use crate::limits::{admit, Caller, CapReached, ConnPermit, LoopTx, PeerCounts, PeerKey};
use crate::{io_text, Incoming, ListenOptions, TransportError, SHUTDOWN_GRACE};
use rpc::uri::Uri;
use std::io;
use std::net::ToSocketAddrs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::io::Interest;
use tokio::sync::{mpsc, watch};

/// Bound sockets, ready to serve.  Binding happens in [`Listeners::bind`]
/// (synchronously, so a daemon can report readiness right after);
/// [`Listeners::run`] accepts and serves.  Unix socket files are removed
/// when the listeners stop (or are dropped without running).
#[derive(Debug)]
pub struct Listeners {
    items: Vec<Bound>,
    opts: ListenOptions,
    web: Option<Arc<dyn crate::web::WebHandler>>,
    snapshots: Option<Arc<crate::Snapshots>>,
}

#[derive(Debug)]
enum Bound {
    Unix {
        uri: Uri,
        listener: std::os::unix::net::UnixListener,
        file: SocketFile,
    },
    /// Plain (`tls` None, loopback only) or TLS.
    Tcp {
        uri: Uri,
        listener: std::net::TcpListener,
        tls: Option<crate::TlsListen>,
    },
    /// The Flux local connector on a Unix socket.
    Flux {
        uri: Uri,
        listener: std::os::unix::net::UnixListener,
        file: SocketFile,
    },
}

impl Bound {
    fn uri(&self) -> &Uri {
        match self {
            Bound::Unix { uri, .. } | Bound::Tcp { uri, .. } | Bound::Flux { uri, .. } => uri,
        }
    }
}

/// A socket file this process created; removed on drop if it is still the
/// same file (a successor may have replaced it).
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(md) = std::fs::symlink_metadata(&self.path) {
            if md.dev() == self.dev && md.ino() == self.ino {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), "cannot remove socket: {}", io_text(&e));
                }
            }
        }
    }
}

impl Listeners {
    /// Bind every URI.  Unix: the parent directory is created if missing;
    /// a leftover socket file is replaced only if nothing accepts on it;
    /// the socket gets `opts.socket_mode`.  `tcp://`: loopback addresses
    /// only, needs a token.  `tls://`: needs `opts.tls`, and a client CA or
    /// a token.  Port 0 picks a free port (see [`Listeners::addresses`]).  `flux://`: a Unix
    /// socket set up like `unix://`, speaking flux-core's local connector
    /// protocol.  On error nothing stays bound.
    pub fn bind(uris: &[Uri], opts: &ListenOptions) -> Result<Listeners, TransportError> {
        let mut items = Vec::with_capacity(uris.len());
        for uri in uris {
            let b = match uri {
                Uri::Unix(path) => {
                    let (listener, file) = bind_unix(uri, path, opts.socket_mode)?;
                    Bound::Unix {
                        uri: uri.clone(),
                        listener,
                        file,
                    }
                }
                Uri::Tcp { host, port } => bind_tcp(uri, host, *port, opts, false)?,
                Uri::Tls { host, port } => bind_tcp(uri, host, *port, opts, true)?,
                Uri::Flux(path) => {
                    let (listener, file) = bind_unix(uri, path, opts.socket_mode)?;
                    Bound::Flux {
                        uri: uri.clone(),
                        listener,
                        file,
                    }
                }
            };
            tracing::info!(uri = %b.uri(), "listening");
            items.push(b);
        }
        Ok(Listeners {
            items,
            opts: opts.clone(),
            web: None,
            snapshots: None,
        })
    }

    /// Answer plain `GET`s outside the RPC namespace on the HTTP
    /// listeners with `handler` (see [`crate::web`]).
    pub fn with_web(mut self, handler: Arc<dyn crate::web::WebHandler>) -> Listeners {
        self.web = Some(handler);
        self
    }

    /// Answer the read-only topics of `snapshots` from the replies the
    /// service publishes there (see [`crate::Snapshots`]).
    pub fn with_snapshots(mut self, snapshots: Arc<crate::Snapshots>) -> Listeners {
        self.snapshots = Some(snapshots);
        self
    }

    /// The bound addresses, in the order given to `bind`; TCP ones carry
    /// the real port.
    pub fn addresses(&self) -> Vec<Uri> {
        self.items.iter().map(|b| b.uri().clone()).collect()
    }

    /// Accept and serve until `shutdown` becomes true (or its sender is
    /// dropped).  Then stop accepting, give in-flight requests up to
    /// [`SHUTDOWN_GRACE`] to finish, drop the remaining connections (each
    /// gets its [`Incoming::Disconnect`]) and remove the Unix socket files.
    ///
    /// Must be called within a tokio runtime (any flavour).
    pub async fn run(
        self,
        tx: std::sync::mpsc::Sender<Incoming>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), TransportError> {
        let tx = LoopTx::new(
            tx,
            self.opts.limits.max_queued_requests,
            self.snapshots.clone(),
        );
        let ctx = Arc::new(Ctx::new(tx.clone(), &self.opts, self.web.clone()));
        let flux_ctx = Arc::new(FluxCtx::new(tx, &self.opts));
        let gate = Gate {
            opts: self.opts.clone(),
            peers: Arc::new(PeerCounts::default()),
        };
        // Every connection task holds a clone; all dropped = all done.
        let (live_tx, mut live_rx) = mpsc::channel::<()>(1);
        let mut files = Vec::new();
        let mut loops = Vec::new();
        for b in self.items {
            let acceptor = match b {
                Bound::Unix {
                    uri,
                    listener,
                    file,
                } => {
                    files.push(file);
                    // Polled for readiness only: connections are accepted
                    // unregistered, so that one-shot reads can be answered
                    // on the spot (see `quick`).
                    // SAFETY: the AsyncFd owns the listener, so its fd
                    // stays open (and the same) for as long as it is
                    // registered; AsyncFd deregisters it before closing.
                    #[allow(unsafe_code)]
                    let l =
                        unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }
                            .map_err(|source| TransportError::Io {
                                context: format!("cannot serve {uri}"),
                                source: source.into(),
                            })?;
                    Acceptor::Unix(uri, l)
                }
                Bound::Tcp { uri, listener, tls } => {
                    let l = tokio::net::TcpListener::from_std(listener).map_err(|source| {
                        TransportError::Io {
                            context: format!("cannot serve {uri}"),
                            source,
                        }
                    })?;
                    let tls = tls.map(|t| {
                        Arc::new((tls::TlsAcceptor::from(Arc::clone(&t.config)), t.roles))
                    });
                    Acceptor::Tcp(uri, l, tls)
                }
                Bound::Flux {
                    uri,
                    listener,
                    file,
                } => {
                    let local_uri = match &uri {
                        Uri::Flux(p) => format!("local://{}", p.display()),
                        other => other.to_string(),
                    };
                    files.push(file);
                    let l = tokio::net::UnixListener::from_std(listener).map_err(|source| {
                        TransportError::Io {
                            context: format!("cannot serve {uri}"),
                            source,
                        }
                    })?;
                    Acceptor::Flux(uri, l, Arc::from(local_uri))
                }
            };
            loops.push(tokio::spawn(accept_loop(
                acceptor,
                gate.clone(),
                Arc::clone(&ctx),
                Arc::clone(&flux_ctx),
                shutdown.clone(),
                live_tx.clone(),
            )));
        }
        drop(live_tx);
        for l in loops {
            if let Err(e) = l.await {
                tracing::warn!("accept loop failed: {e}");
            }
        }
        // Connection tasks bound their own grace; this is a backstop.
        let _ = tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_secs(1), live_rx.recv()).await;
        drop(files);
        Ok(())
    }
}

fn bind_err(uri: &Uri) -> impl FnOnce(io::Error) -> TransportError + '_ {
    move |source| TransportError::Bind {
        uri: uri.clone(),
        source,
    }
}

fn bind_unix(
    uri: &Uri,
    path: &Path,
    mode: u32,
) -> Result<(std::os::unix::net::UnixListener, SocketFile), TransportError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(bind_err(uri))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(md) if !md.file_type().is_socket() => {
            return Err(TransportError::NotASocket {
                uri: uri.clone(),
                path: path.to_path_buf(),
            })
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => return Err(TransportError::InUse { uri: uri.clone() }),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                tracing::info!(path = %path.display(), "removing stale socket");
                std::fs::remove_file(path).map_err(bind_err(uri))?;
            }
            Err(e) => return Err(bind_err(uri)(e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(uri)(e)),
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(bind_err(uri))?;
    let md = std::fs::symlink_metadata(path).map_err(bind_err(uri))?;
    // From here on the file is ours: the guard removes it on any error.
    let file = SocketFile {
        path: path.to_path_buf(),
        dev: md.dev(),
        ino: md.ino(),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(bind_err(uri))?;
    listener.set_nonblocking(true).map_err(bind_err(uri))?;
    Ok((listener, file))
}

/// The accept queue of TCP listeners (the kernel caps it at
/// `net.core.somaxconn`).  `std`'s 128 overflowed when many agents
/// connect at once (a cluster booting, the simulator's 256 hellos in
/// flight, every agent reconnecting after a restart): the kernel drops
/// the SYNs it has no room for and each of those clients waits 1 s or
/// more for its retransmission.
const TCP_BACKLOG: i32 = 4096;

/// A TCP socket listening on `addr` with [`TCP_BACKLOG`] (`SO_REUSEADDR`
/// as `std` sets it, close-on-exec).
fn listen_tcp(addr: std::net::SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(TCP_BACKLOG)?;
    Ok(s.into())
}

/// Check, without binding anything, what [`Listeners::bind`] checks
/// before it binds: a `tcp://` listener has a token and a loopback
/// address, a `tls://` one a certificate and a way for clients to
/// authenticate (host names are resolved).  `roster serve --check` and
/// `roster serve` both go through this.
pub fn check(uris: &[Uri], opts: &ListenOptions) -> Result<(), TransportError> {
    for uri in uris {
        let (host, port, use_tls) = match uri {
            Uri::Tcp { host, port } => (host, *port, false),
            Uri::Tls { host, port } => (host, *port, true),
            Uri::Unix(_) | Uri::Flux(_) => continue,
        };
        check_tcp(uri, host, port, opts, use_tls)?;
    }
    Ok(())
}

/// A TCP listener's TLS settings and addresses, once its rules hold.
type TcpPlan = (Option<crate::TlsListen>, Vec<std::net::SocketAddr>);

fn check_tcp(
    uri: &Uri,
    host: &str,
    port: u16,
    opts: &ListenOptions,
    use_tls: bool,
) -> Result<TcpPlan, TransportError> {
    let has_token = matches!(opts.token.as_deref(), Some(t) if !t.is_empty())
        || opts.role_tokens.iter().any(|(_, t)| !t.is_empty());
    let tls = if use_tls {
        let Some(t) = &opts.tls else {
            return Err(TransportError::TlsNotConfigured { uri: uri.clone() });
        };
        if !t.client_auth && !has_token {
            return Err(TransportError::TlsNoAuth { uri: uri.clone() });
        }
        Some(t.clone())
    } else {
        if !has_token {
            return Err(TransportError::TokenRequired { uri: uri.clone() });
        }
        None
    };
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(bind_err(uri))?
        .collect();
    if !use_tls && addrs.iter().any(|a| !a.ip().is_loopback()) {
        let host_port = uri.to_string().trim_start_matches("tcp://").to_string();
        return Err(TransportError::PlainTcpOffLoopback {
            uri: uri.clone(),
            host_port,
        });
    }
    Ok((tls, addrs))
}

fn bind_tcp(
    uri: &Uri,
    host: &str,
    port: u16,
    opts: &ListenOptions,
    use_tls: bool,
) -> Result<Bound, TransportError> {
    let (tls, addrs) = check_tcp(uri, host, port, opts, use_tls)?;
    let mut last = io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!("{host} resolves to no address"),
    );
    for addr in addrs {
        match listen_tcp(addr) {
            Ok(listener) => {
                listener.set_nonblocking(true).map_err(bind_err(uri))?;
                let local = listener.local_addr().map_err(bind_err(uri))?;
                let (host, port) = (local.ip().to_string(), local.port());
                let real = if use_tls {
                    Uri::Tls { host, port }
                } else {
                    Uri::Tcp { host, port }
                };
                return Ok(Bound::Tcp {
                    uri: real,
                    listener,
                    tls,
                });
            }
            Err(e) => last = e,
        }
    }
    Err(bind_err(uri)(last))
}

enum Acceptor {
    Unix(Uri, AsyncFd<std::os::unix::net::UnixListener>),
    /// With the TLS acceptor and role map of a `tls://` listener.
    Tcp(
        Uri,
        tokio::net::TcpListener,
        Option<Arc<(tls::TlsAcceptor, tls::RoleMap)>>,
    ),
    /// With the `local://` URI of the socket (`attr.get local-uri`).
    Flux(Uri, tokio::net::UnixListener, Arc<str>),
}

/// Resolves once shutdown is requested (or can never be requested).
pub(crate) async fn shutdown_signalled(rx: &mut watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Who may connect: the connection caps of every listener of a `run`
/// (unix, tcp, tls, flux; a relay's child listeners are such a `run`
/// too), decided in one place ([`admit`]).
#[derive(Clone)]
struct Gate {
    opts: ListenOptions,
    peers: Arc<PeerCounts>,
}

impl Gate {
    /// Admit a Unix peer, known by its uid (the owner and root are not
    /// counted per peer; an unreadable uid is refused later, as a guest's
    /// or by the Flux handshake).
    fn unix(&self, open: &Arc<AtomicUsize>, uid: Option<u32>) -> Result<ConnPermit, CapReached> {
        let key = uid
            .filter(|&u| u != self.opts.owner_uid && u != 0)
            .map(PeerKey::Uid);
        admit(open, &self.peers, Caller::Known(key), &self.opts.limits)
    }

    /// Admit a TCP or TLS peer: unauthenticated until its certificate or
    /// token says who it is.
    fn tcp(
        &self,
        open: &Arc<AtomicUsize>,
        addr: std::net::SocketAddr,
    ) -> Result<ConnPermit, CapReached> {
        let key = PeerKey::Ip(addr.ip());
        admit(open, &self.peers, Caller::Unknown(key), &self.opts.limits)
    }
}

/// Log a refused connection, at most once a second (a flood of them
/// would otherwise flood the log), saying how many went unlogged.
fn log_refusal(uri: &Uri, why: CapReached) {
    static LAST: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    static QUIET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::Instant::now();
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            QUIET.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        *last = Some(now);
    }
    let text = why.error().errstr.unwrap_or_default();
    match QUIET.swap(0, std::sync::atomic::Ordering::Relaxed) {
        0 => tracing::warn!(%uri, "refusing a connection: {text}"),
        n => {
            tracing::warn!(%uri, "refusing a connection: {text} ({n} more refused since the last report)")
        }
    }
}

/// Answer a connection refused at a cap, then close it (without waiting
/// long on a peer that does not read).
fn refuse<S>(mut stream: S, answer: Vec<u8>, uri: &Uri, why: CapReached)
where
    S: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    log_refusal(uri, why);
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = stream.write_all(&answer).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

async fn accept_loop(
    acceptor: Acceptor,
    gate: Gate,
    ctx: Arc<Ctx>,
    flux_ctx: Arc<FluxCtx>,
    mut shutdown: watch::Receiver<bool>,
    live: mpsc::Sender<()>,
) {
    let uri = match &acceptor {
        Acceptor::Unix(u, _) | Acceptor::Tcp(u, _, _) | Acceptor::Flux(u, _, _) => u.clone(),
    };
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown_signalled(&mut shutdown) => break,
            r = accept(&acceptor) => r,
        };
        match accepted {
            Ok(Accepted::Flux(stream, local_uri)) => {
                let uid = peer_uid(&uri, &stream);
                let permit = match gate.unix(&open, uid) {
                    Ok(p) => p,
                    Err(why) => {
                        // flux-core's handshake: a non-zero byte is the errno.
                        refuse(stream, vec![rpc::errno::EAGAIN as u8], &uri, why);
                        continue;
                    }
                };
                let (ctx, sd, live) = (Arc::clone(&flux_ctx), shutdown.clone(), live.clone());
                tokio::spawn(async move {
                    crate::flux::serve_connection(stream, uid, ctx, local_uri, sd, live).await;
                    drop(permit);
                });
            }
            Ok(Accepted::Unix(first)) => {
                // Take the whole burst waiting in the backlog, then answer
                // what can be answered at once (see `quick`); a request
                // not yet in its socket gets a second look after the
                // others, before it goes to the HTTP path.
                let mut burst = vec![first];
                if let Acceptor::Unix(_, l) = &acceptor {
                    while burst.len() < ACCEPT_BURST {
                        match crate::quick::accept(l.get_ref()) {
                            Ok(s) => burst.push(s),
                            Err(_) => break,
                        }
                    }
                }
                let unix = UnixConns {
                    uri: &uri,
                    ctx: &ctx,
                    shutdown: &shutdown,
                    live: &live,
                };
                let mut later = Vec::new();
                for stream in burst {
                    let uid = peer_uid(&uri, &stream);
                    match gate.unix(&open, uid) {
                        Ok(permit) => {
                            if let Some(c) = unix.serve(stream, uid, permit, true) {
                                later.push(c);
                            }
                        }
                        Err(why) => {
                            if let Some(stream) = unix.registered(stream) {
                                refuse(stream, crate::http::refusal_bytes(&why.error()), &uri, why);
                            }
                        }
                    }
                }
                for (stream, uid, permit) in later {
                    unix.serve(stream, uid, permit, false);
                }
            }
            Ok(Accepted::Tcp(stream, addr)) => {
                let permit = match gate.tcp(&open, addr) {
                    Ok(p) => p,
                    Err(why) => {
                        let answer = match &acceptor {
                            // A TLS client could not read a plain answer.
                            Acceptor::Tcp(_, _, Some(_)) => Vec::new(),
                            _ => crate::http::refusal_bytes(&why.error()),
                        };
                        refuse(stream, answer, &uri, why);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (ctx, sd, live) = (Arc::clone(&ctx), shutdown.clone(), live.clone());
                let Acceptor::Tcp(_, _, Some(tls)) = &acceptor else {
                    tokio::spawn(async move {
                        let peer = Peer::Tcp {
                            local: stream.local_addr().ok(),
                        };
                        serve_connection(stream, peer, ctx, sd, live, Some(permit)).await;
                    });
                    continue;
                };
                // TLS: the handshake runs in the connection's task, so a
                // slow client never holds up the accept loop.
                let tls = Arc::clone(tls);
                tokio::spawn(async move {
                    let (acc, roles) = &*tls;
                    let deadline = permit.auth_deadline(ctx.limits());
                    if let Some((stream, peer)) =
                        crate::tls::accept(acc, roles, stream, addr, deadline).await
                    {
                        if matches!(&peer, Peer::Tls { cert: Some(c), .. } if c.role.is_some()) {
                            permit.authenticated();
                        }
                        serve_connection(stream, peer, ctx, sd, live, Some(permit)).await;
                    }
                });
            }
            Err(e) => {
                tracing::warn!(%uri, "accept failed: {}", io_text(&e));
                // Out of descriptors or memory: back off instead of spinning.
                if e.raw_os_error().is_some_and(is_resource_exhaustion) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    tracing::info!(%uri, "no longer accepting");
}

/// The most connections taken from a Unix listener's backlog at once.
const ACCEPT_BURST: usize = 128;

/// What serving an accepted Unix connection needs.
struct UnixConns<'a> {
    uri: &'a Uri,
    ctx: &'a Arc<Ctx>,
    shutdown: &'a watch::Receiver<bool>,
    live: &'a mpsc::Sender<()>,
}

impl UnixConns<'_> {
    /// Registered with the event loop (None, logged, if that fails).
    fn registered(&self, s: std::os::unix::net::UnixStream) -> Option<tokio::net::UnixStream> {
        tokio::net::UnixStream::from_std(s)
            .map_err(|e| {
                tracing::warn!(uri = %self.uri, "cannot serve a connection: {}", io_text(&e));
            })
            .ok()
    }

    /// Answer a one-shot read at once, or serve the connection over
    /// HTTP; with `may_wait`, a connection whose request is not all in
    /// yet is handed back for a second look, and without it, its task
    /// waits a little for the request before it takes the HTTP path.
    fn serve(
        &self,
        stream: std::os::unix::net::UnixStream,
        uid: Option<u32>,
        permit: ConnPermit,
        may_wait: bool,
    ) -> Option<(std::os::unix::net::UnixStream, Option<u32>, ConnPermit)> {
        let (stream, permit, wait) =
            match crate::quick::try_answer(stream, uid, self.ctx, permit, self.live) {
                crate::quick::Answer::Done => return None,
                crate::quick::Answer::NotYet(s, p) if may_wait => return Some((s, uid, p)),
                crate::quick::Answer::NotYet(s, p) => (s, p, true),
                crate::quick::Answer::Declined(s, p) => (s, p, false),
            };
        let stream = self.registered(stream)?;
        let (ctx, sd, live) = (
            Arc::clone(self.ctx),
            self.shutdown.clone(),
            self.live.clone(),
        );
        tokio::spawn(async move {
            // A request still arriving may yet be answered without HTTP.
            let stream = match wait {
                true => match crate::quick::answer_when_in(stream, uid, &ctx).await {
                    Some(s) => s,
                    None => return drop((permit, live)),
                },
                false => stream,
            };
            serve_connection(stream, Peer::Unix { uid }, ctx, sd, live, Some(permit)).await;
        });
        None
    }
}

enum Accepted {
    /// Not yet registered with the event loop (see `quick`).
    Unix(std::os::unix::net::UnixStream),
    Tcp(tokio::net::TcpStream, std::net::SocketAddr),
    Flux(tokio::net::UnixStream, Arc<str>),
}

async fn accept(a: &Acceptor) -> io::Result<Accepted> {
    match a {
        Acceptor::Unix(_, l) => loop {
            let mut ready = l.readable().await?;
            if let Ok(r) = ready.try_io(|l| crate::quick::accept(l.get_ref())) {
                return r.map(Accepted::Unix);
            }
        },
        Acceptor::Tcp(_, l, _) => l.accept().await.map(|(s, a)| Accepted::Tcp(s, a)),
        Acceptor::Flux(_, l, u) => l
            .accept()
            .await
            .map(|(s, _)| Accepted::Flux(s, Arc::clone(u))),
    }
}

/// The peer's uid (None, logged, if the credentials cannot be read).
fn peer_uid(uri: &Uri, stream: impl std::os::fd::AsFd) -> Option<u32> {
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(c) => Some(c.uid.as_raw()),
        Err(e) => {
            tracing::warn!(%uri, "cannot read peer credentials: {}", io_text(&io::Error::from(e)));
            None
        }
    }
}

/// EMFILE, ENFILE, ENOBUFS, ENOMEM.
fn is_resource_exhaustion(errno: i32) -> bool {
    matches!(errno, 24 | 23 | 105 | 12)
}
