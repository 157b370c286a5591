//! From a client certificate to a role.

use crate::PeerCert;
use rpc::Role;

/// The role names a certificate or `[serve.auth]` can give, in the order
/// `[serve.auth]` lists are consulted: `relay` and `agent` first (the
/// node restriction is the most specific grant; `relay` is the narrower
/// list of the two), then by privilege.
const ORDER: [&str; 6] = ["relay", "agent", "owner", "admin", "scheduler", "user"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleMapError {
    #[error("unknown role '{0}': expected one of agent, relay, user, scheduler, admin, owner")]
    Role(String),
    #[error("invalid certificate name pattern '{0}': {1}")]
    Pattern(String, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// `*`: any name.
    Any,
    /// `*.example.com`: names ending in `.example.com`.
    Suffix(String),
    /// A hostlist (`node[0-127],login1`).
    Hosts(hostlist::Hostlist),
}

impl Pattern {
    fn parse(s: &str) -> Result<Pattern, RoleMapError> {
        let s = s.trim();
        if s == "*" {
            return Ok(Pattern::Any);
        }
        if let Some(rest) = s.strip_prefix("*.") {
            if rest.is_empty() || rest.contains('*') {
                return Err(RoleMapError::Pattern(s.into(), "expected *.DOMAIN".into()));
            }
            return Ok(Pattern::Suffix(format!(".{rest}")));
        }
        if s.contains('*') {
            return Err(RoleMapError::Pattern(
                s.into(),
                "'*' is allowed alone or as '*.DOMAIN'".into(),
            ));
        }
        let hl = hostlist::Hostlist::decode(s)
            .map_err(|e| RoleMapError::Pattern(s.into(), e.to_string()))?;
        if hl.is_empty() {
            return Err(RoleMapError::Pattern(s.into(), "empty".into()));
        }
        Ok(Pattern::Hosts(hl))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Suffix(sfx) => name.len() > sfx.len() && name.ends_with(sfx.as_str()),
            Pattern::Hosts(hl) => hl.contains(name),
        }
    }
}

/// How a verified client certificate gets its role: the first
/// `[serve.auth]` list (relay, agent, owner, admin, scheduler, user) with a
/// pattern matching the certificate's name; else, if `from_units`, the
/// first organizational unit of its subject that names a role (what
/// `roster serve ca issue --role` writes); else no role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMap {
    /// Read the role from the subject's OU (default true).
    pub from_units: bool,
    rules: Vec<(usize, Pattern)>,
}

impl Default for RoleMap {
    fn default() -> RoleMap {
        RoleMap {
            from_units: true,
            rules: Vec::new(),
        }
    }
}

fn role_named(i: usize, name: &str) -> Role {
    match ORDER[i] {
        "agent" => Role::Agent(name.into()),
        "relay" => Role::Relay(name.into()),
        "owner" => Role::Owner,
        "admin" => Role::Admin,
        "scheduler" => Role::Scheduler,
        _ => Role::User,
    }
}

impl RoleMap {
    /// Certificates whose name matches `pattern` (`*`, `*.DOMAIN`, or a
    /// hostlist) get `role`.
    pub fn add(&mut self, role: &str, pattern: &str) -> Result<(), RoleMapError> {
        let i = ORDER
            .iter()
            .position(|r| *r == role)
            .ok_or_else(|| RoleMapError::Role(role.into()))?;
        self.rules.push((i, Pattern::parse(pattern)?));
        self.rules.sort_by_key(|(i, _)| *i);
        Ok(())
    }

    /// The role of a certificate, if any.
    pub fn role_of(&self, peer: &PeerCert) -> Option<Role> {
        if let Some((i, _)) = self.rules.iter().find(|(_, p)| p.matches(&peer.name)) {
            return Some(role_named(*i, &peer.name));
        }
        if !self.from_units {
            return None;
        }
        peer.units.iter().find_map(|u| {
            ORDER
                .iter()
                .position(|r| r.eq_ignore_ascii_case(u.trim()))
                .map(|i| role_named(i, &peer.name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, units: &[&str]) -> PeerCert {
        PeerCert {
            name: name.into(),
            units: units.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn units_name_the_role() {
        let m = RoleMap::default();
        assert_eq!(
            m.role_of(&peer("n1", &["agent"])),
            Some(Role::Agent("n1".into()))
        );
        assert_eq!(
            m.role_of(&peer("s", &["HPC", "scheduler"])),
            Some(Role::Scheduler)
        );
        assert_eq!(m.role_of(&peer("x", &["HPC"])), None);
        assert_eq!(m.role_of(&peer("x", &[])), None);
        let off = RoleMap {
            from_units: false,
            ..RoleMap::default()
        };
        assert_eq!(off.role_of(&peer("n1", &["admin"])), None);
    }

    #[test]
    fn lists_come_first_agent_before_privilege() {
        let mut m = RoleMap::default();
        m.add("user", "*").unwrap();
        m.add("admin", "alice").unwrap();
        m.add("admin", "*.ops.example").unwrap();
        m.add("agent", "node[0-3]").unwrap();
        assert_eq!(
            m.role_of(&peer("node2", &["admin"])),
            Some(Role::Agent("node2".into()))
        );
        assert_eq!(m.role_of(&peer("alice", &[])), Some(Role::Admin));
        assert_eq!(m.role_of(&peer("b.ops.example", &[])), Some(Role::Admin));
        assert_eq!(m.role_of(&peer("ops.example", &[])), Some(Role::User));
        assert_eq!(m.role_of(&peer("node9", &["agent"])), Some(Role::User));
    }

    #[test]
    fn bad_rules() {
        let mut m = RoleMap::default();
        assert_eq!(
            m.add("root", "*").unwrap_err().to_string(),
            "unknown role 'root': expected one of agent, relay, user, scheduler, admin, owner"
        );
        m.add("relay", "node[0-1]").unwrap();
        assert_eq!(
            m.role_of(&peer("node1", &["agent"])),
            Some(Role::Relay("node1".into()))
        );
        assert_eq!(
            RoleMap::default().role_of(&peer("r1", &["relay"])),
            Some(Role::Relay("r1".into()))
        );
        assert!(m.add("user", "a*b").is_err());
        assert!(m.add("user", "*.").is_err());
        assert!(m.add("user", "n[1-").is_err());
    }
}
