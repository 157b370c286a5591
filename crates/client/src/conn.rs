//! One HTTP exchange over a fresh connection.
//!
//! hyper's HTTP/1 client splits a connection into a request sender and a
//! connection future that performs the I/O.  Instead of spawning that
//! future on a runtime, every await here polls it alongside, so nothing
//! outlives the exchange: dropping an [`Exchange`] (or a [`LineStream`])
//! closes the socket at once, which is what cancels a streaming request.

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
}

/// How long a connection (TCP connect and TLS handshake) may take: a
/// dead host drops the SYN and the kernel would wait minutes; the next
/// server of a list should be tried instead.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Stream {
    async fn connect(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
    ) -> io::Result<Stream> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Stream::connect_now(uri, tls_config)).await {
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
async fn connect_unix(path: &std::path::Path) -> io::Result<tokio::net::UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let Ok(addr) = SocketAddrUnix::new(path) else {
        return tokio::net::UnixStream::connect(path).await;
    };
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(fd)),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INPROGRESS) => {
            drop(fd);
            tokio::net::UnixStream::connect(path).await
        }
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
    use rustix::net::SendFlags;
    use std::os::fd::AsFd;
    match rustix::net::send(s.as_fd(), buf, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
        Ok(n) => Poll::Ready(Ok(n)),
        Err(rustix::io::Errno::AGAIN) => Pin::new(s).poll_write(cx, buf),
        Err(e) => Poll::Ready(Err(e.into())),
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
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
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
    /// Await `fut` while driving the connection.
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
    let (send, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(hyper_err)?;
    let conn = Conn {
        driver: Some(Box::pin(driver)),
        send: None,
    };
    Ok((conn, send))
}

/// The HTTP request of an RPC.
fn build_request(
    uri: &Uri,
    token: Option<&str>,
    topic: &str,
    payload: &Value,
    streaming: bool,
) -> Result<Request<Full<Bytes>>, ClientError> {
    if wire::topic_of(&wire::path_for(topic)) != Some(topic) {
        return Err(ClientError::Protocol(format!(
            "invalid topic '{topic}': expected letters, digits and '.-_'"
        )));
    }
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
        let v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
            ClientError::Protocol(
                "the token contains characters not allowed in HTTP headers".into(),
            )
        })?;
        req = req.header(wire::AUTH_HEADER, v);
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
        let resp = self
            .conn
            .drive(send.send_request(req))
            .await
            .map_err(hyper_err)?;
        self.conn.send = Some(send);
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
        let mut req = build_request(uri, token, topic, payload, streaming)?;
        // One exchange per connection: the server closes it after the
        // reply instead of waiting for a next request that never comes.
        req.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        let (mut conn, mut send) = open(uri, tls_config).await?;
        let resp = conn
            .drive(send.send_request(req))
            .await
            .map_err(hyper_err)?;
        conn.send = Some(send);
        Ok(Exchange {
            conn,
            resp,
            topic: topic.to_string(),
        })
    }

    async fn body(self) -> Result<(StatusCode, Option<i32>, Bytes, String), ClientError> {
        let Exchange {
            mut conn,
            resp,
            topic,
        } = self;
        let (status, errnum, body) = conn.read_reply(resp, &topic).await?;
        Ok((status, errnum, body, topic))
    }

    /// The single reply of a non-streaming request.
    pub(crate) async fn reply(self) -> Result<Value, ClientError> {
        let (status, errnum, body, topic) = self.body().await?;
        parse_reply(status, errnum, &body, &topic)
    }

    /// Turn a streaming exchange with `uri` into its line stream (or the
    /// error the service answered instead).
    pub(crate) async fn into_stream(self, uri: Uri) -> Result<ReplyStream, ClientError> {
        if self.resp.status() != StatusCode::OK {
            let (status, errnum, body, topic) = self.body().await?;
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

/// The error of a non-200 reply: the error object of its body, else its
/// errno header, else a protocol error naming the status.
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
