//! Parquet exporters: the CSV tables as typed columns, for DuckDB, Polars, pandas and Spark.
//!
//! Layer 3 (the safe profiler), report output, beside [`crate::report::tables::csv`]. Each table
//! that has a CSV file has a Parquet file of the same name (`kernels.parquet` beside
//! `kernels.csv`) with the same columns in the same order and the same values:
//!
//! - **Types.** Every integer column is `Int64` (signed, as Spark and every SQL engine read
//!   them), the grid and block axes are `Int32`, measured quantities that are not whole
//!   (metrics, bandwidths, means, shares) are `Float64`, flags are `Boolean`, and names and
//!   enumerations (status, time source, granularity) are UTF-8 strings.
//! - **Nulls.** A value the CSV leaves blank (not measured, not applicable) is null, never 0;
//!   a column the CSV never leaves blank is declared not null.
//! - **Metadata.** The lines of the CSV file's `# ` header go into the file's key-value
//!   metadata as `gmprof.header` (one line each, in order), the table's name as
//!   `gmprof.table`, and the report's whole metadata ([`crate::report::ReportMeta`], as in
//!   `report.json`) as `gmprof.meta` (JSON), so a directory's Parquet files can be read and
//!   merged without `report.json`. The same keys are the Arrow schema's metadata, which is
//!   where pyarrow and Polars show them.
//! - **Layout.** ZSTD compression, row groups of [`ROW_GROUP_ROWS`] rows, written atomically
//!   like the CSV files (beside the target, then renamed).
//!
//! [`ParquetRows`] writes one table a row at a time, mirroring [`crate::report::tables::csv`]'s
//! `RecordWriter` (the writer's own file, `writer.rs`, which the others import); [`tables`]
//! holds the tables of a [`crate::report::Report`], [`pc`] PC sampling's; [`read`] reads files
//! back (key-value metadata, whole tables, chosen columns), after [`claims`] has held the
//! sizes a file claims against its bytes (with `compact`, a bounded walker of the Thrift
//! encoding of footers and page headers).
//!
//! May import the CSV side of [`tables`](crate::report::tables) (each table's columns, records
//! and `# ` header lines, which the Parquet files repeat) and the [`Report`](crate::report::Report)
//! model.

pub mod claims;
mod compact;
pub mod part_reader;
pub mod parts;
pub mod pc;
pub mod read;
pub mod rows;
pub mod streamed;
pub mod tables;
mod writer;

pub use self::writer::{Column, ColumnType, ParquetRows, KEY_HEADER, KEY_META, KEY_TABLE, ROW_GROUP_ROWS};
