#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! `roster serve` under systemd's notify protocol: READY=1 only once the
//! socket answers, WATCHDOG=1 pings, STOPPING=1 on SIGTERM, in that order;
//! and the shipped units pass `systemd-analyze verify` where available.

mod common;

use common::*;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn notify_socket_gets_ready_watchdog_stopping_in_order() {
    let s = Scratch::new("notify");
    let cfg = s.write("roster.toml", &fake_config(3, ""));
    let notify = s.path("notify.sock");
    let rx = UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sock = s.path("roster.sock");
    let uri = format!("unix://{}", sock.display());
    let mut child = serve_cmd(&s, &uri, &cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let mut recv = || loop {
        match rx.recv(&mut buf) {
            Ok(n) => break String::from_utf8_lossy(&buf[..n]).to_string(),
            // a signal to the test process (not a failure)
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("a notification: {e}"),
        }
    };
    let first = recv();
    assert!(first.starts_with("READY=1\n"), "{first:?}");
    assert!(first.contains("STATUS=serving 3 targets"), "{first:?}");
    // ready means served: the socket answers at once
    let c = client::blocking::Client::new(rpc::uri::Uri::parse(&uri).unwrap());
    c.rpc("resource.status", serde_json::json!({}))
        .expect("status right after READY=1");
    // 200 ms watchdog: pings every ~100 ms from the service loop
    assert_eq!(recv(), "WATCHDOG=1");
    assert_eq!(recv(), "WATCHDOG=1");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let rest: Vec<String> = std::iter::from_fn(|| {
        let m = recv();
        (m != "STOPPING=1").then_some(m)
    })
    .collect();
    assert!(rest.iter().all(|m| m == "WATCHDOG=1"), "{rest:?}");
    assert!(child.wait().unwrap().success());
}

const UNITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/systemd");

#[test]
fn units_pass_systemd_analyze_verify() {
    if !need("systemd-analyze", "systemd") {
        return;
    }
    let s = Scratch::new("units");
    // ExecStart must exist: point it at the test binary in a copy, and
    // the agent's EnvironmentFile at one that exists.
    let env_file = s.write("roster-agent.env", "ROSTER_URI=tls://head:8050\n");
    for name in ["roster.service", "roster-agent.service"] {
        let text = std::fs::read_to_string(format!("{UNITS}/{name}")).unwrap();
        assert!(text.contains("/usr/local/bin/roster "), "{name}");
        assert!(text.contains("\nUser=roster\n"), "{name} runs as roster");
        let text = text
            .replace(
                "/usr/local/bin/roster ",
                &format!("{} ", env!("CARGO_BIN_EXE_roster")),
            )
            .replace("/etc/default/roster-agent", env_file.to_str().unwrap());
        s.write(name, &text);
    }
    let agent = std::fs::read_to_string(format!("{UNITS}/roster-agent.service")).unwrap();
    assert!(
        agent.contains("\nEnvironmentFile=/etc/default/roster-agent\n") && !agent.contains("--uri"),
        "the agent's URI comes from its EnvironmentFile"
    );
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(s.path("roster.service"))
        .arg(s.path("roster-agent.service"))
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Lines about the host's own units are not ours.
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("roster")).collect();
    assert!(out.status.success() && ours.is_empty(), "{err}");
}

/// A unit's `ExecStart=` command line and `Environment=` variables, with
/// the system paths moved under `root` and the binary replaced by the
/// test's.
fn unit_command(name: &str, root: &std::path::Path) -> Command {
    let text = std::fs::read_to_string(format!("{UNITS}/{name}")).unwrap();
    let moved = |w: &str| {
        for dir in ["/etc/roster", "/run", "/var/lib"] {
            if w == dir || w.starts_with(&format!("{dir}/")) {
                return format!("{}{w}", root.display());
            }
        }
        w.to_string()
    };
    let exec = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/roster"));
    let mut c = roster();
    c.args(words.map(moved));
    for l in text.lines().filter_map(|l| l.strip_prefix("Environment=")) {
        for kv in l.split_whitespace() {
            let (k, v) = kv.split_once('=').expect("Environment=K=V");
            c.env(k, moved(v));
        }
    }
    c
}

/// The unit's own command line with a configuration naming one listener
/// of every kind: each of them answers, the state directory is the
/// unit's default, and a `--listen` added on the command line is one
/// more listener (it never replaces the configured ones).
#[test]
fn the_units_command_line_opens_every_configured_listener() {
    let s = Scratch::new("unit-start");
    let root = s.path("root");
    let etc = root.join("etc/roster");
    std::fs::create_dir_all(etc.join("pki")).unwrap();
    let pki = etc.join("pki");
    let pki = pki.to_str().unwrap();
    ca(&["init", pki]);
    ca(&["issue", pki, "localhost", "--san", "127.0.0.1"]);
    let token = etc.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (tls_port, tcp_port) = (free_port(), free_port());
    let run = root.join("run/roster");
    let listen = [
        format!("unix://{}/roster.sock", run.display()),
        format!("flux://{}/local-0", run.display()),
        format!("tls://127.0.0.1:{tls_port}"),
        format!("tcp://127.0.0.1:{tcp_port}"),
    ];
    let quoted: Vec<String> = listen.iter().map(|u| format!("{u:?}")).collect();
    std::fs::write(
        etc.join("roster.toml"),
        fake_config(2, "")
            + &format!(
                "[serve]\nlisten = [{}]\ntoken-file = \"{}\"\n\
                 tls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n\
                 tls-client-ca = \"{pki}/ca.pem\"\n",
                quoted.join(", "),
                token.display()
            ),
    )
    .unwrap();
    let extra = format!("unix://{}/extra.sock", s.0.display());
    // --check through the unit's command line names them all, and the
    // extra one after them
    let o = unit_command("roster.service", &root)
        .args(["--listen", &extra, "--check"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains(&format!("listen {} {extra}", listen.join(" "))),
        "{text}"
    );
    let log = s.path("serve.log");
    let mut child = unit_command("roster.service", &root)
        .args(["--listen", &extra])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let status = |uri: &str, creds: &[&str]| {
        roster()
            .args(["resource", "--uri", uri])
            .args(creds)
            .arg("status")
            .env_remove("ROSTER_URI")
            .output()
            .unwrap()
    };
    let ca = format!("{pki}/ca.pem");
    let token = token.to_str().unwrap();
    let tls_uri = format!("tls://localhost:{tls_port}");
    let every: Vec<(&str, Vec<&str>)> = vec![
        (&listen[0], vec![]),
        (&extra, vec![]),
        (&tls_uri, vec!["--ca", &ca, "--token-file", token]),
        (&listen[3], vec!["--token-file", token]),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for (uri, creds) in &every {
        loop {
            let o = status(uri, creds);
            if o.status.success() {
                assert!(String::from_utf8_lossy(&o.stdout).contains("avail"));
                break;
            }
            assert!(
                std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
                "{uri} does not answer: {}\n{}",
                String::from_utf8_lossy(&o.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // the Flux listener takes the local connector's handshake
    let _ = flux_wire::connect(&run.join("local-0"));
    // the unit's default state directory ($XDG_STATE_HOME/roster)
    assert!(root.join("var/lib/roster/resource.eventlog").exists());
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}
