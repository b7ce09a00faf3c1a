//! `--numa-node N`: fio's jobs pinned to one NUMA node, as the thesis measured (its CPUs
//! and its memory), through fio's own options `numa_cpu_nodes` and `numa_mem_policy`. The
//! node is checked against sysfs first, so a wrong number is an error before the series,
//! not fio's failure in the middle of it.

use std::path::Path;

/// Where the kernel lists the NUMA nodes.
pub const NODE_DIR: &str = "/sys/devices/system/node";

/// The fio options (`key=value`, as `--fio-option` takes them) that pin the jobs to `node`
/// of the sysfs tree `root` ([`NODE_DIR`]).
pub fn pin_options(root: &Path, node: u32) -> Result<Vec<String>, String> {
    let dir = root.join(format!("node{node}"));
    let Ok(cpus) = std::fs::read_to_string(dir.join("cpulist")) else {
        return Err(format!(
            "--numa-node {node}: this machine has no NUMA node {node}; its nodes are {} \
             (`numactl --hardware` shows them)",
            nodes(root)
        ));
    };
    if cpus.trim().is_empty() {
        return Err(format!(
            "--numa-node {node}: node {node} has no CPUs (memory only, such as CXL memory or \
             PM in system-ram mode); give the node of the CPUs next to it"
        ));
    }
    Ok(vec![
        format!("numa_cpu_nodes={node}"),
        format!("numa_mem_policy=bind:{node}"),
    ])
}

/// The nodes under `root`, e.g. `0, 1`.
fn nodes(root: &Path) -> String {
    let mut nodes: Vec<u32> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .collect();
    nodes.sort_unstable();
    match nodes.is_empty() {
        true => format!("not listed ({} is missing)", root.display()),
        false => nodes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-socket machine with a memory-only node (CXL memory), as sysfs shows it:
    /// `nodeN/cpulist` of each node, and the other files the reader must pass over.
    fn recorded_tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (node, cpus) in [(0, "0-15,32-47\n"), (1, "16-31,48-63\n"), (2, "\n")] {
            let dir = root.path().join(format!("node{node}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("cpulist"), cpus).unwrap();
        }
        std::fs::write(root.path().join("online"), "0-2\n").unwrap();
        std::fs::write(root.path().join("has_cpu"), "0-1\n").unwrap();
        root
    }

    #[test]
    fn a_node_with_cpus_pins_fio_to_its_cpus_and_memory() {
        let root = recorded_tree();
        assert_eq!(
            pin_options(root.path(), 1).unwrap(),
            ["numa_cpu_nodes=1", "numa_mem_policy=bind:1"]
        );
    }

    #[test]
    fn a_missing_node_names_the_nodes_there_are() {
        let root = recorded_tree();
        let err = pin_options(root.path(), 3).unwrap_err();
        assert!(
            err.contains("no NUMA node 3; its nodes are 0, 1, 2"),
            "{err}"
        );
        let err = pin_options(&root.path().join("none"), 0).unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn a_memory_only_node_is_refused() {
        let root = recorded_tree();
        let err = pin_options(root.path(), 2).unwrap_err();
        assert!(err.contains("no CPUs"), "{err}");
    }
}
