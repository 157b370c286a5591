//! The front door of the real daemon under abuse: connection caps on
//! every listener kind, limits by role before a body is read, agent
//! sessions that flood, and the quick path's long heads.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A daemon with a `tls://` listener on 127.0.0.1 (client certificates
/// from its own CA: `fake[0-2]` agents, `alice` admin) besides its
/// `unix://` socket.
struct TlsSite {
    s: Scratch,
    d: Daemon,
    port: u16,
}

impl TlsSite {
    fn new(name: &str, serve: &str) -> TlsSite {
        let s = Scratch::new(name);
        let pki = s.path("pki");
        let pki = pki.to_str().unwrap();
        ca(&["init", pki]);
        ca(&["issue", pki, "localhost,fake[0-2]", "--san", "127.0.0.1"]);
        ca(&["issue", pki, "alice", "--role", "admin"]);
        let port = free_port();
        let cfg = format!(
            "{}[serve]\ntls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n\
             tls-client-ca = \"{pki}/ca.pem\"\n{serve}",
            fake_config(3, "")
        );
        let d = start(&s, &cfg, &["--listen", &format!("tls://127.0.0.1:{port}")]);
        TlsSite { s, d, port }
    }

    fn pid(&self) -> u32 {
        self.d.child.as_ref().expect("daemon running").id()
    }

    /// A TCP connection to the TLS port from `from` (a loopback address).
    fn tcp_from(&self, from: Ipv4Addr) -> TcpStream {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&SocketAddr::from((from, 0)).into()).unwrap();
        sock.connect(&SocketAddr::from((Ipv4Addr::LOCALHOST, self.port)).into())
            .unwrap();
        let tcp: TcpStream = sock.into();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        tcp.set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        tcp
    }

    /// A TLS connection from `from`, presenting `who`'s certificate.
    fn tls_from(&self, from: Ipv4Addr, who: Option<&str>) -> Tls {
        let cert = who.map(|w| {
            (
                self.s.path(&format!("pki/{w}.pem")),
                self.s.path(&format!("pki/{w}.key")),
            )
        });
        let cfg = tls::client_config(
            &self.s.path("pki/ca.pem"),
            cert.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        )
        .unwrap();
        let name = tls::server_name("localhost").unwrap();
        let conn = tls::rustls::ClientConnection::new(Arc::clone(&cfg), name).unwrap();
        tls::rustls::StreamOwned::new(conn, self.tcp_from(from))
    }
}

/// Send `head` (a request head without its final empty line) and
/// `body`, then read the answer until the server closes: (status, text).
/// The body goes in pieces, with a look for an early answer after each
/// (a server refusing it closes the connection, and a write into a closed
/// connection would reset it, answer and all).
fn exchange<S: Read + Write>(
    s: &mut S,
    tcp: impl Fn(&S) -> &TcpStream,
    head: &str,
    body: &[u8],
) -> (u16, String) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let _ = s.write_all(format!("{head}\r\n").as_bytes());
    let _ = s.flush();
    // As a careful client does (`Expect: 100-continue`'s reason): a
    // refusal decided from the head comes before any body is sent, and is
    // read before the body could make the server's close a reset that
    // destroys it.
    let _ = tcp(s).set_read_timeout(Some(Duration::from_millis(500)));
    let early = match s.read(&mut buf) {
        Ok(n) if n > 0 => {
            out.extend_from_slice(&buf[..n]);
            true
        }
        _ => false,
    };
    let _ = tcp(s).set_read_timeout(Some(Duration::from_millis(5)));
    for piece in body.chunks(256 << 10).filter(|_| !early) {
        if s.write_all(piece).and_then(|()| s.flush()).is_err() {
            break;
        }
        if let Ok(n) = s.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
            break;
        }
    }
    let _ = tcp(s).set_read_timeout(Some(Duration::from_secs(20)));
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

type Tls = tls::rustls::StreamOwned<tls::rustls::ClientConnection, TcpStream>;

fn sock(s: &Tls) -> &TcpStream {
    &s.sock
}

fn post_head(topic: &str, len: usize, extra: &str) -> String {
    format!(
        "POST /v1/{topic} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-length: {len}\r\n{extra}"
    )
}

/// Peak resident set size of `pid`, bytes.
fn peak_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// 400 TCP connections to the TLS port that never say a word hold only
/// the unauthenticated cap's worth of descriptors; an admin from another
/// address and the owner on `unix://` are answered meanwhile.
#[test]
fn unauthenticated_tls_flood_is_capped_per_address() {
    let site = TlsSite::new("ingress-tlsflood", "");
    let pid = site.pid();
    let before = open_fds(pid);
    let held: Vec<TcpStream> = (0..400)
        .map(|_| site.tcp_from(Ipv4Addr::LOCALHOST))
        .collect();
    // Let the accept loop see them all.
    std::thread::sleep(Duration::from_millis(500));
    let fds = open_fds(pid);
    eprintln!("figure: 400 silent TLS connections: {fds} descriptors (before: {before})");
    assert!(
        fds < 250 && fds < before + 64,
        "{fds} descriptors open (before the flood: {before})"
    );
    let mut admin = site.tls_from(Ipv4Addr::new(127, 0, 0, 2), Some("alice"));
    let (status, text) = exchange(
        &mut admin,
        sock,
        &post_head("resource.status", 2, ""),
        b"{}",
    );
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"online\""), "{text}");
    let t = Instant::now();
    site.d
        .rpc("resource.status", serde_json::json!({}))
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        site.d.log_text().contains(
            "too many unauthenticated connections from this peer: 8 (max-unauthenticated-per-peer)"
        ),
        "{}",
        site.d.log_text()
    );
    drop(held);
}

/// Bodies past the role's limit are refused before they are read: an
/// agent may not use `resource.drain` at all (403), and may send at most
/// 1 MiB on its own topics (413 from `Content-Length`, or while reading
/// a chunked body).  Three concurrent 16 MiB bodies leave the daemon's
/// peak RSS nearly where it was.
#[test]
fn oversized_bodies_are_refused_by_role_before_buffering() {
    let site = TlsSite::new("ingress-bodies", "");
    let pid = site.pid();
    let base = peak_rss(pid);
    let big = Arc::new(vec![b' '; 16 << 20]);
    let cases: [(&str, &str, u16, &str); 3] = [
        (
            "resource.drain",
            "",
            403,
            "resource.drain requires the admin role",
        ),
        (
            "resource.agent-heartbeat",
            "",
            413,
            "exceeds the limit of 1048576 bytes",
        ),
        (
            "resource.agent-heartbeat",
            "transfer-encoding: chunked\r\n",
            413,
            "exceeds the limit of 1048576 bytes",
        ),
    ];
    std::thread::scope(|scope| {
        for (topic, extra, want, text) in cases {
            let site = &site;
            let big = Arc::clone(&big);
            scope.spawn(move || {
                let mut c = site.tls_from(Ipv4Addr::LOCALHOST, Some("fake1"));
                let (head, body) = if extra.is_empty() {
                    (post_head(topic, big.len(), ""), big.to_vec())
                } else {
                    let head = format!(
                        "POST /v1/{topic} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{extra}"
                    );
                    let mut body = format!("{:x}\r\n", big.len()).into_bytes();
                    body.extend_from_slice(&big);
                    body.extend_from_slice(b"\r\n0\r\n\r\n");
                    (head, body)
                };
                let (status, got) = exchange(&mut c, sock, &head, &body);
                assert_eq!(status, want, "{topic} {extra:?}: {got}");
                assert!(got.contains(text), "{got}");
            });
        }
    });
    let grown = peak_rss(pid).saturating_sub(base);
    eprintln!(
        "figure: three 16 MiB bodies: peak RSS grew by {} MB",
        grown >> 20
    );
    assert!(grown < 150 << 20, "peak RSS grew by {} MB", grown >> 20);
    // The daemon is fine.
    site.d
        .rpc("resource.status", serde_json::json!({}))
        .unwrap();
}

/// A client that writes its whole body before reading (as curl does with
/// a chunked upload) still reads the 413 refused after the first 1 MiB:
/// the server drains the rest before closing (a lingering close) instead
/// of resetting the connection under the unread reply.
#[test]
fn a_body_refused_midway_is_drained_so_the_refusal_is_read() {
    let site = TlsSite::new("ingress-linger", "");
    for round in 0..3 {
        let mut c = site.tls_from(Ipv4Addr::LOCALHOST, Some("fake1"));
        let head = "POST /v1/resource.agent-heartbeat HTTP/1.1\r\nhost: localhost\r\n\
                    connection: close\r\ntransfer-encoding: chunked\r\n\r\n";
        let big = vec![b' '; 8 << 20];
        let mut body = format!("{:x}\r\n", big.len()).into_bytes();
        body.extend_from_slice(&big);
        body.extend_from_slice(b"\r\n0\r\n\r\n");
        sock(&c)
            .set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        c.write_all(head.as_bytes())
            .and_then(|()| c.write_all(&body))
            .and_then(|()| c.flush())
            .unwrap_or_else(|e| panic!("round {round}: the body was cut off: {e}"));
        sock(&c)
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 413"), "round {round}: {got}");
        assert!(got.contains("exceeds the limit of 1048576 bytes"), "{got}");
    }
}

/// One agent certificate floods its own session with `{}` lines: the
/// session stops reading when the service loop is behind, so the daemon
/// stays small and the owner's requests on `unix://` stay quick.
#[test]
fn a_flooding_agent_session_is_slowed_not_queued() {
    let site = TlsSite::new("ingress-sessionflood", "");
    let pid = site.pid();
    let mut c = site.tls_from(Ipv4Addr::LOCALHOST, Some("fake0"));
    let hello = "{\"hostname\":\"fake0\"}\n";
    let head = format!(
        "POST /v1/resource.agent HTTP/1.1\r\nhost: localhost\r\nconnection: upgrade\r\n\
         upgrade: {}\r\ncontent-length: {}\r\n\r\n{hello}",
        rpc::wire::SESSION_UPGRADE,
        hello.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    c.flush().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"rank\"") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 101"));
    c.sock
        .set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let flood = b"{}\n".repeat(20_000);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worst, max_rss) = std::thread::scope(|scope| {
        let stop2 = Arc::clone(&stop);
        let prober = scope.spawn(move || {
            let (mut worst, mut max_rss) = (Duration::ZERO, 0);
            while !stop2.load(std::sync::atomic::Ordering::Acquire) {
                let t = Instant::now();
                site.d
                    .rpc("resource.status", serde_json::json!({}))
                    .unwrap();
                worst = worst.max(t.elapsed());
                max_rss = max_rss.max(rss_bytes(pid));
                std::thread::sleep(Duration::from_millis(100));
            }
            (worst, max_rss)
        });
        let end = Instant::now() + Duration::from_secs(8);
        while Instant::now() < end {
            // A write that times out is the backpressure: try again.
            let _ = c.write_all(&flood);
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        prober.join().unwrap()
    });
    eprintln!(
        "figure: 8 s session flood: owner status worst {worst:?}, RSS max {} MB",
        max_rss >> 20
    );
    assert!(
        worst < Duration::from_secs(2),
        "owner status took {worst:?}"
    );
    assert!(max_rss < 200 << 20, "RSS reached {} MB", max_rss >> 20);
}

/// A head over the quick path's peek (2 KiB) sent in one write is
/// answered by the HTTP path on `unix://`.
#[test]
fn a_long_head_on_unix_is_answered() {
    let s = Scratch::new("ingress-longhead");
    let d = start(&s, &fake_config(2, ""), &[]);
    let pad = "x".repeat(2150);
    let req = format!(
        "POST /v1/resource.status HTTP/1.1\r\nhost: x\r\nx-pad: {pad}\r\nconnection: close\r\n\
         content-length: 2\r\n\r\n{{}}"
    );
    assert!(req.len() > 2100);
    let mut c = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).expect("an answer within 5 s");
    eprintln!("figure: a {}-byte request on unix:// answered", req.len());
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"online\""), "{text}");
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n")
}

/// The web view follows the RPC policy on TLS: an anonymous client reads
/// it only with `public-read = true` (the probes stay open to anyone);
/// a `Host` that does not name the listener is refused (421).
#[test]
fn web_reads_follow_the_rpc_policy_and_check_the_host() {
    let site = TlsSite::new("ingress-web", "");
    let lo = Ipv4Addr::LOCALHOST;
    // (who, path, Host, status, a part of the answer)
    for (who, path, host, want, part) in [
        (None, "/api/status", "localhost", 401, "public-read = true"),
        (None, "/", "localhost", 401, "public-read = true"),
        (None, "/metrics", "localhost", 200, ""),
        (
            Some("alice"),
            "/api/status",
            "localhost:1",
            200,
            "\"online\"",
        ),
        (
            Some("alice"),
            "/api/status",
            "rebound.example",
            421,
            "Host 'rebound.example' does not name this listener",
        ),
    ] {
        let request = get(path, host);
        let (status, text) = exchange(&mut site.tls_from(lo, who), sock, &request, b"");
        assert_eq!(status, want, "{who:?} {path} {host}: {text}");
        assert!(text.contains(part), "{who:?} {path} {host}: {text}");
    }
    drop(site);

    let open = TlsSite::new("ingress-web-public", "public-read = true\n");
    let (status, text) = exchange(
        &mut open.tls_from(lo, None),
        sock,
        &get("/api/status", "127.0.0.1"),
        b"",
    );
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"online\""), "{text}");
}
