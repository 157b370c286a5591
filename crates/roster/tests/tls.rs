//! A secured cluster on loopback, end to end with the real binaries:
//! `roster serve ca init|issue` makes the PKI, `roster serve` listens on
//! `tls://` with client certificates, `roster agent` joins with its own
//! certificate; identities and roles are enforced.

mod common;

use common::*;
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Site {
    s: Scratch,
    d: Daemon,
    tls_uri: String,
}

impl Site {
    fn pki(&self, f: &str) -> String {
        self.s.path(&format!("pki/{f}")).display().to_string()
    }

    fn agent(&self, cert: &str, host: &str) -> Agent {
        let (ca, pem, key) = (
            self.pki("ca.pem"),
            self.pki(&format!("{cert}.pem")),
            self.pki(&format!("{cert}.key")),
        );
        let args = [
            "--uri",
            &self.tls_uri,
            "--ca",
            &ca,
            "--cert",
            &pem,
            "--key",
            &key,
        ];
        let rest = ["--hostname", host, "--cores", "0-3", "--heartbeat", "0.2"];
        Agent::spawn(
            &self.s,
            &format!("agent-{cert}-{host}"),
            &[&args[..], &rest].concat(),
        )
    }

    /// A client presenting `who`'s certificate.
    fn client(&self, who: &str) -> client::blocking::Client {
        let cert = self.s.path(&format!("pki/{who}.pem"));
        let key = self.s.path(&format!("pki/{who}.key"));
        let cfg = tls::client_config(&self.s.path("pki/ca.pem"), Some((&cert, &key))).unwrap();
        let uri = rpc::uri::Uri::parse(&self.tls_uri).unwrap();
        client::blocking::Client::from_async(client::Client::new(uri).with_tls(Arc::clone(&cfg)))
    }

    fn online(&self) -> Value {
        self.d.status()["online"].clone()
    }

    fn wait_online(&self, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.online() != want {
            assert!(
                Instant::now() < deadline,
                "online is {}, wanted {want}; log:\n{}",
                self.online(),
                self.d.log_text()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

fn site(name: &str) -> Site {
    site_with(name, "noverify = true\n")
}

fn site_with(name: &str, resource: &str) -> Site {
    site_crl(name, resource, false)
}

/// With `crl`: bob's certificate is revoked before the start and the
/// service reads `pki/ca.crl` (`[serve] tls-crl`).
fn site_crl(name: &str, resource: &str, crl: bool) -> Site {
    let s = Scratch::new(name);
    let pki = s.path("pki");
    let pki = pki.to_str().unwrap();
    ca(&["init", pki]);
    let out = ca(&["issue", pki, "localhost,fake[0-2]", "--san", "127.0.0.1"]);
    assert_eq!(out.lines().count(), 4, "{out}");
    ca(&["issue", pki, "sched,sched2", "--role", "scheduler"]);
    ca(&["issue", pki, "alice", "--role", "admin"]);
    ca(&["issue", pki, "bob", "--role", "user"]);
    let crl_line = if crl {
        let out = ca(&["revoke", pki, "bob"]);
        assert!(out.contains("bob (serial "), "{out}");
        format!("tls-crl = \"{pki}/ca.crl\"\n")
    } else {
        String::new()
    };
    let port = free_port();
    let tls_uri = format!("tls://localhost:{port}");
    let listen = format!("tls://127.0.0.1:{port}");
    let cfg = format!(
        "[resource]\n{resource}torpid-max = \"2s\"\n[[resource.config]]\nhosts = \"fake[0-2]\"\ncores = \"0-3\"\n\
         [serve]\ntls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\ntls-client-ca = \"{pki}/ca.pem\"\n{crl_line}"
    );
    let d = start(&s, &cfg, &["--listen", &listen]);
    Site { s, d, tls_uri }
}

#[test]
fn agents_join_with_their_own_certificate_only() {
    let site = site("tls-agents");
    // An agent with its own certificate joins.
    let _a0 = site.agent("fake0", "fake0");
    site.wait_online("0");
    // fake1's certificate claiming fake2: refused, logged on both sides,
    // and the agent stops (a permanent refusal).
    let mut bad = site.agent("fake1", "fake2");
    assert_eq!(bad.wait().code(), Some(1));
    let msg = "the certificate of fake1 may not speak for host fake2";
    assert!(bad.log_text().contains(msg), "{}", bad.log_text());
    assert!(site.d.log_text().contains(msg), "{}", site.d.log_text());
    assert_eq!(site.online(), "0");
    // fake1's own agent still joins.
    let _a1 = site.agent("fake1", "fake1");
    site.wait_online("0-1");
}

/// `roster serve ca revoke` and `[serve] tls-crl`: a revoked certificate
/// is refused at the handshake; one revoked while the service runs is
/// refused once SIGHUP made it re-read the list, without a restart.
#[test]
fn revoked_certificates_are_refused_after_sighup() {
    let site = site_crl("tls-crl", "noverify = true\n", true);
    let handshake_failures = || site.d.log_text().matches("TLS handshake failed").count();
    // the client may see the refusal before the service logs it
    let wait_failures = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while handshake_failures() < n {
            assert!(Instant::now() < deadline, "{}", site.d.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(handshake_failures(), n, "{}", site.d.log_text());
    };
    // bob was revoked before the start.
    let e = site
        .client("bob")
        .rpc("resource.status", json!({}))
        .unwrap_err();
    assert!(!e.to_string().contains("requires"), "{e}");
    wait_failures(1);
    assert!(
        site.d.log_text().contains("Revoked"),
        "{}",
        site.d.log_text()
    );
    // fake1's agent joins; its key is then reported stolen.
    let mut a1 = site.agent("fake1", "fake1");
    site.wait_online("1");
    let out = ca(&["revoke", &site.pki(""), "fake1"]);
    assert!(out.contains("2 certificate(s) listed"), "{out}");
    // Not re-read yet: a new connection with it still gets through the
    // handshake (and its role's refusal).
    let e = site
        .client("fake1")
        .rpc("resource.drain", json!({"targets": "0"}))
        .unwrap_err();
    assert!(e.to_string().contains("requires the admin role"), "{e}");
    let pid = site.d.child.as_ref().unwrap().id() as i32;
    signal(pid, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !site.d.log_text().contains("SIGHUP: re-read") {
        assert!(Instant::now() < deadline, "{}", site.d.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = handshake_failures();
    let e = site
        .client("fake1")
        .rpc("resource.drain", json!({"targets": "0"}))
        .unwrap_err();
    assert!(!e.to_string().contains("requires"), "{e}");
    wait_failures(before + 1);
    // The agent's next connection is refused too: kill it, it stays
    // offline, while fake0 (not revoked) still joins.
    a1.kill();
    site.wait_online("");
    let _a1 = site.agent("fake1", "fake1");
    let _a0 = site.agent("fake0", "fake0");
    site.wait_online("0");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(site.online(), "0");
}

/// `roster serve ca renew`: a renewed certificate keeps its name and
/// role (an admin stays an admin, an agent still joins as its host),
/// with a new serial number; the key is kept unless `--new-key`; the
/// CA's own files are refused as `issue` refuses them.
#[test]
fn renewed_certificates_keep_their_name_and_role() {
    let site = site("tls-renew");
    let pki = site.pki("");
    let pem = std::fs::read(site.pki("alice.pem")).unwrap();
    let key = std::fs::read(site.pki("alice.key")).unwrap();
    let out = ca(&["renew", &pki, "alice", "--days", "30"]);
    assert!(out.contains("same key, valid 30 day(s)"), "{out}");
    assert_ne!(std::fs::read(site.pki("alice.pem")).unwrap(), pem);
    assert_eq!(std::fs::read(site.pki("alice.key")).unwrap(), key);
    site.client("alice")
        .rpc(
            "resource.drain",
            json!({"targets": "2", "reason": "renewed"}),
        )
        .unwrap();
    let key0 = std::fs::read(site.pki("fake0.key")).unwrap();
    let out = ca(&["renew", &pki, "fake0", "--new-key", "--days", "2"]);
    assert!(out.contains("new key"), "{out}");
    assert_ne!(std::fs::read(site.pki("fake0.key")).unwrap(), key0);
    let _a0 = site.agent("fake0", "fake0");
    site.wait_online("0");
    // the renewed agent certificate is still an agent's: no drain
    let e = site
        .client("fake0")
        .rpc("resource.drain", json!({"targets": "1"}))
        .unwrap_err();
    assert!(e.to_string().contains("requires the admin role"), "{e}");
    let ca_key = std::fs::read(site.pki("ca.key")).unwrap();
    for name in ["ca", "nobody"] {
        let o = roster()
            .args(["serve", "ca", "renew", &pki, name])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        let want = if name == "ca" {
            "roster serve ca: 'ca' would overwrite the certificate authority's own certificate: choose another name"
        } else {
            "no certificate issued to 'nobody' there"
        };
        assert!(err.contains(want), "{err}");
    }
    assert_eq!(std::fs::read(site.pki("ca.key")).unwrap(), ca_key);
}

#[test]
fn verification_self_drain_still_works_for_its_own_rank() {
    let site = site_with("tls-verify", "");
    // fake1 reports 2 cores where 4 are configured: its rank is drained
    // by the service itself, although the agent may not drain.
    let log = site.s.path("agent-verify.log");
    let mut child = roster()
        .args(["agent", "--uri", &site.tls_uri])
        .args(["--ca", &site.pki("ca.pem")])
        .args([
            "--cert",
            &site.pki("fake1.pem"),
            "--key",
            &site.pki("fake1.key"),
        ])
        .args([
            "--hostname",
            "fake1",
            "--cores",
            "0-1",
            "--heartbeat",
            "0.2",
        ])
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let st = site.d.status();
        if st["drain"].get("1").is_some() {
            let reason = st["drain"]["1"]["reason"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(reason.contains("core"), "{st}");
            break;
        }
        assert!(Instant::now() < deadline, "not drained: {st}");
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn roles_from_certificates() {
    let site = site("tls-roles");
    let drain = json!({"targets": "1", "reason": "fan"});
    // An agent certificate can do nothing but its own session.
    for (topic, payload) in [
        ("resource.drain", drain.clone()),
        ("resource.status", json!({})),
        ("resource.reload", json!({})),
    ] {
        let e = site.client("fake0").rpc(topic, payload).unwrap_err();
        assert_eq!(e.errnum(), rpc::errno::EPERM, "{topic}: {e}");
        assert!(
            e.to_string().contains("this client is the agent of fake0"),
            "{e}"
        );
    }
    // A scheduler can acquire but not drain.
    let sched = site.client("sched");
    let mut acq = sched.stream("resource.acquire", json!({})).unwrap();
    let first = acq.next().unwrap().unwrap();
    assert!(first.get("resources").is_some(), "{first}");
    drop(acq);
    let e = sched.rpc("resource.drain", drain.clone()).unwrap_err();
    assert_eq!(e.errnum(), rpc::errno::EPERM);
    assert_eq!(
        e.to_string(),
        "resource.drain requires the admin role (this client has the scheduler role)"
    );
    // A user reads (status, journal) but changes nothing.
    let bob = site.client("bob");
    assert!(bob.rpc("resource.status", json!({})).is_ok());
    let e = bob.rpc("resource.acquire-mute", json!({})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "resource.acquire-mute requires the scheduler role (this client has the user role)"
    );
    // An admin drains.
    site.client("alice")
        .rpc("resource.drain", drain)
        .expect("admin drains");
    let st = site.d.status();
    assert!(st["drain"].to_string().contains("fan"), "{st}");
    // ...and is recorded by its certificate's name (issue 28 item 7).
    let stored = stored_events(&site.s.statedir());
    let last = stored.last().unwrap();
    assert_eq!(last["context"]["requester"], "cert:alice", "{last}");
    // Through the CLI, with the environment variables.
    let o = roster()
        .args(["resource", "drain", "2", "x"])
        .env("ROSTER_URI", &site.tls_uri)
        .env("ROSTER_CA", site.pki("ca.pem"))
        .env("ROSTER_CERT", site.pki("sched.pem"))
        .env("ROSTER_KEY", site.pki("sched.key"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("requires the admin role"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn plain_tcp_off_loopback_is_refused_at_start_up() {
    let s = Scratch::new("tls-plain-tcp");
    let token = token_file(&s);
    let listen = format!("tcp://0.0.0.0:{}", free_port());
    let log = start_refused(
        &s,
        &fake_config(2, ""),
        &["--listen", &listen, "--token-file", token.to_str().unwrap()],
    );
    assert!(
        log.contains("plain TCP is only allowed on loopback addresses")
            && log.contains("use tls://0.0.0.0:"),
        "{log}"
    );
}

impl Site {
    /// `roster resource --uri tls://… --ca … [--cert WHO.pem --key WHO.key]
    /// ARGS…` with the TLS files given only as flags (the environment
    /// variables removed).
    fn cli(&self, who: Option<&str>, args: &[&str]) -> std::process::Command {
        let mut c = roster();
        c.args([
            "resource",
            "--uri",
            &self.tls_uri,
            "--ca",
            &self.pki("ca.pem"),
        ]);
        if let Some(who) = who {
            c.args(["--cert", &self.pki(&format!("{who}.pem"))]);
            c.args(["--key", &self.pki(&format!("{who}.key"))]);
        }
        c.args(args)
            .env_remove("ROSTER_URI")
            .env_remove("ROSTER_CA")
            .env_remove("ROSTER_CERT")
            .env_remove("ROSTER_KEY")
            .env_remove("ROSTER_TOKEN_FILE")
            .stdin(Stdio::null());
        c
    }

    /// `acquire` as `who`, running, and the lines it prints.
    fn acquire(&self, who: &str) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
        let mut c = self.cli(Some(who), &["acquire"]);
        let mut acq = c.stdout(Stdio::piped()).spawn().unwrap();
        let lines = line_channel(acq.stdout.take().unwrap());
        (acq, lines)
    }

    /// [`Site::cli`], which must succeed; its stdout.
    fn cli_ok(&self, who: Option<&str>, args: &[&str]) -> String {
        let o = self.cli(who, args).output().unwrap();
        assert!(
            o.status.success(),
            "{who:?} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// [`Site::cli`], which must fail; its exit code and stderr.
    fn cli_fails(&self, who: Option<&str>, args: &[&str]) -> (i32, String) {
        let o = self.cli(who, args).output().unwrap();
        assert!(!o.status.success(), "{who:?} {args:?} succeeded");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

#[test]
fn every_resource_command_reaches_a_tls_service_with_flags() {
    let site = site("tls-cli-flags");
    let _a0 = site.agent("fake0", "fake0");
    site.wait_online("0");

    // A user reads everything.
    let out = site.cli_ok(Some("bob"), &["status", "-no", "{state} {nnodes}"]);
    assert_eq!(out, "avail 1\navail* 2\n");
    let out = site.cli_ok(Some("bob"), &["list", "-no", "{nnodes}"]);
    assert!(out.contains('3'), "{out}");
    let out = site.cli_ok(Some("bob"), &["info"]);
    assert!(out.contains("3 Nodes"), "{out}");
    let out = site.cli_ok(Some("bob"), &["R"]);
    assert!(out.contains("\"R_lite\""), "{out}");
    site.cli_ok(Some("bob"), &["drain"]);
    let out = site.cli_ok(Some("bob"), &["eventlog"]);
    assert!(out.contains("resource-define"), "{out}");
    // ... and may change nothing: the refusal names the role needed.
    let (code, err) = site.cli_fails(Some("bob"), &["drain", "1", "fan"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("resource.drain requires the admin role (this client has the user role)"),
        "{err}"
    );

    // An admin drains, undrains and reloads.
    site.cli_ok(Some("alice"), &["drain", "1", "fan"]);
    let out = site.cli_ok(Some("bob"), &["drain", "-no", "{ranks} {reason}"]);
    assert!(out.contains("1 fan"), "{out}");
    site.cli_ok(Some("alice"), &["undrain", "1"]);
    let out = site.cli_ok(Some("bob"), &["drain", "-no", "{ranks}"]);
    assert!(!out.contains('1'), "{out}");
    // reload: the role is granted (the path is then refused as missing).
    let (_, err) = site.cli_fails(Some("alice"), &["reload", "/nonexistent/R.json"]);
    assert!(!err.contains("requires the"), "{err}");
    assert!(err.contains("/nonexistent/R.json"), "{err}");
    let (_, err) = site.cli_fails(Some("sched"), &["reload", "/nonexistent/R.json"]);
    assert!(
        err.contains("resource.reload requires the admin role"),
        "{err}"
    );

    // A scheduler acquires, mutes, sets groups; the first response of
    // acquire is the whole resource set.
    let (mut acq, rx) = site.acquire("sched");
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let _ = acq.kill();
    let _ = acq.wait();
    let v: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
    assert!(v.get("resources").is_some(), "{v}");
    site.cli_ok(Some("sched"), &["acquire-mute"]);
    let (_, err) = site.cli_fails(Some("alice"), &["acquire-mute"]);
    assert!(
        err.contains("resource.acquire-mute requires the scheduler role"),
        "{err}"
    );

    // Without a certificate (nor token): no role at all; the refusal
    // still names the role the request needs.
    let (_, err) = site.cli_fails(None, &["status"]);
    assert!(
        err.contains(
            "resource.status requires the user role: authentication required: \
             present a client certificate or a bearer token"
        ),
        "{err}"
    );
    let (_, err) = site.cli_fails(None, &["drain", "1", "x"]);
    assert!(
        err.contains("[Errno 1] resource.drain requires the admin role: authentication required"),
        "{err}"
    );
    // An agent certificate speaks only for its own session.
    let (_, err) = site.cli_fails(Some("fake0"), &["status"]);
    assert!(err.contains("this client is the agent of fake0"), "{err}");

    // The flags win over the environment.
    let o = site
        .cli(Some("alice"), &["drain", "2", "flag-wins"])
        .env("ROSTER_CERT", site.pki("bob.pem"))
        .env("ROSTER_KEY", site.pki("bob.key"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Stream controls act on the caller's own streams: another scheduler's
/// `acquire-mute` leaves the first scheduler's acquire stream flowing
/// (the cancels, by matchtag on the caller's connection: core tests).
#[test]
fn another_schedulers_mute_leaves_the_stream_flowing() {
    let site = site("tls-mute");
    let _a0 = site.agent("fake0", "fake0");
    site.wait_online("0");
    let (mut acq, rx) = site.acquire("sched");
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.contains("\"resources\""), "{first}");
    site.cli_ok(Some("sched2"), &["acquire-mute"]);
    site.cli_ok(Some("alice"), &["drain", "0", "fan"]);
    let update = rx.recv_timeout(Duration::from_secs(10));
    let _ = acq.kill();
    let _ = acq.wait();
    let update = update.expect("the acquire stream still flows after sched2's mute");
    assert!(update.contains("\"down\""), "{update}");
}

/// `openssl` with these arguments, in `dir`, which must succeed.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    output_ok(
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir),
    );
}

/// Certificates the site's CA (path length 0) never meant to allow,
/// made with openssl: an `OU=owner` certificate minted by a CA
/// certificate the site CA signed, and an admin certificate whose key
/// usage is keyEncipherment only.  Both are refused at the handshake.
#[test]
fn a_sub_ca_owner_and_a_key_encipherment_admin_are_refused() {
    let site = site("tls-policy");
    let pki = site.s.path("pki");
    std::fs::write(
        pki.join("ext.cnf"),
        "[sub]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,digitalSignature\n\
         [owner]\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage=clientAuth\nsubjectAltName=DNS:mallory\n\
         [kenc]\nbasicConstraints=CA:FALSE\nkeyUsage=critical,keyEncipherment\n\
         extendedKeyUsage=clientAuth\nsubjectAltName=DNS:kenc\n",
    )
    .unwrap();
    let key = |name: &str| {
        openssl(
            &pki,
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                &format!("{name}.key"),
            ],
        );
    };
    let sign = |name: &str, subj: &str, ca: &str, ext: &str| {
        key(name);
        openssl(
            &pki,
            &[
                "req",
                "-new",
                "-key",
                &format!("{name}.key"),
                "-subj",
                subj,
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            &pki,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
                "-extensions",
                ext,
                "-out",
                &format!("{name}.pem"),
            ],
        );
    };
    sign("sub", "/CN=sub", "ca", "sub");
    sign("mallory", "/CN=mallory/OU=owner", "sub", "owner");
    // the chain: mallory's certificate, then the sub-CA's
    let chain = [
        std::fs::read_to_string(pki.join("mallory.pem")).unwrap(),
        std::fs::read_to_string(pki.join("sub.pem")).unwrap(),
    ]
    .concat();
    std::fs::write(pki.join("mallory.pem"), chain).unwrap();
    sign("kenc", "/CN=kenc/OU=admin", "ca", "kenc");
    for (who, why) in [
        ("mallory", "the CA's path length allows 0"),
        ("kenc", "does not include digitalSignature"),
    ] {
        let e = site
            .client(who)
            .rpc("resource.drain", json!({"targets": "0", "reason": "x"}))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("requires"), "{who}: {e}");
        // the client may see the refusal before the service logs it
        let deadline = Instant::now() + Duration::from_secs(10);
        while !site.d.log_text().contains(why) {
            assert!(Instant::now() < deadline, "{who}: {}", site.d.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(site.d.status()["drain"]
        .as_object()
        .is_none_or(|d| d.is_empty()));
}

#[test]
fn resource_tls_flag_errors_are_precise() {
    let site = site("tls-cli-errors");
    let resource = |args: &[&str]| {
        let mut c = roster();
        c.args(["resource", "--uri", &site.tls_uri]).args(args);
        c
    };
    // No CA at all.
    let mut no_ca = resource(&["status"]);
    no_ca
        .env_remove("ROSTER_CA")
        .env_remove("ROSTER_CERT")
        .env_remove("ROSTER_KEY");
    // The wrong CA: the service's certificate is not trusted.
    let other = site.s.path("other");
    ca(&["init", other.to_str().unwrap()]);
    let other_ca = other.join("ca.pem");
    for (what, mut cmd, want) in [
        ("no CA", no_ca, "give --ca FILE or set ROSTER_CA"),
        (
            "a certificate without its key",
            site.cli(None, &["--cert", &site.pki("bob.pem"), "status"]),
            "needs its key too (--key or ROSTER_KEY)",
        ),
        (
            "a CA file that does not exist",
            resource(&["--ca", "/nonexistent/ca.pem", "status"]),
            "/nonexistent/ca.pem",
        ),
        (
            "the wrong CA",
            resource(&["--ca", other_ca.to_str().unwrap(), "status"]),
            "certificate",
        ),
    ] {
        let o: Out = cmd.output().unwrap().into();
        assert_eq!(o.code, 1, "{what}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{what}: {}", o.stderr);
    }
}

/// Per-agent enrolment (`[serve.auth] enrol-token-file`, `[serve]
/// enrol-ca`, `roster agent --enrol TOKEN --pki DIR`): the token obtains
/// the agent certificate of a host of R only, once (until an admin
/// revokes it), and nothing else; the agent then joins with it.
#[test]
fn an_agent_enrols_with_the_enrolment_token_then_joins() {
    let s = Scratch::new("tls-enrol");
    let pki = s.path("pki");
    let pki = pki.to_str().unwrap().to_string();
    ca(&["init", &pki]);
    ca(&[
        "issue",
        &pki,
        "localhost",
        "--san",
        "127.0.0.1",
        "--role",
        "owner",
    ]);
    let token = s.write("enrol.token", "enrol-s3cret\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = free_port();
    let uri = format!("tls://localhost:{port}");
    let cfg = format!(
        "[resource]\nnoverify = true\n[[resource.config]]\nhosts = \"fake[0-2]\"\ncores = \"0-3\"\n\
         [serve]\ntls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n\
         tls-client-ca = \"{pki}/ca.pem\"\nenrol-ca = \"{pki}\"\n\
         [serve.auth]\nenrol-token-file = \"{}\"\n",
        token.display()
    );
    let d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
    let spawn = |host: &str, dir: &str, name: &str| {
        let (pki_dir, ca) = (s.path(dir), format!("{pki}/ca.pem"));
        let enrol = [
            "--ca",
            &ca,
            "--enrol",
            token.to_str().unwrap(),
            "--pki",
            pki_dir.to_str().unwrap(),
        ];
        Agent::spawn(&s, name, &[&node_args(&uri, host)[..], &enrol].concat())
    };
    let online = || d.status()["online"].clone();
    let wait_online = |want: &str, a: &Agent| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while online() != want {
            assert!(
                Instant::now() < deadline,
                "online {}, wanted {want}:\n{}\n{}",
                online(),
                a.log_text(),
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    };
    // fake1 enrols, then joins with its new certificate
    let a1 = spawn("fake1", "node1-pki", "agent1");
    wait_online("1", &a1);
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&s.path("node1-pki/fake1.key")), 0o600);
    assert_eq!(mode(&s.path("node1-pki")), 0o700);
    assert!(s.path("pki/fake1.pem").is_file(), "the CA keeps a copy");
    assert!(
        d.log_text()
            .contains("enrolled the agent of fake1 for token:enrol"),
        "{}",
        d.log_text()
    );
    // it is an agent's certificate: no drain
    let cfg_tls = tls::client_config(
        &s.path("pki/ca.pem"),
        Some((
            &s.path("node1-pki/fake1.pem"),
            &s.path("node1-pki/fake1.key"),
        )),
    )
    .unwrap();
    let c = client::blocking::Client::from_async(
        client::Client::new(rpc::uri::Uri::parse(&uri).unwrap()).with_tls(cfg_tls),
    );
    let e = c
        .rpc("resource.drain", json!({"targets": "0"}))
        .unwrap_err();
    assert!(e.to_string().contains("requires the admin role"), "{e}");
    // the enrolment token reads nothing
    let o = roster()
        .args(["resource", "--uri", &uri, "--ca", &format!("{pki}/ca.pem")])
        .args(["--token-file", token.to_str().unwrap(), "status"])
        .env_remove("ROSTER_TOKEN_FILE")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("requires the user role"), "{err}");
    // a second enrolment of fake1 is refused; so is a host not in R
    for (host, dir, want) in [
        ("fake1", "again-pki", "fake1 is enrolled already"),
        (
            "nothere",
            "x-pki",
            "unknown host nothere: it is not in the nodelist of R",
        ),
    ] {
        let mut a = spawn(host, dir, &format!("agent-{dir}.log"));
        assert_eq!(a.wait().code(), Some(1), "{}", a.log_text());
        assert!(a.log_text().contains(want), "{}", a.log_text());
        assert!(!s.path(&format!("{dir}/{host}.key")).exists());
        assert!(d.log_text().contains(want), "{}", d.log_text());
    }
    // an admin revokes the first certificate: fake1 may enrol again
    ca(&["revoke", &pki, "fake1"]);
    drop(a1);
    let deadline = Instant::now() + Duration::from_secs(15);
    while online() != "" {
        assert!(Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(25));
    }
    let a1 = spawn("fake1", "again-pki", "agent1b");
    wait_online("1", &a1);
    assert!(s.path("again-pki/fake1.pem").is_file());
}
