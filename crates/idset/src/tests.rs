use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn p(s: &str) -> IdSet {
    IdSet::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// flux-core's decode → encode table (libidset unit test vectors 1-17).
#[test]
fn upstream_decode_encode_vectors() {
    let cases: &[(&str, Format, &str)] = &[
        ("2", Format::LIST, "2"),
        ("7-9", Format::LIST, "7,8,9"),
        ("1,7-9,16", Format::LIST, "1,7,8,9,16"),
        ("1-3,7-9,14,16", Format::LIST, "1,2,3,7,8,9,14,16"),
        ("", Format::LIST, ""),
        ("1048576", Format::LIST, "1048576"),
        ("[7-9]", Format::LIST, "7,8,9"),
        ("[]", Format::LIST, ""),
        ("[0]", Format::LIST, "0"),
        ("2,3,4,5", Format::RANGE, "2-5"),
        ("1,7-9,14,16", Format::RANGE, "1,7-9,14,16"),
        ("0,1", Format::RANGE, "0-1"),
        ("2", Format::BRACKETED, "2"),
        ("7-9", Format::BRACKETED, "[7-9]"),
        ("2,3,4,5", Format::BRACKETED, "[2-5]"),
        ("", Format::BRACKETED, ""),
        (
            "0-3",
            Format {
                ranges: false,
                brackets: true,
            },
            "[0,1,2,3]",
        ),
        ("1-3,4", Format::RANGE, "1-4"),
        ("1,,2", Format::RANGE, "1-2"),
        (",1,", Format::RANGE, "1"),
        ("[,]", Format::RANGE, ""),
        (",", Format::RANGE, ""),
        ("2147483647", Format::RANGE, "2147483647"),
        ("[1-3,5-6,42]", Format::BRACKETED, "[1-3,5-6,42]"),
    ];
    for (input, fmt, want) in cases {
        assert_eq!(p(input).encode_with(*fmt), *want, "input {input:?}");
    }
}

/// flux-core's invalid inputs (vectors 18-37 plus the probe list in rfcs-fluxion.md §1.4).
#[test]
fn upstream_invalid_vectors() {
    for bad in [
        "4.2",
        "x",
        "1-2x",
        "01,2",
        "00",
        "3,2",
        "3-0",
        "2,2,2,2",
        "[0",
        "0]",
        "[[0]]",
        "[[0,2]",
        "[0,2]]",
        "0,[2",
        "0]2",
        "0-",
        "[0-]",
        "-5",
        "[-5]",
        "2,1,0",
        "0x1",
        "1e3",
        "1,1",
        "1-3,3",
        "2-2",
        "1-2-3",
        "+1",
        " 1",
        "1 ",
        "1, 2",
        "[ 1]",
        "99999999999999999999",
        "2147483648",
        "4294967295",
        "4294967296",
        "[",
        "]",
        "-",
        "1-",
        "-1-2",
    ] {
        assert!(IdSet::parse(bad).is_err(), "{bad:?} should be rejected");
    }
}

#[test]
fn errors_name_the_token() {
    let e = IdSet::parse("1,3,x7").unwrap_err();
    assert_eq!(e.to_string(), "error parsing range 'x7'");
    let e = IdSet::parse("1,5,3-4").unwrap_err();
    assert_eq!(e.to_string(), "range '3-4' is out of order");
    let e = IdSet::parse("0-2147483648").unwrap_err();
    assert!(e.to_string().contains("'0-2147483648'"), "{e}");
    let e = IdSet::parse("[0").unwrap_err();
    assert!(e.to_string().contains("brackets"), "{e}");
    let e = IdSet::parse("5-5").unwrap_err();
    assert!(e.to_string().contains("'5-5'"), "{e}");
}

#[test]
fn upstream_set_operations() {
    assert_eq!(p("0").union(&p("1")).encode(), "0-1");
    assert_eq!(p("0").difference(&p("0")).encode(), "");
    assert_eq!(p("0-1").difference(&p("0")).encode(), "1");
    assert_eq!(p("0-1").intersection(&p("2-3")).encode(), "");
    assert_eq!(p("0-1").intersection(&p("1-2")).encode(), "1");
    let mut a = p("0");
    a.add(&p("1"));
    assert_eq!(a.encode(), "0-1");
    let mut a = p("0,1");
    a.subtract(&p("2"));
    assert_eq!(a.encode(), "0-1");
    let mut a = p("1-4");
    a.add(&p("5-8"));
    assert_eq!(a.len(), 8);
    a.add(&p("1,5"));
    assert_eq!(a.len(), 8);
    let mut a = p("0-5");
    a.subtract(&p("1,5"));
    assert_eq!(a.len(), 4);
    a.subtract(&p(""));
    assert_eq!(a.len(), 4);
    a.subtract(&p("0-100"));
    assert_eq!(a.len(), 0);
}

#[test]
fn navigation() {
    let s = p("1-3,7,10-11");
    assert_eq!(s.first(), Some(1));
    assert_eq!(s.last(), Some(11));
    assert_eq!(s.next(3), Some(7));
    assert_eq!(s.next(0), Some(1));
    assert_eq!(s.next(11), None);
    assert_eq!(s.prev(7), Some(3));
    assert_eq!(s.prev(1), None);
    assert_eq!(s.nth(0), Some(1));
    assert_eq!(s.nth(3), Some(7));
    assert_eq!(s.nth(5), Some(11));
    assert_eq!(s.nth(6), None);
    assert_eq!(s.position(10), Some(4));
    assert_eq!(s.position(4), None);
    assert_eq!(s.len(), 6);
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 2, 3, 7, 10, 11]);
    assert_eq!(IdSet::new().next(u32::MAX), None);
    assert_eq!(p("2147483647").next(2147483646), Some(2147483647));
}

#[test]
fn insert_remove() {
    let mut s = IdSet::new();
    assert!(s.insert(5));
    assert!(!s.insert(5));
    s.insert_range(1, 3);
    s.insert(4);
    assert_eq!(s.encode(), "1-5");
    s.insert_range(8, 9);
    s.insert_range(7, 7);
    assert_eq!(s.encode(), "1-5,7-9");
    s.insert_range(0, 20);
    assert_eq!(s.encode(), "0-20");
    assert!(s.remove(10));
    assert!(!s.remove(10));
    s.remove_range(15, 30);
    assert_eq!(s.encode(), "0-9,11-14");
    s.remove_range(0, 0);
    assert_eq!(s.encode(), "1-9,11-14");
    assert!(!s.insert(MAX_ID + 1));
}

#[test]
fn serde_as_string() {
    let s: IdSet = serde_json::from_str("\"0-3,7\"").unwrap();
    assert_eq!(serde_json::to_string(&s).unwrap(), "\"0-3,7\"");
    assert!(serde_json::from_str::<IdSet>("\"3,2\"").is_err());
}

fn arb_set() -> impl Strategy<Value = BTreeSet<u32>> {
    prop_oneof![
        proptest::collection::btree_set(0u32..200, 0..60),
        proptest::collection::btree_set(0u32..5000, 0..300),
        proptest::collection::btree_set((MAX_ID - 50)..=MAX_ID, 0..20),
    ]
}

fn from_btree(s: &BTreeSet<u32>) -> IdSet {
    s.iter().copied().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_decode_round_trip(s in arb_set()) {
        let set = from_btree(&s);
        for fmt in [Format::RANGE, Format::BRACKETED, Format::LIST] {
            let back = IdSet::parse(&set.encode_with(fmt)).unwrap();
            prop_assert_eq!(&back, &set);
        }
        prop_assert_eq!(set.len(), s.len() as u64);
        prop_assert_eq!(set.iter().collect::<Vec<_>>(), s.iter().copied().collect::<Vec<_>>());
    }

    #[test]
    fn canonical_is_minimal(s in arb_set()) {
        let set = from_btree(&s);
        // No two ranges touch, so the encoding is the unique canonical one.
        for w in set.ranges().windows(2) {
            prop_assert!(w[0].1 + 1 < w[1].0);
        }
    }

    #[test]
    fn algebra_matches_btreeset(a in arb_set(), b in arb_set()) {
        let (x, y) = (from_btree(&a), from_btree(&b));
        let u: BTreeSet<u32> = a.union(&b).copied().collect();
        let i: BTreeSet<u32> = a.intersection(&b).copied().collect();
        let d: BTreeSet<u32> = a.difference(&b).copied().collect();
        let sd: BTreeSet<u32> = a.symmetric_difference(&b).copied().collect();
        prop_assert_eq!(x.union(&y), from_btree(&u));
        prop_assert_eq!(x.intersection(&y), from_btree(&i));
        prop_assert_eq!(x.difference(&y), from_btree(&d));
        prop_assert_eq!(x.symmetric_difference(&y), from_btree(&sd));
        prop_assert_eq!(x.is_subset(&y), a.is_subset(&b));
        prop_assert_eq!(x.intersects(&y), !a.is_disjoint(&b));
        let mut z = x.clone();
        z.add(&y);
        prop_assert_eq!(&z, &from_btree(&u));
        let mut z = x.clone();
        z.subtract(&y);
        prop_assert_eq!(&z, &from_btree(&d));
    }

    #[test]
    fn algebra_laws(a in arb_set(), b in arb_set(), c in arb_set()) {
        let (x, y, z) = (from_btree(&a), from_btree(&b), from_btree(&c));
        prop_assert_eq!(x.union(&y), y.union(&x));
        prop_assert_eq!(x.intersection(&y), y.intersection(&x));
        prop_assert_eq!(x.union(&y.union(&z)), x.union(&y).union(&z));
        prop_assert_eq!(x.intersection(&y.union(&z)), x.intersection(&y).union(&x.intersection(&z)));
        prop_assert_eq!(x.difference(&y).union(&x.intersection(&y)), x.clone());
        prop_assert!(x.difference(&y).is_disjoint(&y));
        prop_assert_eq!(x.symmetric_difference(&y).symmetric_difference(&y), x.clone());
    }

    #[test]
    fn navigation_matches_btreeset(a in arb_set(), probe in 0u32..6000) {
        let x = from_btree(&a);
        prop_assert_eq!(x.contains(probe), a.contains(&probe));
        prop_assert_eq!(x.next(probe), a.range(probe.saturating_add(1)..).next().copied().filter(|_| probe < u32::MAX));
        prop_assert_eq!(x.prev(probe), a.range(..probe).next_back().copied());
        let v: Vec<u32> = a.iter().copied().collect();
        prop_assert_eq!(x.nth(u64::from(probe % 70)), v.get((probe % 70) as usize).copied());
        prop_assert_eq!(x.position(probe), v.iter().position(|&e| e == probe).map(|i| i as u64));
    }

    #[test]
    fn insert_remove_match_btreeset(a in arb_set(), lo in 0u32..5000, len in 0u32..100, rm in any::<bool>()) {
        let mut x = from_btree(&a);
        let mut m = a.clone();
        let hi = lo + len;
        if rm {
            x.remove_range(lo, hi);
            for i in lo..=hi { m.remove(&i); }
        } else {
            x.insert_range(lo, hi);
            m.extend(lo..=hi);
        }
        prop_assert_eq!(x, from_btree(&m));
    }

    #[test]
    fn parse_never_panics(s in "[-\\[\\],0-9x]{0,24}") {
        let _ = IdSet::parse(&s);
    }

    #[test]
    fn parse_accepts_what_flux_accepts(a in arb_set(), extra_commas in any::<bool>()) {
        // Non-canonical but valid: listing every id (optionally with stray empty tokens).
        let list: Vec<String> = a.iter().map(|i| i.to_string()).collect();
        let sep = if extra_commas { ",," } else { "," };
        let s = list.join(sep);
        prop_assert_eq!(IdSet::parse(&s).unwrap(), from_btree(&a));
    }
}
