//! `efficiency run --profile`: where a counted run's kernel instructions go, by function
//! (the plugin's `profile=on` counts them per translation block).

use super::GuestPoint;
use persim_trace::Symbols;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;

/// How many functions a point keeps, the most expensive first.
pub const KEPT: usize = 200;
/// How many of each point's functions the table shows.
const SHOWN: usize = 12;

/// A kernel function's share of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCost {
    /// `function` or `function [module]`; `?` for code no symbol names.
    pub function: String,
    pub instructions_per_write: f64,
}

/// The blocks' instructions added up by the function each block starts in, per write,
/// the [`KEPT`] most expensive first.
pub fn by_function(blocks: &[(u64, u64)], symbols: &Symbols, writes: f64) -> Vec<FunctionCost> {
    let mut sums = HashMap::<String, u64>::new();
    for &(address, instructions) in blocks {
        let function = symbols
            .resolve(address)
            .map_or("?".to_owned(), |l| match l.module {
                Some(module) => format!("{} [{module}]", l.function),
                None => l.function.to_owned(),
            });
        *sums.entry(function).or_default() += instructions;
    }
    let mut costs: Vec<FunctionCost> = sums
        .into_iter()
        .map(|(function, n)| FunctionCost {
            function,
            instructions_per_write: n as f64 / writes,
        })
        .collect();
    costs.sort_by(|a, b| {
        (b.instructions_per_write
            .total_cmp(&a.instructions_per_write))
        .then_with(|| a.function.cmp(&b.function))
    });
    costs.truncate(KEPT);
    costs
}

/// The profiled points side by side: a row for each function among any point's [`SHOWN`]
/// most expensive, thousands of kernel instructions per write (`-`: not among the point's
/// kept functions). `None` when no point was profiled.
pub fn table(points: &[GuestPoint]) -> Option<String> {
    let profiled: Vec<&GuestPoint> = points
        .iter()
        .filter(|p| !p.kernel_functions.is_empty())
        .collect();
    if profiled.is_empty() {
        return None;
    }
    let mut rows: Vec<&str> = Vec::new();
    for p in &profiled {
        for f in p.kernel_functions.iter().take(SHOWN) {
            if !rows.contains(&f.function.as_str()) {
                rows.push(&f.function);
            }
        }
    }
    let cost = |p: &GuestPoint, function: &str| {
        (p.kernel_functions.iter())
            .find(|f| f.function == function)
            .map(|f| f.instructions_per_write)
    };
    let most = |function: &str| {
        (profiled.iter())
            .filter_map(|p| cost(p, function))
            .fold(0.0, f64::max)
    };
    rows.sort_by(|a, b| most(b).total_cmp(&most(a)));
    let width = rows
        .iter()
        .map(|r| r.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let labels: Vec<String> = (profiled.iter())
        .map(|p| format!("{} {}j", p.stack, p.jobs))
        .collect();
    let mut out = String::from("Kernel instructions per write by function (thousands):\n\n");
    let _ = write!(out, "{:<width$}", "function");
    for label in &labels {
        let _ = write!(out, " {label:>8}");
    }
    out.push('\n');
    for function in rows {
        let _ = write!(out, "{function:<width$}");
        for (p, label) in profiled.iter().zip(&labels) {
            let cell = cost(p, function).map_or("-".to_owned(), |v| format!("{:.1}", v / 1e3));
            let _ = write!(out, " {cell:>w$}", w = label.chars().count().max(8));
        }
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> Symbols {
        Symbols::from_kallsyms(
            "ffffffff81000000 T ext4_file_write_iter\n\
             ffffffff81000400 T jbd2_journal_commit_transaction\n\
             ffffffffc0001000 t dpwc_map\t[dm_dpwc]\n",
        )
    }

    #[test]
    fn blocks_add_up_by_the_function_they_start_in_most_expensive_first() {
        let blocks = [
            (0xffff_ffff_8100_0000, 300),
            (0xffff_ffff_8100_0010, 100),
            (0xffff_ffff_8100_0400, 500),
            (0xffff_ffff_c000_1008, 50),
        ];
        let costs = by_function(&blocks, &symbols(), 10.0);
        let got: Vec<(&str, f64)> = (costs.iter())
            .map(|c| (c.function.as_str(), c.instructions_per_write))
            .collect();
        assert_eq!(
            got,
            [
                ("jbd2_journal_commit_transaction", 50.0),
                ("ext4_file_write_iter", 40.0),
                ("dpwc_map [dm_dpwc]", 5.0),
            ]
        );
        let many: Vec<(u64, u64)> = (0..100).map(|i| (0x1000 * i, i + 1)).collect();
        let kept = by_function(&many, &Symbols::default(), 1.0);
        assert_eq!(kept.len(), 1, "code no symbol names is one row: {kept:?}");
        assert_eq!(kept[0].function, "?");
    }

    #[test]
    fn the_table_puts_profiled_points_side_by_side_and_marks_missing_functions() {
        let mut a = super::super::tests::point("dpwc", 1, 0);
        let b = super::super::tests::point("wc", 1, 0);
        assert_eq!(table(&[a.clone(), b.clone()]), None, "nothing profiled");
        let cost = |function: &str, k: f64| FunctionCost {
            function: function.into(),
            instructions_per_write: k * 1e3,
        };
        a.kernel_functions = vec![cost("dpwc_map [dm_dpwc]", 12.5), cost("memcpy", 3.0)];
        let mut c = super::super::tests::point("wc", 4, 0);
        c.kernel_functions = vec![
            cost("writecache_map [dm_writecache]", 20.0),
            cost("memcpy", 2.0),
        ];
        let text = table(&[a, b, c]).unwrap();
        let lines: Vec<&str> = text.lines().skip(2).collect();
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(header, ["function", "dpwc", "1j", "wc", "4j"], "{text}");
        let row = |f: &str| -> Vec<&str> {
            let line = lines.iter().find(|l| l.starts_with(f)).unwrap();
            line[f.len()..].split_whitespace().collect()
        };
        assert_eq!(
            row("writecache_map [dm_writecache]"),
            ["-", "20.0"],
            "{text}"
        );
        assert_eq!(row("dpwc_map [dm_dpwc]"), ["12.5", "-"], "{text}");
        assert_eq!(row("memcpy"), ["3.0", "2.0"], "{text}");
        assert!(
            lines[1].starts_with("writecache_map"),
            "most expensive first: {text}"
        );
    }
}
