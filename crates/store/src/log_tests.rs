//! The log file: crash-safety tests (moved from the `eventlog` crate).

use super::*;
use crate::sim::{Fault, SimDisk};
use crate::RealFs;
use eventlog::encode_log;
use serde_json::{json, Value};
use std::fs;
use std::sync::Arc;

fn ev(ts: f64, name: &str, ctx: Value) -> Event {
    Event::with_context(ts, name, ctx).unwrap()
}

fn open_log(path: &Path) -> Result<Opened, EventLogError> {
    EventLogFile::open(Arc::new(RealFs), path)
}

/// A temporary directory, and `resource.eventlog` in it.
fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.eventlog");
    (dir, path)
}

const SIM_LOG: &str = "/sim/resource.eventlog";

/// The log at [`SIM_LOG`] on the simulated disk.
fn open_sim(disk: &SimDisk) -> Opened {
    EventLogFile::open(Arc::new(disk.clone()), Path::new(SIM_LOG)).unwrap()
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
    let (_dir, path) = temp_log();
    let opened = open_log(&path).unwrap();
    assert!(path.exists());
    assert!(opened.events.is_empty() && opened.torn.is_none());
    let mut log = opened.log;
    let evs = events(5);
    log.append(&evs[0]).unwrap();
    log.append_batch(&evs[1..4]).unwrap();
    assert_eq!(log.event_count(), 4);
    assert_eq!(log.path.as_path(), path.as_path());
    drop(log);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text, encode_log(&evs[..4]).unwrap());
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events, evs[..4].to_vec());
    assert_eq!(opened.log.len, text.len() as u64);
}

#[test]
fn group_commit_stage_and_commit() {
    let (_dir, path) = temp_log();
    let mut log = open_log(&path).unwrap().log;
    assert_eq!(log.commit().unwrap(), 0);
    let evs = events(6);
    log.stage(&evs[0..2]).unwrap();
    log.stage(&evs[2..3]).unwrap();
    assert_eq!(log.staged_count, 3);
    // nothing reaches the file before the commit
    assert_eq!(fs::read_to_string(&path).unwrap(), "");
    assert_eq!(log.commit().unwrap(), 3);
    assert_eq!(log.staged_count, 0);
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
    assert_eq!(log.staged_count, 0);
    log.stage(&evs[3..4]).unwrap();
    log.discard_staged();
    assert_eq!(log.commit().unwrap(), 0);
    assert_eq!(open_log(&path).unwrap().events.len(), 3);
}

#[test]
fn torn_half_line_is_dropped_and_truncated() {
    let (_dir, path) = temp_log();
    let evs = events(3);
    let good = encode_log(&evs[..2]).unwrap();
    let third = evs[2].encode().unwrap();
    fs::write(&path, format!("{good}{}", &third[..third.len() / 2])).unwrap();
    let opened = open_log(&path).unwrap();
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
    assert_eq!(open_log(&path).unwrap().events, evs);
}

#[test]
fn valid_event_without_newline_is_torn_too() {
    // flux-core would refuse a log that is one unterminated line, and ignore
    // it after other lines; we always treat it as an unacknowledged append.
    let (_dir, path) = temp_log();
    let evs = events(2);
    let line = evs[0].to_json().unwrap();
    fs::write(&path, &line).unwrap();
    let opened = open_log(&path).unwrap();
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
    let (_dir, path) = temp_log();
    let evs = events(4);
    let mut text = encode_log(&evs).unwrap();
    // damage line 3
    let start = text.match_indices('\n').nth(1).unwrap().0 + 1;
    text.replace_range(start..start + 1, "X");
    fs::write(&path, &text).unwrap();
    let err = open_log(&path).unwrap_err();
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
        open_log(&path).unwrap_err().to_string(),
        "resource.eventlog line 2: empty line"
    );
    let mut bytes = evs[0].encode().unwrap().into_bytes();
    bytes.extend_from_slice(b"{\"timestamp\":1,\"name\":\"\xff\"}\n");
    fs::write(&path, bytes).unwrap();
    assert_eq!(
        open_log(&path).unwrap_err().to_string(),
        "resource.eventlog line 2: line is not valid UTF-8"
    );
    // a bad complete line before a torn tail is still an error
    fs::write(&path, "{\"timestamp\":1}\n{\"time").unwrap();
    assert_eq!(
        open_log(&path).unwrap_err().to_string(),
        "resource.eventlog line 1: event has no name"
    );
}

#[test]
fn rewrite_replaces_atomically_and_appends_continue() {
    let (dir, path) = temp_log();
    let evs = events(6);
    let mut log = open_log(&path).unwrap().log;
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
    assert_eq!(open_log(&path).unwrap().events, want);
    // no temporary file is left behind
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["resource.eventlog"]);
    // rewriting to nothing gives an empty file
    let mut log = open_log(&path).unwrap().log;
    log.rewrite(&[]).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "");
}

#[test]
fn temp_files_of_a_crashed_rewrite_are_ignored_and_removed() {
    let (dir, path) = temp_log();
    let evs = events(3);
    fs::write(&path, encode_log(&evs[..2]).unwrap()).unwrap();
    // a crash after writing the temp file, before the rename
    let stale = dir.path().join(".resource.eventlog.tmp.4242.0");
    fs::write(&stale, encode_log(&evs[2..]).unwrap()).unwrap();
    let other = dir.path().join(".resource.R.tmp.4242.1");
    fs::write(&other, "{}").unwrap();
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events, evs[..2].to_vec());
    assert_eq!(opened.removed_temp_files, vec![stale.clone()]);
    assert!(!stale.exists());
    // other files' temporaries are theirs to clean
    assert!(other.exists());
    assert_eq!(
        remove_stale_temp_files(&RealFs, &dir.path().join("resource.R")).unwrap(),
        vec![other.clone()]
    );
    assert!(!other.exists());
}

#[test]
fn write_file_atomic_replaces_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resource.R");
    write_file_atomic(&RealFs, &path, b"{\"version\":1}").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"{\"version\":1}");
    write_file_atomic(&RealFs, &path, b"second").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"second");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    // a missing directory is an error naming the temporary file's path
    let err = write_file_atomic(&RealFs, &dir.path().join("nope/resource.R"), b"x").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("nope/.resource.R.tmp."), "{msg}");
    assert!(msg.contains(": create temporary file: "), "{msg}");
    // an empty path names no file
    assert!(write_file_atomic(&RealFs, Path::new(""), b"x").is_err());
}

#[test]
fn failed_write_rolls_back_and_can_be_retried() {
    let disk = SimDisk::new();
    let evs = events(4);
    let mut log = open_sim(&disk).log;
    log.append(&evs[0]).unwrap();
    log.stage(&evs[1..3]).unwrap();
    // the next write fails with ENOSPC after writing half its bytes
    disk.fail_op(disk.ops() + 1, Fault::Enospc);
    let err = log.commit().unwrap_err();
    assert_eq!(
        err.to_string(),
        "/sim/resource.eventlog: write: No space left on device"
    );
    // the partial write was cut off; the batch is still staged
    assert_eq!(
        disk.contents(Path::new(SIM_LOG)).unwrap(),
        encode_log(&evs[..1]).unwrap().into_bytes()
    );
    assert_eq!(log.staged_count, 2);
    assert_eq!(log.event_count(), 1);
    assert_eq!(log.commit().unwrap(), 2);
    drop(log);
    assert_eq!(open_sim(&disk).events, evs[..3].to_vec());
}

#[test]
fn failed_sync_poisons_until_reopened() {
    let disk = SimDisk::new();
    let evs = events(3);
    let mut log = open_sim(&disk).log;
    // write, then fdatasync fails
    disk.fail_op(disk.ops() + 2, Fault::Eio);
    assert_eq!(
        log.append(&evs[0]).unwrap_err().to_string(),
        "/sim/resource.eventlog: fdatasync: Input/output error"
    );
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
    // reopening reads what is there (the write reached the cache)
    let opened = open_sim(&disk);
    assert_eq!(opened.events, evs[..1].to_vec());
    let mut log = opened.log;
    log.append(&evs[1]).unwrap();
}

#[test]
fn zero_block_then_newline_in_the_tail_is_torn_not_corrupt() {
    // The file size reached the disk, the data did not: zeros, then more
    // text and a newline from the same unsynced append.
    let (_dir, path) = temp_log();
    let evs = events(4);
    let good = encode_log(&evs[..2]).unwrap();
    let mut bytes = good.clone().into_bytes();
    bytes.extend(std::iter::repeat_n(0u8, 40));
    bytes.extend_from_slice(&evs[3].encode().unwrap().into_bytes()[10..]);
    bytes.extend_from_slice(evs[3].encode().unwrap().as_bytes());
    let tail = (bytes.len() - good.len()) as u64;
    fs::write(&path, &bytes).unwrap();
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events, evs[..2].to_vec());
    let torn = opened.torn.clone().unwrap();
    assert!(torn.zeroed);
    assert_eq!(torn.line, 3);
    assert_eq!(torn.bytes, tail);
    assert_eq!(
        torn.to_string(),
        format!("resource.eventlog line 3: discarded a torn tail ({tail} bytes from a line holding zero bytes: an unsynced block of an interrupted append)")
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), good);
}

#[test]
fn zeros_after_the_last_line_are_room_overwritten_in_place() {
    // Only zeros after the last newline: the preallocated room (or an
    // unsynced append of which only the size reached the disk, the same
    // bytes): no warning, kept, and the next append writes over it.
    let (_dir, path) = temp_log();
    let evs = events(4);
    let good = encode_log(&evs[..2]).unwrap();
    fs::write(&path, [good.as_bytes(), &[0u8; 4096]].concat()).unwrap();
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events, evs[..2].to_vec());
    assert!(opened.torn.is_none());
    let mut log = opened.log;
    log.append(&evs[2]).unwrap();
    let third = encode_log(&evs[..3]).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(bytes.len(), good.len() + 4096, "the size did not change");
    assert!(bytes.starts_with(third.as_bytes()));
    assert!(bytes[third.len()..].iter().all(|&b| b == 0));
    // a clean stop cuts the room
    log.trim().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), third);
    drop(log);
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events, evs[..3].to_vec());
    assert!(opened.torn.is_none());
}

#[test]
fn reserve_makes_room_when_it_runs_low_and_appends_fill_it() {
    let (_dir, path) = temp_log();
    let evs = events(3);
    let mut log = open_log(&path).unwrap().log;
    assert!(log.reserve().unwrap(), "an empty file has no room");
    let size = || fs::metadata(&path).unwrap().len();
    assert_eq!(size(), RESERVE_CHUNK);
    assert!(!log.reserve().unwrap(), "enough room: nothing written");
    log.append_batch(&evs).unwrap();
    let text = encode_log(&evs).unwrap();
    assert_eq!(size(), RESERVE_CHUNK);
    assert!(fs::read(&path).unwrap().starts_with(text.as_bytes()));
    // A batch larger than the room grows the file, as without room.
    let big = ev(
        1800000000.5,
        "drain",
        json!({"idset": "0", "reason": "x".repeat(RESERVE_CHUNK as usize)}),
    );
    log.append(&big).unwrap();
    let all = [
        text.clone(),
        encode_log(std::slice::from_ref(&big)).unwrap(),
    ]
    .concat();
    assert_eq!(size(), all.len() as u64);
    assert!(log.reserve().unwrap());
    assert_eq!(size(), all.len() as u64 + RESERVE_CHUNK);
    drop(log);
    // A restart keeps the events and the room, without a warning.
    let opened = open_log(&path).unwrap();
    assert_eq!(opened.events.len(), 4);
    assert!(opened.torn.is_none());
    assert_eq!(size(), all.len() as u64 + RESERVE_CHUNK);
}

#[test]
fn a_failed_reserve_leaves_the_log_usable() {
    let disk = SimDisk::new();
    let evs = events(3);
    let mut log = open_sim(&disk).log;
    log.append(&evs[0]).unwrap();
    disk.fail_op(disk.ops() + 1, Fault::Enospc);
    let e = log.reserve().unwrap_err().to_string();
    assert_eq!(
        e,
        "/sim/resource.eventlog: preallocate: No space left on device"
    );
    let one = encode_log(&evs[..1]).unwrap();
    assert_eq!(disk.contents(Path::new(SIM_LOG)).unwrap(), one.as_bytes());
    log.append(&evs[1]).unwrap();
    assert!(log.reserve().unwrap());
    log.append(&evs[2]).unwrap();
    disk.power_loss(&mut crate::sim::Rng::new(5));
    let opened = open_sim(&disk);
    assert_eq!(opened.events, evs);
    assert!(opened.torn.is_none());
}

#[test]
fn an_unsynced_append_into_the_room_recovers_the_acknowledged_prefix() {
    // Over many seeds the unsynced line is lost, torn (a prefix, then the
    // room's zeros), partial (a block still zero) or whole: every reopen
    // keeps the acknowledged events, warns only when a line was cut, and
    // accepts appends again.
    let mut kinds = std::collections::BTreeSet::new();
    for seed in 0..300 {
        let disk = SimDisk::new();
        let evs = events(3);
        let mut log = open_sim(&disk).log;
        log.append(&evs[0]).unwrap();
        log.reserve().unwrap();
        disk.sync_dir(Path::new("/sim")).unwrap();
        log.append(&evs[1]).unwrap();
        // the process dies after the write, before the fdatasync
        disk.crash_after(1);
        assert!(log.append(&evs[2]).is_err());
        disk.power_loss(&mut crate::sim::Rng::new(seed));
        let opened = open_sim(&disk);
        let n = opened.events.len();
        assert!(n == 2 || n == 3, "seed {seed}: {n} events");
        assert_eq!(opened.events[..], evs[..n], "seed {seed}");
        kinds.insert(match (n, opened.torn.is_some()) {
            (3, _) => "whole",
            (2, true) => "cut",
            _ => "lost",
        });
        let mut log = opened.log;
        log.append(&evs[2]).unwrap();
        drop(log);
        assert_eq!(open_sim(&disk).events.len(), n + 1, "seed {seed}");
    }
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["cut", "lost", "whole"]
    );
}

#[test]
fn open_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_log(dir.path()).unwrap_err().to_string();
    assert!(err.contains(": open: "), "{err}");
    let err = open_log(&dir.path().join("missing/resource.eventlog"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing: list directory: "), "{err}");
}

mod crash_props {
    use super::*;
    use proptest::prelude::*;

    fn event_strategy() -> impl Strategy<Value = Event> {
        (
            1.0f64..2e9,
            "[a-z][a-z-]{0,10}",
            proptest::option::of("[ -~]{0,12}"),
        )
            .prop_map(|(ts, name, r)| {
                let ctx = r.map(|r| json!({"reason": r}));
                match ctx {
                    Some(c) => Event::with_context(ts, &name, c).unwrap(),
                    None => Event::new(ts, &name, None).unwrap(),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// Cutting the file anywhere inside its last line (a torn write)
        /// recovers exactly the events before it.
        #[test]
        fn any_torn_tail_recovers_the_prefix(evs in proptest::collection::vec(event_strategy(), 1..5), cut in any::<proptest::sample::Index>()) {
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
            let opened = open_log(&path).unwrap();
            prop_assert_eq!(&opened.events[..], &evs[..evs.len() - 1]);
            prop_assert_eq!(opened.torn.map(|t| t.line), Some(evs.len()));
            prop_assert_eq!(fs::metadata(&path).unwrap().len(), last_start as u64);
        }
    }
}
