//! What the process environment supplies: the local time zone (as the C
//! library computes it, like Python's `datetime.fromtimestamp`), the
//! terminal width argparse wraps at, and `os.path.realpath`.
//! The roster binary's only unsafe code: libc's tzset/localtime_r and the
//! TIOCGWINSZ ioctl, which std does not offer.
#![allow(unsafe_code)]

use resource_views::LocalZone;
use std::ffi::CStr;
use std::path::Path;

/// The local time zone of the C library (`TZ`, else `/etc/localtime`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemZone;

impl SystemZone {
    /// Initialize the C library's time zone state (`tzset()`).
    pub fn new() -> SystemZone {
        // SAFETY: tzset() only reads the environment and the zone files
        // and sets libc-internal globals; no Rust invariants are involved.
        unsafe { tzset() };
        SystemZone
    }

    fn tm(t: i64) -> Option<libc::tm> {
        let t: libc::time_t = t;
        // SAFETY: an all-zero `tm` is a valid value (pointers may be null).
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the duration of the call.
        let r = unsafe { libc::localtime_r(&t, &mut tm) };
        if r.is_null() {
            None
        } else {
            Some(tm)
        }
    }
}

extern "C" {
    fn tzset();
}

impl LocalZone for SystemZone {
    fn utc_offset(&self, t: i64) -> i32 {
        SystemZone::tm(t).map_or(0, |tm| i32::try_from(tm.tm_gmtoff).unwrap_or(0))
    }

    fn abbrev(&self, t: i64) -> String {
        match SystemZone::tm(t) {
            Some(tm) if !tm.tm_zone.is_null() => {
                // SAFETY: tm_zone points to a NUL-terminated string owned by
                // libc that stays valid until the next tzset().
                unsafe { CStr::from_ptr(tm.tm_zone) }
                    .to_string_lossy()
                    .into_owned()
            }
            _ => String::new(),
        }
    }
}

/// Columns of the terminal on stdout (`TIOCGWINSZ`), if it is one.
pub fn stdout_columns() -> Option<usize> {
    // SAFETY: an all-zero winsize is valid; ioctl writes at most its size.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: fd 1 and a valid pointer to a winsize.
    let r = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 {
        Some(usize::from(ws.ws_col))
    } else {
        None
    }
}

/// `posixpath.normpath`.
pub fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let initial = if path.starts_with("//") && !path.starts_with("///") {
        2
    } else if path.starts_with('/') {
        1
    } else {
        0
    };
    let mut comps: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        if comp.is_empty() || comp == "." {
            continue;
        }
        if comp != ".."
            || (initial == 0 && comps.is_empty())
            || comps.last().is_some_and(|c| *c == "..")
        {
            comps.push(comp);
        } else if !comps.is_empty() {
            comps.pop();
        }
    }
    let joined = comps.join("/");
    let out = format!("{}{joined}", "/".repeat(initial));
    if out.is_empty() {
        ".".into()
    } else {
        out
    }
}

/// `posixpath.join(a, b)` for two components.
fn join(a: &str, b: &str) -> String {
    if b.starts_with('/') || a.is_empty() {
        b.to_string()
    } else if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// `posixpath.split`.
fn split(p: &str) -> (String, String) {
    match p.rfind('/') {
        Some(i) => {
            let head = p.get(..=i).unwrap_or("");
            let tail = p.get(i + 1..).unwrap_or("");
            let trimmed = head.trim_end_matches('/');
            let head = if trimmed.is_empty() { head } else { trimmed };
            (head.to_string(), tail.to_string())
        }
        None => (String::new(), p.to_string()),
    }
}

/// Python's `os.path.realpath(path)` (non-strict): symbolic links are
/// resolved as far as the path exists; missing components are kept.
pub fn realpath(path: &str, cwd: &str) -> String {
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    let (p, _) = join_realpath("", path, &mut seen, 0);
    let abs = if p.starts_with('/') { p } else { join(cwd, &p) };
    normpath(&abs)
}

fn join_realpath(
    path: &str,
    rest: &str,
    seen: &mut Vec<(String, Option<String>)>,
    depth: usize,
) -> (String, bool) {
    let mut path = path.to_string();
    let mut rest = rest.to_string();
    if rest.starts_with('/') {
        rest = rest.get(1..).unwrap_or("").to_string();
        path = "/".into();
    }
    while !rest.is_empty() {
        let (name, tail) = match rest.split_once('/') {
            Some((n, t)) => (n.to_string(), t.to_string()),
            None => (rest.clone(), String::new()),
        };
        rest = tail;
        if name.is_empty() || name == "." {
            continue;
        }
        if name == ".." {
            if !path.is_empty() {
                let (head, n) = split(&path);
                path = head;
                if n == ".." {
                    path = join(&join(&path, ".."), "..");
                }
            } else {
                path = "..".into();
            }
            continue;
        }
        let newpath = join(&path, &name);
        let is_link = std::fs::symlink_metadata(Path::new(&newpath))
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link {
            path = newpath;
            continue;
        }
        if let Some((_, resolved)) = seen.iter().find(|(k, _)| *k == newpath) {
            match resolved {
                Some(r) => {
                    path = r.clone();
                    continue;
                }
                None => return (join(&newpath, &rest), false),
            }
        }
        if depth > 64 {
            return (join(&newpath, &rest), false);
        }
        seen.push((newpath.clone(), None));
        let target = match std::fs::read_link(Path::new(&newpath)) {
            Ok(t) => t.to_string_lossy().into_owned(),
            Err(_) => {
                path = newpath;
                continue;
            }
        };
        let (p, ok) = join_realpath(&path, &target, seen, depth + 1);
        path = p;
        if !ok {
            return (join(&path, &rest), false);
        }
        if let Some(e) = seen.iter_mut().find(|(k, _)| *k == newpath) {
            e.1 = Some(path.clone());
        }
    }
    (path, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normpath_like_posixpath() {
        for (path, want) in [
            ("/a/./b/../c/", "/a/c"),
            ("//a", "//a"),
            ("///a", "/a"),
            ("../x/..", ".."),
            ("", "."),
            ("/..", "/"),
        ] {
            assert_eq!(normpath(path), want, "normpath({path:?})");
        }
    }

    #[test]
    fn realpath_missing_and_links() {
        let dir = std::env::temp_dir().join(format!("roster-realpath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let real = dir.join("real");
        std::fs::create_dir_all(&real).unwrap_or(());
        let link = dir.join("link");
        let _ = std::os::unix::fs::symlink(&real, &link);
        let d = dir.to_string_lossy().into_owned();
        assert_eq!(
            realpath(&format!("{d}/link/R.json"), "/"),
            format!("{d}/real/R.json")
        );
        assert_eq!(realpath("nosuch/../x", &d), format!("{d}/x"));
        assert_eq!(realpath("a/b", "/cwd"), "/cwd/a/b");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
