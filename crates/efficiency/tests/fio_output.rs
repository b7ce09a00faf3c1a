//! The fio JSON reader on real fio output (fio 3.33, Debian 12), recorded with
//! `fio --name=persim --ioengine=sync --rw=randwrite --sync=1 --bs=16k --size=10M
//! --time_based --runtime=N --ramp_time=1 --numjobs=2 [--group_reporting]
//! --output-format=json` on tmpfs.

use persim_efficiency::fio::{parse_output, Latency};

#[test]
fn grouped_jobs_are_one_entry_that_counts_numjobs() {
    let r = parse_output(include_str!("data/fio-3.33-randwrite-2jobs-grouped.json")).unwrap();
    assert_eq!(r.fio_version, "fio-3.33");
    assert_eq!(r.jobs, 2);
    assert_eq!(r.bytes_written, 945_733_632);
    assert_eq!(r.bytes_read, 0);
    assert_eq!(r.runtime_s, 2.003);
    assert_eq!(r.writes, 57_723);
    assert!((r.bandwidth() - 945_733_632.0 / 2.003).abs() < 1.0);
}

#[test]
fn separate_jobs_are_summed_over_the_longest_runtime() {
    let r = parse_output(include_str!("data/fio-3.33-randwrite-2jobs.json")).unwrap();
    assert_eq!(r.jobs, 2);
    assert_eq!(r.bytes_written, 38_338_560 + 34_209_792);
    assert_eq!(r.runtime_s, 1.003);
}

#[test]
fn a_failed_job_or_damaged_output_is_an_error() {
    let text = include_str!("data/fio-3.33-randwrite-2jobs.json");
    let failed = text.replacen("\"error\" : 0", "\"error\" : 28", 1);
    let err = parse_output(&failed).unwrap_err();
    assert!(err.contains("error 28"), "{err}");
    assert!(parse_output(&text[..text.len() / 2]).is_err());
    assert!(parse_output("{\"jobs\": []}").is_err());
}

/// `fio --name=persim --directory=D --numjobs=2 --ioengine=sync --rw=randwrite --bs=4k
/// --size=1M --fsync=1 --group_reporting --output-format=json` (fio 3.33, on ext4): the
/// writes' completion latency and the fsyncs' latency, in microseconds, from fio's ns.
#[test]
fn completion_and_sync_latencies_are_read_in_microseconds() {
    let r = parse_output(include_str!(
        "data/fio-3.33-randwrite-4k-fsync-2jobs-grouped.json"
    ))
    .unwrap();
    assert_eq!(r.writes, 512);
    let Some(Latency {
        mean_us,
        p50_us,
        p99_us,
    }) = r.write_clat
    else {
        panic!("no write latency")
    };
    assert!((mean_us - 33.259160156).abs() < 1e-9, "{mean_us}");
    assert_eq!((p50_us, p99_us), (Some(4.768), Some(228.352)));
    let sync = r.sync_lat.unwrap();
    assert!((sync.mean_us - 3168.254933333).abs() < 1e-6, "{sync:?}");
    assert_eq!(sync.p50_us, Some(2056.192));
}

/// Jobs reported apart: the mean weighted by each job's writes, no percentiles (they do
/// not merge); no syncs, no sync latency.
#[test]
fn separate_jobs_merge_their_mean_latency_by_count() {
    let text = include_str!("data/fio-3.33-randwrite-2jobs.json");
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let clat = |j: usize, k: &str| v["jobs"][j]["write"]["clat_ns"][k].as_f64().unwrap();
    let weighted = (clat(0, "N") * clat(0, "mean") + clat(1, "N") * clat(1, "mean"))
        / (clat(0, "N") + clat(1, "N"))
        / 1000.0;
    let r = parse_output(text).unwrap();
    let write = r.write_clat.unwrap();
    assert!(
        (write.mean_us - weighted).abs() < 1e-9,
        "{write:?} {weighted}"
    );
    assert_ne!(clat(0, "mean"), clat(1, "mean"));
    assert_eq!((write.p50_us, write.p99_us), (None, None));
    assert_eq!(r.sync_lat, None);
}
