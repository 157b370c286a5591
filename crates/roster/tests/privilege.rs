//! Least privilege (issue 25): file modes checked at start-up, the CA's
//! own files kept, the relay role, safe reload, stream controls scoped
//! to their caller.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `roster serve --check` with this configuration and these options:
/// (exit code, stderr).
fn check(s: &Scratch, cfg: &Path, args: &[&str]) -> (i32, String) {
    let o = roster()
        .arg("serve")
        .arg("--statedir")
        .arg(s.statedir())
        .arg("--config")
        .arg(cfg)
        .args(args)
        .arg("--check")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const CFG: &str = "[[resource.config]]\nhosts = \"fake[0-1]\"\ncores = \"0-1\"\n";

fn refusal(what: &str, p: &Path, mode: &str, fix: &str) -> String {
    format!(
        "{what} {0} is {1} (mode {mode}): run `chmod {fix} {0}`",
        p.display(),
        if fix == "go-w" {
            "writable by group or others"
        } else {
            "readable or writable by group or others"
        }
    )
}

#[test]
fn a_configuration_others_can_write_is_refused() {
    let s = Scratch::new("mode-config");
    let cfg = s.write("roster.toml", CFG);
    chmod(&cfg, 0o644);
    assert_eq!(check(&s, &cfg, &[]).0, 0);
    chmod(&cfg, 0o666);
    let (code, err) = check(&s, &cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&refusal("configuration", &cfg, "0666", "go-w")),
        "{err}"
    );
    // conf.d: one group-writable file is enough
    let d = s.path("conf.d");
    std::fs::create_dir(&d).unwrap();
    chmod(&d, 0o755);
    std::fs::write(d.join("a.toml"), CFG).unwrap();
    std::fs::write(d.join("b.toml"), "[resource]\nnoverify = true\n").unwrap();
    chmod(&d.join("a.toml"), 0o644);
    chmod(&d.join("b.toml"), 0o664);
    let (code, err) = check(&s, &d, &[]);
    assert_eq!(code, 1, "{err}");
    let b = d.join("b.toml");
    assert!(
        err.contains(&refusal("configuration file", &b, "0664", "go-w")),
        "{err}"
    );
    chmod(&b, 0o644);
    assert_eq!(check(&s, &d, &[]).0, 0);
}

#[test]
fn a_state_directory_others_can_write_is_refused() {
    let s = Scratch::new("mode-statedir");
    let cfg = s.write("roster.toml", CFG);
    chmod(&s.statedir(), 0o777);
    let (code, err) = check(&s, &cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&refusal("state directory", &s.statedir(), "0777", "go-w")),
        "{err}"
    );
    // and the daemon does not start either
    let e = start_refused(&s, CFG, &[]);
    assert!(e.contains("run `chmod go-w"), "{e}");
    chmod(&s.statedir(), 0o755);
    assert_eq!(check(&s, &cfg, &[]).0, 0);
}

#[test]
fn a_token_others_can_read_is_refused() {
    let s = Scratch::new("mode-token");
    let cfg = s.write("roster.toml", CFG);
    let tok = s.write("token", "secret\n");
    chmod(&tok, 0o620);
    let (code, err) = check(&s, &cfg, &["--token-file", tok.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("token file {}", tok.display())),
        "{err}"
    );
    assert!(err.contains("mode 0620 (chmod 600 it)"), "{err}");
    chmod(&tok, 0o600);
    assert_eq!(
        check(&s, &cfg, &["--token-file", tok.to_str().unwrap()]).0,
        0
    );
}

#[test]
fn a_tls_key_others_can_read_is_refused() {
    let s = Scratch::new("mode-key");
    let pki = s.path("pki");
    tls::ca::init(&pki, "Test CA", 2).unwrap();
    let issued = tls::ca::issue(&pki, &pki, &["localhost".into()], "agent", &[], 2).unwrap();
    let key = &issued[0].key;
    let cfg = s.write(
        "roster.toml",
        &format!(
            "{CFG}[serve]\ntls-cert = \"{}\"\ntls-key = \"{}\"\n",
            issued[0].cert.display(),
            key.display()
        ),
    );
    assert_eq!(check(&s, &cfg, &[]).0, 0);
    chmod(key, 0o644);
    let (code, err) = check(&s, &cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&refusal("TLS key", key, "0644", "go-rwx")),
        "{err}"
    );
}

/// `roster serve ca issue PKI ca` leaves the CA as it was; an existing
/// certificate is replaced only with --force.
#[test]
fn ca_issue_keeps_the_ca_and_existing_certificates() {
    let s = Scratch::new("ca-hygiene");
    let pki = s.path("pki");
    let pki = pki.to_str().unwrap();
    let ca = |args: &[&str]| {
        let o = roster().args(["serve", "ca"]).args(args).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(ca(&["init", pki]).0, 0);
    let key = std::fs::read(s.path("pki/ca.key")).unwrap();
    let cert = std::fs::read(s.path("pki/ca.pem")).unwrap();
    let (code, err) = ca(&["issue", pki, "ca", "--force"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "roster serve ca: 'ca' would overwrite the certificate authority's own certificate: choose another name"
    );
    assert_eq!(std::fs::read(s.path("pki/ca.key")).unwrap(), key);
    assert_eq!(std::fs::read(s.path("pki/ca.pem")).unwrap(), cert);
    assert_eq!(ca(&["issue", pki, "node1"]).0, 0);
    let n1 = std::fs::read(s.path("pki/node1.key")).unwrap();
    let (code, err) = ca(&["issue", pki, "node[0-1]"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("node1.pem exists already: not overwriting it (--force replaces it)"),
        "{err}"
    );
    assert!(!s.path("pki/node0.pem").exists());
    assert_eq!(std::fs::read(s.path("pki/node1.key")).unwrap(), n1);
    assert_eq!(ca(&["issue", pki, "node[0-1]", "--force"]).0, 0);
    assert_ne!(std::fs::read(s.path("pki/node1.key")).unwrap(), n1);
    let (code, err) = ca(&["revoke", pki, "node7"]);
    assert_eq!(code, 1);
    assert!(err.contains("no certificate issued to 'node7'"), "{err}");
}

/// `resource.reload` reads only regular files under the reload directory
/// (`[serve] reload-dir`, default the configuration's directory here):
/// a FIFO is refused at once and `status` keeps answering.
#[test]
fn reload_reads_only_regular_files_under_its_directory() {
    use std::time::{Duration, Instant};
    let s = Scratch::new("safe-reload");
    let rdir = s.path("r");
    std::fs::create_dir(&rdir).unwrap();
    let cfg = format!(
        "{}[serve]\nreload-dir = \"{}\"\n",
        fake_config(4, ""),
        rdir.display()
    );
    let d = start(&s, &cfg, &["--monitor-force-up"]);
    let fifo = rdir.join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // the reload in flight, status is asked at once
    let c = d.client();
    let p = serde_json::json!({"path": fifo.to_str().unwrap(), "xml": false, "force": false});
    let reload = std::thread::spawn(move || c.rpc("resource.reload", p));
    let t = Instant::now();
    d.rpc("resource.status", serde_json::json!({})).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let e = reload.join().unwrap().unwrap_err().to_string();
    assert!(
        e.contains(&format!("{}: not a regular file", fifo.display())),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let (code, err) = d.fails(&["reload", fifo.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not a regular file"), "{err}");
    // outside the directory, a device, a link: refused
    let outside = s.write("R.json", "{}");
    let (_, err) = d.fails(&["reload", outside.to_str().unwrap()]);
    assert!(err.contains("not under the reload directory"), "{err}");
    let (_, err) = d.fails(&["reload", "/dev/zero"]);
    assert!(err.contains("not under the reload directory"), "{err}");
    let r2 = rdir.join("r2.json");
    std::fs::write(
        &r2,
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-7"}}],"nodelist":["new[0-1]"],"starttime":0.0,"expiration":0.0}}"#,
    )
    .unwrap();
    let link = rdir.join("link.json");
    std::os::unix::fs::symlink(&r2, &link).unwrap();
    // (the CLI resolves links itself, as flux's does: the request here
    // names the link)
    let p = serde_json::json!({"path": link.to_str().unwrap(), "xml": false, "force": false});
    let e = d.rpc("resource.reload", p).unwrap_err().to_string();
    assert!(e.contains("a symbolic link"), "{e}");
    // the file itself is read (off the service loop) and applied
    d.ok(&["reload", r2.to_str().unwrap()]);
    let out = d.ok(&["list", "-s", "all", "-no", "{nnodes} {nodelist}"]);
    assert_eq!(out.trim(), "2 new[0-1]");
}
