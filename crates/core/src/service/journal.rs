//! `resource.journal` (flux-core's reslog.c journal) and
//! `resource.journal-cancel`.

use super::events::{events_payload, r_text};
use super::position::Follower;
use super::*;
use crate::journal::{self, Place};
use std::borrow::Cow;

impl Service {
    /// Backlog in batches of up to 100 (a `resource-define` alone, with R),
    /// the `{events:[]}` sentinel, then live events.  With a `position`
    /// in the request (see [`super::position`]), only the entries after it,
    /// and every response carries its position.
    pub(super) fn journal_rpc(&mut self, c: Ctx<'_>, body: msg::JournalRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        if !req.streaming {
            return Err(RpcError::new(EPROTO, "journal requires streaming RPC flag"));
        }
        let start = self.journal_start(body.position)?;
        let to = req.reply_to();
        let pos = |place: Place| start.positions.then(|| self.position_text(place));
        // Each event is serialised once for the life of the journal
        // (`Journal::entries`); a batch is their concatenation.  A
        // reader that did not ask for the requester gets the (rare)
        // events naming one serialised without it.
        let mut batch: Vec<Cow<str>> = Vec::with_capacity(100);
        let mut last = Place::default();
        let flush = |batch: &mut Vec<Cow<str>>, last: Place, out: &mut Vec<Output>| {
            if !batch.is_empty() {
                let texts: Vec<&str> = batch.iter().map(|t| t.as_ref()).collect();
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(&texts, None, pos(last).as_deref())),
                });
                batch.clear();
            }
        };
        for (ev, place, v) in self.journal.entries() {
            if place.seq <= start.after {
                continue;
            }
            let Some(v) = v else { continue };
            if ev.name == "resource-define" {
                flush(&mut batch, last, out);
                let r = self.state.inventory.as_ref().map(r_text);
                out.push(Output::Reply {
                    to,
                    reply: Ok(events_payload(&[v], r.as_deref(), pos(place).as_deref())),
                });
                continue;
            }
            match journal::flux_json(ev).filter(|_| !body.requester) {
                Some(plain) => batch.push(Cow::Owned(plain)),
                None => batch.push(Cow::Borrowed(v)),
            }
            last = place;
            if batch.len() == 100 {
                flush(&mut batch, last, out);
            }
        }
        flush(&mut batch, last, out);
        let sentinel = match pos(self.journal.last_place()) {
            Some(p) => Payload::json(format!("{{\"events\":[],\"position\":{p}}}")),
            None => Payload::json("{\"events\":[]}"),
        };
        Self::reply(out, to, Ok(sentinel));
        self.followers.push(Follower {
            to,
            positions: start.positions,
            requester: body.requester,
        });
        Ok(None)
    }

    /// `resource.journal-cancel {matchtag}`: end that journal stream.
    pub(super) fn journal_cancel(&mut self, c: Ctx<'_>, body: msg::CancelRequest) -> Handled {
        let Ctx { req, out, .. } = c;
        let target = Self::cancel_target(req, body);
        if let Some(pos) = self.followers.iter().position(|f| f.to == target) {
            self.followers.remove(pos);
            Self::reply(out, target, Err(RpcError::bare(ENODATA)));
        }
        Ok(None)
    }
}
