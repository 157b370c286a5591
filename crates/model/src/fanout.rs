//! Block-max indexes over the children of wide pools (a cluster with
//! thousands of nodes).  For every block of [`BLOCK`] consecutive children
//! the index keeps, per type, the largest number of units of that type any
//! child of the block could contribute (its own available units plus its
//! aggregate, 0 when the child is full).  A search for "a child with at
//! least k cores" then skips whole blocks.  The index is kept exact on
//! every allocation change, dropped on structural changes of the pool and
//! rebuilt by [`Graph::ensure_fanout`].

use crate::graph::{Graph, NONE};
use crate::intern::Sym;
use std::collections::HashMap;

/// Children per block (tiny under test so that every path is exercised).
#[cfg(not(test))]
pub(crate) const BLOCK: usize = 64;
#[cfg(test)]
pub(crate) const BLOCK: usize = 2;
/// Pools with at least this many children get an index.
#[cfg(not(test))]
pub(crate) const FANOUT_MIN: usize = 128;
#[cfg(test)]
pub(crate) const FANOUT_MIN: usize = 3;

#[derive(Debug, Clone)]
pub(crate) struct Fanout {
    kids: Vec<u32>,
    pos: HashMap<u32, u32>,
    types: Vec<Sym>,
    /// `vals[t][k]`: units of `types[t]` child k contributes.
    vals: Vec<Vec<u64>>,
    /// `blocks[t][b]`: max over block b of `vals[t]`.
    blocks: Vec<Vec<u64>>,
}

impl Fanout {
    /// Position of the first child at or after `from` in a block that
    /// might satisfy `need`; the caller checks the child itself.
    fn next_from(&self, mut from: usize, need: &[(Sym, u64)]) -> u32 {
        while from < self.kids.len() {
            let b = from / BLOCK;
            let ok = need.iter().all(|&(t, n)| {
                match self.types.iter().position(|&x| x == t) {
                    Some(ti) => self
                        .blocks
                        .get(ti)
                        .and_then(|v| v.get(b))
                        .is_some_and(|&m| m >= n),
                    // Untracked type (absent when the index was built): maybe.
                    None => true,
                }
            });
            if ok {
                return self.kids.get(from).copied().unwrap_or(NONE);
            }
            from = (b + 1) * BLOCK;
        }
        NONE
    }
}

impl Graph {
    /// Units of `t` child `c` contributes to its parent's aggregate.
    pub(crate) fn child_value(&self, c: u32, t: Sym) -> u64 {
        let a = self.own_avail(c);
        if a == 0 {
            return 0;
        }
        let own = if self.v[c as usize].ty == t { a } else { 0 };
        own + self.avail_below_raw(c, t)
    }

    fn fanout_build(&self, p: u32) -> Fanout {
        let kids: Vec<u32> = self.kids(p).map(|c| c.0).collect();
        let pos = kids
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        let ag = self.v[p as usize].agg;
        let types: Vec<Sym> = if ag == NONE {
            Vec::new()
        } else {
            self.aggs
                .get(ag as usize)
                .map(|l| l.iter().map(|e| e.0).collect())
                .unwrap_or_default()
        };
        let vals: Vec<Vec<u64>> = types
            .iter()
            .map(|&t| kids.iter().map(|&c| self.child_value(c, t)).collect())
            .collect();
        let blocks = vals
            .iter()
            .map(|v| {
                v.chunks(BLOCK)
                    .map(|c| c.iter().copied().max().unwrap_or(0))
                    .collect()
            })
            .collect();
        Fanout {
            kids,
            pos,
            types,
            vals,
            blocks,
        }
    }

    /// Build the missing indexes of every wide pool.
    pub fn ensure_fanout(&mut self) {
        if !self.fanout_dirty {
            return;
        }
        self.fanout_dirty = false;
        let min = self.fanout_min;
        let mut todo = Vec::new();
        for (i, x) in self.v.iter().enumerate() {
            if x.first == NONE || self.fanout.contains_key(&(i as u32)) {
                continue;
            }
            if !self.is_live(i as u32) {
                continue;
            }
            if self.kids(i as u32).nth(min.saturating_sub(1)).is_some() {
                todo.push(i as u32);
            }
        }
        for p in todo {
            let f = self.fanout_build(p);
            self.fanout.insert(p, f);
        }
    }

    /// Child `c` of `p` changed its contribution: refresh its block.
    pub(crate) fn fanout_update(&mut self, p: u32, c: u32) {
        let Some(f) = self.fanout.get(&p) else { return };
        let Some(&pos) = f.pos.get(&c) else { return };
        let new: Vec<u64> = f.types.iter().map(|&t| self.child_value(c, t)).collect();
        let Some(f) = self.fanout.get_mut(&p) else {
            return;
        };
        let k = pos as usize;
        let b = k / BLOCK;
        for (ti, nv) in new.into_iter().enumerate() {
            let (Some(vals), Some(blocks)) = (f.vals.get_mut(ti), f.blocks.get_mut(ti)) else {
                continue;
            };
            let Some(slot) = vals.get_mut(k) else {
                continue;
            };
            let old = std::mem::replace(slot, nv);
            let Some(m) = blocks.get_mut(b) else { continue };
            if nv >= *m {
                *m = nv;
            } else if old == *m {
                let lo = b * BLOCK;
                let hi = (lo + BLOCK).min(vals.len());
                *m = vals
                    .get(lo..hi)
                    .and_then(|x| x.iter().max())
                    .copied()
                    .unwrap_or(0);
            }
        }
    }

    /// First child of `p` at or after position `from` worth visiting for
    /// `need`, or `None` when `p` has no index.
    pub(crate) fn fanout_next(&self, p: u32, from: usize, need: &[(Sym, u64)]) -> Option<u32> {
        self.fanout.get(&p).map(|f| f.next_from(from, need))
    }

    /// Position of child `c` in `p`'s index.
    pub(crate) fn fanout_pos(&self, p: u32, c: u32) -> Option<usize> {
        self.fanout
            .get(&p)
            .and_then(|f| f.pos.get(&c))
            .map(|&x| x as usize)
    }

    /// Verify every index against a fresh build.
    pub(crate) fn check_fanout(&self) -> Result<(), String> {
        for (&p, f) in &self.fanout {
            if !self.is_live(p) {
                return Err(format!("fan-out index on unlinked vertex {p}"));
            }
            let fresh = self.fanout_build(p);
            if fresh.kids != f.kids || fresh.types == f.types && fresh.vals != f.vals {
                return Err(format!("{}: fan-out children out of date", self.path_of(p)));
            }
            for (ti, t) in f.types.iter().enumerate() {
                let want = fresh
                    .types
                    .iter()
                    .position(|x| x == t)
                    .and_then(|k| fresh.blocks.get(k));
                let have = f.blocks.get(ti);
                match (have, want) {
                    (Some(h), Some(w)) if h == w => {}
                    (Some(h), None) if h.iter().all(|&x| x == 0) => {}
                    _ => {
                        return Err(format!(
                            "{}: fan-out block maxima of {} out of date",
                            self.path_of(p),
                            self.syms.resolve(*t)
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}
