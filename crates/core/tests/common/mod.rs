//! What the core's integration tests share: inventories, requests, and
//! reading a batch of outputs.
#![allow(dead_code)]

use eventlog::Event;
use roster_core::*;
use rpc::{ReplyTo, Request, Role, RpcError};
use serde_json::Value;

/// An R of ranks `ranks` with cores 0-3 each, on `nodelist`.
pub fn inventory_of(ranks: &str, nodelist: &[&str]) -> Inventory {
    let text = serde_json::json!({"version": 1, "execution": {
        "R_lite": [{"rank": ranks, "children": {"core": "0-3"}}],
        "nodelist": nodelist, "starttime": 0.0, "expiration": 0.0}});
    Inventory::from_json_text(&text.to_string(), Method::Configuration).unwrap()
}

/// fake[0-3], cores 0-3.
pub fn r4() -> Inventory {
    inventory_of("0-3", &["fake[0-3]"])
}

/// A request from nobody in particular (`userid`, `who` unset).
pub fn request(
    conn: u64,
    matchtag: u32,
    topic: &str,
    payload: Value,
    streaming: bool,
    role: Role,
) -> Request {
    Request {
        conn,
        matchtag,
        topic: topic.into(),
        payload,
        streaming,
        role,
        userid: None,
        who: None,
    }
}

/// The replies in `out` to `to`, in order.
pub fn replies_to(out: &[Output], to: ReplyTo) -> Vec<Result<Value, RpcError>> {
    out.iter()
        .filter_map(|o| match o {
            Output::Reply { to: t, reply } if *t == to => {
                Some(reply.clone().map(rpc::Payload::into_value))
            }
            _ => None,
        })
        .collect()
}

/// The events `out` persists, in order.
pub fn persisted(out: &[Output]) -> Vec<Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Persist(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// A started service and what its start-up output.
pub fn start_service(init: Init) -> (Service, Vec<Output>) {
    let mut out = Vec::new();
    let svc = Service::new(init, &mut out).expect("start");
    (svc, out)
}
