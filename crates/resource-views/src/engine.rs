//! `string.Formatter` as flux's `UtilFormatter` extends it: field lookup
//! on a format string parsed by [`pycompat::strformat::parse`], the `!d`,
//! `!D`, `!F`, `!H`, `!P` conversions, and the `+` (truncation marker),
//! `h` (dash for empty) and `W` (display width) spec suffixes.

use crate::value::{FieldValue, FormatItem};
use pycompat::error::{PyError, PyResult};
use pycompat::pyfmt::format_str;
use pycompat::repr::ascii_str;
use pycompat::strformat::split_field_name;
pub use pycompat::strformat::{parse, Chunk, FieldRef};
use pycompat::time::{LocalDateTime, LocalZone};
use pycompat::width::wcswidth;

/// Where positional argument 0 and keyword arguments come from.
pub(crate) enum Args<'a> {
    /// `format(fmt, obj)`: `{0...}` is the item; no keyword arguments.
    Item(&'a dyn FormatItem),
    /// `format(fmt, **headings)`: keywords only (the header formatter,
    /// which also looks dotted names up literally).
    Headings(&'a [(String, String)]),
}

/// The context a format is applied in.
pub(crate) struct Ctx<'a> {
    pub zone: &'a dyn LocalZone,
}

fn get_field(name: &str, args: &Args<'_>) -> PyResult<FieldValue> {
    if let Args::Headings(h) = args {
        if let Some((_, v)) = h.iter().find(|(k, _)| k == name) {
            return Ok(FieldValue::Str(v.clone()));
        }
    }
    let (first, rest) = split_field_name(name);
    let is_index = !first.is_empty() && first.chars().all(|c| c.is_ascii_digit());
    let mut rest = rest.into_iter();
    let mut value = match args {
        Args::Item(item) if is_index && first.parse::<u64>().ok() == Some(0) => match rest.next() {
            None => {
                return Err(PyError::type_err(format!(
                    "unsupported format string passed to {}.__format__",
                    crate::value::class_name(&item.class_path())
                )))
            }
            Some(attr) => {
                if attr.is_empty() {
                    return Err(PyError::value("Empty attribute in format string"));
                }
                if attr.starts_with('[') {
                    return Err(PyError::Type(format!(
                        "'{}' object is not subscriptable",
                        crate::value::class_name(&item.class_path())
                    )));
                }
                item.attr(&attr).ok_or_else(|| {
                    PyError::Attribute(format!(
                        "'{}' object has no attribute '{}'",
                        crate::value::class_name(&item.class_path()),
                        attr
                    ))
                })?
            }
        },
        _ if is_index => {
            return Err(PyError::Index(format!(
                "Replacement index {first} out of range for positional args tuple"
            )))
        }
        Args::Headings(h) => match h.iter().find(|(k, _)| *k == first) {
            Some((_, v)) => FieldValue::Str(v.clone()),
            None => return Err(PyError::Key(first)),
        },
        Args::Item(_) => return Err(PyError::Key(first)),
    };
    for attr in rest {
        if attr.is_empty() {
            return Err(PyError::value("Empty attribute in format string"));
        }
        if attr.starts_with('[') {
            return Err(PyError::Type(format!(
                "'{}' object is not subscriptable",
                value.type_name()
            )));
        }
        value = value.attr(&attr)?;
    }
    Ok(value)
}

/// Python `round()` of a float to an integer (half to even).
fn py_round(f: f64) -> PyResult<i64> {
    if f.is_nan() {
        return Err(PyError::value("cannot convert float NaN to integer"));
    }
    if f.is_infinite() {
        return Err(PyError::Overflow(
            "cannot convert float infinity to integer".into(),
        ));
    }
    Ok(f.round_ties_even() as i64)
}

/// flux's `fsd()`: a Flux Standard Duration string.
pub(crate) fn fsd(secs: f64) -> String {
    if secs.is_infinite() {
        return "inf".into();
    }
    let g4 = |v: f64| -> String { pycompat::pyfmt::format_float(v, ".4g").unwrap_or_default() };
    if secs < 1.0e-3 {
        "0s".into()
    } else if secs < 10.0 {
        format!("{secs:.3}s")
    } else if secs < 60.0 {
        format!("{}s", g4(secs))
    } else if secs < 3600.0 {
        format!("{}m", g4(secs / 60.0))
    } else if secs < 86400.0 {
        format!("{}h", g4(secs / 3600.0))
    } else {
        format!("{}d", g4(secs / 86400.0))
    }
}

/// `str(timedelta(seconds=n))`.
fn timedelta_str(n: i64) -> String {
    let days = n.div_euclid(86400);
    let secs = n.rem_euclid(86400);
    let hms = format!("{}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60);
    if days != 0 {
        let plural = if days.abs() != 1 { "s" } else { "" };
        format!("{days} day{plural}, {hms}")
    } else {
        hms
    }
}

fn not_integer(v: &FieldValue) -> PyError {
    PyError::Type(format!(
        "'{}' object cannot be interpreted as an integer",
        v.type_name()
    ))
}

/// `datetime.fromtimestamp(value)` for a field value.
fn fromtimestamp(v: &FieldValue, zone: &dyn LocalZone) -> PyResult<LocalDateTime> {
    match v {
        FieldValue::Int(i) => LocalDateTime::from_int_timestamp(*i, zone),
        FieldValue::Bool(b) => LocalDateTime::from_int_timestamp(i64::from(*b), zone),
        FieldValue::Float(f) => LocalDateTime::from_timestamp(*f, zone),
        other => Err(not_integer(other)),
    }
}

/// The local time of the epoch, which flux renders as an empty string.
fn local_epoch(zone: &dyn LocalZone) -> LocalDateTime {
    LocalDateTime::from_unix(0, 0, zone)
}

/// The strings flux's `?:` sentinel treats as empty.
pub(crate) fn empty_outputs(zone: &dyn LocalZone) -> [String; 6] {
    [
        String::new(),
        "0s".into(),
        "0.0".into(),
        "0:00:00".into(),
        "1970-01-01T00:00:00".into(),
        local_epoch(zone).strftime("%FT%T", false, zone),
    ]
}

fn number_of(v: &FieldValue) -> Option<f64> {
    match v {
        FieldValue::Int(i) => Some(*i as f64),
        FieldValue::Float(f) => Some(*f),
        FieldValue::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// `UtilFormatter.convert_field`.
pub(crate) fn convert_field(
    value: FieldValue,
    conv: Option<char>,
    zone: &dyn LocalZone,
) -> PyResult<FieldValue> {
    let Some(conv) = conv else {
        return Ok(value);
    };
    let orig = value.py_str();
    match conv {
        'd' => match fromtimestamp(&value, zone) {
            Ok(dt) => Ok(FieldValue::DateTime(dt)),
            Err(PyError::Type(_)) if orig.is_empty() => Ok(FieldValue::DateTime(local_epoch(zone))),
            Err(e) => Err(e),
        },
        'D' => {
            if !value.truthy() {
                return Ok(FieldValue::str(""));
            }
            match fromtimestamp(&value, zone) {
                Ok(dt) => Ok(FieldValue::Str(dt.strftime("%FT%T", false, zone))),
                Err(PyError::Type(_)) if orig.is_empty() => Ok(FieldValue::str("")),
                Err(e) => Err(e),
            }
        }
        'F' | 'H' | 'P' => {
            let Some(f) = number_of(&value) else {
                if orig.is_empty() {
                    return Ok(FieldValue::str(""));
                }
                let t = value.type_name();
                return Err(PyError::Type(match conv {
                    'F' => format!("must be real number, not {t}"),
                    _ => format!("'<' not supported between instances of 'int' and '{t}'"),
                }));
            };
            Ok(FieldValue::Str(match conv {
                'F' => fsd(f),
                'H' => {
                    let v = if 0.0 < f && f < 1.0 { 1.0 } else { f };
                    let n = match value {
                        FieldValue::Int(i) if v == f => i,
                        _ => py_round(v)?,
                    };
                    timedelta_str(n)
                }
                _ => {
                    let v = f * 100.0;
                    let spec = if 0.0 < v && v < 1.0 { ".2f" } else { ".3g" };
                    format!("{}%", pycompat::pyfmt::format_float(v, spec)?)
                }
            }))
        }
        's' => Ok(FieldValue::Str(orig)),
        'r' => Ok(FieldValue::Str(value.repr())),
        'a' => Ok(FieldValue::Str(match &value {
            FieldValue::Str(s) => ascii_str(s),
            other => {
                let r = other.repr();
                let quoted = ascii_str(&r);
                quoted[1..quoted.len() - 1].to_string()
            }
        })),
        c => Err(PyError::Value(format!("Unknown conversion specifier {c}"))),
    }
}

/// `UtilDatetime.__format__`.
fn format_datetime(dt: &LocalDateTime, fmt: &str, zone: &dyn LocalZone) -> PyResult<String> {
    let (timefmt, spec) = match fmt.split_once("::") {
        Some((a, b)) => (a, b),
        None => (fmt, ""),
    };
    let mut result = if dt.same_wall_time(&local_epoch(zone)) {
        String::new()
    } else {
        dt.strftime(
            if timefmt.is_empty() { "%FT%T" } else { timefmt },
            false,
            zone,
        )
    };
    let mut spec = spec.to_string();
    if let Some(s) = spec.strip_suffix('h') {
        if result.is_empty() {
            result = "-".into();
        }
        spec = format!("{s}s");
    }
    if spec.is_empty() {
        Ok(result)
    } else {
        format_str(&result, &spec, "str")
    }
}

/// `UtilFormatter.format_field`.
pub(crate) fn format_field(value: FieldValue, spec: &str, ctx: &Ctx<'_>) -> PyResult<String> {
    let mut spec = spec.to_string();
    let mut value = value;
    let mut truncate = false;
    if let Some(s) = spec.strip_suffix('+') {
        truncate = true;
        spec = s.to_string();
    }
    let is_dt = matches!(value, FieldValue::DateTime(_));
    if !is_dt {
        if let Some(s) = spec.strip_suffix('h') {
            let text = value.py_str();
            let empty = empty_outputs(ctx.zone);
            value = FieldValue::Str(if empty.contains(&text) {
                "-".into()
            } else {
                text
            });
            spec = format!("{s}s");
        }
    }
    if let FieldValue::Str(text) = &value {
        if spec.ends_with('W') {
            let b = spec.as_bytes();
            if b.len() >= 3 && (b[0] == b'<' || b[0] == b'>') {
                let digits: String = spec[1..].chars().take_while(char::is_ascii_digit).collect();
                if !digits.is_empty() && spec[1 + digits.len()..].starts_with('W') {
                    if let Ok(mut width) = digits.parse::<i64>() {
                        let display = wcswidth(text);
                        let diff = display - text.chars().count() as i64;
                        if diff > 0 && width > diff {
                            width -= diff;
                            spec = format!("{}{}s", &spec[..1], width);
                        }
                    }
                }
            }
        }
    }
    if let Some(s) = spec.strip_suffix('W') {
        spec = format!("{s}s");
    }
    let retval = match &value {
        FieldValue::DateTime(dt) => format_datetime(dt, &spec, ctx.zone)?,
        other => other.format(&spec)?,
    };
    if truncate {
        let orig_len = value.py_str().chars().count();
        let n = retval.chars().count();
        if n < orig_len {
            let mut t: String = retval.chars().take(n.saturating_sub(1)).collect();
            t.push('+');
            return Ok(t);
        }
    }
    Ok(retval)
}

/// `Formatter.vformat(fmt, args, kwargs)` with flux's `UtilFormatter`.
pub(crate) fn vformat(
    chunks: &[Chunk],
    args: &Args<'_>,
    ctx: &Ctx<'_>,
    depth: i32,
) -> PyResult<String> {
    if depth < 0 {
        return Err(PyError::value("Max string recursion exceeded"));
    }
    let mut out = String::new();
    let mut auto: Option<usize> = Some(0);
    for ch in chunks {
        out.push_str(&ch.literal);
        let Some(f) = &ch.field else {
            continue;
        };
        let mut name = f.name.clone();
        if name.is_empty() {
            match auto {
                None => return Err(PyError::value(
                    "cannot switch from manual field specification to automatic field numbering",
                )),
                Some(n) => {
                    name = n.to_string();
                    auto = Some(n + 1);
                }
            }
        } else if name.chars().all(|c| c.is_ascii_digit()) {
            if auto.is_some_and(|n| n > 0) {
                return Err(PyError::value(
                    "cannot switch from automatic field numbering to manual field specification",
                ));
            }
            auto = None;
        }
        let obj = get_field(&name, args)?;
        let obj = convert_field(obj, f.conv, ctx.zone)?;
        let spec = if f.spec.contains('{') {
            let inner = parse(&f.spec)?;
            vformat(&inner, args, ctx, depth - 1)?
        } else {
            f.spec.clone()
        };
        out.push_str(&format_field(obj, &spec, ctx)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pycompat::time::FixedZone;

    type Flat = Vec<(String, Option<(String, String, Option<char>)>)>;

    fn chunks(fmt: &str) -> Flat {
        parse(fmt)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.literal, c.field.map(|f| (f.name, f.spec, f.conv))))
            .collect()
    }

    fn perr(fmt: &str) -> String {
        parse(fmt).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn parse_like_cpython() {
        assert_eq!(
            chunks("{state:>12} {up:>2} x"),
            vec![
                ("".into(), Some(("state".into(), ">12".into(), None))),
                (" ".into(), Some(("up".into(), ">2".into(), None))),
                (" x".into(), None),
            ]
        );
        assert_eq!(
            chunks("{timestamp!d:%b%d %R::<12}"),
            vec![(
                "".into(),
                Some(("timestamp".into(), "%b%d %R::<12".into(), Some('d')))
            )]
        );
        assert_eq!(
            chunks("a{{b}}c"),
            vec![("a{".into(), None), ("b}".into(), None), ("c".into(), None)]
        );
        assert_eq!(
            chunks("{a!r}"),
            vec![("".into(), Some(("a".into(), "".into(), Some('r'))))]
        );
        assert_eq!(
            chunks("{}"),
            vec![("".into(), Some(("".into(), "".into(), None)))]
        );
        assert_eq!(
            chunks("{a:{b}x}"),
            vec![("".into(), Some(("a".into(), "{b}x".into(), None)))]
        );
        assert_eq!(chunks(""), vec![]);
        assert_eq!(perr("a}b"), "Single '}' encountered in format string");
        assert_eq!(perr("ab{"), "Single '{' encountered in format string");
        assert_eq!(perr("{ab"), "expected '}' before end of string");
        assert_eq!(perr("{a{b}"), "unexpected '{' in field name");
        assert_eq!(
            perr("{a!"),
            "end of string while looking for conversion specifier"
        );
        assert_eq!(perr("{a!rx}"), "expected ':' after conversion specifier");
        assert_eq!(perr("{a:x"), "unmatched '{' in format spec");
        assert_eq!(perr("{a!r"), "unmatched '{' in format spec");
    }

    #[test]
    fn fsd_matches_flux() {
        assert_eq!(fsd(0.0), "0s");
        assert_eq!(fsd(1.5), "1.500s");
        assert_eq!(fsd(12.5), "12.5s");
        assert_eq!(fsd(90.0), "1.5m");
        assert_eq!(fsd(7200.0), "2h");
        assert_eq!(fsd(86400.0 * 3.0), "3d");
        assert_eq!(fsd(f64::INFINITY), "inf");
    }

    #[test]
    fn conversions() {
        let z = FixedZone::utc();
        let conv = |v: FieldValue, c: char| -> String {
            match convert_field(v, Some(c), &z) {
                Ok(FieldValue::Str(s)) => s,
                Ok(other) => other.py_str(),
                Err(e) => format!("ERR {e}"),
            }
        };
        assert_eq!(conv(FieldValue::Float(3725.4), 'H'), "1:02:05");
        assert_eq!(conv(FieldValue::Float(0.2), 'H'), "0:00:01");
        assert_eq!(conv(FieldValue::Int(90000), 'H'), "1 day, 1:00:00");
        assert_eq!(conv(FieldValue::Int(-5), 'H'), "-1 day, 23:59:55");
        assert_eq!(conv(FieldValue::Float(0.005), 'P'), "0.50%");
        assert_eq!(conv(FieldValue::Float(0.5), 'P'), "50%");
        assert_eq!(conv(FieldValue::Int(0), 'P'), "0%");
        assert_eq!(conv(FieldValue::str(""), 'P'), "");
        assert_eq!(conv(FieldValue::Float(0.0), 'D'), "");
        assert_eq!(
            conv(FieldValue::Float(1607544031.5), 'D'),
            "2020-12-09T20:00:31"
        );
        assert_eq!(conv(FieldValue::Float(90.0), 'F'), "1.5m");
        assert_eq!(
            conv(FieldValue::str("x"), 'F'),
            "ERR must be real number, not str"
        );
        for c in ['H', 'P'] {
            assert_eq!(
                conv(FieldValue::str("x"), c),
                "ERR '<' not supported between instances of 'int' and 'str'"
            );
        }
        assert_eq!(conv(FieldValue::str("abc"), 'r'), "'abc'");
        assert_eq!(
            conv(FieldValue::str("x"), 'q'),
            "ERR Unknown conversion specifier q"
        );
        assert_eq!(
            conv(FieldValue::str("x"), 'd'),
            "ERR 'str' object cannot be interpreted as an integer"
        );
    }

    #[test]
    fn format_field_suffixes() {
        let z = FixedZone::utc();
        let ctx = Ctx { zone: &z };
        let ff = |v: FieldValue, spec: &str| -> String {
            format_field(v, spec, &ctx).unwrap_or_else(|e| format!("ERR {e}"))
        };
        assert_eq!(
            ff(FieldValue::str("0123456789abcdef"), "<10.10+"),
            "012345678+"
        );
        assert_eq!(ff(FieldValue::str("short"), "<10.10+"), "short     ");
        assert_eq!(ff(FieldValue::str("xx,foo"), ">5.5+"), "xx,f+");
        assert_eq!(ff(FieldValue::str("xx,foo"), ">5.5h+"), "xx,f+");
        assert_eq!(ff(FieldValue::str(""), "<5h"), "-    ");
        assert_eq!(ff(FieldValue::str("0s"), "h"), "-");
        assert_eq!(ff(FieldValue::Int(0), ">3h"), "  0");
        assert_eq!(ff(FieldValue::str("日本"), "<6W"), "日本  ");
        assert_eq!(ff(FieldValue::str("ab"), "<6W"), "ab    ");
        let dt = convert_field(FieldValue::Float(1607544031.1368911), Some('d'), &z)
            .unwrap_or(FieldValue::None);
        assert_eq!(ff(dt.clone(), "%b%d %R::<12"), "Dec09 20:00 ");
        assert_eq!(ff(dt.clone(), ""), "2020-12-09T20:00:31");
        assert_eq!(ff(dt.clone(), "%H::>8h"), "      20");
        // '+' on a datetime compares with str(datetime)
        assert_eq!(ff(dt, "%b%d::<12+"), "Dec09      +");
        let epoch = convert_field(FieldValue::str(""), Some('d'), &z).unwrap_or(FieldValue::None);
        assert_eq!(ff(epoch.clone(), "%b%d %R::<12"), "            ");
        assert_eq!(ff(epoch, "::<5h"), "-    ");
    }
}
