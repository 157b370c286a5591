//! The state of the execution targets every subsystem reads: the
//! inventory, the host map, exclude, drain, online, torpid and lost sets.
//!
//! It is a struct of its own so that the acquire machinery can borrow it
//! (through [`TargetState::truth`]) while the service borrows
//! [`Acquire`](crate::acquire::Acquire) mutably.

use super::{Inventory, StartError};
use crate::acquire::{self, GroupError, Truth};
use crate::drain::DrainTable;
use crate::errno::*;
use crate::journal::TruncateState;
use hostlist::Hostlist;
use idset::IdSet;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What the service knows of its targets.
#[derive(Debug)]
pub(super) struct TargetState {
    pub(super) inventory: Option<Inventory>,
    /// Targets `0..size` exist (max of R's ranks + 1).
    pub(super) size: u32,
    /// Rank → hostname, from R's nodelist (sparse: R's ranks only).
    pub(super) hosts: BTreeMap<u32, Arc<str>>,
    /// Hostname → its ranks.
    pub(super) host_ranks: HashMap<Arc<str>, Vec<u32>>,
    pub(super) exclude: IdSet,
    pub(super) drain: DrainTable,
    pub(super) online: IdSet,
    pub(super) torpid: IdSet,
    /// Targets that left the online set (RFC 28 shrink bookkeeping).
    pub(super) lost: IdSet,
    /// What `resource.summary`'s list part needs of the inventory
    /// (built at its first use, dropped with the inventory).
    pub(super) list_index: std::cell::OnceCell<super::summary::ListIndex>,
}

impl TargetState {
    pub(super) fn new() -> TargetState {
        TargetState {
            inventory: None,
            size: 0,
            hosts: BTreeMap::new(),
            host_ranks: HashMap::new(),
            exclude: IdSet::new(),
            drain: DrainTable::new(0),
            online: IdSet::new(),
            torpid: IdSet::new(),
            lost: IdSet::new(),
            list_index: std::cell::OnceCell::new(),
        }
    }

    /// The state a journal `truncate` summary describes.
    pub(super) fn truncate_state(&self) -> TruncateState {
        TruncateState {
            online: self.online.encode(),
            torpid: self.torpid.encode(),
            drain: self.drain.status_json(),
            r: self.inventory.as_ref().map(|i| i.json.clone()),
        }
    }

    /// Every target, `0..size`.
    pub(super) fn all(&self) -> IdSet {
        if self.size > 0 {
            IdSet::from_range(0, self.size - 1)
        } else {
            IdSet::new()
        }
    }

    /// The service state the acquire machinery reads.
    pub(super) fn truth(&self) -> Truth<'_> {
        Truth::new(
            self.inventory.as_ref(),
            &self.exclude,
            &self.lost,
            self.drain.drained(),
            &self.online,
            &self.torpid,
        )
    }

    /// The targets a scheduler sees as usable (RFC 28 `up`).
    pub(super) fn up(&self) -> IdSet {
        self.truth().into_up()
    }

    /// Take a new inventory: the size only grows; the host map follows R.
    pub(super) fn set_inventory(&mut self, inv: Inventory) {
        let max_rank = inv.ranks().last();
        let size = max_rank.map_or(0, |r| r + 1).max(self.size);
        self.size = size;
        self.drain.resize(size);
        self.hosts.clear();
        self.host_ranks.clear();
        for rank in inv.ranks() {
            if let Some(h) = inv.rset.hostname(rank) {
                let h: Arc<str> = Arc::from(h);
                self.hosts.insert(rank, h.clone());
                self.host_ranks.entry(h).or_default().push(rank);
            }
        }
        self.inventory = Some(inv);
        self.list_index = std::cell::OnceCell::new();
    }

    /// The hostlist of some targets (targets without a known host are
    /// skipped).
    pub(super) fn nodelist_of(&self, ids: &IdSet) -> String {
        let mut hl = Hostlist::new();
        // Walk the known hosts inside each range, not every id: `ids` may
        // be 0-2147483646 for an R with a few sparse ranks.
        for &(lo, hi) in ids.ranges() {
            for h in self.hosts.range(lo..=hi).map(|(_, h)| h) {
                hl.push(h);
            }
        }
        hl.encode()
    }

    /// Decode drain targets: an idset, else a hostlist mapped through R.
    pub(super) fn decode_targets(&self, s: &str) -> Result<IdSet, RpcError> {
        if let Ok(ids) = IdSet::parse(s) {
            return Ok(ids);
        }
        if self.inventory.is_none() {
            return Err(RpcError::new(
                EINVAL,
                "R is unavailable for mapping hostnames to ranks",
            ));
        }
        let hl = Hostlist::decode(s)
            .map_err(|_| RpcError::new(EINVAL, "invalid targets: Hostlist cannot be decoded"))?;
        let mut ranks = Vec::new();
        let mut missing = Hostlist::new();
        for h in hl.iter() {
            match self.host_ranks.get(h.as_str()) {
                Some(rs) => ranks.extend_from_slice(rs),
                None => missing.push(&h),
            }
        }
        if !missing.is_empty() {
            return Err(RpcError::new(
                EINVAL,
                format!("invalid targets: invalid hosts: {}", missing.encode()),
            ));
        }
        ranks.sort_unstable();
        ranks.dedup();
        Ok(IdSet::from_sorted_ranges(ranks.into_iter().map(|r| (r, r))).unwrap_or_default())
    }

    /// Decode and check a `[resource.groups]` table.
    pub(super) fn decode_groups(
        &self,
        raw: &[(String, String)],
    ) -> Result<Vec<(String, IdSet)>, GroupError> {
        let mut out = Vec::with_capacity(raw.len());
        for (name, spec) in raw {
            let bad = |reason: String| GroupError::Spec {
                group: name.clone(),
                spec: spec.clone(),
                reason,
            };
            let ids = self.decode_targets(spec).map_err(|e| bad(e.message()))?;
            if let Some(last) = ids.last() {
                if self.size > 0 && last >= self.size {
                    return Err(bad("idset is out of range".into()));
                }
            }
            out.push((name.clone(), ids));
        }
        acquire::check_groups(raw, &out)?;
        Ok(out)
    }

    pub(super) fn decode_exclude(&self, spec: &str) -> Result<IdSet, StartError> {
        let err = |reason: String| StartError::Exclude {
            spec: spec.to_string(),
            reason,
        };
        let ids = self.decode_targets(spec).map_err(|e| err(e.message()))?;
        if self.size > 0 {
            if let Some(last) = ids.last() {
                if last >= self.size {
                    return Err(err(format!("exclude set {spec} is out of range")));
                }
            }
        }
        Ok(ids)
    }

    /// Map stored (rank, host) pairs to current ranks: a rank whose host
    /// moved follows the host (its first rank), a vanished host is dropped,
    /// ranks past the size are dropped.
    pub(super) fn remap(&self, ids: &IdSet, nodelist: &str) -> IdSet {
        let hosts: Vec<String> = match Hostlist::decode(nodelist) {
            Ok(hl) => hl.iter().collect(),
            Err(_) => Vec::new(),
        };
        let mut out = IdSet::new();
        for (i, rank) in ids.iter().enumerate() {
            let host = hosts.get(i);
            let current = match host {
                None => Some(rank),
                Some(h) => match self.hosts.get(&rank) {
                    Some(cur) if **cur == **h => Some(rank),
                    _ => self
                        .host_ranks
                        .get(h.as_str())
                        .and_then(|rs| rs.first().copied()),
                },
            };
            if let Some(r) = current {
                if r < self.size {
                    out.insert(r);
                }
            }
        }
        out
    }
}
