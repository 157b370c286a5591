//! Unit tests of the drain table and flux-core's drain modes.

use super::*;

fn ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap()
}

/// Drain `targets` (none excluded), which must succeed.
fn drain(t: &mut DrainTable, targets: &str, mode: DrainMode, reason: Option<&str>, now: f64) {
    t.drain(&ids(targets), &IdSet::new(), mode, reason, now)
        .unwrap();
}

/// Rank `r`'s drain (timestamp, reason).
fn entry(t: &DrainTable, r: u32) -> (f64, Option<String>) {
    let d = t.get(r).unwrap();
    (d.timestamp, d.reason.as_deref().map(str::to_string))
}

#[test]
fn strict_drain_errors() {
    let mut t = DrainTable::new(4);
    drain(&mut t, "1", DrainMode::Strict, Some("x"), 10.0);
    // (targets, excluded, reason, the refusal)
    let refused = [
        ("0-1", "", Some("y"), EEXIST, "rank 1 already drained"),
        (
            "0-1",
            "0",
            None,
            EEXIST,
            "ranks 0-1 already drained or excluded",
        ),
        ("0,2", "0,2", None, EINVAL, "ranks 0,2 excluded"),
    ];
    for (targets, excluded, reason, errnum, text) in refused {
        let e = t
            .drain(
                &ids(targets),
                &ids(excluded),
                DrainMode::Strict,
                reason,
                11.0,
            )
            .unwrap_err();
        assert_eq!(
            (e.errnum, e.errstr.as_deref()),
            (errnum, Some(text)),
            "{targets} excluding {excluded:?}"
        );
    }
    // Nothing changed by the failed requests.
    assert_eq!(t.drained(), &ids("1"));
}

#[test]
fn reason_can_be_added_after_reasonless_drain() {
    let mut t = DrainTable::new(4);
    drain(&mut t, "2", DrainMode::Strict, None, 5.0);
    drain(&mut t, "2", DrainMode::Strict, Some("later"), 9.0);
    let d = t.get(2).unwrap();
    assert_eq!((d.timestamp, d.reason.as_deref()), (5.0, Some("later")));
}

#[test]
fn overwrite_levels() {
    let mut t = DrainTable::new(4);
    drain(&mut t, "1", DrainMode::Strict, Some("a"), 1.0);
    // update: already drained with reason: unchanged; rank 0 drained.
    drain(&mut t, "0-1", DrainMode::Update, Some("b"), 2.0);
    assert_eq!(t.get(1).unwrap().reason.as_deref(), Some("a"));
    assert_eq!(t.get(0).unwrap().reason.as_deref(), Some("b"));
    assert_eq!(t.get(0).unwrap().timestamp, 2.0);
    // overwrite: reason replaced, timestamp kept; cleared when none given.
    drain(&mut t, "1", DrainMode::Overwrite, Some("c"), 3.0);
    assert_eq!(entry(&t, 1), (1.0, Some("c".into())));
    drain(&mut t, "1", DrainMode::Overwrite, None, 3.0);
    assert_eq!(t.get(1).unwrap().reason, None);
    // force-overwrite: both replaced.
    drain(&mut t, "1", DrainMode::ForceOverwrite, Some("d"), 4.0);
    assert_eq!(entry(&t, 1), (4.0, Some("d".into())));
    // Modes skip the exclusion check (flux-core's code, against its docs).
    t.drain(&ids("3"), &ids("3"), DrainMode::Update, None, 5.0)
        .unwrap();
    assert!(t.drained().contains(3));
}

#[test]
fn undrain_rules() {
    let mut t = DrainTable::new(4);
    drain(&mut t, "0", DrainMode::Strict, Some("a"), 1.0);
    let e = t.undrain(&ids("0-2"), DrainMode::Strict).unwrap_err();
    assert_eq!(
        (e.errnum, e.errstr.as_deref()),
        (EEXIST, Some("ranks 1-2 not drained"))
    );
    let e = t.undrain(&ids("3"), DrainMode::Strict).unwrap_err();
    assert_eq!(e.errstr.as_deref(), Some("rank 3 not drained"));
    t.undrain(&ids("0-2"), DrainMode::Overwrite).unwrap();
    assert!(t.drained().is_empty());
    assert!(t.get(0).is_none());
    t.undrain(&ids("1"), DrainMode::Update).unwrap();
}

#[test]
fn modes_parse() {
    assert_eq!(
        DrainMode::parse_drain(Some("bogus"))
            .unwrap_err()
            .errstr
            .as_deref(),
        Some("Invalid mode specified")
    );
    assert_eq!(
        DrainMode::parse_undrain(Some("force"))
            .unwrap_err()
            .errstr
            .as_deref(),
        Some("invalid undrain mode 'force' specified")
    );
    assert_eq!(
        DrainMode::parse_drain(Some("force-overwrite"))
            .unwrap()
            .overwrite(),
        2
    );
}

#[test]
fn targets_validation() {
    assert_eq!(
        validate_targets(&IdSet::new(), 4)
            .unwrap_err()
            .errstr
            .as_deref(),
        Some("idset is empty")
    );
    assert_eq!(
        validate_targets(&ids("0-4"), 4)
            .unwrap_err()
            .errstr
            .as_deref(),
        Some("idset is out of range")
    );
    validate_targets(&ids("0-3"), 4).unwrap();
}

/// flux-core's drainset unit test: ranks 0-7 at 1234.0 "test" give one key;
/// a mix gives one key per distinct (timestamp, reason).
#[test]
fn status_grouping() {
    let mut t = DrainTable::new(8);
    drain(&mut t, "0-7", DrainMode::Strict, Some("test"), 1234.0);
    assert_eq!(
        t.status_json(),
        json!({"0-7": {"timestamp": 1234.0, "reason": "test"}})
    );
    let mut t = DrainTable::new(8);
    t.apply_drain(&ids("0,3"), 1234.2, Some("test"), 0);
    t.apply_drain(&ids("1"), 2345.0, Some("test"), 0);
    t.apply_drain(&ids("2"), 1233.6, Some("test1"), 0);
    t.apply_drain(&ids("4"), 1234.0, None, 0);
    assert_eq!(
        t.status_json(),
        json!({
            "0,3": {"timestamp": 1234.0, "reason": "test"},
            "1": {"timestamp": 2345.0, "reason": "test"},
            "2": {"timestamp": 1234.0, "reason": "test1"},
            "4": {"timestamp": 1234.0, "reason": ""}
        })
    );
}

#[test]
fn sparse_table_for_the_largest_rank() {
    // RFC 22's largest id: the table must not be sized by it.
    let top = 2_147_483_646u32;
    let mut t = DrainTable::new(top + 1);
    assert_eq!(t.size, top + 1);
    drain(&mut t, "2147483646", DrainMode::Strict, Some("x"), 5.0);
    assert_eq!(t.get(top).and_then(|d| d.reason.as_deref()), Some("x"));
    assert_eq!(t.groups().len(), 1);
    t.resize(top);
    assert!(t.drained().is_empty() && t.get(top).is_none());
    // A range as wide as the id space costs one run, not 2^31 records.
    let mut t = DrainTable::new(top + 1);
    drain(&mut t, "0-2147483646", DrainMode::Strict, None, 5.0);
    assert_eq!(t.drained().len(), u64::from(top) + 1);
    let e = t
        .check_drain(&ids("7,2147483646"), &IdSet::new())
        .map(|_| ());
    assert_eq!(e, Ok(()), "drained without a reason may be drained again");
    t.apply_drain(&ids("5-9"), 6.0, Some("mid"), 1);
    t.apply_undrain(&ids("1000-2147483000"));
    let e = t.check_drain(&ids("0-20"), &IdSet::new()).unwrap_err();
    assert_eq!(e.to_string(), "ranks 5-9 already drained");
    let g = t.groups();
    assert_eq!(g.len(), 2);
    assert_eq!(g[0].0.encode(), "0-4,10-999,2147483001-2147483646");
    assert_eq!(g[1].0.encode(), "5-9");
    assert_eq!(t.get(7).and_then(|d| d.reason.as_deref()), Some("mid"));
    assert!(t.get(5000).is_none());
}

#[test]
fn runs_split_and_overwrite_like_per_rank_records() {
    // Compare with a per-rank model on a small table.
    let mut t = DrainTable::new(16);
    let mut model: Vec<Option<(f64, Option<String>)>> = vec![None; 16];
    let ops: [(&str, u8, f64, Option<&str>, bool); 8] = [
        ("0-7", 1, 1.0, None, true),
        ("4-11", 0, 2.0, Some("a"), true),
        ("2-5", 2, 3.0, Some("b"), true),
        ("3", 1, 4.0, None, false),
        ("6-13", 1, 5.0, Some("c"), true),
        ("0-15", 0, 6.0, Some("d"), true),
        ("8-9", 1, 7.0, None, false),
        ("9-15", 2, 8.0, None, true),
    ];
    for (set, ow, now, reason, drain) in ops {
        let set = ids(set);
        if drain {
            t.apply_drain(&set, now, reason, ow);
            for r in &set {
                let slot = &mut model[r as usize];
                match slot {
                    Some((_, Some(_))) if ow == 0 => {}
                    Some((ts, why)) => {
                        *why = reason.map(String::from);
                        if ow == 2 {
                            *ts = now;
                        }
                    }
                    None => *slot = Some((now, reason.map(String::from))),
                }
            }
        } else {
            t.apply_undrain(&set);
            for r in &set {
                model[r as usize] = None;
            }
        }
        for (r, m) in model.iter().enumerate() {
            let got = t
                .get(r as u32)
                .map(|d| (d.timestamp, d.reason.as_deref().map(String::from)));
            assert_eq!(got, m.clone(), "rank {r}");
            assert_eq!(t.drained().contains(r as u32), m.is_some());
        }
    }
}

#[test]
fn resize_drops_records() {
    let mut t = DrainTable::new(8);
    t.apply_drain(&ids("2,6"), 1.0, Some("r"), 0);
    t.resize(4);
    assert_eq!(t.drained(), &ids("2"));
    t.resize(8);
    assert!(t.get(6).is_none());
    t.apply_drain(&ids("9"), 1.0, None, 0);
    assert_eq!(t.drained(), &ids("2"));
}
