//! RFC 28 resource acquisition for schedulers: typed responses and an
//! [`Acquisition`] view that follows them.
//!
//! Both variants are understood:
//!
//! * **v1** (`resource.acquire` with `{}`; flux-core's protocol): a first
//!   response `{resources, up}`, then updates with any of `up`, `down`,
//!   `shrink` (targets removed from the instance; never released) and,
//!   alone, `expiration`;
//! * **groups** (`{"group": G}`; the RFC 28 groups draft): typed
//!   responses `grow {resources, online, offline}` (the first response is
//!   a grow), `shrink {targets}`, `online {targets}`, `offline {targets}`.
//!   Shrunk targets stay *pending* until the scheduler sends
//!   `resource.release {group, targets}` once no job uses them.
//!
//! ```no_run
//! # async fn run() -> Result<(), client::ClientError> {
//! let c = client::Client::from_env(None, None)?;
//! let mut acq = c.acquisition(Some("default")).await?;
//! while let Some(resp) = acq.next().await {
//!     let resp = resp?;
//!     println!("{resp:?}: up {} down {}", acq.view().up(), acq.view().down());
//!     // A real scheduler releases shrunk targets once their jobs are gone.
//!     let pending = acq.view().pending_shrink().clone();
//!     if !pending.is_empty() {
//!         acq.release(&pending).await?;
//!     }
//! }
//! # Ok(()) }
//! ```

use crate::{Client, ClientError, ReplyStream};
use idset::IdSet;
use serde_json::Value;

/// The group a v1 acquire holds.
pub const DEFAULT_GROUP: &str = "default";

/// One `resource.acquire` response, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// v1 first response: the resource set and its up targets.
    Initial { resources: Value, up: IdSet },
    /// v1 later response: transitions (any may be empty).
    Update {
        up: IdSet,
        down: IdSet,
        shrink: IdSet,
    },
    /// v1: the instance expiration changed.
    Expiration(f64),
    /// groups: resources added (`targets` are the ranks of `resources`).
    Grow {
        resources: Value,
        targets: IdSet,
        online: IdSet,
        offline: IdSet,
    },
    /// groups: targets taken away; release them once free.
    Shrink(IdSet),
    /// groups: targets now usable.
    Online(IdSet),
    /// groups: targets no longer usable (drained, crashed or torpid).
    Offline(IdSet),
}

fn bad(what: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol(format!("unexpected resource.acquire response: {what}"))
}

fn idset_at(v: &Value, key: &str, required: bool) -> Result<IdSet, ClientError> {
    match v.get(key) {
        None if !required => Ok(IdSet::new()),
        Some(Value::String(s)) => IdSet::parse(s).map_err(|e| bad(format!("{key}: {e}"))),
        _ => Err(bad(format!("missing or non-string '{key}'"))),
    }
}

/// The execution targets of an R document (union of its `R_lite` ranks).
pub fn r_targets(r: &Value) -> Result<IdSet, ClientError> {
    let lite = r
        .get("execution")
        .and_then(|e| e.get("R_lite"))
        .and_then(Value::as_array)
        .ok_or_else(|| bad("resources has no execution.R_lite array"))?;
    let mut out = IdSet::new();
    for entry in lite {
        out.add(&idset_at(entry, "rank", true)?);
    }
    Ok(out)
}

impl Response {
    /// Decode a response of the given variant (`v1`: requested without a
    /// group); `first` tells whether it is the first of its stream.
    pub fn parse(v: &Value, v1: bool, first: bool) -> Result<Response, ClientError> {
        if !v.is_object() {
            return Err(bad(v));
        }
        if !v1 {
            let ty = v
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("missing 'type'"))?;
            if first && ty != "grow" {
                return Err(bad(format!("first response has type '{ty}', not 'grow'")));
            }
            return match ty {
                "grow" => {
                    let resources = v
                        .get("resources")
                        .cloned()
                        .ok_or_else(|| bad("grow without 'resources'"))?;
                    Ok(Response::Grow {
                        targets: r_targets(&resources)?,
                        resources,
                        online: idset_at(v, "online", true)?,
                        offline: idset_at(v, "offline", true)?,
                    })
                }
                "shrink" => Ok(Response::Shrink(idset_at(v, "targets", true)?)),
                "online" => Ok(Response::Online(idset_at(v, "targets", true)?)),
                "offline" => Ok(Response::Offline(idset_at(v, "targets", true)?)),
                other => Err(bad(format!("unknown type '{other}'"))),
            };
        }
        if first {
            let resources = v
                .get("resources")
                .cloned()
                .ok_or_else(|| bad("first response without 'resources'"))?;
            r_targets(&resources)?;
            return Ok(Response::Initial {
                resources,
                up: idset_at(v, "up", true)?,
            });
        }
        if let Some(e) = v.get("expiration") {
            return e
                .as_f64()
                .map(Response::Expiration)
                .ok_or_else(|| bad("non-numeric 'expiration'"));
        }
        Ok(Response::Update {
            up: idset_at(v, "up", false)?,
            down: idset_at(v, "down", false)?,
            shrink: idset_at(v, "shrink", false)?,
        })
    }
}

/// A scheduler's view of one acquire, maintained from its responses.
///
/// * [`all`](Self::all): targets the scheduler may allocate (granted, not
///   shrunk);
/// * [`up`](Self::up) / [`down`](Self::down): of those, usable or not;
/// * [`pending_shrink`](Self::pending_shrink): shrunk, awaiting
///   `resource.release` (groups variant only; v1 shrinks need no release).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Acquisition {
    group: Option<String>,
    started: bool,
    resources: Vec<Value>,
    all: IdSet,
    up: IdSet,
    pending: IdSet,
    expiration: Option<f64>,
}

impl Acquisition {
    /// A view for an acquire of `group` (`None`: the v1 protocol).
    pub fn new(group: Option<&str>) -> Acquisition {
        Acquisition {
            group: group.map(str::to_string),
            ..Default::default()
        }
    }

    /// The group held (`default` for v1).
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or(DEFAULT_GROUP)
    }

    /// Requested with the v1 protocol.
    pub fn is_v1(&self) -> bool {
        self.group.is_none()
    }

    /// The first response has arrived.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Targets the scheduler may allocate.
    pub fn all(&self) -> &IdSet {
        &self.all
    }

    /// Allocatable targets that are up (online).
    pub fn up(&self) -> &IdSet {
        &self.up
    }

    /// Allocatable targets that are down (offline, drained, torpid).
    pub fn down(&self) -> IdSet {
        self.all.difference(&self.up)
    }

    /// Shrunk targets not yet released.
    pub fn pending_shrink(&self) -> &IdSet {
        &self.pending
    }

    /// The last expiration announced (v1).
    pub fn expiration(&self) -> Option<f64> {
        self.expiration
    }

    /// The R documents received (first response, then each grow), in
    /// order.  Targets shrunk since are still in them; use
    /// [`all`](Self::all) to know what is allocatable.
    pub fn resources(&self) -> &[Value] {
        &self.resources
    }

    /// Apply one response payload; returns it decoded.
    pub fn apply(&mut self, payload: &Value) -> Result<Response, ClientError> {
        let resp = Response::parse(payload, self.is_v1(), !self.started)?;
        self.started = true;
        match &resp {
            Response::Initial { resources, up } => {
                self.all = r_targets(resources)?;
                self.up = up.intersection(&self.all);
                self.resources.push(resources.clone());
            }
            Response::Update { up, down, shrink } => {
                self.up.add(&up.intersection(&self.all));
                self.up.subtract(down);
                self.all.subtract(shrink);
                self.up.subtract(shrink);
            }
            Response::Expiration(e) => self.expiration = Some(*e),
            Response::Grow {
                resources,
                targets,
                online,
                ..
            } => {
                self.all.add(targets);
                self.pending.subtract(targets);
                self.up.add(&online.intersection(targets));
                self.resources.push(resources.clone());
            }
            Response::Shrink(t) => {
                let t = t.intersection(&self.all);
                self.all.subtract(&t);
                self.up.subtract(&t);
                self.pending.add(&t);
            }
            Response::Online(t) => self.up.add(&t.intersection(&self.all)),
            Response::Offline(t) => self.up.subtract(t),
        }
        Ok(resp)
    }

    /// Record that `targets` were released (after a successful
    /// `resource.release`).  Refuses targets that are not pending, naming
    /// them, so a scheduler can check before sending.
    pub fn released(&mut self, targets: &IdSet) -> Result<(), ClientError> {
        self.check_release(targets)?;
        self.pending.subtract(targets);
        Ok(())
    }

    /// Check a release against the view (see [`released`](Self::released)).
    pub fn check_release(&self, targets: &IdSet) -> Result<(), ClientError> {
        if self.is_v1() {
            return Err(ClientError::Protocol(
                "a v1 acquire has nothing to release".into(),
            ));
        }
        let bad = targets.difference(&self.pending);
        if bad.is_empty() {
            Ok(())
        } else {
            let (s, verb) = if bad.len() > 1 {
                ("s", "are")
            } else {
                ("", "is")
            };
            Err(ClientError::Protocol(format!(
                "target{s} {bad} of group '{}' {verb} not pending shrink",
                self.group()
            )))
        }
    }
}

/// A live acquire: the response stream plus the [`Acquisition`] it
/// maintains.  Dropping it cancels the acquire (the service frees the
/// group; running jobs are unaffected).
#[derive(Debug)]
pub struct AcquireStream {
    client: Client,
    stream: ReplyStream,
    view: Acquisition,
}

impl AcquireStream {
    /// The next response, already applied to [`view`](Self::view);
    /// `None` once the service ended the stream.
    #[allow(clippy::should_implement_trait)]
    pub async fn next(&mut self) -> Option<Result<Response, ClientError>> {
        match self.stream.next().await? {
            Ok(v) => Some(self.view.apply(&v)),
            Err(e) => Some(Err(e)),
        }
    }

    /// The scheduler's view so far.
    pub fn view(&self) -> &Acquisition {
        &self.view
    }

    /// Send `resource.release {group, targets}` for pending shrink targets
    /// and update the view.  Targets not pending are refused locally.
    pub async fn release(&mut self, targets: &IdSet) -> Result<(), ClientError> {
        self.view.check_release(targets)?;
        self.client
            .release(self.view.group(), &targets.encode())
            .await?;
        self.view.released(targets)
    }
}

impl Client {
    /// Start an acquire (`None`: v1, else the named group) and follow it
    /// with an [`Acquisition`] view.
    pub async fn acquisition(&self, group: Option<&str>) -> Result<AcquireStream, ClientError> {
        let stream = self.acquire(group).await?;
        Ok(AcquireStream {
            client: self.clone(),
            stream,
            view: Acquisition::new(group),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    fn r(ranks: &str) -> Value {
        json!({"version": 1, "execution": {"R_lite": [{"rank": ranks, "children": {"core": "0"}}], "starttime": 0.0, "expiration": 0.0}})
    }

    #[test]
    fn v1_view_follows_updates() {
        let mut a = Acquisition::new(None);
        assert_eq!(a.group(), "default");
        let resp = a
            .apply(&json!({"resources": r("1-3"), "up": "1-2"}))
            .unwrap();
        assert!(matches!(resp, Response::Initial { .. }));
        assert_eq!(
            (a.all(), a.up(), a.down()),
            (&ids("1-3"), &ids("1-2"), ids("3"))
        );
        a.apply(&json!({"down": "1"})).unwrap();
        a.apply(&json!({"up": "3"})).unwrap();
        assert_eq!((a.up(), a.down()), (&ids("2-3"), ids("1")));
        let resp = a.apply(&json!({"down": "3", "shrink": "3"})).unwrap();
        assert_eq!(
            resp,
            Response::Update {
                up: ids(""),
                down: ids("3"),
                shrink: ids("3")
            }
        );
        assert_eq!((a.all(), a.up()), (&ids("1-2"), &ids("2")));
        assert!(a.pending_shrink().is_empty());
        assert_eq!(
            a.apply(&json!({"expiration": 1234.5})).unwrap(),
            Response::Expiration(1234.5)
        );
        assert_eq!(a.expiration(), Some(1234.5));
        assert!(a.released(&ids("3")).is_err());
        assert_eq!(a.resources().len(), 1);
    }

    #[test]
    fn group_view_follows_grow_shrink_release() {
        let mut a = Acquisition::new(Some("batch"));
        // the first response must be a grow
        assert!(Acquisition::new(Some("x"))
            .apply(&json!({"type": "online", "targets": "1"}))
            .is_err());
        a.apply(&json!({"type": "grow", "resources": r("0-3"), "online": "0-2", "offline": "3"}))
            .unwrap();
        assert_eq!((a.all(), a.up()), (&ids("0-3"), &ids("0-2")));
        a.apply(&json!({"type": "offline", "targets": "1"}))
            .unwrap();
        a.apply(&json!({"type": "online", "targets": "3"})).unwrap();
        assert_eq!(a.down(), ids("1"));
        let resp = a
            .apply(&json!({"type": "shrink", "targets": "2-3"}))
            .unwrap();
        assert_eq!(resp, Response::Shrink(ids("2-3")));
        assert_eq!(
            (a.all(), a.up(), a.pending_shrink()),
            (&ids("0-1"), &ids("0"), &ids("2-3"))
        );
        let e = a.released(&ids("1-2")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "target 1 of group 'batch' is not pending shrink"
        );
        a.released(&ids("2")).unwrap();
        assert_eq!(a.pending_shrink(), &ids("3"));
        let resp = a
            .apply(&json!({"type": "grow", "resources": r("5"), "online": "", "offline": "5"}))
            .unwrap();
        assert!(matches!(resp, Response::Grow { ref targets, .. } if *targets == ids("5")));
        assert_eq!((a.all(), a.down()), (&ids("0-1,5"), ids("1,5")));
        assert_eq!(a.resources().len(), 2);
    }

    #[test]
    fn malformed_responses_are_protocol_errors() {
        let mut a = Acquisition::new(None);
        for bad in [
            json!("x"),
            json!({"up": "0"}),
            json!({"resources": {"version": 1}, "up": "0"}),
            json!({"resources": r("0"), "up": "zz"}),
        ] {
            let e = a.apply(&bad).unwrap_err();
            assert!(matches!(e, ClientError::Protocol(_)), "{bad}: {e}");
        }
        let mut g = Acquisition::new(Some("g"));
        assert!(g.apply(&json!({"resources": r("0")})).is_err());
        g.apply(&json!({"type": "grow", "resources": r("0"), "online": "0", "offline": ""}))
            .unwrap();
        assert!(g.apply(&json!({"type": "bogus"})).is_err());
        assert!(g.apply(&json!({"type": "shrink"})).is_err());
        // an empty group starts with an empty grow
        let mut e = Acquisition::new(Some("empty"));
        e.apply(&json!({"type": "grow", "resources": {"version": 1, "execution": {"R_lite": [], "nodelist": [""]}}, "online": "", "offline": ""}))
            .unwrap();
        assert!(e.started() && e.all().is_empty());
    }
}
