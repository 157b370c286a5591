#![allow(unsafe_code)] // kill(2) on our own children
//! Agent relays with real processes on loopback: a 3-level tree of
//! `roster agent --relay` and leaf agents (kary:2 over fake[0-6]), a relay
//! restart, a leaf moving to another relay, relays over TLS with each
//! child's certificate checked, a relay following a server list, the
//! simulator's relays (stalled leaves torpid at torpid-max).

mod common;

use common::*;
use serde_json::json;

use std::time::{Duration, Instant};

fn sock(s: &Scratch, name: &str) -> String {
    format!("unix://{}", s.path(&format!("{name}.sock")).display())
}

/// A relay for `host` below `parent`, listening on `<host>.sock`.
fn relay(s: &Scratch, parent: &str, host: &str) -> Agent {
    let listen = sock(s, host);
    let relay = ["--relay", "--listen", &listen];
    Agent::spawn(s, host, &[&relay[..], &node_args(parent, host)].concat())
}

fn leaf(s: &Scratch, parent: &str, host: &str) -> Agent {
    Agent::spawn(s, &format!("{host}-leaf"), &node_args(parent, host))
}

fn config(n: u32, extra: &str) -> String {
    format!(
        "[resource]\n{extra}\n[serve]\nrelay-fanout = 2\n[[resource.config]]\nhosts = \"fake[0-{}]\"\ncores = \"0-3\"\n",
        n - 1
    )
}

fn wait_log(p: &Agent, text: &str, secs: f64) {
    let start = Instant::now();
    while !p.log_text().contains(text) {
        assert!(
            start.elapsed() < Duration::from_secs_f64(secs),
            "no '{text}' in:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_level_tree_restart_and_a_leaf_moving() {
    // kary:2 over 7 ranks: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6.
    let s = Scratch::new("relay-tree");
    let cfg = config(7, "torpid-max = \"1s\"\noffline-timeout = \"10s\"");
    let d = start(&s, &cfg, &[]);
    let r0 = relay(&s, &d.uri, "fake0");
    let mut r1 = relay(&s, &sock(&s, "fake0"), "fake1");
    let _r2 = relay(&s, &sock(&s, "fake0"), "fake2");
    let l3 = leaf(&s, &sock(&s, "fake1"), "fake3");
    let _l4 = leaf(&s, &sock(&s, "fake1"), "fake4");
    let _l5 = leaf(&s, &sock(&s, "fake2"), "fake5");
    let _l6 = leaf(&s, &sock(&s, "fake2"), "fake6");
    d.wait_status("online", "0-6", 15.0);
    wait_log(
        &r0,
        "fake0 joined as rank 0 (relay for up to 6 ranks below it)",
        1.0,
    );
    wait_log(
        &r1,
        "fake1 joined as rank 1 (relay for up to 2 ranks below it)",
        1.0,
    );
    wait_log(&l3, "fake3 joined as rank 3", 1.0);
    // One session at the service: the top relay.
    assert!(d.status()["torpid"] == "", "{}", d.status());
    // Heartbeats flow through two relays: nobody turns torpid.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(d.status()["torpid"], "");
    assert_eq!(d.status()["online"], "0-6");

    // A stalled leaf turns torpid through the relays, then lively.
    l3.signal(libc::SIGSTOP);
    d.wait_status("torpid", "3", 4.0);
    l3.signal(libc::SIGCONT);
    d.wait_status("torpid", "", 3.0);

    // kill -9 of a mid relay: exactly its subtree (1, 3, 4) goes offline.
    r1.kill();
    let t = d.wait_status("online", "0,2,5-6", 2.0);
    assert!(t < Duration::from_secs(2), "{t:?}");
    // Restarted: its leaves reconnect and the subtree is back.
    let r1b = relay(&s, &sock(&s, "fake0"), "fake1");
    d.wait_status("online", "0-6", 8.0);
    wait_log(&r1b, "joined as rank 1", 1.0);

    // A leaf moves: fake4 leaves relay 1 for relay 0 (an ancestor); a
    // relay it does not belong under refuses it.
    drop(_l4);
    d.wait_status("online", "0-3,5-6", 2.0);
    let mut wrong = leaf(&s, &sock(&s, "fake2"), "fake4");
    wait_log(
        &wrong,
        "host fake4 is not in the subtree of the relay at rank 2 (fake2)",
        5.0,
    );
    wrong.kill();
    let _l4b = leaf(&s, &sock(&s, "fake0"), "fake4");
    d.wait_status("online", "0-6", 5.0);
    // No verification drains: every node reported cores 0-3.
    assert_eq!(d.status()["drain"], json!({}));

    // kill -9 of the top relay: everything offline at once.
    drop(r0);
    d.wait_status("online", "", 2.0);
}

#[test]
fn relay_reconnects_to_a_restarted_service_and_reannounces() {
    let s = Scratch::new("relay-restart-service");
    let cfg = config(3, "");
    let mut d = start(&s, &cfg, &[]);
    let _r0 = relay(&s, &d.uri, "fake0");
    let _l1 = leaf(&s, &sock(&s, "fake0"), "fake1");
    let _l2 = leaf(&s, &sock(&s, "fake0"), "fake2");
    d.wait_status("online", "0-2", 10.0);
    d.stop();
    let d = start(&s, &cfg, &[]);
    // The leaves never left the relay; the relay announces them again.
    d.wait_status("online", "0-2", 10.0);
}

#[test]
fn verification_drain_reaches_the_leaf_through_the_relay() {
    let s = Scratch::new("relay-verify");
    let d = start(&s, &config(3, ""), &[]);
    let _r0 = relay(&s, &d.uri, "fake0");
    let l1 = Agent::spawn(
        &s,
        "fake1-leaf",
        &[
            "--uri",
            &sock(&s, "fake0"),
            "--hostname",
            "fake1",
            "--cores",
            "0-1",
        ],
    );
    d.wait_status("online", "0-1", 10.0);
    let st = d.status();
    assert_eq!(
        st["drain"]["1"]["reason"], "rank 1 (fake1) missing resources: core[2-3]",
        "{st}"
    );
    wait_log(
        &l1,
        "fake1 is drained: rank 1 (fake1) missing resources: core[2-3]",
        5.0,
    );
}

/// `roster agent --simulate hosts --relays N --cores 0-3` against `d`,
/// its `stall` and `stall-after` options as given.
fn simulate(
    s: &Scratch,
    d: &Daemon,
    hosts: &str,
    relays: &str,
    [stall, after]: [&str; 2],
) -> Agent {
    let args = [
        "--uri",
        &d.uri,
        "--simulate",
        hosts,
        "--relays",
        relays,
        "--cores",
        "0-3",
    ];
    let stalls = ["--stall", stall, "--stall-after", after];
    Agent::spawn(s, "sim", &[&args[..], &stalls].concat())
}

#[test]
fn simulator_relays_in_one_process() {
    let s = Scratch::new("relay-sim");
    let d = start(
        &s,
        "[resource]\ntorpid-max = \"2s\"\n[serve]\nrelay-fanout = 4\n[[resource.config]]\nhosts = \"sim[0-999]\"\ncores = \"0-3\"\n",
        &[],
    );
    let spawned = Instant::now();
    let mut sim = simulate(&s, &d, "sim[0-999]", "21", ["500-599", "5"]);
    d.wait_status("online", "0-999", 20.0);
    // 100 stalled leaves (below 3 relays of 21) turn torpid together at
    // torpid-max after they stall (5 s after the simulator started, plus
    // its start-up): the relays time them and report the idset.
    assert!(
        spawned.elapsed() < Duration::from_secs(5),
        "too slow to come online to time the stall"
    );
    let t = spawned.elapsed() + d.wait_status("torpid", "500-599", 10.0);
    eprintln!(
        "100 stalled leaves torpid {:.2} s after the stall",
        t.as_secs_f64() - 5.0
    );
    assert!(
        t > Duration::from_secs(6) && t < Duration::from_millis(8500),
        "torpid {t:?} after start, wanted 7 s +/- 1 s (+ start-up)"
    );
    assert_eq!(d.status()["drain"], json!({}));
    sim.kill();
    d.wait_status("online", "", 3.0);
    assert_contains(&sim.log_text(), "all 1000 agents joined");
}

/// The acceptance figures at full scale (slow; `ROSTER_SCALE_TESTS=1`,
/// best in `--release`).  `bench/relays.sh` measures the same with
/// timings and a relay killed in a process of its own.
#[test]
fn scale_131072_nodes_through_relays() {
    if !opted_in("ROSTER_SCALE_TESTS") {
        return;
    }
    let s = Scratch::new("relay-scale");
    let cfg = "[resource]\ntorpid-max = \"5s\"\noffline-timeout = \"120s\"\n[[resource.config]]\nhosts = \"sim[0-131071]\"\ncores = \"0-3\"\n";
    let d = start(&s, cfg, &[]);
    let mut sim = simulate(&s, &d, "sim[0-131071]", "129", ["20000-20099", "12"]);
    let t = d.wait_status("online", "0-131071", 10.0);
    eprintln!("all online after {t:?}");
    d.wait_status("torpid", "20000-20099", 25.0);
    sim.kill();
    let t = d.wait_status("online", "", 2.0);
    eprintln!("all offline after {t:?}");
}

/// `pki` in `s`: a CA, certificates for `nodes` and relay certificates
/// for `relays` (all also for 127.0.0.1); its path.
fn relay_pki(s: &Scratch, nodes: &str, relays: &str) -> String {
    let pki = s.path("pki").display().to_string();
    ca(&["init", &pki]);
    ca(&["issue", &pki, nodes, "--san", "127.0.0.1"]);
    ca(&[
        "issue",
        &pki,
        relays,
        "--role",
        "relay",
        "--san",
        "127.0.0.1",
    ]);
    pki
}

/// `--ca`, `--cert`, `--key` of `who`.
fn tls_args(s: &Scratch, who: &str) -> Vec<String> {
    let pki = |f: String| s.path(&format!("pki/{f}")).display().to_string();
    vec![
        "--ca".into(),
        pki("ca.pem".into()),
        "--cert".into(),
        pki(format!("{who}.pem")),
        "--key".into(),
        pki(format!("{who}.key")),
    ]
}

#[test]
fn relays_listen_on_tls_and_check_each_childs_certificate() {
    // kary:2 over 7 ranks: 0 -> 1,2; 2 -> 5,6.  The service and the
    // relays speak TLS; every node has its own certificate.
    let s = Scratch::new("relay-tls");
    // the relays' certificates carry the relay role
    let pki = relay_pki(&s, "localhost,fake[1,3-6]", "fake[0,2]");
    let port = free_port();
    let cfg = format!(
        "[resource]\ntorpid-max = \"2s\"\n[serve]\nrelay-fanout = 2\ntls-cert = \"{pki}/localhost.pem\"\n\
         tls-key = \"{pki}/localhost.key\"\ntls-client-ca = \"{pki}/ca.pem\"\n\
         [[resource.config]]\nhosts = \"fake[0-6]\"\ncores = \"0-3\"\n"
    );
    let d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
    let service = format!("tls://localhost:{port}");
    let node = |name: &str, who: &str, uri: &str, extra: &[&str]| {
        let mut a: Vec<String> = vec!["--uri".into(), uri.into()];
        a.extend(tls_args(&s, who));
        a.extend(
            ["--hostname", name, "--cores", "0-3", "--heartbeat", "0.2"]
                .iter()
                .map(|x| x.to_string()),
        );
        a.extend(extra.iter().map(|x| x.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        Agent::spawn(&s, &format!("{name}-as-{who}"), &a)
    };
    let p0 = free_port();
    let relay0 = format!("tls://127.0.0.1:{p0}");
    let listen0 = format!("tls://127.0.0.1:{p0}");
    let r0 = node(
        "fake0",
        "fake0",
        &service,
        &["--relay", "--listen", &listen0],
    );
    let r2 = node(
        "fake2",
        "fake2",
        &relay0,
        &["--relay", "--listen", &sock(&s, "fake2")],
    );
    let l1 = node("fake1", "fake1", &relay0, &[]);
    let _l5 = node("fake5", "fake5", &sock(&s, "fake2"), &[]);
    d.wait_status("online", "0-2,5", 15.0);
    wait_log(
        &r0,
        "fake0 joined as rank 0 (relay for up to 6 ranks below it)",
        1.0,
    );
    wait_log(
        &r2,
        "fake2 joined as rank 2 (relay for up to 2 ranks below it)",
        1.0,
    );
    wait_log(&l1, "fake1 joined as rank 1", 1.0);
    // fake1's certificate cannot speak for fake6 (in fake0's subtree):
    // refused for good by the relay, the agent stops.
    let mut liar = node("fake6", "fake1", &relay0, &[]);
    wait_log(
        &liar,
        "the certificate of fake1 may not speak for host fake6",
        10.0,
    );
    let st = liar.wait();
    assert!(!st.success());
    assert_eq!(d.status()["online"], "0-2,5");
    // A stalled leaf behind the TLS relay: torpid at torpid-max (2 s)
    // after its last heartbeat (0.2 s period), +/- 1 s.
    l1.signal(libc::SIGSTOP);
    let t = d.wait_status("torpid", "1", 5.0);
    eprintln!("stalled leaf torpid after {:.2} s", t.as_secs_f64());
    assert!(
        t > Duration::from_secs(1) && t < Duration::from_secs(3),
        "{t:?}"
    );
    l1.signal(libc::SIGCONT);
    d.wait_status("torpid", "", 3.0);
    // Plain TCP off loopback stays refused for a relay's children (with
    // a token); tls:// without this node's certificate: a clear refusal.
    let token = token_file(&s);
    let plain = format!("tcp://0.0.0.0:{}", free_port());
    let tls = format!("tls://127.0.0.1:{}", free_port());
    let with_token = ["--token-file", token.to_str().unwrap()];
    for (name, auth, listen, refusal) in [
        (
            "plain",
            &with_token[..],
            &plain,
            "plain TCP is only allowed on loopback addresses",
        ),
        (
            "nocert",
            &[],
            &tls,
            "a relay's TLS listener presents this node's certificate",
        ),
    ] {
        let relay = [
            "--hostname",
            "fake3",
            "--cores",
            "0-3",
            "--relay",
            "--listen",
            listen,
        ];
        let mut a = Agent::spawn(&s, name, &[&["--uri", &d.uri], auth, &relay].concat());
        assert!(!a.wait().success(), "{name}");
        assert!(a.log_text().contains(refusal), "{name}: {}", a.log_text());
    }
}

/// An agent certificate's relay hello is refused (EPERM naming the role)
/// and brings no other host online; a relay certificate's is accepted,
/// and the events for its children name it.
#[test]
fn an_agent_certificate_may_not_relay() {
    let s = Scratch::new("relay-role");
    let pki = s.path("pki").display().to_string();
    ca(&["init", &pki]);
    ca(&["issue", &pki, "localhost,fake[0-6]", "--san", "127.0.0.1"]);
    let port = free_port();
    let cfg = format!(
        "[serve]\nrelay-fanout = 2\ntls-cert = \"{pki}/localhost.pem\"\n\
         tls-key = \"{pki}/localhost.key\"\ntls-client-ca = \"{pki}/ca.pem\"\n\
         [[resource.config]]\nhosts = \"fake[0-6]\"\ncores = \"0-3\"\n"
    );
    let d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
    let service = format!("tls://localhost:{port}");
    let relay1 = |name: &str| {
        let mut a: Vec<String> = vec!["--uri".into(), service.clone()];
        a.extend(tls_args(&s, "fake1"));
        let listen = sock(&s, "fake1");
        a.extend(
            [
                "--hostname",
                "fake1",
                "--cores",
                "0-3",
                "--heartbeat",
                "0.2",
            ]
            .iter()
            .chain(["--relay", "--listen", listen.as_str()].iter())
            .map(|x| x.to_string()),
        );
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        Agent::spawn(&s, name, &a)
    };
    let mut bad = relay1("fake1-agent-cert");
    let _leaf = leaf(&s, &sock(&s, "fake1"), "fake3");
    let st = bad.wait();
    assert!(!st.success());
    let msg =
        "a relay session requires the relay role: the certificate of fake1 has the agent role";
    assert!(bad.log_text().contains(msg), "{}", bad.log_text());
    assert!(d.log_text().contains(msg), "{}", d.log_text());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.status()["online"], "");
    let log = d.ok(&["eventlog"]);
    assert!(!log.lines().any(|l| l.contains(" online ")), "{log}");
    // With the relay role (a certificate issued again): accepted, and
    // fake3's online event names its relay.
    ca(&[
        "issue",
        &pki,
        "fake1",
        "--role",
        "relay",
        "--san",
        "127.0.0.1",
        "--force",
    ]);
    let _good = relay1("fake1-relay-cert");
    let _leaf = leaf(&s, &sock(&s, "fake1"), "fake3");
    d.wait_status("online", "1,3", 15.0);
    let log = d.ok(&["eventlog"]);
    let online: Vec<&str> = log.lines().filter(|l| l.contains(" online ")).collect();
    assert!(
        online.iter().any(|l| l.contains(r#"relays={"fake1":"3"}"#)),
        "{log}"
    );
}

/// A relay's tls:// listener checks its children's certificates against
/// `--crl` (a revoked node key cannot join through a relay either), and
/// re-reads the list on SIGHUP.
#[test]
fn a_relay_refuses_revoked_children_after_sighup() {
    let s = Scratch::new("relay-crl");
    let pki = relay_pki(&s, "localhost,fake[1-6]", "fake0");
    ca(&["revoke", &pki, "fake1"]);
    let port = free_port();
    let cfg = format!(
        "[serve]\ntls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n\
         tls-client-ca = \"{pki}/ca.pem\"\n[[resource.config]]\nhosts = \"fake[0-6]\"\ncores = \"0-3\"\n"
    );
    let d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
    let relay0 = format!("tls://127.0.0.1:{}", free_port());
    let node = |name: &str, uri: &str, extra: &[&str]| {
        let mut a: Vec<String> = vec!["--uri".into(), uri.into()];
        a.extend(tls_args(&s, name));
        a.extend(
            ["--hostname", name, "--cores", "0-3", "--heartbeat", "0.2"]
                .iter()
                .chain(extra.iter())
                .map(|x| x.to_string()),
        );
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        Agent::spawn(&s, name, &a)
    };
    let crl = format!("{pki}/ca.crl");
    let r0 = node(
        "fake0",
        &format!("tls://localhost:{port}"),
        &["--relay", "--listen", &relay0, "--crl", &crl],
    );
    wait_log(&r0, "fake0 joined as rank 0", 15.0);
    let _l1 = node("fake1", &relay0, &[]);
    let _l2 = node("fake2", &relay0, &[]);
    d.wait_status("online", "0,2", 15.0);
    wait_log(&r0, "TLS handshake failed", 5.0);
    // fake3's key is revoked while the relay runs: SIGHUP
    ca(&["revoke", &pki, "fake3"]);
    r0.signal(libc::SIGHUP);
    wait_log(&r0, "SIGHUP: re-read", 5.0);
    let _l3 = node("fake3", &relay0, &[]);
    let _l4 = node("fake4", &relay0, &[]);
    d.wait_status("online", "0,2,4", 15.0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.status()["online"], "0,2,4");
}

#[test]
fn relay_follows_a_server_list_whose_first_is_dead() {
    let s = Scratch::new("relay-list");
    let d = start(&s, &config(3, ""), &[]);
    let dead = sock(&s, "dead");
    let list = format!("{dead},{}", d.uri);
    let r0 = relay(&s, &list, "fake0");
    let _l1 = leaf(&s, &sock(&s, "fake0"), "fake1");
    d.wait_status("online", "0-1", 10.0);
    wait_log(&r0, "fake0 joined as rank 0", 1.0);
}

#[test]
fn relay_moves_to_the_next_server_and_announces_its_children_again() {
    let s1 = Scratch::new("relay-failover-a");
    let s2 = Scratch::new("relay-failover-b");
    let mut a = start(&s1, &config(3, ""), &[]);
    let b_uri = format!("unix://{}", s2.path("roster.sock").display());
    let list = format!("{},{b_uri}", a.uri);
    let _r0 = relay(&s1, &list, "fake0");
    let _l1 = leaf(&s1, &sock(&s1, "fake0"), "fake1");
    let _l2 = leaf(&s1, &sock(&s1, "fake0"), "fake2");
    a.wait_status("online", "0-2", 10.0);
    // The first server goes away for good; the second takes over: the
    // relay moves there with its children (which never left it).
    a.stop();
    let b = start(&s2, &config(3, ""), &[]);
    assert_eq!(b.uri, b_uri);
    b.wait_status("online", "0-2", 10.0);
}

/// A standby of a highly available service, as far as a relay can tell:
/// every request is answered EAGAIN "not the leader; the leader is URI".
/// Returns how many hellos it turned away.
fn fake_standby(
    path: std::path::PathBuf,
    leader: String,
) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use std::io::{BufRead, BufReader, Write};
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&n);
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|k| k > 0) && line != "\r\n" {
                line.clear();
            }
            let body =
                json!({"errnum": 11, "errstr": format!("not the leader; the leader is {leader}")})
                    .to_string();
            let _ = write!(
                c,
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    n
}

#[test]
fn relay_follows_a_standbys_redirect_to_the_leader() {
    let s = Scratch::new("relay-redirect");
    let d = start(&s, &config(3, ""), &[]);
    let standby = s.path("standby.sock");
    let turned = fake_standby(standby.clone(), d.uri.clone());
    let r0 = relay(&s, &format!("unix://{}", standby.display()), "fake0");
    let _l1 = leaf(&s, &sock(&s, "fake0"), "fake1");
    let _l2 = leaf(&s, &sock(&s, "fake0"), "fake2");
    d.wait_status("online", "0-2", 10.0);
    wait_log(&r0, "fake0 joined as rank 0", 1.0);
    assert_eq!(turned.load(std::sync::atomic::Ordering::Relaxed), 1);
}
