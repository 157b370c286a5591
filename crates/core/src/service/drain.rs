//! `resource.drain` and `resource.undrain` (flux-core's drain.c): the
//! requester is answered once the event is durable, then the acquirers
//! and journal followers hear of it.

use super::*;
use crate::drain::{validate_targets, DrainMode};

/// Who asked: what the transport or shell named, else the uid, else the
/// role (recorded under [`crate::journal::REQUESTER`] and logged).
pub(super) fn requester(req: &Request) -> String {
    match (&req.who, req.userid) {
        (Some(who), _) => who.to_string(),
        (None, Some(uid)) => format!("uid {uid}"),
        (None, None) => format!("role {}", req.role.name()),
    }
}

impl Service {
    /// `resource.drain` (`drain` true) and `resource.undrain`
    /// `{targets, reason?, mode?}`.
    pub(super) fn drain_rpc(
        &mut self,
        c: Ctx<'_>,
        body: msg::DrainRequest,
        drain: bool,
    ) -> Handled {
        let Ctx { now, req, out } = c;
        let mode = match drain {
            true => DrainMode::parse_drain(body.mode.as_deref())?,
            false => DrainMode::parse_undrain(body.mode.as_deref())?,
        };
        let ids = self.state.decode_targets(&body.targets)?;
        validate_targets(&ids, self.state.size)?;
        let reason = body.reason.as_deref();
        let drains = &mut self.state.drain;
        match drain {
            true => drains.drain(&ids, &self.state.exclude, mode, reason, now)?,
            false => drains.undrain(&ids, mode)?,
        }
        let name = if drain { "drain" } else { "undrain" };
        self.post_drain_change(now, name, req, &ids, mode, reason, out);
        Ok(None)
    }

    /// Log a drain or undrain of `ids` and post its event, answering the
    /// requester once it is durable.  Context keys in flux-core's order
    /// (`reason` before `overwrite` in a drain, after it in an undrain),
    /// then Roster's requester.
    #[allow(clippy::too_many_arguments)]
    fn post_drain_change(
        &mut self,
        now: f64,
        name: &str,
        req: &Request,
        ids: &IdSet,
        mode: DrainMode,
        reason: Option<&str>,
        out: &mut Vec<Output>,
    ) {
        let who = requester(req);
        let nodelist = self.state.nodelist_of(ids);
        let idset = ids.encode();
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "{name} idset={idset} nodelist={nodelist} overwrite={} reason={} requester={who}",
                mode.overwrite(),
                reason.unwrap_or(""),
            ),
        });
        let overwrite = Some(mode.overwrite());
        let (reason, requester) = (reason.map(str::to_string), Some(who));
        let c = if name == "drain" {
            rfc44::context(&rfc44::Drain {
                idset,
                nodelist,
                reason,
                overwrite,
                relays: None,
                requester,
            })
        } else {
            rfc44::context(&rfc44::Undrain {
                idset,
                nodelist,
                overwrite,
                reason,
                requester,
            })
        };
        self.post(now, name, c, Keep::Ack(req.reply_to()), out);
    }
}
