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
//!   (`· overlapped 2`, ... where more overlap at once), see [`lanes`](super::lanes);
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
//! Where the report's [`TimeSource`](crate::analysis::correlate::TimeSource) is activity
//! ([`ProfilingMode::Trace`], [`ProfilingMode::PerKernel`], [`ProfilingMode::PerRange`])
//! kernels sit at the start and end their activity records measured. In
//! [`ProfilingMode::KernelReplay`] kernel replay collapses activity timestamps (start ==
//! end), so a kernel's *duration* is measured (`gpu__time_duration.sum`) but its *position*
//! is not. gmprof then places kernels synthetically: in launch order, back to back per
//! device, each starting at the push of
//! the range that launched it or, when the GPU is still busy with earlier kernels (or with a
//! measured transfer), right after them. (Kernels launched outside any range start at their
//! collapsed activity timestamp instead.) Kernel replay serializes kernels, so this layout
//! never overlaps kernels, but the gaps and positions are invented: every such kernel
//! carries `args.placement` = [`SYNTHETIC_PLACEMENT`] and `otherData.note` says so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use super::events::{
    id_text, ChromeTrace, EventArgs, KernelArgs, Phase, RangeArgs, TraceEvent, TraceInfo, COUNTER_TID, CPU_PID,
    GPU_PID_BASE, PAUSE_TID, PM_TID, SYNTHETIC_PLACEMENT,
};
use super::placement::Placement;
use crate::analysis::aggregate::RangeRow;
use crate::analysis::pm_fold::PmReport;
use crate::error::{Error, Result};
use crate::model::{ProfilingMode, RangeId};
use crate::report::model::Report;
use crate::report::tables::csv::write_file;

/// ns on the CUPTI clock to µs from `origin`.
pub(super) fn micros(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1000.0
}

/// [`micros`], negative for `ns` before `origin`.
pub(super) fn signed_micros(ns: u64, origin: u64) -> f64 {
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

/// A range row's args in a trace event (gmprof's trace and the Kineto form).
pub(super) fn range_args(report: &Report, row: &RangeRow, id: RangeId) -> RangeArgs {
    RangeArgs {
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
        metrics: range_metrics(report, row),
    }
}

pub(super) fn range_metrics(report: &Report, row: &RangeRow) -> BTreeMap<String, f64> {
    let mut metrics = by_name(report.metric_names().into_iter(), row.metrics.iter().copied());
    let derived = [
        (crate::analysis::aggregate::DRAM_READ_GBPS, row.dram_read_gbps),
        (crate::analysis::aggregate::DRAM_WRITE_GBPS, row.dram_write_gbps),
        (crate::analysis::aggregate::DRAM_TOTAL_GBPS, row.dram_total_gbps),
    ];
    metrics.extend(by_name(derived.iter().map(|(n, _)| *n), derived.iter().map(|(_, v)| *v)));
    metrics
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
    /// The report as a Chrome trace (see the [module docs](self)).
    pub fn to_chrome_trace(&self) -> ChromeTrace {
        let Placement { measured, skipped, transfers: kept_transfers, ranges, positions, origin } = self.placement();

        let mut events = Vec::new();
        let device_name = self.meta.device_name.as_deref();
        let mut devices: BTreeSet<u32> = BTreeSet::new();
        let mut streams: BTreeSet<(u32, u32)> = BTreeSet::new();
        let mut threads: BTreeSet<u64> = BTreeSet::new();
        // (event index, start, end) of every GPU slice on a stream's track, for the lanes.
        let mut gpu_spans: Vec<super::lanes::GpuSpan> = Vec::new();

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
                args: EventArgs::Range(range_args(self, row, id)),
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

        let (lane_names, overlap_lane_events) = super::lanes::spread(&mut events, &gpu_spans);
        events.extend(lane_names);

        if let Some(pm) = &self.pm {
            let device = devices.iter().next().copied().unwrap_or(0);
            if pm_counter_events(pm, origin, GPU_PID_BASE + u64::from(device), &mut events) {
                devices.insert(device);
                events.push(metadata("thread_name", GPU_PID_BASE + u64::from(device), PM_TID, "PM sampling".into()));
            }
        }
        let slices = super::placement::slices(self, &positions);
        let (region_events, device_timers) = super::device_timers::trace_events(self, &slices, measured, origin);
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
                super::lanes::lane_name(stream, 0),
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

        ChromeTrace {
            trace_events: events,
            display_time_unit: "ns",
            other_data: self.trace_info(measured, origin, skipped, overlap_lane_events, device_timers),
        }
    }

    /// The trace's `otherData`, for a placement that is `measured` (or synthetic) from
    /// `origin`.
    pub(super) fn trace_info(
        &self,
        measured: bool,
        origin: u64,
        skipped: super::events::SkippedRows,
        overlap_lane_events: u64,
        device_timers: Option<super::events::DeviceTimerTraceInfo>,
    ) -> TraceInfo {
        let note = (!measured).then(|| {
            format!(
                "mode {}: kernel durations come from {} but CUPTI's activity timestamps are not real while \
                 the range profiler runs; kernels are placed back to back from the push of their range \
                 ({SYNTHETIC_PLACEMENT})",
                self.meta.mode.as_str(),
                crate::model::GPU_TIME_METRIC
            )
        });
        TraceInfo {
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
