//! The simulated disk's model, and the store's crash windows on it.

use std::path::Path;
use std::sync::Arc;

use eventlog::Event;
use serde_json::json;
use store::sim::{Fault, Rng, SimDisk};
use store::{Fs, StateDir};

fn ev(i: usize, name: &str) -> Event {
    Event::with_context(
        1_700_000_000.0 + i as f64,
        name,
        json!({"idset": i.to_string(), "nodelist": format!("n{i}")}),
    )
    .unwrap()
}

fn open(disk: &SimDisk, dir: &str) -> (StateDir, store::Loaded) {
    match StateDir::open_on(Arc::new(disk.clone()), Path::new(dir)) {
        Ok(x) => x,
        Err(e) => panic!("open: {e}"),
    }
}

#[test]
fn rename_without_directory_fsync_is_lost_at_power_loss() {
    let disk = SimDisk::new();
    let p = Path::new("/sim/a");
    let tmp = Path::new("/sim/.a.tmp");
    let mut f = disk.create_new(tmp).unwrap();
    f.write_all(b"new").unwrap();
    f.sync_all().unwrap();
    drop(f);
    disk.rename(tmp, p).unwrap();
    assert_eq!(disk.contents(p).unwrap(), b"new");
    disk.power_loss(&mut Rng::new(1));
    // The file's data was synced, its name was not.
    assert_eq!(disk.contents(p), None);
    assert_eq!(disk.contents(tmp), None);

    let mut f = disk.create_new(tmp).unwrap();
    f.write_all(b"new").unwrap();
    f.sync_all().unwrap();
    drop(f);
    disk.rename(tmp, p).unwrap();
    disk.sync_dir(Path::new("/sim")).unwrap();
    disk.power_loss(&mut Rng::new(1));
    assert_eq!(disk.contents(p).unwrap(), b"new");
}

/// A file holding `synced\n` and then `room`, synced; `unsynced\n`
/// written after `synced\n` (over the room) and not synced; a power loss
/// with `seed`: what the file holds.
fn unsynced_write_then_power_loss(seed: u64, room: &[u8]) -> Vec<u8> {
    let disk = SimDisk::new();
    let p = Path::new("/sim/log");
    let mut f = disk.open_write(p).unwrap();
    f.write_at(0, b"synced\n").unwrap();
    f.write_at(7, room).unwrap();
    f.sync_data().unwrap();
    disk.sync_dir(Path::new("/sim")).unwrap();
    f.write_at(7, b"unsynced\n").unwrap();
    disk.power_loss(&mut Rng::new(seed));
    disk.contents(p).unwrap()
}

#[test]
fn unsynced_appends_are_lost_torn_or_zeroed() {
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let c = unsynced_write_then_power_loss(seed, &[]);
        assert!(c.starts_with(b"synced\n"), "{c:?}");
        let tail = &c[7..];
        let kind = if tail.is_empty() {
            "lost"
        } else if tail == b"unsynced\n" {
            "whole"
        } else if tail.contains(&0) {
            "zeroed"
        } else {
            assert!(b"unsynced\n".starts_with(tail));
            "torn"
        };
        outcomes.insert(kind);
    }
    assert_eq!(
        outcomes.into_iter().collect::<Vec<_>>(),
        ["lost", "torn", "whole", "zeroed"]
    );
}

#[test]
fn unsynced_overwrites_are_lost_torn_or_partial_with_the_old_bytes() {
    // Preallocated zeros, then an unsynced write over them.
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let c = unsynced_write_then_power_loss(seed, &[0u8; 16]);
        // The size never changes; the old bytes are zeros.
        assert_eq!(c.len(), 23, "{c:?}");
        assert!(c.starts_with(b"synced\n"), "{c:?}");
        let (new, rest) = c[7..].split_at(9);
        assert!(rest.iter().all(|&b| b == 0), "{c:?}");
        let kind = if new == [0u8; 9] {
            "lost"
        } else if new == b"unsynced\n" {
            "whole"
        } else {
            // Each byte is either the new one or the old zero.
            assert!(
                new.iter()
                    .zip(b"unsynced\n")
                    .all(|(&got, &want)| got == want || got == 0),
                "{c:?}"
            );
            "partial"
        };
        outcomes.insert(kind);
    }
    assert_eq!(
        outcomes.into_iter().collect::<Vec<_>>(),
        ["lost", "partial", "whole"]
    );
}

#[test]
fn a_new_state_directory_survives_power_loss() {
    let disk = SimDisk::new();
    {
        let (mut sd, _) = open(&disk, "/sim/state/roster");
        sd.append(&[ev(1, "drain")]).unwrap();
    }
    disk.power_loss(&mut Rng::new(7));
    // Without the parent fsyncs, /sim/state and its files would be gone.
    let (_sd, loaded) = open(&disk, "/sim/state/roster");
    assert_eq!(loaded.events, vec![ev(1, "drain")]);
}

#[test]
fn injected_errors_name_the_file_and_acknowledge_nothing() {
    let disk = SimDisk::new();
    let (mut sd, _) = open(&disk, "/sim/s");
    sd.append(&[ev(1, "drain")]).unwrap();
    disk.fail_op(disk.ops() + 1, Fault::Enospc);
    let e = sd.append(&[ev(2, "drain"), ev(3, "drain")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/sim/s/resource.eventlog: write: No space left on device"
    );
    disk.fail_op(disk.ops() + 1, Fault::Eio);
    let e = sd.write_r("{}").unwrap_err().to_string();
    assert!(
        e.contains("create temporary file: Input/output error"),
        "{e}"
    );
    drop(sd);
    disk.power_loss(&mut Rng::new(3));
    let (_sd, loaded) = open(&disk, "/sim/s");
    assert_eq!(loaded.events, vec![ev(1, "drain")]);
    assert_eq!(loaded.r, None);
}

#[test]
fn replay_position_is_recorded_and_found() {
    let disk = SimDisk::new();
    let cp = json!({"timestamp": 9e9, "drain_state": {}});
    {
        let (mut sd, loaded) = open(&disk, "/sim/s");
        assert_eq!(loaded.replay_from, None);
        sd.append(&[ev(1, "drain"), ev(2, "drain")]).unwrap();
        sd.write_checkpoint(&cp).unwrap();
        // An event after the checkpoint, timestamped before it (a clock
        // step back): replay must still include it.
        sd.append(&[ev(3, "undrain")]).unwrap();
    }
    disk.power_loss(&mut Rng::new(1));
    let (_sd, loaded) = open(&disk, "/sim/s");
    assert_eq!(loaded.replay_from, Some(2));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn an_old_checkpoint_without_position_falls_back_with_a_warning() {
    let disk = SimDisk::new();
    {
        let (mut sd, _) = open(&disk, "/sim/s");
        sd.append(&[ev(1, "drain")]).unwrap();
    }
    disk.put(
        Path::new("/sim/s/checkpoint.resource"),
        b"{\"timestamp\":1.0,\"drain_state\":{}}\n",
    );
    let (_sd, loaded) = open(&disk, "/sim/s");
    assert_eq!(loaded.replay_from, None);
    assert_eq!(
        loaded.warnings,
        ["checkpoint.resource: no position in resource.eventlog (written by an older version): replaying the events not older than its timestamp"]
    );
}

/// History truncation rewrites the log and the checkpoint's position: a
/// power loss at every operation of it leaves a log and a checkpoint
/// whose position matches, and the events after the position intact.
#[test]
fn truncation_by_position_is_crash_safe_at_every_step() {
    let before: Vec<Event> = (0..6).map(|i| ev(i, "drain")).collect();
    let after: Vec<Event> = (6..9).map(|i| ev(i, "undrain")).collect();
    let cp = json!({"timestamp": 1.0, "drain_state": {}});
    let mut points = 0;
    for crash_at in 0..40u64 {
        for seed in 0..4 {
            let disk = SimDisk::new();
            {
                let (mut sd, _) = open(&disk, "/sim/s");
                sd.append(&before).unwrap();
                sd.write_checkpoint(&cp).unwrap();
                sd.append(&after).unwrap();
            }
            let (mut sd, loaded) = open(&disk, "/sim/s");
            assert_eq!(loaded.replay_from, Some(6));
            let start = disk.ops();
            disk.crash_after(crash_at);
            let cp_loaded = loaded.checkpoint.clone().unwrap();
            // Drop the even events before the position.
            let res = sd.truncate_before_checkpoint(loaded.events, &cp_loaded, |e| {
                e.get("idset")
                    .and_then(|v| v.as_str())
                    .and_then(|s| s.parse::<u32>().ok())
                    .is_some_and(|i| i % 2 == 0)
            });
            let finished = res.is_ok();
            let used = disk.ops() - start;
            drop(sd);
            disk.power_loss(&mut Rng::new(seed));
            let (_sd, l) = open(&disk, "/sim/s");
            let from = l.replay_from.expect("a matching position");
            assert_eq!(l.events[from..], after[..], "crash at {crash_at}");
            let kept: Vec<&Event> = l.events[..from].iter().collect();
            assert!(kept.len() == 6 || kept.len() == 3, "{kept:?}");
            assert!(kept.iter().all(|e| before.contains(e)));
            points += 1;
            if finished && crash_at > used {
                assert_eq!(from, 3);
            }
        }
    }
    assert!(points > 0);
}

/// The worst case for positions: the dropped events are the last ones
/// before the checkpoint and the events after it are byte-for-byte the
/// same, so the new log's first lines equal the old log's.  The whole-log
/// hashes recorded during the rewrite still tell the two logs apart.
#[test]
fn truncation_with_identical_lines_is_not_ambiguous() {
    let a = ev(0, "drain");
    let x = ev(1, "drain");
    let y = ev(2, "undrain");
    let cp = json!({"timestamp": 1.0, "drain_state": {}});
    for crash_at in 0..30u64 {
        let disk = SimDisk::new();
        {
            let (mut sd, _) = open(&disk, "/sim/s");
            sd.append(&[a.clone(), x.clone(), y.clone()]).unwrap();
            sd.write_checkpoint(&cp).unwrap();
            sd.append(&[x.clone(), y.clone()]).unwrap();
        }
        let (mut sd, loaded) = open(&disk, "/sim/s");
        assert_eq!(loaded.replay_from, Some(3));
        disk.crash_after(crash_at);
        let cp_loaded = loaded.checkpoint.clone().unwrap();
        let _ = sd.truncate_before_checkpoint(loaded.events, &cp_loaded, |e| *e != a);
        drop(sd);
        disk.power_loss(&mut Rng::new(crash_at));
        let (_sd, l) = open(&disk, "/sim/s");
        let from = l.replay_from.expect("a matching position");
        assert_eq!(
            l.events[from..],
            [x.clone(), y.clone()],
            "crash at {crash_at}"
        );
        assert_eq!(from, l.events.len() - 2);
        // Reopening again finds the same single position.
        drop(_sd);
        let (_sd, l2) = open(&disk, "/sim/s");
        assert_eq!(l2.replay_from, Some(from));
        let n = l2.checkpoint.unwrap()["log_position"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(n, 1);
    }
}
