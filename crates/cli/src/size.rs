//! Sizes on the command line: `1048576`, `0x100000`, `1M`, `1MiB`, `4K`, `2G`.

/// Parses a byte count with an optional binary suffix (K, M, G, with or without "iB").
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("'{text}' is not a size (examples: 1048576, 0x100000, 1M, 64KiB)");
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| bad());
    }
    let (digits, suffix) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let value: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match suffix {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        other => {
            return Err(format!(
                "unknown size suffix '{other}' in '{text}' (use K, M or G)"
            ))
        }
    };
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("size '{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn parses_plain_hex_and_suffixed_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0x100000"), Ok(1 << 20));
        assert_eq!(parse_size("0x1b"), Ok(27));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("5MiB"), Ok(5 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("12Q").unwrap_err().contains("suffix"));
        assert!(parse_size("lots").is_err());
    }
}
