//! Compact JSON text exactly as flux-core writes it with jansson
//! (`json_dumps(o, JSON_COMPACT)`, jansson 2.14 built with its default
//! `dtoa` support):
//!
//! * no white space; object members in insertion order;
//! * strings escape only `"`, `\` and control characters below U+0020
//!   (`\b \f \n \r \t`, others as `\u00XX` with **upper-case** hex); `/`
//!   and non-ASCII text are written as is;
//! * integers in decimal; reals as the shortest text that reads back to the
//!   same double, laid out like jansson: plain notation with at least one
//!   fractional digit (`5.0`, `0.001`, `1733965155.6272159`) when the decimal
//!   exponent is between -4 and 16, else `d.ddde±X` without a `+` sign or
//!   exponent padding (`1e-5`, `1.5e300`).
//!
//! serde_json's own writer differs in the `\u` hex case and in where it
//! switches to exponent notation, hence this module.

use serde_json::{Map, Number, Value};

/// Write `value` as compact JSON (see the module documentation).
pub fn to_compact_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Append `value` as compact JSON to `out`.
pub fn write_value(out: &mut String, value: &Value) {
    // Iterative, so that deeply nested values cannot exhaust the stack.
    enum Step<'a> {
        Value(&'a Value),
        Text(&'static str),
        Key(&'a str),
    }
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Key(k) => {
                write_string(out, k);
                out.push(':');
            }
            Step::Value(v) => match v {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(n) => write_number(out, n),
                Value::String(s) => write_string(out, s),
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Step::Text("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Text(","));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push(Step::Text("}"));
                    let members: Vec<(&String, &Value)> = map.iter().collect();
                    for (i, (k, v)) in members.into_iter().enumerate().rev() {
                        stack.push(Step::Value(v));
                        stack.push(Step::Key(k));
                        if i > 0 {
                            stack.push(Step::Text(","));
                        }
                    }
                }
            },
        }
    }
}

/// Append an object (as compact JSON) to `out`.
pub(crate) fn write_object(out: &mut String, map: &Map<String, Value>) {
    out.push('{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
    } else if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
    } else if let Some(f) = n.as_f64() {
        // serde_json numbers are always finite
        out.push_str(&format_real(f).unwrap_or_else(|| "null".to_string()));
    }
}

/// Append a JSON string literal with jansson's escaping.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A real number as jansson writes it, or `None` for NaN and infinities
/// (which JSON cannot represent).
pub fn format_real(v: f64) -> Option<String> {
    if !v.is_finite() {
        return None;
    }
    // Shortest round-trip digits and decimal exponent, from Rust's formatter:
    // "d.ddddde<X>" where the value is 0.dddddd * 10^(X+1).
    let sci = format!("{:e}", v.abs());
    let (mant, exp) = sci.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let ndigits = i64::try_from(digits.len()).ok()?;
    let mut decpt = exp + 1;

    let mut out = String::new();
    if v.is_sign_negative() {
        out.push('-');
    }
    let use_exp = decpt <= -4 || decpt > 16;
    let mut e = 0;
    if use_exp {
        e = decpt - 1;
        decpt = 1;
    }
    let vstart = if decpt <= 0 { decpt - 1 } else { 0 };
    let vend = if use_exp {
        ndigits.max(decpt)
    } else {
        ndigits.max(decpt + 1)
    };
    let zeros = |n: i64| "0".repeat(usize::try_from(n.max(0)).unwrap_or(0));
    if decpt <= 0 {
        out.push_str(&zeros(decpt - vstart));
        out.push('.');
        out.push_str(&zeros(-decpt));
    } else {
        out.push_str(&zeros(-vstart));
    }
    if 0 < decpt && decpt <= ndigits {
        let split = usize::try_from(decpt).ok()?;
        out.push_str(digits.get(..split)?);
        out.push('.');
        out.push_str(digits.get(split..)?);
    } else {
        out.push_str(&digits);
    }
    if ndigits < decpt {
        out.push_str(&zeros(decpt - ndigits));
        out.push('.');
        out.push_str(&zeros(vend - decpt));
    } else {
        out.push_str(&zeros(vend - ndigits));
    }
    if out.ends_with('.') {
        out.pop();
    }
    if use_exp {
        out.push('e');
        out.push_str(&e.to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn reals_like_jansson() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (5.0, "5.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (0.0001, "0.0001"),
            (0.00001, "1e-5"),
            (0.00012345, "0.00012345"),
            (1.5e-7, "1.5e-7"),
            (123.456, "123.456"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e16"),
            (1.2345678901234568e17, "1.2345678901234568e17"),
            (1e20, "1e20"),
            (1.5e300, "1.5e300"),
            (5e-324, "5e-324"),
            (1733965155.6272159, "1733965155.6272159"),
            (1552593348.073045, "1552593348.073045"),
            (1713906350.984611, "1713906350.984611"),
            (1000.0, "1000.0"),
            (0.1 + 0.2, "0.30000000000000004"),
        ];
        for &(v, want) in cases {
            assert_eq!(format_real(v).as_deref(), Some(want), "{v:e}");
        }
        assert_eq!(format_real(f64::NAN), None);
        assert_eq!(format_real(f64::INFINITY), None);
    }

    #[test]
    fn strings_like_jansson() {
        let mut s = String::new();
        write_string(
            &mut s,
            "a\"b\\c/d\n\t\r\u{8}\u{c}\u{1}\u{1f}\u{7f}é\u{2028}ƒ\0",
        );
        assert_eq!(
            s,
            "\"a\\\"b\\\\c/d\\n\\t\\r\\b\\f\\u0001\\u001F\u{7f}é\u{2028}ƒ\\u0000\""
        );
    }

    #[test]
    fn values_compact_in_insertion_order() {
        let v = json!({"z": 1, "a": [true, false, null, -3, 2.5, {"k": "v"}], "m": {}, "e": []});
        assert_eq!(
            to_compact_string(&v),
            r#"{"z":1,"a":[true,false,null,-3,2.5,{"k":"v"}],"m":{},"e":[]}"#
        );
        assert_eq!(to_compact_string(&json!(u64::MAX)), "18446744073709551615");
        let mut nested = json!(1);
        for _ in 0..100_000 {
            nested = Value::Array(vec![nested]);
        }
        let s = to_compact_string(&nested);
        assert_eq!(s.len(), 200_001);
        // dropping deeply nested values recurses in serde_json; leak the test value
        std::mem::forget(nested);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

        /// Every finite double reads back exactly, and the text has jansson's shape.
        #[test]
        fn reals_round_trip(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let s = format_real(v).unwrap();
            prop_assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits());
            prop_assert!(s.contains('.') || s.contains('e'), "{}", s);
            prop_assert!(!s.contains('+') && !s.contains("e0") && !s.contains("e-0"), "{}", s);
            // agrees with serde_json on the value
            let back: f64 = serde_json::from_str(&s).unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits());
        }
    }
}
