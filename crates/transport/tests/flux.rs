#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! The Flux local-connector listener (`flux://`) against a stub service
//! thread, driven by an independent test client.
//!
//! The client below is written from the wire description in
//! `../shared/reference/flux-wire-clients.md` (and RFC 3), not from the
//! server's codec crate, so that a shared misunderstanding cannot make
//! both sides agree on something flux-core would reject:
//!
//! * connect, read **one byte**: 0 = accepted, else an errno;
//! * each message: u32 `0xffee0012` in host byte order, then a big-endian
//!   u32 length of what follows (preamble excluded);
//! * frames: length < 255 in one byte, else `0xFF` + big-endian u32;
//!   order: routes, empty delimiter (ROUTE flag), topic (TOPIC), payload
//!   (PAYLOAD, JSON text + NUL), then the 20-byte PROTO frame last:
//!   `8E 01 type flags userid rolemask aux1 aux2` (big-endian u32s);
//! * the client accepts a response only with ROUTE set and no routes, its
//!   matchtag, and a non-zero rolemask.

mod common;

use common::*;
use rpc::errno::{EINVAL, ENODATA, ENOSYS, EPERM};
use rpc::uri::Uri;
use rpc::{ConnId, Role, RpcError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc as smpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::watch;
use transport::{Incoming, ListenOptions, Listeners, TransportError};

// ---------------------------------------------------------------------------
// The independent client.

const F_TOPIC: u8 = 0x01;
const F_PAYLOAD: u8 = 0x02;
const F_NORESPONSE: u8 = 0x04;
const F_ROUTE: u8 = 0x08;
const F_STREAMING: u8 = 0x40;
const T_RESPONSE: u8 = 2;
const ANY: u32 = 0xffff_ffff;
const OWNER_LOCAL: u32 = 1 | 4;
const USER_LOCAL: u32 = 2 | 4;

/// A request as libflux sends it: ROUTE with an empty stack, userid
/// UNKNOWN, rolemask 0.
fn request_bytes(
    topic: &str,
    payload: Option<&str>,
    extra_flags: u8,
    nodeid: u32,
    matchtag: u32,
) -> Vec<u8> {
    let payload = payload.map(str::as_bytes);
    flux_request_bytes(topic, payload, extra_flags, nodeid, matchtag)
}

#[derive(Debug)]
struct Msg {
    typ: u8,
    flags: u8,
    userid: u32,
    rolemask: u32,
    aux1: u32,
    matchtag: u32,
    routes: Vec<Vec<u8>>,
    topic: Option<String>,
    payload: Option<Vec<u8>>,
}

impl Msg {
    fn errnum(&self) -> u32 {
        self.aux1
    }

    /// The payload as libflux's `get_string` sees it: must end in NUL.
    fn text(&self) -> Option<String> {
        let p = self.payload.as_ref()?;
        assert_eq!(p.last(), Some(&0), "payload without its NUL: {p:?}");
        Some(String::from_utf8(p[..p.len() - 1].to_vec()).unwrap())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text().expect("a payload")).unwrap()
    }

    /// What `dispatch_message` in libflux requires of a response.
    fn assert_acceptable(&self, matchtag: u32) {
        assert_eq!(self.typ, T_RESPONSE);
        assert_ne!(self.flags & F_ROUTE, 0, "ROUTE flag missing");
        assert!(self.routes.is_empty(), "routes on a response");
        assert_ne!(self.flags & F_TOPIC, 0, "TOPIC flag missing");
        assert_eq!(self.matchtag, matchtag);
        assert_ne!(self.rolemask, 0, "rolemask 0 is dropped by clients");
    }
}

fn parse_body(body: &[u8]) -> Msg {
    let mut frames = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let (len, hdr) = if body[i] < 255 {
            (body[i] as usize, 1)
        } else {
            (
                u32::from_be_bytes(body[i + 1..i + 5].try_into().unwrap()) as usize,
                5,
            )
        };
        frames.push(body[i + hdr..i + hdr + len].to_vec());
        i += hdr + len;
    }
    let proto = frames.pop().expect("a PROTO frame");
    assert_eq!(proto.len(), 20);
    assert_eq!(&proto[..2], &[0x8e, 1]);
    let be = |k: usize| u32::from_be_bytes(proto[k..k + 4].try_into().unwrap());
    let flags = proto[3];
    let mut it = frames.into_iter();
    let mut routes = Vec::new();
    if flags & F_ROUTE != 0 {
        loop {
            let f = it.next().expect("route delimiter");
            if f.is_empty() {
                break;
            }
            routes.push(f);
        }
    }
    let topic = (flags & F_TOPIC != 0).then(|| String::from_utf8(it.next().unwrap()).unwrap());
    let payload = (flags & F_PAYLOAD != 0).then(|| it.next().unwrap());
    assert!(it.next().is_none(), "extra frames");
    Msg {
        typ: proto[2],
        flags,
        userid: be(4),
        rolemask: be(8),
        aux1: be(12),
        matchtag: be(16),
        routes,
        topic,
        payload,
    }
}

struct Client {
    s: UnixStream,
}

impl Client {
    async fn connect(path: &Path) -> Client {
        // A non-blocking connect fails with EAGAIN while the listen
        // backlog is full; a blocking client would just wait.
        let mut tries = 0;
        let mut s = loop {
            match UnixStream::connect(path).await {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && tries < 500 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("connect: {e}"),
            }
        };
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
        assert_eq!(b[0], 0, "handshake refused with errno {}", b[0]);
        Client { s }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, topic: &str, payload: Option<&str>, flags: u8, matchtag: u32) {
        self.send_raw(&request_bytes(topic, payload, flags, ANY, matchtag))
            .await;
    }

    async fn recv(&mut self) -> Msg {
        tokio::time::timeout(Duration::from_secs(10), async {
            let mut pre = [0u8; 8];
            self.s.read_exact(&mut pre).await.unwrap();
            assert_eq!(u32::from_ne_bytes(pre[..4].try_into().unwrap()), MAGIC);
            let len = u32::from_be_bytes(pre[4..].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            self.s.read_exact(&mut body).await.unwrap();
            parse_body(&body)
        })
        .await
        .expect("a response in time")
    }

    async fn rpc(&mut self, topic: &str, payload: Option<&str>, matchtag: u32) -> Msg {
        self.send(topic, payload, 0, matchtag).await;
        let m = self.recv().await;
        m.assert_acceptable(matchtag);
        m
    }

    /// The server has closed the connection (EOF, or a reset).
    async fn assert_closed(&mut self) {
        let mut buf = [0u8; 64];
        let r = tokio::time::timeout(Duration::from_secs(10), self.s.read(&mut buf))
            .await
            .expect("server closes the connection");
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    }

    /// Nothing arrives for a while.
    async fn assert_silent(&mut self) {
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_millis(200), self.s.read(&mut buf)).await;
        assert!(r.is_err(), "unexpected data: {r:?}");
    }
}

// ---------------------------------------------------------------------------
// The stub service.

/// What the stub saw, for the tests to check.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Request {
        conn: ConnId,
        matchtag: u32,
        topic: String,
        role: Role,
        userid: Option<u32>,
        streaming: bool,
    },
    Disconnect(ConnId),
}

fn r4() -> Value {
    json!({"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3"}}],
        "starttime":0.0,"expiration":0.0,"nodelist":["fake[0-3]"]}})
}

/// Answers like a tiny resource service:
/// * `resource.status`: a status object over R4;
/// * `resource.journal` (streaming): two events and the `{"events":[]}`
///   sentinel, then waits for `resource.journal-cancel` → ENODATA;
/// * `resource.acquire` (streaming): one response, then waits (only a
///   disconnect ends it);
/// * `resource.drain`: EPERM for guests, no payload for the owner;
/// * `resource.role`: the role, userid, matchtag and streaming it saw;
/// * `resource.echo`: the payload; `resource.fail`: EINVAL with text;
/// * other `resource.*`: ENOSYS "unknown service method".
fn stub(rx: smpsc::Receiver<Incoming>, seen: smpsc::Sender<Seen>) {
    type Tx = transport::ReplySender;
    let mut streams: HashMap<(ConnId, u32), Tx> = HashMap::new();
    while let Ok(m) = rx.recv() {
        let (req, tx) = match m {
            Incoming::Disconnect(c) => {
                streams.retain(|(conn, _), _| *conn != c);
                let _ = seen.send(Seen::Disconnect(c));
                continue;
            }
            Incoming::Request { req, replies, .. } => (req, replies),
            Incoming::SessionLine { .. } | Incoming::Wake => continue,
        };
        let _ = seen.send(Seen::Request {
            conn: req.conn,
            matchtag: req.matchtag,
            topic: req.topic.clone(),
            role: req.role.clone(),
            userid: req.userid,
            streaming: req.streaming,
        });
        let reply = |r: Result<Value, RpcError>| {
            let _ = tx.send(r.map(rpc::Payload::from));
        };
        match req.topic.as_str() {
            "resource.status" => reply(Ok(json!({
                "R": r4(), "drain": {}, "online": "0-3", "offline": "", "exclude": "", "torpid": ""
            }))),
            "resource.journal" => {
                reply(Ok(
                    json!({"events":[{"timestamp":1.0,"name":"restart","context":{}}]}),
                ));
                reply(Ok(
                    json!({"events":[{"timestamp":2.0,"name":"online","context":{"idset":"0-3"}}]}),
                ));
                reply(Ok(json!({"events":[]})));
                streams.insert((req.conn, req.matchtag), tx);
            }
            "resource.journal-cancel" | "resource.acquire-cancel" => {
                let tag = req.payload["matchtag"].as_u64().unwrap_or(0) as u32;
                if let Some(t) = streams.remove(&(req.conn, tag)) {
                    let _ = t.send(Err(RpcError::bare(ENODATA)));
                }
            }
            "resource.acquire" => {
                reply(Ok(json!({"resources": r4(), "up": "0-3"})));
                streams.insert((req.conn, req.matchtag), tx);
            }
            "resource.drain" => match req.role {
                Role::Guest => reply(Err(RpcError::new(
                    EPERM,
                    "Request requires owner credentials",
                ))),
                _ => reply(Ok(Value::Null)),
            },
            "resource.role" => reply(Ok(json!({
                "role": format!("{:?}", req.role), "userid": req.userid,
                "matchtag": req.matchtag, "streaming": req.streaming
            }))),
            "resource.echo" => reply(Ok(req.payload)),
            "resource.fail" => reply(Err(RpcError::new(EINVAL, "bad things"))),
            _ => reply(Err(RpcError::new(ENOSYS, "unknown service method"))),
        }
    }
}

struct Server {
    path: PathBuf,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), TransportError>>,
    seen: smpsc::Receiver<Seen>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start_with(opts: ListenOptions) -> Server {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("run/local-0");
        let listeners = Listeners::bind(&[Uri::Flux(path.clone())], &opts).unwrap();
        assert_eq!(listeners.addresses(), vec![Uri::Flux(path.clone())]);
        let (tx, rx) = smpsc::channel();
        let (seen_tx, seen) = smpsc::channel();
        std::thread::spawn(move || stub(rx, seen_tx));
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(listeners.run(tx, shutdown));
        Server {
            path,
            stop,
            task,
            seen,
            _dir: dir,
        }
    }

    async fn start() -> Server {
        Server::start_with(ListenOptions::default()).await
    }

    /// A server and a client connected to it.
    async fn with_client() -> (Server, Client) {
        let server = Server::start().await;
        let c = server.client().await;
        (server, c)
    }

    /// `resource.status` on `c` (matchtag `tag`) succeeds, and the
    /// service saw it.
    async fn status_ok(&self, c: &mut Client, tag: u32) {
        assert_eq!(c.rpc("resource.status", None, tag).await.errnum(), 0);
        let _ = self.seen_request("resource.status");
    }

    /// The client `c` of connection `conn` hangs up (the service sees the
    /// disconnect); then stop.
    async fn hang_up(self, c: Client, conn: ConnId) {
        drop(c);
        assert_eq!(self.seen_disconnect(), conn);
        self.stop().await;
    }

    async fn client(&self) -> Client {
        Client::connect(&self.path).await
    }

    /// The next thing the service saw (blocking briefly).
    fn next_seen(&self) -> Seen {
        recv(&self.seen, "the service sees something")
    }

    /// The next request the service saw; returns its conn id.
    fn seen_request(&self, topic: &str) -> (ConnId, Seen) {
        match self.next_seen() {
            s @ Seen::Request { conn, .. } => {
                if let Seen::Request { topic: t, .. } = &s {
                    assert_eq!(t, topic);
                }
                (conn, s)
            }
            other => panic!("expected {topic}, saw {other:?}"),
        }
    }

    fn seen_disconnect(&self) -> ConnId {
        match self.next_seen() {
            Seen::Disconnect(c) => c,
            other => panic!("expected a disconnect, saw {other:?}"),
        }
    }

    fn seen_nothing(&self) {
        if let Ok(s) = self.seen.recv_timeout(Duration::from_millis(200)) {
            panic!("unexpected: {s:?}");
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("listeners stop")
            .unwrap()
            .unwrap();
        assert!(!self.path.exists(), "socket file removed");
    }
}

fn my_uid() -> u32 {
    transport::current_uid()
}

// ---------------------------------------------------------------------------
// Request / response.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_response_with_the_golden_status_request() {
    let (server, mut c) = Server::with_client().await;
    // `flux.Flux().rpc("resource.status")` byte for byte, from the notes.
    let mut golden = MAGIC.to_ne_bytes().to_vec();
    golden.extend_from_slice(&[0, 0, 0, 0x26, 0x00, 0x0f]);
    golden.extend_from_slice(b"resource.status");
    golden.extend_from_slice(&[
        0x14, 0x8e, 0x01, 0x01, 0x09, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        0, 0, 0, 1,
    ]);
    assert_eq!(golden, request_bytes("resource.status", None, 0, ANY, 1));
    c.send_raw(&golden).await;
    let m = c.recv().await;
    m.assert_acceptable(1);
    assert_eq!(m.flags, F_TOPIC | F_PAYLOAD | F_ROUTE);
    assert_eq!(m.topic.as_deref(), Some("resource.status"));
    assert_eq!(m.errnum(), 0);
    assert_eq!(m.rolemask, OWNER_LOCAL);
    assert_eq!(m.userid, my_uid());
    assert_eq!(m.json()["online"], "0-3");
    assert_eq!(m.json()["R"], r4());
    let (conn, seen) = server.seen_request("resource.status");
    assert_eq!(
        seen,
        Seen::Request {
            conn,
            matchtag: 1,
            topic: "resource.status".into(),
            role: Role::Owner,
            userid: Some(my_uid()),
            streaming: false,
        }
    );

    // Two requests back to back on the same connection (like `flux
    // resource status` with job-manager.stats-get), nodeid 0, and a
    // payload as Python writes it.
    c.send_raw(&request_bytes(
        "resource.echo",
        Some(r#"{"targets": "1", "reason": "foo"}"#),
        0,
        0,
        2,
    ))
    .await;
    c.send("job-manager.stats-get", None, 0, 3).await;
    let mut got = HashMap::new();
    for _ in 0..2 {
        let m = c.recv().await;
        got.insert(m.matchtag, m);
    }
    got[&2].assert_acceptable(2);
    assert_eq!(got[&2].json(), json!({"targets": "1", "reason": "foo"}));
    got[&3].assert_acceptable(3);
    assert_eq!(got[&3].errnum(), ENOSYS as u32);
    // Same connection id for every request of the connection.
    let (conn2, _) = server.seen_request("resource.echo");
    assert_eq!(conn2, conn);

    // A successful drain: errnum 0 and no payload at all.
    let m = c
        .rpc(
            "resource.drain",
            Some(r#"{"targets":"1","reason":"foo"}"#),
            1,
        )
        .await;
    assert_eq!(m.flags, F_TOPIC | F_ROUTE);
    assert!(m.payload.is_none());
    assert_eq!(m.errnum(), 0);
    let _ = server.seen_request("resource.drain");

    // A large payload (frame length >= 255) both ways.
    let big = format!(r#"{{"x":"{}"}}"#, "y".repeat(100_000));
    let m = c.rpc("resource.echo", Some(&big), 4).await;
    assert_eq!(m.text().unwrap(), big);
    let _ = server.seen_request("resource.echo");

    server.hang_up(c, conn).await;
}

// ---------------------------------------------------------------------------
// Streaming.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_journal_with_cancel() {
    let (server, mut c) = Server::with_client().await;
    c.send_raw(&request_bytes(
        "resource.journal",
        Some("{}"),
        F_STREAMING,
        0,
        1,
    ))
    .await;
    let mut events = Vec::new();
    loop {
        let m = c.recv().await;
        m.assert_acceptable(1);
        assert_eq!(m.flags, F_TOPIC | F_PAYLOAD | F_ROUTE | F_STREAMING);
        assert_eq!(m.topic.as_deref(), Some("resource.journal"));
        assert_eq!(m.errnum(), 0);
        let v = m.json();
        if v == json!({"events": []}) {
            break;
        }
        events.push(v["events"][0]["name"].as_str().unwrap().to_string());
    }
    assert_eq!(events, ["restart", "online"]);
    let (conn, seen) = server.seen_request("resource.journal");
    assert!(matches!(
        seen,
        Seen::Request {
            streaming: true,
            ..
        }
    ));

    // The cancel exactly as `flux resource eventlog` sends it: NORESPONSE,
    // matchtag 0, nodeid 0.
    c.send_raw(&request_bytes(
        "resource.journal-cancel",
        Some(r#"{"matchtag": 1}"#),
        F_NORESPONSE,
        0,
        0,
    ))
    .await;
    let (cconn, seen) = server.seen_request("resource.journal-cancel");
    assert_eq!(cconn, conn);
    assert!(matches!(seen, Seen::Request { matchtag: 0, .. }));
    // The stream ends with ENODATA, STREAMING set, no payload.
    let m = c.recv().await;
    m.assert_acceptable(1);
    assert_eq!(m.errnum(), ENODATA as u32);
    assert_eq!(m.flags, F_TOPIC | F_ROUTE | F_STREAMING);
    assert!(m.payload.is_none());
    // Nothing for the NORESPONSE cancel.
    c.assert_silent().await;

    // The matchtag is free again: reuse it, as libflux does.
    server.status_ok(&mut c, 1).await;

    server.hang_up(c, conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_then_disconnect() {
    let (server, mut c) = Server::with_client().await;
    c.send_raw(&request_bytes("resource.acquire", None, F_STREAMING, 0, 1))
        .await;
    let m = c.recv().await;
    m.assert_acceptable(1);
    assert_ne!(m.flags & F_STREAMING, 0);
    assert_eq!(m.json()["up"], "0-3");
    let (conn, _) = server.seen_request("resource.acquire");
    // Another client is unaffected by the first one leaving.
    let mut other = server.client().await;
    let _ = other.rpc("resource.status", None, 1).await;
    let (oconn, _) = server.seen_request("resource.status");
    assert_ne!(oconn, conn);
    // The scheduler goes away without a word: EOF is the disconnect.
    drop(c);
    assert_eq!(server.seen_disconnect(), conn);
    server.seen_nothing();
    server.status_ok(&mut other, 2).await;
    server.hang_up(other, oconn).await;
}

// ---------------------------------------------------------------------------
// Errors and local topics.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_replies_and_local_topics() {
    let (server, mut c) = Server::with_client().await;

    // Not a service of ours: the broker's ENOSYS text, never reaching it.
    let m = c.rpc("nosuch.topic", None, 1).await;
    assert_eq!(m.errnum(), ENOSYS as u32);
    assert_eq!(m.topic.as_deref(), Some("nosuch.topic"));
    assert_eq!(
        m.text().unwrap(),
        "No service matching nosuch.topic is registered"
    );
    let m = c.rpc("sched.resource-status", None, 2).await;
    assert_eq!(
        m.text().unwrap(),
        "No service matching sched.resource-status is registered"
    );
    server.seen_nothing();

    // Errors from the service keep errnum and text.
    let m = c.rpc("resource.fail", Some("{}"), 3).await;
    assert_eq!(m.errnum(), EINVAL as u32);
    assert_eq!(m.text().unwrap(), "bad things");
    let _ = server.seen_request("resource.fail");
    let m = c.rpc("resource.nosuch", None, 4).await;
    assert_eq!(m.errnum(), ENOSYS as u32);
    assert_eq!(m.text().unwrap(), "unknown service method");
    let _ = server.seen_request("resource.nosuch");

    // Bad payloads: EPROTO, answered here.
    let mut bad = request_bytes("resource.echo", Some("{"), 0, ANY, 5);
    let m = {
        c.send_raw(&bad).await;
        c.recv().await
    };
    m.assert_acceptable(5);
    assert_eq!(m.errnum(), 71);
    // A payload without its NUL: rewrite the frame by hand.
    bad = {
        let mut body = Vec::new();
        put_frame(&mut body, b"");
        put_frame(&mut body, b"resource.echo");
        put_frame(&mut body, b"{}");
        put_frame(
            &mut body,
            &[
                0x8e, 1, 1, 0x0b, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0,
                0, 6,
            ],
        );
        let mut m = MAGIC.to_ne_bytes().to_vec();
        m.extend_from_slice(&(body.len() as u32).to_be_bytes());
        m.extend_from_slice(&body);
        m
    };
    c.send_raw(&bad).await;
    let m = c.recv().await;
    m.assert_acceptable(6);
    assert_eq!(m.errnum(), 71);
    assert_eq!(m.text().unwrap(), "payload is not NUL-terminated");
    // Another rank: EHOSTUNREACH.
    c.send_raw(&request_bytes("resource.status", None, 0, 3, 7))
        .await;
    let m = c.recv().await;
    m.assert_acceptable(7);
    assert_eq!(m.errnum(), 113);
    server.seen_nothing();

    // config.get and attr.get are the service's (the catalogue says so):
    // forwarded like resource.* (what the service answers is tested in
    // the core and with the real daemon).
    let m = c.rpc("config.get", None, 8).await;
    assert_eq!(m.errnum(), ENOSYS as u32);
    let _ = server.seen_request("config.get");
    let attr = |name: &str| format!(r#"{{"name": "{name}"}}"#);
    let _ = c.rpc("attr.get", Some(&attr("rank")), 9).await;
    let _ = server.seen_request("attr.get");
    // local-uri is this listener's own address, answered here.
    let m = c.rpc("attr.get", Some(&attr("local-uri")), 10).await;
    assert_eq!(
        m.json(),
        json!({"value": format!("local://{}", server.path.display()), "flags": 0})
    );
    server.seen_nothing();

    // *.disconnect and other NORESPONSE requests get no response.
    c.send("resource.disconnect", None, F_NORESPONSE, 0).await;
    c.send("nosuch.thing", None, F_NORESPONSE, 0).await;
    c.assert_silent().await;
    server.seen_nothing();

    // Responses and events from a client are ignored.
    let mut resp = request_bytes("resource.status", None, 0, 0, 16);
    let proto_type = resp.len() - 20 + 2;
    resp[proto_type] = T_RESPONSE;
    c.send_raw(&resp).await;
    c.assert_silent().await;
    let m = c.rpc("resource.status", None, 17).await;
    assert_eq!(m.errnum(), 0);
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Roles.

/// Run by `guest_vs_owner` as another uid (see there); does nothing on
/// its own.
#[tokio::test]
#[ignore = "helper run by guest_vs_owner under another uid"]
async fn guest_client_helper() {
    let Ok(path) = std::env::var("ROSTER_FLUX_TEST_SOCKET") else {
        return;
    };
    let mut c = Client::connect(Path::new(&path)).await;
    let role = c.rpc("resource.role", None, 1).await;
    let drain = c
        .rpc("resource.drain", Some(r#"{"targets":"1","reason":"x"}"#), 2)
        .await;
    let status = c.rpc("resource.status", None, 3).await;
    println!(
        "RESULT {}",
        json!({
            "rolemask": role.rolemask, "userid": role.userid, "role": role.json(),
            "drain_errnum": drain.errnum(), "drain_text": drain.text(),
            "status_errnum": status.errnum(), "status_rolemask": status.rolemask,
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_vs_owner() {
    let me = my_uid();
    // The owner (and root) get OWNER|LOCAL and Role::Owner.
    let (server, mut c) = Server::with_client().await;
    let m = c.rpc("resource.role", None, 1).await;
    assert_eq!(m.rolemask, OWNER_LOCAL);
    assert_eq!(m.userid, me);
    assert_eq!(
        m.json(),
        json!({"role": "Owner", "userid": me, "matchtag": 1, "streaming": false})
    );
    let m = c.rpc("resource.drain", Some(r#"{"targets":"1"}"#), 2).await;
    assert_eq!(m.errnum(), 0);

    // Anyone else: USER|LOCAL and Role::Guest.
    let guest = if me == 0 {
        // Run the helper test above as uid 65534 (nobody).
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().unwrap();
        let path = server.path.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(exe)
                .args([
                    "--ignored",
                    "--exact",
                    "guest_client_helper",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("ROSTER_FLUX_TEST_SOCKET", &path)
                .uid(65534)
                .gid(65534)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
            .unwrap_or_else(|| {
                panic!(
                    "helper failed: {stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        Some((serde_json::from_str::<Value>(line).unwrap(), 65534u32))
    } else {
        None
    };
    match guest {
        Some((v, uid)) => {
            assert_eq!(v["rolemask"], USER_LOCAL);
            assert_eq!(v["userid"], uid);
            assert_eq!(
                v["role"],
                json!({"role": "Guest", "userid": uid, "matchtag": 1, "streaming": false})
            );
            assert_eq!(v["drain_errnum"], EPERM);
            assert_eq!(v["drain_text"], "Request requires owner credentials");
            assert_eq!(v["status_errnum"], 0);
            assert_eq!(v["status_rolemask"], USER_LOCAL);
        }
        None => {
            // Not root: become a guest by naming another owner.
            let s2 = Server::start_with(ListenOptions {
                owner_uid: me.wrapping_add(4242),
                ..ListenOptions::default()
            })
            .await;
            let mut g = s2.client().await;
            let m = g.rpc("resource.role", None, 1).await;
            assert_eq!(m.rolemask, USER_LOCAL);
            assert_eq!(m.json()["role"], "Guest");
            let m = g.rpc("resource.drain", Some(r#"{"targets":"1"}"#), 2).await;
            assert_eq!(m.errnum(), EPERM as u32);
            drop(g);
            s2.stop().await;
        }
    }
    drop(c);
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Robustness.

/// A minimal tracing subscriber keeping WARN and above as text, so tests
/// can check that a dropped client was logged.
mod logs {
    use std::fmt::Write;
    use std::sync::{Mutex, OnceLock};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    struct Capture;

    struct Text(String);

    impl Visit for Text {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, " {}={:?}", field.name(), value);
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            *m.level() <= Level::WARN
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            let mut t = Text(e.metadata().level().to_string());
            e.record(&mut t);
            LINES.lock().unwrap().push(t.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Start capturing (once per test process).
    pub fn capture() {
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| {
            let _ = tracing::subscriber::set_global_default(Capture);
        });
    }

    /// Captured lines containing `needle`.
    pub fn matching(needle: &str) -> usize {
        LINES
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }
}

/// A client that misbehaves is dropped; a well-behaved client with an open
/// stream on the same listener is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clients_are_dropped_alone() {
    logs::capture();
    let server = Server::start().await;
    let mut good = server.client().await;
    good.send("resource.journal", Some("{}"), F_STREAMING, 1)
        .await;
    for _ in 0..3 {
        good.recv().await;
    }
    let (gconn, _) = server.seen_request("resource.journal");

    let mut bads: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("wrong magic", {
            let mut b = request_bytes("resource.status", None, 0, ANY, 1);
            b[..4].copy_from_slice(&0x1200_eeffu32.to_ne_bytes());
            b
        }),
        ("oversized length", {
            let mut b = MAGIC.to_ne_bytes().to_vec();
            b.extend_from_slice(&u32::MAX.to_be_bytes());
            b.extend_from_slice(&[0u8; 64]);
            b
        }),
        ("bad PROTO", {
            let mut b = request_bytes("resource.status", None, 0, ANY, 1);
            let n = b.len();
            b[n - 20] = 0x8f;
            b
        }),
        ("frame past the end", {
            let mut b = request_bytes("resource.status", None, 0, ANY, 1);
            b[9] = 200; // the topic frame now claims 200 bytes
            b
        }),
    ];
    let expected_logs = [
        "bad preamble magic",
        "bad preamble magic",
        "message of 4294967295 bytes exceeds the limit",
        "bad PROTO magic 0x8f",
        "frame 1 is truncated",
    ];
    for ((what, bytes), log) in bads.drain(..).zip(expected_logs) {
        let before = logs::matching(log);
        let mut c = server.client().await;
        c.send_raw(&bytes).await;
        eprintln!("bad client: {what}");
        c.assert_closed().await;
        assert_eq!(
            logs::matching(log),
            before + 1,
            "{what}: no log line {log:?}"
        );
    }

    // Closing in the middle of a message, preamble or body.
    let full = request_bytes("resource.status", None, 0, ANY, 1);
    for cut in [3, 8, 20] {
        let mut c = server.client().await;
        c.send_raw(&full[..cut]).await;
        drop(c);
    }
    // Logged once the server notices.
    for _ in 0..100 {
        if logs::matching("connection closed in the middle of a message") >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(logs::matching("connection closed in the middle of a message") >= 3);
    // Closing right after connecting, before the handshake byte is read.
    drop(UnixStream::connect(&server.path).await.unwrap());

    // None of these reached the service, so no disconnects either.
    server.seen_nothing();
    // The good client still works, and its stream is still open.
    server.status_ok(&mut good, 2).await;
    good.send(
        "resource.journal-cancel",
        Some(r#"{"matchtag":1}"#),
        F_NORESPONSE,
        0,
    )
    .await;
    let m = good.recv().await;
    m.assert_acceptable(1);
    assert_eq!(m.errnum(), ENODATA as u32);
    let _ = server.seen_request("resource.journal-cancel");
    drop(good);
    assert_eq!(server.seen_disconnect(), gconn);
    server.stop().await;
}

/// 1,000 clients connected at once, each with a request answered while
/// all are connected.  Needs about 2,000 descriptors (both ends live in
/// this process); the limit is raised to its hard maximum if lower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_clients() {
    const N: usize = 1000;
    raise_fd_limit(2 * N as u64 + 256);
    let server = Server::start().await;
    let t0 = Instant::now();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for i in 0..N {
        let path = server.path.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&path).await;
            let tag = (i % 7) as u32 + 1;
            let m = c.rpc("resource.status", None, tag).await;
            assert_eq!(m.errnum(), 0);
            assert_eq!(m.json()["online"], "0-3");
            // Stay connected until every client has its answer.
            barrier.wait().await;
            let m = c.rpc("resource.role", None, tag + 1).await;
            assert_eq!(m.json()["matchtag"], tag + 1);
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("clients finish")
            .unwrap();
    }
    let elapsed = t0.elapsed();
    eprintln!("{N} concurrent flux clients served in {elapsed:?}");
    let mut conns = std::collections::HashSet::new();
    let mut disconnects = std::collections::HashSet::new();
    while disconnects.len() < N {
        match server.next_seen() {
            Seen::Request { conn, .. } => {
                conns.insert(conn);
            }
            Seen::Disconnect(c) => {
                assert!(disconnects.insert(c), "one disconnect per connection");
            }
        }
    }
    assert_eq!(conns.len(), N);
    assert_eq!(conns, disconnects);
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    server.stop().await;
}

fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < want as libc::rlim_t {
            lim.rlim_cur = lim.rlim_max.min(want as libc::rlim_t);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

// ---------------------------------------------------------------------------
// Lifecycle.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_requests_then_cuts_streams() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.sock");
    let listeners = Listeners::bind(&[Uri::Flux(path.clone())], &ListenOptions::default()).unwrap();
    let (tx, rx) = smpsc::channel::<Incoming>();
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(listeners.run(tx, shutdown));
    let mut c = Client::connect(&path).await;
    // A slow request and an endless stream.
    c.send("resource.slow", None, 0, 1).await;
    c.send("resource.journal", Some("{}"), F_STREAMING, 2).await;
    let mut pending = Vec::new();
    for _ in 0..2 {
        match recv(&rx, "a request") {
            Incoming::Request { req, replies, .. } => pending.push((req, replies)),
            other => panic!("{other:?}"),
        }
    }
    let _ = stop.send(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        UnixStream::connect(&path).await.is_err(),
        "no longer accepting"
    );
    // The slow request still gets its reply during the grace period.
    pending[0].1.send(Ok(json!({"late": true}).into())).unwrap();
    let m = c.recv().await;
    m.assert_acceptable(1);
    assert_eq!(m.json(), json!({"late": true}));
    // The stream is cut after the grace: the connection closes, the
    // service gets the disconnect, the socket file goes.
    c.assert_closed().await;
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let conn = pending[0].0.conn;
    let disc = rx
        .try_iter()
        .find(|m| matches!(m, Incoming::Disconnect(c) if *c == conn));
    assert!(disc.is_some());
    assert!(!path.exists());
}

#[test]
fn bind_like_unix_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep/er/f.sock");
    let uri = Uri::Flux(path.clone());
    let opts = ListenOptions::default();
    let l = Listeners::bind(std::slice::from_ref(&uri), &opts).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o666
    );
    // A live socket is not taken over, by either kind of listener.
    let e = Listeners::bind(std::slice::from_ref(&uri), &opts).unwrap_err();
    assert!(matches!(e, TransportError::InUse { .. }), "{e}");
    let e = Listeners::bind(&[Uri::Unix(path.clone())], &opts).unwrap_err();
    assert!(matches!(e, TransportError::InUse { .. }), "{e}");
    drop(l);
    assert!(!path.exists());
    // A stale one is replaced; flux and unix listeners side by side.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let unix = dir.path().join("u.sock");
    let l = Listeners::bind(&[uri.clone(), Uri::Unix(unix.clone())], &opts).unwrap();
    assert_eq!(l.addresses(), vec![uri, Uri::Unix(unix)]);
}
