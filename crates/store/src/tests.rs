use super::*;
use serde_json::json;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    }
}

fn open(dir: &Path) -> (StateDir, Loaded) {
    match StateDir::open(dir) {
        Ok(x) => x,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

fn ev(ts: f64, name: &str, ctx: Value) -> Event {
    match Event::with_context(ts, name, ctx) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

fn drain(ts: f64, idset: &str) -> Event {
    ev(
        ts,
        "drain",
        json!({"idset": idset, "nodelist": format!("fake{idset}"), "reason": "x", "overwrite": 0}),
    )
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

fn read(path: &Path) -> String {
    ok(fs::read_to_string(path))
}

#[test]
fn open_creates_a_private_locked_directory() {
    let t = tempdir();
    let dir = t.path().join("a/b/state");
    let (sd, loaded) = open(&dir);
    assert!(loaded.events.is_empty());
    assert_eq!(loaded.r, None);
    assert_eq!(loaded.checkpoint, None);
    assert!(loaded.warnings.is_empty());
    let mode = ok(fs::metadata(&dir)).permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert_eq!(
        read(&dir.join(LOCK_FILE)),
        format!("{}\n", std::process::id())
    );
    assert!(dir.join(EVENTLOG_FILE).exists());
    assert_eq!(sd.dir(), dir.as_path());
    assert_eq!(sd.log.event_count(), 0);
}

#[test]
fn second_open_fails_while_locked() {
    let t = tempdir();
    let (sd, _) = open(t.path());
    let e = StateDir::open(t.path()).err().map(|e| e.to_string());
    assert_eq!(
        e,
        Some(format!(
            "state directory {} is in use by another roster serve (pid {})",
            t.path().display(),
            std::process::id()
        ))
    );
    // The failed attempt did not clobber the holder's pid.
    assert_eq!(
        read(&t.path().join(LOCK_FILE)),
        format!("{}\n", std::process::id())
    );
    drop(sd);
    // Released on drop.
    let (_sd, _) = open(t.path());
}

#[test]
fn locked_with_unreadable_pid() {
    let t = tempdir();
    let (_sd, _) = open(t.path());
    ok(fs::write(t.path().join(LOCK_FILE), "garbage"));
    let e = StateDir::open(t.path()).err().map(|e| e.to_string());
    assert_eq!(
        e,
        Some(format!(
            "state directory {} is in use by another roster serve (pid unknown)",
            t.path().display()
        ))
    );
}

#[test]
fn append_and_reopen_round_trip() {
    let t = tempdir();
    let e1 = drain(1000.5, "1");
    let e2 = ev(
        1001.0,
        "undrain",
        json!({"idset": "1", "nodelist": "fake1"}),
    );
    let e3 = ev(
        1002.25,
        "resource-define",
        json!({"method": "configuration"}),
    );
    {
        let (mut sd, _) = open(t.path());
        ok(sd.append(std::slice::from_ref(&e1)));
        ok(sd.append(&[e2.clone(), e3.clone()]));
        ok(sd.append::<Event>(&[]));
        assert_eq!(sd.log.event_count(), 3);
    }
    let (sd, loaded) = open(t.path());
    assert_eq!(loaded.events, vec![e1, e2, e3]);
    assert!(loaded.warnings.is_empty());
    assert_eq!(sd.log.event_count(), 3);
    let text = read(&t.path().join(EVENTLOG_FILE));
    assert_eq!(text.lines().count(), 3);
    assert!(text.starts_with(
        "{\"timestamp\":1000.5,\"name\":\"drain\",\"context\":{\"idset\":\"1\",\"nodelist\":\"fake1\",\"reason\":\"x\",\"overwrite\":0}}\n"
    ));
    assert_eq!(sd.log.content_hash(), fnv1a(FNV_START, text.as_bytes()));
}

#[test]
fn torn_last_line_is_dropped_with_a_warning() {
    let t = tempdir();
    let e1 = drain(1000.0, "1");
    let e2 = drain(1001.0, "2");
    {
        let (mut sd, _) = open(t.path());
        ok(sd.append(&[e1.clone(), e2.clone()]));
    }
    // A crash in the middle of the next append.
    let path = t.path().join(EVENTLOG_FILE);
    let line = ok(drain(1002.0, "3").encode());
    let half = line.get(..line.len() / 2).unwrap_or("");
    let mut f = ok(OpenOptions::new().append(true).open(&path));
    ok(f.write_all(half.as_bytes()));
    drop(f);

    let e4 = drain(1003.0, "4");
    {
        let (mut sd, loaded) = open(t.path());
        assert_eq!(loaded.events, vec![e1.clone(), e2.clone()]);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].starts_with("resource.eventlog line 3: discarded a torn last line"),
            "{:?}",
            loaded.warnings
        );
        // The next append starts on a clean line.
        ok(sd.append(std::slice::from_ref(&e4)));
    }
    let (_sd, loaded) = open(t.path());
    assert_eq!(loaded.events, vec![e1, e2, e4]);
    assert!(loaded.warnings.is_empty());
    assert!(read(&path).lines().all(|l| Event::decode(l).is_ok()));
}

#[test]
fn corrupt_line_fails_open() {
    let t = tempdir();
    let good = ok(drain(1000.0, "1").encode());
    ok(fs::write(
        t.path().join(EVENTLOG_FILE),
        format!("{good}{{}}\n{good}"),
    ));
    let e = StateDir::open(t.path()).err().map(|e| e.to_string());
    let e = e.unwrap_or_default();
    assert!(e.starts_with("resource.eventlog line 2: "), "{e}");
    // The lock was released with the failed open.
    ok(fs::write(t.path().join(EVENTLOG_FILE), good));
    let (_sd, loaded) = open(t.path());
    assert_eq!(loaded.events.len(), 1);
}

#[test]
fn failed_append_leaves_nothing_behind() {
    let t = tempdir();
    let (mut sd, _) = open(t.path());
    let good = drain(1000.0, "1");
    // A non-finite timestamp cannot be encoded: the whole batch is refused.
    let bad = Event {
        timestamp: f64::NAN,
        name: "drain".into(),
        context: None,
    };
    let e = sd.append(&[good.clone(), bad]).err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.starts_with("resource.eventlog: cannot append event 'drain'")),
        "{e:?}"
    );
    assert_eq!(sd.log.event_count(), 0);
    // The refused batch is not committed by the next append.
    let next = drain(1001.0, "2");
    ok(sd.append(std::slice::from_ref(&next)));
    drop(sd);
    let (_sd, loaded) = open(t.path());
    assert_eq!(loaded.events, vec![next]);
}

#[test]
fn write_r_is_atomic_and_stale_temp_files_are_removed() {
    let t = tempdir();
    let r1 = r#"{"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0}}"#;
    let r2 = r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "starttime": 0.0, "expiration": 0.0, "nodelist": ["foo"]}}"#;
    {
        let (mut sd, _) = open(t.path());
        ok(sd.write_r(r1));
        ok(sd.write_r(r2));
    }
    // A crash during a later write_r leaves a temporary file behind.
    let stale = t.path().join(".resource.R.tmp.4242.0");
    ok(fs::write(&stale, "{\"version\": 1, \"exec"));
    let stale_ck = t.path().join(".checkpoint.resource.tmp.4242.1");
    ok(fs::write(&stale_ck, "{"));
    let (_sd, loaded) = open(t.path());
    assert_eq!(loaded.r.as_deref(), Some(r2));
    assert!(!stale.exists());
    assert!(!stale_ck.exists());
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(loaded
        .warnings
        .iter()
        .any(|w| w.contains(".resource.R.tmp.4242.0: removed a temporary file")));
    // Only the target files and the lock remain.
    let mut names: Vec<String> = ok(fs::read_dir(t.path()))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [LOCK_FILE, R_FILE, EVENTLOG_FILE]);
}

#[test]
fn resource_r_must_be_text() {
    let t = tempdir();
    ok(fs::write(t.path().join(R_FILE), [0xff, 0xfe]));
    let e = StateDir::open(t.path()).err().map(|e| e.to_string());
    assert_eq!(
        e,
        Some(format!(
            "{}: not valid UTF-8 text",
            t.path().join(R_FILE).display()
        ))
    );
}

#[test]
fn checkpoint_round_trip() {
    let t = tempdir();
    let ck = json!({
        "timestamp": 1713906351.0,
        "drain_state": {"1-2": {"timestamp": 1713906350.0, "reason": "", "nodelist": "fake[1-2]"}}
    });
    {
        let (mut sd, loaded) = open(t.path());
        assert_eq!(loaded.checkpoint, None);
        ok(sd.write_checkpoint(&ck));
    }
    {
        let (_sd, loaded) = open(t.path());
        // The store records the checkpoint's position in the eventlog
        // (here: before its first event, the empty prefix's hash).
        let mut want = ck.clone();
        want["log_position"] = json!([{"events": 0, "fnv1a": "cbf29ce484222325"}]);
        assert_eq!(loaded.checkpoint.as_ref(), Some(&want));
        assert_eq!(loaded.replay_from, Some(0));
        assert_eq!(
            checkpoint_timestamp(loaded.checkpoint.as_ref()),
            1713906351.0
        );
        ok(fs::remove_file(t.path().join(CHECKPOINT_FILE)));
    }
    let (_sd, loaded) = open(t.path());
    assert_eq!(loaded.checkpoint, None);
}

#[test]
fn invalid_checkpoint_names_the_file() {
    let t = tempdir();
    let path = t.path().join(CHECKPOINT_FILE);
    ok(fs::write(&path, "{\"timestamp\": 12,"));
    let e = StateDir::open(t.path()).err().map(|e| e.to_string());
    let e = e.unwrap_or_default();
    assert!(
        e.starts_with(&format!("{}: invalid JSON: ", path.display())),
        "{e}"
    );
}

#[test]
fn rewrite_and_history_truncation_at_start() {
    // t2319 "history=0": drains before the checkpoint disappear from the
    // log, while the checkpoint still carries the drain state.
    let t = tempdir();
    let now = 1_760_000_000.0;
    let ckpt_ts = now - 60.0;
    {
        let (mut sd, _) = open(t.path());
        ok(sd.append(&[drain(1000.0, "1"), drain(ckpt_ts - 1.0, "2")]));
        ok(sd.write_checkpoint(&json!({"timestamp": ckpt_ts, "drain_state": {}})));
        ok(sd.append(&[drain(ckpt_ts + 1.0, "3")]));
    }
    let (mut sd, loaded) = open(t.path());
    let ck = checkpoint_timestamp(loaded.checkpoint.as_ref());
    let cutoff = history_cutoff(now, Some(0.0), ck);
    assert_eq!(cutoff, Some(ckpt_ts));
    let kept = truncate_history(loaded.events, cutoff.unwrap_or(0.0));
    assert_eq!(kept, vec![drain(ckpt_ts + 1.0, "3")]);
    ok(sd.rewrite_eventlog(&kept));
    assert_eq!(sd.log.event_count(), 1);
    // Appends continue after the rewrite.
    ok(sd.append(&[drain(now, "0")]));
    drop(sd);
    let (_sd, loaded) = open(t.path());
    assert_eq!(
        loaded.events,
        vec![drain(ckpt_ts + 1.0, "3"), drain(now, "0")]
    );

    // history = inf leaves the log alone.
    assert_eq!(history_cutoff(now, None, ckpt_ts), None);
}

#[test]
fn open_fails_on_a_file() {
    let t = tempdir();
    let f = t.path().join("file");
    ok(fs::write(&f, ""));
    let e = StateDir::open(&f).err().map(|e| e.to_string());
    let e = e.unwrap_or_default();
    assert!(
        e.starts_with(&format!("{}: create state directory: ", f.display())),
        "{e}"
    );
}
