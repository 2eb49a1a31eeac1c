//! The tables only a streamed run has: `steps` (one row per step), `step_ranges` (each
//! step's range groups) and `aggregates` (the online aggregates of each closed window of
//! steps, and of the whole run), with their columns and one row's values.
//!
//! Imports `writer` and `rows` and the rows of `analysis::online`; `stream` writes them as
//! part files.

use std::io::Write;

use super::rows::typed;
use super::writer::{Column, ColumnType, ParquetRows};
use crate::analysis::online::{AggregateRow, StepGroup, StepRow};
use crate::error::Result;

use super::rows::u32s;
use ColumnType::{Bool, Float64, Int64, Text};

/// Columns of `steps`.
/// `flight_window`: the flight recorder's window (`window-N/`) that holds the step, null
/// when none does (or the run had no flight recorder).
pub const STEP_COLUMNS: [&str; 10] = [
    "step",
    "path",
    "start_ns",
    "end_ns",
    "wall_time_ns",
    "gpu_time_ns",
    "kernels",
    "transfers",
    "window",
    "flight_window",
];
const STEP_TYPES: [(ColumnType, bool); 10] = [
    (Int64, false), // step
    (Text, false),  // path
    (Int64, true),  // start_ns
    (Int64, true),  // end_ns
    (Int64, true),  // wall_time_ns
    (Int64, true),  // gpu_time_ns
    (Int64, false), // kernels
    (Int64, false), // transfers
    (Int64, false), // window
    (Int64, true),  // flight_window
];

/// Columns of `step_ranges`.
pub const STEP_RANGE_COLUMNS: [&str; 4] = ["step", "path", "count", "gpu_time_ns"];
const STEP_RANGE_TYPES: [(ColumnType, bool); 4] = [(Int64, false), (Text, false), (Int64, false), (Int64, true)];

/// Columns of `aggregates`.
pub const AGGREGATE_COLUMNS: [&str; 15] = [
    "window",
    "first_step",
    "steps",
    "table",
    "quantity",
    "key",
    "count",
    "missing",
    "total_ns",
    "mean_ns",
    "min_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "max_ns",
];
const AGGREGATE_TYPES: [(ColumnType, bool); 15] = [
    (Int64, true),   // window: null for the whole run
    (Int64, true),   // first_step
    (Int64, true),   // steps
    (Text, false),   // table
    (Text, false),   // quantity
    (Text, false),   // key
    (Int64, false),  // count
    (Int64, false),  // missing
    (Int64, true),   // total_ns
    (Float64, true), // mean_ns
    (Int64, true),   // min_ns
    (Int64, true),   // p50_ns
    (Int64, true),   // p90_ns
    (Int64, true),   // p99_ns
    (Int64, true),   // max_ns
];

/// The columns of `steps`.
pub fn step_columns() -> Vec<Column> {
    typed(&STEP_COLUMNS, &STEP_TYPES)
}

/// The columns of `step_ranges`.
pub fn step_range_columns() -> Vec<Column> {
    typed(&STEP_RANGE_COLUMNS, &STEP_RANGE_TYPES)
}

/// The columns of `aggregates`.
pub fn aggregate_columns() -> Vec<Column> {
    typed(&AGGREGATE_COLUMNS, &AGGREGATE_TYPES)
}

/// A step row's values; the caller ends the row.
pub fn push_step<W: Write + Send>(w: &mut ParquetRows<W>, s: &StepRow) -> Result<()> {
    w.u64(Some(s.step))?;
    w.text(Some(&s.path))?;
    w.u64(s.start_ns)?;
    w.u64(s.end_ns)?;
    w.u64(s.wall_time_ns)?;
    w.u64(s.gpu_time_ns)?;
    w.u64(Some(s.kernels))?;
    w.u64(Some(s.transfers))?;
    w.u64(Some(s.window))?;
    w.u64(s.flight_window)
}

/// One of a step's range groups; the caller ends the row.
pub fn push_step_range<W: Write + Send>(w: &mut ParquetRows<W>, step: u64, g: &StepGroup) -> Result<()> {
    w.u64(Some(step))?;
    w.text(Some(&g.path))?;
    w.u64(Some(g.count))?;
    w.u64(g.gpu_time_ns)
}

/// Where an aggregate row belongs: a window (number, first step, steps) or the whole run.
pub type WindowSpan = Option<(u64, u64, u64)>;

/// An aggregate row's values; the caller ends the row.
pub fn push_aggregate<W: Write + Send>(w: &mut ParquetRows<W>, span: WindowSpan, r: &AggregateRow) -> Result<()> {
    w.u64(span.map(|s| s.0))?;
    w.u64(span.map(|s| s.1))?;
    w.u64(span.map(|s| s.2))?;
    w.text(Some(r.table.as_str()))?;
    w.text(Some(r.quantity.as_str()))?;
    w.text(Some(&r.key))?;
    let s = &r.summary;
    w.u64(Some(s.count))?;
    w.u64(Some(s.missing))?;
    w.u64(s.total_ns)?;
    w.f64(s.mean_ns)?;
    w.u64(s.min_ns)?;
    w.u64(s.p50_ns)?;
    w.u64(s.p90_ns)?;
    w.u64(s.p99_ns)?;
    w.u64(s.max_ns)
}

/// Columns of `pm.parquet` (`pm.csv`'s).
const PM_COLUMNS: [(&str, ColumnType, bool); 23] = [
    ("scope", Text, false),
    ("range_slot", Int64, true),
    ("range_generation", Int64, true),
    ("path", Text, false),
    ("instance", Int64, true),
    ("depth", Int64, true),
    ("correlation_id", Int64, true),
    ("kernel_name", Text, true),
    ("start_ns", Int64, false),
    ("end_ns", Int64, false),
    ("duration_ns", Int64, false),
    ("metric", Text, false),
    ("unit", Text, false),
    ("mean", Float64, true),
    ("peak", Float64, true),
    ("total", Float64, true),
    ("total_unit", Text, true),
    ("samples", Int64, false),
    ("coverage", Float64, true),
    ("few_samples", Bool, true),
    ("edge_share", Float64, true),
    ("windows", Float64, true),
    ("confidence", Text, true),
];

/// The columns of `pm.parquet`, and of a streamed run's `pm/` parts.
pub fn pm_columns() -> Vec<Column> {
    PM_COLUMNS.iter().map(|&(n, ty, nullable)| Column { name: n.to_owned(), ty, nullable }).collect()
}

/// The columns of a streamed run's `pm_samples/` parts: a sample's `start_ns`, `end_ns`,
/// `duration_ns` and one value column per sampled metric (named by it).
pub fn pm_sample_columns(metric_names: &[&str]) -> Vec<Column> {
    let mut columns = vec![
        Column::required("start_ns", ColumnType::Int64),
        Column::required("end_ns", ColumnType::Int64),
        Column::required("duration_ns", ColumnType::Int64),
    ];
    columns.extend(metric_names.iter().map(|m| Column::null(*m, Float64)));
    columns
}

/// One PM sample's row of `pm_samples/` with `metrics` value columns; the caller ends the row.
pub fn push_pm_sample<W: Write + Send>(
    w: &mut ParquetRows<W>,
    s: &crate::model::pm::PmSample,
    metrics: usize,
) -> Result<()> {
    w.u64(Some(s.start_ns))?;
    w.u64(Some(s.end_ns))?;
    w.u64(Some(s.end_ns.saturating_sub(s.start_ns)))?;
    for m in 0..metrics {
        w.f64(s.values.get(m).copied().flatten())?;
    }
    Ok(())
}

/// One metric's value of a PM row (`pm.parquet`'s columns, [`pm_columns`]): `index` is the
/// metric's position in the row's values; `total_unit` its integral's unit. The caller ends
/// the row.
pub fn push_pm_value<W: Write + Send>(
    w: &mut ParquetRows<W>,
    row: &crate::analysis::pm_fold::PmRow,
    index: usize,
    metric: &crate::model::pm::PmMetric,
    total_unit: Option<&str>,
) -> Result<()> {
    let value = row.values.get(index).copied().flatten();
    w.text(Some(match row.scope {
        crate::analysis::pm_fold::PmScope::Range => "range",
        crate::analysis::pm_fold::PmScope::Kernel => "kernel",
    }))?;
    w.u64(u32s(row.range_id.map(|r| r.slot)))?;
    w.u64(u32s(row.range_id.map(|r| r.generation)))?;
    w.text(Some(&row.path))?;
    w.u64(u32s(row.instance))?;
    w.u64(u32s(row.depth))?;
    w.u64(u32s(row.correlation_id))?;
    w.text(row.kernel_name.as_deref())?;
    w.u64(Some(row.start_ns))?;
    w.u64(Some(row.end_ns))?;
    w.u64(Some(row.end_ns - row.start_ns))?;
    w.text(Some(&metric.name))?;
    w.text(Some(&metric.unit))?;
    w.f64(value.map(|v| v.mean))?;
    w.f64(value.map(|v| v.peak))?;
    w.f64(value.and_then(|v| v.total))?;
    w.text(total_unit)?;
    w.u64(Some(value.map_or(0, |v| v.samples).into()))?;
    w.f64(value.map(|v| v.coverage))?;
    w.bool(value.map(|v| v.few_samples))?;
    w.f64(value.and_then(|v| v.edge_share))?;
    w.f64(value.map(|v| v.windows))?;
    w.text(value.and_then(|v| v.confidence).map(|c| c.as_str()))?;
    Ok(())
}
