//! Client requests are served before agent lines that arrived earlier
//! (the service loop's lanes): deterministic, through the real shell and
//! core.

mod common;

use common::{eight_node_shell, incoming};
use rpc::wire;
use serde_json::json;
use serve::lanes::AGENT_CHUNK;
use transport::{Incoming, ReplySender};

#[test]
fn a_client_request_is_served_before_waiting_agent_lines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut shell = eight_node_shell(tmp.path());
    let control = serve::Control::default();
    let (tx, rx) = std::sync::mpsc::channel();

    // 1,000 agent lines wait (each answered, here with an error: no
    // session said hello on these connections), then one drain and one
    // status of a client, on the same connection.
    let mut lines = Vec::new();
    for conn in 1..=1000 {
        let (s, r) = ReplySender::unbounded(false);
        tx.send(incoming(conn, wire::SESSION_LINE_TOPIC, json!({}), s))
            .unwrap();
        lines.push(r);
    }
    let (dtx, mut drx) = ReplySender::unbounded(false);
    let drain = json!({"targets": "3", "reason": "fan"});
    tx.send(incoming(5000, "resource.drain", drain, dtx))
        .unwrap();
    let (stx, mut srx) = ReplySender::unbounded(false);
    let mut status = incoming(5000, "resource.status", json!({}), stx);
    if let Incoming::Request { req, .. } = &mut status {
        req.matchtag = 2;
    }
    tx.send(status).unwrap();
    let answered = |lines: &mut Vec<_>| {
        lines
            .iter_mut()
            .filter(|r: &&mut transport::ReplyReceiver| !r.is_empty())
            .count()
    };

    // The first batch is the client's: answered (the status reads its own
    // drain), not one agent line yet.
    assert_eq!(shell.serve_waiting(&rx, &control).expect("batch"), 2);
    assert!(drx.try_recv().expect("drain reply").is_ok());
    let status = match srx.try_recv().expect("status reply").expect("status") {
        rpc::Payload::Value(v) => *v,
        rpc::Payload::Json(s) => serde_json::from_str(&s).expect("json"),
    };
    assert_eq!(status["drain"]["3"]["reason"], "fan", "{status}");
    assert_eq!(answered(&mut lines), 0);

    // Then the agent lines, a chunk per batch.
    assert_eq!(
        shell.serve_waiting(&rx, &control).expect("batch"),
        AGENT_CHUNK
    );
    assert_eq!(answered(&mut lines), AGENT_CHUNK);
    // A client arriving now goes before the rest.
    let (stx, mut srx) = ReplySender::unbounded(false);
    tx.send(incoming(5001, "resource.status", json!({}), stx))
        .unwrap();
    assert_eq!(shell.serve_waiting(&rx, &control).expect("batch"), 1);
    assert!(srx.try_recv().is_ok());
    assert_eq!(answered(&mut lines), AGENT_CHUNK);
    while shell.serve_waiting(&rx, &control).expect("batch") > 0 {}
    assert_eq!(answered(&mut lines), 1000);
    shell.shutdown().expect("shutdown");
}
