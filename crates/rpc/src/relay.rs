//! Agent relays: the tree the service computes over its ranks, and the
//! keys of the relay session's messages.
//!
//! A relay is an agent (`roster agent --relay`) that also accepts child
//! agents and speaks upward for them, like a flux broker in a tree-based
//! overlay network.  The service arranges its ranks in a k-ary tree
//! (flux's `tbon.topo = kary:K`, `[serve] relay-fanout = K`): rank 0 is
//! the root, the parent of rank r > 0 is (r - 1) / K.  A relay at rank r
//! speaks for its own rank and for ranks of its [`subtree`] only; it may
//! be connected to the service directly or to any relay above it.
//!
//! A relay session is an agent session (see [`crate::wire::SESSION_TOPIC`])
//! whose hello carries `"relay": true`.  Its welcome adds
//! `"relay": {"fanout": K, "subtree": IDSET, "hosts": HOSTLIST}`
//! (the subtree's ranks that R knows, and their hostnames in rank order).
//! Each later line of the session is a JSON object with any of:
//!
//! * `hello`: `[{"ranks": IDSET, "cores": IDSET?, "gpus": IDSET?}, ...]`:
//!   children joining, grouped by identical resources (without `cores`
//!   the group is not verified, like an agent sending no R);
//! * `lively`: `IDSET`: the children heard from since the relay's last
//!   line (one such line per relay per heartbeat period);
//! * `gone`: `IDSET`: children whose sessions ended (offline at once);
//! * `torpid`: `IDSET`: every rank below the relay that it finds torpid
//!   now (no heartbeat from it for `torpid-max`, the welcome's value),
//!   sent whenever the set changes (`""` once none is left).  The service
//!   marks those ranks torpid and the ones dropped from the set lively
//!   again; a rank it hears nothing of at all (the relay itself is silent)
//!   still turns torpid by the service's own timer.
//!
//! Every line also counts as the relay's own heartbeat.  The service
//! answers on the session's reply stream, after the welcome, with lines
//! holding any of `accepted` (`IDSET`), `refused` and `ended`
//! (`[{"ranks": IDSET, "errnum": N, "errstr": TEXT}]`: hellos refused,
//! accepted ranks dropped later, e.g. after `offline-timeout`), and
//! `drained` (`[{"ranks": IDSET, "reason": TEXT}]`: verification
//! drains).  A relay routes each answer to the child whose subtree holds
//! the ranks; a leaf agent receives the same `drained` line on its own
//! session.

use idset::IdSet;

/// The default fan-out of the tree (`[serve] relay-fanout`).
pub const DEFAULT_FANOUT: u32 = 128;

/// Hello key: this session is a relay's.
pub const RELAY: &str = "relay";

/// Only a relay credential (or a role that is not tied to a host: the
/// owner) may say hello with [`RELAY`]: an agent's certificate speaks for
/// its own host, never for a subtree.  EPERM naming the role otherwise.
pub fn may_relay(role: &crate::Role) -> Result<(), crate::RpcError> {
    match role {
        crate::Role::Agent(own) => Err(crate::RpcError::new(
            crate::errno::EPERM,
            format!(
                "agent hello: a relay session requires the relay role: the certificate of {own} has the agent role ([serve.auth] relay, or `roster serve ca issue --role relay`, gives it)"
            ),
        )),
        _ => Ok(()),
    }
}
/// The parent of `rank` in the k-ary tree (`None` for the root, rank 0).
pub fn parent(rank: u32, fanout: u32) -> Option<u32> {
    let k = fanout.max(1);
    (rank > 0).then(|| (rank - 1) / k)
}

/// The descendants of `rank` (not `rank` itself) among ranks `0..size`.
/// Each level of a k-ary subtree is one contiguous range, so this costs
/// one range per level.
pub fn subtree(rank: u32, fanout: u32, size: u32) -> IdSet {
    let k = u64::from(fanout.max(1));
    let size = u64::from(size);
    let mut out = IdSet::new();
    let (mut lo, mut hi) = (u64::from(rank), u64::from(rank));
    loop {
        lo = lo * k + 1;
        hi = hi * k + k;
        if lo >= size {
            break;
        }
        let top = hi.min(size - 1);
        // Both fit in u32: they are below `size`.
        out.insert_range(lo as u32, top as u32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `rank` lies in the subtree of `ancestor` (itself excluded).
    fn is_below(rank: u32, ancestor: u32, fanout: u32) -> bool {
        let mut r = rank;
        while let Some(p) = parent(r, fanout) {
            if p == ancestor {
                return true;
            }
            if p < ancestor {
                return false;
            }
            r = p;
        }
        false
    }

    #[test]
    fn kary_tree() {
        assert_eq!(parent(0, 2), None);
        assert_eq!(parent(1, 2), Some(0));
        assert_eq!(parent(6, 2), Some(2));
        assert_eq!(subtree(0, 2, 7).encode(), "1-6");
        assert_eq!(subtree(1, 2, 7).encode(), "3-4");
        assert_eq!(subtree(1, 2, 20).encode(), "3-4,7-10,15-19");
        assert_eq!(subtree(3, 2, 7).encode(), "");
        assert_eq!(subtree(0, 128, 131072).len(), 131071);
        assert_eq!(subtree(1, 128, 131072).encode(), "129-256,16513-32896");
        assert!(is_below(16513, 1, 128));
        assert!(is_below(129, 1, 128));
        assert!(!is_below(129, 2, 128));
        assert!(!is_below(1, 1, 128));
        assert!(is_below(5, 0, 1));
        // A fan-out of 0 is taken as 1 (a chain).
        assert_eq!(subtree(2, 0, 5).encode(), "3-4");
        // No overflow near the top of the rank space.
        assert_eq!(subtree(u32::MAX - 1, 2, u32::MAX).encode(), "");
    }

    #[test]
    fn subtree_matches_parent_walk() {
        for k in 1..5u32 {
            for r in 0..40u32 {
                let s = subtree(r, k, 100);
                for x in 0..100u32 {
                    assert_eq!(s.contains(x), is_below(x, r, k), "k={k} r={r} x={x}");
                }
            }
        }
    }
}
