//! A typed view of the `resource.status` reply.

use crate::ClientError;
use serde::Deserialize;
use serde_json::{Map, Value};

/// One drain group: the ranks of an idset key share this timestamp and
/// reason.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DrainEntry {
    pub timestamp: f64,
    #[serde(default)]
    pub reason: String,
}

/// `resource.status`: `{R, drain, online, offline, exclude, torpid}`.
/// Idsets are kept as the strings the service sent (`""` when empty).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Status {
    /// The instance R (`null` if the service has none).
    #[serde(rename = "R", default)]
    pub r: Value,
    /// Drain groups keyed by idset, in the service's order.
    #[serde(default, deserialize_with = "drain_map")]
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

fn drain_map<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, DrainEntry)>, D::Error> {
    let m = Map::deserialize(d)?;
    m.into_iter()
        .map(|(k, v)| {
            DrainEntry::deserialize(v)
                .map(|e| (k, e))
                .map_err(serde::de::Error::custom)
        })
        .collect()
}

impl Status {
    /// Decode a `resource.status` reply.
    pub fn from_value(v: &Value) -> Result<Status, ClientError> {
        Status::deserialize(v)
            .map_err(|e| ClientError::Protocol(format!("unexpected resource.status reply: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_flux_shape() {
        let v = json!({
            "R": {"version": 1},
            "drain": {"0,3": {"timestamp": 1234.0, "reason": "test"}, "1": {"timestamp": 2345.0, "reason": ""}},
            "online": "0-3", "offline": "", "exclude": "", "torpid": "2"
        });
        let s = Status::from_value(&v).unwrap();
        assert_eq!(s.drain.len(), 2);
        assert_eq!(s.drain[0].0, "0,3");
        assert_eq!(s.drain[0].1.reason, "test");
        assert_eq!(s.drain[1].1.timestamp, 2345.0);
        assert_eq!(s.online, "0-3");
        assert_eq!(s.torpid, "2");
        assert_eq!(s.r, json!({"version": 1}));
        assert!(Status::from_value(&json!({"drain": {"0": {"reason": "x"}}})).is_err());
        assert!(Status::from_value(&json!("x")).is_err());
    }
}
