//! `svcbench`: the RPC side of Roster's service benchmarks (driven by
//! `bench/service.sh`, which also runs hyperfine for whole-process CLI
//! timings).
//!
//! Every measuring sub-command prints one markdown table row:
//!
//! `| label | samples | p50 ms | p99 ms | mean ms | note |`
//!
//! Sub-commands (options are `--key value`):
//!
//! * `rpc --uri U --topic T [--payload JSON] [--n 300] [--warmup 20] [--label L] [--slow MS] [--pace MS]`:
//!   sequential round trips, each on a fresh connection (as every client
//!   call is).  Error replies count as round trips (an unknown topic is the
//!   no-op baseline).  `--slow MS` also prints when each call over MS
//!   ms started (stderr).  `--pace MS` starts a call every MS ms (a
//!   client that polls) instead of back to back.
//! * `warm --uri U [--topic resource.status] [--n 1000] [--warmup 50]
//!   [--ca FILE] [--token-file FILE] [--label L]`: sequential round trips
//!   on one connection kept open (HTTP keep-alive; for `tls://` no
//!   handshake per call).
//! * `concurrent --uri U --topic T [--clients 100] [--rounds 10] [--keepalive 1]`:
//!   rounds of `clients` callers released together; latency of every
//!   call.  Each call on a fresh connection, or with `--keepalive 1` each
//!   caller on one connection kept for all its rounds.
//! * `drains --uri U --ranks FILE [--clients 1]`: drain each rank of FILE
//!   alone (`reason-{i % 50}`), durable; one client waits for each reply,
//!   several clients keep that many requests in flight.  Note: overall
//!   rate and the rate of the first 1,500.
//! * `drain-big --uri U --ranks FILE`: one drain RPC of the whole set.
//! * `journal --uri U [--runs 10]`: time until the backlog's `{events:[]}`
//!   sentinel arrives.
//! * `startup --roster BIN --config FILE --eventlog FILE --workdir DIR [--runs 10]`:
//!   time from spawning `roster serve` on a fresh copy of the eventlog until
//!   its socket answers `resource.status`.
//! * `gen-eventlog --out FILE [--events 100000] [--nodes 16384]`: a
//!   `resource-define` then alternating single-rank drain/undrain events.
//! * `alternate RUNS LABEL CMD [LABEL CMD...]`: run each command (split
//!   on blanks, no shell, output discarded) once per round, in turn, for
//!   RUNS rounds (plus one round not counted) and print
//!   `LABEL<TAB>median ms` per command: whole-process timings whose
//!   ratios share the machine's load (bench/floor.sh).  A command that
//!   fails is not run again: `LABEL<TAB>failed (its exit status)`.
//! * `fsync --dir DIR [--n 2000] [--warmup 20] [--room 1]`: the floor
//!   under durable drains, no service: append one drain-event-sized line
//!   to a fresh file in DIR and `fdatasync` it, N times; the note gives
//!   the rate in the form `drains` prints (`N/s overall`).  With
//!   `--room 1` the file is first filled with zeros (synced) and each
//!   line overwrites them in place, as the service's preallocated
//!   eventlog does: the floor of that I/O.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Client, ClientError};
use roster_svcbench::{ms, pct};
use rpc::catalog::Call;
use rpc::uri::Uri;
use serde_json::{json, Map, Value};

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("usage: {0}")]
    Usage(String),
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// `--key value` options.
struct Opts {
    map: HashMap<String, String>,
}

impl Opts {
    fn parse(words: &[String]) -> Result<Opts> {
        let mut map = HashMap::new();
        let mut it = words.iter();
        while let Some(w) = it.next() {
            let Some(key) = w.strip_prefix("--") else {
                return Err(BenchError::Usage(format!("unexpected argument {w:?}")));
            };
            let Some(v) = it.next() else {
                return Err(BenchError::Usage(format!("--{key} needs a value")));
            };
            map.insert(key.to_string(), v.clone());
        }
        Ok(Opts { map })
    }
    fn str(&self, key: &str) -> Result<&str> {
        self.map
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| BenchError::Usage(format!("--{key} is required")))
    }
    fn str_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.map.get(key).map(String::as_str).unwrap_or(default)
    }
    fn num(&self, key: &str, default: usize) -> Result<usize> {
        match self.map.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| BenchError::Usage(format!("--{key}: not a number: {v}"))),
        }
    }
    fn uri(&self) -> Result<Uri> {
        let s = self.str("uri")?;
        Uri::parse(s).map_err(|e| BenchError::Usage(format!("--uri {s}: {e}")))
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn row(label: &str, mut samples: Vec<Duration>, note: &str) {
    samples.sort();
    let n = samples.len();
    let mean = if n == 0 {
        0.0
    } else {
        samples.iter().map(|d| ms(*d)).sum::<f64>() / n as f64
    };
    println!(
        "| {label} | {n} | {:.3} | {:.3} | {:.3} | {note} |",
        ms(pct(&samples, 0.5)),
        ms(pct(&samples, 0.99)),
        mean
    );
}

fn runtime(threads: usize) -> Result<tokio::runtime::Runtime> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    rt.map_err(|e| BenchError::Other(format!("tokio runtime: {e}")))
}

/// One call; an error reply from the service still is a round trip.
async fn call(c: &Client, topic: &str, payload: &Value, allow_err: bool) -> Result<()> {
    match c.rpc(topic, payload.clone()).await {
        Ok(_) => Ok(()),
        Err(ClientError::Rpc(_)) if allow_err => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn payload_of(o: &Opts) -> Result<Value> {
    match o.map.get("payload") {
        None => Ok(Value::Null),
        Some(s) => serde_json::from_str(s)
            .map_err(|e| BenchError::Usage(format!("--payload: invalid JSON: {e}"))),
    }
}

fn cmd_rpc(o: &Opts) -> Result<()> {
    let c = Client::new(o.uri()?);
    let topic = o.str("topic")?.to_string();
    let payload = payload_of(o)?;
    let n = o.num("n", 300)?;
    let warmup = o.num("warmup", 20)?;
    let allow_err = !topic.starts_with("resource.") || o.map.contains_key("allow-error");
    let allow_err = allow_err || topic == "resource.nosuch";
    let label = o.str_or("label", &topic).to_string();
    // --slow MS: also print (stderr) when each call over MS ms started.
    let slow = o.map.get("slow").map(|v| v.parse::<f64>()).transpose();
    let slow = slow.map_err(|_| BenchError::Usage("--slow: milliseconds".into()))?;
    // --pace MS: start a call every MS ms (a client that polls, rather
    // than one that calls back to back); 0: back to back.
    let pace = o.num("pace", 0)?;
    if pace > MAX_PACE_MS {
        return Err(BenchError::Usage(format!(
            "--pace: at most {MAX_PACE_MS} ms, not {pace}"
        )));
    }
    let rt = runtime(1)?;
    let samples = rt.block_on(async {
        for _ in 0..warmup {
            call(&c, &topic, &payload, allow_err).await?;
        }
        let mut v = Vec::with_capacity(n);
        let start = Instant::now();
        let mut next = tokio::time::Instant::now();
        for _ in 0..n {
            if pace > 0 {
                tokio::time::sleep_until(next).await;
                next = next_start(next, tokio::time::Instant::now(), pace);
            }
            let t = Instant::now();
            call(&c, &topic, &payload, allow_err).await?;
            let took = t.elapsed();
            if slow.is_some_and(|s| ms(took) > s) {
                eprintln!(
                    "slow call at {:.3} s: {:.2} ms",
                    (t - start).as_secs_f64(),
                    ms(took)
                );
            }
            v.push(took);
        }
        Ok::<_, BenchError>(v)
    })?;
    row(&label, samples, "sequential, one connection per call");
    Ok(())
}

/// The longest `--pace` (a minute between calls).
const MAX_PACE_MS: usize = 60_000;

/// When a paced caller starts its next call: `pace` ms after this one was
/// due, or after now if it started late (a late call does not make the
/// next ones come back to back).
fn next_start(
    due: tokio::time::Instant,
    now: tokio::time::Instant,
    pace: usize,
) -> tokio::time::Instant {
    due.max(now) + Duration::from_millis(pace as u64)
}

fn cmd_warm(o: &Opts) -> Result<()> {
    let tls_files = client::TlsFiles {
        ca: o.map.get("ca").map(std::path::PathBuf::from),
        ..Default::default()
    };
    let token = o.map.get("token-file").map(Path::new);
    let c = Client::from_env_tls(Some(o.str("uri")?), token, tls_files)
        .map_err(|e| BenchError::Usage(e.to_string()))?;
    let topic = o.str_or("topic", rpc::catalog::Status::TOPIC).to_string();
    let payload = payload_of(o)?;
    let n = o.num("n", 1000)?;
    let warmup = o.num("warmup", 50)?;
    let label = o.str_or("label", &topic).to_string();
    let rt = runtime(1)?;
    let samples = rt.block_on(async {
        let mut conn = c
            .connect()
            .await
            .map_err(|e| BenchError::Usage(e.to_string()))?;
        let fail = |e: client::ClientError| BenchError::Usage(format!("{topic}: {e}"));
        for _ in 0..warmup {
            conn.rpc(&topic, payload.clone()).await.map_err(fail)?;
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            conn.rpc(&topic, payload.clone()).await.map_err(fail)?;
            v.push(t.elapsed());
        }
        Ok::<_, BenchError>(v)
    })?;
    row(&label, samples, "sequential, one warm connection");
    Ok(())
}

/// The options of `concurrent`.
struct RoundsOpts {
    c: Client,
    topic: String,
    payload: Value,
    clients: usize,
    rounds: usize,
    label: String,
}

impl RoundsOpts {
    fn parse(o: &Opts) -> Result<RoundsOpts> {
        let topic = o.str("topic")?.to_string();
        Ok(RoundsOpts {
            c: Client::new(o.uri()?),
            payload: payload_of(o)?,
            clients: o.num("clients", 100)?.max(1),
            rounds: o.num("rounds", 10)?.max(1),
            label: o.str_or("label", &topic).to_string(),
            topic,
        })
    }
}

fn cmd_concurrent(o: &Opts) -> Result<()> {
    let RoundsOpts {
        c,
        topic,
        payload,
        clients,
        rounds,
        label,
    } = RoundsOpts::parse(o)?;
    if o.num("keepalive", 0)? != 0 {
        return concurrent_keepalive(c, topic, payload, clients, rounds, &label);
    }
    let rt = runtime(2)?;
    let mut samples = Vec::with_capacity(clients * rounds);
    let mut walls = Vec::with_capacity(rounds);
    rt.block_on(async {
        // Warm-up round.
        call(&c, &topic, &payload, false).await?;
        for _ in 0..rounds {
            let barrier = Arc::new(tokio::sync::Barrier::new(clients));
            let start = Instant::now();
            let mut tasks = Vec::with_capacity(clients);
            for _ in 0..clients {
                let c = c.clone();
                let topic = topic.clone();
                let payload = payload.clone();
                let barrier = Arc::clone(&barrier);
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let t = Instant::now();
                    call(&c, &topic, &payload, false).await.map(|_| t.elapsed())
                }));
            }
            for t in tasks {
                let d = t
                    .await
                    .map_err(|e| BenchError::Other(format!("task: {e}")))??;
                samples.push(d);
            }
            walls.push(start.elapsed());
        }
        Ok::<_, BenchError>(())
    })?;
    rounds_row(
        &label,
        samples,
        walls,
        &format!("{clients} callers at once x {rounds} rounds"),
    );
    Ok(())
}

/// The row of a run of rounds: every call's latency, and the median
/// round in the note.
fn rounds_row(label: &str, samples: Vec<Duration>, mut walls: Vec<Duration>, what: &str) {
    walls.sort();
    let note = format!("{what}; median round {:.1} ms", ms(pct(&walls, 0.5)));
    row(label, samples, &note);
}

/// `concurrent --keepalive 1`: each caller opens one connection and keeps
/// it for every round (as a scheduler keeps its handle), instead of one
/// connection per call.
fn concurrent_keepalive(
    c: Client,
    topic: String,
    payload: Value,
    clients: usize,
    rounds: usize,
    label: &str,
) -> Result<()> {
    let rt = runtime(2)?;
    let (samples, walls) = rt.block_on(async {
        let start = Arc::new(tokio::sync::Barrier::new(clients));
        let end = Arc::new(tokio::sync::Barrier::new(clients));
        let mut tasks = Vec::with_capacity(clients);
        for _ in 0..clients {
            let c = c.clone();
            let topic = topic.clone();
            let payload = payload.clone();
            let (start, end) = (Arc::clone(&start), Arc::clone(&end));
            tasks.push(tokio::spawn(async move {
                let fail = |e: client::ClientError| BenchError::Other(format!("{topic}: {e}"));
                let mut conn = c.connect().await.map_err(fail)?;
                conn.rpc(&topic, payload.clone()).await.map_err(fail)?;
                let mut mine = Vec::with_capacity(rounds);
                let mut walls = Vec::new();
                for _ in 0..rounds {
                    let leader = start.wait().await.is_leader();
                    let t = Instant::now();
                    conn.rpc(&topic, payload.clone()).await.map_err(fail)?;
                    mine.push(t.elapsed());
                    end.wait().await;
                    if leader {
                        walls.push(t.elapsed());
                    }
                }
                Ok::<_, BenchError>((mine, walls))
            }));
        }
        let mut samples = Vec::with_capacity(clients * rounds);
        let mut walls = Vec::with_capacity(rounds);
        for t in tasks {
            let (mine, w) = t
                .await
                .map_err(|e| BenchError::Other(format!("task: {e}")))??;
            samples.extend(mine);
            walls.extend(w);
        }
        Ok::<_, BenchError>((samples, walls))
    })?;
    let what = format!("{clients} callers at once on kept connections x {rounds} rounds");
    rounds_row(label, samples, walls, &what);
    Ok(())
}

fn read_ranks(path: &Path) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.parse()
                .map_err(|_| BenchError::Other(format!("{}: bad rank {w:?}", path.display())))
        })
        .collect()
}

/// Number of drained ranks according to `resource.status`.
async fn drained_count(c: &Client) -> Result<u64> {
    let v = c.status().await?;
    let mut n = 0;
    if let Some(m) = v.get("drain").and_then(Value::as_object) {
        for k in m.keys() {
            let ids = idset::IdSet::parse(k)
                .map_err(|e| BenchError::Other(format!("status drain key {k:?}: {e}")))?;
            n += ids.len();
        }
    }
    Ok(n)
}

fn cmd_drains(o: &Opts) -> Result<()> {
    let c = Client::new(o.uri()?);
    let ranks = Arc::new(read_ranks(Path::new(o.str("ranks")?))?);
    let clients = o.num("clients", 1)?.max(1);
    let label = o
        .str_or("label", &format!("separate drains, {clients} client(s)"))
        .to_string();
    let rt = runtime(if clients == 1 { 1 } else { 2 })?;
    let (lat, mut done, total, drained) = rt.block_on(async {
        let before = drained_count(&c).await?;
        let next = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(clients);
        for _ in 0..clients {
            let c = c.clone();
            let next = Arc::clone(&next);
            let ranks = Arc::clone(&ranks);
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(r) = ranks.get(i) else { break };
                    let reason = format!("reason-{}", i % 50);
                    let t = Instant::now();
                    c.drain(&r.to_string(), Some(&reason), None).await?;
                    let now = Instant::now();
                    out.push((now - t, now - start));
                }
                Ok::<_, BenchError>(out)
            }));
        }
        let mut lat = Vec::new();
        let mut done = Vec::new();
        for t in tasks {
            for (l, d) in t
                .await
                .map_err(|e| BenchError::Other(format!("task: {e}")))??
            {
                lat.push(l);
                done.push(d);
            }
        }
        let total = start.elapsed();
        let after = drained_count(&c).await?;
        Ok::<_, BenchError>((lat, done, total, after - before))
    })?;
    done.sort();
    let n = done.len();
    let rate = n as f64 / total.as_secs_f64();
    let first = n.min(1500);
    let first_rate = if first > 0 {
        first as f64 / done[first - 1].as_secs_f64()
    } else {
        0.0
    };
    let note = format!(
        "{rate:.0}/s overall ({n} in {:.2} s), {first_rate:.0}/s first {first}; {drained} newly drained",
        total.as_secs_f64()
    );
    row(&label, lat, &note);
    if drained != n as u64 {
        return Err(BenchError::Other(format!(
            "expected {n} newly drained ranks, status shows {drained}"
        )));
    }
    Ok(())
}

fn cmd_drain_big(o: &Opts) -> Result<()> {
    let c = Client::new(o.uri()?);
    let ranks = read_ranks(Path::new(o.str("ranks")?))?;
    let mut ids = idset::IdSet::new();
    for r in &ranks {
        ids.insert(*r);
    }
    let targets = ids.encode();
    let rt = runtime(1)?;
    let d = rt.block_on(async {
        let t = Instant::now();
        c.drain(&targets, Some("big drain"), None).await?;
        Ok::<_, BenchError>(t.elapsed())
    })?;
    row(
        o.str_or("label", "one drain RPC of the 30% set"),
        vec![d],
        &format!("{} ranks, idset {} bytes", ids.len(), targets.len()),
    );
    Ok(())
}

fn cmd_journal(o: &Opts) -> Result<()> {
    let c = Client::new(o.uri()?);
    let runs = o.num("runs", 10)?.max(1);
    let rt = runtime(1)?;
    let mut samples = Vec::with_capacity(runs);
    let mut events = 0;
    rt.block_on(async {
        for _ in 0..runs {
            let t = Instant::now();
            let mut s = c.journal().await?;
            events = 0;
            loop {
                let Some(r) = s.next().await else {
                    return Err(BenchError::Other(
                        "journal ended before the sentinel".into(),
                    ));
                };
                let n = r?
                    .get("events")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                if n == 0 {
                    break;
                }
                events += n;
            }
            samples.push(t.elapsed());
        }
        Ok::<_, BenchError>(())
    })?;
    row(
        o.str_or("label", "journal backlog to sentinel"),
        samples,
        &format!("{events} backlog events"),
    );
    Ok(())
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn cmd_startup(o: &Opts) -> Result<()> {
    let roster = PathBuf::from(o.str("roster")?);
    let config = PathBuf::from(o.str("config")?);
    let eventlog = PathBuf::from(o.str("eventlog")?);
    let work = PathBuf::from(o.str("workdir")?);
    let runs = o.num("runs", 10)?.max(1);
    let state = work.join("state");
    let sock = work.join("startup.sock");
    let uri = Uri::parse(&format!("unix://{}", sock.display()))
        .map_err(|e| BenchError::Other(e.to_string()))?;
    let c = Client::new(uri.clone());
    let rt = runtime(1)?;
    let lines = std::fs::read_to_string(&eventlog)
        .map_err(io_err(&eventlog))?
        .lines()
        .count();
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let _ = std::fs::remove_dir_all(&state);
        let _ = std::fs::remove_file(&sock);
        std::fs::create_dir_all(&state).map_err(io_err(&state))?;
        let dst = state.join("resource.eventlog");
        std::fs::copy(&eventlog, &dst).map_err(io_err(&dst))?;
        let log = work.join("startup.log");
        let logf = std::fs::File::create(&log).map_err(io_err(&log))?;
        let t = Instant::now();
        let mut child = Command::new(&roster)
            .arg("serve")
            .arg("--statedir")
            .arg(&state)
            .arg("--listen")
            .arg(uri.to_string())
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .map_err(io_err(&roster))?;
        let answered = loop {
            if rt.block_on(c.status()).is_ok() {
                break Some(t.elapsed());
            }
            if let Ok(Some(st)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(BenchError::Other(format!(
                    "roster serve exited ({st}) before answering:\n{text}"
                )));
            }
            if t.elapsed() > Duration::from_secs(60) {
                break None;
            }
            std::thread::sleep(Duration::from_micros(500));
        };
        stop(&mut child);
        match answered {
            Some(d) => samples.push(d),
            None => {
                return Err(BenchError::Other(
                    "roster serve did not answer in 60 s".into(),
                ))
            }
        }
    }
    row(
        o.str_or("label", "start-up until resource.status answers"),
        samples,
        &format!("{lines}-event eventlog"),
    );
    Ok(())
}

fn hostname(rank: u32) -> String {
    format!("node{:05}", rank + 1)
}

fn cmd_gen_eventlog(o: &Opts) -> Result<()> {
    let out = PathBuf::from(o.str("out")?);
    let n = o.num("events", 100_000)?;
    let nodes = u32::try_from(o.num("nodes", 16384)?.max(1))
        .map_err(|_| BenchError::Usage("--nodes too large".into()))?;
    let base = 1_763_900_000.0_f64;
    let mut text = String::with_capacity(n * 130);
    let bad = |e: eventlog::EventError| BenchError::Other(e.to_string());
    if n > 0 {
        let mut c = Map::new();
        c.insert("method".into(), json!("configuration"));
        text.push_str(
            &eventlog::Event::new(base, "resource-define", Some(c))
                .and_then(|e| e.encode())
                .map_err(bad)?,
        );
    }
    for i in 1..n {
        let pair = (i - 1) / 2;
        // A fixed stride walks all ranks in a scattered order.
        let rank = ((pair as u64 * 7919) % u64::from(nodes)) as u32;
        let mut c = Map::new();
        c.insert("idset".into(), json!(rank.to_string()));
        c.insert("nodelist".into(), json!(hostname(rank)));
        let name = if (i - 1) % 2 == 0 {
            c.insert("reason".into(), json!(format!("reason-{}", pair % 50)));
            c.insert("overwrite".into(), json!(0));
            "drain"
        } else {
            c.insert("overwrite".into(), json!(0));
            "undrain"
        };
        let ev = eventlog::Event::new(base + i as f64 * 0.001, name, Some(c)).map_err(bad)?;
        text.push_str(&ev.encode().map_err(bad)?);
    }
    std::fs::write(&out, text).map_err(io_err(&out))?;
    Ok(())
}

/// The statedir file system's own rate of durable appends: what one
/// sequential client's drains are compared with (bench/floor.sh).
fn cmd_fsync(o: &Opts) -> Result<()> {
    use std::io::Write;
    let dir = PathBuf::from(o.str("dir")?);
    let n = o.num("n", 2000)?.max(1);
    let warmup = o.num("warmup", 20)?;
    let path = dir.join(format!("svcbench-fsync.{}", std::process::id()));
    // Not O_APPEND (a positioned write there appends): the writes go on
    // from the file position, which is its end.
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    let line = "{\"timestamp\":1764000000.123456,\"name\":\"drain\",\"context\":{\"idset\":\"12345\",\"nodelist\":\"node12345\",\"reason\":\"reason-17\",\"overwrite\":0}}\n";
    // --room 1: the file is preallocated with zeros first (as the
    // service's eventlog is) and each line overwrites them in place.
    let room = o.num("room", 0)? != 0;
    if room {
        let zeros = vec![0u8; (n + warmup) * line.len() + 65536];
        let r = f.write_all(&zeros).and_then(|()| f.sync_data());
        if let Err(e) = r {
            let _ = std::fs::remove_file(&path);
            return Err(io_err(&path)(e));
        }
    }
    let mut offset = 0u64;
    let mut samples = Vec::with_capacity(n);
    let mut once = || -> std::io::Result<Duration> {
        use std::os::unix::fs::FileExt;
        let t = Instant::now();
        if room {
            f.write_all_at(line.as_bytes(), offset)?;
            offset += line.len() as u64;
        } else {
            f.write_all(line.as_bytes())?;
        }
        f.sync_data()?;
        Ok(t.elapsed())
    };
    let result = (|| {
        for _ in 0..warmup {
            once()?;
        }
        let start = Instant::now();
        for _ in 0..n {
            samples.push(once()?);
        }
        Ok(start.elapsed())
    })();
    let _ = std::fs::remove_file(&path);
    let total = result.map_err(io_err(&path))?;
    let rate = n as f64 / total.as_secs_f64();
    row(
        if room {
            "floor: one event line into preallocated room + fdatasync"
        } else {
            "floor: append one event line + fdatasync"
        },
        samples,
        &format!(
            "{rate:.0}/s overall ({n} in {:.2} s); no service",
            total.as_secs_f64()
        ),
    );
    Ok(())
}

/// `alternate RUNS LABEL CMD...` (positional: a command has blanks).
fn cmd_alternate(words: &[String]) -> Result<()> {
    let usage = || BenchError::Usage("alternate RUNS LABEL CMD [LABEL CMD...]".into());
    let (runs, pairs) = words.split_first().ok_or_else(usage)?;
    let runs: usize = runs.parse().map_err(|_| usage())?;
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return Err(usage());
    }
    let mut cmds: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in pairs.chunks(2) {
        let argv: Vec<&str> = p[1].split_whitespace().collect();
        if argv.is_empty() {
            return Err(usage());
        }
        cmds.push((p[0].as_str(), argv));
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cmds.len()];
    // A command that fails is not run again; its line says so.
    let mut failed: Vec<Option<String>> = vec![None; cmds.len()];
    for round in 0..=runs {
        for (i, (_, argv)) in cmds.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let t = Instant::now();
            let status = Command::new(argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(io_err(Path::new(argv[0])))?;
            let d = t.elapsed();
            if !status.success() {
                failed[i] = Some(status.to_string());
            } else if round > 0 {
                times[i].push(d);
            }
        }
    }
    for (((label, _), mut t), fail) in cmds.iter().zip(times).zip(failed) {
        match fail {
            Some(why) => println!("{label}\tfailed ({why})"),
            None => {
                t.sort();
                println!("{label}\t{:.3}", ms(pct(&t, 0.5)));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: svcbench rpc|concurrent|warm|drains|drain-big|journal|startup|gen-eventlog|fsync --key value... | alternate RUNS LABEL CMD...");
        return ExitCode::from(2);
    };
    let result = if cmd == "alternate" {
        cmd_alternate(rest)
    } else {
        Opts::parse(rest).and_then(|o| match cmd.as_str() {
            "rpc" => cmd_rpc(&o),
            "concurrent" => cmd_concurrent(&o),
            "warm" => cmd_warm(&o),
            "drains" => cmd_drains(&o),
            "drain-big" => cmd_drain_big(&o),
            "journal" => cmd_journal(&o),
            "startup" => cmd_startup(&o),
            "gen-eventlog" => cmd_gen_eventlog(&o),
            "fsync" => cmd_fsync(&o),
            other => Err(BenchError::Usage(format!("unknown sub-command {other}"))),
        })
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("svcbench: {e}");
            ExitCode::from(match e {
                BenchError::Usage(_) => 2,
                _ => 1,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_caller_does_not_catch_up_after_a_late_call() {
        let t0 = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        // on time: the next call is one pace after this one was due
        assert_eq!(next_start(t0, t0, 10), t0 + ms(10));
        assert_eq!(next_start(t0 + ms(10), t0 + ms(3), 10), t0 + ms(20));
        // late by 25 ms: one pace after now, not at once
        assert_eq!(next_start(t0 + ms(10), t0 + ms(35), 10), t0 + ms(45));
    }
}
