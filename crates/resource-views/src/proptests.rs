//! Property tests for the formatting engine.

use crate::engine::parse;
use crate::output::tests::Item as Row;
use crate::output::{headings, OutputFormat};
use crate::value::FormatItem;
use proptest::prelude::*;
use pycompat::FixedZone;

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
        let hd = headings(&[("s", "NAME"), ("i", "N")]);
        let rows: Vec<Row> = names.iter().enumerate().map(|(i, s)| Row::new(s, i as i64, 0.0)).collect();
        let mut items: Vec<&dyn FormatItem> = rows.iter().map(|r| r as &dyn FormatItem).collect();
        let mut of = OutputFormat::new("+:{s:<2} {i}", &hd).unwrap_or_else(|e| panic!("{e}"));
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
        let hd = headings(&[("s", "NAME"), ("i", "N")]);
        let rows: Vec<Row> = ns.iter().enumerate().map(|(i, n)| Row::new(&format!("{i:02}"), *n, 0.0)).collect();
        let mut items: Vec<&Row> = rows.iter().collect();
        let mut of = OutputFormat::new("{i}", &hd).unwrap_or_else(|e| panic!("{e}"));
        of.set_sort_keys(if rev { "-i" } else { "i" }).unwrap_or_else(|e| panic!("{e}"));
        of.sort_items(&mut items).unwrap_or_else(|e| panic!("{e}"));
        let mut want: Vec<&Row> = rows.iter().collect();
        if rev {
            want.sort_by_key(|r| std::cmp::Reverse(r.i));
        } else {
            want.sort_by_key(|r| r.i);
        }
        let got: Vec<&str> = items.iter().map(|r| r.s.as_str()).collect();
        let exp: Vec<&str> = want.iter().map(|r| r.s.as_str()).collect();
        prop_assert_eq!(got, exp);
    }
}
