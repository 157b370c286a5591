//! Property tests for the formatting engine.

use crate::engine::parse;
use crate::output::{headings, OutputFormat};
use crate::pyfmt::{format_float, format_int, format_str};
use crate::pyrepr::float_repr;
use crate::time::{FixedZone, LocalDateTime};
use crate::value::{FieldValue, FormatItem};
use crate::width::wcswidth;
use proptest::prelude::*;

struct Row {
    name: String,
    n: i64,
}

impl FormatItem for Row {
    fn class_path(&self) -> String {
        "__main__.Row".into()
    }
    fn attr(&self, name: &str) -> Option<FieldValue> {
        match name {
            "name" => Some(FieldValue::Str(self.name.clone())),
            "n" => Some(FieldValue::Int(self.n)),
            _ => None,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn parse_never_panics_and_keeps_plain_text(s in "\\PC{0,40}") {
        let r = parse(&s);
        if !s.contains('{') && !s.contains('}') {
            let chunks = r.unwrap_or_default();
            let text: String = chunks.iter().map(|c| c.literal.clone()).collect();
            prop_assert_eq!(text, s);
        }
    }

    #[test]
    fn escaped_braces_parse_to_literals(a in "[a-z ]{0,8}", b in "[a-z ]{0,8}") {
        let fmt = format!("{a}{{{{{b}}}}}");
        let chunks = parse(&fmt).unwrap_or_default();
        let text: String = chunks.iter().map(|c| c.literal.clone()).collect();
        prop_assert_eq!(text, format!("{a}{{{b}}}"));
        prop_assert!(chunks.iter().all(|c| c.field.is_none()));
    }

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

    #[test]
    fn maxwidth_columns_align(names in prop::collection::vec("[a-z]{0,12}", 1..8)) {
        let hd = headings(&[("name", "NAME"), ("n", "N")]);
        let rows: Vec<Row> = names.iter().enumerate().map(|(i, s)| Row { name: s.clone(), n: i as i64 }).collect();
        let mut items: Vec<&dyn FormatItem> = rows.iter().map(|r| r as &dyn FormatItem).collect();
        let mut of = OutputFormat::new("+:{name:<2} {n}", &hd).unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        of.print_items(&mut items, false, &FixedZone::utc(), &mut out).unwrap_or_else(|e| panic!("{e}"));
        let width = names.iter().map(|s| s.len()).max().unwrap_or(0).max(4);
        for (line, i) in out.lines().zip(0..) {
            // every line has the number column right after the widened name column
            let col = line.chars().nth(width + 1);
            if i == 0 {
                prop_assert_eq!(col, Some('N'));
            } else {
                prop_assert!(col.is_some_and(|c| c.is_ascii_digit()), "{line:?}");
            }
        }
    }

    #[test]
    fn sort_is_stable_and_ordered(ns in prop::collection::vec(0i64..5, 0..20), rev in any::<bool>()) {
        let hd = headings(&[("name", "NAME"), ("n", "N")]);
        let rows: Vec<Row> = ns.iter().enumerate().map(|(i, n)| Row { name: format!("{i:02}"), n: *n }).collect();
        let mut items: Vec<&Row> = rows.iter().collect();
        let mut of = OutputFormat::new("{n}", &hd).unwrap_or_else(|e| panic!("{e}"));
        of.set_sort_keys(if rev { "-n" } else { "n" }).unwrap_or_else(|e| panic!("{e}"));
        of.sort_items(&mut items).unwrap_or_else(|e| panic!("{e}"));
        let mut want: Vec<&Row> = rows.iter().collect();
        if rev {
            want.sort_by_key(|r| std::cmp::Reverse(r.n));
        } else {
            want.sort_by_key(|r| r.n);
        }
        let got: Vec<&str> = items.iter().map(|r| r.name.as_str()).collect();
        let exp: Vec<&str> = want.iter().map(|r| r.name.as_str()).collect();
        prop_assert_eq!(got, exp);
    }
}
