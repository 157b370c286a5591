//! A `resource.journal` reader that survives restarts and failovers.
//!
//! [`JournalFollower`] asks the service for journal positions (request
//! payload `{"position": null}`, or the position to resume after; see the
//! core's `service::position` documentation and the README), remembers
//! the position of the last response it handed out, and when the stream
//! ends with a failover error — EAGAIN (a standby's "not the leader"
//! redirect, a leader stepping down, a service stopping), a connection
//! lost (reset, EOF) or EOVERFLOW (a reader that fell behind) — it
//! reconnects, starting with the next server of the `--uri` list, and
//! resumes after that position: no event twice, none missed.  Persistent
//! events are never lost across runs; the in-memory events of a server
//! that died are gone with it (the new run's `restart` event says so).
//!
//! The responses are the service's, without the `position` key; the
//! `{"events":[]}` sentinel is handed out once (the first time the
//! backlog ends), not again after a resume.  ENODATA (the stream
//! cancelled) ends the reader; so does an error the service answers to
//! the resume (ERANGE: what the reader missed was truncated) or
//! [`RESUME_WAIT`] without a server to resume on.

use crate::retry::{classify, Failure};
use crate::{Client, ClientError, ReplyStream};
use rpc::catalog::{Call, Journal};
use rpc::errno::EOVERFLOW;
use rpc::msg::{JournalPosition, JournalRequest};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a follower tries to resume.
pub const RESUME_WAIT: Duration = Duration::from_secs(30);

/// A resuming journal reader (see the module documentation).
#[derive(Debug)]
pub struct JournalFollower {
    client: Client,
    position: Option<JournalPosition>,
    stream: Option<ReplyStream>,
    /// The backlog's end (the sentinel) was handed out.
    synced: bool,
    wait: Duration,
    done: bool,
    resumes: u64,
    notice: Option<Notice>,
}

/// What to call when a resume has to wait (see
/// [`JournalFollower::on_resume_wait`]).
#[derive(Clone)]
struct Notice(Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notice")
    }
}

/// Whether a stream error is a failover the reader should resume from.
pub fn resumable(e: &ClientError) -> bool {
    match e {
        ClientError::Rpc(r) if r.errnum == EOVERFLOW => true,
        _ => matches!(
            classify(e),
            Failure::Lost | Failure::Unavailable | Failure::NotLeader(_) | Failure::NotConnected
        ),
    }
}

impl JournalFollower {
    /// A reader of the whole journal (backlog, sentinel, live events).
    pub fn new(client: Client) -> JournalFollower {
        JournalFollower {
            client,
            position: None,
            stream: None,
            synced: false,
            wait: RESUME_WAIT,
            done: false,
            resumes: 0,
            notice: None,
        }
    }

    /// Call `notice` with a one-line explanation when the stream ended
    /// and the first attempt to resume it failed (the service is not back
    /// at once): a command-line follower says so rather than going quiet
    /// for up to the resume wait.  Once per interruption.
    pub fn on_resume_wait(
        mut self,
        notice: impl Fn(&str) + Send + Sync + 'static,
    ) -> JournalFollower {
        self.notice = Some(Notice(Arc::new(notice)));
        self
    }

    /// Open the stream now, so that an error (no service, no permission)
    /// comes here rather than from the first [`JournalFollower::next`].
    pub async fn open(mut self) -> Result<JournalFollower, ClientError> {
        let s = self.client.open::<Journal>(&self.request()).await?;
        self.stream = Some(s);
        Ok(self)
    }

    /// The position of the last response handed out (`None` before the
    /// first one, or when the service gives no positions).
    pub fn position(&self) -> Option<&JournalPosition> {
        self.position.as_ref()
    }

    /// How many times the reader resumed on a new stream.
    pub fn resumes(&self) -> u64 {
        self.resumes
    }

    /// Positions from the start, or after the last one handed out.
    fn request(&self) -> JournalRequest {
        JournalRequest {
            position: Some(self.position),
            ..JournalRequest::default()
        }
    }

    /// The next response; `None` once the stream ended normally.
    #[allow(clippy::should_implement_trait)]
    pub async fn next(&mut self) -> Option<Result<Value, ClientError>> {
        loop {
            if self.done {
                return None;
            }
            let stream = match self.stream.as_mut() {
                Some(s) => s,
                None => match self.client.open::<Journal>(&self.request()).await {
                    Ok(s) => self.stream.insert(s),
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
            };
            match stream.next().await {
                Some(Ok(mut v)) => {
                    if let Some(p) = v.as_object_mut().and_then(|m| m.remove("position")) {
                        match serde_json::from_value(p) {
                            Ok(p) => self.position = Some(p),
                            Err(e) => {
                                self.done = true;
                                let what = format!("unexpected {} position: {e}", Journal::TOPIC);
                                return Some(Err(ClientError::Protocol(what)));
                            }
                        }
                    }
                    let sentinel = v
                        .get("events")
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty);
                    if sentinel {
                        if self.synced {
                            continue;
                        }
                        self.synced = true;
                    }
                    return Some(Ok(v));
                }
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => {
                    let from = stream.uri().clone();
                    self.stream = None;
                    if self.position.is_none() || !resumable(&e) {
                        self.done = true;
                        return Some(Err(e));
                    }
                    match self.resume(&from, e).await {
                        Ok(s) => {
                            self.resumes += 1;
                            self.stream = Some(s);
                        }
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    }
                }
            }
        }
    }

    /// Open a stream after the position, starting with the server after
    /// `from`, until one answers or the resume wait is over.
    async fn resume(
        &mut self,
        from: &rpc::uri::Uri,
        ended: ClientError,
    ) -> Result<ReplyStream, ClientError> {
        let deadline = Instant::now() + self.wait;
        let client = self.client.starting_after(from);
        let mut pause = Duration::from_millis(50);
        // The wait is said once, after the first attempt failed.
        let mut said = false;
        loop {
            let err = match client.open::<Journal>(&self.request()).await {
                Ok(s) => return Ok(s),
                Err(e) => e,
            };
            if !resumable(&err) {
                // The service answered: e.g. ERANGE, the events after the
                // position are gone.
                return Err(err);
            }
            if !said {
                said = true;
                if let Some(Notice(notice)) = &self.notice {
                    notice(&format!(
                        "the journal stream ended ({ended}); trying to resume it for up to {} s",
                        self.wait.as_secs_f64()
                    ));
                }
            }
            if Instant::now() + pause >= deadline {
                return Err(ClientError::Lost(format!(
                    "the journal stream ended ({ended}) and no server resumed it within {} s: {err}",
                    self.wait.as_secs_f64()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}
