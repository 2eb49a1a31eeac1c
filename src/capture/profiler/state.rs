//! The profiler's shared state: [`Profiler`] and the [`Shared`] session behind it, the
//! [`SessionState`] records behind one lock, the live [`Capture`], and what the counter and
//! replay paths keep ([`Counters`], [`ReplayState`]); also [`RangeGuard`].
//!
//! The bottom of this folder: it imports `scope`, `recent` and `evaluator` (types its
//! structs hold), never `mod.rs` or a file with `impl Profiler`/`impl Shared` blocks.
//! `start`, `ranges`, `launch`, `counters`, `replay`, `finish`, `builder` and `harness` import
//! it; `mod.rs` re-exports [`Profiler`] and [`RangeGuard`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::evaluator::Evaluator;
use super::recent;
use super::scope::RangeScope;
use crate::analysis::correlate::Correlator;
use crate::capture::hub::HubMembership;
use crate::capture::pc_sampling::PcSession;
use crate::capture::pm_sampling::PmSession;
use crate::checked::activity::{self, ActivityRecord};
use crate::checked::driver::{Context, PrimaryContext};
use crate::checked::range_profiler::{CounterDataImage, RangeConfig, RangeProfiler};
use crate::checked::target::ProfilerApi;
use crate::checked::{Cupti, Driver};
use crate::model::session::SessionTree;
use crate::model::{ClockPair, DevicePeaks, MetricSet, ProfilingMode, RangeId, ThreadId};
use crate::report::stream::{StreamPipeline, StreamSettings};

/// What a live capture holds; dropped (in field order) when the capture ends.
pub(super) struct Capture {
    pub(super) membership: Option<HubMembership>,
    pub(super) counters: Option<Counters>,
    pub(super) _primary: Option<PrimaryContext>,
    pub(super) context: Context,
}

/// The session's records, behind one lock.
pub(super) struct SessionState {
    pub(super) tree: SessionTree,
    pub(super) correlator: Correlator,
    /// per_kernel in rotation: which launches open a range ([`super::rotation`]).
    pub(super) rotation: Option<super::rotation::Rotation>,
    pub(super) warnings: Vec<String>,
    /// Nested driver correlation id → the outer runtime call's id, for the activity records
    /// drained so far.
    pub(super) aliases: HashMap<u32, u32>,
    /// (nested id, outer id) pairs heard since the last drain: a push on the launch path,
    /// moved into `aliases` when activity is drained.
    pub(super) alias_log: Vec<(u32, u32)>,
    /// Correlation ids of launches made after finishing began: not part of the session.
    pub(super) after_finish: std::collections::HashSet<u32>,
    /// Activity records of those launches, left out.
    pub(super) records_after_finish: u64,
    /// Correlation ids of launches made after [`Profiler::seal`]: past the end of the
    /// session's window by design, so left out without a warning.
    pub(super) after_seal: std::collections::HashSet<u32>,
    /// The names of the last kernel launches (named rows for kernels that never completed).
    pub(super) recent: recent::RecentLaunches,
    /// Launches numbered so far where no counter image numbers them (trace, per_range).
    pub(super) launches_numbered: u32,
    /// The streamed outputs, when asked for ([`Profiler::stream_into`]).
    pub(super) stream: Option<Box<Streaming>>,
    /// The counter cycle of launches (per_kernel) and ranges (per_range) where no counter
    /// image numbers them: 0, except in the harness, whose script numbers cycles.
    pub(super) uncounted_cycle: u32,
}

/// How a session streams its rows (issue 42; see the README's streamed outputs).
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// The directory the streamed tables go into (`kernels/`, `steps/`, ...).
    pub dir: std::path::PathBuf,
    /// Kernel launches the session holds before it starts streaming: below it the session
    /// keeps every row and writes exactly the whole-file outputs; once past it, every row is
    /// streamed and leaves memory, and the whole-file row tables are not written.
    pub row_limit: u64,
    /// Segments, aggregates and the flight recorder.
    pub settings: StreamSettings,
}

impl StreamConfig {
    /// The launches held before streaming starts: [`StreamConfig::row_limit`], or 0 with a
    /// flight recorder ([`StreamSettings::flight`]) or live metrics ([`StreamSettings::live`]),
    /// which need the steps table and the drains from the run's start: such a run streams
    /// from its first drain.
    pub fn effective_row_limit(&self) -> u64 {
        if self.settings.flight.is_some() || self.settings.live.is_some() {
            0
        } else {
            self.row_limit
        }
    }
}

/// The state of a streaming session.
#[derive(Debug)]
pub(super) struct Streaming {
    pub(super) config: StreamConfig,
    /// Started once the session passed the row limit.
    pub(super) pipeline: Option<StreamPipeline>,
    /// Drains that failed, and the first one's error.
    pub(super) failed_drains: u64,
    pub(super) first_failure: Option<String>,
    /// Held while a drain writes flight-recorder windows out of the session's lock (taken
    /// under it, so the finish, which takes it under the session's lock too, waits for them).
    pub(super) window_writes: Arc<Mutex<()>>,
    /// How long the drains took (updated out of the session's lock).
    pub(super) times: Arc<Mutex<crate::report::stream::DrainTimes>>,
    /// per_range: the nesting levels CUPTI measures, known when streaming was asked for.
    pub(super) measured_levels: Option<u16>,
}

impl SessionState {
    pub(super) fn new() -> SessionState {
        SessionState {
            tree: SessionTree::new(),
            correlator: Correlator::new(),
            rotation: None,
            warnings: Vec::new(),
            aliases: HashMap::new(),
            alias_log: Vec::new(),
            after_finish: Default::default(),
            records_after_finish: 0,
            after_seal: Default::default(),
            recent: Default::default(),
            launches_numbered: 0,
            stream: None,
            uncounted_cycle: 0,
        }
    }

    /// The next launch's ordinal where no counter image numbers launches.
    pub(super) fn next_launch_ordinal(&mut self) -> u32 {
        self.launches_numbered += 1;
        self.launches_numbered - 1
    }
}

pub(super) struct Shared {
    pub(super) cupti: Cupti,
    /// per_kernel in rotation: ns the launching threads spent in CUPTI's range push and pop
    /// since the rotation last took it (the cost of measuring, [`super::rotation`]).
    pub(super) rotation_stall_ns: std::sync::atomic::AtomicU64,
    /// Stamps each launch ([`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)).
    pub(super) launch_clock: activity::LaunchClock,
    pub(super) driver: Driver,
    pub(super) clock_start: ClockPair,
    /// Memset calls under kernel replay whose parameters could not be read: no activity
    /// times them and no row describes them.
    pub(super) memsets_unread: std::sync::atomic::AtomicU64,
    /// The waits (synchronizes) left out because a CUDA stream was capturing
    /// ([`crate::capture::stream_capture`]), counted for the report.
    pub(super) skipped_waits: crate::capture::stream_capture::SkippedWaits,
    /// Ordinal of the session's device (CUPTI's device id), for transfers no activity
    /// record describes.
    pub(super) device_id: Option<u32>,
    /// CUPTI's id of the profiled context.
    pub(super) context_id: u32,
    pub(super) mode: ProfilingMode,
    pub(super) metric_set: MetricSet,
    pub(super) metric_names: Vec<String>,
    pub(super) passes: usize,
    pub(super) flush_on_range_boundaries: bool,
    pub(super) synchronize_on_pop: bool,
    pub(super) range_scope: RangeScope,
    pub(super) device_name: String,
    pub(super) chip: String,
    pub(super) device_peaks: DevicePeaks,
    /// The driver's release, for the report's metadata.
    pub(super) driver_version: Option<String>,
    pub(super) started_unix_ns: u64,
    pub(super) capture: Mutex<Option<Capture>>,
    pub(super) state: Mutex<SessionState>,
    pub(super) incoming: Arc<Mutex<Vec<ActivityRecord>>>,
    pub(super) launch_gate: Mutex<()>,
    pub(super) finished: AtomicBool,
    /// Set by [`Profiler::seal`]: the session's window has ended, its finish is still to come.
    pub(super) sealed: AtomicBool,
    pub(super) replay: Mutex<ReplayState>,
    /// Iteration replay: the pattern of the repeating range whose instances are the passes.
    pub(super) iteration_range: Option<glob::Pattern>,
    /// The PM sampler, when asked for.
    pub(super) pm: Mutex<Option<PmSession>>,
    /// The PC sampler, when asked for.
    pub(super) pc: Mutex<Option<PcSession>>,
    /// gmprof's own callback time at the start, when measured (`GMPROF_SELF_TIME=1`).
    pub(super) self_time_at_start: Option<crate::model::SelfTime>,
    /// Launch stamps missed in the process before the session started
    /// ([`activity::launch_stamps_missed`]).
    pub(super) stamps_missed_at_start: u64,
    /// Whether calls are stamped when they return ([`ProfilerBuilder::time_api_calls`](super::ProfilerBuilder::time_api_calls)).
    pub(super) time_api_calls: bool,
    /// Call stamps of [`Shared::time_api_calls`] the clock could not take, and the first
    /// failure's code (0: none).
    pub(super) call_stamps_missed: std::sync::atomic::AtomicU64,
    pub(super) call_stamp_error: std::sync::atomic::AtomicU32,
}

/// A profiling session on one GPU context. Cheap to clone; all clones share the session.
///
/// Range calls are thread-safe; each thread has its own range stack.
#[derive(Clone)]
pub struct Profiler {
    pub(super) shared: Arc<Shared>,
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
    pub(super) profiler: &'a Profiler,
    pub(super) id: Option<RangeId>,
    pub(super) thread: ThreadId,
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.profiler.close_range(id, self.thread);
        }
    }
}

pub(super) fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The range profiler side of a counter mode.
pub(super) struct Counters {
    pub(super) range_profiler: Option<RangeProfiler>,
    pub(super) counter_data: CounterDataImage,
    pub(super) config_image: Vec<u8>,
    pub(super) config: RangeConfig,
    pub(super) _api: ProfilerApi,
    pub(super) cycle: u32,
    pub(super) ordinal_in_cycle: u32,
    /// Per-kernel CUPTI ranges opened in this cycle (launches measured; all of them
    /// without rotation).
    pub(super) ranges_in_cycle: u32,
    /// per_kernel in rotation (its state is the session state's `rotation`).
    pub(super) rotating: bool,
    /// Whether a rotation cycles a full image mid-run (else it stops measuring).
    pub(super) rotation_cycles: bool,
    pub(super) dropped_ranges: u64,
    /// Of `dropped_ranges`, those lost because CUPTI calls failed (said by their warnings).
    pub(super) lost_ranges: u64,
    /// Whether the range profiler is started (between `start` and `stop`).
    pub(super) running: bool,
    /// CUPTI user ranges open now.
    pub(super) user_depth: u32,
    /// Evaluates decoded images off the launching thread; owns the profiler host object.
    /// Declared after the range profiler, so a session dropped without `finish` disables
    /// the profiler before the images the evaluator holds are freed.
    pub(super) evaluator: Evaluator,
    pub(super) background_evaluation: bool,
    /// Mid-run counter cycles, as the launching thread saw them.
    pub(super) pauses: Vec<crate::model::ProfilerPause>,
    /// Per user range open in per_range mode, oldest first: whether CUPTI has a range for
    /// it (one whose push failed has none, and its pop must not close CUPTI's).
    pub(super) pushed: Vec<bool>,
    /// Why this cycle's counters cannot be trusted (a CUPTI range did not close with its
    /// range): they are dropped, counted and said, when the cycle is collected.
    pub(super) broken: Option<String>,
    /// What a failed mid-run cycle left to do before the profiler runs again; tried again
    /// at the next launch or range.
    pub(super) restart: Option<Restart>,
}

/// The steps that bring a counter cycle back to running after a failed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Restart {
    /// Re-initialize the image and configure (then start).
    Rearm,
    /// Start.
    Start,
}

/// A kernel's identity for comparing replay passes: name, grid and block.
pub(super) type KernelSignature = (String, [i32; 3], [i32; 3]);

/// User replay in progress ([`Profiler::replay`]): what pass 0 did, so later passes can be
/// named like it and checked against it.
#[derive(Default)]
pub(super) struct ReplayState {
    pub(super) active: bool,
    pub(super) pass: usize,
    /// Pass 0's kernel launches in order: correlation id and range.
    pub(super) kernel_script: Vec<(u32, Option<RangeId>)>,
    /// Pass 0's range pushes in order: name and range.
    pub(super) range_script: Vec<(String, RangeId)>,
    /// Position in the scripts within the current pass.
    pub(super) kernel_cursor: usize,
    pub(super) range_cursor: usize,
    /// Correlation ids of each later pass's launches, in order.
    pub(super) pass_kernels: Vec<Vec<u32>>,
    /// Signatures of the kernels above, from their activity records.
    pub(super) signatures: HashMap<u32, KernelSignature>,
    /// Correlation ids whose signatures are wanted (every replay's launches).
    pub(super) tracked: HashSet<u32>,
    /// Correlation ids of later passes' launches: not rows of their own.
    pub(super) replayed: HashSet<u32>,
    /// Range pushes beyond pass 0's script in a later pass, still open.
    pub(super) extra_open: u32,
    pub(super) mismatched_ranges: Vec<RangeId>,
    /// Launches made outside `replay` while a multi-pass set waits for one.
    pub(super) unreplayed_launches: u64,
    /// Ranges open now (all threads), for iteration replay.
    pub(super) open_depth: usize,
    /// Iteration replay: the depth at which the current instance of the named range opened.
    pub(super) iteration_level: Option<usize>,
    /// Completed replay rounds.
    pub(super) rounds: u64,
}

impl ReplayState {
    pub(super) fn replaying(&self) -> bool {
        self.active && self.pass > 0
    }

    pub(super) fn tracks(&self, correlation_id: u32) -> bool {
        self.tracked.contains(&correlation_id)
    }
}

/// Stands for a range pushed in a later replay pass beyond what pass 0 pushed.
pub(super) const EXTRA_REPLAY_RANGE: RangeId = RangeId { slot: u32::MAX, generation: u32::MAX };
