//! `tls://` listeners with real TLS on loopback: who a client is (its
//! certificate's role, or its token), what is refused at the handshake
//! (another CA, an expired certificate), what is refused at start-up
//! (plain TCP off loopback), and that a token never crosses the wire in
//! clear text.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rpc::uri::Uri;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{mpsc as smpsc, Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use transport::{Incoming, ListenOptions, Listeners, TlsListen, TransportError};

const TOKEN: &str = "s3cret-owner-token-6f1c2e";
const USER_TOKEN: &str = "s3cret-user-token-99a0b1";

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA; the service's certificate for `localhost` and 127.0.0.1;
    /// node1 (agent), sched (scheduler), alice (admin); and, from another
    /// CA, rogue (admin); and an expired node2 (agent).
    fn new() -> Pki {
        let (dir, ca) = new_ca("Test CA");
        let issue = |names: &[&str], role: &str, sans: &[&str]| issue(&ca, names, role, sans);
        issue(&["localhost"], "agent", &["127.0.0.1"]);
        issue(&["node1"], "agent", &[]);
        issue(&["sched"], "scheduler", &[]);
        issue(&["alice"], "admin", &[]);
        let now = SystemTime::now();
        let expired = tls::ca::Validity {
            not_before: now - Duration::from_secs(10 * 86_400),
            not_after: now - Duration::from_secs(86_400),
        };
        tls::ca::issue_opts(&ca, &ca, &["node2".into()], "agent", &[], expired, false).unwrap();
        let other = dir.path().join("other");
        tls::ca::init(&other, "Rogue CA", 10).unwrap();
        tls::ca::issue(&other, &ca, &["rogue".into()], "admin", &[], 10).unwrap();
        Pki { dir }
    }

    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join("ca").join(f)
    }

    fn listen(&self, client_ca: bool) -> TlsListen {
        let ca = self.path("ca.pem");
        TlsListen {
            config: tls::server_config(
                &self.path("localhost.pem"),
                &self.path("localhost.key"),
                client_ca.then_some(ca.as_path()),
            )
            .unwrap(),
            client_auth: client_ca,
            roles: tls::RoleMap::default(),
        }
    }

    fn client(&self, who: Option<&str>) -> Arc<tls::rustls::ClientConfig> {
        let cert = who.map(|w| {
            (
                self.path(&format!("{w}.pem")),
                self.path(&format!("{w}.key")),
            )
        });
        tls::client_config(
            &self.path("ca.pem"),
            cert.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        )
        .unwrap()
    }
}

struct Server {
    addr: (String, u16),
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), TransportError>>,
}

impl Server {
    async fn stop(self) {
        stop_listeners(self.stop, self.task).await
    }
}

/// A TLS listener on 127.0.0.1 whose fake service answers `test.role`
/// with the request's role, and `test.echo` with its payload.
fn start(opts: ListenOptions) -> Server {
    let uri = Uri::Tls {
        host: "127.0.0.1".into(),
        port: 0,
    };
    let listeners = Listeners::bind(&[uri], &opts).unwrap();
    let addr = match &listeners.addresses()[0] {
        Uri::Tls { host, port } => (host.clone(), *port),
        other => panic!("not tls: {other}"),
    };
    let (tx, rx) = smpsc::channel::<Incoming>();
    std::thread::spawn(move || {
        while let Ok(m) = rx.recv() {
            if let Incoming::Request { req, replies, .. } = m {
                let v = match req.topic.as_str() {
                    "test.role" => match &req.role {
                        rpc::Role::Agent(h) => json!(format!("agent:{h}")),
                        r => json!(r.name()),
                    },
                    _ => req.payload.clone(),
                };
                let _ = replies.send(Ok(v.into()));
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(listeners.run(tx, shutdown));
    Server { addr, stop, task }
}

fn options(pki: &Pki) -> ListenOptions {
    ListenOptions {
        token: Some(TOKEN.into()),
        role_tokens: vec![(rpc::Role::User, USER_TOKEN.into())],
        tls: Some(pki.listen(true)),
        ..ListenOptions::default()
    }
}

/// One request over a fresh TLS connection to `port` (through a proxy
/// when `via` is given): (status, body), or the connection's error text.
async fn call(
    port: u16,
    cfg: Arc<tls::rustls::ClientConfig>,
    topic: &str,
    token: Option<&str>,
) -> Result<(StatusCode, Value), String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = tls::server_name("localhost").unwrap();
    let s = tls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    http_call(s, topic, token).await
}

async fn http_call<S>(s: S, topic: &str, token: Option<&str>) -> Result<(StatusCode, Value), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::post(format!("/v1/{topic}")).header("host", "localhost");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req
        .body(Full::new(Bytes::from_static(b"{\"x\":1}")))
        .unwrap();
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap()
    };
    Ok((status, v))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_from_certificates_and_tokens() {
    let pki = Pki::new();
    let srv = start(options(&pki));
    let port = srv.addr.1;
    let role = |who: Option<&'static str>, token: Option<&'static str>| {
        let cfg = pki.client(who);
        async move { call(port, cfg, "test.role", token).await.unwrap() }
    };
    assert_eq!(
        role(Some("node1"), None).await,
        (StatusCode::OK, json!("agent:node1"))
    );
    assert_eq!(
        role(Some("sched"), None).await,
        (StatusCode::OK, json!("scheduler"))
    );
    assert_eq!(
        role(Some("alice"), None).await,
        (StatusCode::OK, json!("admin"))
    );
    // The certificate wins over a token.
    assert_eq!(
        role(Some("node1"), Some(TOKEN)).await,
        (StatusCode::OK, json!("agent:node1"))
    );
    assert_eq!(
        role(None, Some(TOKEN)).await,
        (StatusCode::OK, json!("owner"))
    );
    assert_eq!(
        role(None, Some(USER_TOKEN)).await,
        (StatusCode::OK, json!("user"))
    );
    let (st, v) = role(None, None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(v["errnum"], json!(rpc::errno::EPERM));
    assert!(
        v["errstr"]
            .as_str()
            .unwrap()
            .contains("present a client certificate or a bearer token"),
        "{v}"
    );
    let (st, _) = role(None, Some("wrong")).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_without_a_role_name_the_role_needed() {
    let pki = Pki::new();
    let mut opts = options(&pki);
    opts.access = Some(transport::TopicAccess(|t| {
        (t == "test.role").then_some(rpc::Need::Scheduler)
    }));
    let srv = start(opts);
    let port = srv.addr.1;
    let (st, v) = call(port, pki.client(None), "test.role", None)
        .await
        .unwrap();
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(v["errnum"], json!(rpc::errno::EPERM));
    assert_eq!(
        v["errstr"],
        json!(
            "test.role requires the scheduler role: authentication required: \
             present a client certificate or a bearer token"
        )
    );
    let (_, v) = call(port, pki.client(None), "test.role", Some("wrong"))
        .await
        .unwrap();
    assert_eq!(
        v["errstr"],
        json!(
            "test.role requires the scheduler role: authentication required: \
             present a client certificate or a bearer token"
        )
    );
    // A topic the table does not know: no role to name.
    let (_, v) = call(port, pki.client(None), "test.other", None)
        .await
        .unwrap();
    assert_eq!(
        v["errstr"],
        json!("authentication required: present a client certificate or a bearer token")
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_without_a_role_needs_a_token() {
    let pki = Pki::new();
    let mut opts = options(&pki);
    let mut listen = pki.listen(true);
    listen.roles.from_units = false;
    listen.roles.add("admin", "alice").unwrap();
    opts.tls = Some(listen);
    let srv = start(opts);
    let port = srv.addr.1;
    let (st, v) = call(port, pki.client(Some("sched")), "test.role", None)
        .await
        .unwrap();
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(
        v["errstr"]
            .as_str()
            .unwrap()
            .contains("the certificate of sched maps to no role"),
        "{v}"
    );
    let r = call(
        port,
        pki.client(Some("sched")),
        "test.role",
        Some(USER_TOKEN),
    )
    .await;
    assert_eq!(r.unwrap(), (StatusCode::OK, json!("user")));
    let r = call(port, pki.client(Some("alice")), "test.role", None).await;
    assert_eq!(r.unwrap(), (StatusCode::OK, json!("admin")));
    srv.stop().await;
}

/// Connect with `cfg` and read: the alert the service sends when it
/// rejects the client's certificate (TLS 1.3 clients learn it on their
/// first read).
async fn rejection(port: u16, cfg: Arc<tls::rustls::ClientConfig>) -> String {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = tls::server_name("localhost").unwrap();
    let mut s = match tls::TlsConnector::from(cfg).connect(name, tcp).await {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    let _ = s
        .write_all(b"POST /v1/test.role HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await;
    let mut buf = [0u8; 1024];
    match s.read(&mut buf).await {
        Ok(n) => panic!(
            "the service answered: {}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ca_and_expired_certificates_are_refused() {
    let pki = Pki::new();
    let srv = start(options(&pki));
    let port = srv.addr.1;
    // Signed by another CA: the service rejects it during the handshake
    // (TLS 1.3: the client learns it on its first read).
    let e = rejection(port, pki.client(Some("rogue"))).await;
    assert!(e.contains("received fatal alert"), "{e}");
    assert!(
        e.contains("UnknownCA") || e.contains("BadCertificate"),
        "{e}"
    );
    assert!(call(port, pki.client(Some("rogue")), "test.role", None)
        .await
        .is_err());
    // Expired, from the right CA.
    let e = rejection(port, pki.client(Some("node2"))).await;
    assert_eq!(e, "received fatal alert: CertificateExpired");
    // A client that does not trust the service's CA refuses it.
    let other = tls::client_config(&pki.dir.path().join("other/ca.pem"), None).unwrap();
    let e = call(port, other, "test.role", Some(TOKEN))
        .await
        .expect_err("the service's certificate is not from this CA");
    assert!(e.contains("invalid peer certificate"), "{e}");
    // The service still serves good clients.
    let r = call(port, pki.client(Some("alice")), "test.role", None).await;
    assert_eq!(r.unwrap(), (StatusCode::OK, json!("admin")));
    srv.stop().await;
}

#[test]
fn start_up_refusals() {
    let pki = Pki::new();
    let tcp = |host: &str| Uri::Tcp {
        host: host.into(),
        port: 0,
    };
    let opts = options(&pki);
    let e = Listeners::bind(&[tcp("0.0.0.0")], &opts).unwrap_err();
    assert!(
        matches!(e, TransportError::PlainTcpOffLoopback { .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "cannot listen on tcp://0.0.0.0:0: plain TCP is only allowed on loopback addresses \
         (127.0.0.0/8, ::1), because tokens and requests would cross the network unencrypted; \
         use tls://0.0.0.0:0 with tls-cert and tls-key (see `roster serve ca`)"
    );
    // Every other address that is not loopback: IPv6 any, a site
    // address, an IPv4-mapped one (refused before binding).
    for host in ["::", "10.1.2.3", "::ffff:127.0.0.1", "192.168.0.1"] {
        let e = Listeners::bind(&[tcp(host)], &opts).unwrap_err();
        assert!(
            matches!(e, TransportError::PlainTcpOffLoopback { .. }),
            "{host}: {e}"
        );
    }
    // Loopback stays allowed (with a token).
    Listeners::bind(&[tcp("127.0.0.1")], &opts).unwrap();
    Listeners::bind(&[tcp("localhost")], &opts).unwrap();
    let tls_uri = Uri::Tls {
        host: "127.0.0.1".into(),
        port: 0,
    };
    let e = Listeners::bind(
        std::slice::from_ref(&tls_uri),
        &ListenOptions {
            tls: None,
            ..options(&pki)
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot listen on tls://127.0.0.1:0: a TLS listener needs a certificate and key (tls-cert, tls-key)"
    );
    let e = Listeners::bind(
        std::slice::from_ref(&tls_uri),
        &ListenOptions {
            token: None,
            role_tokens: Vec::new(),
            tls: Some(pki.listen(false)),
            ..ListenOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, TransportError::TlsNoAuth { .. }), "{e}");
    // TLS off loopback is fine.
    let any = Uri::Tls {
        host: "0.0.0.0".into(),
        port: 0,
    };
    Listeners::bind(&[any], &options(&pki)).unwrap();
}

/// Copy `from` to `to`, recording the bytes in `rec`, until either side
/// closes.
async fn pipe(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    rec: Arc<Mutex<Vec<u8>>>,
) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        rec.lock().unwrap().extend_from_slice(&buf[..n]);
    }
    let _ = to.shutdown().await;
}

/// A loopback TCP proxy to `port` that records every byte, both ways.
async fn recording_proxy(port: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let me = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((client, _)) = l.accept().await {
            let server = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pipe(cr, sw, Arc::clone(&rec)));
            tokio::spawn(pipe(sr, cw, Arc::clone(&rec)));
        }
    });
    (me, seen)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_never_crosses_the_wire() {
    let pki = Pki::new();
    // One service with a TLS and a (loopback) plain TCP listener.
    let opts = options(&pki);
    let uris = [
        Uri::Tls {
            host: "127.0.0.1".into(),
            port: 0,
        },
        Uri::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        },
    ];
    let listeners = Listeners::bind(&uris, &opts).unwrap();
    let ports: Vec<u16> = listeners
        .addresses()
        .iter()
        .map(|u| match u {
            Uri::Tls { port, .. } | Uri::Tcp { port, .. } => *port,
            other => panic!("{other}"),
        })
        .collect();
    let (tx, rx) = smpsc::channel::<Incoming>();
    std::thread::spawn(move || {
        while let Ok(m) = rx.recv() {
            if let Incoming::Request { req, replies, .. } = m {
                let _ = replies.send(Ok(
                    json!({"role": req.role.name(), "echo": req.payload}).into()
                ));
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(listeners.run(tx, shutdown));

    // Over TLS, through the recording proxy.
    let (proxy, seen) = recording_proxy(ports[0]).await;
    let (st, v) = call(proxy, pki.client(None), "test.echo", Some(TOKEN))
        .await
        .unwrap();
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["role"], json!("owner"), "the token was accepted");
    let tls_bytes = seen.lock().unwrap().clone();
    assert!(tls_bytes.len() > 500, "a TLS session was recorded");
    assert!(
        !contains(&tls_bytes, TOKEN.as_bytes()),
        "token in clear over TLS"
    );
    assert!(
        !contains(&tls_bytes, b"Bearer"),
        "HTTP header in clear over TLS"
    );
    assert!(
        !contains(&tls_bytes, b"test.echo"),
        "topic in clear over TLS"
    );

    // Control: the same request over plain (loopback) TCP shows it, so
    // the capture does see what is sent.
    let (proxy, seen) = recording_proxy(ports[1]).await;
    let s = tokio::net::TcpStream::connect(("127.0.0.1", proxy))
        .await
        .unwrap();
    let (st, _) = http_call(s, "test.echo", Some(TOKEN)).await.unwrap();
    assert_eq!(st, StatusCode::OK);
    assert!(contains(&seen.lock().unwrap(), TOKEN.as_bytes()));

    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
