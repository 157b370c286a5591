//! Service addresses: `unix:///path/to.sock`, `tls://HOST:PORT`,
//! `tcp://HOST:PORT` (loopback only) and `flux:///path/to.sock` (the Flux
//! local-connector listener), plus the default locations of the embedded
//! default instance computed from given inputs ([`Env`]).  Reading the
//! process environment is the shells' business (`client::process_env`,
//! `serve`), so this crate does no IO.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Uri {
    /// HTTP over a Unix socket; peer credentials decide the role.
    Unix(PathBuf),
    /// HTTP over plain TCP (listeners: loopback addresses only); the
    /// bearer token decides the role.
    Tcp { host: String, port: u16 },
    /// HTTP over TLS on TCP; the client certificate or the bearer token
    /// decides the role.
    Tls { host: String, port: u16 },
    /// Flux's local connector protocol over a Unix socket.
    Flux(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    #[error(
        "invalid URI '{0}': expected unix:///PATH, tls://HOST:PORT, tcp://HOST:PORT or flux:///PATH"
    )]
    Scheme(String),
    #[error("invalid URI '{0}': the socket path must be absolute")]
    RelativePath(String),
    #[error("invalid URI '{0}': expected {1}://HOST:PORT with a port in 1-65535")]
    Port(String, &'static str),
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
            let (host, port) = host_port(s, hp, "tcp")?;
            return Ok(Uri::Tcp { host, port });
        }
        if let Some(hp) = s.strip_prefix("tls://") {
            let (host, port) = host_port(s, hp, "tls")?;
            return Ok(Uri::Tls { host, port });
        }
        Err(UriError::Scheme(s.into()))
    }
}

fn host_port(whole: &str, hp: &str, scheme: &'static str) -> Result<(String, u16), UriError> {
    let bad = || UriError::Port(whole.into(), scheme);
    let hp = hp.strip_suffix('/').unwrap_or(hp);
    let (host, port) = hp.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_string(), port))
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
            Uri::Tls { host, port } if host.contains(':') => write!(f, "tls://[{host}]:{port}"),
            Uri::Tls { host, port } => write!(f, "tls://{host}:{port}"),
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

/// A comma-separated list of URIs (empty items are skipped; at least one):
/// the servers of a highly available service, tried in order.
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

/// The servers of a service (several: a highly available one) and the
/// walk through them, shared by clients and agents (each keeps its own
/// policy: what may be sent again, how long to go on, backoff).  The
/// server to try now; after a failure, the leader a standby named,
/// followed at once but not twice in a row (two standbys naming each
/// other cannot make it spin), else the next server of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Servers {
    /// Never empty.
    list: Vec<Uri>,
    current: Uri,
    /// The index of the server after `current` in the rotation.
    next: usize,
    /// `current` is the leader a redirect named.
    followed: bool,
}

/// Where [`Servers::failed`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// To the leader a standby named.
    Leader,
    /// To the next server of the list.
    Next,
    /// Back to the first server (every one was tried), or nowhere for a
    /// single server.
    Round,
}

impl Servers {
    /// `first`, then `others` in turn.
    pub fn new(first: Uri, others: Vec<Uri>) -> Servers {
        Servers {
            list: std::iter::once(first.clone()).chain(others).collect(),
            current: first,
            next: 1,
            followed: false,
        }
    }

    /// Every server, in order.
    pub fn list(&self) -> &[Uri] {
        &self.list
    }

    /// The server to try now.
    pub fn current(&self) -> &Uri {
        &self.current
    }

    /// More than one server is known.
    pub fn several(&self) -> bool {
        self.list.len() > 1
    }

    /// A connection was made: the next redirect may be followed again.
    pub fn opened(&mut self) {
        self.followed = false;
    }

    /// Trying [`Servers::current`] failed; `leader` is the leader a
    /// standby named in its answer, if it did.  Moves to the server to
    /// try next.
    pub fn failed(&mut self, leader: Option<&Uri>) -> Step {
        match leader {
            Some(l) if *l != self.current && !self.followed => {
                self.current = l.clone();
                self.followed = true;
                return Step::Leader;
            }
            _ => self.followed = false,
        }
        if !self.several() {
            return Step::Round;
        }
        let i = self.next % self.list.len();
        self.current = self.list[i].clone();
        self.next = i + 1;
        if i == 0 {
            Step::Round
        } else {
            Step::Next
        }
    }

    /// The same servers, rotated to start at the one after `uri` (moving
    /// on from a server that failed), the walk starting afresh.
    pub fn starting_after(&self, uri: &Uri) -> Servers {
        let mut list = self.list.clone();
        if let Some(i) = list.iter().position(|u| u == uri) {
            let n = list.len();
            list.rotate_left((i + 1) % n);
        }
        let first = list.remove(0);
        Servers::new(first, list)
    }
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

    fn servers(s: &str) -> Servers {
        let mut l = parse_list(s).unwrap();
        let first = l.remove(0);
        Servers::new(first, l)
    }

    fn at(s: &Servers) -> String {
        s.current().to_string()
    }

    #[test]
    fn servers_rotate_after_failures() {
        let mut s = servers("unix:///a,unix:///b,unix:///c");
        assert!(s.several());
        assert_eq!(s.list().len(), 3);
        assert_eq!(at(&s), "unix:///a");
        assert_eq!(s.failed(None), Step::Next);
        assert_eq!(at(&s), "unix:///b");
        assert_eq!(s.failed(None), Step::Next);
        assert_eq!(at(&s), "unix:///c");
        // Every server was tried: a new round starts with the first.
        assert_eq!(s.failed(None), Step::Round);
        assert_eq!(at(&s), "unix:///a");
        assert_eq!(s.failed(None), Step::Next);
        assert_eq!(at(&s), "unix:///b");
        // One server: it stays the one to try.
        let mut one = servers("unix:///a");
        assert!(!one.several());
        assert_eq!(one.failed(None), Step::Round);
        assert_eq!(at(&one), "unix:///a");
    }

    #[test]
    fn servers_follow_a_redirect_once_not_twice() {
        let uri = |s: &str| Uri::parse(s).unwrap();
        let mut s = servers("unix:///a,unix:///b,unix:///c");
        assert_eq!(s.failed(None), Step::Next);
        // b is a standby naming c: straight there.
        assert_eq!(s.failed(Some(&uri("unix:///c"))), Step::Leader);
        assert_eq!(at(&s), "unix:///c");
        // c names a: not followed twice in a row, the rotation goes on.
        assert_eq!(s.failed(Some(&uri("unix:///a"))), Step::Next);
        assert_eq!(at(&s), "unix:///c");
        assert_eq!(s.failed(None), Step::Round);
        assert_eq!(at(&s), "unix:///a");
        // A server naming itself is not followed.
        assert_eq!(s.failed(Some(&uri("unix:///a"))), Step::Next);
        assert_eq!(at(&s), "unix:///b");
        // After a failure that named no leader, or a connection made, a
        // redirect is followed again.
        assert_eq!(s.failed(Some(&uri("unix:///c"))), Step::Leader);
        assert_eq!(s.failed(Some(&uri("unix:///b"))), Step::Next);
        assert_eq!(at(&s), "unix:///c");
        assert_eq!(s.failed(None), Step::Round);
        assert_eq!(s.failed(Some(&uri("unix:///c"))), Step::Leader);
        s.opened();
        assert_eq!(s.failed(Some(&uri("unix:///b"))), Step::Leader);
        assert_eq!(at(&s), "unix:///b");
        // One server: a redirect is followed (to a server not listed),
        // once.
        let mut one = servers("unix:///a");
        assert_eq!(one.failed(Some(&uri("unix:///z"))), Step::Leader);
        assert_eq!(at(&one), "unix:///z");
        assert_eq!(one.failed(Some(&uri("unix:///y"))), Step::Round);
        assert_eq!(at(&one), "unix:///z");
    }

    #[test]
    fn servers_starting_after() {
        let s = servers("unix:///a,unix:///b,unix:///c");
        let after_b = s.starting_after(&Uri::Unix("/b".into()));
        assert_eq!(at(&after_b), "unix:///c");
        let order: Vec<String> = after_b.list().iter().map(Uri::to_string).collect();
        assert_eq!(order, ["unix:///c", "unix:///a", "unix:///b"]);
        assert_eq!(
            s.starting_after(&Uri::Unix("/c".into())),
            s,
            "after the last: the first"
        );
        assert_eq!(s.starting_after(&Uri::Unix("/z".into())), s, "unknown");
        // The walk starts afresh.
        let mut w = s.clone();
        w.failed(Some(&Uri::Unix("/z".into())));
        assert_eq!(w.starting_after(&Uri::Unix("/c".into())), s);
        let one = servers("unix:///a");
        assert_eq!(one.starting_after(one.current()), one);
    }

    #[test]
    fn parse_forms() {
        let tcp = |host: &str, port| Uri::Tcp {
            host: host.into(),
            port,
        };
        let tls = Uri::Tls {
            host: "head".into(),
            port: 8050,
        };
        for (s, uri) in [
            ("unix:///run/r.sock", Uri::Unix("/run/r.sock".into())),
            ("tcp://127.0.0.1:8050", tcp("127.0.0.1", 8050)),
            ("tcp://[::1]:80", tcp("::1", 80)),
            ("flux:///tmp/f", Uri::Flux("/tmp/f".into())),
            ("tls://head:8050", tls),
        ] {
            assert_eq!(Uri::parse(s).unwrap(), uri);
        }
        assert!(matches!(
            Uri::parse("unix://rel"),
            Err(UriError::RelativePath(_))
        ));
        assert!(matches!(Uri::parse("tcp://host"), Err(UriError::Port(..))));
        assert!(matches!(
            Uri::parse("tcp://host:0"),
            Err(UriError::Port(..))
        ));
        assert!(matches!(Uri::parse("tcp://:80"), Err(UriError::Port(..))));
        assert!(matches!(Uri::parse("http://x"), Err(UriError::Scheme(_))));
        assert_eq!(
            Uri::parse("tls://h").unwrap_err().to_string(),
            "invalid URI 'tls://h': expected tls://HOST:PORT with a port in 1-65535"
        );
        for s in [
            "unix:///a/b",
            "tcp://h:1",
            "tcp://[::1]:80",
            "tls://h:2",
            "tls://[::1]:3",
            "flux:///c",
        ] {
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
