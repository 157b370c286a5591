//! Prometheus metrics (`GET /metrics`) and health checks (`GET /healthz`,
//! `GET /readyz`) on the HTTP listeners.
//!
//! The service loop only bumps atomics (counters, histograms) on its hot
//! path; node-state gauges are recomputed from the core's id sets at most
//! every [`NODE_REFRESH`] (set algebra on ranges, microseconds at 16k
//! nodes), so a scrape never waits for, nor slows, the service loop.
//! Process figures (RSS, open fds) and the outbound queues of open streams
//! (journal followers, acquire holders, agent sessions) are read at
//! scrape time.

use rpc::catalog::{self as cat, Call};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use roster_core::Service;
use transport::web::{WebHandler, WebResponse, WebRoute};
use transport::QueueProbe;

/// Node-state gauges are recomputed at most this often.
pub const NODE_REFRESH: Duration = Duration::from_millis(250);

/// The node states exported by `roster_nodes{state=...}`: disjoint, so
/// they sum to `roster_nodes_size`.  Each node counts once, in the first
/// that applies: `excluded`; `drained` (online or not: the admin's
/// drain explains it); `offline` (no agent); `torpid` (online, its agent
/// late); `up` (online and schedulable).  Not up = drained + offline +
/// torpid.
pub const STATES: [&str; 5] = ["up", "torpid", "offline", "drained", "excluded"];

/// Whether ENOSYS is the expected answer to `topic`: a flux-core topic
/// flux's own tools send as a probe (the job manager's housekeeping
/// ranks, for `status`) that the catalogue says nobody here serves
/// ([`rpc::catalog::Server::Absent`]).  Counted under its own topic with
/// the `ok` outcome, not as an error of `unknown`.
pub fn expected_enosys(topic: &str) -> bool {
    cat::lookup(topic).is_some_and(|t| t.server == cat::Server::Absent)
}

/// The `topic` and `outcome` labels of a request's last reply: `ok`, or
/// `error` with unknown topics under one `unknown` label (bounded
/// cardinality), except the [`expected_enosys`] probes.
pub fn rpc_labels(topic: &str, errnum: Option<i32>) -> (&str, &'static str) {
    match errnum {
        None => (topic, "ok"),
        Some(rpc::errno::ENOSYS) if expected_enosys(topic) => (topic, "ok"),
        Some(rpc::errno::ENOSYS) => ("unknown", "error"),
        Some(_) => (topic, "error"),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabel {
    topic: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabel {
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: String,
    etcd: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TlsLabel {
    kind: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: String,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 20 µs .. ~10 s
    Histogram::new(exponential_buckets(0.00002, 2.0, 20))
}

/// The counter of one (topic, outcome) of `roster_rpc_requests`, and the
/// topic's `roster_rpc_duration_seconds` once it has one (shared with the
/// families: the same metrics).
struct RpcHandles {
    topic: String,
    outcome: String,
    count: Counter,
    seconds: Option<Histogram>,
}

/// Every metric of one daemon.
pub struct Metrics {
    registry: Registry,
    nodes: Family<StateLabel, Gauge>,
    nodes_total: Gauge,
    agents: Gauge,
    rpcs: Family<RpcLabel, Counter>,
    rpc_seconds: HistogramFamily<TopicLabel>,
    appends: Counter,
    commit_seconds: Histogram,
    followers: Gauge,
    acquirers: Gauge,
    rss: Gauge,
    fds: Gauge,
    streams: Family<TopicLabel, Gauge>,
    stream_bytes: Family<TopicLabel, Gauge>,
    stream_bytes_max: Family<TopicLabel, Gauge>,
    leader: Gauge,
    persist_errors: Counter,
    max_fds: Gauge,
    limits: Family<LimitLabel, Gauge>,
    tls_expiry: Family<TlsLabel, Gauge>,
    /// Open streaming requests, by topic label (pruned as they end).
    probes: Mutex<Probes>,
    /// The handles of `rpcs` and `rpc_seconds` already used, by topic
    /// and outcome: a reply counts without a label built and hashed.
    rpc_handles: Mutex<Vec<RpcHandles>>,
    ready: AtomicBool,
    last_refresh: Mutex<Option<Instant>>,
    /// A refresh was skipped by the rate limit: the gauges are stale until
    /// the next one ([`Metrics::refresh_due`]).
    refresh_pending: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let nodes = Family::<StateLabel, Gauge>::default();
        registry.register(
            "roster_nodes",
            "Execution targets by state, each counted once (excluded, else drained, else offline, else torpid, else up): they sum to roster_nodes_size",
            nodes.clone(),
        );
        let nodes_total = Gauge::default();
        registry.register(
            "roster_nodes_size",
            "Execution targets in the instance",
            nodes_total.clone(),
        );
        let agents = Gauge::default();
        registry.register(
            "roster_agents_connected",
            "Open agent sessions (resource.agent streams)",
            agents.clone(),
        );
        let rpcs = Family::<RpcLabel, Counter>::default();
        registry.register(
            "roster_rpc_requests",
            "RPC requests answered, by topic and outcome (ok or error; unknown topics as \"unknown\"; the ENOSYS answer to the flux clients' probe job-manager.stats-get is ok)",
            rpcs.clone(),
        );
        let rpc_seconds: HistogramFamily<TopicLabel> =
            Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "roster_rpc_duration_seconds",
            "Time from a request reaching the service loop to its (last) reply, non-streaming requests",
            rpc_seconds.clone(),
        );
        let appends = Counter::default();
        registry.register(
            "roster_eventlog_appends",
            "Events appended to the persistent eventlog",
            appends.clone(),
        );
        let commit_seconds = latency_histogram();
        registry.register(
            "roster_eventlog_commit_seconds",
            "Time of one group commit to the eventlog (write + fdatasync)",
            commit_seconds.clone(),
        );
        let followers = Gauge::default();
        registry.register(
            "roster_journal_followers",
            "Live resource.journal followers",
            followers.clone(),
        );
        let acquirers = Gauge::default();
        registry.register(
            "roster_acquire_holders",
            "Live resource.acquire holders (schedulers)",
            acquirers.clone(),
        );
        let rss = Gauge::default();
        registry.register(
            "roster_process_resident_memory_bytes",
            "Resident set size of the daemon",
            rss.clone(),
        );
        let fds = Gauge::default();
        registry.register(
            "roster_process_open_fds",
            "Open file descriptors of the daemon",
            fds.clone(),
        );
        let streams = Family::<TopicLabel, Gauge>::default();
        registry.register(
            "roster_streams",
            "Open streaming requests by topic (resource.journal followers, resource.acquire holders, resource.agent sessions, other)",
            streams.clone(),
        );
        let stream_bytes = Family::<TopicLabel, Gauge>::default();
        registry.register(
            "roster_stream_queued_bytes",
            "Reply bytes queued and not yet written to the connections of open streams, by topic (each connection counted once)",
            stream_bytes.clone(),
        );
        let stream_bytes_max = Family::<TopicLabel, Gauge>::default();
        registry.register(
            "roster_stream_queued_bytes_max",
            "The largest outbound queue of one connection with an open stream of the topic (a reader falling behind)",
            stream_bytes_max.clone(),
        );
        let build = Family::<BuildLabel, Gauge>::default();
        registry.register(
            "roster_build_info",
            "Always 1; the labels name the running build (version, etcd backend compiled in)",
            build.clone(),
        );
        build
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION").to_string(),
                etcd: cfg!(feature = "etcd").to_string(),
            })
            .set(1);
        let start = FloatGauge::default();
        registry.register(
            "roster_start_time_seconds",
            "Start time of the daemon, seconds since the epoch",
            start.clone(),
        );
        start.set(crate::now());
        let leader = Gauge::default();
        registry.register(
            "roster_ha_leader",
            "1 while this server serves the state (the local backend's server, or the etcd leader), 0 for a standby or while starting or stopping",
            leader.clone(),
        );
        let persist_errors = Counter::default();
        registry.register(
            "roster_persist_errors",
            "State changes that could not be made durable (the local backend then stops; an etcd leader steps down)",
            persist_errors.clone(),
        );
        let max_fds = Gauge::default();
        registry.register(
            "roster_process_max_fds",
            "The daemon's limit of open file descriptors (RLIMIT_NOFILE, soft)",
            max_fds.clone(),
        );
        let limits = Family::<LimitLabel, Gauge>::default();
        registry.register(
            "roster_limit",
            "The listeners' configured limits ([serve] max-connections, max-connections-per-peer, max-outbound-bytes, max-queued-requests)",
            limits.clone(),
        );
        let tls_expiry = Family::<TlsLabel, Gauge>::default();
        registry.register(
            "roster_tls_expiry_timestamp_seconds",
            "When a TLS file in force stops being valid, seconds since the epoch: kind certificate (the service's own, notAfter), ca (tls-client-ca, notAfter), crl (tls-crl, nextUpdate); name is the subject's common name (a CRL's issuer's). Read at start and on SIGHUP",
            tls_expiry.clone(),
        );
        Metrics {
            registry,
            tls_expiry,
            leader,
            persist_errors,
            max_fds,
            limits,
            streams,
            stream_bytes,
            stream_bytes_max,
            probes: Mutex::new(Probes::default()),
            rpc_handles: Mutex::new(Vec::new()),
            nodes,
            nodes_total,
            agents,
            rpcs,
            rpc_seconds,
            appends,
            commit_seconds,
            followers,
            acquirers,
            rss,
            fds,
            ready: AtomicBool::new(false),
            last_refresh: Mutex::new(None),
            refresh_pending: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// One RPC answered (its last reply sent).  `latency` is `None` for
    /// streams.
    pub fn rpc_done(&self, topic: &str, outcome: &str, latency: Option<Duration>) {
        let mut handles = self.rpc_handles.lock().unwrap_or_else(|e| e.into_inner());
        let i = match handles
            .iter()
            .position(|h| h.topic == topic && h.outcome == outcome)
        {
            Some(i) => i,
            None => {
                let count = self
                    .rpcs
                    .get_or_create(&RpcLabel {
                        topic: topic.to_string(),
                        outcome: outcome.to_string(),
                    })
                    .clone();
                handles.push(RpcHandles {
                    topic: topic.to_string(),
                    outcome: outcome.to_string(),
                    count,
                    seconds: None,
                });
                handles.len() - 1
            }
        };
        let h = &mut handles[i];
        h.count.inc();
        if let Some(d) = latency {
            // Created at the topic's first latency, as before: a topic
            // with none (streams) shows no histogram.
            let seconds = h.seconds.get_or_insert_with(|| {
                self.rpc_seconds
                    .get_or_create(&TopicLabel {
                        topic: topic.to_string(),
                    })
                    .clone()
            });
            seconds.observe(d.as_secs_f64());
        }
    }

    /// A state change could not be made durable.
    pub fn persist_failed(&self) {
        self.persist_errors.inc();
    }

    /// The listeners' limits, for alerts on how close to them the
    /// daemon runs (`roster_limit{limit=...}`).
    pub fn set_limits(&self, l: &transport::Limits) {
        for (name, v) in [
            ("max-connections", l.max_connections),
            ("max-connections-per-peer", l.max_connections_per_peer),
            ("max-outbound-bytes", l.max_outbound_bytes),
            ("max-queued-requests", l.max_queued_requests),
        ] {
            self.limits
                .get_or_create(&LimitLabel {
                    limit: name.to_string(),
                })
                .set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// The expiry dates of the TLS files in force (at start and after
    /// each SIGHUP): the previous set is replaced.
    pub fn set_tls_expiry(&self, files: &[(&str, tls::Expiry)]) {
        self.tls_expiry.clear();
        for (kind, e) in files {
            self.tls_expiry
                .get_or_create(&TlsLabel {
                    kind: kind.to_string(),
                    name: e.name.clone(),
                })
                .set(e.at);
        }
    }

    /// One group commit of `events` events that took `took`.
    pub fn committed(&self, events: usize, took: Duration) {
        self.appends.inc_by(events as u64);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    pub fn agent_opened(&self) {
        self.agents.inc();
    }

    pub fn agent_closed(&self) {
        self.agents.dec();
    }

    /// Recompute the node-state gauges from `core` unless that was done
    /// less than [`NODE_REFRESH`] ago (`force` ignores the limit).
    pub fn refresh(&self, core: &Service, now: Instant, force: bool) {
        {
            let mut last = self.last_refresh.lock().unwrap_or_else(|e| e.into_inner());
            if !force && last.is_some_and(|t| now.duration_since(t) < NODE_REFRESH) {
                self.refresh_pending
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            *last = Some(now);
            self.refresh_pending
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
        for (state, n) in node_counts(core) {
            self.nodes
                .get_or_create(&StateLabel {
                    state: state.to_string(),
                })
                .set(n as i64);
        }
        self.nodes_total.set(i64::from(core.size()));
        self.followers.set(core.followers() as i64);
        self.acquirers.set(core.acquisitions().len() as i64);
    }

    /// When a skipped refresh is due (`None`: the gauges are current).
    /// The service loop, which sleeps until its next deadline, wakes for
    /// it so the gauges never stay stale after the last change.
    pub fn refresh_due(&self) -> Option<Instant> {
        if !self
            .refresh_pending
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        let last = *self.last_refresh.lock().unwrap_or_else(|e| e.into_inner());
        Some(last.map_or_else(Instant::now, |t| t + NODE_REFRESH))
    }

    /// A streaming request was opened: watch its outbound queue until it
    /// ends.
    pub fn stream_opened(&self, topic: &str, probe: QueueProbe) {
        let label = stream_label(topic);
        let mut p = self.probes.lock().unwrap_or_else(|e| e.into_inner());
        p.list.push((label, probe));
        // Drop the ended ones now and then (amortized: when the list has
        // doubled since the last pass).
        if p.list.len() >= 2 * p.live_at_prune.max(32) {
            p.list.retain(|(_, q)| q.is_live());
            p.live_at_prune = p.list.len();
        }
    }

    /// Recompute the stream gauges from the open streams' queues.
    fn refresh_streams(&self) {
        let mut p = self.probes.lock().unwrap_or_else(|e| e.into_inner());
        p.list.retain(|(_, q)| q.is_live());
        p.live_at_prune = p.list.len();
        for label in STREAM_LABELS {
            let mut count = 0i64;
            let mut seen = std::collections::HashSet::new();
            let (mut sum, mut max) = (0usize, 0usize);
            for (_, q) in p.list.iter().filter(|(l, _)| *l == label) {
                count += 1;
                if seen.insert(q.queue_id()) {
                    let b = q.queued_bytes();
                    sum = sum.saturating_add(b);
                    max = max.max(b);
                }
            }
            let key = TopicLabel {
                topic: label.to_string(),
            };
            self.streams.get_or_create(&key).set(count);
            self.stream_bytes
                .get_or_create(&key)
                .set(i64::try_from(sum).unwrap_or(i64::MAX));
            self.stream_bytes_max
                .get_or_create(&key)
                .set(i64::try_from(max).unwrap_or(i64::MAX));
        }
    }

    /// State loaded and listeners up.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The exposition text, in Prometheus's classic text format (0.0.4),
    /// which every scraper and `promtool check metrics` read.
    pub fn render(&self) -> String {
        if let Some(rss) = process_rss() {
            self.rss.set(rss as i64);
        }
        if let Some(n) = process_fds() {
            self.fds.set(n as i64);
        }
        if let Some(n) = process_max_fds() {
            self.max_fds.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.leader.set(i64::from(self.is_ready()));
        self.refresh_streams();
        let mut s = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = encode(&mut s, &self.registry);
        openmetrics_to_text(&s)
    }
}

/// The `topic` labels of the stream gauges (bounded cardinality).
const STREAM_LABELS: [&str; 4] = [
    cat::Journal::TOPIC,
    cat::Acquire::TOPIC,
    cat::AgentHello::TOPIC,
    "other",
];

fn stream_label(topic: &str) -> &'static str {
    STREAM_LABELS
        .iter()
        .find(|l| **l == topic)
        .copied()
        .unwrap_or("other")
}

/// The open streams being watched.
#[derive(Debug, Default)]
struct Probes {
    list: Vec<(&'static str, QueueProbe)>,
    live_at_prune: usize,
}

/// Counts per state, in [`STATES`] order: disjoint, they sum to the
/// instance's size.
pub fn node_counts(core: &Service) -> [(&'static str, u64); 5] {
    let all = if core.size() > 0 {
        idset::IdSet::from_range(0, core.size() - 1)
    } else {
        idset::IdSet::new()
    };
    let excluded = core.excluded().intersection(&all);
    let drained = core.drained().intersection(&all).difference(&excluded);
    let offline = all
        .difference(core.online())
        .difference(&excluded)
        .difference(&drained);
    let torpid = core
        .torpid()
        .intersection(core.online())
        .intersection(&all)
        .difference(&excluded)
        .difference(&drained);
    let up = all
        .difference(&excluded)
        .difference(&drained)
        .difference(&offline)
        .difference(&torpid);
    [
        ("up", up.len()),
        ("torpid", torpid.len()),
        ("offline", offline.len()),
        ("drained", drained.len()),
        ("excluded", excluded.len()),
    ]
}

/// prometheus-client writes OpenMetrics: a counter family `x` has samples
/// `x_total`, and the text ends with `# EOF`.  The classic text format
/// names the family after its samples and has no `# EOF`.
fn openmetrics_to_text(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len() + 64);
    for line in om.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| Some((*p, line.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn process_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The soft `Max open files` of /proc/self/limits.
fn process_max_fds() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = s.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn process_fds() -> Option<usize> {
    Some(
        std::fs::read_dir("/proc/self/fd")
            .ok()?
            .count()
            .saturating_sub(1),
    )
}

/// The live web view (`GET /`), embedded in the binary.
const INDEX_HTML: &str = include_str!("web/index.html");

/// The `GET` routes: `/metrics`, `/healthz`, `/readyz`, and the web view:
/// `/` (the page), `/api/status` (`resource.status`, which guests may
/// read), `/api/sched-status` (`resource.sched-status`, the same) and
/// `/api/journal` (the `resource.journal` stream, which needs
/// the `user` role as over RPC).  The routes grant at most `guest` and
/// `user` rights: the listener caps them at the caller's role, so a guest
/// is refused the journal with EPERM (its page polls `/api/status`
/// instead), and no caller gets more than a user's reads.
#[derive(Debug)]
pub struct Web {
    pub metrics: std::sync::Arc<Metrics>,
}

const TEXT: &str = "text/plain; charset=utf-8";
const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

impl WebHandler for Web {
    fn get(&self, path: &str, _caller: &rpc::Role) -> Option<WebRoute> {
        let page = match path {
            "/" | "/index.html" => WebResponse::ok("text/html; charset=utf-8", INDEX_HTML),
            "/metrics" => WebResponse::ok(EXPOSITION, self.metrics.render()),
            "/healthz" => WebResponse::ok(TEXT, "ok\n"),
            "/readyz" if self.metrics.is_ready() => WebResponse::ok(TEXT, "ready\n"),
            "/readyz" => WebResponse {
                status: 503,
                content_type: TEXT,
                body: "not ready\n".into(),
            },
            "/api/status" => {
                return Some(WebRoute::Rpc {
                    topic: cat::Status::TOPIC,
                    streaming: false,
                    role: rpc::Role::Guest,
                })
            }
            // The scheduler's view (`allocated`): a guest's read, as
            // over RPC.
            "/api/sched-status" => {
                return Some(WebRoute::Rpc {
                    topic: cat::SchedStatus::TOPIC,
                    streaming: false,
                    role: rpc::Role::Guest,
                })
            }
            // A user's read, as over RPC: the listener runs it with the
            // caller's role when that is less (a guest is refused).
            "/api/journal" => {
                return Some(WebRoute::Rpc {
                    topic: cat::Journal::TOPIC,
                    streaming: true,
                    role: rpc::Role::User,
                })
            }
            _ => return None,
        };
        Some(WebRoute::Page(page))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_names_every_metric() {
        let m = Metrics::new();
        m.rpc_done("resource.drain", "ok", Some(Duration::from_micros(300)));
        m.committed(3, Duration::from_micros(900));
        m.agent_opened();
        let text = m.render();
        for name in [
            "roster_rpc_requests_total{topic=\"resource.drain\",outcome=\"ok\"} 1",
            "roster_rpc_duration_seconds_count{topic=\"resource.drain\"} 1",
            "roster_eventlog_appends_total 3",
            "roster_eventlog_commit_seconds_count 1",
            "roster_agents_connected 1",
            "# TYPE roster_rpc_requests_total counter",
            "# HELP roster_eventlog_appends_total Events",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn the_status_probe_is_not_an_error() {
        use rpc::errno::{ENOSYS, EPERM};
        assert_eq!(rpc_labels("resource.drain", None), ("resource.drain", "ok"));
        assert_eq!(
            rpc_labels("resource.drain", Some(EPERM)),
            ("resource.drain", "error")
        );
        assert_eq!(
            rpc_labels("frob.nicate", Some(ENOSYS)),
            ("unknown", "error")
        );
        assert_eq!(
            rpc_labels("job-manager.stats-get", Some(ENOSYS)),
            ("job-manager.stats-get", "ok")
        );
        // any other error of the probe is one
        assert_eq!(
            rpc_labels("job-manager.stats-get", Some(EPERM)),
            ("job-manager.stats-get", "error")
        );
    }

    #[test]
    fn build_start_leader_and_limits_are_exported() {
        let m = Metrics::new();
        m.set_limits(&transport::Limits::default());
        let text = m.render();
        let version = format!(
            "roster_build_info{{version=\"{}\",etcd=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            cfg!(feature = "etcd")
        );
        assert!(text.contains(&version), "{text}");
        assert!(text.contains("roster_ha_leader 0"), "{text}");
        assert!(text.contains("roster_persist_errors_total 0"), "{text}");
        assert!(
            text.contains("roster_limit{limit=\"max-connections\"} 32768"),
            "{text}"
        );
        let start: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("roster_start_time_seconds "))
            .and_then(|v| v.parse().ok())
            .expect("roster_start_time_seconds");
        assert!((crate::now() - start).abs() < 60.0, "{start}");
        let max_fds: i64 = text
            .lines()
            .find_map(|l| l.strip_prefix("roster_process_max_fds "))
            .and_then(|v| v.parse().ok())
            .expect("roster_process_max_fds");
        assert!(max_fds > 0);
        m.set_ready(true);
        m.persist_failed();
        let text = m.render();
        assert!(text.contains("roster_ha_leader 1"), "{text}");
        assert!(text.contains("roster_persist_errors_total 1"), "{text}");
    }

    #[test]
    fn tls_expiry_is_replaced_not_added_to() {
        let m = Metrics::new();
        let e = |name: &str, at| tls::Expiry {
            name: name.into(),
            at,
        };
        m.set_tls_expiry(&[("certificate", e("head", 100)), ("ca", e("Roster CA", 200))]);
        let text = m.render();
        for line in [
            "roster_tls_expiry_timestamp_seconds{kind=\"certificate\",name=\"head\"} 100",
            "roster_tls_expiry_timestamp_seconds{kind=\"ca\",name=\"Roster CA\"} 200",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        m.set_tls_expiry(&[("certificate", e("head2", 300))]);
        let text = m.render();
        assert!(
            text.contains("{kind=\"certificate\",name=\"head2\"} 300"),
            "{text}"
        );
        assert!(!text.contains("name=\"head\""), "{text}");
        assert!(!text.contains("Roster CA"), "{text}");
    }

    #[test]
    fn stream_queues_are_read_at_scrape_time() {
        let m = Metrics::new();
        let (journal, _rx) = transport::ReplySender::unbounded(true);
        let (acquire, _rx2) = transport::ReplySender::unbounded(true);
        m.stream_opened("resource.journal", journal.probe());
        m.stream_opened("resource.acquire", acquire.probe());
        m.stream_opened("resource.acquire", acquire.probe());
        m.stream_opened("resource.frobnicate", acquire.probe());
        journal
            .send(Ok(serde_json::json!({"events": ["x".repeat(1000)]}).into()))
            .unwrap();
        let text = m.render();
        let value = |line: &str| -> i64 {
            text.lines()
                .find_map(|l| l.strip_prefix(line))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{line} missing from:\n{text}"))
        };
        assert_eq!(value("roster_streams{topic=\"resource.journal\"}"), 1);
        assert_eq!(value("roster_streams{topic=\"resource.acquire\"}"), 2);
        assert_eq!(value("roster_streams{topic=\"other\"}"), 1);
        assert_eq!(value("roster_streams{topic=\"resource.agent\"}"), 0);
        let queued = value("roster_stream_queued_bytes{topic=\"resource.journal\"}");
        assert!(queued >= 1000, "{queued}");
        assert_eq!(
            value("roster_stream_queued_bytes_max{topic=\"resource.journal\"}"),
            queued
        );
        assert_eq!(
            value("roster_stream_queued_bytes{topic=\"resource.acquire\"}"),
            0
        );
        // the request ends (its sender dropped): no longer counted
        drop(journal);
        let text = m.render();
        assert!(
            text.contains("roster_streams{topic=\"resource.journal\"} 0"),
            "{text}"
        );
        assert!(text.contains("roster_stream_queued_bytes{topic=\"resource.journal\"} 0"));
    }

    #[test]
    fn readyz_follows_the_flag() {
        let web = Web {
            metrics: std::sync::Arc::new(Metrics::new()),
        };
        let status = |p: &str| match web.get(p, &rpc::Role::Guest) {
            Some(WebRoute::Page(r)) => r.status,
            other => panic!("{p}: {other:?}"),
        };
        assert_eq!(status("/readyz"), 503);
        web.metrics.set_ready(true);
        assert_eq!(status("/readyz"), 200);
        assert_eq!(status("/healthz"), 200);
        assert_eq!(status("/"), 200);
        assert!(web.get("/nope", &rpc::Role::Owner).is_none());
        assert!(matches!(
            web.get("/api/status", &rpc::Role::Owner),
            Some(WebRoute::Rpc {
                topic: "resource.status",
                role: rpc::Role::Guest,
                ..
            })
        ));
    }
}
