//! Line diffs between two states, for people: which paths and fields differ.

use similar::{capture_diff_slices_deadline, group_diff_ops, Algorithm, ChangeTag};
use std::time::{Duration, Instant};

/// How long the diff may search for a minimal edit script; past it, `similar` settles for a
/// coarser one (more lines removed and added), so huge, very different states stay cheap.
const DEADLINE: Duration = Duration::from_millis(500);

/// A unified-style diff of `old` and `new` (lines prefixed `-`, `+`, or ` ` for up to
/// `context` unchanged lines around each change, `  ...` between hunks). Empty when the
/// texts are equal.
pub fn line_diff(old: &str, new: &str, context: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops =
        capture_diff_slices_deadline(Algorithm::Myers, &a, &b, Some(Instant::now() + DEADLINE));
    let mut out = String::new();
    for (i, hunk) in group_diff_ops(ops, context).iter().enumerate() {
        if i > 0 {
            out.push_str("  ...\n");
        }
        for change in hunk.iter().flat_map(|op| op.iter_changes(&a, &b)) {
            out.push(match change.tag() {
                ChangeTag::Equal => ' ',
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
            });
            out.push(' ');
            out.push_str(change.value());
            out.push('\n');
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
        // Context that reaches from one change to the next joins their hunks.
        assert_eq!(
            line_diff(old, new, 2),
            "  b\n  c\n- d\n+ D\n  e\n  f\n  g\n+ h\n"
        );
        assert_eq!(line_diff(old, old, 3), "");
    }

    #[test]
    fn finds_insertions_in_the_middle() {
        let old = "{\n  \"/mnt\": 1,\n  \"/mnt/b\": 2\n}\n";
        let new = "{\n  \"/mnt\": 1,\n  \"/mnt/a\": 5,\n  \"/mnt/b\": 2\n}\n";
        assert_eq!(line_diff(old, new, 0), "+   \"/mnt/a\": 5,\n");
    }

    #[test]
    fn keeps_common_lines_between_changes() {
        // A minimal edit script: the unchanged `x` and `y` are not removed and re-added.
        let old = "1\nx\n2\ny\n3\n";
        let new = "x\n4\ny\n";
        assert_eq!(line_diff(old, new, 9), "- 1\n  x\n- 2\n+ 4\n  y\n- 3\n");
        assert_eq!(line_diff(old, new, 0), "- 1\n  ...\n- 2\n+ 4\n  ...\n- 3\n");
    }

    #[test]
    fn large_very_different_states_still_diff() {
        // More than 4M line pairs: every line of each side shows up once.
        let old: String = (0..3000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("new {i}\n")).collect();
        let diff = line_diff(&old, &new, 1);
        assert_eq!(
            diff.lines().filter(|l| l.starts_with("- old ")).count(),
            3000
        );
        assert_eq!(
            diff.lines().filter(|l| l.starts_with("+ new ")).count(),
            3000
        );
        assert_eq!(diff.lines().count(), 6000);
    }
}
