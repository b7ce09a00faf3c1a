//! What the plugin's counting mode (`count=on`) counts from `hypercall start` to `success`
//! or `fail`, and the text file it writes them to (plugin → host).

/// Counts of one counted run: deterministic for a given guest and workload, on any host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

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

    /// `key value` lines.
    pub fn to_text(&self) -> String {
        KEYS.iter()
            .zip(self.values())
            .map(|(k, v)| format!("{k} {v}\n"))
            .collect()
    }

    /// Reads [`Counts::to_text`]'s lines back; every key must be there.
    pub fn parse(text: &str) -> Result<Counts, String> {
        let mut values = [None; 5];
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(' ')
                .ok_or_else(|| format!("counts: `{line}` is not `key value`"))?;
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
        };
        assert_eq!(Counts::parse(&c.to_text()), Ok(c));
        let partial = "kernel_instructions 1\nuser_instructions 2\npm_bytes_written 3\n";
        assert!(Counts::parse(partial)
            .unwrap_err()
            .contains("nvme_bytes_written"));
        assert!(Counts::parse("bogus 1\n").is_err());
    }
}
