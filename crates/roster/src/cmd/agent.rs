//! `roster agent`: the node agent, or (`--simulate`) many virtual agents.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent::{AgentConfig, Control, Event, SimConfig, SimReport};
use clap::Parser;
use idset::IdSet;

/// Run the node agent: discover this node's cores and GPUs, say hello to
/// the resource service with the hostname and local R, then heartbeat.
/// Reconnects with backoff when the service goes away; SIGTERM/SIGINT
/// leave cleanly (the rank goes offline at once).
///
/// With --relay, also accept child agents (real agents or further relays)
/// on the --listen sockets and speak upward for them in batches: the
/// service assigns the relay the k-ary subtree below its rank
/// ([serve] relay-fanout), and children point their --uri at the relay.
/// A tls:// listener presents this node's --cert and --key and verifies
/// the children's certificates against --ca (an agent certificate speaks
/// only for its own host); plain tcp:// is allowed on loopback only.
///
/// With --simulate, run one virtual agent per host of HOSTLIST in this
/// process, each on its own connection, through the same protocol; with
/// --relays N, the first N hosts run as relays and every other host is a
/// virtual leaf of its nearest relay (no connection per leaf).
#[derive(Debug, Parser)]
struct Args {
    /// Service URI, or a comma list of the servers of a highly available
    /// service (default: $ROSTER_URI, else the embedded default's socket).
    #[arg(long, value_name = "URI")]
    uri: Option<String>,
    /// Bearer token file (required for tcp://; default $ROSTER_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// (tls://) CA certificate that signed the service's (default $ROSTER_CA).
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// (tls://) This node's certificate (default $ROSTER_CERT).
    #[arg(long, value_name = "FILE")]
    cert: Option<PathBuf>,
    /// (tls://) The key of --cert (default $ROSTER_KEY).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Enrol first with this enrolment token file ([serve.auth]
    /// enrol-token-file): make a key and a signing request for this
    /// host, have the service sign it, write HOST.key and HOST.pem to
    /// --pki, then connect with them.  With both files already in --pki
    /// the agent uses them and does not enrol again.  Needs --ca.
    #[arg(long, value_name = "TOKEN_FILE", requires = "pki", conflicts_with_all = ["simulate", "cert", "key"])]
    enrol: Option<PathBuf>,
    /// (with --enrol) Where this host's key and certificate are kept
    /// (made mode 0700 if missing).
    #[arg(long, value_name = "DIR", requires = "enrol")]
    pki: Option<PathBuf>,
    /// Report this hostname instead of the local one.
    #[arg(long, value_name = "NAME", conflicts_with = "simulate")]
    hostname: Option<String>,
    /// Claim this rank of the host (when R lists the host more than once).
    #[arg(long, value_name = "RANK", conflicts_with = "simulate")]
    rank: Option<u32>,
    /// Report these core ids instead of discovering them.
    #[arg(long, value_name = "IDS")]
    cores: Option<String>,
    /// Report these GPU ids instead of discovering them.
    #[arg(long, value_name = "IDS")]
    gpus: Option<String>,
    /// Discover from this hwloc XML file instead of /sys.
    #[arg(long, value_name = "FILE", conflicts_with = "simulate")]
    topo_xml: Option<PathBuf>,
    /// Do not send R (the service then does not verify this node).
    #[arg(long)]
    no_r: bool,
    /// Heartbeat period in seconds (default: what the service suggests).
    #[arg(long, value_name = "SECS")]
    heartbeat: Option<f64>,
    /// Simulate one agent per host of HOSTLIST.
    #[arg(long, value_name = "HOSTLIST")]
    simulate: Option<String>,
    /// (simulator) These ranks (an idset, e.g. 490-494; not host names)
    /// stop heartbeating, keeping their connections.
    #[arg(long, value_name = "RANKS", requires = "simulate")]
    stall: Option<String>,
    /// (simulator) Stall after this many seconds.
    #[arg(long, value_name = "SECS", requires = "stall", default_value_t = 0.0)]
    stall_after: f64,
    /// (simulator) Hellos in flight at once.
    #[arg(long, value_name = "N", requires = "simulate", default_value_t = 256)]
    concurrency: usize,
    /// Also accept child agents on --listen and relay for them.
    #[arg(long, requires = "listen", conflicts_with = "simulate")]
    relay: bool,
    /// (relay) Where children connect: unix://PATH, tls://HOST:PORT
    /// (this node's --cert/--key; children's certificates checked against
    /// --ca) or tcp://HOST:PORT on loopback (children present the same
    /// token); repeatable.
    #[arg(long, value_name = "URI", requires = "relay")]
    listen: Vec<String>,
    /// (relay) Refuse children whose certificates this revocation list
    /// (PEM CRL, `roster serve ca revoke`) names, on a tls:// --listen;
    /// re-read on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "relay")]
    crl: Option<PathBuf>,
    /// (simulator) Run the first N hosts as relays, the others as
    /// virtual leaves below them.
    #[arg(long, value_name = "N", requires = "simulate", default_value_t = 0)]
    relays: usize,
    /// Log every session change (RUST_LOG overrides the level).
    #[arg(short, long)]
    verbose: bool,
    /// Log lines as text or as JSON objects.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t)]
    log_format: crate::logging::LogFormat,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("roster agent: {msg}");
    ExitCode::from(1)
}

fn ids(what: &str, s: &str) -> Result<IdSet, String> {
    IdSet::parse(s).map_err(|e| format!("--{what} {s}: {e}"))
}

/// `--stall RANKS`: an idset of ranks; a hostlist is refused with a
/// message saying that ranks are wanted and how to find them.
fn stall_ranks(s: &str) -> Result<IdSet, String> {
    IdSet::parse(s).map_err(|e| {
        match hostlist::Hostlist::decode(s) {
            Ok(h) if !h.is_empty() => format!(
                "--stall {s}: expected ranks (an idset such as 490-494), not host names; \
                 the ranks of hosts are shown by `roster resource status -no '{{nodelist}} {{ranks}}'`"
            ),
            _ => format!("--stall {s}: {e}"),
        }
    })
}

fn seconds(what: &str, s: f64) -> Result<Duration, String> {
    if s.is_finite() && s > 0.0 && s < 1e6 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(format!(
            "--{what} {s}: must be a positive number of seconds"
        ))
    }
}

/// The TLS settings of a relay's `tls://` listener: this node's
/// certificate and key, children's certificates verified against the CA
/// (their role, normally `agent` for their own host, from the OU).
fn relay_tls(
    uri: &rpc::uri::Uri,
    files: &client::TlsFiles,
    crl: Option<&std::path::Path>,
) -> Result<(agent::relay::TlsListen, std::sync::Arc<tls::ClientVerifier>), String> {
    let (Some(cert), Some(key), Some(ca)) = (&files.cert, &files.key, &files.ca) else {
        return Err(format!(
            "--listen {uri}: a relay's TLS listener presents this node's certificate \
             (--cert and --key, or $ROSTER_CERT and $ROSTER_KEY) and verifies its \
             children's against the CA (--ca or $ROSTER_CA)"
        ));
    };
    let verifier = tls::ClientVerifier::new(ca, crl).map_err(|e| format!("--listen {uri}: {e}"))?;
    let config = tls::server_config_with(cert, key, Some(std::sync::Arc::clone(&verifier)))
        .map_err(|e| format!("--listen {uri}: {e}"))?;
    Ok((
        agent::relay::TlsListen {
            config,
            client_auth: true,
            roles: tls::RoleMap::default(),
        },
        verifier,
    ))
}

/// SIGHUP: the relay reads its revocation list again (the previous one
/// stays in force if the file cannot be read).
async fn reload_crl_on_sighup(v: std::sync::Arc<tls::ClientVerifier>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        let path = v.crl().map(|p| p.display().to_string()).unwrap_or_default();
        match v.reload() {
            Ok(n) => eprintln!("roster agent: SIGHUP: re-read {path} ({n} revocation list(s))"),
            Err(e) => {
                eprintln!("roster agent: SIGHUP: {e}: the previous revocation list stays in force")
            }
        }
    }
}

/// The command line, for `roster completions` and `roster manpage`.
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    let args: Args = match super::parse_as("roster agent", args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(args) {
        Ok(code) => code,
        Err(msg) => fail(msg),
    }
}

/// `--enrol TOKEN_FILE --pki DIR`: this host's certificate and key in
/// DIR, obtained from the service (`resource.agent-enrol`) unless both
/// are there already.
fn enrol(
    args: &Args,
    token_file: &std::path::Path,
    pki: &std::path::Path,
) -> Result<(PathBuf, PathBuf), String> {
    let host = args.hostname.clone().unwrap_or_else(agent::local_hostname);
    if host.is_empty() || host.contains('/') || host.starts_with('.') {
        return Err(format!("--enrol: '{host}' cannot name a certificate file"));
    }
    let cert = pki.join(format!("{host}.pem"));
    let key = pki.join(format!("{host}.key"));
    if cert.is_file() && key.is_file() {
        tracing::info!(
            "enrolled already: using {} and {}",
            cert.display(),
            key.display()
        );
        return Ok((cert, key));
    }
    if args.ca.is_none() && std::env::var_os("ROSTER_CA").is_none() {
        return Err(
            "--enrol needs --ca (or $ROSTER_CA): the CA that signed the service's certificate"
                .into(),
        );
    }
    let (key_pem, csr) = tls::enrol::request(&host).map_err(|e| format!("--enrol: {e}"))?;
    let files = client::TlsFiles {
        ca: args.ca.clone(),
        cert: None,
        key: None,
    };
    let c = client::blocking::Client::from_env_tls(args.uri.as_deref(), Some(token_file), files)
        .map_err(|e| format!("--enrol: {e}"))?;
    let resp = c
        .call::<rpc::catalog::AgentEnrol>(&rpc::msg::AgentEnrolRequest {
            hostname: host.clone(),
            csr,
        })
        .map_err(|e| format!("--enrol: {e}"))?;
    let save = |path: &std::path::Path, pem: &str, mode| {
        tls::ca::write_file(path, pem.as_bytes(), mode, false).map_err(|e| format!("--enrol: {e}"))
    };
    tls::ca::private_dir(pki).map_err(|e| format!("--enrol: {e}"))?;
    save(&key, &key_pem, 0o600)?;
    save(&cert, &resp.cert, 0o644)?;
    tracing::info!(
        "enrolled {host}: wrote {} and {}",
        key.display(),
        cert.display()
    );
    Ok((cert, key))
}

fn run(mut args: Args) -> Result<ExitCode, String> {
    crate::logging::init(args.verbose, args.log_format);
    if let (Some(token_file), Some(pki)) = (args.enrol.clone(), args.pki.clone()) {
        let (cert, key) = enrol(&args, &token_file, &pki)?;
        args.cert = Some(cert);
        args.key = Some(key);
    }
    let tls_files = client::TlsFiles {
        ca: args.ca.clone(),
        cert: args.cert.clone(),
        key: args.key.clone(),
    };
    let listen_tls_files = tls_files.clone().or_env();
    let client =
        client::Client::from_env_tls(args.uri.as_deref(), args.token_file.as_deref(), tls_files)
            .map_err(|e| e.to_string())?;
    let (uri, servers) = (client.uri(), client.servers().clone());
    // One TLS configuration, shared by every (virtual) agent.
    let tls = client.tls_config().cloned();
    let token_file = args.token_file.clone().or_else(|| {
        std::env::var_os(client::TOKEN_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let token = match &token_file {
        Some(p) => Some(client::read_token_file(p).map_err(|e| e.to_string())?),
        None => None,
    };
    if matches!(uri, rpc::uri::Uri::Tcp { .. }) && token.is_none() {
        return Err(format!("{uri}: a TCP service requires --token-file"));
    }
    let heartbeat = args
        .heartbeat
        .map(|s| seconds("heartbeat", s))
        .transpose()?;
    agent::raise_nofile_limit();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let runtime = if args.simulate.is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let _ = stop_tx.send(true);
    });
    if let Some(hl) = &args.simulate {
        let hosts = hostlist::Hostlist::decode(hl)
            .map_err(|e| format!("--simulate {hl}: {e}"))?
            .iter()
            .collect::<Vec<_>>();
        let cores = ids("cores", args.cores.as_deref().unwrap_or("0"))?;
        let gpus = match &args.gpus {
            Some(g) => ids("gpus", g)?,
            None => IdSet::new(),
        };
        let stall = match &args.stall {
            Some(s) => stall_ranks(s)?,
            None => IdSet::new(),
        };
        let cfg = SimConfig {
            servers,
            tls,
            token,
            hosts,
            cores,
            gpus,
            heartbeat,
            stall,
            stall_after: Duration::from_secs_f64(args.stall_after.max(0.0)),
            concurrency: args.concurrency,
            relays: args.relays,
        };
        let n = cfg.hosts.len();
        let report = Arc::new(SimReport::default());
        let rep = Arc::clone(&report);
        if args.verbose {
            // Progress every 2 s until all have joined.
            let rep = Arc::clone(&report);
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(2));
                tick.tick().await;
                loop {
                    tick.tick().await;
                    eprintln!("roster agent: simulator: {}", rep.progress(n));
                    if rep.first_joins.load(std::sync::atomic::Ordering::Relaxed) == n {
                        break;
                    }
                }
            });
        }
        runtime
            .block_on(agent::simulate(cfg, stop_rx, rep, move |t| {
                tracing::info!(
                    agents = n,
                    seconds = t.as_secs_f64(),
                    "simulator: all {n} agents joined in {:.3} s",
                    t.as_secs_f64()
                );
            }))
            .map_err(|e| e.to_string())?;
        let failed = report.failed.load(std::sync::atomic::Ordering::Relaxed);
        if let Ok(errs) = report.errors.lock() {
            for e in errs.iter() {
                tracing::error!("{e}");
            }
        }
        return Ok(if failed > 0 && failed == n {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    // A real agent: discover this node.
    let topo = match &args.topo_xml {
        Some(p) => {
            let xml = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            topo::from_hwloc_xml(&xml).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None if args.cores.is_some() => topo::Topology::default(),
        None => topo::discover_local()
            .map_err(|e| format!("failed to discover local resources: {e}"))?,
    };
    let hostname = args
        .hostname
        .clone()
        .or(topo.hostname.clone())
        .unwrap_or_else(agent::local_hostname);
    let cores = match &args.cores {
        Some(c) => ids("cores", c)?,
        None => topo.cores.clone(),
    };
    let gpus = match &args.gpus {
        Some(g) => ids("gpus", g)?,
        None => topo.gpus.clone(),
    };
    let r = if args.no_r {
        None
    } else {
        Some(agent::local_r(&hostname, &cores, &gpus).map_err(|e| e.to_string())?)
    };
    let cfg = AgentConfig {
        servers,
        tls,
        token,
        hostname,
        r,
        rank: args.rank,
        heartbeat,
        source: None,
    };
    let verbose = args.verbose;
    let host = cfg.hostname.clone();
    if args.relay {
        let listen = args
            .listen
            .iter()
            .map(|u| rpc::uri::Uri::parse(u).map_err(|e| format!("--listen {u}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let tls_listen = match listen
            .iter()
            .find(|u| matches!(u, rpc::uri::Uri::Tls { .. }))
        {
            Some(u) => {
                let (t, verifier) = relay_tls(u, &listen_tls_files, args.crl.as_deref())?;
                if args.crl.is_some() {
                    runtime.spawn(reload_crl_on_sighup(verifier));
                }
                Some(t)
            }
            None if args.crl.is_some() => {
                return Err("--crl applies to a tls:// --listen, and there is none".into())
            }
            None => None,
        };
        let rcfg = agent::relay::RelayConfig {
            listen_opts: agent::relay::ListenOptions {
                token: cfg.token.clone(),
                tls: tls_listen,
                ..Default::default()
            },
            agent: cfg,
            listen,
            leaves: None,
        };
        let mut failing = false;
        let result = runtime.block_on(agent::relay::run_relay(rcfg, stop_rx, |ev| {
            use agent::relay::RelayEvent;
            match ev {
                RelayEvent::Joined(w) => {
                    failing = false;
                    eprintln!(
                        "roster agent: {host} joined as rank {} (relay for up to {} ranks below it)",
                        w.rank,
                        w.subtree.len()
                    )
                }
                RelayEvent::Lost { reason } => {
                    eprintln!("roster agent: session lost: {reason}; reconnecting")
                }
                RelayEvent::Retrying { error, delay } => {
                    if verbose || !failing {
                        failing = true;
                        eprintln!(
                            "roster agent: {error}; retrying in about {:.1} s",
                            delay.as_secs_f64()
                        )
                    }
                }
                RelayEvent::Drained { reason } => {
                    eprintln!("roster agent: {host} is drained: {reason}")
                }
                RelayEvent::Leaves { .. } => {}
            }
        }));
        runtime.shutdown_timeout(Duration::from_millis(100));
        return result
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string());
    }
    // Report the first failure of a series even when not verbose.
    let mut failing = false;
    let result = runtime.block_on(agent::run(&cfg, Control::new(stop_rx), |ev| match ev {
        Event::Joined { rank, heartbeat } => {
            failing = false;
            tracing::info!(
                hostname = %host,
                rank,
                heartbeat = heartbeat.as_secs_f64(),
                "{host} joined as rank {rank} (heartbeat every {:.3} s)",
                heartbeat.as_secs_f64()
            )
        }
        Event::Lost { reason } => {
            tracing::warn!(hostname = %host, %reason, "session lost: {reason}; reconnecting")
        }
        Event::Drained { reason } => eprintln!("roster agent: {host} is drained: {reason}"),
        Event::Retrying { error, delay } => {
            if verbose || !failing {
                failing = true;
                tracing::warn!(
                    hostname = %host,
                    %error,
                    "{error}; retrying in about {:.1} s",
                    delay.as_secs_f64()
                )
            }
        }
    }));
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stall_wants_ranks_and_says_so() {
        assert_eq!(super::stall_ranks("490-494").unwrap().encode(), "490-494");
        let e = super::stall_ranks("node[490-494]").unwrap_err();
        assert!(
            e.starts_with(
                "--stall node[490-494]: expected ranks (an idset such as 490-494), not host names"
            ),
            "{e}"
        );
        // neither: the idset's own error
        let e = super::stall_ranks("[1-").unwrap_err();
        assert!(e.starts_with("--stall [1-: ") && !e.contains("host"), "{e}");
    }
}
