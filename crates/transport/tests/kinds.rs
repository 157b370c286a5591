//! The same limit cases over every listener kind (`unix://`, `tcp://`,
//! `tls://`, `flux://`), in one table: the connection cap, the cap on
//! unauthenticated connections of one address (and leaving it by
//! authenticating), an oversized header, an oversized body, a request
//! that does not finish arriving, a connection that stays silent.  (A
//! relay's child listeners are these same `Listeners`.)

mod common;

use common::*;
use rpc::uri::Uri;
use std::sync::mpsc as smpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use transport::{Incoming, Limits, ListenOptions, Listeners, TlsListen};

const TOKEN: &str = "kinds-owner-token-4d1f";

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Unix,
    Tcp,
    Tls,
    Flux,
}

const KINDS: [Kind; 4] = [Kind::Unix, Kind::Tcp, Kind::Tls, Kind::Flux];

/// The service's certificate (`localhost`), issued by a fresh CA.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let (dir, ca) = new_ca("Kinds CA");
        issue(&ca, &["localhost"], "agent", &["127.0.0.1"]);
        Pki { dir }
    }

    fn path(&self, f: &str) -> std::path::PathBuf {
        self.dir.path().join("ca").join(f)
    }

    fn listen(&self) -> TlsListen {
        TlsListen {
            config: tls::server_config(
                &self.path("localhost.pem"),
                &self.path("localhost.key"),
                None,
            )
            .unwrap(),
            client_auth: false,
            roles: tls::RoleMap::default(),
        }
    }

    fn client(&self) -> Arc<tls::rustls::ClientConfig> {
        tls::client_config(&self.path("ca.pem"), None).unwrap()
    }
}

/// One listener of `kind` whose stub service echoes payloads.
struct Server {
    kind: Kind,
    uri: Uri,
    tls: Arc<tls::rustls::ClientConfig>,
    stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn start(kind: Kind, pki: &Pki, limits: Limits) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let uri = match kind {
        Kind::Unix => Uri::Unix(dir.path().join("s.sock")),
        Kind::Flux => Uri::Flux(dir.path().join("f.sock")),
        Kind::Tcp => Uri::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        },
        Kind::Tls => Uri::Tls {
            host: "127.0.0.1".into(),
            port: 0,
        },
    };
    let opts = ListenOptions {
        token: Some(TOKEN.into()),
        tls: Some(pki.listen()),
        limits,
        ..ListenOptions::default()
    };
    let listeners = Listeners::bind(&[uri], &opts).unwrap();
    let uri = listeners.addresses()[0].clone();
    let (tx, rx) = smpsc::channel::<Incoming>();
    std::thread::spawn(move || {
        while let Ok(m) = rx.recv() {
            if let Incoming::Request { req, replies, .. } = m {
                let _ = replies.send(Ok(req.payload.clone().into()));
            }
        }
    });
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(listeners.run(tx, shutdown));
    Server {
        kind,
        uri,
        tls: pki.client(),
        stop,
        _dir: dir,
    }
}

impl Server {
    /// A connection as the owner would open it (TLS handshake done, Flux
    /// handshake byte read: `Err(byte)` if it is not 0), or `Err(0)` if
    /// the listener closed it at once.
    async fn connect(&self) -> Result<Box<dyn Io>, u8> {
        match &self.uri {
            Uri::Unix(p) => Ok(Box::new(tokio::net::UnixStream::connect(p).await.unwrap())),
            Uri::Flux(p) => {
                let mut s = tokio::net::UnixStream::connect(p).await.unwrap();
                let mut b = [0u8; 1];
                match s.read_exact(&mut b).await {
                    Ok(_) if b[0] == 0 => Ok(Box::new(s)),
                    Ok(_) => Err(b[0]),
                    Err(_) => Err(0),
                }
            }
            Uri::Tcp { host, port } => Ok(Box::new(
                tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .unwrap(),
            )),
            Uri::Tls { host, port } => {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .unwrap();
                let name = tls::server_name("localhost").unwrap();
                match tls::TlsConnector::from(Arc::clone(&self.tls))
                    .connect(name, tcp)
                    .await
                {
                    Ok(s) => Ok(Box::new(s)),
                    Err(_) => Err(0),
                }
            }
        }
    }

    /// An HTTP request head for `topic` with the owner's credentials,
    /// `extra` headers, without its final empty line.
    fn head(&self, topic: &str, extra: &str) -> String {
        let auth = match self.kind {
            Kind::Tcp | Kind::Tls => format!("authorization: Bearer {TOKEN}\r\n"),
            _ => String::new(),
        };
        format!("POST /v1/{topic} HTTP/1.1\r\nhost: localhost\r\n{auth}{extra}")
    }
}

/// A Flux request message (RFC 3) with `payload`.
fn flux_message(topic: &str, payload: &[u8]) -> Vec<u8> {
    flux_request_bytes(topic, Some(payload), 0, u32::MAX, 1)
}

/// What the client sees.
#[derive(Debug, PartialEq)]
enum Seen {
    /// An HTTP answer with this status (and text).
    Status(u16),
    /// The connection was refused at the Flux handshake with this errno.
    Handshake(u8),
    /// The connection was closed without an answer.
    Closed,
    /// A Flux connection was accepted (handshake byte 0).
    Admitted,
}

/// Read what comes until EOF (at most `within`): the HTTP status, or
/// `Closed` if nothing came; `None` if the connection is still open.
async fn outcome(s: &mut Box<dyn Io>, within: Duration) -> Option<(Seen, String)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let seen = match text.split_whitespace().nth(1).and_then(|c| c.parse().ok()) {
        Some(code) if text.starts_with("HTTP/1.1 ") => Seen::Status(code),
        _ => Seen::Closed,
    };
    Some((seen, text))
}

/// The limits every case runs with (small, to be reached fast).
fn limits() -> Limits {
    Limits {
        max_connections: 2,
        max_request_bytes: 4096,
        max_guest_request_bytes: 4096,
        request_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        auth_timeout: Duration::from_secs(1),
        ..Limits::default()
    }
}

#[derive(Debug, Clone, Copy)]
enum Case {
    /// A third connection to a listener holding `max-connections` (2).
    ConnectionCap,
    /// A second connection while one that has not authenticated is held
    /// (`max-unauthenticated-per-peer` = 1; Unix peers are known by uid).
    UnauthenticatedCap,
    /// The same after the first one authenticated with a request: it no
    /// longer counts as unauthenticated.
    AuthenticatedLeavesTheCap,
    /// A 40 KiB request head (a Flux message declaring 40 KiB).
    OversizedHeader,
    /// A body (message) over `max-request-bytes`.
    OversizedBody,
    /// A request that never finishes arriving (`request-timeout`).
    SlowRequest,
    /// A connection that says nothing (`idle-timeout`, `auth-timeout`,
    /// the HTTP head timeout).
    Silent,
}

/// What each case must give on each kind.
fn expected(case: Case, kind: Kind) -> Seen {
    use Kind::*;
    match (case, kind) {
        (Case::ConnectionCap, Unix | Tcp) => Seen::Status(503),
        (Case::ConnectionCap, Tls) => Seen::Closed,
        (Case::ConnectionCap, Flux) => Seen::Handshake(rpc::errno::EAGAIN as u8),
        (Case::UnauthenticatedCap, Tcp) => Seen::Status(503),
        (Case::UnauthenticatedCap, Tls) => Seen::Closed,
        (Case::UnauthenticatedCap | Case::AuthenticatedLeavesTheCap, Flux) => Seen::Admitted,
        (Case::UnauthenticatedCap | Case::AuthenticatedLeavesTheCap, _) => Seen::Status(200),
        (Case::OversizedHeader, Flux) => Seen::Closed,
        (Case::OversizedHeader, _) => Seen::Status(431),
        (Case::OversizedBody, Flux) => Seen::Closed,
        (Case::OversizedBody, _) => Seen::Status(413),
        (Case::SlowRequest, Flux) => Seen::Closed,
        (Case::SlowRequest, _) => Seen::Status(408),
        (Case::Silent, _) => Seen::Closed,
    }
}

/// What an HTTP refusal's text names.
fn named(case: Case) -> &'static str {
    match case {
        Case::ConnectionCap => "(max-connections)",
        Case::UnauthenticatedCap => "(max-unauthenticated-per-peer)",
        Case::OversizedHeader => "request head exceeds the limit of 32768 bytes",
        Case::OversizedBody => "request body exceeds the limit of 4096 bytes",
        Case::SlowRequest => "(request-timeout)",
        Case::AuthenticatedLeavesTheCap | Case::Silent => "",
    }
}

async fn run(case: Case, server: &Server) -> (Seen, String) {
    let http = server.kind != Kind::Flux;
    let within = Duration::from_secs(5);
    match case {
        Case::ConnectionCap => {
            let mut held = Vec::new();
            for _ in 0..2 {
                held.push(server.connect().await.expect("admitted"));
            }
            // Let the listener count them (a TLS connection is admitted
            // before its handshake; an HTTP one before its first byte).
            tokio::time::sleep(Duration::from_millis(100)).await;
            match server.connect().await {
                Err(0) => (Seen::Closed, String::new()),
                Err(b) => (Seen::Handshake(b), String::new()),
                Ok(mut s) => {
                    if http {
                        let _ = s
                            .write_all(
                                format!("{}\r\n", server.head("t.x", "content-length: 2\r\n"))
                                    .as_bytes(),
                            )
                            .await;
                        let _ = s.write_all(b"{}").await;
                    }
                    outcome(&mut s, within).await.expect("refused and closed")
                }
            }
        }
        Case::UnauthenticatedCap | Case::AuthenticatedLeavesTheCap => {
            let mut first = server.connect().await.expect("admitted");
            if matches!(case, Case::AuthenticatedLeavesTheCap) && http {
                let head = server.head("t.x", "content-length: 2\r\n");
                first
                    .write_all(format!("{head}\r\n{{}}").as_bytes())
                    .await
                    .unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 1024];
                while !got.ends_with(b"{}") {
                    let n = tokio::time::timeout(within, first.read(&mut buf))
                        .await
                        .expect("an answer")
                        .unwrap();
                    assert!(n > 0, "{}", String::from_utf8_lossy(&got));
                    got.extend_from_slice(&buf[..n]);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            match server.connect().await {
                Err(0) => (Seen::Closed, String::new()),
                Err(b) => (Seen::Handshake(b), String::new()),
                Ok(_) if !http => (Seen::Admitted, String::new()),
                Ok(mut s) => {
                    let head = server.head("t.x", "content-length: 2\r\nconnection: close\r\n");
                    let _ = s.write_all(format!("{head}\r\n{{}}").as_bytes()).await;
                    outcome(&mut s, within).await.expect("answered and closed")
                }
            }
        }
        Case::OversizedHeader => {
            let mut s = server.connect().await.expect("admitted");
            let pad = "x".repeat(40 << 10);
            if http {
                let head = server.head("t.x", &format!("x-pad: {pad}\r\ncontent-length: 2\r\n"));
                let _ = s.write_all(format!("{head}\r\n{{}}").as_bytes()).await;
            } else {
                let msg = flux_message("t.x", pad.as_bytes());
                let _ = s.write_all(&msg[..8]).await;
            }
            outcome(&mut s, within).await.expect("refused and closed")
        }
        Case::OversizedBody => {
            let mut s = server.connect().await.expect("admitted");
            let body = format!("\"{}\"", "y".repeat(8000));
            if http {
                let head = server.head("t.x", &format!("content-length: {}\r\n", body.len()));
                let _ = s.write_all(format!("{head}\r\n").as_bytes()).await;
            } else {
                let _ = s.write_all(&flux_message("t.x", body.as_bytes())).await;
            }
            outcome(&mut s, within).await.expect("refused and closed")
        }
        Case::SlowRequest => {
            let mut s = server.connect().await.expect("admitted");
            if http {
                let head = server.head("t.x", "content-length: 10\r\nconnection: close\r\n");
                s.write_all(format!("{head}\r\n{{").as_bytes())
                    .await
                    .unwrap();
            } else {
                let msg = flux_message("t.x", b"{}");
                s.write_all(&msg[..msg.len() - 3]).await.unwrap();
            }
            outcome(&mut s, within).await.expect("closed")
        }
        Case::Silent => {
            let mut s = server.connect().await.expect("admitted");
            outcome(&mut s, within).await.expect("closed")
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_limits_on_every_listener_kind() {
    let pki = Pki::new();
    let cases = [
        Case::ConnectionCap,
        Case::UnauthenticatedCap,
        Case::AuthenticatedLeavesTheCap,
        Case::OversizedHeader,
        Case::OversizedBody,
        Case::SlowRequest,
        Case::Silent,
    ];
    let mut failures = Vec::new();
    for case in cases {
        for kind in KINDS {
            let limits = match case {
                Case::UnauthenticatedCap | Case::AuthenticatedLeavesTheCap => Limits {
                    max_connections: 8,
                    max_unauthenticated_per_peer: 1,
                    ..limits()
                },
                _ => limits(),
            };
            let server = start(kind, &pki, limits);
            let t = Instant::now();
            let (seen, text) = run(case, &server).await;
            let want = expected(case, kind);
            let refused = matches!(seen, Seen::Status(c) if c != 200);
            if seen != want || (refused && !text.contains(named(case))) {
                failures.push(format!(
                    "{case:?} on {kind:?}: {seen:?}, wanted {want:?}: {text}"
                ));
            }
            assert!(
                t.elapsed() < Duration::from_secs(8),
                "{case:?} on {kind:?} took {:?}",
                t.elapsed()
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
