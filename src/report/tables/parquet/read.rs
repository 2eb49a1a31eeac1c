//! Reading gmprof's Parquet files back: key-value metadata, the report's metadata, and the
//! values of chosen columns, one record batch at a time.
//!
//! Errors name the file and say what to do: a file that is not Parquet (or was cut short by a
//! copy) cannot have its footer read; a file without `gmprof.meta` was not written by gmprof;
//! a column the caller needs that the file lacks is named.
//!
//! The `parquet` crate asserts on some malformed data instead of returning an error (fuzzing
//! found an RLE bit width over 32 in a dictionary-index page: `gmprof merge` stopped with a
//! panic). Every call into its decoder runs under a guard (`decoding`), which turns such a panic into
//! the file's error; [`in_guarded_decode`] tells a panic hook that one is on its way to be
//! caught (the fuzz targets' hook, which aborts otherwise, lets it unwind).
//!
//! The decoder also reserves memory by counts read from the file (a dictionary page's number
//! of values, a page's uncompressed size) before it reads what they count: [`claims`] holds
//! each such count against the bytes behind it first, the footer's before the crate reads
//! the footer, the pages' of the chosen columns before any is decoded.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;

use super::claims;
use super::writer::{KEY_META, ROW_GROUP_ROWS};
use crate::error::{Error, Result};
use crate::report::model::ReportMeta;

thread_local! {
    static GUARDED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread is inside the reader's decoding guard: a panic now is caught there and becomes the
/// file's error.
pub fn in_guarded_decode() -> bool {
    GUARDED.with(|g| g.get() > 0)
}

/// Runs `f` (a call into the Parquet decoder for the file at `path`); a panic in it becomes
/// the error of an unreadable file.
fn decoding<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    GUARDED.with(|g| g.set(g.get() + 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(g.get().saturating_sub(1)));
    result.unwrap_or_else(|payload| {
        Err(unreadable(
            path,
            format!(
                "its data is malformed: the Parquet decoder stopped on it: {}",
                crate::error::panic_message(&*payload)
            ),
        ))
    })
}

fn unreadable(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!(
        "{}: not a readable Parquet file ({e}); it may be truncated or not written by gmprof: \
         write it again (gmprof writes Parquet files whole, through a rename), or remove it",
        path.display()
    ))
}

/// The reader of the file at `path`. The Arrow schema a writer may embed (`ARROW:schema`)
/// is not read: the columns' types come from the Parquet schema alone, which gmprof's
/// writer makes say the same, and the Arrow IPC decoder panics on some malformed schemas
/// (found by fuzzing) where a truncated or foreign file must be an error.
fn builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    claims::footer_claims(path).map_err(|e| Error::io(path, e))?.map_err(|why| unreadable(path, why))?;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    decoding(path, || {
        ParquetRecordBatchReaderBuilder::try_new_with_options(file, options).map_err(|e| unreadable(path, e))
    })
}

/// The key-value metadata of the Parquet file at `path`.
pub fn key_values(path: &Path) -> Result<HashMap<String, String>> {
    let b = builder(path)?;
    Ok(b.metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kv| kv.iter().filter_map(|k| Some((k.key.clone(), k.value.clone()?))).collect())
        .unwrap_or_default())
}

/// The number of rows of the Parquet file at `path` (from its footer; no data is read).
pub fn row_count(path: &Path) -> Result<u64> {
    let b = builder(path)?;
    Ok(b.metadata().file_metadata().num_rows().max(0) as u64)
}

/// The report metadata (`gmprof.meta`) of a gmprof Parquet table.
pub fn report_meta(path: &Path) -> Result<ReportMeta> {
    let kv = key_values(path)?;
    let json = kv.get(KEY_META).ok_or_else(|| {
        Error::InvalidConfig(format!(
            "{}: no '{KEY_META}' key-value metadata: not a gmprof table (gmprof's Parquet files carry the \
             report's metadata)",
            path.display()
        ))
    })?;
    serde_json::from_str(json).map_err(|e| {
        Error::InvalidConfig(format!("{}: '{KEY_META}' is not a gmprof report's metadata: {e}", path.display()))
    })
}

/// Reads `columns` of the Parquet file at `path`, one record batch (about one row group) at
/// a time, in the order asked; an error names a column the file lacks.
pub fn batches(path: &Path, columns: &[&str]) -> Result<ColumnBatches> {
    let b = builder(path)?;
    let schema = b.schema().clone();
    let mut indices = Vec::with_capacity(columns.len());
    for name in columns {
        let index = schema.index_of(name).map_err(|_| {
            Error::InvalidConfig(format!(
                "{}: no column '{name}' (a table of another gmprof version, or another table?)",
                path.display()
            ))
        })?;
        indices.push(index);
    }
    // The projection keeps file order; remember where each asked column lands.
    let mut sorted = indices.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let order = indices.iter().map(|i| sorted.binary_search(i).unwrap_or(0)).collect();
    let mask = ProjectionMask::roots(b.parquet_schema(), sorted.iter().copied());
    let leaves: Vec<usize> = (0..b.parquet_schema().num_columns()).filter(|&i| mask.leaf_included(i)).collect();
    claims::page_claims(path, b.metadata(), &leaves)
        .map_err(|e| Error::io(path, e))?
        .map_err(|why| unreadable(path, why))?;
    let reader = decoding(path, || {
        b.with_projection(mask).with_batch_size(ROW_GROUP_ROWS).build().map_err(|e| unreadable(path, e))
    })?;
    Ok(ColumnBatches { path: path.to_owned(), reader, order, failed: false })
}

/// Record batches of chosen columns; see [`batches`].
pub struct ColumnBatches {
    path: std::path::PathBuf,
    reader: ParquetRecordBatchReader,
    order: Vec<usize>,
    /// The decoder stopped on malformed data: nothing more is read.
    failed: bool,
}

impl Iterator for ColumnBatches {
    type Item = Result<Columns>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (reader, path) = (&mut self.reader, &self.path);
        let batch = match decoding(path, || Ok(reader.next())) {
            Ok(batch) => batch?,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        Some(batch.map_err(|e| unreadable(&self.path, e)).map(|b| Columns { batch: b, order: self.order.clone() }))
    }
}

/// One batch of the asked columns, addressed by their position in the request.
pub struct Columns {
    batch: RecordBatch,
    order: Vec<usize>,
}

impl Columns {
    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    fn column(&self, i: usize) -> &dyn Array {
        self.batch.column(self.order[i]).as_ref()
    }

    /// Asked column `i`, row `row`, as an integer (`Int64` or `Int32`); `None` when null.
    pub fn int(&self, i: usize, row: usize) -> Result<Option<i64>> {
        let c = self.column(i);
        if c.is_null(row) {
            return Ok(None);
        }
        match c.data_type() {
            DataType::Int64 => Ok(Some(c.as_primitive::<Int64Type>().value(row))),
            DataType::Int32 => Ok(Some(c.as_primitive::<Int32Type>().value(row).into())),
            other => Err(self.wrong_type(i, other, "an integer")),
        }
    }

    /// Asked column `i`, row `row`, as a float; `None` when null.
    pub fn float(&self, i: usize, row: usize) -> Result<Option<f64>> {
        let c = self.column(i);
        if c.is_null(row) {
            return Ok(None);
        }
        match c.data_type() {
            DataType::Float64 => Ok(Some(c.as_primitive::<Float64Type>().value(row))),
            other => Err(self.wrong_type(i, other, "a float")),
        }
    }

    /// Asked column `i`, row `row`, as text; `None` when null.
    pub fn text(&self, i: usize, row: usize) -> Result<Option<&str>> {
        let c = self.column(i);
        if c.is_null(row) {
            return Ok(None);
        }
        match c.data_type() {
            DataType::Utf8 => Ok(Some(c.as_string::<i32>().value(row))),
            other => Err(self.wrong_type(i, other, "text")),
        }
    }

    fn wrong_type(&self, i: usize, found: &DataType, wanted: &str) -> Error {
        let name = self.batch.schema().field(self.order[i]).name().clone();
        Error::InvalidConfig(format!("column '{name}' is {found}, not {wanted} (a table of another gmprof version?)"))
    }
}
