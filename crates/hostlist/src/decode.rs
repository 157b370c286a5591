//! Decoding with flux-core's `hostlist_decode()` rules.

use crate::{
    split_numeric_tail, Affix, Entry, Hostlist, HostlistError, MAX_BARE_TOKEN_BYTES,
    MAX_RANGES_PER_BRACKET, MAX_RANGE_HOSTS,
};
use std::sync::Arc;

/// Token separators.
fn is_sep(b: u8) -> bool {
    matches!(b, b',' | b' ' | b'\t')
}

/// C `isspace()` in the C locale.
pub(crate) fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C `strtoul(s, &end, 10)`: leading white space, an optional sign, decimal
/// digits; a value that overflows is `u64::MAX`, a negative one wraps.
/// Returns the value and the number of bytes consumed (0 when no digits).
pub(crate) fn strtoul(s: &[u8]) -> (u64, usize) {
    let mut i = s.iter().take_while(|&&b| c_isspace(b)).count();
    let mut neg = false;
    if let Some(&c) = s.get(i) {
        if c == b'+' || c == b'-' {
            neg = c == b'-';
            i += 1;
        }
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while let Some(&c) = s.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(c - b'0')))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    let v = if overflow {
        u64::MAX
    } else if neg {
        v.wrapping_neg()
    } else {
        v
    };
    (v, i)
}

/// One parsed bracket element.
struct Span {
    lo: u64,
    hi: u64,
    width: u32,
}

enum RangeErr {
    Invalid,
    TooLarge,
}

/// flux-core's `parse_next_range()`, including its leniency: white space and
/// a `+` before numbers are accepted (and count towards the width), trailing
/// garbage after the low bound is ignored when a high bound follows
/// (`1x-3`), and `N-` means `N`.
fn parse_range(item: &str) -> Result<Span, RangeErr> {
    let b = item.as_bytes();
    let (lo_text, hi_text) = match b.iter().position(|&c| c == b'-') {
        Some(p) => (
            b.get(..p).unwrap_or(&[]),
            Some(b.get(p + 1..).unwrap_or(&[])),
        ),
        None => (b, None),
    };
    if let Some(h) = hi_text {
        if h.first() == Some(&b'-') {
            return Err(RangeErr::Invalid);
        }
    }
    let (lo, lo_end) = strtoul(lo_text);
    if lo_end == 0 {
        return Err(RangeErr::Invalid);
    }
    let hi = match hi_text {
        Some(h) if !h.is_empty() => {
            let (v, end) = strtoul(h);
            if end == 0 || end != h.len() {
                return Err(RangeErr::Invalid);
            }
            v
        }
        _ => {
            if lo_end != lo_text.len() {
                return Err(RangeErr::Invalid);
            }
            lo
        }
    };
    if lo > hi {
        return Err(RangeErr::Invalid);
    }
    if hi - lo >= MAX_RANGE_HOSTS {
        return Err(RangeErr::TooLarge);
    }
    Ok(Span {
        lo,
        hi,
        width: u32::try_from(lo_text.len()).unwrap_or(u32::MAX),
    })
}

/// A token of a hostlist string with what the tokenizer saw inside it.
struct Token<'a> {
    text: &'a str,
    /// Byte offset of the first `[`.
    first_lb: Option<usize>,
    /// Whether the token contains a `]`.
    has_rb: bool,
}

/// Split `s` into tokens: separators split only outside brackets (a `]`
/// before any `[` makes the nesting level negative, so the rest of the string
/// is one token, as in flux-core's `next_tok()`).
fn tokens(s: &str) -> impl Iterator<Item = Token<'_>> {
    let bytes = s.as_bytes();
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        while bytes.get(pos).is_some_and(|&b| is_sep(b)) {
            pos += 1;
        }
        let start = pos;
        let rest = bytes.get(start..)?;
        if rest.is_empty() {
            return None;
        }
        let mut level: i64 = 0;
        let mut first_lb = None;
        let mut has_rb = false;
        let mut len = rest.len();
        for (i, &b) in rest.iter().enumerate() {
            match b {
                b',' | b' ' | b'\t' if level == 0 => {
                    len = i;
                    break;
                }
                b'[' => {
                    level += 1;
                    if first_lb.is_none() {
                        first_lb = Some(i);
                    }
                }
                b']' => {
                    level -= 1;
                    has_rb = true;
                }
                _ => {}
            }
        }
        pos = start + len;
        // Token boundaries are ASCII bytes or the ends, so they are char boundaries.
        Some(Token {
            text: s.get(start..pos)?,
            first_lb,
            has_rb,
        })
    })
}

pub(crate) fn decode_into(hl: &mut Hostlist, s: &str) -> Result<(), HostlistError> {
    // Most real lists are either a few bracket expressions or long comma
    // lists of short names; reserving for the latter avoids regrowth.
    hl.entries.reserve(s.len() / 8);
    for tok in tokens(s) {
        decode_token(hl, &tok)?;
    }
    Ok(())
}

fn decode_token(hl: &mut Hostlist, t: &Token<'_>) -> Result<(), HostlistError> {
    let tok = t.text;
    let unmatched = || HostlistError::UnmatchedBracket {
        token: tok.to_string(),
    };
    let Some(lb) = t.first_lb else {
        if t.has_rb {
            return Err(unmatched());
        }
        append_bare(hl, truncate_to(tok, MAX_BARE_TOKEN_BYTES));
        return Ok(());
    };
    let prefix = tok.get(..lb).unwrap_or("");
    let rest = tok.get(lb + 1..).unwrap_or("");
    let Some(rb) = rest.bytes().position(|b| b == b']') else {
        return Err(unmatched());
    };
    let list = rest.get(..rb).unwrap_or("");
    let suffix = rest.get(rb + 1..).unwrap_or("");

    let mut spans = Vec::new();
    for item in list.split(',') {
        if spans.len() == MAX_RANGES_PER_BRACKET {
            return Err(HostlistError::TooManyRanges {
                token: tok.to_string(),
            });
        }
        match parse_range(item) {
            Ok(sp) => spans.push(sp),
            Err(RangeErr::Invalid) => {
                return Err(HostlistError::InvalidRange {
                    token: tok.to_string(),
                    range: item.to_string(),
                })
            }
            Err(RangeErr::TooLarge) => {
                return Err(HostlistError::RangeTooLarge {
                    token: tok.to_string(),
                    range: item.to_string(),
                })
            }
        }
    }

    if suffix.is_empty() {
        for sp in spans {
            hl.append_range(prefix, sp.lo, sp.hi, sp.width);
        }
    } else {
        let affix = Arc::new(Affix {
            prefix: prefix.into(),
            suffix: suffix.into(),
        });
        for sp in spans {
            hl.push_entry(Entry::Run {
                affix: Arc::clone(&affix),
                lo: sp.lo,
                hi: sp.hi,
                width: sp.width,
            });
        }
    }
    Ok(())
}

/// flux-core's `hostlist_append_host()` for a bracket-free token: a numeric
/// tail makes a one-host range; a tail that overflows 64 bits makes
/// `hostname_create()` fail, and the decoder silently drops the host.
fn append_bare(hl: &mut Hostlist, tok: &str) {
    if tok.is_empty() {
        return;
    }
    match split_numeric_tail(tok) {
        None => hl.push_entry(Entry::Single(Arc::from(tok))),
        Some((prefix, Some(num), width)) => hl.append_range(prefix, num, num, width),
        Some((_, None, _)) => {}
    }
}

/// `s` cut to at most `max` bytes (at a char boundary).
fn truncate_to(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}
