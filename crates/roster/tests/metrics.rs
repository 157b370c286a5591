//! `GET /metrics`, `/healthz`, `/readyz` on a running daemon, scraped by a
//! real Prometheus (Debian package `prometheus`) and linted by `promtool`.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A plain HTTP/1.1 GET; returns (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read reply");
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("http reply");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

fn daemon_with_tcp(s: &Scratch, nodes: u32) -> (Daemon, String) {
    start_with_tcp(s, &fake_config(nodes, ""), &[])
}

/// A daemon with a `tls://` listener (its certificate valid 40 days, the
/// CA 3650, the revocation list's next update in 20) and a loopback
/// `tcp://` one to scrape.
fn daemon_with_tls(s: &Scratch, nodes: u32) -> (Daemon, String, u16) {
    let pki = s.path("pki");
    let pki = pki.to_str().unwrap();
    let port = free_port();
    ca(&["init", pki]);
    ca(&["issue", pki, "localhost", "--role", "owner", "--days", "40"]);
    ca(&["issue", pki, "gone"]);
    ca(&["revoke", pki, "gone", "--days", "20"]);
    let config = format!(
        "{}[serve]\ntls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n\
         tls-client-ca = \"{pki}/ca.pem\"\ntls-crl = \"{pki}/ca.crl\"\n\
         listen = [\"tls://127.0.0.1:{port}\"]\n",
        fake_config(nodes, ""),
    );
    let (d, addr) = start_with_tcp(s, &config, &[]);
    (d, addr, port)
}

/// Days from now to the value of `key` (a timestamp) in `text`.
fn days_left(text: &str, key: &str) -> Option<f64> {
    let at = value(text, key)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    Some((at - now) as f64 / 86_400.0)
}

/// `roster_tls_expiry_timestamp_seconds` names the service's certificate,
/// the client CA and the revocation list in force; after `ca renew` of
/// the service's certificate and SIGHUP it shows the new date (the
/// certificate served is the new one: a client sees its serial).
#[test]
fn tls_expiry_metric_follows_a_renewal_on_sighup() {
    let s = Scratch::new("metrics-tls");
    let (d, addr, port) = daemon_with_tls(&s, 2);
    let (_, text) = http_get(&addr, "/metrics");
    let cert = "roster_tls_expiry_timestamp_seconds{kind=\"certificate\",name=\"localhost\"} ";
    let ca_key = "roster_tls_expiry_timestamp_seconds{kind=\"ca\",name=\"Roster CA\"} ";
    let crl = "roster_tls_expiry_timestamp_seconds{kind=\"crl\",name=\"Roster CA\"} ";
    for (key, days) in [(cert, 40.0), (ca_key, 3650.0), (crl, 20.0)] {
        let left = days_left(&text, key).unwrap_or_else(|| panic!("{key} missing:\n{text}"));
        assert!((left - days).abs() < 0.1, "{key}{left} days:\n{text}");
    }
    let pki = s.path("pki");
    let out = ca(&["renew", pki.to_str().unwrap(), "localhost", "--days", "400"]);
    assert!(out.contains("same key"), "{out}");
    // not read again until SIGHUP
    let (_, text) = http_get(&addr, "/metrics");
    assert!(
        (days_left(&text, cert).unwrap() - 40.0).abs() < 0.1,
        "{text}"
    );
    let pid = d.child.as_ref().unwrap().id() as i32;
    signal(pid, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, text) = http_get(&addr, "/metrics");
        if days_left(&text, cert).is_some_and(|d| (d - 400.0).abs() < 0.1) {
            assert!(
                (days_left(&text, crl).unwrap() - 20.0).abs() < 0.1,
                "{text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never 400 days:\n{text}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        d.log_text().contains("localhost.pem and its key"),
        "{}",
        d.log_text()
    );
    // the service presents the renewed certificate: a TLS client trusting
    // the CA gets through (the owner token gives it a role)
    let o = roster()
        .args([
            "resource",
            "--uri",
            &format!("tls://localhost:{port}"),
            "--ca",
        ])
        .arg(pki.join("ca.pem"))
        .args(["--token-file", s.path("token").to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn gauge(text: &str, state: &str) -> Option<u64> {
    let key = format!("roster_nodes{{state=\"{state}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn metrics_health_and_readiness_without_a_token() {
    let s = Scratch::new("metrics");
    let (d, addr) = daemon_with_tcp(&s, 4);
    assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".into()));
    assert_eq!(http_get(&addr, "/readyz"), (200, "ready\n".into()));
    let (status, text) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(gauge(&text, "up"), Some(0), "{text}");
    assert_eq!(gauge(&text, "offline"), Some(4), "{text}");
    assert!(text.contains("roster_nodes_size 4"), "{text}");
    assert!(text.contains("roster_process_open_fds "), "{text}");
    // RPCs still need the token on TCP
    let (status, _) = http_get(&addr, "/v1/resource.status");
    assert_ne!(status, 200);
    d.ok(&["drain", "1-2", "maintenance"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, text) = http_get(&addr, "/metrics");
        if gauge(&text, "drained") == Some(2) {
            assert!(
                text.contains(
                    "roster_rpc_requests_total{topic=\"resource.drain\",outcome=\"ok\"} 1"
                ),
                "{text}"
            );
            assert!(text.contains("roster_eventlog_appends_total"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "drained count never became 2:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // other paths are not routes: without a token, TCP answers 401
    let (status, _) = http_get(&addr, "/nope");
    assert_eq!(status, 401);
}

fn value(text: &str, key: &str) -> Option<i64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

/// Wait until `/metrics` shows `key` at `want`.
fn wait_for(addr: &str, key: &str, want: i64) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, text) = http_get(addr, "/metrics");
        if value(&text, key) == Some(want) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{key} never became {want}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `roster_nodes{state}`: every node in exactly one state, so they sum
/// to the size; the flux status probe (`job-manager.stats-get`, sent by
/// `status` and `list`) is not an error.
#[test]
fn node_states_are_disjoint_and_the_status_probe_is_no_error() {
    let s = Scratch::new("metrics-states");
    let (d, addr) = start_with_tcp(
        &s,
        &fake_config(7, "exclude = \"5\"\ntorpid-max = \"1s\"\n"),
        &[],
    );
    // fake[0-3] online, fake3 stalls (torpid); fake4, 5 and 6 never come
    let _sim = Killed(
        roster()
            .args(["agent", "--uri", &d.uri, "--simulate", "fake[0-3]"])
            .args(["--cores", "0-3", "--heartbeat", "0.2"])
            .args(["--stall", "3", "--stall-after", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    d.ok(&["drain", "1,4", "fan"]);
    wait_for(&addr, "roster_nodes{state=\"torpid\"} ", 1);
    let text = wait_for(&addr, "roster_nodes{state=\"up\"} ", 2);
    let want = [
        ("up", 2),
        ("torpid", 1),
        ("offline", 1),
        ("drained", 2),
        ("excluded", 1),
    ];
    for (state, n) in want {
        assert_eq!(gauge(&text, state), Some(n), "{state}:\n{text}");
    }
    let states = text
        .lines()
        .filter(|l| l.starts_with("roster_nodes{"))
        .count();
    assert_eq!(states, want.len(), "{text}");
    assert!(text.contains("roster_nodes_size 7"), "{text}");
    d.ok(&["status"]);
    d.ok(&["list"]);
    // The probes flux's status and list send (Roster's CLI asks
    // `resource.summary` instead): the ENOSYS flux expects is no error.
    let _ = d.rpc("job-manager.stats-get", serde_json::json!({}));
    let _ = d.rpc("config.get", serde_json::json!({}));
    let (_, text) = http_get(&addr, "/metrics");
    for probe in ["job-manager.stats-get", "config.get"] {
        let line = format!("roster_rpc_requests_total{{topic=\"{probe}\",outcome=\"ok\"}} 1");
        assert!(text.contains(&line), "{line}:\n{text}");
    }
    assert!(!text.contains("topic=\"unknown\""), "{text}");
    assert!(text.contains("roster_ha_leader 1"), "{text}");
    assert!(text.contains("roster_build_info{version=\""), "{text}");
}

#[test]
fn journal_followers_and_their_queues() {
    let s = Scratch::new("metrics-streams");
    let (d, addr) = daemon_with_tcp(&s, 4);
    let key = "roster_streams{topic=\"resource.journal\"} ";
    wait_for(&addr, key, 0);
    // a follower: roster resource eventlog -F
    let follower = Killed(
        roster()
            .args(["resource", "--uri", &d.uri, "eventlog", "-F"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let text = wait_for(&addr, key, 1);
    // it reads: nothing stays queued for long
    assert!(
        value(
            &text,
            "roster_stream_queued_bytes{topic=\"resource.journal\"} "
        )
        .is_some(),
        "{text}"
    );
    assert!(
        value(
            &text,
            "roster_stream_queued_bytes_max{topic=\"resource.journal\"} "
        )
        .is_some(),
        "{text}"
    );
    assert_eq!(
        value(&text, "roster_streams{topic=\"resource.acquire\"} "),
        Some(0)
    );
    drop(follower);
    wait_for(&addr, key, 0);
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_the_drained_count_and_promtool_is_clean() {
    if !need("prometheus", "prometheus") || !need("promtool", "prometheus") {
        return;
    }
    let s = Scratch::new("prometheus");
    let (d, addr) = daemon_with_tcp(&s, 8);

    // promtool lints the exposition text
    let (_, text) = http_get(&addr, "/metrics");
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let prom_addr = format!("127.0.0.1:{}", free_port());
    let cfg = s.write(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: roster\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    );
    let log = std::fs::File::create(s.path("prometheus.log")).unwrap();
    let _prom = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", s.path("tsdb").display()))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus"),
    );
    d.ok(&["drain", "3,5,7", "via", "prometheus"]);
    let query = "/api/v1/query?query=roster_nodes%7Bstate%3D%22drained%22%7D";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = std::panic::catch_unwind(|| http_get(&prom_addr, query)).ok();
        if let Some((200, body)) = reply {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let value = v["data"]["result"][0]["value"][1]
                .as_str()
                .map(str::to_string);
            if value.as_deref() == Some("3") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never returned 3 drained nodes; its log:\n{}",
            std::fs::read_to_string(s.path("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

const CONTRIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib");

/// `contrib/prometheus/roster-rules.yml` is valid and its unit tests
/// (`roster-rules.test.yml`: each alert fires when it should, and not
/// before) pass.
#[test]
fn alert_rules_pass_promtool_check_and_test() {
    if !need("promtool", "prometheus") {
        return;
    }
    let dir = format!("{CONTRIB}/prometheus");
    for args in [
        ["check", "rules", "roster-rules.yml"],
        ["test", "rules", "roster-rules.test.yml"],
    ] {
        output_ok(Command::new("promtool").args(args).current_dir(&dir));
    }
}

/// The `roster_*` names in `text` (metric names: letters, digits, `_`).
fn roster_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("roster_") {
        let boundary =
            !matches!(rest[..i].chars().last(), Some(c) if c.is_ascii_alphanumeric() || c == '_');
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(tail.len());
        if boundary {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

#[derive(serde::Deserialize)]
struct Dashboard {
    panels: Vec<Panel>,
}

#[derive(serde::Deserialize)]
struct Panel {
    title: String,
    targets: Vec<Target>,
}

#[derive(serde::Deserialize)]
struct Target {
    expr: String,
}

/// Every metric the Grafana dashboard and the alert rules use is in a
/// real scrape of `/metrics` (after a drain, so the RPC and eventlog
/// series exist).
#[test]
fn dashboard_and_rules_use_only_real_metrics() {
    let s = Scratch::new("metrics-names");
    let (d, addr, _) = daemon_with_tls(&s, 4);
    d.ok(&["drain", "1", "fan"]);
    let (_, scrape) = http_get(&addr, "/metrics");
    let real: std::collections::BTreeSet<String> = scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect();
    let text = std::fs::read_to_string(format!("{CONTRIB}/grafana/roster.json")).unwrap();
    let dash: Dashboard = serde_json::from_str(&text).expect("roster.json is a dashboard");
    let exprs: Vec<&str> = dash
        .panels
        .iter()
        .flat_map(|p| p.targets.iter().map(|t| t.expr.as_str()))
        .collect();
    assert!(
        dash.panels.iter().all(|p| !p.targets.is_empty()),
        "a panel without a query"
    );
    let used = roster_names(&exprs.join("\n"));
    assert!(used.len() >= 15, "{used:?}");
    let missing: Vec<_> = used.iter().filter(|n| !real.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard uses {missing:?}, not in a scrape:\n{scrape}\npanels: {:?}",
        dash.panels.iter().map(|p| &p.title).collect::<Vec<_>>()
    );
    let rules = std::fs::read_to_string(format!("{CONTRIB}/prometheus/roster-rules.yml")).unwrap();
    let used = roster_names(&rules);
    assert!(used.len() >= 8, "{used:?}");
    let missing: Vec<_> = used.iter().filter(|n| !real.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the rules use {missing:?}, not in a scrape:\n{scrape}"
    );
}
