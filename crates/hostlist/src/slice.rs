//! Copying part of a list host by host, and looking at a list range by
//! range, in time proportional to its entries rather than its hosts.

use crate::{digits, Entry, Hostlist};
use std::ops::Range;
use std::sync::Arc;

/// A stretch of a hostlist, as [`Hostlist::for_each_run`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRun<'a> {
    /// The hosts `prefix` followed by each number of `lo..=hi`, zero padded
    /// to `width` digits.  `prefix` does not end with an ASCII digit, so
    /// each host's numeric tail is exactly its padded number.
    Numbered {
        /// Text before the number.
        prefix: &'a str,
        /// First number.
        lo: u64,
        /// Last number.
        hi: u64,
        /// Zero padding.
        width: u32,
    },
    /// One host of any other form.
    Host(String),
}

/// The prefix of a numbered entry whose hosts split back into exactly this
/// prefix and number (the prefix does not end with a digit).
fn plain_prefix(e: &Entry) -> Option<(&Arc<str>, u64, u64, u32)> {
    e.range_parts()
        .filter(|(prefix, ..)| !prefix.as_bytes().last().is_some_and(u8::is_ascii_digit))
}

/// The last number with as many digits as `n`.
fn band_end(n: u64) -> u64 {
    let d = digits(n);
    if d >= 20 {
        u64::MAX
    } else {
        10u64.pow(d) - 1
    }
}

impl Hostlist {
    /// Push the hosts `src[range]` (clipped to `src`) one by one, as
    /// [`Hostlist::push`] of each name would, in O(entries of `src`): the
    /// result has the same grouping as the host-by-host loop, which can
    /// differ from [`Hostlist::append`]'s (a name is split at its numeric
    /// tail: `node1[0-5]` pushes as `node[10-15]`).
    pub fn push_hosts_of(&mut self, src: &Hostlist, range: Range<usize>) {
        let start = range.start as u64;
        let end = (range.end as u64).min(src.count);
        if start >= end {
            return;
        }
        let Some((mut idx, mut k)) = src.locate(start) else {
            return;
        };
        let mut left = end - start;
        let mut name = String::new();
        while left > 0 {
            let Some(e) = src.entries.get(idx) else {
                break;
            };
            let take = (e.count() - k).min(left);
            match plain_prefix(e) {
                Some((prefix, lo, _, width)) => {
                    let first = lo.saturating_add(k);
                    self.push_numbered(prefix, first, first.saturating_add(take - 1), width);
                }
                None => {
                    for j in k..k + take {
                        name.clear();
                        e.push_host(j, &mut name);
                        self.push(&name);
                    }
                }
            }
            left -= take;
            idx += 1;
            k = 0;
        }
    }

    /// Push `prefix` + each of `lo..=hi` padded to `width`.  Within one
    /// digit count, every number merges into the tail exactly when the
    /// first one does (flux-core's width test looks only at the digit
    /// count and padding), and after a first that did not merge all the
    /// others merge into it: so one push of the first and one range for
    /// the rest give the host-by-host result.
    fn push_numbered(&mut self, prefix: &Arc<str>, lo: u64, hi: u64, width: u32) {
        let mut n = lo;
        loop {
            let w = digits(n).max(width);
            let end = band_end(n).min(hi);
            self.append_range_arc(Arc::clone(prefix), n, n, w);
            if end > n {
                self.append_range_arc(Arc::clone(prefix), n + 1, end, w);
            }
            if end >= hi {
                break;
            }
            n = end + 1;
        }
    }

    /// Call `f` for each stretch of the list in order: a numbered range as
    /// one [`HostRun::Numbered`], every other host as a [`HostRun::Host`].
    pub fn for_each_run<'a>(&'a self, mut f: impl FnMut(HostRun<'a>)) {
        for e in &self.entries {
            match plain_prefix(e) {
                Some((prefix, lo, hi, width)) => f(HostRun::Numbered {
                    prefix,
                    lo,
                    hi,
                    width,
                }),
                None => {
                    for k in 0..e.count() {
                        f(HostRun::Host(e.host(k)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `push_hosts_of` is the host-by-host loop, grouping included.
    fn check(src: &str, range: Range<usize>, onto: &str) {
        let Ok(src_hl) = Hostlist::decode(src) else {
            panic!("bad test hostlist {src}");
        };
        let base = Hostlist::decode(onto).unwrap_or_default();
        let mut slow = base.clone();
        for h in src_hl.iter().skip(range.start).take(range.len()) {
            slow.push(&h);
        }
        let mut fast = base;
        fast.push_hosts_of(&src_hl, range.clone());
        assert_eq!(
            (fast.encode(), fast.range_count(), fast.len()),
            (slow.encode(), slow.range_count(), slow.len()),
            "{src} {range:?} onto {onto}"
        );
    }

    #[test]
    fn push_hosts_of_is_the_host_loop() {
        let lists = [
            "sim[0-2000]",
            "node[001-100,7,08-12]",
            "n[8-12],n[08-12],n[098-1000]",
            "node1[0-5],node[16-20]",
            "a,b,c[1-3]x,d9,d[10-11]",
            "x[99999999999999999998-99999999999999999999],18446744073709551615",
            "foo[0-3],foo[0-3]",
            "1,2,3,[4-6]",
        ];
        for src in lists {
            let n = Hostlist::decode(src).map(|h| h.len()).unwrap_or(0);
            for onto in ["", "n7", "n07", "sim5", "node15", "x"] {
                check(src, 0..n, onto);
                for a in [0, 1, 3, n / 2] {
                    for len in [0, 1, 2, 5, n] {
                        check(src, a..(a + len).min(n + 2), onto);
                    }
                }
            }
        }
    }

    #[test]
    fn for_each_run_covers_every_host() {
        let hl = Hostlist::decode("sim[0-131071],a,b[1-2]c,n1[0-1]").unwrap_or_default();
        let mut runs = Vec::new();
        hl.for_each_run(|r| runs.push(r));
        assert_eq!(
            runs,
            vec![
                HostRun::Numbered {
                    prefix: "sim",
                    lo: 0,
                    hi: 131071,
                    width: 1
                },
                HostRun::Host("a".into()),
                HostRun::Host("b1c".into()),
                HostRun::Host("b2c".into()),
                HostRun::Host("n10".into()),
                HostRun::Host("n11".into()),
            ]
        );
    }
}
