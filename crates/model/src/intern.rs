//! String interning for type names, basenames, units, subsystems and
//! property/tag keys.  A vertex stores 4-byte [`Sym`]s instead of strings.

use std::collections::HashMap;

/// An interned string.  `Sym::EMPTY` is always `""`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub(crate) u32);

impl Sym {
    /// The empty string (the default unit).
    pub const EMPTY: Sym = Sym(0);
}

/// Bidirectional map string <-> [`Sym`].
#[derive(Debug, Clone)]
pub(crate) struct Interner {
    map: HashMap<Box<str>, u32>,
    strs: Vec<Box<str>>,
}

impl Default for Interner {
    fn default() -> Self {
        let mut i = Interner {
            map: HashMap::new(),
            strs: Vec::new(),
        };
        i.intern("");
        i
    }
}

impl Interner {
    pub(crate) fn intern(&mut self, s: &str) -> Sym {
        if let Some(&n) = self.map.get(s) {
            return Sym(n);
        }
        let n = self.strs.len() as u32;
        self.strs.push(s.into());
        self.map.insert(s.into(), n);
        Sym(n)
    }

    pub(crate) fn get(&self, s: &str) -> Option<Sym> {
        self.map.get(s).map(|&n| Sym(n))
    }

    pub(crate) fn resolve(&self, s: Sym) -> &str {
        self.strs.get(s.0 as usize).map(|b| &**b).unwrap_or("")
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let strs: usize = self.strs.iter().map(|s| s.len()).sum();
        strs * 2
            + self.strs.capacity() * std::mem::size_of::<Box<str>>()
            + self.map.capacity() * (std::mem::size_of::<Box<str>>() + 4 + 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_is_stable_and_empty_is_zero() {
        let mut i = Interner::default();
        assert_eq!(i.intern(""), Sym::EMPTY);
        let a = i.intern("core");
        let b = i.intern("node");
        assert_ne!(a, b);
        assert_eq!(i.intern("core"), a);
        assert_eq!(i.resolve(a), "core");
        assert_eq!(i.resolve(b), "node");
        assert_eq!(i.get("node"), Some(b));
        assert_eq!(i.get("gpu"), None);
        assert_eq!(i.resolve(Sym(999)), "");
    }
}
