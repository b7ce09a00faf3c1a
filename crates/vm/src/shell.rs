//! Guest shell words: what both recording (the traced run's script) and extraction (the
//! dump command) need to pass text through `sh` unchanged.

/// `text` as one shell word, whatever it holds (newlines included).
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_word_is_the_text_again_after_sh_unquotes_it() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's\n"), "'it'\\''s\n'");
        for text in ["plain", "it's", "two\nlines", "$HOME `x` \"q\""] {
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {}", shell_quote(text))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
        }
    }
}
