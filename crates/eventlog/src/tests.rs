//! Codec vectors (flux-core's eventlog unit tests, RFC 18 and RFC 44
//! examples), property tests, and crash-safety tests of the log file.

use super::*;
use crate::file::FailPoint;
use serde_json::json;
use std::fs;

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

// ----------------------------------------------------------------- files

fn events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            ev(
                1700000000.0 + i as f64 + 0.25,
                if i % 2 == 0 { "drain" } else { "undrain" },
                json!({"idset": i.to_string(), "nodelist": format!("node{i}")}),
            )
        })
        .collect()
}

#[test]
fn open_append_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let opened = EventLogFile::open(&path).unwrap();
    assert!(path.exists());
    assert!(opened.events.is_empty() && opened.torn.is_none());
    let mut log = opened.log;
    let evs = events(5);
    log.append(&evs[0]).unwrap();
    log.append_batch(&evs[1..4]).unwrap();
    assert_eq!(log.event_count(), 4);
    assert_eq!(log.path(), path.as_path());
    drop(log);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text, encode_log(&evs[..4]).unwrap());
    let opened = EventLogFile::open(&path).unwrap();
    assert_eq!(opened.events, evs[..4].to_vec());
    assert_eq!(opened.log.byte_len(), text.len() as u64);
}

#[test]
fn group_commit_stage_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let mut log = EventLogFile::open(&path).unwrap().log;
    assert_eq!(log.commit().unwrap(), 0);
    let evs = events(6);
    log.stage(&evs[0..2]).unwrap();
    log.stage(&evs[2..3]).unwrap();
    assert_eq!(log.staged(), 3);
    // nothing reaches the file before the commit
    assert_eq!(fs::read_to_string(&path).unwrap(), "");
    assert_eq!(log.commit().unwrap(), 3);
    assert_eq!(log.staged(), 0);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        encode_log(&evs[..3]).unwrap()
    );
    // an event that cannot be encoded stages nothing of its batch
    let mut bad = evs[4].clone();
    bad.timestamp = f64::INFINITY;
    let err = log.stage(&[evs[3].clone(), bad]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource.eventlog: cannot append event 'drain': invalid timestamp inf: it must be a finite number greater than zero"
    );
    assert_eq!(log.staged(), 0);
    log.stage(&evs[3..4]).unwrap();
    log.discard_staged();
    assert_eq!(log.commit().unwrap(), 0);
    assert_eq!(EventLogFile::open(&path).unwrap().events.len(), 3);
}

#[test]
fn torn_half_line_is_dropped_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(3);
    let good = encode_log(&evs[..2]).unwrap();
    let third = evs[2].encode().unwrap();
    fs::write(&path, format!("{good}{}", &third[..third.len() / 2])).unwrap();
    let opened = EventLogFile::open(&path).unwrap();
    assert_eq!(opened.events, evs[..2].to_vec());
    let torn = opened.torn.clone().unwrap();
    assert_eq!(torn.line, 3);
    assert_eq!(torn.bytes, (third.len() / 2) as u64);
    assert!(!torn.was_valid_event);
    assert_eq!(
        torn.to_string(),
        format!(
            "resource.eventlog line 3: discarded a torn last line ({} bytes without a trailing newline)",
            third.len() / 2
        )
    );
    // the file was cut back to the last good line, and appends continue cleanly
    assert_eq!(fs::read_to_string(&path).unwrap(), good);
    let mut log = opened.log;
    log.append(&evs[2]).unwrap();
    drop(log);
    assert_eq!(EventLogFile::open(&path).unwrap().events, evs);
}

#[test]
fn valid_event_without_newline_is_torn_too() {
    // flux-core would refuse a log that is one unterminated line, and ignore
    // it after other lines; we always treat it as an unacknowledged append.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(2);
    let line = evs[0].to_json().unwrap();
    fs::write(&path, &line).unwrap();
    let opened = EventLogFile::open(&path).unwrap();
    assert!(opened.events.is_empty());
    let torn = opened.torn.unwrap();
    assert!(torn.was_valid_event);
    assert_eq!(torn.line, 1);
    assert!(torn.to_string().ends_with(
        "without a trailing newline, a valid event whose append was never acknowledged)"
    ));
    assert_eq!(fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn corrupt_middle_line_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(4);
    let mut text = encode_log(&evs).unwrap();
    // damage line 3
    let start = text.match_indices('\n').nth(1).unwrap().0 + 1;
    text.replace_range(start..start + 1, "X");
    fs::write(&path, &text).unwrap();
    let err = EventLogFile::open(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource.eventlog line 3: invalid JSON at column 1: expected value"
    );
    // the file is left as it was for the operator to inspect
    assert_eq!(fs::read_to_string(&path).unwrap(), text);

    // an empty line in the middle, and bytes that are not UTF-8
    fs::write(
        &path,
        format!("{}\n{}", evs[0].encode().unwrap(), evs[1].encode().unwrap()),
    )
    .unwrap();
    assert_eq!(
        EventLogFile::open(&path).unwrap_err().to_string(),
        "resource.eventlog line 2: empty line"
    );
    let mut bytes = evs[0].encode().unwrap().into_bytes();
    bytes.extend_from_slice(b"{\"timestamp\":1,\"name\":\"\xff\"}\n");
    fs::write(&path, bytes).unwrap();
    assert_eq!(
        EventLogFile::open(&path).unwrap_err().to_string(),
        "resource.eventlog line 2: line is not valid UTF-8"
    );
    // a bad complete line before a torn tail is still an error
    fs::write(&path, "{\"timestamp\":1}\n{\"time").unwrap();
    assert_eq!(
        EventLogFile::open(&path).unwrap_err().to_string(),
        "resource.eventlog line 1: event has no name"
    );
}

#[test]
fn rewrite_replaces_atomically_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(6);
    let mut log = EventLogFile::open(&path).unwrap().log;
    log.append_batch(&evs[..4]).unwrap();
    log.stage(&evs[5..6]).unwrap();
    log.rewrite(&evs[2..4]).unwrap();
    assert_eq!(log.event_count(), 2);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        encode_log(&evs[2..4]).unwrap()
    );
    // the handle follows the new file; the staged event is appended to it
    assert_eq!(log.commit().unwrap(), 1);
    log.append(&evs[4]).unwrap();
    drop(log);
    let mut want = evs[2..4].to_vec();
    want.push(evs[5].clone());
    want.push(evs[4].clone());
    assert_eq!(EventLogFile::open(&path).unwrap().events, want);
    // no temporary file is left behind
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["resource.eventlog"]);
    // rewriting to nothing gives an empty file
    let mut log = EventLogFile::open(&path).unwrap().log;
    log.rewrite(&[]).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "");
}

#[test]
fn temp_files_of_a_crashed_rewrite_are_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(3);
    fs::write(&path, encode_log(&evs[..2]).unwrap()).unwrap();
    // a crash after writing the temp file, before the rename
    let stale = dir.path().join(".resource.eventlog.tmp.4242.0");
    fs::write(&stale, encode_log(&evs[2..]).unwrap()).unwrap();
    let other = dir.path().join(".resource.R.tmp.4242.1");
    fs::write(&other, "{}").unwrap();
    let opened = EventLogFile::open(&path).unwrap();
    assert_eq!(opened.events, evs[..2].to_vec());
    assert_eq!(opened.removed_temp_files, vec![stale.clone()]);
    assert!(!stale.exists());
    // other files' temporaries are theirs to clean
    assert!(other.exists());
    assert_eq!(
        remove_stale_temp_files(dir.path().join("resource.R")).unwrap(),
        vec![other.clone()]
    );
    assert!(!other.exists());
}

#[test]
fn write_file_atomic_replaces_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.R");
    write_file_atomic(&path, b"{\"version\":1}").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"{\"version\":1}");
    write_file_atomic(&path, b"second").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"second");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    // a missing directory is an error naming the temporary file's path
    let err = write_file_atomic(dir.path().join("nope/resource.R"), b"x").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("nope/.resource.R.tmp."), "{msg}");
    assert!(msg.contains(": create temporary file: "), "{msg}");
    // an empty path names no file
    assert!(write_file_atomic("", b"x").is_err());
}

#[test]
fn failed_write_rolls_back_and_can_be_retried() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(4);
    let mut log = EventLogFile::open(&path).unwrap().log;
    log.append(&evs[0]).unwrap();
    log.stage(&evs[1..3]).unwrap();
    log.fail_next(FailPoint::Write { after: 30 });
    let err = log.commit().unwrap_err();
    assert!(
        err.to_string()
            .ends_with("resource.eventlog: write: injected"),
        "{err}"
    );
    // the partial write was cut off; the batch is still staged
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        encode_log(&evs[..1]).unwrap()
    );
    assert_eq!(log.staged(), 2);
    assert_eq!(log.event_count(), 1);
    assert_eq!(log.commit().unwrap(), 2);
    drop(log);
    assert_eq!(EventLogFile::open(&path).unwrap().events, evs[..3].to_vec());
}

#[test]
fn failed_sync_poisons_until_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    let evs = events(3);
    let mut log = EventLogFile::open(&path).unwrap().log;
    log.fail_next(FailPoint::Sync);
    assert!(log.append(&evs[0]).is_err());
    for r in [
        log.append(&evs[1]).map(|_| ()),
        log.commit().map(|_| ()),
        log.rewrite(&evs).map(|_| ()),
    ] {
        assert_eq!(
            r.unwrap_err().to_string(),
            "resource.eventlog: unusable after a failed write, sync or rewrite; reopen it"
        );
    }
    drop(log);
    // reopening reads what is really on disk
    let opened = EventLogFile::open(&path).unwrap();
    assert_eq!(opened.events, evs[..1].to_vec());
    let mut log = opened.log;
    log.append(&evs[1]).unwrap();
}

#[test]
fn open_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = EventLogFile::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains(": open: "), "{err}");
    let err = EventLogFile::open(dir.path().join("missing/resource.eventlog"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing: list directory: "), "{err}");
}

mod crash_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// Cutting the file anywhere inside its last line (a torn write)
        /// recovers exactly the events before it.
        #[test]
        fn any_torn_tail_recovers_the_prefix(evs in proptest::collection::vec(super::props::event(), 1..5), cut in any::<proptest::sample::Index>()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.eventlog");
            let full = encode_log(&evs).unwrap();
            let last_start = full[..full.len() - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let last_len = full.len() - last_start;
            // keep 1..last_len-1 bytes of the last line (never its newline)
            let keep = 1 + cut.index(last_len - 1);
            let mut bytes = full.as_bytes()[..last_start + keep].to_vec();
            if keep == last_len { bytes.pop(); }
            fs::write(&path, &bytes).unwrap();
            let opened = EventLogFile::open(&path).unwrap();
            prop_assert_eq!(&opened.events[..], &evs[..evs.len() - 1]);
            prop_assert_eq!(opened.torn.map(|t| t.line), Some(evs.len()));
            prop_assert_eq!(fs::metadata(&path).unwrap().len(), last_start as u64);
        }
    }
}
