//! `roster resource eventlog`: the `resource.journal` stream as flux's
//! `ResourceJournalConsumer` presents it (backlog sorted by timestamp,
//! events with a timestamp not after 0 dropped, a missing timestamp
//! replaced by the current time, the end of the backlog marked by the
//! `{"events":[]}` sentinel), formatted by `EventLogFormatter`.
//!
//! `-w EVENT` implies following and stops after the first EVENT whose
//! context matches every `-m KEY=VAL`; `-t FSD` bounds the whole run
//! (`ETIMEDOUT`, exit 1); `-i TARGETS` shows only events about those
//! ranks or hosts (the `idset`/`ranks` context keys for ranks; the
//! `nodelist` key for hosts, else `idset`/`ranks` mapped through the
//! instance hostlist).

use super::service::{call, ReplyStream, Service, StreamItem, SvcError};
use super::Ctx;
use hostlist::Hostlist;
use idset::IdSet;
use pycompat::argparse::Namespace;
use resource_views::EventLogFormatter;
use rpc::catalog::{self as cat, Call};
use rpc::errno::ENODATA;
use rpc::msg;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// flux's `parse_fsd()` (RFC 23 Flux standard duration) in seconds.
pub fn parse_fsd(s: &str) -> Result<f64, String> {
    const BAD: &str = "invalid Flux standard duration";
    if matches!(s, "inf" | "infinity" | "INF" | "INFINITY") {
        return Ok(f64::INFINITY);
    }
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = s.strip_suffix('d') {
        (n, 86400.0)
    } else {
        (s, 1.0)
    };
    let cleaned: String = num.trim().chars().filter(|&c| c != '_').collect();
    let lower = cleaned.to_ascii_lowercase();
    let ok_chars = lower
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'))
        || matches!(
            lower.trim_start_matches(['+', '-']),
            "inf" | "infinity" | "nan"
        );
    if !ok_chars {
        return Err(BAD.into());
    }
    let v: f64 = cleaned.parse().map_err(|_| BAD.to_string())?;
    let secs = v * mult;
    if secs < 0.0 || secs.is_nan() || secs.is_infinite() {
        return Err(BAD.into());
    }
    Ok(secs)
}

/// One `-m KEY=VAL`: VAL is JSON when it parses, else a string.
fn parse_match(arg: &str) -> Result<(String, Value), String> {
    let Some((k, v)) = arg.split_once('=') else {
        return Err(format!("--match-context: missing '=' in {arg}"));
    };
    if k.is_empty() {
        return Err(format!("--match-context: empty key in {arg}"));
    }
    let val = serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::String(v.to_string()));
    Ok((k.to_string(), val))
}

/// Equality for `-m`: numbers within 1e-5 of each other, else JSON equality.
fn values_match(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-5,
            _ => x == y,
        },
        _ => a == b,
    }
}

fn context_matches(ev: &Map<String, Value>, wanted: &[(String, Value)]) -> bool {
    let ctx = ev.get("context").and_then(Value::as_object);
    wanted.iter().all(|(k, v)| {
        ctx.and_then(|c| c.get(k))
            .is_some_and(|x| values_match(x, v))
    })
}

/// The `-i TARGETS` filter.
struct Include {
    ranks: IdSet,
    hosts: Option<HashSet<String>>,
}

impl Include {
    /// Resolve TARGETS against the instance hostlist (rank order).
    fn resolve(targets: &str, instance: &Hostlist) -> Result<Include, String> {
        if let Ok(ids) = IdSet::parse(targets) {
            let size = instance.len();
            if let Some(bad) = ids.iter().find(|&r| r as usize >= size) {
                return Err(format!("--include: rank {bad} is not in this instance"));
            }
            return Ok(Include {
                ranks: ids,
                hosts: None,
            });
        }
        let hl = Hostlist::decode(targets)
            .map_err(|_| format!("--include: invalid targets: {targets}"))?;
        let mut index: std::collections::HashMap<String, Vec<u32>> =
            std::collections::HashMap::new();
        for (i, name) in instance.iter().enumerate() {
            index
                .entry(name)
                .or_default()
                .push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        let mut ranks = IdSet::new();
        let mut hosts = HashSet::new();
        for h in hl.iter() {
            let Some(rs) = index.get(&h) else {
                return Err(format!("--include: host {h} is not in this instance"));
            };
            for r in rs {
                ranks.insert(*r);
            }
            hosts.insert(h);
        }
        Ok(Include {
            ranks,
            hosts: Some(hosts),
        })
    }

    fn ids_match(&self, ctx: &Map<String, Value>) -> bool {
        ["idset", "ranks"].iter().any(|k| {
            ctx.get(*k)
                .and_then(Value::as_str)
                .and_then(|s| IdSet::parse(s).ok())
                .is_some_and(|ids| ids.intersects(&self.ranks))
        })
    }

    fn matches(&self, ev: &Map<String, Value>) -> bool {
        let Some(ctx) = ev.get("context").and_then(Value::as_object) else {
            return false;
        };
        if let Some(hosts) = &self.hosts {
            if let Some(nl) = ctx.get("nodelist").and_then(Value::as_str) {
                return Hostlist::decode(nl)
                    .map(|h| h.iter().any(|x| hosts.contains(&x)))
                    .unwrap_or(false);
            }
        }
        self.ids_match(ctx)
    }
}

/// The instance hostlist: the broker `hostlist` attribute when the service
/// offers `attr.get`, else the nodelist of R from `resource.status`.
fn instance_hostlist(svc: &mut dyn Service) -> Result<Hostlist, SvcError> {
    let req = msg::AttrGetRequest {
        name: "hostlist".into(),
    };
    if let Ok(v) = call::<cat::AttrGet>(svc, &req) {
        let attr = msg::decode_reply::<msg::AttrGetResponse>(cat::AttrGet::TOPIC, &v);
        if let Ok(Ok(h)) = attr.map(|a| Hostlist::decode(&a.value)) {
            return Ok(h);
        }
    }
    let st = call::<cat::Status>(svc, &msg::Empty {})?;
    let st = msg::decode_reply::<msg::StatusResponse>(cat::Status::TOPIC, &st).unwrap_or_default();
    Ok(rset::Rset::from_json(&st.r)
        .ok()
        .and_then(|r| r.nodelist())
        .unwrap_or_default())
}

enum Next {
    /// Keep reading.
    More,
    /// Stop with this exit status.
    Exit(i32),
}

struct Run {
    formatter: EventLogFormatter,
    include: Option<Include>,
    wait: Option<String>,
    matches: Vec<(String, Value)>,
    flush_each: bool,
}

impl Run {
    /// Show one event; tell whether to go on.
    fn show(&mut self, ev: &Map<String, Value>, ctx: &mut Ctx<'_>) -> Next {
        if !ev.contains_key("name") {
            return Next::Exit(0);
        }
        if let Some(inc) = &self.include {
            if !inc.matches(ev) {
                return Next::More;
            }
        }
        match self.formatter.format(&Value::Object(ev.clone()), ctx.zone) {
            Ok(line) => {
                let w = writeln!(ctx.out, "{line}");
                let f = if self.flush_each {
                    ctx.out.flush()
                } else {
                    Ok(())
                };
                if w.and(f).is_err() {
                    return Next::Exit(1);
                }
            }
            Err(e) => return Next::Exit(ctx.fail(&e.to_string())),
        }
        if let Some(w) = &self.wait {
            if ev.get("name").and_then(Value::as_str) == Some(w.as_str())
                && context_matches(ev, &self.matches)
            {
                return Next::Exit(0);
            }
        }
        Next::More
    }
}

/// The events of one journal response, as the consumer keeps them.
fn response_events(resp: &Value, now: f64) -> Result<Vec<Map<String, Value>>, String> {
    let events = match resp.get("events") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err("'events' is not a list".into()),
        None => return Err("'events'".into()),
    };
    let mut out = Vec::new();
    for e in events {
        let Value::Object(m) = e else {
            return Err("journal event is not an object".into());
        };
        let mut m = m.clone();
        if !m.contains_key("timestamp") {
            m.insert("timestamp".into(), json!(now));
        }
        let ts = match m.get("timestamp") {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
            Some(other) => {
                return Err(format!(
                    "'>' not supported between instances of '{}' and 'float'",
                    match other {
                        Value::String(_) => "str",
                        Value::Bool(_) => "bool",
                        Value::Null => "NoneType",
                        Value::Array(_) => "list",
                        _ => "dict",
                    }
                ))
            }
            None => 0.0,
        };
        if !m.contains_key("context") {
            m.insert("context".into(), Value::Object(Map::new()));
        }
        if ts > 0.0 {
            out.push(m);
        }
    }
    Ok(out)
}

fn ts_of(m: &Map<String, Value>) -> f64 {
    m.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0)
}

/// Read the next stream item, honoring the overall deadline.
fn next_item(stream: &mut dyn ReplyStream, deadline: Option<Instant>) -> StreamItem {
    match deadline {
        None => stream.next(None),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return StreamItem::Timeout;
            }
            stream.next(Some(left))
        }
    }
}

/// `roster resource eventlog`.
pub fn eventlog(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let (format, time_format) = if ns.flag("json") {
        ("json", ns.str("time_format").unwrap_or("raw"))
    } else if ns.flag("human") {
        ("text", "human")
    } else {
        (
            ns.str("format").unwrap_or("text"),
            ns.str("time_format").unwrap_or("raw"),
        )
    };
    let color = ctx.color(ns.str("color"));
    let mut matches = Vec::new();
    for m in ns.list("match_context") {
        matches.push(ctx.check(parse_match(m))?);
    }
    let timeout = ctx.check(ns.str("timeout").map(parse_fsd).transpose())?;
    let formatter = ctx.check(EventLogFormatter::new(format, time_format, color))?;
    let include = match ns.str("include") {
        None => None,
        Some(t) => {
            let hl = ctx.rpc_check(instance_hostlist(svc))?;
            Some(ctx.check(Include::resolve(t, &hl))?)
        }
    };
    let wait = ns.str("wait").map(String::from);
    let follow = ns.flag("follow") || wait.is_some();
    let start = Instant::now();
    let deadline = timeout
        .filter(|t| t.is_finite())
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .map(|d| start + d);
    let mut stream = ctx.rpc_check(svc.journal())?;
    let mut run = Run {
        formatter,
        include,
        wait,
        matches,
        flush_each: false,
    };
    // The backlog, up to the sentinel.
    let mut backlog: Vec<Map<String, Value>> = Vec::new();
    loop {
        match next_item(stream.as_mut(), deadline) {
            StreamItem::Payload(v) => {
                let empty = v
                    .get("events")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.is_empty());
                if empty {
                    break;
                }
                backlog.extend(ctx.check(response_events(&v, (ctx.now)()))?);
            }
            StreamItem::End(e) => return Err(ctx.rpc_fail(&e)),
            StreamItem::Timeout => return Err(ctx.fail("ETIMEDOUT")),
        }
    }
    backlog.sort_by(|a, b| ts_of(a).total_cmp(&ts_of(b)));
    for ev in &backlog {
        if let Next::Exit(code) = run.show(ev, ctx) {
            let _ = ctx.out.flush();
            return Ok(code);
        }
    }
    let _ = ctx.out.flush();
    if !follow {
        return Ok(0);
    }
    run.flush_each = true;
    loop {
        match next_item(stream.as_mut(), deadline) {
            StreamItem::Payload(v) => {
                let evs = ctx.check(response_events(&v, (ctx.now)()))?;
                for ev in &evs {
                    if let Next::Exit(code) = run.show(ev, ctx) {
                        return Ok(code);
                    }
                }
            }
            StreamItem::End(e) if e.errnum() == ENODATA && matches!(e, SvcError::Rpc(_)) => {
                return Ok(0)
            }
            StreamItem::End(e) => return Err(ctx.rpc_fail(&e)),
            StreamItem::Timeout => return Err(ctx.fail("ETIMEDOUT")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsd() {
        assert_eq!(parse_fsd("10"), Ok(10.0));
        assert_eq!(parse_fsd("0.5"), Ok(0.5));
        assert_eq!(parse_fsd("1.5m"), Ok(90.0));
        assert_eq!(parse_fsd("2h"), Ok(7200.0));
        assert_eq!(parse_fsd("1d"), Ok(86400.0));
        assert_eq!(parse_fsd("250ms"), Ok(0.25));
        assert_eq!(parse_fsd("inf"), Ok(f64::INFINITY));
        for bad in ["notanumber", "-1", "1x", "", "s", "infs", "nan"] {
            assert_eq!(
                parse_fsd(bad),
                Err("invalid Flux standard duration".to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn match_context_values() {
        assert_eq!(
            parse_match("idset=\"0\""),
            Ok(("idset".to_string(), json!("0")))
        );
        assert_eq!(
            parse_match("reason=testing"),
            Ok(("reason".to_string(), json!("testing")))
        );
        assert_eq!(parse_match("a=b=c"), Ok(("a".to_string(), json!("b=c"))));
        assert!(parse_match("noequals").is_err());
        assert!(parse_match("=val").is_err());
        let ev: Map<String, Value> = serde_json::from_str(
            r#"{"name":"resource-update","context":{"expiration":1700000000.0,"n":1}}"#,
        )
        .unwrap_or_default();
        let (k, v) = parse_match("expiration=1700000000.000001").unwrap_or_default();
        assert!(context_matches(&ev, &[(k, v)]));
        let (k, v) = parse_match("expiration=1700000000.1").unwrap_or_default();
        assert!(!context_matches(&ev, &[(k, v)]));
        assert!(!context_matches(&ev, &[("missing".into(), json!(1))]));
    }

    #[test]
    fn include_filter() {
        let inst = Hostlist::decode("fake[0-3]").unwrap_or_default();
        let ev = |s: &str| -> Map<String, Value> { serde_json::from_str(s).unwrap_or_default() };
        let by_rank = Include::resolve("1", &inst).unwrap_or_else(|e| panic!("{e}"));
        assert!(by_rank.matches(&ev(r#"{"name":"drain","context":{"idset":"0-1"}}"#)));
        assert!(by_rank.matches(&ev(r#"{"name":"restart","context":{"ranks":"0-3"}}"#)));
        assert!(!by_rank.matches(&ev(r#"{"name":"drain","context":{"idset":"2"}}"#)));
        assert!(!by_rank.matches(&ev(
            r#"{"name":"resource-define","context":{"method":"kvs"}}"#
        )));
        let by_host = Include::resolve("fake2", &inst).unwrap_or_else(|e| panic!("{e}"));
        assert!(by_host.matches(&ev(
            r#"{"name":"drain","context":{"idset":"0","nodelist":"fake[1-2]"}}"#
        )));
        assert!(!by_host.matches(&ev(
            r#"{"name":"drain","context":{"idset":"2","nodelist":"fake1"}}"#
        )));
        assert!(by_host.matches(&ev(r#"{"name":"online","context":{"idset":"2-3"}}"#)));
        assert!(Include::resolve("42", &inst).is_err());
        assert!(Include::resolve("foo", &inst).is_err());
    }
}
