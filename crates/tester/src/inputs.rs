//! What produced each stage of a run directory (`inputs.json`), so that a resume with
//! other inputs does not present old results under new names: a run of another test or
//! machine is refused, other crash-image options redo the images (states of images seen
//! before stay valid: a state depends only on the image and the recovery), another
//! recovery redoes the states.

use crate::cases::TestCase;
use crate::guest::Guest;
use crate::options::{NtPrefixes, PipelineOptions};
use persim_model::{CacheMode, Strategy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    /// Parts of the trace's key, so that a refusal names the one that changed: the
    /// test's commands (setup and operations) and the machine's whole description. Empty
    /// in an `inputs.json` of an older Persim.
    #[serde(default)]
    pub commands_key: String,
    #[serde(default)]
    pub machine_key: String,
    /// What recovery depends on (`Guest::recovery_identity`), keyed; empty in an
    /// `inputs.json` of an older Persim.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recovery_key: String,
    /// The VM configuration file the run was made with, if one was named (`--vm`): where
    /// `persim faults` finds it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<PathBuf>,
    /// `--reference`: the reference configuration's name, and the key of its states (its
    /// machine, the test's commands and how it extracts its state, the version); empty
    /// without a reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reference_key: String,
    /// The run directory whose trace this one adopted (`persim run --trace-from`), until
    /// the adopting run has reconciled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_from: Option<PathBuf>,
}

/// How a recorded trace's key differs from the one a run would record now.
pub(crate) struct TraceChange {
    /// What differs, each part named, e.g. "Persim's version (0.1.0 then, 0.2.0 now)".
    pub parts: Vec<String>,
    /// Whether the trace is still an execution of this test on this machine (only
    /// Persim's build or the machine's details differ), so that it can be judged again;
    /// None when an older `inputs.json` cannot tell.
    pub same_execution: Option<bool>,
}

impl Inputs {
    /// `machine` describes everything about the guest that changes results; `reference`
    /// the reference configuration's machine likewise, if there is one.
    pub fn of(
        opts: &PipelineOptions,
        name: &str,
        test: &TestCase,
        machine: &str,
        reference: Option<&str>,
    ) -> Inputs {
        let persim = env!("CARGO_PKG_VERSION").to_string();
        let trace_key = key(&[&persim, machine, &test.setup, &test.command()]);
        let machine_key = key(&[machine]);
        let images_key = key(&[
            &trace_key,
            &opts.strategy.to_string(),
            opts.nt_prefixes.name(),
            &opts.scope.to_string(),
            &opts.cache.to_string(),
            &opts.max_images.to_string(),
        ]);
        let states_key = key(&[
            &persim,
            machine,
            &test.ignore.join(","),
            test.state.as_deref().unwrap_or(""),
        ]);
        let reference_key = reference.map_or_else(String::new, |reference| {
            key(&[
                &persim,
                reference,
                &test.setup,
                &test.command(),
                &test.ignore.join(","),
                test.state.as_deref().unwrap_or(""),
            ])
        });
        Inputs {
            reference: reference.map(first_line),
            reference_key,
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
            commands_key: Inputs::commands_key(test),
            machine_key,
            recovery_key: String::new(),
            config_file: None,
            adopted_from: None,
        }
    }

    /// The key of what `test` runs in the guest.
    pub(crate) fn commands_key(test: &TestCase) -> String {
        key(&[&test.setup, &test.command()])
    }

    /// Refuses `guest` for recovering the images of the run in `root` again (`persim
    /// faults`) when it recovers otherwise than the run's machine did: another
    /// configuration, kernel or guest tools would judge the faults by another recovery.
    pub fn check_recovery_on(&self, guest: &dyn Guest, root: &Path) -> anyhow::Result<()> {
        if self.recovery_key.is_empty()
            || self.recovery_key == recovery_key(&guest.recovery_identity())
        {
            return Ok(());
        }
        let file =
            (self.config_file.as_ref()).map_or_else(String::new, |f| format!(" ({})", f.display()));
        anyhow::bail!(
            "{} was recovered on `{}`{file} with another configuration, kernel or guest tools \
             than `{}` has now: its images would be judged by another recovery. Give the \
             configuration the run was made with (leave out --fs/--vm to use it), or run the \
             test again on this one",
            root.display(),
            self.machine,
            guest.name()
        )
    }

    /// For a message: whose trace a run directory holds.
    pub(crate) fn describe_trace(&self) -> String {
        format!(
            "test `{}` on {}, recorded by Persim {}",
            self.test, self.machine, self.persim
        )
    }

    /// What makes this (recorded) trace's key differ from `now`'s.
    pub(crate) fn trace_change(&self, now: &Inputs) -> TraceChange {
        let mut parts = Vec::new();
        let mut other_execution = false;
        if self.test != now.test {
            parts.push(format!(
                "the test (`{}` then, `{}` now)",
                self.test, now.test
            ));
            other_execution = true;
        }
        let commands_known = !self.commands_key.is_empty() && !now.commands_key.is_empty();
        if commands_known && self.commands_key != now.commands_key {
            parts.push("the test's commands (its setup or operations)".to_owned());
            other_execution = true;
        }
        if self.machine != now.machine {
            parts.push(format!(
                "the machine (`{}` then, `{}` now)",
                self.machine, now.machine
            ));
            other_execution = true;
        } else if !self.machine_key.is_empty()
            && !now.machine_key.is_empty()
            && self.machine_key != now.machine_key
        {
            parts.push(format!(
                "the machine's configuration, kernel, guest tools or stack traces (of `{}`)",
                now.machine
            ));
        }
        if self.persim != now.persim {
            parts.push(format!(
                "Persim's version ({} then, {} now)",
                self.persim, now.persim
            ));
        }
        if !commands_known && !other_execution {
            parts.push(
                "the test's commands or the machine's configuration, kernel or guest tools \
                 (this inputs.json, of an older Persim, does not say which)"
                    .to_owned(),
            );
        }
        let same_execution = if other_execution {
            Some(false)
        } else {
            commands_known.then_some(true)
        };
        TraceChange {
            parts,
            same_execution,
        }
    }
}

/// The key of a machine's recovery identity (`Inputs::recovery_key`).
pub(crate) fn recovery_key(recovery_identity: &str) -> String {
    key(&[recovery_identity])
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
        let base = Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.1", None);
        assert_eq!(
            base,
            Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.1", None)
        );
        assert_eq!(base.machine, "ext4-dax");

        let other_op = TestCase::parse("description = \"x\"\nops = [\"b\"]\n").unwrap();
        let changed = Inputs::of(&opts, "x", &other_op, "ext4-dax\nkernel 6.1", None);
        assert_ne!(changed.trace_key, base.trace_key);
        assert_ne!(changed.images_key, base.images_key);
        assert_eq!(changed.states_key, base.states_key);

        let kernel = Inputs::of(&opts, "x", &test, "ext4-dax\nkernel 6.12", None);
        assert_ne!(kernel.trace_key, base.trace_key);
        assert_ne!(kernel.states_key, base.states_key);

        let strategy = PipelineOptions {
            strategy: Strategy::GlobalPrefix,
            ..PipelineOptions::default()
        };
        let rejudged = Inputs::of(&strategy, "x", &test, "ext4-dax\nkernel 6.1", None);
        assert_eq!(rejudged.trace_key, base.trace_key);
        assert_ne!(rejudged.images_key, base.images_key);
        assert_eq!(rejudged.states_key, base.states_key);

        let ignored =
            TestCase::parse("description = \"x\"\nops = [\"a\"]\nignore = [\"atime\"]\n").unwrap();
        let states = Inputs::of(&opts, "x", &ignored, "ext4-dax\nkernel 6.1", None);
        assert_eq!(states.trace_key, base.trace_key);
        assert_ne!(states.states_key, base.states_key);

        // A reference: its own key, nothing else redone; another reference, another key.
        assert_eq!(
            (base.reference.as_deref(), base.reference_key.as_str()),
            (None, "")
        );
        let xfs = Inputs::of(
            &opts,
            "x",
            &test,
            "ext4-dax\nkernel 6.1",
            Some("xfs-dax\nk"),
        );
        assert_eq!(xfs.reference.as_deref(), Some("xfs-dax"));
        assert_ne!(xfs.reference_key, "");
        assert_eq!(
            (&xfs.trace_key, &xfs.images_key, &xfs.states_key),
            (&base.trace_key, &base.images_key, &base.states_key)
        );
        let other = Inputs::of(
            &opts,
            "x",
            &test,
            "ext4-dax\nkernel 6.1",
            Some("ext4-dax\nk"),
        );
        assert_ne!(other.reference_key, xfs.reference_key);
        let ignored_xfs = Inputs::of(
            &opts,
            "x",
            &ignored,
            "ext4-dax\nkernel 6.1",
            Some("xfs-dax\nk"),
        );
        assert_ne!(ignored_xfs.reference_key, xfs.reference_key);
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
