//! The Debian package (`contrib/package.sh`) and what it ships: the
//! commented default configuration is one `roster serve` accepts, the
//! script parses, and (slow: a release build; `ROSTER_SLOW_TESTS=1`) the
//! built `.deb` lists the binary, both units, the man pages, the
//! completions and the configuration, with a stripped binary.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn the_shipped_configuration_passes_check() {
    let s = Scratch::new("pkg-config");
    let o = roster()
        .args(["serve", "--check", "--config"])
        .arg(Path::new(REPO).join("contrib/roster.toml"))
        .env("XDG_RUNTIME_DIR", s.path("run"))
        .env("XDG_STATE_HOME", s.path("state"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.starts_with("configuration is valid: "), "{out}");
    // every line is a comment, a table, or blank: nothing set by surprise
    let text = std::fs::read_to_string(Path::new(REPO).join("contrib/roster.toml")).unwrap();
    for l in text.lines() {
        let l = l.trim();
        assert!(
            l.is_empty() || l.starts_with('#') || l == "[resource]" || l == "[serve]",
            "{l}"
        );
    }
}

#[test]
fn the_package_script_parses() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(Path::new(REPO).join("contrib/package.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_package_holds_what_an_admin_needs() {
    if std::env::var("ROSTER_SLOW_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set ROSTER_SLOW_TESTS=1 (a release build)");
        return;
    }
    let out = output_ok(Command::new("bash").arg(Path::new(REPO).join("contrib/package.sh")));
    // stdout: the package's path, alone
    let deb = out.trim().to_string();
    assert!(
        deb.ends_with(".deb") && deb.contains("/target/package/roster_"),
        "{deb}"
    );
    let list = output_ok(Command::new("dpkg-deb").args(["-c", &deb]));
    for path in [
        "./usr/bin/roster",
        "./lib/systemd/system/roster.service",
        "./lib/systemd/system/roster-agent.service",
        "./usr/share/man/man1/roster.1.gz",
        "./usr/share/man/man1/roster-resource-drain.1.gz",
        "./usr/share/bash-completion/completions/roster",
        "./usr/share/zsh/vendor-completions/_roster",
        "./usr/share/fish/vendor_completions.d/roster.fish",
        "./etc/roster/roster.toml",
        "./etc/default/roster-agent",
        "./usr/share/doc/roster/copyright",
    ] {
        assert!(
            list.lines().any(|l| l.ends_with(&format!(" {path}"))),
            "{path} not in {deb}:\n{list}"
        );
    }
    let info = output_ok(Command::new("dpkg-deb").args(["-I", &deb]));
    assert!(info.contains("Package: roster"), "{info}");
    // with cargo-zigbuild the binary is linked against glibc 2.31: it asks
    // for no newer one
    let zig = Command::new("sh")
        .args(["-c", "command -v cargo-zigbuild"])
        .output()
        .is_ok_and(|o| o.status.success());
    if zig && std::env::var("ROSTER_GLIBC").is_err() {
        let need = info
            .split("libc6 (>= ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap_or_else(|| panic!("no libc6 dependency: {info}"));
        let v: Vec<u32> = need.split('.').filter_map(|p| p.parse().ok()).collect();
        assert!(
            v.as_slice() <= [2, 31].as_slice(),
            "needs glibc {need}: {info}"
        );
    }
    assert!(
        info.contains("conffiles") && info.contains("postinst"),
        "{info}"
    );
    // unpacked: the binary runs, has the etcd backend and no debug info;
    // the units name it
    let s = Scratch::new("pkg-x");
    let x = Command::new("dpkg-deb")
        .args(["-x", &deb])
        .arg(&s.0)
        .status()
        .unwrap();
    assert!(x.success());
    let bin = s.path("usr/bin/roster");
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("roster "));
    let sections = Command::new("readelf")
        .arg("-S")
        .arg(&bin)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout);
    assert!(
        !sections.contains(".debug_info") && !sections.contains(".symtab"),
        "not stripped:\n{sections}"
    );
    let unit = std::fs::read_to_string(s.path("lib/systemd/system/roster.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/roster serve --config /etc/roster/roster.toml"),
        "{unit}"
    );
    let conffiles = Command::new("dpkg-deb")
        .args(["-e", &deb])
        .arg(s.path("DEBIAN"))
        .status()
        .unwrap();
    assert!(conffiles.success());
    let conffiles = std::fs::read_to_string(s.path("DEBIAN/conffiles")).unwrap();
    assert_eq!(
        conffiles,
        "/etc/roster/roster.toml\n/etc/default/roster-agent\n"
    );
    let postinst = std::fs::read_to_string(s.path("DEBIAN/postinst")).unwrap();
    assert!(postinst.contains("install -d -m 0700 -o roster -g roster /var/lib/roster"));
}
