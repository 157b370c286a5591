//! Service addresses: `unix:///path/to.sock`, `tcp://HOST:PORT`, and
//! `flux:///path/to.sock` (the Flux local-connector listener), plus the
//! default locations of the embedded default instance.

use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable naming the service a client talks to.
pub const URI_ENV: &str = "ROSTER_URI";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Uri {
    /// HTTP over a Unix socket; peer credentials decide the role.
    Unix(PathBuf),
    /// HTTP over TCP; the owner role needs the bearer token.
    Tcp { host: String, port: u16 },
    /// Flux's local connector protocol over a Unix socket.
    Flux(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    #[error("invalid URI '{0}': expected unix:///PATH, tcp://HOST:PORT or flux:///PATH")]
    Scheme(String),
    #[error("invalid URI '{0}': the socket path must be absolute")]
    RelativePath(String),
    #[error("invalid URI '{0}': expected tcp://HOST:PORT with a port in 1-65535")]
    Port(String),
}

impl Uri {
    pub fn parse(s: &str) -> Result<Uri, UriError> {
        if let Some(p) = s.strip_prefix("unix://") {
            return Ok(Uri::Unix(abs_path(s, p)?));
        }
        if let Some(p) = s.strip_prefix("flux://") {
            return Ok(Uri::Flux(abs_path(s, p)?));
        }
        if let Some(hp) = s.strip_prefix("tcp://") {
            let hp = hp.strip_suffix('/').unwrap_or(hp);
            let (host, port) = hp
                .rsplit_once(':')
                .ok_or_else(|| UriError::Port(s.into()))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            let port: u16 = port.parse().map_err(|_| UriError::Port(s.into()))?;
            if host.is_empty() || port == 0 {
                return Err(UriError::Port(s.into()));
            }
            return Ok(Uri::Tcp {
                host: host.to_string(),
                port,
            });
        }
        Err(UriError::Scheme(s.into()))
    }
}

fn abs_path(whole: &str, p: &str) -> Result<PathBuf, UriError> {
    if !p.starts_with('/') {
        return Err(UriError::RelativePath(whole.into()));
    }
    Ok(PathBuf::from(p))
}

impl fmt::Display for Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uri::Unix(p) => write!(f, "unix://{}", p.display()),
            Uri::Flux(p) => write!(f, "flux://{}", p.display()),
            Uri::Tcp { host, port } if host.contains(':') => write!(f, "tcp://[{host}]:{port}"),
            Uri::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
        }
    }
}

/// Inputs for the default locations, so callers (and tests) decide where
/// they come from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub xdg_runtime_dir: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub uid: u32,
}

impl Env {
    /// Read the process environment.
    pub fn from_process() -> Env {
        let get = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Env {
            xdg_runtime_dir: get("XDG_RUNTIME_DIR"),
            xdg_state_home: get("XDG_STATE_HOME"),
            home: get("HOME"),
            uid: current_uid(),
        }
    }

    /// The embedded default's socket: `$XDG_RUNTIME_DIR/roster/roster.sock`,
    /// else `/tmp/roster-$UID/roster.sock`.
    pub fn default_socket(&self) -> PathBuf {
        self.runtime_dir().join("roster.sock")
    }

    /// The directory holding the default socket.
    pub fn runtime_dir(&self) -> PathBuf {
        match &self.xdg_runtime_dir {
            Some(d) => d.join("roster"),
            None => PathBuf::from(format!("/tmp/roster-{}", self.uid)),
        }
    }

    /// The embedded default's state directory: `$XDG_STATE_HOME/roster`,
    /// else `$HOME/.local/state/roster`, else `/tmp/roster-$UID/state`.
    pub fn default_statedir(&self) -> PathBuf {
        match (&self.xdg_state_home, &self.home) {
            (Some(d), _) => d.join("roster"),
            (None, Some(h)) => h.join(".local/state/roster"),
            (None, None) => PathBuf::from(format!("/tmp/roster-{}/state", self.uid)),
        }
    }

    /// The default service URI: `unix://` + [`Env::default_socket`].
    pub fn default_uri(&self) -> Uri {
        Uri::Unix(self.default_socket())
    }
}

/// The URI a client uses: the explicit one, else `$ROSTER_URI`, else the
/// embedded default's socket.
/// (The first of a comma list: see [`client_uris`].)
pub fn client_uri(explicit: Option<&str>) -> Result<Uri, UriError> {
    client_uris(explicit).map(|mut l| l.swap_remove(0))
}

/// The URIs a client uses (high availability: `--uri` / `$ROSTER_URI`
/// may be a comma list of the servers, tried in order): the explicit
/// list, else `$ROSTER_URI`, else the embedded default's socket.
pub fn client_uris(explicit: Option<&str>) -> Result<Vec<Uri>, UriError> {
    match explicit {
        Some(u) => parse_list(u),
        None => match std::env::var(URI_ENV) {
            Ok(u) if !u.is_empty() => parse_list(&u),
            _ => Ok(vec![Env::from_process().default_uri()]),
        },
    }
}

/// A comma-separated list of URIs (empty items are skipped; at least one).
pub fn parse_list(s: &str) -> Result<Vec<Uri>, UriError> {
    let list = s
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(Uri::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if list.is_empty() {
        return Uri::parse(s).map(|u| vec![u]);
    }
    Ok(list)
}

/// The text a standby server (etcd backend) puts before the leader's URIs
/// in its EAGAIN answer to a request only the leader serves.
pub const NOT_LEADER: &str = "not the leader; the leader is ";

/// The leader named by a standby's EAGAIN answer ([`NOT_LEADER`]), if
/// `message` is one.
pub fn leader_redirect(message: &str) -> Option<Vec<Uri>> {
    parse_list(message.strip_prefix(NOT_LEADER)?).ok()
}

/// The real uid of this process (owner of `/proc/self`).
pub fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(Path::new("/proc/self"))
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_redirects() {
        let l = parse_list("unix:///a.sock, tcp://127.0.0.1:8050,").unwrap();
        assert_eq!(
            l,
            vec![
                Uri::Unix("/a.sock".into()),
                Uri::Tcp {
                    host: "127.0.0.1".into(),
                    port: 8050
                }
            ]
        );
        assert!(parse_list("unix:///a.sock,bogus").is_err());
        assert!(parse_list(",").is_err());
        assert_eq!(
            leader_redirect("not the leader; the leader is unix:///b.sock"),
            Some(vec![Uri::Unix("/b.sock".into())])
        );
        assert_eq!(
            leader_redirect("not the leader; no leader is elected yet, try again"),
            None
        );
    }

    #[test]
    fn parse_forms() {
        assert_eq!(
            Uri::parse("unix:///run/r.sock").unwrap(),
            Uri::Unix("/run/r.sock".into())
        );
        assert_eq!(
            Uri::parse("tcp://127.0.0.1:8050").unwrap(),
            Uri::Tcp {
                host: "127.0.0.1".into(),
                port: 8050
            }
        );
        assert_eq!(
            Uri::parse("tcp://[::1]:80").unwrap(),
            Uri::Tcp {
                host: "::1".into(),
                port: 80
            }
        );
        assert_eq!(
            Uri::parse("tcp://[::1]:80").unwrap().to_string(),
            "tcp://[::1]:80"
        );
        assert_eq!(
            Uri::parse("flux:///tmp/f").unwrap(),
            Uri::Flux("/tmp/f".into())
        );
        assert!(matches!(
            Uri::parse("unix://rel"),
            Err(UriError::RelativePath(_))
        ));
        assert!(matches!(Uri::parse("tcp://host"), Err(UriError::Port(_))));
        assert!(matches!(Uri::parse("tcp://host:0"), Err(UriError::Port(_))));
        assert!(matches!(Uri::parse("tcp://:80"), Err(UriError::Port(_))));
        assert!(matches!(Uri::parse("http://x"), Err(UriError::Scheme(_))));
        for s in ["unix:///a/b", "tcp://h:1", "flux:///c"] {
            assert_eq!(Uri::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn defaults() {
        let e = Env {
            xdg_runtime_dir: Some("/run/user/5".into()),
            xdg_state_home: None,
            home: Some("/home/u".into()),
            uid: 5,
        };
        assert_eq!(
            e.default_socket(),
            PathBuf::from("/run/user/5/roster/roster.sock")
        );
        assert_eq!(
            e.default_statedir(),
            PathBuf::from("/home/u/.local/state/roster")
        );
        let bare = Env {
            uid: 7,
            ..Env::default()
        };
        assert_eq!(
            bare.default_socket(),
            PathBuf::from("/tmp/roster-7/roster.sock")
        );
        assert_eq!(
            bare.default_statedir(),
            PathBuf::from("/tmp/roster-7/state")
        );
    }
}
