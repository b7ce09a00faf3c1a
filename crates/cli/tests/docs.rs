//! The docs check (issue 43): docs/ stays short and readable, its links lead somewhere, and
//! every `persim` command that docs/, README.md and suites/README.md show in a code block
//! names a command and options that exist. Reads the files of the checkout and asks
//! `persim help` about each command; runs no VM. That the commands do what the guides say
//! is the business of the tests each guide names. The VM configuration reference has
//! every key of `VmConfig` in its key table, once.

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// At most this many words in all of docs/ (issue 43: half of 2026-11's 86,600).
const MAX_WORDS: usize = 50_000;
/// No line in docs/ longer than this, in characters: a table cell that holds a paragraph
/// belongs in prose.
const MAX_LINE: usize = 400;
/// The guides a user looks for by task; each says how its commands are checked.
const GUIDES: [&str; 7] = [
    "kernel-fs.md",
    "pm-program.md",
    "cross-media.md",
    "campaigns.md",
    "reports.md",
    "faults.md",
    "efficiency.md",
];
const CHECKED: &str = "**How the commands here are checked**";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Markdown file under `dir`, sorted.
fn markdown(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(markdown(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    found
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn name(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The lines of `text` outside fenced code blocks (`false`) and inside them (`true`).
fn lines_by_fence(text: &str) -> Vec<(bool, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        out.push((inside, line));
    }
    out
}

#[test]
fn docs_stay_short_and_no_line_is_a_paragraph() {
    let mut words = 0;
    let mut long = Vec::new();
    for path in markdown(&root().join("docs")) {
        let text = read(&path);
        words += text.split_whitespace().count();
        for (n, line) in text.lines().enumerate() {
            let chars = line.chars().count();
            if chars > MAX_LINE {
                long.push(format!("{}:{}: {chars} characters", name(&path), n + 1));
            }
        }
    }
    assert!(
        words <= MAX_WORDS,
        "docs/ holds {words} words, more than {MAX_WORDS}"
    );
    assert!(
        long.is_empty(),
        "lines over {MAX_LINE} characters:\n{}",
        long.join("\n")
    );
}

#[test]
fn every_guide_exists_and_says_how_its_commands_are_checked() {
    for guide in GUIDES {
        let path = root().join("docs/guides").join(guide);
        assert!(path.is_file(), "no guide {}", name(&path));
    }
    for path in markdown(&root().join("docs/guides")) {
        assert!(
            read(&path).contains(CHECKED),
            "{} does not say how its commands are checked ({CHECKED})",
            name(&path)
        );
    }
}

/// The targets of the Markdown links `[text](target)` in `text` outside code blocks and
/// code spans.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (fenced, line) in lines_by_fence(text) {
        if fenced {
            continue;
        }
        // Code spans hold `](` as code, not as links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_leads_to_a_file() {
    let root = root();
    let mut pages = markdown(&root.join("docs"));
    pages.push(root.join("README.md"));
    pages.push(root.join("suites/README.md"));
    let mut broken = Vec::new();
    for page in &pages {
        for target in links(&read(page)) {
            let path = target.split('#').next().unwrap();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            if !page.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: ({target})", name(page)));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to missing files:\n{}",
        broken.join("\n")
    );
}

/// Splits a shell command line into words: quotes group, `#` outside quotes starts a
/// comment, `;`, `&&`, `||` and `|` between words end a command.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, ';' | '&' | '|') if !in_word => {
                while chars.peek().is_some_and(|n| *n == '&' || *n == '|') {
                    chars.next();
                }
                all.push(std::mem::take(&mut words));
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    all.push(words);
    all.retain(|w| !w.is_empty());
    all
}

/// The `persim` commands in the code blocks of a page: a line that starts with `persim `
/// (after an optional `$ `), with its `\` continuation lines.
fn persim_commands(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut pending: Option<String> = None;
    for (fenced, line) in lines_by_fence(text) {
        if !fenced {
            pending = None;
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let joined = match pending.take() {
            Some(start) => format!("{start} {line}"),
            None if line.starts_with("persim ") => line.to_string(),
            None => continue,
        };
        if let Some(start) = joined.strip_suffix('\\') {
            pending = Some(start.to_string());
            continue;
        }
        for words in commands(&joined) {
            // `persim campaign: 31/47 tests, …` is what it prints, not a command.
            if words[0] == "persim" && !words.get(1).is_some_and(|w| w.ends_with(':')) {
                found.push(words);
            }
        }
    }
    found
}

/// `persim help WORDS`, or `None` when persim knows no such command.
fn help(words: &[&str], cache: &mut BTreeMap<String, Option<String>>) -> Option<String> {
    cache
        .entry(words.join(" "))
        .or_insert_with(|| {
            let out = Command::cargo_bin("persim")
                .unwrap()
                .arg("help")
                .args(words)
                .output()
                .unwrap();
            out.status
                .success()
                .then(|| String::from_utf8(out.stdout).unwrap())
        })
        .clone()
}

/// Whether `help` offers the option `flag` (`--out`, `-o`): the flag, then no letter.
fn offers(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// What is wrong with one command, if anything: an unknown command or option.
fn check(words: &[String], cache: &mut BTreeMap<String, Option<String>>) -> Option<String> {
    // The command's words: up to the first option, each a subcommand name (a `a|b` choice
    // stands for its first).
    let names: Vec<&str> = words[1..]
        .iter()
        .take_while(|w| !w.starts_with('-') && !w.starts_with('['))
        .map(|w| w.split('|').next().unwrap())
        .take_while(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .take(2)
        .collect();
    // `persim --help` asks the top level; a command's words must name a command.
    let fewest = usize::from(!names.is_empty());
    let Some((command, text)) = (fewest..=names.len())
        .rev()
        .find_map(|n| help(&names[..n], cache).map(|text| (names[..n].join(" "), text)))
    else {
        return Some(format!("persim has no command `{}`", names.join(" ")));
    };
    for word in &words[1..] {
        let word = word.trim_start_matches('[');
        if !word.starts_with('-') || word == "-" || word == "--" {
            continue;
        }
        let flag = word.split(['=', ']']).next().unwrap();
        if flag.len() < 2 || flag.chars().nth(1).is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        if !offers(&text, flag) {
            return Some(format!("`persim help {command}` has no {flag}"));
        }
    }
    None
}

#[test]
fn every_persim_command_in_the_docs_and_the_readmes_parses() {
    let root = root();
    let mut pages = markdown(&root.join("docs"));
    pages.push(root.join("README.md"));
    pages.push(root.join("suites/README.md"));
    let mut cache = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for page in &pages {
        for words in persim_commands(&read(page)) {
            seen += 1;
            if let Some(why) = check(&words, &mut cache) {
                wrong.push(format!("{}: `{}`: {why}", name(page), words.join(" ")));
            }
        }
    }
    eprintln!("{seen} persim commands checked");
    assert!(seen >= 100, "only {seen} persim commands found in the docs");
    assert!(
        wrong.is_empty(),
        "commands that do not parse:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checks_see_commands_options_and_links() {
    let text = "```sh\npersim run --fs ext4 \\\n    --out D   # one\n$ persim a | persim b\n```\n\
                `persim nope` [x](y.md) `[z](w.md)`";
    let commands = persim_commands(text);
    assert_eq!(commands[0], ["persim", "run", "--fs", "ext4", "--out", "D"]);
    assert_eq!(commands[1], ["persim", "a"]);
    assert_eq!(commands[2], ["persim", "b"]);
    assert_eq!(links(text), ["y.md"]);
    let mut cache = BTreeMap::new();
    assert_eq!(check(&commands[0], &mut cache), None);
    let bad = ["persim", "run", "--no-such-option"].map(String::from);
    assert!(check(&bad, &mut cache)
        .unwrap()
        .contains("--no-such-option"));
    let unknown = ["persim", "frobnicate"].map(String::from);
    assert!(check(&unknown, &mut cache).is_some());
    let output = "```\npersim campaign: 31/47 tests\n```";
    assert!(persim_commands(output).is_empty());
    assert!(offers("  -o, --out <DIR>", "-o") && offers("  --out <DIR>", "--out"));
    assert!(!offers("  --outside", "--out"));
}

/// The keys of `VmConfig` (crates/vm/src/config.rs) as a configuration file spells them:
/// its public fields but those serde skips, and `extends`.
fn vm_config_keys() -> Vec<String> {
    let source = read(&root().join("crates/vm/src/config.rs"));
    let start = source
        .find("pub struct VmConfig {")
        .expect("VmConfig in crates/vm/src/config.rs");
    let body = &source[start..];
    let body = &body[..body.find("\n}").unwrap()];
    let mut keys = vec!["extends".to_string()];
    let mut skipped = false;
    for line in body.lines().skip(1).map(str::trim) {
        if line.starts_with("#[serde(") && line.contains("skip)") {
            skipped = true;
        } else if let Some(field) = line.strip_prefix("pub ") {
            let name = field.split(':').next().unwrap().trim();
            if !std::mem::take(&mut skipped) {
                keys.push(name.to_string());
            }
        }
    }
    keys
}

#[test]
fn the_vm_configuration_reference_has_every_key_once() {
    let text = read(&root().join("docs/reference/vm-config.md"));
    let table = &text[text.find("## Keys").expect("a Keys section")..];
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|row| row.split('|').nth(1).unwrap().trim().trim_matches('`'))
        .collect();
    let keys = vm_config_keys();
    assert!(keys.len() > 10, "{keys:?}");
    for key in &keys {
        let n = rows.iter().filter(|r| *r == key).count();
        assert_eq!(
            n, 1,
            "`{key}` is in the key table of vm-config.md {n} times"
        );
    }
    for row in &rows {
        assert!(
            keys.iter().any(|k| k == row),
            "vm-config.md documents `{row}`, which VmConfig does not have"
        );
    }
}
