//! The Parquet writer every table goes through: [`ParquetRows`] (one table a row at a time,
//! typed [`Column`]s) and the key-value metadata keys of every gmprof Parquet file.
//!
//! A streamed part file ([`ParquetRows::streamed`]) encodes and compresses its row groups on
//! a thread of its own (`gmprof-parquet`), one row group behind the rows being built: encoding
//! and ZSTD were 40 % of a streamed drain's time (BENCHMARKS.md), and the drain thread then
//! only fills the column builders. The thread holds at most one row group queued and one being
//! encoded; an error it meets is returned by the next flush or by `finish`.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};

/// Rows per row group (and per record batch handed to the writer).
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Key-value metadata key: the table's name (`per-kernel report`).
pub const KEY_TABLE: &str = "gmprof.table";
/// Key-value metadata key: the CSV file's `# ` header lines, joined by line breaks.
pub const KEY_HEADER: &str = "gmprof.header";
/// Key-value metadata key: the report's metadata as JSON (`report.json`'s `meta`).
pub const KEY_META: &str = "gmprof.meta";

/// A column's type in a gmprof Parquet file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Whole numbers (counts, ids, ns, bytes).
    Int64,
    /// Grid and block axes.
    Int32,
    /// Measured quantities that are not whole.
    Float64,
    /// Flags.
    Bool,
    /// Names and enumerations.
    Text,
}

impl ColumnType {
    fn data_type(self) -> DataType {
        match self {
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Text => DataType::Utf8,
        }
    }
}

/// One column of a table: name, type, and whether it may be null.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The column's name (the CSV header's).
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
    /// Whether a value may be missing (blank in the CSV).
    pub nullable: bool,
}

impl Column {
    /// A column that may be null.
    pub fn null(name: impl Into<String>, ty: ColumnType) -> Self {
        Self { name: name.into(), ty, nullable: true }
    }

    /// A column that is never null.
    pub fn required(name: impl Into<String>, ty: ColumnType) -> Self {
        Self { name: name.into(), ty, nullable: false }
    }
}

enum Builder {
    Int64(Int64Builder),
    Int32(Int32Builder),
    Float64(Float64Builder),
    Bool(BooleanBuilder),
    Text(StringBuilder),
}

impl Builder {
    fn new(ty: ColumnType, rows: usize) -> Self {
        match ty {
            ColumnType::Int64 => Builder::Int64(Int64Builder::with_capacity(rows)),
            ColumnType::Int32 => Builder::Int32(Int32Builder::with_capacity(rows)),
            ColumnType::Float64 => Builder::Float64(Float64Builder::with_capacity(rows)),
            ColumnType::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            ColumnType::Text => Builder::Text(StringBuilder::with_capacity(rows, rows * 32)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Int64(b) => Arc::new(b.finish()),
            Builder::Int32(b) => Arc::new(b.finish()),
            Builder::Float64(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
        }
    }
}

/// Writes one table to Parquet a row at a time: one call per column, in schema order, then
/// [`ParquetRows::end_row`]; [`ParquetRows::finish`] writes the footer.
pub struct ParquetRows<W: Write + Send> {
    columns: Vec<Column>,
    schema: SchemaRef,
    builders: Vec<Builder>,
    column: usize,
    rows: usize,
    sink: Sink<W>,
    what: &'static str,
    row_group: usize,
}

/// Where finished row groups go: the writer itself, or the thread that owns it.
enum Sink<W: Write + Send> {
    Inline(Box<ArrowWriter<W>>),
    Thread {
        /// Row groups to encode; `None` once the thread is joined.
        batches: Option<SyncSender<RecordBatch>>,
        /// The thread; it gives the writer back when `batches` closes.
        thread: Option<JoinHandle<std::result::Result<ArrowWriter<W>, String>>>,
        /// The writer's in-progress bytes, as the thread last saw them.
        in_progress: Arc<AtomicUsize>,
        /// What stopped the thread, once joined on an error: said again by later calls.
        failed: Option<String>,
    },
}

impl<W: Write + Send> Sink<W> {
    /// The encoder thread's end: its writer, or what stopped it.
    fn join(&mut self, what: &'static str) -> Result<ArrowWriter<W>> {
        let Sink::Thread { batches, thread, failed, .. } = self else {
            return Err(Error::InvalidState(format!("{what}: no encoder thread (a bug in gmprof)")));
        };
        drop(batches.take());
        let Some(handle) = thread.take() else {
            let message = failed.clone().unwrap_or_else(|| "the encoder thread was already joined".into());
            return Err(Error::Serialize { what, message });
        };
        let message = match handle.join() {
            Ok(Ok(writer)) => return Ok(writer),
            Ok(Err(message)) => message,
            Err(_) => "the Parquet encoder thread panicked".to_owned(),
        };
        *failed = Some(message.clone());
        Err(Error::Serialize { what, message })
    }
}

impl<W: Write + Send> ParquetRows<W> {
    /// A writer of `columns` into `out`, with `metadata` as the file's key-value metadata.
    pub fn new(out: W, columns: Vec<Column>, metadata: Vec<(String, String)>, what: &'static str) -> Result<Self> {
        Self::build(out, columns, metadata, what, ROW_GROUP_ROWS, false)
    }

    /// A writer for a streamed part file: row groups of `row_group` rows (what the writer
    /// holds in memory before it encodes them), dictionaries for text columns only (an id or
    /// a timestamp is never repeated, and trying a dictionary on them first was most of the
    /// encoding's time), integers delta-encoded (timestamps and ids that rise by small steps:
    /// the parts 3.5 times smaller, no slower) and statistics per column chunk rather than per
    /// page.
    ///
    /// Its row groups are encoded on a thread of its own (see the module docs of `writer`).
    pub fn streamed(
        out: W,
        columns: Vec<Column>,
        metadata: Vec<(String, String)>,
        what: &'static str,
        row_group: usize,
    ) -> Result<Self>
    where
        W: 'static,
    {
        let mut rows = Self::build(out, columns, metadata, what, row_group, true)?;
        let Sink::Inline(writer) = std::mem::replace(
            &mut rows.sink,
            Sink::Thread { batches: None, thread: None, in_progress: Arc::default(), failed: None },
        ) else {
            unreachable!("build makes an inline sink")
        };
        let mut writer = *writer;
        let (tx, rx) = sync_channel::<RecordBatch>(1);
        let in_progress = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&in_progress);
        let thread = std::thread::Builder::new()
            .name("gmprof-parquet".into())
            .spawn(move || {
                for batch in rx {
                    writer.write(&batch).map_err(|e| e.to_string())?;
                    seen.store(writer.in_progress_size(), Ordering::Relaxed);
                }
                Ok(writer)
            })
            .map_err(|e| Error::Serialize { what, message: format!("could not start the encoder thread: {e}") })?;
        rows.sink = Sink::Thread { batches: Some(tx), thread: Some(thread), in_progress, failed: None };
        Ok(rows)
    }

    fn build(
        out: W,
        columns: Vec<Column>,
        metadata: Vec<(String, String)>,
        what: &'static str,
        row_group: usize,
        streamed: bool,
    ) -> Result<Self> {
        let row_group = row_group.max(1);
        let fields: Vec<Field> = columns.iter().map(|c| Field::new(&c.name, c.ty.data_type(), c.nullable)).collect();
        // In the Arrow schema too: readers that take the schema from `ARROW:schema` (pyarrow,
        // Polars) show it as the schema's metadata.
        let schema = Arc::new(Schema::new_with_metadata(fields, metadata.iter().cloned().collect()));
        let level = ZstdLevel::try_new(1).map_err(|e| parquet_error(what, e))?;
        let mut props = WriterProperties::builder();
        if streamed {
            props = props.set_dictionary_enabled(false).set_statistics_enabled(EnabledStatistics::Chunk);
            for c in columns.iter().filter(|c| c.ty == ColumnType::Text) {
                props = props.set_column_dictionary_enabled(ColumnPath::from(c.name.as_str()), true);
            }
            for c in columns.iter().filter(|c| c.ty == ColumnType::Int64) {
                props = props.set_column_encoding(
                    ColumnPath::from(c.name.as_str()),
                    parquet::basic::Encoding::DELTA_BINARY_PACKED,
                );
            }
        }
        let props = props
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(row_group))
            .set_created_by(format!("gmprof {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(metadata.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect()))
            .build();
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(|e| parquet_error(what, e))?;
        // Small at first (a streamed table may stay small); a full row group's size after one.
        let builders = columns.iter().map(|c| Builder::new(c.ty, row_group.min(4096))).collect();
        Ok(Self {
            columns,
            schema,
            builders,
            column: 0,
            rows: 0,
            sink: Sink::Inline(Box::new(writer)),
            what,
            row_group,
        })
    }

    fn next(&mut self, wanted: ColumnType) -> Result<&mut Builder> {
        let Some(column) = self.columns.get(self.column) else {
            return Err(Error::InvalidState(format!(
                "{}: more values than the {} columns",
                self.what,
                self.columns.len()
            )));
        };
        if column.ty != wanted {
            return Err(Error::InvalidState(format!(
                "{}: column {} is {:?}, not {wanted:?} (a bug in gmprof)",
                self.what, column.name, column.ty
            )));
        }
        self.column += 1;
        Ok(&mut self.builders[self.column - 1])
    }

    /// An `Int64` value from an unsigned one; a value past `i64::MAX` is an error.
    pub fn u64(&mut self, value: Option<u64>) -> Result<()> {
        let value = match value.map(i64::try_from) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(_)) => {
                // The column's name only on this error path: cloning it for every value was a
                // tenth of a streamed run's writing.
                let name = self.columns.get(self.column).map(|c| c.name.as_str()).unwrap_or_default();
                return Err(Error::Serialize {
                    what: self.what,
                    message: format!("{name}: {} does not fit a signed 64-bit integer", value.unwrap_or(0)),
                });
            }
        };
        self.i64(value)
    }

    /// An `Int64` value.
    pub fn i64(&mut self, value: Option<i64>) -> Result<()> {
        match self.next(ColumnType::Int64)? {
            Builder::Int64(b) => b.append_option(value),
            _ => unreachable!("checked by next"),
        }
        Ok(())
    }

    /// An `Int32` value.
    pub fn i32(&mut self, value: Option<i32>) -> Result<()> {
        match self.next(ColumnType::Int32)? {
            Builder::Int32(b) => b.append_option(value),
            _ => unreachable!("checked by next"),
        }
        Ok(())
    }

    /// A `Float64` value.
    pub fn f64(&mut self, value: Option<f64>) -> Result<()> {
        match self.next(ColumnType::Float64)? {
            Builder::Float64(b) => b.append_option(value),
            _ => unreachable!("checked by next"),
        }
        Ok(())
    }

    /// A `Boolean` value.
    pub fn bool(&mut self, value: Option<bool>) -> Result<()> {
        match self.next(ColumnType::Bool)? {
            Builder::Bool(b) => b.append_option(value),
            _ => unreachable!("checked by next"),
        }
        Ok(())
    }

    /// A text value.
    pub fn text(&mut self, value: Option<&str>) -> Result<()> {
        match self.next(ColumnType::Text)? {
            Builder::Text(b) => b.append_option(value),
            _ => unreachable!("checked by next"),
        }
        Ok(())
    }

    /// Ends a row (every column must have had its value).
    pub fn end_row(&mut self) -> Result<()> {
        if self.column != self.columns.len() {
            return Err(Error::InvalidState(format!(
                "{}: a row of {} values for {} columns (a bug in gmprof)",
                self.what,
                self.column,
                self.columns.len()
            )));
        }
        self.column = 0;
        self.rows += 1;
        if self.rows % self.row_group == 0 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        // A finished builder starts again empty: give it back its capacity, or the next row
        // group grows it again by copying (a fifth of a streamed run's time).
        for (b, c) in self.builders.iter_mut().zip(&self.columns) {
            *b = Builder::new(c.ty, self.row_group);
        }
        if arrays.first().is_some_and(|a| a.is_empty()) {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| parquet_error(self.what, e))?;
        match &mut self.sink {
            Sink::Inline(writer) => writer.write(&batch).map_err(|e| parquet_error(self.what, e)),
            Sink::Thread { batches, .. } => {
                let sent = batches.as_ref().is_some_and(|tx| tx.send(batch).is_ok());
                if sent {
                    Ok(())
                } else {
                    // The thread stopped on an error: say it.
                    self.sink.join(self.what).map(drop)
                }
            }
        }
    }

    /// Rows ended so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of encoded data the writer holds in memory for the row group it is building.
    pub fn in_progress_bytes(&self) -> usize {
        match &self.sink {
            Sink::Inline(writer) => writer.in_progress_size(),
            Sink::Thread { in_progress, .. } => in_progress.load(Ordering::Relaxed),
        }
    }

    /// Writes what is left and the footer; returns the number of rows.
    pub fn finish(mut self) -> Result<usize> {
        self.flush()?;
        let writer = match &mut self.sink {
            Sink::Inline(_) => {
                let Sink::Inline(writer) = std::mem::replace(
                    &mut self.sink,
                    Sink::Thread { batches: None, thread: None, in_progress: Arc::default(), failed: None },
                ) else {
                    unreachable!("matched above")
                };
                *writer
            }
            Sink::Thread { .. } => self.sink.join(self.what)?,
        };
        writer.close().map_err(|e| parquet_error(self.what, e))?;
        Ok(self.rows)
    }
}

pub(crate) fn parquet_error(what: &'static str, error: impl std::fmt::Display) -> Error {
    Error::Serialize { what, message: error.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    /// A file that takes `left` bytes, then fails every write (a full disk).
    struct FullAfter {
        left: usize,
    }

    impl Write for FullAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::Error::other("no space left on device"));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn columns() -> Vec<Column> {
        vec![Column::required("n", ColumnType::Int64), Column::null("name", ColumnType::Text)]
    }

    /// Row groups encoded on the encoder thread come out whole and in order: every row of a
    /// file of many row groups reads back, and so do the in-progress bytes.
    #[test]
    fn a_streamed_file_of_many_row_groups_reads_back_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = ParquetRows::streamed(std::io::BufWriter::new(file), columns(), Vec::new(), "test", 1000).unwrap();
        for n in 0..25_500u64 {
            w.u64(Some(n)).unwrap();
            w.text((n % 7 != 0).then_some(if n % 2 == 0 { "even" } else { "odd" })).unwrap();
            w.end_row().unwrap();
        }
        assert_eq!(w.finish().unwrap(), 25_500);
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 26);
        let mut next = 0u64;
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let n = batch.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap();
            let name = batch.column(1).as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
            for r in 0..batch.num_rows() {
                assert_eq!(n.value(r) as u64, next);
                assert_eq!(name.is_null(r), next % 7 == 0, "row {next}");
                next += 1;
            }
        }
        assert_eq!(next, 25_500);
    }

    /// A write the encoder thread cannot make is the writer's error, at a later flush or at
    /// `finish`, never a panic nor a silent loss.
    #[test]
    fn a_failed_write_on_the_encoder_thread_is_an_error_of_the_writer() {
        let mut w = ParquetRows::streamed(FullAfter { left: 64 }, columns(), Vec::new(), "test", 100).unwrap();
        let mut failed = None;
        for n in 0..100_000u64 {
            let step = w.u64(Some(n)).and_then(|()| w.text(Some("x"))).and_then(|()| w.end_row());
            if let Err(e) = step {
                failed = Some(e);
                break;
            }
        }
        let e = match failed {
            Some(e) => e,
            None => w.finish().expect_err("the file took 64 bytes"),
        };
        assert!(e.to_string().contains("no space left on device"), "{e}");
    }
}
