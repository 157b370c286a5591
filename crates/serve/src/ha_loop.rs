//! `[serve] backend = "etcd"`: high availability.
//!
//! Every server runs the same loop: **standby** until it wins the election,
//! then **leader** until it stops or loses its lease, then standby again.
//!
//! * The standby reads the whole state once, then tails it with an etcd
//!   watch from the next revision ([`ha::Etcd::tail`]) and applies each
//!   group commit to a live follower core ([`Service::follower`],
//!   [`Service::follow`]) as it arrives.  It answers the read-only
//!   requests (`resource.status`, `resource.sched-status`,
//!   `resource.get`) from that core, and every other request with EAGAIN
//!   "not the leader; the leader is URI".  The watch is asked for its
//!   progress every [`POLL`]: a read reflects every event acknowledged
//!   before the last answered progress request was sent; when none was
//!   answered for the lease TTL, reads are refused too (EAGAIN).  A watch
//!   that ends (a member died, a compaction) is replaced after one read
//!   of what changed since the last revision seen.
//! * When the watch shows the leader key deleted (its lease expired or
//!   was revoked) the standby campaigns at once; the winner reads the keys
//!   written since its last revision (normally none), promotes its
//!   follower core ([`Service::promote`]: `restart`, as flux-core does
//!   after a restart, so agents say hello again) and serves: no replay.
//!   Each group commit is one guarded etcd transaction
//!   ([`ha::Etcd::commit`]); a checkpoint is added to the transaction
//!   every [`CHECKPOINT_EVERY`] events (the start of a standby, or of a
//!   takeover without a follower core, replays at most that many).
//! * The leader checks its lease (monotonic clock) before every batch and
//!   steps down the moment it is not certainly valid: open streams end
//!   with EAGAIN, the batch waiting is answered by the standby it becomes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ha::{Etcd, HaError, Leadership, Op, State, Tail, TailMsg};
use roster_core::{Input, Output, Service};
use rpc::errno::EAGAIN;
use rpc::uri::Uri;
use rpc::RpcError;
use transport::Incoming;

use crate::metrics::Metrics;
use crate::service_loop::{Backing, Shell};
use crate::{build_init, now, Control, Plan, ServeError};

/// How often a standby asks its watch for progress (its staleness bound),
/// and retries a failed read or campaign.
pub const POLL: Duration = Duration::from_millis(100);
/// The leader adds a checkpoint to a commit after this many events.
pub const CHECKPOINT_EVERY: usize = 1000;

/// The etcd side of a leader's [`Shell`].
#[derive(Debug)]
pub(crate) struct EtcdBacking {
    etcd: Arc<Etcd>,
    lead: Leadership,
    state: State,
    since_checkpoint: usize,
}

impl EtcdBacking {
    /// The lease: valid, uncertain (suspend) or lost (step down).
    pub(crate) fn lease(&self) -> ha::LeaseStatus {
        self.lead.status()
    }

    /// One group commit: the batch's outputs in one guarded transaction.
    pub(crate) fn persist(&mut self, out: &[Output], core: &Service) -> Result<(), ServeError> {
        let mut ops = Vec::new();
        let mut pending = Vec::new();
        let mut checkpointed = false;
        for o in out {
            match o {
                Output::Persist(ev) => pending.push(ev.clone()),
                Output::WriteR(v) => {
                    if !pending.is_empty() {
                        ops.push(Op::Events(std::mem::take(&mut pending)));
                    }
                    ops.push(Op::R(v.to_string()));
                }
                Output::WriteCheckpoint(v) => {
                    if !pending.is_empty() {
                        ops.push(Op::Events(std::mem::take(&mut pending)));
                    }
                    ops.push(Op::Checkpoint(v.clone()));
                    checkpointed = true;
                    self.since_checkpoint = 0;
                }
                _ => {}
            }
        }
        self.since_checkpoint += pending.len();
        if !pending.is_empty() {
            ops.push(Op::Events(pending));
        }
        if !checkpointed && self.since_checkpoint >= CHECKPOINT_EVERY {
            // The core's drain state after this batch: exactly what the
            // log holds once the transaction is in.
            ops.push(Op::Checkpoint(core.checkpoint(now())));
            self.since_checkpoint = 0;
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.etcd
            .commit(&self.lead, &mut self.state, ops)
            .map_err(|e| match e {
                HaError::Deposed(why) => ServeError::Deposed(why),
                e => ServeError::Ha(e),
            })
    }
}

fn settings_of(cfg: &config::EtcdConfig) -> ha::Settings {
    let ttl = Duration::from_secs_f64(cfg.lease_ttl.ceil());
    ha::Settings {
        endpoints: cfg.endpoints.clone(),
        prefix: cfg.prefix.clone(),
        ca: cfg.ca.clone(),
        identity: cfg.cert.clone().zip(cfg.key.clone()),
        lease_ttl: ttl,
        timeout: (ttl / 2).min(Duration::from_secs(2)),
    }
}

/// This campaign's unique id.
fn campaign_id() -> String {
    let host = topo::local_hostname();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{host}:{}:{nanos:x}", std::process::id())
}

/// Run the daemon on etcd until SIGTERM/SIGINT.
pub(crate) fn run(
    plan: &Plan,
    cfg: &config::EtcdConfig,
    control: Arc<Control>,
    ready: impl FnOnce(&[Uri]),
) -> Result<(), ServeError> {
    let etcd = Arc::new(Etcd::connect(settings_of(cfg))?);
    // /metrics, /healthz, /readyz and the web view, as on the local
    // backend: the gauges show the leader's core, or a standby's
    // follower core; /readyz is ready on the leader only.
    let metrics = Arc::new(Metrics::new());
    metrics.set_limits(&plan.limits);
    let (net, rx) = crate::Net::start(plan, &control, &metrics, None)?;
    let addresses = net.addresses.clone();
    let advertise = cfg.advertise.clone().unwrap_or_else(|| {
        addresses
            .iter()
            .map(|u| u.to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    ready(&addresses);
    tracing::info!(
        "etcd backend: {} prefix {}; advertising {advertise}",
        cfg.endpoints.join(","),
        cfg.prefix
    );
    let result = serve(plan, &etcd, &advertise, &rx, &control, &metrics);
    metrics.set_ready(false);
    net.stop(&control);
    result
}

/// Standby, leader, standby... until stopped.
fn serve(
    plan: &Plan,
    etcd: &Arc<Etcd>,
    advertise: &str,
    rx: &Receiver<Incoming>,
    control: &Arc<Control>,
    metrics: &Arc<Metrics>,
) -> Result<(), ServeError> {
    let mut state = State::default();
    let mut follower = None;
    let mut carry = Vec::new();
    loop {
        let id = campaign_id();
        let Some(lead) = standby(
            plan,
            etcd,
            &mut state,
            &mut follower,
            rx,
            control,
            &id,
            advertise,
            carry,
            metrics,
        )?
        else {
            tracing::info!("stopped (standby)");
            return Ok(());
        };
        tracing::info!(
            "elected leader (lease {:x}, revision {})",
            lead.lease_id(),
            lead.info.create_revision
        );
        let led = leader(
            plan,
            etcd,
            lead,
            &mut state,
            follower.take(),
            rx,
            control,
            metrics,
        );
        metrics.set_ready(false);
        match led {
            Ok(()) => return Ok(()),
            Err(Deposed { why, unhandled }) => {
                tracing::error!("stepping down, now a standby: {why}");
                carry = unhandled;
                // Whatever was in memory may be ahead of etcd (a batch
                // refused): read it all again.
                state = State::default();
            }
            Err(Fatal(e)) => return Err(e),
        }
    }
}

/// A standby's live core and how far it has followed the log.
#[derive(Debug)]
struct Follower {
    core: Service,
    /// The absolute index of the next event to apply.
    next: u64,
    /// The R text it was built with (a new R rebuilds it).
    r: Option<String>,
}

impl Follower {
    /// Build from everything in `state` (checkpoint + the events after
    /// it): at a standby's start, or when R changed.
    fn build(plan: &Plan, state: &State) -> Result<Follower, ServeError> {
        let init = build_init(
            plan,
            state.r.as_deref(),
            state.events.clone(),
            state.checkpoint.clone(),
            state.replay_from(),
            crate::clock(),
        )?;
        Ok(Follower {
            core: Service::follower(init)?,
            next: state.next_seq,
            r: state.r.clone(),
        })
    }

    /// Apply the events of `state` it has not applied yet; `None` when it
    /// cannot follow `state` (another R, a truncation past it, a state
    /// read again from scratch): rebuild it.
    fn catch_up(&mut self, state: &State) -> Option<Result<usize, ServeError>> {
        let first = state.first_seq();
        if self.r != state.r || self.next < first || self.next > state.next_seq {
            return None;
        }
        let from = usize::try_from(self.next - first).ok()?;
        let evs = state.events.get(from..)?;
        Some(match self.core.follow(evs) {
            Ok(()) => {
                self.next = state.next_seq;
                Ok(evs.len())
            }
            Err(e) => Err(e.into()),
        })
    }
}

/// Bring the standby's core up to `state`, rebuilding it if it cannot
/// follow (a failure leaves none: reads are refused, a takeover builds
/// its core from the log).
fn sync_follower(plan: &Plan, state: &State, follower: &mut Option<Follower>) {
    if let Some(f) = follower.as_mut() {
        match f.catch_up(state) {
            Some(Ok(_)) => return,
            Some(Err(e)) => tracing::warn!("standby: cannot apply the new events: {e}"),
            None => {}
        }
    }
    *follower = match Follower::build(plan, state) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!("standby: cannot build its core from etcd: {e}");
            None
        }
    };
}

enum LeaderEnd {
    Deposed {
        why: String,
        unhandled: Vec<Incoming>,
    },
    Fatal(ServeError),
}
use LeaderEnd::{Deposed, Fatal};

impl From<ServeError> for LeaderEnd {
    fn from(e: ServeError) -> Self {
        match e {
            ServeError::Deposed(why) => Deposed {
                why,
                unhandled: Vec::new(),
            },
            ServeError::Ha(HaError::Deposed(why)) => Deposed {
                why,
                unhandled: Vec::new(),
            },
            e => Fatal(e),
        }
    }
}

/// Lead until stopped (Ok) or deposed.
#[allow(clippy::too_many_arguments)]
fn leader(
    plan: &Plan,
    etcd: &Arc<Etcd>,
    lead: Leadership,
    state: &mut State,
    follower: Option<Follower>,
    rx: &Receiver<Incoming>,
    control: &Control,
    metrics: &Arc<Metrics>,
) -> Result<(), LeaderEnd> {
    let started = Instant::now();
    // Catch up on what was committed since the last poll: nobody can
    // append any more but us.  An etcd error here gives the leadership
    // up (another server, or we, will try again).
    let start = crate::clock();
    let now = start.wall;
    let history = plan
        .config
        .as_ref()
        .and_then(|c| c.resource.history.seconds());
    let prep = (|| -> Result<(), HaError> {
        etcd.sync_truncation(state)?;
        etcd.poll(state)?;
        if let Some(secs) = history {
            let cp_ts = store::checkpoint_timestamp(state.checkpoint.as_ref());
            if let Some(cutoff) = store::history_cutoff(now, Some(secs), cp_ts) {
                let n = etcd.truncate(&lead, state, |e| e.timestamp < cutoff)?;
                if n > 0 {
                    tracing::info!("etcd log: truncated {n} events older than {cutoff:.6}");
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = prep {
        etcd.resign(lead);
        return Err(Deposed {
            why: format!("takeover failed: {e}"),
            unhandled: Vec::new(),
        });
    }
    let replay_from = state.replay_from();
    let since_checkpoint = state.events.len() - replay_from.unwrap_or(0);
    let mut out = Vec::new();
    // The standby's live core, given what the catch-up read brought
    // (normally nothing): no replay.  Without one, the log is replayed.
    let mut follower = follower;
    let caught_up = follower.as_mut().and_then(|f| f.catch_up(state));
    let (core, applied) = match (follower, caught_up) {
        (Some(mut f), Some(Ok(n))) => {
            f.core.promote(start, &mut out);
            (f.core, n)
        }
        (_, caught_up) => {
            if let Some(Err(e)) = caught_up {
                tracing::warn!("takeover: the standby's core cannot apply the last events: {e}");
            }
            let init = build_init(
                plan,
                state.r.as_deref(),
                state.events.clone(),
                state.checkpoint.clone(),
                replay_from,
                start,
            )?;
            let core = Service::new(init, &mut out).map_err(ServeError::Start)?;
            (core, since_checkpoint)
        }
    };
    let backing = EtcdBacking {
        etcd: Arc::clone(etcd),
        lead,
        state: std::mem::take(state),
        since_checkpoint,
    };
    let mut shell = Shell::with_backing(core, Backing::Etcd(backing), plan.config_path.clone());
    shell.set_reload_dir(plan.reload_dir.clone());
    shell.set_enrol_ca(plan.enrol_ca.clone());
    shell.set_metrics(Arc::clone(metrics));
    shell.persist(&out)?;
    shell.deliver(out);
    metrics.refresh(shell.core(), Instant::now(), true);
    metrics.set_ready(true);
    tracing::info!(
        takeover_applied = applied,
        "leading: {} events in the journal, {applied} applied at takeover, core ready in {} ms",
        shell_events(&shell),
        started.elapsed().as_millis()
    );
    // systemd's watchdog (if any) is pinged by the leader's loop.
    let mut notifier = crate::notify::Notifier::from_env();
    match shell.run(rx, control, &mut notifier) {
        Ok(()) => {
            if let Backing::Etcd(b) = shell.into_backing() {
                etcd.resign(b.lead);
                tracing::info!("resigned the leadership");
            }
            Ok(())
        }
        Err(e) => {
            let unhandled = std::mem::take(&mut shell.unhandled);
            match LeaderEnd::from(e) {
                Deposed { why, .. } => Err(Deposed { why, unhandled }),
                f => f.into_err(),
            }
        }
    }
}

impl LeaderEnd {
    fn into_err(self) -> Result<(), LeaderEnd> {
        Err(self)
    }
}

fn shell_events(shell: &Shell) -> usize {
    shell.core().journal().len()
}

/// Topics a standby answers itself (the catalogue's `standby`).
fn read_only(topic: &str) -> bool {
    rpc::catalog::lookup(topic).is_some_and(|t| t.standby)
}

/// Serve as a standby until elected (`Some`) or stopped (`None`).
#[allow(clippy::too_many_arguments)]
fn standby(
    plan: &Plan,
    etcd: &Etcd,
    state: &mut State,
    follower: &mut Option<Follower>,
    rx: &Receiver<Incoming>,
    control: &Arc<Control>,
    id: &str,
    advertise: &str,
    carry: Vec<Incoming>,
    metrics: &Metrics,
) -> Result<Option<Leadership>, ServeError> {
    let ttl = etcd.settings().lease_ttl;
    // When the state was last known current (the send time of a read or
    // of an answered progress request).
    let mut confirmed: Option<Instant> = None;
    let mut tail: Option<Tail> = None;
    let mut last_read: Option<Instant> = None;
    let mut last_campaign: Option<Instant> = None;
    let mut last_warn: Option<Instant> = None;
    let mut pending: std::collections::VecDeque<Incoming> = carry.into();
    // The watch wakes the loop through its input channel, once per batch
    // of reports.
    let woken = Arc::new(AtomicBool::new(false));
    loop {
        if control.stop_requested() {
            return Ok(None);
        }
        // (Re)start tailing: one read of what changed since the last
        // revision seen, then a watch from the next one.
        if tail.is_none() && last_read.is_none_or(|t| t.elapsed() >= POLL) {
            let t = Instant::now();
            last_read = Some(t);
            match etcd.poll(state) {
                Ok(_) => {
                    confirmed = Some(t);
                    sync_follower(plan, state, follower);
                    refresh(metrics, follower);
                    let (w, c) = (Arc::clone(&woken), Arc::clone(control));
                    let wake = Box::new(move || {
                        if !w.swap(true, Ordering::SeqCst) {
                            c.wake();
                        }
                    });
                    tail = Some(etcd.tail(state.revision + 1, POLL, wake));
                }
                Err(e @ HaError::Corrupt { .. }) => {
                    // E.g. the new leader truncated past what we had:
                    // read everything again.
                    tracing::warn!("{e}: reloading the state from etcd");
                    *state = State::default();
                    *follower = None;
                }
                Err(e) => warn_limited(&mut last_warn, &e),
            }
        }
        // What the watch reported.
        woken.store(false, Ordering::SeqCst);
        let mut changed = false;
        while let Some(m) = tail.as_mut().and_then(Tail::try_next) {
            match m {
                TailMsg::Changes { revision, changes } => {
                    match etcd.apply(state, revision, &changes) {
                        Ok(_) => changed = true,
                        Err(e) => {
                            tracing::warn!("{e}: reloading the state from etcd");
                            *state = State::default();
                            *follower = None;
                            tail = None;
                        }
                    }
                }
                TailMsg::Progress { asked, .. } => confirmed = Some(asked),
                TailMsg::Ended(why) => {
                    tracing::warn!("standby: {why}; reading and watching again");
                    tail = None;
                }
            }
        }
        if changed {
            sync_follower(plan, state, follower);
            refresh(metrics, follower);
        }
        // No leader: campaign (at once when the watch shows the leader
        // key deleted, then every POLL).
        if tail.is_some()
            && state.leader.is_none()
            && last_campaign.is_none_or(|t| t.elapsed() >= POLL)
        {
            last_campaign = Some(Instant::now());
            match etcd.campaign(id, advertise) {
                Ok(Some(lead)) => {
                    // Requests already taken are answered here; the
                    // leader takes the next ones.
                    for m in pending.drain(..) {
                        answer(state, None, m, follower);
                    }
                    return Ok(Some(lead));
                }
                Ok(None) => {}
                Err(e) => warn_limited(&mut last_warn, &e),
            }
        }
        let msg = match pending.pop_front() {
            Some(m) => m,
            None => match rx.recv_timeout(POLL) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            },
        };
        let fresh = confirmed.filter(|t| t.elapsed() < ttl);
        answer(state, fresh, msg, follower);
    }
}

/// The node gauges from a standby's follower core.
fn refresh(metrics: &Metrics, follower: &Option<Follower>) {
    if let Some(f) = follower {
        metrics.refresh(&f.core, Instant::now(), true);
    }
}

fn warn_limited(last: &mut Option<Instant>, e: &HaError) {
    if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
        tracing::warn!("standby: {e}");
        *last = Some(Instant::now());
    }
}

/// The error a standby gives for requests it does not serve.
fn redirect(state: &State) -> RpcError {
    match &state.leader {
        Some(l) => RpcError::new(EAGAIN, format!("not the leader; the leader is {}", l.uri)),
        None => RpcError::new(
            EAGAIN,
            "not the leader; no leader is elected yet, try again",
        ),
    }
}

/// Answer one message as a standby.  `fresh`: when the state was last
/// confirmed current (None: too long ago, reads are refused).
fn answer(state: &State, fresh: Option<Instant>, msg: Incoming, follower: &mut Option<Follower>) {
    let Incoming::Request { req, replies, slot } = msg else {
        return;
    };
    drop(slot);
    if !read_only(&req.topic) {
        let _ = replies.send(Err(redirect(state)));
        return;
    }
    if fresh.is_none() {
        let _ = replies.send(Err(RpcError::new(
            EAGAIN,
            "standby has lost contact with etcd; ask the leader",
        )));
        return;
    }
    let Some(f) = follower.as_mut() else {
        let _ = replies.send(Err(RpcError::new(
            EAGAIN,
            "standby cannot build its view of the state; ask the leader",
        )));
        return;
    };
    let mut out = Vec::new();
    f.core.handle(crate::clock(), Input::Request(req), &mut out);
    for o in out {
        if let Output::Reply { reply, .. } = o {
            let _ = replies.send(reply);
        }
    }
}
