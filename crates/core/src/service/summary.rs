//! `resource.summary` (Roster's): what `roster resource status`, the
//! drain listing and `list` print, computed here once per state change
//! rather than by every command from R.
//!
//! The status part is the core's own sets (kept up to date as events
//! apply: drain groups, online, torpid, exclude) with R reduced to its
//! ranks and nodelist.  The list part is the scheduler's view
//! (`resource.sched-status`) split by state and property set with the
//! very code `flux resource list`'s emulation runs
//! ([`Rset::split_by_properties`]), on the sets as a client decodes them
//! from that reply, so that a client printing the cells prints what it
//! would have computed.  Both are serialised once and shared by every
//! reply until the next recorded event or inventory drops them (with the
//! `status` and `sched-status` caches).

use super::*;
use hostlist::Hostlist;
use rpc::msg::{DrainGroup, ListCell, ListSummary, StatusSummary, SummaryResponse};
use rset::RSummary;

impl Service {
    /// `resource.summary {list?}`.
    pub(super) fn summary_rpc(&mut self, body: msg::SummaryRequest) -> Handled {
        let slot = usize::from(body.list);
        if let Some(p) = self.summary_cache.get(slot).and_then(Option::as_ref) {
            return Ok(Some(p.clone()));
        }
        let s = self.summary(body.list)?;
        let p = Payload::serialised(&msg::encode(&s));
        if let Some(c) = self.summary_cache.get_mut(slot) {
            *c = Some(p.clone());
        }
        Ok(Some(p))
    }

    /// The summary computed from the current state.
    pub fn summary(&self, list: bool) -> Result<SummaryResponse, RpcError> {
        let status = self.status_summary()?;
        // With `[queues]`, list lines name their queues (from `config.get`
        // and each line's properties): the client computes those.
        let queues = self.queues.as_ref().is_some_and(|q| !q.is_empty());
        let list = match (list, &status) {
            (true, Some(_)) if !queues => self.list_summary()?,
            _ => None,
        };
        Ok(SummaryResponse { status, list })
    }

    /// The sets of `resource.status` with R as ranks and nodelist;
    /// `None` when the nodelist would not read back as the same list
    /// (hostnames whose grouping a client would rebuild differently).
    fn status_summary(&self) -> Result<Option<StatusSummary>, RpcError> {
        let Some(inv) = &self.state.inventory else {
            return Err(RpcError::new(
                ENOENT,
                "error preparing response: resource set is not known yet",
            ));
        };
        // What a client reads from R: `RSummary` (status) is its reader.
        let r = RSummary::from_json(&inv.json)
            .map_err(|e| RpcError::new(EINVAL, format!("error preparing response: {e}")))?;
        let nodelist = match &r.nodelist {
            Some(hl) => {
                let text = hl.encode();
                match Hostlist::decode(&text) {
                    Ok(back) if back == *hl && back.range_count() == hl.range_count() => text,
                    _ => return Ok(None),
                }
            }
            None => String::new(),
        };
        let offline = self.state.all().difference(&self.state.online);
        let drain = self
            .state
            .drain
            .groups()
            .into_iter()
            .map(|(ids, timestamp, reason)| DrainGroup {
                ranks: ids.encode(),
                timestamp,
                reason: reason.as_deref().unwrap_or("").to_string(),
            })
            .collect();
        Ok(Some(StatusSummary {
            ranks: r.ranks.encode(),
            nodelist,
            online: self.state.online.encode(),
            offline: offline.encode(),
            exclude: self.state.exclude.encode(),
            torpid: self.state.torpid.encode(),
            // As `resource.sched-status` shows it: what schedulers said
            // (`resource.allocated-set`), of the ranks not excluded.
            allocated: self.allocated_valid().encode(),
            drain,
        }))
    }

    /// `list`'s cells; `None` where the list view must compute them
    /// itself (see [`msg::SummaryResponse::list`]).
    fn list_summary(&self) -> Result<Option<ListSummary>, RpcError> {
        let Some(inv) = &self.state.inventory else {
            return Ok(None);
        };
        let index = self
            .state
            .list_index
            .get_or_init(|| ListIndex::of(&inv.rset));
        if index.simple {
            return Ok(Some(self.simple_list(index)));
        }
        let (all, down, allocated) = self.sched_sets()?;
        // The sets as a client decodes them from the reply.
        let read = |v: &Value| Rset::from_json(v).ok();
        let (Some(all), Some(down), Some(allocated)) = (read(&all), read(&down), read(&allocated))
        else {
            return Ok(None);
        };
        let (Ok(up), Ok(free)) = (
            all.copy_diff(&down),
            if allocated.is_empty() {
                all.copy_diff_copy(&down)
            } else {
                all.copy_diff(&down).and_then(|up| up.copy_diff(&allocated))
            },
        ) else {
            return Ok(None);
        };
        let sets = [&all, &down, &allocated, &up, &free];
        if sets
            .iter()
            .any(|r| r.check_copyable().is_err() || r.hostname_is_property())
        {
            return Ok(None);
        }
        let mut cells: Vec<Vec<ListCell>> = Vec::with_capacity(sets.len());
        for r in sets {
            let Ok(subs) = r.split_by_properties() else {
                return Ok(None);
            };
            cells.push(subs.into_iter().filter_map(cell).collect());
        }
        let mut it = cells.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Some(ListSummary {
            all: next(),
            down: next(),
            allocated: next(),
            up: next(),
            free: next(),
        }))
    }
}

impl Service {
    /// [`Service::list_summary`] when every node has at most one
    /// property ([`ListIndex::simple`]): the property sets are then
    /// single names (or none), listed as `flux resource list` splits
    /// them (in the order the set lists its property names, the nodes
    /// without one last), and the cells follow from rank sets alone, without
    /// building a node (at 131,072 nodes, one split of the nodes costs
    /// seconds of the service loop).  Checked against the general path
    /// by `tests/summary.rs`.
    fn simple_list(&self, index: &ListIndex) -> ListSummary {
        let mut all = self
            .state
            .inventory
            .as_ref()
            .map_or_else(IdSet::new, |i| i.ranks().clone());
        all.subtract(&self.state.exclude);
        let up = all.intersection(&self.state.up());
        let down = all.difference(&up);
        let allocated = self.allocated_valid();
        ListSummary {
            all: self.simple_cells(index, &all),
            down: self.simple_cells(index, &down),
            allocated: self.simple_cells(index, &allocated),
            free: self.simple_cells(index, &up.difference(&allocated)),
            up: self.simple_cells(index, &up),
        }
    }

    fn simple_cells(&self, index: &ListIndex, set: &IdSet) -> Vec<ListCell> {
        let mut props: Vec<(u32, &str, IdSet)> = index
            .by_property
            .iter()
            .filter_map(|(name, ranks)| {
                let own = ranks.intersection(set);
                own.first().map(|first| (first, name.as_str(), own))
            })
            .collect();
        // The split's order: the names as the set lists them (a hash
        // table filled walking the nodes by rank), then no property.
        props.sort_by_key(|(first, _, _)| *first);
        let order = Rset::property_order(props.iter().map(|(_, name, _)| *name));
        props.sort_by_key(|(_, name, _)| order.iter().position(|o| o == name));
        let mut none = set.clone();
        for (_, _, own) in &props {
            none.subtract(own);
        }
        let mut cells: Vec<ListCell> = props
            .into_iter()
            .map(|(_, name, own)| self.simple_cell(index, vec![name.to_string()], own))
            .collect();
        if !none.is_empty() {
            cells.push(self.simple_cell(index, Vec::new(), none));
        }
        cells
    }

    fn simple_cell(&self, index: &ListIndex, properties: Vec<String>, ranks: IdSet) -> ListCell {
        let count = |pick: fn(&(u64, u64, IdSet)) -> u64| -> u64 {
            index
                .shapes
                .iter()
                .map(|shape| pick(shape) * ranks.intersection(&shape.2).len())
                .sum()
        };
        ListCell {
            properties,
            nodelist: self.state.nodelist_of(&ranks),
            nnodes: ranks.len(),
            ncores: count(|s| s.0),
            ngpus: count(|s| s.1),
            ranks: ranks.encode(),
        }
    }
}

/// What `list` needs of an inventory that no event changes (built once
/// per inventory, at the first `list` summary).
#[derive(Debug, Default)]
pub(super) struct ListIndex {
    /// Every node has resources, a hostname that is no property name,
    /// and at most one property: `list`'s cells follow from rank sets
    /// ([`Service::simple_list`]).
    simple: bool,
    /// The ranks of each property.
    by_property: Vec<(String, IdSet)>,
    /// Ranks by (cores, GPUs) of a node.
    shapes: Vec<(u64, u64, IdSet)>,
}

impl ListIndex {
    fn of(r: &Rset) -> ListIndex {
        let mut index = ListIndex {
            simple: true,
            ..ListIndex::default()
        };
        let mut hosts: Vec<String> = Vec::new();
        for node in r.node_infos() {
            let count = |ty: &str| {
                node.children
                    .iter()
                    .filter(|(k, _)| k == ty)
                    .map(|(_, ids)| ids.len())
                    .sum::<u64>()
            };
            let total: u64 = node.children.iter().map(|(_, ids)| ids.len()).sum();
            if total == 0 || node.properties.len() > 1 {
                index.simple = false;
                return index;
            }
            match node.hostname {
                Some(h) => hosts.push(h),
                None => {
                    index.simple = false;
                    return index;
                }
            }
            let (cores, gpus) = (count("core"), count("gpu"));
            match index
                .shapes
                .iter_mut()
                .find(|s| s.0 == cores && s.1 == gpus)
            {
                Some(s) => {
                    s.2.insert(node.rank);
                }
                None => index
                    .shapes
                    .push((cores, gpus, IdSet::from_range(node.rank, node.rank))),
            }
            for p in node.properties {
                match index.by_property.iter_mut().find(|(n, _)| *n == p) {
                    Some((_, ids)) => {
                        ids.insert(node.rank);
                    }
                    None => index
                        .by_property
                        .push((p, IdSet::from_range(node.rank, node.rank))),
                }
            }
        }
        if hosts
            .iter()
            .any(|h| index.by_property.iter().any(|(p, _)| p == h))
        {
            index.simple = false;
        }
        index
    }
}

/// One cell: what `list` shows of a state's nodes with one property set.
fn cell(mut sub: Rset) -> Option<ListCell> {
    if sub.is_empty() {
        return None;
    }
    let properties = sub.property_names_in_list_order();
    sub.sort_by_rank();
    Some(ListCell {
        properties,
        ranks: sub.ranks().encode(),
        nodelist: sub.nodelist().map(|h| h.encode()).unwrap_or_default(),
        nnodes: sub.nnodes() as u64,
        ncores: sub.count("core"),
        ngpus: sub.count("gpu"),
    })
}
