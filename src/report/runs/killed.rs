//! The report of a streamed process killed before its end (issue 42): it left complete part
//! files (`kernels/`, `ranges/`, `steps/` ...) and no `report.json`. [`report_from_parts`]
//! folds the parts into the report a finished run would carry: the streamed section's
//! tables, the whole run's aggregates (per kernel name and per range group, the same
//! [`Distribution`]s the run kept online) and the steps table, so `gmprof report DIR` prints
//! its summary. Only what the closed segments hold is there: the rows of the segments open
//! when it was killed are lost, and the report says so.
//!
//! Imports the Parquet part reader, the online aggregates' types and the report model
//! (`rank_ranges` for the parts' metadata).

use std::collections::BTreeMap;
use std::path::Path;

use super::rank_ranges::parts_meta;
use crate::analysis::correlate::Correlator;
use crate::analysis::online::{
    fold_numbers, AggregateQuantity, AggregateRow, AggregateTable, Distribution, StepRow, NO_NAME,
};
use crate::error::Result;
use crate::model::session::SessionTree;
use crate::model::MetricSet;
use crate::report::model::{CaptureInfo, Report};
use crate::report::stream::writer::MAX_REPORT_STEPS;
use crate::report::stream::{StreamedSummary, StreamedTable, STREAMED_TABLES};
use crate::report::tables::parquet::part_reader::read_parts;

/// The report of the streamed process in `dir` killed before its end, from its part files;
/// part files that cannot be read are left out and named in its warnings.
pub fn report_from_parts(dir: &Path) -> Result<Report> {
    let meta = parts_meta(dir)?;
    let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let mut tables = Vec::new();
    let mut skipped = Vec::new();
    let mut note = |name: &str, read: crate::report::tables::parquet::part_reader::PartsRead| {
        skipped.extend(read.skipped);
        tables.push(StreamedTable { table: name.to_owned(), parts: read.parts, rows: read.rows });
        read.rows
    };

    let mut kernels: BTreeMap<String, Distribution> = BTreeMap::new();
    let read = read_parts(dir, "kernels", &["kernel_name", "duration_ns"], |b| {
        for row in 0..b.len() {
            let name = b.text(0, row)?.unwrap_or(NO_NAME);
            match kernels.get_mut(name) {
                Some(d) => d.add(int(b.int(1, row)?)),
                None => kernels.entry(name.to_owned()).or_default().add(int(b.int(1, row)?)),
            }
        }
        Ok(())
    })?;
    let kernel_rows = note("kernels", read);

    let mut groups: BTreeMap<String, (Distribution, Distribution)> = BTreeMap::new();
    let read = read_parts(dir, "ranges", &["path", "gpu_time_ns", "wall_time_ns"], |b| {
        for row in 0..b.len() {
            let Some(path) = b.text(0, row)? else { continue };
            let group = groups.entry(fold_numbers(path).into_owned()).or_default();
            group.0.add(int(b.int(1, row)?));
            group.1.add(int(b.int(2, row)?));
        }
        Ok(())
    })?;
    let range_rows = note("ranges", read);

    let mut steps_table = Vec::new();
    let columns =
        ["step", "path", "start_ns", "end_ns", "wall_time_ns", "gpu_time_ns", "kernels", "transfers", "window"];
    let read = read_parts(dir, "steps", &columns, |b| {
        for row in 0..b.len() {
            if steps_table.len() >= MAX_REPORT_STEPS {
                break;
            }
            steps_table.push(StepRow {
                step: int(b.int(0, row)?).unwrap_or(0),
                path: b.text(1, row)?.unwrap_or_default().to_owned(),
                start_ns: int(b.int(2, row)?),
                end_ns: int(b.int(3, row)?),
                wall_time_ns: int(b.int(4, row)?),
                gpu_time_ns: int(b.int(5, row)?),
                kernels: int(b.int(6, row)?).unwrap_or(0),
                transfers: int(b.int(7, row)?).unwrap_or(0),
                window: int(b.int(8, row)?).unwrap_or(0),
                groups: Vec::new(),
                flight_window: None,
            });
        }
        Ok(())
    })?;
    let steps = note("steps", read);
    let mut transfers = 0;
    for table in STREAMED_TABLES.iter().copied().chain(["pm", "pm_samples"]) {
        if matches!(table, "kernels" | "ranges" | "steps") || !dir.join(table).is_dir() {
            continue;
        }
        let read = read_parts(dir, table, &[first_column(table)], |_| Ok(()))?;
        let rows = note(table, read);
        if table == "transfers" {
            transfers = rows;
        }
    }

    let mut aggregates = Vec::new();
    for (key, d) in &kernels {
        aggregates.push(AggregateRow {
            table: AggregateTable::Kernel,
            quantity: AggregateQuantity::DurationNs,
            key: key.clone(),
            summary: d.summary(),
        });
    }
    for (key, (gpu, wall)) in &groups {
        for (quantity, d) in [(AggregateQuantity::GpuTimeNs, gpu), (AggregateQuantity::WallTimeNs, wall)] {
            aggregates.push(AggregateRow {
                table: AggregateTable::Range,
                quantity,
                key: key.clone(),
                summary: d.summary(),
            });
        }
    }
    let step_group = steps_table.first().map(|s| fold_numbers(&s.path).into_owned());
    let summary = StreamedSummary {
        why: format!(
            "the process was killed before its end (no report.json): this summary is folded from its part files \
             ({} of them); the rows of the segments open when it was killed are lost",
            tables.iter().map(|t| t.parts).sum::<u32>()
        ),
        row_limit: 0,
        kernels: kernel_rows,
        transfers,
        ranges: range_rows,
        steps,
        step_group,
        tables,
        aggregates,
        steps_table_left_out: steps.saturating_sub(MAX_REPORT_STEPS as u64),
        steps_table,
        flight: None,
        drain_times: None,
        pm_kernels_left_out: 0,
        pm_kernels_left_out_ns: 0,
    };
    let mut report =
        Report::analyze(CaptureInfo::new(meta.mode), &MetricSet::default(), &SessionTree::new(), Correlator::new());
    report.meta = meta;
    report.meta.kernel_count = kernel_rows;
    report.meta.total_gpu_time_ns = kernels.values().filter_map(|d| d.summary().total_ns).reduce(u64::saturating_add);
    report.meta.warnings.push(format!(
        "killed before its end: read from its part files alone (`gmprof report` folded them; the rows of the segments \
         open at the kill are lost){}",
        if skipped.is_empty() { String::new() } else { format!("; left out, unreadable: {}", skipped.join(", ")) }
    ));
    report.streamed = Some(summary);
    Ok(report)
}

/// A column every part file of `table` has, to count its rows on.
fn first_column(table: &str) -> &'static str {
    match table {
        "transfers" => "correlation_id",
        "aggregates" => "window",
        "pm" => "scope",
        "pm_samples" => "start_ns",
        _ => "step",
    }
}
