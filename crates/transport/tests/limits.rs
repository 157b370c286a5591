#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! The listeners' bounds, with the real listeners on temp Unix sockets and
//! a stub service thread: every bound gives its clear answer and memory
//! stays bounded whatever the client does.
//!
//! Guests: as root, a client socket is connected from a thread that took
//! uid 65534 with a raw `setresuid` (per thread on Linux; `SO_PEERCRED` is
//! fixed at `connect`); otherwise the owner is set to another uid.

mod common;

use common::*;
use rpc::errno::{EAGAIN, EOVERFLOW, EPERM};
use rpc::uri::Uri;
use rpc::{wire, RpcError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as smpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::watch;
use transport::{Incoming, Limits, ListenOptions, Listeners, ReplyRefused};

const GUEST_UID: u32 = 65534;

fn my_uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

/// Options making the test's guest connections guests.
fn options(limits: Limits) -> ListenOptions {
    let me = my_uid();
    ListenOptions {
        owner_uid: if me == 0 { 0 } else { me.wrapping_add(4242) },
        limits,
        ..ListenOptions::default()
    }
}

/// A connection whose peer is not the owner.
fn guest_connect(path: &Path) -> UnixStream {
    let s = if my_uid() == 0 {
        let p = path.to_owned();
        std::thread::spawn(move || {
            // SAFETY: a raw syscall changing this thread's credentials only.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_setresuid,
                    GUEST_UID as libc::c_long,
                    GUEST_UID as libc::c_long,
                    GUEST_UID as libc::c_long,
                )
            };
            assert_eq!(r, 0, "setresuid");
            std::os::unix::net::UnixStream::connect(&p)
        })
        .join()
        .unwrap()
    } else {
        std::os::unix::net::UnixStream::connect(path)
    };
    let s = s.expect("connect as a guest");
    s.set_nonblocking(true).unwrap();
    UnixStream::from_std(s).unwrap()
}

/// A Flux request as libflux encodes it (RFC 3).
fn flux_request(topic: &str, payload: Option<&str>, streaming: bool, matchtag: u32) -> Vec<u8> {
    let flags = if streaming { 0x40 } else { 0 };
    flux_request_bytes(topic, payload.map(str::as_bytes), flags, u32::MAX, matchtag)
}

/// One response: (matchtag, errnum, payload bytes); None at EOF.
async fn flux_read(s: &mut UnixStream) -> Option<(u32, u32, Vec<u8>)> {
    let mut pre = [0u8; 8];
    s.read_exact(&mut pre).await.ok()?;
    let len = u32::from_be_bytes(pre[4..8].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.ok()?;
    let proto = &body[len - 20..];
    let aux1 = u32::from_be_bytes(proto[12..16].try_into().unwrap());
    let tag = u32::from_be_bytes(proto[16..20].try_into().unwrap());
    Some((tag, aux1, body))
}

/// A Flux connection to `server` that sent three `topic` requests (tags
/// 1 to 3), and the first reply it read.
async fn first_reply_of_three(
    server: &Server,
    topic: &str,
    streaming: bool,
) -> (UnixStream, (u32, u32, Vec<u8>)) {
    let mut f = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut f).await, 0);
    for tag in 1..=3 {
        let req = flux_request(topic, None, streaming, tag);
        f.write_all(&req).await.unwrap();
    }
    let m = tokio::time::timeout(Duration::from_secs(5), flux_read(&mut f)).await;
    (f, m.unwrap().unwrap())
}

async fn handshake(s: &mut UnixStream) -> u8 {
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    b[0]
}

/// What the stub did.
#[derive(Default)]
struct Stats {
    sent: AtomicUsize,
    overflows: AtomicUsize,
    session_lines: AtomicUsize,
    requests: AtomicUsize,
}

/// The stub service:
/// * `resource.status`: a reply of 8 KiB;
/// * `resource.journal` (streaming): 8 KiB events until one is refused;
/// * `resource.hold`: never answered (kept open);
/// * an agent session hello: refused with EPERM; its lines are counted.
fn stub(rx: smpsc::Receiver<Incoming>, stats: Arc<Stats>) {
    let mut held = Vec::new();
    let big = "x".repeat(8 << 10);
    while let Ok(m) = rx.recv() {
        let (req, replies, slot) = match m {
            Incoming::Request { req, replies, slot } => (req, replies, slot),
            Incoming::SessionLine { .. } => {
                stats.session_lines.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            _ => continue,
        };
        drop(slot);
        stats.requests.fetch_add(1, Ordering::SeqCst);
        let count = |r: Result<(), ReplyRefused>| match r {
            Ok(()) => {
                stats.sent.fetch_add(1, Ordering::SeqCst);
                true
            }
            Err(ReplyRefused::Overflow) => {
                stats.overflows.fetch_add(1, Ordering::SeqCst);
                false
            }
            Err(ReplyRefused::Closed) => false,
        };
        match req.topic.as_str() {
            "resource.status" => {
                count(replies.send(Ok(json!({ "pad": big }).into())));
            }
            "resource.journal" => {
                for i in 0.. {
                    let ev = json!({"events": [{"name": "x", "i": i, "pad": big}]});
                    if !count(replies.send(Ok(ev.into()))) {
                        break;
                    }
                }
            }
            "resource.hold" => held.push(replies),
            t if t == wire::SESSION_TOPIC => {
                count(replies.send(Err(RpcError::new(EPERM, "hello refused"))));
            }
            _ => {
                count(replies.send(Ok(Value::Null.into())));
            }
        }
    }
}

struct Server {
    dir: tempfile::TempDir,
    stop: watch::Sender<bool>,
    stats: Arc<Stats>,
    /// The channel when the stub is not started (the loop "stalled").
    _rx: Option<smpsc::Receiver<Incoming>>,
}

impl Server {
    async fn start(limits: Limits) -> Server {
        Server::start_with(limits, true).await
    }

    async fn start_with(limits: Limits, run_stub: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let uris = [
            Uri::Flux(dir.path().join("flux.sock")),
            Uri::Unix(dir.path().join("http.sock")),
        ];
        let listeners = Listeners::bind(&uris, &options(limits)).unwrap();
        let (tx, rx) = smpsc::channel();
        let stats = Arc::new(Stats::default());
        let keep = if run_stub {
            let s = Arc::clone(&stats);
            std::thread::spawn(move || stub(rx, s));
            None
        } else {
            Some(rx)
        };
        let (stop, shutdown) = watch::channel(false);
        tokio::spawn(listeners.run(tx, shutdown));
        Server {
            dir,
            stop,
            stats,
            _rx: keep,
        }
    }

    fn flux(&self) -> PathBuf {
        self.dir.path().join("flux.sock")
    }

    fn http(&self) -> PathBuf {
        self.dir.path().join("http.sock")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Read until EOF (or error), at most `limit`, within 10 s.
async fn read_to_end(s: &mut UnixStream, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.len() < limit {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no EOF within 10 s ({} bytes read)", out.len()),
        }
    }
    out
}

fn small_queue() -> Limits {
    Limits {
        max_outbound_bytes: 64 << 10,
        max_guest_outbound_bytes: 64 << 10,
        request_timeout: Duration::from_millis(500),
        ..Limits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_flooding_flux_without_reading_is_disconnected() {
    let server = Server::start(small_queue()).await;
    let mut s = guest_connect(&server.flux());
    assert_eq!(handshake(&mut s).await, 0);
    // Pipeline requests and never read: the replies pile up until the
    // connection's queue is over its limit, then the server closes it.
    let msg = flux_request("resource.status", None, false, 1);
    let start = Instant::now();
    let mut written = 0usize;
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), s.write_all(&msg)).await {
            Ok(Ok(())) => written += 1,
            Ok(Err(_)) => break true,
            Err(_) => break false,
        }
        assert!(start.elapsed() < Duration::from_secs(30), "still open");
    };
    let sent = server.stats.sent.load(Ordering::SeqCst);
    if !closed {
        // The writes stalled: the server stopped reading requests from a
        // client that does not read; it must drop it all the same.
        let _ = read_to_end(&mut s, usize::MAX).await;
    }
    assert!(written > 0);
    // Replies accepted for the client: what fits the queue and the
    // socket's buffers, not one per request written.
    let bound = (64 << 10) / (8 << 10) + 1 + (4 << 20) / (8 << 10);
    assert!(
        sent <= bound,
        "{sent} replies accepted for a client that never reads (bound {bound})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_journal_reader_is_ended_with_the_limit_named() {
    let server = Server::start(small_queue()).await;
    let mut s = UnixStream::connect(server.http()).await.unwrap();
    let req = "POST /v1/resource.journal HTTP/1.1\r\nhost: x\r\nx-roster-streaming: 1\r\n\
               content-length: 2\r\n\r\n{}";
    s.write_all(req.as_bytes()).await.unwrap();
    // Do not read until the service has been refused a reply.
    let start = Instant::now();
    while server.stats.overflows.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The response ends (chunked terminator); keep-alive keeps the socket.
    let mut all = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !all.ends_with(b"\r\n0\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("the stream's end within 10 s")
            .unwrap();
        assert!(n > 0, "closed without the end of the stream");
        all.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&all);
    let last = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("an NDJSON line");
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["errnum"], EOVERFLOW, "{last}");
    let msg = v["errstr"].as_str().unwrap_or_default();
    assert!(msg.contains("max-outbound-bytes"), "{last}");
    assert!(msg.contains(&(64 << 10).to_string()), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_flux_journal_reader_gets_eoverflow() {
    let server = Server::start(small_queue()).await;
    let mut s = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut s).await, 0);
    s.write_all(&flux_request("resource.journal", Some("{}"), true, 7))
        .await
        .unwrap();
    let start = Instant::now();
    while server.stats.overflows.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut n = 0;
    let (tag, errnum, body) = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), flux_read(&mut s))
            .await
            .unwrap()
            .expect("the stream's end");
        if m.1 != 0 {
            break m;
        }
        n += 1;
    };
    assert_eq!((tag, errnum), (7, EOVERFLOW as u32));
    assert!(String::from_utf8_lossy(&body).contains("max-outbound-bytes"));
    assert!(n >= 1);
    // The connection itself stays usable.
    s.write_all(&flux_request("resource.ping", None, false, 8))
        .await
        .unwrap();
    let m = flux_read(&mut s).await.unwrap();
    assert_eq!((m.0, m.1), (8, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_guest_body_is_refused_before_it_is_sent() {
    let server = Server::start(Limits::default()).await;
    let mut s = guest_connect(&server.http());
    // Only the head: the answer must come without the body.
    let head = "POST /v1/resource.status HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("answered before the body")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("limit of 65536 bytes"), "{text}");
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 0);

    // Flux: a guest's long message ends the connection on its preamble.
    let mut f = guest_connect(&server.flux());
    assert_eq!(handshake(&mut f).await, 0);
    let mut pre = MAGIC.to_ne_bytes().to_vec();
    pre.extend_from_slice(&(1u32 << 20).to_be_bytes());
    f.write_all(&pre).await.unwrap();
    assert!(read_to_end(&mut f, 1).await.is_empty(), "closed, no reply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_flux_client_is_closed_but_not_one_with_an_open_stream() {
    let server = Server::start(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let mut idle = UnixStream::connect(server.flux()).await.unwrap();
    let mut busy = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut idle).await, 0);
    assert_eq!(handshake(&mut busy).await, 0);
    busy.write_all(&flux_request("resource.hold", None, true, 1))
        .await
        .unwrap();
    let start = Instant::now();
    assert!(read_to_end(&mut idle, 1).await.is_empty());
    assert!(start.elapsed() >= Duration::from_millis(250));
    // The one with a request open is still there after several timeouts.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    busy.write_all(&flux_request("resource.ping", None, false, 2))
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), flux_read(&mut busy))
        .await
        .unwrap()
        .expect("still connected");
    assert_eq!((m.0, m.1), (2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_times_out() {
    let server = Server::start(Limits {
        request_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    // HTTP: a head that never completes.
    let mut s = UnixStream::connect(server.http()).await.unwrap();
    s.write_all(b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let _ = read_to_end(&mut s, usize::MAX).await;
    // HTTP: a body that never completes: 408.
    let mut s = UnixStream::connect(server.http()).await.unwrap();
    s.write_all(b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n{")
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&read_to_end(&mut s, 4096).await).to_string();
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request-timeout"), "{text}");
    // Flux: half a message.
    let mut f = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut f).await, 0);
    let msg = flux_request("resource.status", None, false, 1);
    f.write_all(&msg[..10]).await.unwrap();
    assert!(read_to_end(&mut f, 1).await.is_empty());
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_uid_connection_cap() {
    let server = Server::start(Limits {
        max_connections_per_peer: 2,
        ..Limits::default()
    })
    .await;
    let mut a = guest_connect(&server.flux());
    let mut b = guest_connect(&server.flux());
    assert_eq!(handshake(&mut a).await, 0);
    assert_eq!(handshake(&mut b).await, 0);
    // The same uid on any listener: refused with a clear answer.
    let mut c = guest_connect(&server.flux());
    assert_eq!(handshake(&mut c).await, EAGAIN as u8);
    let mut h = guest_connect(&server.http());
    let text = String::from_utf8_lossy(&read_to_end(&mut h, 4096).await).to_string();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("max-connections-per-peer"), "{text}");
    // The owner is not counted.
    let mut o = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut o).await, 0);
    // A place freed is a place to take.
    drop(a);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut d = guest_connect(&server.flux());
    assert_eq!(handshake(&mut d).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_connection_cap() {
    let server = Server::start(Limits {
        max_connections: 1,
        ..Limits::default()
    })
    .await;
    let mut a = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut a).await, 0);
    let mut b = UnixStream::connect(server.flux()).await.unwrap();
    assert_eq!(handshake(&mut b).await, EAGAIN as u8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_agent_session_is_closed() {
    let server = Server::start(Limits::default()).await;
    let mut s = UnixStream::connect(server.http()).await.unwrap();
    let hello = "{\"hello\":1}\n";
    let head = format!(
        "POST {} HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: {}\r\n\
         content-length: {}\r\n\r\n{hello}",
        wire::path_for(wire::SESSION_TOPIC),
        wire::SESSION_UPGRADE,
        hello.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let chunk = |line: &str| format!("{line}\n");
    let mut buf = vec![0u8; 4096];
    let mut got = String::new();
    while !got.contains("hello refused") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed before the refusal: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    // Lines after the refusal are not requests; the connection closes.
    let mut write_failed = false;
    for i in 0..50 {
        let line = format!(r#"{{"heartbeat":{i}}}"#);
        if s.write_all(chunk(&line).as_bytes()).await.is_err() {
            write_failed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rest = if write_failed {
        Vec::new()
    } else {
        read_to_end(&mut s, usize::MAX).await
    };
    assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1"));
    assert_eq!(server.stats.session_lines.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_loop_queue_and_inflight_cap_answer_eagain() {
    // A stalled service loop: nothing is taken off the channel.
    let server = Server::start_with(
        Limits {
            max_queued_requests: 2,
            ..Limits::default()
        },
        false,
    )
    .await;
    let (_f, m) = first_reply_of_three(&server, "resource.status", false).await;
    assert_eq!((m.0, m.1), (3, EAGAIN as u32));
    assert!(String::from_utf8_lossy(&m.2).contains("max-queued-requests"));
    // HTTP: 503 with the errno.
    let mut s = UnixStream::connect(server.http()).await.unwrap();
    s.write_all(b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let n = {
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    assert!(n.starts_with("HTTP/1.1 503"), "{n}");
    assert!(
        n.contains(&format!("{}: {EAGAIN}", wire::ERRNUM_HEADER)),
        "{n}"
    );

    // In flight per Flux connection.
    let server = Server::start(Limits {
        max_inflight: 2,
        ..Limits::default()
    })
    .await;
    let (_f, m) = first_reply_of_three(&server, "resource.hold", true).await;
    assert_eq!((m.0, m.1), (3, EAGAIN as u32));
    assert!(String::from_utf8_lossy(&m.2).contains("max-inflight"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_ip_connection_cap_on_tcp() {
    let limits = Limits {
        max_connections_per_peer: 1,
        ..Limits::default()
    };
    let opts = ListenOptions {
        token: Some("tok".into()),
        limits,
        ..ListenOptions::default()
    };
    let tcp = Uri::Tcp {
        host: "127.0.0.1".into(),
        port: 0,
    };
    let listeners = Listeners::bind(&[tcp], &opts).unwrap();
    let addr = match &listeners.addresses()[0] {
        Uri::Tcp { host, port } => format!("{host}:{port}"),
        other => panic!("{other}"),
    };
    let (tx, _rx) = smpsc::channel();
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(listeners.run(tx, shutdown));
    let _a = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut b = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), b.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("max-connections-per-peer"), "{text}");
    let _ = stop.send(true);
}
