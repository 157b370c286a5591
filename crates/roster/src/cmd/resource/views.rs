//! `status`, the `drain` listing, `list`, `info` and `R`: fetch the
//! payloads as flux's Python bindings do and render them with the
//! `format` crate.

use super::config;
use super::service::{call, Service, SvcError};
use super::Ctx;
use hostlist::Hostlist;
use idset::IdSet;
use pycompat::argparse::Namespace;
use resource_views::{
    allocated_ranks, drain_list_prepare, housekeeping_ranks, list_prepare, no_env, status_prepare,
    CmdOutput, FormatConfig, Level, ListCell, ListCells, ListInput, ListOptions, ListPlan,
    ListView, StatusInput, StatusOptions, StatusSets, Subcommand,
};
use rpc::catalog::{self as cat, Call};
use rpc::errno::ENOSYS;
use rpc::msg;
use serde_json::{json, Value};

/// `resource_list()`: `resource.sched-status` (or `$FLUX_RESOURCE_LIST_RPC`),
/// falling back to `sched.resource-status` when the first answers ENOSYS.
pub fn sched_status(ctx: &Ctx<'_>, svc: &mut dyn Service) -> Result<Value, SvcError> {
    let topic = (ctx.env)("FLUX_RESOURCE_LIST_RPC")
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| cat::SchedStatus::TOPIC.into());
    match svc.rpc(&topic, Value::Null) {
        Err(e) if e.errnum() == ENOSYS && !matches!(e, SvcError::Connect(_)) => {
            call::<cat::SchedResourceStatus>(svc, &msg::Empty {})
        }
        r => r,
    }
}

/// Whether `$FLUX_RESOURCE_LIST_RPC` names the scheduler's view: that
/// RPC is then asked, not the service's summary.
fn list_rpc_chosen(ctx: &Ctx<'_>) -> bool {
    (ctx.env)("FLUX_RESOURCE_LIST_RPC").is_some_and(|t| !t.is_empty())
}

/// Roster's `resource.summary`: what the views print, computed by the
/// service.  `None` when the service has no such topic (a Flux instance
/// or an older Roster: ENOSYS) or it fails: the views then compute from
/// `resource.status` and `resource.sched-status`, which report errors as
/// flux does.
fn summary(svc: &mut dyn Service, list: bool) -> Option<msg::SummaryResponse> {
    let v = svc.summary(&msg::SummaryRequest { list })?;
    msg::decode_reply(cat::Summary::TOPIC, &v).ok()
}

fn status_sets(s: &msg::StatusSummary) -> Option<StatusSets> {
    let ids = |t: &str| IdSet::parse(t).ok();
    let drain = s
        .drain
        .iter()
        .map(|g| Some((ids(&g.ranks)?, g.timestamp, g.reason.clone())))
        .collect::<Option<Vec<_>>>()?;
    Some(StatusSets {
        ranks: ids(&s.ranks)?,
        nodelist: Hostlist::decode(&s.nodelist).ok()?,
        online: ids(&s.online)?,
        offline: ids(&s.offline)?,
        exclude: ids(&s.exclude)?,
        torpid: ids(&s.torpid)?,
        allocated: ids(&s.allocated)?,
        // Roster has no job manager (`job-manager.stats-get` is ENOSYS)
        housekeeping: IdSet::new(),
        drain,
    })
}

fn list_cells(l: msg::ListSummary, sets: StatusSets) -> Option<ListCells> {
    let cells = |v: Vec<msg::ListCell>| {
        v.into_iter()
            .map(|c| {
                Some(ListCell {
                    properties: c.properties,
                    ranks: IdSet::parse(&c.ranks).ok()?,
                    nodelist: c.nodelist,
                    nnodes: c.nnodes,
                    ncores: c.ncores,
                    ngpus: c.ngpus,
                })
            })
            .collect::<Option<Vec<_>>>()
    };
    Some(ListCells {
        all: cells(l.all)?,
        down: cells(l.down)?,
        allocated: cells(l.allocated)?,
        up: cells(l.up)?,
        free: cells(l.free)?,
        r_ranks: sets.ranks,
        r_nodelist: sets.nodelist,
    })
}

/// `status` and the drain listing from the service's summary, where it
/// applies.
fn status_from_summary(
    plan: &resource_views::StatusPlan,
    opts: &StatusOptions,
    ctx: &Ctx<'_>,
    svc: &mut dyn Service,
    json: bool,
) -> Option<CmdOutput> {
    if !opts.queues.is_empty() || list_rpc_chosen(ctx) {
        return None;
    }
    let s = summary(svc, false)?;
    let sets = status_sets(s.status.as_ref()?)?;
    if json {
        plan.render_json_sets(&sets, ctx.zone)
    } else {
        plan.render_sets(&sets, ctx.zone)
    }
}

/// `list` and `info` from the service's summary, where it applies: the
/// exit status, or `None`.
fn list_from_summary(
    plan: &ListPlan,
    json: bool,
    ctx: &mut Ctx<'_>,
    svc: &mut dyn Service,
    view: ListView,
) -> Option<i32> {
    if !plan.cells_apply() || list_rpc_chosen(ctx) {
        return None;
    }
    let s = summary(svc, true)?;
    let sets = status_sets(s.status.as_ref()?)?;
    let cells = list_cells(s.list?, sets)?;
    let out = if json {
        plan.render_json_cells(&cells, ctx.zone)?
    } else {
        let cfg = if view == ListView::R {
            FormatConfig::new(Subcommand::List)
        } else {
            match config::load(Subcommand::List, ctx.env) {
                Ok(c) => c,
                Err(e) => return Some(ctx.fail(&e)),
            }
        };
        plan.render_cells(&cells, &cfg, ctx.env, ctx.zone)?
    };
    Some(ctx.emit(&out))
}

/// The empty `resource.status` payload flux substitutes for empty input.
fn empty_status() -> Value {
    json!({"R": null, "offline": "", "online": "", "exclude": "", "torpid": "", "drain": {}})
}

/// Read all of stdin as JSON (`json.loads`); empty input is `None`.
fn read_stdin_json(ctx: &mut Ctx<'_>, empty_ok: bool) -> Result<Option<Value>, String> {
    let mut text = String::new();
    ctx.stdin
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.is_empty() && empty_ok {
        return Ok(None);
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// `--config-file FILE`: a JSON instance configuration.
fn read_config_file(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let m = e.to_string();
        let m = m.split(" (os error").next().unwrap_or(&m).to_string();
        format!("{m}: '{path}'")
    })?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// `config.get`; a service without it (ENOSYS) has no configuration.
pub(super) fn config_get(svc: &mut dyn Service) -> Result<Option<Value>, SvcError> {
    match call::<cat::ConfigGet>(svc, &msg::Empty {}) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.errnum() == ENOSYS && !matches!(e, SvcError::Connect(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn status_options(ns: &Namespace, ctx: &Ctx<'_>) -> StatusOptions {
    StatusOptions {
        format: ns.str("format").unwrap_or("default").to_string(),
        states: ns.str("states").map(String::from),
        include: ns.str("include").map(String::from),
        queues: ns.list("queue").to_vec(),
        no_header: ns.flag("no_header"),
        color: ctx.color(ns.str("color")),
        skip_empty: ns.flag("skip_empty"),
    }
}

/// Where `status` reads the `resource.status` payload from.
enum Source<'a> {
    Service,
    /// `--from-stdin`.
    Stdin,
    /// `--at WHEN`: replayed from the journal (nothing allocated).
    At(&'a str),
}

/// The RPC half of `status` and the drain listing.  Here and in the
/// commands below, `Err` is the exit status of a failure already logged.
fn status_render(
    plan: &resource_views::StatusPlan,
    opts: &StatusOptions,
    ctx: &mut Ctx<'_>,
    svc: &mut dyn Service,
    source: Source<'_>,
    config_file: Option<&str>,
    json: bool,
) -> Result<i32, i32> {
    let mut allocated = IdSet::new();
    let mut housekeeping = IdSet::new();
    let from_stdin = matches!(source, Source::Stdin);
    let status = if let Source::At(when) = source {
        let v = super::node::status_at(when, ctx, svc);
        ctx.check(v)?
    } else if from_stdin {
        let v = read_stdin_json(ctx, true);
        ctx.check(v)?.unwrap_or_else(empty_status)
    } else {
        if let Some(out) = status_from_summary(plan, opts, ctx, svc, json) {
            return Ok(ctx.emit(&out));
        }
        let status = ctx.rpc_check(call::<cat::Status>(svc, &msg::Empty {}))?;
        if let Ok(stats) = call::<cat::JobStats>(svc, &msg::Empty {}) {
            if let Ok(ids) = housekeeping_ranks(&stats) {
                housekeeping = ids;
            }
        }
        if let Ok(ss) = sched_status(ctx, svc) {
            allocated = ctx.check(allocated_ranks(&ss))?;
        }
        status
    };
    let mut config: Option<Value> = None;
    if !opts.queues.is_empty() {
        config = match config_file {
            Some(path) => Some(ctx.check(read_config_file(path))?),
            None if from_stdin => Some(json!({})),
            None => Some(ctx.rpc_check(config_get(svc))?.unwrap_or_else(|| json!({}))),
        };
    }
    let input = StatusInput {
        status: &status,
        allocated: &allocated,
        housekeeping: &housekeeping,
        config: config.as_ref(),
    };
    let out = if json {
        plan.render_json(&input, ctx.zone)
    } else {
        plan.render(&input, ctx.zone)
    };
    Ok(ctx.emit(&out))
}

/// `roster resource status`.
pub fn status(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let opts = status_options(ns, ctx);
    // `-s help` and invalid states are reported before the configuration
    // files are read, as flux does.
    let precheck = StatusOptions {
        format: "default".into(),
        ..opts.clone()
    };
    if let Err(out) = status_prepare(&precheck, &FormatConfig::new(Subcommand::Status), &no_env) {
        return Ok(ctx.emit(&out));
    }
    let cfg = ctx.check(config::load(Subcommand::Status, ctx.env))?;
    let plan = match status_prepare(&opts, &cfg, ctx.env) {
        Ok(p) => p,
        Err(out) => return Ok(ctx.emit(&out)),
    };
    let at = ns.str("at").map(String::from);
    let source = match &at {
        Some(when) => Source::At(when),
        None if ns.flag("from_stdin") => Source::Stdin,
        None => Source::Service,
    };
    let config_file = ns.str("config_file").map(String::from);
    let json = ns.flag("json");
    status_render(&plan, &opts, ctx, svc, source, config_file.as_deref(), json)
}

/// `roster resource drain` without targets: the drained nodes.
pub fn drain_list(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let opts = StatusOptions {
        states: None,
        skip_empty: false,
        ..status_options(ns, ctx)
    };
    let drain_cfg = ctx.check(config::load(Subcommand::Drain, ctx.env))?;
    let status_cfg = ctx.check(config::load(Subcommand::Status, ctx.env))?;
    let plan = match drain_list_prepare(&opts, &drain_cfg, &status_cfg, ctx.env) {
        Ok(p) => p,
        Err(out) => return Ok(ctx.emit(&out)),
    };
    let source = Source::Service;
    status_render(&plan, &opts, ctx, svc, source, None, ns.flag("json"))
}

/// `roster resource list`, `info` and `R`.
pub fn list(
    ns: &Namespace,
    ctx: &mut Ctx<'_>,
    svc: &mut dyn Service,
    view: ListView,
) -> Result<i32, i32> {
    let opts = ListOptions {
        format: ns.str("format").unwrap_or("default").to_string(),
        states: ns.str("states").map(String::from),
        include: ns.str("include").map(String::from),
        queues: ns.list("queue").to_vec(),
        skip_empty: ns.flag("skip_empty"),
        no_skip_empty: ns.flag("no_skip_empty"),
        no_header: ns.flag("no_header"),
    };
    let plan = match list_prepare(view, &opts) {
        // the process exits after printing: skip freeing the node sets
        Ok(p) => p.leak_sets(),
        Err(out) => return Ok(ctx.emit(&out)),
    };
    let json = ns.flag("json") && view != ListView::R;
    if !ns.flag("from_stdin") {
        if let Some(code) = list_from_summary(&plan, json, ctx, svc, view) {
            return Ok(code);
        }
    }
    let (sched, config) = if ns.flag("from_stdin") {
        let sched = read_stdin_json(ctx, false);
        let sched = ctx.check(sched)?.unwrap_or(Value::Null);
        let config = match ns.str("config_file") {
            Some(path) => Some(ctx.check(read_config_file(path))?),
            None => None,
        };
        (sched, config)
    } else {
        let sched = ctx.rpc_check(sched_status(ctx, svc))?;
        let config = match config_get(svc) {
            Ok(c) => c,
            Err(e) => {
                let text = format!("Could not get flux config: {}", e.os_error_str());
                ctx.log(Level::Warning, &text);
                None
            }
        };
        (sched, config)
    };
    let cfg = if view == ListView::R {
        FormatConfig::new(Subcommand::List)
    } else {
        ctx.check(config::load(Subcommand::List, ctx.env))?
    };
    let input = ListInput {
        sched_status: &sched,
        config: config.as_ref(),
    };
    let out = if json {
        plan.render_json(&input, ctx.zone)
    } else {
        plan.render(&input, &cfg, ctx.env, ctx.zone)
    };
    Ok(ctx.emit(&out))
}
