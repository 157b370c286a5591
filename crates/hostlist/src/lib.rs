//! RFC 29 hostlists (stub: the implementation is being written; the API below is the contract).

use std::fmt;

/// Why a string is not a valid hostlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("invalid hostlist '{0}'")]
    Invalid(String),
}

/// An ordered list of hostnames (duplicates allowed), stored compressed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hostlist {
    hosts: Vec<String>,
}

impl Hostlist {
    pub fn new() -> Self {
        Hostlist::default()
    }
    pub fn decode(s: &str) -> Result<Self, HostlistError> {
        Ok(Hostlist {
            hosts: s
                .split(',')
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }
    pub fn encode(&self) -> String {
        self.hosts.join(",")
    }
    pub fn len(&self) -> usize {
        self.hosts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
    pub fn nth(&self, i: usize) -> Option<String> {
        self.hosts.get(i).cloned()
    }
    pub fn find(&self, host: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h == host)
    }
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.hosts.iter().cloned()
    }
    pub fn push(&mut self, host: &str) {
        self.hosts.push(host.to_string());
    }
    pub fn append(&mut self, other: &Hostlist) {
        self.hosts.extend(other.hosts.iter().cloned());
    }
}

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl<S: AsRef<str>> FromIterator<S> for Hostlist {
    fn from_iter<T: IntoIterator<Item = S>>(iter: T) -> Self {
        let mut h = Hostlist::new();
        for s in iter {
            h.push(s.as_ref());
        }
        h
    }
}
