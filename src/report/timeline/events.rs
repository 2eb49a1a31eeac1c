//! The `trace.json` document: its events ([`TraceEvent`], [`Phase`], the args of each kind in
//! [`EventArgs`]), its `otherData` ([`TraceInfo`]), and the processes and threads its tracks
//! live on ([`CPU_PID`], [`GPU_PID_BASE`], ...).
//!
//! Every file of `timeline` that makes events imports these types, and this file imports
//! none of them: what the trace writer ([`trace`](super::trace)), the lanes, the device-timer
//! tracks and the merged trace of several processes share.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::correlate::{KernelStatus, TimeSource, TransferStatus};
use crate::model::{ProfilingMode, RangeId};

/// Process id of the CPU process, which holds the ranges and the counter tracks.
pub const CPU_PID: u64 = 1;

/// GPU `d` is process `GPU_PID_BASE + d`.
pub const GPU_PID_BASE: u64 = 100;

/// Thread id of the counter events on [`CPU_PID`] (no OS thread has id 0).
pub const COUNTER_TID: u64 = 0;

/// Thread id of the PM sampling counter tracks on the GPU's process (no stream has it).
pub const PM_TID: u64 = u32::MAX as u64 + 1;

/// Thread of the CPU process that holds the profiler's pauses ("gmprof: counter cycles").
pub const PAUSE_TID: u64 = u32::MAX as u64 + 2;

/// `args.placement` of kernels whose position on the timeline is synthetic.
pub const SYNTHETIC_PLACEMENT: &str = "synthetic: durations from counters, positions not measured";

/// A whole trace: what
/// [`Report::write_chrome_trace`](crate::report::Report::write_chrome_trace) writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChromeTrace {
    /// The events, sorted: metadata first, then by (pid, tid, ts).
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<TraceEvent>,
    /// How the viewer displays times: always `"ns"`.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
    /// Everything else a reader needs to trust the trace.
    #[serde(rename = "otherData")]
    pub other_data: TraceInfo,
}

/// The trace event phases gmprof writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Phase {
    /// `"M"`: process or thread name.
    #[serde(rename = "M")]
    Metadata,
    /// `"X"`: a complete event with a start and a duration.
    #[serde(rename = "X")]
    Complete,
    /// `"C"`: a counter sample.
    #[serde(rename = "C")]
    Counter,
    /// `"i"`: an instant (an in-kernel timer's point event).
    #[serde(rename = "i")]
    Instant,
}

/// One trace event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    /// Range, kernel, transfer kind or metric name; `process_name` / `thread_name` for
    /// metadata.
    pub name: String,
    /// `"range"`, `"kernel"`, `"transfer"`, `"metric"` or `"pm"`; none for metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cat: Option<&'static str>,
    /// The phase.
    pub ph: Phase,
    /// Start, µs from [`TraceInfo::origin_cupti_ns`]; none for metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// Duration, µs; complete events only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// Process: [`CPU_PID`] or [`GPU_PID_BASE`] + device.
    pub pid: u64,
    /// Thread: CPU thread id, stream id, or [`COUNTER_TID`].
    pub tid: u64,
    /// Details.
    pub args: EventArgs,
}

/// The args of an event, by kind (serialized without a tag).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EventArgs {
    /// Of a metadata event.
    Name {
        /// The process or thread name.
        name: String,
    },
    /// Of a range.
    Range(RangeArgs),
    /// Of a kernel.
    Kernel(KernelArgs),
    /// Of a memcpy or memset.
    Transfer(TransferArgs),
    /// Of an in-kernel region or instant.
    Region(RegionArgs),
    /// Of a counter sample.
    Counter {
        /// The metric's value.
        value: f64,
    },
    /// Of a profiler pause: a mid-run counter cycle.
    Pause {
        /// The counter cycle that ended.
        cycle: u32,
        /// Counter ranges it held.
        ranges: u32,
        /// The launching thread it held.
        thread: u64,
    },
}

/// Args of a range event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RangeArgs {
    /// The range path, e.g. `train_step/forward`.
    pub path: String,
    /// 0 for top-level ranges.
    pub depth: u32,
    /// How many earlier instances of this path the session had.
    pub instance: u32,
    /// `"slot.generation"`.
    pub range_id: String,
    /// The enclosing range's id; absent for top-level ranges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Kernels of this range and its nested ranges.
    pub kernel_count: u64,
    /// Kernels launched while this range itself was innermost.
    pub self_kernel_count: u64,
    /// Of `kernel_count`, rows whose status is not `ok`.
    pub flagged_kernel_count: u64,
    /// Σ kernel durations, ns.
    pub gpu_time_ns: Option<u64>,
    /// Pop − push, ns.
    pub wall_time_ns: Option<u64>,
    /// The range's metrics and derived DRAM bandwidths by name (only those with a value).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

/// Args of a kernel event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelArgs {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Path of the launching range, or `<root>`.
    pub range_path: String,
    /// `"slot.generation"` of the launching range; absent outside any range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_id: Option<String>,
    /// When the launch call was recorded, µs on the trace's clock (like `ts`; below 0 when
    /// the call came before the first event). Inside the launching range, and before the
    /// kernel starts: `gmprof check-trace` checks both. Absent when capture took no
    /// timestamp, and where kernel positions are synthetic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_ts: Option<f64>,
    /// Grid dimensions.
    pub grid: Option<[i32; 3]>,
    /// Block dimensions.
    pub block: Option<[i32; 3]>,
    /// What the join established.
    pub status: KernelStatus,
    /// Kernel duration, ns.
    pub duration_ns: Option<u64>,
    /// [`SYNTHETIC_PLACEMENT`] in counter modes; absent when the position was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<&'static str>,
    /// The kernel's metrics by name (only those with a value).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// CUPTI's graph id, for a kernel a CUDA graph launch ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<u32>,
    /// CUPTI's graph node id, for a kernel a CUDA graph launch ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_node_id: Option<u64>,
}

/// Args of a memcpy or memset event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransferArgs {
    /// CUPTI correlation id.
    pub correlation_id: u32,
    /// Bytes copied or set.
    pub bytes: u64,
    /// Bytes / duration, GB/s.
    pub gbps: Option<f64>,
    /// Path of the calling range, or `<root>`.
    pub range_path: String,
    /// `"slot.generation"` of the calling range; absent outside any range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_id: Option<String>,
    /// The calling thread.
    pub thread: Option<u64>,
    /// CUDA function of the call, e.g. `cuMemcpyHtoDAsync_v2`.
    pub api_name: Option<String>,
    /// What the join established.
    pub status: TransferStatus,
}

/// Rows of the report that have no event, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SkippedRows {
    /// Ranges never popped (no end timestamp).
    pub open_ranges: u64,
    /// Ranges without a push timestamp, or popped before pushed.
    pub ranges_without_times: u64,
    /// Kernels without a device and stream, or (trace mode) without ordered activity
    /// timestamps.
    pub kernels_without_times: u64,
    /// Transfers whose end precedes their start.
    pub transfers_without_times: u64,
    /// Transfers that were not timed (timing `api_call`: memsets under kernel replay); they
    /// are in transfers.csv and the range sums, but have no start to place them at.
    pub untimed_transfers: u64,
}

/// The trace's `otherData`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceInfo {
    /// The gmprof version that wrote the report.
    pub gmprof_version: String,
    /// How counters were collected.
    pub mode: ProfilingMode,
    /// Where kernel durations come from.
    pub time_source: TimeSource,
    /// The GPU's name.
    pub device_name: Option<String>,
    /// The chip name.
    pub chip: Option<String>,
    /// `ts` 0, ns on the CUPTI clock.
    pub origin_cupti_ns: u64,
    /// `ts` 0, ns since the Unix epoch, when the report has a clock pair.
    pub origin_unix_ns: Option<u64>,
    /// `"measured"` or [`SYNTHETIC_PLACEMENT`].
    pub kernel_placement: &'static str,
    /// What a reader must know about the positions of events, when there is something.
    pub note: Option<String>,
    /// Counter ranges CUPTI dropped.
    pub dropped_counter_ranges: u64,
    /// Activity records CUPTI dropped.
    pub dropped_activity_records: u64,
    /// Kernel rows whose status is not `ok`.
    pub flagged_kernel_rows: u64,
    /// GPU slices drawn on an extra lane of their stream (`stream 7 · overlapped`) because
    /// they start before an earlier slice of the stream has ended (see
    /// [`lanes`](super::lanes)).
    pub overlap_lane_events: u64,
    /// Rows that have no event.
    pub skipped: SkippedRows,
    /// Every warning of the report.
    pub warnings: Vec<String>,
    /// How the in-kernel region tracks were placed; absent without device timers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_timers: Option<DeviceTimerTraceInfo>,
}

/// Args of a region or instant event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionArgs {
    /// Correlation id of the launch.
    pub correlation_id: Option<u32>,
    /// Region id.
    pub region_id: u16,
    /// Block (linear).
    pub block: u32,
    /// Lane in the block.
    pub lane: u32,
    /// SM.
    pub sm: u16,
    /// Duration by `%globaltimer`, ns (regions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// Payload of the begin record (of the instant).
    pub payload: u32,
    /// Payload of the end record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_payload: Option<u32>,
}

/// What `otherData.device_timers` says about the region tracks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceTimerTraceInfo {
    /// Launches with timers in the report.
    pub launches: u64,
    /// Launches drawn inside their kernel's slice.
    pub placed: u64,
    /// Launches not drawn: no kernel row, or a kernel without a position.
    pub unplaced: u64,
    /// `"one offset for all launches"`, `"offsets fitted per run of launches"` (the clocks
    /// drifted) or `"each launch inside its own kernel slice"` (kernel positions synthetic).
    pub clock: &'static str,
    /// Runs of launches that share one offset (per GPU, summed).
    pub runs: u64,
    /// The shared offset (CUPTI − `%globaltimer`), ns, when one fits every launch.
    pub offset_ns: Option<i64>,
    /// The largest uncertainty of a placed launch's offset, ns.
    pub slack_ns: Option<u64>,
    /// Regions and instants of placed launches left out of the trace: more overlapped at
    /// once on one SM (or block and lane) than it has tracks (256 per SM, 8 per lane).
    pub regions_left_out: u64,
}

/// A `RangeId` as `"slot.generation"`.
pub(super) fn id_text(id: RangeId) -> String {
    format!("{}.{}", id.slot, id.generation)
}
