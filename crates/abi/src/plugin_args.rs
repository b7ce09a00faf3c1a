//! The tracing plugin's arguments: the host writes them with [`PluginArgs::to_args`]
//! (`-plugin LIB,key=value,...`), the plugin reads them with [`PluginArgs::parse`].

use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginArgs {
    /// Guest-physical PM range: the host knows the machine layout (see
    /// [`crate::machine::PM_BASE`]) and checks it against the guest kernel's NFIT view
    /// before tracing starts.
    pub pm_base: u64,
    pub pm_size: u64,
    /// The trace file written.
    pub trace: PathBuf,
    /// Record loads too.
    pub reads: bool,
    /// A stack trace with every entry, and how it is found.
    pub stacks: Stacks,
    /// Off: `start` instruments nothing and writes no trace, so the plugin costs what a
    /// loaded, idle plugin costs (the baseline of the overhead measurement).
    pub tracing: bool,
    /// Counting mode (with `tracing` off): from `start` to `success`/`fail` count guest
    /// instructions, PM and NVMe bytes written, and write them to `trace` as
    /// [`crate::Counts`] text instead of a trace.
    pub count: bool,
    /// With `count`: instrument every store, not only those that can reach PM or the NVMe
    /// registers (docs/results/performance.md, "Counting mode"): the reference the reduced
    /// instrumentation is checked against; same counts, slower.
    pub every_store: bool,
    /// With `count`: QEMU runs the vCPUs in turn on one thread (`-icount` with several
    /// vCPUs). Its translated blocks are then shared by the vCPUs, and QEMU 10 compiles the
    /// translating vCPU's index into per-vCPU inline operations, which breaks the guest
    /// (docs/design/tracer.md, "Several vCPUs"), so the plugin counts with callbacks instead.
    pub serial: bool,
    /// With `count`: also count the instructions of each kernel translation block
    /// ([`crate::Counts::kernel_blocks`]), for a profile by function.
    pub profile: bool,
    /// The host file behind the NVDIMM and where to copy it at `hypercall start`: the PM
    /// contents the trace starts from (crash images are built on top of them).
    pub initial: Option<(PathBuf, PathBuf)>,
    /// After `success`/`fail`, the next `start` writes a new trace at the same path (an
    /// extraction worker traces one recovery after another). Where the trace or initial
    /// path is a symbolic link, each `start` writes where it then points (a warm tracing
    /// VM records one test after another into each test's run directory).
    pub repeat: bool,
    /// Size of the emulated NVMe namespace (0: none); its commands are recorded as block
    /// entries.
    pub blk_size: u64,
    /// The host file behind the NVMe namespace and where to copy it at `hypercall start`.
    pub blk_initial: Option<(PathBuf, PathBuf)>,
    /// The table of functions whose calls are recorded (`crate::calls`), if any.
    pub calls: Option<PathBuf>,
}

/// How the plugin finds the stack trace it records with each entry (docs/design/tracer.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stacks {
    #[default]
    Off,
    /// A shadow call stack kept from the executed `call` and `ret` instructions: works on
    /// code without frame pointers (the Debian kernel, most programs).
    Shadow,
    /// A walk of the rbp chain: only code built with frame pointers; the cross-check.
    FramePointers,
}

// Named by hand, not with strum as the other enums users name (crates/model/src/names.rs):
// persim-abi stays dependency-free for the static guest tools and the plugin.
impl Stacks {
    pub const NAMES: [&'static str; 3] = ["off", "shadow", "frame-pointers"];

    pub fn name(self) -> &'static str {
        match self {
            Stacks::Off => "off",
            Stacks::Shadow => "shadow",
            Stacks::FramePointers => "frame-pointers",
        }
    }

    pub fn from_name(name: &str) -> Option<Stacks> {
        [Stacks::Off, Stacks::Shadow, Stacks::FramePointers]
            .into_iter()
            .find(|s| s.name() == name)
    }

    pub fn on(self) -> bool {
        self != Stacks::Off
    }
}

impl PluginArgs {
    /// Arguments for `trace`, with the defaults: no loads, no stacks, tracing on, no
    /// initial image.
    pub fn new(pm_base: u64, pm_size: u64, trace: PathBuf) -> PluginArgs {
        PluginArgs {
            pm_base,
            pm_size,
            trace,
            reads: false,
            stacks: Stacks::Off,
            tracing: true,
            count: false,
            every_store: false,
            serial: false,
            profile: false,
            initial: None,
            repeat: false,
            blk_size: 0,
            blk_initial: None,
            calls: None,
        }
    }

    /// `key=value` strings, one per argument, that [`PluginArgs::parse`] reads back.
    pub fn to_args(&self) -> Vec<String> {
        let on_off = |b: bool| if b { "on" } else { "off" };
        let mut args = vec![
            format!("pm_base={:#x}", self.pm_base),
            format!("pm_size={:#x}", self.pm_size),
            format!("trace={}", self.trace.display()),
            format!("reads={}", on_off(self.reads)),
            format!("stacks={}", self.stacks.name()),
            format!("tracing={}", on_off(self.tracing)),
            format!("repeat={}", on_off(self.repeat)),
        ];
        if self.count {
            args.push("count=on".into());
        }
        if self.every_store {
            args.push("every_store=on".into());
        }
        if self.serial {
            args.push("serial=on".into());
        }
        if self.profile {
            args.push("profile=on".into());
        }
        if let Some((pm_file, initial)) = &self.initial {
            args.push(format!("pm_file={}", pm_file.display()));
            args.push(format!("initial={}", initial.display()));
        }
        if self.blk_size > 0 {
            args.push(format!("blk_size={:#x}", self.blk_size));
        }
        if let Some((blk_file, initial)) = &self.blk_initial {
            args.push(format!("blk_file={}", blk_file.display()));
            args.push(format!("blk_initial={}", initial.display()));
        }
        if let Some(calls) = &self.calls {
            args.push(format!("calls={}", calls.display()));
        }
        args
    }

    pub fn parse<'a>(raw: impl IntoIterator<Item = &'a str>) -> Result<PluginArgs, String> {
        let (mut pm_base, mut pm_size, mut trace) = (None, None, None);
        let (mut reads, mut tracing, mut repeat, mut count) = (false, true, false, false);
        let (mut every_store, mut serial, mut profile) = (false, false, false);
        let mut stacks = Stacks::Off;
        let (mut pm_file, mut initial) = (None, None);
        let (mut blk_size, mut blk_file, mut blk_initial) = (0, None, None);
        let mut calls = None;
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
                "blk_size" => blk_size = parse_u64(key, value)?,
                "blk_file" => blk_file = Some(PathBuf::from(value)),
                "blk_initial" => blk_initial = Some(PathBuf::from(value)),
                "calls" => calls = Some(PathBuf::from(value)),
                "stacks" => {
                    stacks = Stacks::from_name(value).ok_or_else(|| {
                        format!(
                            "`{key}={value}` must be one of {}",
                            Stacks::NAMES.join(", ")
                        )
                    })?
                }
                "tracing" => tracing = parse_bool(key, value)?,
                "repeat" => repeat = parse_bool(key, value)?,
                "count" => count = parse_bool(key, value)?,
                "every_store" => every_store = parse_bool(key, value)?,
                "serial" => serial = parse_bool(key, value)?,
                "profile" => profile = parse_bool(key, value)?,
                _ => return Err(format!("unknown argument `{key}`")),
            }
        }
        let need = |name: &str| format!("missing argument `{name}`");
        if count && tracing {
            return Err("`count=on` needs `tracing=off`: a counted run writes no trace".into());
        }
        if every_store && !count {
            return Err("`every_store=on` belongs to the counting mode: add `count=on`".into());
        }
        for (on, name) in [(serial, "serial"), (profile, "profile")] {
            if on && !count {
                return Err(format!(
                    "`{name}=on` belongs to the counting mode: add `count=on`"
                ));
            }
        }
        Ok(PluginArgs {
            pm_base: pm_base.ok_or_else(|| need("pm_base"))?,
            pm_size: pm_size
                .filter(|s| *s > 0)
                .ok_or_else(|| need("pm_size (> 0)"))?,
            trace: trace.ok_or_else(|| need("trace"))?,
            reads,
            stacks,
            tracing,
            count,
            every_store,
            serial,
            profile,
            repeat,
            initial: match (pm_file, initial) {
                (Some(pm_file), Some(initial)) => Some((pm_file, initial)),
                (None, None) => None,
                _ => return Err("`pm_file` and `initial` go together".into()),
            },
            blk_size,
            blk_initial: match (blk_file, blk_initial) {
                (Some(file), Some(initial)) if blk_size > 0 => Some((file, initial)),
                (None, None) => None,
                _ => return Err("`blk_file` and `blk_initial` go together, with `blk_size`".into()),
            },
            calls,
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

    fn round_trip(args: &PluginArgs) -> PluginArgs {
        let raw = args.to_args();
        PluginArgs::parse(raw.iter().map(String::as_str)).unwrap()
    }

    #[test]
    fn every_argument_survives_a_round_trip() {
        let plain = PluginArgs::new(1 << 32, 64 << 20, "/t/x".into());
        assert_eq!(round_trip(&plain), plain);
        let full = PluginArgs {
            reads: true,
            stacks: Stacks::Shadow,
            tracing: false,
            initial: Some(("/c/pm-1-0.img".into(), "/t/x.initial".into())),
            repeat: true,
            blk_size: 1 << 20,
            blk_initial: Some(("/c/blk.img".into(), "/t/x.blk-initial".into())),
            calls: Some("/t/calls".into()),
            ..plain.clone()
        };
        assert_eq!(round_trip(&full), full);
        let counting = PluginArgs {
            tracing: false,
            count: true,
            ..plain.clone()
        };
        assert_eq!(round_trip(&counting), counting);
        let every = PluginArgs {
            every_store: true,
            ..counting.clone()
        };
        assert_eq!(round_trip(&every), every);
        let serial = PluginArgs {
            serial: true,
            profile: true,
            ..counting.clone()
        };
        assert_eq!(round_trip(&serial), serial);
        assert!(serial.to_args().contains(&"serial=on".to_owned()));
        assert!(serial.to_args().contains(&"profile=on".to_owned()));
        for arg in ["serial=on", "profile=on"] {
            let alone = ["pm_base=0x1", "pm_size=0x1", "trace=/t", arg];
            assert!(PluginArgs::parse(alone).unwrap_err().contains("count=on"));
        }
        let alone = ["pm_base=0x1", "pm_size=0x1", "trace=/t", "every_store=on"];
        assert!(PluginArgs::parse(alone).unwrap_err().contains("count=on"));
        let both = ["pm_base=0x1", "pm_size=0x1", "trace=/t", "count=on"];
        assert!(PluginArgs::parse(both).unwrap_err().contains("tracing=off"));
        assert_eq!(
            full.to_args(),
            [
                "pm_base=0x100000000",
                "pm_size=0x4000000",
                "trace=/t/x",
                "reads=on",
                "stacks=shadow",
                "tracing=off",
                "repeat=on",
                "pm_file=/c/pm-1-0.img",
                "initial=/t/x.initial",
                "blk_size=0x100000",
                "blk_file=/c/blk.img",
                "blk_initial=/t/x.blk-initial",
                "calls=/t/calls",
            ]
        );
    }

    #[test]
    fn parses_hand_written_arguments_with_defaults() {
        let args = PluginArgs::parse([
            "pm_base=4294967296",
            "pm_size=0x4000000",
            "trace=/t/x",
            "reads=on",
            "stacks=frame-pointers",
        ])
        .unwrap();
        assert_eq!(
            args,
            PluginArgs {
                reads: true,
                stacks: Stacks::FramePointers,
                ..PluginArgs::new(1 << 32, 64 << 20, "/t/x".into())
            }
        );
        let with_initial = PluginArgs::parse([
            "pm_base=0",
            "pm_size=64",
            "trace=/t",
            "pm_file=/p",
            "initial=/i",
        ])
        .unwrap();
        assert_eq!(with_initial.initial, Some(("/p".into(), "/i".into())));
        let idle =
            PluginArgs::parse(["pm_base=0", "pm_size=64", "trace=/t", "tracing=off"]).unwrap();
        assert!(!idle.tracing && !idle.stacks.on() && !idle.reads && !idle.repeat);
    }

    #[test]
    fn rejects_bad_arguments_by_name() {
        let e = |raw: &[&str]| PluginArgs::parse(raw.iter().copied()).unwrap_err();
        assert!(e(&["pm_base=1", "trace=/t"]).contains("pm_size"));
        assert!(e(&["pm_base=0", "pm_size=0", "trace=/t"]).contains("pm_size"));
        assert!(e(&["pm_base=x", "pm_size=1", "trace=/t"]).contains("pm_base=x"));
        assert!(e(&["pm_base=0", "pm_size=1", "trace=/t", "reads=maybe"]).contains("reads"));
        assert!(e(&["pm_base=0", "pm_size=1", "trace=/t", "stacks=on"]).contains("shadow"));
        assert!(e(&["pm_base=0", "pm_size=64", "trace=/t", "pm_file=/p"]).contains("together"));
        assert!(e(&["colour=red"]).contains("colour"));
        assert!(e(&["novalue"]).contains("key=value"));
    }
}
