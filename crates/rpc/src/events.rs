//! The contexts of RFC 44 resource events (`resource.eventlog`, the
//! journal), typed: the core writes them with [`context`] and reads them
//! with [`read`].  Unknown keys are ignored on reading; the field order is
//! the order the keys are written in (flux-core's, Roster's own keys last),
//! and an absent optional key is not written.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Optional keys that only some readers use: a value of another type
/// reads as absent (as the readers that picked them by hand did).
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(T::deserialize(v).ok())
}

/// An absent optional key is not written.
fn none<T>(o: &Option<T>) -> bool {
    o.is_none()
}

/// Roster's `relays` key: relay host → the ranks it reported (as written,
/// in the relays' rank order).
pub type Relays = Map<String, Value>;

/// `resource-define`: how R was obtained.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceDefine {
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub method: Option<String>,
}

/// `resource-update`: a new expiration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceUpdate {
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub expiration: Option<f64>,
}

/// `restart`: every rank, those online at start, and their hosts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub ranks: Option<String>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub online: Option<String>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub nodelist: Option<String>,
}

/// `online`, `offline`, `torpid`, `lively`: the ranks concerned (and, for
/// Roster, the relays that reported them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    pub idset: String,
    #[serde(default, skip_serializing_if = "none")]
    pub relays: Option<Relays>,
}

/// `drain`: the ranks (with their hosts, to remap them on a later
/// instance), why, and flux's overwrite mode (1 when absent, as
/// flux-core replays it).  `reason` and `overwrite` of another type make
/// the event unreadable (replay fails, as flux-core's does).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    pub idset: String,
    pub nodelist: String,
    #[serde(default, skip_serializing_if = "none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "none")]
    pub overwrite: Option<u8>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub relays: Option<Relays>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub requester: Option<String>,
}

/// `undrain`: as [`Drain`], its keys in flux-core's order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Undrain {
    pub idset: String,
    pub nodelist: String,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub overwrite: Option<u8>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub reason: Option<String>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "none")]
    pub requester: Option<String>,
}

/// `truncate`: the state the dropped events had built.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Truncate {
    pub online: String,
    pub torpid: String,
    /// idset → `{timestamp, reason}` (RFC 44).
    pub drain: Value,
    #[serde(default, skip_serializing_if = "none")]
    pub ranks: Option<String>,
    #[serde(default, skip_serializing_if = "none")]
    pub nodelist: Option<String>,
    #[serde(rename = "discovery-method", default, skip_serializing_if = "none")]
    pub discovery_method: Option<String>,
    #[serde(rename = "R", default, skip_serializing_if = "none")]
    pub r: Option<Value>,
}

/// A context to write: the keys of `c`, in its field order.
pub fn context<T: Serialize>(c: &T) -> Map<String, Value> {
    match serde_json::to_value(c) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// Read a context (none reads as `{}`); `None` when it does not have the
/// shape of `T`.
pub fn read<T: DeserializeOwned>(c: Option<&Map<String, Value>>) -> Option<T> {
    // Straight from the borrowed map: no copy of the context per event
    // (replay reads every event of the log at start-up).
    let pairs = c.into_iter().flatten().map(|(k, v)| (k.as_str(), v));
    T::deserialize(serde::de::value::MapDeserializer::<_, serde_json::Error>::new(pairs)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text<T: Serialize>(c: &T) -> String {
        Value::Object(context(c)).to_string()
    }

    #[test]
    fn written_in_flux_order_without_absent_keys() {
        let d = Drain {
            idset: "1".into(),
            nodelist: "n1".into(),
            reason: Some("x".into()),
            overwrite: Some(0),
            relays: None,
            requester: Some("role owner".into()),
        };
        assert_eq!(
            text(&d),
            r#"{"idset":"1","nodelist":"n1","reason":"x","overwrite":0,"requester":"role owner"}"#
        );
        let u = Undrain {
            idset: "1".into(),
            nodelist: "n1".into(),
            overwrite: Some(0),
            reason: Some("y".into()),
            requester: None,
        };
        assert_eq!(
            text(&u),
            r#"{"idset":"1","nodelist":"n1","overwrite":0,"reason":"y"}"#
        );
        let t = Truncate {
            online: "0".into(),
            torpid: "".into(),
            drain: json!({}),
            discovery_method: Some("kvs".into()),
            ..Default::default()
        };
        assert_eq!(
            text(&t),
            r#"{"online":"0","torpid":"","drain":{},"discovery-method":"kvs"}"#
        );
        assert_eq!(
            text(&ResourceUpdate {
                expiration: Some(2.5)
            }),
            r#"{"expiration":2.5}"#
        );
    }

    #[test]
    fn read_ignores_unknown_keys_and_refuses_bad_types() {
        let m = |v: Value| v.as_object().cloned().unwrap();
        let d: Drain = read(Some(&m(
            json!({"idset": "0", "nodelist": "a", "reason": null, "x": 1}),
        )))
        .unwrap();
        assert_eq!((d.reason, d.overwrite), (None, None));
        assert!(read::<Drain>(Some(&m(json!({"idset": "0"})))).is_none());
        assert!(read::<Drain>(Some(&m(
            json!({"idset": "0", "nodelist": "a", "overwrite": 7000})
        )))
        .is_none());
        assert!(read::<Drain>(Some(&m(
            json!({"idset": "0", "nodelist": "a", "reason": 5})
        )))
        .is_none());
        assert_eq!(
            read::<ResourceDefine>(None),
            Some(ResourceDefine::default())
        );
        assert_eq!(
            read::<ResourceDefine>(Some(&m(json!({"method": 1})))),
            Some(ResourceDefine::default())
        );
        let u: Undrain = read(Some(&m(
            json!({"idset": "0", "nodelist": "a", "overwrite": "x"}),
        )))
        .unwrap();
        assert_eq!(u.overwrite, None);
    }
}
