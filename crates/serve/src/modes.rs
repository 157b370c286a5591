//! File modes checked at start-up, as ssh checks its own files: a file
//! that decides what the daemon does (the state directory, the
//! configuration, a token) must not be writable by group or others, and
//! a private key must not be readable by them.  Each refusal names the
//! file, its mode and the command that fixes it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file whose mode lets others change or read what they must not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {} is {how} (mode {mode:04o}): run `chmod {fix} {}`", path.display(), path.display())]
pub struct ModeError {
    pub what: &'static str,
    pub path: PathBuf,
    pub mode: u32,
    how: &'static str,
    fix: &'static str,
}

fn mode_of(path: &Path) -> Option<u32> {
    // A missing file is not this check's business: the reader reports it.
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// `path` (if it exists) must not be writable by group or others.
pub fn not_writable_by_others(what: &'static str, path: &Path) -> Result<(), ModeError> {
    match mode_of(path) {
        Some(mode) if mode & 0o022 != 0 => Err(ModeError {
            what,
            path: path.to_path_buf(),
            mode,
            how: "writable by group or others",
            fix: "go-w",
        }),
        _ => Ok(()),
    }
}

/// `path` (if it exists) must be private to its owner.
pub fn private(what: &'static str, path: &Path) -> Result<(), ModeError> {
    match mode_of(path) {
        Some(mode) if mode & 0o077 != 0 => Err(ModeError {
            what,
            path: path.to_path_buf(),
            mode,
            how: "readable or writable by group or others",
            fix: "go-rwx",
        }),
        _ => Ok(()),
    }
}

/// The configuration: a file, or a directory and the `*.toml` files in it
/// (conf.d).
pub fn config(path: &Path) -> Result<(), ModeError> {
    if !path.is_dir() {
        return not_writable_by_others("configuration", path);
    }
    not_writable_by_others("configuration directory", path)?;
    if let Ok(rd) = std::fs::read_dir(path) {
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            not_writable_by_others("configuration file", &f)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn refusals_name_the_file_and_the_fix() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.toml");
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o644);
        not_writable_by_others("configuration", &f).unwrap();
        chmod(&f, 0o664);
        let e = not_writable_by_others("configuration", &f).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "configuration {0} is writable by group or others (mode 0664): run `chmod go-w {0}`",
                f.display()
            )
        );
        chmod(&f, 0o640);
        let e = private("TLS key", &f).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!("(mode 0640): run `chmod go-rwx {}`", f.display())),
            "{e}"
        );
        chmod(&f, 0o600);
        private("TLS key", &f).unwrap();
        // conf.d: the directory and each file
        chmod(d.path(), 0o755);
        config(d.path()).unwrap();
        chmod(&f, 0o646);
        let e = config(d.path()).unwrap_err();
        assert_eq!(e.what, "configuration file");
        chmod(&f, 0o644);
        chmod(d.path(), 0o777);
        let e = config(d.path()).unwrap_err();
        assert_eq!((e.what, e.mode), ("configuration directory", 0o777));
        chmod(d.path(), 0o700);
        // missing: someone else's error
        not_writable_by_others("state directory", &d.path().join("none")).unwrap();
    }
}
