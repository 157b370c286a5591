//! What `resource.reload` may read: a regular file (or, with `xml`, a
//! directory of regular `<rank>.xml` files) under the reload directory
//! (`[serve] reload-dir`, default the directory of `[resource] path`,
//! else of the configuration file), at most [`MAX_RELOAD_BYTES`] long.
//! Each file is opened with `O_NONBLOCK|O_NOFOLLOW` and checked with
//! `fstat` before a byte is read, so a FIFO, a device, a symbolic link or
//! a file elsewhere is refused at once instead of hanging or exhausting
//! the service.  The service loop runs the read on another thread
//! ([`crate::service_loop`]).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::io_text;
use libc::EFBIG;
use rpc::errno::{EINVAL, ENOENT, EPERM};
use rpc::RpcError;

/// The largest file a reload reads (an R of 131,072 nodes is a few MiB).
pub const MAX_RELOAD_BYTES: u64 = 64 << 20;

/// The reload directory of a configuration: `reload-dir`, else the
/// directory of `[resource] path`, else that of the configuration file.
pub fn reload_dir(config: Option<&config::Config>, config_path: Option<&Path>) -> Option<PathBuf> {
    let parent = |p: &Path| {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .or_else(|| Some(PathBuf::from(".")))
    };
    if let Some(d) = config.and_then(|c| c.serve.reload_dir.clone()) {
        return Some(d);
    }
    if let Some(p) = config.and_then(|c| c.resource.path.as_deref()) {
        return parent(Path::new(p));
    }
    let p = config_path?;
    if p.is_dir() {
        return Some(p.to_path_buf());
    }
    parent(p)
}

/// `path` resolved (its directory canonical, its last component kept as
/// given: never followed) and checked to lie under `dir`.
pub fn resolve(path: &str, dir: Option<&Path>) -> Result<PathBuf, RpcError> {
    let Some(dir) = dir else {
        return Err(RpcError::new(
            EPERM,
            format!("{path}: no reload directory is configured ([serve] reload-dir)"),
        ));
    };
    let p = Path::new(path);
    let (Some(name), Some(parent)) = (p.file_name(), p.parent()) else {
        return Err(RpcError::new(EINVAL, format!("{path}: not a file name")));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let parent = std::fs::canonicalize(parent)
        .map_err(|e| RpcError::new(ENOENT, format!("{path}: {}", io_text(&e))))?;
    let root = std::fs::canonicalize(dir).map_err(|e| {
        RpcError::new(
            ENOENT,
            format!("reload directory {}: {}", dir.display(), io_text(&e)),
        )
    })?;
    if !parent.starts_with(&root) {
        return Err(RpcError::new(
            EPERM,
            format!(
                "{path}: not under the reload directory {} ([serve] reload-dir)",
                root.display()
            ),
        ));
    }
    Ok(parent.join(name))
}

/// Open `path` without following a final symbolic link and without
/// blocking, and check what it is with `fstat`: a directory when `dir`,
/// else a regular file of at most [`MAX_RELOAD_BYTES`].
fn open_checked(shown: &str, path: &Path, dir: bool) -> Result<File, RpcError> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC);
    let f = o.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => RpcError::new(
            EPERM,
            format!("{shown}: a symbolic link: give the file itself"),
        ),
        _ => RpcError::new(ENOENT, format!("{shown}: {}", io_text(&e))),
    })?;
    let md = f
        .metadata()
        .map_err(|e| RpcError::new(ENOENT, format!("{shown}: {}", io_text(&e))))?;
    if dir {
        if !md.is_dir() {
            return Err(RpcError::new(EINVAL, format!("{shown}: not a directory")));
        }
        return Ok(f);
    }
    if !md.is_file() {
        return Err(RpcError::new(
            EINVAL,
            format!("{shown}: not a regular file"),
        ));
    }
    if md.len() > MAX_RELOAD_BYTES {
        return Err(RpcError::new(
            EFBIG,
            format!(
                "{shown}: {} bytes, more than the limit of {MAX_RELOAD_BYTES} bytes",
                md.len()
            ),
        ));
    }
    Ok(f)
}

/// The text of a regular file (checked by [`open_checked`]; a file that
/// grew past the limit since is refused too).
pub fn read_text(shown: &str, path: &Path) -> Result<String, RpcError> {
    let f = open_checked(shown, path, false)?;
    let mut text = String::new();
    f.take(MAX_RELOAD_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| RpcError::new(EINVAL, format!("{shown}: {}", io_text(&e))))?;
    if text.len() as u64 > MAX_RELOAD_BYTES {
        return Err(RpcError::new(
            EFBIG,
            format!("{shown}: more than the limit of {MAX_RELOAD_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// Check that `path` is a directory (not a link to one).
pub fn check_dir(shown: &str, path: &Path) -> Result<(), RpcError> {
    open_checked(shown, path, true).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_under_the_directory() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let r = root.join("R.json");
        std::fs::write(&r, "{}").unwrap();
        let p = resolve(r.to_str().unwrap(), Some(&root)).unwrap();
        assert_eq!(read_text("R.json", &p).unwrap(), "{}");
        // elsewhere
        let other = d.path().join("R.json");
        std::fs::write(&other, "{}").unwrap();
        let e = resolve(other.to_str().unwrap(), Some(&root)).unwrap_err();
        assert_eq!(e.errnum, EPERM);
        assert!(
            e.message().contains("not under the reload directory"),
            "{e:?}"
        );
        // .. does not escape
        let sneaky = format!("{}/../R.json", root.display());
        assert_eq!(resolve(&sneaky, Some(&root)).unwrap_err().errnum, EPERM);
        // no directory configured
        let e = resolve(r.to_str().unwrap(), None).unwrap_err();
        assert!(e.message().contains("[serve] reload-dir"), "{e:?}");
        // a symbolic link (to a good file) is refused
        let link = root.join("link.json");
        std::os::unix::fs::symlink(&r, &link).unwrap();
        let p = resolve(link.to_str().unwrap(), Some(&root)).unwrap();
        let e = read_text("link.json", &p).unwrap_err();
        assert!(e.message().contains("a symbolic link"), "{e:?}");
        // a FIFO: refused at once, not read
        let fifo = root.join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        let t = std::time::Instant::now();
        let e = read_text("fifo", &fifo).unwrap_err();
        assert!(e.message().ends_with("not a regular file"), "{e:?}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        // a device, a directory
        assert!(read_text("null", Path::new("/dev/null")).is_err());
        assert!(read_text("dir", &root).is_err());
        check_dir("dir", &root).unwrap();
        assert!(check_dir("R.json", &r).is_err());
        // too big (sparse)
        let big = root.join("big.json");
        let f = File::create(&big).unwrap();
        f.set_len(MAX_RELOAD_BYTES + 1).unwrap();
        let e = read_text("big.json", &big).unwrap_err();
        assert_eq!(e.errnum, EFBIG);
    }
}
