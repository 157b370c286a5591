//! `resource.drain` and `resource.undrain` (flux-core's drain.c): the
//! requester is answered once the event is durable, then the acquirers
//! and journal followers hear of it.

use super::*;
use crate::drain::{validate_targets, DrainMode};
use crate::journal::REQUESTER;

/// Who asked: what the transport or shell named, else the uid, else the
/// role (recorded under [`REQUESTER`] and logged).
fn requester(req: &Request) -> String {
    match (&req.who, req.userid) {
        (Some(who), _) => who.to_string(),
        (None, Some(uid)) => format!("uid {uid}"),
        (None, None) => format!("role {}", req.role.name()),
    }
}

impl Service {
    /// `resource.drain {targets, reason?, mode?}`.
    pub(super) fn drain_rpc(
        &mut self,
        now: f64,
        req: &Request,
        body: msg::DrainRequest,
        out: &mut Vec<Output>,
    ) -> Handled {
        let to = req.reply_to();
        let who = requester(req);
        let reason = body.reason.as_deref();
        let mode = DrainMode::parse_drain(body.mode.as_deref())?;
        let ids = self.state.decode_targets(&body.targets)?;
        validate_targets(&ids, self.state.size)?;
        self.state
            .drain
            .drain(&ids, &self.state.exclude, mode, reason, now)?;
        let nodelist = self.state.nodelist_of(&ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "drain idset={} nodelist={} overwrite={} reason={} requester={}",
                ids.encode(),
                nodelist,
                mode.overwrite(),
                reason.unwrap_or(""),
                who
            ),
        });
        let mut c = ctx(vec![
            ("idset", idset_str(&ids)),
            ("nodelist", Value::String(nodelist)),
        ]);
        if let Some(r) = reason {
            c.insert("reason".into(), Value::from(r));
        }
        c.insert("overwrite".into(), Value::from(mode.overwrite()));
        c.insert(REQUESTER.into(), Value::from(who));
        self.post_acknowledged(now, "drain", c, to, out);
        Ok(None)
    }

    pub(super) fn undrain_rpc(
        &mut self,
        now: f64,
        req: &Request,
        body: msg::DrainRequest,
        out: &mut Vec<Output>,
    ) -> Handled {
        let to = req.reply_to();
        let who = requester(req);
        let targets = body.targets.as_str();
        let mode = DrainMode::parse_undrain(body.mode.as_deref())?;
        let reason = body.reason.as_deref();
        let ids = self.state.decode_targets(targets)?;
        validate_targets(&ids, self.state.size)?;
        self.state.drain.undrain(&ids, mode)?;
        let nodelist = self.state.nodelist_of(&ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!(
                "undrain idset={} nodelist={} overwrite={} reason={} requester={}",
                targets,
                nodelist,
                mode.overwrite(),
                reason.unwrap_or(""),
                who
            ),
        });
        let mut c = ctx(vec![
            ("idset", idset_str(&ids)),
            ("nodelist", Value::String(nodelist)),
            ("overwrite", Value::from(mode.overwrite())),
        ]);
        if let Some(r) = reason {
            c.insert("reason".into(), Value::from(r));
        }
        c.insert(REQUESTER.into(), Value::from(who));
        self.post_acknowledged(now, "undrain", c, to, out);
        Ok(None)
    }
}
