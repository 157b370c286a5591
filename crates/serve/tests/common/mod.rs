//! Set-up shared by the shell tests: an owner's request, and a real shell
//! (core + local store) over an 8-node R in a temporary directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rpc::{ConnId, Request, Role};
use serde_json::{json, Value};
use serve::service_loop::Shell;
use serve::Plan;
use transport::{Incoming, QueueSlot, ReplySender};

/// An owner's request (matchtag 1) on `conn`, streaming for the
/// streaming topics (journal, acquire).
pub fn incoming(conn: ConnId, topic: &str, payload: Value, replies: ReplySender) -> Incoming {
    Incoming::Request {
        req: Request {
            conn,
            matchtag: 1,
            topic: topic.into(),
            payload,
            streaming: matches!(topic, "resource.journal" | "resource.acquire"),
            role: Role::Owner,
            userid: None,
            who: None,
        },
        replies,
        slot: QueueSlot::unbounded(),
    }
}

/// A shell started on `dir` (state in `dir/state`) with ranks 0-7
/// (`n[0-7]`, 4 cores each), every rank forced up.
pub fn eight_node_shell(dir: &Path) -> Shell {
    let r = dir.join("R.json");
    let text = json!({"version": 1, "execution": {
        "R_lite": [{"rank": "0-7", "children": {"core": "0-3"}}],
        "starttime": 0.0, "expiration": 0.0, "nodelist": ["n[0-7]"]}});
    std::fs::write(&r, text.to_string()).expect("write R");
    let plan = Plan {
        config: None,
        config_path: None,
        statedir: dir.join("state"),
        listen: Vec::new(),
        token: None,
        monitor_force_up: true,
        parent_r: Some(PathBuf::from(&r)),
        limits: transport::Limits::default(),
        role_tokens: Vec::new(),
        tls: None,
        tls_files: None,
        enrol_ca: None,
        reload_dir: None,
        backend: config::Backend::Local,
        public_read: false,
    };
    serve::prepare(&plan).expect("start").0
}
