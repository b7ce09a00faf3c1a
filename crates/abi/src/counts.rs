//! What the plugin's counting mode (`count=on`) counts from `hypercall start` to `success`
//! or `fail`, and the text file it writes them to (plugin → host).

/// Counts of one counted run: deterministic for a given guest and workload, on any host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Guest instructions executed in the kernel half of the address space.
    pub kernel_instructions: u64,
    /// Guest instructions executed in user space.
    pub user_instructions: u64,
    /// Bytes stored to the emulated PM (every store, cached or not).
    pub pm_bytes_written: u64,
    /// Bytes the guest wrote to the NVMe namespace (its Write commands).
    pub nvme_bytes_written: u64,
    /// Whether the plugin instrumented user stores, because the kernel had mapped PM into
    /// user space (before that, user code cannot store to PM, and leaving its stores out
    /// makes the counting cheaper).
    pub user_stores_counted: bool,
    /// With `profile=on`: per start address of a kernel translation block, the
    /// instructions executed in it (ascending addresses; `kernel_block ADDRESS N` lines).
    pub kernel_blocks: Vec<(u64, u64)>,
}

const BLOCK_KEY: &str = "kernel_block";

const KEYS: [&str; 5] = [
    "kernel_instructions",
    "user_instructions",
    "pm_bytes_written",
    "nvme_bytes_written",
    "user_stores_counted",
];

impl Counts {
    fn values(&self) -> [u64; 5] {
        [
            self.kernel_instructions,
            self.user_instructions,
            self.pm_bytes_written,
            self.nvme_bytes_written,
            u64::from(self.user_stores_counted),
        ]
    }

    /// `key value` lines, then a `kernel_block` line per profiled block.
    pub fn to_text(&self) -> String {
        let counts = KEYS
            .iter()
            .zip(self.values())
            .map(|(k, v)| format!("{k} {v}\n"));
        let blocks = (self.kernel_blocks.iter()).map(|(a, n)| format!("{BLOCK_KEY} {a:#x} {n}\n"));
        counts.chain(blocks).collect()
    }

    /// Reads [`Counts::to_text`]'s lines back; every key must be there.
    pub fn parse(text: &str) -> Result<Counts, String> {
        let mut values = [None; 5];
        let mut kernel_blocks = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(' ')
                .ok_or_else(|| format!("counts: `{line}` is not `key value`"))?;
            if key == BLOCK_KEY {
                let block = value
                    .split_once(' ')
                    .and_then(|(a, n)| {
                        let address = u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()?;
                        Some((address, n.trim().parse::<u64>().ok()?))
                    })
                    .ok_or_else(|| format!("counts: `{line}` is not `{BLOCK_KEY} 0xADDRESS N`"))?;
                kernel_blocks.push(block);
                continue;
            }
            let i = KEYS
                .iter()
                .position(|k| *k == key)
                .ok_or_else(|| format!("counts: unknown key `{key}`"))?;
            values[i] = Some(
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| format!("counts: `{line}` is not a number"))?,
            );
        }
        let get = |i: usize| values[i].ok_or_else(|| format!("counts: `{}` is missing", KEYS[i]));
        Ok(Counts {
            kernel_instructions: get(0)?,
            user_instructions: get(1)?,
            pm_bytes_written: get(2)?,
            nvme_bytes_written: get(3)?,
            user_stores_counted: get(4)? != 0,
            kernel_blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_a_round_trip_and_a_missing_key_is_an_error() {
        let c = Counts {
            kernel_instructions: 1 << 40,
            user_instructions: 7,
            pm_bytes_written: 4096,
            nvme_bytes_written: 0,
            user_stores_counted: true,
            kernel_blocks: Vec::new(),
        };
        assert_eq!(Counts::parse(&c.to_text()), Ok(c.clone()));
        let profiled = Counts {
            kernel_blocks: vec![
                (0xffff_ffff_8100_0000, 12),
                (0xffff_ffff_c000_1234, 1 << 33),
            ],
            ..c
        };
        let text = profiled.to_text();
        assert!(
            text.ends_with("kernel_block 0xffffffffc0001234 8589934592\n"),
            "{text}"
        );
        assert_eq!(Counts::parse(&text), Ok(profiled));
        assert!(Counts::parse(&format!("{text}kernel_block 12 3\n")).is_err());
        let partial = "kernel_instructions 1\nuser_instructions 2\npm_bytes_written 3\n";
        assert!(Counts::parse(partial)
            .unwrap_err()
            .contains("nvme_bytes_written"));
        assert!(Counts::parse("bogus 1\n").is_err());
    }
}
