//! One agent session over a hand-rolled HTTP/1.1 exchange.
//!
//! The session leaves HTTP once its hello is accepted
//! ([`wire::SESSION_UPGRADE`]): the hello is a complete request body, the
//! welcome follows a `101 Switching Protocols`, and from then on the
//! connection is a plain NDJSON stream both ways (what keeps the service's
//! memory per agent small): heartbeat lines up, replies down, at the same
//! time.  This module writes the request head itself and parses the
//! response head; a refusal is an HTTP error with an error object.

use crate::AgentError;
use rpc::uri::Uri;
use rpc::{wire, RpcError};
use serde_json::Value;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

type Reader = BufReader<Box<dyn AsyncRead + Unpin + Send>>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// Largest response line accepted.
const MAX_LINE: usize = 1 << 20;
/// How long the service may take to answer a hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// An open session: heartbeats go out on `w`, lines come in on `lines`.
pub struct Session {
    lines: Lines,
    w: Writer,
}

/// The reply stream of a session.  Its methods are not cancellation safe:
/// read it from a task of its own (see [`Session::split`]).
pub struct Lines {
    r: Reader,
    /// Stream data not yet split into lines.
    buf: Vec<u8>,
    /// The stream is over.
    eof: bool,
}

/// The sending half of a session.
pub struct Sender {
    w: Writer,
}

fn proto(msg: impl Into<String>) -> AgentError {
    AgentError::Protocol(msg.into())
}

/// A TCP connection to `host:port`, from `source` when given (an address
/// of the service's family; the port is the kernel's choice).
async fn tcp_connect(
    host: &str,
    port: u16,
    source: Option<std::net::IpAddr>,
) -> io::Result<tokio::net::TcpStream> {
    let Some(src) = source else {
        return tokio::net::TcpStream::connect((host, port)).await;
    };
    let mut last = io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!("{host} has no address of the family of {src}"),
    );
    for a in tokio::net::lookup_host((host, port)).await? {
        if a.is_ipv4() != src.is_ipv4() {
            continue;
        }
        let sock = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        sock.bind(std::net::SocketAddr::new(src, 0))?;
        match sock.connect(a).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn connect(
    uri: &Uri,
    tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
    source: Option<std::net::IpAddr>,
) -> io::Result<(Reader, Writer)> {
    match uri {
        Uri::Tls { host, port } => {
            let s = tcp_connect(host, *port, source).await?;
            let _ = s.set_nodelay(true);
            let s = tls::connect(s, host, tls_config, "--ca").await?;
            let (r, w) = tokio::io::split(s);
            Ok((BufReader::with_capacity(1024, Box::new(r)), Box::new(w)))
        }
        Uri::Unix(path) => {
            let s = tokio::net::UnixStream::connect(path).await?;
            let (r, w) = s.into_split();
            Ok((BufReader::with_capacity(1024, Box::new(r)), Box::new(w)))
        }
        Uri::Tcp { host, port } => {
            let s = tcp_connect(host, *port, source).await?;
            let _ = s.set_nodelay(true);
            let (r, w) = s.into_split();
            Ok((BufReader::with_capacity(1024, Box::new(r)), Box::new(w)))
        }
        Uri::Flux(_) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "flux:// is not supported by the agent (use tls://, unix:// or tcp://)",
        )),
    }
}

impl Session {
    /// Connect, send the hello, and wait for the welcome (the first
    /// line of the reply stream).
    pub async fn open(
        uri: &Uri,
        tls_config: Option<&Arc<tls::rustls::ClientConfig>>,
        token: Option<&str>,
        hello: &Value,
        source: Option<std::net::IpAddr>,
    ) -> Result<(Session, Value), AgentError> {
        let (r, mut w) =
            connect(uri, tls_config, source)
                .await
                .map_err(|e| AgentError::Connect {
                    uri: uri.to_string(),
                    source: e,
                })?;
        let line = hello.to_string();
        let mut head = format!(
            "POST {} HTTP/1.1\r\nhost: roster\r\n{}: 1\r\ncontent-type: {}\r\n\
             connection: upgrade\r\nupgrade: {}\r\ncontent-length: {}\r\n",
            wire::path_for(wire::SESSION_TOPIC),
            wire::STREAMING_HEADER,
            wire::NDJSON,
            wire::SESSION_UPGRADE,
            line.len() + 1
        );
        if let Some(t) = token {
            head.push_str(&format!("{}: Bearer {t}\r\n", wire::AUTH_HEADER));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend(line.into_bytes());
        bytes.push(b'\n');
        w.write_all(&bytes).await.map_err(AgentError::Io)?;
        w.flush().await.map_err(AgentError::Io)?;
        let mut lines = Lines {
            r,
            buf: Vec::new(),
            eof: false,
        };
        let welcome = tokio::time::timeout(HELLO_TIMEOUT, lines.response_head())
            .await
            .map_err(|_| proto("no answer to the hello"))??;
        Ok((Session { lines, w }, welcome))
    }

    /// The reply stream and the sending half.
    pub fn split(self) -> (Lines, Sender) {
        (self.lines, Sender { w: self.w })
    }
}

impl Lines {
    async fn read_head_line(&mut self) -> Result<String, AgentError> {
        let mut line = String::new();
        let n = (&mut self.r)
            .take(16 * 1024)
            .read_line(&mut line)
            .await
            .map_err(AgentError::Io)?;
        if n == 0 {
            return Err(AgentError::Closed);
        }
        Ok(line.trim_end().to_string())
    }

    /// Read the response head; on 101 return the first line of the
    /// stream, else the error the body carries.
    async fn response_head(&mut self) -> Result<Value, AgentError> {
        let status_line = self.read_head_line().await?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| proto(format!("bad HTTP status line '{status_line}'")))?;
        let mut length: Option<usize> = None;
        loop {
            let line = self.read_head_line().await?;
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    length = v.parse().ok();
                }
            }
        }
        if status == 200 {
            return Err(proto(format!(
                "the service kept the session in HTTP instead of switching to {} \
                 (a service older than the agent?)",
                wire::SESSION_UPGRADE
            )));
        }
        if status != 101 {
            let n = length.unwrap_or(0).min(MAX_LINE);
            let mut body = vec![0u8; n];
            self.r.read_exact(&mut body).await.map_err(AgentError::Io)?;
            let e = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| wire::as_error(&v))
                .unwrap_or_else(|| RpcError::new(rpc::errno::EPROTO, format!("HTTP {status}")));
            return Err(AgentError::Refused(e));
        }
        // The session left HTTP: the welcome is the first line.
        match self.next_line().await? {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(AgentError::Refused(e)),
            None => Err(AgentError::Closed),
        }
    }

    /// The next reply on the stream: `None` when the body ended.
    pub async fn next_line(&mut self) -> Result<Option<Result<Value, RpcError>>, AgentError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if text.trim().is_empty() {
                    continue;
                }
                return wire::parse_stream_line(&text)
                    .map(Some)
                    .map_err(|e| proto(format!("reply line is not JSON: {e}")));
            }
            if self.eof {
                return Ok(None);
            }
            if self.buf.len() > MAX_LINE {
                return Err(proto("reply line too long"));
            }
            self.fill().await?;
        }
    }

    /// Read more of the stream into `buf`.
    async fn fill(&mut self) -> Result<(), AgentError> {
        let avail = self.r.fill_buf().await.map_err(AgentError::Io)?;
        if avail.is_empty() {
            self.eof = true;
            return Ok(());
        }
        let n = avail.len();
        self.buf.extend_from_slice(avail);
        self.r.consume(n);
        Ok(())
    }
}

impl Sender {
    /// Send one heartbeat line.
    pub async fn heartbeat(&mut self) -> Result<(), AgentError> {
        self.send("{}").await
    }

    /// Send one session line (a relay's batch).
    pub async fn line(&mut self, v: &Value) -> Result<(), AgentError> {
        self.send(&v.to_string()).await
    }

    async fn send(&mut self, line: &str) -> Result<(), AgentError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.w.write_all(&bytes).await.map_err(AgentError::Io)?;
        self.w.flush().await.map_err(AgentError::Io)
    }

    /// Leave cleanly: end the sending half.  The service marks the rank
    /// offline and ends the stream.
    pub async fn leave(mut self) {
        let _ = self.w.shutdown().await;
    }
}
