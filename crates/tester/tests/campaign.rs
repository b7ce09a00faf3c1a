//! Campaigns with a fake guest (no VM): shards merged equal the whole campaign, failing
//! tests are grouped by signature, and a campaign started again reuses every run.

mod common;

use common::{example_text, journal_suite as tests, FakeGuest};
use persim_analyze::Mark;
use persim_model::Strategy;
use persim_tester::{
    merge, run_campaign, CampaignOptions, PipelineOptions, Shard, Suite, SuiteResults,
};
use std::path::Path;

fn guest() -> FakeGuest {
    let mut guest = FakeGuest::new("journal.trace");
    guest.other_traces = vec![("missing-fence", example_text("journal-missing-fence.trace"))];
    guest
}

fn campaign(suite: &Suite, out: &Path, guest: &FakeGuest, how: CampaignOptions) -> SuiteResults {
    let opts = PipelineOptions {
        strategy: Strategy::GlobalPrefix,
        ..PipelineOptions::default()
    };
    let mut started = Vec::new();
    let results = run_campaign(
        &opts,
        guest,
        suite,
        out,
        how,
        |e| {
            if let persim_tester::TestEvent::Started { name, .. } = e {
                started.push(name.to_string());
            }
        },
        &mut (),
    )
    .unwrap();
    assert_eq!(started.len(), results.tests.len());
    assert_eq!(SuiteResults::load(out).unwrap(), results, "results.json");
    results
}

/// Without what differs from run to run: the seconds.
fn timeless(mut results: SuiteResults) -> SuiteResults {
    for test in &mut results.tests {
        test.seconds = 0.0;
        test.timings = None;
    }
    results
}

#[test]
fn two_shards_merged_equal_the_whole_campaign_and_group_by_signature() {
    let dir = tempfile::tempdir().unwrap();
    let tests_dir = dir.path().join("tests");
    std::fs::create_dir(&tests_dir).unwrap();
    let suite = tests(&tests_dir);

    let whole = campaign(
        &suite,
        &dir.path().join("whole"),
        &guest(),
        CampaignOptions {
            campaign: true,
            ..CampaignOptions::default()
        },
    );
    assert_eq!(whole.tests.len(), 7);
    // A campaign is called one, a suite a suite.
    assert!(
        whole.to_text().starts_with("campaign gen on fake"),
        "{}",
        whole.to_text()
    );
    let failing: Vec<&str> = whole
        .tests
        .iter()
        .filter(|t| t.mark != Mark::Atomic)
        .map(|t| t.test.as_str())
        .collect();
    assert_eq!(failing, ["t1", "t4"]);
    let groups = whole.groups();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].tests, ["t1", "t4"]);
    assert!(
        groups[0].signature.contains("states differ in home"),
        "{groups:?}"
    );
    assert!(whole
        .to_text()
        .contains("2 of 7 tests failed, 1 distinct problem(s)"));

    let shards: Vec<SuiteResults> = ["1/2", "2/2"]
        .iter()
        .map(|shard| {
            let how = CampaignOptions {
                parallel: 2,
                shard: shard.parse().unwrap(),
                campaign: true,
            };
            campaign(
                &suite,
                &dir.path().join(shard.replace('/', "of")),
                &guest(),
                how,
            )
        })
        .collect();
    assert_eq!(
        (shards[0].tests.len(), shards[1].tests.len()),
        (4, 3),
        "disjoint, and together every test"
    );
    let e = merge(vec![shards[0].clone(), shards[0].clone()]).unwrap_err();
    assert!(e.to_string().contains("shard 1/2 is given twice"), "{e}");
    let merged = merge(shards).unwrap();
    assert_eq!(timeless(merged), timeless(whole.clone()));

    // Started again, the campaign runs nothing in the guest and gives the same results.
    let again = guest();
    let resumed = campaign(
        &suite,
        &dir.path().join("whole"),
        &again,
        CampaignOptions {
            campaign: true,
            ..CampaignOptions::default()
        },
    );
    assert_eq!(again.records.get(), 0);
    assert_eq!(timeless(resumed), timeless(whole));
}

#[test]
fn shards_are_parsed_and_checked() {
    assert_eq!("3/8".parse::<Shard>(), Ok(Shard { index: 3, count: 8 }));
    for bad in ["0/2", "3/2", "2", "a/b"] {
        let e = bad.parse::<Shard>().unwrap_err();
        assert!(e.contains("K/N"), "{e}");
    }
    let shard: Shard = "2/3".parse().unwrap();
    let held: Vec<usize> = (0..7).filter(|&i| shard.holds(i)).collect();
    assert_eq!(held, [1, 4]);
}

#[test]
fn a_campaign_directory_in_use_is_refused_with_the_other_process_named() {
    let dir = tempfile::tempdir().unwrap();
    let tests_dir = dir.path().join("tests");
    std::fs::create_dir(&tests_dir).unwrap();
    let suite = tests(&tests_dir);
    let out = dir.path().join("out");
    let other = persim_tester::RunDir::create(&out).unwrap();
    let guest = guest();
    let e = run_campaign(
        &PipelineOptions::default(),
        &guest,
        &suite,
        &out,
        CampaignOptions::default(),
        |_| {},
        &mut (),
    )
    .unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains(&format!(
            "in use by another persim (pid {}",
            std::process::id()
        )),
        "{e}"
    );
    assert_eq!(guest.records.get(), 0, "nothing ran");
    drop(other);
    let results = campaign(&suite, &out, &guest, CampaignOptions::default());
    assert_eq!(results.tests.len(), 7);
    assert!(persim_tester::RunDir::new(&out).lock_file().is_file());
}

/// A test whose workload fails shows, in its row, why: the first line its command printed.
#[test]
fn a_failed_workload_shows_the_guests_reason_in_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let tests_dir = dir.path().join("tests");
    std::fs::create_dir(&tests_dir).unwrap();
    std::fs::write(
        tests_dir.join("remove.toml"),
        "description = \"rm\"\nops = [\"rm x\"]\n",
    )
    .unwrap();
    let suite = Suite {
        name: "gen".into(),
        dir: tests_dir,
    };
    let mut failing = guest();
    failing.exit_code = 1;
    let results = campaign(
        &suite,
        &dir.path().join("out"),
        &failing,
        CampaignOptions::default(),
    );
    assert_eq!(results.tests[0].mark, Mark::NotRun);
    let text = results.to_text();
    let row = text.lines().find(|l| l.starts_with("remove ")).unwrap();
    // The fake prints no operation marker: the commands as a whole failed.
    assert!(
        row.ends_with(
            "the test's commands failed with exit code 1: rm: can't remove 'x': No such file or \
             directory"
        ),
        "{text}"
    );
}
