//! Reading a streamed table back: chosen columns of every part file of `DIR/TABLE/`
//! ([`read_parts`]), in part order, one record batch at a time; the whole run's aggregate
//! rows ([`whole_run_aggregates`]).
//!
//! A part file that exists was renamed whole once written, so it is complete; one that still
//! cannot be read (cut short by a copy, damaged on disk) is named and skipped, and the read
//! goes on with the other parts: a corrupt part must not sink a whole run's outputs, as a
//! corrupt rank does not sink `gmprof merge`. The open segment of a killed run is a hidden
//! temporary file, which [`part_files`] never lists.
//!
//! Imports `read`, `parts` and the online rows; the readers of streamed outputs (`gmprof merge`, `gmprof
//! diff`) call it.

use std::path::Path;

use super::parts::part_files;
use super::read::{batches, Columns};
use crate::analysis::online::{AggregateQuantity, AggregateRow, AggregateTable, DistributionSummary};
use crate::error::Result;

/// What [`read_parts`] read of one table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartsRead {
    /// Part files read whole.
    pub parts: u32,
    /// Rows in them.
    pub rows: u64,
    /// Part files left out, each `TABLE/part-NNNNN.parquet: why`.
    pub skipped: Vec<String>,
}

/// Reads `columns` of every part of the streamed table `dir/table` and hands each batch to
/// `each`. A part that cannot be opened or decoded, or lacks one of `columns`, is named in
/// [`PartsRead::skipped`] (rows of it handed over before the failure stay handed over); an
/// error of `each` (a column of the wrong type) ends the read. A table with no directory has no parts.
pub fn read_parts(
    dir: &Path,
    table: &str,
    columns: &[&str],
    mut each: impl FnMut(&Columns) -> Result<()>,
) -> Result<PartsRead> {
    let mut read = PartsRead::default();
    for part in part_files(&dir.join(table))? {
        let name = format!("{table}/{}", part.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        let mut rows = 0u64;
        let mut failed = None;
        match batches(&part, columns) {
            Ok(reader) => {
                for batch in reader {
                    match batch {
                        Ok(b) => {
                            each(&b)?;
                            rows += b.len() as u64;
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
            Err(e) => failed = Some(e),
        }
        match failed {
            None => {
                read.parts += 1;
                read.rows += rows;
            }
            Some(e) if rows == 0 => read.skipped.push(format!("{name}: {e}")),
            Some(e) => read.skipped.push(format!("{name}: {e} (after {rows} of its rows)")),
        }
    }
    Ok(read)
}

/// The whole run's rows of the streamed `aggregates` table of `dir` (those with `window`
/// null; see [`streamed`](super::streamed)), and the parts left out.
pub fn whole_run_aggregates(dir: &Path) -> Result<(Vec<AggregateRow>, Vec<String>)> {
    let mut rows = Vec::new();
    let columns = [
        "window", "table", "quantity", "key", "count", "missing", "total_ns", "mean_ns", "min_ns", "p50_ns", "p90_ns",
        "p99_ns", "max_ns",
    ];
    let int = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let read = read_parts(dir, "aggregates", &columns, |b| {
        for r in 0..b.len() {
            if b.int(0, r)?.is_some() {
                continue; // a window's row
            }
            let table = match b.text(1, r)? {
                Some("range") => AggregateTable::Range,
                Some("kernel") => AggregateTable::Kernel,
                _ => continue,
            };
            let quantity = match b.text(2, r)? {
                Some("gpu_time_ns") => AggregateQuantity::GpuTimeNs,
                Some("wall_time_ns") => AggregateQuantity::WallTimeNs,
                Some("duration_ns") => AggregateQuantity::DurationNs,
                _ => continue,
            };
            let summary = DistributionSummary {
                count: int(b.int(4, r)?).unwrap_or(0),
                missing: int(b.int(5, r)?).unwrap_or(0),
                total_ns: int(b.int(6, r)?),
                mean_ns: b.float(7, r)?,
                min_ns: int(b.int(8, r)?),
                p50_ns: int(b.int(9, r)?),
                p90_ns: int(b.int(10, r)?),
                p99_ns: int(b.int(11, r)?),
                max_ns: int(b.int(12, r)?),
            };
            rows.push(AggregateRow { table, quantity, key: b.text(3, r)?.unwrap_or_default().to_owned(), summary });
        }
        Ok(())
    })?;
    Ok((rows, read.skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::parquet::parts::{PartWriter, SegmentPolicy};
    use crate::report::tables::parquet::streamed::{push_step, step_columns};

    fn step(n: u64) -> crate::analysis::online::StepRow {
        crate::analysis::online::StepRow {
            step: n,
            path: format!("step {n}"),
            start_ns: Some(n * 10),
            end_ns: Some(n * 10 + 5),
            wall_time_ns: Some(5),
            gpu_time_ns: None,
            kernels: 1,
            transfers: 0,
            window: 0,
            ..Default::default()
        }
    }

    #[test]
    fn a_corrupt_part_is_named_and_skipped_and_the_others_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let policy = SegmentPolicy { rows: 2, every: std::time::Duration::from_secs(3600), row_group: 2 };
        let mut w = PartWriter::create(&dir.path().join("steps"), "steps", step_columns(), Vec::new(), policy).unwrap();
        for n in 0..6 {
            w.row(|p| push_step(p, &step(n))).unwrap();
        }
        w.finish().unwrap();
        // Part 1 cut short after the write (a bad copy).
        let part1 = dir.path().join("steps/part-00001.parquet");
        let bytes = std::fs::read(&part1).unwrap();
        std::fs::write(&part1, &bytes[..bytes.len() / 2]).unwrap();
        let mut steps = Vec::new();
        let mut blank_gpu = 0;
        let read = read_parts(dir.path(), "steps", &["step", "gpu_time_ns"], |b| {
            for r in 0..b.len() {
                steps.push(b.int(0, r)?.unwrap());
                blank_gpu += usize::from(b.int(1, r)?.is_none());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(steps, vec![0, 1, 4, 5]);
        assert_eq!(blank_gpu, 4, "not measured stays null");
        assert_eq!((read.parts, read.rows), (2, 4));
        assert_eq!(read.skipped.len(), 1);
        assert!(read.skipped[0].starts_with("steps/part-00001.parquet: "), "{:?}", read.skipped);
        assert!(read.skipped[0].contains("not a readable Parquet file"), "{:?}", read.skipped);
        // No directory: no parts, no error.
        assert_eq!(read_parts(dir.path(), "kernels", &["kernel_name"], |_| Ok(())).unwrap(), PartsRead::default());
        // A column the parts lack: each part is named with it.
        let read = read_parts(dir.path(), "steps", &["nope"], |_| Ok(())).unwrap();
        assert_eq!(read.skipped.len(), 3);
        assert!(read.skipped[2].contains("no column 'nope'"), "{:?}", read.skipped);
    }
}
