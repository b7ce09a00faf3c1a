//! Byte strings as text: file names and symlink targets, which Unix allows to be any
//! bytes, and file contents.

/// Renders a byte string losslessly and unambiguously: valid UTF-8 stays as it is except
/// that a backslash is doubled, and each byte that is not part of valid UTF-8 becomes
/// `\xHH` (backslash, `x`, two lowercase hex digits). So `a\b` is written `a\\b`, and the
/// Latin-1 name `caf<0xe9>` is written `caf\xe9`.
pub fn lossless(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                text.push('\\');
            }
            text.push(c);
        }
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02x}"));
        }
    }
    text
}

/// Lowercase hex, two digits per byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossless_keeps_utf8_and_escapes_backslashes_and_invalid_bytes() {
        assert_eq!(lossless("plain ✓".as_bytes()), "plain ✓");
        assert_eq!(lossless(b"a\\b"), "a\\\\b");
        assert_eq!(lossless(b"caf\xe9"), "caf\\xe9");
        // A literal `\xe9` in a valid name cannot be confused with the byte 0xe9.
        assert_ne!(lossless(b"caf\\xe9"), lossless(b"caf\xe9"));
    }

    #[test]
    fn hex_is_two_lowercase_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
    }
}
