//! Matching a hostname against entries: flux-core's `hostrange_hn_within()`.

use crate::decode::strtoul;
use crate::{digits, width_compatible, Entry, HostlistError};

/// A hostname split like flux-core's `hostname_stack_create()`.
pub(crate) struct Query<'a> {
    name: &'a [u8],
    /// Length of the part before the trailing digits.
    len_prefix: usize,
    /// Value of the trailing digits (saturating like `strtoul`), if any.
    num: Option<u64>,
}

impl<'a> Query<'a> {
    pub(crate) fn new(host: &'a str) -> Result<Self, HostlistError> {
        let name = host.as_bytes();
        if name
            .iter()
            .any(|&b| matches!(b, b',' | b'[' | b']' | b'\t' | b' '))
        {
            return Err(HostlistError::InvalidHostname(host.to_string()));
        }
        let ndig = name.iter().rev().take_while(|b| b.is_ascii_digit()).count();
        let len_prefix = name.len() - ndig;
        let num = (ndig > 0).then(|| strtoul(name.get(len_prefix..).unwrap_or(&[])).0);
        Ok(Query {
            name,
            len_prefix,
            num,
        })
    }
}

/// Offset of `q` within entry `e`, if `e` holds it.
pub(crate) fn within(e: &Entry, q: &Query<'_>) -> Option<u64> {
    match e {
        Entry::Single(name) => (name.as_bytes() == q.name).then_some(0),
        Entry::Run {
            affix,
            lo,
            hi,
            width,
        } => {
            let rest = q.name.strip_prefix(affix.prefix.as_bytes())?;
            let mid = rest.strip_suffix(affix.suffix.as_bytes())?;
            if mid.is_empty() || !mid.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let mut v: u64 = 0;
            for &c in mid {
                v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            }
            let printed = digits(v).max(*width) as usize;
            (v >= *lo && v <= *hi && printed == mid.len()).then(|| v - lo)
        }
        Entry::Range {
            prefix,
            lo,
            hi,
            width,
        } => {
            let mut num = q.num?;
            let pre = prefix.as_bytes();
            let mut lp = q.len_prefix;
            let mut qwidth = q.name.len() - lp;
            loop {
                if pre.len() < lp || pre.get(..lp)? != q.name.get(..lp)? {
                    return None;
                }
                // flux-core's "f00[7-8] holds f007" rule: when the range's prefix
                // ends in digits, move leading digits of the query's number into
                // its prefix, one at a time.
                let shift = lp < pre.len()
                    && qwidth > 1
                    && pre.last().is_some_and(u8::is_ascii_digit)
                    && pre.get(lp) == q.name.get(lp);
                if !shift {
                    break;
                }
                lp += 1;
                qwidth -= 1;
                if qwidth >= 10 {
                    return None;
                }
                num %= 10u64.pow(qwidth as u32);
            }
            let qw = u32::try_from(qwidth).unwrap_or(u32::MAX);
            (pre.len() == lp && num >= *lo && num <= *hi && width_compatible(*lo, *width, num, qw))
                .then(|| num - lo)
        }
    }
}

/// Numbered ranges sharing one prefix, sorted by `lo`, with a running
/// maximum of `hi` to stop interval scans early.
struct PrefixRanges {
    /// (lo, hi, width, entry index)
    items: Vec<(u64, u64, u32, usize)>,
    max_hi: Vec<u64>,
}

/// A lookup structure answering [`crate::Hostlist::find`] for one hostlist
/// in roughly O(log entries) per query instead of O(entries).
///
/// Built by [`crate::Hostlist::finder`]; it borrows the list, so the list
/// cannot change while the finder lives.
pub struct Finder<'a> {
    entries: &'a [Entry],
    /// Position of the first host of each entry.
    starts: Vec<u64>,
    ranges: std::collections::HashMap<&'a str, PrefixRanges>,
    /// First entry holding each single host name.
    singles: std::collections::HashMap<&'a str, usize>,
    /// Entries holding suffixed runs (checked one by one).
    runs: Vec<usize>,
}

impl<'a> Finder<'a> {
    pub(crate) fn new(entries: &'a [Entry]) -> Self {
        let mut starts = Vec::with_capacity(entries.len());
        let mut pos = 0u64;
        let mut ranges: std::collections::HashMap<&'a str, PrefixRanges> =
            std::collections::HashMap::new();
        let mut singles = std::collections::HashMap::new();
        let mut runs = Vec::new();
        for (idx, e) in entries.iter().enumerate() {
            starts.push(pos);
            pos = pos.saturating_add(e.count());
            match e {
                Entry::Range {
                    prefix,
                    lo,
                    hi,
                    width,
                } => ranges
                    .entry(&**prefix)
                    .or_insert_with(|| PrefixRanges {
                        items: Vec::new(),
                        max_hi: Vec::new(),
                    })
                    .items
                    .push((*lo, *hi, *width, idx)),
                Entry::Single(name) => {
                    singles.entry(&**name).or_insert(idx);
                }
                Entry::Run { .. } => runs.push(idx),
            }
        }
        for pr in ranges.values_mut() {
            pr.items.sort_by_key(|&(lo, _, _, idx)| (lo, idx));
            let mut m = 0u64;
            pr.max_hi = pr
                .items
                .iter()
                .map(|&(_, hi, _, _)| {
                    m = m.max(hi);
                    m
                })
                .collect();
        }
        Finder {
            entries,
            starts,
            ranges,
            singles,
            runs,
        }
    }

    /// Same result as [`crate::Hostlist::try_find`] on the indexed list.
    pub fn try_find(&self, host: &str) -> Result<Option<usize>, HostlistError> {
        let q = Query::new(host)?;
        // best match so far: (entry index, offset)
        let mut best: Option<(usize, u64)> = None;
        let mut consider = |idx: usize, off: u64| {
            if best.is_none_or(|(b, _)| idx < b) {
                best = Some((idx, off));
            }
        };
        if let Some(&idx) = self.singles.get(host) {
            consider(idx, 0);
        }
        for &idx in &self.runs {
            if let Some(e) = self.entries.get(idx) {
                if let Some(off) = within(e, &q) {
                    consider(idx, off);
                    break;
                }
            }
        }
        if let Some(num0) = q.num {
            let len = q.name.len();
            let lp0 = q.len_prefix;
            // A range whose prefix is the name cut at `m` can hold the name for
            // m == lp0, or (flux-core's digit-shifting rule) lp0 < m < len when
            // the numeric tail has at most ten digits.
            let last = if len - lp0 <= 10 { len - 1 } else { lp0 };
            for m in lp0..=last {
                let Some(pfx) = q.name.get(..m).and_then(|p| std::str::from_utf8(p).ok()) else {
                    continue;
                };
                let Some(pr) = self.ranges.get(pfx) else {
                    continue;
                };
                let qw = len - m;
                let num = if m == lp0 {
                    num0
                } else {
                    strtoul(q.name.get(m..).unwrap_or(&[])).0
                };
                let qw32 = u32::try_from(qw).unwrap_or(u32::MAX);
                let upto = pr.items.partition_point(|&(lo, _, _, _)| lo <= num);
                for i in (0..upto).rev() {
                    if pr.max_hi.get(i).is_none_or(|&mh| mh < num) {
                        break;
                    }
                    if let Some(&(lo, hi, w, idx)) = pr.items.get(i) {
                        if hi >= num && width_compatible(lo, w, num, qw32) {
                            consider(idx, num - lo);
                        }
                    }
                }
            }
        }
        Ok(best.map(|(idx, off)| {
            let pos = self
                .starts
                .get(idx)
                .copied()
                .unwrap_or(0)
                .saturating_add(off);
            usize::try_from(pos).unwrap_or(usize::MAX)
        }))
    }

    /// Same result as [`crate::Hostlist::find`] on the indexed list.
    pub fn find(&self, host: &str) -> Option<usize> {
        self.try_find(host).ok().flatten()
    }

    /// True if [`Finder::find`] finds `host`.
    pub fn contains(&self, host: &str) -> bool {
        self.find(host).is_some()
    }
}
