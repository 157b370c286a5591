//! The real [`Service`]: Roster's blocking client, created on the first
//! request (as `flux.Flux()` connects only when a sub-command needs it).

use super::service::{ReplyStream, Service, StreamItem, SvcError};
use client::blocking::Client;
use client::{ClientError, TlsFiles};
use rpc::errno::ENODATA;
use rpc::RpcError;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// Map a client error to what the CLI reports.
fn svc_error(e: ClientError) -> SvcError {
    match e {
        ClientError::Rpc(r) => SvcError::Rpc(r),
        ClientError::Protocol(_) | ClientError::Io(_) | ClientError::Lost(_) => {
            SvcError::Rpc(RpcError::new(e.errnum(), e.to_string()))
        }
        other => SvcError::Connect(other.to_string()),
    }
}

/// The service named by `--uri` / `$ROSTER_URI` / the default socket.
pub struct Remote {
    uri: Option<String>,
    token_file: Option<PathBuf>,
    tls: TlsFiles,
    client: Option<Client>,
}

impl Remote {
    pub fn new(uri: Option<String>, token_file: Option<PathBuf>) -> Remote {
        Remote {
            uri,
            token_file,
            tls: TlsFiles::default(),
            client: None,
        }
    }

    /// The TLS files of a `tls://` service (each one not given here comes
    /// from its environment variable; read only for a `tls://` URI).
    pub fn with_tls(self, tls: TlsFiles) -> Remote {
        Remote { tls, ..self }
    }

    fn client(&mut self) -> Result<&Client, SvcError> {
        if self.client.is_none() {
            let c = Client::from_env_tls(
                self.uri.as_deref(),
                self.token_file.as_deref(),
                self.tls.clone(),
            )
            .map_err(svc_error)?;
            self.client = Some(c);
        }
        self.client
            .as_ref()
            .ok_or_else(|| SvcError::Connect("no client".into()))
    }
}

impl Service for Remote {
    fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, SvcError> {
        self.client()?.rpc(topic, payload).map_err(svc_error)
    }

    fn stream(&mut self, topic: &str, payload: Value) -> Result<Box<dyn ReplyStream>, SvcError> {
        let s = self.client()?.stream(topic, payload).map_err(svc_error)?;
        Ok(Box::new(Stream::Direct(Box::new(s))))
    }

    fn summary(&mut self, req: &rpc::msg::SummaryRequest) -> Option<Value> {
        super::service::call::<rpc::catalog::Summary>(self, req).ok()
    }

    /// The journal through the client's resuming follower: a restart or
    /// failover of the service is invisible (no event twice, none missed).
    fn journal(&mut self) -> Result<Box<dyn ReplyStream>, SvcError> {
        let f = self.client()?.follow_journal().map_err(svc_error)?;
        // Said at once rather than after the resume wait.
        let f = f.on_resume_wait(|m| warn_unlocked(&format!("roster-resource: WARNING: {m}\n")));
        Ok(Box::new(Stream::Direct(Box::new(f))))
    }
}

/// Write `text` to stderr from any thread: the command holds the stderr
/// lock while it waits for the stream this is called under (from a
/// reader thread), so the text goes to a duplicate of fd 2 (stderr is
/// unbuffered: nothing is reordered).
fn warn_unlocked(text: &str) {
    use std::io::Write;
    use std::os::fd::AsFd;
    if let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() {
        let _ = std::fs::File::from(fd).write_all(text.as_bytes());
    }
}

/// The responses of a stream, read by the calling thread.
type Items = Box<dyn Iterator<Item = Result<Value, ClientError>> + Send>;

fn item(r: Option<Result<Value, ClientError>>) -> StreamItem {
    match r {
        Some(Ok(v)) => StreamItem::Payload(v),
        Some(Err(e)) => StreamItem::End(svc_error(e)),
        None => StreamItem::End(SvcError::Rpc(RpcError::bare(ENODATA))),
    }
}

/// A reply stream read directly, or (once a timeout is asked for) by a
/// reader thread that hands the items over a channel.
enum Stream {
    Direct(Items),
    Threaded(Receiver<StreamItem>),
    Done(StreamItem),
    Empty,
}

impl ReplyStream for Stream {
    fn next(&mut self, timeout: Option<Duration>) -> StreamItem {
        if timeout.is_some() {
            if let Stream::Direct(_) = self {
                if let Stream::Direct(mut s) = std::mem::replace(self, Stream::Empty) {
                    let (tx, rx) = mpsc::channel();
                    std::thread::spawn(move || loop {
                        let it = item(s.next());
                        let end = matches!(it, StreamItem::End(_));
                        if tx.send(it).is_err() || end {
                            break;
                        }
                    });
                    *self = Stream::Threaded(rx);
                }
            }
        }
        let got = match self {
            Stream::Direct(s) => item(s.next()),
            Stream::Threaded(rx) => match timeout {
                Some(t) => match rx.recv_timeout(t) {
                    Ok(i) => i,
                    Err(RecvTimeoutError::Timeout) => return StreamItem::Timeout,
                    Err(RecvTimeoutError::Disconnected) => {
                        StreamItem::End(SvcError::Rpc(RpcError::bare(ENODATA)))
                    }
                },
                None => rx
                    .recv()
                    .unwrap_or(StreamItem::End(SvcError::Rpc(RpcError::bare(ENODATA)))),
            },
            Stream::Done(i) => return i.clone(),
            Stream::Empty => StreamItem::End(SvcError::Rpc(RpcError::bare(ENODATA))),
        };
        if matches!(got, StreamItem::End(_)) {
            *self = Stream::Done(got.clone());
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_map_to_cli_errors() {
        let e = svc_error(ClientError::Rpc(RpcError::new(
            17,
            "rank 1 already drained",
        )));
        assert_eq!(e.os_error_str(), "[Errno 17] rank 1 already drained");
        let e = svc_error(ClientError::Protocol("bad reply".into()));
        assert_eq!(e.message(), "bad reply");
        assert_eq!(e.errnum(), rpc::errno::EPROTO);
        let uri = rpc::uri::Uri::parse("unix:///run/x.sock")
            .unwrap_or(rpc::uri::Uri::Unix(PathBuf::from("/")));
        let e = svc_error(ClientError::Connect {
            uri,
            source: std::io::Error::from_raw_os_error(2),
        });
        assert_eq!(
            e,
            SvcError::Connect(
                "cannot connect to unix:///run/x.sock: No such file or directory".into()
            )
        );
        assert!(matches!(item(None), StreamItem::End(SvcError::Rpc(ref r)) if r.errnum == ENODATA));
        assert!(matches!(
            item(Some(Ok(Value::Null))),
            StreamItem::Payload(Value::Null)
        ));
    }

    #[test]
    fn unreachable_service_fails_on_first_use() {
        let mut r = Remote::new(Some("unix:///nonexistent/roster-test.sock".into()), None);
        let e = r.rpc("resource.status", Value::Null).err();
        assert_eq!(
            e.map(|e| e.message()),
            Some(
                "cannot connect to unix:///nonexistent/roster-test.sock: No such file or directory"
                    .into()
            )
        );
        let mut r = Remote::new(Some("http://x".into()), None);
        assert!(matches!(
            r.stream("resource.journal", Value::Null),
            Err(SvcError::Connect(_))
        ));
    }
}
