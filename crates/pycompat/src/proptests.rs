//! Property tests for the format mini-language, float repr, time and width.

use crate::pyfmt::{format_float, format_int, format_str};
use crate::repr::float_repr;
use crate::time::{FixedZone, LocalDateTime};
use crate::width::wcswidth;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn string_padding_width(s in "[a-zA-Z0-9 ✔✗]{0,20}", w in 0usize..30, align in prop::sample::select(vec!['<', '>', '^'])) {
        let out = format_str(&s, &format!("{align}{w}"), "str").unwrap_or_default();
        prop_assert_eq!(out.chars().count(), s.chars().count().max(w));
        prop_assert!(out.contains(s.as_str()));
    }

    #[test]
    fn string_precision_truncates(s in "[a-z]{0,20}", p in 0usize..25) {
        let out = format_str(&s, &format!(".{p}"), "str").unwrap_or_default();
        prop_assert_eq!(out.chars().count(), s.chars().count().min(p));
        prop_assert!(s.starts_with(&out));
    }

    #[test]
    fn float_repr_roundtrips(v in prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO) {
        let r = float_repr(v);
        prop_assert_eq!(r.parse::<f64>().ok(), Some(v));
        prop_assert!(r.contains('.') || r.contains('e'));
    }

    #[test]
    fn fixed_point_matches_rust(v in -1e12f64..1e12, p in 0usize..10) {
        let out = format_float(v, &format!(".{p}f")).unwrap_or_default();
        let want = format!("{:.*}", p, v);
        prop_assert_eq!(out, want);
    }

    #[test]
    fn int_grouping_roundtrips(v in any::<i64>()) {
        let out = format_int(i128::from(v), ",", "int").unwrap_or_default();
        prop_assert_eq!(out.replace(',', "").parse::<i64>().ok(), Some(v));
        let out = format_int(i128::from(v), "_x", "int").unwrap_or_default();
        let neg = out.starts_with('-');
        let digits = out.trim_start_matches('-').replace('_', "");
        let parsed = i128::from_str_radix(&digits, 16).ok().map(|x| if neg { -x } else { x });
        prop_assert_eq!(parsed, Some(i128::from(v)));
    }

    #[test]
    fn ascii_width_is_length(s in "[ -~]{0,30}") {
        prop_assert_eq!(wcswidth(&s), s.len() as i64);
    }

    #[test]
    fn fromtimestamp_matches_whole_seconds(t in -1_000_000_000i64..4_000_000_000) {
        let z = FixedZone::utc();
        let a = LocalDateTime::from_int_timestamp(t, &z).map(|d| d.py_str()).unwrap_or_default();
        let b = LocalDateTime::from_timestamp(t as f64, &z).map(|d| d.py_str()).unwrap_or_default();
        prop_assert_eq!(a, b);
    }
}
