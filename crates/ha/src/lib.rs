//! High availability for `roster serve`: etcd as the replicated log, and
//! leader election with an etcd lease.
//!
//! # Keys (under the configured prefix `P`)
//!
//! | key | value | written by |
//! |---|---|---|
//! | `P/leader` | `{"id": ..., "uri": ...}`, attached to the leader's lease | [`Etcd::campaign`] |
//! | `P/log/<20-digit seq>` | one group commit: its events as RFC 18 lines; `seq` is the absolute index of its first event | [`Etcd::commit`] |
//! | `P/R` | `resource.R` text | [`Etcd::commit`] |
//! | `P/checkpoint` | the drain checkpoint, with its position [`POSITION_KEY`] `{"seq": N}` (it summarises the events with index < N) | [`Etcd::commit`] |
//!
//! # Guarantees
//!
//! * Every [`Etcd::commit`] is ONE etcd transaction, guarded by the
//!   leader key: it compares `P/leader`'s value (unique per campaign) and
//!   create revision, and that the new log key does not exist yet.  A
//!   server whose lease expired (its leader key is deleted by etcd) or that
//!   was replaced can therefore never append, whatever its clock says.
//! * A transaction whose outcome is unknown (a member died, a timeout) is
//!   retried while the lease is still ours; the retry recognises its own
//!   earlier success (same key, same value), so a batch is never applied
//!   twice.
//! * The leader's lease is kept alive every TTL/4; [`Leadership::status`]
//!   stops being valid, by the monotonic clock, TTL after the last keepalive
//!   *sent* that etcd acknowledged: etcd cannot expire the lease before
//!   that moment, so the old leader stops acting before a new one can be
//!   elected.  It then waits ([`LeaseStatus::Uncertain`], acting on
//!   nothing) for up to another TTL: a keepalive acknowledged in that time
//!   (etcd elected a new raft leader, which renews every lease) makes it
//!   valid again; etcd saying the lease is gone, or the wait running out,
//!   makes it [`LeaseStatus::Lost`].
//!
//! The API is blocking (the service loop is a plain thread); a small tokio
//! runtime inside [`Etcd`] runs the gRPC client and the keepalive task.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions,
    Identity, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use eventlog::Event;
use serde_json::Value;

/// The checkpoint key holding its position in the etcd log.
pub const POSITION_KEY: &str = "etcd_position";
/// Log keys fetched per request.
const PAGE: i64 = 1000;

/// How to reach etcd.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `http://HOST:PORT` or `https://HOST:PORT`.
    pub endpoints: Vec<String>,
    /// Key prefix, without a trailing `/`.
    pub prefix: String,
    /// PEM CA certificate for TLS.
    pub ca: Option<PathBuf>,
    /// PEM client certificate and key for TLS client authentication.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// The leader's lease.
    pub lease_ttl: Duration,
    /// Timeout of one etcd request.
    pub timeout: Duration,
}

/// Errors of the etcd backend.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error("cannot start the etcd client runtime: {0}")]
    Runtime(std::io::Error),
    #[error("etcd {}: {reason}", endpoints.join(","))]
    Connect {
        endpoints: Vec<String>,
        reason: String,
    },
    #[error("{}: {reason}", path.display())]
    Tls { path: PathBuf, reason: String },
    #[error("etcd {op}: {reason}")]
    Etcd { op: &'static str, reason: String },
    #[error("etcd key {key}: {reason}")]
    Corrupt { key: String, reason: String },
    /// This server is no longer the leader: its lease expired or another
    /// server holds the leader key.  Nothing was written.
    #[error("not the leader any more: {0}")]
    Deposed(String),
}

fn etcd_err(op: &'static str) -> impl FnOnce(etcd_client::Error) -> HaError {
    move |e| HaError::Etcd {
        op,
        reason: e.to_string(),
    }
}

/// The leader key's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    /// Unique per campaign.
    pub id: String,
    /// Where clients reach it (comma list of URIs).
    pub uri: String,
    /// The leader key's create revision.
    pub create_revision: i64,
}

impl LeaderInfo {
    fn value(id: &str, uri: &str) -> String {
        serde_json::json!({"id": id, "uri": uri}).to_string()
    }

    fn parse(v: &[u8], create_revision: i64) -> Option<LeaderInfo> {
        let v: Value = serde_json::from_slice(v).ok()?;
        Some(LeaderInfo {
            id: v.get("id")?.as_str()?.to_string(),
            uri: v.get("uri")?.as_str()?.to_string(),
            create_revision,
        })
    }
}

/// What this server knows of the replicated state: the whole log (since the
/// last truncation), R, the checkpoint, the leader.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The etcd revision this state reflects.
    pub revision: i64,
    pub r: Option<String>,
    pub checkpoint: Option<Value>,
    /// Every event of the log, in order.
    pub events: Vec<Event>,
    /// The log's keys: (seq, number of events), in order.
    pub batches: Vec<(u64, usize)>,
    /// The absolute index of the next event.
    pub next_seq: u64,
    /// The current leader, if any.
    pub leader: Option<LeaderInfo>,
}

impl State {
    /// The absolute index of `events[0]`.
    pub fn first_seq(&self) -> u64 {
        self.batches.first().map_or(self.next_seq, |b| b.0)
    }

    /// The checkpoint's position as an index into [`State::events`]
    /// (replay starts there); `None` without a checkpoint or position.
    pub fn replay_from(&self) -> Option<usize> {
        let n = self
            .checkpoint
            .as_ref()?
            .get(POSITION_KEY)?
            .get("seq")?
            .as_u64()?;
        let first = self.first_seq();
        if n < first || n > self.next_seq {
            return None;
        }
        usize::try_from(n - first).ok()
    }

    fn push_batch(&mut self, key: &str, seq: u64, text: &[u8]) -> Result<(), HaError> {
        let corrupt = |reason: String| HaError::Corrupt {
            key: key.to_string(),
            reason,
        };
        if seq != self.next_seq && !self.batches.is_empty() {
            return Err(corrupt(format!(
                "expected the batch starting at event {}, found {seq}",
                self.next_seq
            )));
        }
        let text = std::str::from_utf8(text).map_err(|_| corrupt("not UTF-8".into()))?;
        let events = eventlog::decode_log(text).map_err(|e| corrupt(e.to_string()))?;
        if events.is_empty() {
            return Err(corrupt("empty batch".into()));
        }
        self.batches.push((seq, events.len()));
        self.next_seq = seq + events.len() as u64;
        self.events.extend(events);
        Ok(())
    }

    /// Forget the batches before absolute index `seq` (truncated by the
    /// leader).
    fn drop_before(&mut self, seq: u64) {
        let mut n = 0;
        let mut k = 0;
        for &(s, c) in &self.batches {
            if s >= seq {
                break;
            }
            n += c;
            k += 1;
        }
        self.batches.drain(..k);
        self.events.drain(..n);
    }
}

/// One key change seen by a watch ([`Etcd::tail`]).
#[derive(Debug, Clone)]
pub enum Change {
    Put {
        key: String,
        value: Vec<u8>,
        create_revision: i64,
    },
    Delete {
        key: String,
    },
}

/// What a watch ([`Etcd::tail`]) reports.
#[derive(Debug, Clone)]
pub enum TailMsg {
    /// The changes of one or more revisions, in order, up to `revision`.
    Changes { revision: i64, changes: Vec<Change> },
    /// A progress answer: everything up to `revision` has been reported;
    /// `asked` is when the answered request was sent (monotonic clock).
    Progress { revision: i64, asked: Instant },
    /// The watch ended (a member died, compaction, ...): read what was
    /// missed ([`Etcd::poll`]) and tail again.
    Ended(String),
}

/// What [`Etcd::apply`] changed in a [`State`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Events appended to [`State::events`].
    pub events: usize,
    /// `R` was written with a different text.
    pub r_changed: bool,
}

/// A running watch of the prefix: its reports, bounded (the watch waits
/// while the channel is full).  The watch stops when this is dropped.
#[derive(Debug)]
pub struct Tail {
    rx: tokio::sync::mpsc::Receiver<TailMsg>,
    task: tokio::task::JoinHandle<()>,
}

/// Reports a [`Tail`] may hold before its watch waits for the reader.
const TAIL_QUEUE: usize = 256;

impl Tail {
    /// The next report, if one is waiting.
    pub fn try_next(&mut self) -> Option<TailMsg> {
        match self.rx.try_recv() {
            Ok(m) => Some(m),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => None,
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                Some(TailMsg::Ended("the watch task ended".into()))
            }
        }
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Something a group commit writes.
#[derive(Debug, Clone)]
pub enum Op {
    /// Events appended to the log (one key per commit).
    Events(Vec<Event>),
    /// `resource.R`.
    R(String),
    /// The drain checkpoint; its position (the log's end at this point of
    /// the commit) is added.
    Checkpoint(Value),
}

/// A won election: the lease and its keepalive.
#[derive(Debug)]
pub struct Leadership {
    pub info: LeaderInfo,
    lease: i64,
    value: String,
    ttl: Duration,
    /// Monotonic deadline: TTL after the last acknowledged keepalive's send.
    deadline: Arc<Mutex<Instant>>,
    lost: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// What a leader knows of its lease ([`Leadership::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Certainly ours (monotonic clock): act.
    Valid,
    /// Not confirmed for the TTL, not known to be lost (etcd is electing
    /// a raft leader, or this member is unreachable): act on nothing,
    /// wait for a keepalive.
    Uncertain,
    /// Gone (etcd said so, or unconfirmed for twice the TTL): step down.
    Lost(String),
}

impl Leadership {
    /// Valid, uncertain (suspend) or lost (step down).
    pub fn status(&self) -> LeaseStatus {
        if self.lost.load(Ordering::SeqCst) {
            return LeaseStatus::Lost("the lease expired or was revoked in etcd".into());
        }
        let deadline = *self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now < deadline {
            LeaseStatus::Valid
        } else if now < deadline + self.ttl {
            LeaseStatus::Uncertain
        } else {
            LeaseStatus::Lost(self.why_lost())
        }
    }

    /// Why [`Leadership::status`] is not valid.
    pub fn why_lost(&self) -> String {
        if self.lost.load(Ordering::SeqCst) {
            "the lease expired or was revoked in etcd".to_string()
        } else {
            format!(
                "no keepalive acknowledged by etcd within twice the lease TTL ({}s)",
                self.ttl.as_secs()
            )
        }
    }

    pub fn lease_id(&self) -> i64 {
        self.lease
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A connection to etcd with its runtime.
pub struct Etcd {
    rt: tokio::runtime::Runtime,
    client: Client,
    prefix: String,
    settings: Settings,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("endpoints", &self.settings.endpoints)
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn read_pem(path: &PathBuf) -> Result<Vec<u8>, HaError> {
    std::fs::read(path).map_err(|e| HaError::Tls {
        path: path.clone(),
        reason: e.to_string(),
    })
}

/// The end of the range of keys starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    // The prefixes used here end with '/', never with 0xff.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

impl Etcd {
    /// Connect (lazily: the first request reveals an unreachable cluster).
    pub fn connect(settings: Settings) -> Result<Etcd, HaError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("roster-etcd")
            .build()
            .map_err(HaError::Runtime)?;
        let mut opts = ConnectOptions::new()
            .with_timeout(settings.timeout)
            .with_connect_timeout(settings.timeout)
            .with_keep_alive(Duration::from_secs(1), settings.timeout)
            .with_keep_alive_while_idle(true);
        let tls = settings.ca.is_some() || settings.identity.is_some();
        if tls {
            let mut t = TlsOptions::new();
            if let Some(ca) = &settings.ca {
                t = t.ca_certificate(Certificate::from_pem(read_pem(ca)?));
            }
            if let Some((cert, key)) = &settings.identity {
                t = t.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
            }
            opts = opts.with_tls(t);
        }
        let endpoints = settings.endpoints.clone();
        let client = rt
            .block_on(Client::connect(&endpoints, Some(opts)))
            .map_err(|e| HaError::Connect {
                endpoints: endpoints.clone(),
                reason: e.to_string(),
            })?;
        Ok(Etcd {
            rt,
            client,
            prefix: settings.prefix.clone(),
            settings,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn leader_key(&self) -> String {
        format!("{}/leader", self.prefix)
    }
    fn r_key(&self) -> String {
        format!("{}/R", self.prefix)
    }
    fn checkpoint_key(&self) -> String {
        format!("{}/checkpoint", self.prefix)
    }
    fn log_prefix(&self) -> String {
        format!("{}/log/", self.prefix)
    }
    /// The log key of the batch starting at absolute index `seq`.
    pub fn log_key(&self, seq: u64) -> String {
        format!("{}/log/{seq:020}", self.prefix)
    }
    fn seq_of(&self, key: &[u8]) -> Result<u64, HaError> {
        let k = String::from_utf8_lossy(key);
        k.strip_prefix(&self.log_prefix())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| HaError::Corrupt {
                key: k.to_string(),
                reason: "not a log key".into(),
            })
    }

    /// Read everything at one revision: leader, R, checkpoint and the
    /// whole log (paged).
    pub fn load(&self) -> Result<State, HaError> {
        let mut st = State::default();
        self.poll(&mut st)?;
        Ok(st)
    }

    /// Bring `st` up to date: the leader, R and checkpoint if they changed
    /// since `st.revision`, and the log keys after `st.next_seq`.  Returns
    /// true if anything but the leader changed.
    pub fn poll(&self, st: &mut State) -> Result<bool, HaError> {
        let mut client = self.client.clone();
        let since = st.revision + 1;
        let changed_since = |o: GetOptions| {
            if st.revision > 0 {
                o.with_min_mod_revision(since)
            } else {
                o
            }
        };
        let log_from = self.log_key(st.next_seq);
        let log_end = prefix_end(&self.log_prefix());
        let txn = Txn::new().and_then(vec![
            TxnOp::get(self.leader_key(), None),
            TxnOp::get(self.r_key(), Some(changed_since(GetOptions::new()))),
            TxnOp::get(
                self.checkpoint_key(),
                Some(changed_since(GetOptions::new())),
            ),
            TxnOp::get(
                log_from,
                Some(
                    GetOptions::new()
                        .with_range(log_end.clone())
                        .with_limit(PAGE),
                ),
            ),
        ]);
        let resp = self
            .rt
            .block_on(client.txn(txn))
            .map_err(etcd_err("read"))?;
        let revision = resp.header().map_or(0, |h| h.revision());
        let mut changed = false;
        let mut more = false;
        for (i, r) in resp.op_responses().into_iter().enumerate() {
            let TxnOpResponse::Get(g) = r else { continue };
            match i {
                0 => {
                    st.leader = g
                        .kvs()
                        .first()
                        .and_then(|kv| LeaderInfo::parse(kv.value(), kv.create_revision()));
                }
                1 => {
                    if let Some(kv) = g.kvs().first() {
                        let text = kv.value_str().map_err(|_| HaError::Corrupt {
                            key: self.r_key(),
                            reason: "not UTF-8".into(),
                        })?;
                        st.r = Some(text.to_string());
                        changed = true;
                    } else if st.revision == 0 {
                        st.r = None;
                    }
                }
                2 => {
                    if let Some(kv) = g.kvs().first() {
                        let v =
                            serde_json::from_slice(kv.value()).map_err(|e| HaError::Corrupt {
                                key: self.checkpoint_key(),
                                reason: e.to_string(),
                            })?;
                        st.checkpoint = Some(v);
                        changed = true;
                    }
                }
                _ => {
                    for kv in g.kvs() {
                        let seq = self.seq_of(kv.key())?;
                        st.push_batch(&String::from_utf8_lossy(kv.key()), seq, kv.value())?;
                        changed = true;
                    }
                    more = g.more();
                }
            }
        }
        st.revision = revision;
        // The rest of a long log, at the same revision.
        while more {
            let from = self.log_key(st.next_seq);
            let opts = GetOptions::new()
                .with_range(log_end.clone())
                .with_limit(PAGE)
                .with_revision(revision);
            let g = self
                .rt
                .block_on(client.get(from, Some(opts)))
                .map_err(etcd_err("read log"))?;
            for kv in g.kvs() {
                let seq = self.seq_of(kv.key())?;
                st.push_batch(&String::from_utf8_lossy(kv.key()), seq, kv.value())?;
            }
            more = g.more() && !g.kvs().is_empty();
        }
        Ok(changed)
    }

    /// Watch everything under the prefix from `from_revision` on (a hot
    /// standby tailing the log: pass the revision after the last one it
    /// has read).  A progress request is sent every `progress` so that
    /// the reader knows how current it is; `wake` is called after each
    /// report is queued.
    pub fn tail(
        &self,
        from_revision: i64,
        progress: Duration,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Tail {
        let (tx, rx) = tokio::sync::mpsc::channel(TAIL_QUEUE);
        let task = self.rt.spawn(tail_task(
            self.client.clone(),
            format!("{}/", self.prefix),
            from_revision,
            progress,
            self.settings.timeout,
            tx,
            wake,
        ));
        Tail { rx, task }
    }

    /// Apply the changes a watch reported to `st` (no IO): log batches in
    /// order (those `st` already has are skipped), R, the checkpoint, the
    /// leader key.  A gap in the log is [`HaError::Corrupt`]: read the
    /// state again.
    pub fn apply(
        &self,
        st: &mut State,
        revision: i64,
        changes: &[Change],
    ) -> Result<Applied, HaError> {
        let mut applied = Applied::default();
        let log_prefix = self.log_prefix();
        for c in changes {
            match c {
                Change::Put {
                    key,
                    value,
                    create_revision,
                } => {
                    if key.starts_with(&log_prefix) {
                        let seq = self.seq_of(key.as_bytes())?;
                        if seq < st.next_seq && !st.batches.is_empty() {
                            continue; // already read (a poll overlapping the watch)
                        }
                        let before = st.events.len();
                        st.push_batch(key, seq, value)?;
                        applied.events += st.events.len() - before;
                    } else if *key == self.leader_key() {
                        st.leader = LeaderInfo::parse(value, *create_revision);
                    } else if *key == self.r_key() {
                        let text = std::str::from_utf8(value).map_err(|_| HaError::Corrupt {
                            key: key.clone(),
                            reason: "not UTF-8".into(),
                        })?;
                        if st.r.as_deref() != Some(text) {
                            st.r = Some(text.to_string());
                            applied.r_changed = true;
                        }
                    } else if *key == self.checkpoint_key() {
                        let v = serde_json::from_slice(value).map_err(|e| HaError::Corrupt {
                            key: key.clone(),
                            reason: e.to_string(),
                        })?;
                        st.checkpoint = Some(v);
                    }
                }
                Change::Delete { key } => {
                    // Log keys are deleted by history truncation: the
                    // events stay in memory until the next takeover syncs
                    // it ([`Etcd::sync_truncation`]).
                    if *key == self.leader_key() {
                        st.leader = None;
                    }
                }
            }
        }
        st.revision = st.revision.max(revision);
        Ok(applied)
    }

    /// Forget in `st` the batches the leader truncated (keys before the
    /// first log key in etcd).
    pub fn sync_truncation(&self, st: &mut State) -> Result<(), HaError> {
        let mut client = self.client.clone();
        let opts = GetOptions::new()
            .with_range(prefix_end(&self.log_prefix()))
            .with_limit(1)
            .with_keys_only();
        let g = self
            .rt
            .block_on(client.get(self.log_prefix(), Some(opts)))
            .map_err(etcd_err("read log"))?;
        match g.kvs().first() {
            Some(kv) => {
                let first = self.seq_of(kv.key())?;
                st.drop_before(first);
            }
            None => st.drop_before(u64::MAX),
        }
        Ok(())
    }

    /// Try to become the leader: grant a lease and create the leader key
    /// if nobody holds it.  `None` if another server leads (its info is
    /// then in `st.leader` after the next poll).
    pub fn campaign(&self, id: &str, uri: &str) -> Result<Option<Leadership>, HaError> {
        let mut client = self.client.clone();
        let ttl = self.settings.lease_ttl;
        let ttl_secs = ttl.as_secs().max(1) as i64;
        let before_grant = Instant::now();
        let lease = self
            .rt
            .block_on(client.lease_grant(ttl_secs, None))
            .map_err(etcd_err("lease grant"))?
            .id();
        let value = LeaderInfo::value(id, uri);
        let key = self.leader_key();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                key.clone(),
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let resp = match self.rt.block_on(client.txn(txn)) {
            Ok(r) => r,
            Err(e) => {
                let _ = self.rt.block_on(client.lease_revoke(lease));
                return Err(etcd_err("campaign")(e));
            }
        };
        if !resp.succeeded() {
            let _ = self.rt.block_on(client.lease_revoke(lease));
            return Ok(None);
        }
        let create_revision = resp.header().map_or(0, |h| h.revision());
        let deadline = Arc::new(Mutex::new(before_grant + ttl));
        let lost = Arc::new(AtomicBool::new(false));
        let task = self.rt.spawn(keepalive(
            client,
            lease,
            ttl,
            Arc::clone(&deadline),
            Arc::clone(&lost),
        ));
        Ok(Some(Leadership {
            info: LeaderInfo {
                id: id.to_string(),
                uri: uri.to_string(),
                create_revision,
            },
            lease,
            value,
            ttl,
            deadline,
            lost,
            task,
        }))
    }

    /// Give the leadership up at once (clean stop): revoke the lease, which
    /// deletes the leader key.
    pub fn resign(&self, lead: Leadership) {
        let mut client = self.client.clone();
        lead.task.abort();
        let _ = self.rt.block_on(client.lease_revoke(lead.lease));
    }

    fn guard(&self, lead: &Leadership) -> Vec<Compare> {
        vec![
            Compare::value(self.leader_key(), CompareOp::Equal, lead.value.clone()),
            Compare::create_revision(
                self.leader_key(),
                CompareOp::Equal,
                lead.info.create_revision,
            ),
        ]
    }

    /// One group commit: every op in one transaction guarded by the leader
    /// key.  On success `st` reflects it.  Retried (idempotently) on
    /// transport errors while the lease is ours.
    pub fn commit(&self, lead: &Leadership, st: &mut State, ops: Vec<Op>) -> Result<(), HaError> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut puts = Vec::new();
        let mut compares = self.guard(lead);
        let mut next = st.next_seq;
        let mut new_batches = Vec::new();
        let mut first_log: Option<(String, String)> = None;
        let mut r_new = None;
        let mut cp_new = None;
        let mut new_events = Vec::new();
        for op in ops {
            match op {
                Op::Events(evs) => {
                    if evs.is_empty() {
                        continue;
                    }
                    let text = eventlog::encode_log(&evs).map_err(|e| HaError::Etcd {
                        op: "encode",
                        reason: e.to_string(),
                    })?;
                    let key = self.log_key(next);
                    compares.push(Compare::create_revision(key.clone(), CompareOp::Equal, 0));
                    puts.push(TxnOp::put(key.clone(), text.clone(), None));
                    first_log.get_or_insert((key, text));
                    new_batches.push((next, evs.len()));
                    next += evs.len() as u64;
                    new_events.extend(evs);
                }
                Op::R(text) => {
                    puts.push(TxnOp::put(self.r_key(), text.clone(), None));
                    r_new = Some(text);
                }
                Op::Checkpoint(mut v) => {
                    if let Some(o) = v.as_object_mut() {
                        o.insert(POSITION_KEY.into(), serde_json::json!({"seq": next}));
                    }
                    puts.push(TxnOp::put(self.checkpoint_key(), v.to_string(), None));
                    cp_new = Some(v);
                }
            }
        }
        let check = match &first_log {
            Some((key, _)) => vec![
                TxnOp::get(self.leader_key(), None),
                TxnOp::get(key.clone(), None),
            ],
            None => vec![TxnOp::get(self.leader_key(), None)],
        };
        let txn = Txn::new().when(compares).and_then(puts).or_else(check);
        let mut client = self.client.clone();
        let mut attempt = 0u32;
        let resp = loop {
            // Retried while the lease may still be ours (an etcd raft
            // election, a dead member: the client tries another endpoint,
            // each attempt bounded by the request timeout); the guard
            // makes a retry safe whatever happened meanwhile.
            if let LeaseStatus::Lost(why) = lead.status() {
                return Err(HaError::Deposed(why));
            }
            match self.rt.block_on(client.txn(txn.clone())) {
                Ok(r) => break r,
                Err(e) => {
                    attempt += 1;
                    tracing::warn!("etcd commit failed (attempt {attempt}), retrying: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        };
        if !resp.succeeded() {
            // Deposed, or our own earlier attempt went through.
            let mut leader_ok = false;
            let mut ours = false;
            for (i, r) in resp.op_responses().into_iter().enumerate() {
                let TxnOpResponse::Get(g) = r else { continue };
                let kv = g.kvs().first();
                if i == 0 {
                    leader_ok = kv.is_some_and(|kv| {
                        kv.value() == lead.value.as_bytes()
                            && kv.create_revision() == lead.info.create_revision
                    });
                } else {
                    ours = kv.is_some_and(|kv| {
                        first_log
                            .as_ref()
                            .is_some_and(|(_, text)| kv.value() == text.as_bytes())
                    });
                }
            }
            if !leader_ok {
                return Err(HaError::Deposed(
                    "another server holds the leader key (or the lease expired)".into(),
                ));
            }
            if !(attempt > 0 && ours) {
                return Err(HaError::Deposed(
                    "the log already has an entry at this position: another leader wrote it".into(),
                ));
            }
        }
        st.revision = resp.header().map_or(st.revision, |h| h.revision());
        st.batches.extend(new_batches);
        st.events.extend(new_events);
        st.next_seq = next;
        if let Some(r) = r_new {
            st.r = Some(r);
        }
        if let Some(cp) = cp_new {
            st.checkpoint = Some(cp);
        }
        Ok(())
    }

    /// History truncation (leader, at takeover): delete the longest run of
    /// first batches that lie entirely before the checkpoint's position and
    /// whose events `drop` all selects.  One guarded transaction.  Returns
    /// the number of events dropped.
    pub fn truncate(
        &self,
        lead: &Leadership,
        st: &mut State,
        drop: impl Fn(&Event) -> bool,
    ) -> Result<usize, HaError> {
        let Some(at) = st.replay_from() else {
            return Ok(0);
        };
        let first = st.first_seq();
        let mut idx = 0usize;
        let mut upto = None;
        for &(seq, n) in &st.batches {
            if idx + n > at || !st.events[idx..idx + n].iter().all(&drop) {
                break;
            }
            idx += n;
            upto = Some(seq + n as u64);
        }
        let Some(upto) = upto else { return Ok(0) };
        let txn = Txn::new()
            .when(self.guard(lead))
            .and_then(vec![TxnOp::delete(
                self.log_key(first),
                Some(DeleteOptions::new().with_range(self.log_key(upto))),
            )]);
        let mut client = self.client.clone();
        let resp = self
            .rt
            .block_on(client.txn(txn))
            .map_err(etcd_err("truncate"))?;
        if !resp.succeeded() {
            return Err(HaError::Deposed("the leader key changed".into()));
        }
        st.revision = resp.header().map_or(st.revision, |h| h.revision());
        st.drop_before(upto);
        Ok(idx)
    }

    /// (this member's id, the raft leader's id) as the member answering
    /// says: with a one-endpoint connection, whether that member leads.
    pub fn member_status(&self) -> Result<(u64, u64), HaError> {
        let mut client = self.client.clone();
        let s = self
            .rt
            .block_on(client.status())
            .map_err(etcd_err("status"))?;
        Ok((s.header().map_or(0, |h| h.member_id()), s.leader()))
    }

    /// Everything under the prefix as (key, value) text, for tests and
    /// tools.
    pub fn dump(&self) -> Result<Vec<(String, String)>, HaError> {
        let mut client = self.client.clone();
        let g = self
            .rt
            .block_on(client.get(
                format!("{}/", self.prefix),
                Some(GetOptions::new().with_prefix()),
            ))
            .map_err(etcd_err("read"))?;
        Ok(g.kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    String::from_utf8_lossy(kv.value()).into_owned(),
                )
            })
            .collect())
    }
}

/// The watch behind [`Etcd::tail`].
async fn tail_task(
    mut client: Client,
    prefix: String,
    from: i64,
    progress: Duration,
    timeout: Duration,
    tx: tokio::sync::mpsc::Sender<TailMsg>,
    wake: Box<dyn Fn() + Send + Sync>,
) {
    let end = |why: String| {
        let tx = tx.clone();
        let wake = &wake;
        async move {
            let _ = tx.send(TailMsg::Ended(why)).await;
            wake();
        }
    };
    let opts = WatchOptions::new()
        .with_prefix()
        .with_start_revision(from.max(1));
    let (mut watcher, mut stream) =
        match tokio::time::timeout(timeout, client.watch(prefix, Some(opts))).await {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => return end(format!("etcd watch: {e}")).await,
            Err(_) => return end("etcd watch: no answer".into()).await,
        };
    let mut asked: std::collections::VecDeque<Instant> = std::collections::VecDeque::new();
    let mut tick = tokio::time::interval(progress);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                // Unanswered for the request timeout: the member is gone
                // or cut off; the caller reads and watches again.
                if asked.front().is_some_and(|t| t.elapsed() > timeout) {
                    return end("etcd watch: progress requests unanswered".into()).await;
                }
                asked.push_back(Instant::now());
                if let Err(e) = watcher.request_progress().await {
                    return end(format!("etcd watch: {e}")).await;
                }
            }
            m = stream.message() => {
                let resp = match m {
                    Ok(Some(r)) => r,
                    Ok(None) => return end("etcd watch: stream closed".into()).await,
                    Err(e) => return end(format!("etcd watch: {e}")).await,
                };
                if resp.canceled() || resp.compact_revision() > 0 {
                    return end(format!(
                        "etcd watch canceled: {} (compacted at revision {})",
                        resp.cancel_reason(),
                        resp.compact_revision()
                    ))
                    .await;
                }
                let revision = resp.header().map_or(0, |h| h.revision());
                let msg = if resp.events().is_empty() {
                    match asked.pop_front() {
                        Some(t) => TailMsg::Progress { revision, asked: t },
                        None => continue,
                    }
                } else {
                    let mut changes = Vec::with_capacity(resp.events().len());
                    let mut last = revision;
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let key = String::from_utf8_lossy(kv.key()).into_owned();
                        last = kv.mod_revision();
                        changes.push(match ev.event_type() {
                            EventType::Put => Change::Put {
                                key,
                                value: kv.value().to_vec(),
                                create_revision: kv.create_revision(),
                            },
                            EventType::Delete => Change::Delete { key },
                        });
                    }
                    TailMsg::Changes { revision: last, changes }
                };
                if tx.send(msg).await.is_err() {
                    return;
                }
                wake();
            }
        }
    }
}

/// Keep the lease alive every TTL/3; move the deadline on each
/// acknowledged keepalive; mark the lease lost when etcd says it is gone.
async fn keepalive(
    mut client: Client,
    lease: i64,
    ttl: Duration,
    deadline: Arc<Mutex<Instant>>,
    lost: Arc<AtomicBool>,
) {
    let period = ttl / 4;
    let mut stream = None;
    loop {
        if stream.is_none() {
            match tokio::time::timeout(period, client.lease_keep_alive(lease)).await {
                Ok(Ok(s)) => stream = Some(s),
                Ok(Err(e)) => {
                    tracing::warn!("etcd lease keepalive: {e}");
                    tokio::time::sleep(period / 4).await;
                    continue;
                }
                Err(_) => {
                    tracing::warn!("etcd lease keepalive: no answer");
                    continue;
                }
            }
        }
        let Some((keeper, replies)) = stream.as_mut() else {
            continue;
        };
        let sent = Instant::now();
        let ok = match keeper.keep_alive().await {
            Ok(()) => match tokio::time::timeout(period, replies.message()).await {
                Ok(Ok(Some(r))) if r.ttl() > 0 => true,
                Ok(Ok(Some(_))) => {
                    tracing::error!("etcd lease {lease:x} expired: stepping down");
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => false,
            },
            Err(_) => false,
        };
        if ok {
            {
                let mut d = deadline.lock().unwrap_or_else(|e| e.into_inner());
                *d = (*d).max(sent + ttl);
            }
            let next = sent + period;
            tokio::time::sleep_until(next.into()).await;
        } else {
            tracing::warn!("etcd lease keepalive not acknowledged; reconnecting");
            stream = None;
            tokio::time::sleep(period / 4).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: f64, name: &str) -> String {
        format!("{{\"timestamp\":{ts},\"name\":\"{name}\"}}\n")
    }

    #[test]
    fn batches_positions_and_truncation() {
        let mut st = State::default();
        st.push_batch("k0", 0, (line(1.0, "a") + &line(2.0, "b")).as_bytes())
            .unwrap();
        st.push_batch("k2", 2, line(3.0, "c").as_bytes()).unwrap();
        assert_eq!(st.next_seq, 3);
        assert_eq!(st.events.len(), 3);
        // A gap in the sequence is corruption, named by key.
        let e = st
            .push_batch("k9", 9, line(4.0, "d").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("k9"), "{e}");
        assert!(st
            .push_batch("k3", 3, b"not json\n")
            .unwrap_err()
            .to_string()
            .contains("k3"));
        assert!(st.push_batch("k3", 3, b"").is_err());
        // The checkpoint position is an absolute index.
        st.checkpoint = Some(serde_json::json!({POSITION_KEY: {"seq": 2}}));
        assert_eq!(st.replay_from(), Some(2));
        st.drop_before(2);
        assert_eq!(st.first_seq(), 2);
        assert_eq!(st.events.len(), 1);
        assert_eq!(st.replay_from(), Some(0));
        // A position beyond the log, or before its start, is ignored.
        st.checkpoint = Some(serde_json::json!({POSITION_KEY: {"seq": 7}}));
        assert_eq!(st.replay_from(), None);
        st.checkpoint = Some(serde_json::json!({POSITION_KEY: {"seq": 1}}));
        assert_eq!(st.replay_from(), None);
        st.checkpoint = Some(serde_json::json!({"timestamp": 1.0}));
        assert_eq!(st.replay_from(), None);
    }

    #[test]
    fn leader_value_round_trips() {
        let v = LeaderInfo::value("h:1:2", "unix:///a.sock,tcp://h:1");
        let l = LeaderInfo::parse(v.as_bytes(), 7).unwrap();
        assert_eq!(l.id, "h:1:2");
        assert_eq!(l.uri, "unix:///a.sock,tcp://h:1");
        assert_eq!(l.create_revision, 7);
        assert!(LeaderInfo::parse(b"{}", 1).is_none());
        assert!(LeaderInfo::parse(b"\xff", 1).is_none());
    }

    #[test]
    fn prefix_ranges() {
        assert_eq!(prefix_end("/r/log/"), b"/r/log0".to_vec());
    }
}
