//! flux's `OutputFormat` (`flux.util`): a parsed output format with field
//! validation against a heading table, header generation, the `?:`, `+:`
//! and `?+:` column sentinels, `sort:` prefixes, and `print_items()`; plus
//! the `Deduplicator` used to merge like lines.

use crate::engine::{empty_outputs, parse, vformat, Args, Chunk, Ctx};
use crate::value::{FieldValue, FormatItem};
use pycompat::error::{PyError, PyResult};
use pycompat::time::LocalZone;
use pycompat::width::wcswidth;
use std::collections::HashMap;
use std::sync::Arc;

/// Field name → column heading, in order.  Every valid field must have an
/// entry (flux uses this table to validate formats).
pub type Headings = Arc<Vec<(String, String)>>;

/// Build a [`Headings`] table.
pub fn headings(pairs: &[(&str, &str)]) -> Headings {
    Arc::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn heading<'a>(h: &'a Headings, field: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == field).map(|(_, v)| v.as_str())
}

/// flux's `OutputFormat.FormatSpec`: a format spec split into components
/// by a regular expression (not by CPython's parser), used only to rebuild
/// specs for headers and `+:` widening.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FluxSpec {
    fill: String,
    align: String,
    sign: String,
    pos_zero: String,
    alt: String,
    zero_pad: String,
    width_str: String,
    grouping: String,
    decimal: String,
    precision_str: String,
    ty: String,
    hyphen: String,
    wide: String,
    truncate: String,
}

fn is_align(c: char) -> bool {
    matches!(c, '<' | '>' | '=' | '^')
}

impl FluxSpec {
    pub(crate) fn parse(spec: &str) -> FluxSpec {
        let spec = match spec.find("::") {
            Some(i) => &spec[i + 2..],
            None => spec,
        };
        let chars: Vec<char> = spec.chars().collect();
        let mut attempts: Vec<(Option<char>, Option<char>, usize)> = Vec::new();
        if chars.len() >= 2 && is_align(chars[1]) {
            attempts.push((Some(chars[0]), Some(chars[1]), 2));
        }
        if !chars.is_empty() && is_align(chars[0]) {
            attempts.push((None, Some(chars[0]), 1));
        }
        attempts.push((None, None, 0));
        for (fill, align, start) in attempts {
            if let Some(mut s) = Self::tail(&chars[start..]) {
                s.fill = fill.map(String::from).unwrap_or_default();
                s.align = align.map(String::from).unwrap_or_default();
                return s;
            }
        }
        FluxSpec::default()
    }

    fn tail(c: &[char]) -> Option<FluxSpec> {
        let mut s = FluxSpec::default();
        let mut i = 0;
        let take = |pred: &dyn Fn(char) -> bool, i: &mut usize| -> String {
            if *i < c.len() && pred(c[*i]) {
                *i += 1;
                c[*i - 1].to_string()
            } else {
                String::new()
            }
        };
        s.sign = take(&|x| matches!(x, '-' | ' ' | '+'), &mut i);
        s.pos_zero = take(&|x| x == 'z', &mut i);
        s.alt = take(&|x| x == '#', &mut i);
        s.zero_pad = take(&|x| x == '0', &mut i);
        let w0 = i;
        while i < c.len() && c[i].is_ascii_digit() {
            i += 1;
        }
        s.width_str = c[w0..i].iter().collect();
        s.grouping = take(&|x| x == '_' || x == ',', &mut i);
        if i + 1 < c.len() && c[i] == '.' && c[i + 1].is_ascii_digit() {
            i += 1;
            let p0 = i;
            while i < c.len() && c[i].is_ascii_digit() {
                i += 1;
            }
            s.decimal = ".".into();
            s.precision_str = c[p0..i].iter().collect();
        }
        s.ty = take(&|x| "bcdeEfFgGnosxX%".contains(x), &mut i);
        s.hyphen = take(&|x| x == 'h', &mut i);
        s.wide = take(&|x| x == 'W', &mut i);
        s.truncate = take(&|x| x == '+', &mut i);
        (i == c.len()).then_some(s)
    }

    /// The `width` property: the integer width, if any.
    pub(crate) fn width(&self) -> Option<u64> {
        if self.width_str.is_empty() {
            None
        } else {
            Some(self.width_str.parse::<u64>().unwrap_or(u64::MAX))
        }
    }

    fn precision(&self) -> u64 {
        self.precision_str.parse::<u64>().unwrap_or(0)
    }

    fn set_width(&mut self, w: u64) {
        self.width_str = w.to_string();
        if (self.ty.is_empty() || self.ty == "s") && self.precision() != 0 && self.precision() < w {
            self.precision_str = w.to_string();
        }
    }

    fn render(&self) -> String {
        [
            &self.fill,
            &self.align,
            &self.sign,
            &self.pos_zero,
            &self.alt,
            &self.zero_pad,
            &self.width_str,
            &self.grouping,
            &self.decimal,
            &self.precision_str,
            &self.ty,
            &self.hyphen,
            &self.wide,
            &self.truncate,
        ]
        .iter()
        .map(|s| s.as_str())
        .collect()
    }
}

/// `(text, field, spec, conv)` with `None` replaced by `""`, as flux keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    text: String,
    field: String,
    spec: String,
    conv: String,
}

fn fmt_tuple(text: &str, field: &str, spec: &str, conv: &str) -> String {
    if field.is_empty() {
        return text.to_string();
    }
    let mut s = String::with_capacity(text.len() + field.len() + spec.len() + 6);
    s.push_str(text);
    s.push('{');
    s.push_str(field);
    if !conv.is_empty() {
        s.push('!');
        s.push_str(conv);
    }
    if !spec.is_empty() {
        s.push(':');
        s.push_str(spec);
    }
    s.push('}');
    s
}

/// Python `str.lstrip(chars)`.
fn lstrip_chars(s: &str, set: &str) -> String {
    s.trim_start_matches(|c: char| set.contains(c)).to_string()
}

/// Python `str.isspace()` (non-empty and all whitespace).
pub(crate) fn py_isspace(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

const SENTINELS: [(&str, Kind); 3] = [
    ("?+:", Kind::Both),
    ("?:", Kind::Filter),
    ("+:", Kind::MaxWidth),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Filter,
    MaxWidth,
    Both,
}

/// A parsed flux output format.
#[derive(Debug, Clone)]
pub struct OutputFormat {
    headings: Headings,
    prepend: String,
    format_list: Vec<Entry>,
    sort_keys: Vec<(String, bool)>,
    fmt: String,
    fmt_orig: String,
    fields: Vec<String>,
    /// The parse of `fmt`, used by `format()` (errors surface there, as
    /// in Python, which re-parses the rebuilt string on every call).
    parsed: Result<Vec<Chunk>, PyError>,
}

impl OutputFormat {
    /// `OutputFormat(fmt, headings=headings)` (prepend `"0."`).
    pub fn new(fmt: &str, headings: &Headings) -> PyResult<OutputFormat> {
        Self::with_prepend(fmt, headings, "0.")
    }

    /// `OutputFormat(fmt, headings, prepend)`.
    pub fn with_prepend(fmt: &str, headings: &Headings, prepend: &str) -> PyResult<OutputFormat> {
        let mut format_list: Vec<Entry> = parse(fmt)?
            .into_iter()
            .map(|c| match c.field {
                Some(f) => Entry {
                    text: c.literal,
                    field: f.name,
                    spec: f.spec,
                    conv: f.conv.map(String::from).unwrap_or_default(),
                },
                None => Entry {
                    text: c.literal,
                    field: String::new(),
                    spec: String::new(),
                    conv: String::new(),
                },
            })
            .collect();
        let mut me = OutputFormat {
            headings: headings.clone(),
            prepend: prepend.to_string(),
            format_list: Vec::new(),
            sort_keys: Vec::new(),
            fmt: String::new(),
            fmt_orig: String::new(),
            fields: Vec::new(),
            parsed: Ok(Vec::new()),
        };
        let mut fmt = fmt.to_string();
        if let Some(first) = format_list.first_mut() {
            if first.text.starts_with("sort:") {
                let sort_spec = std::mem::take(&mut first.text);
                me.set_sort_keys(&sort_spec[5..])?;
                fmt = lstrip_chars(&fmt, &sort_spec);
            }
        }
        me.format_list = format_list;
        me.fmt = fmt.clone();
        me.fmt_orig = fmt;
        me.fields = me
            .format_list
            .iter()
            .filter(|e| !e.field.is_empty())
            .map(|e| e.field.clone())
            .collect();
        for field in &me.fields {
            let f = field.strip_prefix("0.").unwrap_or(field);
            if !f.is_empty() && heading(&me.headings, f).is_none() {
                return Err(PyError::Value(format!("Unknown format field: {f}")));
            }
        }
        if !me.prepend.is_empty() {
            let p = me.prepend.clone();
            me.fmt = me.get_format_prepended(&p, &[], false, false);
        }
        me.parsed = parse(&me.fmt);
        Ok(me)
    }

    /// The headings table.
    pub fn headings(&self) -> &Headings {
        &self.headings
    }

    /// Requested fields plus sort keys (flux returns a set; duplicates are
    /// removed here, keeping first-seen order).
    pub fn fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in self
            .fields
            .iter()
            .cloned()
            .chain(self.sort_keys.iter().map(|(k, _)| k.clone()))
        {
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }

    /// The sort keys (`(key, reverse)`).
    pub fn sort_keys(&self) -> &[(String, bool)] {
        &self.sort_keys
    }

    /// `set_sort_keys("key,-key2")`.
    pub fn set_sort_keys(&mut self, keys: &str) -> PyResult<()> {
        self.sort_keys.clear();
        for key in keys.split(',') {
            let key = key.trim();
            let (key, reverse) = match key.strip_prefix('-') {
                Some(k) => (k, true),
                None => (key, false),
            };
            if heading(&self.headings, key).is_none() {
                return Err(PyError::Value(format!("Invalid sort key: {key}")));
            }
            self.sort_keys.push((key.to_string(), reverse));
        }
        Ok(())
    }

    fn sort_prefix(&self) -> String {
        if self.sort_keys.is_empty() {
            return String::new();
        }
        let keys: Vec<String> = self
            .sort_keys
            .iter()
            .map(|(k, r)| if *r { format!("-{k}") } else { k.clone() })
            .collect();
        format!("sort:{} ", keys.join(","))
    }

    /// `get_format_prepended(prepend, except_fields, include_sort_prefix,
    /// nullify_expansion_sentinel)`.
    pub fn get_format_prepended(
        &self,
        prepend: &str,
        except_fields: &[&str],
        include_sort_prefix: bool,
        nullify_expansion: bool,
    ) -> String {
        let mut s = String::new();
        for e in &self.format_list {
            if except_fields.contains(&e.field.as_str()) {
                let t = e.text.trim();
                if !t.is_empty() && !["+:", "?:", "?+:"].contains(&t) {
                    s.push_str(&e.text);
                }
                continue;
            }
            let field = if !e.field.is_empty() && !e.field.starts_with(prepend) {
                format!("{prepend}{}", e.field)
            } else {
                e.field.clone()
            };
            if nullify_expansion && e.text.ends_with("+:") {
                s.push_str(&fmt_tuple("", &field, "", &e.conv));
            } else {
                s.push_str(&fmt_tuple(&e.text, &field, &e.spec, &e.conv));
            }
        }
        if include_sort_prefix {
            format!("{}{s}", self.sort_prefix())
        } else {
            s
        }
    }

    /// `get_format(orig, include_sort_prefix)`.
    pub fn get_format(&self, orig: bool, include_sort_prefix: bool) -> String {
        let f = if orig { &self.fmt_orig } else { &self.fmt };
        if include_sort_prefix {
            format!("{}{f}", self.sort_prefix())
        } else {
            f.clone()
        }
    }

    /// `copy(except_fields, nullify_expansion)`.
    pub fn copy(&self, except_fields: &[&str], nullify_expansion: bool) -> PyResult<OutputFormat> {
        let f = self.get_format_prepended("", except_fields, true, nullify_expansion);
        OutputFormat::with_prepend(&f, &self.headings, &self.prepend)
    }

    /// The header format (`header_format()`): align and width only.
    pub fn header_format(&self) -> String {
        let mut s = String::new();
        for e in &self.format_list {
            let spec = FluxSpec::parse(&e.spec);
            let w = spec.width().map(|w| w.to_string()).unwrap_or_default();
            let hspec = format!("{}{w}", spec.align);
            s.push_str(&fmt_tuple(&e.text, &e.field, &hspec, ""));
        }
        s
    }

    /// The header row.
    pub fn header(&self, zone: &dyn LocalZone) -> PyResult<String> {
        let chunks = parse(&self.header_format())?;
        vformat(&chunks, &Args::Headings(&self.headings), &Ctx { zone }, 2)
    }

    /// Format one item.
    pub fn format(&self, item: &dyn FormatItem, zone: &dyn LocalZone) -> PyResult<String> {
        let chunks = self.parsed.as_ref().map_err(Clone::clone)?;
        vformat(chunks, &Args::Item(item), &Ctx { zone }, 2).map_err(|e| match e {
            PyError::Key(k) => PyError::Key(format!(
                "Invalid format field {} for <class '{}'>",
                pycompat::repr::repr_str(&k),
                item.class_path()
            )),
            other => other,
        })
    }

    /// `filter(items, no_header)`: drop `?:` columns that are empty for
    /// every item and widen `+:` columns; returns the new format string.
    /// Like flux, this updates this format's entries in place (widened
    /// specs, sentinels removed from every literal).
    pub fn filter(
        &mut self,
        items: &[&dyn FormatItem],
        no_header: bool,
        zone: &dyn LocalZone,
    ) -> PyResult<String> {
        struct Cand {
            chunks: Vec<Chunk>,
            index: usize,
            kind: Kind,
            maxwidth: i64,
            width: i64,
            spec: FluxSpec,
        }
        let mut lst: Vec<Cand> = Vec::new();
        for (index, e) in self.format_list.iter().enumerate() {
            let Some((_, kind)) = SENTINELS.iter().find(|(s, _)| e.text.ends_with(s)) else {
                continue;
            };
            let spec = FluxSpec::parse(&e.spec);
            let fmt = fmt_tuple("", &format!("0.{}", e.field), "", &e.conv);
            let mut maxwidth = spec.width().unwrap_or(0) as i64;
            if matches!(kind, Kind::MaxWidth | Kind::Both) {
                let h = if no_header {
                    0
                } else {
                    heading(&self.headings, &e.field)
                        .map(|h| h.chars().count())
                        .unwrap_or(0) as i64
                };
                maxwidth = maxwidth.max(h);
            }
            lst.push(Cand {
                chunks: parse(&fmt)?,
                index,
                kind: *kind,
                maxwidth,
                width: 0,
                spec,
            });
        }
        if lst.is_empty() {
            return Ok(self.get_format(true, true));
        }
        let empty = empty_outputs(zone);
        let ctx = Ctx { zone };
        for item in items {
            for c in lst.iter_mut() {
                let r = vformat(&c.chunks, &Args::Item(*item), &ctx, 2)?;
                let w = if empty.contains(&r) { 0 } else { wcswidth(&r) };
                c.maxwidth = c.maxwidth.max(w);
                c.width = c.width.max(w);
            }
        }
        let mut remove: Vec<usize> = Vec::new();
        for c in lst.iter_mut() {
            if c.width == 0 && matches!(c.kind, Kind::Filter | Kind::Both) {
                remove.push(c.index);
            } else if matches!(c.kind, Kind::MaxWidth | Kind::Both) {
                c.spec.set_width(c.maxwidth.max(0) as u64);
                if let Some(e) = self.format_list.get_mut(c.index) {
                    e.spec = c.spec.render();
                }
            }
        }
        for (i, e) in self.format_list.iter_mut().enumerate() {
            if remove.contains(&i) {
                continue;
            }
            for (s, _) in SENTINELS {
                e.text = e.text.replace(s, "");
            }
        }
        let body: String = self
            .format_list
            .iter()
            .enumerate()
            .filter(|(i, _)| !remove.contains(i))
            .map(|(_, e)| fmt_tuple(&e.text, &e.field, &e.spec, &e.conv))
            .collect();
        Ok(format!("{}{body}", self.sort_prefix()))
    }

    /// `sort_items(items)`: stable sort by the sort keys (last key first).
    pub fn sort_items<T: FormatItem + ?Sized>(&self, items: &mut Vec<&T>) -> PyResult<()> {
        for (key, reverse) in self.sort_keys.iter().rev() {
            let vals: Vec<FieldValue> = items
                .iter()
                .map(|it| attrgetter(*it, key))
                .collect::<PyResult<_>>()?;
            let mut idx: Vec<usize> = (0..items.len()).collect();
            if *reverse {
                idx.reverse();
            }
            py_sort(&mut idx, |a, b| vals[*a].py_lt(&vals[*b]))?;
            if *reverse {
                idx.reverse();
            }
            let old = items.clone();
            for (slot, i) in items.iter_mut().zip(idx) {
                *slot = old[i];
            }
        }
        Ok(())
    }

    /// `print_items(items, no_header)`: filter, sort, header, lines.  Output
    /// is appended to `out` as it is produced, so that on error the lines
    /// already "printed" remain (as with flux, which prints the header
    /// before a failing item).
    pub fn print_items(
        &mut self,
        items: &mut Vec<&dyn FormatItem>,
        no_header: bool,
        zone: &dyn LocalZone,
        out: &mut String,
    ) -> PyResult<()> {
        let newfmt = self.filter(items, no_header, zone)?;
        let formatter = OutputFormat::with_prepend(&newfmt, &self.headings, &self.prepend)?;
        self.sort_items(items)?;
        if !no_header {
            out.push_str(&formatter.header(zone)?);
            out.push('\n');
        }
        for item in items.iter() {
            let line = formatter.format(*item, zone)?;
            if line.is_empty() || py_isspace(&line) {
                continue;
            }
            out.push_str(&line);
            out.push('\n');
        }
        Ok(())
    }
}

/// `operator.attrgetter(key)(item)`.
fn attrgetter<T: FormatItem + ?Sized>(item: &T, key: &str) -> PyResult<FieldValue> {
    let mut parts = key.split('.');
    let first = parts.next().unwrap_or("");
    let mut v = item.attr(first).ok_or_else(|| {
        PyError::Attribute(format!(
            "'{}' object has no attribute '{}'",
            crate::value::class_name(&item.class_path()),
            first
        ))
    })?;
    for p in parts {
        v = v.attr(p)?;
    }
    Ok(v)
}

/// A stable sort with a fallible `less than`, modelled on CPython's
/// `list.sort` for short lists (count the initial run, then binary
/// insertion), so that comparison errors surface as in Python.
fn py_sort<T: Clone>(v: &mut [T], lt: impl Fn(&T, &T) -> PyResult<bool>) -> PyResult<()> {
    let n = v.len();
    if n < 2 {
        return Ok(());
    }
    // count_run
    let mut run = 2;
    let descending = lt(&v[1], &v[0])?;
    if descending {
        while run < n && lt(&v[run], &v[run - 1])? {
            run += 1;
        }
        v[..run].reverse();
    } else {
        while run < n && !lt(&v[run], &v[run - 1])? {
            run += 1;
        }
    }
    // binary insertion sort for the rest
    for start in run..n {
        let pivot = v[start].clone();
        let (mut lo, mut hi) = (0, start);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if lt(&pivot, &v[mid])? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        v[lo..=start].rotate_right(1);
    }
    Ok(())
}

/// flux's `Deduplicator`: merges items whose formatted text (excluding
/// some fields, with `+:` widths nullified) is identical.
pub struct Deduplicator<T> {
    formatter: OutputFormat,
    index: HashMap<String, usize>,
    items: Vec<T>,
}

impl<T: FormatItem> Deduplicator<T> {
    /// `Deduplicator(formatter, except_fields)`.
    pub fn new(formatter: &OutputFormat, except_fields: &[&str]) -> PyResult<Deduplicator<T>> {
        Ok(Deduplicator {
            formatter: formatter.copy(except_fields, true)?,
            index: HashMap::new(),
            items: Vec::new(),
        })
    }

    /// Append `item`, or combine it into the existing item with the same
    /// key using `combine(existing, new)`.
    pub fn append(
        &mut self,
        item: T,
        zone: &dyn LocalZone,
        combine: impl FnOnce(&mut T, T),
    ) -> PyResult<()> {
        let key = self.formatter.format(&item, zone)?;
        match self.index.get(&key) {
            Some(&i) => {
                if let Some(existing) = self.items.get_mut(i) {
                    combine(existing, item);
                }
            }
            None => {
                self.index.insert(key, self.items.len());
                self.items.push(item);
            }
        }
        Ok(())
    }

    /// The (merged) items in insertion order.
    pub fn into_items(self) -> Vec<T> {
        self.items
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pycompat::time::FixedZone;

    /// The `Item` class from flux's `t/python/t0024-util.py`.
    pub(crate) struct Item {
        pub(crate) s: String,
        pub(crate) i: i64,
        f: FieldValue,
        d: f64,
    }

    impl Item {
        pub(crate) fn new(s: &str, i: i64, f: f64) -> Item {
            Item {
                s: s.into(),
                i,
                f: FieldValue::Float(f),
                d: 978336000.0,
            }
        }
        fn with_int_f(s: &str, i: i64, f: i64) -> Item {
            Item {
                s: s.into(),
                i,
                f: FieldValue::Int(f),
                d: 978336000.0,
            }
        }
    }

    impl FormatItem for Item {
        fn class_path(&self) -> String {
            "__main__.Item".into()
        }
        fn attr(&self, name: &str) -> Option<FieldValue> {
            match name {
                "s" => Some(FieldValue::Str(self.s.clone())),
                "i" => Some(FieldValue::Int(self.i)),
                "f" => Some(self.f.clone()),
                "d" => Some(FieldValue::Float(self.d)),
                _ => None,
            }
        }
    }

    fn hd() -> Headings {
        headings(&[
            ("s", "STRING"),
            ("i", "INTEGER"),
            ("f", "FLOAT"),
            ("d", "DATETIME"),
        ])
    }

    #[test]
    fn upstream_basic_cases() {
        // (input, fmt, hdrfmt, header, result) from t0024-util.py, TZ=UTC
        let cases: &[(&str, &str, &str, &str, &str)] = &[
            ("", "", "", "", ""),
            ("{s}", "{0.s}", "{s}", "STRING", "foo"),
            ("{i}", "{0.i}", "{i}", "INTEGER", "42"),
            ("{f}", "{0.f}", "{f}", "FLOAT", "1234.567"),
            ("{d}", "{0.d}", "{d}", "DATETIME", "978336000.0"),
            (
                "{s:<6} {i:>7d}",
                "{0.s:<6} {0.i:>7d}",
                "{s:<6} {i:>7}",
                "STRING INTEGER",
                "foo         42",
            ),
            (
                "{s:<6} {f:>8.2f}",
                "{0.s:<6} {0.f:>8.2f}",
                "{s:<6} {f:>8}",
                "STRING    FLOAT",
                "foo     1234.57",
            ),
            (
                "a {s:<6} b{f:>8.2f} ",
                "a {0.s:<6} b{0.f:>8.2f} ",
                "a {s:<6} b{f:>8} ",
                "a STRING b   FLOAT ",
                "a foo    b 1234.57 ",
            ),
            (
                "{i:>7d} {d!d:%b%d %R::^20}",
                "{0.i:>7d} {0.d!d:%b%d %R::^20}",
                "{i:>7} {d:^20}",
                "INTEGER       DATETIME      ",
                "     42     Jan01 08:00     ",
            ),
            (
                "sort:i,-d {i:>7d} {d!d:%b%d %R::^20}",
                "{0.i:>7d} {0.d!d:%b%d %R::^20}",
                "{i:>7} {d:^20}",
                "INTEGER       DATETIME      ",
                "     42     Jan01 08:00     ",
            ),
        ];
        let z = FixedZone::utc();
        let item = Item::new("foo", 42, 1234.567);
        for (input, fmt, hdrfmt, header, result) in cases {
            let of = OutputFormat::new(input, &hd()).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(of.get_format(false, false), *fmt, "{input}");
            assert_eq!(of.header_format(), *hdrfmt, "{input}");
            assert_eq!(of.header(&z).unwrap_or_default(), *header, "{input}");
            assert_eq!(of.format(&item, &z).unwrap_or_default(), *result, "{input}");
        }
    }

    /// `fmt` filtered for `items` (the error text when it fails).
    fn filtered(items: &[&dyn FormatItem], fmt: &str, no_header: bool) -> String {
        OutputFormat::new(fmt, &hd())
            .and_then(|mut o| o.filter(items, no_header, &FixedZone::utc()))
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn upstream_filter_cases() {
        let a = Item::new("", 0, 2.2);
        let d = Item::new("", 1, 1.1);
        let zz = Item::new("", 23456789, 1.0);
        let f = |fmt: &str, nh: bool| filtered(&[&a, &d, &zz], fmt, nh);
        assert_eq!(f("?+:{i:>7} ?:{s:>6} ?:{f:8.2}", false), "{i:>8} {f:8.2}");
        assert_eq!(f("?+:{i:>7} ?:{s:>6} ?+:{f:.2f}", false), "{i:>8} {f:5.2f}");
        assert_eq!(f("?+:{i:>7} ?:{s:>6} ?+:{f:.2f}", true), "{i:>8} {f:3.2f}");

        // issue 6530
        let a = Item::new("1234567890", 0, 2.2);
        let b = Item::with_int_f("abcdefghijklmnop", 2, 13);
        let c = Item::new("c", 4, 5.0);
        let f = |fmt: &str, nh: bool| filtered(&[&a, &b, &c], fmt, nh);
        assert_eq!(
            f("+:{s:5.5} +:{i:4d} +:{f:.2f}", false),
            "{s:16.16} {i:7d} {f:5.2f}"
        );
        assert_eq!(
            f("+:{s:5.5} +:{i:4d} +:{f:.2f}", true),
            "{s:16.16} {i:4d} {f:3.2f}"
        );
    }

    #[test]
    fn upstream_copy_cases() {
        let original = "+:{s:5.5} {i:4d} {f:.2f}";
        let of = OutputFormat::new(original, &hd()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(of.get_format_prepended("", &[], true, false), original);
        let c = of.copy(&[], false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.get_format_prepended("", &[], true, false), original);
        let c = of
            .copy(&["s", "f"], false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.get_format_prepended("", &[], true, false), " {i:4d}");
        let c = of.copy(&[], true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.get_format_prepended("", &[], true, false),
            "{s} {i:4d} {f:.2f}"
        );
    }

    #[test]
    fn upstream_sort_cases() {
        let a = Item::new("a", 0, 2.2);
        let d = Item::new("d", 33, 1.1);
        let z = Item::new("z", 11, 1.0);
        let names = |v: &Vec<&Item>| v.iter().map(|i| i.s.clone()).collect::<Vec<_>>().join("");
        let mut of = OutputFormat::new("{s}:{i}:{f}", &hd()).unwrap_or_else(|e| panic!("{e}"));
        for (keys, want) in [("s", "adz"), ("-s", "zda"), ("i", "azd"), ("f", "zda")] {
            let mut items = vec![&z, &a, &d];
            of.set_sort_keys(keys).unwrap_or_else(|e| panic!("{e}"));
            of.sort_items(&mut items).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(names(&items), want, "{keys}");
        }
        let of = OutputFormat::new("sort:i {s}:{i}:{f}", &hd()).unwrap_or_else(|e| panic!("{e}"));
        let mut items = vec![&z, &a, &d];
        of.sort_items(&mut items).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&items), "azd");
        let mut of = of;
        of.set_sort_keys("f").unwrap_or_else(|e| panic!("{e}"));
        let mut items = vec![&z, &a, &d];
        of.sort_items(&mut items).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&items), "zda");
    }

    #[test]
    fn errors() {
        let e = |fmt: &str| {
            OutputFormat::new(fmt, &hd())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(e("{x}"), "Unknown format field: x");
        assert_eq!(e("{0.x}"), "Unknown format field: x");
        assert_eq!(e("sort:q {s}"), "Invalid sort key: q");
        assert_eq!(e("{s"), "expected '}' before end of string");
        // literal braces do not survive flux's rebuild of the format
        let z = FixedZone::utc();
        let item = Item::new("foo", 1, 1.0);
        let format_err = |fmt: &str| {
            let of = OutputFormat::new(fmt, &hd()).unwrap_or_else(|e| panic!("{e}"));
            of.format(&item, &z).err().map(|e| e.to_string())
        };
        let single = "Single '}' encountered in format string";
        assert_eq!(format_err("a}}{s}").as_deref(), Some(single));
        // nested fields resolve against the item; names are KeyErrors
        let of = OutputFormat::new("{s:>{0.i}}", &hd()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            of.format(&Item::new("ab", 5, 1.0), &z).unwrap_or_default(),
            "   ab"
        );
        let invalid = "\"Invalid format field 'w' for <class '__main__.Item'>\"";
        assert_eq!(format_err("{s:>{w}}").as_deref(), Some(invalid));
    }

    #[test]
    fn flux_spec_roundtrip() {
        for spec in [
            "<30.30+",
            ">12",
            "0>5",
            "*^10.3s",
            "",
            "=+#010,.2f",
            "%b%d::<12",
        ] {
            let s = FluxSpec::parse(spec);
            let expect = spec.split_once("::").map(|(_, b)| b).unwrap_or(spec);
            assert_eq!(s.render(), expect, "{spec}");
        }
        let s = FluxSpec::parse("<5.5x+y");
        assert_eq!(s.render(), "");
        let mut s = FluxSpec::parse("<5.5+");
        s.set_width(16);
        assert_eq!(s.render(), "<16.16+");
    }
}
