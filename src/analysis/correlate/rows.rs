//! The rows correlation produces: one [`KernelRow`] per kernel, one [`TransferRow`] per
//! memcpy or memset, their statuses and time sources, and the counts of a [`Correlation`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{ProfilingMode, RangeId, ThreadId, TransferKind};

/// How many warnings a correlation keeps in full; the rest are counted in one final line, so
/// a capture that went wrong a million times does not produce a million-line report.
pub const MAX_WARNINGS: usize = 64;

/// What the correlator could establish about one kernel row.
///
/// A row has one status. When several problems apply, the one that says most about the
/// trustworthiness of its values wins, in this order: `not_completed`, `unlaunched_activity`,
/// `count_mismatch`, `replay_mismatch`, `name_mismatch`, `missing_counters`,
/// `missing_activity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelStatus {
    /// Launch, activity and (in counter modes) counters all joined.
    Ok,
    /// The launch was recorded but its activity record never came (CUPTI dropped records):
    /// name and geometry are unknown; counters and time may still be there.
    MissingActivity,
    /// No counter range belongs to this launch; its metrics are empty.
    MissingCounters,
    /// The launch's cycle has a different number of counter ranges than launches, so the
    /// positional join of the whole cycle is suspect. Values are kept only where the range
    /// name confirms the ordinal.
    CountMismatch,
    /// The counter range at this launch's ordinal has a different name; metrics are empty.
    NameMismatch,
    /// An activity record without a launch record (a context or thread gmprof did not
    /// capture); attributed to the root row, without counters.
    UnlaunchedActivity,
    /// User replay: another pass ran a different kernel (name, grid or block) at this
    /// kernel's position, so CUPTI merged counters of different kernels; metrics are empty.
    ReplayMismatch,
    /// The CUDA context failed (the program's own error, e.g. an illegal instruction) and
    /// neither an activity record nor counters came for this launch: its kernel was running
    /// or queued when the context failed and never completed. Times and metrics are empty;
    /// the name is the one the launch callback kept, for the last launches.
    NotCompleted,
    /// per_kernel with rotation: the launch's position was measured in another step of the
    /// rotation, so this launch ran unmeasured (timed, not serialized); its metrics are blank
    /// by design. Not a problem: not flagged.
    Unmeasured,
}

impl KernelStatus {
    /// The serialized name, e.g. `missing_activity`.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStatus::Ok => "ok",
            KernelStatus::MissingActivity => "missing_activity",
            KernelStatus::MissingCounters => "missing_counters",
            KernelStatus::CountMismatch => "count_mismatch",
            KernelStatus::NameMismatch => "name_mismatch",
            KernelStatus::UnlaunchedActivity => "unlaunched_activity",
            KernelStatus::ReplayMismatch => "replay_mismatch",
            KernelStatus::NotCompleted => "not_completed",
            KernelStatus::Unmeasured => "unmeasured",
        }
    }

    /// True for every status but `ok` and `unmeasured` (a rotation's launch measured in
    /// another step).
    pub fn is_flagged(self) -> bool {
        !matches!(self, KernelStatus::Ok | KernelStatus::Unmeasured)
    }

    /// Priority when several problems apply to one row; higher wins.
    fn severity(self) -> u8 {
        match self {
            KernelStatus::Ok => 0,
            KernelStatus::Unmeasured => 1,
            KernelStatus::MissingActivity => 2,
            KernelStatus::MissingCounters => 3,
            KernelStatus::NameMismatch => 4,
            KernelStatus::ReplayMismatch => 5,
            KernelStatus::CountMismatch => 6,
            KernelStatus::UnlaunchedActivity => 7,
            KernelStatus::NotCompleted => 8,
        }
    }

    pub(super) fn worst(self, other: KernelStatus) -> KernelStatus {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for KernelStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one kernel row stands for.
///
/// A CUDA graph launch runs many kernels under one correlation id. Its kernels are rows of
/// granularity `graph_node` in every mode. In per_kernel mode the launch also gets a row of
/// granularity `graph`: the counters of the per-kernel CUPTI range around the whole graph
/// launch, with the time of its kernels. Range totals count kernels and their time from
/// `kernel` and `graph_node` rows and take counters from the rows that carry them, so no
/// kernel is counted twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// One kernel launched on its own.
    #[default]
    Kernel,
    /// One kernel node of a CUDA graph launch.
    GraphNode,
    /// A whole CUDA graph launch: counters of all its kernels together (per_kernel mode).
    Graph,
}

impl Granularity {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Kernel => "kernel",
            Granularity::GraphNode => "graph_node",
            Granularity::Graph => "graph",
        }
    }

    /// Whether the row is one kernel's execution (counted in kernel counts and kernel time).
    pub fn is_kernel_execution(self) -> bool {
        self != Granularity::Graph
    }
}

/// Where a kernel's duration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeSource {
    /// The `gpu__time_duration.sum` metric of the kernel's counter range. Used in
    /// [`ProfilingMode::KernelReplay`], where CUPTI's auto range is the kernel itself and
    /// kernel replay collapses activity timestamps (start == end).
    #[serde(rename = "gpu__time_duration")]
    GpuTimeDuration,
    /// Activity record end − start: the GPU's own start and end of the kernel. Used in
    /// [`ProfilingMode::Trace`], and under user replay ([`ProfilingMode::PerKernel`],
    /// [`ProfilingMode::PerRange`]), where the timestamps are real (measured on an H100 with
    /// CUPTI 13.0: within 1 ns of trace mode's at the median). In per_kernel the kernel's
    /// CUPTI range also measures `gpu__time_duration.sum`, but that range opens at the launch
    /// call, before the kernel starts, so it adds the GPU's wait for the launch (about 4 µs);
    /// it is kept as [`KernelRow::range_duration_ns`].
    #[serde(rename = "activity")]
    Activity,
}

impl TimeSource {
    /// The time source a mode uses.
    pub fn for_mode(mode: ProfilingMode) -> Self {
        match mode {
            ProfilingMode::KernelReplay => TimeSource::GpuTimeDuration,
            ProfilingMode::Trace | ProfilingMode::PerKernel | ProfilingMode::PerRange => TimeSource::Activity,
        }
    }

    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeSource::GpuTimeDuration => "gpu__time_duration",
            TimeSource::Activity => "activity",
        }
    }
}

impl fmt::Display for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One kernel, with everything the three capture streams said about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRow {
    /// The innermost range open on the launching thread, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// That range's path, or [`ROOT_PATH`](crate::model::session::ROOT_PATH).
    pub range_path: String,
    /// Counter cycle of the launch; `None` for activity records without a launch.
    pub cycle: Option<u32>,
    /// Launch ordinal within the cycle; `None` for activity records without a launch.
    pub ordinal: Option<u32>,
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Demangled kernel name (the raw name when it does not demangle); `None` without an
    /// activity record.
    pub kernel_name: Option<String>,
    /// The name as CUPTI reported it (mangled for C++ kernels).
    pub mangled_name: Option<String>,
    /// Grid dimensions.
    pub grid: Option<[i32; 3]>,
    /// Block dimensions.
    pub block: Option<[i32; 3]>,
    /// Registers per thread.
    pub registers_per_thread: Option<u16>,
    /// Static plus dynamic shared memory per block, bytes.
    pub shared_memory_bytes: Option<i64>,
    /// CUDA stream id.
    pub stream_id: Option<u32>,
    /// The launching thread; `None` for activity records without a launch.
    pub thread: Option<ThreadId>,
    /// When the launch call was recorded, ns on the CUPTI clock (see
    /// [`LaunchRecord::launch_ns`](crate::model::LaunchRecord::launch_ns)); `None` without a
    /// launch record or where capture took no timestamp.
    #[serde(default)]
    pub launch_ns: Option<u64>,
    /// When the launch call returned, ns on the CUPTI clock; `None` where capture did not
    /// stamp it (it does only when asked: `ProfilerBuilder::time_api_calls`, which the Kineto
    /// form of `trace.json` turns on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_end_ns: Option<u64>,
    /// CUDA function of the launch call as CUPTI names it, e.g. `cudaLaunchKernel`,
    /// `cuLaunchKernelEx`, `cudaGraphLaunch`; `None` without a launch record.
    #[serde(default)]
    pub api_name: Option<Cow<'static, str>>,
    /// Device ordinal.
    pub device_id: Option<u32>,
    /// Activity start timestamp, ns (collapsed to `end_ns` in kernel_replay).
    pub start_ns: Option<u64>,
    /// Activity end timestamp, ns.
    pub end_ns: Option<u64>,
    /// Kernel duration, ns, from [`KernelRow::time_source`]; `None` when that source has no
    /// value (no activity record, or timestamps with end ≤ start; no counters in
    /// kernel_replay).
    pub duration_ns: Option<u64>,
    /// Where `duration_ns` comes from.
    pub time_source: TimeSource,
    /// `gpu__time_duration.sum` of the CUPTI range that measured this kernel's counters, ns:
    /// the per-kernel user range in [`ProfilingMode::PerKernel`] (the kernel plus the GPU's
    /// wait between the range's start at the launch call and the kernel's start), CUPTI's
    /// auto range in [`ProfilingMode::KernelReplay`] (the kernel; equal to `duration_ns`).
    /// It is the window that per-kernel ratio and throughput metrics were measured over.
    /// `None` in per_range and trace (no per-kernel counter range) and without counters.
    #[serde(default)]
    pub range_duration_ns: Option<u64>,
    /// One value per metric of the session's [`MetricSet`](crate::model::MetricSet), in its order; `None` where no
    /// value was measured or could be matched.
    pub metrics: Vec<Option<f64>>,
    /// What the join established.
    pub status: KernelStatus,
    /// A kernel, a graph node, or a whole graph launch.
    #[serde(default)]
    pub granularity: Granularity,
    /// CUPTI's id of the graph, for graph nodes and whole graphs.
    #[serde(default)]
    pub graph_id: Option<u32>,
    /// CUPTI's id of the graph node, for graph nodes.
    #[serde(default)]
    pub graph_node_id: Option<u64>,
    /// For a whole-graph row: the number of kernels the graph launch ran (its
    /// `graph_node` rows, which follow it).
    #[serde(default)]
    pub graph_kernels: Option<u32>,
}

/// What the correlator could establish about one transfer row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    /// The API call and the activity record joined: thread and range are known.
    Ok,
    /// No API call was recorded, but a CUDA graph launch holds the correlation id (a memcpy
    /// or memset node of a graph): attributed to the graph launch's thread and range.
    GraphTransfer,
    /// No API call was recorded (a context or thread gmprof did not capture): attributed to
    /// the root row, without a thread.
    Unlaunched,
}

impl TransferStatus {
    /// The serialized name, e.g. `unlaunched`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferStatus::Ok => "ok",
            TransferStatus::GraphTransfer => "graph_transfer",
            TransferStatus::Unlaunched => "unlaunched",
        }
    }
}

impl fmt::Display for TransferStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a transfer row's numbers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferTiming {
    /// CUPTI's activity record: kind, bytes, stream, device, start and end as measured.
    #[default]
    Activity,
    /// The API call alone (a memset under kernel replay, which records no memset
    /// activity): kind and bytes from the call's parameters, range and thread from the
    /// call; no start, end, duration or stream (not measured).
    ApiCall,
}

impl TransferTiming {
    /// The serialized name, e.g. `api_call`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferTiming::Activity => "activity",
            TransferTiming::ApiCall => "api_call",
        }
    }
}

impl fmt::Display for TransferTiming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One memcpy or memset: its activity record joined with the API call that issued it, or,
/// with [`TransferTiming::ApiCall`], the call alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferRow {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Copy direction, or memset.
    pub kind: TransferKind,
    /// Bytes copied or set.
    pub bytes: u64,
    /// Start, ns (CUPTI clock); `None` when not measured ([`TransferTiming::ApiCall`]).
    pub start_ns: Option<u64>,
    /// End, ns (CUPTI clock); `None` when not measured.
    pub end_ns: Option<u64>,
    /// End − start, ns (0 when the timestamps are not ordered); `None` when not measured.
    pub duration_ns: Option<u64>,
    /// Where the numbers come from.
    #[serde(default)]
    pub timing: TransferTiming,
    /// CUDA stream id; `None` when not measured.
    pub stream_id: Option<u32>,
    /// Device ordinal; `None` when unknown.
    pub device_id: Option<u32>,
    /// The innermost range open on the calling thread, `None` for the root row.
    pub range_id: Option<RangeId>,
    /// That range's path, or [`ROOT_PATH`](crate::model::session::ROOT_PATH).
    pub range_path: String,
    /// The calling thread; `None` without a recorded call.
    pub thread: Option<ThreadId>,
    /// CUDA function name of the call, e.g. `cuMemcpyHtoDAsync_v2`; `None` without a call.
    #[serde(default)]
    pub api_name: Option<String>,
    /// When the call was made and when it returned, ns on the CUPTI clock; `None` where
    /// capture did not stamp them (only when asked, as [`KernelRow::launch_end_ns`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_ns: Option<u64>,
    /// See [`TransferRow::call_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_end_ns: Option<u64>,
    /// What the join established.
    pub status: TransferStatus,
    /// CUPTI's id of the graph, for memcpy and memset nodes of a graph launch.
    #[serde(default)]
    pub graph_id: Option<u32>,
    /// CUPTI's id of the graph node.
    #[serde(default)]
    pub graph_node_id: Option<u64>,
}

impl TransferRow {
    /// Bytes / duration, GB/s (bytes per ns); `None` for a zero or unmeasured duration.
    pub fn gbps(&self) -> Option<f64> {
        self.duration_ns.filter(|d| *d > 0).map(|d| self.bytes as f64 / d as f64)
    }

    /// Whether start, end and duration were measured.
    pub fn is_timed(&self) -> bool {
        self.duration_ns.is_some()
    }
}

/// Counts of what [`Correlator::finish`](super::Correlator::finish) saw and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrelationCounts {
    /// Launch records received.
    pub launches: u64,
    /// Activity records received.
    pub activity_records: u64,
    /// Counter ranges received.
    pub counter_ranges: u64,
    /// Distinct counter cycles seen in launches or counter ranges.
    pub counter_cycles: u64,
    /// Kernel rows produced.
    pub kernel_rows: u64,
    /// Rows with status `missing_activity`.
    pub missing_activity: u64,
    /// Rows with status `missing_counters`.
    pub missing_counters: u64,
    /// Rows with status `count_mismatch`.
    pub count_mismatch: u64,
    /// Rows with status `name_mismatch`.
    pub name_mismatch: u64,
    /// Rows with status `unlaunched_activity`.
    pub unlaunched_activity: u64,
    /// Rows with status `not_completed`: launches whose kernels never completed because the
    /// CUDA context failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_completed: u64,
    /// Rows with status `unmeasured`: per_kernel with rotation, launches whose positions
    /// were measured in other steps.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmeasured: u64,
    /// Kernel rows of granularity `graph_node`: kernels that CUDA graph launches ran.
    #[serde(default)]
    pub graph_node_rows: u64,
    /// CUDA graph launches recorded.
    #[serde(default)]
    pub graph_launches: u64,
    /// Launches made while their stream was capturing (graph building: they run only when
    /// the graph is launched, so they have no activity and no row).
    #[serde(default)]
    pub captured_launches: u64,
    /// Memcpy/memset calls made while their stream was capturing.
    #[serde(default)]
    pub captured_transfers: u64,
    /// Extra activity records of a graph node within one graph launch (kernel replay reports
    /// a replayed graph kernel more than once); one row per node is kept.
    #[serde(default)]
    pub repeated_graph_node_records: u64,
    /// Rows with status `replay_mismatch`.
    #[serde(default)]
    pub replay_mismatch: u64,
    /// The range profiler's own kernels (CUPTI's one-thread `WaitNs`, launched on an internal
    /// stream under the user's correlation id when user ranges open and close); left out.
    #[serde(default)]
    pub profiler_internal_kernels: u64,
    /// gmprof's own memcpys and memsets (the probe engine's map buffers), left out of the
    /// transfer table ([`Correlator::add_internal_transfers`](super::Correlator::add_internal_transfers)).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub profiler_internal_transfers: u64,
    /// Rows with any status but `ok`.
    pub flagged_rows: u64,
    /// Counter ranges no launch (or range) claimed.
    pub orphan_counter_ranges: u64,
    /// Launches and transfer calls whose range id the session tree did not know
    /// (attributed to the root).
    pub unknown_range_ids: u64,
    /// Memcpy/memset API calls received.
    #[serde(default)]
    pub transfer_calls: u64,
    /// Memcpy/memset activity records received.
    #[serde(default)]
    pub transfer_records: u64,
    /// Transfer rows produced (one per activity record, and one per untimed call).
    #[serde(default)]
    pub transfer_rows: u64,
    /// Transfer rows with status `unlaunched`.
    #[serde(default)]
    pub unlaunched_transfers: u64,
    /// Transfer rows with status `graph_transfer`.
    #[serde(default)]
    pub graph_transfers: u64,
    /// Transfer calls no activity record joined (CUPTI dropped records?), among those
    /// that expected one.
    #[serde(default)]
    pub transfer_calls_without_activity: u64,
    /// Transfer rows of timing `api_call`: calls no activity record times (memsets under
    /// kernel replay), reported with their bytes and without times.
    #[serde(default)]
    pub untimed_transfers: u64,
}

impl CorrelationCounts {
    /// Adds `other`'s counts to these (the contexts of one process, combined).
    pub fn add(&mut self, other: &CorrelationCounts) {
        self.launches += other.launches;
        self.activity_records += other.activity_records;
        self.counter_ranges += other.counter_ranges;
        self.counter_cycles += other.counter_cycles;
        self.kernel_rows += other.kernel_rows;
        self.missing_activity += other.missing_activity;
        self.missing_counters += other.missing_counters;
        self.count_mismatch += other.count_mismatch;
        self.name_mismatch += other.name_mismatch;
        self.unlaunched_activity += other.unlaunched_activity;
        self.not_completed += other.not_completed;
        self.unmeasured += other.unmeasured;
        self.graph_node_rows += other.graph_node_rows;
        self.graph_launches += other.graph_launches;
        self.captured_launches += other.captured_launches;
        self.captured_transfers += other.captured_transfers;
        self.repeated_graph_node_records += other.repeated_graph_node_records;
        self.replay_mismatch += other.replay_mismatch;
        self.profiler_internal_kernels += other.profiler_internal_kernels;
        self.profiler_internal_transfers += other.profiler_internal_transfers;
        self.flagged_rows += other.flagged_rows;
        self.orphan_counter_ranges += other.orphan_counter_ranges;
        self.unknown_range_ids += other.unknown_range_ids;
        self.transfer_calls += other.transfer_calls;
        self.transfer_records += other.transfer_records;
        self.transfer_rows += other.transfer_rows;
        self.unlaunched_transfers += other.unlaunched_transfers;
        self.graph_transfers += other.graph_transfers;
        self.transfer_calls_without_activity += other.transfer_calls_without_activity;
        self.untimed_transfers += other.untimed_transfers;
    }
}

/// The joined result of a session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Correlation {
    /// One row per kernel: launches in (cycle, ordinal) order, the kernels of a graph launch
    /// in start order at the launch's place, then activity records without a launch in
    /// (start, correlation id) order.
    pub rows: Vec<KernelRow>,
    /// In [`ProfilingMode::PerRange`], the counter values CUPTI measured for each range
    /// (inclusive of nested ranges), by range; empty in the other modes.
    pub range_counters: HashMap<RangeId, Vec<Option<f64>>>,
    /// One row per memcpy/memset activity record, in (start, correlation id) order, and one
    /// per untimed call ([`TransferTiming::ApiCall`]) at its call's place: before the first
    /// timed row of a later call.
    pub transfers: Vec<TransferRow>,
    /// What was seen and flagged.
    pub counts: CorrelationCounts,
    /// Human-readable explanations of every disagreement, at most [`MAX_WARNINGS`] plus one
    /// line counting the rest.
    pub warnings: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
