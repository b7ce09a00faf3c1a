//! The fio JSON reader on real fio output (fio 3.33, Debian 12), recorded with
//! `fio --name=persim --ioengine=sync --rw=randwrite --sync=1 --bs=16k --size=10M
//! --time_based --runtime=N --ramp_time=1 --numjobs=2 [--group_reporting]
//! --output-format=json` on tmpfs.

use persim_efficiency::fio::parse_output;

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
