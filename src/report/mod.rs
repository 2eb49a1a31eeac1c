//! The report of a profiling session and its exporters (CSV, JSON, summary table).
//!
//! Layer 3 (the safe profiler), last step: [`Report::build`] puts the per-range rows of
//! [`crate::analysis::aggregate`], the per-kernel rows of [`crate::analysis::correlate`] and everything a reader
//! needs to trust them (mode, time source, the rule of each metric, dropped and flagged
//! counts, warnings) into one serializable value. Exporters:
//!
//! - [`Report::write_csv`] (per range), [`Report::write_kernels_csv`] (per kernel) and
//!   [`Report::write_transfers_csv`] (per memcpy/memset), see [`csv`]: `# ` metadata lines,
//!   then CSV rows written by the `csv` crate.
//! - [`Report::write_stats_csv`], see [`crate::report::stats`]: count, total, mean, min, max, p50,
//!   p99 and share per range path and per (range path, kernel name).
//! - [`Report::write_json`] / [`Report::from_json`], see [`json`]: the whole
//!   report, round-trippable (for `gmprof report` on a saved run).
//! - [`Report::summary`] / [`Report::summary_with`], see [`summary`]: a text table of range
//!   groups ([`group`]: numbered names folded, warm-up instances apart) sized for a screen.
//! - [`Report::write_html`], see [`html`]: one self-contained HTML page with plots.
//! - [`Report::write_regions_csv`] and [`Report::attach_device_timers`], see
//!   [`device_timers`]: in-kernel region timers (`regions.csv`, region tracks in the trace).
//! - [`diff::Diff`]: two runs compared (`gmprof diff`), range by range and kernel by
//!   kernel, with a rank test against each run's own noise.
//! - [`Report::write_probe_trace`], see [`probe_trace`]: `probe_trace.json`, block_sched's
//!   blocks per SM on the trace's clock (with [`probes`]' CSVs when the session probed).
//!
//! Dropped and flagged counts are part of every output's header, never only of the JSON:
//! a table that looks complete but is missing kernels is worse than no table.

pub mod csv;
pub mod device_timers;
pub mod devices;
pub mod diff;
pub mod formats;
pub mod group;
pub mod html;
pub mod json;
pub mod lanes;
pub mod merge;
pub mod merge_run;
pub mod merge_trace;
pub mod parquet;
pub mod pc_csv;
pub mod pc_summary;
mod placement;
pub mod pm_csv;
pub mod probe_kernels;
pub mod probe_trace;
pub mod probes;
pub mod rank_ranges;
pub mod sass_hot;
pub mod stats;
pub mod stragglers;
pub mod summary;
pub mod text;
pub mod timeline;
pub mod trace_check;

use serde::{Deserialize, Serialize};

use crate::analysis::aggregate::{DerivedMetric, MetricRule, RangeRow};
use crate::analysis::correlate::{CorrelationCounts, KernelRow, TimeSource, TransferRow};
use crate::analysis::pm_fold::PmReport;
use crate::model::{ClockSync, DevicePeaks, ProfilerPause, ProfilingMode, RunEnd, SelfTime, UnprofiledContext};

pub use self::formats::OutputFormats;
pub use self::group::GroupBy;
pub use self::summary::{Summary, SummaryOptions, SummaryRow};

/// What capture knows about a session beyond its records; input to [`Report::build`].
#[derive(Clone, Debug, PartialEq)]
pub struct CaptureInfo {
    /// How counters were collected.
    pub mode: ProfilingMode,
    /// The GPU's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub device_name: Option<String>,
    /// The chip name CUPTI uses, e.g. `GH100`.
    pub chip: Option<String>,
    /// Counter ranges CUPTI could not fit in a counter image and dropped.
    pub dropped_counter_ranges: u64,
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
}

impl CaptureInfo {
    /// Capture info for `mode` with nothing else known and nothing dropped.
    pub fn new(mode: ProfilingMode) -> Self {
        Self {
            mode,
            device_name: None,
            chip: None,
            dropped_counter_ranges: 0,
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
        }
    }
}

/// The files [`Report::write_all`] writes (and `regions.csv` when the report has in-kernel
/// region timers).
pub const OUTPUT_FILES: [&str; 6] =
    ["ranges.csv", "kernels.csv", "transfers.csv", "stats.csv", "report.json", "trace.json"];

/// The file [`Report::write_all`] adds when the session sampled PM counters.
pub const PM_CSV: &str = "pm.csv";

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
    /// one ([`devices::combine`]): each with its kernels and GPU time. Empty for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<devices::DeviceShare>,
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
    /// kernel rows by correlation id; see [`device_timers`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_timers: Vec<crate::device_timers::TimedLaunch>,
    /// Statistics per (kernel, region), per SM and per lane of [`Report::device_timers`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_regions: Vec<crate::device_timers::RegionStats>,
    /// Launches selected by `gmprof run --probe`, joined to their kernel rows by
    /// correlation id; see [`probes`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<probes::ProbedLaunch>,
    /// When the process profiled several GPUs: each range instance's share on each device
    /// (`range_devices.csv`); [`Report::ranges`] holds the totals over all devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range_devices: Vec<devices::RangeDeviceRow>,
}

impl Report {
    /// Writes every output into `dir` (created if missing) in the default formats (CSV and
    /// Parquet, [`OutputFormats::default`]); see [`Report::write_all_as`].
    pub fn write_all(&self, dir: impl AsRef<std::path::Path>) -> crate::error::Result<()> {
        self.write_all_as(dir, OutputFormats::default())
    }

    /// Writes every output into `dir` (created if missing): `report.json` and `trace.json`,
    /// and in each of `formats` the tables of [`OUTPUT_FILES`] (`ranges`, `kernels`,
    /// `transfers`, `stats`), `pm` when the report has PM sampling and the probe tables when
    /// it probed ([`parquet::tables`] names the Parquet files).
    pub fn write_all_as(&self, dir: impl AsRef<std::path::Path>, formats: OutputFormats) -> crate::error::Result<()> {
        use parquet::tables as pq;
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::io(dir, e))?;
        if formats.csv {
            self.write_csv(dir.join("ranges.csv"))?;
            self.write_kernels_csv(dir.join("kernels.csv"))?;
            self.write_transfers_csv(dir.join("transfers.csv"))?;
            self.write_stats_csv(dir.join("stats.csv"))?;
        }
        if formats.parquet {
            self.write_ranges_parquet(dir.join(pq::RANGES_PARQUET))?;
            self.write_kernels_parquet(dir.join(pq::KERNELS_PARQUET))?;
            self.write_transfers_parquet(dir.join(pq::TRANSFERS_PARQUET))?;
            self.write_stats_parquet(dir.join(pq::STATS_PARQUET))?;
        }
        if !self.range_devices.is_empty() {
            if formats.csv {
                self.write_range_devices_csv(dir.join(devices::RANGE_DEVICES_CSV))?;
            }
            if formats.parquet {
                self.write_range_devices_parquet(dir.join(pq::RANGE_DEVICES_PARQUET))?;
            }
        }
        self.write_json(dir.join("report.json"))?;
        if self.pm.is_some() {
            if formats.csv {
                self.write_pm_csv(dir.join(PM_CSV))?;
            }
            if formats.parquet {
                self.write_pm_parquet(dir.join(pq::PM_PARQUET))?;
            }
        }
        if self.pc.is_some() {
            if formats.csv {
                self.write_stalls_csv(dir.join(pc_csv::STALLS_CSV))?;
                self.write_pc_samples_csv(dir.join(pc_csv::PC_SAMPLES_CSV))?;
            }
            if formats.parquet {
                self.write_stalls_parquet(dir.join(parquet::pc::STALLS_PARQUET))?;
                self.write_pc_samples_parquet(dir.join(parquet::pc::PC_SAMPLES_PARQUET))?;
            }
        }
        if !self.device_timers.is_empty() {
            self.write_regions_csv(dir.join(device_timers::REGIONS_CSV))?;
        }
        if !self.probes.is_empty() {
            if formats.csv {
                probes::write_probe_csvs(dir, &self.probes)?;
            }
            if formats.parquet {
                pq::write_probe_parquets(dir, &self.probes)?;
            }
            self.write_probe_trace(dir.join(probe_trace::PROBE_TRACE_JSON))?;
        }
        self.write_chrome_trace(dir.join("trace.json"))
    }

    /// Metric column names, in order.
    pub fn metric_names(&self) -> Vec<&str> {
        self.meta.metrics.iter().map(|r| r.metric.name.as_str()).collect()
    }

    /// The summary table: range rows grouped by path with numbers folded, the top
    /// [`summary::DEFAULT_TOP`] groups by share (see [`summary`]).
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }

    /// The summary table with other grouping, trimming or warm-up options.
    pub fn summary_with(&self, options: &SummaryOptions) -> Summary {
        Summary::with(self, options)
    }
}
