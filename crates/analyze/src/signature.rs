//! A failing test's signature: what tells its problem apart from other tests' — the kind of
//! violation, what differs between its states, how recovery failed, and the function
//! behind it. A campaign groups its failing tests by signature, so a user reads a few
//! distinct problems rather than hundreds of failing tests.

use crate::culprits::UNKNOWN_SITE;
use crate::report::{telling_lines, Report};
use crate::verdict::Media;
use persim_state::Recovered;
use serde_json::Value;
use std::collections::BTreeSet;

/// The signature of a report with violations; None for an atomic one. `state_of` gives the
/// recovered state of an image hash (None when unknown). Names of files and numbers are
/// left out, so one bug met by different operations or files gives one signature.
pub fn signature(report: &Report, state_of: impl Fn(&str) -> Option<Recovered>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for interval in report.checkpoints.iter().filter(|c| c.violated()) {
        let mut part = Vec::new();
        let recovered: Vec<Recovered> = interval
            .states
            .iter()
            .filter_map(|s| state_of(s.images.first()?))
            .collect();
        let dumps: Vec<&str> = recovered
            .iter()
            .filter_map(|r| match r {
                Recovered::State { dump } => Some(dump.as_str()),
                _ => None,
            })
            .collect();
        // A failed recovery is the problem, whatever else the states differ in; states
        // that are all allowed differ only as the operation changes them.
        let fields = match interval.errors.is_empty() && interval.states_violated() {
            true => differing_fields(&dumps),
            false => BTreeSet::new(),
        };
        if !fields.is_empty() {
            part.push(format!(
                "states differ in {}",
                fields.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        for (check, what) in [
            (&interval.reference, "reference"),
            (&interval.expected, "expected"),
        ] {
            let fields: BTreeSet<&str> = check
                .iter()
                .flat_map(|c| &c.differs)
                .flat_map(|d| d.fields.iter().map(String::as_str))
                .collect();
            if !fields.is_empty() {
                let fields: Vec<&str> = fields.into_iter().collect();
                part.push(format!(
                    "final state differs from {what} in {}",
                    fields.join(", ")
                ));
            }
        }
        // With a disk: which medium the extra states come from (a lost SSD flush and a
        // torn PM write are different problems).
        let media: BTreeSet<Media> = interval
            .states
            .iter()
            .flat_map(|s| s.media.iter().copied())
            .collect();
        if let Some(media) = Media::describe(&media.into_iter().collect::<Vec<_>>()) {
            part.push(media);
        }
        if let Some(error) = interval.errors.first() {
            let line = telling_lines(&error.output).first().map_or("", |l| l);
            part.push(format!("{}: {}", error.outcome, without_numbers(line)));
        }
        let culprit = interval.culprits.first().filter(|c| c.site != UNKNOWN_SITE);
        if let Some(function) = culprit.map(|c| innermost_function(&c.site)) {
            part.push(format!("code {function}"));
        }
        let part = part.join("; ");
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("{} {}", report.mark().symbol(), parts.join(" | ")))
}

/// The fields (fs-dump's keys, `entry` for a path some state lacks) in which states differ;
/// for a JSON state of a program's own, its top-level keys; `state` when a dump is not a
/// JSON object.
pub(crate) fn differing_fields(dumps: &[&str]) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let parsed: Option<Vec<serde_json::Map<String, Value>>> = dumps
        .iter()
        .map(|d| match serde_json::from_str(d) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        })
        .collect();
    let Some(parsed) = parsed else {
        if dumps.iter().collect::<BTreeSet<_>>().len() > 1 {
            fields.insert("state".to_owned());
        }
        return fields;
    };
    let paths: BTreeSet<&String> = parsed.iter().flat_map(|m| m.keys()).collect();
    for path in paths {
        let entries: Vec<Option<&Value>> = parsed.iter().map(|m| m.get(path)).collect();
        if entries.iter().any(Option::is_none) {
            fields.insert("entry".to_owned());
        }
        // A program's own state: its top-level keys are its fields.
        let values: BTreeSet<String> = entries.iter().flatten().map(|v| v.to_string()).collect();
        if values.len() > 1 && entries.iter().flatten().any(|v| !v.is_object()) {
            fields.insert(path.clone());
        }
        let objects: Vec<&serde_json::Map<String, Value>> = entries
            .iter()
            .flatten()
            .filter_map(|v| v.as_object())
            .collect();
        let keys: BTreeSet<&String> = objects.iter().flat_map(|o| o.keys()).collect();
        for key in keys {
            let values: BTreeSet<String> = objects
                .iter()
                .map(|o| o.get(key).map_or(String::new(), Value::to_string))
                .collect();
            if values.len() > 1 {
                fields.insert(key.clone());
            }
        }
    }
    fields
}

/// `dax_zero_range` of `dax_zero_range+0x221 < ext4_truncate+0x47e [ext4] < …`.
fn innermost_function(site: &str) -> &str {
    let frame = site.split(" < ").next().unwrap_or(site).trim();
    let frame = frame.split(" [").next().unwrap_or(frame);
    frame.split("+0x").next().unwrap_or(frame)
}

/// `#` for every run of digits: block numbers, inode numbers and times vary between tests.
pub fn without_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckpointVerdict, Culprit, ErrorInfo, StateInfo};
    use persim_state::Outcome;

    #[test]
    fn fields_name_what_differs_whatever_the_file_names() {
        let a = r#"{"/mnt/foo": {"size": 10, "contents": "0123456789", "ino": 12}}"#;
        let b =
            r#"{"/mnt/foo": {"size": 5, "contents": "01234", "ino": 12}, "/mnt/A": {"size": 0}}"#;
        let fields: Vec<String> = differing_fields(&[a, b]).into_iter().collect();
        assert_eq!(fields, ["contents", "entry", "size"]);
        assert!(differing_fields(&[a, a]).is_empty());
        let own = [
            r#"{"home": "00", "log": "11"}"#,
            r#"{"home": "01", "log": "11"}"#,
        ];
        assert_eq!(
            differing_fields(&own).into_iter().collect::<Vec<_>>(),
            ["home"]
        );
        assert_eq!(
            differing_fields(&["old", "new"])
                .into_iter()
                .collect::<Vec<_>>(),
            ["state"]
        );
    }

    fn report(errors: Vec<ErrorInfo>) -> Report {
        let state = |name: &str, image: &str| StateInfo::recovered(name, vec![1], image);
        Report {
            test: "t".into(),
            fs: "ext4-dax".into(),
            cache: persim_model::CacheMode::Volatile,
            strategy: persim_model::Strategy::ProgramOrder,
            checkpoints: vec![CheckpointVerdict {
                from: 1,
                to: 2,
                states: vec![state("c1s0", "a"), state("c1s1", "b"), state("c1s2", "c")],
                final_states: vec!["c1s1".into()],
                single_final_state: true,
                atomic: false,
                errors,
                culprits: vec![Culprit {
                    what: "not flushed".into(),
                    site: "dax_zero_range+0x221 < ext4_truncate+0x47e [ext4]".into(),
                    stores: 1,
                    entries: vec![7],
                    lines: vec![0x40],
                    disk: false,
                    relevance: Default::default(),
                }],
                invariant: None,
                reference: None,
                expected: None,
            }],
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Default::default(),
        }
    }

    #[test]
    fn a_signature_names_the_differing_fields_or_else_the_failed_recovery() {
        let state = |image: &str| {
            let size = match image {
                "a" => 1,
                "b" => 2,
                _ => 3,
            };
            Some(Recovered::state(&format!(
                r#"{{"/mnt/foo": {{"size": {size}}}}}"#
            )))
        };
        assert_eq!(
            signature(&report(Vec::new()), state).as_deref(),
            Some("A states differ in size; code dax_zero_range")
        );
        let failed = ErrorInfo {
            state: "c1s2".into(),
            outcome: Outcome::RecoveryError,
            output: "EXT4-fs (pmem0): group descriptors corrupted!\nmount: failed".into(),
        };
        let with_error = report(vec![failed]);
        assert_eq!(
            signature(&with_error, state).as_deref(),
            Some(&*format!(
                "{} recovery-error: EXT#-fs (pmem#): group descriptors corrupted!; code dax_zero_range",
                with_error.mark().symbol()
            ))
        );
        let mut atomic = report(Vec::new());
        atomic.checkpoints[0].atomic = true;
        assert_eq!(signature(&atomic, state), None);
        // A wrong final state in an atomic interval: that, not what the operation changed.
        let mut wrong = report(Vec::new());
        let c = &mut wrong.checkpoints[0];
        c.states.pop();
        c.atomic = true;
        c.reference = Some(crate::FinalCheck {
            against: "ext4-dax".into(),
            differs: vec![crate::FinalDifference {
                state: "c1s1".into(),
                fields: vec!["contents".into(), "size".into()],
                diff: String::new(),
            }],
        });
        assert_eq!(
            signature(&wrong, state).as_deref(),
            Some("R final state differs from reference in contents, size; code dax_zero_range")
        );
        let mut from_disk = report(Vec::new());
        from_disk.checkpoints[0].states[2].media = vec![Media::Disk];
        assert_eq!(
            signature(&from_disk, state).as_deref(),
            Some("A states differ in size; from the disk; code dax_zero_range")
        );
    }

    #[test]
    fn frames_and_messages_lose_offsets_modules_and_numbers() {
        assert_eq!(
            innermost_function("dax_zero_range+0x221 < ext4_truncate+0x47e [ext4] < x"),
            "dax_zero_range"
        );
        assert_eq!(
            innermost_function("pmem_do_write+0x9f [nd_pmem]"),
            "pmem_do_write"
        );
        assert_eq!(innermost_function("0x7f001234"), "0x7f001234");
        assert_eq!(
            without_numbers("EXT4-fs error (device pmem0): block 1234 at 56"),
            "EXT#-fs error (device pmem#): block # at #"
        );
    }
}
