//! Property tests: codec round trips, algebra against a naive `Vec<String>`
//! model, sort against a literal transcription of flux-core's algorithm,
//! and "never panics" on arbitrary input.

use crate::order;
use crate::{width_compatible, Entry, Hostlist};
use proptest::prelude::*;
use std::collections::HashSet;

// ---------------------------------------------------------------- generators

/// A hostname spec: prefix, optional number with zero padding, optional suffix.
fn host_spec(padding: bool) -> impl Strategy<Value = String> {
    let prefix = prop_oneof![
        Just(String::new()),
        Just("n".to_string()),
        Just("node".to_string()),
        Just("x-".to_string()),
        "[a-c]{1,3}",
    ];
    let width = if padding { 0u32..4 } else { 0u32..1 };
    (prefix, proptest::option::of((0u64..40, width))).prop_map(|(p, num)| match num {
        Some((n, w)) => format!("{p}{n:0w$}", w = w as usize),
        None if p.is_empty() => "h".to_string(),
        None => p,
    })
}

/// A hostlist string made of bare hosts and bracket expressions (possibly
/// with a suffix), duplicates likely.
fn hostlist_string(padding: bool) -> impl Strategy<Value = String> {
    let elem = prop_oneof![
        3 => host_spec(padding),
        2 => (
            prop_oneof![Just(""), Just("n"), Just("node"), Just("a")],
            proptest::collection::vec((0u64..30, 0u64..6, 0u32..3), 1..4),
            prop_oneof![3 => Just(""), 1 => Just("-ib"), 1 => Just("x")],
        )
            .prop_map(move |(p, ranges, sfx)| {
                let items: Vec<String> = ranges
                    .into_iter()
                    .map(|(lo, len, w)| {
                        let w = if padding { w as usize } else { 0 };
                        if len == 0 {
                            format!("{lo:0w$}")
                        } else {
                            format!("{lo:0w$}-{:0w$}", lo + len)
                        }
                    })
                    .collect();
                format!("{p}[{}]{sfx}", items.join(","))
            }),
    ];
    proptest::collection::vec(elem, 0..12).prop_map(|v| v.join(","))
}

fn decode(s: &str) -> Hostlist {
    Hostlist::decode(s).unwrap_or_default()
}

fn names(h: &Hostlist) -> Vec<String> {
    h.iter().collect()
}

/// Model sort key of a "nice" hostname (no leading zeros): prefix, then
/// names without number first, then the number.
fn nice_key(h: &str) -> (Vec<u8>, bool, u64) {
    let b = h.as_bytes();
    let nd = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let (p, d) = b.split_at(b.len() - nd);
    let n = std::str::from_utf8(d)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (p.to_vec(), nd > 0, n)
}

fn model_sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort_by_key(|h| nice_key(h));
    v
}

fn model_uniq(v: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out: Vec<String> = model_sorted(v);
    out.retain(|h| seen.insert(h.clone()));
    out
}

/// Hostlists whose prefixes may end in digits (`f00[7-8]`), for find.
fn digit_prefix_string() -> impl Strategy<Value = String> {
    let pfx = prop_oneof![
        Just(""),
        Just("f"),
        Just("f0"),
        Just("f00"),
        Just("a1"),
        Just("n"),
        Just("x-")
    ];
    let elem = prop_oneof![
        (pfx.clone(), 0u64..40, 0usize..4).prop_map(|(p, n, w)| format!("{p}{n:0w$}")),
        (
            pfx,
            proptest::collection::vec((0u64..30, 0u64..6, 0usize..3), 1..4),
            prop_oneof![4 => Just(""), 1 => Just("-ib")],
        )
            .prop_map(|(p, ranges, sfx)| {
                let items: Vec<String> = ranges
                    .into_iter()
                    .map(|(lo, len, w)| format!("{lo:0w$}-{:0w$}", lo + len))
                    .collect();
                format!("{p}[{}]{sfx}", items.join(","))
            }),
        Just("f".to_string()),
        Just("n1x".to_string()),
    ];
    proptest::collection::vec(elem, 0..14).prop_map(|v| v.join(","))
}

fn query_string() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just(""),
            Just("f"),
            Just("f0"),
            Just("f00"),
            Just("a"),
            Just("a1"),
            Just("n"),
            Just("x-")
        ],
        0u64..40,
        0usize..5,
        prop_oneof![5 => Just(""), 1 => Just("-ib")],
    )
        .prop_map(|(p, n, w, s)| format!("{p}{n:0w$}{s}"))
}

// ---------------------------------------------------------------- literal flux-core sort

fn parts(e: &Entry) -> Option<(&str, u64, u64, u32)> {
    e.range_parts().map(|(p, lo, hi, w)| (&**p, lo, hi, w))
}

/// `hostlist_sort()` transcribed literally: stable sort, then the coalesce
/// scan that restarts from the right end after every split, then collapse.
fn literal_sort(h: &Hostlist) -> String {
    let mut v: Vec<Entry> = Vec::new();
    for e in &h.entries {
        match e {
            Entry::Run { .. } => {
                for k in 0..e.count() {
                    v.push(Entry::Single(e.host(k).into()));
                }
            }
            other => v.push(other.clone()),
        }
    }
    if v.len() > 1 {
        v.sort_by(order::cmp);
        let mut i = v.len() - 1;
        while i > 0 {
            let hit = match (v.get(i - 1).and_then(parts), v.get(i).and_then(parts)) {
                (Some((pp, plo, phi, pw)), Some((np, nlo, nhi, nw)))
                    if pp == np
                        && phi > nlo
                        && plo <= nlo
                        && width_compatible(plo, pw, nlo, nw) =>
                {
                    Some((pp.to_string(), pw, phi, nlo, phi.min(nhi)))
                }
                _ => None,
            };
            if let Some((prefix, pw, phi, dlo, dhi)) = hit {
                if let Some(Entry::Range { hi, lo, .. }) = v.get_mut(i) {
                    if dhi < phi {
                        *hi = phi;
                    }
                    *lo = dhi;
                }
                if let Some(Entry::Range { hi, .. }) = v.get_mut(i - 1) {
                    *hi = dlo;
                }
                let mut j = i;
                for x in dlo..=dhi {
                    let s = || Entry::Range {
                        prefix: prefix.as_str().into(),
                        lo: x,
                        hi: x,
                        width: pw,
                    };
                    if x > dlo {
                        v.insert(j, s());
                        j += 1;
                    }
                    if x < dhi {
                        v.insert(j, s());
                        j += 1;
                    }
                }
                i = v.len();
            }
            i -= 1;
        }
        let mut i = v.len() - 1;
        while i > 0 {
            let merge = match (v.get(i - 1).and_then(parts), v.get(i).and_then(parts)) {
                (Some((pp, plo, phi, pw)), Some((np, nlo, nhi, nw)))
                    if pp == np
                        && phi.checked_add(1) == Some(nlo)
                        && width_compatible(plo, pw, nlo, nw) =>
                {
                    Some(nhi)
                }
                _ => None,
            };
            if let Some(nhi) = merge {
                if let Some(Entry::Range { hi, .. }) = v.get_mut(i - 1) {
                    *hi = nhi;
                }
                v.remove(i);
            }
            i -= 1;
        }
    }
    let mut out = Hostlist::new();
    for e in v {
        out.push_entry(e);
    }
    out.encode()
}

// ---------------------------------------------------------------- properties

proptest! {
    // 256 cases by default; set PROPTEST_CASES for longer runs.
    #![proptest_config(ProptestConfig::default())]

    /// `push_hosts_of` groups hosts exactly as pushing them one by one.
    #[test]
    fn push_hosts_of_is_push_each(
        src in hostlist_string(true),
        onto in hostlist_string(true),
        a in 0usize..40,
        len in 0usize..60,
    ) {
        let src = decode(&src);
        let mut slow = decode(&onto);
        let mut fast = slow.clone();
        for h in src.iter().skip(a).take(len) {
            slow.push(&h);
        }
        fast.push_hosts_of(&src, a..a + len);
        prop_assert_eq!(
            (fast.encode(), fast.range_count(), fast.len()),
            (slow.encode(), slow.range_count(), slow.len())
        );
    }

    #[test]
    fn roundtrip_decode_encode(s in hostlist_string(true)) {
        let h = decode(&s);
        let e = h.encode();
        prop_assert_eq!(e.len(), h.encoded_len());
        let back = Hostlist::decode(&e);
        prop_assert!(back.is_ok(), "re-decoding {:?}", e);
        let back = back.unwrap_or_default();
        prop_assert_eq!(names(&back), names(&h));
        prop_assert_eq!(&back, &h);
        prop_assert_eq!(back.encode(), e.clone());
        // iteration, nth and len agree
        let n = names(&h);
        prop_assert_eq!(n.len(), h.len());
        for (i, name) in n.iter().enumerate() {
            prop_assert_eq!(h.nth(i), Some(name.clone()));
        }
        prop_assert_eq!(h.nth(n.len()), None);
    }

    #[test]
    fn push_builds_the_model(v in proptest::collection::vec(host_spec(true), 0..40)) {
        let h: Hostlist = v.iter().collect();
        prop_assert_eq!(names(&h), v.clone());
        let back = decode(&h.encode());
        prop_assert_eq!(names(&back), v);
    }

    #[test]
    fn sort_matches_literal_flux_algorithm(s in hostlist_string(true)) {
        let h = decode(&s);
        let mut a = h.clone();
        a.sort();
        prop_assert_eq!(a.encode(), literal_sort(&h));
        prop_assert_eq!(a.len(), h.len());
        let mut x = names(&a);
        let mut y = names(&h);
        x.sort();
        y.sort();
        prop_assert_eq!(x, y);
    }

    #[test]
    fn sort_matches_literal_on_heavy_overlaps(
        ranges in proptest::collection::vec((0u64..25, 0u64..12, 0usize..3, 0u8..3), 1..24)
    ) {
        // many overlapping ranges of one prefix, some zero padded
        let s: Vec<String> = ranges
            .iter()
            .map(|&(lo, len, w, p)| {
                let pfx = ["n", "n", "m"][p as usize];
                format!("{pfx}[{lo:0w$}-{:0w$}]", lo + len)
            })
            .collect();
        let h = decode(&s.join(","));
        let mut a = h.clone();
        a.sort();
        prop_assert_eq!(a.encode(), literal_sort(&h));
        prop_assert_eq!(a.len(), h.len());
    }

    #[test]
    fn sort_uniq_match_model(s in hostlist_string(false)) {
        let h = decode(&s);
        let model = names(&h);
        let mut a = h.clone();
        a.sort();
        prop_assert_eq!(names(&a), model_sorted(model.clone()));
        let mut u = h.clone();
        u.uniq();
        prop_assert_eq!(names(&u), model_uniq(model));
        let mut uu = u.clone();
        uu.uniq();
        prop_assert_eq!(uu.encode(), u.encode());
    }

    #[test]
    fn find_delete_match_model(s in hostlist_string(false), q in host_spec(false),
                               dels in proptest::collection::vec(host_spec(false), 0..6)) {
        let h = decode(&s);
        let model = names(&h);
        prop_assert_eq!(h.find(&q), model.iter().position(|x| *x == q));
        let mut d = h.clone();
        let del: Hostlist = dels.iter().collect();
        let n = d.delete_hosts(&del);
        let mut m = model.clone();
        let mut removed = 0;
        for x in &dels {
            if let Some(i) = m.iter().position(|y| y == x) {
                m.remove(i);
                removed += 1;
            }
        }
        prop_assert_eq!(n, removed);
        prop_assert_eq!(d.len(), m.len());
        prop_assert_eq!(names(&d), m);
    }

    #[test]
    fn finder_matches_find(s in digit_prefix_string(),
                           qs in proptest::collection::vec(query_string(), 0..12)) {
        let mut h = decode(&s);
        for round in 0..2 {
            let f = h.finder();
            for q in qs.iter().cloned().chain(names(&h)).chain(["f0000000001".to_string(), "n1x".into(), "".into(), "a b".into()]) {
                prop_assert_eq!(f.try_find(&q), h.try_find(&q), "query {:?} in {:?} (round {})", q, h.encode(), round);
            }
            drop(f);
            // widths no longer padding their lo after deletes
            let first: Vec<String> = names(&h).into_iter().step_by(3).collect();
            for x in first {
                let _ = h.remove_first(&x);
            }
        }
    }

    #[test]
    fn set_ops_match_model(a in hostlist_string(false), b in hostlist_string(false)) {
        let (ha, hb) = (decode(&a), decode(&b));
        let (ma, mb) = (names(&ha), names(&hb));
        let in_b = |x: &String| mb.contains(x);
        let in_a = |x: &String| ma.contains(x);

        let mut ab = ma.clone();
        ab.extend(mb.iter().cloned());
        prop_assert_eq!(names(&ha.union(&hb)), model_uniq(ab));

        let inter: Vec<String> = ma.iter().filter(|x| in_b(x)).cloned().collect();
        prop_assert_eq!(names(&ha.intersect(&hb)), model_uniq(inter));

        let diff: Vec<String> = ma.iter().filter(|x| !in_b(x)).cloned().collect();
        prop_assert_eq!(names(&ha.difference(&hb)), diff.clone());

        let mut x = diff;
        x.extend(mb.iter().filter(|y| !in_a(y)).cloned());
        prop_assert_eq!(names(&ha.xor(&hb)), model_uniq(x));

        let mut m = ma.clone();
        for y in &mb {
            if let Some(i) = m.iter().position(|z| z == y) {
                m.remove(i);
            }
        }
        prop_assert_eq!(names(&ha.minus(&hb)), m);
    }

    #[test]
    fn decode_never_panics(s in "[a-c0-9\\[\\],\\- x+\t]{0,40}") {
        if let Ok(mut h) = Hostlist::decode(&s) {
            let e = h.encode();
            prop_assert_eq!(e.len(), h.encoded_len());
            let _ = h.find("a1");
            let _ = h.nth(0);
            let _ = h.nth(h.len().saturating_sub(1));
            let n = h.len();
            let mut u = h.clone();
            u.uniq();
            prop_assert!(u.len() <= n);
            h.sort();
            prop_assert_eq!(h.len(), n);
            let _ = h.encode();
        }
    }

    #[test]
    fn decode_never_panics_any_unicode(s in "\\PC{0,40}") {
        if let Ok(mut h) = Hostlist::decode(&s) {
            let _ = h.encode();
            h.uniq();
            h.sort();
            let _ = h.find(&s);
        }
    }
}
