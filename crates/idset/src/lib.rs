//! RFC 22 idsets.
//!
//! An [`IdSet`] is a set of non-negative integers no larger than [`MAX_ID`]
//! (2^31 - 1, flux-core's universe limit).  It is stored as a sorted vector
//! of disjoint, non-adjacent inclusive ranges, so every operation costs
//! O(number of ranges), never O(number of ids): a million ids in one range
//! take sixteen bytes.
//!
//! Parsing follows flux-core's `idset_decode()` exactly (see
//! `shared/reference/flux-core-resource.md` §7 and `rfcs-fluxion.md` §1):
//!
//! * one optional pair of outer brackets (`[1-3]`); any other bracket is an error;
//! * comma separated elements, `N` or `N-M` with `M > N` strictly;
//! * strictly ascending, non-overlapping elements (`1-3,4` is fine, `3,2` is not);
//! * no leading zeros, signs or white space;
//! * empty elements are skipped (`1,,2`, `,1,`); `""` and `[]` are the empty set;
//! * ids above 2^31 - 1 are rejected (flux-core wraps some of them silently; we do not).
//!
//! The canonical encoding ([`IdSet::encode`], [`std::fmt::Display`]) is
//! flux-core's `IDSET_FLAG_RANGE`: each maximal run of two or more
//! consecutive ids becomes `lo-hi`, single ids stay bare, the empty set is
//! `""`.  [`Format::brackets`] adds the outer brackets only when the set
//! holds more than one id, as `IDSET_FLAG_BRACKETS` does.

use std::cmp::{max, min};
use std::fmt;
use std::str::FromStr;

/// The largest id an idset may hold (flux-core: universe 2^31).
pub const MAX_ID: u32 = 2_147_483_647;

/// Why a string is not a valid idset.  Each variant names the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdSetError {
    /// Brackets other than one outer pair, or an unbalanced one.
    #[error("mismatched or nested brackets in '{input}'")]
    Brackets { input: String },
    /// An element that is not `N` or `N-M` in canonical decimal.
    #[error("error parsing range '{token}'")]
    Parse { token: String },
    /// An element whose low end does not exceed the previous element's high end.
    #[error("range '{token}' is out of order")]
    OutOfOrder { token: String },
    /// A range written `N-M` with `M <= N`.
    #[error("range '{token}' is not ascending (the high end must exceed the low end)")]
    Descending { token: String },
    /// An id above [`MAX_ID`].
    #[error("range '{token}' exceeds the largest id {MAX_ID}")]
    TooLarge { token: String },
}

/// Encoding options, mirroring flux-core's `IDSET_FLAG_RANGE` and `IDSET_FLAG_BRACKETS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// Write runs of consecutive ids as `lo-hi` (otherwise every id is listed).
    pub ranges: bool,
    /// Wrap the result in `[]` when the set holds more than one id.
    pub brackets: bool,
}

impl Format {
    /// `IDSET_FLAG_RANGE`: the form used on the wire (R, RFC 28, RFC 44).
    pub const RANGE: Format = Format {
        ranges: true,
        brackets: false,
    };
    /// `IDSET_FLAG_RANGE | IDSET_FLAG_BRACKETS`: the form used inside hostlists and `--short` output.
    pub const BRACKETED: Format = Format {
        ranges: true,
        brackets: true,
    };
    /// No flags: every id listed.
    pub const LIST: Format = Format {
        ranges: false,
        brackets: false,
    };
}

/// A set of ids in `0..=MAX_ID`, kept as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    ranges: Vec<(u32, u32)>,
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdSet({:?})", self.encode())
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for IdSet {
    type Err = IdSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IdSet::parse(s)
    }
}

fn parse_num(tok: &str, whole: &str) -> Result<u32, IdSetError> {
    let b = tok.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return Err(IdSetError::Parse {
            token: whole.to_string(),
        });
    }
    // Ten digits cover MAX_ID; anything longer is out of range (not a parse error).
    if b.len() > 10 {
        return Err(IdSetError::TooLarge {
            token: whole.to_string(),
        });
    }
    let mut v: u64 = 0;
    for &c in b {
        v = v * 10 + u64::from(c - b'0');
    }
    if v > u64::from(MAX_ID) {
        return Err(IdSetError::TooLarge {
            token: whole.to_string(),
        });
    }
    Ok(v as u32)
}

impl IdSet {
    /// The empty set.
    pub const fn new() -> Self {
        IdSet { ranges: Vec::new() }
    }

    /// The set `lo..=hi` (empty if `lo > hi`).
    ///
    /// # Panics
    /// Never: ids above [`MAX_ID`] are clamped away (the result holds only valid ids).
    pub fn from_range(lo: u32, hi: u32) -> Self {
        let hi = min(hi, MAX_ID);
        if lo > hi {
            return IdSet::new();
        }
        IdSet {
            ranges: vec![(lo, hi)],
        }
    }

    /// Build from already sorted, disjoint inclusive ranges; adjacent ranges are merged.
    /// Returns `None` if the ranges are unsorted, overlapping, inverted or above [`MAX_ID`].
    pub fn from_sorted_ranges<I: IntoIterator<Item = (u32, u32)>>(it: I) -> Option<Self> {
        let mut out = IdSet::new();
        for (lo, hi) in it {
            if lo > hi || hi > MAX_ID {
                return None;
            }
            if let Some(last) = out.ranges.last_mut() {
                if lo <= last.1 {
                    return None;
                }
                if lo == last.1 + 1 {
                    last.1 = hi;
                    continue;
                }
            }
            out.ranges.push((lo, hi));
        }
        Some(out)
    }

    /// Parse an RFC 22 idset with flux-core's rules (see the crate documentation).
    pub fn parse(s: &str) -> Result<Self, IdSetError> {
        let body = match (s.strip_prefix('['), s.strip_suffix(']')) {
            (Some(_), Some(_)) if s.len() >= 2 => &s[1..s.len() - 1],
            (None, None) => s,
            _ => {
                return Err(IdSetError::Brackets {
                    input: s.to_string(),
                })
            }
        };
        if body.contains(['[', ']']) {
            return Err(IdSetError::Brackets {
                input: s.to_string(),
            });
        }
        let mut out: Vec<(u32, u32)> = Vec::new();
        for tok in body.split(',') {
            if tok.is_empty() {
                continue;
            }
            let (lo, hi) = match tok.split_once('-') {
                None => {
                    let v = parse_num(tok, tok)?;
                    (v, v)
                }
                Some((a, b)) => {
                    let lo = parse_num(a, tok)?;
                    let hi = parse_num(b, tok)?;
                    if hi <= lo {
                        return Err(IdSetError::Descending {
                            token: tok.to_string(),
                        });
                    }
                    (lo, hi)
                }
            };
            match out.last_mut() {
                Some(last) if lo <= last.1 => {
                    return Err(IdSetError::OutOfOrder {
                        token: tok.to_string(),
                    })
                }
                Some(last) if lo == last.1 + 1 => last.1 = hi,
                _ => out.push((lo, hi)),
            }
        }
        Ok(IdSet { ranges: out })
    }

    /// Encode in flux-core's RANGE form without brackets (`0-3,5`).
    pub fn encode(&self) -> String {
        self.encode_with(Format::RANGE)
    }

    /// Encode with explicit flags.
    pub fn encode_with(&self, fmt: Format) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(self.ranges.len() * 12 + 2);
        let brackets = fmt.brackets && self.len() > 1;
        if brackets {
            s.push('[');
        }
        let mut first = true;
        for &(lo, hi) in &self.ranges {
            if fmt.ranges {
                if !first {
                    s.push(',');
                }
                first = false;
                push_u32(&mut s, lo);
                if hi > lo {
                    s.push('-');
                    push_u32(&mut s, hi);
                }
            } else {
                for id in lo..=hi {
                    if !first {
                        s.push(',');
                    }
                    first = false;
                    let _ = write!(s, "{id}");
                }
            }
        }
        if brackets {
            s.push(']');
        }
        s
    }

    /// The ranges, sorted, disjoint and non-adjacent, as inclusive `(lo, hi)` pairs.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Number of ranges in the canonical form.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Number of ids.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    /// True if the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Index of the range holding `id`, or the index where it would be inserted.
    fn locate(&self, id: u32) -> Result<usize, usize> {
        let i = self.ranges.partition_point(|&(_, hi)| hi < id);
        if i < self.ranges.len() && self.ranges[i].0 <= id {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// True if `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.locate(id).is_ok()
    }

    /// Smallest id.
    pub fn first(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.0)
    }

    /// Largest id.
    pub fn last(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.1)
    }

    /// Smallest id strictly greater than `id`.
    pub fn next(&self, id: u32) -> Option<u32> {
        let id = id.checked_add(1)?;
        match self.locate(id) {
            Ok(_) => Some(id),
            Err(i) => self.ranges.get(i).map(|r| r.0),
        }
    }

    /// Largest id strictly smaller than `id`.
    pub fn prev(&self, id: u32) -> Option<u32> {
        let id = id.checked_sub(1)?;
        match self.locate(id) {
            Ok(_) => Some(id),
            Err(0) => None,
            Err(i) => Some(self.ranges[i - 1].1),
        }
    }

    /// The `n`th smallest id (0-based).
    pub fn nth(&self, mut n: u64) -> Option<u32> {
        for &(lo, hi) in &self.ranges {
            let len = u64::from(hi - lo) + 1;
            if n < len {
                return Some(lo + n as u32);
            }
            n -= len;
        }
        None
    }

    /// The number of ids smaller than `id`, if `id` is in the set.
    pub fn position(&self, id: u32) -> Option<u64> {
        let i = self.locate(id).ok()?;
        let before: u64 = self.ranges[..i]
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum();
        Some(before + u64::from(id - self.ranges[i].0))
    }

    /// Iterate over the ids in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            ranges: &self.ranges,
            cur: None,
        }
    }

    /// Add one id. Returns false if it was already present (or above [`MAX_ID`]).
    pub fn insert(&mut self, id: u32) -> bool {
        if id > MAX_ID || self.contains(id) {
            return false;
        }
        self.insert_range(id, id);
        true
    }

    /// Add `lo..=hi` (ids above [`MAX_ID`] are ignored).
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        let hi = min(hi, MAX_ID);
        if lo > hi {
            return;
        }
        // Fast path: appending past the end (the common case when building).
        if let Some(last) = self.ranges.last_mut() {
            if lo > last.1.saturating_add(1) || (last.1 == u32::MAX) {
                self.ranges.push((lo, hi));
                return;
            }
            if lo >= last.0 {
                last.1 = max(last.1, hi);
                return;
            }
        } else {
            self.ranges.push((lo, hi));
            return;
        }
        // General case: ranges that overlap or touch [lo, hi] are merged.
        let start = self
            .ranges
            .partition_point(|&(_, h)| h.saturating_add(1) < lo);
        let end = self
            .ranges
            .partition_point(|&(l, _)| l <= hi.saturating_add(1));
        if start == end {
            self.ranges.insert(start, (lo, hi));
        } else {
            let nlo = min(lo, self.ranges[start].0);
            let nhi = max(hi, self.ranges[end - 1].1);
            self.ranges.splice(start..end, std::iter::once((nlo, nhi)));
        }
    }

    /// Remove one id. Returns true if it was present.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.contains(id) {
            return false;
        }
        self.remove_range(id, id);
        true
    }

    /// Remove `lo..=hi`.
    pub fn remove_range(&mut self, lo: u32, hi: u32) {
        if lo > hi || self.ranges.is_empty() {
            return;
        }
        let start = self.ranges.partition_point(|&(_, h)| h < lo);
        let end = self.ranges.partition_point(|&(l, _)| l <= hi);
        if start >= end {
            return;
        }
        let mut keep = Vec::with_capacity(2);
        let (flo, _) = self.ranges[start];
        let (_, lhi) = self.ranges[end - 1];
        if flo < lo {
            keep.push((flo, lo - 1));
        }
        if lhi > hi {
            keep.push((hi + 1, lhi));
        }
        self.ranges.splice(start..end, keep);
    }

    /// Remove every id.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &IdSet) -> IdSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let r = if j >= b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            match out.last_mut() {
                Some(last) if r.0 <= last.1.saturating_add(1) => last.1 = max(last.1, r.1),
                _ => out.push(r),
            }
        }
        IdSet { ranges: out }
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &IdSet) -> IdSet {
        IdSet {
            ranges: overlaps(&self.ranges, &other.ranges).collect(),
        }
    }

    /// `self ∖ other`.
    pub fn difference(&self, other: &IdSet) -> IdSet {
        let b = &other.ranges;
        let mut out = Vec::with_capacity(self.ranges.len());
        let mut j = 0;
        for &(lo, hi) in &self.ranges {
            let mut cur = lo;
            // Skip b ranges entirely below this range (galloping: a
            // few ids against thousands of ranges cost a few searches).
            j = skip(b, j, |r| r.1 < cur);
            let mut k = j;
            let mut done = false;
            while k < b.len() && b[k].0 <= hi {
                if b[k].0 > cur {
                    out.push((cur, b[k].0 - 1));
                }
                if b[k].1 >= hi {
                    done = true;
                    break;
                }
                cur = b[k].1 + 1;
                k += 1;
            }
            if !done {
                out.push((cur, hi));
            }
            j = k;
        }
        IdSet { ranges: out }
    }

    /// `(self ∖ other) ∪ (other ∖ self)`.
    pub fn symmetric_difference(&self, other: &IdSet) -> IdSet {
        self.difference(other).union(&other.difference(self))
    }

    /// True if every id of `self` is in `other`.
    pub fn is_subset(&self, other: &IdSet) -> bool {
        let b = &other.ranges;
        let mut j = 0;
        for &(lo, hi) in &self.ranges {
            while j < b.len() && b[j].1 < lo {
                j += 1;
            }
            if j >= b.len() || b[j].0 > lo || b[j].1 < hi {
                return false;
            }
        }
        true
    }

    /// True if every id of `other` is in `self`.
    pub fn is_superset(&self, other: &IdSet) -> bool {
        other.is_subset(self)
    }

    /// True if the sets share at least one id.
    pub fn intersects(&self, other: &IdSet) -> bool {
        overlaps(&self.ranges, &other.ranges).next().is_some()
    }

    /// True if the sets share no id.
    pub fn is_disjoint(&self, other: &IdSet) -> bool {
        !self.intersects(other)
    }

    /// In-place union.
    pub fn add(&mut self, other: &IdSet) {
        if other.ranges.len() == 1 {
            let (lo, hi) = other.ranges[0];
            self.insert_range(lo, hi);
        } else if !other.is_empty() {
            *self = self.union(other);
        }
    }

    /// In-place difference.
    pub fn subtract(&mut self, other: &IdSet) {
        if other.ranges.len() == 1 {
            let (lo, hi) = other.ranges[0];
            self.remove_range(lo, hi);
        } else if !other.is_empty() && !self.is_empty() {
            *self = self.difference(other);
        }
    }
}

/// The first index at or after `j` whose range is not `below` (`below`
/// holds of a prefix of `ranges[j..]`), found by an exponential search:
/// O(log k) to skip k ranges, and O(1) when there is none to skip.
/// The ranges where two sorted, disjoint range lists overlap, in order.
/// Ranges wholly below the other side's current one meet nothing: they
/// are skipped by galloping ([`skip`]), so that a few ids against
/// thousands of scattered ranges cost a few searches.
fn overlaps<'a>(a: &'a [(u32, u32)], b: &'a [(u32, u32)]) -> impl Iterator<Item = (u32, u32)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        while i < a.len() && j < b.len() {
            j = skip(b, j, |r| r.1 < a[i].0);
            if j >= b.len() {
                break;
            }
            i = skip(a, i, |r| r.1 < b[j].0);
            if i >= a.len() {
                break;
            }
            let (lo, hi) = (max(a[i].0, b[j].0), min(a[i].1, b[j].1));
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
            if lo <= hi {
                return Some((lo, hi));
            }
        }
        None
    })
}

fn skip(ranges: &[(u32, u32)], j: usize, below: impl Fn(&(u32, u32)) -> bool) -> usize {
    if j >= ranges.len() || !below(&ranges[j]) {
        return j;
    }
    // `below(ranges[lo])` holds; the answer is in `lo + 1 ..= end`.
    let (mut lo, mut step) = (j, 1);
    while lo + step < ranges.len() && below(&ranges[lo + step]) {
        lo += step;
        step *= 2;
    }
    let end = min(lo + step, ranges.len());
    lo + 1 + ranges[lo + 1..end].partition_point(below)
}

fn push_u32(s: &mut String, v: u32) {
    // The digits are ASCII.
    s.push_str(std::str::from_utf8(decimal(v.into(), &mut [0; 20])).unwrap_or_default());
}

/// The decimal digits of `v`, written into `buf` without allocating.
pub fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Iterator over the ids of an [`IdSet`], ascending.
#[derive(Clone)]
pub struct Iter<'a> {
    ranges: &'a [(u32, u32)],
    cur: Option<(u32, u32)>,
}

impl Iterator for Iter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        loop {
            if let Some((lo, hi)) = self.cur {
                self.cur = if lo < hi { Some((lo + 1, hi)) } else { None };
                return Some(lo);
            }
            let (first, rest) = self.ranges.split_first()?;
            self.cur = Some(*first);
            self.ranges = rest;
        }
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = u32;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<u32> for IdSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        let mut s = IdSet::new();
        s.extend(iter);
        s
    }
}

impl Extend<u32> for IdSet {
    fn extend<T: IntoIterator<Item = u32>>(&mut self, iter: T) {
        for id in iter {
            self.insert_range(id, id);
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for IdSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for IdSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        IdSet::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
