//! Python's `textwrap.wrap` / `textwrap.fill` (CPython 3.11) on text whose
//! white space was already collapsed, as `argparse`'s help formatter
//! passes it: `TextWrapper` with `break_on_hyphens=True`,
//! `break_long_words=True`, no indents.

/// `textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent)`
/// for argparse descriptions (empty text gives the empty string).
pub fn fill(text: &str, width: usize, indent: &str) -> String {
    wrap(text, width.saturating_sub(indent.len()).max(1))
        .iter()
        .map(|l| format!("{indent}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Is `c` in Python's `[^\d\W]` (a letter or underscore)?
fn is_letter(c: char) -> bool {
    (c.is_alphanumeric() || c == '_') && !c.is_numeric()
}

/// Split a word where `textwrap` would allow a break after a hyphen
/// (`break_on_hyphens`): after `-` preceded by two letters (or
/// letter-letter-) and followed by letter, optional `-`, letter.
fn hyphen_chunks(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in chars.iter().enumerate() {
        if c != '-' || i < 2 {
            continue;
        }
        let l = |k: usize| chars.get(k).copied().is_some_and(is_letter);
        let before = (l(i - 1) && l(i - 2))
            || (i >= 3 && l(i - 1) && chars.get(i - 2) == Some(&'-') && l(i - 3));
        let after = l(i + 1) && (l(i + 2) || (chars.get(i + 2) == Some(&'-') && l(i + 3)));
        if before && after && i + 1 > start {
            out.push(chars.get(start..=i).unwrap_or(&[]).iter().collect());
            start = i + 1;
        }
    }
    if start < chars.len() {
        out.push(chars.get(start..).unwrap_or(&[]).iter().collect());
    }
    out
}

/// `textwrap.wrap(text, width)` after argparse collapsed white space
/// (`re.sub(r'\s+', ' ', text).strip()`).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    wrap_with(text, width, true)
}

/// [`wrap`] with `break_on_hyphens` chosen.  Without it, words are only
/// broken when longer than `width`.
pub fn wrap_with(text: &str, width: usize, break_on_hyphens: bool) -> Vec<String> {
    let width = width.max(1);
    // chunks: words split at hyphens, and single spaces between words
    let mut chunks: Vec<String> = Vec::new();
    for (i, w) in text.split_whitespace().enumerate() {
        if i > 0 {
            chunks.push(" ".into());
        }
        if break_on_hyphens {
            chunks.extend(hyphen_chunks(w));
        } else {
            chunks.push(w.to_string());
        }
    }
    chunks.reverse();
    let mut lines = Vec::new();
    while !chunks.is_empty() {
        let mut cur: Vec<String> = Vec::new();
        let mut cur_len = 0usize;
        if !lines.is_empty() && chunks.last().is_some_and(|c| c.trim().is_empty()) {
            chunks.pop();
        }
        while let Some(c) = chunks.last() {
            let l = c.chars().count();
            if cur_len + l <= width {
                cur_len += l;
                if let Some(c) = chunks.pop() {
                    cur.push(c);
                }
            } else {
                break;
            }
        }
        if let Some(c) = chunks.last_mut() {
            if c.chars().count() > width {
                let space_left = width.saturating_sub(cur_len).max(1);
                let cs: Vec<char> = c.chars().collect();
                let mut end = space_left;
                if let Some(h) = cs
                    .get(..space_left)
                    .and_then(|p| p.iter().rposition(|&x| x == '-'))
                {
                    if h > 0 && cs.get(..h).is_some_and(|p| p.iter().any(|&x| x != '-')) {
                        end = h + 1;
                    }
                }
                cur.push(cs.get(..end).unwrap_or(&[]).iter().collect());
                *c = cs.get(end..).unwrap_or(&[]).iter().collect();
            }
        }
        if cur.last().is_some_and(|c| c.trim().is_empty()) {
            cur.pop();
        }
        if !cur.is_empty() {
            lines.push(cur.concat());
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textwrap_like_python() {
        assert_eq!(
            wrap("Display human-readable output now please", 18),
            vec!["Display human-", "readable output", "now please"]
        );
        assert_eq!(wrap("", 10), Vec::<String>::new());
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(
            wrap_with("Display human-readable output now please", 18, false),
            vec!["Display", "human-readable", "output now please"]
        );
    }

    #[test]
    fn fill_indents_each_line() {
        assert_eq!(fill("a b c d", 5, "  "), "  a b\n  c d");
        assert_eq!(fill("", 5, "  "), "");
    }
}
