//! Whether an interval's final states are the right ones, which the states alone cannot
//! tell (a file system that ignores `O_APPEND` has one final state, a wrong one): compared
//! with the final state the same operations give on a reference configuration without a
//! crash, and with what the test expects (its `expect` key).

use crate::diff::line_diff;
use crate::signature::differing_fields;
use crate::verdict::CheckpointVerdict;
use persim_state::Recovered;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// fs-dump fields the reference comparison leaves out of every path: the two runs' clocks
/// (and recovery's, `set by recovery`), and where each file system put the inode and its
/// blocks. What a user reads and writes (contents, size, type, mode, owner, links,
/// symlink targets, xattrs) is compared.
pub const REFERENCE_LEAVES_OUT: [&str; 5] = ["atime", "ctime", "mtime", "ino", "blocks"];

/// Fields left out of directories too: a directory's size is its file system's format
/// (4096 on ext4, the entries' bytes on XFS), and its link count counts entries the dump
/// leaves out (ext4's `lost+found`); the entries themselves are compared path by path.
pub const REFERENCE_LEAVES_OUT_OF_DIRS: [&str; 2] = ["size", "nlink"];

/// The state at each checkpoint of the test's operations run on a reference
/// configuration, without a crash (its fully persisted image there, recovered).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceStates {
    /// The reference configuration's name.
    pub config: String,
    /// By checkpoint.
    pub at: BTreeMap<u64, Recovered>,
}

/// A test's `expect`: after operation N (the final state of interval N → N+1), what
/// paths hold. In TOML, `[expect.1]` then `"/mnt/f" = "contents"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BTreeMap<String, BTreeMap<String, Expected>>")]
#[serde(into = "BTreeMap<String, BTreeMap<String, Expected>>")]
pub struct Expect(pub BTreeMap<u64, BTreeMap<String, Expected>>);

/// What one path is expected to be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expected {
    /// A regular file with these contents.
    Contents(String),
    /// `false`: no such path.
    Absent(bool),
    /// These fs-dump fields, e.g. `{ type = "dir", mode = "0700" }`.
    Fields(BTreeMap<String, Value>),
}

impl TryFrom<BTreeMap<String, BTreeMap<String, Expected>>> for Expect {
    type Error = String;

    fn try_from(map: BTreeMap<String, BTreeMap<String, Expected>>) -> Result<Expect, String> {
        let mut expect = BTreeMap::new();
        for (op, paths) in map {
            let n = op.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                format!(
                    "`expect` is keyed by operation number (`[expect.1]`: the state after \
                     operation 1); `{op}` is not one"
                )
            })?;
            for (path, expected) in &paths {
                if !path.starts_with('/') {
                    return Err(format!(
                        "`expect.{n}` names `{path}`: give the path as the state names it, \
                         absolute (e.g. \"/mnt/{path}\")"
                    ));
                }
                match expected {
                    Expected::Absent(true) => {
                        return Err(format!(
                            "`expect.{n}` says `{path}` = true: give its contents (a string), \
                             false for no such path, or a table of fs-dump fields"
                        ))
                    }
                    Expected::Fields(fields) if fields.is_empty() => {
                        return Err(format!(
                            "`expect.{n}` gives `{path}` no field: name at least one"
                        ))
                    }
                    _ => {}
                }
            }
            expect.insert(n, paths);
        }
        Ok(Expect(expect))
    }
}

impl From<Expect> for BTreeMap<String, BTreeMap<String, Expected>> {
    fn from(expect: Expect) -> Self {
        expect
            .0
            .into_iter()
            .map(|(n, paths)| (n.to_string(), paths))
            .collect()
    }
}

impl Expect {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fs-dump fields the expectations name (`contents` for contents), for checks.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.0
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(|expected| match expected {
                Expected::Contents(_) => vec!["contents"],
                Expected::Absent(_) => Vec::new(),
                Expected::Fields(fields) => fields.keys().map(String::as_str).collect(),
            })
    }
}

/// A final state compared with what it should be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalCheck {
    /// What it was compared with: the reference configuration's name, or `expect`.
    pub against: String,
    /// The final states that differ; empty when every one matches.
    pub differs: Vec<FinalDifference>,
}

impl FinalCheck {
    pub fn matches(&self) -> bool {
        self.differs.is_empty()
    }
}

/// A final state that is not the one it should be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalDifference {
    pub state: String,
    /// The fields that differ (`entry` for a path one side lacks).
    pub fields: Vec<String>,
    /// A line diff: `-` what it should be, `+` the final state.
    pub diff: String,
}

/// Compares the final states of every interval N → N+1 with the reference's state at
/// checkpoint N+1 and with the test's expectations after operation N, into each
/// interval's `reference` and `expected`. Final states whose recovery failed are errors
/// of their interval already and are not compared. `fs_dump`: the states are fs-dump's
/// (a program's own `state` JSON is compared whole).
pub fn check_final_states<'a>(
    checkpoints: &mut [CheckpointVerdict],
    state_of: impl Fn(&str) -> Option<&'a Recovered>,
    reference: Option<&ReferenceStates>,
    expect: &Expect,
    fs_dump: bool,
) {
    for interval in checkpoints {
        let finals: Vec<(String, &str)> = interval
            .states
            .iter()
            .filter(|s| interval.final_states.contains(&s.name))
            .filter_map(|s| match state_of(s.images.first()?)? {
                Recovered::State { dump } => Some((s.name.clone(), dump.as_str())),
                _ => None,
            })
            .collect();
        if let Some(reference) = reference {
            let should = reference.at.get(&interval.to).map_or_else(
                || format!("(the reference has no checkpoint {})", interval.to),
                |r| comparable(r.text(), fs_dump),
            );
            interval.reference = Some(compare(&reference.config, &should, &finals, |dump| {
                comparable(dump, fs_dump)
            }));
        }
        if let Some(paths) = expect.0.get(&interval.from) {
            let should = pretty(&expected_view(paths));
            interval.expected = Some(compare("expect", &should, &finals, |dump| {
                actual_view(paths, dump)
            }));
        }
    }
}

/// Each final state, as `view` shows it, against `should`.
fn compare(
    against: &str,
    should: &str,
    finals: &[(String, &str)],
    view: impl Fn(&str) -> String,
) -> FinalCheck {
    let differs = finals
        .iter()
        .filter_map(|(state, dump)| {
            let is = view(dump);
            (is != should).then(|| FinalDifference {
                state: state.clone(),
                fields: differing_fields(&[should, &is]).into_iter().collect(),
                diff: line_diff(should, &is, 2),
            })
        })
        .collect();
    FinalCheck {
        against: against.to_owned(),
        differs,
    }
}

/// A state as the reference comparison sees it: fs-dump's records without the fields
/// that legitimately differ between two runs or two file systems.
fn comparable(dump: &str, fs_dump: bool) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(dump) else {
        return dump.to_owned();
    };
    if let (true, Value::Object(paths)) = (fs_dump, &mut value) {
        for record in paths.values_mut().filter_map(Value::as_object_mut) {
            let dir = record.get("type").and_then(Value::as_str) == Some("dir");
            for field in REFERENCE_LEAVES_OUT {
                record.remove(field);
            }
            if dir {
                for field in REFERENCE_LEAVES_OUT_OF_DIRS {
                    record.remove(field);
                }
            }
        }
    }
    pretty(&value)
}

/// The expectations as a state: each path's expected fields; a path expected absent is
/// not there.
fn expected_view(paths: &BTreeMap<String, Expected>) -> Value {
    let view = paths
        .iter()
        .filter_map(|(path, expected)| {
            let value = match expected {
                Expected::Contents(text) => {
                    Value::Object(Map::from_iter([("contents".into(), text.clone().into())]))
                }
                Expected::Absent(_) => return None,
                Expected::Fields(fields) => Value::Object(fields.clone().into_iter().collect()),
            };
            Some((path.clone(), value))
        })
        .collect();
    Value::Object(view)
}

/// The part of a state the expectations are about, shaped like [`expected_view`]: each
/// path's record with only the expected fields (all of them for a path expected absent);
/// a path the state lacks is not there.
fn actual_view(paths: &BTreeMap<String, Expected>, dump: &str) -> String {
    let state = serde_json::from_str::<Value>(dump).unwrap_or(Value::Null);
    let view = paths
        .iter()
        .filter_map(|(path, expected)| {
            let record = state.get(path).and_then(Value::as_object)?;
            let wanted = |field: &str| match expected {
                Expected::Contents(_) => field == "contents",
                Expected::Absent(_) => true,
                Expected::Fields(fields) => fields.contains_key(field),
            };
            let kept = record
                .iter()
                .filter(|(field, _)| wanted(field))
                .map(|(f, v)| (f.clone(), v.clone()))
                .collect();
            Some((path.clone(), Value::Object(kept)))
        })
        .collect();
    pretty(&Value::Object(view))
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::StateInfo;

    fn record(contents: &str, ino: u64, mtime: &str) -> String {
        format!(
            r#"{{"/mnt": {{"type": "dir", "mode": "0755", "size": 4096, "nlink": 3, "ino": 2}},
                 "/mnt/f": {{"type": "file", "contents": "{contents}", "size": {}, "ino": {ino},
                             "blocks": 8, "mtime": "{mtime}", "mode": "0644"}}}}"#,
            contents.replace("\\n", "\n").len()
        )
    }

    /// One interval 1 → 2 whose final state is image `b`'s.
    fn interval() -> Vec<CheckpointVerdict> {
        let state = |name: &str, image: &str| StateInfo::recovered(name, vec![1], image);
        vec![CheckpointVerdict::first_interval(
            vec![state("c1s0", "a"), state("c1s1", "b")],
            vec!["c1s1".into()],
        )]
    }

    fn reference(dump: &str) -> ReferenceStates {
        ReferenceStates {
            config: "xfs-dax".into(),
            at: BTreeMap::from([(2, Recovered::state(dump))]),
        }
    }

    fn checked(
        final_dump: &str,
        reference: Option<&ReferenceStates>,
        expect: &Expect,
    ) -> CheckpointVerdict {
        let states = BTreeMap::from([
            (
                "a".to_owned(),
                Recovered::state(&record("Hello\\n", 12, "1.0")),
            ),
            ("b".to_owned(), Recovered::state(final_dump)),
        ]);
        let mut checkpoints = interval();
        check_final_states(&mut checkpoints, |h| states.get(h), reference, expect, true);
        checkpoints.remove(0)
    }

    #[test]
    fn an_equal_reference_state_passes_whatever_the_clocks_inodes_and_directory_format() {
        // Another file system: other inode numbers, times, directory size and links.
        let xfs = record("Hello\\nWorld\\n", 131, "9.5")
            .replace(r#""size": 4096, "nlink": 3"#, r#""size": 22, "nlink": 2"#);
        let c = checked(
            &record("Hello\\nWorld\\n", 12, "1.0"),
            Some(&reference(&xfs)),
            &Expect::default(),
        );
        let check = c.reference.as_ref().unwrap();
        assert!(check.matches(), "{check:?}");
        assert_eq!(check.against, "xfs-dax");
        assert!(!c.violated());
        assert_eq!(c.expected, None, "no expectations, no check");
    }

    #[test]
    fn a_differing_file_differs_from_the_reference_with_a_diff() {
        let c = checked(
            &record("World\\n", 12, "1.0"),
            Some(&reference(&record("Hello\\nWorld\\n", 131, "9.5"))),
            &Expect::default(),
        );
        let check = c.reference.as_ref().unwrap();
        assert_eq!(check.differs.len(), 1);
        let d = &check.differs[0];
        assert_eq!(d.state, "c1s1");
        assert_eq!(d.fields, ["contents", "size"]);
        assert!(
            d.diff.contains("-     \"contents\": \"Hello\\nWorld\\n\",")
                && d.diff.contains("+     \"contents\": \"World\\n\","),
            "{}",
            d.diff
        );
        assert!(
            !d.diff.contains("ino"),
            "left-out fields stay out: {}",
            d.diff
        );
        assert!(c.violated());
        // A file's link count is compared (only a directory's is left out).
        let linked = record("Hello\\nWorld\\n", 12, "1.0")
            .replace(r#""mode": "0644""#, r#""mode": "0644", "nlink": 2"#);
        let c = checked(
            &linked,
            Some(&reference(&record("Hello\\nWorld\\n", 131, "9.5"))),
            &Expect::default(),
        );
        assert_eq!(c.reference.unwrap().differs[0].fields, ["nlink"]);
    }

    #[test]
    fn fields_the_test_ignores_are_not_in_either_state_and_so_not_compared() {
        // fs-dump leaves ignored fields out of both runs' states; a field only one side has
        // is a difference, so the test's `ignore` must be what both were dumped with.
        let without_mode = |dump: String| dump.replace(r#", "mode": "0644""#, "");
        let c = checked(
            &without_mode(record("Hello\\nWorld\\n", 12, "1.0")),
            Some(&reference(&without_mode(record(
                "Hello\\nWorld\\n",
                7,
                "3.0",
            )))),
            &Expect::default(),
        );
        assert!(c.reference.unwrap().matches());
    }

    fn expect(toml_text: &str) -> Result<Expect, String> {
        #[derive(Deserialize)]
        struct Test {
            expect: Expect,
        }
        toml::from_str::<Test>(toml_text)
            .map(|t| t.expect)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn expectations_are_parsed_by_operation_and_refused_with_what_to_write() {
        let e = expect(
            "[expect.1]\n\"/mnt/f\" = \"Hello\\nWorld\\n\"\n\"/mnt/gone\" = false\n\
             \"/mnt\" = { type = \"dir\", mode = \"0755\" }\n",
        )
        .unwrap();
        assert_eq!(
            e.0[&1]["/mnt/f"],
            Expected::Contents("Hello\nWorld\n".into())
        );
        assert_eq!(e.0[&1]["/mnt/gone"], Expected::Absent(false));
        let mut fields: Vec<&str> = e.fields().collect();
        fields.sort();
        assert_eq!(fields, ["contents", "mode", "type"]);
        // back to TOML and again: the same
        #[derive(Serialize)]
        struct Test<'a> {
            expect: &'a Expect,
        }
        let text = toml::to_string(&Test { expect: &e }).unwrap();
        assert_eq!(expect(&text).unwrap(), e);

        let refused = |text: &str, says: &str| {
            let e = expect(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        };
        refused("[expect.x]\n\"/mnt/f\" = \"a\"\n", "`x` is not one");
        refused("[expect.0]\n\"/mnt/f\" = \"a\"\n", "`0` is not one");
        refused("[expect.1]\n\"f\" = \"a\"\n", "absolute (e.g. \"/mnt/f\")");
        refused("[expect.1]\n\"/mnt/f\" = true\n", "false for no such path");
        refused("[expect.1]\n\"/mnt/f\" = {}\n", "name at least one");
    }

    #[test]
    fn expected_contents_absence_and_fields_are_checked_in_each_final_state() {
        let right = record("Hello\\nWorld\\n", 12, "1.0");
        let wrong = record("World\\n", 12, "1.0");
        let e = expect("[expect.1]\n\"/mnt/f\" = \"Hello\\nWorld\\n\"\n").unwrap();
        assert!(checked(&right, None, &e).expected.unwrap().matches());
        let c = checked(&wrong, None, &e);
        assert!(c.violated());
        assert_eq!(c.reference, None);
        let check = c.expected.unwrap();
        assert_eq!(check.against, "expect");
        assert_eq!(check.differs[0].fields, ["contents"]);
        assert_eq!(
            check.differs[0].diff,
            "  {\n    \"/mnt/f\": {\n-     \"contents\": \"Hello\\nWorld\\n\"\n\
             +     \"contents\": \"World\\n\"\n    }\n  }\n"
        );
        let absent = expect("[expect.1]\n\"/mnt/f\" = false\n").unwrap();
        let check = checked(&right, None, &absent).expected.unwrap();
        assert_eq!(check.differs[0].fields, ["entry"]);
        assert!(
            check.differs[0].diff.contains("+   \"/mnt/f\": {"),
            "{check:?}"
        );
        let fields = expect("[expect.1]\n\"/mnt/f\" = { mode = \"0644\", size = 12 }\n").unwrap();
        assert!(checked(&right, None, &fields).expected.unwrap().matches());
        let check = checked(&wrong, None, &fields).expected.unwrap();
        assert_eq!(check.differs[0].fields, ["size"]);
        // Only the interval the expectation names is checked.
        let later = expect("[expect.2]\n\"/mnt/f\" = \"x\"\n").unwrap();
        assert_eq!(checked(&wrong, None, &later).expected, None);
    }
}
