//! Journal positions: where a `resource.journal` reader stands, so that it
//! can resume after a lost connection, a restart or a failover without a
//! duplicate or a gap.
//!
//! A reader asks for positions with a `position` key in its request
//! (`null`: from the start; an object: resume after it).  Every response
//! it gets then carries `"position"`, the place of the response's last
//! event (the sentinel carries the place of the journal's newest event):
//!
//! ```json
//! {"run": "5f0c...", "seq": 42, "log": 17, "event": "9ae1..."}
//! ```
//!
//! * `run` (hex): the run of the service that sent it (a new one at every
//!   start and every takeover);
//! * `seq`: the event's sequence number in that run's journal (1 for the
//!   first; a `truncate` summary has the number of the newest event it
//!   replaced);
//! * `log`: how many persistent events (`drain`, `undrain`,
//!   `resource-define`, `resource-update`) the log holds up to this
//!   event, and `event` (hex) the fingerprint of the last of them
//!   ([`crate::journal::fingerprint`]).
//!
//! Resuming on the same run sends the events after `seq`.  On another run
//! the in-memory events of the old run are gone (the new run begins with
//! `restart`), so the reader gets the persistent events after the one
//! named by `log`/`event` (found by fingerprint if history truncation
//! moved it), then every event of the new run.  When something the reader
//! has not seen was dropped (`journal-max`, or its event was truncated by
//! `history`), the request fails with ERANGE: read the journal again from
//! the start.

use super::*;
use crate::journal::{fingerprint, LogMark, Place};
use eventlog::Event;
use std::collections::VecDeque;

/// A journal reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Follower {
    pub to: ReplyTo,
    /// It asked for positions (and to be told to resume, with EAGAIN,
    /// when the service stops).
    pub positions: bool,
    /// It asked for Roster's [`crate::journal::REQUESTER`] context key.
    pub requester: bool,
}

/// The persistent log as journal positions see it.
#[derive(Debug, Clone, Default)]
pub(super) struct LogIndex {
    /// Persistent events in the log (stored at start + recorded since).
    count: u64,
    /// Fingerprint of the last one (0 when none).
    last_fp: u64,
    /// Fingerprints of the newest persisted events, `fps[0]` being event
    /// number `count - fps.len() + 1`; at most `cap`.
    fps: VecDeque<u64>,
    cap: usize,
    /// How many events were stored at start.
    stored: u64,
    /// Log numbers of the stored events that are not in the journal
    /// (historical `resource-define`), ascending.
    skipped: Vec<u64>,
}

impl LogIndex {
    pub fn new(cap: usize) -> LogIndex {
        LogIndex {
            cap: cap.max(1),
            ..LogIndex::default()
        }
    }

    /// The mark of the log's end.
    pub fn mark(&self) -> LogMark {
        LogMark {
            log: self.count,
            fp: self.last_fp,
        }
    }

    /// One more persistent event; returns the mark it ends on.
    pub fn persisted(&mut self, ev: &Event) -> LogMark {
        self.count += 1;
        self.last_fp = fingerprint(ev);
        self.fps.push_back(self.last_fp);
        while self.fps.len() > self.cap {
            self.fps.pop_front();
        }
        self.mark()
    }

    /// A stored event read at start (in log order); `journaled`: it goes
    /// into the journal (historical `resource-define` entries do not).
    pub fn stored(&mut self, ev: &Event, journaled: bool) -> LogMark {
        let m = self.persisted(ev);
        self.stored = self.count;
        if !journaled {
            self.skipped.push(self.count);
            if self.skipped.len() > self.cap {
                self.skipped.remove(0);
            }
        }
        m
    }

    /// The number (in this log) of the stored event a reader of another
    /// run named by (`log`, `fp`): the event at `log` if its fingerprint
    /// matches, else the newest stored event with that fingerprint (the
    /// log lost a prefix to history truncation).  `Some(0)` for a reader
    /// that had seen no persistent event.
    fn find_stored(&self, log: u64, fp: u64) -> Option<u64> {
        if log == 0 {
            return Some(0);
        }
        let first = self.count - self.fps.len() as u64 + 1;
        let at = |n: u64| -> Option<u64> {
            let i = usize::try_from(n.checked_sub(first)?).ok()?;
            self.fps.get(i).copied()
        };
        if log <= self.stored && at(log) == Some(fp) {
            return Some(log);
        }
        (first..=self.stored.min(log))
            .rev()
            .find(|&n| at(n) == Some(fp))
    }

    /// The journal sequence number of the last stored event at or before
    /// log number `n` (stored events are the journal's first entries,
    /// numbered in log order, without the skipped ones).
    fn stored_seq(&self, n: u64) -> u64 {
        let skipped = self.skipped.iter().filter(|&&s| s <= n).count() as u64;
        n - skipped
    }
}

/// A position as a reader sends it back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Position {
    run: u64,
    seq: u64,
    log: u64,
    fp: u64,
}

impl From<msg::JournalPosition> for Position {
    fn from(p: msg::JournalPosition) -> Position {
        Position {
            run: p.run.0,
            seq: p.seq,
            log: p.log,
            fp: p.event.map_or(0, |e| e.0),
        }
    }
}

/// What a journal request asked for.
pub(super) struct Start {
    /// Responses carry positions.
    pub positions: bool,
    /// Send the entries with a sequence number above this.
    pub after: u64,
}

impl Service {
    /// A place as the `position` text of a response.
    pub(super) fn position_text(&self, place: Place) -> String {
        let p = msg::JournalPosition {
            run: msg::Hex64(self.run),
            seq: place.seq,
            log: place.mark.log,
            event: Some(msg::Hex64(place.mark.fp)),
        };
        serde_json::to_string(&p).unwrap_or_default()
    }

    /// Decode a journal request's `position` (see the module docs).
    pub(super) fn journal_start(
        &self,
        position: Option<Option<msg::JournalPosition>>,
    ) -> Result<Start, RpcError> {
        let pos = match position {
            None => {
                return Ok(Start {
                    positions: false,
                    after: 0,
                })
            }
            Some(None) => {
                return Ok(Start {
                    positions: true,
                    after: 0,
                })
            }
            Some(Some(p)) => Position::from(p),
        };
        let after = if pos.run == self.run {
            if pos.seq > self.journal.last_seq() {
                return Err(RpcError::new(
                    EINVAL,
                    format!(
                        "journal position {} is ahead of this journal (last event {})",
                        pos.seq,
                        self.journal.last_seq()
                    ),
                ));
            }
            pos.seq
        } else {
            let Some(n) = self.log.find_stored(pos.log, pos.fp) else {
                return Err(RpcError::new(
                    ERANGE,
                    format!(
                        "journal position (log event {}) is no longer in the log \
                         (truncated by history, or another log): read the journal from the start",
                        pos.log
                    ),
                ));
            };
            self.log.stored_seq(n)
        };
        if self.journal.dropped_through() > after {
            return Err(RpcError::new(
                ERANGE,
                format!(
                    "journal position {after} was truncated from the journal \
                     (journal-max {}): read the journal from the start",
                    self.journal.max()
                ),
            ));
        }
        Ok(Start {
            positions: true,
            after,
        })
    }
}
