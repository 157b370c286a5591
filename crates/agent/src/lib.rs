//! Roster's node agent (`roster agent`) and its many-agent simulator.
//!
//! An agent discovers what its node has ([`topo`]: physical cores and
//! GPUs), opens an agent session with the resource service (see
//! [`session`]: `POST /v1/resource.agent` with `Upgrade: roster-agent/1`,
//! then a plain NDJSON stream) and says hello with its hostname and its
//! local R.  The
//! service maps the hostname to a rank through R's nodelist, answers with
//! a welcome (`{rank, heartbeat, ...}`), marks the rank online, and
//! verifies the R.  The agent then sends a heartbeat line every period;
//! the service marks it torpid when it falls silent and offline when its
//! connection drops or it stays silent too long.  When the session ends
//! for any other reason than a refusal (the service restarted, a network
//! failure), the agent reconnects with exponential backoff.
//!
//! The simulator ([`simulate`]) runs many such agents in one process,
//! through the same code and the same protocol.

pub mod relay;
pub mod session;
mod sim;

use idset::IdSet;
use rpc::errno::{EAGAIN, EEXIST, EINVAL, ENOENT, EPERM, EPROTO};
use rpc::uri::{Servers, Step, Uri};
use rpc::{msg, RpcError};
use serde_json::Value;
use session::Session;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Semaphore};

pub use sim::{simulate, SimConfig, SimReport};

/// Errors of an agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot connect to {uri}: {}", io_text(.source))]
    Connect {
        uri: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", io_text(.0))]
    Io(#[source] std::io::Error),
    #[error("the service closed the connection")]
    Closed,
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The service answered the hello with an error.
    #[error("the service refused the agent: {}", .0.message())]
    Refused(RpcError),
    #[error("{0}")]
    Setup(String),
}

impl AgentError {
    /// A refusal that retrying cannot fix (unknown host, wrong token, rank
    /// already claimed, bad hello).
    pub fn is_permanent(&self) -> bool {
        matches!(self, AgentError::Refused(e)
            if matches!(e.errnum, EPERM | ENOENT | EINVAL | EEXIST | EPROTO))
    }

    /// The leader a standby's refusal names ("not the leader; the leader
    /// is URI").
    pub fn leader(&self) -> Option<Uri> {
        let AgentError::Refused(r) = self else {
            return None;
        };
        rpc::uri::leader_redirect(r.errstr.as_deref()?)?
            .into_iter()
            .next()
    }
}

use rpc::errno::io_text;

pub use topo::local_hostname;

/// The single-node R an agent reports (rank 0; the service re-ranks it).
pub fn local_r(hostname: &str, cores: &IdSet, gpus: &IdSet) -> Result<Value, AgentError> {
    let mut r = rset::Rset::new();
    r.append_node(Some(hostname), 0, cores, gpus)
        .map_err(|e| AgentError::Setup(format!("cannot describe this node as R: {e}")))?;
    Ok(r.to_json())
}

/// What one agent says and where.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The service's servers (several: a highly available one, etcd
    /// backend), tried in turn after each failure; a standby's redirect
    /// ("not the leader; the leader is URI") is followed at once, but
    /// not twice in a row.
    pub servers: Servers,
    /// For `tls://`: the CA and, normally, this node's certificate.
    pub tls: Option<Arc<tls::rustls::ClientConfig>>,
    pub token: Option<String>,
    pub hostname: String,
    /// Its local R (see [`local_r`]); `None` skips verification.
    pub r: Option<Value>,
    /// Ask for this rank of the host (several ranks per host).
    pub rank: Option<u32>,
    /// Heartbeat period; `None`: the one the service suggests.
    pub heartbeat: Option<Duration>,
    /// Connect from this address (the simulator gives each virtual agent
    /// its own loopback address, as each node has its own); `None`: the
    /// kernel's choice.
    pub source: Option<std::net::IpAddr>,
}

impl AgentConfig {
    /// This agent's hello (a relay's says `relay`).
    pub fn hello(&self) -> msg::AgentHello {
        msg::AgentHello {
            hostname: self.hostname.clone(),
            r: self.r.clone(),
            rank: self.rank,
            relay: false,
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
        }
    }
}

/// The heartbeat period a welcome suggests (5 s if it names none).
pub(crate) fn suggested_period(welcome: &msg::AgentAnswer) -> Duration {
    let s = welcome
        .heartbeat
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(5.0);
    Duration::from_secs_f64(s.clamp(0.01, 3600.0))
}

/// The reasons an answer gives for draining `rank` (any rank: `None`).
pub(crate) fn drained_reasons(answer: &Value, rank: Option<u32>) -> Vec<String> {
    let Ok(a) = msg::decode::<msg::AgentAnswer>(answer) else {
        return Vec::new();
    };
    a.drained
        .into_iter()
        .flatten()
        .filter(|d| rank.is_none_or(|r| d.ranks.contains(r)))
        .map(|d| d.reason)
        .collect()
}

/// What happens to an agent, for logging.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Joined {
        rank: u32,
        heartbeat: Duration,
    },
    /// The session ended (the agent will reconnect).
    Lost {
        reason: String,
    },
    /// Connecting or saying hello failed; next attempt after `delay`.
    Retrying {
        error: String,
        delay: Duration,
    },
    /// The service drained this node (its R did not verify).
    Drained {
        reason: String,
    },
}

/// How [`run`] is steered from outside.
#[derive(Clone)]
pub struct Control {
    /// Turns true: leave cleanly and return.
    pub stop: watch::Receiver<bool>,
    /// Heartbeats are skipped while this says so for the agent's rank (the
    /// simulator's `--stall`); the session stays open.
    pub stalled: Arc<dyn Fn(u32) -> bool + Send + Sync>,
    /// Bounds the number of hellos in flight (the simulator).
    pub gate: Option<Arc<Semaphore>>,
}

impl Control {
    pub fn new(stop: watch::Receiver<bool>) -> Control {
        Control {
            stop,
            stalled: Arc::new(|_| false),
            gate: None,
        }
    }
}

pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Backoff bound while the servers answer "not the leader" (failover).
const BACKOFF_NO_LEADER: Duration = Duration::from_millis(500);
/// How many EEXIST refusals in a row are retried.
pub(crate) const EEXIST_RETRIES: u32 = 3;

/// A random fraction in [0, 1) (for backoff jitter).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            // The controller is gone: never stop.
            std::future::pending::<()>().await;
        }
    }
}

/// Wait `backoff` (jittered) before the next attempt to reconnect, then
/// double it, up to 5 s, or 0.5 s when `soon` (a failover in progress, or
/// one server of several down: look again soon).  False if stopped.
pub(crate) async fn pause(
    backoff: &mut Duration,
    soon: bool,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let delay = backoff.mul_f64(0.5 + jitter());
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = stopped(stop) => return false,
    }
    *backoff = (*backoff * 2).min(if soon { BACKOFF_NO_LEADER } else { BACKOFF_MAX });
    true
}

async fn open(cfg: &AgentConfig, uri: &Uri, ctl: &Control) -> Result<(Session, Value), AgentError> {
    let _permit = match &ctl.gate {
        Some(g) => Some(
            g.clone()
                .acquire_owned()
                .await
                .map_err(|_| AgentError::Setup("simulator is stopping".into()))?,
        ),
        None => None,
    };
    Session::open(
        uri,
        cfg.tls.as_ref(),
        cfg.token.as_deref(),
        &msg::encode(&cfg.hello()),
        cfg.source,
    )
    .await
}

/// Run one agent until `ctl.stop` (then leave cleanly, `Ok`) or a
/// permanent refusal (`Err`).  Reconnects with exponential backoff
/// (0.1 s to 5 s, jittered) otherwise.
pub async fn run(
    cfg: &AgentConfig,
    ctl: Control,
    mut report: impl FnMut(Event),
) -> Result<(), AgentError> {
    let mut stop = ctl.stop.clone();
    let mut backoff = BACKOFF_MIN;
    // A rank still held by this agent's previous connection (the service
    // has not yet seen it drop) is refused with EEXIST: retry a few times
    // before believing another agent owns it.
    let mut claimed = 0;
    let mut servers = cfg.servers.clone();
    loop {
        let opened = tokio::select! {
            r = open(cfg, servers.current(), &ctl) => r,
            _ = stopped(&mut stop) => return Ok(()),
        };
        // The next server; a standby names the leader: go there at once
        // (same rank: the rank comes from the hostname).
        if let Err(e) = &opened {
            if servers.failed(e.leader().as_ref()) == Step::Leader {
                continue;
            }
        }
        let no_leader = matches!(&opened, Err(AgentError::Refused(e)) if e.errnum == EAGAIN);
        match opened {
            Ok((session, welcome)) => {
                servers.opened();
                backoff = BACKOFF_MIN;
                claimed = 0;
                let bad = |what: String| AgentError::Protocol(format!("welcome {welcome}: {what}"));
                let w: msg::AgentAnswer = msg::decode(&welcome).map_err(|e| bad(e.to_string()))?;
                let rank = w.rank.ok_or_else(|| bad("no rank".into()))?;
                let period = cfg.heartbeat.unwrap_or_else(|| suggested_period(&w));
                report(Event::Joined {
                    rank,
                    heartbeat: period,
                });
                let (mut lines, mut tx) = session.split();
                let (ltx, mut lrx) = mpsc::channel(4);
                let reader = tokio::spawn(async move {
                    loop {
                        let r = lines.next_line().await;
                        let end = !matches!(r, Ok(Some(Ok(_))));
                        if ltx.send(r).await.is_err() || end {
                            break;
                        }
                    }
                });
                let mut ticker =
                    tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let reason = loop {
                    tokio::select! {
                        _ = ticker.tick() => {
                            if !(ctl.stalled)(rank) {
                                if let Err(e) = tx.heartbeat().await {
                                    break e.to_string();
                                }
                            }
                        }
                        m = lrx.recv() => match m {
                            Some(Ok(Some(Ok(v)))) => {
                                for reason in drained_reasons(&v, None) {
                                    report(Event::Drained { reason });
                                }
                            }
                            Some(Ok(Some(Err(e)))) => break e.message(),
                            Some(Ok(None)) | None => break "the service ended the session".to_string(),
                            Some(Err(e)) => break e.to_string(),
                        },
                        _ = stopped(&mut stop) => {
                            tx.leave().await;
                            reader.abort();
                            return Ok(());
                        }
                    }
                };
                reader.abort();
                report(Event::Lost { reason });
            }
            Err(AgentError::Refused(e)) if e.errnum == EEXIST && claimed < EEXIST_RETRIES => {
                claimed += 1;
                report(Event::Retrying {
                    error: e.message(),
                    delay: backoff,
                });
            }
            Err(e) if e.is_permanent() => return Err(e),
            Err(e) => report(Event::Retrying {
                error: e.to_string(),
                delay: backoff,
            }),
        }
        if !pause(&mut backoff, no_leader || servers.several(), &mut stop).await {
            return Ok(());
        }
    }
}

/// Raise the soft limit of open files to the hard limit (agents and the
/// simulator hold one socket per session).  Returns the new soft limit.
#[allow(unsafe_code)] // getrlimit/setrlimit: the agent's only libc calls
pub fn raise_nofile_limit() -> Option<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    Some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(uris: &str) -> Servers {
        let mut l = rpc::uri::parse_list(uris).unwrap();
        Servers::new(l.remove(0), l)
    }

    /// What `run` and the relay's upstream do after a failed open.
    fn failed(s: &mut Servers, e: &AgentError) -> bool {
        s.failed(e.leader().as_ref()) == Step::Leader
    }

    fn refused(errnum: i32, text: &str) -> AgentError {
        AgentError::Refused(RpcError::new(errnum, text.to_string()))
    }

    #[test]
    fn refusals_name_the_leader() {
        let e = refused(EAGAIN, "not the leader; the leader is unix:///c");
        assert_eq!(e.leader(), Some(Uri::Unix("/c".into())));
        let none = refused(
            EAGAIN,
            "not the leader; no leader is elected yet, try again",
        );
        assert_eq!(none.leader(), None);
        assert_eq!(AgentError::Closed.leader(), None);
    }

    #[test]
    fn servers_rotate_and_follow_the_leader_once() {
        let mut s = servers("unix:///a,unix:///b,unix:///c");
        assert!(s.several());
        assert_eq!(s.current().to_string(), "unix:///a");
        let down = AgentError::Closed;
        assert!(!failed(&mut s, &down));
        assert_eq!(s.current().to_string(), "unix:///b");
        // b is a standby naming c: straight there.
        let redirect = refused(EAGAIN, "not the leader; the leader is unix:///c");
        assert!(failed(&mut s, &redirect));
        assert_eq!(s.current().to_string(), "unix:///c");
        // c names a: not followed twice in a row, the rotation goes on.
        let back = refused(EAGAIN, "not the leader; the leader is unix:///a");
        assert!(!failed(&mut s, &back));
        assert_eq!(s.current().to_string(), "unix:///c");
        assert!(!failed(&mut s, &down));
        assert_eq!(s.current().to_string(), "unix:///a");
        s.opened();
        assert!(failed(&mut s, &redirect));
        assert_eq!(s.current().to_string(), "unix:///c");
        // One server: a redirect is still followed (to a server not listed).
        let mut one = servers("unix:///a");
        assert!(!failed(&mut one, &down));
        assert_eq!(one.current().to_string(), "unix:///a");
        assert!(failed(
            &mut one,
            &refused(EAGAIN, "not the leader; the leader is unix:///z")
        ));
        assert_eq!(one.current().to_string(), "unix:///z");
    }
}
