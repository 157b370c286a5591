//! `roster graph --follow URI`: the session's graph is built from the
//! first `resource.acquire` response and every later response is applied
//! to it as it arrives, between the commands read from standard input (or
//! given with `-c`, run once the graph is built).
//!
//! Three threads: one follows the acquire (reconnecting after a lost
//! connection, e.g. a service restart: the follower then rebuilds the
//! graph from the new first response and keeps the running jobs), one
//! reads standard input, and this one owns the session and applies both
//! in arrival order, so a command always sees every update received
//! before it.  Each applied response is reported: with `--json` as one
//! object `{"event": "acquire", ...}` on standard output (between command
//! replies), else as an `INFO:` line on standard error.  Shrunk targets
//! are released (`resource.release`) as soon as no job holds them.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc::{channel, Sender};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::session::{Outcome, Session};

enum Ev {
    /// One acquire response payload.
    Payload(Value, Instant),
    /// The acquire stream ended or failed (the follower reconnects).
    Lost(String),
    /// The acquire could not be started at all.
    Fatal(String),
    Line(String),
    Eof,
}

/// Follow the acquire of `group` on `uri` on a thread of its own.
fn spawn_acquire(client: client::Client, group: Option<String>, tx: Sender<Ev>) {
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Ev::Fatal(format!("starting the acquire thread: {e}")));
                return;
            }
        };
        rt.block_on(async move {
            let mut ever = false;
            let mut backoff = Duration::from_millis(50);
            loop {
                match client.acquire(group.as_deref()).await {
                    Ok(mut stream) => {
                        ever = true;
                        backoff = Duration::from_millis(50);
                        let why = loop {
                            match stream.next().await {
                                Some(Ok(v)) => {
                                    if tx.send(Ev::Payload(v, Instant::now())).is_err() {
                                        return;
                                    }
                                }
                                Some(Err(e)) => break e.to_string(),
                                None => break "the acquire stream ended".to_string(),
                            }
                        };
                        if tx.send(Ev::Lost(why)).is_err() {
                            return;
                        }
                    }
                    Err(e) if !ever => {
                        let _ = tx.send(Ev::Fatal(format!("resource.acquire: {e}")));
                        return;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        });
    });
}

fn spawn_stdin(tx: Sender<Ev>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut line = String::new();
        loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Ev::Eof);
                    return;
                }
                Ok(_) => {
                    if tx.send(Ev::Line(line.clone())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

fn response_type(a: &super::follower::Applied) -> &'static str {
    use client::AcquireResponse as R;
    match a.response {
        R::Initial { .. } => "initial",
        R::Update { .. } => "update",
        R::Expiration(_) => "expiration",
        R::Grow { .. } => "grow",
        R::Shrink(_) => "shrink",
        R::Online(_) => "online",
        R::Offline(_) => "offline",
    }
}

/// Run the follow loop; `commands` run once the graph is built.
pub fn run(
    mut s: Session,
    client: client::Client,
    group: Option<&str>,
    commands: Vec<String>,
    json_out: bool,
) -> ExitCode {
    let (tx, rx) = channel();
    let releaser = client::blocking::Client::from_async(client.clone());
    spawn_acquire(client, group.map(str::to_string), tx.clone());
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = stdout.lock();
    let mut err = stderr.lock();
    let mut failed = false;
    let mut lost = false;
    let mut pending_cmds = Some(commands);
    let mut stdin_started = false;
    let report = |out: &mut dyn Write, err: &mut dyn Write, v: Value| {
        if json_out {
            let _ = writeln!(out, "{v}");
            let _ = out.flush();
        } else {
            let _ = writeln!(err, "INFO: {v}");
        }
    };
    loop {
        if s.follow_ready() {
            if let Some(cmds) = pending_cmds.take() {
                let batch = !cmds.is_empty();
                for c in &cmds {
                    match s.run_line(c, &mut out, &mut err) {
                        Outcome::Ok => {}
                        Outcome::Failed => failed = true,
                        Outcome::Quit => return exit(failed),
                    }
                }
                let _ = out.flush();
                if batch {
                    return exit(failed);
                }
            }
            if !stdin_started {
                stdin_started = true;
                spawn_stdin(tx.clone());
            }
        }
        let Ok(ev) = rx.recv() else {
            return exit(failed);
        };
        match ev {
            Ev::Payload(v, at) => {
                if lost {
                    s.restart_follow();
                    lost = false;
                }
                match s.apply_acquire(&v) {
                    Ok(a) => {
                        let us = at.elapsed().as_micros() as u64;
                        report(
                            &mut out,
                            &mut err,
                            json!({"event": "acquire", "type": response_type(&a),
                                   "built": a.built, "up": a.up.encode(), "down": a.down.encode(),
                                   "removed": a.removed.encode(), "doomed": a.doomed,
                                   "dropped_reservations": a.dropped_reservations,
                                   "latency_us": us}),
                        );
                    }
                    Err(e) => {
                        failed = true;
                        report(&mut out, &mut err, json!({"event": "acquire", "error": e}));
                    }
                }
            }
            Ev::Lost(why) => {
                lost = true;
                report(&mut out, &mut err, json!({"event": "lost", "reason": why}));
            }
            Ev::Fatal(e) => {
                let _ = writeln!(err, "roster graph: {e}");
                return ExitCode::from(1);
            }
            Ev::Line(l) => match s.run_line(&l, &mut out, &mut err) {
                Outcome::Ok => {}
                Outcome::Failed => failed = true,
                Outcome::Quit => return exit(failed),
            },
            Ev::Eof => {
                let _ = out.flush();
                return exit(failed);
            }
        }
        let _ = out.flush();
        // Release what shrank and is free now (groups variant).
        if let Some((g, t)) = s.releasable() {
            match releaser.release(&g, &t.encode()) {
                Ok(()) => {
                    let _ = s.released(&t);
                    report(
                        &mut out,
                        &mut err,
                        json!({"event": "release", "group": g, "targets": t.encode()}),
                    );
                }
                Err(e) => {
                    failed = true;
                    report(
                        &mut out,
                        &mut err,
                        json!({"event": "release", "group": g, "targets": t.encode(),
                               "error": e.to_string()}),
                    );
                }
            }
        }
    }
}

/// Exit status 1 when a command failed, else 0.
pub(super) fn exit(failed: bool) -> ExitCode {
    ExitCode::from(u8::from(failed))
}
