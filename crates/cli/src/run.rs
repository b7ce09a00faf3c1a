//! `persim run`: one test through the whole pipeline — trace, crash images, states,
//! verdicts — into a run directory whose every stage's output is a file:
//!
//! ```text
//! DIR/trace.ptrace (+ .initial)   the recorded trace and the PM it starts from
//! DIR/images.json                 failure points and their images (persim images --json)
//! DIR/images/                     the image store: <hash>.img, index.json
//! DIR/states/<hash>.json          what recovering each image gave
//! DIR/report.json, report.txt     the verdicts
//! ```
//!
//! A stage whose output exists is not run again, so an interrupted run resumes.

use crate::images::{self, ImagesArgs};
use crate::record::{record, RecordArgs};
use crate::states::extract_missing;
use crate::testcase::{self, TestCase};
use crate::vm_args::VmArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use persim_analyze::{verdicts, ImageOrigins, Recovered, Report};
use persim_image::{ImageStore, DEFAULT_HASH_LEVEL};
use persim_model::{CacheMode, Config, Strategy};
use persim_trace::initial_image_path;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;
use std::time::Instant;

/// Options shared by `persim run` and `persim suite`.
#[derive(Args, Debug, Clone)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub vm: VmArgs,
    /// Whether CPU caches are lost on a crash (volatile) or survive it (persistent, eADR).
    #[arg(long, default_value = "volatile")]
    pub cache: CacheMode,
    /// Which crash images to check: program-order is cheap and finds logic bugs;
    /// global-prefix and exhaustive also find ordering bugs, at a higher cost.
    #[arg(long, default_value = "program-order")]
    pub strategy: Strategy,
    /// Images per failure point above which a seeded sample is taken.
    #[arg(long, default_value_t = Config::DEFAULT_MAX_IMAGES)]
    pub max_images: usize,
    /// Crash images recovered in parallel (one VM each); default: the number of cores.
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run one test: trace it in the VM, generate its crash images, recover each, and judge
/// every checkpoint interval. Exit code 0: no violation, 1: violations, 2: the tool failed.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// A test name from suites/fs (e.g. hello-world), SUITE/NAME for another suite (e.g.
    /// ringbuf/append), or a test file.
    #[arg(long)]
    pub test: String,
    /// The run directory (created; an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
}

/// Returns whether violations were found.
pub fn run(args: &RunArgs) -> Result<bool> {
    let (name, path) = testcase::resolve(&args.test)?;
    let test = TestCase::load(&path)?;
    if !args.pipeline.quiet {
        eprintln!("persim run {name}: {}", test.description);
    }
    let report = run_test(&args.pipeline, &name, &test, &args.out)?;
    print!("{}", report.to_text());
    println!(
        "run directory: {} (persim report {0} --diff)",
        args.out.display()
    );
    Ok(report.violations() > 0)
}

/// Runs `test` through every stage into `dir` and writes the report there.
pub fn run_test(p: &PipelineArgs, name: &str, test: &TestCase, dir: &Path) -> Result<Report> {
    let say = |text: String| {
        if !p.quiet {
            eprintln!("persim run {name}: {text}");
        }
    };
    let config = p.vm.config()?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let started = Instant::now();
    let mut timings = BTreeMap::new();

    let trace = dir.join("trace.ptrace");
    if trace.is_file() && initial_image_path(&trace).is_file() {
        say("trace: reusing the recorded trace".into());
    } else {
        let stage = Instant::now();
        let record_args = RecordArgs {
            vm: p.vm.clone(),
            cmd: None,
            out: None,
            reads: false,
            stack_traces: false,
            quiet: p.quiet,
        };
        let summary = record(&record_args, &test.setup, &test.command(), trace.clone())?;
        if summary.exit_code != 0 {
            let _ = fs::remove_file(&trace);
            bail!(
                "the test's commands failed in the guest (exit code {}):\n{}",
                summary.exit_code,
                summary.output
            );
        }
        timings.insert("trace".to_string(), stage.elapsed().as_secs_f64());
    }

    let images_json = dir.join("images.json");
    let images_dir = dir.join("images");
    if images_json.is_file() {
        say("images: reusing the generated images".into());
    } else {
        let stage = Instant::now();
        let args = ImagesArgs {
            trace: trace.clone(),
            pm_size: None,
            blk_size: None,
            cache: p.cache,
            strategy: p.strategy,
            max_images: p.max_images,
            seed: 0,
            // Intervals start at checkpoint 1; what comes before (the program starting
            // up) is judged by no interval.
            from_checkpoint: Some(1),
            hash_level: DEFAULT_HASH_LEVEL,
            initial: None,
            out: Some(images_dir.clone()),
            json: true,
            hex: false,
            quiet: p.quiet,
        };
        let tmp = images_json.with_extension("tmp");
        images::generate(&args, fs::File::create(&tmp)?)?;
        fs::rename(&tmp, &images_json)?;
        timings.insert("images".to_string(), stage.elapsed().as_secs_f64());
    }

    let store = ImageStore::open(&images_dir)?;
    let stage = Instant::now();
    let states = extract_missing(p, &config, test, &store, &dir.join("states"))?;
    timings.insert("states".to_string(), stage.elapsed().as_secs_f64());
    say(format!("{} distinct images recovered", states.len()));

    let hashes: Vec<String> = store
        .records()
        .map(|(h, _)| h.to_hex().to_string())
        .collect();
    let by_hash: HashMap<&str, &Recovered> = states.iter().map(|(h, r)| (h.as_str(), r)).collect();
    let checkpoints = verdicts(
        store
            .records()
            .zip(&hashes)
            .map(|((_, record), hash)| ImageOrigins {
                hash,
                origins: &record.origins,
            }),
        |h| by_hash.get(h).copied(),
    );
    timings.insert("total".to_string(), started.elapsed().as_secs_f64());
    let report = Report {
        test: name.to_string(),
        fs: config.name.clone(),
        cache: p.cache.to_string(),
        strategy: p.strategy.to_string(),
        checkpoints,
        timings,
    };
    write_atomically(
        &dir.join("report.json"),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    write_atomically(&dir.join("report.txt"), report.to_text().as_bytes())?;
    Ok(report)
}

/// Writes a file under a temporary name and renames it, so readers never see half of it.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}
