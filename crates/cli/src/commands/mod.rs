//! One module per `persim` command, named as the command (`record` is `persim trace
//! --fs …`, which records; `trace` is `persim trace print|pack|synth`, which convert trace
//! files): its clap arguments, their conversion into the tester's options, and printing.

pub mod analyze;
pub mod cache;
pub mod campaign;
pub mod conjure;
pub mod debug;
pub mod efficiency;
pub mod faults;
pub mod generate;
pub mod images;
pub mod profile;
pub mod record;
pub mod report;
pub mod run;
pub mod suite;
pub mod trace;

/// The long help of `--strategy` (run, suite, campaign, images): what each strategy checks
/// and, plainly, what it cannot find (docs/design/model.md, "Strategies").
/// `--trace-calls`, on `persim run`, `suite` and `trace`.
pub const TRACE_CALLS: &str = "Record calls of these functions of the traced programs and \
their shared libraries (the configuration's `tools`), with their argument registers, \
addresses in PM as PM offsets (docs/design/tracer.md, \"Library calls\"). `pmdk` stands for \
libpmemobj's transaction, allocation and persist calls and libpmem's flushes, which \
`persim analyze` checks PMDK's programming rules on (docs/design/analysis.md). A name found in no \
program or library is an error (exit code 2). Example: --trace-calls pmdk,my_commit";

pub const STRATEGIES: &str = "Which crash images to check at each failure point, and what each \
strategy cannot find:
  exhaustive     every image the model allows; but above --max-images images at a failure
                 point only a seeded sample, which can miss states (the point is marked
                 incomplete)
  global-prefix  a cut of the global store order, each dirty line before the cut or whole:
                 misses a line that persists only part of its stores after the cut (a torn
                 update inside one line)
  program-order  nothing or everything pending, at flushes and fences too: stores never
                 persist out of program order, so it never shows a flag durable before the
                 data it guards; it finds missing flushes, not ordering bugs
  reads          global-prefix over the dirty lines a traced recovery of the failure point's
                 fully persisted image reads: misses what global-prefix misses, and
                 orderings of lines that recovery does not read there
  fast           everything pending, at each flush and fence whose code (pc and stack) was
                 not seen before: misses what program-order misses, and bugs at a code
                 location's later runs
  single-line    nothing, everything, each dirty line alone persisted and each alone lost
                 (2 + 2 x lines images, no sampling below --max-images): finds a line
                 durable before another it depends on when one line makes the difference;
                 misses reorderings that need two lines or more out of order at once";
