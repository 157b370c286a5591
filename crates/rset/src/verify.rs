//! Verification of a node's actual resources against the expected R
//! (flux-core's `rlist_verify_ex` and `verify_config.c`).

use crate::error::RError;
use crate::node::{IGNORE_CORE, IGNORE_GPU};
use crate::rset::Rset;
use serde_json::Value;

/// How strictly one resource type is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    /// Missing and extra resources are both reported.
    Strict,
    /// Extra resources are fine; missing ones are errors.
    AllowExtra,
    /// Missing resources are fine; extra ones are reported.
    AllowMissing,
    /// Not checked.
    Ignore,
}

impl VerifyMode {
    /// Parse `strict`, `allow-extra`, `allow-missing` or `ignore`.
    pub fn parse(s: &str) -> Option<VerifyMode> {
        match s {
            "strict" => Some(VerifyMode::Strict),
            "allow-extra" => Some(VerifyMode::AllowExtra),
            "allow-missing" => Some(VerifyMode::AllowMissing),
            "ignore" => Some(VerifyMode::Ignore),
            _ => None,
        }
    }
}

/// Verification modes per resource type: a default plus overrides for
/// `hostname`, `core` and `gpu` (`struct rlist_verify_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyConfig {
    default: VerifyMode,
    overrides: Vec<(String, VerifyMode)>,
    explicit: bool,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig::new()
    }
}

fn valid_type(name: &str) -> bool {
    matches!(name, "default" | "hostname" | "core" | "gpu")
}

impl VerifyConfig {
    /// Everything strict; not explicit (`rlist_verify_config_create (NULL)`).
    pub fn new() -> VerifyConfig {
        VerifyConfig {
            default: VerifyMode::Strict,
            overrides: Vec::new(),
            explicit: false,
        }
    }

    /// The resource module's implicit configuration when no `verify` key
    /// is given: default allow-extra, `gpu` ignored, `hostname` strict.
    pub fn module_default() -> VerifyConfig {
        VerifyConfig {
            default: VerifyMode::AllowExtra,
            overrides: vec![
                ("hostname".into(), VerifyMode::Strict),
                ("gpu".into(), VerifyMode::Ignore),
            ],
            explicit: false,
        }
    }

    /// Create from an optional `verify` value (boolean or table); any
    /// value, even an empty table, starts from default=strict and makes
    /// the configuration explicit.
    pub fn from_json(v: Option<&Value>) -> Result<VerifyConfig, RError> {
        let mut c = VerifyConfig::new();
        if let Some(v) = v {
            c.update(v)?;
        }
        Ok(c)
    }

    /// Apply a `verify` value (`rlist_verify_config_update`): `true` →
    /// all strict, `false` → all ignored, a table sets `default` and/or
    /// per-type modes.  On error, entries before the bad one stay applied.
    pub fn update(&mut self, v: &Value) -> Result<(), RError> {
        let m = match v {
            Value::Bool(b) => {
                self.explicit = true;
                self.default = if *b {
                    VerifyMode::Strict
                } else {
                    VerifyMode::Ignore
                };
                self.overrides.clear();
                return Ok(());
            }
            Value::Object(m) => m,
            _ => return Err(RError::msg("verify must be a table or boolean")),
        };
        self.explicit = true;
        for (key, val) in m {
            let Value::String(s) = val else {
                return Err(RError::msg(format!("verify.{key} mode must be a string")));
            };
            let Some(mode) = VerifyMode::parse(s) else {
                return Err(RError::msg(format!(
                    "verify.{key}: unknown verify mode '{s}'"
                )));
            };
            if key == "default" {
                self.default = mode;
            } else {
                if !valid_type(key) {
                    return Err(RError::msg(format!(
                        "verify: unsupported resource type: {key}"
                    )));
                }
                self.set_override(key, mode);
            }
        }
        Ok(())
    }

    fn set_override(&mut self, key: &str, mode: VerifyMode) {
        match self.overrides.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = mode,
            None => self.overrides.push((key.to_string(), mode)),
        }
    }

    /// The mode for `ty` (an override, else the default).
    pub fn mode(&self, ty: &str) -> VerifyMode {
        self.overrides
            .iter()
            .find(|(k, _)| k == ty)
            .map_or(self.default, |e| e.1)
    }

    /// Set the mode of `ty` (`default`, `hostname`, `core` or `gpu`).
    pub fn set_mode(&mut self, ty: &str, mode: VerifyMode) -> Result<(), RError> {
        if !valid_type(ty) {
            return Err(RError::msg(format!(
                "verify: unsupported resource type: {ty}"
            )));
        }
        if ty == "default" {
            self.default = mode;
        } else {
            self.set_override(ty, mode);
        }
        Ok(())
    }

    /// True if created or updated from an explicit value.
    pub fn is_explicit(&self) -> bool {
        self.explicit
    }
}

/// The outcome of [`verify`]: `rc` is 0 (match), -1 (missing resources,
/// hostname mismatch, unknown rank, or not a single node) or 1 (extra
/// resources only); `message` is flux-core's text ("" when rc is 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// -1, 0 or 1.
    pub rc: i32,
    /// The message.
    pub message: String,
}

fn mask(core: VerifyMode, gpu: VerifyMode, allowed: VerifyMode) -> u8 {
    let mut m = 0;
    if gpu == VerifyMode::Ignore || gpu == allowed {
        m |= IGNORE_GPU;
    }
    if core == VerifyMode::Ignore || core == allowed {
        m |= IGNORE_CORE;
    }
    m
}

/// Verify a single-node `actual` R against `expected` (`rlist_verify_ex`).
/// With no configuration every type is strict.
pub fn verify(expected: &Rset, actual: &Rset, config: Option<&VerifyConfig>) -> Verification {
    let mode = |t: &str| config.map_or(VerifyMode::Strict, |c| c.mode(t));
    let fail = |rc: i32, m: String| Verification {
        rc,
        message: crate::json::truncate_text(m),
    };
    let (hostname_mode, core_mode, gpu_mode) = (mode("hostname"), mode("core"), mode("gpu"));
    if actual.nnodes() != 1 {
        return fail(-1, "Verification supported on single rank only".into());
    }
    let Some(n) = actual.nodes.iter().next() else {
        return fail(-1, "Verification supported on single rank only".into());
    };
    let Some(exp) = expected.nodes.get(n.rank) else {
        return fail(
            -1,
            format!("rank {} not found in expected ranks", n.rank as i32),
        );
    };
    if hostname_mode == VerifyMode::Strict {
        if let (Some(got), Some(want)) = (&n.hostname, &exp.hostname) {
            if got != want {
                return fail(
                    -1,
                    format!(
                        "rank {} got hostname '{got}', expected '{want}'",
                        n.rank as i32
                    ),
                );
            }
        }
    }
    let host = n.hostname.as_deref().unwrap_or("unknown");
    let missing = exp.diff_ex(n, mask(core_mode, gpu_mode, VerifyMode::AllowMissing));
    if !missing.is_empty() {
        let mut s = String::new();
        missing.child_dumps(&mut s);
        return fail(
            -1,
            format!("rank {} ({host}) missing resources: {s}", n.rank as i32),
        );
    }
    let extra = n.diff_ex(exp, mask(core_mode, gpu_mode, VerifyMode::AllowExtra));
    if extra.is_empty() {
        return Verification {
            rc: 0,
            message: String::new(),
        };
    }
    let mut s = String::new();
    extra.child_dumps(&mut s);
    fail(
        1,
        format!("rank {} ({host}) has extra resources: {s}", n.rank as i32),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    /// R with ranks, cores, optional gpus (None = no gpu child, Some("") =
    /// an empty gpu child) and optional hosts, like the upstream test's
    /// `R_create`.
    fn r(ranks: &str, cores: &str, gpus: Option<&str>, hosts: Option<&str>) -> Rset {
        let children = match gpus {
            Some(g) => format!(r#"{{"core":"{cores}","gpu":"{g}"}}"#),
            None => format!(r#"{{"core":"{cores}"}}"#),
        };
        let nodelist = hosts.map_or(String::new(), |h| format!(r#","nodelist":["{h}"]"#));
        let s = format!(
            r#"{{"version":1,"execution":{{"R_lite":[{{"rank":"{ranks}","children":{children}}}]{nodelist}}}}}"#
        );
        Rset::from_json_str(&s).unwrap_or_default()
    }

    fn cfg(s: &str) -> VerifyConfig {
        let v = json::loads(s.as_bytes()).unwrap_or(Value::Null);
        VerifyConfig::from_json(Some(&v)).unwrap_or_default()
    }

    fn check(exp: &Rset, act: &Rset, c: Option<&VerifyConfig>) -> (i32, String) {
        let v = verify(exp, act, c);
        (v.rc, v.message)
    }

    /// The verification table of the reference notes (section 5.6) and
    /// the upstream librlist unit test.
    #[test]
    fn verify_matrix() {
        let exp = r("0-5", "0-3", Some("0"), Some("foo[0-5]"));
        let t = |act: Rset, c: Option<&str>| {
            let c = c.map(cfg);
            check(&exp, &act, c.as_ref())
        };
        assert_eq!(
            t(r("1", "0-3", Some("0"), Some("foo1")), None),
            (0, String::new())
        );
        assert_eq!(
            t(r("1", "0-3", Some(""), Some("foo1")), None),
            (-1, "rank 1 (foo1) missing resources: gpu0".into())
        );
        assert_eq!(
            t(r("1", "0-3", None, Some("foo1")), None),
            (-1, "rank 1 (foo1) missing resources: gpu0".into())
        );
        assert_eq!(
            t(r("5", "0-1", Some("0"), Some("foo5")), None),
            (-1, "rank 5 (foo5) missing resources: core[2-3]".into())
        );
        assert_eq!(
            t(r("5", "0-3", Some("0"), Some("foo7")), None),
            (-1, "rank 5 got hostname 'foo7', expected 'foo5'".into())
        );
        assert_eq!(
            t(r("0", "0-7", Some("0-1"), Some("foo0")), None),
            (
                1,
                "rank 0 (foo0) has extra resources: core[4-7],gpu1".into()
            )
        );
        assert_eq!(
            t(r("7", "0-3", Some("0"), Some("foo7")), None),
            (-1, "rank 7 not found in expected ranks".into())
        );
        assert_eq!(t(r("0", "0-3", Some("0"), None), None), (0, String::new()));
        let nohost = r("0-5", "0-3", Some("0"), None);
        assert_eq!(
            check(&nohost, &r("0", "0-3", Some("0"), None), None),
            (0, String::new())
        );
        assert_eq!(
            check(&nohost, &r("0", "0-3", Some("0"), Some("foo0")), None),
            (0, String::new())
        );
        // Modes.
        let nogpu = || r("1", "0-3", None, Some("foo1"));
        assert_eq!(t(nogpu(), Some(r#"{"gpu":"ignore"}"#)), (0, String::new()));
        assert_eq!(
            t(nogpu(), Some(r#"{"gpu":"allow-missing"}"#)),
            (0, String::new())
        );
        let fewcores = || r("5", "0-1", Some("0"), Some("foo5"));
        assert_eq!(
            t(fewcores(), Some(r#"{"core":"ignore"}"#)),
            (0, String::new())
        );
        assert_eq!(
            t(fewcores(), Some(r#"{"core":"allow-missing"}"#)),
            (0, String::new())
        );
        assert_eq!(
            t(fewcores(), Some(r#"{"core":"allow-extra"}"#)),
            (-1, "rank 5 (foo5) missing resources: core[2-3]".into())
        );
        assert_eq!(
            t(
                r("5", "0-3", Some("0"), Some("foo7")),
                Some(r#"{"hostname":"ignore"}"#)
            ),
            (0, String::new())
        );
        let extra = || r("0", "0-7", Some("0-1"), Some("foo0"));
        assert_eq!(
            t(extra(), Some(r#"{"default":"allow-extra"}"#)),
            (0, String::new())
        );
        assert_eq!(
            t(extra(), Some(r#"{"core":"allow-extra"}"#)),
            (1, "rank 0 (foo0) has extra resources: gpu1".into())
        );
        assert_eq!(
            t(extra(), Some(r#"{"gpu":"allow-extra"}"#)),
            (1, "rank 0 (foo0) has extra resources: core[4-7]".into())
        );
        assert_eq!(
            t(extra(), Some(r#"{"default":"allow-missing"}"#)),
            (
                1,
                "rank 0 (foo0) has extra resources: core[4-7],gpu1".into()
            )
        );
        let exp8 = r("0", "0-7", None, Some("foo0"));
        let c = cfg(r#"{"core":"allow-missing","gpu":"allow-extra"}"#);
        assert_eq!(
            check(&exp8, &r("0", "0-3", Some("0-1"), Some("foo0")), Some(&c)),
            (0, String::new())
        );
        assert_eq!(
            t(
                r("5", "0-1", None, Some("foo7")),
                Some(r#"{"default":"ignore"}"#)
            ),
            (0, String::new())
        );
        let c = cfg(r#"{"core":"allow-extra"}"#);
        assert_eq!(
            check(&exp8, &r("0", "0-3", None, Some("foo0")), Some(&c)),
            (-1, "rank 0 (foo0) missing resources: core[4-7]".into())
        );
        // Not a single node.
        assert_eq!(
            check(&exp, &r("0-1", "0", None, None), None),
            (-1, "Verification supported on single rank only".into())
        );
    }

    #[test]
    fn config_parsing() {
        let e = |s: &str| {
            let v = json::loads(s.as_bytes()).ok().or_else(|| {
                // scalars
                serde_json::from_str(s).ok()
            });
            VerifyConfig::from_json(v.as_ref())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            e(r#"{"default":"invalid"}"#),
            "verify.default: unknown verify mode 'invalid'"
        );
        assert_eq!(
            e(r#"{"cores":"strict"}"#),
            "verify: unsupported resource type: cores"
        );
        assert_eq!(
            e(r#"{"cores":"bad"}"#),
            "verify.cores: unknown verify mode 'bad'"
        );
        assert_eq!(e(r#"{"core":123}"#), "verify.core mode must be a string");
        assert_eq!(e(r#"{"gpu":null}"#), "verify.gpu mode must be a string");
        assert_eq!(e("\"strict\""), "verify must be a table or boolean");
        assert_eq!(e("42"), "verify must be a table or boolean");
        assert_eq!(e(r#"{"core":""}"#), "verify.core: unknown verify mode ''");
        let c = VerifyConfig::from_json(Some(&Value::Bool(false))).unwrap_or_default();
        assert_eq!(c.mode("core"), VerifyMode::Ignore);
        assert!(c.is_explicit());
        let c = cfg("{}");
        assert!(c.is_explicit());
        assert_eq!(c.mode("hostname"), VerifyMode::Strict);
        let c = cfg(r#"{"default":"ignore","hostname":"strict"}"#);
        assert_eq!(
            (c.mode("hostname"), c.mode("core"), c.mode("gpu")),
            (VerifyMode::Strict, VerifyMode::Ignore, VerifyMode::Ignore)
        );
        let mut c = cfg(r#"{"gpu":"ignore"}"#);
        assert!(c.update(&Value::Bool(true)).is_ok());
        assert_eq!(c.mode("gpu"), VerifyMode::Strict);
        assert!(!VerifyConfig::new().is_explicit());
        let d = VerifyConfig::module_default();
        assert_eq!(
            (d.mode("hostname"), d.mode("core"), d.mode("gpu")),
            (
                VerifyMode::Strict,
                VerifyMode::AllowExtra,
                VerifyMode::Ignore
            )
        );
    }
}
