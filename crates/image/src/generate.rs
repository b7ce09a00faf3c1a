//! The crash-image engine: replay a trace through the crash model, materialise each crash
//! image on top of the persisted image, hash it and (optionally) store it, and hand each
//! failure point to a [`PointSink`] as soon as it is done. `persim images` runs it alone;
//! a run's images stage runs it into the run directory's store.

use crate::dpwc_log::dpwc_layout;
use crate::ext4_journal::journal_layout;
use crate::images_json::{ImageRecord, PointReads, PointRecord, PointSink};
use crate::pmemobj_pool::pmemobj_layout;
use crate::writecache::writecache_layout;
use crate::xfs_log::xfs_log_layout;
use crate::zfs_labels::zfs_layout;
use crate::zil_pmem_log::zil_pmem_layout;
use crate::{Image, ImageError, ImageStore, DEFAULT_HASH_LEVEL};
use persim_model::{
    CacheMode, Config, CrashImages, Explored, FailureKind, FailurePoint, FailureView, ModelError,
    Origin, ReadGuide, Replay, Scope, Sink, Strategy,
};
use persim_trace::{Reader, Recording, TraceError};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the store's index is saved during a run, so an interrupted run can resume.
const INDEX_SAVE_INTERVAL: Duration = Duration::from_secs(10);
/// The largest PM plus block device an image may cover. Images are sparse, but hashing
/// and materialising cost grows with the size (64 GiB: ~40 s and 400 MB for a 7-image
/// trace); beyond this a typo (`--pm-size 16777216G`) would exhaust the machine.
const MAX_IMAGE_LEN: u64 = 64 << 30;
/// Entries between progress reports.
const PROGRESS_ENTRIES: u64 = 4096;
/// Memory one crash image of a failure point takes while the strategy chooses it (a
/// candidate, its copy in the set that keeps them distinct, its choice and image, its
/// hash): a fixed part, and a part per dirty line (its prefix length in several copies,
/// its address in the choice). An upper bound: 20 000 images at a 1000-line failure point
/// are estimated at 925 MiB and peaked at 258 MiB (docs/design/images.md, "Memory").
const BYTES_PER_CHOSEN_IMAGE: u64 = 512;
const BYTES_PER_CHOSEN_IMAGE_LINE: u64 = 48;
/// Memory one distinct image takes for the rest of a generation (its hash as a key of
/// `Generated::images`, and in the store its record).
const BYTES_PER_DISTINCT_IMAGE: u64 = 256;

/// What decides the crash images of a trace, and where they go.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// PM size; None: the trace header's.
    pub pm_size: Option<u64>,
    /// Block-device size; None: the trace header's.
    pub blk_size: Option<u64>,
    pub cache: CacheMode,
    pub strategy: Strategy,
    pub max_images: usize,
    pub seed: u64,
    /// Only failure points from this checkpoint on; earlier entries are replayed only.
    pub from_checkpoint: Option<u64>,
    /// Which failure points get images; the others are replayed only.
    pub points: Points,
    pub hash_level: u32,
    /// Initial contents; None: TRACE.initial if it exists, else zeros.
    pub initial: Option<PathBuf>,
    /// Store distinct images in this directory.
    pub store: Option<PathBuf>,
    /// Keep every image's contents as hex (for `persim images --json --hex`).
    pub hex: bool,
    /// Write images into a directory as `<hash>.img`.
    pub materialise: Option<Materialise>,
    /// How the `reads` strategy learns what recovery reads.
    pub guidance: Guidance,
    /// Which dirty lines `reads` and `global-prefix` explore.
    pub scope: Scope,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            pm_size: None,
            blk_size: None,
            cache: CacheMode::Volatile,
            strategy: Strategy::Exhaustive,
            max_images: Config::DEFAULT_MAX_IMAGES,
            seed: 0,
            from_checkpoint: None,
            points: Points::All,
            hash_level: DEFAULT_HASH_LEVEL,
            initial: None,
            store: None,
            hex: false,
            materialise: None,
            guidance: Guidance::Unguided,
            scope: Scope::default(),
        }
    }
}

/// Image files a generation writes.
#[derive(Clone, Debug)]
pub struct Materialise {
    pub dir: PathBuf,
    /// The hashes (hex) of the images to write; None: every image made.
    pub hashes: Option<BTreeSet<String>>,
}

/// The failure points that get images. Making a point's images costs a copy, a hash and
/// (under `reads`) its fully persisted image; on a long trace that is most of the work,
/// so a caller that needs a few points names them.
#[derive(Clone, Debug, Default)]
pub enum Points {
    #[default]
    All,
    /// Those of these kinds (`End`: the trace's end; `Checkpoint`: each checkpoint's
    /// hypercall).
    Kinds(Vec<FailureKind>),
    /// Those at these trace indices. Under `reads` a point's split depends on the read set
    /// of the points before it: `recorded` holds each point's fully persisted image's hash
    /// as the run's index recorded it, so the points between need no image.
    At {
        indices: Arc<BTreeSet<u64>>,
        recorded: Arc<BTreeMap<u64, String>>,
    },
}

impl Points {
    fn includes(&self, point: &FailurePoint) -> bool {
        match self {
            Points::All => true,
            Points::Kinds(kinds) => kinds.contains(&point.kind),
            Points::At { indices, .. } => indices.contains(&point.index),
        }
    }

    fn recorded(&self, index: u64) -> Option<&String> {
        match self {
            Points::At { recorded, .. } => recorded.get(&index),
            _ => None,
        }
    }
}

/// The PM words recovery read, by the hash (hex) of the image recovered; None: unknown.
pub type ReadSets = BTreeMap<String, Option<Vec<u64>>>;

/// What the `reads` strategy knows of recovery's reads.
#[derive(Clone, Debug, Default)]
pub enum Guidance {
    /// Nothing: every dirty line is explored (`global-prefix`).
    #[default]
    Unguided,
    /// Each failure point's only image is its fully persisted one.
    FullyPersisted,
    /// The first pass of `reads`: the fully persisted image of each failure point with a
    /// line that may be explored (elsewhere no read set can change the images).
    FullyPersistedToGuide,
    /// The second pass: explore by the read sets of the fully persisted images, with NT
    /// prefixes where the set says.
    ReadSets(Arc<ReadSets>, NtPrefixesAt),
}

/// The failure points where `reads` explores NT prefixes.
#[derive(Clone, Debug, Default)]
pub enum NtPrefixesAt {
    #[default]
    Nowhere,
    Everywhere,
    /// These failure points (trace indices).
    Points(Arc<BTreeSet<u64>>),
}

impl NtPrefixesAt {
    pub fn includes(&self, index: u64) -> bool {
        match self {
            NtPrefixesAt::Nowhere => false,
            NtPrefixesAt::Everywhere => true,
            NtPrefixesAt::Points(points) => points.contains(&index),
        }
    }
}

/// A generation so far (reported every few thousand entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub entries: u64,
    pub failure_points: u64,
    pub images: usize,
}

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(
        "the PM size of {} is unknown: give --pm-size BYTES (or start the trace with \
         `# persim-trace pm-size=BYTES`)",
        trace.display()
    )]
    UnknownPmSize { trace: PathBuf },
    #[error(
        "PM of {pm_size:#x} bytes and a block device of {blk_size:#x} bytes are more than \
         Persim's limit of {} GiB per crash image: check --pm-size/--blk-size or the trace \
         header of {}",
        MAX_IMAGE_LEN >> 30,
        trace.display()
    )]
    TooLarge {
        pm_size: u64,
        blk_size: u64,
        trace: PathBuf,
    },
    #[error("cannot read the initial image {}", path.display())]
    InitialUnreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the initial image {} has {len} bytes, but {what} has {want} bytes: give the initial \
         image of this trace (or --pm-size/--blk-size of its machine)",
        path.display()
    )]
    InitialLength {
        path: PathBuf,
        len: u64,
        what: &'static str,
        want: u64,
    },
    #[error("reading the initial image {names}")]
    InitialContents {
        names: String,
        #[source]
        source: io::Error,
    },
    #[error("replaying {}", trace.display())]
    Replay {
        trace: PathBuf,
        #[source]
        source: ModelError,
    },
    #[error(
        "--max-images {cap} does not fit in memory{at}: each crash image a failure point \
         chooses takes about {per_image} bytes until it is recorded, and a generation may use \
         {budget_mib} MiB (half the memory available when it started); give --max-images \
         {fits} or less",
        at = at_point(*point, *lines)
    )]
    CapTooLarge {
        cap: usize,
        /// The largest cap that fits.
        fits: u64,
        per_image: u64,
        budget_mib: u64,
        /// The failure point (trace index) and its dirty lines, when refused there.
        point: Option<u64>,
        lines: usize,
    },
    #[error(
        "the {images} distinct crash images made up to failure point {point} take about \
         {used_mib} MiB, more than the {budget_mib} MiB a generation may use (half the memory \
         available when it started): give a lower --max-images (now {cap})"
    )]
    TooManyImages {
        images: usize,
        point: u64,
        used_mib: u64,
        budget_mib: u64,
        cap: usize,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Image(#[from] ImageError),
    /// Not `transparent`: the `io::Error` must stay in the error's chain, where the CLI
    /// looks for a closed pipe (`persim images | head` ends normally).
    #[error("generating the crash images")]
    Io(#[from] io::Error),
}

/// What a generation produced.
#[derive(Debug)]
pub struct Generated {
    pub config: Config,
    pub entries: u64,
    pub failure_points: u64,
    /// Failure points where a sample was taken.
    pub incomplete: u64,
    /// How many images the strategy chooses at all failure points together, uncapped and
    /// before images equal in content are merged (saturating; `None`: a sampled point's
    /// set could not be counted).
    pub space: Option<u128>,
    /// The distinct images by hash (hex).
    pub images: BTreeMap<String, ImageRecord>,
    /// Where they were stored, if they were.
    pub store: Option<PathBuf>,
    pub took: Duration,
}

/// Replays `trace` with `opts`; `started(config)` is called before the first failure
/// point (for a caller that prints a title), then `sink` gets every failure point and
/// `progress` a [`Progress`] every few thousand entries.
pub fn generate_images(
    opts: &GenerateOptions,
    trace: &Path,
    started: impl FnOnce(&Config) -> io::Result<()>,
    sink: &mut dyn PointSink,
    progress: &mut dyn FnMut(Progress),
) -> Result<Generated, GenerateError> {
    let began = Instant::now();
    let reader = Reader::open(trace)?;
    let header = reader.header();
    let Some(pm_size) = opts
        .pm_size
        .or((header.pm_size > 0).then_some(header.pm_size))
    else {
        return Err(GenerateError::UnknownPmSize {
            trace: trace.to_path_buf(),
        });
    };
    let mut config = Config {
        cache: opts.cache,
        strategy: opts.strategy,
        max_images: opts.max_images,
        seed: opts.seed,
        pm_size,
        blk_size: opts.blk_size.unwrap_or(header.blk_size),
        nt_prefixes: false,
        scope: opts.scope,
        journal: None,
        xfs_log: None,
        dpwc: None,
        writecache: None,
        zil_pmem: None,
        zfs: None,
        pmemobj: None,
    };
    if config
        .pm_size
        .checked_add(config.blk_size)
        .is_none_or(|len| len > MAX_IMAGE_LEN)
    {
        return Err(GenerateError::TooLarge {
            pm_size: config.pm_size,
            blk_size: config.blk_size,
            trace: trace.to_path_buf(),
        });
    }
    let budget = MemoryBudget::available();
    budget.check_cap(config.max_images, None, 0)?;
    let persisted = initial_image(opts, trace, &config)?.with_hash_level(opts.hash_level)?;
    if opts.scope == Scope::Program {
        config.journal = journal_layout(&persisted, config.pm_size);
        config.xfs_log = xfs_log_layout(&persisted, config.pm_size);
        config.dpwc = dpwc_layout(&persisted, config.pm_size);
        config.writecache = writecache_layout(&persisted, config.pm_size);
        config.zil_pmem = zil_pmem_layout(&persisted, config.pm_size);
        config.zfs = zfs_layout(&persisted, config.pm_size);
        config.pmemobj = pmemobj_layout(&persisted, config.pm_size);
    }
    let store = opts.store.as_ref().map(ImageStore::open).transpose()?;
    started(&config)?;
    let mut materialiser = Materialiser {
        persisted,
        store,
        hex: opts.hex,
        materialise: opts.materialise.as_ref(),
        from_checkpoint: opts.from_checkpoint,
        chosen: &opts.points,
        guidance: &opts.guidance,
        guide: ReadGuide::default(),
        sink,
        images: BTreeMap::new(),
        points: 0,
        incomplete: 0,
        space: Some(0),
        index_saved: Instant::now(),
        budget,
        refused: None,
    };
    let mut entries = 0u64;
    let replaying = |source| GenerateError::Replay {
        trace: trace.to_path_buf(),
        source,
    };
    let replayed = (|| -> Result<(), GenerateError> {
        let mut replay = Replay::new(config.clone());
        for entry in reader.read_ahead() {
            replay.step(&entry?, &mut materialiser).map_err(replaying)?;
            entries += 1;
            if entries.is_multiple_of(PROGRESS_ENTRIES) {
                progress(Progress {
                    entries,
                    failure_points: materialiser.points,
                    images: materialiser.images.len(),
                });
            }
        }
        replay.finish(&mut materialiser).map_err(replaying)
    })();
    // Also after a failure: every image file in the store is in its index, none orphaned.
    if let Some(store) = &materialiser.store {
        store.flush_index()?;
    }
    if let Some(refused) = materialiser.refused {
        return Err(refused);
    }
    replayed?;
    Ok(Generated {
        config,
        entries,
        failure_points: materialiser.points,
        incomplete: materialiser.incomplete,
        space: materialiser.space,
        images: materialiser.images,
        store: materialiser.store.map(|s| s.dir().to_path_buf()),
        took: began.elapsed(),
    })
}

/// The persisted image the trace starts from: the given initial image (PM, then the block
/// device), or the recorded ones beside the trace (`TRACE.initial`, and
/// `TRACE.blk-initial` with a block device), or zeros. Each must be exactly as long as
/// its medium.
fn initial_image(
    opts: &GenerateOptions,
    trace: &Path,
    config: &Config,
) -> Result<Image, GenerateError> {
    let parts = match &opts.initial {
        Some(path) => vec![(path.clone(), config.image_len(), "PM and block device")],
        None => {
            let recording = Recording::new(trace);
            let pm = recording.initial_image();
            if !pm.is_file() {
                return Ok(Image::zeroed(config.image_len()));
            }
            let mut parts = vec![(pm, config.pm_size, "PM")];
            if config.blk_size > 0 {
                let blk = recording.initial_block_image();
                if blk.is_file() {
                    parts.push((blk, config.blk_size, "the block device"));
                } else {
                    // A hand-made PM initial image for a trace with a block device.
                    parts[0].1 = config.image_len();
                }
            }
            parts
        }
    };
    for (path, want, what) in &parts {
        let len = std::fs::metadata(path)
            .map_err(|source| GenerateError::InitialUnreadable {
                path: path.clone(),
                source,
            })?
            .len();
        if len != *want {
            return Err(GenerateError::InitialLength {
                path: path.clone(),
                len,
                what: if config.blk_size == 0 { "PM" } else { what },
                want: *want,
            });
        }
    }
    let parts: Vec<(&Path, u64)> = parts
        .iter()
        .map(|(p, len, _)| (p.as_path(), *len))
        .collect();
    Image::from_files(&parts).map_err(|source| {
        let names: Vec<String> = parts.iter().map(|(p, _)| p.display().to_string()).collect();
        GenerateError::InitialContents {
            names: names.join(" and "),
            source,
        }
    })
}

/// Keeps the persisted image, materialises each crash image on top of it, records it and
/// passes each failure point on as soon as it is done, so memory does not grow with the
/// trace: only the distinct images are remembered.
struct Materialiser<'a> {
    persisted: Image,
    store: Option<ImageStore>,
    hex: bool,
    materialise: Option<&'a Materialise>,
    /// Failure points before this checkpoint (`None` sorts first) are skipped.
    from_checkpoint: Option<u64>,
    chosen: &'a Points,
    guidance: &'a Guidance,
    guide: ReadGuide,
    sink: &'a mut dyn PointSink,
    images: BTreeMap<String, ImageRecord>,
    points: u64,
    incomplete: u64,
    space: Option<u128>,
    index_saved: Instant,
    budget: MemoryBudget,
    /// Why the generation stopped at a failure point for lack of memory.
    refused: Option<GenerateError>,
}

impl Sink for Materialiser<'_> {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.persisted.write(offset, bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        if view.point.checkpoint < self.from_checkpoint {
            return Ok(());
        }
        if !self.chosen.includes(&view.point) {
            self.follow(view);
            return Ok(());
        }
        let lines = view.pending_lines().len();
        let cap = view.config().max_images;
        let fits = self
            .budget
            .check_cap(cap, Some(view.point.index), lines)
            .and_then(|()| {
                self.budget
                    .check_distinct(self.images.len(), view.point.index, cap)
            });
        if let Err(e) = fits {
            let message = e.to_string();
            self.refused = Some(e);
            return Err(io::Error::other(message));
        }
        let (crash, mut reads) = self.choose(view);
        let mut hashes: Vec<String> = Vec::new();
        for image in &crash.images {
            let mut contents = self.persisted.clone();
            view.apply(image, |offset, bytes| contents.write(offset, bytes));
            let origin = Origin {
                point: view.point,
                choice: image.choice.clone(),
                block: image.block.clone(),
            };
            let hash = match &mut self.store {
                Some(store) => {
                    let hash = store.insert(&contents, origin)?.to_hex().to_string();
                    self.sink.stored(&hash, &contents)?;
                    hash
                }
                None => contents.hash().to_hex().to_string(),
            };
            if let Some(Materialise { dir, hashes }) = self.materialise {
                let path = ImageStore::image_file(dir, &hash);
                let wanted = hashes.as_ref().is_none_or(|h| h.contains(&hash));
                if wanted && !path.exists() {
                    contents.write_to(&path)?;
                }
            }
            if let Some(reads) = &mut reads {
                if view.applies_nt(image) && !reads.nt_images.contains(&hash) {
                    reads.nt_images.push(hash.clone());
                }
            }
            if !hashes.contains(&hash) {
                hashes.push(hash.clone());
            }
            let hex = self.hex;
            self.images.entry(hash).or_insert_with(|| ImageRecord {
                hex: hex.then(|| to_hex(&contents)),
            });
        }
        self.points += 1;
        self.incomplete += u64::from(crash.incomplete);
        self.space = self
            .space
            .zip(crash.space)
            .map(|(a, b)| a.saturating_add(b));
        let guided = matches!(
            view.config().strategy,
            Strategy::GlobalPrefix | Strategy::Reads | Strategy::SingleLine
        );
        self.sink.point(&PointRecord {
            index: view.point.index,
            kind: view.point.kind,
            checkpoint: view.point.checkpoint,
            images: hashes,
            incomplete: crash.incomplete,
            space: crash.space,
            reads,
            runtime_lines: match guided {
                true => view.runtime_lines().collect(),
                false => Vec::new(),
            },
            outside_program_lines: match guided {
                true => view.outside_program_lines().collect(),
                false => Vec::new(),
            },
            protected_lines: match guided {
                true => view.protected_lines().collect(),
                false => Vec::new(),
            },
            unreachable_blocks: match guided {
                true => view.unreachable_blocks().collect(),
                false => Vec::new(),
            },
            journal_violations: view.journal_violations.clone(),
        })?;
        if let Some(store) = &self.store {
            if self.index_saved.elapsed() >= INDEX_SAVE_INTERVAL {
                store.flush_index()?;
                self.index_saved = Instant::now();
            }
        }
        Ok(())
    }
}

impl Materialiser<'_> {
    /// The failure point's images, as the guidance of `reads` says.
    fn choose(&mut self, view: &FailureView<'_>) -> (CrashImages, Option<PointReads>) {
        let durable = |offset: u64, bytes: &mut [u8]| self.persisted.read(offset, bytes);
        let sets = match self.guidance {
            Guidance::Unguided => {
                let changes = |line| !view.rewrites_durable(line, durable);
                return (view.crash_images_guided(changes, true), None);
            }
            Guidance::FullyPersistedToGuide if !view.has_explorable_lines(durable) => {
                let none = CrashImages {
                    space: Some(0),
                    ..CrashImages::default()
                };
                return (none, None);
            }
            Guidance::FullyPersisted | Guidance::FullyPersistedToGuide => {
                let only = CrashImages {
                    images: vec![view.fully_persisted()],
                    incomplete: false,
                    space: Some(1),
                };
                return (only, None);
            }
            Guidance::ReadSets(sets, nt_at) => (sets, nt_at),
        };
        let (sets, nt_at) = sets;
        let hash = self.fully_persisted_hash(view);
        let explorable = view.has_explorable_lines(durable);
        let read = sets.get(&hash).and_then(Option::as_deref);
        let lines = match explorable {
            true => self.guide.split(view, read),
            false => Explored {
                skipped: view.pending_lines().iter().map(|l| l.line).collect(),
                ..Explored::default()
            },
        };
        let nt_prefixes = nt_at.includes(view.point.index);
        let explores = |line| lines.explores(line) && !view.rewrites_durable(line, durable);
        let crash = view.crash_images_guided(explores, nt_prefixes);
        let reads = PointReads {
            fully_persisted: hash,
            known: read.is_some() || !explorable,
            lines,
            nt_prefixes,
            nt_images: Vec::new(),
        };
        (crash, Some(reads))
    }
}

impl Materialiser<'_> {
    /// A failure point without images: under `reads` the guide still learns its
    /// recovery's read set, from the hash the run recorded or else from its fully
    /// persisted image.
    fn follow(&mut self, view: &FailureView<'_>) {
        let Guidance::ReadSets(sets, _) = self.guidance else {
            return;
        };
        let hash = match self.chosen.recorded(view.point.index) {
            Some(hash) => hash.clone(),
            None => self.fully_persisted_hash(view),
        };
        self.guide.learn(sets.get(&hash).and_then(Option::as_deref));
    }

    fn fully_persisted_hash(&self, view: &FailureView<'_>) -> String {
        let mut fully_persisted = self.persisted.clone();
        view.apply(&view.fully_persisted(), |offset, bytes| {
            fully_persisted.write(offset, bytes)
        });
        fully_persisted.hash().to_hex().to_string()
    }
}

/// The memory a generation may take: half of what was available when it started, so that
/// a cap too large for the machine is refused instead of growing until the kernel kills
/// the process.
#[derive(Clone, Copy, Debug)]
struct MemoryBudget {
    bytes: u64,
}

impl MemoryBudget {
    fn available() -> MemoryBudget {
        let available_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|info| {
                let line = info.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
                line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
            });
        MemoryBudget {
            // Without /proc (not Linux): no limit known.
            bytes: available_kib.map_or(u64::MAX, |kib| kib.saturating_mul(1024) / 2),
        }
    }

    /// Refuses `cap` when that many images of a failure point with `lines` dirty lines
    /// would not fit (before the replay with no lines, then at each failure point).
    fn check_cap(&self, cap: usize, point: Option<u64>, lines: usize) -> Result<(), GenerateError> {
        let per_image = BYTES_PER_CHOSEN_IMAGE + BYTES_PER_CHOSEN_IMAGE_LINE * lines as u64;
        if (cap as u64).saturating_mul(per_image) <= self.bytes {
            return Ok(());
        }
        Err(GenerateError::CapTooLarge {
            cap,
            fits: self.bytes / per_image,
            per_image,
            budget_mib: self.bytes >> 20,
            point,
            lines,
        })
    }

    /// Refuses to go on when the distinct images made so far take the budget.
    fn check_distinct(&self, images: usize, point: u64, cap: usize) -> Result<(), GenerateError> {
        let used = images as u64 * BYTES_PER_DISTINCT_IMAGE;
        if used <= self.bytes {
            return Ok(());
        }
        Err(GenerateError::TooManyImages {
            images,
            point,
            used_mib: used >> 20,
            budget_mib: self.bytes >> 20,
            cap,
        })
    }
}

/// Where a cap was refused, for [`GenerateError::CapTooLarge`].
fn at_point(point: Option<u64>, lines: usize) -> String {
    match point {
        Some(index) => format!(" at failure point {index} ({lines} dirty lines)"),
        None => String::new(),
    }
}

fn to_hex(image: &Image) -> String {
    let mut bytes = vec![0u8; image.len() as usize];
    image.read(0, &mut bytes);
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
