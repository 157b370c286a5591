//! `roster serve`: run the resource service.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use rpc::uri::Uri;

/// Run the Roster resource service.
///
/// With no configuration it serves this machine (discovered from /sys) with
/// its state under the user's state directory and its socket under the
/// runtime directory. Stop it with SIGTERM or SIGINT: streams end cleanly
/// and the drain checkpoint is written.
#[derive(Debug, Parser)]
struct Args {
    /// TOML configuration file, or a directory of *.toml files.
    #[arg(short = 'c', long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Check the configuration (and build its R), print a summary, exit.
    #[arg(long)]
    check: bool,
    /// State directory (resource.R, resource.eventlog, checkpoint).
    #[arg(long, value_name = "DIR")]
    statedir: Option<PathBuf>,
    /// Listen on URI: unix:///PATH, tls://HOST:PORT, tcp://HOST:PORT
    /// (loopback only) or flux:///PATH (repeatable).  Added to the
    /// configuration's `listen`, never instead of it.
    #[arg(long, value_name = "URI", value_parser = parse_uri)]
    listen: Vec<Uri>,
    /// Consider every target online from the start.
    #[arg(long)]
    monitor_force_up: bool,
    /// R of the enclosing allocation (inventory method job-info).
    #[arg(long = "parent-R", value_name = "FILE")]
    parent_r: Option<PathBuf>,
    /// Bearer token file: the owner role for TLS and loopback TCP clients.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The service's certificate chain (PEM) for tls:// listeners.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// CA certificate (PEM) that signs client certificates.
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// Log debug messages too (RUST_LOG, e.g. `info,serve=debug`, overrides).
    #[arg(short, long)]
    verbose: bool,
    /// Log lines as text or as JSON objects.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t)]
    log_format: crate::logging::LogFormat,
}

fn parse_uri(s: &str) -> Result<Uri, String> {
    Uri::parse(s).map_err(|e| e.to_string())
}

/// The command line, for `roster completions` and `roster manpage`
/// (with `ca` and its sub-commands).
pub fn command() -> clap::Command {
    let ca = <CaArgs as clap::CommandFactory>::command()
        .name("ca")
        .bin_name("roster serve ca")
        .about("A certificate authority for a Roster site (init, issue, renew, revoke)");
    <Args as clap::CommandFactory>::command().subcommand(ca)
}

/// A certificate authority for a Roster site: `roster serve ca init DIR`
/// makes one; `roster serve ca issue DIR HOSTLIST` signs a certificate
/// (NAME.pem, NAME.key) for every host of HOSTLIST; `roster serve ca
/// renew DIR NAME` signs NAME.pem again for a new period; `roster serve
/// ca revoke DIR NAME` adds NAME.pem to the revocation list DIR/ca.crl.
#[derive(Debug, Parser)]
enum CaArgs {
    /// Make a CA in DIR: ca.pem (give it to every node and client) and
    /// ca.key (mode 0600; keep it on the admin host).
    Init {
        dir: PathBuf,
        /// Common name of the CA.
        #[arg(long, default_value = "Roster CA")]
        name: String,
        /// Validity in days.
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// Sign a certificate for every host of HOSTLIST with the CA in DIR:
    /// subject CN=HOST, OU=ROLE, DNS name HOST; key usage
    /// digitalSignature; extended key usage clientAuth, and serverAuth for
    /// the roles that may serve (agent, relay, owner: the service's and a
    /// relay's certificate).  Existing NAME.pem/NAME.key are kept unless
    /// --force; the CA's own files never.
    Issue {
        dir: PathBuf,
        hostlist: String,
        /// The role written into the certificates: agent (a node's own
        /// session), relay (an agent that may also speak for the subtree
        /// the service assigns it), user, scheduler, admin or owner.
        #[arg(long, default_value = "agent")]
        role: String,
        /// Replace existing certificates and keys of these names.
        #[arg(long)]
        force: bool,
        /// Another DNS name or IP address for every certificate (e.g. the
        /// address clients use for the service; repeatable).
        #[arg(long, value_name = "NAME")]
        san: Vec<String>,
        /// Validity in days.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Write the certificates here instead of DIR.
        #[arg(long, value_name = "OUTDIR")]
        out: Option<PathBuf>,
    },
    /// Sign the certificate NAME.pem again with the CA in DIR: the same
    /// subject (name and role), names and key usages, a new serial number
    /// and validity.  The key NAME.key is kept unless --new-key.  Each
    /// file is replaced atomically; the CA's own files never.  The old
    /// certificate stays valid until it expires (revoke it if it must
    /// not).
    Renew {
        #[command(flatten)]
        cert: CertIn,
        /// Validity in days, from now.
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Make a new key (NAME.key, mode 0600) too.
        #[arg(long)]
        new_key: bool,
    },
    /// Revoke the certificate NAME.pem: add its serial number to the
    /// CA's revocation list DIR/ca.crl (made if missing), which a service
    /// with `[serve] tls-crl` checks at every handshake (re-read on
    /// SIGHUP).
    Revoke {
        #[command(flatten)]
        cert: CertIn,
        /// Days until the list's next update.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

/// The certificate NAME of the CA in DIR that `renew` and `revoke` act on.
#[derive(Debug, clap::Args)]
struct CertIn {
    dir: PathBuf,
    name: String,
    /// Where the files of NAME are (the --out of `issue`; default DIR).
    #[arg(long, value_name = "CERTDIR")]
    certs: Option<PathBuf>,
}

impl CertIn {
    fn certs(&self) -> &Path {
        self.certs.as_deref().unwrap_or(&self.dir)
    }
}

fn ca_main(args: Vec<OsString>) -> ExitCode {
    let args: CaArgs = match super::parse_as("roster serve ca", args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("roster serve ca: {e}");
        ExitCode::from(1)
    };
    match args {
        CaArgs::Init { dir, name, days } => match tls::ca::init(&dir, &name, days) {
            Ok(p) => {
                println!("{}", p.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        CaArgs::Renew {
            cert,
            days,
            new_key,
        } => {
            let validity = tls::ca::Validity::days(days);
            match tls::ca::renew(&cert.dir, cert.certs(), &cert.name, validity, new_key) {
                Ok(r) => {
                    let key = if r.new_key { "new key" } else { "same key" };
                    println!(
                        "{} {}: serial {} (was {}), {key}, valid {days} day(s)",
                        r.cert.display(),
                        r.key.display(),
                        r.serial,
                        r.old_serial,
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        CaArgs::Revoke { cert, days } => {
            match tls::ca::revoke(&cert.dir, cert.certs(), &cert.name, days) {
                Ok(r) => {
                    let what = if r.already {
                        "already revoked"
                    } else {
                        "revoked"
                    };
                    println!(
                        "{}: {} (serial {}) {what}; {} certificate(s) listed",
                        r.crl.display(),
                        cert.name,
                        r.serial,
                        r.count
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        CaArgs::Issue {
            dir,
            hostlist,
            role,
            force,
            san,
            days,
            out,
        } => {
            let hosts: Vec<String> = match hostlist::Hostlist::decode(&hostlist) {
                Ok(h) if !h.is_empty() => h.iter().collect(),
                Ok(_) => return fail(&"the hostlist is empty"),
                Err(e) => return fail(&format!("{hostlist}: {e}")),
            };
            let out = out.unwrap_or_else(|| dir.clone());
            let validity = tls::ca::Validity::days(days);
            match tls::ca::issue_opts(&dir, &out, &hosts, &role, &san, validity, force) {
                Ok(issued) => {
                    for i in issued {
                        println!("{} {}", i.cert.display(), i.key.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
    }
}

/// One glibc malloc arena for the daemon, set before its threads start.
/// By default each thread that allocates gets an arena of its own (the
/// loop, the listeners' two workers), and each keeps the free memory of
/// its own high-water mark: with 2,048 idle agents, 12.7 MB of growth
/// for 4.5 MB of live heap (issue 27, bench/RESULTS.md).  Small
/// allocations mostly stay in each thread's tcache, without the lock.
fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt(3) only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Give the allocator's free pages back to the system (glibc's
/// malloc_trim): the service calls it once a burst of requests is over
/// (`serve::release`).
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim(3) takes the allocator's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    if args.get(1).and_then(|a| a.to_str()) == Some("ca") {
        let mut args = args;
        args.remove(1);
        return ca_main(args);
    }
    let args: Args = match super::parse_as("roster serve", args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    one_arena();
    crate::logging::init(args.verbose, args.log_format);
    let opts = serve::Options {
        config: args.config,
        statedir: args.statedir,
        listen: args.listen,
        monitor_force_up: args.monitor_force_up,
        parent_r: args.parent_r,
        token_file: args.token_file,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        tls_client_ca: args.tls_client_ca,
        release_memory: Some(release_memory),
    };
    let done = if args.check {
        serve::check(&opts).map(|summary| println!("{summary}"))
    } else {
        // One socket per agent session: allow as many as the hard limit does.
        agent::raise_nofile_limit();
        serve::run(&opts, Arc::new(serve::Control::default()), |_| {})
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roster serve: {}", error_text(&e));
            config_hint(&e);
            ExitCode::from(1)
        }
    }
}

/// The error, with `FILE:LINE:` instead of `FILE:` when it is about the
/// file named by a key (`path`, `scheduling`) whose line can be found.
fn error_text(e: &serve::ServeError) -> String {
    let serve::ServeError::Config(ce) = e else {
        return e.to_string();
    };
    let key = match &ce.kind {
        config::ErrorKind::PathLoad { .. } => "path",
        config::ErrorKind::SchedulingLoad { .. } => "scheduling",
        _ => return e.to_string(),
    };
    let line = ce.origin.as_deref().and_then(|f| {
        let text = std::fs::read_to_string(f).ok()?;
        Some((f, line_of_key(&text, key)?))
    });
    match line {
        Some((f, l)) => format!("{f}:{l}: {}", ce.kind),
        None => e.to_string(),
    }
}

/// After an unknown key or table in a configuration file: `FILE:LINE:
/// did you mean 'KEY'?` for each one close to a known name.
fn config_hint(e: &serve::ServeError) {
    let serve::ServeError::Config(ce) = e else {
        return;
    };
    let (table, words): (&str, Vec<&str>) = match &ce.kind {
        config::ErrorKind::UnknownKeys { table, keys } => {
            (table.as_str(), keys.iter().map(String::as_str).collect())
        }
        config::ErrorKind::UnknownTable(name) | config::ErrorKind::UnknownTopKey(name) => {
            ("", vec![name.as_str()])
        }
        _ => return,
    };
    let known = config::known_keys(table);
    let text = ce
        .origin
        .as_deref()
        .and_then(|f| std::fs::read_to_string(f).ok());
    for word in words {
        let Some(guess) = super::suggest::closest(word, known.iter().copied()) else {
            continue;
        };
        let place = match (
            &ce.origin,
            text.as_deref().and_then(|t| line_of_key(t, word)),
        ) {
            (Some(f), Some(l)) => format!("{f}:{l}: "),
            (Some(f), None) => format!("{f}: "),
            _ => String::new(),
        };
        eprintln!("roster serve: hint: {place}did you mean '{guess}'?");
    }
}

/// The first line defining `key` (`key =`, `"key" =`, `[key]`, `[[key]]`
/// or a dotted `[a.key]`), 1-based.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let bare = l
                .strip_prefix(key)
                .or_else(|| l.strip_prefix(&format!("\"{key}\"")))
                .is_some_and(|rest| rest.trim_start().starts_with('='));
            let header = l.starts_with('[')
                && l.trim_start_matches('[')
                    .split(']')
                    .next()
                    .is_some_and(|h| h.rsplit('.').next().map(str::trim) == Some(key));
            bare || header
        })
        .map(|i| i + 1)
}
