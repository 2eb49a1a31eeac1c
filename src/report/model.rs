//! The report of a profiling session as a value: [`Report`] (metadata, per-range, per-kernel
//! and per-transfer rows, and what the samplers, device timers and probes added),
//! [`ReportMeta`], and [`CaptureInfo`], what capture knows beyond its records. It also holds
//! the records a report carries that no other layer defines: probed launches
//! ([`ProbedLaunch`]) and, for a process that profiled several GPUs, each device's share
//! ([`DeviceShare`], [`RangeDeviceRow`]).
//!
//! At the bottom of `report`: every exporter names [`Report`], and this file names none of
//! them (it imports `analysis`, `model` and `device_timers` for the rows it holds).

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::{DerivedMetric, MetricRule, RangeRow};
use crate::analysis::correlate::{CorrelationCounts, KernelRow, TimeSource, TransferRow};
use crate::analysis::pm_fold::PmReport;
use crate::model::{ClockSync, DevicePeaks, ProfilerPause, ProfilingMode, RunEnd, SelfTime, UnprofiledContext};

/// What capture knows about a session beyond its records; input to [`Report::build`].
#[derive(Clone, Debug, PartialEq)]
pub struct CaptureInfo {
    /// How counters were collected.
    pub mode: ProfilingMode,
    /// The GPU's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub device_name: Option<String>,
    /// The chip name CUPTI uses, e.g. `GH100`.
    pub chip: Option<String>,
    /// Counter ranges CUPTI could not fit in a counter image and dropped, with those lost to
    /// failed calls ([`CaptureInfo::counter_ranges_lost`]).
    pub dropped_counter_ranges: u64,
    /// Of the dropped counter ranges, those gmprof lost because CUPTI calls failed (a counter
    /// cycle that could not be decoded, ranges that could not be evaluated); warnings say
    /// which calls.
    pub counter_ranges_lost: u64,
    /// Activity records CUPTI dropped (buffers full).
    pub dropped_activity_records: u64,
    /// Wall-clock start of the session, ns since the Unix epoch.
    pub started_unix_ns: Option<u64>,
    /// Wall-clock end of the session, ns since the Unix epoch.
    pub finished_unix_ns: Option<u64>,
    /// Warnings from capture (e.g. [`SessionTree::close_all_open`](crate::model::session::SessionTree::close_all_open)'s).
    pub warnings: Vec<String>,
    /// CUPTI-clock/wall-clock pairs taken at start and finish, when capture took them.
    pub clock: Option<ClockSync>,
    /// How the run ended (`None`: not recorded, as in reports built from recorded data).
    pub run_end: Option<RunEnd>,
    /// The device's theoretical peaks, when capture read its attributes.
    pub device_peaks: Option<DevicePeaks>,
    /// Times the profiler held a launching thread to cycle its counter image mid-run.
    pub profiler_pauses: Vec<ProfilerPause>,
    /// gmprof's own time in CUPTI's callbacks (`GMPROF_SELF_TIME=1` only).
    pub self_time: Option<SelfTime>,
    /// The driver's release (`580.95.05`), when capture read it.
    pub driver_version: Option<String>,
    /// Other CUDA contexts of the process that no profiler measured.
    pub unprofiled_contexts: Vec<UnprofiledContext>,
    /// per_kernel in rotation: what capture decided ([`crate::analysis::rotation`]).
    pub rotation: Option<crate::analysis::rotation::RotationRun>,
}

impl CaptureInfo {
    /// Capture info for `mode` with nothing else known and nothing dropped.
    pub fn new(mode: ProfilingMode) -> Self {
        Self {
            mode,
            device_name: None,
            chip: None,
            dropped_counter_ranges: 0,
            counter_ranges_lost: 0,
            dropped_activity_records: 0,
            started_unix_ns: None,
            finished_unix_ns: None,
            warnings: Vec::new(),
            clock: None,
            run_end: None,
            device_peaks: None,
            profiler_pauses: Vec::new(),
            self_time: None,
            driver_version: None,
            unprofiled_contexts: Vec::new(),
            rotation: None,
        }
    }
}

/// Everything about a report except its rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportMeta {
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
    /// The collected metrics, in column order, each with its aggregation rule.
    pub metrics: Vec<MetricRule>,
    /// The derived columns (DRAM bandwidths) and their inputs.
    pub derived_metrics: Vec<DerivedMetric>,
    /// Counter-image cycles of the session.
    pub counter_cycles: u64,
    /// Kernel rows.
    pub kernel_count: u64,
    /// Σ duration of every kernel with a known duration, ns; in per_range mode, where
    /// kernels have no time of their own, Σ of the measured top-level ranges. `None` when
    /// kernels ran but none had a time.
    pub total_gpu_time_ns: Option<u64>,
    /// Counter ranges CUPTI dropped.
    pub dropped_counter_ranges: u64,
    /// Activity records CUPTI dropped.
    pub dropped_activity_records: u64,
    /// Kernel rows whose status is not `ok`.
    pub flagged_kernel_rows: u64,
    /// Counter ranges that matched no launch.
    pub orphan_counter_ranges: u64,
    /// The correlator's full counts.
    pub counts: CorrelationCounts,
    /// Every warning of capture, correlation and aggregation.
    pub warnings: Vec<String>,
    /// Wall-clock start, ns since the Unix epoch.
    pub started_unix_ns: Option<u64>,
    /// Wall-clock end, ns since the Unix epoch.
    pub finished_unix_ns: Option<u64>,
    /// CUPTI-clock/wall-clock pairs of the session; they convert the CUPTI timestamps of
    /// rows to Unix time ([`ClockSync::to_unix_ns`]).
    #[serde(default)]
    pub clock: Option<ClockSync>,
    /// How much the wall clock gained on the CUPTI clock over the session, ns
    /// ([`ClockSync::drift_ns`]).
    #[serde(default)]
    pub clock_drift_ns: Option<i64>,
    /// How the run ended: finished, ended by a signal, or a checkpoint of a run that did
    /// not finish (the outputs are then partial). `None` in reports built from recorded data.
    #[serde(default)]
    pub run_end: Option<RunEnd>,
    /// The device's theoretical DRAM bandwidth and FP32 rate, from its attributes.
    #[serde(default)]
    pub device_peaks: Option<DevicePeaks>,
    /// Times the profiler held a launching thread to cycle its counter image mid-run (the
    /// timeline's "gmprof: counter cycles" track; the summary's `profiler pauses` line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiler_pauses: Vec<ProfilerPause>,
    /// gmprof's own time inside CUPTI's callbacks, when measured (`GMPROF_SELF_TIME=1`);
    /// the summary's `gmprof's own time` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_time: Option<SelfTime>,
    /// The driver's release (`580.95.05` from the kernel module, or `CUDA 13.0`), when capture
    /// read it; `gmprof diff` warns when two runs' differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Other CUDA contexts of the process that no profiler measured, with the kernel launches
    /// heard and kernel records left out on each: the summary's first line names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprofiled_contexts: Vec<UnprofiledContext>,
    /// The GPUs (CUDA contexts) this report combines, when the process profiled more than
    /// one ([`combine`](crate::report::runs::devices::combine)): each with its kernels and GPU
    /// time. Empty for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceShare>,
}

/// A session's report: metadata, per-range rows, per-kernel rows, per-transfer rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Metadata.
    pub meta: ReportMeta,
    /// Per-range rows (root row first when present, then push order).
    pub ranges: Vec<RangeRow>,
    /// Per-kernel rows in launch order.
    pub kernels: Vec<KernelRow>,
    /// Memcpy and memset rows in (start, correlation id) order.
    #[serde(default)]
    pub transfers: Vec<TransferRow>,
    /// PM sampling folded into ranges and kernels, when the session sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm: Option<PmReport>,
    /// PC sampling's stall reasons per range, kernel and instruction, when the session
    /// sampled ([`crate::analysis::pc_fold`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pc: Option<crate::analysis::pc_fold::PcReport>,
    /// Launches with in-kernel region timers (`include/gmprof_device.cuh`), joined to their
    /// kernel rows by correlation id; see [`tables::regions`](crate::report::tables::regions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_timers: Vec<crate::device_timers::TimedLaunch>,
    /// Statistics per (kernel, region), per SM and per lane of [`Report::device_timers`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_regions: Vec<crate::device_timers::RegionStats>,
    /// Launches selected by `gmprof run --probe`, joined to their kernel rows by
    /// correlation id; see [`probes`](crate::report::tables::probes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbedLaunch>,
    /// When the process profiled several GPUs: each range instance's share on each device
    /// (`range_devices.csv`); [`Report::ranges`] holds the totals over all devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range_devices: Vec<RangeDeviceRow>,
    /// When the run passed the row limit and its rows were streamed to part files (issue
    /// 42): what was written and the whole run's aggregates; [`Report::ranges`],
    /// [`Report::kernels`] and [`Report::transfers`] are then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<crate::report::stream::summary::StreamedSummary>,
    /// per_kernel in rotation: the step templates, counters per launch position, and the
    /// estimates per range group and kernel name ([`crate::analysis::rotation`];
    /// `positions.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<crate::analysis::rotation::RotationReport>,
}

impl Report {
    /// Metric column names, in order.
    pub fn metric_names(&self) -> Vec<&str> {
        self.meta.metrics.iter().map(|r| r.metric.name.as_str()).collect()
    }
}

/// One field's total over a launch's map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeTotal {
    /// Probe.
    pub probe: String,
    /// Field.
    pub field: String,
    /// Sum over the launch's records.
    pub total: u64,
    /// Records in the map.
    pub records: u64,
}

/// One selected launch: probed, refused (the original ran), or failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbedLaunch {
    /// Correlation id (kernels.csv).
    pub correlation_id: u32,
    /// Kernel, demangled.
    pub kernel: String,
    /// The kernel row's range path, filled in by the join.
    #[serde(default)]
    pub range_path: Option<String>,
    /// Blocks.
    pub blocks: u64,
    /// Threads per block.
    pub threads: u64,
    /// `probed`, `not probed: why` (the original ran), or `failed: what`.
    pub status: String,
    /// Blocks block_sched saw enter exactly once (empty without block_sched).
    pub blocks_once: Option<u64>,
    /// Blocks it never saw.
    pub blocks_missing: Option<u64>,
    /// Blocks it saw more than once.
    pub blocks_repeated: Option<u64>,
    /// Earliest block start, `%globaltimer` ns.
    pub first_block_start_ns: Option<u64>,
    /// Latest block end, `%globaltimer` ns.
    pub last_block_end_ns: Option<u64>,
    /// Whether every block lies inside the kernel's activity interval with the fitted
    /// offset; `None` without block_sched, a kernel row or measured kernel times.
    #[serde(default)]
    pub blocks_inside_kernel: Option<bool>,
    /// The fitted offset, CUPTI − `%globaltimer`, ns.
    #[serde(default)]
    pub clock_offset_ns: Option<i64>,
    /// Its uncertainty, ns.
    #[serde(default)]
    pub clock_slack_ns: Option<u64>,
    /// Launches of the run that share the offset; 0 when no offset puts the blocks inside
    /// the kernel (the offset then puts the first block at the kernel's start).
    #[serde(default)]
    pub clock_run_launches: Option<u32>,
    /// Host time spent waiting for the probed kernel and reading its maps, µs.
    pub readback_us: f64,
    /// Field totals, in probe and field order.
    #[serde(default)]
    pub totals: Vec<ProbeTotal>,
    /// The kernel's variant: its row in probe_kernels.csv is the one of this kernel and
    /// variant ([`probe_kernels`](crate::report::tables::probe_kernels)).
    #[serde(default)]
    pub variant: Option<u32>,
    /// Where the totals came from: `ptx-probe` (the PTX probes ran in a rewritten kernel)
    /// or `sass-metrics` (CUPTI's SASS metrics counted the original); blank for a launch
    /// that was not probed.
    #[serde(default)]
    pub source: Option<String>,
    /// A CUDA graph's node, probed inside its graph (its correlation id is the capture call's,
    /// which ran nothing): the graph launches its totals are averaged over (0: never launched).
    /// `None` for a launch outside graphs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_launches: Option<u64>,
}

/// One device's part of a process's profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceShare {
    /// The device ordinal.
    pub device_id: u32,
    /// CUPTI's id of the context profiled on it.
    pub context_id: Option<u32>,
    /// The GPU's name.
    pub device_name: Option<String>,
    /// Kernel rows of this device.
    pub kernel_count: u64,
    /// Σ duration of this device's kernels, ns.
    pub gpu_time_ns: Option<u64>,
    /// Kernel rows of this device whose status is not `ok`.
    pub flagged_kernel_rows: u64,
    /// Activity records CUPTI dropped on this device's session.
    pub dropped_activity_records: u64,
}

/// A range instance's row on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeDeviceRow {
    /// The device ordinal.
    pub device_id: u32,
    /// The range's values on that device (ids as in [`Report::ranges`]).
    #[serde(flatten)]
    pub row: RangeRow,
}
