//! What produced each stage of a run directory (`inputs.json`), so that a resume with
//! other inputs does not present old results under new names: a run of another test or
//! machine is refused, other crash-image options redo the images (states of images seen
//! before stay valid: a state depends only on the image and the recovery), another
//! recovery redoes the states.

use crate::cases::TestCase;
use crate::options::{NtPrefixes, PipelineOptions};
use persim_model::{CacheMode, Strategy};
use serde::{Deserialize, Serialize};

/// The inputs of a run, as keys per stage (BLAKE3 of everything the stage's output
/// depends on) and the names a person recognises.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs {
    pub persim: String,
    pub test: String,
    pub machine: String,
    pub strategy: Strategy,
    pub cache: CacheMode,
    pub max_images: usize,
    /// `reads`: where NT prefixes are explored.
    #[serde(default)]
    pub nt_prefixes: NtPrefixes,
    /// The trace: test commands, machine (configuration, kernel, guest tools), version.
    pub trace_key: String,
    /// The crash images: the trace's key and the strategy, cache mode and image cap.
    pub images_key: String,
    /// The states: the machine and how the test extracts its state.
    pub states_key: String,
}

impl Inputs {
    /// `machine` describes everything about the guest that changes results.
    pub fn of(opts: &PipelineOptions, name: &str, test: &TestCase, machine: &str) -> Inputs {
        let persim = env!("CARGO_PKG_VERSION").to_string();
        let trace_key = key(&[&persim, machine, &test.setup, &test.command()]);
        let images_key = key(&[
            &trace_key,
            &opts.strategy.to_string(),
            opts.nt_prefixes.name(),
            &opts.cache.to_string(),
            &opts.max_images.to_string(),
        ]);
        let states_key = key(&[
            &persim,
            machine,
            &test.ignore.join(","),
            test.state.as_deref().unwrap_or(""),
        ]);
        Inputs {
            persim,
            test: name.to_string(),
            machine: first_line(machine),
            strategy: opts.strategy,
            cache: opts.cache,
            max_images: opts.max_images,
            nt_prefixes: opts.nt_prefixes,
            trace_key,
            images_key,
            states_key,
        }
    }

    /// For a message: what a run directory was made by.
    pub fn describe(&self) -> String {
        format!(
            "test `{}` on {} (strategy {}, cache {}, Persim {})",
            self.test, self.machine, self.strategy, self.cache, self.persim
        )
    }
}

fn key(parts: &[&str]) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// `value` as JSON with sorted keys, for a key: unlike a `Debug` rendering it does not
/// change with the Rust version or the order of a struct's fields.
pub(crate) fn stable_text(value: &impl Serialize) -> String {
    // Fails only on a path that is not UTF-8, which QEMU's command line (text) cannot take
    // either: the run fails on it, so the key need not tell such paths apart.
    serde_json::to_value(value).map_or_else(|e| format!("({e})"), |json| json.to_string())
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_key_changes_with_what_the_stage_depends_on() {
        let test = TestCase::parse("description = \"x\"\nops = [\"a\"]\n").unwrap();
        let opts = PipelineOptions::default();
        let base = Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.1");
        assert_eq!(base, Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.1"));
        assert_eq!(base.machine, "ext4-dax");

        let other_op = TestCase::parse("description = \"x\"\nops = [\"b\"]\n").unwrap();
        let changed = Inputs::of(&opts, "x", &other_op, "ext4-dax\nkernel 6.1");
        assert_ne!(changed.trace_key, base.trace_key);
        assert_ne!(changed.images_key, base.images_key);
        assert_eq!(changed.states_key, base.states_key);

        let kernel = Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.12");
        assert_ne!(kernel.trace_key, base.trace_key);
        assert_ne!(kernel.states_key, base.states_key);

        let strategy = PipelineOptions {
            strategy: Strategy::GlobalPrefix,
            ..PipelineOptions::default()
        };
        let rejudged = Inputs::of(&strategy, "x", &test, "ext4-dax\nkernel 6.1");
        assert_eq!(rejudged.trace_key, base.trace_key);
        assert_ne!(rejudged.images_key, base.images_key);
        assert_eq!(rejudged.states_key, base.states_key);

        let ignored =
            TestCase::parse("description = \"x\"\nops = [\"a\"]\nignore = [\"atime\"]\n").unwrap();
        let states = Inputs::of(&opts, "x", &ignored, "ext4-dax\nkernel 6.1");
        assert_eq!(states.trace_key, base.trace_key);
        assert_ne!(states.states_key, base.states_key);
    }

    #[test]
    fn a_configuration_is_keyed_by_sorted_json_not_by_debug() {
        let text = "name = \"x\"\nmemory_mib = 512\npm_size_mib = 16\nmkfs = \"mkfs.ext4 -F /dev/pmem0\"\n\
                    mount = \"m\"\nrecover = \"r\"\ndump_exclude = [\"lost+found\"]\n";
        let config = persim_vm::VmConfig::parse(text, std::path::Path::new("/vm/x.toml")).unwrap();
        assert_eq!(
            stable_text(&config),
            r#"{"dump_exclude":["lost+found"],"kernel":null,"memory_mib":512,"mkfs":"mkfs.ext4 -F /dev/pmem0","modules":[],"modules_dir":null,"mount":"m","name":"x","nvme_size_mib":0,"pm_size_mib":16,"recover":"r","system_map":null,"tools":[]}"#
        );
        let tools = vec![std::path::PathBuf::from("/g/fs-dump")];
        assert_eq!(stable_text(&tools), r#"["/g/fs-dump"]"#);
    }
}
