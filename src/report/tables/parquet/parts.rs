//! Streamed tables: one table written during the run as numbered part files,
//! `TABLE/part-00000.parquet`, `TABLE/part-00001.parquet`, ...
//!
//! A **segment** is one part file. Rows go into the open segment as they complete; it closes
//! after [`SegmentPolicy::rows`] rows or [`SegmentPolicy::every`] of time, whichever comes
//! first (the time is checked by [`PartWriter::tick`], which the run's drain calls). A segment
//! is written to a hidden temporary name (`.part-00042.parquet.tmp-PID`) and renamed to its
//! part name once its footer is written: a part file that exists is complete and readable,
//! and a process killed at any moment (SIGKILL, the OOM killer) loses at most its open
//! segment. Inside a segment, rows are encoded in row groups of [`SegmentPolicy::row_group`]
//! rows, which is what the open segment holds in memory.
//!
//! Every part of a table has the same columns (those of the whole-file table it streams,
//! from [`rows`](super::rows)) and the key-value metadata `gmprof.table`, `gmprof.meta` (what
//! the run knew when the table was opened) and `gmprof.part` (`{"part": N, "first_row": R}`).
//! DuckDB and Polars read them all with one glob: `read_parquet('out/kernels/*.parquet')`.
//!
//! Imports `writer`; `stream` opens one [`PartWriter`] per table.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::writer::{Column, ParquetRows};
use crate::error::{Error, Result};

/// Key-value metadata key of a part file: its number and the table row it starts at, as JSON.
pub const KEY_PART: &str = "gmprof.part";

/// When a segment closes, and the row groups inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPolicy {
    /// Rows per segment at most (default 1 048 576).
    pub rows: usize,
    /// Time a segment stays open at most (default 30 s; checked at each [`PartWriter::tick`]).
    pub every: Duration,
    /// Rows per row group (default 65 536): what an open segment holds in memory.
    pub row_group: usize,
}

impl Default for SegmentPolicy {
    fn default() -> Self {
        Self { rows: 1 << 20, every: Duration::from_secs(30), row_group: 1 << 16 }
    }
}

/// The name of part `n`.
pub fn part_name(n: u32) -> String {
    format!("part-{n:05}.parquet")
}

/// The part files of a table directory, in part order (temporary files of an open or killed
/// segment are left out).
pub fn part_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut parts: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("part-") && n.ends_with(".parquet"))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(dir, e)),
    };
    parts.sort();
    Ok(parts)
}

struct OpenSegment {
    rows: ParquetRows<BufWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
    opened: Instant,
}

/// What a [`PartWriter`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartsWritten {
    /// Closed part files.
    pub parts: u32,
    /// Rows in them.
    pub rows: u64,
}

/// One streamed table; see the [module docs](self).
pub struct PartWriter {
    dir: PathBuf,
    what: &'static str,
    columns: Vec<Column>,
    metadata: Vec<(String, String)>,
    policy: SegmentPolicy,
    open: Option<OpenSegment>,
    written: PartsWritten,
}

impl std::fmt::Debug for PartWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartWriter").field("dir", &self.dir).field("written", &self.written).finish_non_exhaustive()
    }
}

impl PartWriter {
    /// A table in `dir` (created; part files of an earlier run in it are removed) with
    /// `columns` and `metadata`.
    pub fn create(
        dir: &Path,
        what: &'static str,
        columns: Vec<Column>,
        metadata: Vec<(String, String)>,
        policy: SegmentPolicy,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for old in part_files(dir)? {
            std::fs::remove_file(&old).map_err(|e| Error::io(&old, e))?;
        }
        Ok(Self { dir: dir.to_owned(), what, columns, metadata, policy, open: None, written: PartsWritten::default() })
    }

    /// The table's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rows written so far, the open segment's included.
    pub fn rows(&self) -> u64 {
        self.written.rows + self.open.as_ref().map_or(0, |s| s.rows.rows() as u64)
    }

    /// What the closed segments hold.
    pub fn written(&self) -> &PartsWritten {
        &self.written
    }

    /// Encoded bytes the open segment holds in memory.
    pub fn open_bytes(&self) -> usize {
        self.open.as_ref().map_or(0, |s| s.rows.in_progress_bytes())
    }

    /// Appends one row: `values` gives every column's value in order. The segment closes
    /// when it reaches its row limit.
    pub fn row(&mut self, values: impl FnOnce(&mut ParquetRows<BufWriter<File>>) -> Result<()>) -> Result<()> {
        if self.open.is_none() {
            self.open = Some(self.open_segment()?);
        }
        let segment = self.open.as_mut().expect("opened above");
        values(&mut segment.rows)?;
        segment.rows.end_row()?;
        if segment.rows.rows() >= self.policy.rows {
            self.close_segment()?;
        }
        Ok(())
    }

    fn open_segment(&self) -> Result<OpenSegment> {
        let name = part_name(self.written.parts);
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut metadata = self.metadata.clone();
        metadata.push((
            KEY_PART.to_owned(),
            format!("{{\"part\": {}, \"first_row\": {}}}", self.written.parts, self.written.rows),
        ));
        let rows = ParquetRows::streamed(
            BufWriter::new(file),
            self.columns.clone(),
            metadata,
            self.what,
            self.policy.row_group,
        )?;
        Ok(OpenSegment { rows, tmp, path, opened: Instant::now() })
    }

    /// Closes the open segment when it has been open for the policy's time; true when it
    /// closed one.
    pub fn tick(&mut self, now: Instant) -> Result<bool> {
        let due = self.open.as_ref().is_some_and(|s| now.duration_since(s.opened) >= self.policy.every);
        if due {
            self.close_segment()?;
        }
        Ok(due)
    }

    /// Closes the open segment, if any: footer, flush, rename to its part name.
    pub fn close_segment(&mut self) -> Result<()> {
        let Some(segment) = self.open.take() else { return Ok(()) };
        let OpenSegment { rows, tmp, path, .. } = segment;
        let result = (|| {
            let count = rows.finish()?;
            std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
            Ok(count)
        })();
        match result {
            Ok(count) => {
                self.written.parts += 1;
                self.written.rows += count as u64;
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Closes the open segment and returns what the table holds.
    pub fn finish(mut self) -> Result<PartsWritten> {
        self.close_segment()?;
        Ok(self.written.clone())
    }
}

impl Drop for PartWriter {
    fn drop(&mut self) {
        // A writer dropped without `finish` (an error path) leaves no temporary behind.
        if let Some(segment) = self.open.take() {
            let _ = std::fs::remove_file(&segment.tmp);
        }
    }
}
