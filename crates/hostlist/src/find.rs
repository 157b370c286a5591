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
