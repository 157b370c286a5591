//! Issue 28, items 6-8 on a real daemon: who drained a node (recorded
//! for Roster's readers, invisible to flux clients), `resource show`,
//! `resource history` and `resource status --at`.

mod common;

use common::*;
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

const CONFIG: &str = "[resource]\nnoverify = true\n\
                      [[resource.config]]\nhosts = \"node[0-3]\"\ncores = \"0-3\"\n\
                      [[resource.config]]\nhosts = \"node3\"\nproperties = [\"bigmem\"]\n\
                      [queues.batch]\nrequires = [\"bigmem\"]\n[queues.debug]\n";

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The requester a Unix-socket client of this test is recorded as.
fn me(s: &Scratch) -> String {
    let uid = std::fs::metadata(s.path("roster.toml")).unwrap().uid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
    });
    match name {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

#[test]
fn drain_undrain_show_history_and_status_at() {
    let s = Scratch::new("node-views");
    let (fsock, furi) = flux_socket(&s);
    let d = start(&s, CONFIG, &["--listen", &furi]);
    let who = me(&s);
    d.ok(&["drain", "node3", "fan"]);
    std::thread::sleep(Duration::from_millis(1100));
    let between = format!("{:.3}", now());
    std::thread::sleep(Duration::from_millis(1100));
    d.ok(&["undrain", "node3"]);

    // Item 7: the requester is in the stored event and the log...
    let stored = stored_events(&s.statedir());
    let drain = stored.iter().find(|e| e["name"] == "drain").unwrap();
    assert_eq!(drain["context"]["requester"], who.as_str());
    assert!(
        d.log_text()
            .contains(&format!("reason=fan requester={who}")),
        "{}",
        d.log_text()
    );
    // ...but flux's clients see flux-core's context, on both listeners.
    let text = d.ok(&["eventlog"]);
    assert!(
        text.contains(r#"drain idset="3" nodelist="node3" reason="fan" overwrite=0"#),
        "{text}"
    );
    assert!(!text.contains("requester"), "{text}");
    assert!(!d.ok(&["eventlog", "-f", "json"]).contains("requester"));
    let mut c = flux_wire::connect(&fsock);
    flux_wire::request_flags(&mut c, "resource.journal", Some("{}"), 5, 0x40);
    let mut seen = Vec::new();
    loop {
        let (frames, errnum, _) = flux_wire::response(&mut c);
        assert_eq!(errnum, 0);
        let v: Value = serde_json::from_slice(frames[2].strip_suffix(&[0]).unwrap()).unwrap();
        let events = v["events"].as_array().unwrap().clone();
        if events.is_empty() {
            break;
        }
        seen.extend(events);
    }
    let drain = seen.iter().find(|e| e["name"] == "drain").unwrap();
    assert_eq!(
        drain["context"],
        serde_json::json!({"idset": "3", "nodelist": "node3", "reason": "fan", "overwrite": 0})
    );

    // Item 6: one node's view names the last drain and who did what.
    let show = d.ok(&["show", "node3"]);
    assert!(show.starts_with("Node node3 (rank 3)\n"), "{show}");
    assert!(show.contains("  Drained:    no\n"), "{show}");
    assert!(
        show.contains(&format!("by {who}, reason \"fan\"; undrained ")),
        "{show}"
    );
    assert!(show.contains("  Properties: bigmem\n"), "{show}");
    // `[queues]`: batch requires bigmem, debug nothing.
    assert!(show.contains("  Queues:     batch,debug\n"), "{show}");
    let node0 = d.ok(&["show", "node0"]);
    assert!(node0.contains("  Queues:     debug\n"), "{node0}");
    assert!(show.contains("  Resources:  core[0-3]"), "{show}");
    let json: Value = serde_json::from_str(&d.ok(&["show", "--json", "3"])).unwrap();
    assert_eq!(json[0]["hostname"], "node3");
    assert_eq!(json[0]["state"], "offline");
    assert_eq!(json[0]["last_drain"]["reason"], "fan");
    assert_eq!(json[0]["queues"], serde_json::json!(["batch", "debug"]));
    assert_eq!(json[0]["last_drain"]["undrained_by"], who.as_str());
    d.ok(&["drain", "node1", "disk"]);
    let json: Value = serde_json::from_str(&d.ok(&["show", "--json", "node1"])).unwrap();
    assert_eq!(json[0]["state"], "drained+offline");
    assert_eq!(json[0]["drain"]["reason"], "disk");
    assert_eq!(json[0]["drain"]["requester"], who.as_str());
    let year = &json[0]["drain"]["time"].as_str().unwrap()[..4];
    assert!(year.starts_with("20"), "{json}");
    let (code, err) = d.fails(&["show", "node9"]);
    assert_eq!(code, 1);
    assert_eq!(err, "roster-resource: ERROR: invalid hosts: node9\n");

    // Item 8: history names the reason and the requester.
    let hist = d.ok(&["history", "node3"]);
    let lines: Vec<&str> = hist.lines().collect();
    assert!(
        lines[0].contains("node3") && lines[0].contains("restart (offline)"),
        "{hist}"
    );
    assert!(
        lines[1].ends_with(&format!("drain             reason=\"fan\" by {who}")),
        "{hist}"
    );
    assert!(
        lines[2].ends_with(&format!("undrain           by {who}")),
        "{hist}"
    );
    assert_eq!(lines.len(), 3, "{hist}");
    assert!(lines.iter().all(|l| !l.ends_with(' ')), "{hist:?}");
    let hist: Value =
        serde_json::from_str(&d.ok(&["history", "--json", "--since", &between, "node3"])).unwrap();
    assert_eq!(hist.as_array().unwrap().len(), 1, "{hist}");
    assert_eq!(hist[0]["event"], "undrain");
    // ...and the status as it was between drain and undrain.
    let drained = ["status", "-s", "drain", "-no", "{nodelist} {reason}"];
    assert_eq!(d.ok(&drained).trim(), "node1 disk");
    let mut at = drained.to_vec();
    at.extend(["--at", &between]);
    assert_eq!(d.ok(&at).trim(), "node3 fan");
    let (code, err) = d.fails(&["status", "--at", "2001-01-01"]);
    assert_eq!(code, 1);
    assert!(err.contains("the journal begins later"), "{err}");
    let (code, err) = d.fails(&["status", "--at", "soon"]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid time 'soon'"), "{err}");
}

/// A bearer token's client is recorded by the token's role.
#[test]
fn a_token_client_is_recorded_by_its_role() {
    let s = Scratch::new("node-views-token");
    let (d, addr) = start_with_tcp(&s, CONFIG, &[]);
    let (tcp, token) = (format!("tcp://{addr}"), s.path("token"));
    let o = roster()
        .args(["resource", "--uri", &tcp, "--token-file"])
        .arg(&token)
        .args(["drain", "node2", "psu"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let show: Value = serde_json::from_str(&d.ok(&["show", "--json", "node2"])).unwrap();
    assert_eq!(show[0]["drain"]["requester"], "token:owner", "{show}");
}

/// Item 6's last lines: `show` names each node's last heartbeat (from
/// `resource.agents`) and the version its agent said in its hello; a node
/// no agent spoke for says so, and a gone agent keeps its last heartbeat.
#[test]
fn show_names_the_last_heartbeat_and_the_agent_version() {
    let s = Scratch::new("node-views-agent");
    let d = start(&s, CONFIG, &[]);
    let log = s.path("agent.log");
    let mut agent = roster()
        .args(["agent", "--uri", &d.uri])
        .args([
            "--hostname",
            "node2",
            "--cores",
            "0-3",
            "--heartbeat",
            "0.2",
        ])
        .env_remove("ROSTER_TOKEN_FILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn roster agent");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let doc = loop {
        let json: Value = serde_json::from_str(&d.ok(&["show", "--json", "node[0,2]"])).unwrap();
        if json[1]["state"] == "free" && json[1]["heartbeat"].is_object() {
            break json;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{json}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // heartbeats every 0.2 s: the last one is recent
    std::thread::sleep(Duration::from_millis(700));
    let doc2: Value = serde_json::from_str(&d.ok(&["show", "--json", "node2"])).unwrap();
    let hb = &doc2[0]["heartbeat"];
    let t = hb["timestamp"].as_f64().unwrap();
    assert!(now() - t < 2.0, "{doc2}");
    assert!(
        t > doc[1]["heartbeat"]["timestamp"].as_f64().unwrap(),
        "{doc} {doc2}"
    );
    assert_eq!(hb["connected"], true);
    assert_eq!(doc2[0]["agent_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc[0]["heartbeat"], Value::Null);
    assert_eq!(doc[0]["agent_version"], Value::Null);
    let text = d.ok(&["show", "node[0,2]"]);
    assert!(
        text.contains("  Heartbeat:  none since the service started\n"),
        "{text}"
    );
    assert!(text.contains("  Agent:      unknown\n"), "{text}");
    assert!(
        text.contains(&format!(
            "  Agent:      version {}\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(text.contains(" ago)\n"), "{text}");
    // the agent leaves: its last heartbeat stays, marked gone
    signal(agent.id() as i32, libc::SIGTERM);
    agent.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let json: Value = serde_json::from_str(&d.ok(&["show", "--json", "node2"])).unwrap();
        // The session's end is seen at once; the offline event once it
        // is stored.
        if json[0]["heartbeat"]["connected"] == false && json[0]["state"] == "offline" {
            // The same heartbeat read again: its wall time is derived
            // from the monotonic age at each read, so it may move by the
            // two clocks' drift (milliseconds).
            let gone = json[0]["heartbeat"]["timestamp"].as_f64().unwrap();
            assert!(gone >= t - 0.05, "{t} {json}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{json}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = d.ok(&["show", "node2"]);
    assert!(text.contains(" ago), agent gone\n"), "{text}");
}

/// `[queues]` reaches flux's `config.get`: `list` shows each line's
/// queues, the same whether it is computed from the summary's path or
/// asked for with `-q`.
#[test]
fn list_names_the_configured_queues() {
    let s = Scratch::new("node-views-queues");
    let d = start(&s, CONFIG, &["--monitor-force-up"]);
    d.ok(&["drain", "node1", "x"]);
    let list = d.ok(&["list"]);
    assert!(
        list.contains("      free batch,debug bigmem          1      4     0 node3\n"),
        "{list}"
    );
    assert!(list.contains("      down debug "), "{list}");
    let batch = d.ok(&["list", "-q", "batch"]);
    assert!(
        batch.contains(" node3\n") && !batch.contains("node[0,2]"),
        "{batch}"
    );
}
