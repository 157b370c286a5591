//! The service loop: batches of inputs → the core → group commit → replies.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eventlog::Event;
use roster_core::{Input, Level, Output, Service};
use rpc::catalog::{Call, Drain, Undrain};
use rpc::{ConnId, Reply, ReplyTo};
use transport::{Incoming, ReplySender};

use crate::lanes::Lanes;
use crate::metrics::Metrics;
use crate::{clock, Control, ServeError};

/// A tick is sent this long after the core's deadline (its timers fire
/// once an agent has been silent for more than the limit).
const DEADLINE_SLACK: Duration = Duration::from_millis(1);
/// At most this many inputs wait in the loop's lanes (taken off the
/// listeners' channel, not yet handled); the rest wait in the channel.
const MAX_WAITING: usize = 64 * 1024;

/// Where the replies of one outstanding request go.
#[derive(Debug)]
struct Route {
    /// Never blocks: a client that does not read is refused replies (and
    /// told so by its listener) instead of slowing the loop.
    tx: ReplySender,
    streaming: bool,
    /// The catalogue's name of the topic (`unknown` for any other: its
    /// answer is ENOSYS, counted as `unknown`).
    topic: &'static str,
    start: Instant,
}

/// The open requests of one connection: one, nearly always (an HTTP
/// request, an agent session), held without a table of its own (a table
/// per idle agent session would cost 16k agents 5 MB).
#[derive(Debug)]
enum ConnRoutes {
    One(u32, Route),
    Many(HashMap<u32, Route>),
}

impl ConnRoutes {
    fn get(&self, matchtag: u32) -> Option<&Route> {
        match self {
            ConnRoutes::One(m, r) => (*m == matchtag).then_some(r),
            ConnRoutes::Many(map) => map.get(&matchtag),
        }
    }

    /// Add a route; the one it replaces, if any.
    fn insert(&mut self, matchtag: u32, route: Route) -> Option<Route> {
        match self {
            ConnRoutes::One(m, r) if *m == matchtag => Some(std::mem::replace(r, route)),
            ConnRoutes::Many(map) => map.insert(matchtag, route),
            ConnRoutes::One(..) => {
                let mut map = HashMap::new();
                if let ConnRoutes::One(m, r) =
                    std::mem::replace(self, ConnRoutes::Many(HashMap::new()))
                {
                    map.insert(m, r);
                }
                map.insert(matchtag, route);
                *self = ConnRoutes::Many(map);
                None
            }
        }
    }

    /// Remove a route; `true` when none is left.
    fn remove(&mut self, matchtag: u32) -> bool {
        match self {
            ConnRoutes::One(m, _) => *m == matchtag,
            ConnRoutes::Many(map) => {
                map.remove(&matchtag);
                map.is_empty()
            }
        }
    }

    fn values(&self) -> impl Iterator<Item = &Route> {
        let (one, many) = match self {
            ConnRoutes::One(_, r) => (Some(r), None),
            ConnRoutes::Many(map) => (None, Some(map.values())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    fn into_values(self) -> Vec<Route> {
        match self {
            ConnRoutes::One(_, r) => vec![r],
            ConnRoutes::Many(map) => map.into_values().collect(),
        }
    }
}

impl Route {
    fn is_agent(&self) -> bool {
        self.topic == rpc::wire::SESSION_TOPIC
    }
}

/// One persistent event, with its context as log fields.
fn log_event(ev: &Event) {
    let field = |k: &str| {
        let v = ev
            .context
            .as_ref()
            .and_then(|c| c.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or("");
        bounded(v)
    };
    tracing::info!(
        event = %ev.name,
        rank = %field("idset"),
        nodelist = %field("nodelist"),
        reason = %field("reason"),
        "event {}",
        ev.name
    );
}

/// The longest run of non-blank characters a log line keeps.
pub const LOG_FIELD_MAX: usize = 200;

/// A log text with every run of non-blank characters (an idset, a
/// hostlist, one word of a reason) longer than [`LOG_FIELD_MAX`] bytes cut,
/// saying how much was left out: a drain of 100,000 scattered ranks logs a
/// line, not 600 KB.  The eventlog keeps everything.
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= LOG_FIELD_MAX
        || text
            .split(char::is_whitespace)
            .all(|w| w.len() <= LOG_FIELD_MAX)
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(4 * LOG_FIELD_MAX));
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        if word.len() > LOG_FIELD_MAX {
            let keep = LOG_FIELD_MAX - 40;
            let cut = (0..=keep)
                .rev()
                .find(|&i| word.is_char_boundary(i))
                .unwrap_or(0);
            out.push_str(&word[..cut]);
            out.push_str(&format!("...(+{} bytes)", word.len() - cut));
        } else {
            out.push_str(word);
        }
        let blanks = after.len() - after.trim_start().len();
        out.push_str(&after[..blanks]);
        rest = &after[blanks..];
    }
    std::borrow::Cow::Owned(out)
}

/// How often a leader on etcd checks its lease while idle.
#[cfg(feature = "etcd")]
const LEASE_CHECK: std::time::Duration = std::time::Duration::from_millis(50);
/// How often a suspended leader (lease uncertain) looks at it again.
#[cfg(feature = "etcd")]
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// Where a batch's persistence outputs go.
#[derive(Debug)]
pub(crate) enum Backing {
    /// The local state directory.
    Local(store::StateDir),
    /// etcd, as the elected leader.
    #[cfg(feature = "etcd")]
    Etcd(crate::ha_loop::EtcdBacking),
}

fn flush_events(
    dir: &mut store::StateDir,
    metrics: &Metrics,
    pending: &mut Vec<&Event>,
) -> Result<(), store::StoreError> {
    if pending.is_empty() {
        return Ok(());
    }
    // Appended from the outputs themselves, without copies.
    let start = Instant::now();
    dir.append(pending)?;
    metrics.committed(pending.len(), start.elapsed());
    pending.clear();
    Ok(())
}

/// The core, the state directory (or etcd) and the open requests.
#[derive(Debug)]
pub struct Shell {
    core: Service,
    backing: Backing,
    routes: HashMap<ConnId, ConnRoutes>,
    /// Streams refused by their listener before their end (the client
    /// fell behind or is gone): the core is told ([`Input::Cancel`]) once
    /// the batch is delivered.
    gone: Vec<ReplyTo>,
    /// Connections that ended with the last reply just delivered (an HTTP
    /// request's own, [`ReplySender::ends_conn`]): the core is told
    /// ([`Input::Disconnect`]) once the batch is delivered, without the
    /// listener's `Disconnect` and a wake-up of the loop for it.
    ended: Vec<ConnId>,
    config_path: Option<PathBuf>,
    /// Messages taken from the listeners but not handled because the
    /// leadership was lost first (etcd backend): answered by the standby.
    pub(crate) unhandled: Vec<Incoming>,
    metrics: Arc<Metrics>,
    replayed: usize,
    /// Inputs taken from the listeners, not yet handled: clients first
    /// (see [`crate::lanes`]).
    lanes: Lanes,
    /// Where the core's ready replies are published for the listeners
    /// (local backend only: an etcd leader must confirm its lease first).
    snapshots: Option<Arc<transport::Snapshots>>,
    /// `resource.reload` reads under this directory only.
    reload_dir: Option<PathBuf>,
    /// `[serve] enrol-ca`: the CA that signs enrolled agents.
    enrol_ca: Option<PathBuf>,
    /// Reloads read off the loop: their results, and the loop's input
    /// channel to wake it (set while [`Shell::run`] runs; without it a
    /// reload is read in place).
    reloads: Arc<Mutex<Vec<Reloaded>>>,
    waker: Option<std::sync::mpsc::Sender<Incoming>>,
    /// Free memory given back after a burst of requests.
    release: crate::release::Release,
    /// Batches left before the eventlog's room is tried again after a
    /// failure (see [`Shell::reserve_log`]).
    reserve_backoff: u32,
}

/// Validity of an enrolled agent's certificate, days (renew it with
/// `roster serve ca renew`).
const ENROL_DAYS: u32 = 365;

/// A reload read off the loop: `(to, force, R or the error)`.
type Reloaded = (rpc::ReplyTo, bool, Result<rset::Rset, rpc::RpcError>);

impl Shell {
    pub fn new(core: Service, dir: store::StateDir, config_path: Option<PathBuf>) -> Shell {
        Shell::with_backing(core, Backing::Local(dir), config_path)
    }

    pub(crate) fn with_backing(
        core: Service,
        backing: Backing,
        config_path: Option<PathBuf>,
    ) -> Shell {
        Shell {
            core,
            backing,
            routes: HashMap::new(),
            gone: Vec::new(),
            ended: Vec::new(),
            config_path,
            unhandled: Vec::new(),
            metrics: Arc::new(Metrics::new()),
            replayed: 0,
            lanes: Lanes::default(),
            snapshots: None,
            reload_dir: None,
            enrol_ca: None,
            reloads: Arc::new(Mutex::new(Vec::new())),
            waker: None,
            release: crate::release::Release::default(),
            reserve_backoff: 0,
        }
    }

    /// The CA directory that signs enrolled agents' certificates.
    pub fn set_enrol_ca(&mut self, dir: Option<PathBuf>) {
        self.enrol_ca = dir;
    }

    /// `resource.agent-enrol`, after the core's checks: sign the request
    /// with the enrolment CA (a few milliseconds, on the loop), keep a
    /// copy as `HOST.pem` there, log who enrolled, answer.
    fn enrol(
        &self,
        to: rpc::ReplyTo,
        host: &str,
        csr: &str,
        requester: &str,
        out: &mut Vec<Output>,
    ) {
        use rpc::errno::{EEXIST, EINVAL, EIO, ENOSYS};
        let reply = match &self.enrol_ca {
            None => Err(rpc::RpcError::new(
                ENOSYS,
                "this service enrols no agents ([serve] enrol-ca is not set)",
            )),
            Some(dir) => {
                match tls::enrol::sign(dir, host, csr, tls::ca::Validity::days(ENROL_DAYS)) {
                    Ok(e) => {
                        out.push(Output::Log {
                            level: Level::Info,
                            msg: format!(
                                "enrolled the agent of {host} for {requester}: certificate {} (serial {})",
                                e.path.display(),
                                e.serial
                            ),
                        });
                        let resp = rpc::msg::AgentEnrolResponse {
                            cert: e.cert,
                            ca: e.ca,
                        };
                        Ok(rpc::Payload::from(rpc::msg::encode(&resp)))
                    }
                    Err(e) => {
                        let errnum = match &e {
                            tls::enrol::EnrolError::Enrolled { .. } => EEXIST,
                            tls::enrol::EnrolError::Ca(_) => EIO,
                            _ => EINVAL,
                        };
                        let msg = format!("agent enrol: {e}");
                        out.push(Output::Log {
                            level: Level::Warn,
                            msg: format!("refused an enrolment of {host} by {requester}: {msg}"),
                        });
                        Err(rpc::RpcError::new(errnum, msg))
                    }
                }
            }
        };
        out.push(Output::Reply { to, reply });
    }

    /// Where `resource.reload` may read ([`crate::reload`]).
    pub fn set_reload_dir(&mut self, dir: Option<PathBuf>) {
        self.reload_dir = dir;
    }

    /// Hand the reloads read off the loop to the core.
    fn take_reloaded(&mut self) -> Result<(), ServeError> {
        let done = std::mem::take(&mut *self.reloads.lock().unwrap_or_else(|e| e.into_inner()));
        if done.is_empty() {
            return Ok(());
        }
        let mut out = Vec::new();
        for (to, force, result) in done {
            self.handle(Input::Reloaded { to, force, result }, &mut out);
        }
        self.core.handle(clock(), Input::Tick, &mut out);
        self.commit(out)
    }

    /// Publish the core's ready replies to `snapshots` before each
    /// delivery (see [`transport::Snapshots`]), and clear them when the
    /// loop ends.
    pub fn set_snapshots(&mut self, snapshots: Arc<transport::Snapshots>) {
        self.snapshots = Some(snapshots);
    }

    /// The hook that gives free memory back after a burst of requests.
    pub fn set_release(&mut self, hook: Option<fn()>) {
        self.release = crate::release::Release::new(hook);
    }

    /// Publish (or clear) the ready replies: before any reply of a batch
    /// goes out, so that a client that has its write acknowledged never
    /// reads an older state from a snapshot.
    fn publish(&self) {
        if let Some(s) = &self.snapshots {
            for topic in s.topics() {
                s.publish(topic, self.core.ready_reply(topic));
            }
        }
    }

    /// How many stored events the start-up replayed.
    pub fn replayed(&self) -> usize {
        self.replayed
    }

    pub fn set_replayed(&mut self, n: usize) {
        self.replayed = n;
    }

    /// The daemon's metrics (shared with the `/metrics` route).
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Use `metrics` (the etcd backend's, which outlive each leadership).
    #[cfg(feature = "etcd")]
    pub(crate) fn set_metrics(&mut self, metrics: Arc<Metrics>) {
        self.metrics = metrics;
    }

    pub fn core(&self) -> &Service {
        &self.core
    }

    /// The local state directory (`None` on the etcd backend).
    pub fn dir_mut(&mut self) -> Option<&mut store::StateDir> {
        match &mut self.backing {
            Backing::Local(d) => Some(d),
            #[cfg(feature = "etcd")]
            Backing::Etcd(_) => None,
        }
    }

    #[cfg(feature = "etcd")]
    pub(crate) fn into_backing(self) -> Backing {
        self.backing
    }

    /// Why this server may no longer persist (etcd: the lease is lost).
    /// While the lease is uncertain (etcd unreachable or electing, for
    /// less than the grace period of [`ha::LeaseStatus`]) this waits,
    /// handling nothing, until it is confirmed (`None`) or lost, or a stop
    /// is requested (`None`: the stop is seen next).
    fn lost_leadership(&self, control: &Control) -> Option<String> {
        match &self.backing {
            Backing::Local(_) => {
                let _ = control; // only the etcd backend waits
                None
            }
            #[cfg(feature = "etcd")]
            Backing::Etcd(b) => {
                let mut since: Option<Instant> = None;
                loop {
                    match b.lease() {
                        ha::LeaseStatus::Valid => {
                            if let Some(t) = since {
                                tracing::warn!(
                                    "etcd lease confirmed again after {} ms: resuming",
                                    t.elapsed().as_millis()
                                );
                            }
                            return None;
                        }
                        ha::LeaseStatus::Lost(why) => return Some(why),
                        ha::LeaseStatus::Uncertain => {
                            if since.is_none() {
                                tracing::warn!(
                                    "etcd lease not confirmed within its TTL: suspended until a keepalive is acknowledged"
                                );
                                since = Some(Instant::now());
                            }
                            if control.stop_requested() {
                                return None;
                            }
                            std::thread::sleep(LEASE_WAIT);
                        }
                    }
                }
            }
        }
    }

    /// Make every persistence output durable, in order (see
    /// [`Shell::persist_local`]); on etcd, all of them in one guarded
    /// transaction.
    pub fn persist(&mut self, out: &[Output]) -> Result<(), ServeError> {
        let r = self.persist_on_backing(out);
        if r.is_err() {
            self.metrics.persist_failed();
        }
        r
    }

    fn persist_on_backing(&mut self, out: &[Output]) -> Result<(), ServeError> {
        match &mut self.backing {
            Backing::Local(_) => self.persist_local(out).map_err(ServeError::Persist),
            #[cfg(feature = "etcd")]
            Backing::Etcd(b) => {
                let events = out
                    .iter()
                    .filter(|o| matches!(o, Output::Persist(_)))
                    .count();
                let start = Instant::now();
                b.persist(out, &self.core)?;
                if events > 0 {
                    self.metrics.committed(events, start.elapsed());
                }
                Ok(())
            }
        }
    }

    /// Make every persistence output durable, in order: consecutive events
    /// go to the eventlog in one write + fdatasync; whole files (R,
    /// checkpoint) are replaced atomically after the events before them.
    fn persist_local(&mut self, out: &[Output]) -> Result<(), store::StoreError> {
        #[allow(irrefutable_let_patterns)] // one variant without the etcd feature
        let Backing::Local(dir) = &mut self.backing
        else {
            return Ok(());
        };
        let mut pending: Vec<&Event> = Vec::new();
        for o in out {
            match o {
                Output::Persist(ev) => pending.push(ev),
                Output::WriteR(v) => {
                    flush_events(dir, &self.metrics, &mut pending)?;
                    dir.write_r(&v.to_string())?;
                }
                Output::WriteCheckpoint(v) => {
                    flush_events(dir, &self.metrics, &mut pending)?;
                    dir.write_checkpoint(v)?;
                }
                _ => {}
            }
        }
        flush_events(dir, &self.metrics, &mut pending)
    }

    /// Send replies, then write the log lines, the persisted events' among
    /// them, in order (after [`Shell::persist`]): a reply does not wait
    /// for the log's writes.
    pub fn deliver(&mut self, out: Vec<Output>) {
        self.publish();
        let mut logs = Vec::new();
        for o in out {
            match o {
                Output::Reply { to, reply } => self.send(to, reply),
                o @ (Output::Persist(_) | Output::Log { .. }) => logs.push(o),
                _ => {}
            }
        }
        for o in logs {
            match o {
                Output::Persist(ev) => log_event(&ev),
                Output::Log { level, msg } => {
                    let msg = bounded(&msg);
                    match level {
                        Level::Error => tracing::error!("{msg}"),
                        Level::Warn => tracing::warn!("{msg}"),
                        Level::Info => tracing::info!("{msg}"),
                        Level::Debug => tracing::debug!("{msg}"),
                    }
                }
                _ => {}
            }
        }
    }

    fn send(&mut self, to: ReplyTo, reply: Reply) {
        let Some(conn) = self.routes.get_mut(&to.conn) else {
            return; // the client is gone
        };
        let Some(route) = conn.get(to.matchtag) else {
            return;
        };
        let last = !route.streaming || reply.is_err();
        let done = last.then(|| {
            let errnum = reply.as_ref().err().map(|e| e.errnum);
            let latency = (!route.streaming).then(|| route.start.elapsed());
            (errnum, latency)
        });
        // A closed receiver means the listener is already dropping the
        // connection; its Disconnect follows.  A refused reply (the client
        // does not read) ends the route: its stream was ended with an
        // error, or its connection is being closed.  (Sent before the
        // metrics are counted: a one-shot call's reply is written here.)
        let refused = route.tx.send(reply).is_err();
        if let Some((errnum, latency)) = done {
            let (topic, outcome) = crate::metrics::rpc_labels(route.topic, errnum);
            self.metrics.rpc_done(topic, outcome, latency);
            if route.is_agent() {
                self.metrics.agent_closed();
            }
        }
        if refused && !last {
            // Ended by the listener (EOVERFLOW to the client): the core
            // must stop producing for it now, not at the disconnect.
            self.gone.push(to);
        }
        if last && !refused && route.tx.ends_conn() {
            self.ended.push(to.conn);
        }
        if (last || refused) && conn.remove(to.matchtag) {
            self.routes.remove(&to.conn);
        }
    }

    /// Turn one message from the listeners into a core input.
    fn input_of(&mut self, msg: Incoming) -> Input {
        match msg {
            Incoming::Request {
                mut req,
                replies,
                slot,
            } => {
                // Off the listener → loop queue.
                drop(slot);
                if let (None, Some(uid)) = (&req.who, req.userid) {
                    if [Drain::TOPIC, Undrain::TOPIC].contains(&req.topic.as_str()) {
                        req.who = crate::who::unix_requester(uid);
                    }
                }
                tracing::debug!(
                    topic = %req.topic,
                    uid = req.userid,
                    role = ?req.role,
                    conn = req.conn,
                    "request"
                );
                let route = Route {
                    tx: replies,
                    streaming: req.streaming,
                    topic: rpc::catalog::lookup(&req.topic).map_or("unknown", |t| t.name),
                    start: Instant::now(),
                };
                if route.is_agent() {
                    self.metrics.agent_opened();
                }
                if route.streaming {
                    self.metrics.stream_opened(route.topic, route.tx.probe());
                }
                let old = match self.routes.entry(req.conn) {
                    std::collections::hash_map::Entry::Occupied(mut e) => {
                        e.get_mut().insert(req.matchtag, route)
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(ConnRoutes::One(req.matchtag, route));
                        None
                    }
                };
                if old.is_some_and(|r| r.is_agent()) {
                    self.metrics.agent_closed();
                }
                Input::Request(req)
            }
            // (Its queue slot goes with the message.)
            Incoming::SessionLine { conn, payload, .. } => Input::SessionLine { conn, payload },
            Incoming::Disconnect(conn) => {
                self.disconnect(conn);
                Input::Disconnect(conn)
            }
            // Dropped by `take` before it gets here; a tick is harmless.
            Incoming::Wake => Input::Tick,
        }
    }

    /// Forget the routes of a connection that is gone.
    fn disconnect(&mut self, conn: ConnId) {
        if let Some(gone) = self.routes.remove(&conn) {
            for _ in gone.values().filter(|r| r.is_agent()) {
                self.metrics.agent_closed();
            }
        }
    }

    /// Let the core handle one input, resolving `LoadR` requests (reload)
    /// on the spot.
    fn handle(&mut self, input: Input, out: &mut Vec<Output>) {
        let start = out.len();
        self.core.handle(clock(), input, out);
        let mut i = start;
        while i < out.len() {
            if matches!(out[i], Output::Enrol { .. }) {
                if let Output::Enrol {
                    to,
                    hostname,
                    csr,
                    requester,
                } = out.remove(i)
                {
                    let mut answer = Vec::new();
                    self.enrol(to, &hostname, &csr, &requester, &mut answer);
                    let n = answer.len();
                    for (k, o) in answer.into_iter().enumerate() {
                        out.insert(i + k, o);
                    }
                    i += n;
                }
                continue;
            }
            if !matches!(out[i], Output::LoadR { .. }) {
                i += 1;
                continue;
            }
            if let Output::LoadR {
                to,
                path,
                xml,
                force,
            } = out.remove(i)
            {
                let dir = self.reload_dir.clone();
                match &self.waker {
                    // Off the loop: a slow file system never holds up the
                    // other requests; the result comes back through
                    // `reloads` and a wake-up.
                    Some(w) => {
                        let (w, done) = (w.clone(), Arc::clone(&self.reloads));
                        let spawned = std::thread::Builder::new()
                            .name("roster-reload".into())
                            .spawn(move || {
                                let result = crate::load_reload_r(&path, xml, dir.as_deref());
                                done.lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push((to, force, result));
                                let _ = w.send(Incoming::Wake);
                            });
                        if let Err(e) = spawned {
                            let result = Err(rpc::RpcError::new(
                                rpc::errno::EAGAIN,
                                format!("cannot start the reload: {e}"),
                            ));
                            self.core
                                .handle(clock(), Input::Reloaded { to, force, result }, out);
                        }
                    }
                    None => {
                        let result = crate::load_reload_r(&path, xml, dir.as_deref());
                        self.core
                            .handle(clock(), Input::Reloaded { to, force, result }, out);
                    }
                }
            }
        }
    }

    /// Commit a batch's outputs, then deliver them; then tell the core of
    /// the streams the listeners refused while delivering (and commit
    /// what that produced, e.g. acquire updates of other groups).
    fn commit(&mut self, mut out: Vec<Output>) -> Result<(), ServeError> {
        loop {
            if let Err(e) = self.persist(&out) {
                // Nothing of this batch is acknowledged: drop every open
                // request (clients see the connection close) and stop.
                if let ServeError::Deposed(why) = &e {
                    self.step_down(why);
                }
                for r in self.routes.values().flat_map(ConnRoutes::values) {
                    if r.is_agent() {
                        self.metrics.agent_closed();
                    }
                }
                self.routes.clear();
                self.gone.clear();
                self.ended.clear();
                return Err(e);
            }
            self.deliver(out);
            self.metrics.refresh(&self.core, Instant::now(), false);
            out = Vec::new();
            for conn in std::mem::take(&mut self.ended) {
                self.disconnect(conn);
                self.core.handle(clock(), Input::Disconnect(conn), &mut out);
            }
            for to in std::mem::take(&mut self.gone) {
                self.core.handle(clock(), Input::Cancel(to), &mut out);
            }
            if out.is_empty() {
                self.reserve_log();
                return Ok(());
            }
        }
    }

    /// The leadership is lost (etcd backend): end every open stream and
    /// pending request with EAGAIN naming the reason, so that clients
    /// reconnect to the new leader.  The core is dropped by the caller.
    pub(crate) fn step_down(&mut self, why: &str) {
        let text = format!("this server lost the leadership ({why}): reconnect to the new leader");
        for (_, conn) in self.routes.drain() {
            for route in conn.into_values() {
                if route.is_agent() {
                    // The metrics outlive this leadership (etcd backend).
                    self.metrics.agent_closed();
                }
                let _ = route
                    .tx
                    .send(Err(rpc::RpcError::new(rpc::errno::EAGAIN, text.clone())));
            }
        }
    }

    /// SIGHUP: re-read the configuration.  `[resource.groups]` takes
    /// effect at once (RFC 28 shrink/release/grow); everything else needs a
    /// restart.
    fn reload_config(&mut self) -> Result<(), ServeError> {
        let Some(path) = self.config_path.clone() else {
            tracing::info!("SIGHUP: no configuration file to reload");
            return Ok(());
        };
        match config::Config::from_path(&path) {
            Ok(c) => {
                tracing::info!(
                    "SIGHUP: reloaded {}: [resource.groups] applied; other changes take effect at restart",
                    path.display()
                );
                let mut out = Vec::new();
                self.handle(Input::SetGroups(c.resource.groups), &mut out);
                self.commit(out)
            }
            Err(e) => {
                tracing::error!("SIGHUP: configuration not reloaded: {e}");
                Ok(())
            }
        }
    }

    /// Serve until a stop is requested (or every listener is gone), then
    /// shut the core down cleanly: streams end, the checkpoint is written.
    pub fn run(
        &mut self,
        rx: &Receiver<Incoming>,
        control: &Control,
        notifier: &mut crate::notify::Notifier,
    ) -> Result<(), ServeError> {
        let result = self.serve(rx, control, notifier);
        // Whatever ended the loop, nothing is answered from its state any
        // more.
        if let Some(s) = &self.snapshots {
            s.clear();
        }
        result
    }

    fn serve(
        &mut self,
        rx: &Receiver<Incoming>,
        control: &Control,
        notifier: &mut crate::notify::Notifier,
    ) -> Result<(), ServeError> {
        loop {
            notifier.watchdog(Instant::now());
            if control.stop_requested() {
                break;
            }
            if let Some(why) = self.lost_leadership(control) {
                self.step_down(&why);
                return Err(ServeError::Deposed(why));
            }
            if control.take_reload() {
                self.reload_config()?;
            }
            if self.waker.is_none() {
                self.waker = control.waker();
            }
            self.take_reloaded()?;
            // Sleep until the next input or the core's next deadline
            // (heartbeat timers, liveness batching): no polling.
            // The metrics' pending refresh and systemd's watchdog ping
            // (shell deadlines on the same monotonic clock) wake it too.
            let mut wait = wait_for(self.core.next_deadline(), clock().mono);
            #[cfg(feature = "etcd")]
            if matches!(self.backing, Backing::Etcd(_)) {
                // The lease is checked at least this often.
                wait = Some(wait.map_or(LEASE_CHECK, |w| w.min(LEASE_CHECK)));
            }
            let now = Instant::now();
            self.release.run(now);
            for due in [
                self.metrics.refresh_due(),
                notifier.next_watchdog(),
                self.release.due(),
            ]
            .into_iter()
            .flatten()
            {
                let d = due.saturating_duration_since(now);
                wait = Some(wait.map_or(d, |w| w.min(d)));
            }
            if self.lanes.is_empty() {
                let first = match wait {
                    Some(d) => rx.recv_timeout(d),
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
                match first {
                    Ok(m) => self.take(m),
                    Err(RecvTimeoutError::Timeout) => {
                        if let Some(why) = self.lost_leadership(control) {
                            self.step_down(&why);
                            return Err(ServeError::Deposed(why));
                        }
                        // A deadline passed: the liveness timers, the
                        // metrics' refresh or the watchdog (at the top of
                        // the loop).
                        let mut out = Vec::new();
                        self.core.handle(clock(), Input::Tick, &mut out);
                        self.commit(out)?;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            self.serve_waiting(rx, control)?;
        }
        self.shutdown()?;
        tracing::info!("stopped; drain checkpoint written");
        Ok(())
    }

    /// Queue one message from the listeners in its lane (a wake-up is
    /// dropped: the flags are checked at the top of the loop).
    fn take(&mut self, m: Incoming) {
        match m {
            Incoming::Wake => return,
            Incoming::Request { .. } => self.release.request(Instant::now()),
            _ => {}
        }
        let routes = &self.routes;
        self.lanes.push(m, |c| {
            routes
                .get(&c)
                .is_some_and(|r| r.values().any(Route::is_agent))
        });
    }

    /// Take every message waiting on `rx` into the lanes (up to a bound),
    /// then handle one batch: the waiting client requests, or a chunk of
    /// agent lines or guest requests (see [`crate::lanes`]).  Returns how
    /// many messages the batch held.
    pub fn serve_waiting(
        &mut self,
        rx: &Receiver<Incoming>,
        control: &Control,
    ) -> Result<usize, ServeError> {
        while self.lanes.len() < MAX_WAITING {
            let Ok(m) = rx.try_recv() else { break };
            self.take(m);
        }
        let batch = self.lanes.next_batch();
        if batch.is_empty() {
            return Ok(0);
        }
        if let Some(why) = self.lost_leadership(control) {
            // Not one of these is handled: the standby answers them.
            self.step_down(&why);
            let mut unhandled = batch;
            unhandled.extend(self.lanes.take_all());
            self.unhandled = unhandled;
            return Err(ServeError::Deposed(why));
        }
        let n = batch.len();
        self.step(batch)?;
        Ok(n)
    }

    /// Handle one batch of messages from the listeners: each goes to the
    /// core, then the batch's liveness transitions are posted, its events
    /// made durable (one write + fdatasync) and only then its replies
    /// sent.  On a persistence error nothing of the batch is acknowledged
    /// (every open request is dropped) and the daemon must stop.
    pub fn step(&mut self, batch: Vec<Incoming>) -> Result<(), ServeError> {
        let mut out = Vec::new();
        for m in batch {
            let input = self.input_of(m);
            self.handle(input, &mut out);
        }
        // Post the batch's liveness transitions (one event per kind).
        self.core.handle(clock(), Input::Tick, &mut out);
        self.commit(out)
    }

    /// Clean shutdown: streams end, the drain checkpoint is written, the
    /// eventlog's preallocated room is cut.
    pub fn shutdown(&mut self) -> Result<(), ServeError> {
        let mut out = Vec::new();
        self.core.handle(clock(), Input::Shutdown, &mut out);
        self.commit(out)?;
        #[allow(irrefutable_let_patterns)] // one variant without the etcd feature
        if let Backing::Local(dir) = &mut self.backing {
            dir.trim_log().map_err(ServeError::Persist)?;
        }
        Ok(())
    }

    /// Preallocated room for the eventlog's next appends (see
    /// `store::EventLogFile::reserve`), made after a batch's replies went
    /// out.  After a failure (a full disk) the next 1,024 batches do not
    /// try again; appends go on, growing the file.
    fn reserve_log(&mut self) {
        #[allow(irrefutable_let_patterns)] // one variant without the etcd feature
        let Backing::Local(dir) = &mut self.backing
        else {
            return;
        };
        if self.reserve_backoff > 0 {
            self.reserve_backoff -= 1;
            return;
        }
        if let Err(e) = dir.reserve_log() {
            tracing::warn!("{e} (events are still appended, growing the file)");
            self.reserve_backoff = 1024;
        }
    }
}

/// How long the loop may sleep at monotonic time `mono` before the core's
/// `deadline` (plus a little slack) passes; `None`: no deadline, sleep
/// until an input arrives.
fn wait_for(deadline: Option<Duration>, mono: Duration) -> Option<Duration> {
    deadline.map(|d| d.saturating_add(DEADLINE_SLACK).saturating_sub(mono))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_fields_are_bounded_with_a_count_of_what_was_left_out() {
        assert_eq!(
            bounded("drain idset=0-3 reason=fan"),
            "drain idset=0-3 reason=fan"
        );
        let ids: Vec<String> = (0..40_000).step_by(2).map(|r| r.to_string()).collect();
        let ids = ids.join(",");
        let line = format!("drain idset={ids} nodelist=n[0-9] overwrite=0 reason=bad  psu");
        let b = bounded(&line);
        let words: Vec<&str> = b.split(' ').collect();
        assert!(words.iter().all(|w| w.len() <= LOG_FIELD_MAX), "{b}");
        assert!(b.starts_with("drain idset=0,2,4,"), "{b}");
        let kept = LOG_FIELD_MAX - 40;
        let left = format!("idset={ids}").len() - kept;
        assert!(b.contains(&format!("...(+{left} bytes)")), "{b}");
        // The short fields and the spacing are kept as they were.
        assert!(
            b.ends_with(" nodelist=n[0-9] overwrite=0 reason=bad  psu"),
            "{b}"
        );
        // A cut never splits a character.
        let wide = "é".repeat(300);
        assert!(bounded(&wide).starts_with(&"é".repeat(80)));
    }

    #[test]
    fn the_loop_sleeps_until_the_deadline_or_an_input() {
        let s = Duration::from_secs;
        assert_eq!(wait_for(None, s(5)), None, "nothing timed: block");
        assert_eq!(wait_for(Some(s(10)), s(4)), Some(s(6) + DEADLINE_SLACK));
        // A deadline already passed: tick at once.
        assert_eq!(wait_for(Some(s(3)), s(4)), Some(Duration::ZERO));
        assert_eq!(
            wait_for(Some(Duration::MAX), s(4)),
            Some(Duration::MAX - s(4))
        );
    }
}
