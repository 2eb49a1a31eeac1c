//! `pm.csv`: PM sampling folded into ranges and kernels, one record per (row, metric).
//!
//! The usual `# ` metadata lines, then PM lines (interval, alignment, samples kept, lost and
//! missing), then records written by serde through the `csv` crate. A metric with no sample
//! over a row's interval has blank value columns, never 0.

use std::io::Write;
use std::path::Path;

use ::csv::{QuoteStyle, WriterBuilder};
use serde::Serialize;

use crate::analysis::pm_fold::{PmReport, PmScope};
use crate::error::{Error, Result};
use crate::model::pm::PmInterval;
use crate::report::model::Report;

const WHAT: &str = "PM sampling CSV";

/// One record of `pm.csv`.
#[derive(Serialize)]
struct Record<'a> {
    scope: &'static str,
    range_slot: Option<u32>,
    range_generation: Option<u32>,
    path: &'a str,
    instance: Option<u32>,
    depth: Option<u32>,
    correlation_id: Option<u32>,
    kernel_name: Option<&'a str>,
    start_ns: u64,
    end_ns: u64,
    duration_ns: u64,
    metric: &'a str,
    unit: &'a str,
    mean: Option<f64>,
    peak: Option<f64>,
    total: Option<f64>,
    total_unit: Option<String>,
    samples: u32,
    coverage: Option<f64>,
    few_samples: Option<bool>,
    edge_share: Option<f64>,
    windows: Option<f64>,
    confidence: Option<&'static str>,
}

/// The PM lines of the metadata.
pub fn pm_metadata_lines(pm: &PmReport) -> Vec<String> {
    let interval = match pm.interval {
        Some(PmInterval::TimeNs(ns)) => format!("{ns} ns"),
        Some(PmInterval::Cycles(c)) => format!("{c} cycles"),
        None => "unknown".into(),
    };
    let chosen = pm.interval_chosen_by.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
    let mut lines = vec![
        format!("pm_interval: {interval}{chosen}"),
        format!("pm_samples: {}", pm.sample_count),
        format!("pm_hw_buffer_overflows: {}", pm.hw_buffer_overflows),
        format!("pm_counter_data_full: {}", pm.counter_data_full),
        format!("pm_missing_samples: {}", pm.missing_samples),
        format!("pm_empty_samples: {}", pm.empty_samples),
        format!(
            "pm_alignment: {} offset_ns={} residual={}",
            pm.alignment.method,
            pm.alignment.offset_ns,
            pm.alignment.residual.map_or_else(|| "none".to_owned(), |r| format!("{r:.4}"))
        ),
        format!("pm_min_samples: {} (fewer: few_samples=true)", pm.min_samples),
    ];
    for m in &pm.metrics {
        lines.push(format!("pm_metric: {} unit={}", m.name, m.unit));
    }
    lines
}

impl Report {
    /// Writes `pm.csv` to `out`; an error when the report has no PM sampling.
    pub fn write_pm_csv_to<W: Write>(&self, mut out: W) -> Result<()> {
        let pm = self.pm.as_ref().ok_or_else(|| {
            Error::InvalidState("the report has no PM sampling (enable it with --pm-sampling)".into())
        })?;
        self.write_metadata(&mut out, "PM sampling report", WHAT)?;
        for line in pm_metadata_lines(pm) {
            writeln!(out, "# {line}").map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
        }
        let mut w = WriterBuilder::new().quote_style(QuoteStyle::NonNumeric).from_writer(out);
        let units: Vec<Option<String>> = pm.metrics.iter().map(|m| m.integral_unit()).collect();
        for row in &pm.rows {
            for (index, metric) in pm.metrics.iter().enumerate() {
                let value = row.values.get(index).copied().flatten();
                let record = Record {
                    scope: match row.scope {
                        PmScope::Range => "range",
                        PmScope::Kernel => "kernel",
                    },
                    range_slot: row.range_id.map(|r| r.slot),
                    range_generation: row.range_id.map(|r| r.generation),
                    path: &row.path,
                    instance: row.instance,
                    depth: row.depth,
                    correlation_id: row.correlation_id,
                    kernel_name: row.kernel_name.as_deref(),
                    start_ns: row.start_ns,
                    end_ns: row.end_ns,
                    duration_ns: row.end_ns - row.start_ns,
                    metric: &metric.name,
                    unit: &metric.unit,
                    mean: value.map(|v| v.mean),
                    peak: value.map(|v| v.peak),
                    total: value.and_then(|v| v.total),
                    total_unit: units[index].clone(),
                    samples: value.map_or(0, |v| v.samples),
                    coverage: value.map(|v| v.coverage),
                    few_samples: value.map(|v| v.few_samples),
                    edge_share: value.and_then(|v| v.edge_share),
                    windows: value.map(|v| v.windows),
                    confidence: value.and_then(|v| v.confidence).map(|c| c.as_str()),
                };
                w.serialize(record).map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })?;
            }
        }
        w.flush().map_err(|e| Error::Serialize { what: WHAT, message: e.to_string() })
    }

    /// Writes `pm.csv` to a file.
    pub fn write_pm_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::report::tables::csv::write_file(path.as_ref(), |out| self.write_pm_csv_to(out))
    }
}
