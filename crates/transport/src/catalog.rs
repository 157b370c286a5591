//! Stand-in for the lead's `rpc::catalog::max_body` until the topic
//! catalogue lands in `rpc` (same signature; then this module goes and
//! its callers use `rpc::catalog`).

use rpc::{wire, Role};

/// The catalogue's body limit when the role is not bound by it (the
/// configured `max-request-bytes` applies alone).
pub(crate) const UNBOUNDED: usize = usize::MAX;

/// The largest request body `role` may send on `topic`: 64 KiB for
/// agents, users and guests (an agent 1 MiB on its own session, whose
/// relay lines carry idsets of its subtree), 1 MiB for a scheduler, and
/// no bound of its own for admin and owner (`max-request-bytes` applies).
pub fn max_body(topic: &str, role: &Role) -> usize {
    const SMALL: usize = 64 << 10;
    const MEDIUM: usize = 1 << 20;
    match role {
        Role::Owner | Role::Admin => UNBOUNDED,
        Role::Scheduler => MEDIUM,
        Role::Agent(_) if topic == wire::SESSION_TOPIC || topic == wire::SESSION_LINE_TOPIC => {
            MEDIUM
        }
        Role::Agent(_) | Role::User | Role::Guest => SMALL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_by_role_and_topic() {
        let agent = Role::Agent("n1".into());
        assert_eq!(max_body("resource.drain", &agent), 64 << 10);
        assert_eq!(max_body(wire::SESSION_LINE_TOPIC, &agent), 1 << 20);
        assert_eq!(max_body("resource.acquire", &Role::Scheduler), 1 << 20);
        assert_eq!(max_body("no.such-topic", &Role::Guest), 64 << 10);
        assert_eq!(max_body("resource.get", &Role::User), 64 << 10);
        assert_eq!(max_body("resource.reload", &Role::Admin), UNBOUNDED);
        assert_eq!(max_body("resource.reload", &Role::Owner), UNBOUNDED);
    }
}
