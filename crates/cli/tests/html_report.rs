//! `persim report --html` in a real browser: a campaign, a failing test's run and a fault
//! campaign, made with the tester's fake guest (no VM), each page rendered by Debian's
//! headless Chromium, its DOM checked for the verdicts, a diff line and a culprit frame,
//! and every request it makes caught by a proxy of the test's own (there must be none).
//! Where Chromium is not installed, the test says so (`SKIPPED: …`) and passes.

mod common;
#[path = "../../tester/tests/common/mod.rs"]
#[allow(dead_code)]
mod fake;

use common::persim;
use fake::{example_text, journal_suite, FakeGuest};
use persim_image::FaultKind;
use persim_model::Strategy;
use persim_tester::{
    run_campaign, run_faults, CampaignOptions, FaultOptions, FaultPlace, FaultsAt, PipelineOptions,
    RunDir, Shard, TestCase,
};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser, or why there is none.
fn chromium() -> Result<PathBuf, String> {
    let path = PathBuf::from("/usr/bin/chromium");
    match path.exists() {
        true => Ok(path),
        false => Err(format!(
            "{} is not installed (Debian's package chromium; scripts/setup.sh installs it)",
            path.display()
        )),
    }
}

/// A proxy for the browser that takes every connection and closes it: whatever Chromium
/// would fetch (a page's loads, its own update checks) goes nowhere.
fn dead_end_proxy() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    port
}

/// A rendered page: its DOM, and the URLs it asked for (from Chromium's net log: requests
/// made on a page's behalf have the page's origin as initiator, `null` for a file; the
/// browser's own have none).
struct Rendered {
    dom: String,
    requested: Vec<String>,
}

/// Renders `page` in Chromium, every request of it sent to the proxy at `proxy`.
fn render(browser: &Path, page: &Path, proxy: u16) -> Rendered {
    let scratch = tempfile::tempdir().unwrap();
    let net_log = scratch.path().join("net-log.json");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--virtual-time-budget=3000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.path().join("profile").display()
        ))
        .arg(format!("--proxy-server=http://127.0.0.1:{proxy}"))
        .arg("--proxy-bypass-list=<-loopback>")
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: Value = serde_json::from_slice(&std::fs::read(&net_log).unwrap()).unwrap();
    let start = &log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"];
    let requested = (log["events"].as_array().unwrap().iter())
        .filter(|e| &e["type"] == start && e["params"]["initiator"] != "not an origin")
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_owned))
        .collect();
    Rendered {
        dom: String::from_utf8(out.stdout).unwrap(),
        requested,
    }
}

/// The DOM of `page`, which must have asked for nothing.
fn render_offline(browser: &Path, page: &Path, proxy: u16) -> String {
    let rendered = render(browser, page, proxy);
    assert_eq!(
        rendered.requested,
        Vec::<String>::new(),
        "{} loaded something",
        page.display()
    );
    rendered.dom
}

/// Seven journal tests; t1 and t4 record the journal without its fence, its commit store
/// named by the symbols recorded with the trace.
fn campaign(dir: &Path, shard: Shard) -> PathBuf {
    let tests = dir.join("tests");
    if !tests.exists() {
        std::fs::create_dir(&tests).unwrap();
    }
    let suite = journal_suite(&tests);
    let missing_fence = example_text("journal-missing-fence.trace").replace(
        "write 0x40 0100000000000000",
        "write 0x40 0100000000000000 @ pc=0xffffffff81000010",
    );
    let mut guest = FakeGuest::new("journal.trace");
    guest.other_traces = vec![("missing-fence", missing_fence.leak())];
    guest.symbols = Some("ffffffff81000000 t commit_transaction\n");
    let opts = PipelineOptions {
        strategy: Strategy::GlobalPrefix,
        ..PipelineOptions::default()
    };
    let out = dir.join(format!("campaign-{}of{}", shard.index, shard.count));
    let how = CampaignOptions {
        parallel: 1,
        shard,
        campaign: true,
    };
    run_campaign(&opts, &guest, &suite, &out, how, |_| {}, &mut ()).unwrap();
    out
}

/// Faults in the final image of the campaign's first test.
fn faults(run: &Path) -> PathBuf {
    let guest = FakeGuest::new("journal.trace");
    let run = RunDir::new(run);
    let test = TestCase::load(&run.test()).unwrap();
    let opts = FaultOptions {
        kinds: vec![FaultKind::BitFlip],
        places: vec![FaultPlace::Written, FaultPlace::Any],
        count: 6,
        seed: 1,
        at: FaultsAt::Final,
        range: None,
        data_writers: Vec::new(),
    };
    let out = run.root().join("faults");
    run_faults(&run, &test, &guest, &opts, &out, &mut ()).unwrap();
    out
}

/// `persim report DIR --html FILE`; its exit code must be `code` and it must print nothing
/// on stdout.
fn report_html(dir: &Path, file: &Path, code: i32) -> String {
    let out = persim(&[
        "report",
        dir.to_str().unwrap(),
        "--html",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    std::fs::read_to_string(file).unwrap()
}

/// A page is self-contained: nothing it names is fetched (SVG's namespace is a name only).
fn assert_self_contained(html: &str) {
    for attribute in ["src=", "@import", "url("] {
        assert!(!html.contains(attribute), "the page has {attribute}");
    }
    for (at, _) in html.match_indices("href=\"") {
        let target = &html[at + 6..];
        assert!(
            target.starts_with('#'),
            "a link off the page: {}",
            &target[..40.min(target.len())]
        );
    }
    assert!(html.contains("<style>") && !html.contains("<link"));
}

#[test]
fn run_campaign_and_faults_pages_render_in_chromium_and_load_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let campaign = campaign(tmp.path(), Shard::WHOLE);
    let pages = tmp.path().join("pages");
    std::fs::create_dir(&pages).unwrap();

    let campaign_page = pages.join("campaign.html");
    let html = report_html(&campaign, &campaign_page, 1);
    assert_self_contained(&html);
    let run_page = pages.join("run.html");
    let html = report_html(&campaign.join("t1"), &run_page, 1);
    assert_self_contained(&html);
    let faults_page = pages.join("faults.html");
    // silent faults in the fake's journal: findings, exit code 1
    let html = report_html(&faults(&campaign.join("t0")), &faults_page, 1);
    assert_self_contained(&html);
    assert!(html.contains("<svg"), "the summary's plot is inline");

    let browser = match chromium() {
        Ok(browser) => browser,
        Err(why) => {
            persim_vm::testing::skip("rendering in a browser", &why.to_string());
            return;
        }
    };
    let proxy = dead_end_proxy();

    let run = render_offline(&browser, &run_page, proxy);
    assert!(run.contains("Test t1 on fake"), "{run}");
    assert!(run.contains("VIOLATION: not atomic (3 states)"), "{run}");
    // `--diff`'s state diffs, removed and added lines marked, and what differs in them
    assert!(
        run.contains(
            "<span class=\"del\">-   \"home\": \"[<mark>00, 00, 00, 00, 00, 00, 00, 00</mark>, 00"
        ),
        "{run}"
    );
    assert!(
        run.contains(
            "<span class=\"add\">+   \"home\": \"[<mark>11, 11, 11, 11, 11, 11, 11, 11</mark>, 00"
        ),
        "{run}"
    );
    // the culprit's frame, named through the recorded symbols
    assert!(
        run.contains("<li><code>commit_transaction+0x10</code>"),
        "{run}"
    );
    assert!(run.contains("Timings"), "{run}");

    let campaign = render_offline(&browser, &campaign_page, proxy);
    assert!(
        campaign.contains("2 of 7 tests failed, 1 distinct problem(s)"),
        "{campaign}"
    );
    assert!(campaign.contains("id=\"run-t4\""), "{campaign}");
    assert!(campaign.contains("states differ in home"), "{campaign}");
    assert!(campaign.contains("commit_transaction+0x10"), "{campaign}");
    assert_eq!(
        campaign.matches("<tr data-mark=\"A\"").count(),
        2,
        "{campaign}"
    );
    assert_eq!(
        campaign.matches("<tr data-mark=\"✓\"").count(),
        5,
        "{campaign}"
    );

    // The filter shows only the tests of the result chosen.
    let filtered = pages.join("filtered.html");
    let chosen = "<script>document.getElementById('mark').value = 'A'; filterRows();</script>";
    let html = std::fs::read_to_string(&campaign_page).unwrap();
    std::fs::write(
        &filtered,
        html.replace("</body>", &format!("{chosen}</body>")),
    )
    .unwrap();
    let filtered = render_offline(&browser, &filtered, proxy);
    assert_eq!(
        filtered
            .matches("<tr data-mark=\"✓\" data-signature=\"\" hidden=\"\"")
            .count(),
        5,
        "{filtered}"
    );
    assert!(
        filtered.contains("<span id=\"shown\">2</span>"),
        "{filtered}"
    );

    let faults = render_offline(&browser, &faults_page, proxy);
    assert!(faults.contains("<td>bitflip</td>"), "{faults}");
    assert!(faults.contains("<th>masked</th>"), "{faults}");
    assert!(
        faults.contains("Faults by outcome"),
        "the plot's caption: {faults}"
    );
    assert!(faults.contains("Findings"), "{faults}");

    // `persim profile --html`: the profile's table and its three plots
    let profile_page = pages.join("profile.html");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/journal.trace");
    let out = persim(&[
        "profile",
        example.to_str().unwrap(),
        "--html",
        profile_page.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_self_contained(&std::fs::read_to_string(&profile_page).unwrap());
    let profile = render_offline(&browser, &profile_page, proxy);
    assert_eq!(profile.matches("<svg").count(), 3, "{profile}");
    assert!(profile.contains("bytes-over-time.svg"), "{profile}");

    // A page that loads from the network is caught.
    let loading = pages.join("loading.html");
    std::fs::write(
        &loading,
        "<!DOCTYPE html><img src=\"http://persim.invalid/x.png\">",
    )
    .unwrap();
    let requested = render(&browser, &loading, proxy).requested;
    assert_eq!(requested, ["http://persim.invalid/x.png"]);
}

/// Merged shards: the page takes each failing test's run from its shard's directory.
#[test]
fn merged_shards_page_holds_the_runs_of_every_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let shards: Vec<PathBuf> = ["1/2", "2/2"]
        .iter()
        .map(|shard| campaign(tmp.path(), shard.parse().unwrap()))
        .collect();
    let merged = tmp.path().join("merged");
    let page = tmp.path().join("merged.html");
    let out = persim(&[
        "campaign",
        "merge",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("2 of 7 tests failed"), "{html}");
    // t1 ran in shard 2/2, t4 in shard 1/2: both runs are on the page
    for test in ["t1", "t4"] {
        let at = html.find(&format!("id=\"run-{test}\"")).expect(test);
        let run = &html[at..];
        let end = run[1..].find("id=\"run-").or_else(|| run.find("<script>"));
        let run = &run[..end.unwrap()];
        assert!(run.contains("commit_transaction+0x10"), "{test}: {run}");
    }
    // `persim report` of the merged directory has no runs to show, and says why
    let alone = tmp.path().join("alone.html");
    let html = report_html(&merged, &alone, 1);
    assert!(html.contains("Its run directory is not here"), "{html}");
}

#[test]
fn a_directory_without_a_report_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("page.html");
    let out = persim(&[
        "report",
        tmp.path().to_str().unwrap(),
        "--html",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no report"), "{err}");
    assert!(!file.exists());
    let out = persim(&["report", ".", "--html", "x.html", "--diff"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}
