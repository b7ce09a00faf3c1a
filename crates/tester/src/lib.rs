//! Persim's pipeline as a library: what a test is (`cases`: the test format, suites, the
//! ACE generator), the run directory, and the stages (`stages`: one file each — record,
//! reads, images, states, nt, verdicts — over one run), each reporting progress to an
//! observer. The `persim` binary parses arguments into these options and prints;
//! campaigns run many tests through the same stages.
//!
//! What runs the guest is a [`Guest`]: the VM ([`VmGuest`]), or a fake in tests.

mod campaign;
mod cases;
mod efficiency;
mod faults;
mod guest;
mod home;
mod inputs;
mod options;
mod progress;
mod rundir;
mod stages;

pub use campaign::{
    merge, run_campaign, CampaignOptions, Group, Shard, SuiteResults, TestEvent, TestResult,
};
pub use cases::{ace, Suite, TestCase};
pub use efficiency::{
    guest_job, guest_profile_table, guest_svgs, guest_table, run_guest_series, GuestPoint,
    GuestProgress, GuestResults, GuestSeriesOptions,
};
pub use faults::{run_faults, FaultOptions, FaultPlace, FaultResult, FaultsAt, FaultsReport};
pub use guest::{Guest, Recorded, VmGuest};
pub use home::Home;
pub use inputs::Inputs;
pub use options::{NtPrefixes, PipelineOptions};
pub use progress::{Event, Observer, Pass, Stage};
pub use rundir::RunDir;
pub use stages::{generate_options, judge, materialise_images, recorded_guidance, run_test};
