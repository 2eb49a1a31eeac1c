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

mod build;
pub mod diff;
pub mod html;
pub mod json;
mod model;
mod outputs;
pub mod runs;
pub mod tables;
pub mod text;
pub mod timeline;

pub use self::model::{CaptureInfo, Report, ReportMeta};
pub use self::outputs::{OUTPUT_FILES, PM_CSV};
pub use self::runs::{devices, merge, merge_run, merge_trace, rank_ranges, stragglers};
pub use self::tables::formats::OutputFormats;
pub use self::tables::{csv, formats, parquet, pc_csv, pm_csv, probe_kernels, probes, sass_hot, stats};
pub use self::text::group::GroupBy;
pub use self::text::summary::{Summary, SummaryOptions, SummaryRow};
pub use self::text::{group, pc_summary, summary};
pub use self::timeline::{lanes, probe_trace, trace_check};

/// The in-kernel region timers' outputs, at their former path: the tracks
/// ([`timeline::device_timers`]), the args and `otherData` of their events
/// ([`timeline::events`]) and `regions.csv` ([`tables::regions`]).
pub mod device_timers {
    pub use super::tables::regions::{REGIONS_COLUMNS, REGIONS_CSV};
    pub use super::timeline::device_timers::{LANE_TID_BASE, REGION_CATEGORY, SM_TID_BASE};
    pub use super::timeline::events::{DeviceTimerTraceInfo, RegionArgs};
}
