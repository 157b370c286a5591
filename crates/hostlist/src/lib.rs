//! RFC 29 hostlists with flux-core's semantics.
//!
//! A [`Hostlist`] is an ordered list of hostnames (duplicates allowed) kept in
//! the compressed form flux-core's `libhostlist` uses: a sequence of *entries*,
//! each either a numeric range (`prefix`, `lo`..=`hi`, zero-padding `width`), a
//! single host without numeric suffix, or a run of hosts that came from a
//! bracket followed by a suffix (`foo[1-3]-eth0`).  `node[00001-16384]` costs
//! one entry, not 16,384 strings.
//!
//! Behaviour follows flux-core (`src/common/libhostlist/{hostlist,hostrange,
//! hostname,util}.c`), see `shared/reference/flux-core-resource.md` §7.2-7.3
//! and `rfcs-fluxion.md` §2:
//!
//! * **decoding**: separators are comma, space and tab (repeated, leading and
//!   trailing ones ignored); only the first `[...]` of a token is expanded and
//!   anything after its `]` is a literal suffix; each range's zero padding is
//!   the length of its low bound text; numbers are parsed like C `strtoul`
//!   (so `foo[ 1]` is `foo01` and `foo[1x-3]` is `foo[01-03]`); at most
//!   1,048,576 hosts per range and 10,240 ranges per bracket; a bare host whose
//!   numeric tail overflows 64 bits is silently dropped and a bare token is cut
//!   to 1,023 bytes, as flux-core does;
//! * **encoding**: consecutive numeric ranges with the same prefix share one
//!   bracket list, a bracket is written only when the group holds more than
//!   one host, hosts from a suffixed bracket are never recompressed; a group
//!   of more than 10,240 ranges is written as several brackets of at most
//!   10,240 ranges each (`n[0,2,...],n[...]`), so that the decoder (and
//!   flux-core's, whose limit it is) reads every encoded list back, where
//!   flux-core writes one bracket it cannot decode itself;
//! * **appending** merges a range into the tail when the prefix is equal, the
//!   numbers are consecutive and the zero paddings are compatible
//!   (`foo9,foo10` → `foo[9-10]`, `n8,n09` → `n[8,09]`);
//! * [`Hostlist::sort`], [`Hostlist::uniq`], [`Hostlist::find`] and
//!   [`Hostlist::delete`] reproduce flux-core's results exactly, including its
//!   odd sorted form of duplicates (`[0-20],12,15` sorts to `[0-12,12-15,15-20]`).
//!
//! For many lookups in one list, [`Hostlist::finder`] builds an index with
//! the same matching rules.
//!
//! **Untrusted input.** Decoding, [`Hostlist::len`], [`Hostlist::nth`],
//! [`Hostlist::find`], [`Hostlist::uniq`] of numbered ranges and
//! [`Hostlist::encoded_len`] never expand ranges, never panic and use
//! checked arithmetic, so `foo[0-1048575],foo[0-1048575],...` or
//! `foo[18446744073709551615]` are cheap.  Three things are proportional
//! to *hosts* rather than to input size, exactly as in flux-core, because
//! their output is: [`Hostlist::encode`] of hosts from a suffixed bracket
//! (`x[0-1048575]y` encodes to 1M names; check [`Hostlist::encoded_len`]
//! first), [`Hostlist::sort`]/[`Hostlist::uniq`] of such hosts (they are
//! sorted as individual names), and [`Hostlist::sort`] of duplicated
//! numbered hosts (each duplicate becomes its own range in flux-core's
//! sorted form).  Iterating is, of course, per host.
//!
//! Not every list survives `decode(encode(..))`, in flux-core either: a host
//! longer than 1,023 bytes printed without brackets is cut when decoded
//! again, a printed host whose trailing digits exceed 2^64-1 is dropped, and
//! hosts containing `,`, `[`, `]`, space or tab (possible only from odd
//! bracket placement such as `a[1]b[2]`) re-parse differently.
//!
//! Deliberate deviations (all in corner cases flux-core handles by accident):
//! range sizes and merges use checked arithmetic, so `foo[0-18446744073709551615]`
//! is rejected as too large instead of being accepted with a count of 0, and
//! a range ending at 2^64-1 never merges with one starting at 0; counts are
//! 64-bit (flux-core's are `int`); sorting compares numbers exactly where
//! flux-core truncates their difference to `int` (only visible for numbers
//! more than 2^31 apart under the same prefix); hosts produced from a
//! suffixed bracket are not truncated when the numbers are much wider than
//! the first range's (flux-core sizes that buffer from the first range);
//! when sorting, a split that makes a range width-compatible with a
//! zero-padded neighbour sorted after it (`a[8-10],a[00,7-10]`) makes
//! flux-core abort on an assertion, while this crate leaves that pair as it
//! is; deleting a host from a range ending at 2^64-1 never removes the
//! whole range (flux-core treats any range ending there as empty).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

mod decode;
mod find;
mod order;
mod slice;

pub use find::Finder;
pub use slice::HostRun;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// Most hosts one range of a bracket may hold (`foo[0-1048575]` is the largest).
pub const MAX_RANGE_HOSTS: u64 = 1 << 20;
/// Most comma-separated ranges one bracket may hold.
pub const MAX_RANGES_PER_BRACKET: usize = 10_240;
/// flux-core copies a bracket-free token into a 1,024-byte buffer, so longer
/// bare hostnames are cut to this many bytes when decoded.
pub const MAX_BARE_TOKEN_BYTES: usize = 1023;

/// Why a string is not a valid hostlist (or a name not a valid hostname).
///
/// Every message names the offending token.  flux-core reports all of these
/// as `EINVAL` except [`HostlistError::RangeTooLarge`], which is `ERANGE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// A `[` without a later `]`, or a `]` in a token without `[`.
    #[error("invalid hostlist '{}': unmatched bracket", Short(token))]
    UnmatchedBracket { token: String },
    /// A bracket element that is not `N` or `N-M` with `N <= M`.
    #[error(
        "invalid hostlist '{}': invalid range '{}'",
        Short(token),
        Short(range)
    )]
    InvalidRange { token: String, range: String },
    /// A bracket element holding more than [`MAX_RANGE_HOSTS`] hosts.
    #[error(
        "invalid hostlist '{}': range '{}' holds more than 1048576 hosts",
        Short(token),
        Short(range)
    )]
    RangeTooLarge { token: String, range: String },
    /// More than [`MAX_RANGES_PER_BRACKET`] ranges in one bracket.
    #[error(
        "invalid hostlist '{}': more than 10240 ranges in one bracket",
        Short(token)
    )]
    TooManyRanges { token: String },
    /// A hostname (for find/delete) containing `,`, `[`, `]`, space or tab.
    #[error("invalid hostname '{}': it contains ',', '[', ']', a space or a tab", Short(.0))]
    InvalidHostname(String),
}

/// A token as an error message shows it: whole up to 64 bytes, else its
/// first 48 bytes and its length (a bad hostlist may be megabytes long).
struct Short<'a>(&'a str);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= 64 {
            return f.write_str(self.0);
        }
        let mut end = 48;
        while !self.0.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{}...({} bytes)", &self.0[..end], self.0.len())
    }
}

impl HostlistError {
    /// True for the error flux-core reports as `ERANGE` (a range that is too large).
    pub fn is_range_error(&self) -> bool {
        matches!(self, HostlistError::RangeTooLarge { .. })
    }
}

/// Prefix and suffix shared by the hosts of one suffixed bracket (`foo[1-3]-eth0`).
#[derive(Debug, PartialEq, Eq)]
struct Affix {
    prefix: Box<str>,
    suffix: Box<str>,
}

/// One element of the compressed list (flux-core's `struct hostrange`).
#[derive(Debug, Clone)]
enum Entry {
    /// `prefix` followed by each of `lo..=hi`, zero padded to `width` digits.
    Range {
        prefix: Arc<str>,
        lo: u64,
        hi: u64,
        width: u32,
    },
    /// A host without numeric suffix (flux-core's "singlehost").
    Single(Arc<str>),
    /// The hosts `prefix + pad(j) + suffix` for `j` in `lo..=hi`, each of which
    /// behaves exactly like a [`Entry::Single`] (flux-core stores them so).
    Run {
        affix: Arc<Affix>,
        lo: u64,
        hi: u64,
        width: u32,
    },
}

impl Entry {
    /// A numeric range's fields: prefix, lo, hi, width.
    fn range_parts(&self) -> Option<(&Arc<str>, u64, u64, u32)> {
        match self {
            Entry::Range {
                prefix,
                lo,
                hi,
                width,
            } => Some((prefix, *lo, *hi, *width)),
            _ => None,
        }
    }

    fn count(&self) -> u64 {
        match self {
            Entry::Single(_) => 1,
            Entry::Range { lo, hi, .. } | Entry::Run { lo, hi, .. } => {
                hi.saturating_sub(*lo).saturating_add(1)
            }
        }
    }

    /// Append the `k`th host of this entry to `out` (`k < count()`).
    fn push_host(&self, k: u64, out: &mut String) {
        match self {
            Entry::Single(name) => out.push_str(name),
            Entry::Range {
                prefix, lo, width, ..
            } => {
                out.push_str(prefix);
                push_padded(out, lo.saturating_add(k), *width);
            }
            Entry::Run {
                affix, lo, width, ..
            } => {
                out.push_str(&affix.prefix);
                push_padded(out, lo.saturating_add(k), *width);
                out.push_str(&affix.suffix);
            }
        }
    }

    fn host(&self, k: u64) -> String {
        let mut s = String::new();
        self.push_host(k, &mut s);
        s
    }
}

/// Number of decimal digits of `n` (1 for 0), as flux-core's `zero_padded()` counts.
fn digits(n: u64) -> u32 {
    n.checked_ilog10().map_or(1, |d| d + 1)
}

/// Zeros printed before `n` when padded to `width`.
fn pad(n: u64, width: u32) -> u32 {
    width.saturating_sub(digits(n))
}

/// flux-core's `width_equiv()`: can ranges starting at `n` (width `wn`) and `m`
/// (width `wm`) share one zero-padding width?  (flux-core also rewrites one of
/// the widths to the other; that rewrite never changes a printed host nor any
/// later comparison, so it is not reproduced.)
fn width_compatible(n: u64, wn: u32, m: u64, wm: u32) -> bool {
    wn == wm || pad(n, wn) == pad(n, wm) || pad(m, wm) == pad(m, wn)
}

/// Host `k` of `e` as flux-core's `hostrange_host_tostring()` formats it in
/// its 271-byte buffer (see [`Hostlist::nth_flux`]).
fn flux_host(e: &Entry, k: u64) -> Option<Vec<u8>> {
    const BUF: usize = 271;
    let host = e.host(k);
    let prefix_len = match e {
        Entry::Range { prefix, .. } => prefix.len(),
        Entry::Single(_) | Entry::Run { .. } => host.len(),
    };
    if prefix_len >= BUF {
        return None;
    }
    let mut bytes = host.into_bytes();
    bytes.truncate(BUF - 1);
    Some(bytes)
}

/// Decimal digits of `n` into the end of `buf`; returns where they start.
fn format_digits(n: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    let mut v = n;
    loop {
        i -= 1;
        if let Some(slot) = buf.get_mut(i) {
            *slot = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 0 {
            return i;
        }
    }
}

/// Append `n` zero padded to `width` digits.
fn push_padded(out: &mut String, n: u64, width: u32) {
    let mut buf = [0u8; 20];
    let start = format_digits(n, &mut buf);
    let ndigits = (buf.len() - start) as u32;
    for _ in ndigits..width {
        out.push('0');
    }
    for &b in buf.get(start..).unwrap_or(&[]) {
        out.push(char::from(b));
    }
}

/// Append `n` zero padded to `width` digits to a byte buffer.
fn push_padded_bytes(out: &mut Vec<u8>, n: u64, width: u32) {
    let mut buf = [0u8; 20];
    let start = format_digits(n, &mut buf);
    let ndigits = (buf.len() - start) as u32;
    if width > ndigits {
        out.resize(out.len() + (width - ndigits) as usize, b'0');
    }
    out.extend_from_slice(buf.get(start..).unwrap_or(&[]));
}

/// Length of `n` zero padded to `width` digits.
fn padded_len(n: u64, width: u32) -> usize {
    digits(n).max(width) as usize
}

/// An ordered list of hostnames (duplicates allowed), stored compressed.
///
/// Equality compares the expanded lists of hostnames: two hostlists are equal
/// when they hold the same hostnames in the same order, whatever their
/// internal grouping (so `decode("foo[0,1-2]")` equals `decode("foo[0-2]")`).
#[derive(Clone, Default)]
pub struct Hostlist {
    entries: Vec<Entry>,
    count: u64,
}

impl fmt::Debug for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hostlist({:?})", self.encode())
    }
}

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for Hostlist {
    type Err = HostlistError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hostlist::decode(s)
    }
}

impl PartialEq for Hostlist {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.same_hosts(other)
    }
}

impl Eq for Hostlist {}

impl Hostlist {
    /// The empty hostlist.
    pub fn new() -> Self {
        Hostlist::default()
    }

    /// Decode an RFC 29 hostlist string with flux-core's `hostlist_decode()` rules.
    pub fn decode(s: &str) -> Result<Self, HostlistError> {
        let mut hl = Hostlist::new();
        decode::decode_into(&mut hl, s)?;
        Ok(hl)
    }

    /// Encode in flux-core's canonical form (`hostlist_encode()`); `""` when empty.
    /// A group of more than [`MAX_RANGES_PER_BRACKET`] ranges is split into
    /// brackets of at most that many, so [`Hostlist::decode`] accepts every
    /// encoded list (flux-core writes one bracket its own decoder refuses).
    pub fn encode(&self) -> String {
        let mut out = Vec::with_capacity(self.entries.len().saturating_mul(8));
        self.encode_into(&mut out);
        // Only whole strings and ASCII digits were written, so this never fails.
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The exact length in bytes of [`Hostlist::encode`]'s result, computed
    /// without building it (O(entries)).  Useful to bound work on untrusted
    /// input: hosts from a suffixed bracket are written out one by one.
    pub fn encoded_len(&self) -> usize {
        let mut len = 0usize;
        self.walk_groups(|piece| {
            len = len.saturating_add(match piece {
                Piece::Str(s) => s.len(),
                Piece::Char(_) => 1,
                Piece::Num(n, w) => padded_len(n, w),
                Piece::RunHosts(affix, lo, hi, width) => run_encoded_len(affix, lo, hi, width),
            });
        });
        len
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        self.walk_groups(|piece| match piece {
            Piece::Str(s) => out.extend_from_slice(s.as_bytes()),
            Piece::Char(c) => out.push(c),
            Piece::Num(n, w) => push_padded_bytes(out, n, w),
            Piece::RunHosts(affix, lo, hi, width) => {
                let mut j = lo;
                loop {
                    out.extend_from_slice(affix.prefix.as_bytes());
                    push_padded_bytes(out, j, width);
                    out.extend_from_slice(affix.suffix.as_bytes());
                    if j >= hi {
                        break;
                    }
                    out.push(b',');
                    j += 1;
                }
            }
        });
    }

    /// Walk the canonical encoding as pieces (shared by `encode` and `encoded_len`).
    fn walk_groups<'a>(&'a self, mut emit: impl FnMut(Piece<'a>)) {
        let entries = &self.entries;
        let mut i = 0;
        while let Some(first) = entries.get(i) {
            match first {
                Entry::Single(name) => {
                    emit(Piece::Str(name));
                    i += 1;
                }
                Entry::Run {
                    affix,
                    lo,
                    hi,
                    width,
                } => {
                    emit(Piece::RunHosts(affix, *lo, *hi, *width));
                    i += 1;
                }
                Entry::Range { prefix, .. } => {
                    let same_group = |e: Option<&Entry>| matches!(e, Some(Entry::Range { prefix: p, .. }) if same_str(p, prefix));
                    let bracket = first.count() > 1 || same_group(entries.get(i + 1));
                    emit(Piece::Str(prefix));
                    if bracket {
                        emit(Piece::Char(b'['));
                    }
                    let mut in_bracket = 0usize;
                    loop {
                        if let Some(Entry::Range { lo, hi, width, .. }) = entries.get(i) {
                            emit(Piece::Num(*lo, *width));
                            if lo < hi {
                                emit(Piece::Char(b'-'));
                                emit(Piece::Num(*hi, *width));
                            }
                        }
                        i += 1;
                        in_bracket += 1;
                        if !same_group(entries.get(i)) {
                            break;
                        }
                        if in_bracket == MAX_RANGES_PER_BRACKET {
                            // A full bracket: start another one, so that
                            // the decoder (flux-core's too) reads it back.
                            emit(Piece::Str("],"));
                            emit(Piece::Str(prefix));
                            emit(Piece::Char(b'['));
                            in_bracket = 0;
                        } else if bracket {
                            emit(Piece::Char(b','));
                        }
                    }
                    if bracket {
                        emit(Piece::Char(b']'));
                    }
                }
            }
            if i < entries.len() {
                emit(Piece::Char(b','));
            }
        }
    }

    /// Number of hosts (duplicates counted).
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// True if the list holds no host.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of compressed entries (flux-core's "hostranges", except that the
    /// hosts of one suffixed bracket count as one entry until sorted).
    pub fn range_count(&self) -> usize {
        self.entries.len()
    }

    /// Locate host `i`: (entry index, offset in that entry).
    fn locate(&self, i: u64) -> Option<(usize, u64)> {
        if i >= self.count {
            return None;
        }
        let mut rest = i;
        for (idx, e) in self.entries.iter().enumerate() {
            let c = e.count();
            if rest < c {
                return Some((idx, rest));
            }
            rest -= c;
        }
        None
    }

    /// The `i`th hostname (0-based), like `hostlist_nth()`.
    pub fn nth(&self, i: usize) -> Option<String> {
        let (idx, k) = self.locate(u64::try_from(i).ok()?)?;
        self.entries.get(idx).map(|e| e.host(k))
    }

    /// What flux-core's `hostlist_nth()` returns for index `i`: it formats the
    /// host in a 271-byte buffer, so a host whose prefix (the whole name for
    /// hosts without numeric suffix) is 271 bytes or longer yields `Some(None)`
    /// (a NULL return), and a longer numbered host is cut to 270 bytes (the
    /// cut may fall inside a UTF-8 sequence, hence bytes).  `None` when `i` is
    /// out of range.
    pub fn nth_flux(&self, i: usize) -> Option<Option<Vec<u8>>> {
        let (idx, k) = self.locate(u64::try_from(i).ok()?)?;
        self.entries.get(idx).map(|e| flux_host(e, k))
    }

    /// [`Hostlist::nth_flux`] for every index in order, in O(1) per host.
    pub fn iter_flux(&self) -> impl Iterator<Item = Option<Vec<u8>>> + '_ {
        Iter {
            entries: &self.entries,
            idx: 0,
            k: 0,
            remaining: self.count,
            make: flux_host,
        }
    }

    /// Index of the first host matching `host`, with flux-core's width-aware
    /// `hostlist_find()` rules (`i[00-05]` holds `i00` but `i[0-5]` does not,
    /// `f00[7-8]` holds `f007`).  `None` also for a name flux-core rejects
    /// (one containing `,`, `[`, `]`, space or tab): see [`Hostlist::try_find`].
    pub fn find(&self, host: &str) -> Option<usize> {
        self.try_find(host).ok().flatten()
    }

    /// Like [`Hostlist::find`] but reports a name flux-core rejects with
    /// `EINVAL` as [`HostlistError::InvalidHostname`].
    pub fn try_find(&self, host: &str) -> Result<Option<usize>, HostlistError> {
        let q = find::Query::new(host)?;
        Ok(self
            .find_query(&q)
            .map(|(_, _, pos)| usize::try_from(pos).unwrap_or(usize::MAX)))
    }

    /// True if [`Hostlist::find`] finds `host`.
    pub fn contains(&self, host: &str) -> bool {
        self.find(host).is_some()
    }

    /// An index over this list answering [`Hostlist::find`] queries in about
    /// O(log entries) each (worth it for many queries on a long list).
    pub fn finder(&self) -> Finder<'_> {
        Finder::new(&self.entries)
    }

    /// First match of `q`: (entry index, offset in entry, position in list).
    fn find_query(&self, q: &find::Query<'_>) -> Option<(usize, u64, u64)> {
        let mut pos = 0u64;
        for (idx, e) in self.entries.iter().enumerate() {
            if let Some(off) = find::within(e, q) {
                return Some((idx, off, pos.saturating_add(off)));
            }
            pos = pos.saturating_add(e.count());
        }
        None
    }

    /// Iterate over the expanded hostnames in order.
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        Iter {
            entries: &self.entries,
            idx: 0,
            k: 0,
            remaining: self.count,
            make: Entry::host,
        }
    }

    /// Append one hostname, taken literally, merging it into the last range
    /// like flux-core's `hostlist_append()` does for a bare host: `foo12`
    /// after `foo11` extends `foo[...-11]`.  An empty name is ignored.  The
    /// name is not parsed as a hostlist (use [`Hostlist::append_str`] for
    /// that); a name whose numeric tail does not fit in 64 bits is kept as a
    /// host without numeric suffix.
    pub fn push(&mut self, host: &str) {
        if host.is_empty() {
            return;
        }
        match split_numeric_tail(host) {
            Some((prefix, Some(num), width)) => self.append_range(prefix, num, num, width),
            _ => self.push_entry(Entry::Single(Arc::from(host))),
        }
    }

    /// Append every host of `other`, merging at the junction like
    /// `hostlist_append_list()` (each of `other`'s ranges is appended in turn).
    pub fn append(&mut self, other: &Hostlist) {
        for e in &other.entries {
            self.append_entry(e.clone());
        }
    }

    /// flux-core's `hostlist_append(hl, s)`: decode `s` and append the result.
    /// Returns the number of hosts added.
    pub fn append_str(&mut self, s: &str) -> Result<usize, HostlistError> {
        let other = Hostlist::decode(s)?;
        self.append(&other);
        Ok(other.len())
    }

    /// Append one entry, merging a numeric range into the tail when possible.
    fn append_entry(&mut self, e: Entry) {
        match e.range_parts() {
            Some((prefix, lo, hi, width)) => self.append_range_arc(prefix.clone(), lo, hi, width),
            None => self.push_entry(e),
        }
    }

    fn push_entry(&mut self, e: Entry) {
        self.count = self.count.saturating_add(e.count());
        self.entries.push(e);
    }

    /// flux-core's `hostlist_append_range()` for a numeric range given by a
    /// borrowed prefix (allocates the prefix only when it cannot be shared).
    fn append_range(&mut self, prefix: &str, lo: u64, hi: u64, width: u32) {
        let shared = match self.entries.last() {
            Some(Entry::Range { prefix: p, .. }) if &**p == prefix => Some(Arc::clone(p)),
            _ => None,
        };
        let prefix = shared.unwrap_or_else(|| Arc::from(prefix));
        self.append_range_arc(prefix, lo, hi, width);
    }

    fn append_range_arc(&mut self, prefix: Arc<str>, lo: u64, hi: u64, width: u32) {
        let added = hi.saturating_sub(lo).saturating_add(1);
        if let Some(Entry::Range {
            prefix: tp,
            lo: tlo,
            hi: thi,
            width: tw,
        }) = self.entries.last_mut()
        {
            if same_str(tp, &prefix)
                && thi.checked_add(1) == Some(lo)
                && width_compatible(*tlo, *tw, lo, width)
            {
                *thi = hi;
                self.count = self.count.saturating_add(added);
                return;
            }
        }
        self.push_entry(Entry::Range {
            prefix,
            lo,
            hi,
            width,
        });
    }

    /// Remove the first occurrence of each host of `hosts` (decoded as a
    /// hostlist), like `hostlist_delete()`.  Returns how many hosts were removed.
    pub fn delete(&mut self, hosts: &str) -> Result<usize, HostlistError> {
        let del = Hostlist::decode(hosts)?;
        Ok(self.delete_hosts(&del))
    }

    /// Remove the first occurrence of each host of `hosts`, in `hosts`' order.
    /// Hosts that are not found (or that flux-core rejects as hostnames) are
    /// skipped.  Returns how many hosts were removed.
    pub fn delete_hosts(&mut self, hosts: &Hostlist) -> usize {
        let mut n = 0usize;
        for h in hosts.iter() {
            if let Ok(true) = self.remove_first(&h) {
                n += 1;
            }
        }
        n
    }

    /// Remove the first host matching `host` (with [`Hostlist::find`]'s rules).
    /// `Ok(false)` if there is none; an error for a name flux-core rejects.
    pub fn remove_first(&mut self, host: &str) -> Result<bool, HostlistError> {
        let q = find::Query::new(host)?;
        match self.find_query(&q) {
            Some((idx, off, _)) => {
                self.remove_at(idx, off);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Remove the `i`th host.  Returns it, or `None` if `i` is out of range.
    pub fn remove(&mut self, i: usize) -> Option<String> {
        let (idx, k) = self.locate(u64::try_from(i).ok()?)?;
        let host = self.entries.get(idx)?.host(k);
        self.remove_at(idx, k);
        Some(host)
    }

    /// Remove host `k` of entry `idx` (flux-core's `hostlist_remove_at()`).
    fn remove_at(&mut self, idx: usize, k: u64) {
        let Some(e) = self.entries.get_mut(idx) else {
            return;
        };
        let mut split = None;
        let mut now_empty = false;
        match e {
            Entry::Single(_) => now_empty = true,
            Entry::Range { lo, hi, .. } | Entry::Run { lo, hi, .. } => {
                let n = lo.saturating_add(k);
                if *lo >= *hi {
                    now_empty = true;
                } else if n == *lo {
                    *lo += 1;
                } else if n == *hi {
                    *hi -= 1;
                } else {
                    let old_hi = *hi;
                    *hi = n - 1;
                    let mut upper = e.clone();
                    if let Entry::Range { lo, hi, .. } | Entry::Run { lo, hi, .. } = &mut upper {
                        *lo = n + 1;
                        *hi = old_hi;
                    }
                    split = Some(upper);
                }
            }
        }
        if now_empty {
            self.entries.remove(idx);
        } else if let Some(upper) = split {
            self.entries.insert(idx + 1, upper);
        }
        self.count = self.count.saturating_sub(1);
    }

    /// Sort like `hostlist_sort()`: by prefix (a host without numeric suffix
    /// before numbered hosts of the same prefix), then by number, width-aware.
    /// Duplicates are kept and produce flux-core's overlapping ranges
    /// (`foo[0-3],foo[0-3]` → `foo[0,0-1,1-2,2-3,3]`).
    ///
    /// Cost: O(entries · log entries) plus the number of duplicated numbered
    /// hosts (each becomes its own range, as in flux-core) and of hosts from
    /// suffixed brackets (they are expanded to single hosts to be sorted).
    pub fn sort(&mut self) {
        order::sort(self);
    }

    /// Sort and remove duplicates like `hostlist_uniq()`.
    ///
    /// Cost: O(entries · log entries) plus the number of hosts from suffixed
    /// brackets (expanded to single hosts to be sorted).
    pub fn uniq(&mut self) {
        order::uniq(self);
    }

    /// The union `flux hostlist -u A B` computes: `A` then `B`, sorted and
    /// deduplicated.
    pub fn union(&self, other: &Hostlist) -> Hostlist {
        let mut hl = self.clone();
        hl.append(other);
        hl.uniq();
        hl
    }

    /// The intersection `flux hostlist -i A B` computes: the hosts of `self`
    /// that `other` contains (with [`Hostlist::find`]'s rules), sorted and
    /// deduplicated.
    pub fn intersect(&self, other: &Hostlist) -> Hostlist {
        let mut hl = Hostlist::new();
        for h in self.iter() {
            if other.contains(&h) {
                hl.append_host_as_hostlist(&h);
            }
        }
        hl.uniq();
        hl
    }

    /// The hosts of `self` that `other` does not contain, in order, duplicates
    /// kept (`flux hostlist`'s internal `difference`, used by `-X`).
    pub fn difference(&self, other: &Hostlist) -> Hostlist {
        let mut hl = Hostlist::new();
        for h in self.iter() {
            if !other.contains(&h) {
                hl.append_host_as_hostlist(&h);
            }
        }
        hl
    }

    /// What `flux hostlist -m A B` computes: `A` with the first occurrence of
    /// each host of `B` removed (duplicates of `A` beyond those survive).
    pub fn minus(&self, other: &Hostlist) -> Hostlist {
        let mut hl = self.clone();
        hl.delete_hosts(other);
        hl
    }

    /// The symmetric difference `flux hostlist -X A B` computes:
    /// `A - B` then `B - A` (see [`Hostlist::difference`]), sorted and deduplicated.
    pub fn xor(&self, other: &Hostlist) -> Hostlist {
        let mut hl = self.difference(other);
        hl.append(&other.difference(self));
        hl.uniq();
        hl
    }

    /// Append a hostname the way flux's Python bindings do (`Hostlist.append`
    /// decodes its argument); a name that does not decode is kept literally.
    fn append_host_as_hostlist(&mut self, host: &str) {
        match Hostlist::decode(host) {
            Ok(h) => self.append(&h),
            Err(_) => self.push(host),
        }
    }

    /// Compare the expanded host sequences (counts already known equal).
    fn same_hosts(&self, other: &Hostlist) -> bool {
        let (a, b) = (&self.entries, &other.entries);
        let (mut ia, mut ka, mut ib, mut kb) = (0usize, 0u64, 0usize, 0u64);
        let (mut sa, mut sb) = (String::new(), String::new());
        loop {
            let (ea, eb) = match (a.get(ia), b.get(ib)) {
                (Some(x), Some(y)) => (x, y),
                (None, None) => return true,
                _ => return false,
            };
            let (ca, cb) = (ea.count(), eb.count());
            // Fast path: aligned numeric ranges printing the same strings advance in bulk.
            if let (
                Entry::Range {
                    prefix: pa,
                    lo: la,
                    width: wa,
                    ..
                },
                Entry::Range {
                    prefix: pb,
                    lo: lb,
                    width: wb,
                    ..
                },
            ) = (ea, eb)
            {
                let (xa, xb) = (la.saturating_add(ka), lb.saturating_add(kb));
                if same_str(pa, pb) && xa == xb && pad(xa, *wa) == pad(xb, *wb) {
                    let step = (ca - ka).min(cb - kb);
                    ka += step;
                    kb += step;
                    advance(&mut ia, &mut ka, ca);
                    advance(&mut ib, &mut kb, cb);
                    continue;
                }
            }
            sa.clear();
            sb.clear();
            ea.push_host(ka, &mut sa);
            eb.push_host(kb, &mut sb);
            if sa != sb {
                return false;
            }
            ka += 1;
            kb += 1;
            advance(&mut ia, &mut ka, ca);
            advance(&mut ib, &mut kb, cb);
        }
    }
}

fn advance(idx: &mut usize, k: &mut u64, count: u64) {
    if *k >= count {
        *idx += 1;
        *k = 0;
    }
}

/// Pieces of the canonical encoding.
enum Piece<'a> {
    Str(&'a str),
    Char(u8),
    Num(u64, u32),
    /// The hosts of an [`Entry::Run`]: affix, lo, hi, width.
    RunHosts(&'a Affix, u64, u64, u32),
}

/// Encoded length of a run's hosts, comma separated, without building them.
fn run_encoded_len(affix: &Affix, lo: u64, hi: u64, width: u32) -> usize {
    let n = hi.saturating_sub(lo).saturating_add(1);
    let fixed = (affix.prefix.len() + affix.suffix.len() + 1) as u128;
    let mut total: u128 = fixed * u128::from(n);
    // Add the number widths digit-count band by band.
    let mut start = lo;
    loop {
        let d = digits(start);
        let band_end = if d >= 20 {
            u64::MAX
        } else {
            10u64.pow(d).saturating_sub(1)
        };
        let end = band_end.min(hi);
        let k = end - start + 1;
        total += u128::from(k) * u128::from(d.max(width));
        if end >= hi {
            break;
        }
        start = end + 1;
    }
    usize::try_from(total.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// Strings equal, with a pointer-equality fast path for shared prefixes.
fn same_str(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// Split a name into (prefix, numeric tail, tail width), as flux-core's
/// `hostname_create()`: `None` when there is no numeric tail; `Some((_, None, _))`
/// when the tail does not fit in 64 bits.
fn split_numeric_tail(host: &str) -> Option<(&str, Option<u64>, u32)> {
    let bytes = host.as_bytes();
    let ndig = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if ndig == 0 {
        return None;
    }
    let cut = bytes.len() - ndig;
    let prefix = host.get(..cut)?;
    let tail = bytes.get(cut..)?;
    let mut v: u64 = 0;
    let mut ok = true;
    for &b in tail {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(b - b'0')))
        {
            Some(x) => v = x,
            None => {
                ok = false;
                break;
            }
        }
    }
    let width = u32::try_from(ndig).unwrap_or(u32::MAX);
    Some((prefix, ok.then_some(v), width))
}

/// Iterator over the hosts of a list, each produced by `make` (a hostname,
/// or flux-core's buffer-limited form).  `nth` skips whole entries.
struct Iter<'a, T> {
    entries: &'a [Entry],
    idx: usize,
    k: u64,
    remaining: u64,
    make: fn(&Entry, u64) -> T,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        let e = self.entries.get(self.idx)?;
        let host = (self.make)(e, self.k);
        self.k += 1;
        if self.k >= e.count() {
            self.idx += 1;
            self.k = 0;
        }
        self.remaining = self.remaining.saturating_sub(1);
        Some(host)
    }
    fn nth(&mut self, n: usize) -> Option<T> {
        let mut skip = u64::try_from(n).unwrap_or(u64::MAX);
        while let Some(e) = self.entries.get(self.idx) {
            let left = e.count() - self.k;
            if skip < left {
                self.k += skip;
                self.remaining = self.remaining.saturating_sub(skip);
                return self.next();
            }
            skip -= left;
            self.remaining = self.remaining.saturating_sub(left);
            self.idx += 1;
            self.k = 0;
        }
        None
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl<'a> IntoIterator for &'a Hostlist {
    type Item = String;
    type IntoIter = Box<dyn Iterator<Item = String> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl<S: AsRef<str>> FromIterator<S> for Hostlist {
    fn from_iter<T: IntoIterator<Item = S>>(iter: T) -> Self {
        let mut h = Hostlist::new();
        h.extend(iter);
        h
    }
}

impl<S: AsRef<str>> Extend<S> for Hostlist {
    fn extend<T: IntoIterator<Item = S>>(&mut self, iter: T) {
        for s in iter {
            self.push(s.as_ref());
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Hostlist {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.encode())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Hostlist {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Hostlist;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 29 hostlist string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Hostlist, E> {
                Hostlist::decode(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(V)
    }
}
