//! The summary's rotation lines (per_kernel in rotation): N and how it was picked, the step
//! templates with their coverage, why a template differs, whether measuring stopped at a full
//! counter image, and the range groups of the main template with one step's GPU time and DRAM
//! traffic as the positions' means estimate them.
//!
//! Reads the [`RotationReport`](crate::analysis::rotation::RotationReport) of the report;
//! `summary` calls it.

use crate::analysis::rotation::GroupEstimate;
use crate::report::model::Report;
use crate::report::text::format::{cell, format_duration_ns, BLANK};

/// Range groups the summary lists.
pub const ROTATION_GROUPS: usize = 12;

/// The lines, empty without rotation.
pub fn rotation_lines(report: &Report) -> Vec<String> {
    let Some(r) = &report.rotation else { return Vec::new() };
    let mut out = r.describe();
    let names = report.metric_names();
    let index = |name: &str| names.iter().position(|n| *n == name);
    let (read, write) = (index("dram__bytes_read.sum"), index("dram__bytes_write.sum"));
    let Some(main) = r.templates.iter().max_by_key(|t| (t.steps, std::cmp::Reverse(t.template))) else {
        return out;
    };
    let mut groups: Vec<&GroupEstimate> = r.groups.iter().filter(|g| g.template == main.template).collect();
    groups.sort_by(|a, b| b.gpu_time_ns.unwrap_or(0.0).total_cmp(&a.gpu_time_ns.unwrap_or(0.0)));
    if groups.is_empty() {
        return out;
    }
    out.push(format!(
        "one step of template {} as its positions estimate it (positions.csv; blank where a position was never measured):",
        main.template
    ));
    let value = |g: &GroupEstimate, i: Option<usize>| i.and_then(|i| g.values.get(i).copied().flatten());
    let mut table = vec![vec![
        "range group".to_owned(),
        "positions".to_owned(),
        "measured".to_owned(),
        "GPU time".to_owned(),
        "DRAM read".to_owned(),
        "DRAM written".to_owned(),
        "DRAM GB/s".to_owned(),
    ]];
    for g in groups.iter().take(ROTATION_GROUPS) {
        let bytes = |v: Option<f64>| v.map_or_else(|| BLANK.to_owned(), |b| format!("{:.2} MB", b / 1e6));
        let total = match (value(g, read), value(g, write)) {
            (Some(r), Some(w)) => Some(r + w),
            (Some(r), None) if write.is_none() => Some(r),
            _ => None,
        };
        let gbps = match (total, g.gpu_time_ns) {
            (Some(b), Some(t)) if t > 0.0 => format!("{:.1}", b / t),
            _ => BLANK.to_owned(),
        };
        table.push(vec![
            cell(&g.path),
            g.positions.to_string(),
            g.measured_positions.to_string(),
            g.gpu_time_ns.map_or_else(|| BLANK.to_owned(), format_duration_ns),
            bytes(value(g, read)),
            bytes(value(g, write)),
            gbps,
        ]);
    }
    let widths: Vec<usize> =
        (0..table[0].len()).map(|c| table.iter().map(|row| row[c].chars().count()).max().unwrap_or(0)).collect();
    for row in table {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, text)| {
                    if c == 0 {
                        format!("{text:<w$}", w = widths[c])
                    } else {
                        format!("{text:>w$}", w = widths[c])
                    }
                },
            )
            .collect();
        out.push(format!("  {}", line.join("  ").trim_end()));
    }
    if groups.len() > ROTATION_GROUPS {
        out.push(format!("  ... and {} more group(s) (report.json: rotation.groups)", groups.len() - ROTATION_GROUPS));
    }
    out
}
