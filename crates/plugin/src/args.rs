//! The plugin's arguments, passed by the VM runner as `-plugin LIB,key=value,...`.

use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// Guest-physical PM range: the runner knows the machine layout and checks it against
    /// the guest kernel's NFIT view before tracing starts.
    pub pm_base: u64,
    pub pm_size: u64,
    pub trace: PathBuf,
    pub reads: bool,
    /// A frame-pointer stack trace with every entry.
    pub stacks: bool,
    /// Off: `start` instruments nothing and writes no trace, so the plugin costs what a
    /// loaded, idle plugin costs (the baseline of the overhead measurement).
    pub tracing: bool,
    /// The host file behind the NVDIMM and where to copy it at `hypercall start`: the PM
    /// contents the trace starts from (crash images are built on top of them).
    pub initial: Option<(PathBuf, PathBuf)>,
}

impl Args {
    pub fn parse<'a>(raw: impl IntoIterator<Item = &'a str>) -> Result<Args, String> {
        let (mut pm_base, mut pm_size, mut trace) = (None, None, None);
        let (mut reads, mut stacks, mut tracing) = (false, false, true);
        let (mut pm_file, mut initial) = (None, None);
        for arg in raw {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("argument `{arg}` is not key=value"))?;
            match key {
                "pm_base" => pm_base = Some(parse_u64(key, value)?),
                "pm_size" => pm_size = Some(parse_u64(key, value)?),
                "trace" => trace = Some(PathBuf::from(value)),
                "reads" => reads = parse_bool(key, value)?,
                "pm_file" => pm_file = Some(PathBuf::from(value)),
                "initial" => initial = Some(PathBuf::from(value)),
                "stacks" => stacks = parse_bool(key, value)?,
                "tracing" => tracing = parse_bool(key, value)?,
                _ => return Err(format!("unknown argument `{key}`")),
            }
        }
        let need = |name: &str| format!("missing argument `{name}`");
        Ok(Args {
            pm_base: pm_base.ok_or_else(|| need("pm_base"))?,
            pm_size: pm_size
                .filter(|s| *s > 0)
                .ok_or_else(|| need("pm_size (> 0)"))?,
            trace: trace.ok_or_else(|| need("trace"))?,
            reads,
            stacks,
            tracing,
            initial: match (pm_file, initial) {
                (Some(pm_file), Some(initial)) => Some((pm_file, initial)),
                (None, None) => None,
                _ => return Err("`pm_file` and `initial` go together".into()),
            },
        })
    }
}

fn parse_u64(key: &str, value: &str) -> Result<u64, String> {
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    parsed.map_err(|_| format!("`{key}={value}` is not a number"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("`{key}={value}` must be on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_runner_arguments() {
        let args = Args::parse([
            "pm_base=4294967296",
            "pm_size=0x4000000",
            "trace=/t/x",
            "reads=on",
            "stacks=on",
        ])
        .unwrap();
        assert_eq!(
            args,
            Args {
                pm_base: 1 << 32,
                pm_size: 64 << 20,
                trace: "/t/x".into(),
                reads: true,
                stacks: true,
                tracing: true,
                initial: None,
            }
        );
        let with_initial = Args::parse([
            "pm_base=0",
            "pm_size=64",
            "trace=/t",
            "pm_file=/p",
            "initial=/i",
        ])
        .unwrap();
        assert_eq!(with_initial.initial, Some(("/p".into(), "/i".into())));
        assert!(Args::parse(["pm_base=0", "pm_size=64", "trace=/t", "pm_file=/p"]).is_err());
        let idle = Args::parse(["pm_base=0", "pm_size=64", "trace=/t", "tracing=off"]).unwrap();
        assert!(!idle.tracing && !idle.stacks && !idle.reads);
    }

    #[test]
    fn rejects_bad_arguments_by_name() {
        assert!(Args::parse(["pm_base=1", "trace=/t"])
            .unwrap_err()
            .contains("pm_size"));
        assert!(Args::parse(["pm_base=x", "pm_size=1", "trace=/t"])
            .unwrap_err()
            .contains("pm_base=x"));
        assert!(Args::parse(["colour=red"]).unwrap_err().contains("colour"));
    }
}
