//! Plain `GET` routes outside the RPC namespace (`/metrics`, `/healthz`,
//! `/readyz`, the web view), answered by a handler the daemon installs
//! with [`crate::Listeners::with_web`].  Paths under
//! [`rpc::wire::PATH_PREFIX`] never reach the handler.
//!
//! The [`PROBES`] are read-only and need no credentials, on TCP and TLS
//! listeners too: bind TCP to loopback (or firewall it) if the metrics
//! must stay private.  Every other route is a browser's: its `Host` must
//! name the listener (the address the client reached, `localhost` on
//! loopback, this machine's name, on TLS the handshake's server name;
//! else `421`, a defence against DNS rebinding), and its caller's role is
//! decided exactly as for an RPC, except that missing credentials make a
//! guest on a Unix socket (any uid but the owner's and root) and on
//! loopback TCP (no `Authorization` header; a wrong one: 401), and on TLS
//! only with `[serve] public-read = true` (else 401, as over RPC).  The
//! handler sees that role, and an RPC route never runs with more than it:
//! [`WebRoute::Rpc`]'s role is capped at the caller's by the listener.

/// The routes for monitoring tools, open to anyone (no `Host` check).
pub const PROBES: &[&str] = &["/metrics", "/healthz", "/readyz"];

use bytes::Bytes;

/// The answer to one `GET`.
#[derive(Debug, Clone)]
pub struct WebResponse {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    pub body: Bytes,
}

impl WebResponse {
    /// A 200 reply.
    pub fn ok(content_type: &'static str, body: impl Into<Bytes>) -> WebResponse {
        WebResponse {
            status: 200,
            content_type,
            body: body.into(),
        }
    }
}

impl std::fmt::Debug for dyn WebHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebHandler")
    }
}

/// What a `GET` route answers with.
#[derive(Debug, Clone)]
pub enum WebRoute {
    /// A complete reply.
    Page(WebResponse),
    /// A read-only RPC on the caller's behalf, with an empty payload,
    /// answered like `POST /v1/TOPIC` (NDJSON lines when `streaming`).
    /// `role` is the most the route grants; the request runs with the
    /// lesser of it and the caller's role ([`cap`]).  Only topics that
    /// change nothing may be offered here.
    Rpc {
        topic: &'static str,
        streaming: bool,
        role: rpc::Role,
    },
}

/// Serves the non-RPC `GET` routes.
pub trait WebHandler: Send + Sync + 'static {
    /// The route for `path` asked by a caller with role `caller`, or
    /// `None` if the handler has no such route (the listener then answers
    /// as for any unknown path).
    fn get(&self, path: &str, caller: &rpc::Role) -> Option<WebRoute>;
}

/// The role an RPC route runs with: the lesser of what the route grants
/// and what the caller has, in the order of read rights guest < user <
/// scheduler, admin < owner (scheduler and admin, which read as a user,
/// meet at user).  An agent keeps its own role: it may read nothing.
pub fn cap(route: &rpc::Role, caller: &rpc::Role) -> rpc::Role {
    use rpc::Role;
    fn level(r: &Role) -> u8 {
        match r {
            Role::Guest | Role::Agent(_) | Role::Relay(_) | Role::Enrol => 0,
            Role::User => 1,
            Role::Scheduler | Role::Admin => 2,
            Role::Owner => 3,
        }
    }
    if matches!(caller, Role::Agent(_) | Role::Relay(_) | Role::Enrol) {
        return caller.clone();
    }
    match level(route).cmp(&level(caller)) {
        std::cmp::Ordering::Less => route.clone(),
        std::cmp::Ordering::Greater => caller.clone(),
        std::cmp::Ordering::Equal if route == caller => route.clone(),
        std::cmp::Ordering::Equal => Role::User,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc::Role::{Admin, Agent, Guest, Owner, Scheduler, User};

    #[test]
    fn a_route_never_grants_more_than_the_caller_has() {
        assert_eq!(cap(&Owner, &Owner), Owner);
        assert_eq!(cap(&User, &Owner), User);
        assert_eq!(cap(&User, &Admin), User);
        assert_eq!(cap(&User, &Guest), Guest);
        assert_eq!(cap(&Guest, &Owner), Guest);
        assert_eq!(cap(&Owner, &Scheduler), Scheduler);
        assert_eq!(cap(&Admin, &Scheduler), User);
        let agent = Agent("node1".into());
        assert_eq!(cap(&User, &agent), agent);
        assert_eq!(cap(&Guest, &agent), agent);
    }
}
