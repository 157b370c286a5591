//! A model of the iteration order of the hash tables flux-core uses for
//! per-node children and properties.
//!
//! flux-core keeps each node's children (`core`, `gpu`, ...) and properties
//! in CZMQ-style chained hash tables, and emits JSON objects (R_lite
//! `children`, `execution.properties`) in the tables' *iteration order*.
//! To reproduce its output byte for byte we must reproduce that order, which
//! depends on the table size (a prime from a fixed list), on the string hash
//! (Bernstein, `h = 33*h ^ c` over signed chars), on insertion history (new
//! items go to the head of their bucket chain) and on rehashes, which happen
//! when the load reaches 75% or when a lookup walks a chain longer than the
//! current chain limit.  [`ZTable`] models exactly that state machine with a
//! slab of items and per-bucket singly linked chains.  Only keys and values
//! are stored; there is no real hashing work beyond computing bucket numbers.
//!
//! Operations that inspect the table the way flux-core does (and may thus
//! trigger a rehash) are [`ZTable::lookup`], [`ZTable::insert`] and
//! [`ZTable::delete`]; [`ZTable::peek`] reads without side effects and is
//! used where flux-core does not perform a lookup.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Table sizes: the five largest primes below each power of two from 2^4 to 2^28
/// (larger tables cannot occur with the node and name limits we enforce).
const PRIMES: [u64; 125] = [
    3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 43, 47, 53, 59, 61, 103, 107, 109, 113, 127, 229, 233,
    239, 241, 251, 487, 491, 499, 503, 509, 997, 1009, 1013, 1019, 1021, 2011, 2017, 2027, 2029,
    2039, 4057, 4073, 4079, 4091, 4093, 8161, 8167, 8171, 8179, 8191, 16349, 16361, 16363, 16369,
    16381, 32707, 32713, 32717, 32719, 32749, 65449, 65479, 65497, 65519, 65521, 131023, 131041,
    131059, 131063, 131071, 262111, 262121, 262127, 262133, 262139, 524243, 524257, 524261, 524269,
    524287, 1048517, 1048549, 1048559, 1048571, 1048573, 2097091, 2097097, 2097131, 2097133,
    2097143, 4194247, 4194271, 4194277, 4194287, 4194301, 8388547, 8388571, 8388581, 8388587,
    8388593, 16777141, 16777153, 16777183, 16777199, 16777213, 33554341, 33554347, 33554371,
    33554383, 33554393, 67108763, 67108777, 67108819, 67108837, 67108859, 134217593, 134217613,
    134217617, 134217649, 134217689, 268435331, 268435337, 268435361, 268435367, 268435399,
];
/// How far the prime index advances on each growth step.
const GROWTH: u8 = 5;
const NIL: u32 = u32::MAX;

/// The string hash used for bucket selection: `h = 33*h ^ c` where `c` is
/// the byte as a *signed* char, sign-extended (as C on x86-64 does).
pub(crate) fn bernstein(key: &str) -> u64 {
    key.bytes().fold(0u64, |h, b| {
        h.wrapping_mul(33) ^ (i64::from(b as i8) as u64)
    })
}

/// An interned-ish name (child type or property): the string plus its hash.
#[derive(Clone)]
pub(crate) struct Name(Arc<NameInner>);

struct NameInner {
    hash: u64,
    s: Box<str>,
}

impl Name {
    pub(crate) fn new(s: &str) -> Name {
        match s {
            "core" => core_name().clone(),
            "gpu" => gpu_name().clone(),
            _ => Name::unshared(s),
        }
    }
    fn unshared(s: &str) -> Name {
        Name(Arc::new(NameInner {
            hash: bernstein(s),
            s: s.into(),
        }))
    }
    pub(crate) fn as_str(&self) -> &str {
        &self.0.s
    }
    pub(crate) fn hash(&self) -> u64 {
        self.0.hash
    }
    pub(crate) fn is(&self, s: &str) -> bool {
        &*self.0.s == s
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.s == other.0.s
    }
}
impl Eq for Name {}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.s)
    }
}

/// The shared `core` name.
pub(crate) fn core_name() -> &'static Name {
    static CORE: OnceLock<Name> = OnceLock::new();
    CORE.get_or_init(|| Name::unshared("core"))
}

/// The shared `gpu` name.
pub(crate) fn gpu_name() -> &'static Name {
    static GPU: OnceLock<Name> = OnceLock::new();
    GPU.get_or_init(|| Name::unshared("gpu"))
}

#[derive(Clone, Debug)]
struct Item<V> {
    key: Name,
    next: u32,
    value: V,
}

#[derive(Clone, Debug)]
enum Heads {
    Small([u32; 3]),
    Big(Box<[u32]>),
}

impl Heads {
    fn new(limit: usize) -> Heads {
        if limit == 3 {
            Heads::Small([NIL; 3])
        } else {
            Heads::Big(vec![NIL; limit].into_boxed_slice())
        }
    }
    fn as_slice(&self) -> &[u32] {
        match self {
            Heads::Small(a) => a,
            Heads::Big(b) => b,
        }
    }
    fn as_mut_slice(&mut self) -> &mut [u32] {
        match self {
            Heads::Small(a) => a,
            Heads::Big(b) => b,
        }
    }
}

/// A model of one flux-core (CZMQ `zhashx`) hash table with string keys.
#[derive(Clone, Debug)]
pub(crate) struct ZTable<V> {
    prime_index: u8,
    chain_limit: u32,
    heads: Heads,
    items: Vec<Item<V>>,
}

impl<V> Default for ZTable<V> {
    fn default() -> Self {
        ZTable::new()
    }
}

impl<V> ZTable<V> {
    /// An empty table (3 buckets, chain limit 1); allocation free.
    pub(crate) fn new() -> Self {
        ZTable {
            prime_index: 0,
            chain_limit: 1,
            heads: Heads::Small([NIL; 3]),
            items: Vec::new(),
        }
    }

    /// An empty table with room for `n` items before reallocating.
    pub(crate) fn with_capacity(n: usize) -> Self {
        ZTable {
            items: Vec::with_capacity(n),
            ..ZTable::new()
        }
    }

    fn limit(&self) -> u64 {
        PRIMES[usize::from(self.prime_index)]
    }

    fn bucket(&self, hash: u64) -> usize {
        // The remainder is below the table size, which fits in usize.
        (hash % self.limit()) as usize
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn rehash(&mut self) {
        let new_index = (usize::from(self.prime_index) + usize::from(GROWTH)).min(PRIMES.len() - 1);
        let new_limit = PRIMES[new_index];
        let mut heads = Heads::new(new_limit as usize);
        {
            let old = self.heads.as_slice();
            let new = heads.as_mut_slice();
            for &head in old {
                let mut idx = head;
                while idx != NIL {
                    let item = &mut self.items[idx as usize];
                    let next = item.next;
                    let b = (item.key.hash() % new_limit) as usize;
                    item.next = new[b];
                    new[b] = idx;
                    idx = next;
                }
            }
        }
        self.heads = heads;
        self.prime_index = new_index as u8;
    }

    /// Find `key` without side effects.
    fn find(&self, key: &Name) -> (Option<usize>, u32) {
        let b = self.bucket(key.hash());
        let mut idx = self.heads.as_slice()[b];
        let mut len = 0u32;
        while idx != NIL {
            let item = &self.items[idx as usize];
            if item.key == *key {
                return (Some(idx as usize), len);
            }
            idx = item.next;
            len += 1;
        }
        (None, len)
    }

    /// flux's lookup: find `key`; a walk longer than the chain limit
    /// grows the table.  Returns the item slot.
    fn lookup_slot(&mut self, key: &Name) -> Option<usize> {
        let (found, len) = self.find(key);
        if len > self.chain_limit {
            self.rehash();
            self.chain_limit += 1;
        }
        found
    }

    /// Look `key` up as flux-core does (may reorder the table).
    pub(crate) fn lookup(&mut self, key: &Name) -> Option<&mut V> {
        let slot = self.lookup_slot(key)?;
        Some(&mut self.items[slot].value)
    }

    /// Read without side effects.
    pub(crate) fn peek(&self, key: &str) -> Option<&V> {
        let name_hash = bernstein(key);
        let b = self.bucket(name_hash);
        let mut idx = self.heads.as_slice()[b];
        while idx != NIL {
            let item = &self.items[idx as usize];
            if item.key.is(key) {
                return Some(&item.value);
            }
            idx = item.next;
        }
        None
    }

    /// Read by name without side effects.
    pub(crate) fn peek_name(&self, key: &Name) -> Option<&V> {
        self.find(key).0.map(|i| &self.items[i].value)
    }

    /// Insert as flux-core does; returns false (and changes nothing but the
    /// table shape) if `key` is already present.
    pub(crate) fn insert(&mut self, key: Name, value: V) -> bool {
        let limit = self.limit();
        if self.items.len() as u64 >= limit * 75 / 100 {
            self.rehash();
            self.chain_limit += 1;
        }
        if self.lookup_slot(&key).is_some() {
            return false;
        }
        let b = self.bucket(key.hash());
        let slot = self.items.len() as u32;
        let heads = self.heads.as_mut_slice();
        self.items.push(Item {
            key,
            next: heads[b],
            value,
        });
        heads[b] = slot;
        true
    }

    /// Delete as flux-core does (the lookup may reorder the table).
    pub(crate) fn delete(&mut self, key: &Name) -> Option<V> {
        let slot = self.lookup_slot(key)?;
        Some(self.remove_slot(slot))
    }

    fn unlink(&mut self, slot: usize) {
        let b = self.bucket(self.items[slot].key.hash());
        let next = self.items[slot].next;
        let head = self.heads.as_slice()[b];
        if head as usize == slot {
            self.heads.as_mut_slice()[b] = next;
            return;
        }
        let mut idx = head;
        while idx != NIL {
            let i = idx as usize;
            if self.items[i].next as usize == slot {
                self.items[i].next = next;
                return;
            }
            idx = self.items[i].next;
        }
    }

    fn remove_slot(&mut self, slot: usize) -> V {
        self.unlink(slot);
        let last = self.items.len() - 1;
        if slot != last {
            // The last item moves into `slot`: redirect the link to it.
            let b = self.bucket(self.items[last].key.hash());
            let heads = self.heads.as_mut_slice();
            if heads[b] as usize == last {
                heads[b] = slot as u32;
            } else {
                let mut idx = heads[b];
                while idx != NIL {
                    let i = idx as usize;
                    if self.items[i].next as usize == last {
                        self.items[i].next = slot as u32;
                        break;
                    }
                    idx = self.items[i].next;
                }
            }
        }
        self.items.swap_remove(slot).value
    }

    /// Items in iteration order.
    pub(crate) fn iter(&self) -> ZIter<'_, V> {
        ZIter {
            table: self,
            bucket: 0,
            idx: NIL,
        }
    }

    /// Keys in iteration order.
    pub(crate) fn keys(&self) -> Vec<Name> {
        self.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Values in storage order (cheap; order is not flux's).
    pub(crate) fn values_unordered(&self) -> impl Iterator<Item = (&Name, &V)> {
        self.items.iter().map(|i| (&i.key, &i.value))
    }

    /// Mutable values in storage order (the table shape is unchanged).
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = (&Name, &mut V)> {
        self.items.iter_mut().map(|i| (&i.key, &mut i.value))
    }

    /// True if every chain is short enough that looking up any key that is
    /// present cannot grow the table.
    pub(crate) fn present_lookups_are_inert(&self) -> bool {
        let heads = self.heads.as_slice();
        heads.iter().all(|&h| {
            let mut n = 0u32;
            let mut idx = h;
            while idx != NIL {
                n += 1;
                idx = self.items[idx as usize].next;
            }
            n <= self.chain_limit + 1
        })
    }
}

impl<V: Clone> ZTable<V> {
    /// A copy built the way flux duplicates a table: a fresh table with the
    /// items inserted in this table's iteration order.
    /// Same table state: size, chain limit, buckets and items (keys and
    /// links) all equal, so that the same operations have the same effects
    /// and the same iteration order on both.  Values are not compared.
    pub(crate) fn same_shape<W>(&self, other: &ZTable<W>) -> bool {
        self.prime_index == other.prime_index
            && self.chain_limit == other.chain_limit
            && self.heads.as_slice() == other.heads.as_slice()
            && self.items.len() == other.items.len()
            && self
                .items
                .iter()
                .zip(&other.items)
                .all(|(a, b)| a.next == b.next && a.key == b.key)
    }

    /// The same table with each value replaced by its item's slot.
    pub(crate) fn slots(&self) -> ZTable<u32> {
        ZTable {
            prime_index: self.prime_index,
            chain_limit: self.chain_limit,
            heads: self.heads.clone(),
            items: self
                .items
                .iter()
                .enumerate()
                .map(|(i, it)| Item {
                    key: it.key.clone(),
                    next: it.next,
                    value: i as u32,
                })
                .collect(),
        }
    }

    /// `template` (a [`ZTable::slots`] table after some operations) with
    /// each value taken from `src`'s item at the slot it holds: the result
    /// of those operations on `src`, when `src` has the shape the slots
    /// were taken from.  `None` if a slot is out of range.
    pub(crate) fn fill_from(template: &ZTable<u32>, src: &ZTable<V>) -> Option<ZTable<V>>
    where
        V: Clone,
    {
        let mut items = Vec::with_capacity(template.items.len());
        for it in &template.items {
            items.push(Item {
                key: it.key.clone(),
                next: it.next,
                value: src.items.get(it.value as usize)?.value.clone(),
            });
        }
        Some(ZTable {
            prime_index: template.prime_index,
            chain_limit: template.chain_limit,
            heads: template.heads.clone(),
            items,
        })
    }

    pub(crate) fn dup(&self) -> ZTable<V> {
        let mut t = ZTable::with_capacity(self.items.len());
        for (k, v) in self.iter() {
            t.insert(k.clone(), v.clone());
        }
        t
    }
}

/// Iterator over a [`ZTable`] in flux's iteration order.
pub(crate) struct ZIter<'a, V> {
    table: &'a ZTable<V>,
    bucket: usize,
    idx: u32,
}

impl<'a, V> Iterator for ZIter<'a, V> {
    type Item = (&'a Name, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        let heads = self.table.heads.as_slice();
        while self.idx == NIL {
            if self.bucket >= heads.len() {
                return None;
            }
            self.idx = heads[self.bucket];
            self.bucket += 1;
        }
        let item = &self.table.items[self.idx as usize];
        self.idx = item.next;
        Some((&item.key, &item.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(t: &ZTable<()>) -> Vec<String> {
        t.iter().map(|(k, _)| k.as_str().to_string()).collect()
    }

    #[test]
    fn bernstein_matches_hand_computation() {
        // "core" and "gpu" both land in bucket 0 of a 3-bucket table.
        assert_eq!(bernstein("core"), 3534459);
        assert_eq!(bernstein("core") % 3, 0);
        assert_eq!(bernstein("gpu"), 111714);
        assert_eq!(bernstein("gpu") % 3, 0);
        // Non-ASCII bytes are sign extended.
        let unsigned = (0xc3u64 * 33) ^ 0xa9;
        assert_ne!(bernstein("\u{e9}"), unsigned);
        assert_eq!(
            bernstein("\u{e9}"),
            ((-61i64 as u64).wrapping_mul(33)) ^ (-87i64 as u64)
        );
    }

    #[test]
    fn head_insertion_puts_gpu_before_core() {
        let mut t = ZTable::new();
        t.insert(Name::new("core"), ());
        t.insert(Name::new("gpu"), ());
        assert_eq!(order(&t), ["gpu", "core"]);
        // A duplicate reverses the chain.
        assert_eq!(order(&t.dup()), ["core", "gpu"]);
        assert_eq!(order(&t.dup().dup()), ["gpu", "core"]);
    }

    #[test]
    fn third_insert_grows_table() {
        let mut t = ZTable::new();
        for k in ["a", "b", "c"] {
            t.insert(Name::new(k), ());
        }
        assert_eq!(t.limit(), 17);
        assert_eq!(t.chain_limit, 2);
        assert_eq!(t.len(), 3);
        // After growth, order is by bucket (hash % 17).
        let mut expect: Vec<(u64, &str)> = ["a", "b", "c"]
            .iter()
            .map(|k| (bernstein(k) % 17, *k))
            .collect();
        expect.sort();
        let got = order(&t);
        assert_eq!(
            got,
            expect.iter().map(|e| e.1.to_string()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn lookup_of_missing_key_in_long_chain_rehashes() {
        let mut t = ZTable::new();
        t.insert(Name::new("core"), ());
        t.insert(Name::new("gpu"), ());
        // Find a name hashing to bucket 0 that is absent.
        let probe = (0..1000)
            .map(|i| format!("x{i}"))
            .find(|s| bernstein(s).is_multiple_of(3))
            .unwrap_or_default();
        assert!(t.lookup(&Name::new(&probe)).is_none());
        assert_eq!(t.limit(), 17);
        // Present lookups in the original table do not rehash.
        let mut t2 = ZTable::new();
        t2.insert(Name::new("core"), ());
        t2.insert(Name::new("gpu"), ());
        assert!(t2.present_lookups_are_inert());
        assert!(t2.lookup(&Name::new("core")).is_some());
        assert_eq!(t2.limit(), 3);
    }

    #[test]
    fn delete_keeps_links_consistent() {
        let mut t = ZTable::new();
        let names: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
        for n in &names {
            assert!(t.insert(Name::new(n), ()));
        }
        for n in names.iter().step_by(3) {
            assert!(t.delete(&Name::new(n)).is_some());
        }
        let mut left = order(&t);
        left.sort();
        let mut expect: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, n)| n.clone())
            .collect();
        expect.sort();
        assert_eq!(left, expect);
        for n in &expect {
            assert!(t.peek(n).is_some());
        }
    }
}
