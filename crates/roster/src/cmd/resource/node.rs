//! Roster's per-node views, built from `resource.status`,
//! `resource.sched-status` and the journal (read with Roster's
//! `requester` key):
//!
//! * `show TARGETS [--json]`: one node at a time, as `scontrol show node`;
//! * `history TARGETS [--since WHEN] [--json]`: the events that touched
//!   each node (drains with their requester, online/offline,
//!   torpid/lively, restarts);
//! * `status --at WHEN` (see [`status_at`]): the journal replayed up to
//!   WHEN, as a `resource.status` payload for the usual renderer.
//!
//! The journal is bounded (`journal-max`) and holds this run's liveness
//! events only; what happened before its first event is not known, and
//! the views say so.

use super::service::{call, open, Service, StreamItem, SvcError};
use super::views::sched_status;
use super::Ctx;
use idset::IdSet;
use pycompat::argparse::Namespace;
use pycompat::time::{days_from_civil, LocalDateTime, LocalZone};
use resource_views::allocated_ranks;
use rpc::catalog as cat;
use rpc::msg;
use rset::Rset;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// An instant given on the command line: seconds since the epoch, an ISO
/// date (`2026-11-28`), date-time (`2026-11-28T03:00[:SS]`, `T` or a
/// space, local time unless it ends in `Z`), a time today (`03:00`), or
/// a time before now (`-2h` or `2h ago`, `-90m`, `-1d12h`, `-30s`).
pub fn parse_when(text: &str, now: f64, zone: &dyn LocalZone) -> Result<f64, String> {
    let bad = || {
        format!(
            "invalid time '{text}': expected an ISO date-time (2026-11-28T03:00), \
             a time today (03:00), a time ago (-2h or '2h ago', -90m, -1d) or seconds since the epoch"
        )
    };
    let t = text.trim();
    // `-2h` (`--at=-2h`: argparse takes `--at -2h` for an option) or `2h ago`.
    let rel = t
        .strip_prefix('-')
        .or_else(|| t.strip_suffix(" ago").map(str::trim_end));
    if let Some(rel) = rel {
        return relative(rel).map(|s| now - s).ok_or_else(bad);
    }
    if let Ok(secs) = t.parse::<f64>() {
        return secs.is_finite().then_some(secs).ok_or_else(bad);
    }
    let (t, utc) = match t.strip_suffix('Z') {
        Some(rest) => (rest, true),
        None => (t, false),
    };
    let (date, time) = match t.split_once(['T', ' ']) {
        Some((d, tm)) => (Some(d), Some(tm)),
        None if t.contains(':') => (None, Some(t)),
        None => (Some(t), None),
    };
    let days = match date {
        Some(d) => {
            let mut p = d.split('-');
            let (y, m, dd) = (p.next(), p.next(), p.next());
            let (Some(y), Some(m), Some(dd), None) = (y, m, dd, p.next()) else {
                return Err(bad());
            };
            let y: i64 = y.parse().map_err(|_| bad())?;
            let m: u32 = m.parse().map_err(|_| bad())?;
            let dd: u32 = dd.parse().map_err(|_| bad())?;
            if !(1..=12).contains(&m) || !(1..=31).contains(&dd) {
                return Err(bad());
            }
            days_from_civil(y, m, dd)
        }
        None => {
            let today = LocalDateTime::from_unix(now.floor() as i64, 0, zone);
            days_from_civil(today.year, today.month, today.day)
        }
    };
    let secs = match time {
        None => 0.0,
        Some(tm) => {
            let mut p = tm.split(':');
            let h: u32 = p.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let mi: u32 = p.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            let s: f64 = match p.next() {
                Some(v) => v.parse().map_err(|_| bad())?,
                None => 0.0,
            };
            if p.next().is_some() || h > 23 || mi > 59 || !(0.0..61.0).contains(&s) {
                return Err(bad());
            }
            f64::from(h * 3600 + mi * 60) + s
        }
    };
    let naive = (days * 86_400) as f64 + secs;
    if utc {
        return Ok(naive);
    }
    // The offset in effect at the local time (twice: near a change).
    let guess = naive as i64 - i64::from(zone.utc_offset(naive as i64));
    Ok(naive - f64::from(zone.utc_offset(guess)))
}

/// `2h`, `90m`, `1d12h`, `30s`, `45` (seconds) → seconds.
fn relative(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut num = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86_400.0,
            'w' => 604_800.0,
            _ => return None,
        };
        total += num.parse::<f64>().ok()? * unit;
        num.clear();
    }
    if !num.is_empty() {
        total += num.parse::<f64>().ok()?;
    }
    (!text.is_empty() && total.is_finite()).then_some(total)
}

/// A date and time with the year, in local time.
fn when(t: f64, zone: &dyn LocalZone) -> String {
    match LocalDateTime::from_timestamp(t, zone) {
        Ok(dt) => dt.strftime("%Y-%m-%d %H:%M:%S", false, zone),
        Err(_) => format!("{t}"),
    }
}

/// `3d 4h`, `2h 5m`, `5m 3s`, `42s`.
fn age(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {}s", s % 60),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// One drain as the journal recorded it.
#[derive(Debug, Clone, PartialEq)]
struct DrainRec {
    timestamp: f64,
    reason: String,
    requester: Option<String>,
}

/// An undrain: when, and who asked.
type Undrain = (f64, Option<String>);

/// The state the journal's events build, up to some instant.
#[derive(Debug, Default)]
struct Replay {
    online: IdSet,
    torpid: IdSet,
    drains: BTreeMap<u32, DrainRec>,
    /// When each rank last went online or offline (or the service
    /// restarted), as far as the journal tells.
    since: BTreeMap<u32, f64>,
    torpid_since: BTreeMap<u32, f64>,
    /// The last drain each rank had, and its undrain (time, requester).
    last_drain: BTreeMap<u32, (DrainRec, Option<Undrain>)>,
    /// The journal's first event (nothing is known before it).
    first: Option<f64>,
}

fn ids_of(c: &Map<String, Value>, key: &str) -> IdSet {
    c.get(key)
        .and_then(Value::as_str)
        .and_then(|s| IdSet::parse(s).ok())
        .unwrap_or_default()
}

fn text_of(c: &Map<String, Value>, key: &str) -> Option<String> {
    c.get(key).and_then(Value::as_str).map(String::from)
}

impl Replay {
    /// Apply one journal event (object form).
    fn apply(&mut self, t: f64, name: &str, c: &Map<String, Value>) {
        self.first.get_or_insert(t);
        let ids = ids_of(c, "idset");
        match name {
            "restart" | "truncate" => {
                self.online = ids_of(c, "online");
                self.torpid = ids_of(c, "torpid");
                let all = ids_of(c, "ranks");
                for r in all.iter().chain(self.online.iter()) {
                    self.since.insert(r, t);
                }
                if let Some(Value::Object(d)) = c.get("drain") {
                    self.drains.clear();
                    for (k, v) in d {
                        let rec = DrainRec {
                            timestamp: v["timestamp"].as_f64().unwrap_or(t),
                            reason: v["reason"].as_str().unwrap_or("").into(),
                            requester: None,
                        };
                        for r in IdSet::parse(k).unwrap_or_default().iter() {
                            self.drains.insert(r, rec.clone());
                        }
                    }
                }
            }
            "online" | "offline" => {
                for r in ids.iter() {
                    let changed = if name == "online" {
                        self.online.insert(r)
                    } else {
                        self.online.remove(r)
                    };
                    if changed {
                        self.since.insert(r, t);
                    }
                }
            }
            "torpid" | "lively" => {
                for r in ids.iter() {
                    if name == "torpid" {
                        self.torpid.insert(r);
                        self.torpid_since.insert(r, t);
                    } else {
                        self.torpid.remove(r);
                        self.torpid_since.remove(&r);
                    }
                }
            }
            // flux's rule: overwrite 0 keeps a drained rank's record, 1
            // replaces the reason, 2 the time as well (missing: 1).
            "drain" => {
                let overwrite = c.get("overwrite").and_then(Value::as_u64).unwrap_or(1);
                let reason = text_of(c, "reason").unwrap_or_default();
                let requester = text_of(c, "requester");
                for r in ids.iter() {
                    match self.drains.get_mut(&r) {
                        Some(_) if overwrite == 0 => {}
                        Some(d) => {
                            d.reason.clone_from(&reason);
                            d.requester.clone_from(&requester);
                            if overwrite == 2 {
                                d.timestamp = t;
                            }
                        }
                        None => {
                            let rec = DrainRec {
                                timestamp: t,
                                reason: reason.clone(),
                                requester: requester.clone(),
                            };
                            self.drains.insert(r, rec);
                        }
                    }
                }
            }
            "undrain" => {
                for r in ids.iter() {
                    if let Some(d) = self.drains.remove(&r) {
                        let undrain = Some((t, text_of(c, "requester")));
                        self.last_drain.insert(r, (d, undrain));
                    }
                }
            }
            _ => {}
        }
    }

    /// The `drain` object of `resource.status`: ranks grouped by
    /// (timestamp, reason).
    fn drain_json(&self) -> Value {
        let mut groups: Vec<(IdSet, f64, &str)> = Vec::new();
        for (&r, d) in &self.drains {
            let ts = d.timestamp.round();
            match groups
                .iter_mut()
                .find(|(_, t, why)| *t == ts && *why == d.reason)
            {
                Some(g) => {
                    g.0.insert(r);
                }
                None => groups.push((IdSet::from_range(r, r), ts, &d.reason)),
            }
        }
        let m: Map<String, Value> = groups
            .into_iter()
            .map(|(ids, ts, why)| (ids.encode(), json!({"timestamp": ts, "reason": why})))
            .collect();
        Value::Object(m)
    }
}

/// One journal event: time, name, context.
type Ev = (f64, String, Map<String, Value>);

/// The journal's backlog (with requesters), in time order.
fn journal(svc: &mut dyn Service) -> Result<Vec<Ev>, SvcError> {
    let req = msg::JournalRequest {
        requester: true,
        ..Default::default()
    };
    let mut stream = open::<cat::Journal>(svc, &req)?;
    let mut events = Vec::new();
    loop {
        match stream.next(None) {
            StreamItem::Payload(v) => {
                let batch = v["events"].as_array().cloned().unwrap_or_default();
                if batch.is_empty() {
                    break;
                }
                for e in batch {
                    let t = e["timestamp"].as_f64().unwrap_or(0.0);
                    let name = e["name"].as_str().unwrap_or("").to_string();
                    let c = e["context"].as_object().cloned().unwrap_or_default();
                    events.push((t, name, c));
                }
            }
            StreamItem::End(e) if e.errnum() == rpc::errno::ENODATA => break,
            StreamItem::End(e) => return Err(e),
            StreamItem::Timeout => break,
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(events)
}

fn replay_until(events: &[Ev], at: f64) -> Replay {
    let mut r = Replay::default();
    for (t, name, c) in events.iter().take_while(|e| e.0 <= at) {
        r.apply(*t, name, c);
    }
    r
}

/// What the service says now: status (with R as an Rset) and allocated.
struct Now {
    status: msg::StatusResponse,
    rset: Rset,
}

fn fetch_status(svc: &mut dyn Service) -> Result<Now, String> {
    let v = call::<cat::Status>(svc, &msg::Empty {}).map_err(|e| e.message())?;
    let status: msg::StatusResponse = msg::decode(&v).map_err(|e| e.to_string())?;
    let rset = if status.r.is_null() {
        Rset::default()
    } else {
        Rset::from_json(&status.r).map_err(|e| format!("resource.status: R: {e}"))?
    };
    Ok(Now { status, rset })
}

/// What the service says now, and the ranks of its R that TARGETS (an
/// idset or a hostlist) names.
fn fetch_targets(ns: &Namespace, svc: &mut dyn Service) -> Result<(Now, IdSet), String> {
    let cur = fetch_status(svc)?;
    let targets = ns.str("targets").unwrap_or("");
    let ids = match IdSet::parse(targets) {
        Ok(ids) => ids,
        Err(_) => cur
            .rset
            .hosts_to_ranks(targets)
            .map_err(|e| e.to_string())?,
    };
    let bad = ids.difference(&cur.rset.ranks());
    if !bad.is_empty() {
        return Err(format!("no such rank: {bad}"));
    }
    Ok((cur, ids))
}

fn parse_ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap_or_default()
}

/// `roster resource show TARGETS [--json]`.
pub fn show(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let now = (ctx.now)();
    let (cur, ranks) = ctx.check(fetch_targets(ns, svc))?;
    let allocated = sched_status(ctx, svc)
        .ok()
        .and_then(|ss| allocated_ranks(&ss).ok());
    let events = ctx.rpc_check(journal(svc))?;
    let past = replay_until(&events, f64::INFINITY);
    // `[queues]` (flux's `config.get`); none without it.
    let config = super::views::config_get(svc).ok().flatten();
    // Roster's `resource.agents`; a server without it leaves them unknown.
    let agents: Option<BTreeMap<u32, msg::AgentInfo>> = call::<cat::Agents>(
        svc,
        &msg::AgentsRequest {
            targets: Some(ranks.clone()),
        },
    )
    .ok()
    .and_then(|v| msg::decode::<msg::AgentsResponse>(&v).ok())
    .map(|r| r.agents.into_iter().map(|a| (a.rank, a)).collect());
    let st = &cur.status;
    let (online, torpid, excluded) = (
        parse_ids(&st.online),
        parse_ids(&st.torpid),
        parse_ids(&st.exclude),
    );
    let mut drains: BTreeMap<u32, (f64, String)> = BTreeMap::new();
    for (k, d) in &st.drain {
        for r in parse_ids(k).iter() {
            drains.insert(r, (d.timestamp, d.reason.clone()));
        }
    }
    let mut docs = Vec::new();
    for rank in ranks.iter() {
        let Some(info) = cur.rset.node_info(rank) else {
            continue;
        };
        let host = info.hostname.clone().unwrap_or_default();
        let is_online = online.contains(rank);
        let drain = drains.get(&rank).map(|(ts, reason)| {
            let requester = past.drains.get(&rank).and_then(|d| d.requester.clone());
            json!({
                "reason": reason,
                "timestamp": ts,
                "time": when(*ts, ctx.zone),
                "age": age(now - ts),
                "requester": requester,
            })
        });
        let since = past.since.get(&rank).copied();
        let last_drain =
            past.last_drain
                .get(&rank)
                .filter(|_| drain.is_none())
                .map(|(d, undrain)| {
                    json!({
                        "reason": d.reason,
                        "timestamp": d.timestamp,
                        "time": when(d.timestamp, ctx.zone),
                        "requester": d.requester,
                        "undrained": undrain.as_ref().map(|u| u.0),
                        "undrained_time": undrain.as_ref().map(|u| when(u.0, ctx.zone)),
                        "undrained_by": undrain.as_ref().and_then(|u| u.1.clone()),
                    })
                });
        let state = match (drain.is_some(), is_online, excluded.contains(rank)) {
            (_, _, true) => "excluded",
            (true, true, _) => "drained",
            (true, false, _) => "drained+offline",
            (false, true, _) if torpid.contains(rank) => "torpid",
            (false, true, _) if allocated.as_ref().is_some_and(|a| a.contains(rank)) => "allocated",
            (false, true, _) => "free",
            (false, false, _) => "offline",
        };
        let children: Map<String, Value> = info
            .children
            .iter()
            .map(|(k, ids)| (k.clone(), Value::from(ids.encode())))
            .collect();
        docs.push(json!({
            "hostname": host,
            "rank": rank,
            "state": state,
            "online": is_online,
            "since": since,
            "since_time": since.map(|t| when(t, ctx.zone)),
            "torpid": torpid.contains(rank),
            "torpid_since": past.torpid_since.get(&rank),
            "excluded": excluded.contains(rank),
            "allocated": allocated.as_ref().map(|a| a.contains(rank)),
            "drain": drain,
            "last_drain": last_drain,
            "properties": info.properties,
            "queues": config
                .as_ref()
                .map(|c| resource_views::queues_of(c, &info.properties))
                .unwrap_or_default(),
            "resources": children,
            "heartbeat": heartbeat_doc(agents.as_ref(), rank, now, ctx),
            "agent_version": agents.as_ref().and_then(|a| a.get(&rank)).and_then(|a| a.version.clone()),
        }));
    }
    if ns.flag("json") {
        let _ = writeln!(ctx.out, "{}", Value::Array(docs));
        return Ok(0);
    }
    let mut text = String::new();
    for d in &docs {
        show_text(&mut text, d, now, past.first);
    }
    let _ = ctx.out.write_all(text.as_bytes());
    Ok(0)
}

fn show_text(s: &mut String, d: &Value, now: f64, first: Option<f64>) {
    let yes = |b: &Value| {
        if b.as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    };
    let _ = writeln!(
        s,
        "Node {} (rank {})",
        d["hostname"].as_str().unwrap_or("?"),
        d["rank"]
    );
    let _ = writeln!(s, "  State:      {}", d["state"].as_str().unwrap_or(""));
    let updown = if d["online"] == true {
        "online"
    } else {
        "offline"
    };
    let _ = match (d["since"].as_f64(), d["since_time"].as_str()) {
        (Some(t), Some(w)) => {
            writeln!(s, "  Liveness:   {updown} since {w} ({} ago)", age(now - t))
        }
        _ => writeln!(
            s,
            "  Liveness:   {updown} (since before the journal's first event{})",
            first.map(|_| "").unwrap_or(": the journal is empty")
        ),
    };
    let _ = writeln!(s, "  Torpid:     {}", yes(&d["torpid"]));
    let _ = writeln!(s, "  Excluded:   {}", yes(&d["excluded"]));
    let alloc = match d["allocated"].as_bool() {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown (no scheduler status)",
    };
    let _ = writeln!(s, "  Allocated:  {alloc}");
    match d["drain"].as_object() {
        Some(dr) => {
            let who = dr["requester"]
                .as_str()
                .unwrap_or("unknown (not in the journal)");
            let _ = writeln!(
                s,
                "  Drained:    {} ({} ago) by {}",
                dr["time"].as_str().unwrap_or(""),
                dr["age"].as_str().unwrap_or(""),
                who
            );
            let _ = writeln!(s, "  Reason:     {}", dr["reason"].as_str().unwrap_or(""));
        }
        None => {
            let _ = writeln!(s, "  Drained:    no");
        }
    }
    if let Some(l) = d["last_drain"].as_object() {
        let unknown = "unknown";
        let _ = writeln!(
            s,
            "  Last drain: {} by {}, reason \"{}\"; undrained {} by {}",
            l["time"].as_str().unwrap_or(""),
            l["requester"].as_str().unwrap_or(unknown),
            l["reason"].as_str().unwrap_or(""),
            l["undrained_time"].as_str().unwrap_or(unknown),
            l["undrained_by"].as_str().unwrap_or(unknown),
        );
    }
    // A list of names on one line, or what to say when there is none.
    let names = |s: &mut String, label: &str, v: &Value, none: &str| {
        let names: Vec<&str> = v
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let text = if names.is_empty() {
            none.to_string()
        } else {
            names.join(",")
        };
        let _ = writeln!(s, "  {label:<11} {text}");
    };
    names(s, "Properties:", &d["properties"], "(none)");
    names(s, "Queues:", &d["queues"], "(none configured)");
    let res: Vec<String> = d["resources"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}[{}]", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(s, "  Resources:  {}", res.join(" "));
    let hb = &d["heartbeat"];
    let _ = match hb["timestamp"].as_f64() {
        Some(t) => writeln!(
            s,
            "  Heartbeat:  {} ({} ago){}{}",
            hb["time"].as_str().unwrap_or(""),
            age(now - t),
            hb["via"]
                .as_str()
                .map(|v| format!(" via relay {v}"))
                .unwrap_or_default(),
            if hb["connected"] == true {
                ""
            } else {
                ", agent gone"
            }
        ),
        None if hb["known"] == false => writeln!(s, "  Heartbeat:  not reported by the service"),
        None => writeln!(s, "  Heartbeat:  none since the service started"),
    };
    let _ = writeln!(
        s,
        "  Agent:      {}",
        match d["agent_version"].as_str() {
            Some(v) => format!("version {v}"),
            None if hb["timestamp"].is_f64() => "version not reported".to_string(),
            None => "unknown".to_string(),
        }
    );
}

/// The `heartbeat` of `show --json`: `{timestamp, time, age, connected,
/// via}` from `resource.agents`; `{known: false}` when the service did
/// not answer it (an older server), `null` when no agent spoke for the
/// rank since the service started.
fn heartbeat_doc(
    agents: Option<&BTreeMap<u32, msg::AgentInfo>>,
    rank: u32,
    now: f64,
    ctx: &Ctx<'_>,
) -> Value {
    let Some(agents) = agents else {
        return json!({"known": false});
    };
    match agents.get(&rank) {
        Some(a) => match a.heartbeat {
            Some(t) => json!({
                "timestamp": t,
                "time": when(t, ctx.zone),
                "age": age(now - t),
                "connected": a.connected,
                "via": a.via,
            }),
            None => Value::Null,
        },
        None => Value::Null,
    }
}

/// `roster resource history TARGETS [--since WHEN] [--json]`.
pub fn history(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let now = (ctx.now)();
    let since = ns.str("since").map(|w| parse_when(w, now, ctx.zone));
    let since = ctx.check(since.unwrap_or(Ok(f64::NEG_INFINITY)))?;
    let (cur, ranks) = ctx.check(fetch_targets(ns, svc))?;
    let events = ctx.rpc_check(journal(svc))?;
    let mut rows = Vec::new();
    for (t, name, c) in events.iter().filter(|e| e.0 >= since) {
        let touched = match name.as_str() {
            "restart" => ids_of(c, "ranks"),
            "truncate" | "resource-define" | "resource-update" => continue,
            _ => ids_of(c, "idset"),
        };
        let mine = touched.intersection(&ranks);
        for r in mine.iter() {
            let mut what = name.clone();
            if name == "restart" {
                let up = ids_of(c, "online").contains(r);
                what = format!("restart ({})", if up { "online" } else { "offline" });
            }
            rows.push(json!({
                "timestamp": t,
                "time": when(*t, ctx.zone),
                "hostname": cur.rset.hostname(r),
                "rank": r,
                "event": what,
                "reason": c.get("reason"),
                "requester": c.get("requester"),
            }));
        }
    }
    rows.sort_by(|a, b| {
        let key = |v: &Value| (v["rank"].as_u64(), v["timestamp"].as_f64().unwrap_or(0.0));
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    if ns.flag("json") {
        let _ = writeln!(ctx.out, "{}", Value::Array(rows));
        return Ok(0);
    }
    let mut text = String::new();
    for row in &rows {
        let _ = write!(
            text,
            "{}  {:<12} {:<17}",
            row["time"].as_str().unwrap_or(""),
            row["hostname"].as_str().unwrap_or("?"),
            row["event"].as_str().unwrap_or(""),
        );
        if let Some(r) = row["reason"].as_str() {
            let _ = write!(text, " reason=\"{r}\"");
        }
        if let Some(w) = row["requester"].as_str() {
            let _ = write!(text, " by {w}");
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
    }
    let _ = ctx.out.write_all(text.as_bytes());
    Ok(0)
}

/// `status --at WHEN`: the `resource.status` payload as it was at WHEN,
/// from the current R and exclusions and the journal replayed up to WHEN.
pub fn status_at(
    when_text: &str,
    ctx: &mut Ctx<'_>,
    svc: &mut dyn Service,
) -> Result<Value, String> {
    let at = parse_when(when_text, (ctx.now)(), ctx.zone)?;
    let cur = fetch_status(svc)?;
    let events = journal(svc).map_err(|e| e.message())?;
    match events.first() {
        Some(first) if first.0 <= at => {}
        _ => {
            return Err(format!(
                "nothing is known of {}: the journal begins later",
                when(at, ctx.zone)
            ))
        }
    }
    let past = replay_until(&events, at);
    let offline = cur.rset.ranks().difference(&past.online);
    Ok(json!({
        "R": cur.status.r,
        "online": past.online.encode(),
        "offline": offline.encode(),
        "exclude": cur.status.exclude,
        "torpid": past.torpid.encode(),
        "drain": past.drain_json(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pycompat::time::FixedZone;

    #[test]
    fn when_accepts_iso_times_today_and_relative() {
        let utc = FixedZone::utc();
        // 2026-11-28 09:30:00 UTC
        let now = 1_795_858_200.0;
        assert_eq!(parse_when("-2h", now, &utc), Ok(now - 7200.0));
        assert_eq!(parse_when("-1d12h", now, &utc), Ok(now - 129_600.0));
        assert_eq!(parse_when("90m ago", now, &utc), Ok(now - 5400.0));
        assert_eq!(parse_when("03:00", now, &utc), Ok(1_795_834_800.0));
        assert_eq!(
            parse_when("2026-11-28T03:00", now, &utc),
            Ok(1_795_834_800.0)
        );
        assert_eq!(
            parse_when("2026-11-28 03:00:30", now, &utc),
            Ok(1_795_834_830.0)
        );
        assert_eq!(parse_when("2026-11-28", now, &utc), Ok(1_795_824_000.0));
        let paris = FixedZone::new(3600, "CET");
        assert_eq!(
            parse_when("03:00", now, &paris),
            Ok(1_795_834_800.0 - 3600.0)
        );
        assert_eq!(
            parse_when("2026-11-28T03:00Z", now, &paris),
            Ok(1_795_834_800.0)
        );
        assert_eq!(parse_when("1795834800", now, &utc), Ok(1_795_834_800.0));
        for bad in [
            "",
            "-",
            "-2x",
            "25:00",
            "2026-13-01",
            "yesterday",
            "03:00:00:00",
        ] {
            let e = parse_when(bad, now, &utc).unwrap_err();
            assert!(e.starts_with(&format!("invalid time '{bad}'")), "{e}");
        }
    }

    #[test]
    fn ages_are_short() {
        for (secs, want) in [
            (42.0, "42s"),
            (303.0, "5m 3s"),
            (7500.0, "2h 5m"),
            (273_600.0, "3d 4h"),
        ] {
            assert_eq!(age(secs), want, "age({secs:?})");
        }
    }

    fn ev(t: f64, name: &str, c: Value) -> Ev {
        (t, name.into(), c.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn replay_follows_overwrite_and_liveness() {
        let events = vec![
            ev(10.0, "restart", json!({"ranks": "0-3", "online": "0-1"})),
            ev(20.0, "online", json!({"idset": "2"})),
            ev(
                30.0,
                "drain",
                json!({"idset": "3", "reason": "fan", "overwrite": 0, "requester": "root (uid 0)"}),
            ),
            ev(
                40.0,
                "drain",
                json!({"idset": "3", "reason": "psu", "overwrite": 1, "requester": "cert:a"}),
            ),
            ev(
                50.0,
                "drain",
                json!({"idset": "3", "reason": "x", "overwrite": 0}),
            ),
            ev(60.0, "torpid", json!({"idset": "1"})),
            ev(
                70.0,
                "drain",
                json!({"idset": "3", "reason": "late", "overwrite": 2}),
            ),
            ev(80.0, "undrain", json!({"idset": "3"})),
        ];
        let at = |t| replay_until(&events, t);
        assert_eq!(at(25.0).online.encode(), "0-2");
        assert_eq!(at(25.0).since.get(&2), Some(&20.0));
        let d = at(55.0).drains[&3].clone();
        assert_eq!((d.timestamp, d.reason.as_str()), (30.0, "psu"));
        assert_eq!(d.requester.as_deref(), Some("cert:a"));
        assert_eq!(at(75.0).drains[&3].timestamp, 70.0);
        assert_eq!(at(65.0).torpid.encode(), "1");
        assert!(at(85.0).drains.is_empty());
        assert_eq!(
            at(35.0).drain_json(),
            json!({"3": {"timestamp": 30.0, "reason": "fan"}})
        );
    }
}
