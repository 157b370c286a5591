//! One HTTP exchange over a fresh connection.
//!
//! hyper's HTTP/1 client splits a connection into a request sender and a
//! connection future that performs the I/O.  Instead of spawning that
//! future on a runtime, every await here polls it alongside, so nothing
//! outlives the exchange: dropping an [`Exchange`] (or a [`LineStream`])
//! closes the socket at once, which is what cancels a streaming request.
//!
//! A non-streaming call over a Unix socket ([`call`]) does without hyper:
//! it writes the bytes hyper would write and reads the reply itself while
//! the reply is an ordinary one (a complete head with one
//! `Content-Length`); anything else is handed to hyper as it arrived.

use crate::{ClientError, ReplyStream};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Connection as HyperConnection, SendRequest};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rpc::uri::Uri;
use rpc::{wire, RpcError};
use serde_json::Value;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Largest non-streaming reply body, and largest single stream line.
const MAX_REPLY: usize = 1 << 30;

/// A Unix, TCP or TLS stream.
#[derive(Debug)]
enum Stream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
    Tls(Box<tls::client::TlsStream<tokio::net::TcpStream>>),
    /// A one-shot call's socket handed to hyper ([`Replay`]).
    Replay(Box<Replay>),
}

/// How long a connection (TCP connect and TLS handshake) may take: a
/// dead host drops the SYN and the kernel would wait minutes; the next
/// server of a list should be tried instead.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `connect`, given up after [`CONNECT_TIMEOUT`].
async fn with_connect_timeout<T>(connect: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no connection within {} s (host down?)",
                CONNECT_TIMEOUT.as_secs()
            ),
        )),
    }
}

impl Stream {
    async fn connect(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
    ) -> io::Result<Stream> {
        with_connect_timeout(Stream::connect_now(uri, tls_config)).await
    }

    async fn connect_now(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
    ) -> io::Result<Stream> {
        match uri {
            Uri::Tls { host, port } => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                let _ = s.set_nodelay(true);
                let s = tls::connect(s, host, tls_config, "--ca or ROSTER_CA").await?;
                Ok(Stream::Tls(Box::new(s)))
            }
            Uri::Unix(path) => connect_unix(path).await.map(Stream::Unix),
            Uri::Tcp { host, port } => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }
            Uri::Flux(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "flux:// is not supported by this client (use unix:// or tcp://)",
            )),
        }
    }
}

/// Connect to a Unix socket without a turn of the event loop: a local
/// stream socket is connected as soon as `connect` returns (or refused
/// at once), so the request goes out right away and is in the server's
/// socket when the server accepts it.  When the listener's backlog is
/// full, or the path cannot be a socket address, tokio's connect (which
/// says so, in its words).
async fn connect_unix(path: &Path) -> io::Result<tokio::net::UnixStream> {
    match connect_unix_now(path) {
        Some(s) => tokio::net::UnixStream::from_std(s?),
        None => tokio::net::UnixStream::connect(path).await,
    }
}

/// [`connect_unix`]'s immediate connect: `None` when it is tokio's turn.
fn connect_unix_now(path: &Path) -> Option<io::Result<std::os::unix::net::UnixStream>> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path).ok()?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    );
    let fd = match fd {
        Ok(fd) => fd,
        Err(e) => return Some(Err(e.into())),
    };
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => Some(Ok(std::os::unix::net::UnixStream::from(fd))),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INPROGRESS) => None,
        Err(e) => Some(Err(e.into())),
    }
}

/// Send on a socket without waiting (and without `SIGPIPE`): how much it
/// took, `Ok(0)` when it had no room.
fn send_now(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    use rustix::net::SendFlags;
    match rustix::net::send(fd, buf, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
        Ok(n) => Ok(n),
        Err(rustix::io::Errno::AGAIN) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Write to a Unix socket at once: a fresh connection's readiness is not
/// known to tokio before a turn of its event loop, which would hold the
/// request back; the socket takes a request without waiting nearly always.
/// When it does not, tokio's write (which waits for room).
fn poll_write_unix(
    s: &mut tokio::net::UnixStream,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>> {
    match send_now(s.as_fd(), buf) {
        Ok(0) if !buf.is_empty() => Pin::new(s).poll_write(cx, buf),
        r => Poll::Ready(r),
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Replay(r) => r.poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Unix(s) => poll_write_unix(s, cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            // The request went out before the socket was handed over.
            Stream::Replay(r) => {
                r.sent = true;
                Poll::Ready(r.write_err.take().map_or(Ok(buf.len()), Err))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Replay(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Replay(r) => Pin::new(&mut r.sock).poll_shutdown(cx),
        }
    }
}

type Driver = Pin<Box<HyperConnection<TokioIo<Stream>, Full<Bytes>>>>;

/// The I/O side of a connection, polled whenever we wait on it.
struct Conn {
    driver: Option<Driver>,
    // Kept so the connection is not shut down early.
    send: Option<SendRequest<Full<Bytes>>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("open", &self.driver.is_some())
            .finish()
    }
}

impl Conn {
    /// A reply's status, `errnum` header and body (at most `MAX_REPLY`
    /// bytes), read while driving the connection.
    async fn read_reply(
        &mut self,
        resp: Response<Incoming>,
        topic: &str,
    ) -> Result<(StatusCode, Option<i32>, Bytes), ClientError> {
        let status = resp.status();
        let errnum = resp
            .headers()
            .get(wire::ERRNUM_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i32>().ok());
        let collected = self
            .drive(Limited::new(resp.into_body(), MAX_REPLY).collect())
            .await;
        match collected {
            Ok(c) => Ok((status, errnum, c.to_bytes())),
            Err(e) => match e.downcast::<hyper::Error>() {
                Ok(he) => Err(hyper_err(*he)),
                Err(other) => Err(ClientError::Protocol(format!("reply to {topic}: {other}"))),
            },
        }
    }

    /// Send `req` and wait for its response head.
    async fn send(
        &mut self,
        mut send: SendRequest<Full<Bytes>>,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, ClientError> {
        let resp = self
            .drive(send.send_request(req))
            .await
            .map_err(hyper_err)?;
        self.send = Some(send);
        Ok(resp)
    }

    /// Await `fut` while driving the connection.
    async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        tokio::pin!(fut);
        loop {
            let Some(driver) = self.driver.as_mut() else {
                return fut.await;
            };
            tokio::select! {
                biased;
                out = &mut fut => return out,
                r = driver.as_mut() => {
                    // Closed or failed: whatever `fut` waits on now resolves
                    // (with an error if the exchange was cut short).
                    let _ = r;
                    self.driver = None;
                }
            }
        }
    }
}

/// A hyper error as a client error: I/O failures as `Io`, the rest (e.g.
/// "connection closed before message completed") as `Protocol`.
fn hyper_err(e: hyper::Error) -> ClientError {
    if e.is_incomplete_message() || e.is_canceled() {
        return ClientError::Lost(format!("error talking to the service: {e}"));
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return ClientError::Io(io::Error::new(io.kind(), e.to_string()));
        }
        src = s.source();
    }
    ClientError::Protocol(format!("error talking to the service: {e}"))
}

/// A request sent and its response head received.
pub(crate) struct Exchange {
    conn: Conn,
    resp: Response<Incoming>,
    topic: String,
}

/// Connect and do the HTTP/1 handshake.
async fn open(
    uri: &Uri,
    tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
) -> Result<(Conn, SendRequest<Full<Bytes>>), ClientError> {
    let stream = Stream::connect(uri, tls_config)
        .await
        .map_err(|source| ClientError::Connect {
            uri: uri.clone(),
            source,
        })?;
    handshake(stream).await
}

/// The HTTP/1 handshake on a connected stream.
async fn handshake(stream: Stream) -> Result<(Conn, SendRequest<Full<Bytes>>), ClientError> {
    let (send, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(hyper_err)?;
    let conn = Conn {
        driver: Some(Box::pin(driver)),
        send: None,
    };
    Ok((conn, send))
}

/// `req` as the only request of its connection: the server closes it
/// after the reply instead of waiting for a next request that never comes.
fn closing(mut req: Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    req.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    req
}

/// The error for a topic that is not one.
fn check_topic(topic: &str) -> Result<(), ClientError> {
    if wire::topic_of(&wire::path_for(topic)) != Some(topic) {
        return Err(ClientError::Protocol(format!(
            "invalid topic '{topic}': expected letters, digits and '.-_'"
        )));
    }
    Ok(())
}

/// The `Authorization` header's value for a token.
fn bearer(token: &str) -> Result<HeaderValue, ClientError> {
    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
        ClientError::Protocol("the token contains characters not allowed in HTTP headers".into())
    })
}

/// The HTTP request of an RPC.
fn build_request(
    uri: &Uri,
    token: Option<&str>,
    topic: &str,
    payload: &Value,
    streaming: bool,
) -> Result<Request<Full<Bytes>>, ClientError> {
    check_topic(topic)?;
    let host = match uri {
        Uri::Tcp { .. } => uri.to_string().trim_start_matches("tcp://").to_string(),
        Uri::Tls { .. } => uri.to_string().trim_start_matches("tls://").to_string(),
        _ => "localhost".to_string(),
    };
    let body = wire::body_of(payload);
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(wire::path_for(topic))
        .header(HOST, host);
    if !body.is_empty() {
        req = req.header(CONTENT_TYPE, wire::JSON);
    }
    if streaming {
        req = req.header(wire::STREAMING_HEADER, "1");
    }
    if let Some(t) = token {
        req = req.header(wire::AUTH_HEADER, bearer(t)?);
    }
    req.body(Full::new(Bytes::from(body)))
        .map_err(|e| ClientError::Protocol(format!("cannot build a request for {topic}: {e}")))
}

/// A connection kept open for many non-streaming requests, one at a time
/// (HTTP/1.1 keep-alive): no connection set-up or TLS handshake per call.
pub struct Connection {
    conn: Conn,
    uri: Uri,
    token: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("uri", &self.uri)
            .field("conn", &self.conn)
            .finish()
    }
}

impl Connection {
    pub(crate) async fn open(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
        token: Option<&str>,
    ) -> Result<Connection, ClientError> {
        let (mut conn, send) = open(uri, tls_config).await?;
        conn.send = Some(send);
        Ok(Connection {
            conn,
            uri: uri.clone(),
            token: token.map(str::to_string),
        })
    }

    /// One request, one reply, on this connection.
    pub async fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, ClientError> {
        let req = build_request(&self.uri, self.token.as_deref(), topic, &payload, false)?;
        let Some(mut send) = self.conn.send.take() else {
            return Err(ClientError::Protocol("the connection is closed".into()));
        };
        self.conn.drive(send.ready()).await.map_err(hyper_err)?;
        let resp = self.conn.send(send, req).await?;
        let (status, errnum, body) = self.conn.read_reply(resp, topic).await?;
        parse_reply(status, errnum, &body, topic)
    }
}

impl Exchange {
    pub(crate) async fn start(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
        token: Option<&str>,
        topic: &str,
        payload: &Value,
        streaming: bool,
    ) -> Result<Exchange, ClientError> {
        let req = closing(build_request(uri, token, topic, payload, streaming)?);
        let (mut conn, send) = open(uri, tls_config).await?;
        let resp = conn.send(send, req).await?;
        Ok(Exchange {
            conn,
            resp,
            topic: topic.to_string(),
        })
    }

    async fn body(self) -> Result<(StatusCode, Option<i32>, Bytes), ClientError> {
        let Exchange {
            mut conn,
            resp,
            topic,
        } = self;
        conn.read_reply(resp, &topic).await
    }

    /// Turn a streaming exchange with `uri` into its line stream (or the
    /// error the service answered instead).
    pub(crate) async fn into_stream(self, uri: Uri) -> Result<ReplyStream, ClientError> {
        if self.resp.status() != StatusCode::OK {
            let topic = self.topic.clone();
            let (status, errnum, body) = self.body().await?;
            return Err(error_reply(status, errnum, &body, &topic));
        }
        let Exchange { conn, resp, topic } = self;
        Ok(ReplyStream {
            uri,
            inner: LineStream {
                conn,
                body: resp.into_body(),
                buf: LineBuffer::default(),
                done: false,
                topic,
            },
        })
    }
}

/// One non-streaming call: its reply's value (see [`parse_reply`]).
pub(crate) async fn call(
    uri: &Uri,
    tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
    token: Option<&str>,
    topic: &str,
    payload: &Value,
) -> Result<Value, ClientError> {
    let (status, errnum, body) = match uri {
        Uri::Unix(path) => unix_call(uri, path, token, topic, payload).await?,
        _ => {
            let ex = Exchange::start(uri, tls_config, token, topic, payload, false).await?;
            ex.body().await?
        }
    };
    parse_reply(status, errnum, &body, topic)
}

/// The most of a reply's head read without hyper: a Roster reply's head
/// is under 200 bytes.
const ONE_SHOT_HEAD: usize = 16 << 10;

/// The bytes hyper writes for the request of [`build_request`] to a
/// `unix://` service, made [`closing`]: the same request line and
/// headers in the same order (`content-type` and `content-length` only
/// with a body).
fn one_shot_request(
    token: Option<&str>,
    topic: &str,
    payload: &Value,
) -> Result<Vec<u8>, ClientError> {
    use std::io::Write;
    check_topic(topic)?;
    let auth = token.map(bearer).transpose()?;
    let body = wire::body_of(payload);
    let mut out = Vec::with_capacity(160 + body.len());
    // Writes to a Vec cannot fail.
    let _ = write!(
        out,
        "POST {}{topic} HTTP/1.1\r\nhost: localhost\r\n",
        wire::PATH_PREFIX
    );
    if !body.is_empty() {
        let _ = write!(out, "content-type: {}\r\n", wire::JSON);
    }
    if let Some(v) = auth {
        let _ = write!(out, "{}: ", wire::AUTH_HEADER);
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n");
    if !body.is_empty() {
        let _ = write!(out, "content-length: {}\r\n", body.len());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}

/// What the head of a reply says, as far as a one-shot call goes.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// Not all in yet.
    Partial,
    /// An ordinary reply: `len` bytes of head, then `body` bytes of body.
    Plain {
        len: usize,
        status: StatusCode,
        errnum: Option<i32>,
        body: u64,
    },
    /// Anything else (an error, 1xx, no body or no length, chunked...):
    /// hyper's to read.
    Other,
}

fn parse_head(bytes: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Head::Partial,
        Err(_) => return Head::Other,
    };
    let Some(status) = resp.code.and_then(|c| StatusCode::from_u16(c).ok()) else {
        return Head::Other;
    };
    // Replies without a body, or not the last of the exchange.
    if status.is_informational() || matches!(status.as_u16(), 204 | 304) {
        return Head::Other;
    }
    let (mut body, mut errnum) = (None, None);
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let digits = !h.value.is_empty() && h.value.iter().all(u8::is_ascii_digit);
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.parse().ok());
            match (body, n) {
                (None, Some(n)) if digits => body = Some(n),
                _ => return Head::Other,
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Head::Other;
        } else if errnum.is_none() && h.name.eq_ignore_ascii_case(wire::ERRNUM_HEADER) {
            // The first one, as `HeaderMap::get` (and `to_str` takes
            // visible ASCII only).
            let visible = h
                .value
                .iter()
                .all(|&b| b == b'\t' || (32..127).contains(&b));
            errnum = Some(
                std::str::from_utf8(h.value)
                    .ok()
                    .filter(|_| visible)
                    .and_then(|v| v.trim().parse::<i32>().ok()),
            );
        }
    }
    match body {
        Some(body) => Head::Plain {
            len,
            status,
            errnum: errnum.flatten(),
            body,
        },
        None => Head::Other,
    }
}

/// A non-streaming call to a `unix://` service without hyper: connect,
/// send the request at once, read the reply.  A reply that is not
/// [`Head::Plain`], or cut short, goes to hyper with the bytes read so
/// far ([`Replay`]), which answers as it always did.
async fn unix_call(
    uri: &Uri,
    path: &Path,
    token: Option<&str>,
    topic: &str,
    payload: &Value,
) -> Result<(StatusCode, Option<i32>, Bytes), ClientError> {
    let request = one_shot_request(token, topic, payload)?;
    let connect = async {
        match connect_unix_now(path) {
            Some(s) => {
                let s = s?;
                let sent = send_now(s.as_fd(), &request);
                Ok((tokio::net::UnixStream::from_std(s)?, sent))
            }
            None => {
                let s = tokio::net::UnixStream::connect(path).await?;
                let sent = send_now(s.as_fd(), &request);
                Ok((s, sent))
            }
        }
    };
    let (sock, sent) =
        with_connect_timeout(connect)
            .await
            .map_err(|source| ClientError::Connect {
                uri: uri.clone(),
                source,
            })?;
    let replay = match send_rest(&sock, &request, sent).await {
        Err(e) => Replay::new(sock, Vec::new(), None, Some(e)),
        Ok(()) => match read_plain(&sock, topic).await? {
            Read::Plain(status, errnum, body) => return Ok((status, errnum, body)),
            Read::Other(read, read_err) => Replay::new(sock, read, read_err, None),
        },
    };
    replay.call(uri, token, topic, payload).await
}

/// Send what the first send of `request` left.
async fn send_rest(
    sock: &tokio::net::UnixStream,
    request: &[u8],
    sent: io::Result<usize>,
) -> io::Result<()> {
    let mut written = sent?;
    while written < request.len() {
        sock.writable().await?;
        let r = sock.try_io(tokio::io::Interest::WRITABLE, || {
            match send_now(sock.as_fd(), &request[written..]) {
                Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                r => r,
            }
        });
        match r {
            Ok(n) => written += n,
            Err(e) if retry_io(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn retry_io(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// What [`read_plain`] read.
enum Read {
    /// A [`Head::Plain`] reply: its status, `errnum` header and body.
    Plain(StatusCode, Option<i32>, Bytes),
    /// Another reply, or a head cut short: the bytes read, and the
    /// error reading met (else the end of the stream, or more to come).
    Other(Vec<u8>, Option<io::Error>),
}

/// Read a one-shot call's reply while it is a plain one.
async fn read_plain(sock: &tokio::net::UnixStream, topic: &str) -> Result<Read, ClientError> {
    let mut buf = vec![0; 4096];
    let mut len = 0;
    let mut head = Head::Partial;
    loop {
        let r = match sock.readable().await {
            Ok(()) => sock.try_read(&mut buf[len..]),
            Err(e) => Err(e),
        };
        let n = match r {
            Ok(n) => n,
            Err(e) if retry_io(&e) => continue,
            Err(e) => return cut_short(head, buf, len, Some(e)),
        };
        if n == 0 {
            return cut_short(head, buf, len, None);
        }
        len += n;
        if head == Head::Partial {
            head = parse_head(&buf[..len]);
        }
        let want = match head {
            Head::Partial if len < ONE_SHOT_HEAD => ONE_SHOT_HEAD,
            Head::Partial | Head::Other => {
                buf.truncate(len);
                return Ok(Read::Other(buf, None));
            }
            Head::Plain { body, .. } if body > MAX_REPLY as u64 => {
                return Err(ClientError::Protocol(format!(
                    "reply to {topic}: length limit exceeded"
                )));
            }
            Head::Plain {
                len: head_len,
                status,
                errnum,
                body,
            } => {
                let end = head_len + body as usize;
                if len >= end {
                    // Bytes after the body are not looked at (hyper's
                    // connection closes after its reply too).
                    buf.truncate(end);
                    let body = Bytes::from(buf).slice(head_len..);
                    return Ok(Read::Plain(status, errnum, body));
                }
                end
            }
        };
        if len == buf.len() {
            buf.resize(want.min(2 * len), 0);
        }
    }
}

/// A reply that ended (or failed) at `len` bytes.
fn cut_short(
    head: Head,
    mut buf: Vec<u8>,
    len: usize,
    err: Option<io::Error>,
) -> Result<Read, ClientError> {
    if let Head::Plain { .. } = head {
        // A body cut short: what hyper answers when it sees that (the
        // error of reading a body, of the kind that cut it).
        let kind = err.map_or(io::ErrorKind::UnexpectedEof, |e| e.kind());
        return Err(ClientError::Io(io::Error::new(
            kind,
            "error reading a body from connection",
        )));
    }
    // A head cut short: hyper says how.
    buf.truncate(len);
    Ok(Read::Other(buf, err))
}

/// A one-shot call's socket as hyper sees it when [`unix_call`] hands it
/// over: the request already sent (hyper's write goes nowhere, or fails
/// as sending did), then the bytes of the reply read so far (and the
/// error reading met), then the rest of the socket.
#[derive(Debug)]
struct Replay {
    /// Whether hyper wrote its request.
    sent: bool,
    read: Vec<u8>,
    at: usize,
    read_err: Option<io::Error>,
    write_err: Option<io::Error>,
    sock: tokio::net::UnixStream,
}

impl Replay {
    fn new(
        sock: tokio::net::UnixStream,
        read: Vec<u8>,
        read_err: Option<io::Error>,
        write_err: Option<io::Error>,
    ) -> Replay {
        Replay {
            sent: false,
            read,
            at: 0,
            read_err,
            write_err,
            sock,
        }
    }

    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.sent {
            // Nothing to read before the request is written: hyper takes
            // bytes on an idle connection for an unexpected message.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(rest) = self.read.get(self.at..).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = self.read_err.take() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.sock).poll_read(cx, buf)
    }

    /// The exchange, by hyper.
    async fn call(
        self,
        uri: &Uri,
        token: Option<&str>,
        topic: &str,
        payload: &Value,
    ) -> Result<(StatusCode, Option<i32>, Bytes), ClientError> {
        let req = closing(build_request(uri, token, topic, payload, false)?);
        let (mut conn, send) = handshake(Stream::Replay(Box::new(self))).await?;
        let resp = conn.send(send, req).await?;
        conn.read_reply(resp, topic).await
    }
}

/// The value of a single reply: the error it carries, `null` for an
/// empty body, else its JSON.
fn parse_reply(
    status: StatusCode,
    errnum: Option<i32>,
    body: &[u8],
    topic: &str,
) -> Result<Value, ClientError> {
    if status != StatusCode::OK {
        return Err(error_reply(status, errnum, body, topic));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|e| ClientError::Protocol(format!("the reply to {topic} is not JSON: {e}")))
}

/// The error of a non-200 reply: the error object of its body, else its
/// errno header, else a protocol error naming the status.
fn error_reply(status: StatusCode, errnum: Option<i32>, body: &[u8], topic: &str) -> ClientError {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        if let Some(e) = wire::as_error(&v) {
            return ClientError::Rpc(e);
        }
    }
    match errnum {
        Some(n) => ClientError::Rpc(RpcError::bare(n)),
        None => ClientError::Protocol(format!(
            "unexpected HTTP status {status} in reply to {topic}"
        )),
    }
}

/// NDJSON reply lines, decoded as they arrive.
pub(crate) struct LineStream {
    conn: Conn,
    body: Incoming,
    buf: LineBuffer,
    done: bool,
    topic: String,
}

impl std::fmt::Debug for LineStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineStream")
            .field("topic", &self.topic)
            .field("buffered", &self.buf.len())
            .field("done", &self.done)
            .finish()
    }
}

impl LineStream {
    pub(crate) async fn next(&mut self) -> Option<Result<Value, ClientError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(line) = self.buf.pop() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return self.decode(&line);
            }
            let frame = self.conn.drive(self.body.frame()).await;
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.push(&data);
                        if self.buf.len() > MAX_REPLY {
                            return self.fail(ClientError::Protocol(format!(
                                "a line of the {} reply stream exceeds {MAX_REPLY} bytes",
                                self.topic
                            )));
                        }
                    }
                }
                Some(Err(e)) => return self.fail(hyper_err(e)),
                None => {
                    if self.buf.is_blank() {
                        let topic = self.topic.clone();
                        return self.fail(ClientError::Lost(format!(
                            "the {topic} reply stream ended without an end-of-stream response"
                        )));
                    }
                    // A last line without its newline.
                    self.buf.push(b"\n");
                }
            }
        }
    }

    fn decode(&mut self, line: &[u8]) -> Option<Result<Value, ClientError>> {
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| wire::parse_stream_line(s).map_err(|e| e.to_string()));
        match parsed {
            Ok(Ok(v)) => Some(Ok(v)),
            Ok(Err(e)) if e.is_end_of_stream() => {
                self.done = true;
                None
            }
            Ok(Err(e)) => self.fail(ClientError::Rpc(e)),
            Err(e) => {
                let topic = self.topic.clone();
                self.fail(ClientError::Protocol(format!(
                    "invalid line in the {topic} reply stream: {e}"
                )))
            }
        }
    }

    fn fail(&mut self, e: ClientError) -> Option<Result<Value, ClientError>> {
        self.done = true;
        Some(Err(e))
    }
}

/// Bytes received and not yet split into lines.  Each byte is scanned
/// once and consumed lines are dropped in bulk, so a frame holding many
/// lines costs time proportional to its size.
#[derive(Debug, Default)]
struct LineBuffer {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    start: usize,
    /// `buf[start..scanned]` holds no newline.
    scanned: usize,
}

impl LineBuffer {
    fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// The next complete line, without its newline.
    fn pop(&mut self) -> Option<Vec<u8>> {
        let rest = self.buf.get(self.scanned..)?;
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let end = self.scanned + i;
                let line = self.buf.get(self.start..end).map(<[u8]>::to_vec);
                self.start = end + 1;
                self.scanned = self.start;
                line
            }
            None => {
                self.scanned = self.buf.len();
                None
            }
        }
    }

    fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    fn is_blank(&self) -> bool {
        match self.buf.get(self.start..) {
            Some(rest) => rest.iter().all(u8::is_ascii_whitespace),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// What a test server does with each connection.
    #[derive(Clone)]
    enum Serve {
        /// Read the request, then write these pieces, each after a pause
        /// of this many ms, then close.
        Reply(Vec<(u64, Vec<u8>)>),
        /// Close without reading the request.
        Drop,
    }

    /// A Unix socket server for `conns` connections, and the requests
    /// it read.
    fn server(
        path: &Path,
        request_len: usize,
        conns: usize,
        serve: Serve,
    ) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        let l = std::os::unix::net::UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..conns {
                let (mut c, _) = l.accept().unwrap();
                let Serve::Reply(pieces) = &serve else {
                    drop(c);
                    continue;
                };
                let mut req = vec![0; request_len];
                c.read_exact(&mut req).unwrap();
                got.push(req);
                for (ms, piece) in pieces {
                    std::thread::sleep(Duration::from_millis(*ms));
                    if c.write_all(piece).is_err() {
                        break;
                    }
                }
            }
            got
        })
    }

    type Reply = Result<(StatusCode, Option<i32>, Bytes), ClientError>;

    async fn by_hyper(uri: &Uri, token: Option<&str>, topic: &str, payload: &Value) -> Reply {
        let ex = Exchange::start(uri, None, token, topic, payload, false).await?;
        ex.body().await
    }

    async fn by_unix_call(uri: &Uri, token: Option<&str>, topic: &str, payload: &Value) -> Reply {
        let Uri::Unix(path) = uri else { panic!() };
        unix_call(uri, path, token, topic, payload).await
    }

    fn outcome(r: &Reply) -> String {
        match r {
            Ok((status, errnum, body)) => format!("{status} {errnum:?} {body:?}"),
            Err(e) => format!("{e:?} / {e} / {}", e.errnum()),
        }
    }

    /// The reply `pieces` (written with pauses) read by hyper and by the
    /// one-shot path: the same outcome.
    async fn same_as_hyper(serve: Serve) -> Reply {
        let (ours, hyper) = both(serve).await;
        assert_eq!(outcome(&ours), outcome(&hyper));
        ours
    }

    /// What the one-shot path and hyper make of a server.
    async fn both(serve: Serve) -> (Reply, Reply) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let uri = Uri::Unix(path.clone());
        let payload = serde_json::json!({"targets": "1", "reason": "r"});
        let topic = "resource.drain";
        let n = one_shot_request(None, topic, &payload).unwrap().len();
        let srv = server(&path, n, 2, serve);
        let hyper = by_hyper(&uri, None, topic, &payload).await;
        let ours = by_unix_call(&uri, None, topic, &payload).await;
        srv.join().unwrap();
        (ours, hyper)
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\
        content-length: 7\r\ndate: Fri, 27 Nov 2026 15:06:58 GMT\r\n\r\n{\"a\":1}";

    fn whole(reply: &[u8]) -> Serve {
        Serve::Reply(vec![(0, reply.to_vec())])
    }

    #[test]
    fn the_one_shot_request_is_what_hyper_writes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cases = [
            (None, "resource.status", Value::Null),
            (None, "resource.status", serde_json::json!({})),
            (
                Some("tok-1"),
                "resource.drain",
                serde_json::json!({"targets": "0-3", "reason": "é \"x\""}),
            ),
        ];
        for (token, topic, payload) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.sock");
            let uri = Uri::Unix(path.clone());
            let ours = one_shot_request(token, topic, &payload).unwrap();
            let srv = server(&path, ours.len(), 1, whole(OK));
            let r = rt.block_on(by_hyper(&uri, token, topic, &payload));
            assert!(r.is_ok(), "{}", outcome(&r));
            let got = srv.join().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&got[0]),
                String::from_utf8_lossy(&ours)
            );
        }
        assert!(one_shot_request(Some("a\nb"), "resource.status", &Value::Null).is_err());
        assert!(one_shot_request(None, "resource/status", &Value::Null).is_err());
    }

    #[test]
    fn ordinary_heads_are_read_here_and_others_left_to_hyper() {
        let plain = |len, status, errnum, body| Head::Plain {
            len,
            status: StatusCode::from_u16(status).unwrap(),
            errnum,
            body,
        };
        assert_eq!(parse_head(OK), plain(OK.len() - 7, 200, None, 7));
        assert_eq!(parse_head(&OK[..40]), Head::Partial);
        let err = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
            x-roster-errnum: 22\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_head(err), plain(err.len() - 2, 400, Some(22), 2));
        let text = String::from_utf8_lossy(OK).into_owned();
        for other in [
            text.replace("content-length: 7", "transfer-encoding: chunked"),
            text.replace("content-length: 7", "content-length: +7"),
            text.replace(
                "content-length: 7",
                "content-length: 7\r\ncontent-length: 7",
            ),
            text.replace("content-length: 7\r\n", ""),
            text.replace("200 OK", "100 Continue"),
            text.replace("200 OK", "204 No Content"),
            text.replace("HTTP/1.1", "HTTP/2"),
            // More headers than read here.
            text.replacen("\r\n", &format!("\r\n{}", "x-a: b\r\n".repeat(40)), 1),
        ] {
            assert_eq!(parse_head(other.as_bytes()), Head::Other, "{other}");
        }
    }

    #[tokio::test]
    async fn a_reply_in_pieces_and_with_pauses() {
        let r = same_as_hyper(whole(OK)).await.unwrap();
        assert_eq!(
            (r.0, r.1, &r.2[..]),
            (StatusCode::OK, None, &b"{\"a\":1}"[..])
        );
        // Cut everywhere, a pause between pieces.
        for cut in [1, 17, 40, OK.len() - 7, OK.len() - 3] {
            let pieces = vec![(0, OK[..cut].to_vec()), (20, OK[cut..].to_vec())];
            let r = same_as_hyper(Serve::Reply(pieces)).await.unwrap();
            assert_eq!(&r.2[..], b"{\"a\":1}");
        }
        let bytes = OK.iter().map(|&b| (1, vec![b])).collect();
        same_as_hyper(Serve::Reply(bytes)).await.unwrap();
        // A big body, and bytes after it.
        let big = "x".repeat(100_000);
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{big}trailing",
            big.len()
        );
        let r = same_as_hyper(whole(reply.as_bytes())).await.unwrap();
        assert_eq!(r.2.len(), big.len());
    }

    #[tokio::test]
    async fn error_replies_and_unusual_ones_as_hyper_reads_them() {
        let err = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
            x-roster-errnum: 22\r\nconnection: close\r\ncontent-length: 30\r\n\r\n\
            {\"errnum\":22,\"errstr\":\"bad x\"}";
        let r = same_as_hyper(whole(err)).await.unwrap();
        assert_eq!((r.0.as_u16(), r.1), (400, Some(22)));
        let text = String::from_utf8_lossy(OK).into_owned();
        for reply in [
            text.replace(
                "content-length: 7",
                "x-roster-errnum: 5\r\nx-roster-errnum: 6\r\ncontent-length: 7",
            ),
            text.replace(
                "content-length: 7",
                "x-roster-errnum: x\r\ncontent-length: 7",
            ),
            text.replace("content-length: 7", "transfer-encoding: chunked")
                .replace("{\"a\":1}", "3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n"),
            format!("HTTP/1.1 100 Continue\r\n\r\n{text}"),
            text.replace("content-length: 7\r\n", ""),
            text.replace("200 OK", "204 No Content")
                .replace("content-length: 7\r\n", ""),
            text.replace("HTTP/1.1", "HTTP/1.0"),
            text.replace(
                "content-length: 7",
                "content-length: 7\r\ncontent-length: 7",
            ),
            text.replace(
                "content-length: 7",
                "content-length: 7\r\ncontent-length: 8",
            ),
            text.replace("content-length: 7", "content-length: +7"),
            text.replace(
                "content-length: 7",
                &format!("x-big: {}\r\ncontent-length: 7", "b".repeat(20_000)),
            ),
            "HELLO\r\n\r\n".to_string(),
            "HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n{\"a\"".to_string(),
            "HTTP/1.1 200 OK\r\ncontent-le".to_string(),
            String::new(),
        ] {
            same_as_hyper(whole(reply.as_bytes())).await.ok();
        }
        let e = same_as_hyper(whole(b"")).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "error talking to the service: connection closed before message completed"
        );
        assert_eq!(crate::retry::classify(&e), crate::retry::Failure::Lost);
        // Whether the request went out before the server closed is a race
        // (a reset, or a broken pipe): either is a lost connection.
        let (ours, hyper) = both(Serve::Drop).await;
        for e in [ours.unwrap_err(), hyper.unwrap_err()] {
            assert_eq!(
                crate::retry::classify(&e),
                crate::retry::Failure::Lost,
                "{e}"
            );
        }
    }

    #[tokio::test]
    async fn an_oversize_reply_is_refused_from_its_head() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let uri = Uri::Unix(path.clone());
        let n = one_shot_request(None, "resource.get", &Value::Null)
            .unwrap()
            .len();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{{",
            MAX_REPLY + 1
        );
        let pieces = vec![(0, head.into_bytes()), (10_000, b"}".to_vec())];
        let srv = server(&path, n, 1, Serve::Reply(pieces));
        let t = std::time::Instant::now();
        let e = by_unix_call(&uri, None, "resource.get", &Value::Null)
            .await
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(
            e.to_string(),
            "reply to resource.get: length limit exceeded"
        );
        drop(srv);
    }

    #[tokio::test]
    async fn connect_errors_are_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let long = dir.path().join("x".repeat(200));
        for path in [dir.path().join("none.sock"), long] {
            let uri = Uri::Unix(path);
            let payload = Value::Null;
            let hyper = by_hyper(&uri, None, "resource.status", &payload).await;
            let ours = by_unix_call(&uri, None, "resource.status", &payload).await;
            assert!(matches!(ours, Err(ClientError::Connect { .. })));
            assert_eq!(outcome(&ours), outcome(&hyper));
        }
    }

    fn lines_of(chunks: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut b = LineBuffer::default();
        let mut out = Vec::new();
        for c in chunks {
            b.push(c);
            while let Some(l) = b.pop() {
                out.push(l);
            }
        }
        let rest = b.buf[b.start..].to_vec();
        assert_eq!(rest.len(), b.len());
        (out, rest)
    }

    #[test]
    fn splits_lines_across_chunks() {
        let (lines, rest) = lines_of(&[b"ab\nc".to_vec(), b"d\n\ne".to_vec()]);
        assert_eq!(lines, vec![b"ab".to_vec(), b"cd".to_vec(), b"".to_vec()]);
        assert_eq!(rest, b"e");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn any_chunking_gives_the_same_lines(
            lines in proptest::collection::vec("[a-z{}:\"0-9 ]{0,20}", 0..20),
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let mut text = Vec::new();
            for l in &lines {
                text.extend_from_slice(l.as_bytes());
                text.push(b'\n');
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([text.len()]) {
                chunks.push(text[at..c].to_vec());
                at = c;
            }
            let (got, rest) = lines_of(&chunks);
            let want: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
            prop_assert_eq!(got, want);
            prop_assert!(rest.is_empty());
        }
    }
}
