//! Entry points for fuzzing the connection handlers as whole byte streams
//! (`fuzz/fuzz_targets/http_conn.rs`, `flux_conn.rs`).  Not a stable API.

use crate::limits::LoopTx;
use crate::{Incoming, Limits, ListenOptions};
use rpc::errno::ENODATA;
use rpc::RpcError;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

/// Small limits so that every bound is reachable from a short input.
fn limits() -> Limits {
    Limits {
        max_connections: 4,
        max_connections_per_peer: 2,
        max_unauthenticated_per_peer: 2,
        auth_timeout: Duration::from_secs(5),
        max_inflight: 4,
        max_outbound_bytes: 4096,
        max_guest_outbound_bytes: 2048,
        max_request_bytes: 8192,
        max_guest_request_bytes: 1024,
        max_queued_requests: 8,
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(10),
    }
}

/// A service answering every request (streams: one reply, then ENODATA),
/// polled from the runtime.
async fn service(rx: std::sync::mpsc::Receiver<Incoming>) {
    loop {
        match rx.try_recv() {
            Ok(Incoming::Request { req, replies, slot }) => {
                drop(slot);
                let _ = replies.send(Ok(serde_json::json!({
                    "topic": req.topic, "payload": req.payload
                })
                .into()));
                if req.streaming {
                    let _ = replies.send(Err(RpcError::bare(ENODATA)));
                }
            }
            Ok(Incoming::Disconnect(_) | Incoming::SessionLine { .. } | Incoming::Wake) => {}
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                tokio::time::sleep(Duration::from_millis(1)).await
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
        }
    }
}

/// Feed `input` to one connection handler as a client that sends it all,
/// closes its write side and reads until EOF.  Runs on a paused clock, so
/// timeouts cost no real time.  Panics only if the handler does.
fn drive(input: &[u8], flux: bool, guest: bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, server) = tokio::io::duplex(16 << 10);
        let (tx, rx) = std::sync::mpsc::channel();
        let opts = ListenOptions {
            owner_uid: 1000,
            token: None,
            socket_mode: 0o666,
            limits: limits(),
            role_tokens: Vec::new(),
            tls: None,
            access: None,
            public_read: false,
        };
        let uid = if guest { 2000 } else { 1000 };
        let looptx = LoopTx::new(tx, opts.limits.max_queued_requests, None);
        let (_stop, shutdown) = watch::channel(false);
        let (live, _live_rx) = mpsc::channel::<()>(1);
        let svc = tokio::spawn(service(rx));
        let conn = if flux {
            let ctx = Arc::new(crate::flux::FluxCtx::new(looptx, &opts));
            tokio::spawn(crate::flux::serve_connection(
                server,
                Some(uid),
                ctx,
                Arc::from("local:///fuzz"),
                shutdown,
                live,
            ))
        } else {
            let ctx = Arc::new(crate::http::Ctx::new(looptx, &opts, None));
            tokio::spawn(crate::http::serve_connection(
                server,
                crate::http::Peer::Unix { uid: Some(uid) },
                ctx,
                shutdown,
                live,
                None,
            ))
        };
        let (mut rd, mut wr) = tokio::io::split(client);
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            let _ = rd.read_to_end(&mut out).await;
            out
        });
        let _ = wr.write_all(input).await;
        let _ = wr.shutdown().await;
        let _ = tokio::time::timeout(Duration::from_secs(120), reader).await;
        drop(wr);
        let _ = tokio::time::timeout(Duration::from_secs(120), conn).await;
        svc.abort();
    });
}

/// The HTTP handler (Unix peer; `guest` picks the role).
pub fn http_stream(input: &[u8], guest: bool) {
    drive(input, false, guest)
}

/// The Flux local-connector handler.
pub fn flux_stream(input: &[u8], guest: bool) {
    drive(input, true, guest)
}

/// The accept-time parser of one-shot requests (`crate::quick`): never
/// panics, and what it takes is exactly the input, with a valid topic and
/// the body at its end.  Panics if any of that fails.
pub fn quick_parse(input: &[u8]) {
    crate::quick::check(input)
}

#[cfg(test)]
mod tests {
    #[test]
    fn whole_streams_run_to_the_end() {
        let http = b"POST /v1/resource.status HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}\
POST /v1/resource.x HTTP/1.1\r\nhost: x\r\nx-roster-streaming: 1\r\ncontent-length: 0\r\n\r\n";
        super::http_stream(http, false);
        super::http_stream(http, true);
        super::http_stream(b"POST /v1/resource.status HTTP/1.1\r\n", true);
        super::flux_stream(b"\x12\x00\xee\xff\x00\x00\x00\x05abc", false);
        super::flux_stream(&[], true);
        super::quick_parse(http);
        super::quick_parse(b"POST /v1/a HTTP/1.1\r\nconnection: close\r\n\r\n");
    }
}
