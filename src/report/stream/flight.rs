//! A flight-recorder window's outputs ([`write_window`]): `window-N/` beside `report.json`,
//! with the usual tables of its steps (`ranges`, `kernels`, `transfers`, as CSV and Parquet),
//! their `trace.json`, a `report.json` of them (so `gmprof report window-N` summarizes the
//! window), and `why.json` ([`WHY_JSON`]: the triggers, the steps and the recorder's
//! settings).
//!
//! The windows themselves are decided in
//! [`analysis::online::flight`](crate::analysis::online::flight); this file only writes them,
//! through the writers every run uses, on a copy of an empty report of the run (its
//! template: mode, metrics, version).
//!
//! Imports `report::model` and the rows of `analysis::online`; `writer` calls it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::online::{FlightWindow, StepRow, WindowEntry};
use crate::error::{Error, Result};
use crate::report::model::Report;
use crate::report::tables::parquet::tables as pq;
use crate::report::timeline::kineto::TraceOptions;

/// A window's account of itself.
pub const WHY_JSON: &str = "why.json";

/// The files a window holds besides [`WHY_JSON`].
pub const WINDOW_FILES: [&str; 8] = [
    "ranges.csv",
    "kernels.csv",
    "transfers.csv",
    pq::RANGES_PARQUET,
    pq::KERNELS_PARQUET,
    pq::TRANSFERS_PARQUET,
    "trace.json",
    "report.json",
];

#[derive(Serialize)]
struct Why<'a> {
    #[serde(flatten)]
    entry: &'a WindowEntry,
    /// The recorder's rules and bounds.
    settings: &'a str,
    /// The window's step rows (their range groups included).
    steps: &'a [StepRow],
    /// Rows in its tables.
    rows: Rows,
}

#[derive(Serialize)]
struct Rows {
    kernels: usize,
    transfers: usize,
    ranges: usize,
}

/// A window to write, with what writing it needs: [`StreamWriter`](super::writer::StreamWriter)
/// hands these out so the running session's drain writes them after it lets the session
/// go ([`WindowJob::write`]).
#[derive(Debug)]
pub struct WindowJob {
    /// The run's output directory (`window-N/` goes in it).
    pub dir: PathBuf,
    /// An empty report of the run.
    pub template: Report,
    /// The recorder's settings, in words.
    pub settings: String,
    /// The form of the window's `trace.json`.
    pub trace: TraceOptions,
    /// The window.
    pub window: FlightWindow,
}

impl WindowJob {
    /// The window's directory name (`window-N`).
    pub fn name(&self) -> &str {
        &self.window.entry.dir
    }

    /// Writes the window ([`write_window`]).
    pub fn write(self) -> Result<PathBuf> {
        write_window(&self.dir, &self.template, self.window, &self.settings, &self.trace)
    }
}

/// Writes `window` into its directory under `dir` (created; files of an earlier run there
/// are replaced) from `template` (an empty report of the run); `settings` describes the
/// recorder, `trace` the form of its `trace.json` (gmprof's own, or Kineto's for HTA).
/// Returns the window's directory.
pub fn write_window(
    dir: &Path,
    template: &Report,
    window: FlightWindow,
    settings: &str,
    trace: &TraceOptions,
) -> Result<PathBuf> {
    let out = dir.join(&window.entry.dir);
    std::fs::create_dir_all(&out).map_err(|e| Error::io(&out, e))?;
    let FlightWindow { entry, steps, detail } = window;
    let rows = Rows { kernels: detail.kernels.len(), transfers: detail.transfers.len(), ranges: detail.ranges.len() };
    let why = Why { entry: &entry, settings, steps: &steps, rows };
    let json = serde_json::to_vec_pretty(&why)
        .map_err(|e| Error::Serialize { what: "a flight-recorder window's why.json", message: e.to_string() })?;
    let why_path = out.join(WHY_JSON);
    std::fs::write(&why_path, json).map_err(|e| Error::io(&why_path, e))?;

    let mut report = template.clone();
    let mut ranges = detail.ranges;
    // In the order the whole-file tables have them: by start, parents before children.
    ranges.sort_by_key(|r| (r.start_ns, r.depth));
    report.ranges = ranges;
    report.kernels = detail.kernels;
    report.transfers = detail.transfers;
    report.meta.kernel_count = report.kernels.iter().filter(|k| k.granularity.is_kernel_execution()).count() as u64;
    report.meta.total_gpu_time_ns = report
        .kernels
        .iter()
        .filter(|k| k.granularity.is_kernel_execution())
        .try_fold(0u64, |sum, k| k.duration_ns.map(|d| sum + d));
    let span = match (entry.first_step, entry.last_step) {
        (Some(a), Some(b)) => format!("steps {a} to {b}"),
        _ => "the rows after the run's last step".to_owned(),
    };
    report.meta.warnings.push(format!(
        "flight-recorder window {}: only {span} of the run, not the whole run ({WHY_JSON} says why)",
        entry.window
    ));
    report.write_csv(out.join("ranges.csv"))?;
    report.write_kernels_csv(out.join("kernels.csv"))?;
    report.write_transfers_csv(out.join("transfers.csv"))?;
    report.write_ranges_parquet(out.join(pq::RANGES_PARQUET))?;
    report.write_kernels_parquet(out.join(pq::KERNELS_PARQUET))?;
    report.write_transfers_parquet(out.join(pq::TRANSFERS_PARQUET))?;
    report.write_trace(out.join("trace.json"), trace)?;
    let json = serde_json::to_vec(&report)
        .map_err(|e| Error::Serialize { what: "a flight-recorder window's report.json", message: e.to_string() })?;
    let json_path = out.join("report.json");
    std::fs::write(&json_path, json).map_err(|e| Error::io(&json_path, e))?;
    Ok(out)
}
