//! The acquire API end to end: the real listeners in front of the real
//! service core (run the way `roster serve` runs it, minus storage), and
//! [`client::Acquisition`] following the responses.

use client::{AcquireResponse, Client};
use idset::IdSet;
use roster_core::{Init, Input, Inventory, Method, Output, Service, Settings};
use rpc::uri::Uri;
use rpc::ReplyTo;
use std::collections::HashMap;
use std::sync::mpsc as smpsc;
use tokio::sync::watch;
use transport::{Incoming, ListenOptions, Listeners};

const R4: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3"}}],"nodelist":["fake[0-3]"],"starttime":0.0,"expiration":0.0}}"#;

struct Daemon {
    uri: Uri,
    stop: watch::Sender<bool>,
    _rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn ids(s: &str) -> IdSet {
    IdSet::parse(s).unwrap()
}

/// A service with groups `login = fake0`, every target online.
fn daemon() -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let uris = [Uri::Unix(dir.path().join("roster.sock"))];
    let listeners = Listeners::bind(&uris, &ListenOptions::default()).unwrap();
    let uri = listeners.addresses().remove(0);
    let (tx, rx) = smpsc::channel::<Incoming>();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut svc = Service::new(
            Init {
                now: 1.0,
                settings: Settings {
                    monitor_force_up: true,
                    groups: vec![("login".into(), "fake0".into())],
                    ..Default::default()
                },
                inventory: Some(Inventory::from_json_text(R4, Method::Configuration).unwrap()),
                ..Default::default()
            },
            &mut out,
        )
        .unwrap();
        let mut routes: HashMap<ReplyTo, transport::ReplySender> = HashMap::new();
        let mut now = 2.0;
        while let Ok(m) = rx.recv() {
            now += 1.0;
            let mut out = Vec::new();
            match m {
                Incoming::Request { req, replies, .. } => {
                    routes.insert(req.reply_to(), replies);
                    svc.handle(now, Input::Request(req), &mut out);
                }
                Incoming::Disconnect(c) => {
                    routes.retain(|to, _| to.conn != c);
                    svc.handle(now, Input::Disconnect(c), &mut out);
                }
                Incoming::SessionLine { conn, payload, .. } => {
                    svc.handle(now, Input::SessionLine { conn, payload }, &mut out);
                }
                Incoming::Wake => {}
            }
            // Persist outputs would be made durable here; none matter.
            for o in out {
                if let Output::Reply { to, reply } = o {
                    if let Some(tx) = routes.get(&to) {
                        let _ = tx.send(reply);
                    }
                }
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.spawn(listeners.run(tx, shutdown));
    Daemon {
        uri,
        stop,
        _rt: rt,
        _dir: dir,
    }
}

#[test]
fn scheduler_follows_groups_and_v1_over_the_wire() {
    let d = daemon();
    let c = Client::new(d.uri.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // v1 holds default
        let mut v1 = c.acquisition(None).await.unwrap();
        let first = v1.next().await.unwrap().unwrap();
        assert!(matches!(first, AcquireResponse::Initial { .. }));
        assert_eq!(
            (v1.view().all(), v1.view().up()),
            (&ids("1-3"), &ids("1-3"))
        );
        // a group scheduler for login
        let mut login = c.acquisition(Some("login")).await.unwrap();
        login.next().await.unwrap().unwrap();
        assert_eq!(login.view().all(), &ids("0"));
        // default is busy while v1 holds it
        let mut busy = c.acquisition(Some("default")).await.unwrap();
        let e = busy.next().await.unwrap().unwrap_err();
        assert_eq!(e.errnum(), rpc::errno::EBUSY);

        c.drain("1", Some("test"), None).await.unwrap();
        v1.next().await.unwrap().unwrap();
        assert_eq!(v1.view().down(), ids("1"));

        // login takes fake2 from default: v1 sees shrink at once
        c.group_set("login", "fake[0,2]").await.unwrap();
        let r = v1.next().await.unwrap().unwrap();
        assert_eq!(
            r,
            AcquireResponse::Update {
                up: ids(""),
                down: ids("2"),
                shrink: ids("2")
            }
        );
        login.next().await.unwrap().unwrap();
        assert_eq!(login.view().all(), &ids("0,2"));

        // and gives it back: the login scheduler must release it
        c.group_set("login", "0").await.unwrap();
        assert_eq!(
            login.next().await.unwrap().unwrap(),
            AcquireResponse::Shrink(ids("2"))
        );
        assert_eq!(login.view().pending_shrink(), &ids("2"));
        assert!(login.release(&ids("3")).await.is_err());
        login.release(&ids("2")).await.unwrap();
        assert!(login.view().pending_shrink().is_empty());

        // dropping the v1 stream frees default for a group scheduler,
        // which gets the target parked while v1 held default
        drop(v1);
        let mut def = loop {
            let mut s = c.acquisition(Some("default")).await.unwrap();
            match s.next().await.unwrap() {
                Ok(_) => break s,
                // the disconnect may not have reached the service yet
                Err(e) if e.errnum() == rpc::errno::EBUSY => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(def.view().all(), &ids("1-3"));
        assert_eq!(def.view().down(), ids("1"));
        c.undrain("1", None, None).await.unwrap();
        assert_eq!(
            def.next().await.unwrap().unwrap(),
            AcquireResponse::Online(ids("1"))
        );
    });
}

#[test]
fn blocking_acquisition() {
    let d = daemon();
    let c = client::blocking::Client::new(d.uri.clone());
    let mut acq = c.acquisition(Some("default")).unwrap();
    acq.next().unwrap().unwrap();
    assert_eq!(acq.view().all(), &ids("1-3"));
    c.group_set("login", "0-1").unwrap();
    assert_eq!(
        acq.next().unwrap().unwrap(),
        AcquireResponse::Shrink(ids("1"))
    );
    acq.release(&ids("1")).unwrap();
    assert!(acq.view().pending_shrink().is_empty());
    assert_eq!(acq.view().all(), &ids("2-3"));
}
