//! `--help` of `--strategy` says plainly what each strategy cannot find, wherever
//! strategies are offered.

use assert_cmd::Command;

/// Each strategy with words of the limitation its help must state.
const LIMITS: [(&str, &str); 5] = [
    ("exhaustive", "only a seeded sample"),
    ("global-prefix", "only part of its stores after the cut"),
    ("program-order", "never shows a flag durable before the"),
    ("reads", "lines that recovery does not read"),
    ("fast", "code location's later runs"),
];

/// `persim help <command>`.
fn help(command: &str) -> String {
    let out = Command::cargo_bin("persim")
        .unwrap()
        .arg("help")
        .args(command.split(' '))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_help_of_every_strategy_says_what_it_cannot_find() {
    for command in ["run", "suite", "campaign run", "images"] {
        let text = help(command);
        // An entry of the list: the name, a column gap, and its lines up to the next entry.
        let entry = |strategy: &str| text.find(&format!(" {strategy}  "));
        for (strategy, limit) in LIMITS {
            let at = entry(strategy)
                .unwrap_or_else(|| panic!("`persim help {command}` lists no {strategy}: {text}"));
            let end = LIMITS
                .iter()
                .filter_map(|(other, _)| entry(other).filter(|&e| e > at))
                .min()
                .or_else(|| text[at..].find("\n  -").map(|e| at + e))
                .unwrap_or(text.len());
            let own = text[at..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                own.contains(limit),
                "`persim help {command}`, {strategy}: no `{limit}` in `{own}`"
            );
        }
    }
}
