//! Timeline export: a [`Report`] as Chrome trace event JSON, which Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open.
//!
//! Layer 3 (the safe profiler), report output. [`Report::to_chrome_trace`] builds a
//! [`ChromeTrace`] value; [`Report::write_chrome_trace`] and [`Report::write_chrome_trace_to`]
//! serialize it with `serde_json` (nothing is written by hand). The file is the "JSON object
//! format" of the trace event format:
//!
//! ```text
//! {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
//! ```
//!
//! # Tracks
//!
//! - Process [`CPU_PID`] ("CPU ranges") has one thread per CPU thread that pushed ranges
//!   (tid = the OS thread id). Each range instance is a complete (`"X"`) event of category
//!   `"range"` from push to pop; its args hold the path, depth, instance, `range_id` and
//!   `parent_id` (`"slot.generation"`), kernel counts, GPU time and the range's metrics.
//!   The `<root>` row has no timestamps and no event. A range without a pop timestamp (or
//!   whose pop precedes its push) is left out and counted in `otherData.skipped`.
//! - Each GPU is a process with pid [`GPU_PID_BASE`] + device ordinal ("GPU 0: NVIDIA
//!   H100 ..."), with one thread per CUDA stream (tid = stream id, "stream 7"). Kernels are
//!   `"X"` events of category `"kernel"` (name: the demangled kernel name; args: correlation
//!   id, `range_id` and `range_path` of the launching range, `launch_ts` (when the launch
//!   call was recorded, where positions are measured), grid, block, status, metrics);
//!   memcpy and memset are `"X"` events of category `"transfer"` at their measured times.
//!   Untimed transfers (memsets under kernel replay) have no event: they are counted in
//!   `otherData.skipped.untimed_transfers`, never drawn at a made-up time.
//!   Slices of one stream can overlap on the GPU (programmatic dependent launch on Hopper
//!   starts a kernel before the one before it ends), and a viewer draws only nested slices
//!   on one track: a slice that starts before an earlier one of its stream has ended goes,
//!   with its timestamps unchanged, to an extra lane of the stream, `stream 7 · overlapped`
//!   (`· overlapped 2`, ... where more overlap at once), see [`lanes`](crate::report::lanes);
//!   `otherData.overlap_lane_events` counts them.
//! - In counter modes, each range's metrics are also counter (`"C"`) events on the CPU
//!   process (tid [`COUNTER_TID`]), one per metric and range, at the range's push, with
//!   `args.value`, so Perfetto draws a counter track per metric. A counter keeps its value
//!   until the next range starts, so nested ranges show the value of the range that started
//!   last; the range slices' args hold every range's exact values.
//!
//! - Each mid-run counter cycle (CUPTI's range profiler stopped, decoded and started again
//!   while the program waited) is a complete event of category `"gmprof"` on the CPU
//!   process, thread [`PAUSE_TID`] ("gmprof: counter cycles"): wall time the profiler took
//!   from the launching thread (args: cycle, ranges, thread).
//! - With PM sampling, each sampled metric is a counter track `PM <metric>` (category
//!   `"pm"`) on the GPU's process, thread [`PM_TID`] ("PM sampling"), beside the streams:
//!   the raw samples on the activity clock, one event per change of value.
//!
//! Every `ts` and `dur` is in microseconds (floating point, so nanoseconds survive) relative
//! to the earliest timestamp of the report, so the numbers stay small. `otherData` records
//! that origin on the CUPTI clock and, when the report carries a clock pair, as Unix ns.
//! Events are sorted by (pid, tid, ts), metadata first, and on one track an enclosing event
//! comes before the events it contains.
//!
//! # Where kernel times come from
//!
//! Where the report's [`TimeSource`] is activity ([`ProfilingMode::Trace`],
//! [`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`]) kernels sit at the start and
//! end their activity records measured. In [`ProfilingMode::KernelReplay`] kernel replay
//! collapses activity timestamps (start == end), so a kernel's *duration* is measured
//! (`gpu__time_duration.sum`) but its *position* is not. gmprof then places kernels
//! synthetically: in launch order, back to back per device, each starting at the push of
//! the range that launched it or, when the GPU is still busy with earlier kernels (or with a
//! measured transfer), right after them. (Kernels launched outside any range start at their
//! collapsed activity timestamp instead.) Kernel replay serializes kernels, so this layout
//! never overlaps kernels, but the gaps and positions are invented: every such kernel
//! carries `args.placement` = [`SYNTHETIC_PLACEMENT`] and `otherData.note` says so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::placement::Placement;
use crate::analysis::aggregate::RangeRow;
use crate::analysis::correlate::{KernelStatus, TimeSource, TransferStatus};
use crate::analysis::pm_fold::PmReport;
use crate::error::{Error, Result};
use crate::model::{ProfilingMode, RangeId};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;

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

/// A whole trace: what [`Report::write_chrome_trace`] writes.
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
    Region(crate::report::device_timers::RegionArgs),
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
    /// [`lanes`](crate::report::lanes)).
    pub overlap_lane_events: u64,
    /// Rows that have no event.
    pub skipped: SkippedRows,
    /// Every warning of the report.
    pub warnings: Vec<String>,
    /// How the in-kernel region tracks were placed; absent without device timers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_timers: Option<crate::report::device_timers::DeviceTimerTraceInfo>,
}

/// One memcpy or memset, as the timeline needs it.
#[derive(Clone, Debug)]
pub(super) struct Transfer {
    pub(super) name: &'static str,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) stream_id: u32,
    pub(super) device_id: u32,
    pub(super) args: TransferArgs,
}

/// A `RangeId` as `"slot.generation"`.
fn id_text(id: RangeId) -> String {
    format!("{}.{}", id.slot, id.generation)
}

/// ns on the CUPTI clock to µs from `origin`.
fn micros(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1000.0
}

/// [`micros`], negative for `ns` before `origin`.
fn signed_micros(ns: u64, origin: u64) -> f64 {
    if ns >= origin {
        micros(ns, origin)
    } else {
        -((origin - ns) as f64 / 1000.0)
    }
}

/// One counter track per PM-sampled metric, named `PM <metric>`, on the GPU's process: an
/// event at each sample's start whose value differs from the previous one (a counter holds
/// its value until the next event), and a last one at the end of the last sample. Samples
/// before `origin` are left out. Returns whether any event was added.
fn pm_counter_events(pm: &PmReport, origin: u64, pid: u64, events: &mut Vec<TraceEvent>) -> bool {
    let before = events.len();
    for (index, metric) in pm.metrics.iter().enumerate() {
        let name = format!("PM {}", metric.name);
        let mut last: Option<f64> = None;
        let mut end = None;
        for sample in pm.samples.iter().filter(|s| s.start_ns >= origin) {
            end = Some(sample.end_ns);
            let Some(value) = sample.values.get(index).copied().flatten().filter(|v| v.is_finite()) else { continue };
            if last == Some(value) {
                continue;
            }
            last = Some(value);
            events.push(TraceEvent {
                name: name.clone(),
                cat: Some("pm"),
                ph: Phase::Counter,
                ts: Some(micros(sample.start_ns, origin)),
                dur: None,
                pid,
                tid: PM_TID,
                args: EventArgs::Counter { value },
            });
        }
        if let (Some(end), Some(value)) = (end, last) {
            events.push(TraceEvent {
                name,
                cat: Some("pm"),
                ph: Phase::Counter,
                ts: Some(micros(end, origin)),
                dur: None,
                pid,
                tid: PM_TID,
                args: EventArgs::Counter { value },
            });
        }
    }
    events.len() > before
}

/// Values by name, leaving out the missing and the non-finite.
fn by_name<'a>(
    names: impl Iterator<Item = &'a str>,
    values: impl Iterator<Item = Option<f64>>,
) -> BTreeMap<String, f64> {
    names.zip(values).filter_map(|(n, v)| v.filter(|v| v.is_finite()).map(|v| (n.to_owned(), v))).collect()
}

fn range_metrics(report: &Report, row: &RangeRow) -> BTreeMap<String, f64> {
    let mut metrics = by_name(report.metric_names().into_iter(), row.metrics.iter().copied());
    let derived = [
        (crate::analysis::aggregate::DRAM_READ_GBPS, row.dram_read_gbps),
        (crate::analysis::aggregate::DRAM_WRITE_GBPS, row.dram_write_gbps),
        (crate::analysis::aggregate::DRAM_TOTAL_GBPS, row.dram_total_gbps),
    ];
    metrics.extend(by_name(derived.iter().map(|(n, _)| *n), derived.iter().map(|(_, v)| *v)));
    metrics
}

/// A transfer row as the timeline needs it; `None` for a row without times, stream or
/// device (an untimed transfer: it has no place on a track).
pub(super) fn transfer_event(t: &crate::analysis::correlate::TransferRow) -> Option<Transfer> {
    Some(Transfer {
        name: t.kind.as_str(),
        start_ns: t.start_ns?,
        end_ns: t.end_ns?,
        stream_id: t.stream_id?,
        device_id: t.device_id?,
        args: TransferArgs {
            correlation_id: t.correlation_id,
            bytes: t.bytes,
            gbps: t.gbps(),
            range_path: t.range_path.clone(),
            range_id: t.range_id.map(id_text),
            thread: t.thread,
            api_name: t.api_name.clone(),
            status: t.status,
        },
    })
}

/// The Unix time of a CUPTI timestamp, when the report carries a clock pair.
fn unix_ns(report: &Report, cupti_ns: u64) -> Option<u64> {
    report.meta.clock.map(|clock| clock.to_unix_ns(cupti_ns))
}

fn metadata(name: &'static str, pid: u64, tid: u64, value: String) -> TraceEvent {
    TraceEvent {
        name: name.to_owned(),
        cat: None,
        ph: Phase::Metadata,
        ts: None,
        dur: None,
        pid,
        tid,
        args: EventArgs::Name { name: value },
    }
}

impl Report {
    /// The report as a Chrome trace (see the [module docs](crate::report::timeline)).
    pub fn to_chrome_trace(&self) -> ChromeTrace {
        let Placement { measured, skipped, transfers: kept_transfers, ranges, positions, origin } = self.placement();

        let mut events = Vec::new();
        let device_name = self.meta.device_name.as_deref();
        let mut devices: BTreeSet<u32> = BTreeSet::new();
        let mut streams: BTreeSet<(u32, u32)> = BTreeSet::new();
        let mut threads: BTreeSet<u64> = BTreeSet::new();
        // (event index, start, end) of every GPU slice on a stream's track, for the lanes.
        let mut gpu_spans: Vec<crate::report::lanes::GpuSpan> = Vec::new();

        let metric_names = self.metric_names();
        let counter_mode = self.meta.mode != ProfilingMode::Trace;
        for (row, start, end) in &ranges {
            let Some(id) = row.range_id else { continue };
            let thread = row.thread.unwrap_or(0);
            threads.insert(thread);
            let ts = micros(*start, origin);
            if counter_mode {
                for (name, value) in metric_names.iter().zip(&row.metrics) {
                    if let Some(value) = value.filter(|v| v.is_finite()) {
                        events.push(TraceEvent {
                            name: (*name).to_owned(),
                            cat: Some("metric"),
                            ph: Phase::Counter,
                            ts: Some(ts),
                            dur: None,
                            pid: CPU_PID,
                            tid: COUNTER_TID,
                            args: EventArgs::Counter { value },
                        });
                    }
                }
            }
            events.push(TraceEvent {
                name: row.name.clone(),
                cat: Some("range"),
                ph: Phase::Complete,
                ts: Some(ts),
                dur: Some((end - start) as f64 / 1000.0),
                pid: CPU_PID,
                tid: thread,
                args: EventArgs::Range(RangeArgs {
                    path: row.path.clone(),
                    depth: row.depth,
                    instance: row.instance,
                    range_id: id_text(id),
                    parent_id: row.parent_id.map(id_text),
                    kernel_count: row.kernel_count,
                    self_kernel_count: row.self_kernel_count,
                    flagged_kernel_count: row.flagged_kernel_count,
                    gpu_time_ns: row.gpu_time_ns,
                    wall_time_ns: row.wall_time_ns,
                    metrics: range_metrics(self, row),
                }),
            });
        }

        for (k, position) in self.kernels.iter().zip(&positions) {
            let (Some((start, dur)), Some(device), Some(stream)) = (*position, k.device_id, k.stream_id) else {
                continue;
            };
            if !k.granularity.is_kernel_execution() {
                // A whole-graph counter row: its kernels are slices of their own.
                continue;
            }
            devices.insert(device);
            streams.insert((device, stream));
            let name =
                k.kernel_name.clone().or_else(|| k.mangled_name.clone()).unwrap_or_else(|| "<unknown kernel>".into());
            gpu_spans.push((events.len(), start, start.saturating_add(dur)));
            events.push(TraceEvent {
                name,
                cat: Some("kernel"),
                ph: Phase::Complete,
                ts: Some(micros(start, origin)),
                dur: Some(dur as f64 / 1000.0),
                pid: GPU_PID_BASE + u64::from(device),
                tid: u64::from(stream),
                args: EventArgs::Kernel(KernelArgs {
                    correlation_id: k.correlation_id,
                    range_path: k.range_path.clone(),
                    range_id: k.range_id.map(id_text),
                    launch_ts: k.launch_ns.filter(|_| measured).map(|ns| signed_micros(ns, origin)),
                    grid: k.grid,
                    block: k.block,
                    status: k.status,
                    duration_ns: k.duration_ns,
                    placement: (!measured).then_some(SYNTHETIC_PLACEMENT),
                    metrics: by_name(metric_names.iter().copied(), k.metrics.iter().copied()),
                    graph_id: k.graph_id,
                    graph_node_id: k.graph_node_id,
                }),
            });
        }

        for t in kept_transfers {
            devices.insert(t.device_id);
            streams.insert((t.device_id, t.stream_id));
            gpu_spans.push((events.len(), t.start_ns, t.end_ns));
            events.push(TraceEvent {
                name: t.name.to_owned(),
                cat: Some("transfer"),
                ph: Phase::Complete,
                ts: Some(micros(t.start_ns, origin)),
                dur: Some((t.end_ns - t.start_ns) as f64 / 1000.0),
                pid: GPU_PID_BASE + u64::from(t.device_id),
                tid: u64::from(t.stream_id),
                args: EventArgs::Transfer(t.args),
            });
        }

        let (lane_names, overlap_lane_events) = crate::report::lanes::spread(&mut events, &gpu_spans);
        events.extend(lane_names);

        if let Some(pm) = &self.pm {
            let device = devices.iter().next().copied().unwrap_or(0);
            if pm_counter_events(pm, origin, GPU_PID_BASE + u64::from(device), &mut events) {
                devices.insert(device);
                events.push(metadata("thread_name", GPU_PID_BASE + u64::from(device), PM_TID, "PM sampling".into()));
            }
        }
        let slices = super::placement::slices(self, &positions);
        let (region_events, device_timers) =
            crate::report::device_timers::trace_events(self, &slices, measured, origin);
        events.extend(region_events);

        for p in &self.meta.profiler_pauses {
            events.push(TraceEvent {
                name: format!("counter cycle {} (CUPTI stop, decode, start)", p.cycle),
                cat: Some("gmprof"),
                ph: Phase::Complete,
                ts: Some(micros(p.start_ns, origin)),
                dur: Some(p.end_ns.saturating_sub(p.start_ns) as f64 / 1000.0),
                pid: CPU_PID,
                tid: PAUSE_TID,
                args: EventArgs::Pause { cycle: p.cycle, ranges: p.ranges, thread: p.thread },
            });
        }
        if !self.meta.profiler_pauses.is_empty() {
            events.push(metadata("thread_name", CPU_PID, PAUSE_TID, "gmprof: counter cycles".into()));
        }
        if !ranges.is_empty() || !self.meta.profiler_pauses.is_empty() {
            events.push(metadata("process_name", CPU_PID, 0, "CPU ranges".into()));
        }
        for thread in threads {
            events.push(metadata("thread_name", CPU_PID, thread, format!("thread {thread}")));
        }
        if counter_mode && events.iter().any(|e| e.ph == Phase::Counter) {
            events.push(metadata("thread_name", CPU_PID, COUNTER_TID, "range metrics".into()));
        }
        for device in devices {
            let label = match device_name {
                Some(name) => format!("GPU {device}: {name}"),
                None => format!("GPU {device}"),
            };
            events.push(metadata("process_name", GPU_PID_BASE + u64::from(device), 0, label));
        }
        for (device, stream) in streams {
            events.push(metadata(
                "thread_name",
                GPU_PID_BASE + u64::from(device),
                u64::from(stream),
                crate::report::lanes::lane_name(stream, 0),
            ));
        }

        // Metadata first, then by track and time; on a track, enclosing events first.
        events.sort_by(|a, b| {
            (a.ph != Phase::Metadata)
                .cmp(&(b.ph != Phase::Metadata))
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
                .then(a.ts.unwrap_or(0.0).total_cmp(&b.ts.unwrap_or(0.0)))
                .then(b.dur.unwrap_or(0.0).total_cmp(&a.dur.unwrap_or(0.0)))
        });

        let note = (!measured).then(|| {
            format!(
                "mode {}: kernel durations come from {} but CUPTI's activity timestamps are not real while \
                 the range profiler runs; kernels are placed back to back from the push of their range \
                 ({SYNTHETIC_PLACEMENT})",
                self.meta.mode.as_str(),
                crate::model::GPU_TIME_METRIC
            )
        });

        ChromeTrace {
            trace_events: events,
            display_time_unit: "ns",
            other_data: TraceInfo {
                gmprof_version: self.meta.gmprof_version.clone(),
                mode: self.meta.mode,
                time_source: self.meta.time_source,
                device_name: self.meta.device_name.clone(),
                chip: self.meta.chip.clone(),
                origin_cupti_ns: origin,
                origin_unix_ns: unix_ns(self, origin),
                kernel_placement: if measured { "measured" } else { SYNTHETIC_PLACEMENT },
                note,
                dropped_counter_ranges: self.meta.dropped_counter_ranges,
                dropped_activity_records: self.meta.dropped_activity_records,
                flagged_kernel_rows: self.meta.flagged_kernel_rows,
                overlap_lane_events,
                skipped,
                warnings: self.meta.warnings.clone(),
                device_timers,
            },
        }
    }

    /// Writes the report as a Chrome trace (compact JSON) to `out`.
    pub fn write_chrome_trace_to<W: Write>(&self, out: W) -> Result<()> {
        serde_json::to_writer(out, &self.to_chrome_trace())
            .map_err(|e| Error::Serialize { what: "Chrome trace", message: e.to_string() })
    }

    /// Writes the report as a Chrome trace (compact JSON) to a file, e.g. `trace.json`.
    pub fn write_chrome_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| {
            self.write_chrome_trace_to(&mut *out)?;
            out.write_all(b"\n").map_err(|e| Error::io(path.as_ref(), e))
        })
    }
}
