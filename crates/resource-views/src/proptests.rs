//! Property tests for the formatting engine.

use crate::engine::parse;
use crate::output::{headings, OutputFormat};
use crate::value::{FieldValue, FormatItem};
use proptest::prelude::*;
use pycompat::FixedZone;

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
