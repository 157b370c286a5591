//! The resource service as a pure state machine.
//!
//! [`Service::new`] runs flux-core's load sequence on what the shell read
//! from the state directory; [`Service::handle`] takes one [`Input`]
//! (a request, a disconnect, a loaded R for `resource.reload`, shutdown)
//! and the current time, and appends [`Output`]s: events to persist, R to
//! write, replies, log lines.
//!
//! # The durability contract
//! Outputs are ordered.  The shell MUST make every `Persist`, `WriteR` and
//! `WriteCheckpoint` output durable before it sends any `Reply` that comes
//! after it in the output sequence.  The simplest conforming shell (ours)
//! handles a batch of inputs, makes all their persistence outputs durable
//! with one write + fsync (group commit), then sends the batch's replies in
//! order.  Replies are therefore never ahead of the state they acknowledge,
//! and consumers (journal followers, schedulers) never hear of an event
//! that a crash could lose.
//!
//! # Ordering
//! As in flux-core, for a drain the requester is answered first, then the
//! acquirers, then the journal followers.
//!
//! # Resource acquisition
//! `resource.acquire` (both RFC 28 variants), `acquire-cancel`,
//! `acquire-mute`, `release` and `group-set` are served by
//! [`crate::acquire`]; the service calls it from `publish` for every
//! recorded event, so acquire responses always follow the durable event
//! that caused them.  Group changes are not journal events: RFC 44
//! defines a closed set of events and none for groups; the group table is
//! configuration (re-read at every start), and a `resource.group-set`
//! change lasts until the next start or configuration reload.

use crate::acquire::{self, Acquire, AcquireInfo, GroupError, Truth};
use crate::drain::{validate_targets, DrainMode, DrainTable};
use crate::errno::*;
use crate::journal::{self, Journal, TruncateState};
use crate::monitor::Monitor;
use eventlog::Event;
use hostlist::Hostlist;
use idset::IdSet;
use rpc::{ConnId, Need, Payload, Reply, ReplyTo, Request, Role};
use rset::Rset;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

mod agents;

/// How the inventory R was obtained (RFC 44 `resource-define` `method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Configuration,
    Kvs,
    JobInfo,
    DynamicDiscovery,
    Reload,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Configuration => "configuration",
            Method::Kvs => "kvs",
            Method::JobInfo => "job-info",
            Method::DynamicDiscovery => "dynamic-discovery",
            Method::Reload => "reload",
        }
    }
}

/// An inventory: R as parsed, and as the JSON document it came from (kept
/// verbatim, `scheduling` key included).
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The parsed R.  Only its times may be changed in place: the ranks are
    /// cached in [`Inventory::ranks`].
    pub rset: Rset,
    pub json: Value,
    pub method: Method,
    ranks: IdSet,
}

impl Inventory {
    /// Build from a parsed R; the JSON is its canonical encoding.
    pub fn from_rset(rset: Rset, method: Method) -> Inventory {
        let json = rset.to_json();
        let ranks = rset.ranks();
        Inventory {
            rset,
            json,
            method,
            ranks,
        }
    }

    /// The ranks of R (computed once: every event asks for them).
    pub fn ranks(&self) -> &IdSet {
        &self.ranks
    }

    /// Build from R JSON text (e.g. the stored `resource.R`), keeping the
    /// document verbatim.
    pub fn from_json_text(text: &str, method: Method) -> Result<Inventory, String> {
        let rset = Rset::from_json_str(text).map_err(|e| e.to_string())?;
        let json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let ranks = rset.ranks();
        Ok(Inventory {
            rset,
            json,
            method,
            ranks,
        })
    }
}

/// Settings the core needs (from `[resource]` and the command line).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `exclude`: an idset or a hostlist, unparsed.
    pub exclude: Option<String>,
    pub journal_max: usize,
    /// `monitor-force-up`: every target is online from the start.
    pub monitor_force_up: bool,
    /// `[resource.groups]`: RFC 28 resource groups, name → idset or
    /// hostlist (unparsed), in file order.
    pub groups: Vec<(String, String)>,
    /// `torpid-max`, seconds (0 disables).
    pub torpid_max: f64,
    /// `offline-timeout`, seconds (0 disables).
    pub offline_timeout: f64,
    /// How agents' R is verified against the inventory; `None` disables
    /// verification (`noverify`).
    pub verify: Option<rset::VerifyConfig>,
    /// Liveness transitions are posted at most this often (seconds), so
    /// that transitions close in time share one event (like flux-core's
    /// batched group updates).
    pub liveness_batch: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            exclude: None,
            journal_max: crate::journal::DEFAULT_JOURNAL_MAX,
            monitor_force_up: false,
            groups: Vec::new(),
            torpid_max: crate::monitor::DEFAULT_TORPID_MAX,
            offline_timeout: crate::monitor::DEFAULT_OFFLINE_TIMEOUT,
            verify: Some(rset::VerifyConfig::module_default()),
            liveness_batch: crate::monitor::DEFAULT_LIVENESS_BATCH,
        }
    }
}

/// What the shell hands to [`Service::new`].
#[derive(Debug, Clone, Default)]
pub struct Init {
    pub now: f64,
    pub settings: Settings,
    pub inventory: Option<Inventory>,
    /// The persistent eventlog as read from the state directory.
    pub stored_events: Vec<Event>,
    /// The drain checkpoint written at the last clean shutdown.
    pub checkpoint: Option<Value>,
    /// Without an inventory: the expected hosts (rank i = host i); R is
    /// assembled from the agents' reports (`dynamic-discovery`).
    pub discover_hosts: Option<Vec<String>>,
}

/// Why the service cannot start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartError {
    #[error("error decoding exclude set {spec}: {reason}")]
    Exclude { spec: String, reason: String },
    #[error("resource.eventlog line {line}: {reason}")]
    Replay { line: usize, reason: String },
    #[error("checkpoint: invalid drain state entry '{0}'")]
    Checkpoint(String),
    /// `[resource.groups]`: a bad spec, a reserved name, unknown hosts,
    /// or two groups naming the same targets.
    #[error(transparent)]
    Groups(#[from] GroupError),
}

/// Log severity for [`Output::Log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

/// Something the shell must do.  See the module docs for the durability
/// contract.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Append to `resource.eventlog`.
    Persist(Event),
    /// Replace `resource.R` with this document.
    WriteR(Value),
    /// Replace the drain checkpoint.
    WriteCheckpoint(Value),
    /// Send a reply.  For a streaming request an `Err` ends the stream.
    Reply {
        to: ReplyTo,
        reply: Reply,
    },
    /// Load R for `resource.reload` and come back with [`Input::Reloaded`].
    LoadR {
        to: ReplyTo,
        path: String,
        xml: bool,
        force: bool,
    },
    Log {
        level: Level,
        msg: String,
    },
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Request(Request),
    /// The connection went away: drop its requests silently.
    Disconnect(ConnId),
    /// The result of an [`Output::LoadR`].
    Reloaded {
        to: ReplyTo,
        force: bool,
        result: Result<Rset, RpcError>,
    },
    /// Clean shutdown: end every stream and write the checkpoint.
    Shutdown,
    /// Configuration reload: the new `[resource.groups]` table.  Applied
    /// like `resource.group-set` (shrink, release, grow); an invalid
    /// table is logged and ignored.
    SetGroups(Vec<(String, String)>),
    /// Time passes: run the liveness timers and post the liveness events
    /// accumulated since the last tick (one event per kind, batching
    /// simultaneous transitions).  The shell sends one after every batch
    /// of inputs and whenever it wakes up idle.
    Tick,
}

/// A deferred `resource.monitor-waitup`.
#[derive(Debug, Clone)]
struct Waitup {
    to: ReplyTo,
    up: u64,
}

/// The resource service state.
#[derive(Debug)]
pub struct Service {
    inventory: Option<Inventory>,
    /// Targets `0..size` exist (max of R's ranks + 1).
    size: u32,
    /// Rank → hostname, from R's nodelist.
    hosts: Vec<Option<Arc<str>>>,
    /// Hostname → its ranks.
    host_ranks: HashMap<Arc<str>, Vec<u32>>,
    exclude: IdSet,
    drain: DrainTable,
    online: IdSet,
    torpid: IdSet,
    /// Targets that left the online set (RFC 28 shrink bookkeeping).
    lost: IdSet,
    journal: Journal,
    followers: Vec<ReplyTo>,
    waitups: Vec<Waitup>,
    /// Cached `resource.sched-status` payload, serialised.
    sched_cache: Option<Payload>,
    stopped: bool,
    /// RFC 28 acquisition (both variants) and resource groups.
    acquire: Acquire,
    /// Agents and their heartbeat timers.
    monitor: Monitor,
    verify: Option<rset::VerifyConfig>,
    liveness_batch: f64,
    /// When liveness events were last posted.
    liveness_posted: f64,
    /// While R is being discovered: each reported rank's R.
    discovered: Option<std::collections::BTreeMap<u32, Rset>>,
}

fn idset_str(ids: &IdSet) -> Value {
    Value::String(ids.encode())
}

fn ctx(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn proto() -> RpcError {
    RpcError::new(EPROTO, "Protocol error")
}

/// flux-core's answer to `resource.reload` while a scheduler holds a v1
/// acquire.
fn busy_reload() -> RpcError {
    RpcError::new(EBUSY, "resources are busy (unload scheduler?)")
}

/// The service state the acquire machinery reads (a macro, so that the
/// borrows stay on the fields and `self.acquire` can be borrowed mutably).
macro_rules! truth {
    ($s:ident) => {
        Truth {
            up: $s.up(),
            inventory: $s.inventory.as_ref(),
            exclude: &$s.exclude,
            lost: &$s.lost,
        }
    };
}

/// A journal response, `{"events":[...]}` plus `"R"` when given, from
/// serialised events ([`journal::object_json`]) and R: the bytes
/// `serde_json` writes for the same object built as a value.
fn events_payload(events: &[&str], r: Option<&str>) -> Payload {
    let len = events.iter().map(|e| e.len() + 1).sum::<usize>() + r.map_or(0, |r| r.len() + 5);
    let mut s = String::with_capacity(len + 16);
    s.push_str("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(e);
    }
    s.push(']');
    if let Some(r) = r {
        s.push_str(",\"R\":");
        s.push_str(r);
    }
    s.push('}');
    Payload::json(s)
}

/// R as compact JSON text.
fn r_text(inv: &Inventory) -> String {
    inv.json.to_string()
}

/// Topics only the instance owner may use.
/// What each topic needs of the requester's role (`None`: not a topic of
/// this service).
fn need(topic: &str) -> Option<Need> {
    Some(match topic {
        "resource.status" | "resource.sched-status" => Need::Read,
        "resource.get"
        | "resource.journal"
        | "resource.journal-cancel"
        | "resource.monitor-waitup" => Need::User,
        "resource.acquire"
        | "resource.acquire-cancel"
        | "resource.acquire-mute"
        | "resource.release"
        | "resource.group-set" => Need::Scheduler,
        "resource.drain"
        | "resource.undrain"
        | "resource.reload"
        | "resource.expiration-update"
        | "resource.monitor-force-up"
        | "resource.monitor-force-down" => Need::Admin,
        "resource.agent" | "resource.agent-heartbeat" => Need::Agent,
        _ => return None,
    })
}

impl Service {
    /// Start: build the journal from the stored events, parse the exclude
    /// set, restore drain state (checkpoint + replay with rank remapping),
    /// undrain excluded targets, post `online`/`restart`, and define R.
    pub fn new(init: Init, out: &mut Vec<Output>) -> Result<Service, StartError> {
        let now = init.now;
        let mut svc = Service {
            inventory: None,
            size: 0,
            hosts: Vec::new(),
            host_ranks: HashMap::new(),
            exclude: IdSet::new(),
            drain: DrainTable::new(0),
            online: IdSet::new(),
            torpid: IdSet::new(),
            lost: IdSet::new(),
            journal: Journal::new(init.settings.journal_max),
            followers: Vec::new(),
            waitups: Vec::new(),
            sched_cache: None,
            stopped: false,
            acquire: Acquire::default(),
            monitor: Monitor::new(init.settings.torpid_max, init.settings.offline_timeout),
            verify: init.settings.verify.clone(),
            liveness_batch: init.settings.liveness_batch,
            liveness_posted: f64::NEG_INFINITY,
            discovered: None,
        };
        if let Some(inv) = init.inventory {
            svc.set_inventory(inv);
        } else if let Some(hosts) = init.discover_hosts {
            svc.expect_hosts(hosts);
        }
        // 1. The journal starts with the stored history, minus the
        // historical resource-define entries.  The journal looks at the
        // service state only when it overflows; when the history fits, the
        // events are moved in right after the replay below (same journal,
        // no copy of every stored event).
        let stored = init.stored_events;
        let fits = stored
            .iter()
            .filter(|ev| ev.name != "resource-define")
            .count()
            <= svc.journal.max();
        if !fits {
            for ev in &stored {
                if ev.name != "resource-define" {
                    svc.journal_push(ev.clone());
                }
            }
        }
        // 2. Exclude.
        if let Some(spec) = &init.settings.exclude {
            svc.exclude = svc.decode_exclude(spec)?;
        }
        // 2b. Resource groups (RFC 28).
        let groups = svc.decode_groups(&init.settings.groups)?;
        svc.acquire = Acquire::new(groups);
        // 3. Drain state: checkpoint, then the events not older than it.
        let mut cp_ts = 0.0;
        if let Some(cp) = &init.checkpoint {
            cp_ts = svc.restore_checkpoint(cp)?;
        }
        for (i, ev) in stored.iter().enumerate() {
            if ev.timestamp < cp_ts {
                continue;
            }
            svc.replay(i + 1, ev)?;
        }
        if fits {
            for ev in stored {
                if ev.name != "resource-define" {
                    svc.journal_push(ev);
                }
            }
        }
        let reconcile = svc.drain.drained().intersection(&svc.exclude);
        if !reconcile.is_empty() {
            svc.drain.apply_undrain(&reconcile);
            let c = ctx(vec![
                ("idset", idset_str(&reconcile)),
                ("nodelist", Value::String(svc.nodelist_of(&reconcile))),
            ]);
            svc.post(now, "undrain", c, true, out);
        }
        // 4. Liveness.
        if init.settings.monitor_force_up && svc.size > 0 {
            let all = IdSet::from_range(0, svc.size - 1);
            svc.online = all.clone();
            svc.post(
                now,
                "online",
                ctx(vec![("idset", idset_str(&all))]),
                false,
                out,
            );
        }
        let ranks = if svc.size > 0 {
            IdSet::from_range(0, svc.size - 1)
        } else {
            IdSet::new()
        };
        let c = ctx(vec![
            ("ranks", idset_str(&ranks)),
            ("online", idset_str(&svc.online)),
            ("nodelist", Value::String(svc.nodelist_of(&ranks))),
        ]);
        svc.post(now, "restart", c, false, out);
        // 5. Define R.
        if let Some(inv) = &svc.inventory {
            let method = inv.method;
            if method != Method::Kvs {
                out.push(Output::WriteR(inv.json.clone()));
            }
            let c = ctx(vec![("method", Value::from(method.as_str()))]);
            svc.post(now, "resource-define", c, true, out);
        }
        Ok(svc)
    }

    // ------------------------------------------------------------------
    // Accessors (for shells and tests)

    pub fn size(&self) -> u32 {
        self.size
    }
    pub fn inventory(&self) -> Option<&Inventory> {
        self.inventory.as_ref()
    }
    pub fn drained(&self) -> &IdSet {
        self.drain.drained()
    }
    pub fn drain_table(&self) -> &DrainTable {
        &self.drain
    }
    pub fn excluded(&self) -> &IdSet {
        &self.exclude
    }
    pub fn online(&self) -> &IdSet {
        &self.online
    }
    pub fn torpid(&self) -> &IdSet {
        &self.torpid
    }
    pub fn journal(&self) -> &Journal {
        &self.journal
    }
    /// The number of live journal followers.
    pub fn followers(&self) -> usize {
        self.followers.len()
    }
    /// Targets that went from online to offline (RFC 28 shrink).
    pub fn lost(&self) -> &IdSet {
        &self.lost
    }
    /// The live acquires (both RFC 28 variants).
    pub fn acquisitions(&self) -> Vec<AcquireInfo> {
        self.acquire.holders()
    }
    /// The current assignment of targets to resource groups.
    pub fn group_assignment(&self) -> &[(String, IdSet)] {
        self.acquire.assignment()
    }
    /// The configured named resource groups.
    pub fn groups(&self) -> &[(String, IdSet)] {
        self.acquire.groups()
    }

    // ------------------------------------------------------------------
    // Inventory and targets

    fn set_inventory(&mut self, inv: Inventory) {
        let max_rank = inv.ranks().last();
        let size = max_rank.map_or(0, |r| r + 1).max(self.size);
        self.size = size;
        self.drain.resize(size);
        self.hosts = vec![None; size as usize];
        self.host_ranks.clear();
        for rank in inv.ranks() {
            if let Some(h) = inv.rset.hostname(rank) {
                let h: Arc<str> = Arc::from(h);
                if let Some(slot) = self.hosts.get_mut(rank as usize) {
                    *slot = Some(h.clone());
                }
                self.host_ranks.entry(h).or_default().push(rank);
            }
        }
        self.inventory = Some(inv);
        self.sched_cache = None;
    }

    /// The hostlist of some targets (targets without a known host are
    /// skipped).
    fn nodelist_of(&self, ids: &IdSet) -> String {
        let mut hl = Hostlist::new();
        for r in ids {
            if let Some(Some(h)) = self.hosts.get(r as usize) {
                hl.push(h);
            }
        }
        hl.encode()
    }

    /// Decode drain targets: an idset, else a hostlist mapped through R.
    fn decode_targets(&self, s: &str) -> Result<IdSet, RpcError> {
        if let Ok(ids) = IdSet::parse(s) {
            return Ok(ids);
        }
        if self.inventory.is_none() {
            return Err(RpcError::new(
                EINVAL,
                "R is unavailable for mapping hostnames to ranks",
            ));
        }
        let hl = Hostlist::decode(s)
            .map_err(|_| RpcError::new(EINVAL, "invalid targets: Hostlist cannot be decoded"))?;
        let mut ranks = Vec::new();
        let mut missing = Hostlist::new();
        for h in hl.iter() {
            match self.host_ranks.get(h.as_str()) {
                Some(rs) => ranks.extend_from_slice(rs),
                None => missing.push(&h),
            }
        }
        if !missing.is_empty() {
            return Err(RpcError::new(
                EINVAL,
                format!("invalid targets: invalid hosts: {}", missing.encode()),
            ));
        }
        ranks.sort_unstable();
        ranks.dedup();
        Ok(IdSet::from_sorted_ranges(ranks.into_iter().map(|r| (r, r))).unwrap_or_default())
    }

    /// Decode and check a `[resource.groups]` table.
    fn decode_groups(&self, raw: &[(String, String)]) -> Result<Vec<(String, IdSet)>, GroupError> {
        let mut out = Vec::with_capacity(raw.len());
        for (name, spec) in raw {
            let bad = |reason: String| GroupError::Spec {
                group: name.clone(),
                spec: spec.clone(),
                reason,
            };
            let ids = self.decode_targets(spec).map_err(|e| bad(e.message()))?;
            if let Some(last) = ids.last() {
                if self.size > 0 && last >= self.size {
                    return Err(bad("idset is out of range".into()));
                }
            }
            out.push((name.clone(), ids));
        }
        acquire::check_groups(raw, &out)?;
        Ok(out)
    }

    fn decode_exclude(&self, spec: &str) -> Result<IdSet, StartError> {
        let err = |reason: String| StartError::Exclude {
            spec: spec.to_string(),
            reason,
        };
        let ids = self.decode_targets(spec).map_err(|e| err(e.message()))?;
        if self.size > 0 {
            if let Some(last) = ids.last() {
                if last >= self.size {
                    return Err(err(format!("exclude set {spec} is out of range")));
                }
            }
        }
        Ok(ids)
    }

    // ------------------------------------------------------------------
    // Replay

    /// Map stored (rank, host) pairs to current ranks: a rank whose host
    /// moved follows the host (its first rank), a vanished host is dropped,
    /// ranks past the size are dropped.
    fn remap(&self, ids: &IdSet, nodelist: &str) -> IdSet {
        let hosts: Vec<String> = match Hostlist::decode(nodelist) {
            Ok(hl) => hl.iter().collect(),
            Err(_) => Vec::new(),
        };
        let mut out = IdSet::new();
        for (i, rank) in ids.iter().enumerate() {
            let host = hosts.get(i);
            let current = match host {
                None => Some(rank),
                Some(h) => match self.hosts.get(rank as usize) {
                    Some(Some(cur)) if **cur == **h => Some(rank),
                    _ => self
                        .host_ranks
                        .get(h.as_str())
                        .and_then(|rs| rs.first().copied()),
                },
            };
            if let Some(r) = current {
                if r < self.size {
                    out.insert(r);
                }
            }
        }
        out
    }

    fn restore_checkpoint(&mut self, cp: &Value) -> Result<f64, StartError> {
        let ts = cp.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0);
        let Some(state) = cp.get("drain_state").and_then(Value::as_object) else {
            return Ok(ts);
        };
        for (key, entry) in state {
            let bad = || StartError::Checkpoint(key.clone());
            let ids = IdSet::parse(key).map_err(|_| bad())?;
            let t = entry
                .get("timestamp")
                .and_then(Value::as_f64)
                .ok_or_else(bad)?;
            let reason = match entry.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(Value::String(s)) => Some(s.as_str()),
                Some(_) => return Err(bad()),
            };
            let nodelist = match entry.get("nodelist") {
                Some(Value::String(s)) => s.as_str(),
                _ => return Err(bad()),
            };
            let targets = self.remap(&ids, nodelist);
            if !targets.is_empty() {
                self.drain.apply_drain(&targets, t, reason, 1);
            }
        }
        Ok(ts)
    }

    fn replay(&mut self, line: usize, ev: &Event) -> Result<(), StartError> {
        let err = |reason: &str| StartError::Replay {
            line,
            reason: reason.to_string(),
        };
        match ev.name.as_str() {
            "drain" | "undrain" => {
                let what = if ev.name == "drain" {
                    "drain parse error"
                } else {
                    "undrain parse error"
                };
                let (Some(Value::String(ids)), Some(Value::String(nl))) =
                    (ev.get("idset"), ev.get("nodelist"))
                else {
                    return Err(err(what));
                };
                let ids = IdSet::parse(ids).map_err(|_| err(what))?;
                let targets = self.remap(&ids, nl);
                if targets.is_empty() {
                    return Ok(());
                }
                if ev.name == "drain" {
                    let reason = match ev.get("reason") {
                        None | Some(Value::Null) => None,
                        Some(Value::String(s)) => Some(s.as_str()),
                        Some(_) => return Err(err(what)),
                    };
                    let overwrite = match ev.get("overwrite") {
                        None => 1,
                        Some(v) => match v.as_u64() {
                            Some(o @ 0..=2) => o as u8,
                            _ => return Err(err(what)),
                        },
                    };
                    self.drain
                        .apply_drain(&targets, ev.timestamp, reason, overwrite);
                } else {
                    self.drain.apply_undrain(&targets);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    // ------------------------------------------------------------------
    // Events

    fn truncate_state(&self) -> TruncateState {
        TruncateState {
            online: self.online.encode(),
            torpid: self.torpid.encode(),
            drain: self.drain.status_json(),
            r: self.inventory.as_ref().map(|i| i.json.clone()),
        }
    }

    fn journal_push(&mut self, ev: Event) {
        // The truncate summary needs the current state; compute it lazily.
        let state = {
            let online = &self.online;
            let torpid = &self.torpid;
            let drain = &self.drain;
            let inv = &self.inventory;
            move || TruncateState {
                online: online.encode(),
                torpid: torpid.encode(),
                drain: drain.status_json(),
                r: inv.as_ref().map(|i| i.json.clone()),
            }
        };
        self.journal.push(ev, state);
    }

    /// Create an event: persist it if asked, append it to the journal.
    /// Returns it for [`Service::publish`].
    fn record(
        &mut self,
        now: f64,
        name: &str,
        c: Map<String, Value>,
        persist: bool,
        out: &mut Vec<Output>,
    ) -> Option<Event> {
        let ev = match Event::new(now, name, Some(c)) {
            Ok(ev) => ev,
            Err(e) => {
                out.push(Output::Log {
                    level: Level::Error,
                    msg: format!("cannot post {name} event: {e}"),
                });
                return None;
            }
        };
        if persist {
            out.push(Output::Persist(ev.clone()));
        }
        self.journal_push(ev.clone());
        self.sched_cache = None;
        Some(ev)
    }

    /// Tell the subscribers about an event (after the requester's reply):
    /// the acquirers first, then the journal followers.
    fn publish(&mut self, ev: &Event, out: &mut Vec<Output>) {
        let truth = truth!(self);
        self.acquire.on_event(ev, &truth, out);
        if self.followers.is_empty() {
            return;
        }
        // Serialised once; every follower's reply shares the text.
        let Some(v) = journal::object_json(ev) else {
            return;
        };
        let r = match &self.inventory {
            Some(inv) if ev.name == "resource-define" => Some(r_text(inv)),
            _ => None,
        };
        let payload = events_payload(&[&v], r.as_deref());
        for to in &self.followers {
            out.push(Output::Reply {
                to: *to,
                reply: Ok(payload.clone()),
            });
        }
    }

    /// A persistent event caused by request `to`: record it, answer the
    /// requester (after the event is durable, by the output order), then
    /// tell acquirers and journal followers.
    fn post_acknowledged(
        &mut self,
        now: f64,
        name: &str,
        c: Map<String, Value>,
        to: ReplyTo,
        out: &mut Vec<Output>,
    ) {
        let ev = self.record(now, name, c, true, out);
        Self::reply(out, to, Ok(Value::Null.into()));
        if let Some(ev) = ev {
            self.publish(&ev, out);
        }
    }

    fn post(
        &mut self,
        now: f64,
        name: &str,
        c: Map<String, Value>,
        persist: bool,
        out: &mut Vec<Output>,
    ) {
        if let Some(ev) = self.record(now, name, c, persist, out) {
            self.publish(&ev, out);
        }
    }

    // ------------------------------------------------------------------
    // Requests

    /// Handle one input at time `now` (seconds since the epoch).
    pub fn handle(&mut self, now: f64, input: Input, out: &mut Vec<Output>) {
        match input {
            Input::Request(req) => self.request(now, req, out),
            Input::Disconnect(conn) => {
                self.followers.retain(|t| t.conn != conn);
                self.waitups.retain(|w| w.to.conn != conn);
                // Every client call ends with a disconnect; the up set is
                // computed only when the connection held an acquire (it
                // is needed only then).
                if self.acquire.holds(conn) {
                    let truth = truth!(self);
                    self.acquire.disconnect(conn, &truth, out);
                }
                self.monitor.disconnect(conn);
            }
            Input::Tick => self.tick(now, out),
            Input::Reloaded { to, force, result } => self.reloaded(now, to, force, result, out),
            Input::Shutdown => self.shutdown(now, out),
            Input::SetGroups(raw) => self.set_groups(&raw, out),
        }
    }

    fn reply(out: &mut Vec<Output>, to: ReplyTo, reply: Reply) {
        out.push(Output::Reply { to, reply });
    }

    fn request(&mut self, now: f64, req: Request, out: &mut Vec<Output>) {
        let to = req.reply_to();
        if self.stopped {
            Self::reply(
                out,
                to,
                Err(RpcError::new(
                    ENOSYS,
                    "the resource service is shutting down",
                )),
            );
            return;
        }
        let topic = req.topic.as_str();
        if !topic.starts_with("resource.") {
            Self::reply(
                out,
                to,
                Err(RpcError::new(
                    ENOSYS,
                    format!("No service matching {topic} is registered"),
                )),
            );
            return;
        }
        let Some(need) = need(topic) else {
            Self::reply(
                out,
                to,
                Err(RpcError::new(ENOSYS, "unknown service method")),
            );
            return;
        };
        if !req.role.grants(need) {
            Self::reply(out, to, Err(req.role.refusal(topic, need)));
            return;
        }
        if topic == "resource.sched-status" {
            let reply = self.sched_status();
            Self::reply(out, to, reply);
            return;
        }
        let p = &req.payload;
        let result = match topic {
            "resource.status" => self.status().map(Some),
            "resource.drain" => self.drain_rpc(now, to, p, out),
            "resource.undrain" => self.undrain_rpc(now, to, p, out),
            "resource.journal" => self.journal_rpc(&req, out),
            "resource.journal-cancel" => self.journal_cancel(&req, out),
            "resource.reload" => self.reload_rpc(to, p, out),
            "resource.expiration-update" => self.expiration_update(now, to, p, out),
            "resource.get" => self.get(),
            "resource.monitor-force-up" => self.force(now, p, true, out).map(|_| Some(Value::Null)),
            "resource.monitor-force-down" => {
                self.force(now, p, false, out).map(|_| Some(Value::Null))
            }
            "resource.monitor-waitup" => self.waitup(to, p, out),
            "resource.acquire" => self.acquire_rpc(&req, out),
            "resource.acquire-cancel" => self.acquire_cancel(&req, out),
            "resource.acquire-mute" => {
                self.acquire.mute();
                Ok(Some(Value::Null))
            }
            "resource.release" => self.release_rpc(to, p, out),
            "resource.group-set" => self.group_set_rpc(to, p, out),
            "resource.agent" => self.agent_hello(now, &req, out),
            "resource.agent-heartbeat" => self.agent_heartbeat(now, &req),
            _ => Err(RpcError::new(ENOSYS, "unknown service method")),
        };
        // Handlers that answered themselves (or defer) return Ok(None).
        match result {
            Ok(Some(v)) => Self::reply(out, to, Ok(v.into())),
            Ok(None) => {}
            Err(e) => Self::reply(out, to, Err(e)),
        }
    }

    fn status(&self) -> Result<Value, RpcError> {
        let Some(inv) = &self.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        let mut r = inv.json.clone();
        if let Some(o) = r.as_object_mut() {
            o.remove("scheduling");
        }
        let all = if self.size > 0 {
            IdSet::from_range(0, self.size - 1)
        } else {
            IdSet::new()
        };
        // Built by moving the parts in (`json!` would copy R and the drain
        // object once more through serde's value serializer).
        let mut m = Map::new();
        m.insert("R".into(), r);
        m.insert("drain".into(), self.drain.status_json());
        m.insert("online".into(), Value::String(self.online.encode()));
        m.insert(
            "offline".into(),
            Value::String(all.difference(&self.online).encode()),
        );
        m.insert("exclude".into(), Value::String(self.exclude.encode()));
        m.insert("torpid".into(), Value::String(self.torpid.encode()));
        Ok(Value::Object(m))
    }

    /// The targets a scheduler sees as usable (RFC 28 `up`).
    pub fn up(&self) -> IdSet {
        let Some(inv) = &self.inventory else {
            return IdSet::new();
        };
        let mut up = inv.ranks().clone();
        up.subtract(&self.exclude);
        up.subtract(self.drain.drained());
        up = up.intersection(&self.online);
        up.subtract(&self.torpid);
        up
    }

    /// Serialised once per state change: every reply shares the cached
    /// text (the `down` R after scattered drains is large).
    fn sched_status(&mut self) -> Result<Payload, RpcError> {
        if let Some(p) = &self.sched_cache {
            return Ok(p.clone());
        }
        let Some(inv) = &self.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        let mut valid = inv.ranks().clone();
        valid.subtract(&self.exclude);
        let mut all = inv.rset.copy_ranks(&valid);
        all.set_scheduling(None);
        let mut down_ids = valid.clone();
        down_ids.subtract(&self.up());
        let mut down = all.copy_ranks(&down_ids);
        down.set_scheduling(None);
        let v = json!({
            "all": all.to_json(),
            "down": down.to_json(),
            "allocated": Rset::new().to_json(),
        });
        let p = Payload::serialised(&v);
        self.sched_cache = Some(p.clone());
        Ok(p)
    }

    fn get(&self) -> Result<Option<Value>, RpcError> {
        match &self.inventory {
            None => Err(RpcError::bare(ENOENT)),
            Some(inv) => Ok(Some(json!({"R": inv.json, "method": inv.method.as_str()}))),
        }
    }

    fn str_field<'a>(p: &'a Value, key: &str, required: bool) -> Result<Option<&'a str>, RpcError> {
        match p.get(key) {
            None if !required => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            _ => Err(proto()),
        }
    }

    fn drain_rpc(
        &mut self,
        now: f64,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let targets = Self::str_field(p, "targets", true)?.unwrap_or_default();
        let reason = Self::str_field(p, "reason", false)?;
        let mode = DrainMode::parse_drain(Self::str_field(p, "mode", false)?)?;
        let ids = self.decode_targets(targets)?;
        validate_targets(&ids, self.size)?;
        self.drain.drain(&ids, &self.exclude, mode, reason, now)?;
        let nodelist = self.nodelist_of(&ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "drain idset={} nodelist={} overwrite={} reason={}",
                ids.encode(),
                nodelist,
                mode.overwrite(),
                reason.unwrap_or("")
            ),
        });
        let mut c = ctx(vec![
            ("idset", idset_str(&ids)),
            ("nodelist", Value::String(nodelist)),
        ]);
        if let Some(r) = reason {
            c.insert("reason".into(), Value::from(r));
        }
        c.insert("overwrite".into(), Value::from(mode.overwrite()));
        self.post_acknowledged(now, "drain", c, to, out);
        Ok(None)
    }

    fn undrain_rpc(
        &mut self,
        now: f64,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let targets = Self::str_field(p, "targets", true)?.unwrap_or_default();
        let mode = DrainMode::parse_undrain(Self::str_field(p, "mode", false)?)?;
        let reason = Self::str_field(p, "reason", false)?;
        let ids = self.decode_targets(targets)?;
        validate_targets(&ids, self.size)?;
        self.drain.undrain(&ids, mode)?;
        let nodelist = self.nodelist_of(&ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "undrain idset={} nodelist={} overwrite={} reason={}",
                targets,
                nodelist,
                mode.overwrite(),
                reason.unwrap_or("")
            ),
        });
        let mut c = ctx(vec![
            ("idset", idset_str(&ids)),
            ("nodelist", Value::String(nodelist)),
            ("overwrite", Value::from(mode.overwrite())),
        ]);
        if let Some(r) = reason {
            c.insert("reason".into(), Value::from(r));
        }
        self.post_acknowledged(now, "undrain", c, to, out);
        Ok(None)
    }

    /// Backlog in batches of up to 100 (a `resource-define` alone, with R),
    /// the `{events:[]}` sentinel, then live events.
    fn journal_rpc(
        &mut self,
        req: &Request,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        if !req.streaming {
            return Err(RpcError::new(EPROTO, "journal requires streaming RPC flag"));
        }
        let to = req.reply_to();
        // Each event is serialised once for the life of the journal
        // (`Journal::events_json`); a batch is their concatenation.
        let mut batch: Vec<&str> = Vec::with_capacity(100);
        let flush = |batch: &mut Vec<&str>, out: &mut Vec<Output>| {
            if !batch.is_empty() {
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(batch, None)),
                });
                batch.clear();
            }
        };
        for (ev, v) in self.journal.events_json() {
            let Some(v) = v else { continue };
            if ev.name == "resource-define" {
                flush(&mut batch, out);
                let r = self.inventory.as_ref().map(r_text);
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(&[v], r.as_deref())),
                });
                continue;
            }
            batch.push(v);
            if batch.len() == 100 {
                flush(&mut batch, out);
            }
        }
        flush(&mut batch, out);
        Self::reply(out, to, Ok(Payload::json("{\"events\":[]}")));
        self.followers.push(to);
        Ok(None)
    }

    fn cancel_target(req: &Request) -> Result<ReplyTo, RpcError> {
        let tag = req
            .payload
            .get("matchtag")
            .and_then(Value::as_u64)
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(proto)?;
        Ok(ReplyTo {
            conn: req.conn,
            matchtag: tag,
        })
    }

    fn journal_cancel(
        &mut self,
        req: &Request,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let target = Self::cancel_target(req)?;
        if let Some(pos) = self.followers.iter().position(|t| *t == target) {
            self.followers.remove(pos);
            Self::reply(out, target, Err(RpcError::bare(ENODATA)));
        }
        Ok(None)
    }

    fn reload_rpc(
        &mut self,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let path = Self::str_field(p, "path", true)?
            .unwrap_or_default()
            .to_string();
        let xml = p.get("xml").and_then(Value::as_bool).ok_or_else(proto)?;
        let force = p.get("force").and_then(Value::as_bool).ok_or_else(proto)?;
        if self.acquire.v1_held() {
            return Err(busy_reload());
        }
        out.push(Output::LoadR {
            to,
            path,
            xml,
            force,
        });
        Ok(None)
    }

    fn reloaded(
        &mut self,
        now: f64,
        to: ReplyTo,
        force: bool,
        result: Result<Rset, RpcError>,
        out: &mut Vec<Output>,
    ) {
        let rset = match result {
            Ok(r) => r,
            Err(e) => return Self::reply(out, to, Err(e)),
        };
        if self.acquire.v1_held() {
            return Self::reply(out, to, Err(busy_reload()));
        }
        if let Some(last) = rset.ranks().last() {
            if last >= self.size && self.size > 0 {
                if !force {
                    return Self::reply(
                        out,
                        to,
                        Err(RpcError::new(
                            EINVAL,
                            format!(
                                "resource object contains ranks execeeding size={} (override with -f))",
                                self.size
                            ),
                        )),
                    );
                }
                out.push(Output::Log {
                    level: Level::Warn,
                    msg: format!(
                        "resource object contains ranks exceeding size={}",
                        self.size
                    ),
                });
            }
        }
        let inv = Inventory::from_rset(rset, Method::Reload);
        out.push(Output::WriteR(inv.json.clone()));
        self.set_inventory(inv);
        self.post_acknowledged(
            now,
            "resource-define",
            ctx(vec![("method", Value::from("reload"))]),
            to,
            out,
        );
    }

    // ------------------------------------------------------------------
    // RFC 28 acquisition

    fn acquire_rpc(
        &mut self,
        req: &Request,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let truth = truth!(self);
        self.acquire.acquire(req, &truth, out)?;
        Ok(None)
    }

    fn acquire_cancel(
        &mut self,
        req: &Request,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let target = Self::cancel_target(req)?;
        let truth = truth!(self);
        self.acquire.cancel(target, &truth, out);
        Ok(None)
    }

    fn release_rpc(
        &mut self,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let group = Self::str_field(p, "group", true)?.unwrap_or_default();
        let targets = Self::str_field(p, "targets", true)?.unwrap_or_default();
        let ids = IdSet::parse(targets)
            .map_err(|e| RpcError::new(EINVAL, format!("invalid targets: {e}")))?;
        let truth = truth!(self);
        self.acquire.release(to, group, &ids, &truth, out)?;
        Ok(None)
    }

    /// `resource.group-set {group, targets}`: the named group gets exactly
    /// these targets (idset or hostlist, possibly empty; excluded targets
    /// are accepted and stay in no group); they leave any other named
    /// group.  Answered first, then the shrink/grow responses.
    fn group_set_rpc(
        &mut self,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let group = Self::str_field(p, "group", true)?.unwrap_or_default();
        let targets = Self::str_field(p, "targets", true)?.unwrap_or_default();
        if group.is_empty() {
            return Err(RpcError::new(EINVAL, "a group name must not be empty"));
        }
        if group == acquire::DEFAULT_GROUP {
            return Err(RpcError::new(
                EINVAL,
                "group 'default' cannot be set: it holds the targets of no other group",
            ));
        }
        let ids = if targets.is_empty() {
            IdSet::new()
        } else {
            self.decode_targets(targets)?
        };
        if let Some(last) = ids.last() {
            if last >= self.size {
                return Err(RpcError::new(EINVAL, "idset is out of range"));
            }
        }
        let groups = self.acquire.groups_with(group, &ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!("group-set group={group} targets={}", ids.encode()),
        });
        Self::reply(out, to, Ok(Value::Null.into()));
        let truth = truth!(self);
        self.acquire.set_groups(groups, &truth, out);
        Ok(None)
    }

    /// [`Input::SetGroups`]: a new `[resource.groups]` table.
    fn set_groups(&mut self, raw: &[(String, String)], out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        let groups = match self.decode_groups(raw) {
            Ok(g) => g,
            Err(e) => {
                return out.push(Output::Log {
                    level: Level::Error,
                    msg: format!("resource groups unchanged: {e}"),
                })
            }
        };
        let truth = truth!(self);
        self.acquire.set_groups(groups, &truth, out);
    }

    fn expiration_update(
        &mut self,
        now: f64,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let exp = p
            .get("expiration")
            .and_then(Value::as_f64)
            .filter(|e| e.is_finite())
            .ok_or_else(proto)?;
        let Some(inv) = self.inventory.as_mut() else {
            return Err(RpcError::new(ENOENT, "resource set is not known yet"));
        };
        inv.rset.set_expiration(exp);
        if let Some(ex) = inv.json.get_mut("execution").and_then(Value::as_object_mut) {
            ex.insert("expiration".into(), json!(exp));
        }
        out.push(Output::WriteR(inv.json.clone()));
        self.post_acknowledged(
            now,
            "resource-update",
            ctx(vec![("expiration", json!(exp))]),
            to,
            out,
        );
        Ok(None)
    }

    /// `monitor-force-up {ranks?}` / `monitor-force-down {ranks}`: test
    /// hooks that change the online set.
    fn force(
        &mut self,
        now: f64,
        p: &Value,
        up: bool,
        out: &mut Vec<Output>,
    ) -> Result<(), RpcError> {
        let all = if self.size > 0 {
            IdSet::from_range(0, self.size - 1)
        } else {
            IdSet::new()
        };
        let ranks = match p.get("ranks") {
            None if up => all.clone(),
            Some(Value::String(s)) => {
                IdSet::parse(s).map_err(|e| RpcError::new(EINVAL, e.to_string()))?
            }
            _ => return Err(proto()),
        };
        let ranks = ranks.intersection(&all);
        if up {
            self.set_online(now, self.online.union(&ranks), out);
        } else {
            self.set_online(now, self.online.difference(&ranks), out);
        }
        Ok(())
    }

    /// Replace the online set, posting `offline` then `online` for the
    /// differences (one event each, batching simultaneous transitions).
    pub fn set_online(&mut self, now: f64, new: IdSet, out: &mut Vec<Output>) {
        let joined = new.difference(&self.online);
        let left = self.online.difference(&new);
        self.online = new;
        self.lost.add(&left);
        self.lost.subtract(&joined);
        self.post_liveness(now, "offline", &left, out);
        self.post_liveness(now, "online", &joined, out);
        self.check_waitups(out);
    }

    /// Post an in-memory liveness event (`online`, `offline`, `torpid`,
    /// `lively`) for `ids`, unless it is empty.
    fn post_liveness(&mut self, now: f64, name: &str, ids: &IdSet, out: &mut Vec<Output>) {
        if !ids.is_empty() {
            let c = ctx(vec![("idset", idset_str(ids))]);
            self.post(now, name, c, false, out);
        }
    }

    /// Replace the torpid set, posting `torpid` for the targets that
    /// became torpid and `lively` for those that recovered.
    pub fn set_torpid(&mut self, now: f64, new: IdSet, out: &mut Vec<Output>) {
        let became = new.difference(&self.torpid);
        let recovered = self.torpid.difference(&new);
        self.torpid = new;
        self.post_liveness(now, "torpid", &became, out);
        self.post_liveness(now, "lively", &recovered, out);
    }

    fn waitup(
        &mut self,
        to: ReplyTo,
        p: &Value,
        out: &mut Vec<Output>,
    ) -> Result<Option<Value>, RpcError> {
        let up = p.get("up").and_then(Value::as_i64).ok_or_else(proto)?;
        if up < 0 || up > i64::from(self.size) {
            return Err(RpcError::new(EPROTO, "up value is out of range"));
        }
        self.waitups.push(Waitup { to, up: up as u64 });
        self.check_waitups(out);
        Ok(None)
    }

    fn check_waitups(&mut self, out: &mut Vec<Output>) {
        let n = self.online.len();
        self.waitups.retain(|w| {
            if w.up == n {
                out.push(Output::Reply {
                    to: w.to,
                    reply: Ok(Value::Null.into()),
                });
                false
            } else {
                true
            }
        });
    }

    /// The drain checkpoint: groups of (rounded timestamp, reason) with
    /// their nodelists.
    pub fn checkpoint(&self, now: f64) -> Value {
        let mut state = Map::new();
        for (ids, ts, reason) in self.drain.groups() {
            state.insert(
                ids.encode(),
                json!({
                    "timestamp": ts,
                    "reason": reason.as_deref().unwrap_or(""),
                    "nodelist": self.nodelist_of(&ids),
                }),
            );
        }
        json!({"timestamp": now, "drain_state": state})
    }

    fn shutdown(&mut self, now: f64, out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        for to in std::mem::take(&mut self.followers) {
            Self::reply(out, to, Err(RpcError::bare(ENODATA)));
        }
        self.acquire.shutdown(out);
        self.end_agents(out);
        for w in std::mem::take(&mut self.waitups) {
            Self::reply(
                out,
                w.to,
                Err(RpcError::new(ECANCELED, "the resource module was unloaded")),
            );
        }
        out.push(Output::WriteCheckpoint(self.checkpoint(now)));
    }

    #[doc(hidden)]
    pub fn truncate_state_for_tests(&self) -> TruncateState {
        self.truncate_state()
    }
}
