//! Line diffs between two states, for people: which paths and fields differ.

/// A unified-style diff of `old` and `new` (lines prefixed `-`, `+`, or ` ` for up to
/// `context` unchanged lines around each change). Empty when the texts are equal.
pub fn line_diff(old: &str, new: &str, context: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Unchanged head and tail are cut off first, so the quadratic part only sees the
    // region that differs (states of one test differ in a few lines).
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut ops: Vec<(char, &str)> = a[..head].iter().map(|l| (' ', *l)).collect();
    ops.extend(middle_ops(ma, mb));
    ops.extend(a[a.len() - tail..].iter().map(|l| (' ', *l)));
    render(&ops, context)
}

/// Edit script of the differing middle part: longest common subsequence when it is
/// small enough, else everything removed and added.
fn middle_ops<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(char, &'a str)> {
    const MAX_CELLS: usize = 4_000_000;
    if a.len() * b.len() > MAX_CELLS {
        let removed = a.iter().map(|l| ('-', *l));
        return removed.chain(b.iter().map(|l| ('+', *l))).collect();
    }
    // lcs[i][j]: length of the LCS of a[i..] and b[j..]
    let w = b.len() + 1;
    let mut lcs = vec![0u32; (a.len() + 1) * w];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j, mut ops) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    ops
}

fn render(ops: &[(char, &str)], context: usize) -> String {
    let changed: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].0 != ' ').collect();
    let near_change = |i: usize| {
        let k = changed.partition_point(|&c| c + context < i);
        changed.get(k).is_some_and(|&c| c <= i + context)
    };
    let mut out = String::new();
    let mut skipped = false;
    for (i, (tag, line)) in ops.iter().enumerate() {
        if near_change(i) {
            if skipped {
                out.push_str("  ...\n");
                skipped = false;
            }
            out.push(*tag);
            out.push(' ');
            out.push_str(line);
            out.push('\n');
        } else {
            skipped = !out.is_empty() || skipped;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::line_diff;

    #[test]
    fn shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        assert_eq!(
            line_diff(old, new, 1),
            "  c\n- d\n+ D\n  e\n  ...\n  g\n+ h\n"
        );
        assert_eq!(line_diff(old, old, 3), "");
    }

    #[test]
    fn finds_insertions_in_the_middle() {
        let old = "{\n  \"/mnt\": 1,\n  \"/mnt/b\": 2\n}\n";
        let new = "{\n  \"/mnt\": 1,\n  \"/mnt/a\": 5,\n  \"/mnt/b\": 2\n}\n";
        assert_eq!(line_diff(old, new, 0), "+   \"/mnt/a\": 5,\n");
    }
}
