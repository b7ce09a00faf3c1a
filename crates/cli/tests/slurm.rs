//! Campaigns on a real Slurm cluster of one node: munged, slurmctld and slurmd started
//! here as root with a generated slurm.conf in a temporary directory, and
//! scripts/slurm/campaign.sbatch submitted as a job array of two tasks over three
//! generated ACE tests (`--shard auto`). One test checks that the merged result equals the
//! same campaign run in one process; the other kills a task's `persim` (a node lost),
//! requeues the task and checks that it resumes its part. Where Slurm cannot start (not
//! installed, not root, the daemons do not come up) or the VM cannot run, a test says why
//! (`SKIPPED: …`) and passes; under CI the VM must run. And `--shard auto` outside a
//! scheduler is refused before anything is made.

mod common;

use common::{persim, vm_ready};
use persim_tester::SuiteResults;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// One cluster at a time: the two tests' daemons would share the node.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// How long a campaign of three tests may take on the cluster (two tasks at once under
/// TCG on a small machine).
const CAMPAIGN_TIMEOUT: Duration = Duration::from_secs(900);

const DAEMONS: [&str; 3] = [
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

/// munged, slurmctld and slurmd of a one-node cluster in `dir`, ended on drop.
struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl Cluster {
    /// Starts the cluster and waits until its node is idle; Err: why it cannot run here.
    fn start() -> Result<Cluster, String> {
        if let Some(missing) = DAEMONS.iter().find(|d| !Path::new(d).exists()) {
            return Err(format!(
                "{missing} is not installed (Debian's slurm-wlm and munge; scripts/setup.sh \
                 installs them)"
            ));
        }
        if unsafe { libc::geteuid() } != 0 {
            return Err("the daemons run as root here, and this is not root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut cluster = Cluster {
            dir,
            daemons: Vec::new(),
        };
        cluster.write_config()?;
        let d = cluster.dir.path().to_path_buf();
        let munge = d.join("munge");
        let mut munged = Command::new(DAEMONS[0]);
        munged
            .args(["--foreground", "--force"])
            .arg(format!("--socket={}", munge.join("socket").display()))
            .arg(format!("--key-file={}", munge.join("key").display()))
            .arg(format!("--pid-file={}", munge.join("pid").display()))
            .arg(format!("--log-file={}", munge.join("log").display()))
            .arg(format!("--seed-file={}", munge.join("seed").display()));
        cluster.spawn(&mut munged)?;
        // slurmctld refuses to start without munged's socket
        wait_for(Duration::from_secs(10), || munge.join("socket").exists());
        let conf = cluster.conf();
        for (daemon, args) in [
            (DAEMONS[1], &["-D", "-i", "-f"][..]),
            (DAEMONS[2], &["-D", "-f"]),
        ] {
            let mut command = Command::new(daemon);
            command.args(args).arg(&conf);
            cluster.spawn(&mut command)?;
        }
        let idle = wait_for(Duration::from_secs(30), || {
            cluster
                .output(Command::new("sinfo").args(["-h", "-o", "%t"]))
                .is_ok_and(|state| state.trim() == "idle")
        });
        if !idle {
            let logs: Vec<String> = ["slurmctld.log", "slurmd.log", "munge/log"]
                .iter()
                .map(|log| {
                    let text = std::fs::read_to_string(d.join(log)).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(5).collect();
                    format!("{log}: {}", tail.join(" | "))
                })
                .collect();
            return Err(format!(
                "the node did not become idle within 30 s: {}",
                logs.join("; ")
            ));
        }
        Ok(cluster)
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// slurm.conf for this host alone, its ports free ones, every file in the directory;
    /// munge's key random.
    fn write_config(&self) -> Result<(), String> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let d = self.dir.path();
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir(d.join(sub)).map_err(|e| e.to_string())?;
        }
        // munged wants its key private and its socket's directory searchable by all
        let mut key = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| e.to_string())?;
        let key_file = d.join("munge/key");
        std::fs::write(&key_file, &key).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
        std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o711))
            .map_err(|e| e.to_string())?;
        let host = Command::new("hostname")
            .arg("-s")
            .output()
            .map_err(|e| format!("hostname: {e}"))?;
        let host = String::from_utf8_lossy(&host.stdout).trim().to_owned();
        let port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| e.to_string())
        };
        let (ctld_port, d_port) = (port()?, port()?);
        let p = |name: &str| d.join(name).display().to_string();
        let conf = format!(
            "ClusterName=persimtest\n\
             SlurmctldHost={host}\n\
             SlurmctldPort={ctld_port}\n\
             SlurmdPort={d_port}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={socket},cred_expire=10\n\
             CredType=cred/munge\n\
             StateSaveLocation={state}\n\
             SlurmdSpoolDir={spool}\n\
             SlurmctldPidFile={ctld_pid}\n\
             SlurmdPidFile={d_pid}\n\
             SlurmctldLogFile={ctld_log}\n\
             SlurmdLogFile={d_log}\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             NodeName={host} CPUs=2 State=UNKNOWN\n\
             PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
            socket = p("munge/socket"),
            state = p("state"),
            spool = p("spool"),
            ctld_pid = p("slurmctld.pid"),
            d_pid = p("slurmd.pid"),
            ctld_log = p("slurmctld.log"),
            d_log = p("slurmd.log"),
        );
        std::fs::write(self.conf(), conf).map_err(|e| e.to_string())
    }

    fn spawn(&mut self, command: &mut Command) -> Result<(), String> {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{command:?}: {e}"))?;
        self.daemons.push(child);
        Ok(())
    }

    /// A Slurm client command's stdout; Err: its stderr.
    fn output(&self, command: &mut Command) -> Result<String, String> {
        let out = command
            .env("SLURM_CONF", self.conf())
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// Runs a Slurm client command that must succeed.
    fn run(&self, program: &str, args: &[&str]) -> String {
        self.output(Command::new(program).args(args))
            .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
    }

    /// `campaign.sbatch` as an array of `tasks` over `tests` into `shared`; the array's id.
    fn submit(&self, tests: &Path, shared: &Path, tasks: usize) -> String {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm/campaign.sbatch");
        let out = self
            .output(
                Command::new("sbatch")
                    .env("PERSIM", assert_cmd::cargo::cargo_bin("persim"))
                    .args([
                        "--parsable",
                        &format!("--array=1-{tasks}"),
                        "--cpus-per-task=1",
                    ])
                    .arg(format!("--output={}/task-%a.out", shared.display()))
                    .arg(script)
                    .args([tests, shared])
                    .args(["--fs", "ext4", "-j", "1", "-q"]),
            )
            .unwrap_or_else(|e| panic!("sbatch: {e}"));
        out.trim().to_owned()
    }

    /// A job's state (`scontrol show job`), e.g. RUNNING, FAILED.
    fn state(&self, job: &str) -> String {
        let shown = self.run("scontrol", &["show", "job", job]);
        let state = shown
            .split_whitespace()
            .find_map(|field| field.strip_prefix("JobState="));
        state.unwrap_or("").to_owned()
    }

    /// Waits until no job is left and `shared/merged/results.json` is there.
    fn wait_for_merge(&self, shared: &Path) -> SuiteResults {
        let merged = shared.join("merged");
        let done = wait_for(CAMPAIGN_TIMEOUT, || {
            self.run("squeue", &["-h"]).trim().is_empty()
        });
        assert!(done, "the jobs did not end: {}", self.logs(shared));
        SuiteResults::load(&merged).unwrap_or_else(|e| panic!("{e:#}: {}", self.logs(shared)))
    }

    /// What the tasks and the merge printed.
    fn logs(&self, shared: &Path) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(shared).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "out") {
                let log = std::fs::read_to_string(&path).unwrap_or_default();
                text.push_str(&format!("\n--- {}\n{log}", path.display()));
            }
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // a test that failed may leave jobs: cancel them and give them a moment to end
        if self
            .output(Command::new("scancel").arg("--full").arg("--user=root"))
            .is_ok()
        {
            wait_for(Duration::from_secs(10), || {
                self.output(Command::new("squeue").arg("-h"))
                    .is_ok_and(|jobs| jobs.trim().is_empty())
            });
        }
        // then slurmd, slurmctld, munged
        for daemon in self.daemons.iter_mut().rev() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

/// Polls `done` every 100 ms until it holds or `timeout` passes.
fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// What each test starts from: the cluster (and the one-cluster lock), three generated
/// tests and an empty shared directory in `tmp`.
struct Case {
    _one: std::sync::MutexGuard<'static, ()>,
    tmp: tempfile::TempDir,
    cluster: Cluster,
    tests: PathBuf,
    shared: PathBuf,
}

/// The case, or None when the test is skipped (said why).
fn case(test: &str) -> Option<Case> {
    if !vm_ready(test) {
        return None;
    }
    let one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = match Cluster::start() {
        Ok(cluster) => cluster,
        Err(why) => {
            persim_vm::testing::skip(test, &format!("Slurm cannot start here: {why}"));
            return None;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let tests = tests(tmp.path());
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    Some(Case {
        _one: one,
        cluster,
        tmp,
        tests,
        shared,
    })
}

/// Three ACE tests (two of them fail on ext4-DAX: their overwrites are not atomic).
fn tests(dir: &Path) -> PathBuf {
    let tests = dir.join("tests");
    let out = persim(&[
        "generate",
        "ace",
        "--seq",
        "1",
        "--sample",
        "3",
        "--out",
        tests.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tests
}

/// What a campaign found, without the seconds each test took.
fn findings(results: &SuiteResults) -> Vec<String> {
    (results.tests.iter())
        .map(|t| {
            format!(
                "{} {} {}/{} {:?}",
                t.test,
                t.mark.symbol(),
                t.violations,
                t.intervals,
                t.signature
            )
        })
        .collect()
}

#[test]
fn a_job_array_merged_equals_the_campaign_in_one_process() {
    // (dropped last to first: the cluster's jobs end before their directory goes)
    let Some(Case {
        _one,
        tmp,
        cluster,
        tests,
        shared,
    }) = case("a_job_array_merged_equals_the_campaign_in_one_process")
    else {
        return;
    };
    let one = tmp.path().join("one");
    let run = persim(&[
        "campaign",
        "run",
        tests.to_str().unwrap(),
        "--fs",
        "ext4",
        "-j",
        "1",
        "-q",
        "--out",
        one.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let whole = SuiteResults::load(&one).unwrap();

    cluster.submit(&tests, &shared, 2);
    let merged = cluster.wait_for_merge(&shared);
    assert_eq!(
        findings(&merged),
        findings(&whole),
        "{}",
        cluster.logs(&shared)
    );
    assert!(
        merged.shards.is_empty(),
        "every part merged: {:?}",
        merged.shards
    );
    let parts: Vec<usize> = ["shard-1", "shard-2"]
        .iter()
        .map(|part| SuiteResults::load(&shared.join(part)).unwrap().tests.len())
        .collect();
    assert_eq!(parts, [2, 1]);
    let page = std::fs::read_to_string(shared.join("merged/report.html")).unwrap();
    let failing = whole.tests.iter().find(|t| t.violations > 0).unwrap();
    assert!(
        page.contains(&format!("id=\"run-{}\"", failing.test)),
        "{page}"
    );
    assert!(
        page.contains("Checkpoint "),
        "the failing runs' reports are on the page"
    );
}

#[test]
fn a_killed_task_requeued_resumes_its_part() {
    let Some(Case {
        _one,
        tmp: _tmp,
        cluster,
        tests,
        shared,
    }) = case("a_killed_task_requeued_resumes_its_part")
    else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let array = cluster.submit(&tests, &shared, 2);

    // Task 1 runs the first and the third test; once the first is done, its persim dies
    // as if its node were lost.
    let part = shared.join("shard-1");
    let first = part.join(&names[0]);
    let finished = wait_for(CAMPAIGN_TIMEOUT, || first.join("report.json").exists());
    assert!(finished, "{}", cluster.logs(&shared));
    let pid = std::fs::read_to_string(part.join("persim.lock")).unwrap();
    let pid: i32 = pid.trim().parse().unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "persim {pid}");
    let task = format!("{array}_1");
    let failed = wait_for(Duration::from_secs(60), || cluster.state(&task) == "FAILED");
    assert!(
        failed,
        "task 1 is {}: {}",
        cluster.state(&task),
        cluster.logs(&shared)
    );
    assert!(
        !part.join("results.json").exists(),
        "the part was cut short"
    );
    // A merge that ran meanwhile (the other task had ended) found the part missing; the
    // requeued task submits it anew once that one is over.
    let quiet = wait_for(Duration::from_secs(60), || {
        (cluster
            .run("squeue", &["-h", "-t", "RUNNING", "-n", "persim-merge"])
            .trim())
        .is_empty()
    });
    assert!(quiet, "{}", cluster.logs(&shared));
    let trace = first.join("trace.ptrace");
    let traced: SystemTime = std::fs::metadata(&trace).unwrap().modified().unwrap();

    // Requeued: Slurm starts the task once its old credential has expired (cred_expire,
    // 10 s here); forced earlier with `StartTime=now`, slurmd would refuse it as revoked.
    cluster.run("scontrol", &["requeue", &task]);
    let merged = cluster.wait_for_merge(&shared);
    assert_eq!(merged.tests.len(), 3, "{}", cluster.logs(&shared));
    assert!(
        merged.shards.is_empty(),
        "every part merged: {:?}",
        merged.shards
    );
    let resumed = SuiteResults::load(&part).unwrap();
    let resumed: Vec<&str> = resumed.tests.iter().map(|t| t.test.as_str()).collect();
    assert_eq!(resumed, [&names[0], &names[2]]);
    // The first test's run was reused, not traced again.
    assert_eq!(
        std::fs::metadata(&trace).unwrap().modified().unwrap(),
        traced
    );
    let log = std::fs::read_to_string(shared.join("task-1.out")).unwrap();
    assert!(
        log.contains("Killed"),
        "the task's log tells of the kill: {log}"
    );
}

/// Outside a scheduler `--shard auto` is refused before anything is made; so is a count of 0.
#[test]
fn shard_auto_outside_a_scheduler_is_refused_and_makes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    for (shard, words) in [
        ("auto", "no task of a Slurm job array"),
        ("auto/0", "auto/N with N >= 1"),
    ] {
        let run = assert_cmd::Command::cargo_bin("persim")
            .unwrap()
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .args([
                "campaign", "run", "fs", "--fs", "ext4", "--shard", shard, "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(2), "--shard {shard}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(words), "--shard {shard}: {err}");
        assert!(!out.exists(), "--shard {shard} made {}", out.display());
    }
}
