//! Flux Standard Duration (RFC 23) strings, parsed as flux-core's
//! `fsd_parse_duration()` does.
//!
//! flux-core converts the leading part of the string with C `strtod()` and
//! then allows at most one more character, a unit suffix `s`, `m`, `h` or
//! `d`.  That gives the grammar its corners, all reproduced here:
//!
//! * anything `strtod` accepts is a number: leading white space, a sign,
//!   exponents (`1e3`), hexadecimal (`0x1p4`), `inf`/`infinity` (any case);
//! * a string with no number at all converts to 0, so `""`, `"s"` and
//!   `"d"` are all 0 seconds;
//! * a negative value is an error, `-0` is 0;
//! * `inf`, `infinity`, `infs`, ... are infinite.
//!
//! Deliberate deviation: `nan` (which flux-core accepts and then treats as
//! a nonsensical duration) is rejected.

/// Why a duration string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FsdError {
    /// The number is negative.
    #[error("duration is negative")]
    Negative,
    /// The number is not a number (NaN).
    #[error("duration is not a number")]
    NotANumber,
    /// More than one character follows the number, or the one character is
    /// not a unit (`s`, `m`, `h`, `d`).
    #[error("invalid duration suffix")]
    Suffix,
}

/// Parse a Flux Standard Duration into seconds (possibly infinite).
///
/// ```
/// assert_eq!(config::parse_fsd("90d"), Ok(7_776_000.0));
/// assert_eq!(config::parse_fsd("1.5m"), Ok(90.0));
/// assert_eq!(config::parse_fsd("inf"), Ok(f64::INFINITY));
/// assert!(config::parse_fsd("foobar").is_err());
/// ```
pub fn parse_fsd(s: &str) -> Result<f64, FsdError> {
    let (value, used) = strtod(s.as_bytes());
    if value.is_nan() {
        return Err(FsdError::NotANumber);
    }
    if value < 0.0 {
        return Err(FsdError::Negative);
    }
    let rest = s.as_bytes().get(used..).unwrap_or(&[]);
    let multiplier = match rest {
        [] => 1.0,
        [b's'] => 1.0,
        [b'm'] => 60.0,
        [b'h'] => 3600.0,
        [b'd'] => 86400.0,
        _ => return Err(FsdError::Suffix),
    };
    // -0 passes the sign check in C too; report it as plain 0.
    Ok(value * multiplier + 0.0)
}

/// C `strtod()` on a byte string: the value and how many bytes it used
/// (0 when there is no number, in which case the value is 0).
fn strtod(s: &[u8]) -> (f64, usize) {
    let mut i = 0;
    while s
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
    {
        i += 1;
    }
    let mut negative = false;
    if let Some(&c) = s.get(i) {
        if c == b'+' || c == b'-' {
            negative = c == b'-';
            i += 1;
        }
    }
    let body = s.get(i..).unwrap_or(&[]);
    let parsed = special(body)
        .or_else(|| hexadecimal(body))
        .or_else(|| decimal(body));
    match parsed {
        Some((v, n)) => (if negative { -v } else { v }, i + n),
        None => (0.0, 0),
    }
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len()
        && s.iter()
            .zip(word)
            .all(|(a, b)| a.to_ascii_lowercase() == *b)
}

/// `inf`, `infinity`, `nan`, `nan(chars)`.
fn special(s: &[u8]) -> Option<(f64, usize)> {
    if starts_with_ci(s, b"infinity") {
        return Some((f64::INFINITY, 8));
    }
    if starts_with_ci(s, b"inf") {
        return Some((f64::INFINITY, 3));
    }
    if starts_with_ci(s, b"nan") {
        let mut n = 3;
        if s.get(3) == Some(&b'(') {
            let mut j = 4;
            while s
                .get(j)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                n = j + 1;
            }
        }
        return Some((f64::NAN, n));
    }
    None
}

/// Decimal digits, optional fraction, optional exponent (only taken when
/// digits follow it).
fn decimal(s: &[u8]) -> Option<(f64, usize)> {
    let digits = |from: usize| {
        s.get(from..)
            .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count())
    };
    let int = digits(0);
    let mut end = int;
    let mut frac = 0;
    if s.get(end) == Some(&b'.') {
        frac = digits(end + 1);
        if int > 0 || frac > 0 {
            end += 1 + frac;
        }
    }
    if int == 0 && frac == 0 {
        return None;
    }
    if matches!(s.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(s.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let ed = digits(j);
        if ed > 0 {
            end = j + ed;
        }
    }
    // Rust's parser accepts the same decimal forms ("5.", ".5", "5.e3")
    // and rounds correctly, as glibc's strtod does.
    let text = std::str::from_utf8(s.get(..end)?).ok()?;
    let v: f64 = text.parse().ok()?;
    Some((v, end))
}

/// `0x` hexadecimal floating point: hex digits, optional fraction,
/// optional binary exponent `p[+-]digits`.
fn hexadecimal(s: &[u8]) -> Option<(f64, usize)> {
    if !(s.first() == Some(&b'0') && matches!(s.get(1), Some(b'x' | b'X'))) {
        return None;
    }
    let mut i = 2;
    let mut mant: u128 = 0;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut push = |d: u32, frac: bool, exp: &mut i64| {
        if mant >> 120 == 0 {
            mant = (mant << 4) | u128::from(d);
            if frac {
                *exp -= 4;
            }
        } else if !frac {
            // Digits beyond 120 bits only scale the value (they are below
            // the precision of a double).
            *exp += 4;
        }
    };
    while let Some(d) = s.get(i).and_then(|c| (*c as char).to_digit(16)) {
        push(d, false, &mut exp);
        any = true;
        i += 1;
    }
    if s.get(i) == Some(&b'.') {
        let mut j = i + 1;
        let mut frac_any = false;
        while let Some(d) = s.get(j).and_then(|c| (*c as char).to_digit(16)) {
            push(d, true, &mut exp);
            frac_any = true;
            j += 1;
        }
        if any || frac_any {
            i = j;
            any = true;
        }
    }
    if !any {
        // "0x" with no digits: strtod converts just the "0".
        return Some((0.0, 1));
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut j = i + 1;
        let mut neg = false;
        if let Some(&c) = s.get(j) {
            if c == b'+' || c == b'-' {
                neg = c == b'-';
                j += 1;
            }
        }
        let start = j;
        let mut e: i64 = 0;
        while let Some(d) = s.get(j).and_then(|c| (*c as char).to_digit(10)) {
            e = e
                .saturating_mul(10)
                .saturating_add(i64::from(d))
                .min(1 << 20);
            j += 1;
        }
        if j > start {
            exp = exp.saturating_add(if neg { -e } else { e });
            i = j;
        }
    }
    let v = (mant as f64) * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    Some((v, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parses(good: &[(&str, f64)]) {
        for &(s, v) in good {
            assert_eq!(parse_fsd(s), Ok(v), "{s:?}");
        }
    }

    #[test]
    fn upstream_vectors() {
        // flux-core src/common/libutil/test/fsd.c
        for bad in ["-1.", "1.0f", "1.0sec"] {
            assert!(parse_fsd(bad).is_err(), "{bad}");
        }
        parses(&[
            ("0", 0.0),
            ("0s", 0.0),
            ("0m", 0.0),
            ("0h", 0.0),
            ("0d", 0.0),
            ("0.5", 0.5),
            ("0.5s", 0.5),
            ("0.5m", 30.0),
            ("0.5h", 1800.0),
            ("1.0d", 86400.0),
        ]);
    }

    #[test]
    fn strtod_corners() {
        parses(&[
            ("90d", 7_776_000.0),
            ("100d", 8_640_000.0),
            ("30s", 30.0),
            ("60s", 60.0),
            ("1e3", 1000.0),
            ("1E2m", 6000.0),
            ("+5", 5.0),
            (" 5", 5.0),
            ("\t2h", 7200.0),
            (".5m", 30.0),
            ("5.", 5.0),
            ("5.m", 300.0),
            ("0x10", 16.0),
            ("0x1p4", 16.0),
            ("0x1.8", 1.5),
            ("0X.8p1s", 1.0),
            ("-0", 0.0),
            ("-0s", 0.0),
            ("", 0.0),
            ("s", 0.0),
            ("d", 0.0),
        ]);
        for inf in ["inf", "INF", "infinity", "Infinity", "infs", "infd"] {
            assert_eq!(parse_fsd(inf), Ok(f64::INFINITY), "{inf}");
        }
        // "1e" converts "1" and leaves "e": not a unit.  "1e5x" leaves "x".
        for bad in [
            "1e", "foobar", "5 ", "5ss", "1.5.", ".", "x", "  ", "infinit", "0x", "-5", "-inf",
            "5w", "5S", "1e5x", "--5",
        ] {
            assert!(parse_fsd(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_fsd("nan"), Err(FsdError::NotANumber));
        assert_eq!(parse_fsd("NaN(123)s"), Err(FsdError::NotANumber));
        assert_eq!(parse_fsd("-1"), Err(FsdError::Negative));
        assert_eq!(parse_fsd("1x"), Err(FsdError::Suffix));
        // -0 is reported as +0.
        assert!(parse_fsd("-0").is_ok_and(|v| v.is_sign_positive()));
        // "1e+" takes "1" and leaves "e+": two characters.
        assert_eq!(parse_fsd("1e+"), Err(FsdError::Suffix));
        assert_eq!(parse_fsd("1e+2"), Ok(100.0));
        assert_eq!(parse_fsd("2.5e-1m"), Ok(15.0));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn decimal_numbers_with_units(v in 0.0f64..1e9, unit in 0usize..5) {
            let (suffix, mult) = [("", 1.0), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)][unit];
            let text = format!("{v}{suffix}");
            proptest::prop_assert_eq!(parse_fsd(&text), Ok(v * mult));
        }

        #[test]
        fn never_panics(s in ".{0,12}") {
            let _ = parse_fsd(&s);
        }
    }
}
