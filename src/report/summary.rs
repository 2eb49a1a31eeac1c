//! The summary table: per-range rows grouped by range path across instances.
//!
//! Layer 3 (the safe profiler), report output for people: what `gmprof` prints at the end of
//! a run. One line per range path (all instances of `train_step/forward` together), sorted
//! by total GPU time, under a header that always states the mode, the device and the
//! dropped and flagged counts, plus the clock drift and the memcpy/memset totals when the
//! report has them.
//!
//! Range rows are inclusive, so the shares of a parent and its children overlap and the
//! share column does not add up to 100%.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::Report;
use crate::model::TransferKind;

/// One range path's statistics over its instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The range path (or the root row's).
    pub path: String,
    /// Number of instances.
    pub count: u64,
    /// Σ GPU time over instances, ns.
    pub total_ns: u64,
    /// Mean GPU time per instance with a known time, ns.
    pub mean_ns: Option<f64>,
    /// Smallest instance GPU time, ns.
    pub min_ns: Option<u64>,
    /// Largest instance GPU time, ns.
    pub max_ns: Option<u64>,
    /// `total_ns` as a percentage of the session's total kernel time.
    pub share_pct: Option<f64>,
    /// Σ kernels over instances (inclusive).
    pub kernels: u64,
    /// Σ flagged kernels over instances.
    pub flagged_kernels: u64,
    /// Σ DRAM bytes / Σ GPU time over instances with both, GB/s.
    pub dram_gbps: Option<f64>,
}

/// The summary of a report; its `Display` is the text table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// gmprof version.
    pub gmprof_version: String,
    /// Mode name.
    pub mode: String,
    /// Device and chip, as one text.
    pub device: String,
    /// Kernel rows.
    pub kernel_count: u64,
    /// Σ kernel time, ns.
    pub total_gpu_time_ns: u64,
    /// Counter ranges CUPTI dropped.
    pub dropped_counter_ranges: u64,
    /// Activity records CUPTI dropped.
    pub dropped_activity_records: u64,
    /// Kernel rows not `ok`.
    pub flagged_kernel_rows: u64,
    /// Counter ranges without a launch.
    pub orphan_counter_ranges: u64,
    /// Number of warnings in the report.
    pub warning_count: usize,
    /// Wall clock minus CUPTI clock over the session, ns, when clock pairs were taken.
    #[serde(default)]
    pub clock_drift_ns: Option<i64>,
    /// Memcpy and memset rows.
    #[serde(default)]
    pub transfer_count: u64,
    /// Σ bytes copied by memcpy.
    #[serde(default)]
    pub memcpy_bytes: u64,
    /// Σ bytes set by memset.
    #[serde(default)]
    pub memset_bytes: u64,
    /// Σ transfer durations, ns.
    #[serde(default)]
    pub transfer_time_ns: u64,
    /// One row per range path, by total GPU time, largest first.
    pub rows: Vec<SummaryRow>,
}

#[derive(Default)]
struct PathStats {
    count: u64,
    total_ns: u64,
    timed: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    kernels: u64,
    flagged: u64,
    dram_bytes: f64,
    dram_time_ns: u64,
    dram_known: bool,
}

impl Summary {
    /// Groups `report`'s range rows by path.
    pub fn of(report: &Report) -> Self {
        let meta = &report.meta;
        let mut order: Vec<&str> = Vec::new();
        let mut stats: HashMap<&str, PathStats> = HashMap::new();
        for row in &report.ranges {
            let s = stats.entry(row.path.as_str()).or_insert_with(|| {
                order.push(row.path.as_str());
                PathStats::default()
            });
            s.count += 1;
            s.kernels += row.kernel_count;
            s.flagged += row.flagged_kernel_count;
            if let Some(t) = row.gpu_time_ns {
                s.total_ns = s.total_ns.saturating_add(t);
                s.timed += 1;
                s.min_ns = Some(s.min_ns.map_or(t, |m| m.min(t)));
                s.max_ns = Some(s.max_ns.map_or(t, |m| m.max(t)));
                let bytes = match (row.dram_read_bytes, row.dram_write_bytes) {
                    (Some(r), Some(w)) => Some(r + w),
                    _ => row.dram_total_gbps.map(|g| g * t as f64),
                };
                if let Some(b) = bytes.filter(|_| row.dram_total_gbps.is_some()) {
                    s.dram_bytes += b;
                    s.dram_time_ns = s.dram_time_ns.saturating_add(t);
                    s.dram_known = true;
                }
            }
        }
        let total = meta.total_gpu_time_ns;
        let mut rows: Vec<SummaryRow> = order
            .into_iter()
            .filter_map(|path| {
                let s = stats.get(path)?;
                Some(SummaryRow {
                    path: path.to_owned(),
                    count: s.count,
                    total_ns: s.total_ns,
                    mean_ns: (s.timed > 0).then(|| s.total_ns as f64 / s.timed as f64),
                    min_ns: s.min_ns,
                    max_ns: s.max_ns,
                    share_pct: (total > 0).then(|| 100.0 * s.total_ns as f64 / total as f64),
                    kernels: s.kernels,
                    flagged_kernels: s.flagged,
                    dram_gbps: (s.dram_known && s.dram_time_ns > 0).then(|| s.dram_bytes / s.dram_time_ns as f64),
                })
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.path.cmp(&b.path)));

        let device = format!(
            "{} (chip {})",
            meta.device_name.as_deref().unwrap_or("unknown device"),
            meta.chip.as_deref().unwrap_or("unknown")
        );
        Summary {
            gmprof_version: meta.gmprof_version.clone(),
            mode: meta.mode.as_str().to_owned(),
            device,
            kernel_count: meta.kernel_count,
            total_gpu_time_ns: total,
            dropped_counter_ranges: meta.dropped_counter_ranges,
            dropped_activity_records: meta.dropped_activity_records,
            flagged_kernel_rows: meta.flagged_kernel_rows,
            orphan_counter_ranges: meta.orphan_counter_ranges,
            warning_count: meta.warnings.len(),
            clock_drift_ns: meta.clock_drift_ns,
            transfer_count: report.transfers.len() as u64,
            memcpy_bytes: report
                .transfers
                .iter()
                .filter(|t| t.kind != TransferKind::Memset)
                .fold(0u64, |sum, t| sum.saturating_add(t.bytes)),
            memset_bytes: report
                .transfers
                .iter()
                .filter(|t| t.kind == TransferKind::Memset)
                .fold(0u64, |sum, t| sum.saturating_add(t.bytes)),
            transfer_time_ns: report.transfers.iter().fold(0u64, |sum, t| sum.saturating_add(t.duration_ns)),
            rows,
        }
    }
}

/// A duration in ns as text with a readable unit: `850 ns`, `12.35 us`, `4.560 ms`, `1.234 s`.
pub fn format_duration_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".to_owned();
    }
    let abs = ns.abs();
    if abs < 1e3 {
        format!("{ns:.0} ns")
    } else if abs < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if abs < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Text for a table cell: control characters escaped, so a name cannot break the layout.
pub(crate) fn cell(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() { c.escape_default().collect() } else { vec![c] };
            escaped
        })
        .collect()
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gmprof {} | mode {} | {} | {} kernels, {} GPU time",
            self.gmprof_version,
            self.mode,
            cell(&self.device),
            self.kernel_count,
            format_duration_ns(self.total_gpu_time_ns as f64)
        )?;
        if let Some(drift) = self.clock_drift_ns {
            write!(f, " | clock drift {drift:+} ns")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "dropped counter ranges: {} | dropped activity records: {} | flagged kernel rows: {} | orphan counter ranges: {} | warnings: {}",
            self.dropped_counter_ranges,
            self.dropped_activity_records,
            self.flagged_kernel_rows,
            self.orphan_counter_ranges,
            self.warning_count
        )?;
        if self.transfer_count > 0 {
            let time = self.transfer_time_ns;
            let bytes = self.memcpy_bytes.saturating_add(self.memset_bytes);
            writeln!(
                f,
                "transfers: {} | memcpy {} B | memset {} B | {} | {}",
                self.transfer_count,
                self.memcpy_bytes,
                self.memset_bytes,
                format_duration_ns(time as f64),
                if time > 0 { format!("{:.2} GB/s", bytes as f64 / time as f64) } else { "- GB/s".to_owned() }
            )?;
        }

        let header = ["range", "count", "total", "mean", "min", "max", "share", "kernels", "flagged", "DRAM GB/s"];
        let dash = || "-".to_owned();
        let table: Vec<[String; 10]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    cell(&r.path),
                    r.count.to_string(),
                    format_duration_ns(r.total_ns as f64),
                    r.mean_ns.map_or_else(dash, format_duration_ns),
                    r.min_ns.map_or_else(dash, |v| format_duration_ns(v as f64)),
                    r.max_ns.map_or_else(dash, |v| format_duration_ns(v as f64)),
                    r.share_pct.map_or_else(dash, |p| format!("{p:.1}%")),
                    r.kernels.to_string(),
                    r.flagged_kernels.to_string(),
                    r.dram_gbps.map_or_else(dash, |g| format!("{g:.1}")),
                ]
            })
            .collect();
        let mut widths: [usize; 10] = header.map(|h| h.chars().count());
        for line in &table {
            for (w, text) in widths.iter_mut().zip(line) {
                *w = (*w).max(text.chars().count());
            }
        }
        let write_line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            for (i, (text, width)) in cells.iter().zip(widths).enumerate() {
                let pad = width.saturating_sub(text.chars().count());
                if i == 0 {
                    write!(f, "{text}{}", " ".repeat(pad))?;
                } else {
                    write!(f, "  {}{text}", " ".repeat(pad))?;
                }
            }
            writeln!(f)
        };
        write_line(f, &header)?;
        for line in &table {
            let cells: Vec<&str> = line.iter().map(String::as_str).collect();
            write_line(f, &cells)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration_ns(850.0), "850 ns");
        assert_eq!(format_duration_ns(12_345.0), "12.35 us");
        assert_eq!(format_duration_ns(4_560_000.0), "4.560 ms");
        assert_eq!(format_duration_ns(1.234e9), "1.234 s");
        assert_eq!(cell("a\nb"), "a\\nb");
    }
}
