//! `flux resource list`, `info` and `R`: the scheduler view from the
//! `resource.sched-status` payload (`{all, down, allocated}`), as
//! flux-resource.py computes it.

use crate::cmd::{CmdOutput, Level, Message};
use crate::config::{Env, FormatChoice, FormatConfig, INFO_FORMAT};
use crate::output::{headings, Headings, OutputFormat};
use crate::status::{nodelist_of, ranks_by_queue, resource_set};
use crate::value::{FieldValue, FormatItem};
use hostlist::Hostlist;
use idset::IdSet;
use pycompat::error::{PyError, PyResult};
use pycompat::time::LocalZone;
use rset::Rset;
use serde_json::Value;
use std::cell::RefCell;

/// Valid states for `list`, `info` and `R`.
pub const LIST_VALID_STATES: [&str; 5] = ["up", "down", "allocated", "free", "all"];

/// The `list` heading table.
pub fn list_headings() -> Headings {
    headings(&[
        ("state", "STATE"),
        ("queue", "QUEUE"),
        ("properties", "PROPERTIES"),
        ("propertiesx", "PROPERTIES"),
        ("nnodes", "NNODES"),
        ("ncores", "NCORES"),
        ("ngpus", "NGPUS"),
        ("ranks", "RANKS"),
        ("nodelist", "NODELIST"),
        ("rlist", "LIST"),
    ])
}

/// Command-line options of `flux resource list` / `info` / `R`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOptions {
    /// `-o/--format` (list only; default `default`).
    pub format: String,
    /// `-s/--states` (`None`: the subcommand's default).
    pub states: Option<String>,
    /// `-i/--include TARGETS`.
    pub include: Option<String>,
    /// `-q/--queue` values (already split on commas).
    pub queues: Vec<String>,
    /// `--skip-empty`.
    pub skip_empty: bool,
    /// `--no-skip-empty`.
    pub no_skip_empty: bool,
    /// `-n/--no-header`.
    pub no_header: bool,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            format: "default".into(),
            states: None,
            include: None,
            queues: Vec::new(),
            skip_empty: false,
            no_skip_empty: false,
            no_header: false,
        }
    }
}

/// Which view to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListView {
    /// `flux resource list` (default states `free,allocated,down`).
    List,
    /// `flux resource info` (default states `all`).
    Info,
    /// `flux resource R` (default states `all`).
    R,
}

/// The RPC results a list view needs.
#[derive(Debug, Clone, Copy)]
pub struct ListInput<'a> {
    /// The `resource.sched-status` (or `sched.resource-status`) response.
    pub sched_status: &'a Value,
    /// The instance configuration (`config.get`), if it could be fetched
    /// (queues).
    pub config: Option<&'a Value>,
}

/// States validated; ready to render.
#[derive(Debug, Clone)]
pub struct ListPlan {
    view: ListView,
    opts: ListOptions,
    states: Vec<String>,
    /// Free the per-node sets after rendering (see [`ListPlan::leak_sets`]).
    free_sets: bool,
    /// Never take the merged-line shortcut (tests compare both paths).
    general_only: bool,
}

/// First phase: validate the states (`Invalid resource state X
/// specified`, exit 1).
pub fn list_prepare(view: ListView, opts: &ListOptions) -> Result<ListPlan, CmdOutput> {
    let mut opts = opts.clone();
    let default = match view {
        ListView::List => "free,allocated,down",
        ListView::Info | ListView::R => "all",
    };
    let raw = match (&opts.states, view) {
        (Some(s), ListView::Info) if s.is_empty() => default.to_string(),
        (Some(s), _) => s.clone(),
        (None, _) => default.to_string(),
    };
    if view == ListView::Info {
        opts.no_header = true;
        opts.format = INFO_FORMAT.into();
    }
    let states: Vec<String> = raw.split(',').map(String::from).collect();
    if let Some(bad) = states
        .iter()
        .find(|s| !LIST_VALID_STATES.contains(&s.as_str()))
    {
        return Err(CmdOutput {
            stdout: String::new(),
            messages: vec![Message {
                level: Level::Error,
                text: format!("Invalid resource state {bad} specified"),
            }],
            exit_code: 1,
        });
    }
    Ok(ListPlan {
        view,
        opts,
        states,
        free_sets: true,
        general_only: false,
    })
}

/// flux's `SchedResourceList` after filtering.
struct SchedResources {
    all: Rset,
    down: Rset,
    allocated: Rset,
    /// `all - down`, computed only when a requested state needs it.
    up: Rset,
    /// `up - allocated`, likewise.
    free: Rset,
    /// The starttime and expiration of `all` as received.
    orig_times: (f64, f64),
}

fn rl_err(e: rset::RError) -> PyError {
    PyError::Value(e.to_string())
}

impl SchedResources {
    fn new(
        input: &ListInput<'_>,
        opts: &ListOptions,
        states: &[String],
    ) -> PyResult<SchedResources> {
        let resp = input.sched_status;
        let get = |k: &str| resource_set(resp.get(k));
        let mut all = get("all")?;
        let mut down = get("down")?;
        let mut allocated = get("allocated")?;
        let orig_times = (all.starttime(), all.expiration());
        if !opts.queues.is_empty() {
            let ranks = ranks_by_queue(&all, input.config, &opts.queues)
                .map_err(|e| PyError::Value(format!("--queue: {e}")))?;
            all = all.copy_ranks(&ranks);
            down = down.copy_ranks(&ranks);
            allocated = allocated.copy_ranks(&ranks);
        }
        if let Some(inc) = opts.include.as_deref().filter(|s| !s.is_empty()) {
            let ranks = match IdSet::parse(inc) {
                Ok(r) => r,
                Err(_) => {
                    let hl = Hostlist::decode(inc).map_err(|_| {
                        PyError::Value(format!("--include: Invalid hostlist: '{inc}'"))
                    })?;
                    // host_ranks(): positions in the rank-ordered nodelist
                    // (which also sorts `all`), mapped to ranks.
                    all.sort_by_rank();
                    let nodelist = nodelist_of(&all);
                    let ranks: Vec<u32> = all.ranks().iter().collect();
                    let mut ids = IdSet::new();
                    for host in hl.iter() {
                        if let Some(r) = nodelist.find(&host).and_then(|i| ranks.get(i)) {
                            ids.insert(*r);
                        }
                    }
                    ids
                }
            };
            all = all.copy_ranks(&ranks);
            down = down.copy_ranks(&ranks);
            allocated = allocated.copy_ranks(&ranks);
        }
        // ResourceSet.diff() copies its operand first (rlist_copy_empty),
        // then diffs the copy; the extra node copies matter for the order
        // of property and child tables (`copy_diff` makes both copies).
        // `up` and `free` are derived sets nothing else depends on, so
        // they are built only when asked for.
        let need_free = states.iter().any(|s| s == "free");
        let need_up = (need_free && !allocated.is_empty()) || states.iter().any(|s| s == "up");
        let mut up = if need_up {
            all.copy_diff(&down).map_err(rl_err)?
        } else {
            // the error computing `up` would have raised
            all.check_copyable().map_err(rl_err)?;
            Rset::new()
        };
        let free = if need_free && allocated.is_empty() && !states.iter().any(|s| s == "up") {
            // `up` only leads to `free`: one pass (`up` was computed empty)
            all.copy_diff_copy(&down).map_err(rl_err)?
        } else if need_free {
            up.copy_diff(&allocated).map_err(rl_err)?
        } else {
            Rset::new()
        };
        // Sets no requested state shows are not needed any more.
        if !states.iter().any(|s| s == "up") {
            drop(std::mem::take(&mut up));
        }
        if !states.iter().any(|s| s == "all") {
            drop(std::mem::take(&mut all));
        }
        Ok(SchedResources {
            all,
            down,
            allocated,
            up,
            free,
            orig_times,
        })
    }

    fn get_mut(&mut self, state: &str) -> &mut Rset {
        match state {
            "down" => &mut self.down,
            "allocated" => &mut self.allocated,
            "up" => &mut self.up,
            "free" => &mut self.free,
            _ => &mut self.all,
        }
    }

    fn get(&self, state: &str) -> &Rset {
        let s = self;
        by_state(state, [&s.all, &s.down, &s.allocated, &s.up, &s.free])
    }
}

/// Of values for all, down, allocated, up and free, the one for `state`
/// (`all` for any other name).
fn by_state<T>(state: &str, [all, down, allocated, up, free]: [T; 5]) -> T {
    match state {
        "down" => down,
        "allocated" => allocated,
        "up" => up,
        "free" => free,
        _ => all,
    }
}

/// flux-resource.py's `ResourceSetExtra`: a resource set with a state and
/// queue information.
#[derive(Debug)]
pub struct ListLine {
    rset: RefCell<Rset>,
    state: String,
    queue: Option<String>,
    config: Option<Value>,
    /// `property_names(rset)`, once computed (reset when `rset` changes).
    props: RefCell<Option<Vec<String>>>,
    /// Values of content fields ([`CACHED_FIELDS`]) once computed (reset
    /// when `rset` changes): output formatting asks for each field more
    /// than once.
    cached: RefCell<Vec<(&'static str, FieldValue)>>,
}

/// Fields whose value depends only on the set's content, cached per line.
/// (`rlist` is not: `nodelist` sorts the set, which can change it.)
const CACHED_FIELDS: [&str; 4] = ["ncores", "ngpus", "ranks", "nodelist"];

impl ListLine {
    fn new(rset: Rset, state: &str, queue: Option<String>, config: Option<&Value>) -> ListLine {
        ListLine {
            rset: RefCell::new(rset),
            state: state.to_string(),
            queue,
            config: config.cloned(),
            props: RefCell::new(None),
            cached: RefCell::new(Vec::new()),
        }
    }

    /// Property names of the set in `get_properties()` order.
    fn property_names(&self) -> Vec<String> {
        if let Some(p) = self.props.borrow().as_ref() {
            return p.clone();
        }
        let p = self.rset.borrow().property_names_in_list_order();
        *self.props.borrow_mut() = Some(p.clone());
        p
    }

    /// Add `other`'s resources (`ResourceSet.add`).
    fn add(&self, other: &Rset) -> Result<(), rset::RError> {
        self.props.borrow_mut().take();
        self.cached.borrow_mut().clear();
        self.rset.borrow_mut().add(other)
    }

    fn ranks(&self) -> IdSet {
        self.rset.borrow().ranks()
    }

    fn queue_str(&self) -> String {
        if let Some(q) = &self.queue {
            return q.clone();
        }
        let Some(cfg) = self.config.as_ref() else {
            return String::new();
        };
        if self.rset.borrow().is_empty() {
            return String::new();
        }
        queues_of(cfg, &self.property_names()).join(",")
    }

    fn propertiesx(&self) -> String {
        let mut props = self.property_names();
        let q = self.queue_str();
        if !q.is_empty() {
            for name in q.split(',') {
                props.retain(|p| p != name);
            }
        }
        props.join(",")
    }
}

/// The `version` of the `--json` document of `list`; bumped only when a
/// field changes meaning or disappears.
pub const LIST_JSON_VERSION: u32 = 1;

/// What separates `--json` lines: state and property set (queues follow
/// from the properties).
const LIST_JSON_KEY: &str = "{state} {properties}";

/// The non-empty comma-separated words of `s` (a `--json` list).
fn split(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

impl ListLine {
    /// One line of `--json` output.
    fn to_json(&self) -> Value {
        let text = |name: &str| self.attr(name).map(|v| v.py_str()).unwrap_or_default();
        let count = |name: &str| match self.attr(name) {
            Some(FieldValue::Int(i)) => i,
            _ => 0,
        };
        serde_json::json!({
            "state": self.state,
            "properties": split(&text("properties")),
            "queues": split(&text("queue")),
            "nnodes": count("nnodes"),
            "ncores": count("ncores"),
            "ngpus": count("ngpus"),
            "ranks": text("ranks"),
            "nodelist": text("nodelist"),
        })
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::String(s) => !s.is_empty(),
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
    }
}

impl FormatItem for ListLine {
    fn class_path(&self) -> String {
        "__main__.ResourceSetExtra".into()
    }

    fn attr(&self, name: &str) -> Option<FieldValue> {
        let Some(key) = CACHED_FIELDS.iter().find(|f| **f == name) else {
            return self.compute_attr(name);
        };
        if let Some((_, v)) = self.cached.borrow().iter().find(|(k, _)| k == key) {
            return Some(v.clone());
        }
        let v = self.compute_attr(name)?;
        self.cached.borrow_mut().push((key, v.clone()));
        Some(v)
    }
}

impl ListLine {
    fn compute_attr(&self, name: &str) -> Option<FieldValue> {
        Some(match name {
            "state" => FieldValue::Str(self.state.clone()),
            "queue" => FieldValue::Str(self.queue_str()),
            "properties" => FieldValue::Str(self.property_names().join(",")),
            "propertiesx" => FieldValue::Str(self.propertiesx()),
            "nnodes" => FieldValue::Int(self.rset.borrow().nnodes() as i64),
            "ncores" => FieldValue::Int(self.rset.borrow().count("core") as i64),
            "ngpus" => FieldValue::Int(self.rset.borrow().count("gpu") as i64),
            "ranks" => {
                let r = self.ranks();
                FieldValue::Object {
                    type_name: "IDset".into(),
                    text: r.encode(),
                    repr: format!("IDset('{}')", r.encode()),
                    truthy: !r.is_empty(),
                }
            }
            "nodelist" => {
                // rlist_nodelist() sorts the node list by rank
                self.rset.borrow_mut().sort_by_rank();
                let hl = nodelist_of(&self.rset.borrow());
                FieldValue::Object {
                    type_name: "Hostlist".into(),
                    text: hl.encode(),
                    repr: format!("Hostlist('{}')", hl.encode()),
                    truthy: !hl.is_empty(),
                }
            }
            "rlist" => FieldValue::Str(self.rset.borrow().dumps()),
            _ => return None,
        })
    }
}

/// `split_by_property_combinations(rset)` ([`Rset::split_by_properties`]).
fn split_by_properties(r: &Rset) -> PyResult<Vec<Rset>> {
    r.split_by_properties()
        .map_err(|e| PyError::Value(format!("copy_constraint: {e}")))
}

const UNIQ_FIELDS: [&str; 4] = ["state", "properties", "propertiesx", "queue"];

/// Fields that depend only on a line's content (its ranks, hostnames and
/// children), not on its state, queue, or the order of its nodes and
/// tables.
const CONTENT_FIELDS: [&str; 5] = ["nnodes", "ncores", "ngpus", "ranks", "nodelist"];

impl ListPlan {
    /// Do not free the resource sets after a successful render: for a
    /// process that exits right after printing, freeing tens of thousands
    /// of node objects is wasted time (the OS reclaims the memory).
    pub fn leak_sets(mut self) -> ListPlan {
        self.free_sets = false;
        self
    }

    /// The validated states, in order.
    pub fn states(&self) -> &[String] {
        &self.states
    }

    /// Second phase: render the view.  `config` supplies named list
    /// formats (unused for `info` and `R`).
    pub fn render(
        &self,
        input: &ListInput<'_>,
        config: &FormatConfig,
        env: Env<'_>,
        zone: &dyn LocalZone,
    ) -> CmdOutput {
        let mut out = String::new();
        match self.render_into(input, config, env, zone, &mut out) {
            Ok(()) => CmdOutput::ok(out),
            Err(RenderStop::Printed(text)) => CmdOutput::ok(text),
            Err(RenderStop::Error(e)) => CmdOutput::exception(out, &e),
        }
    }

    fn render_into(
        &self,
        input: &ListInput<'_>,
        config: &FormatConfig,
        env: Env<'_>,
        zone: &dyn LocalZone,
        out: &mut String,
    ) -> Result<(), RenderStop> {
        let mut res = SchedResources::new(input, &self.opts, &self.states)?;
        if self.view == ListView::R {
            let mut r = Rset::new();
            r.set_starttime(res.orig_times.0);
            r.set_expiration(res.orig_times.1);
            for s in &self.states {
                r.add(res.get(s)).map_err(rl_err)?;
            }
            out.push_str(&r.encode());
            out.push('\n');
            return Ok(());
        }
        let fmt = match config.get_format_string(&self.opts.format, env)? {
            FormatChoice::Format(f) => f,
            FormatChoice::Print(text) => return Err(RenderStop::Printed(text)),
        };
        let hd = list_headings();
        let mut formatter = OutputFormat::new(&fmt, &hd)?;
        let owned = self.uniq_lines(&mut res, &formatter, input.config, zone)?;
        let lines = self.ordered(&owned);
        let mut items: Vec<&dyn FormatItem> = lines.iter().map(|l| *l as &dyn FormatItem).collect();
        formatter.print_items(&mut items, self.opts.no_header, zone, out)?;
        drop(items);
        drop(lines);
        if !self.free_sets {
            std::mem::forget(owned);
            std::mem::forget(res);
        }
        Ok(())
    }

    /// `--json` (`list` and `info`): the lines the text view would show
    /// (same `-s`, `-i`, `-q`, `--skip-empty` rules), one object per
    /// distinct state and property set, whatever `-o` says.  The document
    /// is [`LIST_JSON_VERSION`]'s schema (README: JSON output).
    pub fn render_json(&self, input: &ListInput<'_>, zone: &dyn LocalZone) -> CmdOutput {
        let run = || -> PyResult<String> {
            let mut res = SchedResources::new(input, &self.opts, &self.states)?;
            let formatter = OutputFormat::new(LIST_JSON_KEY, &list_headings())?;
            let owned = self.uniq_lines(&mut res, &formatter, input.config, zone)?;
            let lines: Vec<Value> = self
                .ordered(&owned)
                .into_iter()
                .map(ListLine::to_json)
                .collect();
            let doc = serde_json::json!({ "version": LIST_JSON_VERSION, "lines": lines });
            if !self.free_sets {
                std::mem::forget(owned);
                std::mem::forget(res);
            }
            Ok(format!("{doc}\n"))
        };
        match run() {
            Ok(text) => CmdOutput::ok(text),
            Err(e) => CmdOutput::exception(String::new(), &e),
        }
    }

    /// Lines in output order (by state as given, then first rank), the
    /// empty ones dropped when `--skip-empty` (or `-i`) asks.
    fn ordered<'a>(&self, owned: &'a [ListLine]) -> Vec<&'a ListLine> {
        let statepos = |s: &str| self.states.iter().rposition(|x| x == s).unwrap_or(0);
        // (state position, first rank) per line, computed once; a stable
        // sort on it.
        let mut keyed: Vec<((usize, u64), &ListLine)> = owned
            .iter()
            .map(|l| {
                let first = l.rset.borrow().min_rank();
                (
                    (
                        statepos(&l.state),
                        first.map(u64::from).unwrap_or(u64::from(u32::MAX)),
                    ),
                    l,
                )
            })
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        let mut lines: Vec<&ListLine> = keyed.into_iter().map(|(_, l)| l).collect();
        let include = self.opts.include.as_deref().is_some_and(|s| !s.is_empty());
        if self.opts.skip_empty || (include && !self.opts.no_skip_empty) {
            lines.retain(|l| !l.rset.borrow().is_empty());
        }
        lines
    }

    /// [`ListPlan::uniq_lines`] when every line has the same (empty) key
    /// and the format shows only content fields: all lines merge into the
    /// first, whose content is then the union of the states' sets, so the
    /// union is built directly instead of splitting each set by property
    /// combination and merging the pieces back.  `None` where the two
    /// could differ (a set with a node without resources, on which
    /// merging fails; a hostname that is also a property name, where the
    /// split may drop nodes): the caller then takes the general path.
    fn merged_line(
        &self,
        res: &mut SchedResources,
        queues: &[Option<String>],
        config: Option<&Value>,
    ) -> Option<Vec<ListLine>> {
        for state in &self.states {
            let r = res.get(state);
            if r.check_copyable().is_err() || r.hostname_is_property() {
                return None;
            }
        }
        let mut first: Option<(&String, Option<String>)> = None;
        let mut merged = Rset::new();
        for state in &self.states {
            let r = res.get_mut(state);
            if r.is_empty() {
                // an empty set contributes one empty line per queue
                if first.is_none() {
                    if let Some(q) = queues.first() {
                        first = Some((state, q.clone()));
                    }
                }
                continue;
            }
            if first.is_none() {
                first = Some((state, None));
            }
            if merged.is_empty() {
                // a set taken once is empty the second time: a repeated
                // state adds nothing to a union
                merged = std::mem::take(r);
            } else {
                merged.add(r).ok()?;
            }
        }
        Some(match first {
            Some((state, queue)) => vec![ListLine::new(merged, state, queue, config)],
            None => Vec::new(),
        })
    }

    fn uniq_lines(
        &self,
        res: &mut SchedResources,
        formatter: &OutputFormat,
        config: Option<&Value>,
        zone: &dyn LocalZone,
    ) -> PyResult<Vec<ListLine>> {
        let fields = formatter.fields();
        let uniq_fmt = uniq_format(&fields);
        let key_fmt = OutputFormat::new(&uniq_fmt, formatter.headings())?;
        let queues: Vec<Option<String>> = if !self.opts.queues.is_empty() {
            self.opts.queues.iter().map(|q| Some(q.clone())).collect()
        } else {
            match config.filter(|c| truthy(c)).and_then(|c| c.get("queues")) {
                Some(Value::Object(qs)) => qs.keys().map(|k| Some(k.clone())).collect(),
                Some(_) => vec![],
                None => vec![None],
            }
        };
        if !self.general_only
            && uniq_fmt.is_empty()
            && fields.iter().all(|f| CONTENT_FIELDS.contains(&f.as_str()))
        {
            if let Some(lines) = self.merged_line(res, &queues, config) {
                return Ok(lines);
            }
        }
        let mut lines: Vec<ListLine> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut add = |line: ListLine, lines: &mut Vec<ListLine>| -> PyResult<()> {
            let key = key_fmt.format(&line, zone)?;
            match keys.iter().position(|k| *k == key) {
                Some(i) => {
                    if let Some(existing) = lines.get(i) {
                        let other = line.rset.borrow();
                        existing.add(&other).map_err(rl_err)?;
                    }
                }
                None => {
                    keys.push(key);
                    lines.push(line);
                }
            }
            Ok(())
        };
        for (i, state) in self.states.iter().enumerate() {
            let r = res.get(state);
            if r.is_empty() {
                for q in &queues {
                    let line = ListLine::new(Rset::new(), state, q.clone(), config);
                    add(line, &mut lines)?;
                }
                continue;
            }
            for sub in split_by_properties(r)? {
                if sub.is_empty() {
                    continue;
                }
                let line = ListLine::new(sub, state, None, config);
                add(line, &mut lines)?;
            }
            // Free a set after its last use, so that the memory is reused
            // (fewer fresh pages to fault in).
            if !self.states.iter().skip(i + 1).any(|s| s == state) {
                drop(std::mem::take(res.get_mut(state)));
            }
        }
        Ok(lines)
    }
}

/// The format that tells lines apart (`uniq_fmt`): the fields of
/// [`UNIQ_FIELDS`] the format shows, unless it shows one field only and
/// that is not `state`.
fn uniq_format(fields: &[String]) -> String {
    let mut uniq_fmt = String::new();
    if fields.len() > 1 || fields.iter().any(|f| f == "state") {
        for f in fields {
            if UNIQ_FIELDS.contains(&f.as_str()) {
                uniq_fmt.push('{');
                uniq_fmt.push_str(f);
                uniq_fmt.push_str("}:");
            }
        }
    }
    uniq_fmt
}

/// The nodes of one state with one property set, as the service
/// summarises them (Roster's `resource.summary`): what a line of `list`
/// shows of them.
#[derive(Debug, Clone, Default)]
pub struct ListCell {
    /// Property names in the order the line prints them.
    pub properties: Vec<String>,
    pub ranks: IdSet,
    /// Hostnames in rank order (`""` when a node has none).
    pub nodelist: String,
    pub nnodes: u64,
    pub ncores: u64,
    pub ngpus: u64,
}

/// `list`'s states split by property set, in the order the list view
/// splits them; `free` as a listing without `up` computes it.
#[derive(Debug, Clone, Default)]
pub struct ListCells {
    pub all: Vec<ListCell>,
    pub down: Vec<ListCell>,
    pub allocated: Vec<ListCell>,
    pub up: Vec<ListCell>,
    pub free: Vec<ListCell>,
    /// R's ranks and hostnames in rank order (lines that unite cells of
    /// several states or property sets take their hosts from these).
    pub r_ranks: IdSet,
    pub r_nodelist: Hostlist,
}

impl ListCells {
    fn get(&self, state: &str) -> &[ListCell] {
        let s = self;
        by_state(state, [&s.all, &s.down, &s.allocated, &s.up, &s.free])
    }

    /// The hosts of `ranks` in rank order, pushed one by one as
    /// `rlist_nodelist` does; `None` if a rank has none.
    fn hosts_of(&self, ranks: &IdSet) -> Option<Hostlist> {
        let mut before = Vec::with_capacity(self.r_ranks.ranges().len());
        let mut n = 0u64;
        for &(lo, hi) in self.r_ranks.ranges() {
            before.push((lo, hi, n));
            n += u64::from(hi - lo) + 1;
        }
        let mut hl = Hostlist::new();
        for r in ranks.iter() {
            let k = before.partition_point(|&(_, hi, _)| hi < r);
            let &(lo, _, b) = before.get(k).filter(|(lo, _, _)| *lo <= r)?;
            let i = usize::try_from(b + u64::from(r - lo)).ok()?;
            hl.push(&self.r_nodelist.nth(i)?);
        }
        Some(hl)
    }
}

/// A line of `list` made of cells (see [`ListPlan::render_cells`]).
struct CellLine<'a> {
    state: String,
    /// The cells in it (their rank sets disjoint).
    cells: Vec<&'a ListCell>,
    all: &'a ListCells,
}

impl CellLine<'_> {
    fn ranks(&self) -> IdSet {
        match self.cells.as_slice() {
            [one] => one.ranks.clone(),
            cells => {
                let mut r = IdSet::new();
                for c in cells {
                    r.add(&c.ranks);
                }
                r
            }
        }
    }

    fn sum(&self, f: impl Fn(&ListCell) -> u64) -> i64 {
        self.cells.iter().map(|c| f(c)).sum::<u64>() as i64
    }

    /// Properties of the line: those of its first cell (a line unites
    /// cells of several property sets only when it does not show them).
    fn properties(&self) -> String {
        self.cells
            .first()
            .map(|c| c.properties.join(","))
            .unwrap_or_default()
    }

    fn nodelist(&self) -> String {
        match self.cells.as_slice() {
            [] => String::new(),
            [one] => one.nodelist.clone(),
            _ => self
                .all
                .hosts_of(&self.ranks())
                .map(|h| h.encode())
                .unwrap_or_default(),
        }
    }

    fn min_rank(&self) -> u64 {
        self.cells
            .iter()
            .filter_map(|c| c.ranks.first())
            .min()
            .map_or(u64::from(u32::MAX), u64::from)
    }

    fn is_empty(&self) -> bool {
        self.cells.iter().all(|c| c.ranks.is_empty())
    }

    /// [`ListLine::to_json`] of the same line.
    fn to_json(&self) -> Value {
        serde_json::json!({
            "state": self.state,
            "properties": split(&self.properties()),
            "queues": Vec::<String>::new(),
            "nnodes": self.sum(|c| c.nnodes),
            "ncores": self.sum(|c| c.ncores),
            "ngpus": self.sum(|c| c.ngpus),
            "ranks": self.ranks().encode(),
            "nodelist": self.nodelist(),
        })
    }
}

impl FormatItem for CellLine<'_> {
    fn class_path(&self) -> String {
        "__main__.ResourceSetExtra".into()
    }

    /// As [`ListLine`]'s, for a service without queues.
    fn attr(&self, name: &str) -> Option<FieldValue> {
        Some(match name {
            "state" => FieldValue::Str(self.state.clone()),
            "queue" => FieldValue::Str(String::new()),
            "properties" | "propertiesx" => FieldValue::Str(self.properties()),
            "nnodes" => FieldValue::Int(self.sum(|c| c.nnodes)),
            "ncores" => FieldValue::Int(self.sum(|c| c.ncores)),
            "ngpus" => FieldValue::Int(self.sum(|c| c.ngpus)),
            "ranks" => {
                let r = self.ranks().encode();
                FieldValue::Object {
                    type_name: "IDset".into(),
                    repr: format!("IDset('{r}')"),
                    truthy: !r.is_empty(),
                    text: r,
                }
            }
            "nodelist" => {
                let hl = self.nodelist();
                FieldValue::Object {
                    type_name: "Hostlist".into(),
                    repr: format!("Hostlist('{hl}')"),
                    truthy: !hl.is_empty(),
                    text: hl,
                }
            }
            _ => return None,
        })
    }
}

/// The fields a line of cells can show.
const CELL_FIELDS: [&str; 9] = [
    "state",
    "queue",
    "properties",
    "propertiesx",
    "nnodes",
    "ncores",
    "ngpus",
    "ranks",
    "nodelist",
];

impl ListPlan {
    /// [`ListPlan::render`] from the service's cells, for a service
    /// without queues (Roster's `config.get` is `{}`).  `None` where the
    /// cells cannot say what the view would print (`R`, `-q`, `-i`, the
    /// `rlist` field, `free` with `up`, lines that would unite
    /// overlapping sets): the caller renders from `resource.sched-status`.
    pub fn render_cells(
        &self,
        cells: &ListCells,
        config: &FormatConfig,
        env: Env<'_>,
        zone: &dyn LocalZone,
    ) -> Option<CmdOutput> {
        if !self.cells_apply() {
            return None;
        }
        let fmt = match config.get_format_string(&self.opts.format, env) {
            Ok(FormatChoice::Format(f)) => f,
            Ok(FormatChoice::Print(text)) => return Some(CmdOutput::ok(text)),
            Err(e) => return Some(CmdOutput::exception(String::new(), &e)),
        };
        let hd = list_headings();
        let mut formatter = match OutputFormat::new(&fmt, &hd) {
            Ok(f) => f,
            Err(e) => return Some(CmdOutput::exception(String::new(), &e)),
        };
        let lines = match self.cell_lines(cells, &formatter, zone)? {
            Ok(l) => l,
            Err(e) => return Some(CmdOutput::exception(String::new(), &e)),
        };
        let mut items: Vec<&dyn FormatItem> = lines.iter().map(|l| l as &dyn FormatItem).collect();
        let mut out = String::new();
        Some(
            match formatter.print_items(&mut items, self.opts.no_header, zone, &mut out) {
                Ok(()) => CmdOutput::ok(out),
                Err(e) => CmdOutput::exception(out, &e),
            },
        )
    }

    /// [`ListPlan::render_json`] from the service's cells (see
    /// [`ListPlan::render_cells`]).
    pub fn render_json_cells(&self, cells: &ListCells, zone: &dyn LocalZone) -> Option<CmdOutput> {
        if !self.cells_apply() {
            return None;
        }
        let formatter = match OutputFormat::new(LIST_JSON_KEY, &list_headings()) {
            Ok(f) => f,
            Err(e) => return Some(CmdOutput::exception(String::new(), &e)),
        };
        Some(match self.cell_lines(cells, &formatter, zone)? {
            Ok(lines) => {
                let lines: Vec<Value> = lines.iter().map(CellLine::to_json).collect();
                let doc = serde_json::json!({ "version": LIST_JSON_VERSION, "lines": lines });
                CmdOutput::ok(format!("{doc}\n"))
            }
            Err(e) => CmdOutput::exception(String::new(), &e),
        })
    }

    /// Whether [`ListPlan::render_cells`] may render this view (it may
    /// still decline for the format).
    pub fn cells_apply(&self) -> bool {
        let has = |s: &str| self.states.iter().any(|x| x == s);
        self.view != ListView::R
            && self.opts.queues.is_empty()
            && self.opts.include.as_deref().is_none_or(str::is_empty)
            && !(has("free") && has("up"))
    }

    /// [`ListPlan::uniq_lines`] then [`ListPlan::ordered`] on cells;
    /// `None` where they could differ (see [`ListPlan::render_cells`]).
    fn cell_lines<'a>(
        &self,
        cells: &'a ListCells,
        formatter: &OutputFormat,
        zone: &dyn LocalZone,
    ) -> Option<PyResult<Vec<CellLine<'a>>>> {
        let fields = formatter.fields();
        if fields.iter().any(|f| !CELL_FIELDS.contains(&f.as_str())) {
            return None;
        }
        let uniq_fmt = uniq_format(&fields);
        let mut lines: Vec<CellLine<'a>> = Vec::new();
        if uniq_fmt.is_empty() {
            // ListPlan::merged_line: one line, the union of the states.
            if !fields.iter().all(|f| CONTENT_FIELDS.contains(&f.as_str())) {
                return None;
            }
            let Some(first) = self.states.first() else {
                return Some(Ok(lines));
            };
            let mut line = CellLine {
                state: first.clone(),
                cells: Vec::new(),
                all: cells,
            };
            let mut seen: Vec<&str> = Vec::new();
            for state in &self.states {
                if seen.contains(&state.as_str()) {
                    continue;
                }
                seen.push(state);
                for c in cells.get(state) {
                    if line.cells.iter().any(|x| x.ranks.intersects(&c.ranks)) {
                        return None;
                    }
                    line.cells.push(c);
                }
            }
            lines.push(line);
        } else {
            let key_fmt = match OutputFormat::new(&uniq_fmt, formatter.headings()) {
                Ok(f) => f,
                Err(e) => return Some(Err(e)),
            };
            let mut keys: Vec<String> = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            for state in &self.states {
                // a repeated state adds the same nodes to the same lines
                let again = seen.contains(&state.as_str());
                seen.push(state);
                let own = cells.get(state);
                let made: Vec<CellLine<'a>> = if own.is_empty() {
                    vec![CellLine {
                        state: state.clone(),
                        cells: Vec::new(),
                        all: cells,
                    }]
                } else {
                    own.iter()
                        .map(|c| CellLine {
                            state: state.clone(),
                            cells: vec![c],
                            all: cells,
                        })
                        .collect()
                };
                for line in made {
                    let key = match key_fmt.format(&line, zone) {
                        Ok(k) => k,
                        Err(e) => return Some(Err(e)),
                    };
                    match keys.iter().position(|k| *k == key) {
                        Some(i) => {
                            let existing = lines.get_mut(i)?;
                            if again
                                && line
                                    .cells
                                    .iter()
                                    .all(|c| existing.cells.iter().any(|x| std::ptr::eq(*x, *c)))
                            {
                                continue;
                            }
                            if line.cells.iter().any(|c| {
                                existing.cells.iter().any(|x| x.ranks.intersects(&c.ranks))
                            }) {
                                return None;
                            }
                            // the properties shown are the first cell's:
                            // only the same property set may join a line
                            // that shows them
                            let props =
                                |l: &CellLine<'a>| l.cells.first().map(|c| c.properties.clone());
                            if !existing.cells.is_empty()
                                && !line.cells.is_empty()
                                && props(existing) != props(&line)
                                && fields.iter().any(|f| f.starts_with("properties"))
                            {
                                return None;
                            }
                            existing.cells.extend(line.cells);
                        }
                        None => {
                            keys.push(key);
                            lines.push(line);
                        }
                    }
                }
            }
        }
        // ListPlan::ordered
        let statepos = |s: &str| self.states.iter().rposition(|x| x == s).unwrap_or(0);
        let mut keyed: Vec<((usize, u64), CellLine<'a>)> = lines
            .into_iter()
            .map(|l| ((statepos(&l.state), l.min_rank()), l))
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        let mut lines: Vec<CellLine<'a>> = keyed.into_iter().map(|(_, l)| l).collect();
        if self.opts.skip_empty {
            lines.retain(|l| !l.is_empty());
        }
        Some(Ok(lines))
    }
}

enum RenderStop {
    Printed(String),
    Error(PyError),
}

impl From<PyError> for RenderStop {
    fn from(e: PyError) -> Self {
        RenderStop::Error(e)
    }
}

/// The queues of `config.get`'s answer that nodes with the properties
/// `props` belong to, in the configuration's order: those whose
/// `requires` they all have (none: every queue; a string, as flux's
/// Python reads one: each of its characters).
pub fn queues_of(config: &Value, props: &[String]) -> Vec<String> {
    let Some(Value::Object(qs)) = Some(config)
        .filter(|c| truthy(c))
        .and_then(|c| c.get("queues"))
    else {
        return Vec::new();
    };
    qs.iter()
        .filter(|(_, q)| match q.get("requires") {
            None => true,
            Some(Value::Array(req)) => req
                .iter()
                .all(|p| p.as_str().is_some_and(|p| props.iter().any(|x| x == p))),
            Some(Value::String(s)) => s.chars().all(|c| {
                props
                    .iter()
                    .any(|x| x.len() == c.len_utf8() && x.starts_with(c))
            }),
            Some(_) => false,
        })
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{no_env, Subcommand};
    use pycompat::time::FixedZone;

    const STATIC: &str = "{state:>10} {properties:<10} {nnodes:>6} {ncores:>8} {ngpus:>8}";

    fn fixture(name: &str) -> Value {
        let text = match name {
            "null" => include_str!("../tests/fixtures/list/null.json"),
            "normal-new" => include_str!("../tests/fixtures/list/normal-new.json"),
            "fluke" => include_str!("../tests/fixtures/list/fluke.json"),
            "fluxion" => include_str!("../tests/fixtures/list/fluxion.json"),
            "properties" => include_str!("../tests/fixtures/list/properties.json"),
            "corona" => include_str!("../tests/fixtures/list/corona.json"),
            _ => "null",
        };
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    fn run_cfg(
        view: ListView,
        name: &str,
        opts: &ListOptions,
        config: Option<&Value>,
    ) -> CmdOutput {
        let payload = fixture(name);
        let z = FixedZone::utc();
        let fc = FormatConfig::new(Subcommand::List);
        match list_prepare(view, opts) {
            Ok(plan) => plan.render(
                &ListInput {
                    sched_status: &payload,
                    config,
                },
                &fc,
                &no_env,
                &z,
            ),
            Err(out) => out,
        }
    }

    fn run(view: ListView, name: &str, opts: &ListOptions) -> CmdOutput {
        run_cfg(view, name, opts, None)
    }

    /// [`fmt`] without the header.
    fn bare(f: &str) -> ListOptions {
        ListOptions {
            no_header: true,
            ..fmt(f)
        }
    }

    fn fmt(f: &str) -> ListOptions {
        ListOptions {
            format: f.into(),
            ..ListOptions::default()
        }
    }

    #[test]
    fn t2350_static_format_fixtures() {
        let hdr = "     STATE PROPERTIES NNODES   NCORES    NGPUS\n";
        let cases = [
            (
                "null",
                "      free                 4       16        0\n allocated                 0        0        0\n      down                 0        0        0\n",
            ),
            (
                "normal-new",
                "      free 8g              3       12        0\n      free                 2        8        0\n allocated                 0        0        0\n      down                 0        0        0\n",
            ),
            (
                "fluke",
                "      free batch          83      332        0\n      free debug           5       20        0\n allocated                 0        0        0\n      down batch          10       40        0\n      down debug           3       12        0\n",
            ),
            (
                "fluxion",
                "      free                 3        8        0\n allocated                 2        4        0\n      down                 1        4        0\n",
            ),
        ];
        for (name, body) in cases {
            let out = run(ListView::List, name, &fmt(STATIC));
            assert_eq!(out.exit_code, 0, "{name}: {:?}", out.messages);
            assert_eq!(out.stdout, format!("{hdr}{body}"), "{name}");
        }
    }

    #[test]
    fn t2350_info_fixtures() {
        // (fixture, --include, --states, output)
        for (name, include, states, want) in [
            ("null", None, None, "4 Nodes, 16 Cores, 0 GPUs\n"),
            ("normal-new", None, None, "5 Nodes, 20 Cores, 0 GPUs\n"),
            ("fluke", None, None, "101 Nodes, 404 Cores, 0 GPUs\n"),
            ("fluxion", None, None, "4 Nodes, 16 Cores, 0 GPUs\n"),
            ("normal-new", Some("0"), None, "1 Nodes, 4 Cores, 0 GPUs\n"),
            // several states merge into a single summary line
            (
                "fluke",
                None,
                Some("free,down"),
                "101 Nodes, 404 Cores, 0 GPUs\n",
            ),
        ] {
            let opts = ListOptions {
                include: include.map(String::from),
                states: states.map(String::from),
                ..ListOptions::default()
            };
            assert_eq!(run(ListView::Info, name, &opts).stdout, want, "{name}");
        }
    }

    #[test]
    fn t2350_r_fixtures() {
        for (name, want) in [
            (
                "normal-new",
                "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0-4\", \"children\": {\"core\": \"0-3\"}}], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": [\"pi[3,0-2,4]\"], \"properties\": {\"8g\": \"0-2\"}}}\n",
            ),
            (
                "fluke",
                "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0-100\", \"children\": {\"core\": \"0-3\"}}], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": [\"fluke[3-103]\"], \"properties\": {\"batch\": \"0-92\", \"debug\": \"93-100\"}}}\n",
            ),
            (
                "fluxion",
                "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0-3\", \"children\": {\"core\": \"0-3\"}}], \"starttime\": 0.0, \"expiration\": 0.0}}\n",
            ),
        ] {
            assert_eq!(run(ListView::R, name, &ListOptions::default()).stdout, want, "{name}");
        }
        let nodes = |o: &CmdOutput| o.stdout.matches("\"rank\"").count();
        let opts = |s: &str| ListOptions {
            states: Some(s.into()),
            ..ListOptions::default()
        };
        assert_eq!(
            run(ListView::R, "normal-new", &opts("down")).stdout,
            "{\"version\": 1, \"execution\": {\"R_lite\": [], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": [\"\"]}}\n"
        );
        assert_eq!(nodes(&run(ListView::R, "normal-new", &opts("up"))), 1);
        let inc = ListOptions {
            include: Some("0".into()),
            ..ListOptions::default()
        };
        assert!(run(ListView::R, "fluke", &inc)
            .stdout
            .contains("\"rank\": \"0\""));
    }

    #[test]
    fn default_format_without_queues_or_properties() {
        let out = run(ListView::List, "null", &ListOptions::default());
        assert_eq!(
            out.stdout,
            "     STATE NNODES NCORES NGPUS NODELIST\n      free      4     16     0 \n allocated      0      0     0 \n      down      0      0     0 \n"
        );
        let out = run(ListView::List, "normal-new", &ListOptions::default());
        assert_eq!(
            out.stdout,
            "     STATE PROPERTIES NNODES NCORES NGPUS NODELIST\n      free 8g              3     12     0 pi[3,0-1]\n      free                 2      8     0 pi[2,4]\n allocated                 0      0     0 \n      down                 0      0     0 \n"
        );
    }

    /// t2350: `-no {properties}` merges every state into one line whose
    /// properties flux lists as `xx,foo`: flux's `rlist_properties()` walks
    /// the node *list* (here ranks 3,2,0,1 after the merges), which
    /// `Rset::property_names_in_list_order()` follows (rank order would
    /// give `foo,xx`).
    #[test]
    fn properties_fields_merged_order() {
        let props = |f: &str| run(ListView::List, "properties", &bare(f)).stdout;
        assert_eq!(props("{properties}"), "xx,foo\n");
        assert_eq!(props("{properties:>5.5+}"), "xx,f+\n");
    }

    #[test]
    fn properties_fields() {
        let props = |f: &str| run(ListView::List, "properties", &bare(f)).stdout;
        // a single field merges all states into one line
        let one = props("{properties}");
        assert_eq!(one.lines().count(), 1);
        assert_eq!(one, "xx,foo\n");
        // truncation with '+', also with the 'h' suffix
        assert_eq!(props("{properties:>5.5+}"), "xx,f+\n");
        assert_eq!(props("{properties:>5.5h+}"), "xx,f+\n");
        // per-state lines
        assert_eq!(
            props("{state} {properties}"),
            "free \nfree xx,foo\nfree foo\nallocated xx\ndown xx\n"
        );
    }

    #[test]
    fn rlist_format_prints_stray_plus() {
        let out = run(ListView::List, "properties", &fmt("rlist"));
        assert_eq!(
            out.stdout,
            "     STATE PROPERTIES NNODES NCORES +NGPUS LIST\n      free                 1      4 +    0 rank0/core[0-3]\n      free xx,foo          1      4 +    0 rank2/core[0-3]\n      free foo             1      4 +    0 rank3/core[0-3]\n allocated xx              1      1 +    0 rank1/core0\n      down xx              1      4 +    0 rank1/core[0-3]\n"
        );
    }

    #[test]
    fn include_targets() {
        let opts = |f: &str, inc: &str| ListOptions {
            format: f.into(),
            states: Some("all".into()),
            include: Some(inc.into()),
            no_header: true,
            ..ListOptions::default()
        };
        assert_eq!(
            run(
                ListView::List,
                "normal-new",
                &opts("{nnodes} {ranks}", "0,3")
            )
            .stdout,
            "2 0,3\n"
        );
        assert_eq!(
            run(
                ListView::List,
                "normal-new",
                &opts("{nnodes} {nodelist}", "pi[0,3]")
            )
            .stdout,
            "2 pi[3,0]\n"
        );
        // unknown hosts are not an error; -i implies --skip-empty
        assert_eq!(
            run(
                ListView::List,
                "normal-new",
                &opts("{nnodes} {nodelist}", "pi7")
            )
            .stdout,
            ""
        );
        let mut o = opts("{nnodes} {nodelist}", "pi7");
        o.no_skip_empty = true;
        assert_eq!(run(ListView::List, "normal-new", &o).stdout, "0 \n");
        // #5266: hosts of a set that does not start at rank 0
        let nl = "corona[176,249,260-261,270,284]";
        assert_eq!(
            run(ListView::List, "corona", &opts("{nodelist}", nl)).stdout,
            format!("{nl}\n")
        );
        let mut o = opts("{ranks}", "0");
        o.include = Some("x[".into());
        assert_eq!(
            run(ListView::List, "normal-new", &o).stderr_text("flux-resource"),
            "flux-resource: ERROR: --include: Invalid hostlist: 'x['\n"
        );
    }

    #[test]
    fn queues() {
        let payload_cfg = serde_json::json!({"queues": {"pbatch": {"requires": ["pbatch"]},
                                                        "pdebug": {"requires": ["pdebug"]}}});
        let list = |opts: ListOptions| run_cfg(ListView::List, "corona", &opts, Some(&payload_cfg));
        assert_eq!(
            list(ListOptions::default()).stdout,
            "     STATE QUEUE  NNODES NCORES NGPUS NODELIST\n      free pdebug     14    672   112 corona[171,173-175,177-186]\n allocated pbatch     96   4608   768 corona[187-194,196-201,203-207,213-247,250-256,258-259,262-269,271-283,285-296]\n      down pdebug      2     96    16 corona[172,176]\n      down pbatch      9    432    72 corona[195,202,248-249,257,260-261,270,284]\n"
        );
        let out = list(ListOptions {
            queues: vec!["pdebug".into()],
            ..bare("{state} {nnodes} {queue}")
        });
        assert_eq!(
            out.stdout,
            "free 14 pdebug\nallocated 0 pdebug\ndown 2 pdebug\n"
        );
        let out = list(ListOptions {
            queues: vec!["nope".into()],
            ..ListOptions::default()
        });
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: --queue: nope: no such queue\n"
        );
    }

    #[test]
    fn state_validation_and_errors() {
        let opts = ListOptions {
            states: Some("free,bogus".into()),
            ..ListOptions::default()
        };
        let out = run(ListView::List, "null", &opts);
        assert_eq!(out.exit_code, 1);
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: Invalid resource state bogus specified\n"
        );
        let out = run(ListView::List, "null", &fmt("{ranks:>6}"));
        assert_eq!(out.exit_code, 1);
        assert_eq!(out.stdout, " RANKS\n");
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: unsupported format string passed to IDset.__format__\n"
        );
        let out = run(ListView::List, "null", &fmt("nope"));
        assert_eq!(
            out.stderr_text("flux-resource"),
            "flux-resource: ERROR: --format: No such format nope\n"
        );
        let out = run(ListView::List, "null", &fmt("help"));
        assert_eq!(out.exit_code, 0);
        assert!(out
            .stdout
            .contains("  rlist        Format including resource list details\n"));
    }

    /// The merged-line shortcut (formats of content fields only, e.g.
    /// `info`) prints what the general split-and-merge path prints.
    #[test]
    fn merged_line_matches_general_path() {
        let cfg = serde_json::json!({"queues": {"pbatch": {"requires": ["pbatch"]},
                                                "pdebug": {"requires": ["pdebug"]}}});
        let formats = [
            "{nnodes} {ncores} {ngpus}",
            "{nnodes} {ranks} {nodelist}",
            "{nodelist}",
            "{ranks}",
            "{ncores}",
            "text only",
        ];
        let states = [
            None,
            Some("all"),
            Some("free,down"),
            Some("up,all"),
            Some("down"),
            Some("allocated"),
            Some("all,all"),
            Some("allocated,free"),
        ];
        let mut checked = 0;
        for name in [
            "null",
            "normal-new",
            "fluke",
            "fluxion",
            "properties",
            "corona",
        ] {
            for config in [None, Some(&cfg)] {
                for st in states {
                    for (view, f) in formats
                        .iter()
                        .map(|f| (ListView::List, *f))
                        .chain([(ListView::Info, "")])
                    {
                        for (include, skip) in [(None, false), (Some("0-2"), false), (None, true)] {
                            let opts = ListOptions {
                                format: f.into(),
                                states: st.map(String::from),
                                include: include.map(String::from),
                                skip_empty: skip,
                                ..ListOptions::default()
                            };
                            let Ok(plan) = list_prepare(view, &opts) else {
                                continue;
                            };
                            let mut general = plan.clone();
                            general.general_only = true;
                            let payload = fixture(name);
                            let input = ListInput {
                                sched_status: &payload,
                                config,
                            };
                            let z = FixedZone::utc();
                            let fc = FormatConfig::new(Subcommand::List);
                            let a = plan.render(&input, &fc, &no_env, &z);
                            let b = general.render(&input, &fc, &no_env, &z);
                            assert_eq!(a.stdout, b.stdout, "{name} {st:?} {f} {include:?}");
                            assert_eq!(a.exit_code, b.exit_code, "{name} {st:?} {f}");
                            assert_eq!(a.messages, b.messages, "{name} {st:?} {f}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 500);
    }

    #[test]
    fn sort_prefix_and_up_state() {
        let opts = ListOptions {
            states: Some("up,all".into()),
            ..bare("sort:-nnodes {state} {nnodes} {properties}")
        };
        let out = run(ListView::List, "normal-new", &opts);
        assert_eq!(out.stdout, "up 3 8g\nall 3 8g\nup 2 \nall 2 \n");
    }
}
