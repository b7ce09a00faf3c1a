//! One module per `persim` command, named as the command (`record` is `persim trace
//! --fs …`, which records; `trace` is `persim trace print|pack|synth`, which convert trace
//! files): its clap arguments, their conversion into the tester's options, and printing.

pub mod analyze;
pub mod campaign;
pub mod debug;
pub mod generate;
pub mod images;
pub mod profile;
pub mod record;
pub mod report;
pub mod run;
pub mod suite;
pub mod trace;
