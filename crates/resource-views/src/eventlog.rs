//! flux's `EventLogFormatter` (`flux.eventlog`), used by `flux resource
//! eventlog`: text or JSON lines, raw/iso/offset/human timestamps, and
//! optional color.

use pycompat::error::{PyError, PyResult};
use pycompat::pyfmt::{format_float, format_int};
use pycompat::repr::json_dumps;
use pycompat::time::{LocalDateTime, LocalZone};
use serde_json::{Map, Value};

/// Output format (`-f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventFormat {
    /// `text`: `<time> <name> key=value ...`
    Text,
    /// `json`: one compact JSON object per line.
    Json,
}

/// Timestamp format (`-T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    /// `raw`: seconds since the epoch, `%11.6f`.
    Raw,
    /// `iso`: local ISO 8601 with microseconds and offset (`Z` for UTC).
    Iso,
    /// `offset`: seconds since the first event, `%15.6f`.
    Offset,
    /// `human` (also `reltime`): `[Mon DD HH:MM]` breaks, then
    /// `[+SS.ssssss]` offsets within the minute.
    Human,
}

const YELLOW: &str = "\x1b[33m";
const GREEN: &str = "\x1b[32m";
const BLUE: &str = "\x1b[34m";
const MAGENTA: &str = "\x1b[35m";
const GRAY: &str = "\x1b[37m";
const EXCEPTION: &str = "\x1b[1m\x1b[31m";
const TIMEBREAK: &str = "\x1b[1m\x1b[32m";
const RESET: &str = "\x1b[0m";

/// Formats eventlog entries one at a time, keeping the state the offset
/// and human time formats need.
#[derive(Debug, Clone)]
pub struct EventLogFormatter {
    format: EventFormat,
    time_format: TimeFormat,
    color: bool,
    t0: Option<Value>,
    last_dt: Option<LocalDateTime>,
}

impl EventLogFormatter {
    /// `EventLogFormatter(format, timestamp_format, color)` with flux's
    /// argument names (`text`/`json`; `raw`/`iso`/`offset`/`human`/`reltime`)
    /// and color already resolved to on/off.
    pub fn new(format: &str, time_format: &str, color: bool) -> PyResult<EventLogFormatter> {
        let format = match format {
            "text" => EventFormat::Text,
            "json" => EventFormat::Json,
            other => return Err(PyError::Value(format!("Invalid entry_fmt: {other}"))),
        };
        let time_format = match time_format {
            "raw" => TimeFormat::Raw,
            "iso" => TimeFormat::Iso,
            "offset" => TimeFormat::Offset,
            "human" | "reltime" => TimeFormat::Human,
            other => return Err(PyError::Value(format!("Invalid timestamp_fmt: {other}"))),
        };
        Ok(EventLogFormatter {
            format,
            time_format,
            color,
            t0: None,
            last_dt: None,
        })
    }

    /// The `-H/--human` combination: text with human timestamps.
    pub fn human(color: bool) -> EventLogFormatter {
        EventLogFormatter {
            format: EventFormat::Text,
            time_format: TimeFormat::Human,
            color,
            t0: None,
            last_dt: None,
        }
    }

    fn c(&self, code: &'static str) -> &'static str {
        if self.color {
            code
        } else {
            ""
        }
    }

    fn reset(&self) -> &'static str {
        self.c(RESET)
    }

    /// Format one RFC 18 event (`{"timestamp", "name", "context"?}`),
    /// without the trailing newline.
    pub fn format(&mut self, event: &Value, zone: &dyn LocalZone) -> PyResult<String> {
        let Value::Object(map) = event else {
            return Err(PyError::type_err(
                "cannot convert dictionary update sequence element #0 to a sequence",
            ));
        };
        let mut entry = map.clone();
        if !entry.contains_key("context") {
            entry.insert("context".into(), Value::Object(Map::new()));
        }
        match self.format {
            EventFormat::Json => Ok(self.format_json(entry)),
            EventFormat::Text => self.format_text(&entry, zone),
        }
    }

    fn format_json(&self, mut entry: Map<String, Value>) -> String {
        let empty = match entry.get("context") {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Null) => true,
            Some(Value::Bool(b)) => !b,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            None => false,
        };
        if empty {
            entry.remove("context");
        }
        json_dumps(&Value::Object(entry), ",", ":", false)
    }

    fn format_text(
        &mut self,
        entry: &Map<String, Value>,
        zone: &dyn LocalZone,
    ) -> PyResult<String> {
        let ts = entry
            .get("timestamp")
            .ok_or_else(|| PyError::Key("timestamp".into()))?;
        let ts = self.timestamp(ts, zone)?;
        let name = match entry.get("name") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(PyError::Type(format!(
                    "can only concatenate str (not \"{}\") to str",
                    crate::value::FieldValue::from_json(other).type_name()
                )))
            }
            None => return Err(PyError::Key("name".into())),
        };
        let ncolor = if name == "exception" {
            self.c(EXCEPTION)
        } else {
            self.c(YELLOW)
        };
        let mut out = format!("{ts} {ncolor}{name}{}", self.reset());
        match entry.get("context") {
            Some(Value::Object(ctx)) => {
                for (k, v) in ctx {
                    let vcolor = match v {
                        Value::Number(_) => self.c(GRAY),
                        _ => self.c(MAGENTA),
                    };
                    out.push_str(&format!(
                        " {}{k}{}={vcolor}{}{}",
                        self.c(BLUE),
                        self.reset(),
                        json_dumps(v, ",", ":", false),
                        self.reset()
                    ));
                }
            }
            Some(other) => {
                return Err(PyError::Attribute(format!(
                    "'{}' object has no attribute 'items'",
                    crate::value::FieldValue::from_json(other).type_name()
                )))
            }
            None => {}
        }
        Ok(out)
    }

    fn timestamp(&mut self, ts: &Value, zone: &dyn LocalZone) -> PyResult<String> {
        if self.t0.is_none() {
            self.t0 = Some(ts.clone());
        }
        let num = |v: &Value| -> PyResult<f64> {
            v.as_f64().ok_or_else(|| {
                PyError::Type(format!(
                    "unsupported operand type(s) for -: '{}' and 'int'",
                    crate::value::FieldValue::from_json(v).type_name()
                ))
            })
        };
        let fmt_num = |v: &Value, spec: &str| -> PyResult<String> {
            match v {
                Value::Number(n) if n.is_i64() => {
                    format_int(i128::from(n.as_i64().unwrap_or(0)), spec, "int")
                }
                Value::Number(n) => format_float(n.as_f64().unwrap_or(0.0), spec),
                other => crate::value::FieldValue::from_json(other).format(spec),
            }
        };
        if self.time_format == TimeFormat::Human {
            return self.timestamp_human(num(ts)?, zone);
        }
        let result = match self.time_format {
            TimeFormat::Raw => fmt_num(ts, "11.6f")?,
            TimeFormat::Iso => {
                let t = num(ts)?;
                let dt = LocalDateTime::from_timestamp(t, zone)?;
                let tz = dt.strftime("%z", true, zone).replace("+0000", "Z");
                let us = ((t - t.trunc()) * 1e6).trunc() as i128;
                format!(
                    "{}{}{tz}",
                    dt.strftime("%Y-%m-%dT%T.", true, zone),
                    format_int(us, "06d", "int")?
                )
            }
            _ => {
                let t0 = self.t0.clone().unwrap_or(Value::Null);
                let d = match (ts.as_i64(), t0.as_i64()) {
                    (Some(a), Some(b)) if ts.is_i64() && t0.is_i64() => {
                        Value::from(a.wrapping_sub(b))
                    }
                    _ => Value::from(num(ts)? - num(&t0)?),
                };
                fmt_num(&d, "15.6f")?
            }
        };
        Ok(format!("{}{result}{}", self.c(GREEN), self.reset()))
    }

    fn timestamp_human(&mut self, ts: f64, zone: &dyn LocalZone) -> PyResult<String> {
        let dt = LocalDateTime::from_timestamp(ts, zone)?;
        if let Some(last) = &self.last_dt {
            let wall = |d: &LocalDateTime| -> i128 {
                (i128::from(d.unix) + i128::from(d.offset)) * 1_000_000 + i128::from(d.micro)
            };
            let delta = wall(&dt) - wall(last);
            if delta < 60_000_000 {
                let sec = delta as f64 / 1e6;
                return Ok(format!(
                    "{}[{}]{}",
                    self.c(GREEN),
                    format_float(sec, ">+11.6f")?,
                    self.reset()
                ));
            }
        }
        self.last_dt = Some(dt);
        let mday = dt.strftime("%b%d %H:%M", true, zone);
        let tb = self.c(TIMEBREAK);
        Ok(format!("{tb}[{mday}]{}", self.reset()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pycompat::time::FixedZone;

    fn ev(s: &str) -> Value {
        serde_json::from_str(s).unwrap_or(Value::Null)
    }

    fn formatter(format: &str, time: &str, color: bool) -> EventLogFormatter {
        EventLogFormatter::new(format, time, color)
            .unwrap_or_else(|_| EventLogFormatter::human(false))
    }

    /// Each event in turn through `f` (in UTC) gives its line.
    fn check(mut f: EventLogFormatter, cases: &[(&str, &str)]) {
        let z = FixedZone::utc();
        for (event, want) in cases {
            assert_eq!(
                f.format(&ev(event), &z).unwrap_or_default(),
                *want,
                "{event}"
            );
        }
    }

    #[test]
    fn text_raw() {
        check(
            formatter("text", "raw", false),
            &[
                (
                    r#"{"timestamp":1713906350.984611,"name":"drain","context":{"idset":"1","nodelist":"fake1","reason":"x","overwrite":0}}"#,
                    "1713906350.984611 drain idset=\"1\" nodelist=\"fake1\" reason=\"x\" overwrite=0",
                ),
                (
                    r#"{"timestamp":1713906351.5,"name":"truncate"}"#,
                    "1713906351.500000 truncate",
                ),
                (
                    r#"{"timestamp":5,"name":"online","context":{"idset":"0-1","x":1.0,"l":[1,"é"],"b":true,"n":null}}"#,
                    "   5.000000 online idset=\"0-1\" x=1.0 l=[1,\"é\"] b=true n=null",
                ),
            ],
        );
    }

    #[test]
    fn json_lines() {
        let restart = r#"{"timestamp":1713906350.98,"name":"restart","context":{"ranks":"0-1","online":"","nodelist":"a,b"}}"#;
        check(
            formatter("json", "raw", true),
            &[
                (restart, restart),
                (
                    r#"{"timestamp":1.0,"name":"truncate","context":{}}"#,
                    r#"{"timestamp":1.0,"name":"truncate"}"#,
                ),
                (
                    r#"{"name":"x","timestamp":2}"#,
                    r#"{"name":"x","timestamp":2}"#,
                ),
            ],
        );
    }

    #[test]
    fn iso_and_offset() {
        let define = r#"{"timestamp":1713906350.984611,"name":"resource-define","context":{"method":"kvs"}}"#;
        check(
            formatter("text", "iso", false),
            &[(
                define,
                "2024-04-23T21:05:50.984611Z resource-define method=\"kvs\"",
            )],
        );
        let pst = FixedZone::new(-7 * 3600, "PDT");
        assert_eq!(
            formatter("text", "iso", false)
                .format(&ev(define), &pst)
                .unwrap_or_default(),
            "2024-04-23T14:05:50.984611-0700 resource-define method=\"kvs\""
        );
        check(
            formatter("text", "offset", false),
            &[
                (r#"{"timestamp":100.25,"name":"a"}"#, "       0.000000 a"),
                (r#"{"timestamp":102.5,"name":"b"}"#, "       2.250000 b"),
            ],
        );
    }

    #[test]
    fn human_breaks_and_offsets() {
        let z = FixedZone::utc();
        let mut f = EventLogFormatter::human(false);
        let lines: Vec<String> = [
            1713906350.5,
            1713906351.0,
            1713906409.0,
            1713906411.25,
            1713906500.0,
        ]
        .iter()
        .map(|t| {
            let e = serde_json::json!({"timestamp": t, "name": "e"});
            f.format(&e, &z).unwrap_or_default()
        })
        .collect();
        assert_eq!(
            lines,
            vec![
                "[Apr23 21:05] e",
                "[  +0.500000] e",
                "[ +58.500000] e",
                "[Apr23 21:06] e",
                "[Apr23 21:08] e",
            ]
        );
    }

    #[test]
    fn colors() {
        let z = FixedZone::utc();
        let drain = r#"{"timestamp":1.0,"name":"drain","context":{"idset":"1","overwrite":0}}"#;
        check(
            formatter("text", "raw", true),
            &[(
                drain,
                "\x1b[32m   1.000000\x1b[0m \x1b[33mdrain\x1b[0m \x1b[34midset\x1b[0m=\x1b[35m\"1\"\x1b[0m \x1b[34moverwrite\x1b[0m=\x1b[37m0\x1b[0m",
            )],
        );
        let e = ev(drain);
        let mut f = EventLogFormatter::human(true);
        assert!(f
            .format(&e, &z)
            .unwrap_or_default()
            .starts_with("\x1b[1m\x1b[32m[Jan01 00:00]\x1b[0m"));
        assert_eq!(
            EventLogFormatter::new("yaml", "raw", false)
                .err()
                .map(|e| e.to_string()),
            Some("Invalid entry_fmt: yaml".to_string())
        );
        assert_eq!(
            EventLogFormatter::new("text", "x", false)
                .err()
                .map(|e| e.to_string()),
            Some("Invalid timestamp_fmt: x".to_string())
        );
    }
}
