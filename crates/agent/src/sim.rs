//! The many-agent simulator: one virtual agent per host of a hostlist, in
//! one process, each with its own connection, through [`crate::run`].

use crate::relay::{run_relay, Leaves, RelayConfig, RelayEvent, Welcome};
use crate::{run, AgentConfig, AgentError, Control, Event};
use idset::IdSet;
use rpc::uri::{Servers, Uri};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The service's servers (see [`AgentConfig::servers`]).
    pub servers: Servers,
    /// One TLS configuration shared by every virtual agent (`tls://`).
    pub tls: Option<Arc<tls::rustls::ClientConfig>>,
    pub token: Option<String>,
    /// One agent per entry (a host listed twice gets two agents).
    pub hosts: Vec<String>,
    pub cores: IdSet,
    pub gpus: IdSet,
    pub heartbeat: Option<Duration>,
    /// Ranks whose agents stop heartbeating (connections stay open)...
    pub stall: IdSet,
    /// ...this long after the simulator starts.
    pub stall_after: Duration,
    /// Hellos in flight at once.
    pub concurrency: usize,
    /// Run the first `relays` hosts as relays (each with a Unix socket
    /// listener in a private directory) and every other host as a
    /// virtual leaf of its nearest relay ancestor: no connection per
    /// leaf.  0: one connection per agent.
    pub relays: usize,
}

/// Counters of a simulation.
#[derive(Debug, Default)]
pub struct SimReport {
    /// Agents currently joined.
    pub joined: AtomicUsize,
    /// Agents ever joined for the first time.
    pub first_joins: AtomicUsize,
    /// Agents that gave up (permanent refusal).
    pub failed: AtomicUsize,
    /// The first few refusal messages.
    pub errors: Mutex<Vec<String>>,
    /// Failed connection attempts or sessions lost (each retried).
    pub retries: AtomicUsize,
    /// The latest reason for a retry.
    pub last_retry: Mutex<Option<String>>,
}

impl SimReport {
    /// One line of progress: joined, retries and the latest reason.
    pub fn progress(&self, total: usize) -> String {
        let retries = self.retries.load(Ordering::Relaxed);
        let mut line = format!(
            "{}/{total} joined, {} gave up, {retries} retries",
            self.joined.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        );
        if let Some(last) = self.last_retry.lock().ok().and_then(|g| g.clone()) {
            line.push_str(&format!(" (latest: {last})"));
        }
        line
    }

    fn retried(&self, why: String) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut g) = self.last_retry.lock() {
            *g = Some(why);
        }
    }
}

/// Run the simulation until `stop`; `on_all_joined` is called once, when
/// every agent has joined for the first time, with the time it took.
pub async fn simulate(
    cfg: SimConfig,
    stop: watch::Receiver<bool>,
    report: Arc<SimReport>,
    on_all_joined: impl FnOnce(Duration) + Send + 'static,
) -> Result<(), AgentError> {
    if cfg.relays > 0 {
        return simulate_relays(cfg, stop, report, on_all_joined).await;
    }
    let start = Instant::now();
    let r = crate::local_r("sim", &cfg.cores, &cfg.gpus)?;
    let stall = Arc::new(cfg.stall.clone());
    let stall_at = start + cfg.stall_after;
    let stalled: Arc<dyn Fn(u32) -> bool + Send + Sync> =
        Arc::new(move |rank| stall.contains(rank) && Instant::now() >= stall_at);
    let gate = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let total = cfg.hosts.len();
    let on_all = Arc::new(Mutex::new(Some(on_all_joined)));
    // A service on loopback: each virtual agent connects from its own
    // address in 127.0.0.0/8, as each node of a cluster has its own. From
    // one address, 16k connections to one service port make every
    // connect() search the ephemeral ports in use (__inet_hash_connect
    // and __inet_check_established were a third of the simulator's CPU
    // in a 16k join over tcp://).
    let loopback = match cfg.servers.current() {
        Uri::Tcp { host, port } | Uri::Tls { host, port } => {
            tokio::net::lookup_host((host.as_str(), *port))
                .await
                .map(|mut a| a.any(|a| a.is_ipv4() && a.ip().is_loopback()))
                .unwrap_or(false)
        }
        _ => false,
    };
    let mut tasks = Vec::with_capacity(total);
    for (i, host) in cfg.hosts.iter().enumerate() {
        let mut r = r.clone();
        if let Some(nl) = r.get_mut("execution").and_then(|e| e.get_mut("nodelist")) {
            *nl = serde_json::json!([host]);
        }
        let acfg = AgentConfig {
            servers: cfg.servers.clone(),
            tls: cfg.tls.clone(),
            token: cfg.token.clone(),
            hostname: host.clone(),
            r: Some(r),
            rank: None,
            heartbeat: cfg.heartbeat,
            source: loopback.then(|| loopback_source(i)),
        };
        let ctl = Control {
            stop: stop.clone(),
            stalled: Arc::clone(&stalled),
            gate: Some(Arc::clone(&gate)),
        };
        let report = Arc::clone(&report);
        let on_all = Arc::clone(&on_all);
        tasks.push(tokio::spawn(async move {
            let mut ever = false;
            let result = run(&acfg, ctl, |ev| match ev {
                Event::Joined { .. } => {
                    report.joined.fetch_add(1, Ordering::Relaxed);
                    if !ever {
                        ever = true;
                        let n = report.first_joins.fetch_add(1, Ordering::Relaxed) + 1;
                        if n == total {
                            if let Some(f) = on_all.lock().ok().and_then(|mut g| g.take()) {
                                f(start.elapsed());
                            }
                        }
                    }
                }
                Event::Lost { reason } => {
                    report.joined.fetch_sub(1, Ordering::Relaxed);
                    report.retried(format!("{}: session lost: {reason}", acfg.hostname));
                }
                Event::Retrying { error, .. } => {
                    report.retried(format!("{}: {error}", acfg.hostname));
                }
                Event::Drained { .. } => {}
            })
            .await;
            if let Err(e) = result {
                report.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut errs) = report.errors.lock() {
                    if errs.len() < 5 {
                        errs.push(format!("{}: {e}", acfg.hostname));
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// A one-node R for `host`.
fn host_r(cfg: &SimConfig, host: &str) -> Result<serde_json::Value, AgentError> {
    crate::local_r(host, &cfg.cores, &cfg.gpus)
}

/// The tree in one process: the first `cfg.relays` hosts are relays,
/// the rest virtual leaves.  The first relay connects to the service;
/// once it is welcomed (and knows the tree), every other relay connects
/// to its nearest relay ancestor of this process (or to the service when
/// it has none), over a Unix socket.  Each relay takes as virtual leaves
/// the hosts of its subtree not below another relay of the process.
async fn simulate_relays(
    cfg: SimConfig,
    stop: watch::Receiver<bool>,
    report: Arc<SimReport>,
    on_all_joined: impl FnOnce(Duration) + Send + 'static,
) -> Result<(), AgentError> {
    let start = Instant::now();
    let n = cfg.relays.min(cfg.hosts.len());
    let relays: Arc<Vec<String>> = Arc::new(cfg.hosts[..n].to_vec());
    let leaf_hosts: Arc<HashSet<String>> = Arc::new(cfg.hosts[n..].iter().cloned().collect());
    let dir = std::env::temp_dir().join(format!("roster-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| AgentError::Setup(format!("{}: {e}", dir.display())))?;
    let sock = |i: usize| Uri::Unix(dir.join(format!("relay-{i}.sock")));
    let leaves = Leaves {
        hosts: leaf_hosts,
        relays: Arc::clone(&relays),
        cores: cfg.cores.clone(),
        gpus: cfg.gpus.clone(),
        stall: cfg.stall.clone(),
        stall_at: start + cfg.stall_after,
    };
    let total = cfg.hosts.len() as u64;
    // Per relay: its own join (0/1) + its accepted leaves.
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let on_all = Arc::new(Mutex::new(Some(on_all_joined)));
    let (wtx, mut wrx) = tokio::sync::mpsc::unbounded_channel::<Welcome>();
    let spawn = |i: usize, upstream: Uri| -> Result<tokio::task::JoinHandle<()>, AgentError> {
        let host = relays[i].clone();
        let rcfg = RelayConfig {
            agent: AgentConfig {
                // Relays reach the service (or their parent relay) at one
                // address; following an HA leader list is not done yet.
                servers: Servers::new(upstream, Vec::new()),
                tls: cfg.tls.clone(),
                token: cfg.token.clone(),
                hostname: host.clone(),
                r: Some(host_r(&cfg, &host)?),
                rank: None,
                heartbeat: None,
                source: None,
            },
            listen: vec![sock(i)],
            listen_opts: transport::ListenOptions {
                socket_mode: 0o600,
                ..Default::default()
            },
            leaves: Some(leaves.clone()),
        };
        let (counts, report, on_all, wtx) = (
            Arc::clone(&counts),
            Arc::clone(&report),
            Arc::clone(&on_all),
            wtx.clone(),
        );
        let stop = stop.clone();
        Ok(tokio::spawn(async move {
            let mut own = 0u64;
            let mut leaves_seen = 0u64;
            let bump = |own: u64, leaves: u64| {
                counts[i].store(own + leaves, Ordering::Relaxed);
                let sum: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
                report.joined.store(sum as usize, Ordering::Relaxed);
                report.first_joins.store(sum as usize, Ordering::Relaxed);
                if sum == total {
                    if let Some(f) = on_all.lock().ok().and_then(|mut g| g.take()) {
                        f(start.elapsed());
                    }
                }
            };
            let result = run_relay(rcfg, stop, |ev| match ev {
                RelayEvent::Joined(w) => {
                    own = 1;
                    bump(own, leaves_seen);
                    let _ = wtx.send(*w);
                }
                RelayEvent::Leaves {
                    accepted,
                    refused,
                    errors,
                } => {
                    leaves_seen = accepted;
                    bump(own, leaves_seen);
                    if refused > 0 {
                        report.failed.store(refused as usize, Ordering::Relaxed);
                        if let Ok(mut errs) = report.errors.lock() {
                            for e in errors {
                                if errs.len() < 5 && !errs.contains(&e) {
                                    errs.push(e);
                                }
                            }
                        }
                    }
                }
                RelayEvent::Lost { .. }
                | RelayEvent::Retrying { .. }
                | RelayEvent::Drained { .. } => {}
            })
            .await;
            if let Err(e) = result {
                report.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut errs) = report.errors.lock() {
                    if errs.len() < 5 {
                        errs.push(format!("{host}: {e}"));
                    }
                }
            }
        }))
    };
    let mut tasks = vec![spawn(0, cfg.servers.current().clone())?];
    // The tree, from the first relay's welcome.
    let mut stop_w = stop.clone();
    let first = tokio::select! {
        w = wrx.recv() => w,
        _ = crate::stopped(&mut stop_w) => None,
    };
    if let Some(w) = first {
        let mut rank_of: HashMap<&str, u32> = HashMap::new();
        for (r, h) in w.subtree.iter().zip(&w.hosts) {
            rank_of.entry(h.as_str()).or_insert(r);
        }
        let mut index: HashMap<u32, usize> = HashMap::from([(w.rank, 0)]);
        for (i, h) in relays.iter().enumerate().skip(1) {
            if let Some(r) = rank_of.get(h.as_str()) {
                index.insert(*r, i);
            }
        }
        for (i, h) in relays.iter().enumerate().skip(1) {
            let mut up = cfg.servers.current().clone();
            if let Some(&r) = rank_of.get(h.as_str()) {
                let mut p = rpc::relay::parent(r, w.fanout);
                while let Some(a) = p {
                    if let Some(&j) = index.get(&a) {
                        up = sock(j);
                        break;
                    }
                    p = rpc::relay::parent(a, w.fanout);
                }
            }
            tasks.push(spawn(i, up)?);
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The `i`th simulated node's loopback address: 127.1.0.0 onwards (the
/// service's own 127.0.0.x stay clear).
fn loopback_source(i: usize) -> std::net::IpAddr {
    let i = i % (254 << 16);
    std::net::Ipv4Addr::new(127, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_sources_are_distinct_and_loopback() {
        let all: std::collections::HashSet<_> = (0..70_000).map(loopback_source).collect();
        assert_eq!(all.len(), 70_000);
        assert!(all.iter().all(|a| a.is_loopback()));
        assert_eq!(loopback_source(0).to_string(), "127.1.0.0");
        assert_eq!(loopback_source(65_536 + 257).to_string(), "127.2.1.1");
    }

    #[test]
    fn progress_counts_and_names_the_latest_retry() {
        let r = SimReport::default();
        assert_eq!(r.progress(4), "0/4 joined, 0 gave up, 0 retries");
        r.joined.store(3, Ordering::Relaxed);
        r.retried("sim1: cannot connect to tls://x:1: Connection refused".into());
        r.retried("sim2: session lost: the service ended the session".into());
        assert_eq!(
            r.progress(4),
            "3/4 joined, 0 gave up, 2 retries (latest: sim2: session lost: the service ended the session)"
        );
    }
}
