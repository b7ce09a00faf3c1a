//! The dump as pretty-printed JSON: 2-space indent, one field per line, keys in byte
//! order, so a line diff between two dumps shows exactly the fields that changed.

use crate::record::Value;
use crate::walk::Dump;
use std::fmt::Write;

pub fn render(dump: &Dump) -> String {
    let mut out = String::from("{");
    for (i, (path, record)) in dump.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        quote(path, &mut out);
        out.push_str(": {");
        for (j, (field, value)) in record.iter().enumerate() {
            out.push_str(if j == 0 { "\n    " } else { ",\n    " });
            quote(field, &mut out);
            out.push_str(": ");
            match value {
                Value::Text(text) => quote(text, &mut out),
                Value::Number(n) => write!(out, "{n}").expect("writing to a String"),
                Value::Flag(flag) => write!(out, "{flag}").expect("writing to a String"),
            }
        }
        out.push_str(if record.is_empty() { "}" } else { "\n  }" });
    }
    out.push_str(if dump.is_empty() { "}\n" } else { "\n}\n" });
    out
}

/// A JSON string literal: quote and backslash escaped, newline and tab as `\n` and `\t`
/// (file contents are mostly text lines), other control characters and DEL as `\uXXXX`,
/// so every dump line is printable.
pub fn quote(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c < ' ' || c == '\u{7f}' => {
                write!(out, "\\u{:04x}", c as u32).expect("writing to a String")
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    #[test]
    fn strings_escape_quotes_backslashes_and_control_characters() {
        let mut out = String::new();
        quote("a\"b\\c\nd\te\u{1}f\u{7f}✓", &mut out);
        assert_eq!(out, r#""a\"b\\c\nd\te\u0001f\u007f✓""#);
    }

    #[test]
    fn one_field_per_line_in_key_order() {
        let mut dump = Dump::new();
        let file = Record::from([
            ("size", Value::Number(3)),
            ("contents_truncated", Value::Flag(true)),
            ("contents", Value::Text("ab\n".into())),
        ]);
        dump.insert("/r/f".into(), file);
        dump.insert(
            "/r".into(),
            Record::from([("type", Value::Text("dir".into()))]),
        );
        let expected = "{\n  \"/r\": {\n    \"type\": \"dir\"\n  },\n  \"/r/f\": {\n    \
            \"contents\": \"ab\\n\",\n    \"contents_truncated\": true,\n    \
            \"size\": 3\n  }\n}\n";
        assert_eq!(render(&dump), expected);
    }
}
