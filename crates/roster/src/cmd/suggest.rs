//! "Did you mean" suggestions for mistyped words (sub-commands, hosts).

/// Edit distance between `a` and `b` (by characters; insertions,
/// deletions, substitutions and swaps of two neighbours count 1: the
/// "optimal string alignment" distance), or `None` once it exceeds `max`
/// (the words are then too different to suggest).
pub fn distance(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let w = b.len() + 1;
    // rows i-2, i-1 and i of the (a.len()+1) x (b.len()+1) table; each
    // step rotates row i into the i-1 slot (row 0 starts in the last).
    let mut rows = [vec![0; w], vec![0; w], (0..w).collect::<Vec<usize>>()];
    for i in 1..=a.len() {
        rows.rotate_left(1);
        let [two, one, cur] = &mut rows;
        cur[0] = i;
        let mut row_min = i;
        for j in 1..w {
            let same = a[i - 1] == b[j - 1];
            let mut d = (one[j - 1] + usize::from(!same))
                .min(one[j] + 1)
                .min(cur[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(two[j - 2] + 1);
            }
            cur[j] = d;
            row_min = row_min.min(d);
        }
        if row_min > max {
            return None;
        }
    }
    let d = rows[2][b.len()];
    (d <= max).then_some(d)
}

/// The candidate closest to `word`, if one is close enough to be a typo:
/// at most a third of the word's length (at least 1, at most 3) edits
/// away.  Ties go to the first candidate.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let max = (word.chars().count() / 3).clamp(1, 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == word {
            continue;
        }
        let bound = best.map_or(max, |(d, _)| d.saturating_sub(1));
        if let Some(d) = distance(word, c, bound) {
            if best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, c));
            }
        }
    }
    best.map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("status", "status", 3), Some(0));
        assert_eq!(distance("statsu", "status", 3), Some(1));
        assert_eq!(distance("drian", "drain", 3), Some(1));
        assert_eq!(distance("ab", "ba", 1), Some(1));
        assert_eq!(distance("lst", "list", 3), Some(1));
        assert_eq!(distance("node12", "node1", 3), Some(1));
        assert_eq!(distance("abc", "xyzxyz", 3), None);
        assert_eq!(distance("", "ab", 2), Some(2));
        assert_eq!(distance("kitten", "sitting", 2), None);
        assert_eq!(distance("kitten", "sitting", 3), Some(3));
    }

    #[test]
    fn closest_picks_a_near_word_or_nothing() {
        let subs = ["status", "list", "drain", "undrain", "info"];
        assert_eq!(closest("statsu", subs), Some("status".into()));
        assert_eq!(closest("drian", subs), Some("drain".into()));
        assert_eq!(closest("undrian", subs), Some("undrain".into()));
        assert_eq!(closest("lst", subs), Some("list".into()));
        assert_eq!(closest("frobnicate", subs), None);
        assert_eq!(closest("x", subs), None);
        let hosts = ["fake0", "fake1", "fake2", "fake3"];
        assert_eq!(closest("fak1", hosts), Some("fake1".into()));
        assert_eq!(closest("fake9", hosts), Some("fake0".into()));
        assert_eq!(closest("node1", hosts), None);
    }
}
