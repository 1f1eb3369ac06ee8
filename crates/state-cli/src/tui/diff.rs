//! A line diff of two values' pretty JSON, for the history view. Values are small (a key's
//! value is at most a few hundred KB and usually a few lines), so the quadratic longest
//! common subsequence is fine; past a bound it falls back to "everything changed".

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    Same(String),
    Removed(String),
    Added(String),
}

/// Beyond this many line pairs the table would cost more than a frame is worth.
const MAX_CELLS: usize = 4_000_000;

pub(crate) fn lines(old: &str, new: &str) -> Vec<Line> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len().saturating_mul(b.len()) > MAX_CELLS {
        let mut out: Vec<Line> = a.iter().map(|l| Line::Removed((*l).to_owned())).collect();
        out.extend(b.iter().map(|l| Line::Added((*l).to_owned())));
        return out;
    }
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(Line::Same(a[i].to_owned()));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(Line::Removed(a[i].to_owned()));
            i += 1;
        } else {
            out.push(Line::Added(b[j].to_owned()));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| Line::Removed((*l).to_owned())));
    out.extend(b[j..].iter().map(|l| Line::Added((*l).to_owned())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_are_removed_then_added_and_the_rest_kept() {
        let diff = lines("{\n  \"a\": 1,\n  \"b\": 2\n}", "{\n  \"a\": 1,\n  \"b\": 3,\n  \"c\": 4\n}");
        assert_eq!(
            diff,
            vec![
                Line::Same("{".into()),
                Line::Same("  \"a\": 1,".into()),
                Line::Removed("  \"b\": 2".into()),
                Line::Added("  \"b\": 3,".into()),
                Line::Added("  \"c\": 4".into()),
                Line::Same("}".into()),
            ]
        );
        assert_eq!(lines("", "x"), vec![Line::Added("x".into())]);
    }
}
