//! Jobspec documents (RFC 14 / RFC 25) written in YAML or JSON.
//!
//! RFC 14 defines the jobspec as YAML, of which JSON is the form flux
//! submits; Fluxion's tools read YAML files.  [`parse`] accepts either:
//! a document whose first non-blank character is `{` is read as JSON
//! (and, should that fail, as a YAML flow mapping before giving up with
//! the JSON error); anything else is read as YAML.  The result is the JSON
//! value the matcher works on ([`Request::from_jobspec`]).
//!
//! Errors name the syntax problem with its line and column, or say what
//! the document is instead of a mapping.

use crate::matcher::Request;
use crate::ModelError;
use serde_json::Value;

/// Parse jobspec text (YAML or JSON) into its JSON value.  The document
/// must be a mapping.
pub fn parse(text: &str) -> Result<Value, ModelError> {
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let v = if trimmed.starts_with('{') {
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v) => v,
            Err(je) => match serde_norway::from_str::<Value>(text) {
                Ok(v) => v,
                Err(_) => return Err(ModelError::Jobspec(format!("invalid JSON: {je}"))),
            },
        }
    } else {
        serde_norway::from_str::<Value>(text)
            .map_err(|e| ModelError::Jobspec(format!("invalid YAML: {e}")))?
    };
    if !v.is_object() {
        return Err(ModelError::Jobspec(format!(
            "the document must be a mapping, not {}",
            describe(&v)
        )));
    }
    Ok(v)
}

/// "a string", "an array", ... for messages.
pub(crate) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a mapping",
    }
}

impl Request {
    /// Parse a V1 request from jobspec text in YAML or JSON.
    pub fn from_jobspec_str(text: &str) -> Result<Request, ModelError> {
        Request::from_jobspec(&parse(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML_NODE: &str = "\
version: 1
resources:
  - type: node
    count: 2
    exclusive: true
    with:
      - type: slot
        count: 3
        label: default
        with:
          - type: core
            count: 2
          - type: gpu
            count: 1
tasks:
  - command: [ \"app\" ]
    slot: default
    count:
      per_slot: 1
attributes:
  system:
    duration: 3600.
    constraints:
      properties: [ \"ssd\", \"^debug\" ]
";

    const JSON_SLOT: &str = r#"{"version":1,"resources":[{"type":"slot","count":5,"label":"task",
        "with":[{"type":"core","count":4}]}],"tasks":[{"command":["x"],"slot":"task",
        "count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}"#;

    fn err(text: &str) -> String {
        Request::from_jobspec_str(text).unwrap_err().to_string()
    }

    #[test]
    fn yaml_and_json_give_the_same_request() {
        let r = Request::from_jobspec_str(YAML_NODE).unwrap();
        let mut want = Request::nodes(2, 3, 2, 1, true);
        want.duration = 3600.0;
        want.constraint = Some(
            crate::matcher::Constraint::from_json(
                &serde_json::json!({"properties":["ssd","^debug"]}),
            )
            .unwrap(),
        );
        assert_eq!(r, want);
        // The same document as JSON.
        let v = parse(YAML_NODE).unwrap();
        let j = Request::from_jobspec_str(&v.to_string()).unwrap();
        assert_eq!(j, r);
        assert_eq!(
            Request::from_jobspec_str(JSON_SLOT).unwrap(),
            Request::slots(5, 4, 0)
        );
        // A YAML flow mapping that is not JSON still reads.
        let flow = "{version: 1, resources: [{type: slot, count: 1, label: x, with: [{type: core, count: 2}]}], attributes: {system: {duration: 60}}}";
        let mut want = Request::slots(1, 2, 0);
        want.duration = 60.0;
        assert_eq!(Request::from_jobspec_str(flow).unwrap(), want);
    }

    #[test]
    fn syntax_errors_name_the_place() {
        let e = err("version: 1\nresources: [\n  - type: node\n");
        assert!(e.starts_with("jobspec: invalid YAML: "), "{e}");
        assert!(e.contains("line "), "{e}");
        let e = err("{\"version\": 1,\n \"resources\": [}");
        assert_eq!(
            e,
            "jobspec: invalid JSON: expected value at line 2 column 16"
        );
        // Valid YAML in braces is read as YAML.
        assert_eq!(
            err("{\"version\": 1,\n \"resources\": }"),
            "jobspec: 'resources' must be an array, not null"
        );
        assert_eq!(err(""), "jobspec: the document must be a mapping, not null");
        assert_eq!(
            err("- a\n- b\n"),
            "jobspec: the document must be a mapping, not an array"
        );
        assert_eq!(
            err("42"),
            "jobspec: the document must be a mapping, not a number"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// A V1 jobspec reads the same whether written as JSON or YAML.
        #[test]
        fn yaml_and_json_agree(nnodes in 0u32..4, per in 1u32..8, cores in 1u32..16,
                               gpus in 0u32..3, exclusive: bool, duration in 0u32..100_000) {
            let mut slot = serde_json::json!({"type": "slot", "count": per, "label": "task",
                "with": [{"type": "core", "count": cores}]});
            if gpus > 0 {
                if let Some(w) = slot["with"].as_array_mut() {
                    w.push(serde_json::json!({"type": "gpu", "count": gpus}));
                }
            }
            let top = if nnodes > 0 {
                serde_json::json!({"type": "node", "count": nnodes, "exclusive": exclusive,
                                   "with": [slot]})
            } else {
                slot
            };
            let js = serde_json::json!({"version": 1, "resources": [top],
                "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
                "attributes": {"system": {"duration": duration}}});
            let yaml = serde_norway::to_string(&js).unwrap();
            let a = Request::from_jobspec_str(&yaml).unwrap();
            let b = Request::from_jobspec_str(&js.to_string()).unwrap();
            proptest::prop_assert_eq!(&a, &b);
            let mut want = if nnodes > 0 {
                Request::nodes(nnodes, per, cores, gpus, exclusive)
            } else {
                Request::slots(per, cores, gpus)
            };
            want.duration = f64::from(duration);
            proptest::prop_assert_eq!(a, want);
        }
    }

    #[test]
    fn content_errors_name_the_field() {
        for (text, msg) in [
            ("resources: []\n", "'version' is missing"),
            ("version: 2\nresources: []\n", "version must be 1, not 2"),
            ("version: 1\n", "'resources' is missing"),
            (
                "version: 1\nresources: {type: node}\n",
                "'resources' must be an array, not a mapping",
            ),
        ] {
            assert_eq!(err(text), format!("jobspec: {msg}"), "{text:?}");
        }
        // YAML_NODE with one line changed.
        for (from, to, msg) in [
            (
                "    duration: 3600.\n",
                "",
                "attributes.system.duration is required",
            ),
            (
                "count: 2\n    exclusive",
                "count: two\n    exclusive",
                "node count must be a positive integer",
            ),
            (
                "exclusive: true",
                "exclusive: yes please",
                "node 'exclusive' must be a boolean",
            ),
        ] {
            assert_eq!(err(&YAML_NODE.replace(from, to)), format!("jobspec: {msg}"));
        }
    }
}
