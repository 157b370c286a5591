//! The RFC 28 requests: `resource.acquire`, `acquire-cancel`,
//! `acquire-mute`, `release`, `group-set`, and [`Input::SetGroups`].  The
//! state machine is [`crate::acquire`]; these handlers decode the
//! requests and hand it the service's truth.

use super::*;
use crate::DEFAULT_GROUP;

impl Service {
    /// `resource.acquire` (both RFC 28 variants).
    pub(super) fn acquire_rpc(&mut self, c: Ctx<'_>, body: msg::AcquireRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let who = req.who.clone();
        self.acquire
            .acquire(req.reply_to(), body.group, who, &self.state.truth(), out)?;
        Ok(None)
    }

    /// `resource.acquire-cancel {matchtag}`.
    pub(super) fn acquire_cancel(&mut self, c: Ctx<'_>, body: msg::CancelRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let target = Self::cancel_target(req, body);
        self.acquire.cancel(target, &self.state.truth(), out);
        Ok(None)
    }

    /// `resource.acquire-mute`: silence the caller's acquires (for
    /// shutdown); the owner's silences every acquire.
    pub(super) fn acquire_mute(&mut self, c: Ctx<'_>, _: msg::Empty) -> Handled {
        let Ctx { req, .. } = c;
        match req.role {
            Role::Owner => self.acquire.mute(),
            _ => self.acquire.mute_caller(req.conn, req.who.clone()),
        }
        Ok(Some(Value::Null.into()))
    }

    /// `resource.release {group, targets}` (groups variant).
    pub(super) fn release_rpc(&mut self, c: Ctx<'_>, body: msg::TargetsOfGroup) -> Handled {
        let Ctx { req, out, .. } = c;
        let (to, group) = (req.reply_to(), body.group.as_str());
        let ids = IdSet::parse(&body.targets)
            .map_err(|e| RpcError::new(EINVAL, format!("invalid targets: {e}")))?;
        self.acquire
            .release(to, group, &ids, &self.state.truth(), out)?;
        Ok(None)
    }

    /// `resource.group-set {group, targets}`: the named group gets exactly
    /// these targets (idset or hostlist, possibly empty; excluded targets
    /// are accepted and stay in no group); they leave any other named
    /// group.  Answered first, then the shrink/grow responses.
    pub(super) fn group_set_rpc(&mut self, c: Ctx<'_>, body: msg::TargetsOfGroup) -> Handled {
        let Ctx { req, out, .. } = c;
        let to = req.reply_to();
        let (group, targets) = (body.group.as_str(), body.targets.as_str());
        if group.is_empty() {
            return Err(RpcError::new(EINVAL, "a group name must not be empty"));
        }
        if group == DEFAULT_GROUP {
            return Err(RpcError::new(
                EINVAL,
                "group 'default' cannot be set: it holds the targets of no other group",
            ));
        }
        let ids = if targets.is_empty() {
            IdSet::new()
        } else {
            self.state.decode_targets(targets)?
        };
        if let Some(last) = ids.last() {
            if last >= self.state.size {
                return Err(RpcError::new(EINVAL, "idset is out of range"));
            }
        }
        let groups = self.acquire.groups_with(group, &ids);
        out.push(Output::Log {
            level: Level::Info,
            msg: format!("group-set group={group} targets={}", ids.encode()),
        });
        Self::reply(out, to, Ok(Value::Null.into()));
        self.acquire.set_groups(groups, &self.state.truth(), out);
        Ok(None)
    }

    /// [`Input::SetGroups`]: a new `[resource.groups]` table.
    pub(super) fn set_groups(&mut self, raw: &[(String, String)], out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        let groups = match self.state.decode_groups(raw) {
            Ok(g) => g,
            Err(e) => {
                return out.push(Output::Log {
                    level: Level::Error,
                    msg: format!("resource groups unchanged: {e}"),
                })
            }
        };
        self.acquire.set_groups(groups, &self.state.truth(), out);
    }
}
