//! RFC 18 events: one JSON object per line with a numeric `timestamp`, a
//! string `name` and an optional object `context`.

use serde_json::{Map, Value};

use crate::json;

/// Why an event (or a line of an eventlog) is invalid.  The texts name the
/// offending field; [`crate::LogError`] (and the `store` crate's errors) prefix
/// them with the line number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EventError {
    /// The line is not JSON.  `column` is 1-based, in characters of the line.
    #[error("invalid JSON at column {column}: {message}")]
    Json { column: usize, message: String },
    /// An integer that does not fit a signed 64-bit value (jansson refuses these).
    #[error("integer out of range")]
    IntegerOutOfRange,
    #[error("event is not a JSON object")]
    NotAnObject,
    #[error("event has no timestamp")]
    MissingTimestamp,
    #[error("timestamp is not a number")]
    TimestampNotNumber,
    #[error("event has no name")]
    MissingName,
    #[error("name is not a string")]
    NameNotString,
    #[error("context is not an object")]
    ContextNotObject,
    #[error("empty line")]
    EmptyLine,
    #[error("event contains a newline")]
    EmbeddedNewline,
    #[error("line is not valid UTF-8")]
    NotUtf8,
    #[error("missing newline at the end of the log")]
    MissingNewline,
    /// A new event's timestamp must be finite and greater than zero (RFC 18).
    #[error("invalid timestamp {0}: it must be a finite number greater than zero")]
    InvalidTimestamp(f64),
    /// A new event needs a name (flux-core refuses `""`).
    #[error("event name is empty")]
    EmptyName,
}

/// One RFC 18 event.
///
/// Fields are public; [`Event::new`] applies flux-core's creation rules
/// (timestamp > 0 and finite, non-empty name) while decoding accepts what
/// flux-core accepts (any number, any string).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub timestamp: f64,
    pub name: String,
    /// Application data; `None` means the `context` key is absent.
    pub context: Option<Map<String, Value>>,
}

impl Event {
    /// A new event, checked as flux-core's `eventlog_entry_create()` checks
    /// one (except that a timestamp of 0 is refused rather than meaning
    /// "now": this crate never reads the clock).
    pub fn new(
        timestamp: f64,
        name: impl Into<String>,
        context: Option<Map<String, Value>>,
    ) -> Result<Event, EventError> {
        let name = name.into();
        if !timestamp.is_finite() || timestamp <= 0.0 {
            return Err(EventError::InvalidTimestamp(timestamp));
        }
        if name.is_empty() {
            return Err(EventError::EmptyName);
        }
        Ok(Event {
            timestamp,
            name,
            context,
        })
    }

    /// Like [`Event::new`] with the context given as any JSON value, which
    /// must be an object.
    pub fn with_context(
        timestamp: f64,
        name: impl Into<String>,
        context: Value,
    ) -> Result<Event, EventError> {
        match context {
            Value::Object(map) => Event::new(timestamp, name, Some(map)),
            _ => Err(EventError::ContextNotObject),
        }
    }

    /// A context member, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.context.as_ref().and_then(|c| c.get(key))
    }

    /// The event as one eventlog line: compact JSON (keys `timestamp`,
    /// `name`, then `context` if present) followed by `\n`, byte for byte
    /// what flux-core's `eventlog_entry_encode()` produces.  Fails only for
    /// a non-finite timestamp, which JSON cannot carry.
    pub fn encode(&self) -> Result<String, EventError> {
        let mut s = self.to_json()?;
        s.push('\n');
        Ok(s)
    }

    /// The event as compact JSON without the trailing newline.
    pub fn to_json(&self) -> Result<String, EventError> {
        let ts = json::format_real(self.timestamp)
            .ok_or(EventError::InvalidTimestamp(self.timestamp))?;
        let mut s = String::with_capacity(64);
        s.push_str("{\"timestamp\":");
        s.push_str(&ts);
        s.push_str(",\"name\":");
        json::write_string(&mut s, &self.name);
        if let Some(ctx) = &self.context {
            s.push_str(",\"context\":");
            json::write_object(&mut s, ctx);
        }
        s.push('}');
        Ok(s)
    }

    /// The event in "object format" (RFC 44 journal responses).
    pub fn to_value(&self) -> Result<Value, EventError> {
        let ts = serde_json::Number::from_f64(self.timestamp)
            .ok_or(EventError::InvalidTimestamp(self.timestamp))?;
        let mut m = Map::new();
        m.insert("timestamp".into(), Value::Number(ts));
        m.insert("name".into(), Value::String(self.name.clone()));
        if let Some(ctx) = &self.context {
            m.insert("context".into(), Value::Object(ctx.clone()));
        }
        Ok(Value::Object(m))
    }

    /// Validate a JSON value as an event, as flux-core's
    /// `eventlog_entry_parse()` does: an object with a numeric `timestamp`
    /// (integer or real, any value), a string `name`, and `context`, if
    /// present, an object.  Other members are ignored.
    pub fn from_value(value: &Value) -> Result<Event, EventError> {
        let Value::Object(obj) = value else {
            return Err(EventError::NotAnObject);
        };
        Event::check_members(obj)?;
        Event::from_object(obj.clone())
    }

    /// [`Event::from_value`] taking ownership (no copy of the context).
    pub fn from_owned_value(value: Value) -> Result<Event, EventError> {
        match value {
            Value::Object(obj) => Event::from_object(obj),
            _ => Err(EventError::NotAnObject),
        }
    }

    fn check_members(obj: &Map<String, Value>) -> Result<(), EventError> {
        match obj.get("timestamp") {
            None => return Err(EventError::MissingTimestamp),
            Some(Value::Number(_)) => {}
            Some(_) => return Err(EventError::TimestampNotNumber),
        }
        match obj.get("name") {
            None => return Err(EventError::MissingName),
            Some(Value::String(_)) => {}
            Some(_) => return Err(EventError::NameNotString),
        }
        match obj.get("context") {
            None | Some(Value::Object(_)) => Ok(()),
            Some(_) => Err(EventError::ContextNotObject),
        }
    }

    fn from_object(mut obj: Map<String, Value>) -> Result<Event, EventError> {
        Event::check_members(&obj)?;
        let timestamp = match obj.get("timestamp") {
            None => return Err(EventError::MissingTimestamp),
            Some(Value::Number(n)) => n.as_f64().ok_or(EventError::TimestampNotNumber)?,
            Some(_) => return Err(EventError::TimestampNotNumber),
        };
        let name = match obj.remove("name") {
            Some(Value::String(s)) => s,
            _ => return Err(EventError::NameNotString),
        };
        let context = match obj.remove("context") {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(EventError::ContextNotObject),
        };
        Ok(Event {
            timestamp,
            name,
            context,
        })
    }

    /// Decode one eventlog line.  A single trailing `\n` is allowed; any
    /// other newline, an empty line, text that is not one JSON object, or a
    /// failed [`Event::from_value`] check is an error.  White space around
    /// the object (including a `\r`) is accepted, as jansson accepts it.
    pub fn decode(line: &str) -> Result<Event, EventError> {
        let body = line.strip_suffix('\n').unwrap_or(line);
        if body.contains('\n') {
            return Err(EventError::EmbeddedNewline);
        }
        if body.is_empty() {
            return Err(EventError::EmptyLine);
        }
        if let Some(ev) = fast::decode(body) {
            return Ok(ev);
        }
        Event::decode_general(body)
    }

    /// [`Event::decode`] through a `Value`: the reference the fast path
    /// must agree with, and the source of every error.
    fn decode_general(body: &str) -> Result<Event, EventError> {
        let value: Value = serde_json::from_str(body).map_err(|e| json_error(body, &e))?;
        if !value.is_object() {
            return Err(EventError::NotAnObject);
        }
        check_integers(&value)?;
        Event::from_owned_value(value)
    }
}

/// Turn a serde_json error into one naming the column within the line.
fn json_error(body: &str, e: &serde_json::Error) -> EventError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    // serde reports the column in bytes; report characters.
    let col_bytes = e.column();
    let column = body
        .char_indices()
        .take_while(|(i, _)| *i < col_bytes)
        .count()
        .max(1);
    EventError::Json { column, message }
}

/// jansson stores integers as signed 64-bit values and refuses larger ones.
fn check_integers(v: &Value) -> Result<(), EventError> {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_u64() && n.as_i64().is_none() => {
                return Err(EventError::IntegerOutOfRange)
            }
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    Ok(())
}

/// An eventlog decode error: which line (1-based) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LogError {
    pub line: usize,
    pub reason: EventError,
}

/// Decode a whole eventlog with flux-core's `eventlog_decode()` rules:
/// the empty string is an empty log; otherwise there must be at least one
/// newline, and every newline-terminated line must be a valid event (an
/// empty line is an error).  **Text after the last newline is ignored**,
/// as flux-core ignores it (a partial read of a log being appended to).
/// The `store` crate's log file treats such a tail as a torn write instead.
pub fn decode_log(log: &str) -> Result<Vec<Event>, LogError> {
    if !log.is_empty() && !log.contains('\n') {
        return Err(LogError {
            line: 1,
            reason: EventError::MissingNewline,
        });
    }
    let mut events = Vec::new();
    let mut rest = log;
    let mut line = 0usize;
    while let Some(nl) = rest.find('\n') {
        line += 1;
        let (text, after) = rest.split_at(nl);
        events.push(Event::decode(text).map_err(|reason| LogError { line, reason })?);
        rest = after.get(1..).unwrap_or("");
    }
    Ok(events)
}

/// Encode events as an eventlog (each line terminated by `\n`); the empty
/// list is the empty string.
pub fn encode_log(events: &[Event]) -> Result<String, EventError> {
    let mut s = String::new();
    for e in events {
        s.push_str(&e.encode()?);
    }
    Ok(s)
}

/// The common shape of an eventlog line, decoded without building a
/// `Value` for the line: an object with exactly a numeric `timestamp`, a
/// string `name` and optionally an object `context` (keys without
/// escapes, each once), integers within jansson's range.  Anything else
/// (including every invalid line) returns `None` and goes through the
/// general decoder, which produces the same event or the exact error.
mod fast {
    use super::{check_integers, Event};
    use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
    use serde_json::{Map, Number, Value};
    use std::fmt;

    pub(super) fn decode(body: &str) -> Option<Event> {
        let Line(ev) = serde_json::from_str(body).ok()?;
        let ctx_ok = ev
            .context
            .iter()
            .flat_map(|c| c.values())
            .all(|v| check_integers(v).is_ok());
        ctx_ok.then_some(ev)
    }

    struct Line(Event);

    impl<'de> Deserialize<'de> for Line {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Line, D::Error> {
            d.deserialize_map(LineVisitor)
        }
    }

    struct LineVisitor;

    impl<'de> Visitor<'de> for LineVisitor {
        type Value = Line;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an event object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Line, A::Error> {
            let mut timestamp: Option<Number> = None;
            let mut name: Option<String> = None;
            let mut context: Option<Context> = None;
            let twice = || de::Error::custom("duplicate member");
            while let Some(key) = m.next_key::<&'de str>()? {
                match key {
                    "timestamp" if timestamp.is_none() => timestamp = Some(m.next_value()?),
                    "name" if name.is_none() => name = Some(m.next_value()?),
                    "context" if context.is_none() => context = Some(m.next_value()?),
                    "timestamp" | "name" | "context" => return Err(twice()),
                    _ => return Err(de::Error::custom("other member")),
                }
            }
            let (Some(ts), Some(name)) = (timestamp, name) else {
                return Err(de::Error::custom("missing member"));
            };
            // jansson's integer range (the general path's check_integers).
            if ts.is_u64() && ts.as_i64().is_none() {
                return Err(de::Error::custom("integer out of range"));
            }
            let timestamp = ts.as_f64().ok_or_else(|| de::Error::custom("timestamp"))?;
            Ok(Line(Event {
                timestamp,
                name,
                context: context.map(|Context(c)| c),
            }))
        }
    }

    /// A context object, built with room for its members up front.
    struct Context(Map<String, Value>);

    impl<'de> Deserialize<'de> for Context {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Context, D::Error> {
            d.deserialize_map(ContextVisitor)
        }
    }

    struct ContextVisitor;

    impl<'de> Visitor<'de> for ContextVisitor {
        type Value = Context;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a context object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Context, A::Error> {
            let mut map = Map::with_capacity(m.size_hint().unwrap_or(4).max(4));
            // Like serde_json's own `Value` visitor: a repeated key keeps
            // its first position and takes the last value.
            while let Some((k, v)) = m.next_entry::<String, Value>()? {
                map.insert(k, v);
            }
            Ok(Context(map))
        }
    }
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    #[test]
    fn fast_path_agrees_with_the_general_decoder() {
        let lines = [
            r#"{"timestamp":1763900000.001,"name":"drain","context":{"idset":"5","nodelist":"node00006","reason":"reason-2","overwrite":0}}"#,
            r#"{"timestamp":1,"name":"x"}"#,
            r#"{"name":"x","timestamp":2.5e-3,"context":{}}"#,
            r#"{"timestamp":-1,"name":"","context":{"a":[1,{"b":null}],"a":2,"c":1e300}}"#,
            r#"{"timestamp":1,"name":"x","context":{"big":18446744073709551615}}"#,
            r#"{"timestamp":18446744073709551615,"name":"x"}"#,
            r#"{"timestamp":9223372036854775807,"name":"x"}"#,
            r#"{"timestamp":1,"name":"x","context":null}"#,
            r#"{"timestamp":1,"name":"x","context":[]}"#,
            r#"{"timestamp":"1","name":"x"}"#,
            r#"{"timestamp":1,"name":2}"#,
            r#"{"timestamp":1}"#,
            r#"{"name":"x"}"#,
            r#"{"timestamp":1,"name":"x","extra":{"y":1}}"#,
            r#"{"timestamp":1,"name":"x","name":"y"}"#,
            r#"{"timestamp":1,"timestamp":2,"name":"x"}"#,
            r#"{"time\u0073tamp":1,"name":"x"}"#,
            r#"{"timestamp":1,"name":"\u00e9\n","context":{"k\"":"v"}}"#,
            r#"{"timestamp":1,"name":"x"} x"#,
            r#"{"timestamp":1,"name":"x","context":{"c":1e400}}"#,
            r#"{"timestamp":1,"name":"x""#,
            r#"[1]"#,
            r#"3"#,
            r#"{}"#,
        ];
        for line in lines {
            assert_eq!(Event::decode(line), Event::decode_general(line), "{line}");
        }
        let ev = Event::decode(lines[3]).unwrap();
        let keys: Vec<_> = ev.context.unwrap().keys().cloned().collect();
        assert_eq!(keys, ["a", "c"], "a repeated key keeps its first place");
        assert!(fast::decode(lines[0]).is_some(), "the common shape is fast");
    }
}
