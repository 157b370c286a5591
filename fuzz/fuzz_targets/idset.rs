#![no_main]
//! Parse arbitrary text as an idset; whatever parses must re-encode to a
//! string that parses back to the same set, and the algebra must stay sane.
use idset::{Format, IdSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (left, right) = text.split_once('|').unwrap_or((text, ""));
    let Ok(a) = IdSet::parse(left) else { return };
    for fmt in [Format::RANGE, Format::BRACKETED] {
        let again = IdSet::parse(&a.encode_with(fmt)).expect("canonical encoding must parse");
        assert_eq!(again, a);
    }
    if let Ok(b) = IdSet::parse(right) {
        let u = a.union(&b);
        let i = a.intersection(&b);
        let d = a.difference(&b);
        let x = a.symmetric_difference(&b);
        assert_eq!(u.len() + i.len(), a.len() + b.len());
        assert_eq!(d.len() + i.len(), a.len());
        assert_eq!(x.len(), u.len() - i.len());
        assert!(i.is_subset(&a) && i.is_subset(&b));
        assert!(a.is_subset(&u) && b.is_subset(&u));
        if let Some(l) = a.last() {
            assert_eq!(a.nth(a.len() - 1), Some(l));
        }
    }
});
