//! The findings in clang's SARIF (`-analyzer-output=sarif`): a result per report, its
//! location, and the bug path as the first code flow's thread-flow locations.

use super::{Finding, Step};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Log {
    runs: Vec<Run>,
}

#[derive(Deserialize)]
struct Run {
    #[serde(default)]
    results: Vec<Report>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    rule_id: String,
    message: Message,
    locations: Vec<Location>,
    #[serde(default)]
    code_flows: Vec<CodeFlow>,
}

#[derive(Deserialize)]
struct Message {
    text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    physical_location: Physical,
    message: Option<Message>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Physical {
    artifact_location: Artifact,
    region: Region,
}

#[derive(Deserialize)]
struct Artifact {
    uri: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: u32,
    #[serde(default)]
    start_column: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CodeFlow {
    thread_flows: Vec<ThreadFlow>,
}

#[derive(Deserialize)]
struct ThreadFlow {
    locations: Vec<FlowLocation>,
}

#[derive(Deserialize)]
struct FlowLocation {
    location: Location,
}

/// The findings of `checker` in a SARIF log; other checkers' (clang's core checkers run
/// too) are left out.
pub(super) fn findings(text: &str, checker: &str) -> Result<Vec<Finding>, String> {
    let log: Log = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for report in log.runs.into_iter().flat_map(|r| r.results) {
        if report.rule_id != checker {
            continue;
        }
        let (rule, message) = split_rule(&report.message.text)
            .ok_or_else(|| format!("a finding names no rule: {:?}", report.message.text))?;
        let at = report
            .locations
            .first()
            .ok_or_else(|| format!("a finding has no location: {:?}", report.message.text))?;
        let mut path: Vec<Step> = report
            .code_flows
            .into_iter()
            .flat_map(|f| f.thread_flows)
            .flat_map(|t| t.locations)
            .map(|l| Step {
                file: file_of(&l.location.physical_location.artifact_location.uri),
                line: l.location.physical_location.region.start_line,
                message: l.location.message.map(|m| m.text).unwrap_or_default(),
            })
            .collect();
        // The path ends at the finding, with its message: said once is enough.
        if path
            .last()
            .is_some_and(|s| s.message == report.message.text)
        {
            path.pop();
        }
        found.push(super::Finding {
            rule: rule.to_string(),
            file: file_of(&at.physical_location.artifact_location.uri),
            line: at.physical_location.region.start_line,
            column: at.physical_location.region.start_column,
            message: message.to_string(),
            path,
            run: None,
        });
    }
    found.sort_by(|a, b| (&a.file, a.line, &a.rule).cmp(&(&b.file, b.line, &b.rule)));
    found.dedup_by(|a, b| {
        (&a.file, a.line, &a.rule, &a.message) == (&b.file, b.line, &b.rule, &b.message)
    });
    Ok(found)
}

/// `rule 1b: text` -> (`1b`, `text`): how the plugin's messages begin.
fn split_rule(text: &str) -> Option<(&str, &str)> {
    let (rule, message) = text.strip_prefix("rule ")?.split_once(": ")?;
    Some((rule, message))
}

/// A `file://` URI's path, its %XX escapes decoded.
fn file_of(uri: &str) -> PathBuf {
    let path = uri.strip_prefix("file://").unwrap_or(uri).as_bytes();
    let mut bytes = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let hex = path
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (path[i], hex) {
            (b'%', Some(b)) => {
                bytes.push(b);
                i += 3;
            }
            (b, _) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(uri: &str, line: u32, message: Option<&str>) -> serde_json::Value {
        let mut l = serde_json::json!({
            "physicalLocation": {
                "artifactLocation": { "index": 0, "uri": uri },
                "region": { "startLine": line, "startColumn": 9 }
            }
        });
        if let Some(m) = message {
            l["message"] = serde_json::json!({ "text": m });
        }
        l
    }

    #[test]
    fn findings_of_the_checker_with_rule_location_and_path() {
        let uri = "file:///src/my%20dir/a.c";
        let log = serde_json::json!({ "runs": [{ "results": [
            {
                "ruleId": "pmem.Conjurer",
                "message": { "text": "rule 4: a load from a freed object" },
                "locations": [location(uri, 14, None)],
                "codeFlows": [{ "threadFlows": [{ "locations": [
                    { "location": location(uri, 6, Some("Assuming field 'off' is not equal to 0")) },
                    { "location": location(uri, 14, Some("rule 4: a load from a freed object")) }
                ]}]}]
            },
            {
                "ruleId": "core.NullDereference",
                "message": { "text": "Dereference of null pointer" },
                "locations": [location(uri, 3, None)]
            },
            {
                "ruleId": "pmem.Conjurer",
                "message": { "text": "rule 1b: pmemobj_persist flushes 8 bytes of a 16-byte 'long double'" },
                "locations": [location(uri, 7, None)]
            }
        ]}]});
        let found = findings(&log.to_string(), "pmem.Conjurer").unwrap();
        assert_eq!(found.len(), 2, "core.NullDereference is not ours");
        assert_eq!((found[0].rule.as_str(), found[0].line), ("1b", 7));
        assert_eq!(found[1].rule, "4");
        assert_eq!(found[1].message, "a load from a freed object");
        assert_eq!(found[1].file, PathBuf::from("/src/my dir/a.c"));
        assert_eq!(found[1].column, 9);
        let lines: Vec<u32> = found[1].path.iter().map(|s| s.line).collect();
        assert_eq!(
            lines,
            [6],
            "the last step, the finding itself, is not repeated"
        );
        assert_eq!(
            found[1].path[0].message,
            "Assuming field 'off' is not equal to 0"
        );
    }

    #[test]
    fn a_finding_without_a_rule_or_a_log_that_is_not_sarif_is_an_error() {
        let log = serde_json::json!({ "runs": [{ "results": [{
            "ruleId": "pmem.Conjurer",
            "message": { "text": "something" },
            "locations": [location("file:///a.c", 1, None)]
        }]}]});
        assert!(findings(&log.to_string(), "pmem.Conjurer").is_err());
        assert!(findings("[]", "pmem.Conjurer").is_err());
        // A log without results (nothing found) is no error.
        assert_eq!(findings(r#"{"runs":[{}]}"#, "pmem.Conjurer").unwrap(), []);
    }
}
