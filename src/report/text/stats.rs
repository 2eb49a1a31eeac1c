//! The statistics as text: [`Stats`]' `Display`, one aligned table per set (ranges by GPU
//! time, ranges by wall time, kernels per range path), as `gmprof stats` prints them.

use std::fmt;

use super::format::{cell, format_duration_ns, BLANK};
use crate::report::tables::stats::{LabelStats, Stats};

/// Writes one aligned table: `labels` left-aligned text columns, then right-aligned ones.
fn write_table(f: &mut fmt::Formatter<'_>, header: &[&str], labels: usize, rows: &[Vec<String>]) -> fmt::Result {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, text) in widths.iter_mut().zip(row) {
            *w = (*w).max(text.chars().count());
        }
    }
    let line = |f: &mut fmt::Formatter<'_>, cells: &mut dyn Iterator<Item = &str>| -> fmt::Result {
        for (i, (text, width)) in cells.zip(&widths).enumerate() {
            let pad = " ".repeat(width.saturating_sub(text.chars().count()));
            let sep = if i == 0 { "" } else { "  " };
            if i < labels {
                write!(f, "{sep}{text}{pad}")?;
            } else {
                write!(f, "{sep}{pad}{text}")?;
            }
        }
        writeln!(f)
    };
    line(f, &mut header.iter().copied())?;
    for row in rows {
        line(f, &mut row.iter().map(String::as_str))?;
    }
    Ok(())
}

/// The statistic columns of one group, as table cells.
fn stat_cells(s: &LabelStats) -> [String; 8] {
    let dash = || BLANK.to_owned();
    let duration = |v: Option<u64>| v.map_or_else(dash, |v| format_duration_ns(v as f64));
    [
        s.count.to_string(),
        duration(s.total_ns),
        s.mean_ns.map_or_else(dash, format_duration_ns),
        duration(s.min_ns),
        duration(s.p50_ns),
        duration(s.p99_ns),
        duration(s.max_ns),
        s.share_pct.map_or_else(dash, |p| format!("{p:.1}%")),
    ]
}

const STAT_HEADER: [&str; 8] = ["count", "total", "mean", "min", "p50", "p99", "max", "share"];

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (title, set) in [("ranges by GPU time", &self.ranges), ("ranges by wall time", &self.range_wall)] {
            writeln!(f, "{title} (percentiles by nearest rank)")?;
            let rows: Vec<Vec<String>> =
                set.iter().map(|s| std::iter::once(cell(&s.range_path)).chain(stat_cells(s)).collect()).collect();
            let header: Vec<&str> = std::iter::once("range").chain(STAT_HEADER).collect();
            write_table(f, &header, 1, &rows)?;
            writeln!(f)?;
        }
        writeln!(f, "kernels by GPU time, per range path (percentiles by nearest rank)")?;
        let rows: Vec<Vec<String>> = self
            .kernels
            .iter()
            .map(|s| {
                let name = s.kernel_name.as_deref().map_or_else(|| "<unknown>".to_owned(), cell);
                [cell(&s.range_path), name].into_iter().chain(stat_cells(s)).collect()
            })
            .collect();
        let header: Vec<&str> = ["range", "kernel"].into_iter().chain(STAT_HEADER).collect();
        write_table(f, &header, 2, &rows)
    }
}
