//! JSON as flux-core's C code reads and writes it with jansson.
//!
//! * [`loads`] and [`StreamLoader`] parse like `json_loads()` /
//!   `json_loadf()`: the top level must be an object or array, integers are
//!   64-bit (`too big integer` otherwise), reals are doubles, strings must be
//!   valid UTF-8 without `\u0000`, nesting is limited to 2048 levels, and
//!   errors carry jansson's exact texts (`'[' or '{' expected near 'x'`,
//!   `... near end of file`, ...) and line numbers.  A [`StreamLoader`]
//!   reads one value after another from a byte stream, like repeated
//!   `json_loadf (stdin, JSON_DISABLE_EOF_CHECK, ...)` calls.
//! * [`dumps`] writes like `json_dumps (o, 0)` (one line, `", "` and `": "`
//!   separators: `flux R`, `rlist_encode()`), [`dumps_compact`] /
//!   [`to_compact_string`] like `json_dumps (o, JSON_COMPACT)` (eventlog
//!   lines, RPC payloads).  Object members keep their insertion order;
//!   strings escape only `"`, `\` and control characters below U+0020
//!   (`\b \f \n \r \t`, others as `\u00XX` with **upper-case** hex);
//!   `/` and non-ASCII text are written as is.
//!
//! # Reals: one rule for every output
//!
//! flux-core never passes `JSON_REAL_PRECISION` (neither `rlist_encode()`,
//! which is `json_dumps (R, 0)`, nor `eventlog_entry_encode()`, nor the RPC
//! payloads), so every real it writes goes through jansson's
//! `jsonp_dtostr()` with precision 0.  What that prints depends on how
//! jansson was built: 2.14 and later, built with their default `dtoa`
//! support, write the **shortest** text that reads back to the same double
//! (`0.1`); older releases (and `--disable-dtoa` builds) write `%.17g`
//! (`0.10000000000000001`).  The two never differ between outputs of one
//! flux installation.  Roster follows jansson ≥ 2.14 everywhere
//! ([`format_real`]): plain notation with at least one fractional digit
//! (`5.0`, `0.001`, `1733965155.6272159`) when the decimal exponent is
//! between -4 and 16, else `d.ddde±X` without a `+` sign or exponent
//! padding (`1e-5`, `1.5e300`).  So `roster R remap` prints
//! `"starttime": 0.1` as the eventlog does.
//!
//! Integers are written in decimal (a `u64` above `i64::MAX`, which jansson
//! cannot hold, is written as is rather than wrapped).
//!
//! Values are `serde_json::Value`s (with insertion-ordered objects); a
//! jansson integer is a `Number` holding an `i64`, a real one holding an
//! `f64`.

use serde_json::{Map, Number, Value};

/// jansson's `JSON_PARSER_MAX_DEPTH`.
const MAX_DEPTH: usize = 2048;
/// jansson's `JSON_ERROR_TEXT_LENGTH` (texts are at most one byte shorter).
pub const ERROR_TEXT_MAX: usize = 159;

/// A jansson-style error: the text and the line (-1 when unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// The error text exactly as jansson would produce it.
    pub text: String,
    /// The 1-based line, or -1 when jansson reports none.
    pub line: i32,
}

/// Truncate to what fits a C error buffer (159 bytes), at a char boundary.
pub fn truncate_text(mut s: String) -> String {
    if s.len() > ERROR_TEXT_MAX {
        let mut end = ERROR_TEXT_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// jansson's name for a value's type, as used in unpack errors.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "real",
        Value::Number(_) => "integer",
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        Value::Null => "null",
    }
}

/// True if `v` is what jansson calls an integer.
pub fn is_integer(v: &Value) -> bool {
    matches!(v, Value::Number(n) if !n.is_f64())
}

/// The value of a jansson integer, wrapped to 64 bits.
pub fn integer_value(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .unwrap_or(0),
        _ => 0,
    }
}

/// The value of a jansson number (integer or real) as a double.
pub fn number_value(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        _ => 0.0,
    }
}

// ---------------------------------------------------------------------------
// Loader

const EOF: i32 = -1;
const ERR: i32 = -2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    Invalid,
    Eof,
    Punct(u8),
    Str,
    Int(i64),
    Real(f64),
    True,
    False,
    Null,
}

struct Lexer<'a> {
    data: &'a [u8],
    /// Offset of the next unread byte in `data`.
    pos: usize,
    /// The decoded bytes of the current character (up to 4) and the
    /// read cursor within it, as jansson's stream buffer.
    buf: [u8; 5],
    buf_len: usize,
    buf_pos: usize,
    state: i32,
    line: i32,
    saved: Vec<u8>,
    tok: Tok,
    string: String,
    error: Option<JsonError>,
}

fn utf8_first(b: u8) -> usize {
    match b {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

fn utf8_full(buf: &[u8]) -> bool {
    let size = buf.len();
    let mut value: u32 = match size {
        2 => u32::from(buf[0] & 0x1f),
        3 => u32::from(buf[0] & 0x0f),
        4 => u32::from(buf[0] & 0x07),
        _ => return false,
    };
    for &u in &buf[1..] {
        if !(0x80..=0xbf).contains(&u) {
            return false;
        }
        value = (value << 6) + u32::from(u & 0x3f);
    }
    if value > 0x10ffff || (0xd800..=0xdfff).contains(&value) {
        return false;
    }
    !((size == 2 && value < 0x80) || (size == 3 && value < 0x800) || (size == 4 && value < 0x10000))
}

impl<'a> Lexer<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
        Lexer {
            data,
            pos,
            buf: [0; 5],
            buf_len: 0,
            buf_pos: 0,
            state: 0,
            line: 1,
            saved: Vec::new(),
            tok: Tok::Invalid,
            string: String::new(),
            error: None,
        }
    }

    fn raw_get(&mut self) -> i32 {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                i32::from(b)
            }
            None => EOF,
        }
    }

    /// jansson's error_set: first error wins; context from the saved text.
    fn error(&mut self, msg: String) {
        if self.error.is_some() {
            return;
        }
        let msg = truncate_text(msg);
        let text = if !self.saved.is_empty() {
            if self.saved.len() <= 20 {
                format!("{} near '{}'", msg, String::from_utf8_lossy(&self.saved))
            } else {
                msg
            }
        } else if self.state == ERR {
            msg
        } else {
            format!("{msg} near end of file")
        };
        self.error = Some(JsonError {
            text: truncate_text(text),
            line: self.line,
        });
    }

    fn get(&mut self) -> i32 {
        if self.state != 0 {
            return self.state;
        }
        if self.buf_pos >= self.buf_len {
            let c = self.raw_get();
            if c == EOF {
                self.state = EOF;
                return EOF;
            }
            let b = c as u8;
            self.buf[0] = b;
            self.buf_pos = 0;
            self.buf_len = 1;
            if b >= 0x80 {
                let count = utf8_first(b);
                let mut ok = count >= 2;
                if ok {
                    for i in 1..count {
                        let n = self.raw_get();
                        self.buf[i] = if n == EOF { 0xff } else { n as u8 };
                    }
                    self.buf_len = count;
                    ok = utf8_full(&self.buf[..count]);
                }
                if !ok {
                    self.state = ERR;
                    self.error(format!("unable to decode byte 0x{b:x}"));
                    return ERR;
                }
            }
        }
        let c = self.buf[self.buf_pos];
        self.buf_pos += 1;
        if c == b'\n' {
            self.line += 1;
        }
        i32::from(c)
    }

    fn unget(&mut self, c: i32) {
        if c == EOF || c == ERR {
            return;
        }
        if c == i32::from(b'\n') {
            self.line -= 1;
        }
        self.buf_pos = self.buf_pos.saturating_sub(1);
    }

    fn get_save(&mut self) -> i32 {
        let c = self.get();
        if c >= 0 {
            self.saved.push(c as u8);
        }
        c
    }

    fn unget_unsave(&mut self, c: i32) {
        if c >= 0 {
            self.unget(c);
            self.saved.pop();
        }
    }

    fn save_cached(&mut self) {
        while self.buf_pos < self.buf_len {
            self.saved.push(self.buf[self.buf_pos]);
            self.buf_pos += 1;
        }
    }

    fn scan_string(&mut self) {
        self.tok = Tok::Invalid;
        let mut c = self.get_save();
        while c != i32::from(b'"') {
            if c == ERR {
                return;
            } else if c == EOF {
                self.error("premature end of input".into());
                return;
            } else if (0..=0x1f).contains(&c) {
                self.unget_unsave(c);
                if c == i32::from(b'\n') {
                    self.error("unexpected newline".into());
                } else {
                    self.error(format!("control character 0x{c:x}"));
                }
                return;
            } else if c == i32::from(b'\\') {
                c = self.get_save();
                if c == i32::from(b'u') {
                    c = self.get_save();
                    for _ in 0..4 {
                        if !(c >= 0 && (c as u8).is_ascii_hexdigit()) {
                            self.error("invalid escape".into());
                            return;
                        }
                        c = self.get_save();
                    }
                } else if c >= 0 && b"\"\\/bfnrt".contains(&(c as u8)) {
                    c = self.get_save();
                } else {
                    self.error("invalid escape".into());
                    return;
                }
            } else {
                c = self.get_save();
            }
        }
        // Decode the saved text (between the quotes).
        let raw = self
            .saved
            .get(1..self.saved.len().saturating_sub(1))
            .unwrap_or_default()
            .to_vec();
        let mut out: Vec<u8> = Vec::with_capacity(raw.len());
        let mut i = 0;
        let hex4 = |s: Option<&[u8]>| -> Option<u32> {
            let s = std::str::from_utf8(s?.get(..4)?).ok()?;
            u32::from_str_radix(s, 16).ok()
        };
        let lossy = |s: Option<&[u8]>| String::from_utf8_lossy(s.unwrap_or_default()).into_owned();
        while i < raw.len() {
            if raw[i] != b'\\' {
                out.push(raw[i]);
                i += 1;
                continue;
            }
            i += 1;
            let Some(&e) = raw.get(i) else { break };
            if e == b'u' {
                let Some(mut value) = hex4(raw.get(i + 1..)) else {
                    let s = lossy(raw.get(i - 1..(i + 5).min(raw.len())));
                    self.error(format!("invalid Unicode escape '{s}'"));
                    return;
                };
                i += 5;
                if (0xd800..=0xdbff).contains(&value) {
                    if raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u') {
                        let Some(value2) = hex4(raw.get(i + 2..)) else {
                            let s = lossy(raw.get(i..(i + 6).min(raw.len())));
                            self.error(format!("invalid Unicode escape '{s}'"));
                            return;
                        };
                        i += 6;
                        if (0xdc00..=0xdfff).contains(&value2) {
                            value = ((value - 0xd800) << 10) + (value2 - 0xdc00) + 0x10000;
                        } else {
                            self.error(format!("invalid Unicode '\\u{value:04X}\\u{value2:04X}'"));
                            return;
                        }
                    } else {
                        self.error(format!("invalid Unicode '\\u{value:04X}'"));
                        return;
                    }
                } else if (0xdc00..=0xdfff).contains(&value) {
                    self.error(format!("invalid Unicode '\\u{value:04X}'"));
                    return;
                }
                let ch = char::from_u32(value).unwrap_or('\u{fffd}');
                let mut b = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
            } else {
                out.push(match e {
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    other => other,
                });
                i += 1;
            }
        }
        // The stream was validated as UTF-8 and escapes produce valid UTF-8.
        self.string = String::from_utf8(out).unwrap_or_default();
        self.tok = Tok::Str;
    }

    fn scan_number(&mut self, first: i32) {
        self.tok = Tok::Invalid;
        let mut c = first;
        let is_digit = |c: i32| (i32::from(b'0')..=i32::from(b'9')).contains(&c);
        if c == i32::from(b'-') {
            c = self.get_save();
        }
        if c == i32::from(b'0') {
            c = self.get_save();
            if is_digit(c) {
                self.unget_unsave(c);
                return;
            }
        } else if is_digit(c) {
            loop {
                c = self.get_save();
                if !is_digit(c) {
                    break;
                }
            }
        } else {
            self.unget_unsave(c);
            return;
        }
        if c != i32::from(b'.') && c != i32::from(b'E') && c != i32::from(b'e') {
            self.unget_unsave(c);
            let text = String::from_utf8_lossy(&self.saved).into_owned();
            match text.parse::<i64>() {
                Ok(v) => self.tok = Tok::Int(v),
                Err(_) => {
                    if text.starts_with('-') {
                        self.error("too big negative integer".into());
                    } else {
                        self.error("too big integer".into());
                    }
                }
            }
            return;
        }
        if c == i32::from(b'.') {
            c = self.get();
            if !is_digit(c) {
                self.unget(c);
                return;
            }
            self.saved.push(c as u8);
            loop {
                c = self.get_save();
                if !is_digit(c) {
                    break;
                }
            }
        }
        if c == i32::from(b'E') || c == i32::from(b'e') {
            c = self.get_save();
            if c == i32::from(b'+') || c == i32::from(b'-') {
                c = self.get_save();
            }
            if !is_digit(c) {
                self.unget_unsave(c);
                return;
            }
            loop {
                c = self.get_save();
                if !is_digit(c) {
                    break;
                }
            }
        }
        self.unget_unsave(c);
        let text = String::from_utf8_lossy(&self.saved).into_owned();
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => self.tok = Tok::Real(v),
            _ => self.error("real number overflow".into()),
        }
    }

    fn scan(&mut self) -> Tok {
        self.saved.clear();
        let mut c;
        loop {
            c = self.get();
            if !(c == i32::from(b' ')
                || c == i32::from(b'\t')
                || c == i32::from(b'\n')
                || c == i32::from(b'\r'))
            {
                break;
            }
        }
        if c == EOF {
            self.tok = Tok::Eof;
            return self.tok;
        }
        if c == ERR {
            self.tok = Tok::Invalid;
            return self.tok;
        }
        self.saved.push(c as u8);
        let b = c as u8;
        if b"{}[]:,".contains(&b) {
            self.tok = Tok::Punct(b);
        } else if b == b'"' {
            self.scan_string();
        } else if b.is_ascii_digit() || b == b'-' {
            self.scan_number(c);
        } else if b.is_ascii_alphabetic() {
            loop {
                c = self.get_save();
                if !(c >= 0 && (c as u8).is_ascii_alphabetic()) {
                    break;
                }
            }
            self.unget_unsave(c);
            self.tok = match &self.saved[..] {
                b"true" => Tok::True,
                b"false" => Tok::False,
                b"null" => Tok::Null,
                _ => Tok::Invalid,
            };
        } else {
            self.save_cached();
            self.tok = Tok::Invalid;
        }
        self.tok
    }

    /// Read an object key and its ':' (the current token must be the key);
    /// leaves the token after ':' current.
    fn object_key(&mut self) -> Option<String> {
        if self.tok != Tok::Str {
            self.error("string or '}' expected".into());
            return None;
        }
        let key = std::mem::take(&mut self.string);
        if key.contains('\0') {
            self.error("NUL byte in object key not supported".into());
            return None;
        }
        self.scan();
        if self.tok != Tok::Punct(b':') {
            self.error("':' expected".into());
            return None;
        }
        self.scan();
        Some(key)
    }

    /// jansson's recursive `parse_value`, written with an explicit stack so
    /// that deep nesting cannot overflow the thread stack.  The current
    /// token starts the value.
    fn parse_value(&mut self) -> Option<Value> {
        enum Frame {
            Arr(Vec<Value>),
            Obj(Map<String, Value>, String),
        }
        let mut stack: Vec<Frame> = Vec::new();
        'value: loop {
            if stack.len() + 1 > MAX_DEPTH {
                self.error("maximum parsing depth reached".into());
                return None;
            }
            let mut v = match self.tok {
                Tok::Str => {
                    let s = std::mem::take(&mut self.string);
                    if s.contains('\0') {
                        self.error("\\u0000 is not allowed without JSON_ALLOW_NUL".into());
                        return None;
                    }
                    Value::String(s)
                }
                Tok::Int(i) => Value::Number(Number::from(i)),
                Tok::Real(r) => Number::from_f64(r).map_or(Value::Null, Value::Number),
                Tok::True => Value::Bool(true),
                Tok::False => Value::Bool(false),
                Tok::Null => Value::Null,
                Tok::Punct(b'{') => {
                    self.scan();
                    if self.tok == Tok::Punct(b'}') {
                        Value::Object(Map::new())
                    } else {
                        let key = self.object_key()?;
                        stack.push(Frame::Obj(Map::new(), key));
                        continue 'value;
                    }
                }
                Tok::Punct(b'[') => {
                    self.scan();
                    if self.tok == Tok::Punct(b']') {
                        Value::Array(Vec::new())
                    } else if self.tok == Tok::Eof {
                        self.error("']' expected".into());
                        return None;
                    } else {
                        stack.push(Frame::Arr(Vec::new()));
                        continue 'value;
                    }
                }
                Tok::Invalid => {
                    self.error("invalid token".into());
                    return None;
                }
                _ => {
                    self.error("unexpected token".into());
                    return None;
                }
            };
            // Attach the finished value to its container(s).
            loop {
                match stack.last_mut() {
                    None => return Some(v),
                    Some(Frame::Arr(arr)) => {
                        arr.push(v);
                        self.scan();
                        if self.tok == Tok::Punct(b',') {
                            self.scan();
                            if self.tok != Tok::Eof {
                                continue 'value;
                            }
                        }
                        if self.tok != Tok::Punct(b']') {
                            self.error("']' expected".into());
                            return None;
                        }
                        let Some(Frame::Arr(arr)) = stack.pop() else {
                            return None;
                        };
                        v = Value::Array(arr);
                    }
                    Some(Frame::Obj(map, key)) => {
                        map.insert(std::mem::take(key), v);
                        self.scan();
                        if self.tok == Tok::Punct(b',') {
                            self.scan();
                            let k = self.object_key()?;
                            if let Some(Frame::Obj(_, key)) = stack.last_mut() {
                                *key = k;
                            }
                            continue 'value;
                        }
                        if self.tok != Tok::Punct(b'}') {
                            self.error("'}' expected".into());
                            return None;
                        }
                        let Some(Frame::Obj(map, _)) = stack.pop() else {
                            return None;
                        };
                        v = Value::Object(map);
                    }
                }
            }
        }
    }

    fn parse_json(&mut self, eof_check: bool) -> Result<Value, JsonError> {
        self.scan();
        if self.tok != Tok::Punct(b'[') && self.tok != Tok::Punct(b'{') {
            self.error("'[' or '{' expected".into());
            return Err(self.take_error());
        }
        let Some(v) = self.parse_value() else {
            return Err(self.take_error());
        };
        if eof_check {
            self.scan();
            if self.tok != Tok::Eof {
                self.error("end of file expected".into());
                return Err(self.take_error());
            }
        }
        Ok(v)
    }

    fn take_error(&mut self) -> JsonError {
        self.error.take().unwrap_or(JsonError {
            text: String::new(),
            line: -1,
        })
    }
}

/// Parse a whole document like `json_loads (s, 0, &error)`.
pub fn loads(s: &[u8]) -> Result<Value, JsonError> {
    Lexer::new(s, 0).parse_json(true)
}

/// Reads consecutive JSON documents from a buffer, like repeated
/// `json_loadf (fp, JSON_DISABLE_EOF_CHECK, &error)` calls.
pub struct StreamLoader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> StreamLoader<'a> {
    /// A loader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        StreamLoader { data, pos: 0 }
    }

    /// The next document, or the error jansson would report (including
    /// `'[' or '{' expected near end of file` at the end of the input).
    pub fn next_value(&mut self) -> Result<Value, JsonError> {
        let mut lex = Lexer::new(self.data, self.pos);
        let r = lex.parse_json(false);
        // Characters jansson read ahead into its buffer are consumed; the
        // byte stream continues after the last byte read.
        self.pos = lex.pos;
        r
    }
}

// ---------------------------------------------------------------------------
// Writer

/// Serialize like `json_dumps (v, 0)` (also valid for scalars, as with
/// `JSON_ENCODE_ANY`).
pub fn dumps(v: &Value) -> String {
    let mut out = String::new();
    write_with(&mut out, v, ", ", ": ");
    out
}

/// Serialize like `json_dumps (v, JSON_COMPACT)`.
pub fn dumps_compact(v: &Value) -> String {
    to_compact_string(v)
}

/// Write `value` as compact JSON (`json_dumps (v, JSON_COMPACT)`).
pub fn to_compact_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Append `value` as compact JSON to `out`.
pub fn write_value(out: &mut String, value: &Value) {
    write_with(out, value, ",", ":");
}

fn write_with(out: &mut String, value: &Value, comma: &'static str, colon: &'static str) {
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
                out.push_str(colon);
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
                            stack.push(Step::Text(comma));
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
                            stack.push(Step::Text(comma));
                        }
                    }
                }
            },
        }
    }
}

/// Append an object (as compact JSON) to `out`.
pub fn write_object(out: &mut String, map: &Map<String, Value>) {
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

/// A real number as jansson ≥ 2.14 writes it (the shortest round-trip
/// digits, see the module documentation), or `None` for NaN and
/// infinities (which JSON cannot represent).
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

    fn err(s: &str) -> String {
        loads(s.as_bytes())
            .err()
            .map(|e| e.text)
            .unwrap_or_default()
    }

    #[test]
    fn jansson_error_texts() {
        for (text, want) in [
            ("", "'[' or '{' expected near end of file"),
            ("bad json", "'[' or '{' expected near 'bad'"),
            ("{}x", "end of file expected near 'x'"),
            ("{\"a\" 1}", "':' expected near '1'"),
            ("{\"a\": }", "unexpected token near '}'"),
            ("{\"a\": 1", "'}' expected near end of file"),
            ("[1,", "']' expected near end of file"),
            ("[", "']' expected near end of file"),
            ("[1 2]", "']' expected near '2'"),
            ("{1: 2}", "string or '}' expected near '1'"),
            ("[01]", "invalid token near '0'"),
            (
                "[99999999999999999999]",
                "too big integer near '99999999999999999999'",
            ),
            (
                "[-9999999999999999999]",
                "too big negative integer near '-9999999999999999999'",
            ),
            // Saved text longer than 20 bytes gives no context.
            ("[-99999999999999999999]", "too big negative integer"),
            ("[1e400]", "real number overflow near '1e400'"),
            (
                "[\"a\\u0000\"]",
                "\\u0000 is not allowed without JSON_ALLOW_NUL near '\"a\\u0000\"'",
            ),
            ("[\"\\x\"]", "invalid escape near '\"\\x'"),
            ("[\"abc", "premature end of input near '\"abc'"),
            ("[tru]", "invalid token near 'tru'"),
            (
                "[\"\\uD800\"]",
                "invalid Unicode '\\uD800' near '\"\\uD800\"'",
            ),
            ("[\"a\nb\"]", "unexpected newline near '\"a'"),
            ("\u{e9}", "'[' or '{' expected near '\u{e9}'"),
            // Long saved text gives no context.
            ("[\"aaaaaaaaaaaaaaaaaaaaaaaaa", "premature end of input"),
        ] {
            assert_eq!(err(text), want, "{text:?}");
        }
        assert_eq!(
            loads(b"[\xff]").err().map(|e| e.text).unwrap_or_default(),
            "unable to decode byte 0xff"
        );
    }

    #[test]
    fn error_lines() {
        let e = loads(b"{\n\"a\":\n x}").err().unwrap_or(JsonError {
            text: String::new(),
            line: 0,
        });
        assert_eq!(e.line, 3);
        assert_eq!(e.text, "invalid token near 'x'");
    }

    #[test]
    fn integers_and_reals_are_distinct() {
        let v = loads(b"[1, 1.0, -0, 1e2, 2.5]").unwrap_or(Value::Null);
        assert_eq!(dumps(&v), "[1, 1.0, 0, 100.0, 2.5]");
        assert_eq!(type_name(&v[0]), "integer");
        assert_eq!(type_name(&v[1]), "real");
    }

    #[test]
    fn reals_are_shortest_in_both_layouts() {
        let v = loads(br#"{"starttime": 0.1, "expiration": 1e16, "x": [1.5e-7]}"#)
            .unwrap_or(Value::Null);
        assert_eq!(
            dumps(&v),
            r#"{"starttime": 0.1, "expiration": 1e16, "x": [1.5e-7]}"#
        );
        assert_eq!(
            dumps_compact(&v),
            r#"{"starttime":0.1,"expiration":1e16,"x":[1.5e-7]}"#
        );
    }

    #[test]
    fn dump_formats() {
        let v =
            loads(br#"{"a": [1, {"b": "x\u0001\"/"}], "c": {}, "d": []}"#).unwrap_or(Value::Null);
        assert_eq!(
            dumps(&v),
            r#"{"a": [1, {"b": "x\u0001\"/"}], "c": {}, "d": []}"#
        );
        assert_eq!(
            dumps_compact(&v),
            r#"{"a":[1,{"b":"x\u0001\"/"}],"c":{},"d":[]}"#
        );
    }

    #[test]
    fn stream_loader_reads_consecutive_values() {
        let mut s = StreamLoader::new(b"{\"a\":1}\n[2]{} \n garbage");
        assert!(s.next_value().is_ok());
        assert!(s.next_value().is_ok());
        assert!(s.next_value().is_ok());
        assert_eq!(
            s.next_value().err().map(|e| e.text).unwrap_or_default(),
            "'[' or '{' expected near 'garbage'"
        );
        let mut s = StreamLoader::new(b" {} ");
        assert!(s.next_value().is_ok());
        assert_eq!(
            s.next_value().err().map(|e| e.text).unwrap_or_default(),
            "'[' or '{' expected near end of file"
        );
    }

    #[test]
    fn duplicate_keys_keep_first_position() {
        let v = loads(br#"{"a": 1, "b": 2, "a": 3}"#).unwrap_or(Value::Null);
        assert_eq!(dumps(&v), r#"{"a": 3, "b": 2}"#);
    }

    #[test]
    fn depth_limit() {
        let deep = "[".repeat(3000);
        assert_eq!(err(&deep), "maximum parsing depth reached near '['");
    }

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
