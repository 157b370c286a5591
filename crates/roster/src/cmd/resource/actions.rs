//! Sub-commands that send one request (`drain TARGETS`, `undrain`,
//! `reload`, `acquire-mute`, `release`) and Roster's `acquire` stream.

use super::service::{call, open, Service, StreamItem, SvcError};
use super::sys::realpath;
use super::Ctx;
use idset::IdSet;
use pycompat::argparse::Namespace;
use resource_views::Level;
use rpc::catalog::{self as cat, Call};
use rpc::errno::{EEXIST, EINVAL, ENODATA};
use rpc::msg;

/// The `mode` of a drain or undrain request from `-u` / `-f` / `-ff`;
/// `Err` when both were given.
fn mode(ns: &Namespace) -> Result<Option<&'static str>, &'static str> {
    let force = ns.count("force");
    let update = ns.flag("update");
    if update && force > 0 {
        return Err("Only one of --force and --update may be specified");
    }
    Ok(if update {
        Some("update")
    } else if force == 1 {
        Some("overwrite")
    } else if force >= 2 {
        Some("force-overwrite")
    } else {
        None
    })
}

/// `{targets, mode?, reason?}`: no `reason` key when no words were given.
fn payload(ns: &Namespace, mode: Option<&str>) -> msg::DrainRequest {
    let reason = ns.list("reason");
    let reason = (!reason.is_empty()).then(|| reason.join(" "));
    msg::DrainRequest::new(ns.str("targets").unwrap_or(""), reason.as_deref(), mode)
}

/// `drain [-f|-ff|-u] TARGETS [REASON...]`.  Errors print as `[Errno N]
/// text`; EEXIST adds a hint to use `--force`.
pub fn drain(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    send::<cat::Drain>(ns, ctx, svc, |ctx, e| {
        ctx.log(Level::Error, &e.os_error_str());
        if e.errnum() == EEXIST && matches!(e, SvcError::Rpc(_)) {
            ctx.log(
                Level::Info,
                "Use --force to overwrite existing drain reason",
            );
        }
        1
    })
}

/// `undrain [-f|-ff|-u] TARGETS [REASON...]`.
pub fn undrain(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    send::<cat::Undrain>(ns, ctx, svc, |ctx, e| ctx.rpc_fail(e))
}

/// Send drain or undrain `C`; `report` prints an error (its exit status).
fn send<C: Call<Request = msg::DrainRequest>>(
    ns: &Namespace,
    ctx: &mut Ctx<'_>,
    svc: &mut dyn Service,
    report: fn(&mut Ctx<'_>, &SvcError) -> i32,
) -> Result<i32, i32> {
    let mode = ctx.check(mode(ns))?;
    let Err(e) = call::<C>(svc, &payload(ns, mode)) else {
        return Ok(0);
    };
    let code = report(ctx, &e);
    targets_hint(ns, &e, ctx, svc);
    Err(code)
}

/// After flux's error for targets the instance does not have (`idset is
/// out of range`, `invalid hosts: ...`), INFO lines of Roster's: the
/// valid ranks and hosts, and the nearest hostname for a mistyped one.
/// Nothing is added if the resource set cannot be fetched.
fn targets_hint(ns: &Namespace, e: &SvcError, ctx: &mut Ctx<'_>, svc: &mut dyn Service) {
    let SvcError::Rpc(err) = e else { return };
    let text = err.message();
    let bad_hosts = text
        .strip_prefix("invalid targets: invalid hosts: ")
        .map(str::to_string);
    if err.errnum != EINVAL || (text != "idset is out of range" && bad_hosts.is_none()) {
        return;
    }
    let Ok(status) = call::<cat::Status>(svc, &msg::Empty {}) else {
        return;
    };
    let Ok(status) = msg::decode_reply::<msg::StatusResponse>(cat::Status::TOPIC, &status) else {
        return;
    };
    let rset = if status.r.is_null() {
        rset::Rset::new()
    } else {
        match rset::Rset::from_json(&status.r) {
            Ok(r) => r,
            Err(_) => return,
        }
    };
    let ranks = rset.ranks();
    if ranks.is_empty() {
        ctx.log(
            Level::Info,
            "the instance has no resources: no valid targets",
        );
        return;
    }
    let hosts = rset.nodelist().unwrap_or_default();
    let valid = if hosts.is_empty() {
        format!("valid targets: ranks {}", ranks.encode())
    } else {
        format!(
            "valid targets: ranks {} or hosts {}",
            ranks.encode(),
            hosts.encode()
        )
    };
    ctx.log(Level::Info, &valid);
    // A typo: the nearest name for each (of the first few) unknown hosts.
    let Some(bad) = bad_hosts.or_else(|| ns.str("targets").map(String::from)) else {
        return;
    };
    let Ok(bad) = hostlist::Hostlist::decode(&bad) else {
        return;
    };
    if IdSet::parse(&bad.encode()).is_ok() {
        return;
    }
    let names: Vec<String> = hosts.iter().collect();
    let guesses: Vec<String> = bad
        .iter()
        .take(4)
        .filter_map(|h| {
            crate::cmd::suggest::closest(&h, names.iter().map(String::as_str))
                .map(|g| format!("'{g}' (for '{h}')"))
        })
        .collect();
    if !guesses.is_empty() {
        ctx.log(
            Level::Info,
            &format!("did you mean {}?", guesses.join(", ")),
        );
    }
}

/// `reload [-x] [-f] PATH`: sends the real path.
pub fn reload(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let req = msg::ReloadRequest {
        path: realpath(ns.str("path").unwrap_or(""), &ctx.cwd),
        xml: ns.flag("xml"),
        force: ns.flag("force"),
    };
    ctx.rpc_check(call::<cat::Reload>(svc, &req)).map(|_| 0)
}

/// `acquire-mute`.
pub fn acquire_mute(ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    ctx.rpc_check(call::<cat::AcquireMute>(svc, &msg::Empty {}))
        .map(|_| 0)
}

/// `release GROUP TARGETS`: prints nothing on success.
pub fn release(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    ctx.rpc_check(call::<cat::Release>(svc, &group_targets(ns)))
        .map(|_| 0)
}

/// `group-set GROUP TARGETS`: `resource.group-set {group, targets}`.
pub fn group_set(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    ctx.rpc_check(call::<cat::GroupSet>(svc, &group_targets(ns)))
        .map(|_| 0)
}

/// `GROUP TARGETS` of `release` and `group-set`.
fn group_targets(ns: &Namespace) -> msg::TargetsOfGroup {
    let arg = |name| ns.str(name).unwrap_or("");
    msg::TargetsOfGroup::new(arg("group"), arg("targets"))
}

/// `acquire [-g GROUP]`: every response of `resource.acquire` as one line
/// of compact JSON, flushed as it arrives, until the stream ends (exit 0
/// on ENODATA) or the process is interrupted.
pub fn acquire(ns: &Namespace, ctx: &mut Ctx<'_>, svc: &mut dyn Service) -> Result<i32, i32> {
    let req = msg::AcquireRequest {
        group: ns.str("group").map(str::to_string),
    };
    let mut stream = ctx.rpc_check(open::<cat::Acquire>(svc, &req))?;
    loop {
        match stream.next(None) {
            StreamItem::Payload(v) => {
                let line = serde_json::to_string(&v).unwrap_or_default();
                if writeln!(ctx.out, "{line}")
                    .and_then(|()| ctx.out.flush())
                    .is_err()
                {
                    return Ok(1);
                }
            }
            StreamItem::End(e)
                if e.errnum() == ENODATA && matches!(e, super::service::SvcError::Rpc(_)) =>
            {
                return Ok(0)
            }
            StreamItem::End(e) => return Err(ctx.rpc_fail(&e)),
            StreamItem::Timeout => continue,
        }
    }
}
