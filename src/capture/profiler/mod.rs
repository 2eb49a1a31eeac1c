//! The profiler: drives CUPTI capture and hands the records to analysis.
//!
//! Layer 3. A [`Profiler`] attaches to the current CUDA context (or a device's primary
//! context) and joins the process-wide capture hub (the private `hub` module), which routes the driver
//! and runtime launch and transfer callbacks and the activity records of that context to it.
//! It keeps a [`SessionTree`] of the user's ranges. Each launch is recorded as it happens
//! (correlation id, thread, innermost open range, counter cycle and ordinal); activity
//! buffers are flushed at range boundaries; in counter modes the range profiler's images are
//! decoded and evaluated cycle by cycle. [`Profiler::finish`] correlates and aggregates into
//! a [`Report`].
//!
//! # Modes
//! - [`ProfilingMode::KernelReplay`]: CUPTI auto range + kernel replay; kernel time from
//!   `gpu__time_duration.sum` (activity records have start == end while it runs).
//! - [`ProfilingMode::Trace`]: activity and callbacks only, no counters; kernels, memcpys and
//!   memsets carry their real start and end. Range push and pop times come from
//!   `cuptiGetTimestamp`, the clock of the activity records, so the whole trace lives in one
//!   clock domain; (CUPTI, wall clock) pairs taken at start and finish convert it to wall
//!   time and measure the drift between the two.
//!
//! One profiler per CUDA context may run at a time (one per GPU); profilers may follow one
//! another in a process, and never see each other's records.
//!
//! # Kernel replay and the launch gate
//! In [`ProfilingMode::KernelReplay`] CUPTI numbers counter ranges "0", "1", ... in the order
//! kernels reach it. gmprof numbers launches in its launch callback; to make the two orders
//! the same when several threads launch, the callback holds a gate from the launch's entry
//! to its exit. Kernel replay serializes kernels anyway, so the gate costs nothing extra.
//!
//! # No kernel limit
//! The counter data image holds `ranges_per_cycle` ranges (sized from a memory budget). When
//! a cycle is full, the next launch first stops the profiler, decodes and evaluates the
//! image, re-initializes it and starts again, as NVIDIA's profiling_injection sample does.
//! Host memory then grows with the results, not with the number of kernels.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::analysis::correlate::Correlator;
use crate::capture::hub::{self, CaptureSession, HubMembership};
use crate::capture::metrics::MetricCatalog;
use crate::checked::activity::{self, ActivityRecord};
use crate::checked::callback::{ApiCallback, ApiDomain, CallbackSite, LaunchKind};
use crate::checked::driver::{self, Context, PrimaryContext};
use crate::checked::host::ProfilerHost;
use crate::checked::range_profiler::{CounterDataImage, RangeConfig, RangeMode, RangeProfiler, ReplayMode};
use crate::checked::target::{self, ProfilerApi};
use crate::checked::{Cupti, Driver};
use crate::error::{Error, Result};
use crate::model::session::SessionTree;
use crate::model::{
    ClockPair, ClockSync, CounterRange, LaunchApi, LaunchRecord, MetricSet, ProfilingMode, RangeId, ThreadId,
    TransferCall, GPU_TIME_METRIC,
};
use crate::report::{CaptureInfo, Report};

/// Default host memory for one counter data image.
pub const DEFAULT_COUNTER_IMAGE_BUDGET: usize = 256 << 20;
/// Default upper bound of ranges per counter cycle.
pub const DEFAULT_MAX_RANGES_PER_CYCLE: usize = 2000;

/// Which open range a kernel or transfer is attributed to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RangeScope {
    /// The innermost open range of the launching thread; none means the `<root>` row.
    #[default]
    Thread,
    /// As `Thread`, but a thread with no open range falls back to the most recently pushed
    /// range still open on any thread. Use it when helper threads launch work on behalf of
    /// a thread that holds the ranges: PyTorch runs backward on its autograd thread, whose
    /// kernels otherwise all land in `<root>`.
    Process,
}

impl std::str::FromStr for RangeScope {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "thread" => Ok(RangeScope::Thread),
            "process" => Ok(RangeScope::Process),
            other => Err(Error::InvalidConfig(format!("unknown range scope '{other}': use thread or process"))),
        }
    }
}

/// Configures and builds a [`Profiler`].
#[derive(Clone, Debug)]
#[must_use]
pub struct ProfilerBuilder {
    metrics: Vec<String>,
    mode: Option<ProfilingMode>,
    device: Option<usize>,
    context: Option<Context>,
    flush_on_range_boundaries: Option<bool>,
    synchronize_on_pop: bool,
    range_scope: RangeScope,
    counter_image_budget: usize,
    max_ranges_per_cycle: usize,
    max_nesting_levels: u16,
    iteration_replay: Option<(String, usize)>,
}

/// Default nesting levels CUPTI collects in [`ProfilingMode::PerRange`]: the outermost
/// only, since under user replay each level needs its own passes.
pub const DEFAULT_MAX_NESTING_LEVELS: u16 = 1;

impl Default for ProfilerBuilder {
    fn default() -> Self {
        ProfilerBuilder {
            metrics: vec!["dram__bytes_read.sum".into(), "dram__bytes_write.sum".into()],
            mode: None,
            device: None,
            context: None,
            flush_on_range_boundaries: None,
            synchronize_on_pop: false,
            range_scope: RangeScope::Thread,
            counter_image_budget: DEFAULT_COUNTER_IMAGE_BUDGET,
            max_ranges_per_cycle: DEFAULT_MAX_RANGES_PER_CYCLE,
            max_nesting_levels: DEFAULT_MAX_NESTING_LEVELS,
            iteration_replay: None,
        }
    }
}

impl ProfilerBuilder {
    /// The metrics to collect (full names, e.g. `dram__bytes_read.sum`).
    /// `gpu__time_duration.sum` is always added: kernel time comes from it.
    pub fn metrics<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.metrics = names.into_iter().map(Into::into).collect();
        self
    }

    /// How counters are collected. Default: [`ProfilingMode::PerKernel`] when the metric
    /// set fits in one pass (no replay needed: near-native speed), else
    /// [`ProfilingMode::KernelReplay`] (CUPTI replays each kernel itself; choose PerKernel or
    /// PerRange explicitly and use [`Profiler::replay`] for the faster user replay).
    pub fn mode(mut self, mode: ProfilingMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Profile this CUDA device's primary context when no context is current (default 0).
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// Profile this context, current or not (injection attaches to each new context).
    pub(crate) fn context(mut self, context: Context) -> Self {
        self.context = Some(context);
        self
    }

    /// Flush activity buffers at every push and pop, so a range's records are in hand when
    /// it closes. Off, records arrive when CUPTI's buffers fill or at finish. The report is
    /// the same either way, since rows are joined by correlation id, not by arrival.
    ///
    /// A flush costs about 0.4 ms (measured on an H200, see BENCHMARKS.md): noise next to
    /// kernel replay's ~12 ms per kernel, so it defaults on in `KernelReplay`, but many
    /// kernels' worth in `Trace`, where it defaults off.
    pub fn flush_on_range_boundaries(mut self, on: bool) -> Self {
        self.flush_on_range_boundaries = Some(on);
        self
    }

    /// Wait for the GPU before closing each range (off by default).
    ///
    /// Ranges are taken on the CPU, and CUDA launches are asynchronous: without a
    /// synchronization a range can close long before its kernels run (an unsynchronized
    /// training loop ran 90 ms ahead of the GPU on an H200), so its wall time says nothing
    /// about its GPU work and its kernels fall outside it on a timeline. With this on, each
    /// pop first synchronizes the calling thread's context, so every kernel a range launched
    /// ends inside it; the price is the lost CPU/GPU overlap at every pop.
    pub fn synchronize_on_pop(mut self, on: bool) -> Self {
        self.synchronize_on_pop = on;
        self
    }

    /// How kernels and transfers are attributed to ranges (default [`RangeScope::Thread`]).
    pub fn range_scope(mut self, scope: RangeScope) -> Self {
        self.range_scope = scope;
        self
    }

    /// Host memory allowed for one counter data image; bounds the ranges per cycle.
    pub fn counter_image_budget(mut self, bytes: usize) -> Self {
        self.counter_image_budget = bytes;
        self
    }

    /// Range nesting levels measured in [`ProfilingMode::PerRange`] (default 1, the
    /// outermost ranges). CUPTI collects one nesting level per replay pass, so `L` levels
    /// multiply the passes by `L` ([`Profiler::passes`]): with `L > 1`, run the work through
    /// [`Profiler::replay`]. Ranges deeper than `L` get no counters of their own (their
    /// kernels still count in the enclosing measured range).
    pub fn max_nesting_levels(mut self, levels: u16) -> Self {
        self.max_nesting_levels = levels.max(1);
        self
    }

    /// Iteration replay for multi-pass metric sets in the user-replay modes: pass `p` is
    /// collected during the `p`-th instance of the range named `range` (e.g. `train_step`),
    /// so a training loop provides the passes itself, with no closure. `instances` is how
    /// many instances the program will run: when the set needs more passes than that,
    /// [`ProfilerBuilder::build`] fails and says how many passes are needed.
    ///
    /// The first instance of each round of P is what the report shows; the next P - 1
    /// instances are its replay passes (their ranges and kernels are not rows), matched to
    /// it by range path and kernel position; differences are flagged as in
    /// [`Profiler::replay`]. Kernels outside the named range get no counters.
    pub fn iteration_replay(mut self, range: impl Into<String>, instances: usize) -> Self {
        self.iteration_replay = Some((range.into(), instances));
        self
    }

    /// Upper bound on counter ranges per cycle (the image is cycled when full).
    pub fn max_ranges_per_cycle(mut self, n: usize) -> Self {
        self.max_ranges_per_cycle = n.max(1);
        self
    }

    /// Attaches to the GPU and starts profiling.
    pub fn build(self) -> Result<Profiler> {
        Profiler::start(self)
    }
}

impl std::str::FromStr for ProfilingMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "kernel_replay" | "kernel" => Ok(ProfilingMode::KernelReplay),
            "per_kernel" => Ok(ProfilingMode::PerKernel),
            "per_range" | "range" => Ok(ProfilingMode::PerRange),
            "trace" => Ok(ProfilingMode::Trace),
            other => Err(Error::InvalidConfig(format!(
                "unknown mode '{other}': use kernel_replay, per_kernel, per_range or trace"
            ))),
        }
    }
}

/// The calling thread's OS id (Linux `gettid`), cached per thread.
pub fn current_thread_id() -> ThreadId {
    thread_local! {
        static TID: Cell<u64> = const { Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            t.set(os_thread_id());
        }
        t.get()
    })
}

#[cfg(target_os = "linux")]
fn os_thread_id() -> u64 {
    extern "C" {
        fn gettid() -> i32;
    }
    // SAFETY: gettid takes no arguments and cannot fail (glibc 2.30+).
    let tid = unsafe { gettid() };
    tid as u64
}

#[cfg(not(target_os = "linux"))]
fn os_thread_id() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// Depth of launch API calls on this thread (the runtime calls the driver inside).
    static LAUNCH_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Correlation id of this thread's outermost launch call in flight.
    static OUTER_CORRELATION: Cell<u32> = const { Cell::new(0) };
    /// Whether this thread holds the kernel-replay launch gate.
    static HOLDS_GATE: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread's launch in flight opened a per-kernel CUPTI range.
    static PUSHED_KERNEL_RANGE: Cell<bool> = const { Cell::new(false) };
}

/// A kernel's identity for comparing replay passes: name, grid and block.
type KernelSignature = (String, [i32; 3], [i32; 3]);

/// User replay in progress ([`Profiler::replay`]): what pass 0 did, so later passes can be
/// named like it and checked against it.
#[derive(Default)]
struct ReplayState {
    active: bool,
    pass: usize,
    /// Pass 0's kernel launches in order: correlation id and range.
    kernel_script: Vec<(u32, Option<RangeId>)>,
    /// Pass 0's range pushes in order: name and range.
    range_script: Vec<(String, RangeId)>,
    /// Position in the scripts within the current pass.
    kernel_cursor: usize,
    range_cursor: usize,
    /// Correlation ids of each later pass's launches, in order.
    pass_kernels: Vec<Vec<u32>>,
    /// Signatures of the kernels above, from their activity records.
    signatures: HashMap<u32, KernelSignature>,
    /// Correlation ids whose signatures are wanted (every replay's launches).
    tracked: HashSet<u32>,
    /// Correlation ids of later passes' launches: not rows of their own.
    replayed: HashSet<u32>,
    /// Range pushes beyond pass 0's script in a later pass, still open.
    extra_open: u32,
    mismatched_ranges: Vec<RangeId>,
    /// Launches made outside `replay` while a multi-pass set waits for one.
    unreplayed_launches: u64,
    /// Ranges open now (all threads), for iteration replay.
    open_depth: usize,
    /// Iteration replay: the depth at which the current instance of the named range opened.
    iteration_level: Option<usize>,
    /// Completed replay rounds.
    rounds: u64,
}

impl ReplayState {
    fn replaying(&self) -> bool {
        self.active && self.pass > 0
    }

    fn tracks(&self, correlation_id: u32) -> bool {
        self.tracked.contains(&correlation_id)
    }
}

/// Stands for a range pushed in a later replay pass beyond what pass 0 pushed.
const EXTRA_REPLAY_RANGE: RangeId = RangeId { slot: u32::MAX, generation: u32::MAX };

/// What a live capture holds; dropped (in field order) when the capture ends.
struct Capture {
    membership: Option<HubMembership>,
    counters: Option<Counters>,
    _primary: Option<PrimaryContext>,
    context: Context,
}

/// The range profiler side of a counter mode.
struct Counters {
    range_profiler: Option<RangeProfiler>,
    counter_data: CounterDataImage,
    config_image: Vec<u8>,
    config: RangeConfig,
    host: ProfilerHost,
    _api: ProfilerApi,
    cycle: u32,
    ordinal_in_cycle: u32,
    dropped_ranges: u64,
    /// Auto ranges CUPTI numbered in earlier cycles (see `finish_cycle`).
    auto_ranges_before_cycle: u64,
    /// Whether the range profiler is started (between `start` and `stop`).
    running: bool,
    /// CUPTI user ranges open now.
    user_depth: u32,
}

/// What `start_counters` sets up.
struct CounterSetup {
    counters: Counters,
    metric_set: MetricSet,
    names: Vec<String>,
    passes: usize,
    chip: String,
    mode: ProfilingMode,
}

/// The session's records, behind one lock.
struct SessionState {
    tree: SessionTree,
    correlator: Correlator,
    warnings: Vec<String>,
    /// Nested driver correlation id → the outer runtime call's id.
    aliases: HashMap<u32, u32>,
}

struct Shared {
    cupti: Cupti,
    driver: Driver,
    clock_start: ClockPair,
    /// Launches seen (trace mode numbers them here; counter modes per cycle).
    launches: std::sync::atomic::AtomicU32,
    mode: ProfilingMode,
    metric_set: MetricSet,
    metric_names: Vec<String>,
    passes: usize,
    flush_on_range_boundaries: bool,
    synchronize_on_pop: bool,
    range_scope: RangeScope,
    device_name: String,
    chip: String,
    started_unix_ns: u64,
    capture: Mutex<Option<Capture>>,
    state: Mutex<SessionState>,
    incoming: Arc<Mutex<Vec<ActivityRecord>>>,
    launch_gate: Mutex<()>,
    finished: AtomicBool,
    replay: Mutex<ReplayState>,
    /// Iteration replay: the repeating range whose instances are the passes.
    iteration_range: Option<String>,
}

/// A profiling session on one GPU context. Cheap to clone; all clones share the session.
///
/// Range calls are thread-safe; each thread has its own range stack.
#[derive(Clone)]
pub struct Profiler {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("mode", &self.shared.mode)
            .field("metrics", &self.shared.metric_names)
            .field("passes", &self.shared.passes)
            .finish_non_exhaustive()
    }
}

/// Pops its range when dropped. Must be dropped on the thread that pushed it.
#[must_use = "the range closes when this guard is dropped"]
#[derive(Debug)]
pub struct RangeGuard<'a> {
    profiler: &'a Profiler,
    id: Option<RangeId>,
    thread: ThreadId,
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.profiler.close_range(id, self.thread);
        }
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl Profiler {
    /// A builder with the defaults: kernel replay, DRAM bytes read and written.
    pub fn builder() -> ProfilerBuilder {
        ProfilerBuilder::default()
    }

    fn start(cfg: ProfilerBuilder) -> Result<Profiler> {
        let cupti = Cupti::load()?;
        let drv = driver::init()?;
        if driver::device_count(&drv)? == 0 {
            return Err(Error::InvalidState(
                "no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)".into(),
            ));
        }
        // Attach to the application's context, or the device's primary context (the one the
        // CUDA runtime, cudarc and PyTorch use).
        let (context, primary, device) = match (cfg.context, driver::current_context(&drv)?, cfg.device) {
            (Some(ctx), _, _) => (ctx, None, driver::device(&drv, target::device_ordinal(&cupti, ctx)? as i32)?),
            (None, Some(ctx), None) => (ctx, None, driver::current_device(&drv)?),
            (None, _, ordinal) => {
                let dev = driver::device(&drv, ordinal.unwrap_or(0) as i32)?;
                let primary = PrimaryContext::retain(&drv, dev)?;
                driver::set_current(&drv, primary.context())?;
                (primary.context(), Some(primary), dev)
            }
        };
        let device_name = driver::device_name(&drv, device)?;
        let context_id = activity::context_id(&cupti, context)?;

        let (counters, metric_set, names, passes, chip, mode) = if cfg.mode == Some(ProfilingMode::Trace) {
            (None, MetricSet::default(), Vec::new(), 0, String::new(), ProfilingMode::Trace)
        } else {
            let c = Self::start_counters(&cfg, &cupti, context, device)?;
            (Some(c.counters), c.metric_set, c.names, c.passes, c.chip, c.mode)
        };
        if let Some((range, instances)) = &cfg.iteration_replay {
            let user_replay = matches!(mode, ProfilingMode::PerKernel | ProfilingMode::PerRange);
            if !user_replay {
                return Err(Error::InvalidConfig(format!(
                    "iteration replay needs the per_kernel or per_range mode, not {}",
                    mode.as_str()
                )));
            }
            if passes > *instances {
                return Err(Error::InvalidConfig(format!(
                    "the metric set needs {passes} replay passes, but the program runs only {instances} \
                     instance(s) of '{range}': run at least {passes}, use fewer metrics, or use kernel_replay"
                )));
            }
        }

        let clock_start = ClockPair { cupti_ns: activity::timestamp(&cupti)?, unix_ns: unix_ns() };
        let shared = Arc::new(Shared {
            cupti,
            driver: drv,
            clock_start,
            launches: std::sync::atomic::AtomicU32::new(0),
            mode,
            metric_set,
            metric_names: names,
            passes,
            flush_on_range_boundaries: cfg.flush_on_range_boundaries.unwrap_or(mode == ProfilingMode::KernelReplay),
            synchronize_on_pop: cfg.synchronize_on_pop,
            range_scope: cfg.range_scope,
            device_name,
            chip,
            started_unix_ns: clock_start.unix_ns,
            capture: Mutex::new(None),
            state: Mutex::new(SessionState {
                tree: SessionTree::new(),
                correlator: Correlator::new(),
                warnings: Vec::new(),
                aliases: HashMap::new(),
            }),
            incoming: Arc::new(Mutex::new(Vec::new())),
            launch_gate: Mutex::new(()),
            finished: AtomicBool::new(false),
            replay: Mutex::new(ReplayState::default()),
            iteration_range: cfg.iteration_replay.as_ref().map(|(name, _)| name.clone()),
        });
        // The capture is in place before the hub can route a callback to this session.
        *shared.capture.lock() = Some(Capture { membership: None, counters, _primary: primary, context });
        let session: Arc<dyn CaptureSession> = shared.clone();
        let membership = hub::join(&cupti, context_id, Arc::downgrade(&session))?;
        let mut guard = shared.capture.lock();
        if let Some(capture) = guard.as_mut() {
            if let Some(counters) = capture.counters.as_mut() {
                // A multi-pass set under user replay waits for `replay` to run the passes.
                let collect_now = mode == ProfilingMode::KernelReplay || passes <= 1;
                if let (true, Some(rp)) = (collect_now, counters.range_profiler.as_ref()) {
                    rp.start()?;
                    counters.running = true;
                }
            }
            capture.membership = Some(membership);
        }
        drop(guard);
        Ok(Profiler { shared })
    }

    /// Sets up the range profiler of a counter mode: metrics, configuration, counter image.
    fn start_counters(cfg: &ProfilerBuilder, cupti: &Cupti, context: Context, device: i32) -> Result<CounterSetup> {
        tracing::debug!("gmprof: initializing the profiler API");
        let api = ProfilerApi::initialize(cupti)?;
        let chip = target::chip_name(cupti, device as usize)?;
        tracing::debug!(chip, "gmprof: chip");
        // Metrics: gpu__time_duration.sum first, then the user's, without duplicates.
        let mut names: Vec<String> = vec![GPU_TIME_METRIC.to_owned()];
        for m in &cfg.metrics {
            let m = m.trim();
            if !m.is_empty() && !names.iter().any(|n| n == m) {
                names.push(m.to_owned());
            }
        }
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let catalog = MetricCatalog::for_chip(cupti, &chip)?;
        let specs = catalog.validate(&name_refs)?;
        drop(catalog);
        let availability = target::counter_availability(cupti, context)?;
        tracing::debug!(bytes = availability.len(), "gmprof: counter availability");
        let mut host = ProfilerHost::new(cupti, &chip, Some(&availability))?;
        host.add_metrics(&name_refs)?;
        let config_image = host.config_image()?;
        let metric_passes = host.num_passes(&config_image)?;
        // Under user replay CUPTI measures one nesting level per pass of the metric set.
        let passes = match cfg.mode {
            Some(ProfilingMode::PerRange) => metric_passes * cfg.max_nesting_levels as usize,
            _ => metric_passes,
        };
        let mode = cfg.mode.unwrap_or(if passes <= 1 || cfg.iteration_replay.is_some() {
            ProfilingMode::PerKernel
        } else {
            ProfilingMode::KernelReplay
        });
        tracing::info!(passes, metrics = ?names, mode = mode.as_str(), "gmprof: metric set needs {passes} replay pass(es)");

        let range_profiler = RangeProfiler::enable(cupti, context)?;
        tracing::debug!("gmprof: range profiler enabled");
        let per_range = range_profiler
            .counter_data_size(&name_refs, 2, 2)?
            .saturating_sub(range_profiler.counter_data_size(&name_refs, 1, 1)?)
            .max(1);
        let ranges_per_cycle = (cfg.counter_image_budget / per_range).clamp(1, cfg.max_ranges_per_cycle);
        let mut counter_data =
            range_profiler.create_counter_data(&name_refs, ranges_per_cycle, ranges_per_cycle as u32)?;
        let (range, replay, num_nesting_levels) = match mode {
            ProfilingMode::PerRange => (RangeMode::User, ReplayMode::User, cfg.max_nesting_levels),
            ProfilingMode::PerKernel => (RangeMode::User, ReplayMode::User, 1),
            _ => (RangeMode::Auto, ReplayMode::Kernel, 1),
        };
        let config = RangeConfig {
            range,
            replay,
            max_ranges_per_pass: ranges_per_cycle,
            num_nesting_levels,
            min_nesting_level: 1,
            pass_index: 0,
            target_nesting_level: 1,
        };
        // SAFETY: both images move into `Counters`, whose heap buffers never reallocate and
        // outlive the range profiler (it is disabled before they drop).
        unsafe { range_profiler.set_config(&config_image, &mut counter_data, &config)? };
        tracing::debug!(ranges_per_cycle, image_bytes = counter_data.len(), "gmprof: counter image");
        Ok(CounterSetup {
            counters: Counters {
                range_profiler: Some(range_profiler),
                counter_data,
                config_image,
                config,
                host,
                _api: api,
                cycle: 0,
                ordinal_in_cycle: 0,
                dropped_ranges: 0,
                auto_ranges_before_cycle: 0,
                running: false,
                user_depth: 0,
            },
            metric_set: MetricSet { metrics: specs },
            names,
            passes,
            chip,
            mode,
        })
    }

    /// The collection mode.
    pub fn mode(&self) -> ProfilingMode {
        self.shared.mode
    }

    /// Replay passes the metric set needs.
    pub fn passes(&self) -> usize {
        self.shared.passes
    }

    /// The metrics collected, in report order.
    pub fn metrics(&self) -> &MetricSet {
        &self.shared.metric_set
    }

    /// Runs `body` once per replay pass the metric set needs, passing the pass index, and
    /// returns the last pass's result. This is closure replay, for the user-replay modes
    /// ([`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`]) with a metric set that
    /// needs several passes: each pass collects part of the counters, and CUPTI merges them.
    ///
    /// Pass 0 is what the report shows (its ranges, kernels and times); later passes must
    /// run the same work: their ranges and kernels are matched to pass 0's by position,
    /// and a kernel whose name, grid or block differs from pass 0's gets status
    /// `replay_mismatch` and no metrics (in PerRange, its ranges lose their counters),
    /// never a blind merge. The work must be repeatable: re-running it must not depend on
    /// the state the previous pass left (an optimizer step, for instance, changes weights,
    /// which is fine for counters but not for control flow).
    ///
    /// With a one-pass metric set, or in the other modes, `body` runs once.
    pub fn replay<R>(&self, mut body: impl FnMut(usize) -> R) -> Result<R> {
        self.ensure_running()?;
        let shared = &self.shared;
        if !shared.user_replay() || shared.passes <= 1 {
            return Ok(body(0));
        }
        {
            let mut replay = shared.replay.lock();
            if replay.active {
                return Err(Error::InvalidState("Profiler::replay cannot be nested".into()));
            }
            replay.active = true;
            replay.kernel_script.clear();
            replay.range_script.clear();
            replay.pass_kernels.clear();
            replay.mismatched_ranges.clear();
        }
        let result = self.run_passes(&mut body);
        let mut replay = shared.replay.lock();
        replay.active = false;
        replay.pass = 0;
        result
    }

    fn run_passes<R>(&self, body: &mut impl FnMut(usize) -> R) -> Result<R> {
        let shared = &self.shared;
        let passes = shared.passes;
        let mut last = None;
        // CUPTI says when it has every pass; `passes` is what gmprof expects it to need.
        for pass in 0..passes * 2 {
            shared.begin_pass(pass);
            shared.start_pass()?;
            last = Some(body(pass));
            if shared.end_pass(pass)? {
                break;
            }
        }
        shared.finish_replay_round()?;
        last.ok_or_else(|| Error::InvalidState("a replay ran no pass".into()))
    }

    /// Opens a range on the calling thread; it closes when the guard drops.
    pub fn range(&self, name: &str) -> RangeGuard<'_> {
        let thread = current_thread_id();
        let id = match self.open_range(name, thread) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!("gmprof: {e}");
                None
            }
        };
        RangeGuard { profiler: self, id, thread }
    }

    /// Opens a range on the calling thread (pair with [`Profiler::pop_range`]).
    pub fn push_range(&self, name: &str) -> Result<()> {
        self.open_range(name, current_thread_id()).map(|_| ())
    }

    /// Closes the calling thread's innermost range.
    pub fn pop_range(&self) -> Result<()> {
        self.ensure_running()?;
        let ts = self.pop_boundary()?;
        self.shared.close_user_range(None, current_thread_id(), ts)
    }

    fn ensure_running(&self) -> Result<()> {
        if self.shared.finished.load(Ordering::Acquire) {
            return Err(Error::InvalidState("the profiler has finished; build a new one to profile again".into()));
        }
        Ok(())
    }

    fn open_range(&self, name: &str, thread: ThreadId) -> Result<RangeId> {
        self.ensure_running()?;
        let ts = self.boundary()?;
        self.shared.open_user_range(name, thread, ts)
    }

    fn close_range(&self, id: RangeId, thread: ThreadId) {
        if self.shared.finished.load(Ordering::Acquire) {
            return;
        }
        let result = self.pop_boundary().and_then(|ts| self.shared.close_user_range(Some(id), thread, ts));
        if let Err(e) = result {
            tracing::warn!("gmprof: {e}");
            self.shared.state.lock().warnings.push(e.to_string());
        }
    }

    /// Work done at every pop: the optional synchronization, then [`Profiler::boundary`].
    fn pop_boundary(&self) -> Result<u64> {
        if self.shared.synchronize_on_pop {
            driver::synchronize(&self.shared.driver)?;
        }
        self.boundary()
    }

    /// Work done at every push and pop: the timestamp, and the activity flush if enabled.
    fn boundary(&self) -> Result<u64> {
        if self.shared.flush_on_range_boundaries {
            activity::flush_all(&self.shared.cupti, true)?;
            self.shared.drain_activity();
        }
        activity::timestamp(&self.shared.cupti)
    }

    /// Stops profiling, correlates and aggregates. Ranges still open are closed with a
    /// warning in the report.
    pub fn finish(self) -> Result<Report> {
        let shared = &self.shared;
        if shared.finished.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidState("finish was already called".into()));
        }
        let t0 = Instant::now();
        let mut capture = shared
            .capture
            .lock()
            .take()
            .ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        tracing::debug!("gmprof: finish: synchronizing the context");
        driver::set_current(&shared.driver, capture.context)?;
        driver::synchronize(&shared.driver)?;
        let clock_finish = ClockPair { cupti_ns: activity::timestamp(&shared.cupti)?, unix_ns: unix_ns() };
        let mut cycles = 0;
        let mut dropped_ranges = 0;
        if let Some(mut counters) = capture.counters.take() {
            tracing::debug!("gmprof: finish: decoding the last counter cycle");
            let unfinished_round = {
                let replay = shared.replay.lock();
                replay.active.then_some(replay.pass + 1)
            };
            if let Some(done) = unfinished_round {
                // An iteration-replay round the program stopped in the middle of: its passes
                // cannot be merged, so they are dropped, and the report says so.
                if let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running) {
                    while counters.user_depth > 0 && rp.pop().is_ok() {
                        counters.user_depth -= 1;
                    }
                    let _ = rp.stop();
                }
                counters.running = false;
                shared.state.lock().warnings.push(format!(
                    "the last iteration-replay round ended after {done} of {} passes; its counters are incomplete \
                     and were dropped",
                    shared.passes
                ));
            }
            if counters.running {
                // CUPTI stops only with its user ranges closed (ranges left open are closed
                // in the report too, with a warning).
                if let Some(rp) = counters.range_profiler.as_ref() {
                    while counters.user_depth > 0 {
                        rp.pop()?;
                        counters.user_depth -= 1;
                    }
                }
                shared.finish_cycle(&mut counters)?;
            }
            tracing::debug!("gmprof: finish: disabling the range profiler");
            if let Some(rp) = counters.range_profiler.take() {
                rp.shutdown()?;
            }
            cycles = counters.cycle + 1;
            dropped_ranges = counters.dropped_ranges;
            counters.host.shutdown()?;
            counters._api.shutdown()?;
        }
        // Leaving the hub flushes this context's records to us; the stats are read first.
        let mut dropped_records = 0;
        if let Some(membership) = capture.membership.take() {
            tracing::debug!("gmprof: finish: flushing activity");
            membership.flush()?;
            let stats = membership.stats();
            dropped_records = stats.records_dropped;
            let mut state = shared.state.lock();
            if stats.buffers_allocated_late > 0 {
                state.warnings.push(format!(
                    "{} activity buffer(s) were allocated while profiling because the pool ran dry",
                    stats.buffers_allocated_late
                ));
            }
            if stats.callback_panics > 0 {
                state.warnings.push(format!(
                    "{} activity buffer(s) were lost to an internal error in gmprof's buffer callback",
                    stats.callback_panics
                ));
            }
            drop(state);
            membership.leave()?;
        }
        shared.drain_activity();
        drop(capture._primary);
        tracing::debug!("gmprof: finish: analyzing");

        let unreplayed = shared.replay.lock().unreplayed_launches;
        let mut state = shared.state.lock();
        if unreplayed > 0 {
            state.warnings.push(format!(
                "{unreplayed} kernel launch(es) ran outside Profiler::replay while the metric set needs {} \
                 passes under user replay; they have no counters",
                shared.passes
            ));
        }
        let open = state.tree.close_all_open(clock_finish.cupti_ns);
        let mut warnings = std::mem::take(&mut state.warnings);
        warnings.extend(open);
        let mut info = CaptureInfo::new(shared.mode);
        info.device_name = Some(shared.device_name.clone());
        info.chip = (!shared.chip.is_empty()).then(|| shared.chip.clone());
        info.dropped_counter_ranges = dropped_ranges;
        info.dropped_activity_records = dropped_records;
        info.started_unix_ns = Some(shared.started_unix_ns);
        info.finished_unix_ns = Some(clock_finish.unix_ns);
        info.clock = Some(ClockSync { start: shared.clock_start, finish: clock_finish });
        info.warnings = warnings;
        let correlator = std::mem::take(&mut state.correlator);
        let report = Report::analyze(info, &shared.metric_set, &state.tree, correlator);
        tracing::debug!(cycles, elapsed = ?t0.elapsed(), "gmprof: finished");
        Ok(report)
    }
}

impl CaptureSession for Shared {
    fn on_api_callback(&self, cb: &ApiCallback<'_>) {
        self.on_launch_callback(cb);
    }

    fn on_records(&self, mut records: Vec<ActivityRecord>) {
        self.incoming.lock().append(&mut records);
    }
}

impl Shared {
    fn drain_activity(&self) {
        let records = std::mem::take(&mut *self.incoming.lock());
        if records.is_empty() {
            return;
        }
        // Lock order: replay, capture, state.
        let mut replay = self.replay.lock();
        let mut state = self.state.lock();
        for record in records {
            match record {
                ActivityRecord::Kernel(mut k) => {
                    if let Some(outer) = state.aliases.get(&k.correlation_id) {
                        k.correlation_id = *outer;
                    }
                    if replay.tracks(k.correlation_id) && !crate::analysis::correlate::is_profiler_internal_kernel(&k) {
                        replay.signatures.insert(k.correlation_id, (k.name.clone(), k.grid, k.block));
                    }
                    // A later replay pass re-runs pass 0's kernels: not rows of their own.
                    if !replay.replayed.contains(&k.correlation_id) {
                        state.correlator.add_activity(k);
                    }
                }
                ActivityRecord::Transfer(mut t) => {
                    if let Some(outer) = state.aliases.get(&t.correlation_id) {
                        t.correlation_id = *outer;
                    }
                    state.correlator.add_transfer_activity(t);
                }
            }
        }
    }

    /// Runs inside the launching thread's CUDA call. Never panics outward (the trampoline
    /// catches), never calls the CUDA API it interrupts.
    fn on_launch_callback(&self, cb: &ApiCallback<'_>) {
        match cb.site {
            CallbackSite::Enter => {
                let depth = LAUNCH_DEPTH.with(|d| {
                    d.set(d.get() + 1);
                    d.get()
                });
                if depth > 1 {
                    // The runtime calls the driver inside: the same kernel or copy. Map the
                    // inner id to the outer so either id finds the call.
                    let outer = OUTER_CORRELATION.with(Cell::get);
                    if outer != cb.correlation_id {
                        self.state.lock().aliases.insert(cb.correlation_id, outer);
                    }
                    return;
                }
                OUTER_CORRELATION.with(|c| c.set(cb.correlation_id));
                if self.finished.load(Ordering::Acquire) {
                    return;
                }
                if cb.launch == LaunchKind::Transfer {
                    self.record_transfer(cb);
                    return;
                }
                if matches!(self.mode, ProfilingMode::KernelReplay | ProfilingMode::PerKernel) {
                    // Held until this launch's exit callback; see the module docs.
                    std::mem::forget(self.launch_gate.lock());
                    HOLDS_GATE.with(|h| h.set(true));
                }
                self.on_kernel_launch(cb);
            }
            CallbackSite::Exit => {
                let depth = LAUNCH_DEPTH.with(|d| {
                    d.set(d.get().saturating_sub(1));
                    d.get()
                });
                if depth == 0 && PUSHED_KERNEL_RANGE.with(|p| p.replace(false)) {
                    self.pop_kernel_range();
                }
                if depth == 0 && HOLDS_GATE.with(|h| h.replace(false)) {
                    // SAFETY: this thread locked the gate in the matching enter callback and
                    // forgot the guard; CUPTI calls enter and exit on the same thread.
                    unsafe { self.launch_gate.force_unlock() };
                }
            }
        }
    }

    /// The range a launch or transfer of `thread` belongs to, by the session's scope.
    fn attribute(&self, tree: &SessionTree, thread: ThreadId) -> Option<RangeId> {
        match self.range_scope {
            RangeScope::Thread => tree.current(thread),
            RangeScope::Process => tree.current(thread).or_else(|| tree.latest_open()),
        }
    }

    fn record_transfer(&self, cb: &ApiCallback<'_>) {
        let thread = current_thread_id();
        let mut state = self.state.lock();
        let range = self.attribute(&state.tree, thread);
        state.correlator.add_transfer_call(TransferCall {
            correlation_id: cb.correlation_id,
            thread,
            range,
            api_name: cb.function_name.to_owned(),
        });
    }

    fn record_launch(&self, cb: &ApiCallback<'_>, replay_active: bool) -> Option<RangeId> {
        let (cycle, ordinal) = {
            let mut guard = self.capture.lock();
            let capture = guard.as_mut()?;
            match capture.counters.as_mut().filter(|_| self.mode != ProfilingMode::PerRange) {
                Some(counters) => {
                    let cycling_allowed = counters.running && !replay_active;
                    if cycling_allowed && counters.ordinal_in_cycle as usize >= counters.config.max_ranges_per_pass {
                        if let Err(e) = self.cycle_counter_image(counters) {
                            tracing::error!("gmprof: could not cycle the counter image: {e}");
                            self.state.lock().warnings.push(format!("counter image cycle failed: {e}"));
                        }
                    }
                    let at = (counters.cycle, counters.ordinal_in_cycle);
                    counters.ordinal_in_cycle += 1;
                    at
                }
                None => (0, self.launches.fetch_add(1, Ordering::Relaxed)),
            }
        };
        let thread = current_thread_id();
        let mut state = self.state.lock();
        let range = self.attribute(&state.tree, thread);
        state.correlator.add_launch(LaunchRecord {
            correlation_id: cb.correlation_id,
            thread,
            range,
            cycle,
            ordinal,
            api: match (cb.launch, cb.domain) {
                (LaunchKind::Graph, _) => LaunchApi::Graph,
                (_, ApiDomain::Driver) => LaunchApi::Driver,
                (_, ApiDomain::Runtime) => LaunchApi::Runtime,
            },
            api_name: cb.function_name.to_owned(),
            context_id: cb.context_uid,
        });
        range
    }

    fn user_replay(&self) -> bool {
        matches!(self.mode, ProfilingMode::PerKernel | ProfilingMode::PerRange)
    }

    /// A kernel or graph launch entered (outermost API level, the gate held if needed).
    fn on_kernel_launch(&self, cb: &ApiCallback<'_>) {
        if !self.user_replay() {
            // No replay state in kernel_replay and trace: keep the launch path lock-light.
            self.record_launch(cb, false);
            return;
        }
        let mut replay = self.replay.lock();
        if replay.replaying() {
            // A later replay pass: nothing new for the report; the CUPTI range is named like
            // pass 0's kernel at this position, so CUPTI merges the passes.
            let position = replay.kernel_cursor;
            replay.kernel_cursor += 1;
            if let Some(pass) = replay.pass_kernels.last_mut() {
                pass.push(cb.correlation_id);
            }
            replay.tracked.insert(cb.correlation_id);
            replay.replayed.insert(cb.correlation_id);
            let name = replay.kernel_script.get(position).map(|(c, _)| *c);
            drop(replay);
            if self.mode == ProfilingMode::PerKernel && cb.launch == LaunchKind::Kernel {
                let name = name.map_or_else(|| format!("gmprof-replay-extra-{}", cb.correlation_id), |c| c.to_string());
                self.push_kernel_range(&name);
            }
            return;
        }
        let active = replay.active;
        if !active && self.user_replay() && self.passes > 1 {
            replay.unreplayed_launches += 1;
        }
        drop(replay);
        let range = self.record_launch(cb, active);
        if active {
            let mut replay = self.replay.lock();
            replay.kernel_script.push((cb.correlation_id, range));
            replay.tracked.insert(cb.correlation_id);
        }
        if self.mode == ProfilingMode::PerKernel && cb.launch == LaunchKind::Kernel {
            self.push_kernel_range(&cb.correlation_id.to_string());
        }
    }

    /// Opens the per-kernel CUPTI range of the launch in flight (PerKernel mode).
    fn push_kernel_range(&self, name: &str) {
        let mut guard = self.capture.lock();
        let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) else { return };
        let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running) else { return };
        match rp.push(name) {
            Ok(()) => {
                counters.user_depth += 1;
                PUSHED_KERNEL_RANGE.with(|p| p.set(true));
            }
            Err(e) => {
                drop(guard);
                self.state.lock().warnings.push(format!("per-kernel range {name}: {e}"));
            }
        }
    }

    /// Closes the per-kernel CUPTI range at the launch's exit.
    fn pop_kernel_range(&self) {
        let mut guard = self.capture.lock();
        let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) else { return };
        let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running && counters.user_depth > 0) else {
            return;
        };
        match rp.pop() {
            Ok(()) => counters.user_depth -= 1,
            Err(e) => {
                drop(guard);
                self.state.lock().warnings.push(format!("closing a per-kernel range: {e}"));
            }
        }
    }

    /// Opens a range: in the session tree and, in PerRange mode, as a CUPTI user range
    /// named by its [`range_counter_name`].
    fn open_user_range(&self, name: &str, thread: ThreadId, ts: u64) -> Result<RangeId> {
        let mut replay = self.replay.lock();
        let instance = self.iteration_range.as_deref() == Some(name)
            && replay.iteration_level.is_none()
            && self.user_replay()
            && self.passes > 1;
        if instance {
            replay.iteration_level = Some(replay.open_depth);
            drop(replay);
            self.begin_iteration_instance()?;
            replay = self.replay.lock();
        }
        replay.open_depth += 1;
        if self.mode != ProfilingMode::PerRange {
            // Later replay passes repeat pass 0's ranges: nothing new for the tree.
            if replay.replaying() {
                replay.extra_open += 1;
                return Ok(EXTRA_REPLAY_RANGE);
            }
            drop(replay);
            return Ok(self.state.lock().tree.push(name, thread, ts));
        }
        let id = if replay.replaying() {
            let position = replay.range_cursor;
            replay.range_cursor += 1;
            match replay.range_script.get(position).cloned() {
                Some((script_name, id)) => {
                    if script_name != name {
                        replay.mismatched_ranges.push(id);
                    }
                    id
                }
                None => {
                    replay.extra_open += 1;
                    EXTRA_REPLAY_RANGE
                }
            }
        } else {
            let id = self.state.lock().tree.push(name, thread, ts);
            if replay.active {
                replay.range_script.push((name.to_owned(), id));
            }
            id
        };
        let active = replay.active;
        drop(replay);
        let counter_name = if id == EXTRA_REPLAY_RANGE {
            "gmprof-replay-extra".to_owned()
        } else {
            crate::analysis::correlate::range_counter_name(id)
        };
        let mut guard = self.capture.lock();
        if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
            let full = counters.ordinal_in_cycle as usize >= counters.config.max_ranges_per_pass;
            if full && !active && counters.running && counters.user_depth == 0 {
                if let Err(e) = self.cycle_counter_image(counters) {
                    self.state.lock().warnings.push(format!("counter image cycle failed: {e}"));
                }
            }
            if let Some(rp) = counters.range_profiler.as_ref().filter(|_| counters.running) {
                rp.push(&counter_name)?;
                counters.user_depth += 1;
                counters.ordinal_in_cycle += 1;
            }
        }
        Ok(id)
    }

    /// Closes `id` (or the thread's innermost range), and its CUPTI user range.
    fn close_user_range(&self, id: Option<RangeId>, thread: ThreadId, ts: u64) -> Result<()> {
        let mut ends_instance = false;
        let replaying = {
            let mut replay = self.replay.lock();
            replay.open_depth = replay.open_depth.saturating_sub(1);
            if replay.iteration_level.is_some() && replay.iteration_level == Some(replay.open_depth) {
                replay.iteration_level = None;
                ends_instance = true;
            }
            let replaying = replay.replaying();
            if replaying && (id == Some(EXTRA_REPLAY_RANGE) || (id.is_none() && replay.extra_open > 0)) {
                replay.extra_open = replay.extra_open.saturating_sub(1);
            }
            replaying
        };
        if !replaying {
            let mut state = self.state.lock();
            match id {
                Some(id) => state.tree.pop_id(id, thread, ts)?,
                None => state.tree.pop(thread, ts)?,
            };
        }
        if self.mode == ProfilingMode::PerRange {
            let mut guard = self.capture.lock();
            if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
                if let Some(rp) =
                    counters.range_profiler.as_ref().filter(|_| counters.running && counters.user_depth > 0)
                {
                    rp.pop()?;
                    counters.user_depth -= 1;
                }
            }
        }
        if ends_instance {
            self.end_iteration_instance()?;
        }
        Ok(())
    }

    /// Resets the per-pass cursors for pass `pass`.
    fn begin_pass(&self, pass: usize) {
        let mut replay = self.replay.lock();
        replay.pass = pass;
        replay.kernel_cursor = 0;
        replay.range_cursor = 0;
        replay.extra_open = 0;
        if pass > 0 {
            replay.pass_kernels.push(Vec::new());
        }
    }

    /// Stops pass `pass` and checks it; true when CUPTI has every pass (or gmprof gives up).
    fn end_pass(&self, pass: usize) -> Result<bool> {
        let passes = self.passes;
        let complete = self.stop_pass(pass)?;
        let mut replay = self.replay.lock();
        if pass > 0 && replay.range_cursor < replay.range_script.len() {
            let missing: Vec<RangeId> = replay.range_script[replay.range_cursor..].iter().map(|(_, id)| *id).collect();
            replay.mismatched_ranges.extend(missing);
            drop(replay);
            self.state.lock().warnings.push(format!(
                "replay pass {pass} pushed fewer ranges than pass 0; the ranges it did not repeat lose their counters"
            ));
        } else {
            drop(replay);
        }
        if complete {
            if pass + 1 != passes {
                self.state
                    .lock()
                    .warnings
                    .push(format!("CUPTI had every pass after {} replay pass(es); gmprof expected {passes}", pass + 1));
            }
            return Ok(true);
        }
        if pass + 1 >= passes * 2 {
            self.state.lock().warnings.push(format!(
                "CUPTI did not report all passes submitted after {} replay passes; counters may be incomplete",
                pass + 1
            ));
            return Ok(true);
        }
        Ok(false)
    }

    /// After the last pass: decodes, re-arms, compares the passes, ends the replay.
    fn finish_replay_round(&self) -> Result<()> {
        {
            let mut guard = self.capture.lock();
            if let Some(counters) = guard.as_mut().and_then(|c| c.counters.as_mut()) {
                self.collect_cycle(counters)?;
                self.rearm(counters)?;
            }
        }
        // Every pass's activity records are needed to compare the passes.
        activity::flush_all(&self.cupti, true)?;
        self.drain_activity();
        let mut replay = self.replay.lock();
        self.check_replay(&mut replay);
        // The round's records are all in (flushed above) and compared: what was kept to
        // compare them is not needed again, so a long training run does not accumulate it.
        replay.signatures.clear();
        replay.tracked.clear();
        replay.replayed.clear();
        replay.rounds += 1;
        Ok(())
    }

    /// Iteration replay: the named range opens. Starts a pass (and a round at pass 0).
    fn begin_iteration_instance(&self) -> Result<()> {
        let pass = {
            let mut replay = self.replay.lock();
            if !replay.active {
                replay.active = true;
                replay.pass = 0;
                replay.kernel_script.clear();
                replay.range_script.clear();
                replay.pass_kernels.clear();
                replay.mismatched_ranges.clear();
            } else {
                replay.pass += 1;
            }
            replay.pass
        };
        self.begin_pass(pass);
        self.start_pass()
    }

    /// Iteration replay: the named range closed. Ends its pass, and the round when complete.
    fn end_iteration_instance(&self) -> Result<()> {
        let pass = self.replay.lock().pass;
        if self.end_pass(pass)? {
            self.finish_replay_round()?;
            let mut replay = self.replay.lock();
            replay.active = false;
            replay.pass = 0;
        }
        Ok(())
    }

    /// Starts one user-replay pass.
    fn start_pass(&self) -> Result<()> {
        let mut guard = self.capture.lock();
        let capture = guard.as_mut().ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        driver::set_current(&self.driver, capture.context)?;
        let Some(counters) = capture.counters.as_mut() else { return Ok(()) };
        if let Some(rp) = counters.range_profiler.as_ref() {
            rp.start()?;
            counters.running = true;
        }
        Ok(())
    }

    /// Ends one user-replay pass; returns whether CUPTI has every pass.
    fn stop_pass(&self, pass: usize) -> Result<bool> {
        let mut guard = self.capture.lock();
        let capture = guard.as_mut().ok_or_else(|| Error::InvalidState("the profiler has no live capture".into()))?;
        driver::set_current(&self.driver, capture.context)?;
        driver::synchronize(&self.driver)?;
        let Some(counters) = capture.counters.as_mut() else { return Ok(true) };
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(true) };
        let mut unclosed = 0;
        while counters.user_depth > 0 {
            rp.pop()?;
            counters.user_depth -= 1;
            unclosed += 1;
        }
        let stop = rp.stop()?;
        counters.running = false;
        drop(guard);
        if unclosed > 0 {
            self.state.lock().warnings.push(format!(
                "replay pass {pass}: {unclosed} range(s) were still open when the pass ended; they were closed there"
            ));
        }
        Ok(stop.all_passes_submitted)
    }

    /// Compares the later replay passes with pass 0 and flags what differs.
    fn check_replay(&self, replay: &mut ReplayState) {
        let mut mismatched: Vec<(u32, Option<RangeId>)> = Vec::new();
        let mut unverified = 0u64;
        let mut warnings = Vec::new();
        for (index, kernels) in replay.pass_kernels.iter().enumerate() {
            let pass = index + 1;
            if kernels.len() != replay.kernel_script.len() {
                warnings.push(format!(
                    "replay pass {pass} launched {} kernel(s), pass 0 launched {}; the kernels from the first \
                     difference on are flagged replay_mismatch",
                    kernels.len(),
                    replay.kernel_script.len()
                ));
            }
            for (position, (first, range)) in replay.kernel_script.iter().enumerate() {
                let Some(other) = kernels.get(position) else {
                    mismatched.push((*first, *range));
                    continue;
                };
                match (replay.signatures.get(first), replay.signatures.get(other)) {
                    (Some(a), Some(b)) if a == b => {}
                    (Some(a), Some(b)) => {
                        if mismatched.len() < 8 {
                            warnings.push(format!(
                                "replay pass {pass}, kernel {position}: {} grid {:?} block {:?} where pass 0 ran {} \
                                 grid {:?} block {:?}",
                                b.0, b.1, b.2, a.0, a.1, a.2
                            ));
                        }
                        mismatched.push((*first, *range));
                    }
                    _ => unverified += 1,
                }
            }
        }
        let mut state = self.state.lock();
        if unverified > 0 {
            warnings.push(format!(
                "{unverified} replayed kernel(s) could not be compared with pass 0 (activity records missing)"
            ));
        }
        let mut flagged_ranges: Vec<RangeId> = std::mem::take(&mut replay.mismatched_ranges);
        for (correlation_id, range) in &mismatched {
            state.correlator.flag_replay_mismatch(*correlation_id);
            flagged_ranges.extend(range);
        }
        if self.mode == ProfilingMode::PerRange {
            // A measured range holds its descendants' kernels: flag the ancestors too.
            let mut all = Vec::new();
            for id in flagged_ranges {
                let mut at = Some(id);
                while let Some(node) = at.and_then(|i| state.tree.get(i)) {
                    all.push(node.id);
                    at = node.parent;
                }
            }
            for id in all {
                state.correlator.flag_range_replay_mismatch(id);
            }
        }
        state.warnings.extend(warnings);
    }

    /// Stops the profiler, evaluates the full image, re-initializes it and starts again.
    fn cycle_counter_image(&self, counters: &mut Counters) -> Result<()> {
        self.finish_cycle(counters)?;
        self.rearm(counters)?;
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        rp.start()?;
        counters.running = true;
        Ok(())
    }

    /// Re-initializes the image and configuration for the next cycle.
    fn rearm(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        rp.initialize_counter_data(&mut counters.counter_data)?;
        // SAFETY: the images live in `counters` and outlive the range profiler.
        unsafe { rp.set_config(&counters.config_image, &mut counters.counter_data, &counters.config)? };
        counters.cycle += 1;
        counters.ordinal_in_cycle = 0;
        Ok(())
    }

    /// Stops and decodes the current cycle and hands its counter ranges to the correlator.
    fn finish_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        let stop = rp.stop()?;
        counters.running = false;
        if !stop.all_passes_submitted {
            self.state.lock().warnings.push(format!(
                "counter cycle {}: CUPTI reported pass {} without all passes submitted",
                counters.cycle, stop.pass_index
            ));
        }
        self.collect_cycle(counters)
    }

    /// Decodes the stopped cycle and hands its counter ranges to the correlator.
    fn collect_cycle(&self, counters: &mut Counters) -> Result<()> {
        let Some(rp) = counters.range_profiler.as_ref() else { return Ok(()) };
        counters.user_depth = 0;
        let dropped = rp.decode()?;
        if dropped > 0 {
            tracing::warn!("gmprof: CUPTI dropped {dropped} counter range(s) in cycle {}", counters.cycle);
            counters.dropped_ranges += dropped as u64;
        }
        let count = counters.counter_data.range_count(&self.cupti)?;
        let names: Vec<&str> = self.metric_names.iter().map(String::as_str).collect();
        let mut ranges = Vec::with_capacity(count);
        // CUPTI numbers auto ranges from the profiler's enable, not per image: after a cycle
        // of 1000 ranges the next image starts at "1000" (seen with CUPTI 13.0.1 on an H200).
        // Rebase the numbers to the cycle, so the correlator's check (name == ordinal) stays
        // a real check: a kernel CUPTI saw out of gmprof's order still shows as a mismatch.
        let base = counters.auto_ranges_before_cycle;
        for index in 0..count {
            let image = counters.counter_data.bytes();
            let raw_name = counters.host.range_name(image, index, "/")?;
            let name = match (counters.config.range, raw_name.parse::<u64>()) {
                (RangeMode::Auto, Ok(n)) if n >= base => (n - base).to_string(),
                // A nested user range is named by its path; gmprof's own name is the last part.
                (RangeMode::User, _) => raw_name.rsplit('/').next().unwrap_or_default().to_owned(),
                _ => raw_name,
            };
            let values = counters.host.evaluate(image, index, &names)?;
            ranges.push(CounterRange { cycle: counters.cycle, index: index as u32, name, values });
        }
        counters.auto_ranges_before_cycle += (count + dropped) as u64;
        self.state.lock().correlator.add_counter_ranges(counters.cycle, ranges);
        Ok(())
    }
}
