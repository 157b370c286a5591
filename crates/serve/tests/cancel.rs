//! A stream its listener ends early (EOVERFLOW: the client stopped
//! reading) is dropped by the core at once, while its connection stays.

mod common;

use common::{eight_node_shell, incoming};
use serde_json::json;
use transport::{Incoming, ReplySender};

#[test]
fn a_stream_ended_for_overflow_is_dropped_by_the_core_at_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut shell = eight_node_shell(tmp.path());

    // A journal follower and an acquirer that never read, each allowed
    // 4 KiB of queued replies; their connections stay open.
    let (jtx, mut jrx) = ReplySender::limited(4096, true);
    let (atx, mut arx) = ReplySender::limited(4096, true);
    shell
        .step(vec![
            incoming(1, "resource.journal", json!({}), jtx),
            incoming(2, "resource.acquire", json!({}), atx),
        ])
        .expect("step");
    assert_eq!(shell.core().followers(), 1);
    assert_eq!(shell.core().acquisitions().len(), 1);

    // Events until both fall behind.
    let mut conn = 10;
    for i in 0..200 {
        if shell.core().followers() == 0 && shell.core().acquisitions().is_empty() {
            break;
        }
        conn += 1;
        let (tx, _rx) = ReplySender::unbounded(false);
        let (topic, payload) = if i % 2 == 0 {
            (
                "resource.drain",
                json!({"targets": "0-6", "reason": "x".repeat(100)}),
            )
        } else {
            ("resource.undrain", json!({"targets": "0-6"}))
        };
        shell
            .step(vec![
                incoming(conn, topic, payload, tx),
                Incoming::Disconnect(conn),
            ])
            .expect("step");
    }
    // Dropped by the core although connections 1 and 2 never went away.
    assert_eq!(
        shell.core().followers(),
        0,
        "journal follower still subscribed"
    );
    assert!(shell.core().acquisitions().is_empty(), "acquire still held");
    // Each client was told: its stream ends with EOVERFLOW.
    for rx in [&mut jrx, &mut arx] {
        let mut last = None;
        while let Ok(r) = rx.try_recv() {
            last = Some(r);
        }
        let e = last
            .expect("replies")
            .expect_err("an error ends the stream");
        assert_eq!(e.errnum, rpc::errno::EOVERFLOW, "{e:?}");
    }
    // A new acquire is served (not EBUSY behind the dead one).
    let (tx, mut rx) = ReplySender::unbounded(true);
    shell
        .step(vec![incoming(3, "resource.acquire", json!({}), tx)])
        .expect("step");
    assert!(rx.try_recv().expect("a reply").is_ok());
    shell.shutdown().expect("shutdown");
}
