//! `hostlist_sort()` and `hostlist_uniq()`.
//!
//! flux-core sorts the hostranges with `hostrange_cmp()` (glibc's `qsort`,
//! a stable merge sort), then `hostlist_coalesce()` splits overlapping ranges
//! (restarting its right-to-left scan after each split) and
//! `hostlist_collapse()` joins adjacent ones.  This module reproduces the
//! result exactly but in time proportional to the output: the comparison is
//! expressed as a total order key, the restart is replaced by an equivalent
//! rightward cascade on a linked list, and the collapse is a single pass.

use crate::{digits, same_str, width_compatible, Entry, Hostlist};
use std::cmp::Ordering;
use std::sync::Arc;

/// Sort key of a numbered range, equivalent to flux-core's comparison of two
/// ranges with the same prefix: width-compatible ranges compare by `lo`,
/// incompatible ones by width.  A range is "natural" when its width does not
/// exceed the digits of `lo` (no zero padding); a range padded to `p > digits`
/// is compatible exactly with naturals of at least `p` digits and with ranges
/// padded to `p`, so it sorts at the boundary `10^(p-1)` among naturals.
fn num_key(lo: u64, width: u32) -> (u128, u8, u32, u64) {
    if width <= digits(lo) {
        (u128::from(lo), 1, 0, lo)
    } else {
        let boundary = 10u128.checked_pow(width - 1).unwrap_or(u128::MAX);
        (boundary, 0, width, lo)
    }
}

/// Prefix bytes and "single host" flag of an entry (runs are expanded first).
fn prefix_of(e: &Entry) -> (&str, bool) {
    match e {
        Entry::Range { prefix, .. } => (prefix, false),
        Entry::Single(name) => (name, true),
        Entry::Run { affix, .. } => (&affix.prefix, true),
    }
}

/// flux-core's `hostrange_cmp()` as a total order.
pub(crate) fn cmp(a: &Entry, b: &Entry) -> Ordering {
    let (pa, sa) = prefix_of(a);
    let (pb, sb) = prefix_of(b);
    let shared = match (a, b) {
        (Entry::Range { prefix: x, .. }, Entry::Range { prefix: y, .. }) => Arc::ptr_eq(x, y),
        _ => false,
    };
    if !shared {
        match pa.as_bytes().cmp(pb.as_bytes()) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    match (sa, sb) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => match (a, b) {
            (
                Entry::Range {
                    lo: la, width: wa, ..
                },
                Entry::Range {
                    lo: lb, width: wb, ..
                },
            ) => num_key(*la, *wa).cmp(&num_key(*lb, *wb)),
            _ => Ordering::Equal,
        },
    }
}

/// Replace every run (hosts from a suffixed bracket) by its single hosts, as
/// flux-core stores them.
fn expand_runs(hl: &mut Hostlist) {
    if !hl.entries.iter().any(|e| matches!(e, Entry::Run { .. })) {
        return;
    }
    let mut out = Vec::with_capacity(hl.entries.len());
    for e in hl.entries.drain(..) {
        match &e {
            Entry::Run { .. } => {
                for k in 0..e.count() {
                    out.push(Entry::Single(Arc::from(e.host(k))));
                }
            }
            _ => out.push(e),
        }
    }
    hl.entries = out;
}

fn recount(hl: &mut Hostlist) {
    hl.count = hl
        .entries
        .iter()
        .fold(0u64, |acc, e| acc.saturating_add(e.count()));
}

/// Numeric fields of a range entry.
fn range_parts(e: &Entry) -> Option<(&Arc<str>, u64, u64, u32)> {
    match e {
        Entry::Range {
            prefix,
            lo,
            hi,
            width,
        } => Some((prefix, *lo, *hi, *width)),
        _ => None,
    }
}

/// flux-core's `hostrange_intersect(prev, next)`: the duplicated numbers
/// `next.lo ..= min(prev.hi, next.hi)` when the ranges overlap by more than
/// one end point (`prev.hi > next.lo`).
///
/// flux-core asserts that `prev` sorts before `next`.  A split can raise a
/// range's `lo` enough to make it width-compatible with a zero-padded
/// neighbour that sorted after it (`a[8-10],a[00,7-10]`), and flux-core then
/// aborts; here such a pair is left alone (`prev.lo <= next.lo` is required).
pub(crate) fn intersect(prev: &Entry, next: &Entry) -> Option<(u64, u64)> {
    let (pp, plo, phi, pw) = range_parts(prev)?;
    let (np, nlo, nhi, nw) = range_parts(next)?;
    (same_str(pp, np) && phi > nlo && plo <= nlo && width_compatible(plo, pw, nlo, nw))
        .then(|| (nlo, phi.min(nhi)))
}

const NIL: usize = usize::MAX;

struct Node {
    e: Entry,
    prev: usize,
    next: usize,
}

struct List {
    nodes: Vec<Node>,
}

impl List {
    fn entry(&self, i: usize) -> Option<&Entry> {
        self.nodes.get(i).map(|n| &n.e)
    }
    fn next(&self, i: usize) -> usize {
        self.nodes.get(i).map_or(NIL, |n| n.next)
    }
    fn prev(&self, i: usize) -> usize {
        self.nodes.get(i).map_or(NIL, |n| n.prev)
    }
    fn set_bounds(&mut self, i: usize, lo: Option<u64>, hi: Option<u64>) {
        if let Some(Node {
            e: Entry::Range { lo: l, hi: h, .. },
            ..
        }) = self.nodes.get_mut(i)
        {
            if let Some(v) = lo {
                *l = v;
            }
            if let Some(v) = hi {
                *h = v;
            }
        }
    }
    /// Insert `e` right before node `at`.
    fn insert_before(&mut self, at: usize, e: Entry) {
        let prev = self.prev(at);
        let id = self.nodes.len();
        self.nodes.push(Node { e, prev, next: at });
        if let Some(n) = self.nodes.get_mut(prev) {
            n.next = id;
        }
        if let Some(n) = self.nodes.get_mut(at) {
            n.prev = id;
        }
    }

    /// Split the overlap of `p` and its successor `c` (duplicates `dlo..=dhi`)
    /// exactly as `hostlist_coalesce()` does:
    /// `[a-b],[c-d]` becomes `[a-c], c, c+1, c+1, ..., e-1, e-1, e, [e-max(b,d)]`
    /// with `e = min(b,d)`.
    fn split(&mut self, p: usize, c: usize, dlo: u64, dhi: u64) {
        let Some((prefix, _, phi, pw)) = self.entry(p).and_then(range_parts) else {
            return;
        };
        let prefix = Arc::clone(prefix);
        let c_hi = if dhi < phi { Some(phi) } else { None };
        self.set_bounds(c, Some(dhi), c_hi);
        self.set_bounds(p, None, Some(dlo));
        let single = |x: u64| Entry::Range {
            prefix: Arc::clone(&prefix),
            lo: x,
            hi: x,
            width: pw,
        };
        let mut x = dlo;
        loop {
            if x > dlo {
                self.insert_before(c, single(x));
            }
            if x < dhi {
                self.insert_before(c, single(x));
            }
            if x >= dhi {
                break;
            }
            x += 1;
        }
    }
}

/// `hostlist_coalesce()` (without its final collapse) on a sorted sequence.
fn coalesce(entries: Vec<Entry>) -> Vec<Entry> {
    let overlapping = entries
        .windows(2)
        .any(|w| matches!(w, [a, b] if intersect(a, b).is_some()));
    if !overlapping {
        return entries;
    }
    let n = entries.len();
    let mut list = List {
        nodes: entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| Node {
                e,
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 < n { i + 1 } else { NIL },
            })
            .collect(),
    };
    // flux-core scans pairs right to left and restarts from the right end
    // after each split.  After splitting (p, c) the only pair to the right
    // that can overlap is (c, next of c), because c's high end may have
    // grown; handle that cascade, then carry on leftwards from p.
    let mut cur = n - 1;
    loop {
        let p = list.prev(cur);
        if p == NIL {
            break;
        }
        let pair = list
            .entry(p)
            .zip(list.entry(cur))
            .and_then(|(a, b)| intersect(a, b));
        if let Some((dlo, dhi)) = pair {
            list.split(p, cur, dlo, dhi);
            let mut x = cur;
            loop {
                let y = list.next(x);
                let Some(ov) = list
                    .entry(x)
                    .zip(list.entry(y))
                    .and_then(|(a, b)| intersect(a, b))
                else {
                    break;
                };
                list.split(x, y, ov.0, ov.1);
                x = y;
            }
        }
        cur = p;
    }
    // Walk from the head.
    let mut head = 0usize;
    while list.prev(head) != NIL {
        head = list.prev(head);
    }
    let mut out = Vec::with_capacity(list.nodes.len());
    let mut order = Vec::with_capacity(list.nodes.len());
    let mut i = head;
    while i != NIL {
        order.push(i);
        i = list.next(i);
    }
    let mut slots: Vec<Option<Entry>> = list.nodes.into_iter().map(|n| Some(n.e)).collect();
    for i in order {
        if let Some(e) = slots.get_mut(i).and_then(Option::take) {
            out.push(e);
        }
    }
    out
}

/// `hostlist_collapse()`: right to left, join a range with its successor when
/// the numbers are consecutive, the prefixes equal and the widths compatible.
fn collapse(entries: Vec<Entry>) -> Vec<Entry> {
    let mut rev: Vec<Entry> = Vec::with_capacity(entries.len());
    for mut e in entries.into_iter().rev() {
        if let (
            Entry::Range {
                prefix: pp,
                lo: plo,
                hi: phi,
                width: pw,
            },
            Some(Entry::Range {
                prefix: np,
                lo: nlo,
                hi: nhi,
                width: nw,
            }),
        ) = (&mut e, rev.last())
        {
            if same_str(pp, np)
                && phi.checked_add(1) == Some(*nlo)
                && width_compatible(*plo, *pw, *nlo, *nw)
            {
                *phi = *nhi;
                rev.pop();
            }
        }
        rev.push(e);
    }
    rev.reverse();
    rev
}

/// Precomputed sort key: prefix rank, numbered flag, [`num_key`], original
/// position (so an unstable sort gives the stable order flux-core's merge
/// sort produces).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    rank: u32,
    numbered: bool,
    num: (u128, u8, u32, u64),
    pos: u32,
}

/// Sort entries by [`cmp`], stably.  Prefixes are ranked once (entries
/// sharing one allocation are recognised without comparing bytes), then the
/// entries are sorted by precomputed keys.
fn sort_entries(entries: Vec<Entry>) -> Vec<Entry> {
    let Ok(n) = u32::try_from(entries.len()) else {
        let mut entries = entries;
        entries.sort_by(cmp);
        return entries;
    };
    let mut ids: Vec<u32> = Vec::with_capacity(entries.len());
    let mut distinct: Vec<&str> = Vec::new();
    let mut index: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut last: Option<(*const u8, usize, u32)> = None;
    for e in &entries {
        let (p, _) = prefix_of(e);
        let id = match last {
            Some((ptr, len, id)) if ptr == p.as_ptr() && len == p.len() => id,
            _ => {
                let next = u32::try_from(distinct.len()).unwrap_or(u32::MAX);
                let id = *index.entry(p).or_insert_with(|| {
                    distinct.push(p);
                    next
                });
                last = Some((p.as_ptr(), p.len(), id));
                id
            }
        };
        ids.push(id);
    }
    let mut by_name: Vec<u32> = (0..u32::try_from(distinct.len()).unwrap_or(u32::MAX)).collect();
    by_name.sort_unstable_by(|&a, &b| {
        let x = distinct.get(a as usize).map_or(&[][..], |s| s.as_bytes());
        let y = distinct.get(b as usize).map_or(&[][..], |s| s.as_bytes());
        x.cmp(y)
    });
    let mut rank = vec![0u32; distinct.len()];
    for (r, &id) in by_name.iter().enumerate() {
        if let Some(slot) = rank.get_mut(id as usize) {
            *slot = u32::try_from(r).unwrap_or(u32::MAX);
        }
    }
    let mut keys: Vec<Key> = entries
        .iter()
        .zip(&ids)
        .zip(0..n)
        .map(|((e, &id), pos)| {
            let (numbered, num) = match e {
                Entry::Range { lo, width, .. } => (true, num_key(*lo, *width)),
                _ => (false, (0, 0, 0, 0)),
            };
            Key {
                rank: rank.get(id as usize).copied().unwrap_or(u32::MAX),
                numbered,
                num,
                pos,
            }
        })
        .collect();
    drop(index);
    drop(distinct);
    keys.sort_unstable();
    let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    keys.iter()
        .filter_map(|k| slots.get_mut(k.pos as usize).and_then(Option::take))
        .collect()
}

pub(crate) fn sort(hl: &mut Hostlist) {
    expand_runs(hl);
    if hl.entries.len() <= 1 {
        return;
    }
    let entries = sort_entries(std::mem::take(&mut hl.entries));
    hl.entries = collapse(coalesce(entries));
    recount(hl);
}

/// `hostrange_join(h1, h2)` for sorted neighbours: merges `h2` into `h1` and
/// returns true when they are the same single host or overlapping/adjacent
/// compatible ranges.
fn join(h1: &mut Entry, h2: &Entry) -> bool {
    match (h1, h2) {
        (Entry::Single(a), Entry::Single(b)) => same_str(a, b),
        (
            Entry::Range {
                prefix: p1,
                lo: l1,
                hi: h1,
                width: w1,
            },
            Entry::Range {
                prefix: p2,
                lo: l2,
                hi: h2,
                width: w2,
            },
        ) => {
            if !same_str(p1, p2) || !width_compatible(*l1, *w1, *l2, *w2) {
                return false;
            }
            if h1.checked_add(1) == Some(*l2) || *h1 >= *l2 {
                if *h1 < *h2 {
                    *h1 = *h2;
                }
                true
            } else {
                false
            }
        }
        _ => false,
    }
}

pub(crate) fn uniq(hl: &mut Hostlist) {
    expand_runs(hl);
    if hl.entries.len() <= 1 {
        return;
    }
    let entries = sort_entries(std::mem::take(&mut hl.entries));
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        if let Some(last) = out.last_mut() {
            if join(last, &e) {
                continue;
            }
        }
        out.push(e);
    }
    hl.entries = out;
    recount(hl);
}
