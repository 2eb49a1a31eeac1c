//! The profiler: drives CUPTI capture and hands the records to analysis.
//!
//! Layer 3. A [`Profiler`] attaches to the current CUDA context (or a device's primary
//! context) and joins the process-wide capture hub (the private `hub` module), which routes the driver
//! and runtime launch and transfer callbacks and the activity records of that context to it.
//! It keeps a [`SessionTree`] of the user's ranges. Each launch is recorded as it happens
//! (correlation id, thread, innermost open range, counter cycle and ordinal); activity
//! buffers are flushed at range boundaries; in counter modes the range profiler's images are
//! decoded and evaluated cycle by cycle. [`Profiler::finish`] correlates and aggregates into
//! a [`Report`](crate::report::Report).
//!
//! # Modes
//! - [`ProfilingMode::KernelReplay`]: CUPTI auto range + kernel replay; kernel time from
//!   `gpu__time_duration.sum` (activity records have start == end while it runs).
//! - [`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`]: CUPTI user ranges + user
//!   replay; kernel time from the activity records, whose timestamps are real there.
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
//! # No kernel limit, and a bounded pause per counter cycle
//! The counter data image holds `ranges_per_cycle` ranges (sized from a memory budget). When
//! a cycle is full, the next launch first stops the profiler and decodes the image, as
//! NVIDIA's profiling_injection sample does; then it hands the decoded image to a background
//! evaluator thread, arms a spare image and starts again (double buffering, see the private
//! `evaluator` module). Host memory then grows with the results, not with the number of
//! kernels, and the launching thread does not wait for the evaluation of 2000 ranges. It
//! does wait for CUPTI's stop and start (about 11 ms plus 3 µs per range on an H100): each
//! such pause is recorded as a [`ProfilerPause`](crate::model::ProfilerPause) and shown in
//! the report. CUPTI also holds about 1 MB of host memory per range of the cycle, which is
//! what bounds the cycle's size.

mod builder;
mod counters;
#[cfg(test)]
mod devices_tests;
mod evaluator;
mod finish;
#[cfg(test)]
mod finish_tests;
#[cfg(any(test, feature = "bench-internals"))]
#[doc(hidden)]
pub mod harness;
#[cfg(test)]
mod harness_tests;
mod launch;
#[cfg(test)]
mod launch_tests;
mod recent;
mod replay;

pub use self::builder::*;
use self::counters::Counters;
pub use self::finish::Teardown;
pub use self::launch::current_thread_id;
use self::replay::{ReplayState, EXTRA_REPLAY_RANGE};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::analysis::correlate::Correlator;
use crate::capture::hub::{self, CaptureSession, HubMembership};
use crate::capture::pc_sampling::{beside_counters_message, PcSession};
use crate::capture::pm_sampling::PmSession;
use crate::checked::activity::{self, ActivityRecord};
use crate::checked::callback::ApiCallback;
use crate::checked::driver::{self, Context, PrimaryContext};
use crate::checked::target;
use crate::checked::{Cupti, Driver};
use crate::error::{Error, Result};
use crate::model::session::SessionTree;
use crate::model::{ClockPair, DevicePeaks, MetricSet, ProfilingMode, RangeId, ThreadId};

/// What a live capture holds; dropped (in field order) when the capture ends.
struct Capture {
    membership: Option<HubMembership>,
    counters: Option<Counters>,
    _primary: Option<PrimaryContext>,
    context: Context,
}

/// The session's records, behind one lock.
struct SessionState {
    tree: SessionTree,
    correlator: Correlator,
    warnings: Vec<String>,
    /// Nested driver correlation id → the outer runtime call's id, for the activity records
    /// drained so far.
    aliases: HashMap<u32, u32>,
    /// (nested id, outer id) pairs heard since the last drain: a push on the launch path,
    /// moved into `aliases` when activity is drained.
    alias_log: Vec<(u32, u32)>,
    /// Correlation ids of launches made after finishing began: not part of the session.
    after_finish: std::collections::HashSet<u32>,
    /// Activity records of those launches, left out.
    records_after_finish: u64,
    /// Correlation ids of launches made after [`Profiler::seal`]: past the end of the
    /// session's window by design, so left out without a warning.
    after_seal: std::collections::HashSet<u32>,
    /// The names of the last kernel launches (named rows for kernels that never completed).
    recent: recent::RecentLaunches,
    /// Launches numbered so far where no counter image numbers them (trace, per_range).
    launches_numbered: u32,
}

impl SessionState {
    fn new() -> SessionState {
        SessionState {
            tree: SessionTree::new(),
            correlator: Correlator::new(),
            warnings: Vec::new(),
            aliases: HashMap::new(),
            alias_log: Vec::new(),
            after_finish: Default::default(),
            records_after_finish: 0,
            after_seal: Default::default(),
            recent: Default::default(),
            launches_numbered: 0,
        }
    }

    /// The next launch's ordinal where no counter image numbers launches.
    fn next_launch_ordinal(&mut self) -> u32 {
        self.launches_numbered += 1;
        self.launches_numbered - 1
    }
}

struct Shared {
    cupti: Cupti,
    /// Stamps each launch ([`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)).
    launch_clock: activity::LaunchClock,
    driver: Driver,
    clock_start: ClockPair,
    /// Memset calls under kernel replay whose parameters could not be read: no activity
    /// times them and no row describes them.
    memsets_unread: std::sync::atomic::AtomicU64,
    /// Ordinal of the session's device (CUPTI's device id), for transfers no activity
    /// record describes.
    device_id: Option<u32>,
    /// CUPTI's id of the profiled context.
    context_id: u32,
    mode: ProfilingMode,
    metric_set: MetricSet,
    metric_names: Vec<String>,
    passes: usize,
    flush_on_range_boundaries: bool,
    synchronize_on_pop: bool,
    range_scope: RangeScope,
    device_name: String,
    chip: String,
    device_peaks: DevicePeaks,
    /// The driver's release, for the report's metadata.
    driver_version: Option<String>,
    started_unix_ns: u64,
    capture: Mutex<Option<Capture>>,
    state: Mutex<SessionState>,
    incoming: Arc<Mutex<Vec<ActivityRecord>>>,
    launch_gate: Mutex<()>,
    finished: AtomicBool,
    /// Set by [`Profiler::seal`]: the session's window has ended, its finish is still to come.
    sealed: AtomicBool,
    replay: Mutex<ReplayState>,
    /// Iteration replay: the pattern of the repeating range whose instances are the passes.
    iteration_range: Option<glob::Pattern>,
    /// The PM sampler, when asked for.
    pm: Mutex<Option<PmSession>>,
    /// The PC sampler, when asked for.
    pc: Mutex<Option<PcSession>>,
    /// gmprof's own callback time at the start, when measured (`GMPROF_SELF_TIME=1`).
    self_time_at_start: Option<crate::model::SelfTime>,
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

    fn start(mut cfg: ProfilerBuilder) -> Result<Profiler> {
        // PC sampling runs beside trace mode only: it picks trace when no mode was asked for,
        // and a counter mode is refused before anything starts.
        if cfg.pc_sampling.is_some() {
            match cfg.mode {
                None => cfg.mode = Some(ProfilingMode::Trace),
                Some(ProfilingMode::Trace) => {}
                Some(m) => return Err(Error::InvalidConfig(beside_counters_message(m.as_str()))),
            }
        }
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
        // CUPTI's device id of the context: the `deviceId` its activity records carry.
        let device_id = target::device_ordinal(&cupti, context)
            .inspect_err(|e| tracing::warn!("gmprof: could not read the context's device id: {e}"))
            .ok();

        let device_peaks = driver::device_peaks(&drv, device);
        let driver_version = driver::driver_release(&drv);
        let (counters, metric_set, names, passes, chip, mode) = if cfg.mode == Some(ProfilingMode::Trace) {
            // Trace mode needs no counters, but the report names the chip in every mode.
            let chip = target::query_chip_name(&cupti, device as usize).unwrap_or_else(|e| {
                tracing::warn!("gmprof: could not read the chip name: {e}");
                String::new()
            });
            (None, MetricSet::default(), Vec::new(), 0, chip, ProfilingMode::Trace)
        } else {
            let c = Self::start_counters(&cfg, &cupti, context, device)?;
            (Some(c.counters), c.metric_set, c.names, c.passes, c.chip, c.mode)
        };
        let iteration_range = match &cfg.iteration_replay {
            Some((range, instances)) => {
                check_iteration_replay(mode, passes, range, *instances)?;
                Some(iteration_pattern(range)?)
            }
            None => None,
        };

        let clock_start = ClockPair { cupti_ns: activity::timestamp(&cupti)?, unix_ns: unix_ns() };
        let shared = Arc::new(Shared {
            launch_clock: activity::LaunchClock::of(&cupti),
            cupti,
            driver: drv,
            clock_start,
            memsets_unread: std::sync::atomic::AtomicU64::new(0),
            device_id,
            context_id,
            mode,
            metric_set,
            metric_names: names,
            passes,
            flush_on_range_boundaries: cfg.flush_on_range_boundaries.unwrap_or(mode == ProfilingMode::KernelReplay),
            synchronize_on_pop: cfg.synchronize_on_pop,
            range_scope: cfg.range_scope,
            device_name,
            chip,
            device_peaks,
            driver_version,
            started_unix_ns: clock_start.unix_ns,
            capture: Mutex::new(None),
            state: Mutex::new(SessionState::new()),
            incoming: Arc::new(Mutex::new(Vec::new())),
            launch_gate: Mutex::new(()),
            finished: AtomicBool::new(false),
            sealed: AtomicBool::new(false),
            replay: Mutex::new(ReplayState::default()),
            iteration_range,
            pm: Mutex::new(None),
            pc: Mutex::new(None),
            self_time_at_start: crate::checked::self_time::snapshot(),
        });
        // The capture is in place before the hub can route a callback to this session.
        *shared.capture.lock() = Some(Capture { membership: None, counters, _primary: primary, context });
        let session: Arc<dyn CaptureSession> = shared.clone();
        let kinds = if mode == ProfilingMode::KernelReplay {
            crate::checked::activity::ActivityKinds::KernelsAndMemcpy
        } else {
            crate::checked::activity::ActivityKinds::KernelsAndMemory
        };
        let membership = hub::join(&cupti, context_id, Arc::downgrade(&session), kinds)?;
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
        if let Some(pm_cfg) = &cfg.pm_sampling {
            let beside = (mode != ProfilingMode::Trace).then(|| mode.as_str());
            let session = PmSession::start(&shared.cupti, device as usize, &shared.chip, pm_cfg, beside);
            match session {
                Ok(session) => *shared.pm.lock() = Some(session),
                Err(e) => {
                    // Nothing of this capture is handed out: leave the hub and stop counters.
                    if let Some(capture) = shared.capture.lock().take() {
                        if let Some(m) = capture.membership {
                            let _ = m.leave();
                        }
                    }
                    return Err(e);
                }
            }
        }
        if let Some(pc_cfg) = &cfg.pc_sampling {
            match PcSession::start(&shared.cupti, context, pc_cfg) {
                Ok(session) => *shared.pc.lock() = Some(session),
                Err(e) => {
                    // Nothing of this capture is handed out: stop PM sampling, leave the hub.
                    if let Some(pm) = shared.pm.lock().take() {
                        let _ = pm.finish();
                    }
                    if let Some(capture) = shared.capture.lock().take() {
                        if let Some(m) = capture.membership {
                            let _ = m.leave();
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(Profiler { shared })
    }

    /// The device ordinal of the profiled context (CUPTI's device id), when CUPTI said.
    pub fn device_id(&self) -> Option<u32> {
        self.shared.device_id
    }

    /// CUPTI's id of the profiled context.
    pub fn context_id(&self) -> u32 {
        self.shared.context_id
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
        if self.shared.sealed.load(Ordering::Acquire) {
            return Err(Error::InvalidState("the profiler's window has ended (sealed); finish it".into()));
        }
        Ok(())
    }

    /// Ends the session's window now, without finishing it: launches and transfers made from
    /// now on, on any thread, are not part of the session (left out without a warning, as
    /// work after its end), and range calls fail. Cheap and safe inside a CUPTI callback: an
    /// on-demand capture seals at the step boundary where it ends, on the program's thread,
    /// and finishes on a thread of its own ([`Profiler::finish_with`], which may then
    /// synchronize and flush where that is allowed).
    pub fn seal(&self) {
        self.shared.sealed.store(true, Ordering::Release);
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
}

impl CaptureSession for Shared {
    fn on_call_enter(&self, cb: &ApiCallback<'_>, nested: bool) {
        Shared::on_call_enter(self, cb, nested);
    }

    fn on_call_exit(&self, cb: &ApiCallback<'_>, created: Vec<crate::model::CapturedNode>) {
        Shared::on_call_exit(self, cb, created);
    }

    fn on_records(&self, mut records: Vec<ActivityRecord>) {
        self.incoming.lock().append(&mut records);
    }
}

impl Shared {
    /// The range a launch or transfer of `thread` belongs to, by the session's scope.
    fn attribute(&self, tree: &SessionTree, thread: ThreadId) -> Option<RangeId> {
        match self.range_scope {
            RangeScope::Thread => tree.current(thread),
            RangeScope::Process => tree.current(thread).or_else(|| tree.latest_open()),
        }
    }

    /// Pushes a range into the session tree, nested by the session's scope: in the
    /// process scope a thread's first open range nests under the latest range open on
    /// any thread, the range its work is attributed to until then.
    fn push_range(&self, name: &str, thread: ThreadId, ts: u64) -> RangeId {
        let mut state = self.state.lock();
        match self.range_scope {
            RangeScope::Thread => state.tree.push(name, thread, ts),
            RangeScope::Process => state.tree.push_in_process(name, thread, ts),
        }
    }

    /// Whether `name` is an instance of the iteration-replay range.
    fn is_iteration_range(&self, name: &str) -> bool {
        self.iteration_range.as_ref().is_some_and(|p| p.matches(name))
    }

    fn user_replay(&self) -> bool {
        matches!(self.mode, ProfilingMode::PerKernel | ProfilingMode::PerRange)
    }

    /// Opens a range: in the session tree and, in PerRange mode, as a CUPTI user range
    /// named by its [`range_counter_name`].
    fn open_user_range(&self, name: &str, thread: ThreadId, ts: u64) -> Result<RangeId> {
        let mut replay = self.replay.lock();
        let instance =
            self.is_iteration_range(name) && replay.iteration_level.is_none() && self.user_replay() && self.passes > 1;
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
            return Ok(self.push_range(name, thread, ts));
        }
        let id = if replay.replaying() {
            let position = replay.range_cursor;
            replay.range_cursor += 1;
            match replay.range_script.get(position).cloned() {
                Some((script_name, id)) => {
                    // Numbered instances of the iteration range differ in name only.
                    let same =
                        script_name == name || (self.is_iteration_range(&script_name) && self.is_iteration_range(name));
                    if !same {
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
            let id = self.push_range(name, thread, ts);
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
}
