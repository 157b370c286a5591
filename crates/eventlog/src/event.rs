//! RFC 18 events: one JSON object per line with a numeric `timestamp`, a
//! string `name` and an optional object `context`.

use serde_json::{Map, Value};

use crate::json;

/// Why an event (or a line of an eventlog) is invalid.  The texts name the
/// offending field; [`crate::LogError`] and [`crate::EventLogError`] prefix
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
/// [`crate::EventLogFile`] treats such a tail as a torn write instead.
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
