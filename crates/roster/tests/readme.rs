//! The README's quick start, run as written (paths moved into a temp dir,
//! the cluster's TCP port to a free loopback port): every command must
//! succeed, so the README cannot tell a new user to type something that
//! fails.

mod common;

use common::*;
use std::process::Command;

/// The first indented block after `## Quick start`.
fn quick_start(readme: &str) -> Vec<String> {
    let start = readme
        .find("## Quick start")
        .expect("a Quick start section");
    let mut out: Vec<String> = Vec::new();
    let mut started = false;
    let mut continued = false;
    for line in readme[start..].lines().skip(1) {
        if let Some(cmd) = line.strip_prefix("    ") {
            started = true;
            // a `\` continuation joins the next line
            let (cmd, more) = match cmd.strip_suffix('\\') {
                Some(c) => (c, true),
                None => (cmd, false),
            };
            match out.last_mut() {
                Some(last) if continued => last.push_str(cmd.trim_start()),
                _ => out.push(cmd.to_string()),
            }
            continued = more;
        } else if line.trim().is_empty() {
            if started {
                out.push(String::new());
            }
        } else if started {
            break;
        }
    }
    out
}

#[test]
fn readme_quick_start_runs() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let s = Scratch::new("readme");
    let t = s.0.display().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_roster"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let mut script = String::from("set -ex\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n");
    script.push_str(&format!("cd {t}\nexport PATH={bin}:$PATH\n"));
    script.push_str(&format!(
        "export XDG_RUNTIME_DIR={t}/xdg-run XDG_STATE_HOME={t}/xdg-state\n"
    ));
    let wait_sock =
        |path: &str| format!("for i in $(seq 200); do [ -S {path} ] && break; sleep 0.05; done\n");
    let have_curl = Command::new("curl").arg("--version").output().is_ok();
    if !have_curl {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("curl is not installed (Debian package `curl`) and CI=true");
        }
        eprintln!(
            "SKIPPING the README's curl lines: curl is not installed (Debian package `curl`)"
        );
    }
    let mut n = 0;
    let mut in_heredoc = false;
    for line in quick_start(&readme) {
        let l = line
            .replace("/var/lib/roster", &format!("{t}/var-lib-roster"))
            .replace("/run/roster", &format!("{t}/run-roster"))
            .replace("/etc/roster", &format!("{t}/etc-roster"))
            .replace("0.0.0.0:8050", &format!("127.0.0.1:{port}"))
            .replace("head:8050", &format!("127.0.0.1:{port}"));
        let trimmed = l.trim_start();
        if in_heredoc {
            in_heredoc = trimmed != "TOML";
            script.push_str(&l);
            script.push('\n');
            continue;
        }
        if trimmed.starts_with("cargo build") || trimmed.starts_with("export PATH=") {
            continue;
        }
        if l.contains("<<'TOML'") {
            in_heredoc = true;
        }
        n += usize::from(!trimmed.is_empty() && !trimmed.starts_with('#'));
        if trimmed.starts_with("roster resource acquire") {
            // "Ctrl-C ends it": still running after a second is success
            script.push_str("timeout -s INT 1 roster resource acquire || [ $? = 124 ]\n");
        } else if trimmed.starts_with("curl ") && !have_curl {
            script.push_str("echo 'skipped (no curl):' \"$LINENO\"\n");
        } else if trimmed.starts_with("roster serve ca issue") {
            // the service is reached at 127.0.0.1 here, not at head
            script.push_str(&format!("{l} --san 127.0.0.1\n"));
        } else if trimmed.starts_with("roster agent --uri") {
            // "on every node": here, play node0 for two seconds
            let cmd = l.split(" #").next().unwrap().trim();
            let cmd = cmd.replace("$(hostname)", "node0");
            script.push_str(&format!(
                "timeout 2 {cmd} --hostname node0 || [ $? = 124 ]\n"
            ));
        } else if trimmed.starts_with("roster serve &") {
            script.push_str(&l);
            script.push('\n');
            script.push_str(&wait_sock(&format!("{t}/xdg-run/roster/roster.sock")));
        } else if trimmed.starts_with("roster serve --config cluster.toml &") {
            script.push_str(&l);
            script.push('\n');
            script.push_str(&wait_sock(&format!("{t}/run-roster/roster.sock")));
        } else {
            script.push_str(&l);
            script.push('\n');
        }
    }
    assert!(
        n >= 20,
        "only {n} commands found in the quick start:\n{script}"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README quick start failed:\n--- script\n{script}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
