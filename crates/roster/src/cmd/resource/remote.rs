//! The real [`Service`]: Roster's blocking client, created on the first
//! request (as `flux.Flux()` connects only when a sub-command needs it).

use super::service::{ReplyStream, Service, StreamItem, SvcError};
use client::blocking::{Client, ReplyStream as ClientStream};
use client::ClientError;
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
        ClientError::Protocol(_) | ClientError::Io(_) => {
            SvcError::Rpc(RpcError::new(e.errnum(), e.to_string()))
        }
        other => SvcError::Connect(other.to_string()),
    }
}

/// The service named by `--uri` / `$ROSTER_URI` / the default socket.
pub struct Remote {
    uri: Option<String>,
    token_file: Option<PathBuf>,
    client: Option<Client>,
}

impl Remote {
    pub fn new(uri: Option<String>, token_file: Option<PathBuf>) -> Remote {
        Remote {
            uri,
            token_file,
            client: None,
        }
    }

    fn client(&mut self) -> Result<&Client, SvcError> {
        if self.client.is_none() {
            let c = Client::from_env(self.uri.as_deref(), self.token_file.as_deref())
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
        Ok(Box::new(Stream::Direct(s)))
    }
}

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
    Direct(ClientStream),
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
