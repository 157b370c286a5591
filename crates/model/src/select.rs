//! RFC 4 Match: predicates over pool data, and a parser for find
//! expressions in the style of Fluxion's `find` (`status=down`,
//! `type=node and sched-now=allocated`, `property=gpu-a100`).
//!
//! Expression syntax: predicates `key=value`, the words `and`, `or`, `not`,
//! and parentheses.  Juxtaposition means `and`.  As in Fluxion, `and` and
//! `or` fold strictly left to right with no precedence (`a or b and c` is
//! `(a or b) and c`); `not` applies to the next predicate or group.
//!
//! Keys:
//!
//! | key | matches when |
//! | --- | --- |
//! | `status=up\|down` | the pool (or, for `down`, an ancestor) is down; `up` = not down |
//! | `state=S` | RFC 4 state is S (`up`, `down`, `degraded`, `failing`, `unknown`, `null`) |
//! | `sched-now=allocated\|free` | allocated now, by its own records or an exclusive ancestor |
//! | `sched-future=reserved\|free` | reserved, by its own records or a wholly reserved ancestor |
//! | `jobid-alloc=J`, `jobid-reserved=J`, `jobid-span=J` | job J holds it (own record or exclusive ancestor) |
//! | `jobid-tag=J` | job J holds it or something below it |
//! | `property=K` / `property=K=V` | has property K (with value V) |
//! | `names=HOSTLIST`, `name=HOSTLIST` | its name is in the RFC 29 hostlist |
//! | `type=T`, `basename=B` | type / basename equals |
//! | `ids=IDSET`, `ranks=IDSET` | its id / rank is in the RFC 22 idset |
//! | `tag=K` / `tag=K=V` | has tag K (with value V) |
//! | `size=N`, `available=N` | size is N / at least N units are available |
//! | `staged=true\|false`, `exclusive=true\|false` | staged / held wholly by one job now |
//! | `agfilter=...` | accepted for Fluxion compatibility; matches everything |
//!
//! Values of the Fluxion keys (`status`, `sched-*`, `property`, `names`)
//! are lower-cased first, as Fluxion does.

use crate::alloc::JobId;
use crate::graph::{flag, Graph, State, VertexId, NONE};
use crate::ModelError;
use idset::IdSet;
use std::collections::HashSet;

/// A match predicate over one pool.
#[derive(Debug, Clone, PartialEq)]
pub enum Pred {
    True,
    False,
    Type(String),
    Basename(String),
    Names(HashSet<String>),
    Ids(IdSet),
    Ranks(IdSet),
    Property(String, Option<String>),
    Tag(String, Option<String>),
    Size(u64),
    AvailableAtLeast(u64),
    State(State),
    /// Down itself or below a down pool.
    Down,
    AllocatedNow,
    ReservedFuture,
    JobAlloc(JobId),
    JobReserved(JobId),
    JobSpan(JobId),
    JobTag(JobId),
    Staged,
    Exclusive,
    And(Vec<Pred>),
    Or(Vec<Pred>),
    Not(Box<Pred>),
}

impl Pred {
    /// Parse a find expression (see the module documentation).
    pub fn parse(expr: &str) -> Result<Pred, ModelError> {
        let toks = tokenize(expr)?;
        if toks.is_empty() {
            return Err(ModelError::Expr("empty expression".into()));
        }
        let mut pos = 0;
        let p = parse_seq(&toks, &mut pos)?;
        if pos != toks.len() {
            return Err(ModelError::Expr(format!(
                "unexpected '{}'",
                toks.get(pos).map_or("", |t| t.as_str())
            )));
        }
        Ok(p)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    Atom(String),
}

impl Tok {
    fn as_str(&self) -> &str {
        match self {
            Tok::Open => "(",
            Tok::Close => ")",
            Tok::And => "and",
            Tok::Or => "or",
            Tok::Not => "not",
            Tok::Atom(s) => s,
        }
    }
}

fn tokenize(s: &str) -> Result<Vec<Tok>, ModelError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<Tok>| {
        if !cur.is_empty() {
            let w = std::mem::take(cur);
            out.push(match w.as_str() {
                "and" => Tok::And,
                "or" => Tok::Or,
                "not" => Tok::Not,
                _ => Tok::Atom(w),
            });
        }
    };
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '(' if cur.is_empty() => {
                out.push(Tok::Open);
                depth += 1;
            }
            ')' if depth > 0 => {
                flush(&mut cur, &mut out);
                out.push(Tok::Close);
                depth -= 1;
            }
            c if c.is_whitespace() => flush(&mut cur, &mut out),
            c => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    if depth != 0 {
        return Err(ModelError::Expr(format!("unbalanced parentheses in '{s}'")));
    }
    Ok(out)
}

fn parse_seq(t: &[Tok], pos: &mut usize) -> Result<Pred, ModelError> {
    let mut acc = parse_unit(t, pos)?;
    loop {
        match t.get(*pos) {
            None | Some(Tok::Close) => return Ok(acc),
            Some(Tok::And) => {
                *pos += 1;
                let r = parse_unit(t, pos)?;
                acc = Pred::And(vec![acc, r]);
            }
            Some(Tok::Or) => {
                *pos += 1;
                let r = parse_unit(t, pos)?;
                acc = Pred::Or(vec![acc, r]);
            }
            Some(_) => {
                let r = parse_unit(t, pos)?;
                acc = Pred::And(vec![acc, r]);
            }
        }
    }
}

fn parse_unit(t: &[Tok], pos: &mut usize) -> Result<Pred, ModelError> {
    match t.get(*pos) {
        None => Err(ModelError::Expr("expression ends early".into())),
        Some(Tok::Open) => {
            *pos += 1;
            let p = parse_seq(t, pos)?;
            match t.get(*pos) {
                Some(Tok::Close) => {
                    *pos += 1;
                    Ok(p)
                }
                _ => Err(ModelError::Expr("missing ')'".into())),
            }
        }
        Some(Tok::Not) => {
            *pos += 1;
            Ok(Pred::Not(Box::new(parse_unit(t, pos)?)))
        }
        Some(Tok::Atom(a)) => {
            *pos += 1;
            atom(a)
        }
        Some(tok) => Err(ModelError::Expr(format!("unexpected '{}'", tok.as_str()))),
    }
}

fn job_id(k: &str, v: &str) -> Result<JobId, ModelError> {
    v.parse::<JobId>()
        .map_err(|_| ModelError::Expr(format!("invalid job id in '{k}={v}'")))
}

fn boolean(k: &str, v: &str) -> Result<bool, ModelError> {
    match v {
        "true" | "t" => Ok(true),
        "false" | "f" => Ok(false),
        _ => Err(ModelError::Expr(format!("invalid boolean in '{k}={v}'"))),
    }
}

fn idset(k: &str, v: &str) -> Result<IdSet, ModelError> {
    IdSet::parse(v).map_err(|e| ModelError::Expr(format!("'{k}={v}': {e}")))
}

fn key_value(v: &str) -> (String, Option<String>) {
    match v.split_once('=') {
        Some((a, b)) => (a.to_string(), Some(b.to_string())),
        None => (v.to_string(), None),
    }
}

fn atom(a: &str) -> Result<Pred, ModelError> {
    let Some((k, v)) = a.split_once('=') else {
        return Err(ModelError::Expr(format!("expected key=value, got '{a}'")));
    };
    if v.is_empty() {
        return Err(ModelError::Expr(format!("missing value in '{a}'")));
    }
    let lower = v.to_lowercase();
    let bad = || Err(ModelError::Expr(format!("unknown value in '{a}'")));
    Ok(match k {
        "status" => match lower.as_str() {
            "up" => Pred::Not(Box::new(Pred::Down)),
            "down" => Pred::Down,
            _ => return bad(),
        },
        "state" => match State::parse(v) {
            Some(s) => Pred::State(s),
            None => return bad(),
        },
        "sched-now" => match lower.as_str() {
            "allocated" => Pred::AllocatedNow,
            "free" => Pred::Not(Box::new(Pred::AllocatedNow)),
            _ => return bad(),
        },
        "sched-future" => match lower.as_str() {
            "reserved" => Pred::ReservedFuture,
            "free" => Pred::Not(Box::new(Pred::ReservedFuture)),
            _ => return bad(),
        },
        "jobid-alloc" => Pred::JobAlloc(job_id(k, v)?),
        "jobid-reserved" => Pred::JobReserved(job_id(k, v)?),
        "jobid-span" => Pred::JobSpan(job_id(k, v)?),
        "jobid-tag" => Pred::JobTag(job_id(k, v)?),
        "property" => {
            let (pk, pv) = key_value(&lower);
            Pred::Property(pk, pv)
        }
        "names" | "name" => {
            let src = if k == "names" { lower.as_str() } else { v };
            let hl = hostlist::Hostlist::decode(src)
                .map_err(|e| ModelError::Expr(format!("'{a}': {e}")))?;
            Pred::Names(hl.iter().collect())
        }
        "type" => Pred::Type(v.to_string()),
        "basename" => Pred::Basename(v.to_string()),
        "ids" | "id" => Pred::Ids(idset(k, v)?),
        "ranks" | "rank" => Pred::Ranks(idset(k, v)?),
        "tag" => {
            let (tk, tv) = key_value(v);
            Pred::Tag(tk, tv)
        }
        "size" => Pred::Size(
            v.parse()
                .map_err(|_| ModelError::Expr(format!("invalid size in '{a}'")))?,
        ),
        "available" => Pred::AvailableAtLeast(
            v.parse()
                .map_err(|_| ModelError::Expr(format!("invalid count in '{a}'")))?,
        ),
        "staged" => {
            if boolean(k, &lower)? {
                Pred::Staged
            } else {
                Pred::Not(Box::new(Pred::Staged))
            }
        }
        "exclusive" => {
            if boolean(k, &lower)? {
                Pred::Exclusive
            } else {
                Pred::Not(Box::new(Pred::Exclusive))
            }
        }
        "agfilter" => {
            boolean(k, &lower)?;
            Pred::True
        }
        _ => return Err(ModelError::Expr(format!("unknown predicate '{a}'"))),
    })
}

fn in_idset(set: &IdSet, n: i64) -> bool {
    u32::try_from(n).is_ok_and(|x| set.contains(x))
}

impl Graph {
    /// RFC 4 Match: does pool `v` satisfy `p`?  False for unknown ids.
    pub fn matches(&self, v: VertexId, p: &Pred) -> bool {
        self.is_live(v.0) && self.eval(v.0, p)
    }

    fn holds_job(&self, i: u32, j: JobId, reserved: bool) -> bool {
        let (own, _) = self.job_amounts(i, j);
        let held = if reserved { own.1 } else { own.0 };
        if held > 0 {
            return true;
        }
        // Implied by an ancestor held wholly by the job.
        self.ups(i).any(|a| {
            let ((al, rs), _) = self.job_amounts(a.0, j);
            let size = self.v[a.index()].size;
            let amt = if reserved { rs } else { al };
            amt > 0 && amt == size
        })
    }

    pub(crate) fn eval(&self, i: u32, p: &Pred) -> bool {
        let x = &self.v[i as usize];
        match p {
            Pred::True => true,
            Pred::False => false,
            Pred::Type(t) => self.syms.resolve(x.ty) == t,
            Pred::Basename(b) => self.syms.resolve(x.basename) == b,
            Pred::Names(set) => set.contains(&*self.name_of(i)),
            Pred::Ids(s) => in_idset(s, x.id),
            Pred::Ranks(s) => in_idset(s, x.rank),
            Pred::Property(k, val) => {
                let pr = self.view(i);
                match (pr.property(k), val) {
                    (Some(_), None) => true,
                    (Some(have), Some(want)) => have == want,
                    (None, _) => false,
                }
            }
            Pred::Tag(k, val) => match (self.view(i).tag(k), val) {
                (Some(_), None) => true,
                (Some(have), Some(want)) => have == Some(want.as_str()),
                (None, _) => false,
            },
            Pred::Size(n) => x.size == *n,
            Pred::AvailableAtLeast(n) => self.eff_avail(i) >= *n,
            Pred::State(s) => x.state == *s,
            Pred::Down => {
                x.state == State::Down
                    || self.ups(i).any(|a| self.v[a.index()].state == State::Down)
            }
            Pred::AllocatedNow => self.own_alloc(i) > 0 || self.ancestor_allocated_now(i).is_some(),
            Pred::ReservedFuture => {
                self.has_reservation(i)
                    || self.ups(i).any(|a| {
                        let size = self.v[a.index()].size;
                        self.reservation_units(a.0)
                            .iter()
                            .any(|&n| n == size && size > 0)
                    })
            }
            Pred::JobAlloc(j) => self.holds_job(i, *j, false),
            Pred::JobReserved(j) => self.holds_job(i, *j, true),
            Pred::JobSpan(j) => self.holds_job(i, *j, false) || self.holds_job(i, *j, true),
            Pred::JobTag(j) => {
                self.holds_job(i, *j, false)
                    || self.holds_job(i, *j, true)
                    || self.job_amounts(i, *j).1
            }
            Pred::Staged => x.flags & flag::STAGED != 0,
            Pred::Exclusive => {
                let size = x.size;
                self.job_units_now(i).iter().any(|&n| n == size && size > 0)
            }
            Pred::And(v) => v.iter().all(|q| self.eval(i, q)),
            Pred::Or(v) => v.iter().any(|q| self.eval(i, q)),
            Pred::Not(q) => !self.eval(i, q),
        }
    }

    /// Matching pools in pre-order (every root).
    pub fn find_matches(&self, p: &Pred) -> Vec<VertexId> {
        let mut out = Vec::new();
        for &r in &self.roots {
            self.preorder_from(r, &mut |i| {
                if self.eval(i, p) {
                    out.push(VertexId(i));
                }
            });
        }
        out
    }

    pub(crate) fn preorder_from(&self, r: u32, f: &mut dyn FnMut(u32)) {
        let mut stack = vec![r];
        while let Some(i) = stack.pop() {
            f(i);
            let mut c = self.v[i as usize].last;
            while c != NONE {
                stack.push(c);
                c = self.v[c as usize].prev;
            }
        }
    }

    /// RFC 4 Find: a new graph holding every pool matching `p` together
    /// with its descendants and its ancestors up to the root.  Allocation
    /// records of the kept pools are kept.
    pub fn find(&self, p: &Pred) -> Graph {
        let mut keep = vec![false; self.v.len()];
        for m in self.find_matches(p) {
            if keep[m.index()] {
                continue;
            }
            self.preorder_from(m.0, &mut |i| keep[i as usize] = true);
            for a in self.ups(m.0) {
                if keep[a.index()] {
                    break;
                }
                keep[a.index()] = true;
            }
        }
        self.extract(&|i| keep[i as usize], None, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::cluster;

    fn g() -> Graph {
        let (mut g, root) = cluster();
        for n in 0..4 {
            let host = g.intern("fluke");
            let p = g.pool("node").basename(host).id(n + 10).rank(n);
            let node = g.add_child(root, p).unwrap();
            for c in 0..4 {
                let p = g.pool("core").id(c).rank(n);
                g.add_child(node, p).unwrap();
            }
            if n % 2 == 0 {
                let p = g.pool("gpu").id(0).rank(n);
                g.add_child(node, p).unwrap();
                g.set_property(node, "gpu-a100", "").unwrap();
            }
        }
        g
    }

    fn names(g: &Graph, v: &[VertexId]) -> Vec<String> {
        v.iter()
            .map(|&x| g.get(x).unwrap().name().into_owned())
            .collect()
    }

    #[test]
    fn parse_and_fold_left_to_right() {
        assert_eq!(Pred::parse("type=node").unwrap(), Pred::Type("node".into()));
        assert_eq!(
            Pred::parse("status=up or sched-now=allocated").unwrap(),
            Pred::Or(vec![Pred::Not(Box::new(Pred::Down)), Pred::AllocatedNow])
        );
        // No precedence: a or b and c == (a or b) and c.
        assert_eq!(
            Pred::parse("type=a or type=b and type=c").unwrap(),
            Pred::And(vec![
                Pred::Or(vec![Pred::Type("a".into()), Pred::Type("b".into())]),
                Pred::Type("c".into())
            ])
        );
        // Juxtaposition is and.
        assert_eq!(
            Pred::parse("sched-now=allocated status=down").unwrap(),
            Pred::And(vec![Pred::AllocatedNow, Pred::Down])
        );
        assert!(Pred::parse(
            "(status=up and sched-now=allocated) and (sched-now=free and status=down)"
        )
        .is_ok());
        assert_eq!(
            Pred::parse("property=Foo").unwrap(),
            Pred::Property("foo".into(), None)
        );
        assert_eq!(Pred::parse("agfilter=t").unwrap(), Pred::True);
    }

    #[test]
    fn parse_errors_name_the_input() {
        let e = |s: &str| Pred::parse(s).unwrap_err().to_string();
        for (expr, msg) in [
            ("foo=bar", "unknown predicate 'foo=bar'"),
            ("status=sideways", "unknown value in 'status=sideways'"),
            ("type", "expected key=value, got 'type'"),
            ("(type=node", "unbalanced parentheses in '(type=node'"),
            ("", "empty expression"),
            ("type=node and", "expression ends early"),
            (
                "jobid-alloc=18446744073709551616",
                "invalid job id in 'jobid-alloc=18446744073709551616'",
            ),
        ] {
            assert_eq!(e(expr), format!("find expression: {msg}"));
        }
        assert!(e("ranks=3-1").contains("ranks=3-1"));
    }

    #[test]
    fn match_pool_data() {
        let mut g = g();
        let n1 = g.lookup("/cluster0/fluke11").unwrap();
        g.tag(n1, "owner", Some("ops")).unwrap();
        let t = |g: &Graph, e: &str| names(g, &g.find_matches(&Pred::parse(e).unwrap()));
        assert_eq!(
            t(&g, "type=node"),
            ["fluke10", "fluke11", "fluke12", "fluke13"]
        );
        assert_eq!(t(&g, "type=node and ranks=1-2"), ["fluke11", "fluke12"]);
        assert_eq!(t(&g, "names=fluke[11,13]"), ["fluke11", "fluke13"]);
        assert_eq!(t(&g, "property=gpu-a100"), ["fluke10", "fluke12"]);
        assert_eq!(t(&g, "tag=owner=ops"), ["fluke11"]);
        assert!(t(&g, "tag=owner=dev").is_empty());
        assert_eq!(t(&g, "type=gpu").len(), 2);
        assert_eq!(t(&g, "type=core and ids=3 and ranks=0"), ["core3"]);
        assert_eq!(t(&g, "basename=fluke and not ranks=0-2"), ["fluke13"]);
        assert_eq!(t(&g, "type=cluster or type=gpu").len(), 3);
    }

    #[test]
    fn status_and_allocation_are_inherited() {
        let mut g = g();
        let n2 = g.lookup("/cluster0/fluke12").unwrap();
        g.set_state(n2, State::Down).unwrap();
        let n0 = g.lookup("/cluster0/fluke10").unwrap();
        g.allocate(n0, 1, 42).unwrap();
        let c = g.lookup("/cluster0/fluke11/core2").unwrap();
        g.allocate(c, 1, 43).unwrap();
        let count = |e: &str| g.find_matches(&Pred::parse(e).unwrap()).len();
        // Down node and its 5 children.
        assert_eq!(count("status=down"), 6);
        // Node 0 + its 5 children, plus core2 of node 1.
        assert_eq!(count("sched-now=allocated"), 7);
        assert_eq!(count("jobid-alloc=42"), 6);
        assert_eq!(count("jobid-alloc=43"), 1);
        // Tag: the core and its ancestors.
        assert_eq!(count("jobid-tag=43"), 3);
        assert_eq!(count("exclusive=true"), 2);
        assert_eq!(count("sched-now=allocated status=down"), 0);
        // 16 cores less node 0's 4, core2 of node 1 and the down node's 4.
        assert_eq!(count("available=1 and type=core"), 7);
    }

    #[test]
    fn find_keeps_children_and_ancestors() {
        let g = g();
        let f = g.find(&Pred::parse("names=fluke12").unwrap());
        // cluster + node + 4 cores + gpu.
        assert_eq!(f.len(), 7);
        assert!(f.lookup("/cluster0/fluke12/gpu0").is_some());
        assert!(f.lookup("/cluster0/fluke11").is_none());
        f.check_invariants().unwrap();
        let f = g.find(&Pred::parse("type=gpu").unwrap());
        assert_eq!(f.len(), 1 + 2 + 2);
        assert_eq!(
            f.aggregate_all().into_iter().collect::<Vec<_>>(),
            vec![
                ("cluster".to_string(), 1),
                ("gpu".to_string(), 2),
                ("node".to_string(), 2)
            ]
        );
        let empty = g.find(&Pred::False);
        assert!(empty.is_empty());
    }
}
