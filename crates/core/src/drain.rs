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

    /// Number of targets covered.
    pub fn size(&self) -> u32 {
        self.size
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
        for &(lo, hi) in targets.ranges() {
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
        for &(lo, hi) in targets.ranges() {
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
        let fresh = targets.difference(&self.drained);
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
mod tests {
    use super::*;

    fn ids(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    #[test]
    fn strict_drain_errors() {
        let mut t = DrainTable::new(4);
        let none = IdSet::new();
        t.drain(&ids("1"), &none, DrainMode::Strict, Some("x"), 10.0)
            .unwrap();
        let e = t
            .drain(&ids("0-1"), &none, DrainMode::Strict, Some("y"), 11.0)
            .unwrap_err();
        assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (EEXIST, Some("rank 1 already drained"))
        );
        let e = t
            .drain(&ids("0-1"), &ids("0"), DrainMode::Strict, None, 11.0)
            .unwrap_err();
        assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (EEXIST, Some("ranks 0-1 already drained or excluded"))
        );
        let e = t
            .drain(&ids("0,2"), &ids("0,2"), DrainMode::Strict, None, 11.0)
            .unwrap_err();
        assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (EINVAL, Some("ranks 0,2 excluded"))
        );
        // Nothing changed by the failed requests.
        assert_eq!(t.drained(), &ids("1"));
    }

    #[test]
    fn reason_can_be_added_after_reasonless_drain() {
        let mut t = DrainTable::new(4);
        t.drain(&ids("2"), &IdSet::new(), DrainMode::Strict, None, 5.0)
            .unwrap();
        t.drain(
            &ids("2"),
            &IdSet::new(),
            DrainMode::Strict,
            Some("later"),
            9.0,
        )
        .unwrap();
        let d = t.get(2).unwrap();
        assert_eq!((d.timestamp, d.reason.as_deref()), (5.0, Some("later")));
    }

    #[test]
    fn overwrite_levels() {
        let none = IdSet::new();
        let mut t = DrainTable::new(4);
        t.drain(&ids("1"), &none, DrainMode::Strict, Some("a"), 1.0)
            .unwrap();
        // update: already drained with reason: unchanged; rank 0 drained.
        t.drain(&ids("0-1"), &none, DrainMode::Update, Some("b"), 2.0)
            .unwrap();
        assert_eq!(t.get(1).unwrap().reason.as_deref(), Some("a"));
        assert_eq!(t.get(0).unwrap().reason.as_deref(), Some("b"));
        assert_eq!(t.get(0).unwrap().timestamp, 2.0);
        // overwrite: reason replaced, timestamp kept; cleared when none given.
        t.drain(&ids("1"), &none, DrainMode::Overwrite, Some("c"), 3.0)
            .unwrap();
        assert_eq!(
            (
                t.get(1).unwrap().timestamp,
                t.get(1).unwrap().reason.as_deref()
            ),
            (1.0, Some("c"))
        );
        t.drain(&ids("1"), &none, DrainMode::Overwrite, None, 3.0)
            .unwrap();
        assert_eq!(t.get(1).unwrap().reason, None);
        // force-overwrite: both replaced.
        t.drain(&ids("1"), &none, DrainMode::ForceOverwrite, Some("d"), 4.0)
            .unwrap();
        assert_eq!(
            (
                t.get(1).unwrap().timestamp,
                t.get(1).unwrap().reason.as_deref()
            ),
            (4.0, Some("d"))
        );
        // Modes skip the exclusion check (flux-core's code, against its docs).
        t.drain(&ids("3"), &ids("3"), DrainMode::Update, None, 5.0)
            .unwrap();
        assert!(t.drained().contains(3));
    }

    #[test]
    fn undrain_rules() {
        let none = IdSet::new();
        let mut t = DrainTable::new(4);
        t.drain(&ids("0"), &none, DrainMode::Strict, Some("a"), 1.0)
            .unwrap();
        let e = t.undrain(&ids("0-2"), DrainMode::Strict).unwrap_err();
        assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (EEXIST, Some("ranks 1-2 not drained"))
        );
        let e = t.undrain(&ids("3"), DrainMode::Strict).unwrap_err();
        assert_eq!(e.errstr.as_deref(), Some("rank 3 not drained"));
        t.undrain(&ids("0-2"), DrainMode::Overwrite).unwrap();
        assert!(t.drained().is_empty());
        assert!(t.get(0).is_none());
        t.undrain(&ids("1"), DrainMode::Update).unwrap();
    }

    #[test]
    fn modes_parse() {
        assert_eq!(
            DrainMode::parse_drain(Some("bogus"))
                .unwrap_err()
                .errstr
                .as_deref(),
            Some("Invalid mode specified")
        );
        assert_eq!(
            DrainMode::parse_undrain(Some("force"))
                .unwrap_err()
                .errstr
                .as_deref(),
            Some("invalid undrain mode 'force' specified")
        );
        assert_eq!(
            DrainMode::parse_drain(Some("force-overwrite"))
                .unwrap()
                .overwrite(),
            2
        );
    }

    #[test]
    fn targets_validation() {
        assert_eq!(
            validate_targets(&IdSet::new(), 4)
                .unwrap_err()
                .errstr
                .as_deref(),
            Some("idset is empty")
        );
        assert_eq!(
            validate_targets(&ids("0-4"), 4)
                .unwrap_err()
                .errstr
                .as_deref(),
            Some("idset is out of range")
        );
        validate_targets(&ids("0-3"), 4).unwrap();
    }

    /// flux-core's drainset unit test: ranks 0-7 at 1234.0 "test" give one key;
    /// a mix gives one key per distinct (timestamp, reason).
    #[test]
    fn status_grouping() {
        let none = IdSet::new();
        let mut t = DrainTable::new(8);
        t.drain(&ids("0-7"), &none, DrainMode::Strict, Some("test"), 1234.0)
            .unwrap();
        assert_eq!(
            t.status_json(),
            json!({"0-7": {"timestamp": 1234.0, "reason": "test"}})
        );
        let mut t = DrainTable::new(8);
        t.apply_drain(&ids("0,3"), 1234.2, Some("test"), 0);
        t.apply_drain(&ids("1"), 2345.0, Some("test"), 0);
        t.apply_drain(&ids("2"), 1233.6, Some("test1"), 0);
        t.apply_drain(&ids("4"), 1234.0, None, 0);
        assert_eq!(
            t.status_json(),
            json!({
                "0,3": {"timestamp": 1234.0, "reason": "test"},
                "1": {"timestamp": 2345.0, "reason": "test"},
                "2": {"timestamp": 1234.0, "reason": "test1"},
                "4": {"timestamp": 1234.0, "reason": ""}
            })
        );
    }

    #[test]
    fn sparse_table_for_the_largest_rank() {
        // RFC 22's largest id: the table must not be sized by it.
        let top = 2_147_483_646u32;
        let mut t = DrainTable::new(top + 1);
        assert_eq!(t.size(), top + 1);
        t.drain(
            &ids("2147483646"),
            &IdSet::new(),
            DrainMode::Strict,
            Some("x"),
            5.0,
        )
        .unwrap();
        assert_eq!(t.get(top).and_then(|d| d.reason.as_deref()), Some("x"));
        assert_eq!(t.groups().len(), 1);
        t.resize(top);
        assert!(t.drained().is_empty() && t.get(top).is_none());
        // A range as wide as the id space costs one run, not 2^31 records.
        let mut t = DrainTable::new(top + 1);
        t.drain(
            &ids("0-2147483646"),
            &IdSet::new(),
            DrainMode::Strict,
            None,
            5.0,
        )
        .unwrap();
        assert_eq!(t.drained().len(), u64::from(top) + 1);
        let e = t
            .check_drain(&ids("7,2147483646"), &IdSet::new())
            .map(|_| ());
        assert_eq!(e, Ok(()), "drained without a reason may be drained again");
        t.apply_drain(&ids("5-9"), 6.0, Some("mid"), 1);
        t.apply_undrain(&ids("1000-2147483000"));
        let e = t.check_drain(&ids("0-20"), &IdSet::new()).unwrap_err();
        assert_eq!(e.to_string(), "ranks 5-9 already drained");
        let g = t.groups();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].0.encode(), "0-4,10-999,2147483001-2147483646");
        assert_eq!(g[1].0.encode(), "5-9");
        assert_eq!(t.get(7).and_then(|d| d.reason.as_deref()), Some("mid"));
        assert!(t.get(5000).is_none());
    }

    #[test]
    fn runs_split_and_overwrite_like_per_rank_records() {
        // Compare with a per-rank model on a small table.
        let mut t = DrainTable::new(16);
        let mut model: Vec<Option<(f64, Option<String>)>> = vec![None; 16];
        let ops: [(&str, u8, f64, Option<&str>, bool); 8] = [
            ("0-7", 1, 1.0, None, true),
            ("4-11", 0, 2.0, Some("a"), true),
            ("2-5", 2, 3.0, Some("b"), true),
            ("3", 1, 4.0, None, false),
            ("6-13", 1, 5.0, Some("c"), true),
            ("0-15", 0, 6.0, Some("d"), true),
            ("8-9", 1, 7.0, None, false),
            ("9-15", 2, 8.0, None, true),
        ];
        for (set, ow, now, reason, drain) in ops {
            let set = ids(set);
            if drain {
                t.apply_drain(&set, now, reason, ow);
                for r in &set {
                    let slot = &mut model[r as usize];
                    match slot {
                        Some((_, Some(_))) if ow == 0 => {}
                        Some((ts, why)) => {
                            *why = reason.map(String::from);
                            if ow == 2 {
                                *ts = now;
                            }
                        }
                        None => *slot = Some((now, reason.map(String::from))),
                    }
                }
            } else {
                t.apply_undrain(&set);
                for r in &set {
                    model[r as usize] = None;
                }
            }
            for (r, m) in model.iter().enumerate() {
                let got = t
                    .get(r as u32)
                    .map(|d| (d.timestamp, d.reason.as_deref().map(String::from)));
                assert_eq!(got, m.clone(), "rank {r}");
                assert_eq!(t.drained().contains(r as u32), m.is_some());
            }
        }
    }

    #[test]
    fn resize_drops_records() {
        let mut t = DrainTable::new(8);
        t.apply_drain(&ids("2,6"), 1.0, Some("r"), 0);
        t.resize(4);
        assert_eq!(t.drained(), &ids("2"));
        t.resize(8);
        assert!(t.get(6).is_none());
        t.apply_drain(&ids("9"), 1.0, None, 0);
        assert_eq!(t.drained(), &ids("2"));
    }
}
