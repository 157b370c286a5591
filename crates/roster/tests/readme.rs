//! Every command of README.md, run for real (or, for the few that cannot
//! run inside a test, checked), and a coverage check that fails if any
//! command line of the README was neither.
//!
//! The README's conventions, which [`blocks`] parses:
//! - commands are in indented (4 spaces) blocks; every line of such a
//!   block is a command (`#` comments, `\` continuations and `<<'EOF'`
//!   here-documents as in bash);
//! - a block with lines starting with `$ ` is a transcript: those lines are
//!   commands, the lines after each are its output (stdout and stderr,
//!   `...` matches anything; `> ` lines are typed into the command);
//! - a block preceded by `<!-- readme-test: file -->` is a file's text
//!   (configuration), not commands.
//!
//! Each section runs as one bash script in a scratch directory, with the
//! README's system paths moved into it (`/etc/roster`, `/run/roster`,
//! `/var/lib/roster`, `/usr/local`, `/etc/systemd/system`, `~`) and
//! `head:8050` moved to a free loopback port.  The harness adds glue
//! (a daemon the section assumes, certificates, waits for sockets); every
//! README command is followed by a record of its line number, so a command
//! that does not run (or fails: the script stops) is not covered.
//!
//! Not run, only checked: cargo commands and scripts that run cargo (they
//! would build or test the workspace from inside its own test: the cargo
//! ones must name real packages, targets and features, the scripts must
//! parse), `apt-get install` (simulated with `-s`).  Skipped: commands
//! whose program is not installed (`flux`), said loudly.  The etcd section
//! runs with `--features roster/etcd` (as `.ci/run` does) against a real
//! 3-member etcd.

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const README: &str = include_str!("../../../README.md");
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Commands,
    Transcript,
    File,
}

/// An indented block of the README.
#[derive(Debug)]
struct Block {
    section: String,
    kind: Kind,
    /// (1-based README line number, text without the 4-space indent)
    lines: Vec<(usize, String)>,
}

/// One command: its first README line and its text (continuations joined,
/// a here-document's body included).
#[derive(Debug, Clone)]
struct Cmd {
    no: usize,
    text: String,
    /// Transcripts: the expected output lines and the typed (`> `) lines.
    output: Vec<String>,
    input: Vec<String>,
}

fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut section = String::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if let Some(s) = l.strip_prefix("## ") {
            section = s.to_string();
        }
        let after_blank = i == 0 || lines[i - 1].trim().is_empty();
        if l.starts_with("    ") && after_blank {
            let tag = lines[..i]
                .iter()
                .rev()
                .find(|p| !p.trim().is_empty())
                .map(|p| p.trim())
                .unwrap_or("");
            let mut b = Vec::new();
            let mut j = i;
            while j < lines.len() {
                let m = lines[j];
                if let Some(t) = m.strip_prefix("    ") {
                    b.push((j + 1, t.to_string()));
                } else if m.trim().is_empty() {
                    let next = lines[j..].iter().find(|n| !n.trim().is_empty());
                    if !next.is_some_and(|n| n.starts_with("    ")) {
                        break;
                    }
                    b.push((j + 1, String::new()));
                } else {
                    break;
                }
                j += 1;
            }
            let kind = if tag == "<!-- readme-test: file -->" {
                Kind::File
            } else if b.iter().any(|(_, t)| t.starts_with("$ ")) {
                Kind::Transcript
            } else {
                Kind::Commands
            };
            out.push(Block {
                section: section.clone(),
                kind,
                lines: b,
            });
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

fn commands(b: &Block) -> Vec<Cmd> {
    let mut out: Vec<Cmd> = Vec::new();
    let mut continued = false;
    let mut heredoc: Option<String> = None;
    for (no, raw) in &b.lines {
        if let Some(end) = &heredoc {
            let last = out.last_mut().expect("a here-document's command");
            last.text.push('\n');
            last.text.push_str(raw);
            if raw.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let line = match b.kind {
            Kind::File => continue,
            Kind::Commands => raw.as_str(),
            Kind::Transcript => match raw.strip_prefix("$ ") {
                Some(c) => c,
                None if continued => raw.as_str(),
                None => {
                    if let Some(last) = out.last_mut() {
                        if let Some(typed) = raw.strip_prefix("> ") {
                            last.input.push(typed.to_string());
                        } else if !raw.starts_with("# ") && !raw.trim().is_empty() {
                            last.output.push(raw.clone());
                        }
                    }
                    continue;
                }
            },
        };
        if !continued && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        let (text, more) = match line.strip_suffix('\\') {
            Some(c) => (c, true),
            None => (line, false),
        };
        if continued {
            let last = out.last_mut().expect("a continued command");
            last.text.push(' ');
            last.text.push_str(text.trim());
        } else {
            out.push(Cmd {
                no: *no,
                text: text.trim_end().to_string(),
                output: Vec::new(),
                input: Vec::new(),
            });
        }
        continued = more;
        if let Some(p) = line.find("<<'") {
            let rest = &line[p + 3..];
            heredoc = rest.split('\'').next().map(str::to_string);
        }
    }
    out
}

/// `s` matches `pattern`, where `...` matches any text.
fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let Some(mut rest) = s.strip_prefix(parts[0]) else {
        return false;
    };
    for (k, p) in parts.iter().enumerate().skip(1) {
        if k == parts.len() - 1 {
            return rest.ends_with(p);
        }
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

fn have(prog: &str) -> bool {
    if prog == "roster" {
        return true; // the binary under test, put on PATH by the script
    }
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {prog}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What happened to each README command line.
#[derive(Default)]
struct Record {
    ran: BTreeSet<usize>,
    /// line -> how it was checked instead of run
    checked: BTreeMap<usize, String>,
    /// line -> why it was skipped (a missing program)
    skipped: BTreeMap<usize, String>,
}

/// One section's bash script under construction.
struct Script {
    t: PathBuf,
    port: u16,
    ports: [u16; 3],
    text: String,
    rec: Record,
    /// transcripts to compare after the run: (line, expected, output file)
    expect: Vec<(usize, Vec<String>)>,
}

impl Script {
    fn new(name: &str, s: &Scratch) -> Script {
        let t = s.0.clone();
        let bin = Path::new(env!("CARGO_BIN_EXE_roster")).parent().unwrap();
        let td = t.display();
        let mut text = String::from("set -e -o pipefail\n");
        text.push_str(
            "GLUE=()\ntrap 'echo \"+ exit $(date +%T.%N)\"; kill $(jobs -p) \"${GLUE[@]}\" 2>/dev/null || true; wait || true; echo \"+ done $(date +%T.%N)\"' EXIT\n\
             wait_sock() { for i in $(seq 600); do [ -S \"$1\" ] && return 0; sleep 0.05; done; echo \"no socket $1\" >&2; return 1; }\n\
             stop_glue() { kill \"${GLUE[@]}\" 2>/dev/null || true; for p in \"${GLUE[@]}\"; do while kill -0 $p 2>/dev/null; do sleep 0.05; done; done; GLUE=(); }\n\
             glue() { ( \"$@\" 2>>\"$T/glue-serve.log\" </dev/null >/dev/null & echo $! > \"$T/glue.pid\" ); GLUE+=($(cat \"$T/glue.pid\")); }\n\
             glue_serve() { glue roster serve \"$@\"; }\n",
        );
        for d in [
            "work",
            "home/.config",
            "etc/roster",
            "etc/bash_completion.d",
            "etc/prometheus",
            "usr/local/share/zsh/site-functions",
            "usr/local/share/man",
            "root/usr/local/bin",
            "root/etc/systemd/system",
            "out",
        ] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        text.push_str(&format!(
            "T={td}\nRAN=$T/ran\nOUT=$T/out\n: > $RAN\ncd $T/work\n\
             export PATH={}:$PATH HOME=$T/home XDG_RUNTIME_DIR=$T/xdg-run XDG_STATE_HOME=$T/xdg-state \
             XDG_CONFIG_HOME=$T/home/.config TZ=UTC\n\
             unset ROSTER_URI ROSTER_CA ROSTER_CERT ROSTER_KEY ROSTER_TOKEN_FILE FLUX_URI\n\
             echo '# section {}'\n",
            bin.display(),
            name.replace('\'', "")
        ));
        Script {
            t,
            port: free_port(),
            ports: [free_port(), free_port(), free_port()],
            text,
            rec: Record::default(),
            expect: Vec::new(),
        }
    }

    /// The README's system paths and addresses, moved into the scratch dir.
    fn subst(&self, s: &str) -> String {
        let t = self.t.display();
        s.replace("/var/lib/roster", &format!("{t}/var/lib/roster"))
            .replace("/run/roster", &format!("{t}/run/roster"))
            .replace("/etc/roster", &format!("{t}/etc/roster"))
            .replace("/etc/prometheus", &format!("{t}/etc/prometheus"))
            .replace(
                "/etc/bash_completion.d",
                &format!("{t}/etc/bash_completion.d"),
            )
            .replace("/usr/local/share", &format!("{t}/usr/local/share"))
            .replace("/usr/local/bin", &format!("{t}/root/usr/local/bin"))
            .replace(
                "/etc/systemd/system",
                &format!("{t}/root/etc/systemd/system"),
            )
            .replace("0.0.0.0:8050", &format!("127.0.0.1:{}", self.port))
            .replace("head1:8050", &format!("127.0.0.1:{}", self.ports[0]))
            .replace("head2:8050", &format!("127.0.0.1:{}", self.ports[1]))
            .replace("head:8050", &format!("127.0.0.1:{}", self.port))
            // the relays' example: node0's tls:// child listener
            .replace("0.0.0.0:8051", &format!("127.0.0.1:{}", self.ports[2]))
            .replace("node0:8051", &format!("127.0.0.1:{}", self.ports[2]))
    }

    fn glue(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    fn ran(&mut self, no: usize) {
        self.text.push_str(&format!("echo {no} >> $RAN\n"));
    }

    /// Run a README command (already transformed) and record it.
    fn run(&mut self, no: usize, text: &str) {
        self.text
            .push_str(&format!("echo \"+ README:{no} $(date +%T.%N)\"\n"));
        self.glue(text);
        self.ran(no);
    }

    fn skip(&mut self, no: usize, why: &str) {
        eprintln!("SKIPPED README line {no}: {why}");
        self.text
            .push_str(&format!("echo 'SKIPPED README:{no}: {why}'\n"));
        self.rec.skipped.insert(no, why.to_string());
    }

    /// The default transformation of one command, then run it.
    fn command(&mut self, c: &Cmd) {
        let text = strip_comment(&self.subst(&c.text));
        let first = text.trim_start().to_string();
        let first = first.as_str();
        // the program: the first word after VAR=value assignments
        let prog = first
            .split_whitespace()
            .find(|w| !w.contains('='))
            .unwrap_or("");
        if prog == "cargo" || first.contains("&& cargo ") || first.contains(" cargo ") {
            let how = check_cargo(first);
            self.rec.checked.insert(c.no, how);
            return;
        }
        if prog == "bash" && first.contains(".ci/run") || prog.starts_with("bench/") {
            let script = if prog == "bash" { ".ci/run" } else { prog };
            let o = Command::new("bash")
                .arg("-n")
                .arg(Path::new(REPO).join(script))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "README:{}: {script} does not parse: {}",
                c.no,
                String::from_utf8_lossy(&o.stderr)
            );
            self.rec.checked.insert(
                c.no,
                format!("{script} parses (bash -n); not run: it runs cargo on this workspace"),
            );
            return;
        }
        if prog == "apt-get" {
            let sim = first.replacen("apt-get install", "apt-get install -s", 1);
            self.text
                .push_str(&format!("echo '+ README:{} (simulated)'\n", c.no));
            self.glue(&format!("{sim} >/dev/null"));
            self.text
                .push_str(&format!("echo {} >> $T/checked\n", c.no));
            self.rec
                .checked
                .insert(c.no, "apt-get install -s (simulated)".into());
            return;
        }
        if !prog.is_empty()
            && !have(prog)
            && !["cd", "export", "kill", "(umask", "{"].contains(&prog)
        {
            self.skip(c.no, &format!("`{prog}` is not installed"));
            return;
        }
        // `timeout` runs a program, not `VAR=value program`
        let env = if prog != first.split_whitespace().next().unwrap_or("") {
            "env "
        } else {
            ""
        };
        let text = if first.starts_with("roster serve ca issue") {
            // the service is reached at 127.0.0.1 here, not at `head`;
            // the glue may have issued these names already
            let force = if text.contains("--force") {
                ""
            } else {
                " --force"
            };
            format!("{text} --san 127.0.0.1{force}")
        } else if first.contains("roster resource acquire") {
            // "Ctrl-C ends it": still running after 2 s is success
            // and it printed the first response
            format!(
                "timeout -s INT 2 {env}{text} > $T/acquire-{no}.out || [ $? = 124 ]\n\
                 grep -q '\"resources\"' $T/acquire-{no}.out || {{ cat $T/acquire-{no}.out; false; }}",
                no = c.no
            )
        } else if first.starts_with("roster agent") && !first.ends_with('&') {
            // a node's agent runs until stopped: still running after 3 s is
            // success; it plays the host its certificate names
            let text = text.replace("$(hostname)", "node0");
            let host = text
                .split_whitespace()
                .skip_while(|w| *w != "--cert")
                .nth(1)
                .and_then(|p| Path::new(p).file_stem())
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|| "node0".into());
            let text = if text.contains("--hostname") {
                text
            } else {
                format!("{text} --hostname {host}")
            };
            // and it joined
            format!(
                "timeout -k 2 3 {env}{text} 2> $T/agent-{no}.log || [ $? = 124 ]\n\
                 grep -q 'joined as rank' $T/agent-{no}.log || {{ cat $T/agent-{no}.log; false; }}",
                no = c.no
            )
        } else if first.starts_with("roster serve")
            && !first.starts_with("roster serve ca")
            && !first.contains("--check")
            && !first.ends_with('&')
        {
            // a service runs until stopped: in the background here
            format!("{text} &")
        } else {
            text
        };
        self.run(c.no, &text);
        let bare = text.as_str();
        if first.contains("roster serve")
            && !first.starts_with("roster serve ca")
            && bare.ends_with('&')
        {
            let sock = bare
                .split_whitespace()
                .find_map(|w| w.strip_prefix("unix://"))
                .map(str::to_string)
                .unwrap_or_else(|| self.default_sock(bare));
            if !sock.is_empty() {
                self.glue(&format!("wait_sock {sock}"));
            }
        }
    }

    /// The socket a backgrounded `roster serve` listens on.
    fn default_sock(&self, cmd: &str) -> String {
        let t = self.t.display();
        if cmd.contains("--config") {
            format!("{t}/run/roster/roster.sock")
        } else {
            format!("{t}/xdg-run/roster/roster.sock")
        }
    }

    /// A transcript command: its output is compared after the run.
    fn transcript(&mut self, c: &Cmd) {
        let text = self.subst(&c.text);
        self.text.push_str(&format!("echo '+ README:{}'\n", c.no));
        self.glue(&format!(
            "{{ {text}\n}} > $OUT/{no} 2>&1 || echo \"(exit $?)\" >> $OUT/{no}.rc",
            no = c.no
        ));
        self.ran(c.no);
        self.expect.push((c.no, c.output.clone()));
    }

    fn block(&mut self, b: &Block) {
        for c in commands(b) {
            match b.kind {
                Kind::Transcript => self.transcript(&c),
                _ => self.command(&c),
            }
        }
    }

    /// Write a File block's text (substituted) to `path`.
    fn file(&mut self, b: &Block, path: &str, edit: impl Fn(String) -> String) {
        let text: Vec<&str> = b.lines.iter().map(|(_, t)| t.as_str()).collect();
        let text = edit(self.subst(&(text.join("\n") + "\n")));
        std::fs::write(self.t.join(path), text).unwrap();
    }

    /// The quick start's `cluster.toml` (from its here-document), with
    /// `hosts` replaced when given; the token; the CA and certificates for
    /// `head` (server, also at 127.0.0.1) and the nodes.
    fn cluster(&mut self, hosts: Option<&str>, pki: bool) {
        let qs = blocks(README)
            .into_iter()
            .find(|b| b.section == "Quick start")
            .expect("a Quick start block");
        let cmd = commands(&qs)
            .into_iter()
            .find(|c| c.text.starts_with("cat > cluster.toml <<'TOML'"))
            .expect("the quick start writes cluster.toml");
        let mut body: Vec<&str> = cmd.text.lines().skip(1).collect();
        body.pop(); // TOML
        let mut toml = self.subst(&(body.join("\n") + "\n"));
        if let Some(h) = hosts {
            toml = toml
                .replace(
                    "hosts = \"login[0-1],node[0-127]\"",
                    &format!("hosts = \"{h}\""),
                )
                .replace("exclude = \"login[0-1]\"", "")
                .replace("[resource]\n", "[resource]\nnoverify = true\n");
        }
        std::fs::write(self.t.join("work/cluster.toml"), toml).unwrap();
        self.glue("(umask 077; head -c 32 /dev/urandom | base64 > $T/etc/roster/token)");
        if pki {
            self.glue(
                "roster serve ca init $T/etc/roster/pki >/dev/null\n\
                 roster serve ca issue $T/etc/roster/pki 'head,head1,head2' --san 127.0.0.1 >/dev/null\n\
                 roster serve ca issue $T/etc/roster/pki 'node[0-1,7,129]' --san 127.0.0.1 >/dev/null\n\
                 roster serve ca issue $T/etc/roster/pki alice --role admin >/dev/null\n\
                 roster serve ca issue $T/etc/roster/pki sched --role scheduler >/dev/null",
            );
        }
    }

    /// Start the cluster's service as glue (not a README command).
    fn cluster_serve(&mut self) {
        self.glue("glue_serve --config $T/work/cluster.toml\nwait_sock $T/run/roster/roster.sock");
    }

    /// Run the script; compare transcripts; the record.
    fn finish(mut self) -> Result<Record, String> {
        std::fs::write(self.t.join("script.sh"), &self.text).unwrap();
        let o = Command::new("timeout")
            .arg("100")
            .arg("bash")
            .arg(self.t.join("script.sh"))
            .output()
            .unwrap();
        let log = || {
            format!(
                "--- script {}\n{}\n--- stdout\n{}\n--- stderr\n{}\n--- glue serve log\n{}",
                self.t.join("script.sh").display(),
                self.text,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                std::fs::read_to_string(self.t.join("glue-serve.log")).unwrap_or_default()
            )
        };
        if !o.status.success() {
            return Err(format!("script failed ({}):\n{}", o.status, log()));
        }
        if std::env::var_os("ROSTER_README_ONLY").is_some() {
            eprintln!("{}", log());
        }
        for (no, want) in &self.expect {
            let got = std::fs::read_to_string(self.t.join(format!("out/{no}"))).unwrap_or_default();
            let got: Vec<&str> = got.lines().collect();
            if !want.is_empty() && !matches(want, &got) {
                return Err(format!(
                    "README:{no}: output differs\n--- README\n{}\n--- got\n{}\n{}",
                    want.join("\n"),
                    got.join("\n"),
                    log()
                ));
            }
        }
        let ran = std::fs::read_to_string(self.t.join("ran")).unwrap_or_default();
        self.rec
            .ran
            .extend(ran.lines().filter_map(|l| l.trim().parse::<usize>().ok()));
        // simulated commands are recorded as checked, not run
        let checked = std::fs::read_to_string(self.t.join("checked")).unwrap_or_default();
        for l in checked
            .lines()
            .filter_map(|l| l.trim().parse::<usize>().ok())
        {
            self.rec.ran.remove(&l);
        }
        Ok(self.rec)
    }
}

/// A one-line command without its trailing `# comment` (outside quotes);
/// a here-document is left alone.
fn strip_comment(text: &str) -> String {
    if text.contains('\n') {
        return text.to_string();
    }
    let (mut single, mut double) = (false, false);
    let b = text.as_bytes();
    for (i, &ch) in b.iter().enumerate() {
        match ch {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && i > 0 && b[i - 1] == b' ' => {
                return text[..i].trim_end().to_string();
            }
            _ => {}
        }
    }
    text.trim_end().to_string()
}

/// Expected transcript output lines (`...` wildcards) against the actual
/// ones: line by line when the counts agree; else each expected line must
/// match a later actual line, in order (the README shows an excerpt).
fn matches(want: &[String], got: &[&str]) -> bool {
    if want.len() == got.len() && want.iter().zip(got).all(|(w, g)| glob(w, g)) {
        return true;
    }
    let mut it = got.iter();
    want.iter()
        .filter(|w| w.trim() != "...")
        .all(|w| it.any(|g| glob(w, g)))
}

/// Check a cargo command without running it: the sub-command and its
/// options exist, `-p` names a workspace package, `--test`/`--bench` one of
/// its targets, `--features` a feature; `cd fuzz && cargo fuzz run T`
/// a fuzz target.
fn check_cargo(cmd: &str) -> String {
    let meta = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(REPO)
        .output()
        .unwrap();
    assert!(meta.status.success(), "cargo metadata failed");
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    let pkgs = meta["packages"].as_array().unwrap();
    let cmd = cmd.split(" #").next().unwrap();
    if cmd.contains("cargo fuzz run") {
        let target = cmd
            .split_whitespace()
            .skip_while(|w| *w != "run")
            .nth(1)
            .unwrap();
        let fuzz = std::fs::read_to_string(Path::new(REPO).join("fuzz/Cargo.toml")).unwrap();
        assert!(
            fuzz.contains(&format!("name = \"{target}\"")),
            "{cmd}: no fuzz target {target}"
        );
        return format!("fuzz target `{target}` exists; not run: a 10-minute fuzzing run");
    }
    let words: Vec<&str> = cmd
        .split_whitespace()
        .skip_while(|w| *w != "cargo")
        .skip(1)
        .collect();
    let sub = words[0];
    let help = Command::new("cargo")
        .args([sub, "--help"])
        .output()
        .unwrap();
    assert!(help.status.success(), "{cmd}: `cargo {sub}` is unknown");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut pkg: Option<&serde_json::Value> = None;
    let mut k = 1;
    while k < words.len() {
        let w = words[k];
        if w == "--" {
            break;
        }
        if w.starts_with('-') {
            assert!(help.contains(w), "{cmd}: `cargo {sub}` has no option {w}");
        }
        let arg = words.get(k + 1).copied().unwrap_or("");
        match w {
            "-p" | "--package" => {
                pkg = pkgs.iter().find(|p| p["name"] == arg);
                assert!(pkg.is_some(), "{cmd}: no package {arg}");
                k += 1;
            }
            "--bin" => {
                let p = pkg.or_else(|| pkgs.iter().find(|p| p["name"] == arg));
                let ok = p.is_some_and(|p| {
                    p["targets"].as_array().unwrap().iter().any(|t| {
                        t["name"] == arg && t["kind"].as_array().unwrap().iter().any(|x| x == "bin")
                    })
                });
                assert!(ok, "{cmd}: no binary {arg}");
                pkg = p;
                k += 1;
            }
            "--test" | "--bench" => {
                let kind = &w[2..];
                let p = pkg.unwrap_or_else(|| panic!("{cmd}: {w} without -p"));
                let ok = p["targets"].as_array().unwrap().iter().any(|t| {
                    t["name"] == arg && t["kind"].as_array().unwrap().iter().any(|x| x == kind)
                });
                assert!(ok, "{cmd}: no {kind} target {arg}");
                k += 1;
            }
            "--features" => {
                let ok = arg.split(',').all(|f| {
                    let (p, f) = f.split_once('/').unwrap_or(("", f));
                    pkgs.iter()
                        .filter(|q| p.is_empty() || q["name"] == p)
                        .any(|q| q["features"].get(f).is_some())
                });
                assert!(ok, "{cmd}: no feature {arg}");
                k += 1;
            }
            _ => {}
        }
        k += 1;
    }
    if sub == "bench" {
        let p = pkg.unwrap_or_else(|| panic!("{cmd}: which package?"));
        assert!(
            p["targets"].as_array().unwrap().iter().any(|t| t["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == "bench")),
            "{cmd}: no benchmarks"
        );
    }
    if sub == "run" && pkg.is_none() {
        // `cargo run` at the root picks the workspace's one binary
        let bins: Vec<&serde_json::Value> = pkgs
            .iter()
            .flat_map(|p| p["targets"].as_array().unwrap())
            .filter(|t| t["kind"].as_array().unwrap().iter().any(|x| x == "bin"))
            .collect();
        assert!(
            bins.len() == 1 && bins[0]["name"] == "roster",
            "{cmd}: the workspace has {} binaries",
            bins.len()
        );
    }
    format!("`cargo {sub}` options, packages, targets and features exist; not run: cargo inside cargo test")
}

fn section<'a>(all: &'a [Block], name: &str) -> Vec<&'a Block> {
    all.iter().filter(|b| b.section.starts_with(name)).collect()
}

/// Section `name` run as written, in a scratch directory `dir`, then the
/// shell lines `check` (if any).
fn as_written(all: &[Block], name: &str, dir: &str, check: &str) -> Result<Record, String> {
    let s = Scratch::new(dir);
    let mut sc = Script::new(name, &s);
    for b in section(all, name) {
        sc.block(b);
    }
    if !check.is_empty() {
        sc.glue(check);
    }
    sc.finish()
}

/// Set up: `cargo run --release -- serve` is checked, and `roster serve`
/// (what it runs) is run: the embedded default answers.
fn set_up(all: &[Block]) -> Result<Record, String> {
    as_written(
        all,
        "Set up",
        "readme-setup",
        "roster serve & GLUE+=($!)\nwait_sock $XDG_RUNTIME_DIR/roster/roster.sock\n\
         roster resource status | grep -q avail",
    )
}

fn quick_start(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-qs");
    let mut sc = Script::new("Quick start", &s);
    let bs = section(all, "Quick start");
    for (i, b) in bs.iter().enumerate() {
        if b.kind == Kind::Transcript {
            // "on a one-node instance": the embedded default again
            sc.glue("glue_serve\nwait_sock $XDG_RUNTIME_DIR/roster/roster.sock");
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap_or_default()
                .trim()
                .to_string();
            for mut c in commands(b) {
                c.output = c
                    .output
                    .iter()
                    .map(|l| l.replace("hosts head", &format!("hosts {host}")))
                    .collect();
                sc.transcript(&c);
            }
            continue;
        }
        assert_eq!(i, 0, "Quick start: one command block, then transcripts");
        for c in commands(b) {
            sc.command(&c);
            if c.text.starts_with("export PATH=") {
                // the test's binary, not a release build
                sc.glue(&format!(
                    "export PATH={}:$PATH",
                    Path::new(env!("CARGO_BIN_EXE_roster"))
                        .parent()
                        .unwrap()
                        .display()
                ));
            }
        }
    }
    sc.finish()
}

fn json_output(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-json");
    let mut sc = Script::new("JSON output", &s);
    sc.cluster(None, true);
    sc.cluster_serve();
    sc.glue(
        "export ROSTER_URI=unix://$T/run/roster/roster.sock\nroster resource drain 'node[3-4]' fan",
    );
    for b in section(all, "JSON output") {
        for mut c in commands(b) {
            if c.text.contains("wrapped here") {
                // one line, wrapped in the README; the time is now's
                let one: String = c.output.iter().map(|l| l.trim_start()).collect();
                let one = match (one.find("\"timestamp\":"), one.rfind('}')) {
                    (Some(a), Some(_)) => {
                        let end = one[a..].find('}').unwrap() + a;
                        format!("{}\"timestamp\":...{}", &one[..a], &one[end..])
                    }
                    _ => one,
                };
                c.output = vec![one];
            }
            sc.transcript(&c);
        }
    }
    sc.finish()
}

fn completions(all: &[Block]) -> Result<Record, String> {
    as_written(
        all,
        "Shell completions",
        "readme-compl",
        "grep -q _roster $T/etc/bash_completion.d/roster\n\
         grep -q compdef $T/usr/local/share/zsh/site-functions/_roster\n\
         grep -q 'complete -c roster' $HOME/.config/fish/completions/roster.fish\n\
         test -s $T/usr/local/share/man/man1/roster-resource-drain.1",
    )
}

fn monitoring(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-mon");
    let mut sc = Script::new("Monitoring", &s);
    sc.cluster(None, true);
    sc.cluster_serve();
    // the README runs from a checkout (contrib/prometheus)
    sc.glue(&format!("ln -s {REPO}/contrib contrib"));
    for b in section(all, "Monitoring") {
        if b.kind == Kind::File {
            sc.file(b, "etc/prometheus/prometheus.yml", |t| t);
        } else {
            sc.block(b);
        }
    }
    sc.finish()
}

fn web_view(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-web");
    let mut sc = Script::new("Web view and logs", &s);
    sc.cluster(None, true);
    let bs = section(all, "Web view");
    for b in &bs {
        let starts_serve = commands(b).iter().any(|c| c.text.contains("roster serve"));
        if starts_serve {
            sc.glue("stop_glue");
        } else {
            sc.cluster_serve();
        }
        sc.block(b);
        if starts_serve {
            sc.glue("grep ' ready: ' serve.log | grep -q '^{.*\"replayed_events\"' || { cat serve.log; false; }");
        }
    }
    sc.finish()
}

fn systemd(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-systemd");
    let mut sc = Script::new("systemd", &s);
    sc.cluster(None, true);
    // the README runs from a checkout with a release build
    let bin = env!("CARGO_BIN_EXE_roster");
    sc.glue(&format!(
        "ln -s {REPO}/contrib contrib\nmkdir -p target/release\nln -s {bin} target/release/roster"
    ));
    for b in section(all, "systemd") {
        for c in commands(b) {
            if c.text.starts_with("systemctl ") {
                // no systemd manager here: enable into the temp root, verify
                // the installed units and check the configuration with
                // the unit's own command line
                let root = format!("{}/root", sc.t.display());
                let verify = if have("systemd-analyze") {
                    format!(
                        "mkdir -p $T/verify && for u in roster roster-agent; do \
                         sed \"s|/usr/local/bin/roster |{root}/usr/local/bin/roster |\" \
                         {root}/etc/systemd/system/$u.service > $T/verify/$u.service; done\n\
                         SYSTEMD_LOG_LEVEL=warning systemd-analyze verify $T/verify/roster.service $T/verify/roster-agent.service 2> $T/verify.err || true\n\
                         if grep roster $T/verify.err; then false; fi"
                    )
                } else {
                    "echo 'systemd-analyze not installed: units not verified'".into()
                };
                sc.run(
                    c.no,
                    &format!(
                        "systemctl --root={root} enable roster\n\
                         test -L {root}/etc/systemd/system/multi-user.target.wants/roster.service\n{verify}\n\
                         exec_start=$(sed -n 's/^ExecStart=//p' {root}/etc/systemd/system/roster.service)\n\
                         eval \"$(echo \"$exec_start\" | sed 's|/usr/local/bin/roster|{root}/usr/local/bin/roster|; s|/etc/roster|$T/etc/roster|g; s|/var/lib/roster|$T/var/lib/roster|; s|/run/roster|$T/run/roster|') --check\""
                    ),
                );
                sc.rec.checked.insert(
                    c.no,
                    "systemctl --root enable, systemd-analyze verify, the unit's ExecStart with --check (no systemd manager in a test)".into(),
                );
                sc.glue(&format!("echo {} >> $T/checked", c.no));
            } else if c.text.starts_with("useradd ") {
                // not on the test machine: the syntax only
                sc.glue(&format!(
                    "useradd --help >/dev/null\necho {} >> $T/checked",
                    c.no
                ));
                sc.rec
                    .checked
                    .insert(c.no, "not run (a test adds no user to the machine)".into());
            } else if c.text.starts_with("chown roster: ") {
                // the test's own user stands for `roster`
                let mut c = c.clone();
                c.text = c.text.replacen("roster:", "\"$(id -un):\"", 1);
                sc.command(&c);
            } else {
                sc.command(&c);
            }
        }
    }
    sc.glue(&format!(
        "cmp {bin} $T/root/usr/local/bin/roster\n\
         [ \"$(stat -c %a $T/etc/roster/token)\" = 600 ]\n\
         cmp cluster.toml $T/etc/roster/roster.toml"
    ));
    sc.finish()
}

fn relays(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-relay");
    let mut sc = Script::new("Scaling out", &s);
    sc.cluster(Some("node[0-255]"), true);
    sc.cluster_serve();
    // as the section says in prose: the relays' certificates carry the
    // relay role
    sc.glue(
        "roster serve ca issue $T/etc/roster/pki 'node[0-1]' --role relay --san 127.0.0.1 --force >/dev/null",
    );
    sc.glue("cd $T/etc/roster/pki");
    for b in section(all, "Scaling out") {
        for c in commands(b) {
            // one agent per node: all at once, in the background
            let text = sc.subst(&c.text);
            sc.run(c.no, &format!("{text} &"));
            if let Some(sock) = text
                .split_whitespace()
                .skip_while(|w| *w != "--listen")
                .nth(1)
                .and_then(|u| u.strip_prefix("unix://"))
            {
                sc.glue(&format!("wait_sock {sock}"));
            }
        }
    }
    // node0, node1 (relays) and node129 (behind node1) are online
    sc.glue(
        "online() { roster resource --uri unix://$T/run/roster/roster.sock status --json \
           | grep -o '\"online\":true,\"nnodes\":[0-9]*,\"ranks\":\"[^\"]*\"' | sed 's/.*\"ranks\"://' | paste -sd, | tr -d '\"'; }\n\
         for i in $(seq 200); do [ \"$(online)\" = 0-1,129 ] && break; sleep 0.05; done\n\
         [ \"$(online)\" = 0-1,129 ] || { echo \"online: $(online)\"; false; }",
    );
    sc.finish()
}

fn graph_follow(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-graph");
    let mut sc = Script::new("A scheduler's view", &s);
    std::fs::write(
        s.path("work/cluster.toml"),
        format!(
            "[resource]\nnoverify = true\n\n[[resource.config]]\nhosts = \"node[0-127]\"\ncores = \"0-3\"\n\n\
             [serve]\nstatedir = \"{t}/var/lib/roster\"\nlisten = [\"unix://{t}/run/roster/roster.sock\"]\n",
            t = s.0.display()
        ),
    )
    .unwrap();
    std::fs::write(
        s.path("work/node.yaml"),
        "version: 1\nresources:\n  - type: node\n    count: 1\n    with:\n      - type: slot\n        count: 1\n        label: default\n        with:\n          - type: core\n            count: 1\ntasks:\n  - command: [ \"app\" ]\n    slot: default\n    count:\n      per_slot: 1\nattributes:\n  system:\n    duration: 3600\n",
    )
    .unwrap();
    sc.cluster_serve();
    // the nodes are up: one simulated agent per node
    sc.glue(
        "glue roster agent --simulate 'node[0-127]' --uri unix://$T/run/roster/roster.sock --cores 0-3 --no-r\n\
         for i in $(seq 400); do roster resource --uri unix://$T/run/roster/roster.sock status -s avail | grep -q 'avail *✔ *128' && break; sleep 0.05; done",
    );
    for b in section(all, "A scheduler's view") {
        for c in commands(b) {
            // typed lines through a fifo, one at a time; "meanwhile" the drain
            let text = sc.subst(&c.text);
            sc.glue(&format!(
                "mkfifo in\n{text} < in > $OUT/{no} 2>&1 & exec 3> in\n\
                 upto() {{ for i in $(seq 300); do grep -q \"$1\" $OUT/{no} && return 0; sleep 0.05; done; cat $OUT/{no}; return 1; }}\n\
                 upto '\"initial\"'",
                no = c.no
            ));
            for (k, typed) in c.input.iter().enumerate() {
                sc.glue(&format!("echo '{typed}' >&3"));
                let word = typed.split_whitespace().next().unwrap_or("");
                sc.glue(&format!("upto '\"command\":\"{word}'"));
                if k == 0 {
                    sc.glue(
                        "roster resource --uri unix://$T/run/roster/roster.sock drain node7 fan\n\
                         upto '\"type\":\"update\"'",
                    );
                }
            }
            sc.glue("exec 3>&-\nfor i in $(seq 100); do kill -0 %1 2>/dev/null || break; sleep 0.05; done\nkill %1 2>/dev/null || true");
            sc.ran(c.no);
            sc.expect.push((c.no, c.output.clone()));
        }
    }
    sc.finish()
}

fn flux_clients(all: &[Block]) -> Result<Record, String> {
    as_written(
        all,
        "Using flux clients",
        "readme-flux",
        "test -S $T/run/roster/local-0",
    )
}

fn limits(all: &[Block]) -> Result<Record, String> {
    as_written(all, "Limits", "readme-limits", "")
}

fn securing(all: &[Block]) -> Result<Record, String> {
    let s = Scratch::new("readme-sec");
    let mut sc = Script::new("Securing a cluster", &s);
    sc.cluster(None, false);
    for b in section(all, "Securing a cluster") {
        if b.kind == Kind::File {
            // with the cluster's resources, checked as `roster serve` would
            sc.glue("echo user-token-0123456789abcdef > $T/etc/roster/user.token; chmod 600 $T/etc/roster/user.token");
            let resources = std::fs::read_to_string(s.path("work/cluster.toml")).unwrap();
            let resources = resources.split("[serve]").next().unwrap().to_string();
            sc.file(b, "work/secure.toml", |t| format!("{resources}\n{t}"));
            sc.glue("roster serve --config $T/work/secure.toml --check");
        } else {
            sc.block(b);
        }
    }
    sc.finish()
}

#[cfg(feature = "etcd")]
fn high_availability(all: &[Block]) -> Result<Record, String> {
    let t0 = std::time::Instant::now();
    let Some(etcd) = common::etcd::cluster("readme-ha") else {
        let mut rec = Record::default();
        for b in section(all, "High availability") {
            for c in commands(b) {
                rec.skipped.insert(c.no, "etcd is not installed".into());
            }
        }
        return Ok(rec);
    };
    let s = Scratch::new("readme-ha");
    eprintln!("etcd up in {:.1} s", t0.elapsed().as_secs_f64());
    let mut sc = Script::new("High availability", &s);
    sc.cluster(None, true);
    let resources = std::fs::read_to_string(s.path("work/cluster.toml")).unwrap();
    let resources = resources.split("[serve]").next().unwrap().to_string();
    let t = s.0.display().to_string();
    for b in section(all, "High availability") {
        if b.kind == Kind::File {
            // head1 and head2: the test etcd is plain http on loopback
            for (h, port) in [("head1", sc.ports[0]), ("head2", sc.ports[1])] {
                let path = format!("etc/roster/roster-{h}.toml");
                let endpoints = etcd.endpoints_toml();
                let t = t.clone();
                let resources = resources.clone();
                sc.file(b, &path, move |text| {
                    let text: Vec<String> = text
                        .lines()
                        .filter(|l| !l.starts_with("etcd-ca") && !l.starts_with("etcd-cert") && !l.starts_with("etcd-key"))
                        .map(|l| {
                            if l.starts_with("etcd-endpoints") {
                                format!("etcd-endpoints = {endpoints}")
                            } else if l.starts_with("listen") || l.starts_with("advertise") {
                                l.replace(&format!("127.0.0.1:{}", free_port_of(l)), &format!("127.0.0.1:{port}"))
                            } else {
                                l.to_string()
                            }
                        })
                        .collect();
                    format!(
                        "{resources}\n{}\ntls-cert = \"{t}/etc/roster/pki/{h}.pem\"\ntls-key = \"{t}/etc/roster/pki/{h}.key\"\ntls-client-ca = \"{t}/etc/roster/pki/ca.pem\"\n",
                        text.join("\n")
                    )
                });
            }
            continue;
        }
        for c in commands(b) {
            if c.text
                .starts_with("roster serve --config /etc/roster/roster.toml")
            {
                // "on head1, head2, ...": two servers, each its own config
                for (k, h) in ["head1", "head2"].iter().enumerate() {
                    sc.text.push_str(&format!(
                        "echo \"+ README:{} ({h}) $(date +%T.%N)\"\n",
                        c.no
                    ));
                    sc.glue(&format!(
                        "XDG_STATE_HOME=$T/state-{h} roster serve --config $T/etc/roster/roster-{h}.toml 2> $T/{h}.log &"
                    ));
                    sc.glue(&format!(
                        "for i in $(seq 400); do (exec 3<>/dev/tcp/127.0.0.1/{p}) 2>/dev/null && break; sleep 0.05; done\n\
                         roster resource --uri tls://127.0.0.1:{p} --ca $T/etc/roster/pki/ca.pem --cert $T/etc/roster/pki/alice.pem --key $T/etc/roster/pki/alice.key status > /dev/null",
                        p = sc.ports[k]
                    ));
                }
                sc.ran(c.no);
                continue;
            }
            sc.command(&c);
            if c.text.starts_with("export ROSTER_URI=") {
                // "with ROSTER_CA, ROSTER_CERT, ROSTER_KEY": an admin's
                sc.glue("export ROSTER_CA=$T/etc/roster/pki/ca.pem ROSTER_CERT=$T/etc/roster/pki/alice.pem ROSTER_KEY=$T/etc/roster/pki/alice.key");
            }
        }
    }
    sc.glue("echo '+ glue: drained?'; timeout 20 roster resource drain > drained.txt; grep -q node7 drained.txt");
    sc.finish()
}

/// The port a `listen`/`advertise` line of the HA block had after
/// substitution (`head1:8050` becomes ports[0], `0.0.0.0:8050` the
/// section's port): any `127.0.0.1:N`.
#[cfg(feature = "etcd")]
fn free_port_of(l: &str) -> u16 {
    l.split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

fn development(all: &[Block]) -> Result<Record, String> {
    as_written(all, "Development", "readme-dev", "")
}

#[test]
fn readme_conventions_parse() {
    let all = blocks(README);
    // the quick start's here-document is one command
    let qs = all
        .iter()
        .find(|b| b.section == "Quick start")
        .expect("a Quick start block");
    let cs = commands(qs);
    let toml = cs
        .iter()
        .find(|c| c.text.starts_with("cat > cluster.toml"))
        .unwrap();
    assert!(toml.text.ends_with("\nTOML"), "{}", toml.text);
    assert!(cs.iter().all(|c| !c.text.starts_with("hosts =")));
    // continuations are joined
    assert!(cs
        .iter()
        .any(|c| c.text.contains("--ca") && c.text.contains("--key")));
    // transcripts: commands, outputs, typed lines
    let graph = all
        .iter()
        .find(|b| b.section.starts_with("A scheduler's view"))
        .unwrap();
    assert_eq!(graph.kind, Kind::Transcript);
    let g = commands(graph);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].input, ["aggregate", "match allocate node.yaml"]);
    assert!(g[0].output.iter().all(|o| !o.starts_with("> ")));
    assert!(all.iter().filter(|b| b.kind == Kind::File).count() >= 3);
    assert!(glob("a...c", "abbbc") && !glob("a...c", "abbb") && glob("{...}", "{x}"));
}

#[test]
fn every_readme_command_runs() {
    let all = blocks(README);
    type Runner = fn(&[Block]) -> Result<Record, String>;
    #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
    let mut runners: Vec<(&str, Runner)> = vec![
        ("Set up", set_up),
        ("Quick start", quick_start),
        ("JSON output", json_output),
        ("Shell completions", completions),
        ("Monitoring", monitoring),
        ("Web view", web_view),
        ("systemd", systemd),
        ("Scaling out", relays),
        ("A scheduler's view", graph_follow),
        ("Using flux clients", flux_clients),
        ("Limits", limits),
        ("Securing a cluster", securing),
        ("Development", development),
    ];
    #[cfg(feature = "etcd")]
    runners.push(("High availability", high_availability));
    #[cfg(not(feature = "etcd"))]
    eprintln!(
        "\n*** README section \"High availability (etcd)\" not run: it needs `--features roster/etcd` (.ci/run uses it) ***\n"
    );
    runners.sort_by_key(|(n, _)| *n);
    // ROSTER_README_ONLY=NAME: only the sections whose name contains NAME
    // (to debug one; the coverage check is then skipped)
    let only = std::env::var("ROSTER_README_ONLY").ok();
    // every section with commands has a runner
    for b in &all {
        if b.kind != Kind::File && !commands(b).is_empty() {
            assert!(
                runners.iter().any(|(n, _)| b.section.starts_with(n))
                    || (cfg!(not(feature = "etcd")) && b.section.starts_with("High availability")),
                "README section {:?} has commands and no runner in tests/readme.rs",
                b.section
            );
        }
    }
    if let Some(o) = &only {
        runners.retain(|(n, _)| n.contains(o.as_str()));
    }
    let results: Vec<(&str, Result<Record, String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = runners
            .iter()
            .map(|(n, f)| {
                let all = &all;
                (
                    *n,
                    scope.spawn(move || {
                        let t0 = std::time::Instant::now();
                        let r = f(all);
                        eprintln!("README section {n}: {:.1} s", t0.elapsed().as_secs_f64());
                        r
                    }),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| {
                (
                    n,
                    h.join().unwrap_or_else(|p| {
                        Err(p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default())
                    }),
                )
            })
            .collect()
    });
    let mut total = Record::default();
    let mut failures = Vec::new();
    for (n, r) in results {
        match r {
            Ok(r) => {
                total.ran.extend(r.ran);
                total.checked.extend(r.checked);
                total.skipped.extend(r.skipped);
            }
            Err(e) => failures.push(format!("=== README section {n}:\n{e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    if only.is_some() {
        eprintln!("ROSTER_README_ONLY is set: coverage not checked");
        return;
    }
    // coverage: every command line ran, was checked, or was skipped for a
    // missing program
    let lines: Vec<&str> = README.lines().collect();
    let mut missing = Vec::new();
    for b in &all {
        if cfg!(not(feature = "etcd")) && b.section.starts_with("High availability") {
            continue;
        }
        for c in commands(b) {
            if !total.ran.contains(&c.no)
                && !total.checked.contains_key(&c.no)
                && !total.skipped.contains_key(&c.no)
            {
                missing.push(format!("README.md:{}: {}", c.no, lines[c.no - 1].trim()));
            }
        }
    }
    for (no, how) in &total.checked {
        eprintln!("checked, not run: README.md:{no}: {how}");
    }
    for (no, why) in &total.skipped {
        eprintln!("SKIPPED: README.md:{no}: {why}");
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        assert!(
            total.skipped.is_empty() || total.skipped.values().all(|w| w.contains("`flux`")),
            "CI=true and README commands were skipped: {:?}",
            total.skipped
        );
    }
    assert!(
        missing.is_empty(),
        "README commands that no test ran:\n{}",
        missing.join("\n")
    );
    assert!(
        total.ran.len() >= 60,
        "only {} README commands ran",
        total.ran.len()
    );
}

/// The quick start makes a token file: its configuration uses it (a
/// token nobody reads is a step for nothing).
#[test]
fn the_quick_starts_token_is_used_by_its_configuration() {
    let qs = blocks(README)
        .into_iter()
        .find(|b| b.section == "Quick start")
        .expect("a Quick start block");
    let cmds = commands(&qs);
    let toml = cmds
        .iter()
        .find(|c| c.text.starts_with("cat > cluster.toml <<'TOML'"))
        .expect("the quick start writes cluster.toml");
    let made: Vec<&str> = cmds
        .iter()
        .filter_map(|c| c.text.split("> ").nth(1))
        .filter_map(|rest| rest.split(')').next())
        .filter(|p| p.ends_with("token"))
        .collect();
    assert!(!made.is_empty(), "the quick start makes no token any more");
    for path in made {
        assert!(
            toml.text.contains(&format!("token-file = \"{path}\"")),
            "the quick start makes {path} but cluster.toml does not use it:\n{}",
            toml.text
        );
    }
}
