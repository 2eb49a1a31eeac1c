//! The report of a profiling session and its outputs: per-row tables (CSV and Parquet),
//! `report.json`, the summary, the timeline, an HTML page, and what several runs make together.
//!
//! Layer 3 (the safe profiler), last step: [`Report::build`] (`build.rs`) puts the per-range
//! rows of [`crate::analysis::aggregate`], the per-kernel rows of [`crate::analysis::correlate`]
//! and everything a reader needs to trust them (mode, time source, the rule of each metric,
//! dropped and flagged counts, warnings) into one serializable value, the [`Report`]
//! (`model.rs`). Its outputs, by folder:
//!
//! - [`tables`]: every per-row table, CSV and Parquet side by side: ranges, kernels and
//!   transfers ([`Report::write_csv`], [`Report::write_kernels_csv`],
//!   [`Report::write_transfers_csv`]), statistics ([`Report::write_stats_csv`]), PM and PC
//!   samples, in-kernel region timers ([`Report::attach_device_timers`]) and the probe
//!   engine's tables ([`Report::attach_probes`]).
//! - [`timeline`]: `trace.json` ([`Report::write_chrome_trace`], Perfetto, or
//!   [`Report::write_kineto_trace`], the form Holistic Trace Analysis reads) and everything placed
//!   on it, `probe_trace.json` ([`Report::write_probe_trace`]), and the checker of such files.
//! - [`text`]: the summary ([`Report::summary`], [`Report::summary_with`]: range groups, numbered
//!   names folded, warm-up instances apart) and the statistics as a table, sized for a screen.
//! - [`html`]: one self-contained HTML page with plots ([`Report::write_html`]).
//! - [`figures`]: each chart of that page as an SVG of its own with its table as CSV
//!   ([`Report::figures`]), for a write-up.
//! - [`runs`]: several processes of a run merged (`gmprof merge`), and the reports of one
//!   process's GPUs combined into one.
//! - [`diff`]: two runs compared (`gmprof diff`), range by range and kernel by kernel, with a
//!   rank test against each run's own noise.
//! - [`json`]: `report.json`, the whole report, round-trippable ([`Report::write_json`],
//!   [`Report::from_json`]).
//! - [`stream`]: the streamed outputs of a long run (part files, online aggregates, the
//!   flight recorder's windows), and [`live`]: the live metrics its drains feed, served for
//!   Prometheus at `/metrics`.
//!
//! [`Report::write_all`] (`outputs.rs`) writes them all into a run's directory.
//!
//! # What may import what
//!
//! A file imports files of its own folder and of the folders below its own, never above, and
//! never the `mod.rs` of a folder that holds it (a `mod.rs` declares, re-exports and composes;
//! what a folder's files share lives in a file of its own). From the top:
//!
//! - `mod.rs`, `outputs.rs`, `build.rs` and `json.rs`: any folder (nothing in `report` imports
//!   them);
//! - [`diff`]: [`runs`], [`html`], [`text`], [`tables`];
//! - [`html`]: [`timeline`], [`text`], [`tables`];
//! - [`runs`]: [`timeline`], [`text`], [`tables`];
//! - [`text`] and [`timeline`]: [`tables`];
//! - [`tables`]: no other folder;
//! - [`live`]: no other folder (`stream` imports it);
//! - every file: `model.rs` (the [`Report`] value), which imports no other file of `report`.
//!
//! Below `report`: `analysis`, `device_timers`, `model` and `error`; never `probe`, `checked`
//! or `sys`. The paths of the files before they had folders (`report::csv`, `report::merge`,
//! `report::summary`, ...) are kept as re-exports.
//!
//! Dropped and flagged counts are part of every output's header, never only of the JSON:
//! a table that looks complete but is missing kernels is worse than no table.

mod build;
pub mod diff;
pub mod figures;
pub mod html;
pub mod json;
pub mod live;
mod model;
mod outputs;
pub mod runs;
pub mod stream;
pub mod tables;
pub mod text;
pub mod timeline;

pub use self::model::{CaptureInfo, Report, ReportMeta};
pub use self::outputs::{OUTPUT_FILES, PM_CSV};
pub use self::runs::{devices, killed, merge, merge_run, merge_trace, rank_ranges, stragglers};
pub use self::tables::formats::OutputFormats;
pub use self::tables::{csv, formats, parquet, pc_csv, pm_csv, probe_kernels, probes, sass_hot, stats};
pub use self::text::group::GroupBy;
pub use self::text::summary::{Summary, SummaryOptions, SummaryRow};
pub use self::text::{group, pc_summary, summary};
pub use self::timeline::kineto::{TraceFormat, TraceOptions};
pub use self::timeline::{kineto, lanes, probe_trace, trace_check};

/// The in-kernel region timers' outputs, at their former path: the tracks
/// ([`timeline::device_timers`]), the args and `otherData` of their events
/// ([`timeline::events`]) and `regions.csv` ([`tables::regions`]).
pub mod device_timers {
    pub use super::tables::regions::{REGIONS_COLUMNS, REGIONS_CSV};
    pub use super::timeline::device_timers::{LANE_TID_BASE, REGION_CATEGORY, SM_TID_BASE};
    pub use super::timeline::events::{DeviceTimerTraceInfo, RegionArgs};
}
