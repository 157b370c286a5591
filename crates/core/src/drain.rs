//! Drain state: which targets are drained, since when, and why.
//!
//! Semantics follow flux-core's resource module (reference notes §3.4-3.5):
//!
//! * A drain without a mode fails as a whole if any target is excluded or
//!   already drained *with* a reason ("rank 1 already drained", EEXIST;
//!   "ranks 0-1 already drained or excluded"; excluded only: EINVAL).
//!   A target drained without a reason may be drained again to add one.
//! * Every drain records an `overwrite` level that decides, per target,
//!   what happens when it is already drained — live and on replay alike:
//!   0 (no mode, `update`): fill in a missing reason, keep the timestamp;
//!   1 (`overwrite`): replace the reason (cleared if none given), keep the timestamp;
//!   2 (`force-overwrite`): replace reason and timestamp.
//! * An undrain without a mode fails if any target is not drained
//!   ("ranks 1-2 not drained", EEXIST); with any mode it just clears.
//! * `resource.status` groups drained targets by (timestamp rounded to whole
//!   seconds, reason) into `{"<idset>": {"timestamp": f, "reason": s}}`.

use crate::errno::{RpcError, EEXIST, EINVAL};
use idset::IdSet;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How a drain request treats targets that are already drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    /// No mode: fail if any target is drained with a reason, or excluded.
    Strict,
    /// `update`: only drain what is not drained; fill in missing reasons.
    Update,
    /// `overwrite`: replace the reason, keep the timestamp.
    Overwrite,
    /// `force-overwrite`: replace the reason and the timestamp.
    ForceOverwrite,
}

impl DrainMode {
    /// Decode the `mode` of a drain request.
    pub fn parse_drain(mode: Option<&str>) -> Result<Self, RpcError> {
        Ok(match mode {
            None => DrainMode::Strict,
            Some("update") => DrainMode::Update,
            Some("overwrite") => DrainMode::Overwrite,
            Some("force-overwrite") => DrainMode::ForceOverwrite,
            Some(_) => return Err(RpcError::new(EINVAL, "Invalid mode specified")),
        })
    }

    /// Decode the `mode` of an undrain request.
    pub fn parse_undrain(mode: Option<&str>) -> Result<Self, RpcError> {
        match mode {
            None => Ok(DrainMode::Strict),
            Some("update") => Ok(DrainMode::Update),
            Some("overwrite") => Ok(DrainMode::Overwrite),
            Some("force-overwrite") => Ok(DrainMode::ForceOverwrite),
            Some(m) => Err(RpcError::new(
                EINVAL,
                format!("invalid undrain mode '{m}' specified"),
            )),
        }
    }

    /// The `overwrite` value recorded in the event (0, 1 or 2).
    pub fn overwrite(self) -> u8 {
        match self {
            DrainMode::Strict | DrainMode::Update => 0,
            DrainMode::Overwrite => 1,
            DrainMode::ForceOverwrite => 2,
        }
    }
}

/// One drained target's record.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainInfo {
    /// When it was drained (seconds since the epoch).
    pub timestamp: f64,
    /// Why, if a reason was given.
    pub reason: Option<Arc<str>>,
}

/// Drain state for targets `0..size`.  Sparse: the records are runs of
/// consecutive targets sharing one record, so memory follows the number of
/// drain operations, never the size or the width of a target range (a
/// single rank near 2^31, or draining `0-2147483646`, is fine).
#[derive(Debug, Clone, Default)]
pub struct DrainTable {
    size: u32,
    /// First target of a run → (last target, record).
    runs: BTreeMap<u32, (u32, DrainInfo)>,
    drained: IdSet,
    reasons: HashMap<Arc<str>, ()>,
}

fn plural(ids: &IdSet) -> &'static str {
    if ids.len() > 1 {
        "s"
    } else {
        ""
    }
}

/// Check decoded targets against the drain size: `idset is empty`, `idset is out of range`.
pub fn validate_targets(targets: &IdSet, size: u32) -> Result<(), RpcError> {
    match targets.last() {
        None => Err(RpcError::new(EINVAL, "idset is empty")),
        Some(last) if last >= size => Err(RpcError::new(EINVAL, "idset is out of range")),
        Some(_) => Ok(()),
    }
}

impl DrainTable {
    /// An empty table for targets `0..size`.
    pub fn new(size: u32) -> Self {
        DrainTable {
            size,
            ..Default::default()
        }
    }

    /// Grow or shrink the covered range; records of targets past the new size are dropped.
    pub fn resize(&mut self, size: u32) {
        if size < self.size {
            self.drained.remove_range(size, u32::MAX);
            self.split_at(size);
            self.runs.split_off(&size);
        }
        self.size = size;
    }

    /// The drained targets.
    pub fn drained(&self) -> &IdSet {
        &self.drained
    }

    /// The record of one target, if drained.
    pub fn get(&self, rank: u32) -> Option<&DrainInfo> {
        self.runs
            .range(..=rank)
            .next_back()
            .filter(|(_, (hi, _))| *hi >= rank)
            .map(|(_, (_, d))| d)
    }

    /// Make `k` the first target of its run (if a run covers it).
    fn split_at(&mut self, k: u32) {
        let Some((&lo, &(hi, _))) = self.runs.range(..k).next_back() else {
            return;
        };
        if hi >= k {
            if let Some((_, d)) = self.runs.get(&lo).cloned() {
                self.runs.insert(lo, (k - 1, d.clone()));
                self.runs.insert(k, (hi, d));
            }
        }
    }

    /// Split the runs so that `lo..=hi` starts and ends on run boundaries.
    fn isolate(&mut self, lo: u32, hi: u32) {
        self.split_at(lo);
        if let Some(after) = hi.checked_add(1) {
            self.split_at(after);
        }
    }

    fn intern(&mut self, reason: Option<&str>) -> Option<Arc<str>> {
        let r = reason?;
        if let Some((k, _)) = self.reasons.get_key_value(r) {
            return Some(k.clone());
        }
        let k: Arc<str> = Arc::from(r);
        self.reasons.insert(k.clone(), ());
        Some(k)
    }

    /// The check a drain without a mode makes before changing anything.
    pub fn check_drain(&self, targets: &IdSet, excluded: &IdSet) -> Result<(), RpcError> {
        let ex = targets.intersection(excluded);
        let mut dr = IdSet::new();
        // Runs cover drained targets only: none to look at when no
        // target is drained (a fresh drain).
        let ranges = match targets.intersects(&self.drained) {
            true => targets.ranges(),
            false => &[],
        };
        for &(lo, hi) in ranges {
            // The run that starts before `lo` may reach into the range.
            let first = self.runs.range(..lo).next_back().map(|(&k, _)| k);
            let from = first.unwrap_or(lo);
            for (&a, (b, d)) in self.runs.range(from..=hi) {
                if d.reason.is_some() && *b >= lo {
                    dr.insert_range(a.max(lo), (*b).min(hi));
                }
            }
        }
        let (was_drained, was_excluded) = (!dr.is_empty(), !ex.is_empty());
        let mut bad = ex;
        bad.add(&dr);
        if bad.is_empty() {
            return Ok(());
        }
        let what = match (was_drained, was_excluded) {
            (true, true) => "already drained or excluded",
            (true, false) => "already drained",
            _ => "excluded",
        };
        let errnum = if was_drained { EEXIST } else { EINVAL };
        Err(RpcError::new(
            errnum,
            format!("rank{} {} {}", plural(&bad), bad, what),
        ))
    }

    /// Apply a drain to every target with the given overwrite level (live and replay).
    /// Targets at or beyond `size` are ignored.
    pub fn apply_drain(&mut self, targets: &IdSet, now: f64, reason: Option<&str>, overwrite: u8) {
        let reason = self.intern(reason);
        let Some(last) = self.size.checked_sub(1) else {
            return;
        };
        let targets = targets.intersection(&IdSet::from_range(0, last));
        // Runs cover drained targets only: when no target is drained
        // (a fresh drain) there is none to split or update, and every
        // target is fresh.
        let overlap = targets.intersects(&self.drained);
        let updated = match overlap {
            true => targets.ranges(),
            false => &[],
        };
        for &(lo, hi) in updated {
            self.isolate(lo, hi);
            for (_, (_, d)) in self.runs.range_mut(lo..=hi) {
                if overwrite == 0 && d.reason.is_some() {
                    continue;
                }
                d.reason = reason.clone();
                if overwrite == 2 {
                    d.timestamp = now;
                }
            }
        }
        let fresh = match overlap {
            true => targets.difference(&self.drained),
            false => targets,
        };
        for &(lo, hi) in fresh.ranges() {
            self.runs.insert(
                lo,
                (
                    hi,
                    DrainInfo {
                        timestamp: now,
                        reason: reason.clone(),
                    },
                ),
            );
        }
        self.drained.add(&fresh);
    }

    /// The check an undrain without a mode makes: every target must be drained.
    pub fn check_undrain(&self, targets: &IdSet) -> Result<(), RpcError> {
        let bad = targets.difference(&self.drained);
        if bad.is_empty() {
            Ok(())
        } else {
            Err(RpcError::new(
                EEXIST,
                format!("rank{} {} not drained", plural(&bad), bad),
            ))
        }
    }

    /// Clear the targets (live and replay).
    pub fn apply_undrain(&mut self, targets: &IdSet) {
        for &(lo, hi) in targets.intersection(&self.drained).ranges() {
            self.isolate(lo, hi);
            let gone: Vec<u32> = self.runs.range(lo..=hi).map(|(&r, _)| r).collect();
            for r in gone {
                self.runs.remove(&r);
            }
        }
        self.drained.subtract(targets);
    }

    /// A drain request: check (without a mode), then apply.
    pub fn drain(
        &mut self,
        targets: &IdSet,
        excluded: &IdSet,
        mode: DrainMode,
        reason: Option<&str>,
        now: f64,
    ) -> Result<(), RpcError> {
        if mode == DrainMode::Strict {
            self.check_drain(targets, excluded)?;
        }
        self.apply_drain(targets, now, reason, mode.overwrite());
        Ok(())
    }

    /// An undrain request: check (without a mode), then apply.
    pub fn undrain(&mut self, targets: &IdSet, mode: DrainMode) -> Result<(), RpcError> {
        if mode == DrainMode::Strict {
            self.check_undrain(targets)?;
        }
        self.apply_undrain(targets);
        Ok(())
    }

    /// Drained targets grouped by (timestamp rounded to whole seconds, reason),
    /// each group in ascending order of its lowest target.
    pub fn groups(&self) -> Vec<(IdSet, f64, Option<Arc<str>>)> {
        let mut index: HashMap<(u64, Option<&str>), usize> = HashMap::new();
        let mut out: Vec<(IdSet, f64, Option<Arc<str>>)> = Vec::new();
        for (&lo, (hi, d)) in &self.runs {
            let ts = d.timestamp.round();
            let key = (ts.to_bits(), d.reason.as_deref());
            match index.get(&key) {
                Some(&i) => out[i].0.insert_range(lo, *hi),
                None => {
                    index.insert(key, out.len());
                    out.push((IdSet::from_range(lo, *hi), ts, d.reason.clone()));
                }
            }
        }
        out
    }

    /// [`DrainTable::status_json`] written as JSON text (the same bytes
    /// `serde_json` writes for it), without building the value.
    pub fn write_status_json(&self, w: &mut Vec<u8>) -> serde_json::Result<()> {
        w.push(b'{');
        for (i, (ids, ts, reason)) in self.groups().iter().enumerate() {
            if i > 0 {
                w.push(b',');
            }
            serde_json::to_writer(&mut *w, &ids.encode())?;
            w.extend_from_slice(b":{\"timestamp\":");
            serde_json::to_writer(&mut *w, ts)?;
            w.extend_from_slice(b",\"reason\":");
            serde_json::to_writer(&mut *w, reason.as_deref().unwrap_or(""))?;
            w.push(b'}');
        }
        w.push(b'}');
        Ok(())
    }

    /// The `drain` object of a `resource.status` response.
    pub fn status_json(&self) -> Value {
        let mut m = Map::new();
        for (ids, ts, reason) in self.groups() {
            m.insert(
                ids.encode(),
                json!({"timestamp": ts, "reason": reason.as_deref().unwrap_or("")}),
            );
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests;
