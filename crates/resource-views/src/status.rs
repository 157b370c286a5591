//! `flux resource status` and the `flux resource drain` listing, computed
//! as flux-resource.py does from the `resource.status` payload, the
//! allocated ranks (`resource.sched-status`) and the ranks in housekeeping
//! (`job-manager.stats-get`).

use crate::cmd::{CmdOutput, Level, Message};
use crate::config::{Env, FormatChoice, FormatConfig, Subcommand};
use crate::output::{headings, Deduplicator, Headings, OutputFormat};
use crate::value::{FieldValue, FormatItem};
use hostlist::{HostRun, Hostlist};
use idset::IdSet;
use pycompat::error::{PyError, PyResult};
use pycompat::time::LocalZone;
use rset::{RSummary, Rset};
use serde_json::Value;
use std::borrow::Cow;
use std::cell::OnceCell;

/// Valid `-s` states for `status`/`drain`, in flux's order.
pub const STATUS_VALID_STATES: [&str; 11] = [
    "all",
    "online",
    "avail",
    "offline",
    "exclude",
    "drain",
    "draining",
    "drained",
    "torpid",
    "allocated",
    "housekeeping",
];

/// The default `-s` for `status`.
pub const STATUS_DEFAULT_STATES: &str = "avail,exclude,draining,drained,torpid,housekeeping";

/// The status/drain heading table.
pub fn status_headings() -> Headings {
    headings(&[
        ("state", "STATE"),
        ("statex", "STATE"),
        ("nnodes", "NNODES"),
        ("ranks", "RANKS"),
        ("nodelist", "NODELIST"),
        ("reason", "REASON"),
        ("timestamp", "TIME"),
        ("status", "STATUS"),
        ("up", "UP"),
        ("up.ascii", "UP"),
        ("color_up", ""),
        ("color_off", ""),
    ])
}

/// Command-line options of `flux resource status` (and the drain listing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusOptions {
    /// `-o/--format`: a format string or a name (default `default`).
    pub format: String,
    /// `-s/--states` exactly as given (`None` when absent).
    pub states: Option<String>,
    /// `-i/--include TARGETS`.
    pub include: Option<String>,
    /// `-q/--queue` values (already split on commas).
    pub queues: Vec<String>,
    /// `-n/--no-header`.
    pub no_header: bool,
    /// Whether color is on (`-L` resolved by the caller: `always`, or
    /// `auto` with stdout a terminal).
    pub color: bool,
    /// `--skip-empty`.
    pub skip_empty: bool,
}

impl Default for StatusOptions {
    fn default() -> Self {
        StatusOptions {
            format: "default".into(),
            states: None,
            include: None,
            queues: Vec::new(),
            no_header: false,
            color: false,
            skip_empty: false,
        }
    }
}

/// The RPC results a status rendering needs.
#[derive(Debug, Clone, Copy)]
pub struct StatusInput<'a> {
    /// The `resource.status` response.
    pub status: &'a Value,
    /// Ranks with an allocation (the `allocated` set of
    /// `resource.sched-status`; empty if that RPC failed).
    pub allocated: &'a IdSet,
    /// Ranks running housekeeping (see [`housekeeping_ranks`]).
    pub housekeeping: &'a IdSet,
    /// The instance configuration (`config.get`), used for `-q`.
    pub config: Option<&'a Value>,
}

/// What a status rendering needs, as the service summarises it
/// (Roster's `resource.summary`): R's ranks and hostnames, and the sets
/// of `resource.status` and `resource.sched-status`.
#[derive(Debug, Clone, Default)]
pub struct StatusSets {
    /// R's ranks.
    pub ranks: IdSet,
    /// R's hostnames in rank order (empty if a node has none).
    pub nodelist: Hostlist,
    pub online: IdSet,
    pub offline: IdSet,
    pub exclude: IdSet,
    pub torpid: IdSet,
    /// Ranks with an allocation.
    pub allocated: IdSet,
    /// Ranks running housekeeping.
    pub housekeeping: IdSet,
    /// Drained ranks by timestamp and reason, in `resource.status` order.
    pub drain: Vec<(IdSet, f64, String)>,
}

/// States validated and the format resolved; ready to render.
#[derive(Debug, Clone)]
pub struct StatusPlan {
    opts: StatusOptions,
    states: Vec<String>,
    fmt: String,
    /// Make drained lines rank by rank, as flux does (tests compare).
    rank_by_rank: bool,
}

fn idset_from(v: &Value) -> PyResult<IdSet> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_u64() => n.to_string(),
        _ => {
            return Err(PyError::type_err(
                "can only concatenate str (not \"type\") to str",
            ))
        }
    };
    IdSet::parse(&s).map_err(|_| PyError::Value(format!("IDset(): Invalid argument: {s}")))
}

fn key<'a>(v: &'a Value, k: &str) -> PyResult<&'a Value> {
    v.get(k).ok_or_else(|| PyError::Key(k.to_string()))
}

/// `ResourceSet(arg)` for a JSON value: `None` is the empty set.
pub(crate) fn resource_set(v: Option<&Value>) -> PyResult<Rset> {
    match r_object(v)? {
        None => Ok(Rset::new()),
        Some(v) => Rset::from_json(&v).map_err(rlist_error),
    }
}

/// flux's `Rlist: invalid argument`, followed by what was wrong (flux
/// says no more).
fn rlist_error(e: rset::RError) -> PyError {
    PyError::Value(format!("Rlist: invalid argument: {e}"))
}

/// The ranks and hostnames of `ResourceSet(arg)` (see [`resource_set`]),
/// without building its nodes.
pub(crate) fn resource_summary(v: Option<&Value>) -> PyResult<RSummary> {
    match r_object(v)? {
        None => Ok(RSummary::of(&Rset::new())),
        Some(v) => RSummary::from_json(&v).map_err(rlist_error),
    }
}

/// The checks of `ResourceSet(arg)` before the R is parsed: the R
/// object (decoded if given as a string), `None` for the empty set.
fn r_object(v: Option<&Value>) -> PyResult<Option<Cow<'_, Value>>> {
    let v = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => Cow::Owned(
            serde_json::from_str::<Value>(s).map_err(|e| PyError::Value(format!("{e}")))?,
        ),
        Some(v) => Cow::Borrowed(v),
    };
    if !v.is_object() {
        return Err(PyError::Type(format!(
            "ResourceSet cannot be instantiated from <class '{}'>",
            match &*v {
                Value::Array(_) => "list",
                Value::Bool(_) => "bool",
                Value::Number(n) if n.is_f64() => "float",
                Value::Number(_) => "int",
                _ => "NoneType",
            }
        )));
    }
    let version = key(&v, "version")?;
    if version.as_f64() != Some(1.0) {
        return Err(PyError::Value(format!(
            "R version {} not supported",
            FieldValue::from_json(version).py_str()
        )));
    }
    Ok(Some(v))
}

/// Hostnames of an R in rank order (`rlist_nodelist`); empty if some node
/// has no hostname.
pub(crate) fn nodelist_of(r: &Rset) -> Hostlist {
    r.nodelist().unwrap_or_default()
}

/// Ranks running housekeeping from a `job-manager.stats-get` response:
/// the union of `housekeeping.running.*.allocated`.
pub fn housekeeping_ranks(stats: &Value) -> PyResult<IdSet> {
    let running = key(key(stats, "housekeeping")?, "running")?;
    let mut ids = IdSet::new();
    if let Value::Object(m) = running {
        for info in m.values() {
            ids.add(&idset_from(key(info, "allocated")?)?);
        }
    }
    Ok(ids)
}

/// Ranks in the `allocated` set of a `resource.sched-status` response.
pub fn allocated_ranks(sched_status: &Value) -> PyResult<IdSet> {
    Ok(resource_summary(sched_status.get("allocated"))?.ranks)
}

struct DrainInfo {
    timestamp: FieldValue,
    reason: FieldValue,
}

/// flux's `ResourceStatus`.
///
/// Everything is kept as idsets and the compressed nodelist: a line's
/// hosts are copied from the nodelist range by range
/// ([`Hostlist::push_hosts_of`]), never one name at a time, so the cost
/// follows the number of ranges rather than of nodes.
struct ResourceStatus {
    /// R's hostnames in rank order (empty if R has none).
    nodelist: Hostlist,
    /// The nodelist expanded, built only for the host-by-host path.
    hosts: OnceCell<Vec<String>>,
    /// R's ranks: host `i` of the nodelist is the `i`-th of them.
    r_ranks: IdSet,
    /// For each range of `r_ranks`, the number of ranks before it.
    r_before: Vec<u64>,
    offline_raw: IdSet,
    online_raw: IdSet,
    exclude_raw: IdSet,
    torpid_raw: IdSet,
    drain_raw: Vec<(IdSet, DrainInfo)>,
    allocated_ranks: IdSet,
    housekeeping: IdSet,
    all: IdSet,
    offline: IdSet,
    online: IdSet,
    exclude: IdSet,
    torpid: IdSet,
    allocated: IdSet,
    drained: IdSet,
    draining: IdSet,
    avail: IdSet,
    /// Which `drain_raw` entry each drained rank takes its reason from
    /// (the last one holding it): sorted disjoint `(lo, hi, entry)`.
    lookup: Vec<(u32, u32, usize)>,
}

impl ResourceStatus {
    fn new(input: &StatusInput<'_>) -> PyResult<ResourceStatus> {
        let st = input.status;
        let summary = resource_summary(Some(key(st, "R")?))?;
        let nodelist = summary.nodelist.unwrap_or_default();
        let offline_raw = idset_from(key(st, "offline")?)?;
        let online_raw = idset_from(key(st, "online")?)?;
        let exclude_raw = idset_from(key(st, "exclude")?)?;
        let torpid_raw = match st.get("torpid") {
            Some(v) => idset_from(v)?,
            None => IdSet::new(),
        };
        let mut drain_raw = Vec::new();
        match key(st, "drain")? {
            Value::Object(m) => {
                for (k, e) in m {
                    let ranks = IdSet::parse(k)
                        .map_err(|_| PyError::Value(format!("IDset(): Invalid argument: {k}")))?;
                    let timestamp = FieldValue::from_json(key(e, "timestamp")?);
                    let reason = FieldValue::from_json(key(e, "reason")?);
                    drain_raw.push((ranks, DrainInfo { timestamp, reason }));
                }
            }
            other => {
                return Err(PyError::Attribute(format!(
                    "'{}' object has no attribute 'items'",
                    FieldValue::from_json(other).type_name()
                )))
            }
        }
        Ok(ResourceStatus::build(
            nodelist,
            summary.ranks,
            [offline_raw, online_raw, exclude_raw, torpid_raw],
            drain_raw,
            input.allocated.clone(),
            input.housekeeping.clone(),
        ))
    }

    /// From the service's summary of the same sets.
    fn from_sets(sets: &StatusSets) -> ResourceStatus {
        let drain_raw = sets
            .drain
            .iter()
            .map(|(ranks, timestamp, reason)| {
                let info = DrainInfo {
                    // what the number reads as in a `resource.status` reply
                    timestamp: FieldValue::from_json(&Value::from(*timestamp)),
                    reason: FieldValue::Str(reason.clone()),
                };
                (ranks.clone(), info)
            })
            .collect();
        ResourceStatus::build(
            sets.nodelist.clone(),
            sets.ranks.clone(),
            [
                sets.offline.clone(),
                sets.online.clone(),
                sets.exclude.clone(),
                sets.torpid.clone(),
            ],
            drain_raw,
            sets.allocated.clone(),
            sets.housekeeping.clone(),
        )
    }

    fn build(
        nodelist: Hostlist,
        r_ranks: IdSet,
        [offline_raw, online_raw, exclude_raw, torpid_raw]: [IdSet; 4],
        drain_raw: Vec<(IdSet, DrainInfo)>,
        allocated_ranks: IdSet,
        housekeeping: IdSet,
    ) -> ResourceStatus {
        let r_before = r_ranks
            .ranges()
            .iter()
            .scan(0u64, |n, &(lo, hi)| {
                let before = *n;
                *n += u64::from(hi - lo) + 1;
                Some(before)
            })
            .collect();
        let mut rs = ResourceStatus {
            nodelist,
            hosts: OnceCell::new(),
            r_ranks,
            r_before,
            offline_raw,
            online_raw,
            exclude_raw,
            torpid_raw,
            drain_raw,
            allocated_ranks,
            housekeeping,
            all: IdSet::new(),
            offline: IdSet::new(),
            online: IdSet::new(),
            exclude: IdSet::new(),
            torpid: IdSet::new(),
            allocated: IdSet::new(),
            drained: IdSet::new(),
            draining: IdSet::new(),
            avail: IdSet::new(),
            lookup: Vec::new(),
        };
        rs.recalculate(None);
        rs
    }

    fn recalculate(&mut self, include: Option<&IdSet>) {
        self.all = self.r_ranks.clone();
        self.offline = self.offline_raw.clone();
        self.online = self.online_raw.clone();
        self.exclude = self.exclude_raw.clone();
        self.torpid = self.torpid_raw.clone();
        self.allocated = self.allocated_ranks.clone();
        if let Some(inc) = include {
            for s in [
                &mut self.all,
                &mut self.offline,
                &mut self.online,
                &mut self.exclude,
                &mut self.allocated,
                &mut self.torpid,
            ] {
                *s = s.intersection(inc);
            }
        }
        let drains: Vec<IdSet> = self
            .drain_raw
            .iter()
            .map(|(ranks, _)| match include {
                Some(inc) => ranks.intersection(inc),
                None => ranks.clone(),
            })
            .collect();
        (self.drained, self.lookup) = drain_lookup(&drains);
        self.draining = self.drained.intersection(&self.allocated);
        self.drained = self.drained.difference(&self.draining);
        let mut not_avail = self.exclude.clone();
        not_avail.add(&self.drained);
        not_avail.add(&self.draining);
        not_avail.add(&self.torpid);
        self.avail = self.all.difference(&not_avail);
    }

    fn get(&self, state: &str) -> &IdSet {
        match state {
            "avail" => &self.avail,
            "exclude" => &self.exclude,
            "allocated" => &self.allocated,
            "torpid" => &self.torpid,
            "housekeeping" => &self.housekeeping,
            "draining" => &self.draining,
            "drained" => &self.drained,
            "online" => &self.online,
            "offline" => &self.offline,
            _ => &self.all,
        }
    }

    /// `filter(include)`: restrict to ranks, or to hosts of the nodelist.
    fn filter_include(&mut self, include: &str) -> PyResult<()> {
        let ranks = match IdSet::parse(include) {
            Ok(ids) => ids,
            Err(_) => {
                let hl = Hostlist::decode(include)
                    .map_err(|_| PyError::Value(format!("Invalid hostlist: '{include}'")))?;
                let mut ids = IdSet::new();
                for host in hl.iter() {
                    if let Some(i) = self.nodelist.find(&host) {
                        let i = u64::try_from(i).unwrap_or(u64::MAX);
                        let rank = self
                            .r_ranks
                            .nth(i)
                            .unwrap_or(u32::try_from(i).unwrap_or(u32::MAX));
                        ids.insert(rank);
                    }
                }
                ids
            }
        };
        self.recalculate(Some(&ranks));
        Ok(())
    }

    /// The drain entry `rank` takes its reason and time from.
    fn drain_info(&self, rank: u32) -> Option<&DrainInfo> {
        let i = self.drain_entry(rank)?;
        self.drain_raw.get(i).map(|(_, info)| info)
    }

    /// The index of that entry in `drain_raw`.
    fn drain_entry(&self, rank: u32) -> Option<usize> {
        let k = self.lookup.partition_point(|&(_, hi, _)| hi < rank);
        match self.lookup.get(k) {
            Some(&(lo, _, i)) if lo <= rank => Some(i),
            _ => None,
        }
    }

    /// The nodelist index of `rank` and the last rank from it whose
    /// indexes follow on (`rank..=end` maps to `index..`): its position
    /// among R's ranks (R's nodelist is in rank order).  flux indexes the
    /// nodelist by rank, the same thing for its R (ranks 0..N-1);
    /// Roster's R may be sparse (e.g. ranks 0 and 2147483646).  A rank
    /// outside R is looked up by rank, as flux does (usually out of
    /// range).
    fn index_of(&self, rank: u32) -> (u64, u32) {
        let ranges = self.r_ranks.ranges();
        let k = ranges.partition_point(|&(_, hi)| hi < rank);
        match ranges.get(k) {
            Some(&(lo, hi)) if lo <= rank => {
                let before = self.r_before.get(k).copied().unwrap_or(0);
                (before + u64::from(rank - lo), hi)
            }
            Some(&(lo, _)) => (u64::from(rank), lo - 1),
            None => (u64::from(rank), u32::MAX),
        }
    }

    /// The host of `rank` (see [`ResourceStatus::index_of`]).
    fn host(&self, rank: u32) -> PyResult<&str> {
        let (i, _) = self.index_of(rank);
        let hosts = self.hosts.get_or_init(|| self.nodelist.iter().collect());
        usize::try_from(i)
            .ok()
            .and_then(|i| hosts.get(i))
            .map(String::as_str)
            .ok_or_else(|| PyError::Index("Hostlist index out of range".into()))
    }

    /// The hosts of `ranks`, in rank order, pushed one by one (as
    /// `Hostlist(nodelist[rank] for rank in ranks)`), range by range.
    fn hosts_of(&self, ranks: &IdSet) -> PyResult<Hostlist> {
        let mut hl = Hostlist::new();
        for &(lo, hi) in ranks.ranges() {
            self.push_hosts(&mut hl, lo, hi)?;
        }
        Ok(hl)
    }

    /// Push the hosts of `lo..=hi` onto `hl`.
    fn push_hosts(&self, hl: &mut Hostlist, lo: u32, hi: u32) -> PyResult<()> {
        let len = self.nodelist.len() as u64;
        let mut r = lo;
        loop {
            let (i, run_end) = self.index_of(r);
            let end = run_end.min(hi);
            let n = u64::from(end - r) + 1;
            if i + n > len {
                return Err(PyError::Index("Hostlist index out of range".into()));
            }
            let (a, b) = (usize::try_from(i), usize::try_from(i + n));
            if let (Ok(a), Ok(b)) = (a, b) {
                hl.push_hosts_of(&self.nodelist, a..b);
            }
            if end >= hi {
                return Ok(());
            }
            r = end + 1;
        }
    }

    /// Split `ranks` where a drained rank's line could change: online
    /// status, membership of R, drain entry or nodelist position.  Every
    /// rank of a piece makes the same line but for its host.
    fn drain_pieces(&self, ranks: &IdSet) -> Vec<(u32, u32)> {
        let mut cuts: Vec<u32> = Vec::new();
        let mut edges = |set: &[(u32, u32)]| {
            for &(lo, hi) in set {
                cuts.push(lo);
                if let Some(next) = hi.checked_add(1) {
                    cuts.push(next);
                }
            }
        };
        edges(self.online.ranges());
        edges(self.all.ranges());
        edges(self.r_ranks.ranges());
        for &(lo, hi, _) in &self.lookup {
            cuts.push(lo);
            if let Some(next) = hi.checked_add(1) {
                cuts.push(next);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::new();
        for &(lo, hi) in ranks.ranges() {
            let mut a = lo;
            let mut k = cuts.partition_point(|&c| c <= a);
            loop {
                let b = match cuts.get(k) {
                    Some(&c) if c <= hi => c - 1,
                    _ => hi,
                };
                out.push((a, b));
                if b >= hi {
                    break;
                }
                a = b + 1;
                k += 1;
            }
        }
        out
    }
}

/// The union of the drain sets and, for each drained rank, the last set
/// holding it, as sorted disjoint `(lo, hi, set index)` ranges.
fn drain_lookup(drains: &[IdSet]) -> (IdSet, Vec<(u32, u32, usize)>) {
    let mut all: Vec<(u32, u32, usize)> = drains
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.ranges().iter().map(move |&(lo, hi)| (lo, hi, i)))
        .collect();
    all.sort_unstable();
    let disjoint = all.windows(2).all(|w| match w {
        [a, b] => a.1 < b.0,
        _ => true,
    });
    if !disjoint {
        // Overlapping drain sets: later ones win, ranges cut where they do.
        all.clear();
        let mut covered = IdSet::new();
        for (i, s) in drains.iter().enumerate().rev() {
            let own = s.difference(&covered);
            all.extend(own.ranges().iter().map(|&(lo, hi)| (lo, hi, i)));
            covered.add(s);
        }
        all.sort_unstable();
    }
    let union =
        IdSet::from_sorted_ranges(all.iter().map(|&(lo, hi, _)| (lo, hi))).unwrap_or_default();
    (union, all)
}

/// `ranks_by_queue(resource_set, config, queues)`.
pub(crate) fn ranks_by_queue(
    rset: &Rset,
    config: Option<&Value>,
    queues: &[String],
) -> PyResult<IdSet> {
    let mut by_name: Vec<(String, IdSet)> = Vec::new();
    if let Some(Value::Object(qs)) = config.and_then(|c| c.get("queues")) {
        for (name, q) in qs {
            let r = match q.get("requires") {
                Some(req) => {
                    let c = serde_json::json!({ "properties": req });
                    rset.copy_constraint(&c)
                        .map_err(|e| PyError::Value(format!("copy_constraint: {e}")))?
                }
                None => rset.clone(),
            };
            by_name.push((name.clone(), r.ranks()));
        }
    }
    let mut ranks = IdSet::new();
    for q in queues {
        match by_name.iter().find(|(n, _)| n == q) {
            Some((_, r)) => ranks.add(r),
            None => return Err(PyError::Value(format!("{q}: no such queue"))),
        }
    }
    Ok(ranks)
}

/// flux-resource.py's `ResourceStatusLine`.
#[derive(Debug, Clone)]
pub struct StatusLine {
    state: String,
    online: bool,
    ranks: IdSet,
    hostlist: Hostlist,
    reason: FieldValue,
    timestamp: FieldValue,
    /// Hosts were appended by [`StatusLine::update`] and the hostlist
    /// still needs its sort (see [`StatusLine::finish`]).
    unsorted: bool,
    /// The shape of the hosts seen so far, once a merge happened.
    shape: Option<HostShape>,
    /// The line stands for one flux line per rank (drained ranks with
    /// the same reason): merged into another, its hosts go one by one.
    per_rank: bool,
}

/// What the hostnames of a line look like: whether sorting once after
/// many appends gives what sorting after every append gives.
///
/// Hostlist sorting is a stable sort by (prefix, number) followed by
/// coalescing into ranges; with numbers of mixed widths and zero padding
/// (`node01`, `node1`, `node10`), coalescing depends on the order of the
/// appends.  When no number is zero-padded, or all numbers have the same
/// width (`node00001`..`node16384`), equal keys are equal names and the
/// result is the same either way.
#[derive(Debug, Clone, Copy, Default)]
struct HostShape {
    leading_zero: bool,
    width: Option<usize>,
    mixed_width: bool,
    odd: bool,
}

impl HostShape {
    fn of(hl: &Hostlist) -> HostShape {
        let mut s = HostShape::default();
        s.observe(hl);
        s
    }

    /// Observe every host of `hl`, a numbered range at a time.
    fn observe(&mut self, hl: &Hostlist) {
        hl.for_each_run(|run| match run {
            HostRun::Numbered {
                prefix,
                lo,
                hi,
                width,
            } => {
                // host = prefix + number padded to `width`: the stem is
                // the prefix, the digits as long as the padded number
                let len = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
                let (first, last) = (len(lo).max(width as usize), len(hi).max(width as usize));
                self.stem(prefix);
                if last > 9 {
                    self.odd = true;
                }
                if first > len(lo) && first > 1 {
                    self.leading_zero = true;
                }
                self.digits(first);
                self.digits(last);
            }
            HostRun::Host(host) => {
                let stem = host.trim_end_matches(|c: char| c.is_ascii_digit());
                let digits = &host[stem.len()..];
                self.stem(stem);
                if digits.len() > 9 {
                    self.odd = true;
                }
                if digits.is_empty() {
                    return;
                }
                if digits.len() > 1 && digits.starts_with('0') {
                    self.leading_zero = true;
                }
                self.digits(digits.len());
            }
        });
    }

    fn stem(&mut self, stem: &str) {
        if stem.bytes().any(|b| b.is_ascii_digit() || !b.is_ascii()) {
            self.odd = true;
        }
    }

    /// A host's number has `n` digits.
    fn digits(&mut self, n: usize) {
        match self.width {
            None => self.width = Some(n),
            Some(w) if w != n => self.mixed_width = true,
            Some(_) => {}
        }
    }

    fn sort_can_wait(&self) -> bool {
        !(self.odd || (self.leading_zero && self.mixed_width))
    }
}

impl StatusLine {
    /// A line of `state` with no reason or timestamp.
    fn new(state: &str, online: bool, ranks: IdSet, hostlist: Hostlist) -> StatusLine {
        StatusLine {
            state: state.into(),
            online,
            ranks,
            hostlist,
            reason: FieldValue::str(""),
            timestamp: FieldValue::str(""),
            unsorted: false,
            shape: None,
            per_rank: false,
        }
    }

    /// flux's `update()` appends the other line's hosts and sorts after
    /// every merge, which is quadratic when thousands of separately
    /// drained nodes share a line.  When the hostnames allow it
    /// ([`HostShape`]), the sort waits for [`StatusLine::finish`];
    /// otherwise it happens at once, as in flux.
    fn update(&mut self, other: StatusLine) {
        self.ranks.add(&other.ranks);
        let mut shape = match self.shape.take() {
            Some(s) => s,
            None => HostShape::of(&self.hostlist),
        };
        shape.observe(&other.hostlist);
        if shape.sort_can_wait() {
            if other.per_rank {
                self.hostlist
                    .push_hosts_of(&other.hostlist, 0..other.hostlist.len());
            } else {
                self.hostlist.append(&other.hostlist);
            }
            self.unsorted = true;
        } else {
            self.finish();
            self.hostlist.append(&other.hostlist);
            self.hostlist.sort();
        }
        self.shape = Some(shape);
    }

    /// The deferred sort of [`StatusLine::update`].
    fn finish(&mut self) {
        if self.unsorted {
            self.hostlist.sort();
            self.unsorted = false;
        }
    }

    /// Number of nodes.
    pub fn nnodes(&self) -> usize {
        self.hostlist.len()
    }

    /// One line of `--json` output.
    fn to_json(&self) -> Value {
        let drain = self.state == "drained" || self.state == "draining";
        let field = |v: &FieldValue| match v {
            _ if !drain => Value::Null,
            FieldValue::Str(s) => Value::String(s.clone()),
            FieldValue::Int(i) => Value::from(*i),
            FieldValue::Float(f) => Value::from(*f),
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::None => Value::Null,
            other => Value::String(other.py_str()),
        };
        // An empty drained/draining line has no drain behind it.
        let (reason, timestamp) = if self.ranks.is_empty() {
            (Value::Null, Value::Null)
        } else {
            (field(&self.reason), field(&self.timestamp))
        };
        serde_json::json!({
            "state": self.state,
            "online": self.online,
            "nnodes": self.nnodes(),
            "ranks": self.ranks.encode(),
            "nodelist": self.hostlist.encode(),
            "reason": reason,
            "timestamp": timestamp,
        })
    }
}

/// The `version` of the `--json` documents of `status` and the drain
/// listing; bumped only when a field changes meaning or disappears.
pub const STATUS_JSON_VERSION: u32 = 1;

/// What separates `--json` lines: state, online status, drain reason and
/// time (the fields left when nodelist, ranks and nnodes are dropped).
const STATUS_JSON_KEY: &str = "{statex} {status} {reason} {timestamp}";

impl FormatItem for StatusLine {
    fn class_path(&self) -> String {
        "__main__.ResourceStatusLine".into()
    }

    fn attr(&self, name: &str) -> Option<FieldValue> {
        Some(match name {
            "statex" => FieldValue::Str(self.state.clone()),
            "state" => FieldValue::Str(if self.online {
                self.state.clone()
            } else {
                format!("{}*", self.state)
            }),
            "offline" => FieldValue::Bool(!self.online),
            "status" => FieldValue::str(if self.online { "online" } else { "offline" }),
            "color_up" => FieldValue::str(if self.online {
                "\x1b[01;32m"
            } else {
                "\x1b[01;31m"
            }),
            "color_off" => FieldValue::str("\x1b[0;0m"),
            "up" => {
                if self.online {
                    FieldValue::Alt {
                        default: "✔".into(),
                        ascii: "y".into(),
                    }
                } else {
                    FieldValue::Alt {
                        default: "✗".into(),
                        ascii: "n".into(),
                    }
                }
            }
            "nodelist" => FieldValue::Str(self.hostlist.encode()),
            "ranks" => FieldValue::Str(self.ranks.encode()),
            "nnodes" => FieldValue::Int(self.hostlist.len() as i64),
            "reason" => self.reason.clone(),
            "timestamp" => self.timestamp.clone(),
            "hostlist" => FieldValue::Object {
                type_name: "Hostlist".into(),
                text: self.hostlist.encode(),
                repr: format!("Hostlist('{}')", self.hostlist.encode()),
                truthy: !self.hostlist.is_empty(),
            },
            _ => return None,
        })
    }
}

fn state_list_error(bad: &str) -> CmdOutput {
    CmdOutput {
        stdout: String::new(),
        messages: vec![
            Message {
                level: Level::Error,
                text: format!("Invalid resource state {bad} specified"),
            },
            Message {
                level: Level::Info,
                text: format!("valid states: {}", STATUS_VALID_STATES.join(",")),
            },
        ],
        exit_code: 1,
    }
}

/// `status_get_state_list`: validate `-s`, append the defaults if only
/// `online`/`offline` were given, expand `drain`.
fn status_state_list(states: Option<&str>) -> Result<Vec<String>, CmdOutput> {
    let given = states
        .filter(|s| !s.is_empty())
        .unwrap_or(STATUS_DEFAULT_STATES);
    let mut list: Vec<String> = given.split(',').map(String::from).collect();
    if let Some(bad) = list
        .iter()
        .find(|s| !STATUS_VALID_STATES.contains(&s.as_str()))
    {
        return Err(state_list_error(bad));
    }
    if list.iter().all(|s| s == "online" || s == "offline") {
        list.extend(STATUS_DEFAULT_STATES.split(',').map(String::from));
    }
    if let Some(i) = list.iter().position(|s| s == "drain") {
        list.remove(i);
        list.push("draining".into());
        list.push("drained".into());
    }
    Ok(list)
}

/// First phase of `flux resource status`: handle `-s help`, validate the
/// states and resolve `-o` (which may print help or a config snippet).
/// Errors and printed output come back as the final [`CmdOutput`].
pub fn status_prepare(
    opts: &StatusOptions,
    config: &FormatConfig,
    env: Env<'_>,
) -> Result<StatusPlan, CmdOutput> {
    if opts.states.as_deref() == Some("help") {
        return Err(CmdOutput {
            stdout: String::new(),
            messages: vec![Message {
                level: Level::Info,
                text: format!("valid states: {}", STATUS_VALID_STATES.join(",")),
            }],
            exit_code: 0,
        });
    }
    let states = status_state_list(opts.states.as_deref())?;
    let fmt = match config.get_format_string(&opts.format, env) {
        Ok(FormatChoice::Format(f)) => f,
        Ok(FormatChoice::Print(text)) => return Err(CmdOutput::ok(text)),
        Err(e) => return Err(CmdOutput::exception(String::new(), &e)),
    };
    Ok(StatusPlan {
        opts: opts.clone(),
        states,
        fmt,
        rank_by_rank: false,
    })
}

/// First phase of the `flux resource drain` listing (no targets): resolve
/// `-o` against the drain formats, then continue as `status -s drain
/// --skip-empty` with that format.
pub fn drain_list_prepare(
    opts: &StatusOptions,
    drain_config: &FormatConfig,
    status_config: &FormatConfig,
    env: Env<'_>,
) -> Result<StatusPlan, CmdOutput> {
    let fmt = match drain_config.get_format_string(&opts.format, env) {
        Ok(FormatChoice::Format(f)) => f,
        Ok(FormatChoice::Print(text)) => return Err(CmdOutput::ok(text)),
        Err(e) => return Err(CmdOutput::exception(String::new(), &e)),
    };
    let mut o = opts.clone();
    o.format = fmt;
    o.states = Some("drain".into());
    o.skip_empty = true;
    debug_assert_eq!(drain_config.subcommand(), Subcommand::Drain);
    status_prepare(&o, status_config, env)
}

impl StatusPlan {
    /// The resolved format string.
    pub fn format(&self) -> &str {
        &self.fmt
    }

    /// The expanded state list.
    pub fn states(&self) -> &[String] {
        &self.states
    }

    /// Second phase: render the output from the RPC results.
    pub fn render(&self, input: &StatusInput<'_>, zone: &dyn LocalZone) -> CmdOutput {
        self.render_with(|f| self.lines(input, f, zone), zone)
    }

    /// `--json`: the lines the text view would show (same `-s`, `-i`,
    /// `-q`, `--skip-empty` rules), one object per distinct state, online
    /// status, drain reason and drain time, whatever `-o` says.  The
    /// document is [`STATUS_JSON_VERSION`]'s schema (README: JSON output).
    pub fn render_json(&self, input: &StatusInput<'_>, zone: &dyn LocalZone) -> CmdOutput {
        self.render_json_with(|f| self.lines(input, f, zone))
    }

    /// [`StatusPlan::render`] from the service's summary; `None` when the
    /// view needs R itself (`-q`): the caller renders from the payloads.
    pub fn render_sets(&self, sets: &StatusSets, zone: &dyn LocalZone) -> Option<CmdOutput> {
        self.opts.queues.is_empty().then(|| {
            self.render_with(
                |f| self.lines_of(ResourceStatus::from_sets(sets), f, zone),
                zone,
            )
        })
    }

    /// [`StatusPlan::render_json`] from the service's summary (see
    /// [`StatusPlan::render_sets`]).
    pub fn render_json_sets(&self, sets: &StatusSets, zone: &dyn LocalZone) -> Option<CmdOutput> {
        self.opts.queues.is_empty().then(|| {
            self.render_json_with(|f| self.lines_of(ResourceStatus::from_sets(sets), f, zone))
        })
    }

    fn render_json_with(
        &self,
        lines: impl FnOnce(&OutputFormat) -> PyResult<Vec<StatusLine>>,
    ) -> CmdOutput {
        let formatter = match OutputFormat::new(STATUS_JSON_KEY, &status_headings()) {
            Ok(f) => f,
            Err(e) => return CmdOutput::exception(String::new(), &e),
        };
        match lines(&formatter) {
            Ok(lines) => {
                let doc = serde_json::json!({
                    "version": STATUS_JSON_VERSION,
                    "lines": lines.iter().map(StatusLine::to_json).collect::<Vec<_>>(),
                });
                CmdOutput::ok(format!("{doc}\n"))
            }
            Err(e) => CmdOutput::exception(String::new(), &e),
        }
    }

    fn render_with(
        &self,
        lines: impl FnOnce(&OutputFormat) -> PyResult<Vec<StatusLine>>,
        zone: &dyn LocalZone,
    ) -> CmdOutput {
        let mut out = String::new();
        let run = || -> PyResult<()> {
            let hd = status_headings();
            let mut formatter = OutputFormat::new(&self.fmt, &hd)?;
            if !self.opts.color {
                formatter = formatter.copy(&["color_up", "color_off"], false)?;
            }
            let lines = lines(&formatter)?;
            let mut items: Vec<&dyn FormatItem> =
                lines.iter().map(|l| l as &dyn FormatItem).collect();
            formatter.print_items(&mut items, self.opts.no_header, zone, &mut out)
        };
        match run() {
            Ok(()) => CmdOutput::ok(out),
            Err(e) => CmdOutput::exception(out, &e),
        }
    }

    /// The status lines, merged where `formatter` shows no difference.
    fn lines(
        &self,
        input: &StatusInput<'_>,
        formatter: &OutputFormat,
        zone: &dyn LocalZone,
    ) -> PyResult<Vec<StatusLine>> {
        let mut rs = ResourceStatus::new(input)?;
        if !self.opts.queues.is_empty() {
            let rset = resource_set(Some(key(input.status, "R")?))?;
            let ranks = ranks_by_queue(&rset, input.config, &self.opts.queues)
                .map_err(|e| PyError::Value(format!("--queue: {e}")))?;
            rs.recalculate(Some(&ranks));
        }
        self.lines_of(rs, formatter, zone)
    }

    /// [`StatusPlan::lines`] once the sets are known (and `-q` applied).
    fn lines_of(
        &self,
        mut rs: ResourceStatus,
        formatter: &OutputFormat,
        zone: &dyn LocalZone,
    ) -> PyResult<Vec<StatusLine>> {
        let opts = &self.opts;
        let states = &self.states;
        if let Some(inc) = &opts.include {
            if !inc.is_empty() {
                rs.filter_include(inc)
                    .map_err(|e| PyError::Value(format!("--include: {e}")))?;
            }
        }
        let raw_states = opts.states.as_deref().unwrap_or("");
        let skip_empty = opts.skip_empty || raw_states.is_empty();
        let has = |s: &str| states.iter().any(|x| x == s);
        let skip_empty_offline = !has("offline");
        let include_online = has("online") || !has("offline");
        let include_offline = has("offline") || !has("online");
        for ds in ["draining", "drained"] {
            if has("all") || has(ds) {
                let sub = rs.get(ds).clone();
                rs.torpid = rs.torpid.difference(&sub);
            }
        }
        let lines = statuslines(
            &rs,
            states,
            formatter,
            (include_online, include_offline),
            !self.rank_by_rank,
            zone,
        )?;
        Ok(lines
            .into_iter()
            .filter(|l| !(l.nnodes() == 0 && (skip_empty || (!l.online && skip_empty_offline))))
            .collect())
    }
}

fn statuslines(
    rs: &ResourceStatus,
    states: &[String],
    formatter: &OutputFormat,
    (include_online, include_offline): (bool, bool),
    per_piece: bool,
    zone: &dyn LocalZone,
) -> PyResult<Vec<StatusLine>> {
    let per_piece = per_piece && HostShape::of(&rs.nodelist).sort_can_wait();
    let mut result: Deduplicator<StatusLine> =
        Deduplicator::new(formatter, &["nodelist", "ranks", "nnodes"])?;
    let has = |s: &str| states.iter().any(|x| x == s || x == "all");
    let excluded = |online: bool| !((online && include_online) || (!online && include_offline));
    for state in ["avail", "exclude", "allocated", "torpid", "housekeeping"] {
        if !has(state) {
            continue;
        }
        for online in [true, false] {
            if excluded(online) {
                continue;
            }
            let status = if online { &rs.online } else { &rs.offline };
            let ranks = rs.get(state).intersection(status);
            let hostlist = rs.hosts_of(&ranks)?;
            let line = StatusLine::new(state, online, ranks, hostlist);
            result.append(line, zone, StatusLine::update)?;
        }
    }
    for state in ["draining", "drained"] {
        if !has(state) {
            continue;
        }
        let ranks = rs.get(state);
        if ranks.is_empty() && !excluded(true) {
            let line = StatusLine::new(state, true, IdSet::new(), Hostlist::new());
            result.append(line, zone, StatusLine::update)?;
        }
        // flux makes one line per rank and merges those with the same
        // reason.  Ranks alike in everything but their host make one line
        // at once when merging them host by host is the same as sorting
        // once at the end (see HostShape); otherwise rank by rank.
        let pieces = if per_piece {
            rs.drain_pieces(ranks)
        } else {
            ranks.iter().map(|r| (r, r)).collect()
        };
        if per_piece {
            if let Some(lines) = drain_group_lines(rs, state, &pieces, &excluded)? {
                for line in lines {
                    result.append(line, zone, StatusLine::update)?;
                }
                continue;
            }
        }
        for (lo, hi) in pieces {
            let online = rs.online.contains(lo);
            if excluded(online) {
                continue;
            }
            if !rs.all.contains(lo) {
                return Err(PyError::value("invalid rank {rank}"));
            }
            let (timestamp, reason) = match rs.drain_info(lo) {
                Some(info) => (info.timestamp.clone(), info.reason.clone()),
                None => {
                    return Err(PyError::Attribute(
                        "'NoneType' object has no attribute 'timestamp'".into(),
                    ))
                }
            };
            let mut hostlist = Hostlist::new();
            if per_piece {
                rs.push_hosts(&mut hostlist, lo, hi)?;
            } else {
                hostlist.push(rs.host(lo)?);
            }
            let line = StatusLine {
                reason,
                timestamp,
                unsorted: hi > lo,
                per_rank: true,
                ..StatusLine::new(state, online, IdSet::from_range(lo, hi), hostlist)
            };
            result.append(line, zone, StatusLine::update)?;
        }
    }
    let mut lines = result.into_items();
    for line in &mut lines {
        line.finish();
    }
    Ok(lines)
}

/// The drained lines of `state` one per drain entry and online status
/// rather than one per piece: the pieces of one entry and status differ
/// only in their hosts and ranks, which the merge of their lines unites
/// (the hosts sorted once at the end, see [`HostShape`]).  Thousands of
/// scattered drained ranks thus make a few lines, not thousands to
/// format and merge.  Lines come in the order of their first piece, as
/// the piece by piece merge orders them.  `None` when some piece would
/// raise an error: the caller then goes piece by piece and raises it
/// where flux would.
fn drain_group_lines(
    rs: &ResourceStatus,
    state: &str,
    pieces: &[(u32, u32)],
    excluded: &dyn Fn(bool) -> bool,
) -> PyResult<Option<Vec<StatusLine>>> {
    let mut index: std::collections::HashMap<(usize, bool), usize> =
        std::collections::HashMap::new();
    let mut lines: Vec<StatusLine> = Vec::new();
    for &(lo, hi) in pieces {
        let online = rs.online.contains(lo);
        if excluded(online) {
            continue;
        }
        if !rs.all.contains(lo) {
            return Ok(None);
        }
        let Some(entry) = rs.drain_entry(lo) else {
            return Ok(None);
        };
        let i = match index.get(&(entry, online)) {
            Some(&i) => i,
            None => {
                let Some((_, info)) = rs.drain_raw.get(entry) else {
                    return Ok(None);
                };
                index.insert((entry, online), lines.len());
                lines.push(StatusLine {
                    reason: info.reason.clone(),
                    timestamp: info.timestamp.clone(),
                    per_rank: true,
                    ..StatusLine::new(state, online, IdSet::new(), Hostlist::new())
                });
                lines.len() - 1
            }
        };
        if let Some(line) = lines.get_mut(i) {
            if rs.push_hosts(&mut line.hostlist, lo, hi).is_err() {
                return Ok(None);
            }
            line.ranks.insert_range(lo, hi);
            line.unsorted = line.unsorted || hi > lo || line.ranks.len() > 1;
        }
    }
    Ok(Some(lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::no_env;
    use pycompat::time::FixedZone;

    const STATIC: &str = "{state:>10} {nnodes:>6} {ranks:<15} {nodelist}";

    fn fixture(name: &str) -> Value {
        let text = match name {
            "example" => include_str!("../tests/fixtures/status/example.json"),
            "drain" => include_str!("../tests/fixtures/status/drain.json"),
            "exclude" => include_str!("../tests/fixtures/status/exclude.json"),
            "simple" => include_str!("../tests/fixtures/status/simple.json"),
            "offline" => include_str!("../tests/fixtures/status/offline.json"),
            "torpid" => include_str!("../tests/fixtures/status/torpid.json"),
            _ => "null",
        };
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    fn run_with(
        payload: &Value,
        opts: &StatusOptions,
        alloc: &str,
        hk: &str,
        drain: bool,
    ) -> CmdOutput {
        let z = FixedZone::utc();
        let sc = FormatConfig::new(Subcommand::Status);
        let plan = if drain {
            drain_list_prepare(opts, &FormatConfig::new(Subcommand::Drain), &sc, &no_env)
        } else {
            status_prepare(opts, &sc, &no_env)
        };
        let plan = match plan {
            Ok(p) => p,
            Err(out) => return out,
        };
        let allocated = IdSet::parse(alloc).unwrap_or_default();
        let housekeeping = IdSet::parse(hk).unwrap_or_default();
        let input = StatusInput {
            status: payload,
            allocated: &allocated,
            housekeeping: &housekeeping,
            config: None,
        };
        plan.render(&input, &z)
    }

    fn run(name: &str, opts: &StatusOptions) -> CmdOutput {
        run_with(&fixture(name), opts, "", "", false)
    }

    fn fmt(f: &str) -> StatusOptions {
        StatusOptions {
            format: f.into(),
            ..StatusOptions::default()
        }
    }

    #[test]
    fn t2351_static_format_fixtures() {
        let hdr = "     STATE NNODES RANKS           NODELIST\n";
        let cases = [
            (
                "example",
                "     avail      2 2-3             foo[3-4]\n   exclude      1 0               foo1\n   drained      1 0               foo1\n  drained*      1 1               foo2\n",
            ),
            (
                "drain",
                "     avail      2 2-3             foo[3-4]\n   drained      2 0-1             foo[1-2]\n",
            ),
            (
                "exclude",
                "     avail      2 2-3             foo[3-4]\n    avail*      1 1               foo2\n   exclude      1 0               foo1\n",
            ),
            ("simple", "     avail      4 0-3             foo[1-4]\n"),
            (
                "offline",
                "     avail      3 0,2-3           foo[1,3-4]\n    avail*      1 1               foo2\n",
            ),
            (
                "torpid",
                "     avail      1 2               foo3\n    torpid      1 3               foo4\n   drained      2 0-1             foo[1-2]\n",
            ),
        ];
        for (name, body) in cases {
            let out = run(name, &fmt(STATIC));
            assert_eq!(out.exit_code, 0, "{name}: {:?}", out.messages);
            assert_eq!(out.stdout, format!("{hdr}{body}"), "{name}");
        }
    }

    #[test]
    fn default_format_color_off_drops_separator_before_color_fields() {
        // flux's OutputFormat.copy(except_fields=[color_up, color_off])
        // drops the whitespace-only text in front of a removed field.
        let out = run("example", &StatusOptions::default());
        assert_eq!(
            out.stdout,
            "       STATEUP NNODES NODELIST\n       avail ✔      2 foo[3-4]\n     exclude ✔      1 foo1\n     drained ✔      1 foo1\n    drained* ✗      1 foo2\n"
        );
    }

    #[test]
    fn default_format_color_on() {
        let opts = StatusOptions {
            color: true,
            ..StatusOptions::default()
        };
        let out = run("example", &opts);
        assert_eq!(
            out.stdout,
            "       STATE UP NNODES NODELIST\n       avail \x1b[01;32m ✔\x1b[0;0m      2 foo[3-4]\n     exclude \x1b[01;32m ✔\x1b[0;0m      1 foo1\n     drained \x1b[01;32m ✔\x1b[0;0m      1 foo1\n    drained* \x1b[01;31m ✗\x1b[0;0m      1 foo2\n"
        );
    }

    #[test]
    fn ascii_up_and_status_fields() {
        let out = run("exclude", &fmt("{statex:>8} {up.ascii} {status}"));
        assert_eq!(
            out.stdout,
            "   STATE UP STATUS\n   avail y online\n   avail n offline\n exclude y online\n"
        );
    }

    #[test]
    fn headers_for_all_fields() {
        let empty = serde_json::json!({"R": null, "offline": "", "online": "", "exclude": "",
            "torpid": "", "drain": {}});
        let f = "state=={state}\nnnodes=={nnodes}\nranks=={ranks}\nnodelist=={nodelist}\nreason=={reason}\ntimestamp=={timestamp}";
        let out = run_with(&empty, &fmt(f), "", "", false);
        assert_eq!(
            out.stdout,
            "state==STATE\nnnodes==NNODES\nranks==RANKS\nnodelist==NODELIST\nreason==REASON\ntimestamp==TIME\n"
        );
    }

    #[test]
    fn long_format_splits_drained_by_reason() {
        let out = run("drain", &StatusOptions::default());
        assert_eq!(
            out.stdout,
            "       STATEUP NNODES NODELIST\n       avail ✔      2 foo[3-4]\n     drained ✔      2 foo[1-2]\n"
        );
        let out = run("drain", &fmt("long"));
        assert_eq!(
            out.stdout,
            "       STATEUP NNODES REASON                         NODELIST\n       avail ✔      2                                foo[3-4]\n     drained ✔      1 bad node                       foo1\n     drained ✔      1 testing drain                  foo2\n"
        );
        let opts = StatusOptions {
            format: "{reason}".into(),
            states: Some("drain".into()),
            no_header: true,
            ..StatusOptions::default()
        };
        assert_eq!(run("drain", &opts).stdout, "bad node\ntesting drain\n");
    }

    #[test]
    fn explicit_states_show_empty_lines_unless_skip_empty() {
        let mut opts = StatusOptions {
            format: "{state}".into(),
            states: Some("exclude".into()),
            no_header: true,
            ..StatusOptions::default()
        };
        assert_eq!(run("simple", &opts).stdout, "exclude\n");
        opts.skip_empty = true;
        assert_eq!(run("simple", &opts).stdout, "");
        // empty offline lines appear only when offline is requested
        opts.skip_empty = false;
        opts.states = Some("exclude,offline".into());
        opts.format = "{state} {nnodes}".into();
        assert_eq!(run("simple", &opts).stdout, "exclude* 0\n");
        opts.states = Some("exclude,offline,online".into());
        assert_eq!(run("simple", &opts).stdout, "exclude 0\nexclude* 0\n");
    }

    #[test]
    fn all_states() {
        let opts = StatusOptions {
            format: STATIC.into(),
            states: Some("all".into()),
            ..StatusOptions::default()
        };
        let out = run_with(&fixture("drain"), &opts, "0", "3", false);
        assert_eq!(
            out.stdout,
            "     STATE NNODES RANKS           NODELIST\n     avail      2 2-3             foo[3-4]\n   exclude      0                 \n allocated      1 0               foo1\n    torpid      0                 \nhousekeeping      1 3               foo4\n  draining      1 0               foo1\n   drained      1 1               foo2\n"
        );
    }

    #[test]
    fn online_offline_selection() {
        let mut opts = StatusOptions {
            format: STATIC.into(),
            states: Some("online".into()),
            ..StatusOptions::default()
        };
        let out = run("example", &opts);
        assert_eq!(
            out.stdout,
            "     STATE NNODES RANKS           NODELIST\n     avail      2 2-3             foo[3-4]\n   exclude      1 0               foo1\n    torpid      0                 \nhousekeeping      0                 \n  draining      0                 \n   drained      1 0               foo1\n"
        );
        opts.states = Some("offline".into());
        let out = run("example", &opts);
        assert_eq!(
            out.stdout,
            "     STATE NNODES RANKS           NODELIST\n    avail*      0                 \n  exclude*      0                 \n   torpid*      0                 \nhousekeeping*      0                 \n  drained*      1 1               foo2\n"
        );
    }

    #[test]
    fn issue_6625_dissimilar_reasons_never_merge() {
        let payload = serde_json::json!({
            "R": {"version": 1, "execution": {"R_lite": [{"rank": "0-3", "children": {"core": "0-3"}}],
                  "starttime": 0, "expiration": 0, "nodelist": ["foo[1-4]"]}},
            "drain": {"0": {"timestamp": 1000.0, "reason": "xxxxxxxxyy"},
                      "1-3": {"timestamp": 1000.0, "reason": "xxxxxxxx"}},
            "online": "0-3", "offline": "", "exclude": "", "torpid": ""
        });
        let opts = |f: &str| StatusOptions {
            format: f.into(),
            no_header: true,
            ..StatusOptions::default()
        };
        let a = run_with(
            &payload,
            &opts("{state:>12} {ranks:>6} +:{reason:<5.5+}"),
            "",
            "",
            false,
        );
        let b = run_with(
            &payload,
            &opts("{state:>12} {ranks:>6} {reason:<10}"),
            "",
            "",
            false,
        );
        assert_eq!(
            a.stdout,
            "     drained      0 xxxxxxxxyy\n     drained    1-3 xxxxxxxx  \n"
        );
        assert_eq!(a.stdout, b.stdout);
        // without the +: sentinel the merge key is the truncated text, so
        // flux still merges these lines (only +: fields are nullified)
        let c = run_with(
            &payload,
            &opts("{state:>12} {ranks:>6} {reason:<5.5+}"),
            "",
            "",
            false,
        );
        assert_eq!(c.stdout, "     drained    0-3 xxxx+\n");
    }

    #[test]
    fn drain_listing_formats() {
        let opts = StatusOptions::default();
        let out = run_with(&fixture("drain"), &opts, "", "", true);
        assert_eq!(
            out.stdout,
            "TIME         STATE    REASON                         NODELIST\nDec09 20:00  drained  bad node                       foo1\nDec09 20:00  drained  testing drain                  foo2\n"
        );
        let out = run_with(&fixture("example"), &fmt("long"), "", "", true);
        assert_eq!(
            out.stdout,
            "TIME         STATE    RANKS    REASON                         NODELIST\nDec09 20:00  drained  0        bad node                       foo1\nDec09 20:00  drained* 1        testing drain                  foo2\n"
        );
        // draining (drained + allocated) and local time
        let z = FixedZone::new(-8 * 3600, "PST");
        let sc = FormatConfig::new(Subcommand::Status);
        let plan = drain_list_prepare(&opts, &FormatConfig::new(Subcommand::Drain), &sc, &no_env);
        let allocated = IdSet::parse("1").unwrap_or_default();
        let hk = IdSet::new();
        let p = fixture("drain");
        let input = StatusInput {
            status: &p,
            allocated: &allocated,
            housekeeping: &hk,
            config: None,
        };
        let out = plan.map(|p| p.render(&input, &z)).unwrap_or_else(|o| o);
        assert_eq!(
            out.stdout,
            "TIME         STATE    REASON                         NODELIST\nDec09 12:00  draining testing drain                  foo2\nDec09 12:00  drained  bad node                       foo1\n"
        );
        // -o help lists the drain formats
        let out = run_with(&fixture("drain"), &fmt("help"), "", "", true);
        assert!(out
            .stdout
            .contains("  long         Long flux-resource drain format string\n"));
    }

    #[test]
    fn state_errors_and_help() {
        let mut opts = StatusOptions {
            states: Some("help".into()),
            ..StatusOptions::default()
        };
        let out = run("simple", &opts);
        assert_eq!(out.exit_code, 0);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: INFO: valid states: all,online,avail,offline,exclude,drain,draining,drained,torpid,allocated,housekeeping\n"
        );
        opts.states = Some("avail,frelled".into());
        let out = run("simple", &opts);
        assert_eq!(out.exit_code, 1);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: Invalid resource state frelled specified\nflux-resource: INFO: valid states: all,online,avail,offline,exclude,drain,draining,drained,torpid,allocated,housekeeping\n"
        );
        let out = run("simple", &fmt("invalid"));
        assert_eq!(out.exit_code, 1);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: --format: No such format invalid\n"
        );
        let out = run("simple", &fmt("{bogus}"));
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: Unknown format field: bogus\n"
        );
    }

    #[test]
    fn include_targets() {
        let mut opts = fmt(STATIC);
        opts.include = Some("foo[2-3]".into());
        assert_eq!(
            run("example", &opts).stdout,
            "     STATE NNODES RANKS           NODELIST\n     avail      1 2               foo3\n  drained*      1 1               foo2\n"
        );
        opts.include = Some("0,3".into());
        assert_eq!(
            run("example", &opts).stdout,
            "     STATE NNODES RANKS           NODELIST\n     avail      1 3               foo4\n   exclude      1 0               foo1\n   drained      1 0               foo1\n"
        );
        opts.include = Some("9".into());
        assert_eq!(
            run("example", &opts).stdout,
            "     STATE NNODES RANKS           NODELIST\n"
        );
        opts.include = Some("foo[1-".into());
        let out = run("example", &opts);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: --include: Invalid hostlist: 'foo[1-'\n"
        );
    }

    #[test]
    fn queues() {
        let payload = serde_json::json!({
            "R": {"version": 1, "execution": {"R_lite": [{"rank": "0-3", "children": {"core": "0-3"}}],
                  "starttime": 0, "expiration": 0, "nodelist": ["foo[1-4]"],
                  "properties": {"batch": "0-1", "debug": "2-3"}}},
            "drain": {}, "online": "0-3", "offline": "", "exclude": "", "torpid": ""
        });
        let config = serde_json::json!({"queues": {"batch": {"requires": ["batch"]},
                                                   "debug": {"requires": ["debug"]}}});
        let z = FixedZone::utc();
        let sc = FormatConfig::new(Subcommand::Status);
        let render = |queues: &[&str], config: Option<&Value>| {
            let opts = StatusOptions {
                format: STATIC.into(),
                queues: queues.iter().map(|s| s.to_string()).collect(),
                no_header: true,
                ..StatusOptions::default()
            };
            let e = IdSet::new();
            let input = StatusInput {
                status: &payload,
                allocated: &e,
                housekeeping: &e,
                config,
            };
            status_prepare(&opts, &sc, &no_env)
                .map(|p| p.render(&input, &z))
                .unwrap_or_else(|o| o)
        };
        assert_eq!(
            render(&["debug"], Some(&config)).stdout,
            "     avail      2 2-3             foo[3-4]\n"
        );
        assert_eq!(
            render(&["foo"], Some(&config)).stderr_text("flux-resource"),
            "flux-resource: ERROR: --queue: foo: no such queue\n"
        );
        assert_eq!(
            render(&["batch"], None).stderr_text("flux-resource"),
            "flux-resource: ERROR: --queue: batch: no such queue\n"
        );
    }

    /// A sparse R (ranks 0 and 2147483646, the largest RFC 22 id): each
    /// rank's host is the nodelist entry at its position among R's ranks.
    #[test]
    fn sparse_ranks_map_to_their_hosts_by_position() {
        let p = serde_json::json!({"R": {"version": 1, "execution": {
                "R_lite": [{"rank": "0,2147483646", "children": {"core": "0-3"}}],
                "nodelist": ["a0", "a1"], "starttime": 0.0, "expiration": 0.0}},
            "online": "0", "offline": "2147483646", "exclude": "",
            "drain": {"2147483646": {"timestamp": 1.0, "reason": "far"}}});
        let out = run_with(&p, &fmt(STATIC), "", "", false);
        assert_eq!(out.exit_code, 0, "{:?}", out.messages);
        assert_eq!(
            out.stdout,
            "     STATE NNODES RANKS           NODELIST\n\
             \x20    avail      1 0               a0\n\
             \x20 drained*      1 2147483646      a1\n"
        );
        let only = StatusOptions {
            include: Some("a1".into()),
            ..fmt(STATIC)
        };
        let out = run_with(&p, &only, "", "", false);
        assert_eq!(
            out.stdout,
            "     STATE NNODES RANKS           NODELIST\n\
             \x20 drained*      1 2147483646      a1\n"
        );
    }

    #[test]
    fn payload_errors() {
        let bad = serde_json::json!({"R": null, "online": "", "exclude": "", "drain": {}});
        let out = run_with(&bad, &fmt(STATIC), "", "", false);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: 'offline'\n"
        );
        // a rank without a hostname in R cannot be shown
        let p = serde_json::json!({"R": {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}]}},
            "online": "0-1", "offline": "", "exclude": "", "drain": {}});
        let out = run_with(&p, &fmt(STATIC), "", "", false);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: Hostlist index out of range\n"
        );
    }

    #[test]
    fn stats_helpers() {
        let stats = serde_json::json!({"housekeeping": {"running": {
            "f1": {"allocated": "0-1"}, "f2": {"allocated": "5"}}}});
        assert_eq!(
            housekeeping_ranks(&stats)
                .map(|i| i.encode())
                .unwrap_or_default(),
            "0-1,5"
        );
        assert_eq!(
            housekeeping_ranks(&serde_json::json!({}))
                .err()
                .map(|e| e.to_string()),
            Some("'housekeeping'".to_string())
        );
        let ss = serde_json::json!({"allocated": {"version": 1, "execution": {"R_lite": [{"rank": "2,4", "children": {"core": "0"}}]}}});
        assert_eq!(
            allocated_ranks(&ss).map(|i| i.encode()).unwrap_or_default(),
            "2,4"
        );
    }

    /// Drained ranks made into lines piece by piece give what flux's
    /// rank-by-rank lines give, for random payloads, hostnames, formats,
    /// states and includes.
    #[test]
    fn drained_pieces_match_rank_by_rank() {
        let mut x: u64 = 7;
        let mut rnd = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as usize) % n.max(1)
        };
        let names = [
            "n[0-39]",
            "node[001-040]",
            "n[8-12],n[08-19],m[1-20]",
            "c[30-39],b[0-9],a[10-29]",
            "node1[0-9],node[10-39]",
            "x[1-20]y,z[1-20]",
        ];
        let formats = [
            "default",
            "long",
            STATIC,
            "{reason}",
            "{nnodes} {nodelist}",
            "{nodelist}",
            "{state} {ranks} {timestamp}",
        ];
        let states = [None, Some("drain"), Some("all"), Some("drained,offline")];
        let includes = [
            None,
            Some("0-9,30-35"),
            Some("n[3-30]"),
            Some("a[10-15],b3"),
        ];
        let mut compared = 0;
        for round in 0..400 {
            let n = 40u32;
            let pick = |rnd: &mut dyn FnMut(usize) -> usize| {
                let mut ids = IdSet::new();
                for _ in 0..rnd(6) {
                    let lo = rnd(n as usize) as u32;
                    ids.insert_range(lo, (lo + rnd(12) as u32).min(n + 2));
                }
                ids
            };
            let mut drain = serde_json::Map::new();
            for i in 0..1 + rnd(5) {
                let ids = pick(&mut rnd);
                if !ids.is_empty() {
                    let reason = ["a", "b", "", "a"][rnd(4)];
                    let e =
                        serde_json::json!({"timestamp": 1e9 + (i % 2) as f64, "reason": reason});
                    drain.insert(ids.encode(), e);
                }
            }
            let online = pick(&mut rnd);
            let payload = serde_json::json!({
                "R": {"version": 1, "execution": {
                    "R_lite": [{"rank": format!("0-{}", n - 1), "children": {"core": "0"}}],
                    "nodelist": [names[round % names.len()]],
                }},
                "online": online.encode(),
                "offline": IdSet::from_range(0, n - 1).difference(&online).encode(),
                "exclude": "",
                "torpid": "",
                "drain": drain,
            });
            let allocated = pick(&mut rnd);
            let opts = StatusOptions {
                format: formats[rnd(formats.len())].into(),
                states: states[rnd(states.len())].map(String::from),
                include: includes[rnd(includes.len())].map(String::from),
                ..StatusOptions::default()
            };
            let Ok(mut plan) =
                status_prepare(&opts, &FormatConfig::new(Subcommand::Status), &no_env)
            else {
                continue;
            };
            let input = StatusInput {
                status: &payload,
                allocated: &allocated,
                housekeeping: &IdSet::new(),
                config: None,
            };
            let z = FixedZone::utc();
            let fast = (plan.render(&input, &z), plan.render_json(&input, &z));
            plan.rank_by_rank = true;
            let slow = (plan.render(&input, &z), plan.render_json(&input, &z));
            assert_eq!(fast.0.stdout, slow.0.stdout, "{payload} {opts:?}");
            assert_eq!(fast.0.messages, slow.0.messages, "{payload} {opts:?}");
            assert_eq!(fast.1.stdout, slow.1.stdout, "{payload} {opts:?}");
            compared += 1;
        }
        assert!(compared > 300);
    }

    /// A status of 131,072 nodes in one R_lite entry, many of them
    /// drained one reason per range: the lines are those of the ranks.
    #[test]
    fn large_instance_lines() {
        let payload = serde_json::json!({
            "R": {"version": 1, "execution": {
                "R_lite": [{"rank": "0-131071", "children": {"core": "0-3"}}],
                "nodelist": ["sim[0-131071]"],
            }},
            "online": "0-100000",
            "offline": "100001-131071",
            "exclude": "",
            "torpid": "5",
            "drain": {
                "10-19,1000-1999": {"timestamp": 1e9, "reason": "fan"},
                "20-29,120000-120009": {"timestamp": 1e9, "reason": "dimm"},
            },
        });
        let plan = status_prepare(
            &fmt("long"),
            &FormatConfig::new(Subcommand::Status),
            &no_env,
        );
        let Ok(mut plan) = plan else {
            panic!("long format");
        };
        let input = StatusInput {
            status: &payload,
            allocated: &IdSet::from_range(15, 15),
            housekeeping: &IdSet::new(),
            config: None,
        };
        let z = FixedZone::utc();
        let out = plan.render(&input, &z);
        assert_eq!(
            out.stdout,
            "       STATEUP NNODES REASON                         NODELIST\n       avail ✔  98980                                sim[0-4,6-9,30-999,2000-100000]\n      avail* ✗  31061                                sim[100001-119999,120010-131071]\n      torpid ✔      1                                sim5\n    draining ✔      1 fan                            sim15\n     drained ✔   1009 fan                            sim[10-14,16-19,1000-1999]\n     drained ✔     10 dimm                           sim[20-29]\n    drained* ✗     10 dimm                           sim[120000-120009]\n"
        );
        plan.rank_by_rank = true;
        assert_eq!(plan.render(&input, &z).stdout, out.stdout);
    }

    /// The deferred sort of `StatusLine::update` gives the hostlist that
    /// sorting after every append gives (flux's order), also with
    /// duplicate, zero-padded and unnumbered hosts and unsorted starts.
    #[test]
    fn deferred_sort_matches_sort_after_every_append() {
        let mixed = [
            "node1", "node01", "node001", "node2", "node10", "node010", "foo", "foo7", "bar3x",
            "node3", "node4", "node5", "n1", "node", "node0", "node00",
        ];
        let plain = [
            "node1", "node2", "node10", "node9", "foo", "n1", "node0", "node123",
        ];
        let padded = [
            "node00001",
            "node00002",
            "node00010",
            "node12345",
            "foo",
            "n00007",
        ];
        let mut x: u64 = 42;
        let mut rnd = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as usize) % n
        };
        for round in 0..3000 {
            let pool: &[&str] = match round % 3 {
                0 => &mixed,
                1 => &plain,
                _ => &padded,
            };
            let mut first = Hostlist::new();
            for _ in 0..rnd(4) {
                first.push(pool[rnd(pool.len())]);
            }
            let line = |hostlist| StatusLine::new("drained", true, IdSet::new(), hostlist);
            let mut eager = first.clone();
            let mut lazy = line(first);
            let merges = 1 + rnd(12);
            for _ in 0..merges {
                let mut other = Hostlist::new();
                for _ in 0..1 + rnd(3) {
                    if rnd(3) == 0 {
                        let n = rnd(40);
                        match round % 3 {
                            0 => other.push(&format!("node{n}")),
                            1 => other.push(&format!("node{}", n + 1)),
                            _ => other.push(&format!("node{:05}", n + 1)),
                        }
                    } else {
                        other.push(pool[rnd(pool.len())]);
                    }
                }
                eager.append(&other);
                eager.sort();
                lazy.update(line(other));
            }
            lazy.finish();
            assert_eq!(lazy.hostlist.encode(), eager.encode(), "round {round}");
            assert_eq!(lazy.nnodes(), eager.len());
        }
    }
}

#[cfg(test)]
mod rlist_error_tests {
    use super::*;
    use serde_json::json;

    /// flux's text, then the reason (flux stops after its text).
    #[test]
    fn a_bad_r_says_what_was_wrong() {
        let bad = json!({"version": 1, "execution": {"R_lite": [{"rank": "x", "children": {}}]}});
        for e in [
            resource_set(Some(&bad)).map(|_| ()).unwrap_err(),
            resource_summary(Some(&bad)).map(|_| ()).unwrap_err(),
        ] {
            assert_eq!(
                e,
                PyError::Value("Rlist: invalid argument: invalid R_lite rank idset 'x'".into())
            );
        }
    }
}
