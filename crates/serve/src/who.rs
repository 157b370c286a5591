//! Naming the requester of a drain or undrain on a Unix socket: the shell
//! resolves the peer's uid to a user name (the core records what it is
//! given, see `rpc::Request::who`).
//!
//! Only the owner and root may drain over a Unix socket, and both are
//! local accounts, so `/etc/passwd` is read (no NSS lookup, which could
//! block the service loop on a directory server), at most once a minute
//! per uid.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a name read from `/etc/passwd` is used before it is read
/// again: a drain does not wait for four file system calls on the
/// service loop.
const NAME_TTL: Duration = Duration::from_secs(60);

/// The most uids whose names are kept (only the owner and root may drain
/// over a Unix socket: two, in practice).
const NAMES_KEPT: usize = 16;

/// `alice (uid 1000)`, or `None` when the uid has no local account.
pub(crate) fn unix_requester(uid: u32) -> Option<Arc<str>> {
    type Names = Vec<(u32, Instant, Option<Arc<str>>)>;
    static NAMES: Mutex<Names> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if let Some((_, at, name)) = names.iter().find(|(u, _, _)| *u == uid) {
        if now.duration_since(*at) < NAME_TTL {
            return name.clone();
        }
    }
    let name = read_requester(uid);
    names.retain(|(u, _, _)| *u != uid);
    if names.len() >= NAMES_KEPT {
        names.clear();
    }
    names.push((uid, now, name.clone()));
    name
}

fn read_requester(uid: u32) -> Option<Arc<str>> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let name = user_of(&passwd, uid)?;
    Some(format!("{name} (uid {uid})").into())
}

/// The name of `uid` in a passwd(5) text.
fn user_of(passwd: &str, uid: u32) -> Option<&str> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid && !name.is_empty()).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_name_of_a_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # comment\n\
                      broken\n\
                      alice:x:1000:1000:Alice:/home/alice:/bin/sh\n";
        assert_eq!(user_of(passwd, 0), Some("root"));
        assert_eq!(user_of(passwd, 1000), Some("alice"));
        assert_eq!(user_of(passwd, 1001), None);
    }

    #[test]
    fn root_is_named_on_this_machine() {
        assert_eq!(unix_requester(0).as_deref(), Some("root (uid 0)"));
    }
}
