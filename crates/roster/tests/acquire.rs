//! RFC 28 `resource.acquire` against the real `roster serve`: every
//! response type of both variants, the error paths, disconnect and
//! re-acquire, mute, cancel (over the Flux protocol, where a cancel can
//! name its request), and the shrink → release → grow hand-over.

mod common;

use common::*;
use serde_json::{json, Value};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

/// An acquire stream read on a thread, so tests can wait with a timeout.
/// Dropping it closes the connection (a scheduler going away).
struct Acq {
    rx: Receiver<Result<Value, (i32, String)>>,
    _close: tokio::sync::oneshot::Sender<()>,
}

impl Acq {
    fn open(d: &Daemon, group: Option<&str>) -> Acq {
        let uri = rpc::uri::Uri::parse(&d.uri).expect("uri");
        let group = group.map(str::to_string);
        let (tx, rx) = channel();
        let (close, mut closed) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let c = client::Client::new(uri);
                let mut stream = match c.acquire(group.as_deref()).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err((e.errnum(), e.to_string())));
                        return;
                    }
                };
                loop {
                    tokio::select! {
                        item = stream.next() => {
                            let Some(item) = item else { return };
                            let item = item.map_err(|e| (e.errnum(), e.to_string()));
                            if tx.send(item).is_err() {
                                return;
                            }
                        }
                        _ = &mut closed => return,
                    }
                }
            });
        });
        Acq { rx, _close: close }
    }

    fn next(&self) -> Result<Value, (i32, String)> {
        self.rx
            .recv_timeout(Duration::from_secs(10))
            .expect("an acquire response within 10 s")
    }

    fn ok(&self) -> Value {
        self.next().expect("acquire response")
    }

    /// Nothing arrives for a while.
    fn quiet(&self) {
        match self.rx.recv_timeout(Duration::from_millis(300)) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("unexpected acquire response {other:?}"),
        }
    }
}

fn rlite_ranks(r: &Value) -> Vec<String> {
    r["execution"]["R_lite"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["rank"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn v1_responses_errors_disconnect_and_reacquire() {
    let s = Scratch::new("acq-v1");
    let cfg = fake_config(4, "exclude = \"0\"");
    let d = start(&s, &cfg, &["--monitor-force-up"]);
    let a = Acq::open(&d, None);
    let first = a.ok();
    // t2313: exclude="0" → R re-encoded without 0, up without 0
    assert_eq!(rlite_ranks(&first["resources"]), ["1-3"]);
    assert_eq!(first["up"], "1-3");
    // one v1 acquire at a time: EBUSY
    let b = Acq::open(&d, None);
    assert_eq!(b.next().unwrap_err().0, 16);
    // drain → down; undrain → up; nothing for a change that changes nothing
    d.ok(&["drain", "2", "fan"]);
    assert_eq!(a.ok(), json!({"down": "2"}));
    d.client().monitor_force_down("2").unwrap();
    a.quiet();
    d.client().monitor_force_up("2").unwrap();
    a.quiet();
    d.ok(&["undrain", "2"]);
    assert_eq!(a.ok(), json!({"up": "2"}));
    // offline with a configured R: down, never shrink
    d.client().monitor_force_down("3").unwrap();
    assert_eq!(a.ok(), json!({"down": "3"}));
    d.client().monitor_force_up("3").unwrap();
    assert_eq!(a.ok(), json!({"up": "3"}));
    // expiration alone
    d.client().expiration_update(4321.0).unwrap();
    assert_eq!(a.ok(), json!({"expiration": 4321.0}));
    // reload while held: EBUSY
    let r = s.write(
        "r.json",
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3"}}],"nodelist":["fake[0-3]"],"starttime":0.0,"expiration":0.0}}"#,
    );
    let (_, err) = d.fails(&["reload", r.to_str().unwrap()]);
    assert!(err.contains("resources are busy"), "{err}");
    // disconnect frees the slot; a new acquire starts from the current state
    drop(a);
    drop(b);
    let mut reacquired = None;
    for _ in 0..100 {
        let c = Acq::open(&d, None);
        match c.next() {
            Ok(v) => {
                reacquired = Some((c, v));
                break;
            }
            Err((16, _)) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("{e:?}"),
        }
    }
    let (c, v) = reacquired.expect("re-acquire after disconnect");
    assert_eq!(v["up"], "1-3");
    assert_eq!(v["resources"]["execution"]["expiration"], json!(4321.0));
    // mute: drains go through, the scheduler hears nothing more
    d.client().acquire_mute().unwrap();
    d.ok(&["drain", "1", "muted"]);
    c.quiet();
}

#[test]
fn v1_shrink_mode_with_a_parent_r() {
    let s = Scratch::new("acq-shrink");
    let r = s.write(
        "parent.json",
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"nodelist":["p[0-3]"],"starttime":0.0,"expiration":0.0}}"#,
    );
    let d = start(
        &s,
        "[resource]\nnoverify = true\n",
        &["--monitor-force-up", "--parent-R", r.to_str().unwrap()],
    );
    assert_eq!(d.client().get().unwrap()["method"], "job-info");
    let a = Acq::open(&d, None);
    assert_eq!(a.ok()["up"], "0-3");
    d.client().monitor_force_down("3").unwrap();
    assert_eq!(a.ok(), json!({"down": "3", "shrink": "3"}));
    // a lost target never comes back in this acquire
    d.client().monitor_force_up("3").unwrap();
    a.quiet();
}

#[test]
fn shutdown_ends_acquires_with_ecanceled() {
    let s = Scratch::new("acq-shutdown");
    let mut d = start(&s, &fake_config(2, ""), &[]);
    let a = Acq::open(&d, None);
    a.ok();
    let g = Acq::open(&d, Some("default"));
    // default is held by the v1 acquire
    assert_eq!(g.next().unwrap_err().0, 16);
    assert!(d.stop().success());
    let (errnum, text) = a.next().unwrap_err();
    assert_eq!(errnum, 125);
    assert!(text.contains("the resource module was unloaded"), "{text}");
}

#[test]
fn groups_every_response_type_and_error() {
    let s = Scratch::new("acq-groups");
    let d = start(
        &s,
        &fake_config(
            6,
            "[resource.groups]\nlogin = \"fake[0-1]\"\ndebug = \"5\"\n",
        ),
        &[],
    );
    // unknown group
    let x = Acq::open(&d, Some("nope"));
    let (errnum, text) = x.next().unwrap_err();
    assert_eq!(errnum, 2);
    assert!(text.contains("nope"), "{text}");
    let login = Acq::open(&d, Some("login"));
    let g = login.ok();
    assert_eq!(g["type"], "grow");
    assert_eq!(rlite_ranks(&g["resources"]), ["0-1"]);
    assert_eq!(
        (g["online"].as_str(), g["offline"].as_str()),
        (Some(""), Some("0-1"))
    );
    // one holder per group
    assert_eq!(Acq::open(&d, Some("login")).next().unwrap_err().0, 16);
    let dflt = Acq::open(&d, Some("default"));
    let g = dflt.ok();
    assert_eq!(rlite_ranks(&g["resources"]), ["2-4"]);
    // online / offline (offline covers drained)
    d.client().monitor_force_up("0-5").unwrap();
    assert_eq!(login.ok(), json!({"type": "online", "targets": "0-1"}));
    assert_eq!(dflt.ok(), json!({"type": "online", "targets": "2-4"}));
    d.ok(&["drain", "3", "psu"]);
    assert_eq!(dflt.ok(), json!({"type": "offline", "targets": "3"}));
    login.quiet();
    // release validation
    let err = d.client().release("debug", "5").unwrap_err();
    assert_eq!(err.errnum(), 22);
    assert!(err.to_string().contains("'debug' is not acquired"), "{err}");
    let err = d.client().release("login", "1").unwrap_err();
    assert_eq!(err.errnum(), 22);
    assert!(err.to_string().contains("1"), "{err}");
    // group-set: login gives 1 to default → shrink, release, grow
    d.client().group_set("login", "0").unwrap();
    assert_eq!(login.ok(), json!({"type": "shrink", "targets": "1"}));
    dflt.quiet();
    let err = d.client().release("login", "0-1").unwrap_err();
    assert!(err.to_string().contains('0'), "{err}");
    d.client().release("login", "1").unwrap();
    let g = dflt.ok();
    assert_eq!(g["type"], "grow");
    assert_eq!(rlite_ranks(&g["resources"]), ["1"]);
    assert_eq!(g["online"], "1");
    // the default group is what no other group holds: it cannot be set
    let err = d
        .rpc(
            "resource.group-set",
            json!({"group": "default", "targets": "0"}),
        )
        .unwrap_err();
    assert_eq!(err.errnum(), 22, "default cannot be set: {err}");
    // reload with more nodes grows the default holder
    let r = s.write(
        "r8.json",
        r#"{"version":1,"execution":{"R_lite":[{"rank":"0-7","children":{"core":"0-3"}}],"nodelist":["fake[0-7]"],"starttime":0.0,"expiration":0.0}}"#,
    );
    d.ok(&["reload", "-f", r.to_str().unwrap()]);
    let g = dflt.ok();
    assert_eq!(g["type"], "grow");
    assert_eq!(rlite_ranks(&g["resources"]), ["6-7"]);
    assert_eq!(g["offline"], "6-7");
    // disconnect of the login holder, then re-acquire: the current members
    drop(login);
    let mut again = None;
    for _ in 0..100 {
        let l = Acq::open(&d, Some("login"));
        match l.next() {
            Ok(v) => {
                again = Some(v);
                break;
            }
            Err((16, _)) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("{e:?}"),
        }
    }
    let v = again.expect("re-acquire login");
    assert_eq!(rlite_ranks(&v["resources"]), ["0"]);
}

#[test]
fn acquire_cancel_over_the_flux_protocol() {
    let s = Scratch::new("acq-flux");
    let (_d, mut c) = start_flux(&s, &fake_config(2, ""));
    flux_wire::request_flags(&mut c, "resource.acquire", Some("{}"), 5, 0x40);
    let (frames, errnum, tag) = flux_wire::response(&mut c);
    assert_eq!((errnum, tag), (0, 5));
    let v: Value = serde_json::from_slice(frames[2].strip_suffix(&[0]).unwrap()).unwrap();
    assert_eq!(v["up"], "");
    // as flux's Python bindings cancel: NORESPONSE, matchtag 0
    flux_wire::request_flags(
        &mut c,
        "resource.acquire-cancel",
        Some(r#"{"matchtag":5}"#),
        0,
        0x04,
    );
    let (_, errnum, tag) = flux_wire::response(&mut c);
    assert_eq!((errnum, tag), (61, 5), "the acquire ends with ENODATA");
    // and the slot is free again
    flux_wire::request_flags(&mut c, "resource.acquire", Some("{}"), 7, 0x40);
    let (_, errnum, tag) = flux_wire::response(&mut c);
    assert_eq!((errnum, tag), (0, 7));
}
