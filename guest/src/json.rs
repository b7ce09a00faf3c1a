//! JSON text for the guest tools, which have no JSON crate (they are built std-only).

use std::fmt::Write;

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

    #[test]
    fn strings_escape_quotes_backslashes_and_control_characters() {
        let mut out = String::new();
        quote("a\"b\\c\nd\te\u{1}f\u{7f}✓", &mut out);
        assert_eq!(out, r#""a\"b\\c\nd\te\u0001f\u007f✓""#);
    }
}
