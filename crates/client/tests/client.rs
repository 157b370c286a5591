//! The client against the real listeners and a fake service thread.

use client::{ClientError, ReplyStream};
use rpc::errno::{EBUSY, EINVAL, EPERM, EPROTO};
use rpc::uri::Uri;
use rpc::{ConnId, RpcError};
use serde_json::{json, Value};
use std::sync::mpsc as smpsc;
use std::time::Duration;
use tokio::sync::watch;
use transport::{Incoming, ListenOptions, Listeners};

const TOKEN: &str = "tok-123";

struct Seen {
    topic: String,
    payload: Value,
    streaming: bool,
    conn: ConnId,
}

struct Service {
    unix: Uri,
    tcp: Uri,
    seen: smpsc::Receiver<Seen>,
    disconnects: smpsc::Receiver<ConnId>,
    stop: watch::Sender<bool>,
    _rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Service {
    fn seen(&self) -> Seen {
        self.seen
            .recv_timeout(Duration::from_secs(10))
            .expect("the service saw a request")
    }

    fn disconnect(&self) -> ConnId {
        self.disconnects
            .recv_timeout(Duration::from_secs(10))
            .expect("the service saw a disconnect")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Listeners on their own runtime thread, and a service that answers:
/// `test.stream {count, errnum?}` with `{"n": i}` lines then the error
/// (ENODATA by default); `test.cut` with one line then nothing;
/// `test.error` EINVAL "bad targets"; `test.bare` EBUSY without text;
/// `resource.journal` with the sentinel then holds the stream; anything
/// else echoes its payload.
fn service() -> Service {
    let dir = tempfile::tempdir().unwrap();
    let uris = [
        Uri::Unix(dir.path().join("roster.sock")),
        Uri::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        },
    ];
    let opts = ListenOptions {
        token: Some(TOKEN.into()),
        ..ListenOptions::default()
    };
    let listeners = Listeners::bind(&uris, &opts).unwrap();
    let addrs = listeners.addresses();
    let (tx, rx) = smpsc::channel::<Incoming>();
    let (seen_tx, seen) = smpsc::channel();
    let (disc_tx, disconnects) = smpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok(m) = rx.recv() {
            let (req, replies) = match m {
                Incoming::Disconnect(c) => {
                    held.retain(|(conn, _)| *conn != c);
                    let _ = disc_tx.send(c);
                    continue;
                }
                Incoming::Request { req, replies, .. } => (req, replies),
                Incoming::SessionLine { .. } | Incoming::Wake => continue,
            };
            let _ = seen_tx.send(Seen {
                topic: req.topic.clone(),
                payload: req.payload.clone(),
                streaming: req.streaming,
                conn: req.conn,
            });
            match req.topic.as_str() {
                "test.stream" => {
                    for i in 0..req.payload["count"].as_u64().unwrap_or(0) {
                        let _ = replies.send(Ok(json!({ "n": i }).into()));
                    }
                    let errnum = req.payload["errnum"].as_i64().unwrap_or(61) as i32;
                    let e = match req.payload["errstr"].as_str() {
                        Some(s) => RpcError::new(errnum, s),
                        None => RpcError::bare(errnum),
                    };
                    let _ = replies.send(Err(e));
                }
                "test.cut" => {
                    let _ = replies.send(Ok(json!("one").into()));
                }
                "test.error" => {
                    let _ = replies.send(Err(RpcError::new(EINVAL, "bad targets")));
                }
                "test.bare" => {
                    let _ = replies.send(Err(RpcError::bare(EBUSY)));
                }
                "resource.journal" => {
                    let _ = replies.send(Ok(json!({"events": []}).into()));
                    held.push((req.conn, replies));
                }
                _ => {
                    let _ = replies.send(Ok(req.payload.into()));
                }
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    server_rt.spawn(listeners.run(tx, shutdown));
    let mut it = addrs.into_iter();
    Service {
        unix: it.next().unwrap(),
        tcp: it.next().unwrap(),
        seen,
        disconnects,
        stop,
        _rt: server_rt,
        _dir: dir,
    }
}

async fn collect(mut s: ReplyStream) -> (Vec<Value>, Option<ClientError>) {
    let mut items = Vec::new();
    let mut err = None;
    while let Some(r) = s.next().await {
        match r {
            Ok(v) => items.push(v),
            Err(e) => {
                assert!(err.is_none(), "only one error");
                err = Some(e);
            }
        }
    }
    // Stays ended.
    assert!(s.next().await.is_none());
    (items, err)
}

/// A current-thread runtime for a test's async part.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn async_client_over_unix() {
    let svc = service();
    let c = client::Client::new(svc.unix.clone());
    runtime().block_on(async {
        // Payloads both ways, including none.
        let v = c.rpc("test.echo", json!({"a": [1, "x"]})).await.unwrap();
        assert_eq!(v, json!({"a": [1, "x"]}));
        let s = svc.seen();
        assert_eq!((s.topic.as_str(), s.streaming), ("test.echo", false));
        assert_eq!(c.rpc("test.echo", Value::Null).await.unwrap(), Value::Null);
        assert_eq!(svc.seen().payload, Value::Null);
        assert_eq!(c.rpc("test.echo", json!([])).await.unwrap(), json!([]));
        svc.seen();

        // Errors.
        let e = c.rpc("test.error", Value::Null).await.unwrap_err();
        assert_eq!(e.errnum(), EINVAL);
        assert_eq!(e.to_string(), "bad targets");
        assert!(
            matches!(&e, client::ClientError::Rpc(r) if *r == RpcError::new(EINVAL, "bad targets"))
        );
        svc.seen();
        let e = c.rpc("test.bare", Value::Null).await.unwrap_err();
        assert_eq!(e.errnum(), EBUSY);
        assert_eq!(e.to_string(), "Device or resource busy");
        svc.seen();
        // Rejected by the listener itself.
        let e = c.rpc("bad topic", Value::Null).await.unwrap_err();
        assert_eq!(e.errnum(), EPROTO);
        assert_eq!(
            e.to_string(),
            "invalid topic 'bad topic': expected letters, digits and '.-_'"
        );

        // Streams.
        let s = c.stream("test.stream", json!({"count": 3})).await.unwrap();
        let (items, err) = collect(s).await;
        assert_eq!(
            items,
            vec![json!({"n": 0}), json!({"n": 1}), json!({"n": 2})]
        );
        assert!(err.is_none());
        let seen = svc.seen();
        assert!(seen.streaming);

        let s = c
            .stream(
                "test.stream",
                json!({"count": 1, "errnum": EPROTO, "errstr": "no way"}),
            )
            .await
            .unwrap();
        let (items, err) = collect(s).await;
        assert_eq!(items, vec![json!({"n": 0})]);
        let err = err.unwrap();
        assert_eq!(err.errnum(), EPROTO);
        assert_eq!(err.to_string(), "no way");

        // Many lines, arriving in large frames.
        let s = c
            .stream("test.stream", json!({"count": 20000}))
            .await
            .unwrap();
        let (items, err) = collect(s).await;
        assert!(err.is_none());
        assert_eq!(items.len(), 20000);
        assert_eq!(items[19999], json!({"n": 19999}));
        svc.seen();

        let s = c.stream("test.stream", json!({"count": 0})).await.unwrap();
        assert_eq!(collect(s).await.0, Vec::<Value>::new());

        // A stream that stops without its ending error.
        let s = c.stream("test.cut", Value::Null).await.unwrap();
        let (items, err) = collect(s).await;
        assert_eq!(items, vec![json!("one")]);
        assert!(matches!(err, Some(ClientError::Lost(_))), "{err:?}");
    });
}

#[test]
fn dropping_a_stream_cancels_it() {
    let svc = service();
    let c = client::Client::new(svc.unix.clone());
    runtime().block_on(async {
        let mut j = c.journal().await.unwrap();
        assert_eq!(j.next().await.unwrap().unwrap(), json!({"events": []}));
        let seen = svc.seen();
        assert_eq!(seen.topic, "resource.journal");
        assert_eq!(seen.payload, json!({}));
        assert!(seen.streaming);
        // Nothing more for now: the stream is open.
        let pending = tokio::time::timeout(Duration::from_millis(200), j.next()).await;
        assert!(pending.is_err());
        drop(j);
        assert_eq!(svc.disconnect(), seen.conn);
    });
}

#[test]
fn connect_errors_and_tokens() {
    let svc = service();
    runtime().block_on(async {
        let missing = Uri::Unix("/nonexistent/roster.sock".into());
        let e = client::Client::new(missing).status().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot connect to unix:///nonexistent/roster.sock: No such file or directory"
        );
        assert_eq!(e.errnum(), 2);
        let e = client::Client::new(Uri::Flux("/x".into()))
            .status()
            .await
            .unwrap_err();
        assert!(
            e.to_string().starts_with("cannot connect to flux:///x: "),
            "{e}"
        );

        // TCP: no token, wrong token, right token.
        let e = client::Client::new(svc.tcp.clone())
            .rpc("test.echo", json!(1))
            .await
            .unwrap_err();
        assert_eq!(e.errnum(), EPERM);
        assert!(e.to_string().starts_with("authentication required"), "{e}");
        let e = client::Client::new(svc.tcp.clone())
            .with_token("nope".into())
            .journal()
            .await
            .unwrap_err();
        assert_eq!(e.errnum(), EPERM);
        let c = client::Client::new(svc.tcp.clone()).with_token(TOKEN.into());
        assert_eq!(c.rpc("test.echo", json!(1)).await.unwrap(), json!(1));
        let s = c.stream("test.stream", json!({"count": 2})).await.unwrap();
        assert_eq!(collect(s).await.0.len(), 2);
    });
}

#[test]
fn blocking_client_and_typed_helpers() {
    let svc = service();
    let dir = tempfile::tempdir().unwrap();
    let tok = dir.path().join("token");
    std::fs::write(&tok, format!("{TOKEN}\n")).unwrap();
    let c = client::blocking::Client::from_env(Some(&svc.tcp.to_string()), Some(&tok)).unwrap();

    // Each helper: topic, payload; the fake echoes payloads back.
    assert_eq!(c.status().unwrap(), Value::Null);
    let s = svc.seen();
    assert_eq!(
        (s.topic.as_str(), &s.payload),
        ("resource.status", &Value::Null)
    );
    c.sched_status().unwrap();
    assert_eq!(svc.seen().topic, "resource.sched-status");
    c.drain("0-1", Some("broken fan"), Some("update")).unwrap();
    let s = svc.seen();
    assert_eq!(s.topic, "resource.drain");
    assert_eq!(
        s.payload.to_string(),
        r#"{"targets":"0-1","mode":"update","reason":"broken fan"}"#
    );
    c.undrain("fake0", None, None).unwrap();
    let s = svc.seen();
    assert_eq!(s.topic, "resource.undrain");
    assert_eq!(s.payload, json!({"targets": "fake0"}));
    c.reload("/tmp/R.json", false, true).unwrap();
    let s = svc.seen();
    assert_eq!(s.topic, "resource.reload");
    assert_eq!(
        s.payload,
        json!({"path": "/tmp/R.json", "xml": false, "force": true})
    );
    c.expiration_update(1234.0).unwrap();
    let s = svc.seen();
    assert_eq!(s.topic, "resource.expiration-update");
    assert_eq!(s.payload.to_string(), r#"{"expiration":1234.0}"#);
    c.get().unwrap();
    assert_eq!(svc.seen().topic, "resource.get");
    c.release("default", "1-3").unwrap();
    let s = svc.seen();
    assert_eq!(s.topic, "resource.release");
    assert_eq!(s.payload, json!({"group": "default", "targets": "1-3"}));
    c.monitor_force_up("2").unwrap();
    let s = svc.seen();
    assert_eq!(
        (s.topic.as_str(), &s.payload),
        ("resource.monitor-force-up", &json!({"ranks": "2"}))
    );
    c.monitor_force_down("3").unwrap();
    let s = svc.seen();
    assert_eq!(
        (s.topic.as_str(), &s.payload),
        ("resource.monitor-force-down", &json!({"ranks": "3"}))
    );

    // Streams as iterators.
    let items: Vec<_> = c
        .stream("test.stream", json!({"count": 2}))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(items, vec![json!({"n": 0}), json!({"n": 1})]);
    svc.seen();
    let mut it = c
        .stream("test.stream", json!({"count": 1, "errnum": EINVAL}))
        .unwrap();
    assert_eq!(it.next().unwrap().unwrap(), json!({"n": 0}));
    let e = it.next().unwrap().unwrap_err();
    assert_eq!(e.to_string(), "Invalid argument");
    assert!(it.next().is_none());
    svc.seen();

    // acquire's payloads (the fake echoes the payload as one line).
    let mut a = c.acquire(None).unwrap();
    assert_eq!(a.next().unwrap().unwrap(), json!({}));
    let s = svc.seen();
    assert_eq!(
        (s.topic.as_str(), &s.payload, s.streaming),
        ("resource.acquire", &json!({}), true)
    );
    drop(a);
    let _ = c.acquire(Some("batch")).unwrap().next();
    assert_eq!(svc.seen().payload, json!({"group": "batch"}));

    // The journal, cancelled by dropping it.
    let mut j = c.journal().unwrap();
    assert_eq!(j.next().unwrap().unwrap(), json!({"events": []}));
    let conn = svc.seen().conn;
    drop(j);
    // Earlier requests' disconnects come first; wait for this one.
    let mut found = false;
    for _ in 0..100 {
        if svc.disconnect() == conn {
            found = true;
            break;
        }
    }
    assert!(found);
}

#[test]
fn from_env_defaults() {
    // Explicit URI wins; a bad one is a Uri error.
    let c = client::Client::from_env(Some("unix:///a/b.sock"), None).unwrap();
    assert_eq!(c.uri(), &Uri::Unix("/a/b.sock".into()));
    assert!(matches!(
        client::Client::from_env(Some("tcp://nohost"), None),
        Err(ClientError::Uri(_))
    ));
}

#[test]
fn one_warm_connection_for_many_calls() {
    let svc = service();
    let rt = runtime();
    for uri in [svc.unix.clone(), svc.tcp.clone()] {
        let c = client::Client::new(uri).with_token(TOKEN.into());
        rt.block_on(async {
            let mut conn = c.connect().await.unwrap();
            let mut conns = Vec::new();
            for i in 0..5 {
                let v = conn.rpc("test.echo", json!({ "i": i })).await.unwrap();
                assert_eq!(v, json!({ "i": i }));
                conns.push(svc.seen().conn);
            }
            // The errors of the service come back as such, and the
            // connection stays usable.
            let e = conn.rpc("test.error", Value::Null).await.unwrap_err();
            assert_eq!(e.to_string(), "bad targets");
            assert_eq!(conn.rpc("test.echo", json!(7)).await.unwrap(), json!(7));
            // Every request is its own RPC connection id for the service
            // (as before), over one socket.
            conns.dedup();
            assert_eq!(conns.len(), 5);
        });
    }
}

#[test]
fn tls_files_are_checked() {
    let e = client::TlsFiles::default().config().unwrap_err();
    assert!(
        e.to_string().contains("give --ca FILE or set ROSTER_CA"),
        "{e}"
    );
    let e = client::TlsFiles {
        ca: Some("/nonexistent/ca.pem".into()),
        cert: Some("/nonexistent/c.pem".into()),
        key: None,
    }
    .config()
    .unwrap_err();
    assert!(e.to_string().contains("needs its key too"), "{e}");
    let e = client::TlsFiles {
        ca: Some("/nonexistent/ca.pem".into()),
        ..Default::default()
    }
    .config()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot read CA certificate /nonexistent/ca.pem: No such file or directory"
    );
}
