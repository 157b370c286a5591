//! `resource.reload` (R loaded by the shell, then [`Input::Reloaded`])
//! and `resource.expiration-update`.

use super::*;
use rset::Rset;
use serde_json::json;

/// flux-core's answer to `resource.reload` while a scheduler holds a v1
/// acquire.
fn busy_reload() -> RpcError {
    RpcError::new(EBUSY, "resources are busy (unload scheduler?)")
}

impl Service {
    /// `resource.reload {path, xml, force}`: the shell loads R
    /// ([`Output::LoadR`]) and comes back with [`Input::Reloaded`].
    pub(super) fn reload_rpc(&mut self, c: Ctx<'_>, body: msg::ReloadRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let to = req.reply_to();
        let msg::ReloadRequest { path, xml, force } = body;
        if self.acquire.v1_held() {
            return Err(busy_reload());
        }
        out.push(Output::LoadR {
            to,
            path,
            xml,
            force,
        });
        Ok(None)
    }

    pub(super) fn reloaded(
        &mut self,
        now: f64,
        to: ReplyTo,
        force: bool,
        result: Result<Rset, RpcError>,
        out: &mut Vec<Output>,
    ) {
        let rset = match result {
            Ok(r) => r,
            Err(e) => return Self::reply(out, to, Err(e)),
        };
        if self.acquire.v1_held() {
            return Self::reply(out, to, Err(busy_reload()));
        }
        if let Some(last) = rset.ranks().last() {
            if last >= self.state.size && self.state.size > 0 {
                if !force {
                    return Self::reply(
                        out,
                        to,
                        Err(RpcError::new(
                            EINVAL,
                            format!(
                                "resource object contains ranks execeeding size={} (override with -f))",
                                self.state.size
                            ),
                        )),
                    );
                }
                out.push(Output::Log {
                    level: Level::Warn,
                    msg: format!(
                        "resource object contains ranks exceeding size={}",
                        self.state.size
                    ),
                });
            }
        }
        let inv = Inventory::from_rset(rset, Method::Reload);
        out.push(Output::WriteR(inv.json.clone()));
        self.set_inventory(inv);
        self.post(now, "resource-define", define("reload"), Keep::Ack(to), out);
    }

    /// `resource.expiration-update {expiration}`.
    pub(super) fn expiration_update(
        &mut self,
        c: Ctx<'_>,
        body: msg::ExpirationRequest,
    ) -> Handled {
        let Ctx { now, req, out } = c;
        let to = req.reply_to();
        let exp = Some(body.expiration)
            .filter(|e| e.is_finite())
            .ok_or_else(proto)?;
        let Some(inv) = self.state.inventory.as_mut() else {
            return Err(RpcError::new(ENOENT, "resource set is not known yet"));
        };
        // An R the service could not load again is never stored.
        let start = inv.rset.starttime();
        if exp > 0.0 && start > 0.0 && exp <= start {
            return Err(RpcError::new(
                EINVAL,
                format!(
                    "expiration={exp} is not after starttime={start}: RFC 20: \"{}\"",
                    rset::EXPIRATION_RULE
                ),
            ));
        }
        inv.rset.set_expiration(exp);
        if let Some(ex) = inv.json.get_mut("execution").and_then(Value::as_object_mut) {
            ex.insert("expiration".into(), json!(exp));
        }
        out.push(Output::WriteR(inv.json.clone()));
        self.post(
            now,
            "resource-update",
            rfc44::context(&rfc44::ResourceUpdate {
                expiration: Some(exp),
            }),
            Keep::Ack(to),
            out,
        );
        Ok(None)
    }
}
