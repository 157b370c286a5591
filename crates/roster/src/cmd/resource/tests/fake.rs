//! A scripted service for unit tests: canned replies per topic, and a
//! record of every request.

use super::super::service::{ReplyStream, Service, StreamItem, SvcError};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// Requests seen, in order: (topic, payload).
pub type Log = Rc<RefCell<Vec<(String, Value)>>>;

/// The fake service.
#[derive(Default)]
pub struct Fake {
    replies: HashMap<String, Result<Value, SvcError>>,
    streams: HashMap<String, Vec<StreamItem>>,
    /// Everything asked, in order.
    pub log: Log,
}

impl Fake {
    pub fn new() -> Fake {
        Fake::default()
    }

    /// Answer `topic` with `reply` (every time).
    pub fn reply(mut self, topic: &str, reply: Result<Value, SvcError>) -> Fake {
        self.replies.insert(topic.to_string(), reply);
        self
    }

    /// Answer `topic` with a JSON payload given as text.
    pub fn json(self, topic: &str, text: &str) -> Fake {
        let v = serde_json::from_str(text).unwrap_or_else(|e| panic!("bad test JSON: {e}"));
        self.reply(topic, Ok(v))
    }

    /// Answer the streaming `topic` with these items.
    pub fn stream_items(mut self, topic: &str, items: Vec<StreamItem>) -> Fake {
        self.streams.insert(topic.to_string(), items);
        self
    }
}

struct Items(std::vec::IntoIter<StreamItem>);

impl ReplyStream for Items {
    fn next(&mut self, timeout: Option<Duration>) -> StreamItem {
        match self.0.next() {
            Some(i) => i,
            // nothing more will ever come: a live stream that stays open
            None if timeout.is_some() => StreamItem::Timeout,
            None => StreamItem::End(SvcError::rpc(rpc::errno::ENODATA, "")),
        }
    }
}

impl Service for Fake {
    fn rpc(&mut self, topic: &str, payload: Value) -> Result<Value, SvcError> {
        self.log.borrow_mut().push((topic.to_string(), payload));
        match self.replies.get(topic) {
            Some(r) => r.clone(),
            None => Err(SvcError::rpc(
                rpc::errno::ENOSYS,
                &format!("No service matching {topic} is registered"),
            )),
        }
    }

    /// Asked only when the test gave a reply for it.
    fn summary(&mut self, req: &rpc::msg::SummaryRequest) -> Option<Value> {
        use rpc::catalog::{Call, Summary};
        if !self.replies.contains_key(Summary::TOPIC) {
            return None;
        }
        super::super::service::call::<Summary>(self, req).ok()
    }

    fn stream(&mut self, topic: &str, payload: Value) -> Result<Box<dyn ReplyStream>, SvcError> {
        self.log.borrow_mut().push((topic.to_string(), payload));
        match self.streams.get(topic) {
            Some(items) => Ok(Box::new(Items(items.clone().into_iter()))),
            None => Err(SvcError::rpc(
                rpc::errno::ENOSYS,
                &format!("No service matching {topic} is registered"),
            )),
        }
    }
}
