//! Python's format specification mini-language (`format(value, spec)`),
//! following CPython 3.10+ (`Python/formatter_unicode.c`): parsing, the
//! error messages, and the rendering of `str`, `int` and `float` values.

use crate::error::{PyError, PyResult};
use crate::repr::{exp_suffix, float_repr, positional, shortest_digits, split_sci};

/// A parsed standard format specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdSpec {
    pub fill: char,
    pub align: char,
    pub sign: Option<char>,
    pub no_neg_0: bool,
    pub alternate: bool,
    pub width: Option<usize>,
    /// `,` or `_` (and `U` internally for "underscore every four").
    pub grouping: Option<char>,
    pub precision: Option<usize>,
    /// The presentation type (`'\0'` when omitted for floats).
    pub ty: char,
}

fn is_align(c: char) -> bool {
    matches!(c, '<' | '>' | '=' | '^')
}

fn get_integer(chars: &[char], pos: &mut usize) -> PyResult<Option<usize>> {
    let start = *pos;
    let mut v: usize = 0;
    while *pos < chars.len() {
        let Some(d) = chars[*pos].to_digit(10) else {
            break;
        };
        v = v
            .checked_mul(10)
            .and_then(|x| x.checked_add(d as usize))
            .filter(|x| *x <= isize::MAX as usize)
            .ok_or_else(|| PyError::value("Too many decimal digits in format string"))?;
        *pos += 1;
    }
    Ok(if *pos == start { None } else { Some(v) })
}

/// Parse `spec` for an object of Python type `type_name`, whose default
/// alignment is `default_align` and default presentation type `default_type`.
pub fn parse_spec(
    spec: &str,
    type_name: &str,
    default_align: char,
    default_type: char,
) -> PyResult<StdSpec> {
    let chars: Vec<char> = spec.chars().collect();
    let end = chars.len();
    let mut pos = 0;
    let mut out = StdSpec {
        fill: ' ',
        align: default_align,
        sign: None,
        no_neg_0: false,
        alternate: false,
        width: None,
        grouping: None,
        precision: None,
        ty: default_type,
    };
    let mut fill_specified = false;
    let mut align_specified = false;
    if end >= 2 && is_align(chars[1]) {
        out.align = chars[1];
        out.fill = chars[0];
        fill_specified = true;
        align_specified = true;
        pos = 2;
    } else if end >= 1 && is_align(chars[0]) {
        out.align = chars[0];
        align_specified = true;
        pos = 1;
    }
    if pos < end && matches!(chars[pos], '+' | '-' | ' ') {
        out.sign = Some(chars[pos]);
        pos += 1;
    }
    if pos < end && chars[pos] == 'z' {
        out.no_neg_0 = true;
        pos += 1;
    }
    if pos < end && chars[pos] == '#' {
        out.alternate = true;
        pos += 1;
    }
    if !fill_specified && pos < end && chars[pos] == '0' {
        out.fill = '0';
        if !align_specified && default_align == '>' {
            out.align = '=';
        }
        pos += 1;
    }
    out.width = get_integer(&chars, &mut pos)?;
    if pos < end && chars[pos] == ',' {
        out.grouping = Some(',');
        pos += 1;
    }
    if pos < end && chars[pos] == '_' {
        if out.grouping.is_some() {
            return Err(PyError::value("Cannot specify both ',' and '_'."));
        }
        out.grouping = Some('_');
        pos += 1;
    }
    if pos < end && chars[pos] == ',' && out.grouping == Some('_') {
        return Err(PyError::value("Cannot specify both ',' and '_'."));
    }
    if pos < end && chars[pos] == '.' {
        pos += 1;
        match get_integer(&chars, &mut pos)? {
            Some(p) => out.precision = Some(p),
            None => return Err(PyError::value("Format specifier missing precision")),
        }
    }
    if end - pos > 1 {
        return Err(PyError::Value(format!(
            "Invalid format specifier '{spec}' for object of type '{type_name}'"
        )));
    }
    if end - pos == 1 {
        out.ty = chars[pos];
    }
    if let Some(g) = out.grouping {
        match out.ty {
            'd' | 'e' | 'f' | 'g' | 'E' | 'G' | '%' | 'F' | '\0' => {}
            'b' | 'o' | 'x' | 'X' if g == '_' => out.grouping = Some('U'),
            t => {
                return Err(PyError::Value(format!(
                    "Cannot specify '{g}' with {}.",
                    code_repr(t)
                )))
            }
        }
    }
    Ok(out)
}

fn code_repr(t: char) -> String {
    let u = t as u32;
    if u > 32 && u < 128 {
        format!("'{t}'")
    } else {
        format!("'\\x{u:x}'")
    }
}

fn unknown_code(t: char, type_name: &str) -> PyError {
    let u = t as u32;
    if u > 32 && u < 128 {
        PyError::Value(format!(
            "Unknown format code '{t}' for object of type '{type_name}'"
        ))
    } else {
        PyError::Value(format!(
            "Unknown format code '\\x{u:x}' for object of type '{type_name}'"
        ))
    }
}

/// Pad `body` (already containing any sign) to the spec width.
fn pad(body: &str, spec: &StdSpec, align: char) -> String {
    let len = body.chars().count();
    let width = spec.width.unwrap_or(0);
    if width <= len {
        return body.to_string();
    }
    let total = width - len;
    let (left, right) = match align {
        '>' => (total, 0),
        '^' => (total / 2, total - total / 2),
        _ => (0, total),
    };
    let mut s = String::with_capacity(body.len() + total);
    for _ in 0..left {
        s.push(spec.fill);
    }
    s.push_str(body);
    for _ in 0..right {
        s.push(spec.fill);
    }
    s
}

/// The first of `checks` that holds, as Python's "WHAT not allowed
/// WHERE" error.
fn refuse_any(place: &str, checks: &[(bool, &str)]) -> PyResult<()> {
    match checks.iter().find(|(bad, _)| *bad) {
        Some((_, what)) => Err(PyError::value(format!("{what} not allowed {place}"))),
        None => Ok(()),
    }
}

/// Python `format(s, spec)` for a `str` (`type_name` is used in messages).
pub fn format_str(s: &str, spec: &str, type_name: &str) -> PyResult<String> {
    if spec.is_empty() {
        return Ok(s.to_string());
    }
    let p = parse_spec(spec, type_name, '<', 's')?;
    if p.ty != 's' {
        return Err(unknown_code(p.ty, type_name));
    }
    refuse_any(
        "in string format specifier",
        &[
            (p.sign == Some(' '), "Space"),
            (p.sign.is_some(), "Sign"),
            (p.no_neg_0, "Negative zero coercion (z)"),
            (p.alternate, "Alternate form (#)"),
            (p.align == '=', "'=' alignment"),
        ],
    )?;
    let body: String = match p.precision {
        Some(n) => s.chars().take(n).collect(),
        None => s.to_string(),
    };
    Ok(pad(&body, &p, p.align))
}

/// Insert group separators into a digit string.
#[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87 (MSRV 1.80)
fn group_digits(digits: &str, sep: char, every: usize) -> String {
    let chars: Vec<char> = digits.chars().collect();
    let n = chars.len();
    let mut out = String::with_capacity(n + n / every);
    for (i, c) in chars.iter().enumerate() {
        if i > 0 && (n - i) % every == 0 {
            out.push(sep);
        }
        out.push(*c);
    }
    out
}

/// Assemble a number: `sign`, `prefix` (e.g. `0x`), integer `digits`
/// (grouped as requested), then `rest` (fraction, exponent, `%`).
fn finish_number(sign: &str, prefix: &str, digits: &str, rest: &str, spec: &StdSpec) -> String {
    let (sep, every) = match spec.grouping {
        Some(',') => (Some(','), 3),
        Some('_') => (Some('_'), 3),
        Some('U') => (Some('_'), 4),
        _ => (None, 3),
    };
    let width = spec.width.unwrap_or(0);
    let grouped = match sep {
        Some(sep) => {
            if spec.align == '=' && spec.fill == '0' {
                let fixed = sign.chars().count() + prefix.chars().count() + rest.chars().count();
                let min = width.saturating_sub(fixed);
                let mut d = digits.to_string();
                let mut g = group_digits(&d, sep, every);
                while g.chars().count() < min {
                    d.insert(0, '0');
                    g = group_digits(&d, sep, every);
                }
                g
            } else {
                group_digits(digits, sep, every)
            }
        }
        None => digits.to_string(),
    };
    let len = sign.chars().count()
        + prefix.chars().count()
        + grouped.chars().count()
        + rest.chars().count();
    if spec.align == '=' {
        let mut s = String::new();
        s.push_str(sign);
        s.push_str(prefix);
        for _ in len..width {
            s.push(spec.fill);
        }
        s.push_str(&grouped);
        s.push_str(rest);
        s
    } else {
        let body = format!("{sign}{prefix}{grouped}{rest}");
        pad(&body, spec, spec.align)
    }
}

fn sign_str(negative: bool, spec: &StdSpec) -> &'static str {
    if negative {
        "-"
    } else {
        match spec.sign {
            Some('+') => "+",
            Some(' ') => " ",
            _ => "",
        }
    }
}

/// Python `format(v, spec)` for an `int` (`type_name` is `int` or `bool`).
pub fn format_int(v: i128, spec: &str, type_name: &str) -> PyResult<String> {
    if spec.is_empty() {
        return Ok(v.to_string());
    }
    let p = parse_spec(spec, type_name, '>', 'd')?;
    match p.ty {
        'b' | 'c' | 'd' | 'o' | 'x' | 'X' | 'n' => {}
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | '%' => return format_float_parsed(v as f64, &p),
        t => return Err(unknown_code(t, type_name)),
    }
    refuse_any(
        "in integer format specifier",
        &[
            (p.precision.is_some(), "Precision"),
            (p.no_neg_0, "Negative zero coercion (z)"),
        ],
    )?;
    if p.ty == 'c' {
        refuse_any(
            "with integer format specifier 'c'",
            &[
                (p.sign.is_some(), "Sign"),
                (p.alternate, "Alternate form (#)"),
            ],
        )?;
        let c = u32::try_from(v)
            .ok()
            .filter(|u| *u <= 0x10ffff)
            .and_then(char::from_u32)
            .ok_or_else(|| PyError::Overflow("%c arg not in range(0x110000)".into()))?;
        return Ok(finish_number("", "", &c.to_string(), "", &p));
    }
    let neg = v < 0;
    let a = v.unsigned_abs();
    let (digits, prefix) = match p.ty {
        'b' => (format!("{a:b}"), "0b"),
        'o' => (format!("{a:o}"), "0o"),
        'x' => (format!("{a:x}"), "0x"),
        'X' => (format!("{a:X}"), "0X"),
        _ => (a.to_string(), ""),
    };
    let prefix = if p.alternate { prefix } else { "" };
    Ok(finish_number(sign_str(neg, &p), prefix, &digits, "", &p))
}

/// Python `format(v, spec)` for a `float`.
pub fn format_float(v: f64, spec: &str) -> PyResult<String> {
    if spec.is_empty() {
        return Ok(float_repr(v));
    }
    let p = parse_spec(spec, "float", '>', '\0')?;
    match p.ty {
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 'n' | '%' | '\0' => format_float_parsed(v, &p),
        t => Err(unknown_code(t, "float")),
    }
}

/// Digits of `|v|` rounded to `prec` significant digits: (digits, exp).
fn sig_digits(a: f64, prec: usize) -> (String, i32) {
    split_sci(&format!("{:.*e}", prec.saturating_sub(1), a))
}

fn strip_trailing_zeros(s: &str) -> String {
    if !s.contains('.') {
        return s.to_string();
    }
    let t = s.trim_end_matches('0');
    t.trim_end_matches('.').to_string()
}

/// `%g`-style rendering of finite, non-negative `a` (CPython rules).
fn format_g(a: f64, prec: usize, alt: bool, upper: bool) -> String {
    let prec = prec.max(1);
    if a == 0.0 {
        return if alt {
            let mut s = String::from("0.");
            for _ in 1..prec {
                s.push('0');
            }
            s
        } else {
            "0".into()
        };
    }
    let (digits, exp) = sig_digits(a, prec);
    let decpt = exp + 1;
    if decpt <= -4 || decpt > prec as i32 {
        let (first, rest) = digits.split_at(1);
        let mut mant = if rest.is_empty() && !alt {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        if !alt {
            mant = strip_trailing_zeros(&mant);
        }
        format!("{mant}{}", exp_suffix(exp, upper))
    } else {
        let s = positional(&digits, exp);
        if alt {
            if s.contains('.') {
                s
            } else {
                format!("{s}.")
            }
        } else {
            strip_trailing_zeros(&s)
        }
    }
}

fn format_float_parsed(v: f64, p: &StdSpec) -> PyResult<String> {
    let mut ty = p.ty;
    let mut add_dot_0 = false;
    let mut prec = p.precision;
    let mut val = v;
    let mut pct = false;
    if ty == '\0' {
        add_dot_0 = true;
        ty = if prec.is_some() { 'g' } else { 'r' };
    }
    if ty == 'n' {
        ty = 'g';
    }
    if ty == '%' {
        ty = 'f';
        val *= 100.0;
        pct = true;
    }
    let prec_v = *prec.get_or_insert(6);
    let upper = matches!(ty, 'E' | 'F' | 'G');
    let neg = val.is_sign_negative() && !val.is_nan();
    let a = val.abs();
    let mut body = if a.is_nan() {
        if upper { "NAN" } else { "nan" }.to_string()
    } else if a.is_infinite() {
        if upper { "INF" } else { "inf" }.to_string()
    } else {
        match ty {
            'f' | 'F' => {
                let s = format!("{:.*}", prec_v, a);
                if p.alternate && prec_v == 0 {
                    format!("{s}.")
                } else {
                    s
                }
            }
            'e' | 'E' => {
                let (digits, exp) = if a == 0.0 {
                    ("0".repeat(prec_v + 1), 0)
                } else {
                    split_sci(&format!("{:.*e}", prec_v, a))
                };
                let (first, rest) = digits.split_at(1);
                let mant = if rest.is_empty() && !p.alternate {
                    first.to_string()
                } else {
                    format!("{first}.{rest}")
                };
                format!("{mant}{}", exp_suffix(exp, upper))
            }
            'g' | 'G' => format_g(a, prec_v, p.alternate, upper),
            _ => {
                // 'r': repr
                let r = float_repr(a);
                if a != 0.0 {
                    let (_d, _e) = shortest_digits(a);
                }
                r
            }
        }
    };
    if add_dot_0 && a.is_finite() && !body.contains('.') && !body.contains('e') {
        body.push_str(".0");
    }
    if pct {
        body.push('%');
    }
    let mut neg = neg;
    if neg && p.no_neg_0 && body.chars().all(|c| !c.is_ascii_digit() || c == '0') {
        neg = false;
    }
    if neg && a == 0.0 && ty == 'r' {
        // repr(-0.0) keeps its sign; handled by `neg` already.
    }
    // Split the integer digits (which may be grouped) from the rest.
    let split = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    let (int_part, rest) = body.split_at(split);
    let (int_part, rest) = if int_part.is_empty() {
        ("", rest)
    } else {
        (int_part, rest)
    };
    if a.is_finite() {
        Ok(finish_number(sign_str(neg, p), "", int_part, rest, p))
    } else {
        // inf/nan are never grouped or zero padded with separators.
        let mut q = p.clone();
        q.grouping = None;
        if q.fill == '0' && q.align == '=' {
            // CPython pads nan/inf with '0' as well; keep its behaviour.
        }
        Ok(finish_number(sign_str(neg, p), "", "", &body, &q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str, spec: &str) -> String {
        format_str(v, spec, "str").unwrap_or_else(|e| format!("ERR {e}"))
    }
    fn i(v: i128, spec: &str) -> String {
        format_int(v, spec, "int").unwrap_or_else(|e| format!("ERR {e}"))
    }
    fn f(v: f64, spec: &str) -> String {
        format_float(v, spec).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn strings() {
        assert_eq!(s("avail", ">12"), "       avail");
        assert_eq!(s("avail", "<8.8"), "avail   ");
        assert_eq!(s("drained*", "<8.8"), "drained*");
        assert_eq!(s("abcdefghij", "<5.5"), "abcde");
        assert_eq!(s("ab", "^5"), " ab  ");
        assert_eq!(s("ab", "*^6"), "**ab**");
        assert_eq!(s("ab", "05"), "ab000");
        assert_eq!(s("✔", ">2"), " ✔");
        assert_eq!(s("ab", ""), "ab");
        assert_eq!(s("ab", "s"), "ab");
        for (spec, err) in [
            ("d", "Unknown format code 'd' for object of type 'str'"),
            ("+5", "Sign not allowed in string format specifier"),
            (" 5", "Space not allowed in string format specifier"),
            (
                "#5",
                "Alternate form (#) not allowed in string format specifier",
            ),
            ("=5", "'=' alignment not allowed in string format specifier"),
            (",s", "Cannot specify ',' with 's'."),
            (",", "Cannot specify ',' with 's'."),
            ("5.", "Format specifier missing precision"),
            (
                "<30.30+",
                "Unknown format code '+' for object of type 'str'",
            ),
            (
                "<30.30+x",
                "Invalid format specifier '<30.30+x' for object of type 'str'",
            ),
            (",_", "Cannot specify both ',' and '_'."),
        ] {
            assert_eq!(s("ab", spec), format!("ERR {err}"), "{spec:?}");
        }
    }

    #[test]
    fn ints() {
        assert_eq!(i(42, ">7d"), "     42");
        assert_eq!(i(42, ""), "42");
        assert_eq!(i(4, ">6"), "     4");
        assert_eq!(i(-42, "05"), "-0042");
        assert_eq!(i(1234567, ","), "1,234,567");
        assert_eq!(i(1234, "010,"), "00,001,234");
        assert_eq!(i(255, "#x"), "0xff");
        assert_eq!(i(255, "#06x"), "0x00ff");
        assert_eq!(i(65535, "_x"), "ffff");
        assert_eq!(i(1048575, "_x"), "f_ffff");
        assert_eq!(i(42, "+"), "+42");
        assert_eq!(i(42, " "), " 42");
        assert_eq!(i(65, "c"), "A");
        assert_eq!(i(3, ".2f"), "3.00");
        assert_eq!(i(3, "%"), "300.000000%");
        assert_eq!(
            i(5, "<30.30"),
            "ERR Precision not allowed in integer format specifier"
        );
        assert_eq!(
            i(5, "s"),
            "ERR Unknown format code 's' for object of type 'int'"
        );
        assert_eq!(i(5, "<5"), "5    ");
        assert_eq!(i(5, "^5"), "  5  ");
        assert_eq!(i(-5, "=5"), "-   5");
    }

    #[test]
    fn floats() {
        assert_eq!(f(1234.567, ">8.2f"), " 1234.57");
        assert_eq!(f(2.2, ".2f"), "2.20");
        assert_eq!(f(2.2, "5.2f"), " 2.20");
        assert_eq!(f(1.0, ""), "1.0");
        assert_eq!(f(1.0, "8.2"), "     1.0");
        assert_eq!(f(1234.567, ".2"), "1.2e+03");
        assert_eq!(f(1234.0, ".10"), "1234.0");
        assert_eq!(f(1e20, ".3"), "1e+20");
        assert_eq!(f(1234.567, "e"), "1.234567e+03");
        assert_eq!(f(1234.567, ".2E"), "1.23E+03");
        assert_eq!(f(0.0001, "g"), "0.0001");
        assert_eq!(f(0.00001, "g"), "1e-05");
        assert_eq!(f(123456.0, "g"), "123456");
        assert_eq!(f(1234567.0, "g"), "1.23457e+06");
        assert_eq!(f(999999.5, "g"), "1e+06");
        assert_eq!(f(1.0, "#g"), "1.00000");
        assert_eq!(f(0.5, "%"), "50.000000%");
        assert_eq!(f(0.123, ".1%"), "12.3%");
        assert_eq!(f(1234567.891, ",.2f"), "1,234,567.89");
        assert_eq!(f(-1.5, "08.2f"), "-0001.50");
        assert_eq!(f(-0.0001, "z.2f"), "0.00");
        assert_eq!(f(-0.0001, ".2f"), "-0.00");
        assert_eq!(f(f64::INFINITY, "f"), "inf");
        assert_eq!(f(f64::NAN, "F"), "NAN");
        assert_eq!(f(f64::NEG_INFINITY, ">6"), "  -inf");
        assert_eq!(
            f(1.5, "d"),
            "ERR Unknown format code 'd' for object of type 'float'"
        );
        assert_eq!(f(1607544031.1368911, ""), "1607544031.1368911");
        assert_eq!(f(1607544031.1368911, "11.6f"), "1607544031.136891");
        assert_eq!(f(5.0, "11.6f"), "   5.000000");
        assert_eq!(f(2.5, ".0f"), "2");
        assert_eq!(f(3.5, ".0f"), "4");
        assert_eq!(f(0.0, "e"), "0.000000e+00");
        assert_eq!(f(0.0, "g"), "0");
        assert_eq!(f(100.0, ".3g"), "100");
        assert_eq!(f(1000.0, ".3g"), "1e+03");
    }
}
