//! The `# persim-trace key=value ...` line that carries a text trace's header.

use crate::entry::Header;
use crate::text::line::parse_number;

const TAG: &str = "persim-trace";

/// The header as a comment line, without a newline. Zero `pm-base` and `flags` are left out
/// to keep hand-written traces short.
pub(crate) fn format_header_line(header: &Header) -> String {
    let mut line = format!(
        "# {TAG} pm-size={:#x} blk-size={:#x}",
        header.pm_size, header.blk_size
    );
    if header.pm_base != 0 {
        line += &format!(" pm-base={:#x}", header.pm_base);
    }
    if header.flags != 0 {
        line += &format!(" flags={:#x}", header.flags);
    }
    line
}

/// `None` if the line is not a header line; unknown keys are ignored.
pub(crate) fn parse_header_line(line: &str) -> Option<Result<Header, String>> {
    let mut words = line.trim_start().strip_prefix('#')?.split_whitespace();
    if words.next() != Some(TAG) {
        return None;
    }
    Some(parse_fields(words))
}

fn parse_fields<'a>(words: impl Iterator<Item = &'a str>) -> Result<Header, String> {
    let mut header = Header::default();
    for pair in words {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("header field `{pair}` is not of the form key=value"))?;
        let field = match key {
            "pm-size" => &mut header.pm_size,
            "blk-size" => &mut header.blk_size,
            "pm-base" => &mut header.pm_base,
            "flags" => &mut header.flags,
            _ => continue,
        };
        *field = parse_number(value)?;
    }
    Ok(header)
}
