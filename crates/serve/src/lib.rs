//! `roster serve`: the IO shell around [`roster_core::Service`].
//!
//! The daemon is three pieces:
//!
//! * **start-up** ([`prepare`]): configuration, the state directory (lock,
//!   torn-line recovery, `history` truncation), the inventory R (configured →
//!   stored → parent R → discovered), then [`roster_core::Service::new`];
//! * **listeners** ([`transport::Listeners`]) on a tokio runtime in a thread
//!   of their own, turning sockets into [`rpc::Request`]s on a channel;
//! * **the service loop** ([`service_loop`]), one thread owning the core and
//!   the state directory.  It takes whatever requests are waiting (a
//!   batch), lets the core handle each with the current time, makes the
//!   batch's events durable with one write + `fdatasync` (group commit),
//!   and only then sends the batch's replies.  A reply is therefore never
//!   ahead of the state it acknowledges.
//!
//! If anything the core asked to persist cannot be made durable, the daemon
//! stops at once without sending the replies that depended on it: the state
//! on disk is then the truth, and the next start replays it.

#[cfg(feature = "etcd")]
mod ha_loop;
mod inventory;
pub mod lanes;
pub mod metrics;
pub mod modes;
pub mod notify;
pub mod release;
pub mod reload;
pub mod service_loop;
mod who;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use roster_core::{Init, Output, Service, Settings};
use rpc::uri::{Env, Uri};

pub use inventory::{load_reload_r, Source};

/// Command-line options of `roster serve`: each overrides its `[serve]`
/// key, except `listen`, which adds to the configured listeners.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub config: Option<PathBuf>,
    pub statedir: Option<PathBuf>,
    pub listen: Vec<Uri>,
    pub monitor_force_up: bool,
    pub parent_r: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    /// `--tls-cert`, `--tls-key`, `--tls-client-ca`.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    /// Returns the allocator's free memory to the system; called once a
    /// burst of requests is over (see [`release`]).
    pub release_memory: Option<fn()>,
}

/// Why the daemon could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("{0}")]
    Store(#[from] store::StoreError),
    #[error("{0}")]
    Start(#[from] roster_core::StartError),
    #[error("{0}")]
    Transport(#[from] transport::TransportError),
    #[error("{0}")]
    Inventory(String),
    #[error("token file {path}: {reason}")]
    Token { path: PathBuf, reason: String },
    #[error("{0}")]
    Tls(String),
    /// A file others could change (or read, for a key): refused as ssh does.
    #[error("{0}")]
    Mode(#[from] modes::ModeError),
    #[error("cannot persist state, stopping without acknowledging: {0}")]
    Persist(store::StoreError),
    #[error("cannot start the listener runtime: {0}")]
    Runtime(std::io::Error),
    #[cfg(feature = "etcd")]
    #[error("{0}")]
    Ha(#[from] ha::HaError),
    /// A configured feature this build does not have.
    #[error("{0}")]
    Unsupported(String),
    /// The etcd lease was lost: this server stepped down.
    #[error("not the leader any more: {0}")]
    Deposed(String),
}

/// The wall clock: seconds since the epoch.  Only for timestamps and
/// `history` (an age in wall-clock time); every timer uses [`clock`].
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Both clocks as the core wants them: monotonic time since the first
/// call in this process (`std::time::Instant`, immune to clock steps) and
/// the wall clock.
pub fn clock() -> roster_core::Now {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    roster_core::Now::new(origin.elapsed(), now())
}

/// Everything resolved from the options and the configuration.
#[derive(Debug)]
pub struct Plan {
    pub config: Option<config::Config>,
    pub config_path: Option<PathBuf>,
    pub statedir: PathBuf,
    pub listen: Vec<Uri>,
    pub token: Option<String>,
    /// `[serve.auth]` token files: (role, token).
    pub role_tokens: Vec<(rpc::Role, String)>,
    /// TLS for `tls://` listeners, when a certificate is configured.
    pub tls: Option<transport::TlsListen>,
    /// The TLS files in force, when a certificate is configured: the
    /// service's certificate and the revocation list are re-read on
    /// SIGHUP.
    pub tls_files: Option<TlsFiles>,
    /// `[serve] enrol-ca`: the CA directory that signs enrolled agents'
    /// certificates (`resource.agent-enrol`).
    pub enrol_ca: Option<PathBuf>,
    /// Where `resource.reload` may read ([`reload::reload_dir`]).
    pub reload_dir: Option<PathBuf>,
    pub monitor_force_up: bool,
    pub parent_r: Option<PathBuf>,
    /// The listeners' limits (`[serve]` `max-*`, `*-timeout`).
    pub limits: transport::Limits,
    /// `[serve]` `backend`: the state directory or etcd.
    pub backend: config::Backend,
    /// `[serve]` `public-read`.
    pub public_read: bool,
}

/// The listeners' limits from `[serve]`.
pub fn limits_of(l: &config::ServeLimits) -> transport::Limits {
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let secs =
        |v: f64| std::time::Duration::try_from_secs_f64(v).unwrap_or(std::time::Duration::MAX);
    transport::Limits {
        max_connections: n(l.max_connections),
        max_connections_per_peer: n(l.max_connections_per_peer),
        max_unauthenticated_per_peer: n(l.max_unauthenticated_per_peer),
        auth_timeout: secs(l.auth_timeout),
        max_inflight: n(l.max_inflight),
        max_outbound_bytes: n(l.max_outbound_bytes),
        max_guest_outbound_bytes: n(l.max_guest_outbound_bytes),
        max_request_bytes: n(l.max_request_bytes),
        max_guest_request_bytes: n(l.max_guest_request_bytes),
        max_queued_requests: n(l.max_queued_requests),
        request_timeout: secs(l.request_timeout),
        idle_timeout: secs(l.idle_timeout),
    }
}

/// The default-location inputs of this process: `$XDG_RUNTIME_DIR`,
/// `$XDG_STATE_HOME`, `$HOME` (absolute ones only) and the real uid.
pub fn process_env() -> Env {
    let get = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    Env {
        xdg_runtime_dir: get("XDG_RUNTIME_DIR"),
        xdg_state_home: get("XDG_STATE_HOME"),
        home: get("HOME"),
        uid: transport::current_uid(),
    }
}

/// Read the configuration and merge it with the options.
pub fn plan(opts: &Options) -> Result<Plan, ServeError> {
    if let Some(p) = &opts.config {
        modes::config(p)?;
    }
    let config = match &opts.config {
        Some(p) => Some(config::Config::from_path(p)?),
        None => None,
    };
    let serve = config.as_ref().map(|c| c.serve.clone()).unwrap_or_default();
    let env = process_env();
    let statedir = opts
        .statedir
        .clone()
        .or(serve.statedir)
        .unwrap_or_else(|| env.default_statedir());
    if matches!(serve.backend, config::Backend::Local) {
        modes::not_writable_by_others("state directory", &statedir)?;
    }
    if let config::Backend::Etcd(e) = &serve.backend {
        if let Some(k) = &e.key {
            modes::private("etcd-key", k)?;
        }
    }
    let listen = merge_listen(serve.listen, &opts.listen, || env.default_uri());
    let token_file = opts.token_file.clone().or(serve.token_file);
    let token = match token_file {
        Some(path) => Some(read_token(&path)?),
        None => None,
    };
    let mut role_tokens = Vec::new();
    for (role, path) in &serve.auth.token_files {
        let role = match role.as_str() {
            "user" => rpc::Role::User,
            "scheduler" => rpc::Role::Scheduler,
            "enrol" => rpc::Role::Enrol,
            _ => rpc::Role::Admin,
        };
        role_tokens.push((role, read_token(path)?));
    }
    let enrol_ca = enrol_ca(serve.enrol_ca.clone(), &role_tokens)?;
    let tls_key = opts.tls_key.clone().or(serve.tls_key);
    if let Some(k) = &tls_key {
        modes::private("TLS key", k)?;
    }
    let (tls, tls_files) = tls_listen(
        opts.tls_cert.clone().or(serve.tls_cert),
        tls_key,
        opts.tls_client_ca.clone().or(serve.tls_client_ca),
        serve.tls_crl.clone(),
        &serve.auth,
    )?;
    let reload_dir = reload::reload_dir(config.as_ref(), opts.config.as_deref());
    Ok(Plan {
        reload_dir,
        config,
        config_path: opts.config.clone(),
        statedir,
        listen,
        token,
        role_tokens,
        tls,
        tls_files,
        enrol_ca,
        monitor_force_up: opts.monitor_force_up || serve.monitor_force_up,
        parent_r: opts.parent_r.clone().or(serve.parent_r),
        limits: limits_of(&serve.limits),
        backend: serve.backend.clone(),
        public_read: serve.public_read,
    })
}

/// The listeners: the configuration's `listen`, then every `--listen`
/// of the command line not already in it (a command line adds
/// listeners, it never drops a configured one); the default socket
/// only when neither names any.
fn merge_listen(
    configured: Option<Vec<Uri>>,
    command_line: &[Uri],
    default: impl FnOnce() -> Uri,
) -> Vec<Uri> {
    let mut listen = configured.unwrap_or_default();
    for uri in command_line {
        if !listen.contains(uri) {
            listen.push(uri.clone());
        }
    }
    if listen.is_empty() {
        listen.push(default());
    }
    listen
}

/// Everything `roster serve` refuses before it touches the state: the
/// listeners' rules ([`transport::check_listen`]: `tcp://` needs a token
/// and a loopback address, `tls://` a certificate and client
/// authentication) and a backend this build has.  `roster serve --check`
/// runs exactly this, so a configuration it passes is not refused on
/// these grounds at start.
pub fn validate(plan: &Plan) -> Result<(), ServeError> {
    if matches!(plan.backend, config::Backend::Etcd(_)) && !cfg!(feature = "etcd") {
        return Err(ServeError::Unsupported(
            "[serve] backend = \"etcd\": this roster was built without the etcd backend \
             (cargo build --release --features etcd; it needs protoc, Debian package \
             protobuf-compiler)"
                .into(),
        ));
    }
    transport::check_listen(&plan.listen, &listen_options(plan))?;
    Ok(())
}

/// `[serve] enrol-ca`, checked: a directory holding `ca.pem` and a
/// private `ca.key`.  The enrolment token needs it, and it needs the
/// token (else nobody but the owner could enrol).
fn enrol_ca(
    dir: Option<PathBuf>,
    role_tokens: &[(rpc::Role, String)],
) -> Result<Option<PathBuf>, ServeError> {
    let token = role_tokens.iter().any(|(r, _)| *r == rpc::Role::Enrol);
    let Some(dir) = dir else {
        if token {
            return Err(ServeError::Tls(
                "[serve.auth] enrol-token-file is set but [serve] enrol-ca is not (the CA directory that signs enrolled agents)".into(),
            ));
        }
        return Ok(None);
    };
    for f in [tls::ca::CA_CERT, tls::ca::CA_KEY] {
        if !dir.join(f).is_file() {
            return Err(ServeError::Tls(format!(
                "enrol-ca {}: no {f} there (roster serve ca init makes a CA)",
                dir.display()
            )));
        }
    }
    modes::private("CA key", &dir.join(tls::ca::CA_KEY))?;
    Ok(Some(dir))
}

/// The TLS files of the `tls://` listeners: what SIGHUP reads again, and
/// what `roster_tls_expiry_timestamp_seconds` reports.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The service's certificate and key (`tls-cert`, `tls-key`).
    pub cert: Arc<tls::ServerCert>,
    /// The CAs of `tls-client-ca`, as read at start (they are not read
    /// again).
    pub client_ca: Vec<tls::Expiry>,
    /// The verifier of client certificates with `[serve] tls-crl`: its
    /// revocation list is re-read on SIGHUP.
    pub crl: Option<Arc<tls::ClientVerifier>>,
}

impl TlsFiles {
    /// (kind, name, seconds since the epoch) of each file in force:
    /// `certificate` (notAfter of the service's own), `ca`, `crl`
    /// (nextUpdate).  A file that cannot be read now is left out (and
    /// logged).
    pub fn expiries(&self) -> Vec<(&'static str, tls::Expiry)> {
        let mut out = Vec::new();
        match tls::served::cert_expiry(&self.cert.leaf()) {
            Ok(e) => out.push(("certificate", e)),
            Err(e) => tracing::warn!("{}: {e}", self.cert.cert_path().display()),
        }
        out.extend(self.client_ca.iter().map(|e| ("ca", e.clone())));
        if let Some(path) = self.crl.as_ref().and_then(|v| v.crl()) {
            match tls::served::crls_expiry(path) {
                Ok(v) => out.extend(v.into_iter().map(|e| ("crl", e))),
                Err(e) => tracing::warn!("{e}"),
            }
        }
        out
    }
}

/// The TLS settings of `tls://` listeners (none without a certificate),
/// and the files SIGHUP reads again.
type TlsPlan = (Option<transport::TlsListen>, Option<TlsFiles>);

fn tls_listen(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    crl: Option<PathBuf>,
    auth: &config::AuthConfig,
) -> Result<TlsPlan, ServeError> {
    if crl.is_some() && client_ca.is_none() {
        return Err(ServeError::Tls(
            "tls-crl is set but tls-client-ca is not (a revocation list applies to client certificates)".into(),
        ));
    }
    let (cert, key) = match (cert, key) {
        (Some(c), Some(k)) => (c, k),
        (None, None) => {
            if client_ca.is_some() {
                return Err(ServeError::Tls(
                    "tls-client-ca is set but tls-cert and tls-key are not".into(),
                ));
            }
            return Ok((None, None));
        }
        (Some(_), None) => {
            return Err(ServeError::Tls("tls-cert is set but tls-key is not".into()))
        }
        (None, Some(_)) => {
            return Err(ServeError::Tls("tls-key is set but tls-cert is not".into()))
        }
    };
    let verifier = client_ca
        .as_deref()
        .map(|ca| tls::ClientVerifier::new(ca, crl.as_deref()))
        .transpose()
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    let served = tls::ServerCert::load(&cert, &key).map_err(|e| ServeError::Tls(e.to_string()))?;
    let config = tls::server_config_reloadable(Arc::clone(&served), verifier.clone())
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    let client_ca_expiry = match &client_ca {
        Some(p) => tls::served::certs_expiry(p).map_err(|e| ServeError::Tls(e.to_string()))?,
        None => Vec::new(),
    };
    let mut roles = tls::RoleMap::default();
    roles.from_units = auth.roles_from_ou;
    for (role, pattern) in &auth.patterns {
        roles
            .add(role, pattern)
            .map_err(|e| ServeError::Tls(format!("[serve.auth] {role}: {e}")))?;
    }
    let listen = transport::TlsListen {
        config,
        client_auth: client_ca.is_some(),
        roles,
    };
    let files = TlsFiles {
        cert: served,
        client_ca: client_ca_expiry,
        crl: verifier.filter(|v| v.crl().is_some()),
    };
    Ok((Some(listen), Some(files)))
}

/// What a topic needs, from the catalogue (the listeners name it when
/// they refuse a client with no role).
fn topic_access(topic: &str) -> Option<rpc::Need> {
    rpc::catalog::lookup(topic).map(|t| t.need)
}

fn read_token(path: &Path) -> Result<String, ServeError> {
    let err = |reason: String| ServeError::Token {
        path: path.to_path_buf(),
        reason,
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| err(io_text(&e)))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(err(format!(
            "the token must be private to its owner, but the file has mode {:04o} (chmod 600 it)",
            mode & 0o7777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(io_text(&e)))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(err("the file is empty".into()));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err("the token must be one word".into()));
    }
    Ok(token.to_string())
}

pub(crate) use rpc::errno::io_text;

/// `roster serve --check`: parse the configuration and build its R.
/// Returns a one-line summary.
pub fn check(opts: &Options) -> Result<String, ServeError> {
    let plan = plan(opts)?;
    validate(&plan)?;
    let mut parts = Vec::new();
    match &plan.config {
        Some(c) => {
            match c.resource.inventory()? {
                Some(r) => {
                    parts.push(format!(
                        "R has {} node{} ({})",
                        r.nnodes(),
                        if r.nnodes() == 1 { "" } else { "s" },
                        r.ranks().encode()
                    ));
                    // Start a core on it (pure, nothing is written) so that
                    // settings resolved against R, like a hostlist
                    // `exclude`, are checked too.
                    let init = Init {
                        now: now(),
                        settings: settings_of(&plan),
                        inventory: Some(roster_core::Inventory::from_rset(
                            r,
                            roster_core::Method::Configuration,
                        )),
                        ..Default::default()
                    };
                    Service::new(init, &mut Vec::new())?;
                }
                None => parts.push("no R configured".to_string()),
            }
            if !c.ignored_tables.is_empty() {
                parts.push(format!("ignored tables: {}", c.ignored_tables.join(", ")));
            }
        }
        None => parts.push("no configuration: embedded default".to_string()),
    }
    let listen: Vec<String> = plan.listen.iter().map(|u| u.to_string()).collect();
    match &plan.backend {
        config::Backend::Local => parts.push(format!("statedir {}", plan.statedir.display())),
        config::Backend::Etcd(e) => parts.push(format!(
            "backend etcd {} prefix {}",
            e.endpoints.join(","),
            e.prefix
        )),
    }
    parts.push(format!("listen {}", listen.join(" ")));
    Ok(format!("configuration is valid: {}", parts.join("; ")))
}

/// The core's settings from the configuration and the options.
fn settings_of(plan: &Plan) -> Settings {
    let resource = plan.config.as_ref().map(|c| &c.resource);
    Settings {
        exclude: resource.and_then(|r| r.exclude.clone()),
        journal_max: resource
            .map(|r| usize::try_from(r.journal_max).unwrap_or(1).max(1))
            .unwrap_or(roster_core::journal::DEFAULT_JOURNAL_MAX),
        monitor_force_up: plan.monitor_force_up,
        groups: resource.map(|r| r.groups.clone()).unwrap_or_default(),
        torpid_max: resource
            .map(|r| r.torpid_max)
            .unwrap_or(roster_core::monitor::DEFAULT_TORPID_MAX),
        offline_timeout: resource
            .map(|r| r.offline_timeout)
            .unwrap_or(roster_core::monitor::DEFAULT_OFFLINE_TIMEOUT),
        relay_fanout: plan
            .config
            .as_ref()
            .and_then(|c| c.serve.relay_fanout)
            .unwrap_or(rpc::relay::DEFAULT_FANOUT),
        queues: plan.config.as_ref().and_then(|c| c.queues.clone()),
        ..Settings::default()
    }
}

/// What a running daemon is told from outside its loop (signals).
///
/// The service loop sleeps until its next input or the core's next
/// deadline; a request here wakes it through its input channel (see
/// [`Control::set_waker`]).
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    /// Number of SIGHUPs not yet handled (saturating).
    reload: AtomicU8,
    waker: Mutex<Option<std::sync::mpsc::Sender<transport::Incoming>>>,
}

impl Control {
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
    pub fn request_reload(&self) {
        let _ = self
            .reload
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(1))
            });
        self.wake();
    }
    /// The service loop's input channel: stop and reload requests send
    /// it a wake-up ([`transport::Incoming::Wake`]) so that it does not
    /// have to poll.
    pub fn set_waker(&self, tx: std::sync::mpsc::Sender<transport::Incoming>) {
        if let Ok(mut w) = self.waker.lock() {
            *w = Some(tx);
        }
    }
    fn clear_waker(&self) {
        if let Ok(mut w) = self.waker.lock() {
            *w = None;
        }
    }
    /// A sender on the service loop's input channel (for work done off
    /// the loop, e.g. a reload's read, to wake it when done).
    pub fn waker(&self) -> Option<std::sync::mpsc::Sender<transport::Incoming>> {
        self.waker.lock().ok().and_then(|w| w.clone())
    }
    fn wake(&self) {
        if let Ok(w) = self.waker.lock() {
            if let Some(tx) = w.as_ref() {
                let _ = tx.send(transport::Incoming::Wake);
            }
        }
    }
    pub fn take_reload(&self) -> bool {
        self.reload.swap(0, Ordering::SeqCst) > 0
    }
}

/// Start-up: open the state directory, resolve the inventory, start the
/// core and make its start-up outputs durable.  Returns the running state
/// and the outputs still to deliver (logs).
pub fn prepare(plan: &Plan) -> Result<(service_loop::Shell, Vec<Output>), ServeError> {
    prepare_on(plan, Arc::new(store::RealFs))
}

/// [`prepare`] with the state directory on `fs` (tests run it on a
/// simulated disk, [`store::sim::SimDisk`]).
pub fn prepare_on(
    plan: &Plan,
    fs: Arc<dyn store::Fs>,
) -> Result<(service_loop::Shell, Vec<Output>), ServeError> {
    let (mut dir, loaded) = store::StateDir::open_on(fs, &plan.statedir)?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let start = clock();
    let now = start.wall;
    let resource = plan.config.as_ref().map(|c| &c.resource);
    // `history` truncation of the persistent log (flux-core truncate.c),
    // unless history is infinite.  The checkpoint's position in the log
    // (`replay_from`) decides what it summarises: only events before it
    // may be dropped, those older than the cutoff; events at or after it
    // are kept whatever their timestamps (a clock that was ahead at the
    // last stop must not make a later acknowledged drain look old).
    let mut events = loaded.events;
    let mut replay_from = loaded.replay_from;
    let history = resource.map(|r| r.history).unwrap_or_default();
    if let Some(secs) = history.seconds() {
        let cp_ts = store::checkpoint_timestamp(loaded.checkpoint.as_ref());
        let cutoff = store::history_cutoff(now, Some(secs), cp_ts);
        match (cutoff, &loaded.checkpoint, replay_from) {
            (Some(cutoff), Some(cp), Some(_)) => {
                let before = events.len();
                let (kept, from) =
                    dir.truncate_before_checkpoint(events, cp, |e| e.timestamp < cutoff)?;
                if kept.len() != before {
                    tracing::info!(
                        "resource.eventlog: truncated {} events older than {cutoff:.6} before the checkpoint",
                        before - kept.len()
                    );
                }
                events = kept;
                replay_from = from;
            }
            (Some(cutoff), _, _) => {
                // No checkpoint (cutoff 0: nothing to drop), or one
                // without a position (an older version's): by timestamp,
                // as before.  Only a log with something to drop is copied
                // and rewritten (NaN timestamps are kept).
                if events.iter().any(|e| e.timestamp < cutoff) {
                    let before = events.len();
                    let kept = store::truncate_history(std::mem::take(&mut events), cutoff);
                    if kept.len() != before {
                        dir.rewrite_eventlog(&kept)?;
                        tracing::info!(
                            "resource.eventlog: truncated {} events older than {cutoff:.6}",
                            before - kept.len()
                        );
                    }
                    events = kept;
                }
            }
            (None, _, _) => {}
        }
    }
    let init = build_init(
        plan,
        loaded.r.as_deref(),
        events,
        loaded.checkpoint,
        replay_from,
        start,
    )?;
    let replayed = init.stored_events.len();
    let mut out = Vec::new();
    let core = Service::new(init, &mut out)?;
    // The checkpoint stays: checkpoint + the events after it rebuild the
    // drain state even after a crash (history truncation may have removed
    // the older events it summarises).
    let mut shell = service_loop::Shell::new(core, dir, plan.config_path.clone());
    shell.set_reload_dir(plan.reload_dir.clone());
    shell.set_enrol_ca(plan.enrol_ca.clone());
    shell.set_replayed(replayed);
    shell.persist(&out)?;
    Ok((shell, out))
}

/// The core's start-up input from what the backend holds (R, events,
/// checkpoint): the inventory (configured → stored → parent R →
/// discovered) and the settings.
pub(crate) fn build_init(
    plan: &Plan,
    stored_r: Option<&str>,
    events: Vec<eventlog::Event>,
    checkpoint: Option<serde_json::Value>,
    replay_from: Option<usize>,
    start: roster_core::Now,
) -> Result<Init, ServeError> {
    let now = start.wall;
    let resource = plan.config.as_ref().map(|c| &c.resource);
    let source = Source {
        config: plan.config.as_ref(),
        stored: stored_r,
        parent_r: plan.parent_r.as_deref(),
    };
    // `discover-hosts` applies when no other source has R.
    let discover = match resource.and_then(|r| r.discover_hosts.as_deref()) {
        Some(spec)
            if stored_r.is_none()
                && plan.parent_r.is_none()
                && resource
                    .map(|r| r.inventory())
                    .transpose()?
                    .flatten()
                    .is_none() =>
        {
            let hl = hostlist::Hostlist::decode(spec)
                .map_err(|e| ServeError::Inventory(format!("discover-hosts {spec}: {e}")))?;
            Some(hl.iter().collect::<Vec<_>>())
        }
        _ => None,
    };
    let inventory = match discover {
        Some(_) => None,
        None => Some(source.resolve()?),
    };
    let method = inventory
        .as_ref()
        .map_or(roster_core::Method::DynamicDiscovery, |i| i.method);
    let mut settings = settings_of(plan);
    settings.verify = verify_settings(resource, method);
    let init = Init {
        now,
        mono: start.mono,
        settings,
        inventory,
        stored_events: events,
        checkpoint,
        replay_from,
        discover_hosts: discover,
        run: run_id(),
    };
    Ok(init)
}

/// A fresh run identity for the core (journal positions name it): the
/// process's random hasher keys mixed with the pid and the time.
fn run_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.finish()
}

/// How agents' R is verified: not with `noverify`, nor for an inventory
/// from the enclosing allocation (job-info) unless `verify` was given
/// explicitly (flux-core's rules); otherwise `verify` or the module default.
fn verify_settings(
    resource: Option<&config::ResourceConfig>,
    method: roster_core::Method,
) -> Option<rset::VerifyConfig> {
    match resource {
        None => (method != roster_core::Method::JobInfo).then(rset::VerifyConfig::module_default),
        Some(r) if r.noverify => None,
        Some(r) if method == roster_core::Method::JobInfo && r.verify.is_none() => None,
        Some(r) => Some(r.verify_config()),
    }
}

/// The listeners' options from the plan (both backends).
pub(crate) fn listen_options(plan: &Plan) -> transport::ListenOptions {
    transport::ListenOptions {
        token: plan.token.clone(),
        limits: plan.limits.clone(),
        role_tokens: plan.role_tokens.clone(),
        tls: plan.tls.clone(),
        access: Some(transport::TopicAccess(topic_access)),
        public_read: plan.public_read,
        ..Default::default()
    }
}

/// Slots for the core's ready replies ([`Service::READY_TOPICS`], each
/// with the role its row of the topic table needs); an answer from one
/// counts in the RPC metrics like any other.
fn ready_snapshots(metrics: &Arc<metrics::Metrics>) -> Arc<transport::Snapshots> {
    let topics: Vec<(&'static str, rpc::Need)> = Service::READY_TOPICS
        .iter()
        .filter_map(|&t| topic_access(t).map(|need| (t, need)))
        .collect();
    let m = Arc::clone(metrics);
    transport::Snapshots::new(
        &topics,
        Some(Arc::new(move |topic, took| {
            m.rpc_done(topic, "ok", Some(took))
        })),
    )
}

/// Run the daemon until SIGTERM/SIGINT (or `control.request_stop()`).
/// `ready` is called once the sockets are bound, with their addresses.
pub fn run(
    opts: &Options,
    control: Arc<Control>,
    ready: impl FnOnce(&[Uri]),
) -> Result<(), ServeError> {
    let started = std::time::Instant::now();
    let plan = plan(opts)?;
    validate(&plan)?;
    #[cfg(feature = "etcd")]
    if let config::Backend::Etcd(cfg) = &plan.backend {
        return ha_loop::run(&plan, &cfg.clone(), control, ready);
    }
    let (mut shell, out) = prepare(&plan)?;
    shell.deliver(out);
    let metrics = shell.metrics();
    metrics.set_limits(&plan.limits);
    metrics.refresh(shell.core(), std::time::Instant::now(), true);
    // status and sched-status are answered by the listeners from what
    // the loop publishes (they do not queue behind the loop).
    let snapshots = ready_snapshots(&metrics);
    shell.set_snapshots(Arc::clone(&snapshots));
    shell.set_release(opts.release_memory);
    let (net, rx) = Net::start(&plan, &control, &metrics, Some(snapshots))?;
    let addresses = net.addresses.clone();
    metrics.set_ready(true);
    let mut notifier = notify::Notifier::from_env();
    notifier.send(&format!(
        "READY=1\nSTATUS=serving {} targets\nMAINPID={}",
        shell.core().size(),
        std::process::id()
    ));
    let listeners_text = addresses
        .iter()
        .map(|u| u.to_string())
        .collect::<Vec<_>>()
        .join(",");
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        nodes = shell.core().size(),
        statedir = %plan.statedir.display(),
        listeners = %listeners_text,
        replayed_events = shell.replayed(),
        startup_ms = started.elapsed().as_secs_f64() * 1e3,
        "roster serve {} ready: {} nodes, statedir {}, listening on {}, {} events replayed in {:.1} ms",
        env!("CARGO_PKG_VERSION"),
        shell.core().size(),
        plan.statedir.display(),
        listeners_text,
        shell.replayed(),
        started.elapsed().as_secs_f64() * 1e3
    );
    ready(&addresses);
    let result = shell.run(&rx, &control, &mut notifier);
    metrics.set_ready(false);
    notifier.send("STOPPING=1");
    // The state is final: release the state directory (its lock) now, not
    // after the connections' shutdown grace, so that a restart right
    // after "stopped" finds it free.
    drop(shell);
    net.stop(&control);
    result
}

/// The listeners on their own runtime (the same for both backends),
/// feeding the service loop's channel, and the signal handlers.
pub(crate) struct Net {
    runtime: tokio::runtime::Runtime,
    task: tokio::task::JoinHandle<Result<(), transport::TransportError>>,
    stop: tokio::sync::watch::Sender<bool>,
    /// Where the listeners listen (ports chosen by the system filled in).
    pub addresses: Vec<Uri>,
}

impl Net {
    /// Bind the plan's listeners (with the web view and /metrics, and the
    /// ready replies when the backend publishes them), start them and the
    /// signal handlers; the receiver is the loop's input channel.
    pub(crate) fn start(
        plan: &Plan,
        control: &Arc<Control>,
        metrics: &Arc<metrics::Metrics>,
        snapshots: Option<Arc<transport::Snapshots>>,
    ) -> Result<(Net, std::sync::mpsc::Receiver<transport::Incoming>), ServeError> {
        let mut listeners = transport::Listeners::bind(&plan.listen, &listen_options(plan))?
            .with_web(Arc::new(metrics::Web {
                metrics: Arc::clone(metrics),
            }));
        if let Some(s) = snapshots {
            listeners = listeners.with_snapshots(s);
        }
        let addresses = listeners.addresses();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("roster-net")
            .build()
            .map_err(ServeError::Runtime)?;
        control.set_waker(tx.clone());
        let sig_control = Arc::clone(control);
        let files = plan.tls_files.clone();
        if let Some(f) = &files {
            metrics.set_tls_expiry(&f.expiries());
        }
        let sig_metrics = Arc::clone(metrics);
        runtime.spawn(async move { watch_signals(sig_control, files, sig_metrics).await });
        // The loop's channel stays open (the waker holds a sender): when
        // the listeners end on their own, the loop is told to stop.
        let net_control = Arc::clone(control);
        let task = runtime.spawn(async move {
            let r = listeners.run(tx, stop_rx).await;
            net_control.request_stop();
            r
        });
        let net = Net {
            runtime,
            task,
            stop,
            addresses,
        };
        Ok((net, rx))
    }

    /// Stop accepting (in-flight streams have had their final replies)
    /// and wait for the listeners' shutdown grace.  The waker's sender is
    /// dropped first, so nothing more is queued for a loop that is gone.
    pub(crate) fn stop(self, control: &Control) {
        control.clear_waker();
        let _ = self.stop.send(true);
        if let Err(e) = self.runtime.block_on(self.task).unwrap_or(Ok(())) {
            tracing::warn!("listeners: {e}");
        }
        self.runtime
            .shutdown_timeout(std::time::Duration::from_secs(1));
    }
}

/// SIGHUP: read the service's certificate and key and the revocation
/// list again (at once, for the next handshake; on an error the previous
/// ones stay in force), then their expiry metric.
fn reload_tls(files: Option<&TlsFiles>, metrics: &metrics::Metrics) {
    let Some(files) = files else { return };
    let cert = files.cert.cert_path().display().to_string();
    match files.cert.reload() {
        Ok(()) => tracing::info!("SIGHUP: re-read {cert} and its key"),
        Err(e) => tracing::error!("SIGHUP: {e}: the previous certificate stays in force"),
    }
    if let Some(v) = &files.crl {
        let path = v.crl().map(|p| p.display().to_string()).unwrap_or_default();
        match v.reload() {
            Ok(n) => tracing::info!("SIGHUP: re-read {path} ({n} revocation list(s))"),
            Err(e) => tracing::error!("SIGHUP: {e}: the previous revocation list stays in force"),
        }
    }
    metrics.set_tls_expiry(&files.expiries());
}

pub(crate) async fn watch_signals(
    control: Arc<Control>,
    files: Option<TlsFiles>,
    metrics: Arc<metrics::Metrics>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); control.request_stop(); }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); control.request_stop(); }
            _ = hup.recv() => { reload_tls(files.as_ref(), &metrics); control.request_reload(); }
        }
    }
}

#[cfg(test)]
mod tests {
    use rpc::uri::Uri;

    #[test]
    fn command_line_listen_adds_to_the_configured() {
        let u = |s: &str| Uri::parse(s).unwrap();
        let default = || u("unix:///default.sock");
        let configured = vec![u("unix:///run/r.sock"), u("tls://0.0.0.0:8050")];
        let cfg = Some(configured.clone());
        // both: the configured ones first, a repeated one once
        assert_eq!(
            super::merge_listen(
                cfg.clone(),
                &[u("unix:///tmp/x.sock"), u("unix:///run/r.sock")],
                default
            ),
            vec![
                u("unix:///run/r.sock"),
                u("tls://0.0.0.0:8050"),
                u("unix:///tmp/x.sock")
            ]
        );
        assert_eq!(super::merge_listen(cfg, &[], default), configured);
        assert_eq!(
            super::merge_listen(None, &[u("unix:///tmp/x.sock")], default),
            vec![u("unix:///tmp/x.sock")]
        );
        assert_eq!(super::merge_listen(None, &[], default), vec![default()]);
    }

    #[test]
    fn default_limits_agree() {
        assert_eq!(
            super::limits_of(&config::ServeLimits::default()),
            transport::Limits::default()
        );
    }
}
