//! `str.format` strings as CPython parses them: `string.Formatter().parse()`
//! (`_string.formatter_parser`, the `MarkupIterator` of
//! `Objects/stringlib/unicode_format.h`) with its error texts, and
//! `_string.formatter_field_name_split`.  Formatting one value by its spec
//! is [`crate::pyfmt`].

use crate::error::{PyError, PyResult};

/// One `(literal_text, field_name, format_spec, conversion)` tuple of
/// `string.Formatter().parse()`.  `field` is `None` for pure literal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Literal text before the field.
    pub literal: String,
    /// The replacement field, if any.
    pub field: Option<FieldRef>,
}

/// A replacement field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRef {
    /// Field name (`0.state`, `up.ascii`, possibly empty).
    pub name: String,
    /// Format spec, without the `:`.
    pub spec: String,
    /// Conversion character, if any.
    pub conv: Option<char>,
}

/// Parse a format string exactly as CPython's `_string.formatter_parser`.
pub fn parse(fmt: &str) -> PyResult<Vec<Chunk>> {
    let s: Vec<char> = fmt.chars().collect();
    let end = s.len();
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < end {
        let start = pos;
        let mut c = '\0';
        let mut markup = false;
        while pos < end {
            c = s[pos];
            pos += 1;
            if c == '{' || c == '}' {
                markup = true;
                break;
            }
        }
        let at_end = pos >= end;
        let mut len = pos - start;
        if markup && c == '}' && (at_end || s[pos] != '}') {
            return Err(PyError::value("Single '}' encountered in format string"));
        }
        if markup && at_end && c == '{' {
            return Err(PyError::value("Single '{' encountered in format string"));
        }
        if markup && !at_end {
            if s[pos] == c {
                pos += 1;
                markup = false;
            } else {
                len -= 1;
            }
        }
        let literal: String = s[start..start + len].iter().collect();
        if !markup {
            out.push(Chunk {
                literal,
                field: None,
            });
            continue;
        }
        let field = parse_field(&s, &mut pos)?;
        out.push(Chunk {
            literal,
            field: Some(field),
        });
    }
    Ok(out)
}

fn parse_field(s: &[char], pos: &mut usize) -> PyResult<FieldRef> {
    let end = s.len();
    let name_start = *pos;
    let mut c = '\0';
    let mut terminated = false;
    while *pos < end {
        c = s[*pos];
        *pos += 1;
        match c {
            '{' => return Err(PyError::value("unexpected '{' in field name")),
            '[' => {
                while *pos < end && s[*pos] != ']' {
                    *pos += 1;
                }
                continue;
            }
            '}' | ':' | '!' => {
                terminated = true;
                break;
            }
            _ => continue,
        }
    }
    if !terminated {
        return Err(PyError::value("expected '}' before end of string"));
    }
    let name: String = s[name_start..*pos - 1].iter().collect();
    let mut conv = None;
    if c == '!' || c == ':' {
        if c == '!' {
            if *pos >= end {
                return Err(PyError::value(
                    "end of string while looking for conversion specifier",
                ));
            }
            conv = Some(s[*pos]);
            *pos += 1;
            if *pos < end {
                let c2 = s[*pos];
                *pos += 1;
                if c2 == '}' {
                    return Ok(FieldRef {
                        name,
                        spec: String::new(),
                        conv,
                    });
                }
                if c2 != ':' {
                    return Err(PyError::value("expected ':' after conversion specifier"));
                }
            }
        }
        let spec_start = *pos;
        let mut count = 1;
        while *pos < end {
            let ch = s[*pos];
            *pos += 1;
            match ch {
                '{' => count += 1,
                '}' => {
                    count -= 1;
                    if count == 0 {
                        return Ok(FieldRef {
                            name,
                            spec: s[spec_start..*pos - 1].iter().collect(),
                            conv,
                        });
                    }
                }
                _ => {}
            }
        }
        return Err(PyError::value("unmatched '{' in format spec"));
    }
    Ok(FieldRef {
        name,
        spec: String::new(),
        conv,
    })
}

/// `_string.formatter_field_name_split`: the first part and the
/// `.attr` / `[key]` parts (keys keep their brackets).
pub fn split_field_name(name: &str) -> (String, Vec<String>) {
    // formatter_field_name_split: first part up to '.' or '[', then
    // '.attr' / '[key]' parts.
    let first_end = name.find(['.', '[']).unwrap_or(name.len());
    let first = name[..first_end].to_string();
    let mut rest = Vec::new();
    let mut tail = &name[first_end..];
    while !tail.is_empty() {
        if let Some(t) = tail.strip_prefix('.') {
            let e = t.find(['.', '[']).unwrap_or(t.len());
            rest.push(t[..e].to_string());
            tail = &t[e..];
        } else if let Some(t) = tail.strip_prefix('[') {
            let e = t.find(']').unwrap_or(t.len());
            rest.push(format!("[{}]", &t[..e]));
            tail = t.get(e + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    (first, rest)
}
