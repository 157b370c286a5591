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

/// flux-core's `hostrange_intersect(prev, next)`: the duplicated numbers
/// `next.lo ..= min(prev.hi, next.hi)` when the ranges overlap by more than
/// one end point (`prev.hi > next.lo`).
///
/// flux-core asserts that `prev` sorts before `next`.  A split can raise a
/// range's `lo` enough to make it width-compatible with a zero-padded
/// neighbour that sorted after it (`a[8-10],a[00,7-10]`), and flux-core then
/// aborts; here such a pair is left alone (`prev.lo <= next.lo` is required).
pub(crate) fn intersect(prev: &Entry, next: &Entry) -> Option<(u64, u64)> {
    let (pp, plo, phi, pw) = prev.range_parts()?;
    let (np, nlo, nhi, nw) = next.range_parts()?;
    (same_str(pp, np) && phi > nlo && plo <= nlo && width_compatible(plo, pw, nlo, nw))
        .then(|| (nlo, phi.min(nhi)))
}

/// True when sorted neighbours `a`, `b` belong to one coalescing group:
/// numbered ranges with the same prefix and compatible zero padding.
fn same_group(a: &Entry, b: &Entry) -> bool {
    match (a.range_parts(), b.range_parts()) {
        (Some((pa, la, _, wa)), Some((pb, lb, _, wb))) => {
            same_str(pa, pb) && width_compatible(la, wa, lb, wb)
        }
        _ => false,
    }
}

/// `hostlist_coalesce()` on a sorted sequence, computed in closed form.
///
/// flux-core scans adjacent pairs right to left, splits each overlapping
/// pair (`[a-b],[c-d]` becomes `[a-c], c, c+1, c+1, ..., e, [e-max(b,d)]`
/// with `e = min(b,d)`) and restarts from the right end.  Splits only
/// happen inside a *group*: a maximal run of sorted ranges with one prefix
/// whose neighbours are width-compatible.  Such a group is compatible as a
/// whole (zero-padded ranges sort at their digit boundary, so a run holds
/// ranges padded to one width followed by unpadded ones with at least that
/// many digits), and a split never makes a pair across two groups
/// overlap in sorted order, so groups are independent.  The outcome for a
/// group depends only on the multiset of its numbers: for each maximal block
/// of consecutive numbers present, a chain of ranges whose ends are the
/// block's ends and every number present more than once (`[0-12,12-15,15-20]`),
/// with the remaining copies as single-number ranges placed at their number
/// (before the chain at its first number, after it at its last).  That is
/// what this builds, in time proportional to the ranges plus the output,
/// where the scan is quadratic.  Property tests compare it with a literal
/// transcription of flux-core's loop.
fn coalesce(entries: Vec<Entry>) -> Vec<Entry> {
    let any_overlap = entries
        .windows(2)
        .any(|w| matches!(w, [a, b] if intersect(a, b).is_some()));
    if !any_overlap {
        return entries;
    }
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    let mut start = 0usize;
    while start < entries.len() {
        let mut end = start + 1;
        while let (Some(a), Some(b)) = (entries.get(end - 1), entries.get(end)) {
            if !same_group(a, b) {
                break;
            }
            end += 1;
        }
        let group = entries.get(start..end).unwrap_or(&[]);
        let overlapping = group
            .windows(2)
            .any(|w| matches!(w, [a, b] if intersect(a, b).is_some()));
        if overlapping {
            emit_group(group, &mut out);
        } else {
            out.extend(group.iter().cloned());
        }
        start = end;
    }
    out
}

/// The closed form of [`coalesce`] for one overlapping group.
fn emit_group(group: &[Entry], out: &mut Vec<Entry>) {
    let Some((prefix, _, _, width)) = group.first().and_then(Entry::range_parts) else {
        out.extend(group.iter().cloned());
        return;
    };
    let prefix = Arc::clone(prefix);
    // Multiplicity of each number: +1 at lo, -1 after hi.
    let mut events: Vec<(u128, i64)> = Vec::with_capacity(group.len() * 2);
    for e in group {
        if let Some((_, lo, hi, _)) = e.range_parts() {
            events.push((u128::from(lo), 1));
            events.push((u128::from(hi) + 1, -1));
        }
    }
    events.sort_unstable();
    // Maximal intervals of constant positive multiplicity: (first, last, count).
    let mut intervals: Vec<(u64, u64, u64)> = Vec::new();
    let mut mult: i64 = 0;
    let mut prev: u128 = 0;
    let mut k = 0usize;
    while let Some(&(x, _)) = events.get(k) {
        if mult > 0 && x > prev {
            let first = u64::try_from(prev).unwrap_or(u64::MAX);
            let last = u64::try_from(x - 1).unwrap_or(u64::MAX);
            intervals.push((first, last, mult.unsigned_abs()));
        }
        while let Some(&(y, d)) = events.get(k) {
            if y != x {
                break;
            }
            mult += d;
            k += 1;
        }
        prev = x;
    }
    let range = |lo: u64, hi: u64| Entry::Range {
        prefix: Arc::clone(&prefix),
        lo,
        hi,
        width,
    };
    let singles = |out: &mut Vec<Entry>, v: u64, n: u64| {
        for _ in 0..n {
            out.push(range(v, v));
        }
    };
    // Blocks of consecutive numbers.
    let mut i = 0usize;
    while i < intervals.len() {
        let mut j = i;
        while let (Some(a), Some(b)) = (intervals.get(j), intervals.get(j + 1)) {
            if a.1.checked_add(1) != Some(b.0) {
                break;
            }
            j += 1;
        }
        let block = intervals.get(i..=j).unwrap_or(&[]);
        i = j + 1;
        let (Some(&(bmin, _, mmin)), Some(&(_, bmax, _))) = (block.first(), block.last()) else {
            continue;
        };
        if bmin == bmax {
            singles(out, bmin, mmin);
            continue;
        }
        singles(out, bmin, mmin - 1);
        let mut seg_lo = bmin;
        for &(s, e, m) in block {
            if m == 1 {
                if e == bmax {
                    out.push(range(seg_lo, bmax));
                }
                continue;
            }
            let mut v = s.max(bmin + 1);
            if s == bmin && e == bmin {
                continue;
            }
            loop {
                out.push(range(seg_lo, v));
                singles(out, v, if v == bmax { m - 1 } else { m - 2 });
                seg_lo = v;
                if v >= e {
                    break;
                }
                v += 1;
            }
        }
    }
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
    if u32::try_from(entries.len()).is_err() {
        let mut entries = entries;
        entries.sort_by(cmp);
        return entries;
    }
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
    drop(index);
    drop(distinct);
    let rank_of = |id: u32| rank.get(id as usize).copied().unwrap_or(u32::MAX);
    // Common case: no zero-padded range, fewer than 2^31 prefixes.  Then the
    // key fits one u128: (2 * rank + numbered, lo, position).
    let simple = by_name.len() < (1 << 31)
        && entries.iter().all(|e| match e {
            Entry::Range { lo, width, .. } => *width <= digits(*lo),
            _ => true,
        });
    if simple {
        let key = |e: &Entry, id, pos| {
            let (numbered, lo) = match e {
                Entry::Range { lo, .. } => (1u128, *lo),
                _ => (0, 0),
            };
            ((u128::from(rank_of(id)) * 2 + numbered) << 96)
                | (u128::from(lo) << 32)
                | u128::from(pos)
        };
        return sort_by_keys(entries, &ids, key, |&k| (k & 0xffff_ffff) as usize);
    }
    let key = |e: &Entry, id, pos| {
        let (numbered, num) = match e {
            Entry::Range { lo, width, .. } => (true, num_key(*lo, *width)),
            _ => (false, (0, 0, 0, 0)),
        };
        Key {
            rank: rank_of(id),
            numbered,
            num,
            pos,
        }
    };
    sort_by_keys(entries, &ids, key, |k| k.pos as usize)
}

/// `entries` in the order of their keys: `key(entry, prefix id, position)`,
/// whose position `pos_of` reads back.
fn sort_by_keys<K: Ord>(
    entries: Vec<Entry>,
    ids: &[u32],
    key: impl Fn(&Entry, u32, u32) -> K,
    pos_of: impl Fn(&K) -> usize,
) -> Vec<Entry> {
    let mut keys: Vec<K> = (entries.iter().zip(ids).zip(0..))
        .map(|((e, &id), pos)| key(e, id, pos))
        .collect();
    keys.sort_unstable();
    let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    keys.iter()
        .filter_map(|k| slots.get_mut(pos_of(k)).and_then(Option::take))
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
