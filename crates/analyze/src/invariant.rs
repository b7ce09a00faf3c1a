//! Invariants a test states over the recovered state JSON (`invariant = [...]` in the test
//! file), checked in every crash state. The language is deliberately small:
//!
//! ```text
//! invariant  := condition ( "or" condition )*
//! condition  := operand [ op operand ]        a lone operand must be `true`
//! operand    := pointer | "len(" pointer ")" | JSON literal (number, "string", true, false, null)
//! pointer    := an RFC 6901 JSON pointer: "/" ..., up to whitespace, ")" or = ! < >
//! op         := == | != | < | <= | > | >=   (< <= > >= compare numbers only)
//! ```
//!
//! `len` counts an array's items, an object's keys or a string's characters. A pointer to
//! nothing, or an order between values that are not numbers, breaks the invariant (the
//! message says which). Several invariants of a test must all hold.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// One invariant, checked when it is read: its text, and the conditions of which one
/// must hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Invariant {
    text: String,
    any_of: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
struct Condition {
    left: Operand,
    compare: Option<(Op, Operand)>,
}

#[derive(Clone, Debug, PartialEq)]
enum Operand {
    Pointer(String),
    Len(String),
    Literal(Value),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// An invariant that cannot be evaluated, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invariant `{text}`: {why} (write e.g. `/count <= len(/items)` or `/done`; suites/README.md, \"Invariants\")")]
pub struct BadInvariant {
    pub text: String,
    pub why: String,
}

impl Op {
    /// Longest first, so that `<=` is not read as `<`.
    const ALL: [(&'static str, Op); 6] = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
}

impl Invariant {
    pub fn parse(text: &str) -> Result<Invariant, BadInvariant> {
        let bad = |why: String| BadInvariant {
            text: text.to_owned(),
            why,
        };
        let mut rest = text.trim();
        let mut any_of = Vec::new();
        loop {
            let (condition, after) = condition(rest).map_err(bad)?;
            any_of.push(condition);
            rest = after.trim_start();
            if rest.is_empty() {
                break;
            }
            rest = rest
                .strip_prefix("or")
                .filter(|r| r.is_empty() || r.starts_with(char::is_whitespace))
                .ok_or_else(|| bad(format!("expected `or` or the end at `{rest}`")))?;
        }
        Ok(Invariant {
            text: text.to_owned(),
            any_of,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Ok when the invariant holds in `state`, else why not: each condition's values.
    pub fn check(&self, state: &Value) -> Result<(), String> {
        let mut why = Vec::new();
        for condition in &self.any_of {
            match condition.check(state) {
                Ok(()) => return Ok(()),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }
}

impl TryFrom<String> for Invariant {
    type Error = BadInvariant;

    fn try_from(text: String) -> Result<Invariant, BadInvariant> {
        Invariant::parse(&text)
    }
}

impl From<Invariant> for String {
    fn from(invariant: Invariant) -> String {
        invariant.text
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A condition at the start of `text`, and the text after it.
fn condition(text: &str) -> Result<(Condition, &str), String> {
    let (left, rest) = operand(text)?;
    let rest = rest.trim_start();
    let Some((symbol, op)) = Op::ALL.into_iter().find(|(s, _)| rest.starts_with(s)) else {
        if let Operand::Literal(value) = left {
            return Err(format!("`{value}` alone compares nothing"));
        }
        return Ok((
            Condition {
                left,
                compare: None,
            },
            rest,
        ));
    };
    let (right, rest) = operand(&rest[symbol.len()..])?;
    if let (Operand::Literal(_), Operand::Literal(_)) = (&left, &right) {
        return Err("a comparison of two literals does not look at the state".into());
    }
    Ok((
        Condition {
            left,
            compare: Some((op, right)),
        },
        rest,
    ))
}

/// An operand at the start of `text`, and the text after it.
fn operand(text: &str) -> Result<(Operand, &str), String> {
    let text = text.trim_start();
    if let Some(inner) = text.strip_prefix("len(") {
        let (pointer, rest) = pointer(inner.trim_start())?;
        let rest = rest
            .trim_start()
            .strip_prefix(')')
            .ok_or_else(|| format!("`len({pointer}` needs a closing `)`"))?;
        return Ok((Operand::Len(pointer), rest));
    }
    if text.starts_with('/') {
        let (pointer, rest) = pointer(text)?;
        return Ok((Operand::Pointer(pointer), rest));
    }
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Ok((Operand::Literal(value), &text[values.byte_offset()..])),
        _ if text.is_empty() => Err("an operand is missing at the end".into()),
        _ => Err(format!(
            "`{text}` is neither a JSON pointer (`/field`), `len(/field)` nor a JSON value"
        )),
    }
}

/// A JSON pointer at the start of `text`: up to whitespace, `)` or an operator's first
/// character (so `/a<3` reads as a comparison, not as the key `a<3`).
fn pointer(text: &str) -> Result<(String, &str), String> {
    if !text.starts_with('/') {
        return Err(format!("`{text}` is not a JSON pointer (`/field/0`)"));
    }
    let end = text
        .find(|c: char| c.is_whitespace() || ")=!<>".contains(c))
        .unwrap_or(text.len());
    Ok((text[..end].to_owned(), &text[end..]))
}

impl Condition {
    fn check(&self, state: &Value) -> Result<(), String> {
        let left = self.left.value(state)?;
        let Some((op, right_operand)) = &self.compare else {
            return match left {
                Value::Bool(true) => Ok(()),
                _ => Err(format!("{} is {left}", self.left)),
            };
        };
        let right = right_operand.value(state)?;
        let holds = match op {
            Op::Eq | Op::Ne => {
                let equal = match (left.as_f64(), right.as_f64()) {
                    (Some(l), Some(r)) => l == r,
                    _ => left == right,
                };
                equal == (*op == Op::Eq)
            }
            _ => {
                let number = |operand: &Operand, value: &Value| {
                    value
                        .as_f64()
                        .ok_or_else(|| format!("{operand} is {value}, not a number"))
                };
                let (l, r) = (number(&self.left, &left)?, number(right_operand, &right)?);
                match op {
                    Op::Lt => l < r,
                    Op::Le => l <= r,
                    Op::Gt => l > r,
                    _ => l >= r,
                }
            }
        };
        match holds {
            true => Ok(()),
            false => Err(self.values(&left, &right)),
        }
    }

    /// `/a is 70, /b is 0`: the values the condition saw, literals left out.
    fn values(&self, left: &Value, right: &Value) -> String {
        let operands = [(&self.left, left)]
            .into_iter()
            .chain(self.compare.as_ref().map(|(_, r)| (r, right)));
        operands
            .filter(|(o, _)| !matches!(o, Operand::Literal(_)))
            .map(|(o, v)| format!("{o} is {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Operand {
    fn value(&self, state: &Value) -> Result<Value, String> {
        let at = |pointer: &str| {
            state
                .pointer(pointer)
                .ok_or_else(|| format!("{pointer} is missing"))
        };
        match self {
            Operand::Literal(value) => Ok(value.clone()),
            Operand::Pointer(pointer) => at(pointer).cloned(),
            Operand::Len(pointer) => match at(pointer)? {
                Value::Array(items) => Ok(items.len().into()),
                Value::Object(keys) => Ok(keys.len().into()),
                Value::String(text) => Ok(text.chars().count().into()),
                other => Err(format!("{self} of {other}, which has no length")),
            },
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Pointer(pointer) => f.write_str(pointer),
            Operand::Len(pointer) => write!(f, "len({pointer})"),
            Operand::Literal(value) => write!(f, "{value}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(text: &str, state: Value) -> Result<(), String> {
        Invariant::parse(text).unwrap().check(&state)
    }

    #[test]
    fn comparisons_hold_or_say_what_they_saw() {
        let state = json!({"count": 1, "items": ["a"], "sum": 70, "done": true, "name": "x y"});
        assert_eq!(check("/count <= len(/items)", state.clone()), Ok(()));
        assert_eq!(
            check("/count<len(/items)", state.clone()).unwrap_err(),
            "/count is 1, len(/items) is 1"
        );
        assert_eq!(
            check("/sum == 100", state.clone()).unwrap_err(),
            "/sum is 70"
        );
        assert_eq!(check("/sum != 100", state.clone()), Ok(()));
        assert_eq!(check("/sum == 70.0", state.clone()), Ok(()));
        assert_eq!(check("/sum >= 70", state.clone()), Ok(()));
        assert_eq!(check("/sum > 70", state.clone()).unwrap_err(), "/sum is 70");
        assert_eq!(check("/done", state.clone()), Ok(()));
        assert_eq!(check("/count", state.clone()).unwrap_err(), "/count is 1");
        assert_eq!(check("/name == \"x y\"", state.clone()), Ok(()));
        assert_eq!(check("len(/name) == 3", state.clone()), Ok(()));
        assert_eq!(check("len(/) == 0", json!({"": []})), Ok(()));
        assert_eq!(check("/items/0 == \"a\"", state.clone()), Ok(()));
    }

    #[test]
    fn any_condition_of_an_or_suffices() {
        let text = "/sum == 100 or /sum == 70 or /done";
        assert_eq!(check(text, json!({"sum": 70})), Ok(()));
        assert_eq!(check(text, json!({"sum": 100})), Ok(()));
        // A string holding " or " is one literal.
        assert_eq!(check("/s == \"a or b\"", json!({"s": "a or b"})), Ok(()));
        assert_eq!(
            check(text, json!({"sum": 5, "done": false})).unwrap_err(),
            "/sum is 5; /sum is 5; /done is false"
        );
    }

    #[test]
    fn what_is_not_there_or_not_a_number_breaks_it() {
        assert_eq!(check("/a == 1", json!({})).unwrap_err(), "/a is missing");
        assert_eq!(
            check("/a < 1", json!({"a": "x"})).unwrap_err(),
            "/a is \"x\", not a number"
        );
        assert_eq!(
            check("len(/a) == 1", json!({"a": 1})).unwrap_err(),
            "len(/a) of 1, which has no length"
        );
    }

    #[test]
    fn what_cannot_be_evaluated_is_refused_with_the_reason() {
        let why = |text: &str| Invariant::parse(text).unwrap_err().why;
        assert!(why("count < 3").contains("`count < 3` is neither a JSON pointer"));
        assert_eq!(why("/a =="), "an operand is missing at the end");
        assert_eq!(why("len(/a == 1"), "`len(/a` needs a closing `)`");
        assert_eq!(why("len(a)"), "`a)` is not a JSON pointer (`/field/0`)");
        assert_eq!(
            why("/a == 1 and /b"),
            "expected `or` or the end at `and /b`"
        );
        assert_eq!(why("/a == 1 or"), "an operand is missing at the end");
        assert_eq!(why("3"), "`3` alone compares nothing");
        assert!(why("1 == 1").contains("two literals"));
        assert_eq!(why(""), "an operand is missing at the end");
        let message = Invariant::parse("/a ==").unwrap_err().to_string();
        assert!(message.starts_with("invariant `/a ==`: "), "{message}");
        assert!(message.contains("suites/README.md"), "{message}");
    }

    #[test]
    fn an_invariant_is_its_text_in_files() {
        let invariant: Invariant = serde_json::from_str("\"/a <= len(/b)\"").unwrap();
        assert_eq!(
            serde_json::to_string(&invariant).unwrap(),
            "\"/a <= len(/b)\""
        );
        assert!(serde_json::from_str::<Invariant>("\"a\"").is_err());
    }
}
