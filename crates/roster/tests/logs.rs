//! Structured logs: the start-up summary, event fields, `--log-format
//! json`, `RUST_LOG` filtering.

mod common;

use common::*;

#[test]
fn json_logs_carry_fields_and_one_startup_summary() {
    let s = Scratch::new("logs-json");
    let mut d = start(&s, &fake_config(4, ""), &["--log-format", "json"]);
    d.ok(&["drain", "2-3", "bad dimm"]);
    d.stop();
    let log = d.log_text();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let starts: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|v| v["fields"]["replayed_events"].is_u64())
        .collect();
    assert_eq!(starts.len(), 1, "{log}");
    let f = &starts[0]["fields"];
    assert_eq!(f["nodes"], 4);
    assert_eq!(f["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        f["listeners"].as_str().unwrap().starts_with("unix://"),
        "{f}"
    );
    assert!(f["statedir"].as_str().unwrap().ends_with("state"), "{f}");
    assert!(starts[0]["timestamp"].is_string());
    let drain = lines
        .iter()
        .find(|v| v["fields"]["event"] == "drain")
        .unwrap_or_else(|| panic!("no drain event line:\n{log}"));
    assert_eq!(drain["fields"]["rank"], "2-3");
    assert_eq!(drain["fields"]["nodelist"], "fake[2-3]");
    assert_eq!(drain["fields"]["reason"], "bad dimm");
    assert_eq!(drain["level"], "INFO");

    // RUST_LOG filters.  (One test: the variable is process-wide, and the
    // daemon inherits it.)
    let s = Scratch::new("logs-filter");
    std::env::set_var("RUST_LOG", "warn");
    let mut d = start(&s, &fake_config(2, ""), &[]);
    std::env::remove_var("RUST_LOG");
    d.ok(&["drain", "1"]);
    d.stop();
    let quiet = d.log_text();
    assert!(!quiet.contains("ready:"), "{quiet}");
    assert!(!quiet.contains("event drain"), "{quiet}");

    let s = Scratch::new("logs-text");
    let mut d = start(&s, &fake_config(2, ""), &[]);
    d.stop();
    let text = d.log_text();
    let line = text
        .lines()
        .find(|l| l.contains(" ready: 2 nodes"))
        .unwrap_or_else(|| panic!("{text}"));
    // 2026-11-25T07:54:53.123456Z  INFO roster serve 0.1.0 ready: ...
    assert!(line.as_bytes()[4] == b'-' && line.contains('T'), "{line}");
    assert!(line.contains("INFO"), "{line}");
    assert!(line.contains("replayed_events=0"), "{line}");
}

/// One JSON log line, as far as the request lines go.
#[derive(serde::Deserialize)]
struct LogLine {
    fields: LogFields,
}

#[derive(serde::Deserialize)]
struct LogFields {
    #[serde(default)]
    message: String,
    #[serde(default)]
    topic: Option<String>,
    /// A number (it was once logged as the text `Some(0)`).
    #[serde(default)]
    uid: Option<u32>,
}

#[test]
fn debug_request_lines_show_the_uid_as_a_number() {
    let s = Scratch::new("logs-uid");
    let mut d = start(&s, &fake_config(2, ""), &["--log-format", "json", "-v"]);
    d.ok(&["drain", "1", "fan"]);
    d.stop();
    let log = d.log_text();
    let lines: Vec<LogLine> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let drain = lines
        .iter()
        .filter(|l| l.fields.message == "request")
        .filter(|l| l.fields.topic.as_deref() == Some("resource.drain"))
        // the service loop's line (the listener's has no uid)
        .find(|l| l.fields.uid.is_some())
        .unwrap_or_else(|| panic!("no request line:\n{log}"));
    // SAFETY: getuid has no preconditions.
    #[allow(unsafe_code)]
    let me = unsafe { libc::getuid() };
    assert_eq!(drain.fields.uid, Some(me), "{log}");
}

#[test]
fn a_drain_of_scattered_ranks_logs_bounded_fields_and_keeps_them_all_in_the_eventlog() {
    let s = Scratch::new("logs-bounded");
    let mut d = start(&s, &fake_config(4096, ""), &["--log-format", "json"]);
    let ranks: Vec<String> = (0..4096).step_by(2).map(|r| r.to_string()).collect();
    let ranks = ranks.join(",");
    let reason = format!("fan {}", "x".repeat(500));
    d.ok(&["drain", &ranks, &reason]);
    d.stop();
    let log = d.log_text();
    let mut saw_drain = false;
    for l in log.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
        let Some(fields) = v["fields"].as_object() else {
            continue;
        };
        for (k, f) in fields {
            let text = f
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| f.to_string());
            for word in text.split_whitespace() {
                assert!(
                    word.len() <= 200,
                    "field {k} has a {}-byte word: {l}",
                    word.len()
                );
            }
        }
        if v["fields"]["event"] == "drain" {
            saw_drain = true;
            assert!(
                v["fields"]["rank"].as_str().unwrap().contains("...(+"),
                "{l}"
            );
        }
    }
    assert!(saw_drain, "{log}");
    // The eventlog keeps the whole idset and reason.
    let events = std::fs::read_to_string(s.statedir().join("resource.eventlog")).unwrap();
    let drain = events.lines().find(|l| l.contains("\"drain\"")).unwrap();
    assert!(drain.contains(&reason), "{drain}");
    assert!(drain.contains("\"0,2,4,6"), "{drain}");
}
