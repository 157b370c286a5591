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
    pub(super) fn summary_rpc(
        &mut self,
        _: f64,
        _: &Request,
        body: msg::SummaryRequest,
        _: &mut Vec<Output>,
    ) -> Handled {
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
        let list = match (list, &status) {
            (true, Some(_)) => self.list_summary()?,
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
            // Roster has no scheduler: nothing is allocated (as
            // `resource.sched-status` says).
            allocated: String::new(),
            drain,
        }))
    }

    /// `list`'s cells; `None` where the list view must compute them
    /// itself (see [`msg::SummaryResponse::list`]).
    fn list_summary(&self) -> Result<Option<ListSummary>, RpcError> {
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
