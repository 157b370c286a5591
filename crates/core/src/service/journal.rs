//! `resource.journal` (flux-core's reslog.c journal) and
//! `resource.journal-cancel`.

use super::events::{events_payload, r_text};
use super::*;

impl Service {
    /// Backlog in batches of up to 100 (a `resource-define` alone, with R),
    /// the `{events:[]}` sentinel, then live events.
    pub(super) fn journal_rpc(&mut self, _: f64, req: &Request, out: &mut Vec<Output>) -> Handled {
        if !req.streaming {
            return Err(RpcError::new(EPROTO, "journal requires streaming RPC flag"));
        }
        let to = req.reply_to();
        // Each event is serialised once for the life of the journal
        // (`Journal::events_json`); a batch is their concatenation.
        let mut batch: Vec<&str> = Vec::with_capacity(100);
        let flush = |batch: &mut Vec<&str>, out: &mut Vec<Output>| {
            if !batch.is_empty() {
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(batch, None)),
                });
                batch.clear();
            }
        };
        for (ev, v) in self.journal.events_json() {
            let Some(v) = v else { continue };
            if ev.name == "resource-define" {
                flush(&mut batch, out);
                let r = self.state.inventory.as_ref().map(r_text);
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(&[v], r.as_deref())),
                });
                continue;
            }
            batch.push(v);
            if batch.len() == 100 {
                flush(&mut batch, out);
            }
        }
        flush(&mut batch, out);
        Self::reply(out, to, Ok(Payload::json("{\"events\":[]}")));
        self.followers.push(to);
        Ok(None)
    }

    /// `resource.journal-cancel {matchtag}`: end that journal stream.
    pub(super) fn journal_cancel(
        &mut self,
        _: f64,
        req: &Request,
        out: &mut Vec<Output>,
    ) -> Handled {
        let target = Self::cancel_target(req)?;
        if let Some(pos) = self.followers.iter().position(|t| *t == target) {
            self.followers.remove(pos);
            Self::reply(out, target, Err(RpcError::bare(ENODATA)));
        }
        Ok(None)
    }
}
