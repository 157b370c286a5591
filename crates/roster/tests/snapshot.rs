//! `resource.status` and `resource.sched-status` are answered by the
//! listeners from the replies the service loop publishes (they do not
//! queue behind the loop).  What must hold: a read never misses a write
//! that was acknowledged before it was sent, on any connection; a Flux
//! client that pipelines a drain and a status reads its drain; the reads
//! answered this way count in the metrics.

mod common;

use common::{fake_config, flux_wire, start, Scratch};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::Duration;

fn drained(status: &Value) -> Vec<String> {
    status["drain"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn every_read_sees_the_drains_acknowledged_before_it() {
    let s = Scratch::new("snapshot-ryw");
    let d = start(&s, &fake_config(4, ""), &[]);
    let writer = d.client();
    for i in 0..150 {
        let rank = (i % 4).to_string();
        let reason = format!("round {i}");
        writer
            .rpc("resource.drain", json!({"targets": rank, "reason": reason}))
            .expect("drain");
        // A fresh client (its own connections): the status comes from the
        // snapshot once the loop has published one.
        let st = d
            .client()
            .rpc("resource.status", json!({}))
            .expect("status");
        assert_eq!(drained(&st).join(","), rank, "after drain {i}: {st}");
        assert_eq!(st["drain"][&rank]["reason"], reason.as_str());
        // Twice: the second is surely from the published reply.
        let again = d
            .client()
            .rpc("resource.status", json!({}))
            .expect("status");
        assert_eq!(again, st);
        writer
            .rpc("resource.undrain", json!({"targets": rank}))
            .expect("undrain");
        let st = d
            .client()
            .rpc("resource.status", json!({}))
            .expect("status");
        assert!(drained(&st).is_empty(), "after undrain {i}: {st}");
    }
}

#[test]
fn a_status_pipelined_after_a_drain_on_a_flux_connection_reads_it() {
    let s = Scratch::new("snapshot-flux");
    let fsock = s.path("flux.sock");
    let furi = format!("flux://{}", fsock.display());
    let d = start(&s, &fake_config(4, ""), &["--listen", &furi]);
    let mut c = flux_wire::connect(&fsock);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tag = 1;
    for i in 0..40 {
        let rank = i % 4;
        // A status first: the snapshot is published and current.
        flux_wire::request(&mut c, "resource.status", Some("{}"), tag);
        let (_, errnum, t) = flux_wire::response(&mut c);
        assert_eq!((errnum, t), (0, tag));
        // Then a drain and a status back to back, without reading.
        let drain = format!("{{\"targets\":\"{rank}\",\"reason\":\"p{i}\"}}");
        flux_wire::request(&mut c, "resource.drain", Some(&drain), tag + 1);
        flux_wire::request(&mut c, "resource.status", Some("{}"), tag + 2);
        let mut status = None;
        for _ in 0..2 {
            let (frames, errnum, t) = flux_wire::response(&mut c);
            assert_eq!(errnum, 0, "tag {t}");
            if t == tag + 2 {
                let text = String::from_utf8_lossy(&frames[2]);
                let v: Value = serde_json::from_str(text.trim_end_matches('\0')).expect("json");
                status = Some(v);
            }
        }
        let status = status.expect("the status reply");
        assert_eq!(
            status["drain"][rank.to_string()]["reason"],
            format!("p{i}"),
            "the pipelined status reads the drain before it: {status}"
        );
        let undrain = format!("{{\"targets\":\"{rank}\"}}");
        flux_wire::request(&mut c, "resource.undrain", Some(&undrain), tag + 3);
        let (_, errnum, _) = flux_wire::response(&mut c);
        assert_eq!(errnum, 0);
        tag += 4;
    }
    drop(d);
}

/// `GET /metrics` over the daemon's Unix socket.
fn metrics(sock: &std::path::Path) -> String {
    let mut h = std::os::unix::net::UnixStream::connect(sock).expect("connect");
    h.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    h.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    h.read_to_string(&mut text).unwrap();
    text
}

fn requests_ok(text: &str, topic: &str) -> u64 {
    let key = format!("roster_rpc_requests_total{{topic=\"{topic}\",outcome=\"ok\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn reads_answered_from_snapshots_count_in_the_metrics() {
    let s = Scratch::new("snapshot-metrics");
    let d = start(&s, &fake_config(4, ""), &[]);
    let c = d.client();
    let before = requests_ok(&metrics(&d.sock), "resource.status");
    for _ in 0..25 {
        c.rpc("resource.status", json!({})).expect("status");
        c.rpc("resource.sched-status", json!({}))
            .expect("sched-status");
    }
    let text = metrics(&d.sock);
    assert_eq!(
        requests_ok(&text, "resource.status") - before,
        25,
        "every status counts, from the loop or a snapshot"
    );
    assert!(requests_ok(&text, "resource.sched-status") >= 25, "{text}");
}
