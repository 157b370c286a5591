//! RFC 28 acquire latency against a real `roster serve` on R16k.json:
//!
//! * first response: time from sending `resource.acquire` to its first
//!   response (`{resources, up}`), for a fresh acquire each time;
//! * update latency: with an acquire open, drain one rank at a time
//!   (durable: the reply comes after the fsync) and time the acquire's
//!   `{down}` update against the drain's reply (the instant the drain is
//!   known durable) and against the drain's request;
//! * baseline, same run: a `resource.get` round trip.
//!
//! Usage: `acqbench ROSTER_BIN SHARED_BENCH_DIR [N]` (see bench/acquire.sh).
//! Starts its own daemon on a temporary state directory.

use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use client::Client;
use roster_svcbench::{ms, pct};
use rpc::uri::Uri;
use serde_json::{json, Value};

fn row(label: &str, mut v: Vec<Duration>, note: &str) {
    v.sort();
    println!(
        "| {label} | {} | {:.3} | {:.3} | {:.3} | {note} |",
        v.len(),
        ms(pct(&v, 0.5)),
        ms(pct(&v, 0.99)),
        ms(*v.last().unwrap_or(&Duration::ZERO)),
    );
}

struct Daemon(Child, PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: acqbench ROSTER_BIN SHARED_BENCH_DIR [N]");
        return ExitCode::from(2);
    }
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(500);
    match run(&args[1], &args[2], n) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acqbench: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(roster: &str, shared: &str, n: usize) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("roster-acqbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cfg = dir.join("roster.toml");
    std::fs::write(
        &cfg,
        format!("[resource]\nnoverify = true\npath = \"{shared}/R16k.json\"\n"),
    )
    .map_err(|e| e.to_string())?;
    let sock = dir.join("roster.sock");
    let child = Command::new(roster)
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .arg("--statedir")
        .arg(dir.join("state"))
        .arg("--listen")
        .arg(format!("unix://{}", sock.display()))
        .arg("--monitor-force-up")
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{roster}: {e}"))?;
    let _daemon = Daemon(child, dir.clone());
    let uri = Uri::parse(&format!("unix://{}", sock.display())).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let c = Client::new(uri);
        let t0 = Instant::now();
        while c.get().await.is_err() {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err("the daemon did not start".to_string());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("| measurement | n | p50 ms | p99 ms | max ms | note |");
        println!("|---|---|---|---|---|---|");
        // baseline
        let mut base = Vec::new();
        for i in 0..n + 20 {
            let t = Instant::now();
            c.get().await.map_err(|e| e.to_string())?;
            if i >= 20 {
                base.push(t.elapsed());
            }
        }
        row("baseline: resource.get round trip", base, "R16k inventory");
        // first response
        let mut first = Vec::new();
        for i in 0..60 {
            let t = Instant::now();
            let mut s = loop {
                let mut s = c.acquire(None).await.map_err(|e| e.to_string())?;
                match s.next().await {
                    Some(Ok(v)) => {
                        if v.get("resources").is_none() {
                            return Err(format!("unexpected first response {v}"));
                        }
                        break s;
                    }
                    // the previous acquire's disconnect is not processed yet
                    Some(Err(e)) if e.errnum() == 16 => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    other => return Err(format!("acquire: {other:?}")),
                }
            };
            let d = t.elapsed();
            if i >= 10 {
                first.push(d);
            }
            drop(s.next());
            drop(s);
        }
        row(
            "first acquire response (R16k, {resources, up})",
            first,
            "fresh acquire each time; includes connect",
        );
        // update latency
        let mut s = loop {
            let mut s = c.acquire(None).await.map_err(|e| e.to_string())?;
            match s.next().await {
                Some(Ok(_)) => break s,
                Some(Err(e)) if e.errnum() == 16 => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                other => return Err(format!("acquire: {other:?}")),
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Value)>();
        tokio::spawn(async move {
            while let Some(Ok(v)) = s.next().await {
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        let mut after_ack = Vec::new();
        let mut after_req = Vec::new();
        let mut ack = Vec::new();
        for i in 0..n {
            let rank = (i * 7) % 16384;
            let t0 = Instant::now();
            c.drain(&rank.to_string(), Some("acqbench"), None)
                .await
                .map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            let (t2, v) = rx.recv().await.ok_or("acquire stream ended")?;
            if v != json!({"down": rank.to_string()}) {
                return Err(format!("unexpected update {v} for drain of {rank}"));
            }
            ack.push(t1 - t0);
            after_ack.push(t2.saturating_duration_since(t1));
            after_req.push(t2 - t0);
            c.undrain(&rank.to_string(), None, None)
                .await
                .map_err(|e| e.to_string())?;
            let (_, v) = rx.recv().await.ok_or("acquire stream ended")?;
            if v != json!({"up": rank.to_string()}) {
                return Err(format!("unexpected update {v} for undrain of {rank}"));
            }
        }
        row(
            "drain round trip (durable: fsync before the reply)",
            ack,
            "one at a time",
        );
        row(
            "acquire update after the drain reply",
            after_ack,
            "0 when the update arrived first",
        );
        row("acquire update after the drain request", after_req, "");
        // The floor under both: one event-sized append + fdatasync on the
        // state directory's file system (what a durable drain must wait for).
        let mut sync = Vec::new();
        {
            use std::io::Write;
            let path = dir.join("fsync-probe");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| e.to_string())?;
            let line = format!(
                "{{\"timestamp\":1764000000.123456,\"name\":\"drain\",\"context\":{{\"idset\":\"{}\",\"nodelist\":\"sim123\",\"reason\":\"acqbench\",\"overwrite\":0}}}}\n",
                123
            );
            for i in 0..n + 20 {
                let t = Instant::now();
                f.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
                f.sync_data().map_err(|e| e.to_string())?;
                if i >= 20 {
                    sync.push(t.elapsed());
                }
            }
        }
        row(
            "floor: append one event line + fdatasync (statedir's file system)",
            sync,
            "no service involved",
        );
        Ok(())
    })
}
