//! Codec vectors (flux-core's eventlog unit tests, RFC 18 and RFC 44
//! examples) and property tests.

use super::*;
use serde_json::json;

fn ev(ts: f64, name: &str, ctx: Value) -> Event {
    Event::with_context(ts, name, ctx).unwrap()
}

// ----------------------------------------------------------------- codec

#[test]
fn encode_matches_flux() {
    let e = Event::new(42.0, "foo", None).unwrap();
    assert_eq!(
        e.encode().unwrap(),
        "{\"timestamp\":42.0,\"name\":\"foo\"}\n"
    );
    let e = ev(42.0, "foo", json!({"bar": 16}));
    assert_eq!(
        e.encode().unwrap(),
        "{\"timestamp\":42.0,\"name\":\"foo\",\"context\":{\"bar\":16}}\n"
    );
    // RFC 44 drain example, non-ASCII reason kept as UTF-8, key order kept
    let e = ev(
        1733965155.6272159,
        "drain",
        json!({"idset":"0","nodelist":"picl0","reason":"unkillable processes for job ƒ4zX8UnMMxj","overwrite":0}),
    );
    assert_eq!(
        e.encode().unwrap(),
        "{\"timestamp\":1733965155.6272159,\"name\":\"drain\",\"context\":{\"idset\":\"0\",\"nodelist\":\"picl0\",\"reason\":\"unkillable processes for job ƒ4zX8UnMMxj\",\"overwrite\":0}}\n"
    );
    // newlines in names and context values are escaped, never raw
    let e = ev(1.0, "foo\n", json!({"data": "foo\n"}));
    let line = e.encode().unwrap();
    assert_eq!(
        line,
        "{\"timestamp\":1.0,\"name\":\"foo\\n\",\"context\":{\"data\":\"foo\\n\"}}\n"
    );
    assert_eq!(line.matches('\n').count(), 1);
    assert_eq!(Event::decode(&line).unwrap(), e);
    // object format for journal responses
    assert_eq!(
        e.to_value().unwrap(),
        json!({"timestamp": 1.0, "name": "foo\n", "context": {"data": "foo\n"}})
    );
    assert_eq!(e.to_json().unwrap(), line.trim_end_matches('\n'));
}

#[test]
fn creation_rules() {
    assert_eq!(Event::new(1.0, "", None), Err(EventError::EmptyName));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            Event::new(bad, "x", None),
            Err(EventError::InvalidTimestamp(_))
        ));
    }
    assert_eq!(
        Event::with_context(1.0, "foo", json!(["foo"])),
        Err(EventError::ContextNotObject)
    );
    assert_eq!(
        Event::new(-1.0, "x", None).unwrap_err().to_string(),
        "invalid timestamp -1: it must be a finite number greater than zero"
    );
    // fields are public: a hand-made non-finite timestamp cannot be encoded
    let e = Event {
        timestamp: f64::NAN,
        name: "x".into(),
        context: None,
    };
    assert!(e.encode().is_err());
    assert!(e.to_value().is_err());
}

#[test]
fn decode_accepts_what_flux_accepts() {
    let e = Event::decode("{\"timestamp\":42.0,\"name\":\"foo\"}\n").unwrap();
    assert_eq!(e, Event::new(42.0, "foo", None).unwrap());
    // integer and negative timestamps, empty names, extra members, spaces, \r
    let e = Event::decode(" {\"timestamp\": 7, \"name\": \"\", \"x\": 1}\r").unwrap();
    assert_eq!((e.timestamp, e.name.as_str(), e.context), (7.0, "", None));
    assert_eq!(
        Event::decode("{\"timestamp\":-3.5,\"name\":\"n\"}")
            .unwrap()
            .timestamp,
        -3.5
    );
    // duplicate keys: the last one wins
    assert_eq!(
        Event::decode("{\"timestamp\":1,\"name\":\"a\",\"name\":\"b\"}")
            .unwrap()
            .name,
        "b"
    );
    assert_eq!(
        Event::decode("{\"timestamp\":1,\"name\":\"a\",\"context\":{\"s\":\"\\u0000\"}}")
            .unwrap()
            .get("s"),
        Some(&json!("\0"))
    );
}

#[test]
fn decode_errors_name_the_problem() {
    let cases: &[(&str, &str)] = &[
        ("", "empty line"),
        ("\n", "empty line"),
        ("foo", "invalid JSON at column 2: expected ident"),
        (
            "{\"timestamp\":42.0,\"name\":\"foo\"}{\"timestamp\":42.0,\"name\":\"foo\"}",
            "invalid JSON at column 32: trailing characters",
        ),
        (
            "{\"timestamp\":\"foo\",\"name\":\"foo\"}",
            "timestamp is not a number",
        ),
        ("{\"timestamp\":42.0,\"name\":18}", "name is not a string"),
        ("{\"timestamp\":42.0}", "event has no name"),
        ("{\"name\":\"foo\"}", "event has no timestamp"),
        (
            "{\"timestamp\":42.0,\"name\":\"foo\",\"context\":\"bar\"}",
            "context is not an object",
        ),
        ("[1]", "event is not a JSON object"),
        ("\"x\"", "event is not a JSON object"),
        (
            "{\"timestamp\":1,\"name\":\"a\"}\n\n",
            "event contains a newline",
        ),
        (
            "{\"timestamp\":1,\"name\":\"a\",\"context\":{\"n\":9223372036854775808}}",
            "integer out of range",
        ),
        (
            "{\"timestamp\":1e400,\"name\":\"a\"}",
            "invalid JSON at column 18: number out of range",
        ),
        (
            "{\"name\":\"é\",\"x\":}",
            "invalid JSON at column 17: expected value",
        ),
    ];
    for (line, want) in cases {
        let got = Event::decode(line).unwrap_err().to_string();
        assert_eq!(&got, want, "decoding {line:?}");
    }
}

#[test]
fn rfc18_example_log() {
    // RFC 18's example, with line 3's unquoted key fixed; timestamps are
    // not in order and must not need to be.
    let log = concat!(
        "{\"timestamp\":1552593348.073045,\"name\":\"submit\",\"context\":{\"urgency\":16,\"userid\":5588,\"flags\":0}}\n",
        "{\"timestamp\":1552593547.411336,\"name\":\"urgency\",\"context\":{\"urgency\":0,\"userid\":5588}}\n",
        "{\"timestamp\":1552593348.088391,\"name\":\"alloc\",\"context\":{\"note\":\"rank0/core[0-1]\"}}\n",
        "{\"timestamp\":1552593348.093541,\"name\":\"free\"}\n",
        "{\"timestamp\":1552593348.089787,\"name\":\"start\"}\n",
        "{\"timestamp\":1552593348.09283,\"name\":\"release\",\"context\":{\"ranks\":\"all\",\"final\":true}}\n",
        "{\"timestamp\":1552593348.090927,\"name\":\"finish\",\"context\":{\"status\":0}}\n",
        "{\"timestamp\":1552593348.104432,\"name\":\"clean\"}\n",
    );
    let events = decode_log(log).unwrap();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["submit", "urgency", "alloc", "free", "start", "release", "finish", "clean"]
    );
    assert_eq!(events[5].get("final"), Some(&json!(true)));
    assert!(events[1].timestamp > events[2].timestamp);
    // and it re-encodes byte for byte
    assert_eq!(encode_log(&events).unwrap(), log);
    // the RFC's own line 3 (unquoted key) is rejected with its line number
    let bad = log.replace("\"context\":{\"note\"", "context:{\"note\"");
    assert_eq!(
        decode_log(&bad).unwrap_err().to_string(),
        "line 3: invalid JSON at column 47: key must be a string"
    );
}

#[test]
fn decode_log_follows_flux() {
    // good logs
    assert_eq!(decode_log("").unwrap(), vec![]);
    let two = "{\"timestamp\":42.0,\"name\":\"foo\"}\n{\"timestamp\":42.0,\"name\":\"foo\",\"context\":{\"bar\":16}}\n";
    assert_eq!(decode_log(two).unwrap().len(), 2);
    // bad logs, with the line that is wrong
    let cases: &[(&str, &str)] = &[
        ("\n", "line 1: empty line"),
        ("\n\n", "line 1: empty line"),
        ("foo", "line 1: missing newline at the end of the log"),
        ("foo\n", "line 1: invalid JSON at column 2: expected ident"),
        ("}\n", "line 1: invalid JSON at column 1: expected value"),
        (
            "{\"timestamp\":42.0,\"name\":\"foo\"}",
            "line 1: missing newline at the end of the log",
        ),
        (
            "{\"timestamp\":42.0,\"name\":\"foo\"}\n\n",
            "line 2: empty line",
        ),
        (
            "\n{\"timestamp\":42.0,\"name\":\"foo\"}",
            "line 1: empty line",
        ),
        (
            "{\"timestamp\":42.0,\"name\":\"foo\"}\n\n{\"timestamp\":42.0,\"name\":\"foo\"}\n",
            "line 2: empty line",
        ),
        (
            "{\"timestamp\":1,\"name\":\"a\"}\n{\"timestamp\":2}\n",
            "line 2: event has no name",
        ),
    ];
    for (log, want) in cases {
        assert_eq!(&decode_log(log).unwrap_err().to_string(), want, "{log:?}");
    }
    // text after the last newline is ignored, as flux-core ignores it
    let partial = "{\"timestamp\":1,\"name\":\"a\"}\n{\"timestamp\":2,\"na";
    assert_eq!(decode_log(partial).unwrap().len(), 1);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn json_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        json_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((".*", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    pub(super) fn event() -> impl Strategy<Value = Event> {
        let ts = prop_oneof![
            (1.0e9f64..2.0e9f64),
            any::<f64>().prop_filter("positive finite", |f| f.is_finite() && *f > 0.0),
        ];
        let ctx = proptest::option::of(
            proptest::collection::vec(("[a-z]{1,8}", json_value()), 0..5)
                .prop_map(|kv| kv.into_iter().collect::<Map<String, Value>>()),
        );
        (ts, ".+", ctx).prop_map(|(timestamp, name, context)| Event {
            timestamp,
            name,
            context,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        #[test]
        fn event_round_trip(e in event()) {
            let line = e.encode().unwrap();
            prop_assert!(line.ends_with('\n'));
            prop_assert_eq!(line.matches('\n').count(), 1);
            let back = Event::decode(&line).unwrap();
            prop_assert_eq!(back.timestamp.to_bits(), e.timestamp.to_bits());
            prop_assert_eq!(&back, &e);
            // encoding is canonical: a second round gives the same bytes
            prop_assert_eq!(back.encode().unwrap(), line);
            // object format agrees
            prop_assert_eq!(Event::from_value(&e.to_value().unwrap()).unwrap(), e);
        }

        #[test]
        fn log_round_trip(events in proptest::collection::vec(event(), 0..6)) {
            let log = encode_log(&events).unwrap();
            prop_assert_eq!(decode_log(&log).unwrap(), events);
        }

        /// Decoding arbitrary text never panics.
        #[test]
        fn decode_garbage(s in ".*") {
            let _ = Event::decode(&s);
            let _ = decode_log(&s);
        }
    }
}
