//! The HTTP listeners against a fake service thread.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming as Body;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rpc::errno::{EINVAL, ENODATA};
use rpc::uri::Uri;
use rpc::{ConnId, Role, RpcError};
use serde_json::{json, Value};
use std::sync::mpsc as smpsc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use transport::{Incoming, ListenOptions, Listeners, TransportError};

const TOKEN: &str = "s3cret-token";

type Pending = (rpc::Request, transport::ReplySender);

/// The service side as the tests see it.
struct Fake {
    requests: smpsc::Receiver<Pending>,
    /// Agent session lines (one-way): connection and payload.
    lines: smpsc::Receiver<(ConnId, Value)>,
    disconnects: smpsc::Receiver<ConnId>,
    /// Where the fake, like the service, counts a connection gone once
    /// it sent the last reply of a request whose sender `ends_conn`.
    ended: smpsc::Sender<ConnId>,
}

impl Fake {
    fn request(&self) -> Pending {
        recv(&self.requests, "a request reaches the service")
    }

    fn line(&self) -> (ConnId, Value) {
        recv(&self.lines, "a session line reaches the service")
    }

    fn disconnect(&self) -> ConnId {
        recv(&self.disconnects, "a disconnect reaches the service")
    }

    fn no_request(&self) {
        assert!(self
            .requests
            .recv_timeout(Duration::from_millis(200))
            .is_err());
    }

    /// Answer every request automatically: `test.echo` (and
    /// `resource.drain`, whose bodies may be large) with the payload,
    /// `test.role` with role/userid/streaming, `test.error` with EINVAL,
    /// `test.drop` by dropping the sender; streaming `test.stream` with
    /// `{"n": i}` for i in 0..payload.count then ENODATA.
    fn auto(self) -> smpsc::Receiver<ConnId> {
        let Fake {
            requests,
            disconnects,
            ended,
            ..
        } = self;
        std::thread::spawn(move || {
            while let Ok((req, tx)) = requests.recv() {
                // A one-reply request's connection ends with its reply
                // (the service's part of the disconnect, see
                // `ReplySender::ends_conn`).
                let ends = (!req.streaming && tx.ends_conn()).then_some(req.conn);
                match req.topic.as_str() {
                    "test.echo" | "resource.drain" => {
                        let _ = tx.send(Ok(req.payload.into()));
                    }
                    "test.role" => {
                        let role = match &req.role {
                            Role::Agent(h) => format!("agent:{h}"),
                            r => r.name().to_string(),
                        };
                        let _ = tx.send(Ok(json!({
                            "role": role, "userid": req.userid,
                            "streaming": req.streaming, "matchtag": req.matchtag
                        })
                        .into()));
                    }
                    "test.error" => {
                        let _ = tx.send(Err(RpcError::new(EINVAL, "bad things")));
                    }
                    "test.drop" => drop(tx),
                    "test.stream" => {
                        let n = req.payload["count"].as_u64().unwrap_or(0);
                        for i in 0..n {
                            let _ = tx.send(Ok(json!({ "n": i }).into()));
                        }
                        let _ = tx.send(Err(RpcError::bare(ENODATA)));
                    }
                    _ => {
                        let _ = tx.send(Err(RpcError::new(
                            rpc::errno::ENOSYS,
                            format!("No service matching {} is registered", req.topic),
                        )));
                    }
                }
                if let Some(conn) = ends.filter(|_| req.topic != "test.drop") {
                    let _ = ended.send(conn);
                }
            }
        });
        disconnects
    }
}

struct Server {
    addrs: Vec<Uri>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), TransportError>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn unix(&self) -> std::path::PathBuf {
        match &self.addrs[0] {
            Uri::Unix(p) => p.clone(),
            other => panic!("not unix: {other}"),
        }
    }

    fn tcp(&self) -> (String, u16) {
        match &self.addrs[1] {
            Uri::Tcp { host, port } => (host.clone(), *port),
            other => panic!("not tcp: {other}"),
        }
    }

    async fn stop(self) {
        stop_listeners(self.stop, self.task).await
    }
}

fn options() -> ListenOptions {
    ListenOptions {
        token: Some(TOKEN.into()),
        ..ListenOptions::default()
    }
}

async fn start_with(opts: ListenOptions) -> (Server, Fake) {
    let dir = tempfile::tempdir().unwrap();
    // Let other uids reach the socket (see the guest test).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let uris = [
        Uri::Unix(dir.path().join("sub/roster.sock")),
        Uri::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        },
    ];
    let listeners = Listeners::bind(&uris, &opts).unwrap();
    let addrs = listeners.addresses();
    let (tx, rx) = smpsc::channel();
    let (req_tx, requests) = smpsc::channel();
    let (line_tx, lines) = smpsc::channel();
    let (disc_tx, disconnects) = smpsc::channel();
    let ended = disc_tx.clone();
    std::thread::spawn(move || {
        while let Ok(m) = rx.recv() {
            match m {
                Incoming::Request { req, replies, .. } => {
                    let _ = req_tx.send((req, replies));
                }
                Incoming::SessionLine { conn, payload, .. } => {
                    let _ = line_tx.send((conn, payload));
                }
                Incoming::Disconnect(c) => {
                    let _ = disc_tx.send(c);
                }
                Incoming::Wake => {}
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(listeners.run(tx, shutdown));
    (
        Server {
            addrs,
            stop,
            task,
            _dir: dir,
        },
        Fake {
            requests,
            lines,
            disconnects,
            ended,
        },
    )
}

async fn start() -> (Server, Fake) {
    start_with(options()).await
}

/// A hyper client connection; the connection task is returned so tests
/// can kill it (= close the socket).
async fn client<S>(
    io: S,
) -> (
    hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<()>,
)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

async fn unix_client(
    s: &Server,
) -> (
    hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<()>,
) {
    client(tokio::net::UnixStream::connect(s.unix()).await.unwrap()).await
}

async fn tcp_client(
    s: &Server,
) -> (
    hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<()>,
) {
    let (h, p) = s.tcp();
    client(
        tokio::net::TcpStream::connect((h.as_str(), p))
            .await
            .unwrap(),
    )
    .await
}

fn post(topic: &str, body: &str) -> hyper::http::request::Builder {
    let _ = body;
    Request::builder()
        .method("POST")
        .uri(format!("/v1/{topic}"))
        .header("host", "localhost")
}

async fn call(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> (u16, hyper::HeaderMap, String) {
    send.ready().await.unwrap();
    let resp: Response<Body> = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

fn body(s: &str) -> Full<Bytes> {
    Full::new(Bytes::from(s.to_string()))
}

/// A streaming request of `topic` with `payload` as its body.
fn streaming(topic: &str, payload: &str) -> Request<Full<Bytes>> {
    post(topic, "")
        .header("x-roster-streaming", "1")
        .body(body(payload))
        .unwrap()
}

type HttpSend = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Send `req` from a task whose result is the reply's status, its whole
/// body as text, and `send` back.
/// [`spawn_text`] of a stream of `x.y`, and the sender of its replies
/// as the service got it.
fn spawn_stream(send: HttpSend, fake: &Fake) -> (Texted, transport::ReplySender) {
    let r = spawn_text(send, streaming("x.y", ""));
    let (_req, tx) = fake.request();
    (r, tx)
}

/// What [`spawn_text`] returns: the status, the body's text and the
/// connection.
type Texted = tokio::task::JoinHandle<(hyper::StatusCode, String, HttpSend)>;

fn spawn_text(mut send: HttpSend, req: Request<Full<Bytes>>) -> Texted {
    tokio::spawn(async move {
        let resp = send.send_request(req).await.unwrap();
        let status = resp.status();
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(b.to_vec()).unwrap(), send)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_owner_role_and_payloads() {
    let (server, fake) = start().await;
    let disconnects = fake.auto();
    let (mut send, _t) = unix_client(&server).await;

    let (st, h, b) = call(&mut send, post("test.role", "").body(body("")).unwrap()).await;
    assert_eq!(st, 200);
    assert_eq!(h["content-type"], "application/json");
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["role"], "owner");
    assert_eq!(v["userid"], json!(transport::current_uid()));
    assert_eq!(v["streaming"], false);
    assert_eq!(v["matchtag"], 1);
    let first = disconnects.recv_timeout(Duration::from_secs(5)).unwrap();

    // Keep-alive: a second request on the same connection is a new conn id.
    let (st, _, b) = call(
        &mut send,
        post("test.echo", "")
            .body(body(r#"{"a": [1, 2]}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b, r#"{"a":[1,2]}"#);
    let second = disconnects.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_ne!(first, second);

    // A body far over hyper's 32 KiB head buffer still arrives whole
    // where the topic allows it (the owner's drain targets).
    let big = format!("{{\"targets\":\"{}\"}}", "n".repeat(3 << 20));
    let (st, _, b) = call(
        &mut send,
        post("resource.drain", "").body(body(&big)).unwrap(),
    )
    .await;
    assert_eq!((st, b.len()), (200, big.len()));
    disconnects.recv_timeout(Duration::from_secs(5)).unwrap();

    // No payload either way: empty bodies, no content type.
    let (st, h, b) = call(&mut send, post("test.echo", "").body(body("")).unwrap()).await;
    assert_eq!((st, b.as_str()), (200, ""));
    assert!(h.get("content-type").is_none());

    // An RPC error: status from the errno, error object, errno header.
    let (st, h, b) = call(&mut send, post("test.error", "").body(body("")).unwrap()).await;
    assert_eq!(st, 400);
    assert_eq!(h["x-roster-errnum"], "22");
    assert_eq!(b, r#"{"errnum":22,"errstr":"bad things"}"#);

    // Unknown topics are the service's business.
    let (st, _, b) = call(&mut send, post("nope.x", "").body(body("")).unwrap()).await;
    assert_eq!(st, 404);
    assert_eq!(
        b,
        r#"{"errnum":38,"errstr":"No service matching nope.x is registered"}"#
    );

    // The service drops a request without replying.
    let (st, h, b) = call(&mut send, post("test.drop", "").body(body("")).unwrap()).await;
    assert_eq!(st, 500);
    assert_eq!(h["x-roster-errnum"], "5");
    assert_eq!(
        b,
        r#"{"errnum":5,"errstr":"service ended the request without a reply"}"#
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_guest_role_for_other_uids() {
    let me = transport::current_uid();
    let (server, fake) = start_with(ListenOptions {
        owner_uid: me.wrapping_add(4242),
        ..options()
    })
    .await;
    let _d = fake.auto();
    let (mut send, _t) = unix_client(&server).await;
    let (st, _, b) = call(&mut send, post("test.role", "").body(body("")).unwrap()).await;
    assert_eq!(st, 200);
    let v: Value = serde_json::from_str(&b).unwrap();
    // uid 0 is always the owner; anyone else who is not owner_uid is a guest.
    let expect = if me == 0 { "owner" } else { "guest" };
    assert_eq!(v["role"], expect);
    assert_eq!(v["userid"], json!(me));

    // As root, a real other uid: nobody via setpriv + curl, if available.
    if me == 0
        && std::path::Path::new("/usr/bin/setpriv").exists()
        && std::path::Path::new("/usr/bin/curl").exists()
    {
        let path = server.unix();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("/usr/bin/setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "/usr/bin/curl",
                ])
                .args(["-s", "-X", "POST", "--unix-socket"])
                .arg(&path)
                .arg("http://x/v1/test.role")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["role"], "guest");
        assert_eq!(v["userid"], 65534);
    } else {
        eprintln!("note: guest role from a foreign uid not exercised (needs root, setpriv, curl)");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_requires_the_token() {
    let (server, fake) = start().await;
    let _d = fake.auto();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Basic s3cret-token"),
        Some("s3cret-token"),
    ] {
        let (mut send, _t) = tcp_client(&server).await;
        let mut req = post("test.role", "");
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let (st, h, b) = call(&mut send, req.body(body("")).unwrap()).await;
        assert_eq!(st, 401, "{auth:?}");
        assert_eq!(h["x-roster-errnum"], "1");
        assert_eq!(h["www-authenticate"], "Bearer");
        let v: Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["errnum"], 1);
        assert!(
            v["errstr"]
                .as_str()
                .unwrap()
                .starts_with("authentication required: "),
            "{b}"
        );
    }
    // Rejected requests never reached the service: the next one it sees
    // is the authorized one.
    let (mut send, _t) = tcp_client(&server).await;
    let (st, _, b) = call(
        &mut send,
        post("test.role", "")
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(body(""))
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["role"], "owner");
    assert_eq!(v["userid"], Value::Null);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_before_the_service() {
    let (server, fake) = start().await;
    let (mut send, _t) = unix_client(&server).await;

    for path in ["/", "/v1/", "/v2/resource.status", "/v1/a/b", "/v1/a%20b"] {
        let req = Request::builder()
            .method("POST")
            .uri(path)
            .header("host", "x")
            .body(body(""))
            .unwrap();
        let (st, h, b) = call(&mut send, req).await;
        assert_eq!(st, 404, "{path}");
        assert_eq!(h["x-roster-errnum"], "38");
        let v: Value = serde_json::from_str(&b).unwrap();
        assert!(v["errstr"].as_str().unwrap().contains(path), "{b}");
    }
    for method in ["GET", "PUT", "DELETE"] {
        let req = Request::builder()
            .method(method)
            .uri("/v1/resource.status")
            .header("host", "x")
            .body(body(""))
            .unwrap();
        let (st, h, b) = call(&mut send, req).await;
        assert_eq!(st, 405, "{method}");
        assert_eq!(h["allow"], "POST");
        assert_eq!(h["x-roster-errnum"], "71");
        assert!(b.contains(method), "{b}");
    }
    let (st, h, b) = call(
        &mut send,
        post("test.echo", "").body(body("{not json")).unwrap(),
    )
    .await;
    assert_eq!(st, 400);
    assert_eq!(h["x-roster-errnum"], "71");
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["errnum"], 71);
    assert!(v["errstr"]
        .as_str()
        .unwrap()
        .starts_with("request body is not JSON"));

    // Too large, declared up front: answered without reading the body
    // (the owner's limit on a topic that allows it, the catalogue's small
    // limit on one it does not know).
    for (topic, limit) in [
        ("resource.drain", wire_max()),
        ("test.echo", rpc::catalog::SMALL_BODY),
    ] {
        let head = format!(
            "POST /v1/{topic} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
            limit + 1
        );
        let out = raw(&server.unix(), head.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 413"), "{out}");
        assert!(out.contains("x-roster-errnum: 75\r\n"), "{out}");
        assert!(
            out.contains(&format!("exceeds the limit of {limit} bytes")),
            "{out}"
        );
    }
    fake.no_request();
    server.stop().await;
}

fn wire_max() -> usize {
    rpc::wire::MAX_REQUEST_BODY
}

/// Raw bytes in, raw bytes out (for what a well-behaved client can't send).
async fn raw(path: &std::path::Path, bytes: &[u8]) -> String {
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    // The server may answer and close before taking everything.
    let _ = s.write_all(bytes).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_chunked_body_and_garbage() {
    let (server, fake) = start().await;
    // Chunked, no Content-Length: the limit applies while reading.
    let mut req = b"POST /v1/test.echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_vec();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..17 {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(&chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let out = raw(&server.unix(), &req).await;
    assert!(
        out.starts_with("HTTP/1.1 413"),
        "{}",
        &out[..out.len().min(200)]
    );

    // Garbage gets a 400 from hyper or a closed connection, never a panic.
    let out = raw(&server.unix(), b"\x00\x01garbage\r\n\r\n").await;
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 400"), "{out}");
    fake.no_request();

    // Still serving afterwards.
    let _d = fake.auto();
    let out = raw(
        &server.unix(),
        b"POST /v1/test.echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n[]",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("\r\n\r\n[]"), "{out}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lines_arrive_one_by_one() {
    let (server, fake) = start().await;
    let (mut send, _t) = unix_client(&server).await;
    let req = streaming("test.journal", "{}");
    let resp = tokio::spawn(async move {
        let r = send.send_request(req).await.unwrap();
        (r, send)
    });
    let (req, tx) = fake.request();
    assert!(req.streaming);
    assert_eq!(req.payload, json!({}));
    // The response head comes before any reply.
    let (resp, _send) = tokio::time::timeout(Duration::from_secs(5), resp)
        .await
        .expect("head arrives before any reply")
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let mut body = resp.into_body();
    for i in 0..3 {
        tx.send(Ok(json!({ "events": [i] }).into())).unwrap();
        assert_eq!(
            next_line(&mut body).await,
            format!("{{\"events\":[{i}]}}\n")
        );
    }
    tx.send(Err(RpcError::bare(ENODATA))).unwrap();
    assert_eq!(next_line(&mut body).await, "{\"errnum\":61}\n");
    // After the ending error nothing more is sent, and the body ends.
    let _ = tx.send(Ok(json!("late").into()));
    let end = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .unwrap();
    assert!(end.is_none());
    assert_eq!(fake.disconnect(), req.conn);
    server.stop().await;
}

async fn next_line(body: &mut Body) -> String {
    let f = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("a line arrives without waiting for the end");
    String::from_utf8(f.unwrap().unwrap().into_data().unwrap().to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_going_away_is_a_disconnect() {
    let (server, fake) = start().await;

    // An idle stream.
    let (mut send, task) = unix_client(&server).await;
    let req = streaming("test.journal", "");
    let r = tokio::spawn(async move { send.send_request(req).await.map(|r| (r, send)) });
    let (stream_req, tx) = fake.request();
    assert_eq!(stream_req.payload, Value::Null);
    let (resp, send) = r.await.unwrap().unwrap();
    tx.send(Ok(json!({"events": []}).into())).unwrap();
    drop(resp);
    drop(send);
    task.abort();
    assert_eq!(fake.disconnect(), stream_req.conn);
    // Exactly once.
    assert!(fake
        .disconnects
        .recv_timeout(Duration::from_millis(300))
        .is_err());
    // The reply channel is closed for the service too, eventually.
    for _ in 0..50 {
        if tx.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(tx.is_closed());

    // A pending non-streaming request.
    let mut s = connect_unix(&server).await;
    s.write_all(b"POST /v1/resource.monitor-waitup HTTP/1.1\r\nhost: x\r\ncontent-length: 8\r\n\r\n{\"up\":4}")
        .await
        .unwrap();
    let (waiting, _tx2) = fake.request();
    assert_eq!(waiting.payload, json!({"up": 4}));
    drop(s);
    assert_eq!(fake.disconnect(), waiting.conn);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_error_ends_the_body_and_sender_drop_closes_it() {
    let (server, fake) = start().await;
    let (send, _t) = unix_client(&server).await;
    let (r, tx) = spawn_stream(send, &fake);
    tx.send(Ok(json!({"up": "0-3"}).into())).unwrap();
    tx.send(Err(RpcError::new(rpc::errno::EPROTO, "nope")))
        .unwrap();
    let (_, all, send) = r.await.unwrap();
    assert_eq!(
        all,
        "{\"up\":\"0-3\"}\n{\"errnum\":71,\"errstr\":\"nope\"}\n"
    );

    // A service that drops the sender of a stream: the body just ends.
    let (r, tx) = spawn_stream(send, &fake);
    tx.send(Ok(json!(1).into())).unwrap();
    drop(tx);
    assert_eq!(r.await.unwrap().1, "1\n");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_serialised_payloads_go_out_as_they_are() {
    let (server, fake) = start().await;
    let (send, _t) = unix_client(&server).await;
    // Streaming: one NDJSON line per payload, same bytes as a value.
    let (r, tx) = spawn_stream(send, &fake);
    tx.send(Ok(rpc::Payload::json("{\"events\":[1,2]}")))
        .unwrap();
    tx.send(Ok(json!({"events": []}).into())).unwrap();
    tx.send(Err(RpcError::bare(rpc::errno::ENODATA))).unwrap();
    let (_, all, mut send) = r.await.unwrap();
    assert_eq!(
        all,
        "{\"events\":[1,2]}\n{\"events\":[]}\n{\"errnum\":61}\n"
    );

    // Non-streaming: the body is the text; `null` is an empty body.
    for (payload, want) in [
        (
            rpc::Payload::json("{\"down\":{\"version\":1}}"),
            "{\"down\":{\"version\":1}}",
        ),
        (rpc::Payload::json("null"), ""),
    ] {
        let req = post("x.y", "").body(body("")).unwrap();
        let r = spawn_text(send, req);
        let (_req, tx) = fake.request();
        tx.send(Ok(payload)).unwrap();
        let (status, got, s) = r.await.unwrap();
        send = s;
        assert_eq!(status, 200);
        assert_eq!(got, want);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_streams() {
    let (server, fake) = start().await;
    const N: usize = 1000;
    let path = server.unix();
    let mut clients = Vec::new();
    for _ in 0..N {
        let path = path.clone();
        clients.push(tokio::spawn(async move {
            let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
            s.write_all(b"POST /v1/resource.journal HTTP/1.1\r\nhost: x\r\nx-roster-streaming: 1\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).await.unwrap();
            String::from_utf8(out).unwrap()
        }));
    }
    let mut senders = Vec::new();
    for _ in 0..N {
        senders.push(fake.request().1);
    }
    for tx in &senders {
        tx.send(Ok(json!({"events": []}).into())).unwrap();
    }
    for tx in &senders {
        tx.send(Err(RpcError::bare(ENODATA))).unwrap();
    }
    for c in clients {
        let out = tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .unwrap()
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.contains("{\"events\":[]}\n"), "{out}");
        assert!(out.contains("{\"errnum\":61}\n"), "{out}");
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..N {
        assert!(seen.insert(fake.disconnect()));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_replies_finish_and_removes_the_socket() {
    let (server, fake) = start().await;
    let path = server.unix();
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    s.write_all(b"POST /v1/test.echo HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let (_req, tx) = fake.request();
    let _ = server.stop.send(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // No longer accepting...
    assert!(tokio::net::UnixStream::connect(&path).await.is_err());
    // ...but the in-flight request still gets its reply.
    tx.send(Ok(json!({"late": true}).into())).unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("{\"late\":true}"), "{out}");
    tokio::time::timeout(Duration::from_secs(10), server.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!path.exists());
}

#[test]
fn bind_errors_and_stale_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sock");
    let uri = Uri::Unix(path.clone());
    let opts = options();

    // A stale socket (nothing accepts) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let l = Listeners::bind(std::slice::from_ref(&uri), &opts).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666);

    // A live one is not.
    let e = Listeners::bind(std::slice::from_ref(&uri), &opts).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "address unix://{} is in use by another process",
            path.display()
        )
    );
    assert!(path.exists());
    // Dropping unused listeners removes their socket.
    drop(l);
    assert!(!path.exists());

    // Not a socket: left alone.
    std::fs::write(&path, "x").unwrap();
    let e = Listeners::bind(std::slice::from_ref(&uri), &opts).unwrap_err();
    assert!(matches!(e, TransportError::NotASocket { .. }), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");

    // TCP needs a token.
    let tcp = Uri::Tcp {
        host: "127.0.0.1".into(),
        port: 0,
    };
    let e = Listeners::bind(std::slice::from_ref(&tcp), &ListenOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot listen on tcp://127.0.0.1:0: TCP listener requires a token file"
    );
    let l = Listeners::bind(&[tcp], &opts).unwrap();
    match &l.addresses()[0] {
        Uri::Tcp { host, port } => {
            assert_eq!(host, "127.0.0.1");
            assert_ne!(*port, 0);
        }
        other => panic!("{other}"),
    }

    // flux:// binds too (tests/flux.rs covers it).
    let _f = Listeners::bind(&[Uri::Flux(dir.path().join("f"))], &opts).unwrap();

    // Custom mode.
    let p2 = dir.path().join("deep/er/m.sock");
    let _l = Listeners::bind(
        &[Uri::Unix(p2.clone())],
        &ListenOptions {
            socket_mode: 0o600,
            ..options()
        },
    )
    .unwrap();
    let mode = std::fs::metadata(&p2).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// Read from a raw stream until `want` appears in what was read.
/// A new connection to the server's Unix socket.
async fn connect_unix(server: &Server) -> tokio::net::UnixStream {
    tokio::net::UnixStream::connect(server.unix())
        .await
        .unwrap()
}

/// All `s` sends until it closes (10 s at the most), as text.
async fn read_all<S: AsyncRead + Unpin>(s: &mut S) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// An upgraded agent session on a new connection: the hello `req` sent,
/// the service's welcome `{"rank": rank}` read back.  The stream, what
/// was read, the session's request and the sender of its replies.
async fn welcomed(
    server: &Server,
    fake: &Fake,
    req: &[u8],
    rank: u32,
) -> (
    tokio::net::UnixStream,
    String,
    rpc::Request,
    transport::ReplySender,
) {
    let mut s = connect_unix(server).await;
    s.write_all(req).await.unwrap();
    let (h, tx) = fake.request();
    tx.send(Ok(json!({ "rank": rank }).into())).unwrap();
    let mut seen = String::new();
    read_until(&mut s, &mut seen, &format!("{{\"rank\":{rank}}}")).await;
    (s, seen, h, tx)
}

async fn read_until<S: AsyncRead + Unpin>(s: &mut S, seen: &mut String, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    while !seen.contains(want) {
        let n = tokio::time::timeout_at(deadline, s.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("timeout waiting for {want:?}; got {seen:?}"))
            .unwrap();
        assert!(n > 0, "EOF waiting for {want:?}; got {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// A session that does not ask for the raw stream (the chunked form
/// agents once used) is refused before the service sees it; over TCP the
/// token is required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_session_needs_the_upgrade_and_a_token_over_tcp() {
    let (server, fake) = start().await;
    let head = "POST /v1/resource.agent HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\
                connection: close\r\n\r\n3\r\n{}\n\r\n";
    let out = raw(&server.unix(), head.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert!(out.contains("Upgrade: roster-agent/1"), "{out}");
    fake.no_request();

    let (h, p) = server.tcp();
    let mut req = upgrade_head(3, "");
    req.extend_from_slice(b"{}\n");
    let mut s = tokio::net::TcpStream::connect((h.as_str(), p))
        .await
        .unwrap();
    s.write_all(&req).await.unwrap();
    let mut seen = String::new();
    read_until(&mut s, &mut seen, "bearer token").await;
    assert!(seen.starts_with("HTTP/1.1 401"), "{seen}");
    fake.no_request();
    let mut req = upgrade_head(3, &format!("authorization: Bearer {TOKEN}\r\n"));
    req.extend_from_slice(b"{}\n");
    let mut s = tokio::net::TcpStream::connect((h.as_str(), p))
        .await
        .unwrap();
    s.write_all(&req).await.unwrap();
    let (hello, _tx) = fake.request();
    assert_eq!(hello.role, Role::Owner);
    drop(s);
    assert_eq!(fake.disconnect(), hello.conn);
    server.stop().await;
}

/// The head of a session that asks to leave HTTP once accepted, with a
/// body of `len` bytes.
fn upgrade_head(len: usize, extra: &str) -> Vec<u8> {
    format!(
        "POST /v1/resource.agent HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\n\
         upgrade: {}\r\ncontent-length: {len}\r\n{extra}\r\n",
        rpc::wire::SESSION_UPGRADE
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_agent_session_is_a_raw_ndjson_stream() {
    let (server, fake) = start().await;
    let mut s = connect_unix(&server).await;
    let hello = "{\"hostname\":\"h0\"}\n";
    let mut req = upgrade_head(hello.len(), "");
    req.extend_from_slice(hello.as_bytes());
    s.write_all(&req).await.unwrap();
    let (h, tx) = fake.request();
    assert_eq!(h.topic, "resource.agent");
    assert_eq!(h.matchtag, 1);
    assert!(h.streaming);
    assert_eq!(h.role, Role::Owner);
    assert_eq!(h.payload, json!({"hostname": "h0"}));
    tx.send(Ok(json!({"rank": 0}).into())).unwrap();
    let mut seen = String::new();
    read_until(&mut s, &mut seen, "{\"rank\":0}\n").await;
    assert!(seen.starts_with("HTTP/1.1 101"), "{seen}");
    assert!(
        seen.to_ascii_lowercase()
            .contains("upgrade: roster-agent/1"),
        "{seen}"
    );
    // No chunk framing after the head: the welcome line follows it as is.
    assert!(seen.ends_with("\r\n\r\n{\"rank\":0}\n"), "{seen:?}");
    // Lines (split anywhere, blank ones skipped) are one-way inputs on
    // the same connection.
    s.write_all(b"{\"n\":1}\n\n{\"n\"").await.unwrap();
    s.write_all(b":2}\n").await.unwrap();
    for n in [1, 2] {
        assert_eq!(fake.line(), (h.conn, json!({ "n": n })));
    }
    tx.send(Ok(json!({"ping": 1}).into())).unwrap();
    read_until(&mut s, &mut seen, "{\"ping\":1}\n").await;
    // The agent ends its half: the stream ends with ENODATA, then EOF.
    s.shutdown().await.unwrap();
    read_until(&mut s, &mut seen, "\"errnum\":61").await;
    assert!(seen.contains("the agent ended its session"), "{seen}");
    assert_eq!(fake.disconnect(), h.conn);
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    fake.no_request();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_agent_session_refusal_end_and_bad_lines() {
    let (server, fake) = start().await;
    // A refused hello: an HTTP error, no upgrade, the connection closes.
    let mut s = connect_unix(&server).await;
    let mut req = upgrade_head(3, "");
    req.extend_from_slice(b"{}\n");
    s.write_all(&req).await.unwrap();
    let (h, tx) = fake.request();
    tx.send(Err(RpcError::new(rpc::errno::EPERM, "hello refused")))
        .unwrap();
    let out = read_all(&mut s).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("hello refused"), "{out}");
    assert_eq!(fake.disconnect(), h.conn);

    // The service ends the stream: its error is the last line, then EOF.
    let mut s = connect_unix(&server).await;
    s.write_all(&req).await.unwrap();
    let (h, tx) = fake.request();
    tx.send(Ok(json!({"rank": 1}).into())).unwrap();
    tx.send(Err(RpcError::new(rpc::errno::ENOENT, "gone")))
        .unwrap();
    let out = read_all(&mut s).await;
    assert!(
        out.ends_with("{\"rank\":1}\n{\"errnum\":2,\"errstr\":\"gone\"}\n"),
        "{out:?}"
    );
    assert_eq!(fake.disconnect(), h.conn);

    // A line that is not JSON ends the session with EPROTO.
    let (mut s, mut seen, h, _tx) = welcomed(&server, &fake, &req, 2).await;
    s.write_all(b"not json\n").await.unwrap();
    read_until(&mut s, &mut seen, "\"errnum\":71").await;
    assert_eq!(fake.disconnect(), h.conn);

    // The agent dies: Disconnect.
    let (s, _seen, h, _tx) = welcomed(&server, &fake, &req, 3).await;
    drop(s);
    assert_eq!(fake.disconnect(), h.conn);
    fake.no_request();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_agent_session_line_limit() {
    let mut opts = options();
    opts.limits.max_request_bytes = 1024;
    let (server, fake) = start_with(opts).await;
    // A hello over the limit is refused before the service sees it.
    let big = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(2000));
    let mut req = upgrade_head(big.len(), "");
    req.extend_from_slice(big.as_bytes());
    let out = raw(&server.unix(), &req).await;
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    fake.no_request();
    // A session line over the limit (even without its newline yet) ends
    // the session with EOVERFLOW.
    let mut req = upgrade_head(3, "");
    req.extend_from_slice(b"{}\n");
    let (mut s, mut seen, h, _tx) = welcomed(&server, &fake, &req, 0).await;
    s.write_all(&big.as_bytes()[..1500]).await.unwrap();
    read_until(&mut s, &mut seen, "\"errnum\":75").await;
    assert!(
        seen.contains("session line exceeds the limit of 1024 bytes"),
        "{seen}"
    );
    assert_eq!(fake.disconnect(), h.conn);
    fake.no_request();
    server.stop().await;
}
