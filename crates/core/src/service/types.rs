//! The service's public types: what the shell hands in ([`Init`],
//! [`Settings`], [`Input`]) and what it must do ([`Output`]).

use crate::acquire::GroupError;
use crate::errno::RpcError;
use eventlog::Event;
use idset::IdSet;
use rpc::{ConnId, Reply, ReplyTo, Request};
use rset::Rset;
use serde_json::Value;
use std::time::Duration;

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
    /// Build from a parsed R; the JSON is its canonical encoding, with
    /// the parsed R's `attributes` kept verbatim (as flux-core keeps them).
    pub fn from_rset(rset: Rset, method: Method) -> Inventory {
        let mut json = rset.to_json();
        if let (Some(a), Some(o)) = (rset.attributes(), json.as_object_mut()) {
            o.insert("attributes".into(), a.clone());
        }
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
    /// The fan-out of the relay tree (`[serve] relay-fanout`): rank r's
    /// parent is (r - 1) / fanout; a relay speaks for its subtree only.
    pub relay_fanout: u32,
    /// `[queues]`, answered by `config.get`.
    pub queues: Option<serde_json::Map<String, serde_json::Value>>,
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
            relay_fanout: rpc::relay::DEFAULT_FANOUT,
            queues: None,
        }
    }
}

/// The time of an input, as the shell read its two clocks.
///
/// The core never compares wall-clock times: every timer and every
/// decision (heartbeat lateness, liveness batching, [`Service::next_deadline`])
/// uses `mono`; `wall` only stamps events and drains, and the core keeps
/// those stamps non-decreasing (`max(last stamp, wall)`), so a clock
/// stepped back never produces out-of-order events and a clock stepped
/// forward never fires a timer.
///
/// [`Service::next_deadline`]: super::Service::next_deadline
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Now {
    /// Monotonic time since an arbitrary origin fixed for the life of the
    /// service (the shell: since it started, from `std::time::Instant`).
    pub mono: Duration,
    /// Wall-clock time, seconds since the epoch.
    pub wall: f64,
}

impl Now {
    pub fn new(mono: Duration, wall: f64) -> Now {
        Now { mono, wall }
    }
}

/// `secs` on both clocks (monotonic time since the epoch): for tests and
/// simulations whose clock never steps.
impl From<f64> for Now {
    fn from(secs: f64) -> Now {
        Now {
            mono: Duration::try_from_secs_f64(secs).unwrap_or_default(),
            wall: secs,
        }
    }
}

/// What the shell hands to [`Service::new`].
#[derive(Debug, Clone, Default)]
pub struct Init {
    /// Wall-clock time at start, seconds since the epoch (event
    /// timestamps only).
    pub now: f64,
    /// Monotonic time at start, on the clock of later [`Now::mono`]s.
    pub mono: Duration,
    pub settings: Settings,
    pub inventory: Option<Inventory>,
    /// The persistent eventlog as read from the state directory.
    pub stored_events: Vec<Event>,
    /// The drain checkpoint written at the last clean shutdown.
    pub checkpoint: Option<Value>,
    /// The checkpoint's position in `stored_events` (the number of events
    /// it summarises, as the store found it): replay starts at that index,
    /// whatever the timestamps say.  `None` (a checkpoint from an older
    /// version, or one that does not match the log): replay the events not
    /// older than the checkpoint's timestamp, as before.
    pub replay_from: Option<usize>,
    /// Without an inventory: the expected hosts (rank i = host i); R is
    /// assembled from the agents' reports (`dynamic-discovery`).
    pub discover_hosts: Option<Vec<String>>,
    /// This run's identity, different for every start of the service (the
    /// shell draws it at random): journal positions name the run they come
    /// from, so that a reader resuming on another run (after a restart or a
    /// failover) is resumed by its place in the persistent log.
    pub run: u64,
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
    /// Sign `csr` for `hostname` (a host of R) with the service's CA and
    /// answer `to` with [`rpc::msg::AgentEnrolResponse`] (the shell holds
    /// the CA; `requester` names who asked, for the log).
    Enrol {
        to: ReplyTo,
        hostname: String,
        csr: String,
        requester: String,
    },
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Request(Request),
    /// The connection went away: drop its requests silently.
    Disconnect(ConnId),
    /// One request is gone while its connection stays (the transport ended
    /// its stream, e.g. EOVERFLOW for a reader that fell behind): drop it
    /// silently at once, as a disconnect would (journal follower, acquire,
    /// waitup, agent stream).
    Cancel(ReplyTo),
    /// A later line of an agent session (a heartbeat `{}`, or a relay's
    /// line): one-way, nothing answers it (a relay's answers go down its
    /// session's stream).  The session's hello already passed the checks.
    SessionLine {
        conn: ConnId,
        payload: Value,
    },
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
    /// of inputs and when [`Service::next_deadline`] has passed.
    ///
    /// [`Service::next_deadline`]: super::Service::next_deadline
    Tick,
}
