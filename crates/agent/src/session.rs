//! One agent session over a hand-rolled HTTP/1.1 exchange.
//!
//! The session asks to leave HTTP once its hello is accepted
//! ([`wire::SESSION_UPGRADE`]): the hello is a complete request body, the
//! welcome follows a `101 Switching Protocols`, and from then on the
//! connection is a plain NDJSON stream both ways (what keeps the service's
//! memory per agent small).  A service that answers `200` with a chunked
//! body instead is spoken to as below.
//!
//! hyper's HTTP/1 client does not read the response while the request
//! body is still being sent, and an agent session needs exactly that: the
//! request `POST /v1/resource.agent` has a chunked body that stays open
//! (the hello line, then one heartbeat line per period) while the
//! response streams NDJSON back (the welcome, then, eventually, the error
//! that ends the session).  This module writes the request head and the
//! chunks itself and parses the response head and the chunked NDJSON body.

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
    /// Decoded response data not yet split into lines.
    buf: Vec<u8>,
    /// Bytes left in the current response chunk.
    chunk_left: usize,
    /// The response body is over.
    eof: bool,
    /// The connection left HTTP (`101`): plain NDJSON, no chunks.
    raw: bool,
}

/// The sending half of a session.
pub struct Sender {
    w: Writer,
    /// Plain NDJSON lines (see [`Lines::raw`]), else HTTP chunks.
    raw: bool,
}

fn proto(msg: impl Into<String>) -> AgentError {
    AgentError::Protocol(msg.into())
}

/// `ROSTER_AGENT_SESSION=chunked`: keep the session in HTTP (a chunked
/// request body kept open), as services before the raw stream expect
/// (and to compare the two, see bench/agents.sh).
fn chunked_session() -> bool {
    std::env::var_os("ROSTER_AGENT_SESSION").is_some_and(|v| v == "chunked")
}

fn chunk(line: &str) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", line.len() + 1).into_bytes();
    v.extend_from_slice(line.as_bytes());
    v.extend_from_slice(b"\n\r\n");
    v
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
            "POST {} HTTP/1.1\r\nhost: roster\r\n{}: 1\r\ncontent-type: {}\r\n",
            wire::path_for(wire::SESSION_TOPIC),
            wire::STREAMING_HEADER,
            wire::NDJSON,
        );
        if chunked_session() {
            head.push_str("transfer-encoding: chunked\r\n");
        } else {
            head.push_str(&format!(
                "connection: upgrade\r\nupgrade: {}\r\ncontent-length: {}\r\n",
                wire::SESSION_UPGRADE,
                line.len() + 1
            ));
        }
        if let Some(t) = token {
            head.push_str(&format!("{}: Bearer {t}\r\n", wire::AUTH_HEADER));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if chunked_session() {
            bytes.extend(chunk(&line));
        } else {
            bytes.extend(line.into_bytes());
            bytes.push(b'\n');
        }
        w.write_all(&bytes).await.map_err(AgentError::Io)?;
        w.flush().await.map_err(AgentError::Io)?;
        let mut lines = Lines {
            r,
            buf: Vec::new(),
            chunk_left: 0,
            eof: false,
            raw: false,
        };
        let welcome = tokio::time::timeout(HELLO_TIMEOUT, lines.response_head())
            .await
            .map_err(|_| proto("no answer to the hello"))??;
        Ok((Session { lines, w }, welcome))
    }

    /// The reply stream and the sending half.
    pub fn split(self) -> (Lines, Sender) {
        let raw = self.lines.raw;
        (self.lines, Sender { w: self.w, raw })
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

    /// Read the response head; on 200 return the first line, else the
    /// error the body carries.
    async fn response_head(&mut self) -> Result<Value, AgentError> {
        let status_line = self.read_head_line().await?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| proto(format!("bad HTTP status line '{status_line}'")))?;
        let mut chunked = false;
        let mut length: Option<usize> = None;
        loop {
            let line = self.read_head_line().await?;
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if k == "content-length" {
                    length = v.parse().ok();
                }
            }
        }
        if status == 101 {
            // The session left HTTP: the welcome is the first line.
            self.raw = true;
            return match self.next_line().await? {
                Some(Ok(v)) => Ok(v),
                Some(Err(e)) => Err(AgentError::Refused(e)),
                None => Err(AgentError::Closed),
            };
        }
        if status != 200 {
            let n = length.unwrap_or(0).min(MAX_LINE);
            let mut body = vec![0u8; n];
            if !chunked {
                self.r.read_exact(&mut body).await.map_err(AgentError::Io)?;
            }
            let e = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| wire::as_error(&v))
                .unwrap_or_else(|| RpcError::new(rpc::errno::EPROTO, format!("HTTP {status}")));
            return Err(AgentError::Refused(e));
        }
        if !chunked {
            return Err(proto("the reply stream is not chunked"));
        }
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

    /// Decode more of the chunked body (or read more of the raw stream)
    /// into `buf`.
    async fn fill(&mut self) -> Result<(), AgentError> {
        if self.raw {
            let avail = self.r.fill_buf().await.map_err(AgentError::Io)?;
            if avail.is_empty() {
                self.eof = true;
                return Ok(());
            }
            let n = avail.len();
            self.buf.extend_from_slice(avail);
            self.r.consume(n);
            return Ok(());
        }
        if self.chunk_left == 0 {
            let size_line = self.read_head_line().await?;
            let size_line = if size_line.is_empty() {
                // The CRLF after the previous chunk's data.
                self.read_head_line().await?
            } else {
                size_line
            };
            let hex = size_line.split(';').next().unwrap_or("").trim();
            let n = usize::from_str_radix(hex, 16)
                .map_err(|_| proto(format!("bad chunk size '{size_line}'")))?;
            if n == 0 {
                self.eof = true;
                return Ok(());
            }
            self.chunk_left = n;
        }
        let avail = self.r.fill_buf().await.map_err(AgentError::Io)?;
        if avail.is_empty() {
            return Err(AgentError::Closed);
        }
        let take = avail.len().min(self.chunk_left);
        self.buf.extend_from_slice(&avail[..take]);
        self.r.consume(take);
        self.chunk_left -= take;
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
        let bytes = if self.raw {
            let mut v = Vec::with_capacity(line.len() + 1);
            v.extend_from_slice(line.as_bytes());
            v.push(b'\n');
            v
        } else {
            chunk(line)
        };
        self.w.write_all(&bytes).await.map_err(AgentError::Io)?;
        self.w.flush().await.map_err(AgentError::Io)
    }

    /// Leave cleanly: end the request body (raw stream: end the sending
    /// half).  The service marks the rank offline and ends the stream.
    pub async fn leave(mut self) {
        if self.raw {
            let _ = self.w.shutdown().await;
        } else {
            let _ = self.w.write_all(b"0\r\n\r\n").await;
            let _ = self.w.flush().await;
        }
    }
}
