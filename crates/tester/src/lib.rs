//! Persim's pipeline as a library: the test format and suites, the run directory, and one
//! function per stage — record, images, states, verdicts — each reporting progress to an
//! observer. The `persim` binary parses arguments into these options and prints; campaigns
//! and heuristics that run VMs while generating images build on the same stages.
//!
//! What runs the guest is a [`Guest`]: the VM ([`VmGuest`]), or a fake in tests.

pub mod ace;
mod campaign;
mod guest;
mod home;
mod images;
mod images_index;
mod inputs;
mod options;
mod pipeline;
mod progress;
mod reads;
mod rundir;
mod states;
mod testcase;

pub use campaign::{
    merge, run_campaign, CampaignOptions, Group, Shard, SuiteResults, TestEvent, TestResult,
};
pub use guest::{Guest, Recording, VmGuest};
pub use home::Home;
pub use images::{generate_images, ImagesSummary};
pub use images_index::{
    ImageRecord, ImagesIndex, ImagesJsonWriter, PointReads, PointRecord, PointSink,
};
pub use inputs::Inputs;
pub use options::{Guidance, ImagesOptions, NtPrefixes, NtPrefixesAt, PipelineOptions, ReadSets};
pub use pipeline::{judge, materialise_images, recorded_guidance, run_test};
pub use progress::{Event, Observer, Stage};
pub use rundir::RunDir;
pub use states::{extract_missing, saved_states, SavedStates};
pub use testcase::{Suite, TestCase};
