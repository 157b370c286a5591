//! Display width of strings, as the Python `wcwidth.wcswidth()` that flux
//! uses for its `+:` and `W` width calculations (checked against the
//! `wcwidth` module in `tests/goldens.json`).

use unicode_width::UnicodeWidthChar;

/// `wcwidth.wcswidth(s)`: the number of terminal columns `s` occupies, or
/// -1 if it contains a non-printable control character.
pub fn wcswidth(s: &str) -> i64 {
    let mut total: i64 = 0;
    for c in s.chars() {
        let u = c as u32;
        if u == 0 {
            continue;
        }
        if u < 0x20 || (0x7f..0xa0).contains(&u) {
            return -1;
        }
        total += match u {
            // where the Python module and unicode-width's tables disagree
            0xad => 1,
            0x2028 | 0x2029 => 0,
            _ => UnicodeWidthChar::width(c).unwrap_or(0) as i64,
        };
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        for (s, want) in [
            ("", 0),
            ("abc", 3),
            ("✔", 1),
            ("✗", 1),
            ("日本", 4),
            ("e\u{301}", 1),
            ("\x1b[01;32m", -1),
        ] {
            assert_eq!(wcswidth(s), want, "{s:?}");
        }
    }
}
