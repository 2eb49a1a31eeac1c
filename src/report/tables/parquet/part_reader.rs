//! Reading a streamed table back: chosen columns of every part file of `DIR/TABLE/`
//! ([`read_parts`]), in part order, one record batch at a time.
//!
//! A part file that exists was renamed whole once written, so it is complete; one that still
//! cannot be read (cut short by a copy, damaged on disk) is named and skipped, and the read
//! goes on with the other parts: a corrupt part must not sink a whole run's outputs, as a
//! corrupt rank does not sink `gmprof merge`. The open segment of a killed run is a hidden
//! temporary file, which [`part_files`] never lists.
//!
//! Imports `read` and `parts`; the readers of streamed outputs (`gmprof merge`, `gmprof
//! diff`) call it.

use std::path::Path;

use super::parts::part_files;
use super::read::{batches, Columns};
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
            groups: Vec::new(),
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
