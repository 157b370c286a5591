//! Python's textual representations: `repr()` of strings and floats, and
//! `json.dumps` with flux's separators.

use serde_json::Value;
use std::fmt::Write;

/// Code points that are not printable for CPython 3.11's `str.isprintable()`
/// (Unicode 14.0): controls (Cc), format characters (Cf), separators other
/// than the ASCII space (Zs, Zl, Zp), surrogates and private use (Co).
const NOT_PRINTABLE: &[(u32, u32)] = &[
    (0x0000, 0x001f),
    (0x007f, 0x00a0),
    (0x00ad, 0x00ad),
    (0x0600, 0x0605),
    (0x061c, 0x061c),
    (0x06dd, 0x06dd),
    (0x070f, 0x070f),
    (0x0890, 0x0891),
    (0x08e2, 0x08e2),
    (0x1680, 0x1680),
    (0x180e, 0x180e),
    (0x2000, 0x200f),
    (0x2028, 0x202f),
    (0x205f, 0x206f),
    (0x3000, 0x3000),
    (0xd800, 0xf8ff),
    (0xfdd0, 0xfdef),
    (0xfeff, 0xfeff),
    (0xfff9, 0xfffb),
    (0x110bd, 0x110bd),
    (0x110cd, 0x110cd),
    (0x13430, 0x13438),
    (0x1bca0, 0x1bca3),
    (0x1d173, 0x1d17a),
    (0xe0001, 0xe0001),
    (0xe0020, 0xe007f),
    (0xf0000, 0x10ffff),
];

/// Whether Python's `str.isprintable()` treats `c` as printable: the
/// table above plus the noncharacters `U+xxFFFE`/`U+xxFFFF`.  Code points
/// unassigned in Unicode 14.0 (which CPython also escapes) count as
/// printable here: the crate carries no full Unicode database.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    if u & 0xfffe == 0xfffe {
        return false;
    }
    let i = NOT_PRINTABLE.partition_point(|&(_, hi)| hi < u);
    match NOT_PRINTABLE.get(i) {
        Some(&(lo, _)) => u < lo,
        None => true,
    }
}

fn push_escaped(out: &mut String, c: char, ascii_only: bool) {
    let u = c as u32;
    match c {
        '\\' => out.push_str("\\\\"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        _ if (0x20..0x7f).contains(&u) => out.push(c),
        _ if !ascii_only && u >= 0x7f && is_printable(c) => out.push(c),
        _ if u <= 0xff => {
            let _ = write!(out, "\\x{u:02x}");
        }
        _ if u <= 0xffff => {
            let _ = write!(out, "\\u{u:04x}");
        }
        _ => {
            let _ = write!(out, "\\U{u:08x}");
        }
    }
}

fn repr_with(s: &str, ascii_only: bool) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        if c == quote {
            out.push('\\');
            out.push(c);
        } else {
            push_escaped(&mut out, c, ascii_only);
        }
    }
    out.push(quote);
    out
}

/// Python `repr(s)` for a `str`.
pub fn repr_str(s: &str) -> String {
    repr_with(s, false)
}

/// Python `ascii(s)` for a `str`.
pub fn ascii_str(s: &str) -> String {
    repr_with(s, true)
}

/// The shortest round-trip digits of a finite, non-zero `v`, and the
/// decimal exponent of the first digit (`d.ddd × 10^exp`).
pub fn shortest_digits(v: f64) -> (String, i32) {
    split_sci(&format!("{:e}", v.abs()))
}

/// Split Rust's `{:e}` output (`"1.2345e-5"`) into digits and exponent.
pub fn split_sci(s: &str) -> (String, i32) {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let exp = exp.parse::<i32>().unwrap_or(0);
    (digits, exp)
}

/// Render `digits` (significant digits, first digit at 10^exp) in
/// positional notation.
pub fn positional(digits: &str, exp: i32) -> String {
    let nd = digits.len() as i32;
    let decpt = exp + 1;
    if decpt <= 0 {
        let mut s = String::from("0.");
        for _ in 0..(-decpt) {
            s.push('0');
        }
        s.push_str(digits);
        s
    } else if decpt >= nd {
        let mut s = digits.to_string();
        for _ in 0..(decpt - nd) {
            s.push('0');
        }
        s
    } else {
        let (a, b) = digits.split_at(decpt as usize);
        format!("{a}.{b}")
    }
}

/// Python exponent suffix: `e+05`, `e-10`, `e+100`.
pub fn exp_suffix(exp: i32, upper: bool) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{e}{sign}{:02}", exp.unsigned_abs())
}

/// Python `repr(float)` (also `str(float)`).
pub fn float_repr(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let (digits, exp) = shortest_digits(v);
    if (-4..16).contains(&exp) {
        let mut s = positional(&digits, exp);
        if !s.contains('.') {
            s.push_str(".0");
        }
        format!("{sign}{s}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mant = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        format!("{sign}{mant}{}", exp_suffix(exp, false))
    }
}

/// Append a JSON string literal the way Python's `json.dumps` writes it
/// (`ensure_ascii = false`: also what jansson writes, used for JGF).
pub fn json_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python JSON number text for a serde number.
fn json_number(out: &mut String, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        if f.is_nan() {
            out.push_str("NaN");
        } else if f.is_infinite() {
            out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
        } else {
            out.push_str(&float_repr(f));
        }
    }
}

/// Python `json.dumps(v, separators=(item_sep, key_sep), ensure_ascii=...)`
/// (objects keep their key order, as Python dicts do).
pub fn json_dumps(v: &Value, item_sep: &str, key_sep: &str, ensure_ascii: bool) -> String {
    let mut out = String::new();
    dump(&mut out, v, item_sep, key_sep, ensure_ascii);
    out
}

fn dump(out: &mut String, v: &Value, item_sep: &str, key_sep: &str, ensure_ascii: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => json_number(out, n),
        Value::String(s) => json_string(out, s, ensure_ascii),
        Value::Array(a) => {
            out.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                dump(out, e, item_sep, key_sep, ensure_ascii);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, e)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                json_string(out, k, ensure_ascii);
                out.push_str(key_sep);
                dump(out, e, item_sep, key_sep, ensure_ascii);
            }
            out.push('}');
        }
    }
}

/// Python `repr()` of a decoded JSON value (`dict`, `list`, `str`, ...).
pub fn py_repr_json(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.to_string()
            } else if let Some(u) = n.as_u64() {
                u.to_string()
            } else {
                float_repr(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => repr_str(s),
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(py_repr_json).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, e)| format!("{}: {}", repr_str(k), py_repr_json(e)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (1234.567, "1234.567"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e16, "1e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1607544031.1368911, "1607544031.1368911"),
            (1713906350.984611, "1713906350.984611"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(float_repr(*v), *want, "repr({v})");
        }
    }

    #[test]
    fn repr_str_quotes_like_python() {
        for (s, want) in [
            ("abc", "'abc'"),
            ("it's", "\"it's\""),
            ("a'b\"c", "'a\\'b\"c'"),
            ("a\nb\x1b", "'a\\nb\\x1b'"),
            ("✔", "'✔'"),
        ] {
            assert_eq!(repr_str(s), want, "{s:?}");
        }
        assert_eq!(ascii_str("✔"), "'\\u2714'");
    }

    #[test]
    fn json_dumps_like_python() {
        let v: Value = serde_json::from_str(
            r#"{"idset":"1","reason":"a\"b\u00e9\n","n":0,"f":1.0,"l":[1,2]}"#,
        )
        .unwrap_or_default();
        assert_eq!(
            json_dumps(&v, ",", ":", false),
            "{\"idset\":\"1\",\"reason\":\"a\\\"bé\\n\",\"n\":0,\"f\":1.0,\"l\":[1,2]}"
        );
        assert_eq!(
            json_dumps(&v, ", ", ": ", true),
            "{\"idset\": \"1\", \"reason\": \"a\\\"b\\u00e9\\n\", \"n\": 0, \"f\": 1.0, \"l\": [1, 2]}"
        );
        assert_eq!(
            py_repr_json(&v),
            "{'idset': '1', 'reason': 'a\"bé\\n', 'n': 0, 'f': 1.0, 'l': [1, 2]}"
        );
    }
}
