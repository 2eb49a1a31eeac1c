//! `stalls.parquet` and `pc_samples.parquet`: the column-for-column twins of PC sampling's
//! CSVs ([`crate::report::tables::pc_csv`]), written from the same records.

use std::io::Write;
use std::path::Path;

use super::writer::{Column, ColumnType, ParquetRows};
use crate::error::Result;
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::tables::pc_csv::{
    pc_metadata_lines, pc_sample_records, stall_records, PC_SAMPLES_TITLE, STALLS_TITLE,
};

use ColumnType::{Bool, Float64, Int64, Text};

/// `stalls.csv`'s twin.
pub const STALLS_PARQUET: &str = "stalls.parquet";
/// `pc_samples.csv`'s twin.
pub const PC_SAMPLES_PARQUET: &str = "pc_samples.parquet";

const STALL_COLUMNS: [(&str, ColumnType, bool); 11] = [
    ("path", Text, false),
    ("instance", Int64, false),
    ("depth", Int64, false),
    ("range_samples", Int64, false),
    ("few_samples", Bool, false),
    ("issued_pct", Float64, true),
    ("reason", Text, false),
    ("warp_state", Text, false),
    ("samples", Int64, false),
    ("not_issued_samples", Int64, true),
    ("share_pct", Float64, true),
];

const PC_SAMPLE_COLUMNS: [(&str, ColumnType, bool); 11] = [
    ("kernel_name", Text, true),
    ("function", Text, false),
    ("cubin_crc", Text, false),
    ("pc_offset", Text, false),
    ("reason", Text, false),
    ("warp_state", Text, false),
    ("samples", Int64, false),
    ("kernel_samples", Int64, false),
    ("file", Text, true),
    ("line", Int64, true),
    ("sass", Text, true),
];

fn listed(columns: &[(&str, ColumnType, bool)]) -> Vec<Column> {
    columns.iter().map(|&(n, ty, nullable)| Column { name: n.to_owned(), ty, nullable }).collect()
}

impl Report {
    fn pc_parquet_metadata(&self, title: &str) -> Result<Vec<(String, String)>> {
        let pc = self.pc_or_error()?;
        let mut lines = self.csv_metadata_lines(title);
        lines.extend(pc_metadata_lines(pc));
        self.parquet_metadata(title, lines)
    }

    /// Writes `stalls.parquet`'s content to `out`; an error when the report has no PC sampling.
    pub fn write_stalls_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        let pc = self.pc_or_error()?;
        let metadata = self.pc_parquet_metadata(STALLS_TITLE)?;
        let mut w = ParquetRows::new(out, listed(&STALL_COLUMNS), metadata, "PC sampling stalls Parquet")?;
        for r in stall_records(pc) {
            w.text(Some(r.path))?;
            w.u64(Some(r.instance.into()))?;
            w.u64(Some(r.depth.into()))?;
            w.u64(Some(r.range_samples))?;
            w.bool(Some(r.few_samples))?;
            w.f64(r.issued_pct)?;
            w.text(Some(r.reason))?;
            w.text(Some(r.warp_state))?;
            w.u64(Some(r.samples))?;
            w.u64(r.not_issued_samples)?;
            w.f64(r.share_pct)?;
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `pc_samples.parquet`'s content to `out`; an error when the report has no PC
    /// sampling.
    pub fn write_pc_samples_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        let pc = self.pc_or_error()?;
        let metadata = self.pc_parquet_metadata(PC_SAMPLES_TITLE)?;
        let mut w = ParquetRows::new(out, listed(&PC_SAMPLE_COLUMNS), metadata, "PC sampling samples Parquet")?;
        for r in pc_sample_records(pc) {
            w.text(r.kernel_name)?;
            w.text(Some(r.function))?;
            w.text(Some(&r.cubin_crc))?;
            w.text(Some(&r.pc_offset))?;
            w.text(Some(r.reason))?;
            w.text(Some(r.warp_state))?;
            w.u64(Some(r.samples))?;
            w.u64(Some(r.kernel_samples))?;
            w.text(r.file)?;
            w.u64(r.line.map(u64::from))?;
            w.text(r.sass)?;
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `stalls.parquet` to a file (replaced whole).
    pub fn write_stalls_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_stalls_parquet_to(out).map(drop))
    }

    /// Writes `pc_samples.parquet` to a file (replaced whole).
    pub fn write_pc_samples_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_pc_samples_parquet_to(out).map(drop))
    }
}
