//! `roster completions SHELL` and `roster manpage`: generated from the
//! command lines, checked here by running them (bash completes real
//! words; every command has a man page).

mod common;

use common::*;
use std::process::Command;

fn out(args: &[&str]) -> String {
    let o = roster().args(args).output().unwrap();
    assert!(
        o.status.success(),
        "roster {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Complete `words` (the last one being typed) with the bash script.
fn bash_complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cur = words.last().unwrap();
    let prev = words[words.len() - 2];
    let snippet = format!(
        "source {}\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         _roster roster '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(&snippet)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn bash_completion_completes_commands_options_and_choices() {
    let s = Scratch::new("completions");
    let script = s.write("roster.bash", &out(&["completions", "bash"]));
    output_ok(Command::new("bash").arg("-n").arg(&script));

    assert_eq!(bash_complete(&script, &["roster", "reso"]), ["resource"]);
    assert_eq!(
        bash_complete(&script, &["roster", "resource", "dr"]),
        ["drain"]
    );
    // argparse-style options, Roster's --json included
    assert_eq!(
        bash_complete(&script, &["roster", "resource", "drain", "--j"]),
        ["--json"]
    );
    assert_eq!(
        bash_complete(&script, &["roster", "resource", "status", "-L", ""]),
        ["never", "always", "auto"]
    );
    // clap-style (serve), getopt-style (R) and idset commands
    assert!(bash_complete(&script, &["roster", "serve", "--log"]).contains(&"--log-format".into()));
    assert_eq!(bash_complete(&script, &["roster", "R", "enc"]), ["encode"]);
    assert_eq!(
        bash_complete(&script, &["roster", "idset", "norm"]),
        ["normalize"]
    );
    assert_eq!(
        bash_complete(&script, &["roster", "compl"]),
        ["completions"]
    );
}

#[test]
fn other_shells_and_bad_shell() {
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let text = out(&["completions", shell]);
        assert!(
            text.contains("resource") && text.contains("json"),
            "{shell}"
        );
    }
    assert!(out(&["completions", "zsh"]).starts_with("#compdef roster"));
    let o = roster().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid value 'tcsh'"));
}

#[test]
fn man_pages_for_every_command() {
    let s = Scratch::new("manpages");
    let dir = s.path("man1");
    out(&["manpage", "--dir", dir.to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "roster.1",
        "roster-idset.1",
        "roster-idset-diff.1",
        "roster-hostlist.1",
        "roster-R.1",
        "roster-R-encode.1",
        "roster-graph.1",
        "roster-serve.1",
        "roster-serve-ca-issue.1",
        "roster-agent.1",
        "roster-resource.1",
        "roster-resource-drain.1",
        "roster-resource-status.1",
        "roster-resource-list.1",
        "roster-resource-eventlog.1",
        "roster-completions.1",
        "roster-manpage.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} not in {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("-help")), "{pages:?}");
    for p in &pages {
        let text = std::fs::read_to_string(dir.join(p)).unwrap();
        let name = p.trim_end_matches(".1");
        assert!(
            text.contains(&format!(".TH {name} 1 ")),
            "{p}: {}",
            &text[..text.len().min(200)]
        );
        assert!(text.contains(".SH SYNOPSIS"), "{p}");
    }
    let drain = std::fs::read_to_string(dir.join("roster-resource-drain.1")).unwrap();
    assert!(drain.contains("\\-\\-json"), "{drain}");
    assert!(drain.contains("Force overwrite of existing drain reason"));
    // one page on stdout
    assert_eq!(out(&["manpage", "resource", "drain"]), drain);
    let o = roster()
        .args(["manpage", "resource", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // groff renders it without warnings
    if Command::new("groff").arg("-v").output().is_err() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("groff is not installed (Debian package `groff-base`) and CI=true");
        }
        eprintln!("SKIPPING the groff check: groff is not installed (Debian package `groff-base`)");
    } else {
        let o = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.join("roster-resource-drain.1"))
            .output()
            .unwrap();
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn mistyped_command_gets_a_suggestion() {
    let o = roster().arg("resourse").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(
            "roster: unknown command 'resourse'\nroster: did you mean 'resource'?\nUsage:"
        ),
        "{err}"
    );
}
