//! The typed payloads of the catalogue's topics ([`crate::catalog`]).
//!
//! Requests accept and ignore unknown keys (flux-core's services do) and
//! read an absent payload as `{}` ([`decode`]).  Documents that belong to
//! another codec (R, RFC 18 events) stay JSON values here and are handed
//! whole to that codec (`rset`, `eventlog`); nothing here picks them
//! apart (the RFC 44 event contexts are [`crate::events`]).

use idset::IdSet;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A payload that failed to decode: where (the key path) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", path_prefix(.path))]
pub struct DecodeError {
    /// The key path of the bad value (`hello[0].ranks`), empty for the
    /// payload itself.
    pub path: String,
    pub message: String,
}

fn path_prefix(p: &str) -> String {
    if p.is_empty() || p == "." {
        String::new()
    } else {
        format!("{p}: ")
    }
}

/// Decode a payload: `null` (no payload) reads as `{}`; anything but an
/// object is refused.
pub fn decode<T: DeserializeOwned>(payload: &Value) -> Result<T, DecodeError> {
    let empty_object;
    let v = match payload {
        Value::Null => {
            empty_object = Value::Object(serde_json::Map::new());
            &empty_object
        }
        Value::Object(_) => payload,
        other => {
            return Err(DecodeError {
                path: String::new(),
                message: format!("the payload must be a JSON object, not {}", kind(other)),
            });
        }
    };
    // The plain decoding first: a well-formed payload (nearly every one)
    // needs no path.  Only a refused one is decoded again, tracking the
    // path of the key at fault for the message (the same answer).
    if let Ok(t) = T::deserialize(v) {
        return Ok(t);
    }
    serde_path_to_error::deserialize(v).map_err(|e| DecodeError {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Decode a reply payload (`null`, no payload, reads as `{}`), naming
/// the topic when it does not have the catalogue's shape.
pub fn decode_reply<T: DeserializeOwned>(topic: &str, payload: &Value) -> Result<T, String> {
    decode(payload).map_err(|e| format!("unexpected {topic} reply: {e}"))
}

/// A payload as the value sent on the wire.
pub fn encode<T: Serialize>(payload: &T) -> Value {
    serde_json::to_value(payload).unwrap_or(Value::Null)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// No keys: `{}` (or no payload; a `null` reply decodes to it too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `resource.drain` and `resource.undrain` (keys in flux's order:
/// targets, mode, reason).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRequest {
    /// An idset or a hostlist.
    pub targets: String,
    /// `overwrite`, `update` (drain) or unset; undrain: `force` or unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DrainRequest {
    pub fn new(targets: &str, reason: Option<&str>, mode: Option<&str>) -> DrainRequest {
        DrainRequest {
            targets: targets.to_string(),
            mode: mode.map(str::to_string),
            reason: reason.map(str::to_string),
        }
    }
}

/// `resource.journal`: flux's request is `{}`; Roster's readers that
/// resume send `position` (`null`: from the start, with positions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRequest {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub position: Option<Option<JournalPosition>>,
    /// Roster's: include the `requester` key of `drain`/`undrain`
    /// contexts (left out otherwise: flux prints every context key).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requester: bool,
}

/// Where a journal reader is: the run (a start of the service) and the
/// sequence number in it, and the place in the persistent log (count and
/// fingerprint of the last persistent event), so another run finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalPosition {
    pub run: Hex64,
    pub seq: u64,
    pub log: u64,
    #[serde(default)]
    pub event: Option<Hex64>,
}

/// A 64-bit value written as 16 hex digits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Hex64(pub u64);

impl Serialize for Hex64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:016x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex64, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(&s, 16)
            .map(Hex64)
            .map_err(|_| D::Error::custom(format!("'{s}' is not a hexadecimal number")))
    }
}

/// One response of `resource.journal`: a batch of RFC 18 events (the
/// first `resource-define` alone, with R), or the empty batch that ends
/// the backlog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JournalResponse {
    pub events: Vec<Value>,
    #[serde(rename = "R", default, skip_serializing_if = "Option::is_none")]
    pub r: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<JournalPosition>,
}

/// `*-cancel {matchtag}`: the request of this connection to end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub matchtag: u32,
}

/// `resource.reload {path, xml, force}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadRequest {
    pub path: String,
    pub xml: bool,
    pub force: bool,
}

/// `resource.expiration-update {expiration}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpirationRequest {
    pub expiration: f64,
}

/// `resource.monitor-force-up {ranks?}` / `monitor-force-down {ranks}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<String>,
}

/// `resource.monitor-waitup {up}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitupRequest {
    pub up: i64,
}

/// `resource.acquire`: no `group` is the published (v1) protocol, which
/// holds the `default` group; a `group` is the groups variant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One response of `resource.acquire` (both RFC 28 variants: v1
/// responses have no `type`).  Idsets are strings as on the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcquireResponse {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrink: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<f64>,
}

/// `resource.release` and `resource.group-set`: `{group, targets}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetsOfGroup {
    pub group: String,
    pub targets: String,
}

impl TargetsOfGroup {
    pub fn new(group: &str, targets: &str) -> TargetsOfGroup {
        TargetsOfGroup {
            group: group.to_string(),
            targets: targets.to_string(),
        }
    }
}

/// `resource.status`: `{R, drain, online, offline, exclude, torpid}`.
/// Idsets are kept as the strings the service sent (`""` when empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusResponse {
    /// The instance R without `scheduling` (`null` if the service has
    /// none).
    #[serde(rename = "R", default)]
    pub r: Value,
    /// Drain groups keyed by idset, in the service's order.
    #[serde(default, with = "drain_map")]
    pub drain: Vec<(String, DrainEntry)>,
    #[serde(default)]
    pub online: String,
    #[serde(default)]
    pub offline: String,
    #[serde(default)]
    pub exclude: String,
    #[serde(default)]
    pub torpid: String,
}

/// `resource.summary {list?}` (Roster's): with `list`, the `list`
/// part of the reply too (it is large on big instances).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryRequest {
    #[serde(default)]
    pub list: bool,
}

/// `resource.summary`: what `roster resource status`, `drain` and `list`
/// print, computed by the service (once per state change) so that the
/// command reads and prints instead of expanding R into nodes.  Idsets
/// and hostlists are their RFC 22 / RFC 29 strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryResponse {
    /// Absent when the nodelist would not read back as the same list (a
    /// client then computes from `resource.status`).
    #[serde(default)]
    pub status: Option<StatusSummary>,
    /// The scheduler's view split by state and property set; absent
    /// when not asked for, or when it cannot be summarised (no R, a node
    /// without resources, a hostname that is also a property name,
    /// `[queues]` configured, whose names list lines show): the
    /// client then computes it from `resource.sched-status`.
    #[serde(default)]
    pub list: Option<ListSummary>,
}

/// The sets `status` and the drain listing show, as `resource.status`
/// has them, with R reduced to its ranks and hostnames.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusSummary {
    /// R's ranks.
    #[serde(default)]
    pub ranks: String,
    /// R's hostnames in rank order (`""` when a node has none).
    #[serde(default)]
    pub nodelist: String,
    #[serde(default)]
    pub online: String,
    #[serde(default)]
    pub offline: String,
    #[serde(default)]
    pub exclude: String,
    #[serde(default)]
    pub torpid: String,
    /// Ranks with an allocation (`resource.sched-status`'s `allocated`).
    #[serde(default)]
    pub allocated: String,
    /// Drained ranks by (timestamp, reason), in `resource.status` order.
    #[serde(default)]
    pub drain: Vec<DrainGroup>,
}

/// Drained ranks sharing a timestamp and a reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainGroup {
    pub ranks: String,
    pub timestamp: f64,
    #[serde(default)]
    pub reason: String,
}

/// `list`'s states, each split by property set as `flux resource list`
/// splits them (in its order): one cell per property set.  `free` is
/// the `free` of a listing that does not also ask for `up`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListSummary {
    pub all: Vec<ListCell>,
    pub down: Vec<ListCell>,
    pub allocated: Vec<ListCell>,
    pub up: Vec<ListCell>,
    pub free: Vec<ListCell>,
}

/// The nodes of one state with one property set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListCell {
    /// Property names, in the order the list prints them.
    pub properties: Vec<String>,
    pub ranks: String,
    /// Their hostnames in rank order (`""` when a node has none).
    pub nodelist: String,
    pub nnodes: u64,
    pub ncores: u64,
    pub ngpus: u64,
}

/// One drain group of `resource.status`: the ranks of an idset key share
/// this timestamp and reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainEntry {
    pub timestamp: f64,
    #[serde(default)]
    pub reason: String,
}

/// A JSON object read as its (key, value) pairs in order.
mod drain_map {
    use super::*;
    use serde::ser::SerializeMap;

    pub fn serialize<S: Serializer>(v: &[(String, DrainEntry)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, e) in v {
            m.serialize_entry(k, e)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, DrainEntry)>, D::Error> {
        struct Pairs;
        impl<'de> serde::de::Visitor<'de> for Pairs {
            type Value = Vec<(String, DrainEntry)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of drain groups")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0));
                while let Some(pair) = a.next_entry()? {
                    v.push(pair);
                }
                Ok(v)
            }
        }
        d.deserialize_map(Pairs)
    }
}

/// `resource.sched-status`: R documents, as flux-core's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedStatusResponse {
    pub all: Value,
    pub up: Value,
    pub down: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<Value>,
}

/// `resource.get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetResponse {
    #[serde(rename = "R")]
    pub r: Value,
    pub method: String,
}

/// `attr.get {name}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrGetRequest {
    pub name: String,
}

/// `attr.get`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrGetResponse {
    pub value: String,
    pub flags: i32,
}

/// `config.get`'s answer: the parts of the instance configuration
/// flux's tools read.  `queues` is the `[queues]` table as configured
/// (each queue's keys, `requires` among them), passed through as data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigGetResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The hello of an agent session (`resource.agent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentHello {
    pub hostname: String,
    /// The node's R as the agent found it (handed whole to `rset`).
    #[serde(rename = "R", default, skip_serializing_if = "Option::is_none")]
    pub r: Option<Value>,
    /// The rank asked for (a host with several ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// A relay: it will speak for the subtree it is given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay: bool,
    /// The agent's version (Roster's; servers before it ignore the key,
    /// as every unknown key); at most [`MAX_AGENT_VERSION`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `resource.allocated-set {targets}` (Roster's): the targets a
/// scheduler has allocated to jobs (an idset or a hostlist; empty: none),
/// replacing what the same credential said before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedSetRequest {
    pub targets: String,
}

/// `resource.agent-enrol {hostname, csr}` (Roster's): a new agent asks
/// for its certificate with the enrolment token.  `csr` is a PEM
/// certificate signing request whose subject common name is `hostname`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnrolRequest {
    pub hostname: String,
    pub csr: String,
}

/// The answer to `resource.agent-enrol`: the agent's certificate and the
/// CA's (both PEM).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnrolResponse {
    pub cert: String,
    pub ca: String,
}

/// The longest `version` an agent hello may carry, bytes.
pub const MAX_AGENT_VERSION: usize = 64;

/// `resource.agents {targets?}` (Roster's): what the service knows of the
/// agents of `targets` (an RFC 22 idset; absent: every rank).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub targets: Option<IdSet>,
}

/// The answer to `resource.agents`: one entry per rank of the targets the
/// service heard an agent (or a relay) speak for since it started, by
/// rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentsResponse {
    pub agents: Vec<AgentInfo>,
}

/// One rank's agent, as the service knows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub rank: u32,
    /// When the service last heard of it (a hello, a heartbeat, or its
    /// relay's `lively` line), seconds since the epoch; `null` when it
    /// has not been heard of since the service started.
    #[serde(default)]
    pub heartbeat: Option<f64>,
    /// The version its last hello said (`null`: an agent that does not
    /// say, or a rank a relay speaks for).
    #[serde(default)]
    pub version: Option<String>,
    /// The relay (its hostname) that speaks for it, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Whether an agent or a relay speaks for it now.
    #[serde(default)]
    pub connected: bool,
}

/// What the service sends down an agent session: the welcome first
/// (`rank`, `hostname`, `size`, the timers; a relay's `subtree`), then
/// answers to a relay's lines (`accepted`, `refused`, `ended`, `drained`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<f64>,
    #[serde(
        rename = "torpid-max",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub torpid_max: Option<f64>,
    #[serde(
        rename = "offline-timeout",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub offline_timeout: Option<f64>,
    /// A relay's welcome: the tree and its subtree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayWelcome>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub accepted: Option<IdSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Vec<RanksError>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Vec<RanksError>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<Vec<RanksDrained>>,
}

/// A relay's welcome: the tree's fan-out, the ranks of its subtree that
/// R knows, and their hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayWelcome {
    pub fanout: u32,
    #[serde(with = "idset_str")]
    pub subtree: IdSet,
    pub hosts: String,
}

/// Ranks refused or ended, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RanksError {
    #[serde(with = "idset_str")]
    pub ranks: IdSet,
    pub errnum: i32,
    #[serde(default)]
    pub errstr: String,
}

impl RanksError {
    /// `ranks`, refused or ended with `e`.
    pub fn new(ranks: IdSet, e: &crate::RpcError) -> RanksError {
        RanksError {
            ranks,
            errnum: e.errnum,
            errstr: e.message().to_string(),
        }
    }
}

/// Ranks drained by verification, and the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RanksDrained {
    #[serde(with = "idset_str")]
    pub ranks: IdSet,
    pub reason: String,
}

/// A later line of an agent session: `{}` is a heartbeat; a relay's
/// lines carry its children (every line is also its own heartbeat).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayLine {
    /// Children that said hello, grouped by identical resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hello: Option<Vec<HelloGroup>>,
    /// Children that left (applied before `hello`).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub gone: Option<IdSet>,
    /// Children heard from since the last line.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub lively: Option<IdSet>,
    /// The children the relay finds torpid now (sent when it changes).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub torpid: Option<IdSet>,
}

/// Ranks with the same cores and GPUs (`cores` absent: no R reported).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloGroup {
    #[serde(with = "idset_str")]
    pub ranks: IdSet,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub cores: Option<IdSet>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_idset")]
    pub gpus: Option<IdSet>,
}

/// A key whose presence matters: absent is `None`, `null` is
/// `Some(None)`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Reads an RFC 22 idset string (`null` too, when `nullable`).
struct IdSetVisitor {
    nullable: bool,
}

impl<'de> serde::de::Visitor<'de> for IdSetVisitor {
    type Value = Option<IdSet>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an idset string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Option<IdSet>, E> {
        IdSet::parse(s)
            .map(Some)
            .map_err(|e| E::custom(format!("invalid idset '{s}': {e}")))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<IdSet>, E> {
        if self.nullable {
            Ok(None)
        } else {
            Err(E::invalid_type(serde::de::Unexpected::Unit, &self))
        }
    }
}

/// An idset written as its RFC 22 string.
pub mod idset_str {
    use super::*;

    pub fn serialize<S: Serializer>(ids: &IdSet, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&ids.encode())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IdSet, D::Error> {
        d.deserialize_any(IdSetVisitor { nullable: false })
            .map(Option::unwrap_or_default)
    }
}

/// An optional idset string (`null` or absent: `None`).
pub mod opt_idset {
    use super::*;

    pub fn serialize<S: Serializer>(ids: &Option<IdSet>, s: S) -> Result<S::Ok, S::Error> {
        match ids {
            Some(ids) => s.serialize_str(&ids.encode()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IdSet>, D::Error> {
        d.deserialize_any(IdSetVisitor { nullable: true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_payload_is_empty_object_and_unknown_keys_are_ignored() {
        let e: Empty = decode(&Value::Null).unwrap();
        assert_eq!(e, Empty {});
        let d: DrainRequest = decode(&json!({"targets": "1-2", "extra": [1]})).unwrap();
        assert_eq!(d.targets, "1-2");
        assert_eq!(d.reason, None);
    }

    #[test]
    fn errors_name_the_key() {
        let e = decode::<DrainRequest>(&json!({"targets": 5})).unwrap_err();
        assert_eq!(e.path, "targets");
        assert!(e.to_string().starts_with("targets: invalid type"), "{e}");
        let e = decode::<DrainRequest>(&json!({})).unwrap_err();
        assert_eq!(e.to_string(), "missing field `targets`");
        let e = decode::<Empty>(&json!([1])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the payload must be a JSON object, not an array"
        );
        let e = decode::<RelayLine>(&json!({"hello": [{"ranks": "3-"}]})).unwrap_err();
        assert_eq!(e.path, "hello[0].ranks");
        assert!(e.message.starts_with("invalid idset '3-'"), "{e}");
        let e = decode::<RelayLine>(&json!({"lively": 5})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "lively: invalid type: integer `5`, expected an idset string"
        );
        let ok = decode::<RelayLine>(&json!({"lively": null, "gone": "1-2"})).unwrap();
        assert_eq!((ok.lively, ok.gone.map(|g| g.len())), (None, Some(2)));
    }

    #[test]
    fn journal_position_absent_null_or_given() {
        let r: JournalRequest = decode(&json!({})).unwrap();
        assert_eq!(r.position, None);
        let r: JournalRequest = decode(&json!({"position": null})).unwrap();
        assert_eq!(r.position, Some(None));
        let p = json!({"run": "00000000000000ff", "seq": 3, "log": 7, "event": "0000000000000010"});
        let r: JournalRequest = decode(&json!({ "position": p })).unwrap();
        let pos = r.position.unwrap().unwrap();
        assert_eq!(
            (pos.run, pos.seq, pos.log, pos.event),
            (Hex64(255), 3, 7, Some(Hex64(16)))
        );
        assert_eq!(encode(&pos), p);
        assert_eq!(encode(&JournalRequest::default()), json!({}));
        let back = JournalRequest {
            position: Some(None),
            requester: false,
        };
        assert_eq!(encode(&back), json!({"position": null}));
        let roster = JournalRequest {
            position: None,
            requester: true,
        };
        assert_eq!(encode(&roster), json!({"requester": true}));
        assert!(
            decode::<JournalRequest>(&json!({"requester": true}))
                .unwrap()
                .requester
        );
    }

    #[test]
    fn request_shapes_on_the_wire() {
        let text = |v: Value| v.to_string();
        assert_eq!(
            text(encode(&DrainRequest::new("0-1", None, None))),
            r#"{"targets":"0-1"}"#
        );
        assert_eq!(
            text(encode(&DrainRequest::new("x", Some("why"), Some("update")))),
            r#"{"targets":"x","mode":"update","reason":"why"}"#
        );
        let reload = ReloadRequest {
            path: "/a".into(),
            xml: true,
            force: false,
        };
        assert_eq!(
            text(encode(&reload)),
            r#"{"path":"/a","xml":true,"force":false}"#
        );
        assert_eq!(text(encode(&AcquireRequest::default())), "{}");
        let g = AcquireRequest {
            group: Some("g".into()),
        };
        assert_eq!(text(encode(&g)), r#"{"group":"g"}"#);
        assert_eq!(
            text(encode(&TargetsOfGroup::new("g", "0-1"))),
            r#"{"group":"g","targets":"0-1"}"#
        );
        let e = ExpirationRequest { expiration: 1234.0 };
        assert_eq!(text(encode(&e)), r#"{"expiration":1234.0}"#);
        assert_eq!(text(encode(&Empty {})), "{}");
    }

    #[test]
    fn status_keeps_the_drain_order() {
        let v = json!({
            "R": {"version": 1},
            "drain": {"0,3": {"timestamp": 1234.0, "reason": "test"}, "1": {"timestamp": 2345.0, "reason": ""}},
            "online": "0-3", "offline": "", "exclude": "", "torpid": "2"
        });
        let s: StatusResponse = decode_reply("resource.status", &v).unwrap();
        assert_eq!(s.drain.len(), 2);
        assert_eq!(s.drain[0].0, "0,3");
        assert_eq!(s.drain[0].1.reason, "test");
        assert_eq!(s.drain[1].1.timestamp, 2345.0);
        assert_eq!((s.online.as_str(), s.torpid.as_str()), ("0-3", "2"));
        assert_eq!(s.r, json!({"version": 1}));
        assert_eq!(encode(&s), v);
        let e = decode_reply::<StatusResponse>(
            "resource.status",
            &json!({"drain": {"0": {"reason": "x"}}}),
        );
        assert_eq!(
            e.unwrap_err(),
            "unexpected resource.status reply: drain.0: missing field `timestamp`"
        );
        assert!(decode_reply::<StatusResponse>("resource.status", &json!("x")).is_err());
    }

    #[test]
    fn agent_hello_round_trips() {
        let h = AgentHello {
            hostname: "n1".into(),
            r: None,
            rank: Some(3),
            relay: true,
            version: Some("0.1.0".into()),
        };
        let v = encode(&h);
        assert_eq!(
            v,
            json!({"hostname": "n1", "rank": 3, "relay": true, "version": "0.1.0"})
        );
        assert_eq!(decode::<AgentHello>(&v).unwrap(), h);
        let plain = encode(&AgentHello {
            hostname: "n1".into(),
            ..AgentHello::default()
        });
        assert_eq!(plain, json!({"hostname": "n1"}));
    }
}
