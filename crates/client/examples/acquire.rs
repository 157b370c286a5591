//! A minimal scheduler front end: acquire resources (RFC 28), keep the
//! view up to date, and release shrunk targets right away (a real
//! scheduler would first wait for the jobs using them to end).
//!
//! ```text
//! cargo run -p roster-client --example acquire -- [--uri URI] [--token-file FILE] [--group GROUP]
//! ```
//!
//! Without `--group` the v1 protocol is used (the `default` group).
//! URI defaults to `$ROSTER_URI`, else the default socket.  Prints one
//! line per response: what changed, then the view (all / up / down /
//! pending shrink).  Stops when the service ends the stream.

use client::{AcquireResponse, Client, ClientError};
use std::path::PathBuf;
use std::process::ExitCode;

struct Args {
    uri: Option<String>,
    token_file: Option<PathBuf>,
    group: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        uri: None,
        token_file: None,
        group: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--uri" => args.uri = Some(value("--uri")?),
            "--token-file" => args.token_file = Some(PathBuf::from(value("--token-file")?)),
            "--group" => args.group = Some(value("--group")?),
            "-h" | "--help" => {
                return Err("usage: acquire [--uri URI] [--token-file FILE] [--group GROUP]".into())
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(args)
}

async fn run(args: Args) -> Result<(), ClientError> {
    let c = Client::from_env(args.uri.as_deref(), args.token_file.as_deref())?;
    let mut acq = c.acquisition(args.group.as_deref()).await?;
    while let Some(resp) = acq.next().await {
        let what = match resp? {
            AcquireResponse::Initial { up, .. } => format!("acquired, up {up}"),
            AcquireResponse::Update { up, down, shrink } => {
                format!("up +[{up}] down +[{down}] shrink [{shrink}]")
            }
            AcquireResponse::Expiration(e) => format!("expiration {e}"),
            AcquireResponse::Grow { targets, .. } => format!("grow [{targets}]"),
            AcquireResponse::Shrink(t) => format!("shrink [{t}]"),
            AcquireResponse::Online(t) => format!("online [{t}]"),
            AcquireResponse::Offline(t) => format!("offline [{t}]"),
        };
        let v = acq.view();
        println!(
            "{}: {what}; all [{}] up [{}] down [{}] pending [{}]",
            v.group(),
            v.all(),
            v.up(),
            v.down(),
            v.pending_shrink()
        );
        let pending = v.pending_shrink().clone();
        if !pending.is_empty() {
            acq.release(&pending).await?;
            println!("{}: released [{pending}]", acq.view().group());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("acquire: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("acquire: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acquire: {e}");
            ExitCode::FAILURE
        }
    }
}
