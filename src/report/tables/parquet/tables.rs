//! The Parquet tables of a report: `ranges`, `kernels`, `transfers`, `stats`, `pm`,
//! `probe_launches`, `probes` and `probe_kernels`, each the column-for-column twin of its CSV
//! file (same names, same order, same values, blanks as nulls).
//!
//! Every writer here mirrors the CSV writer of its table line by line; the round-trip tests
//! (`tests/parquet.rs`) read both files back and compare every cell.

use std::io::Write;
use std::path::Path;

use super::rows::{
    kernel_columns, push_kernel, push_range, push_transfer, range_columns, transfer_columns, typed, u32s,
};
use super::writer::{Column, ColumnType, ParquetRows, KEY_HEADER, KEY_META, KEY_TABLE};
use crate::error::{Error, Result};
use crate::report::model::ProbedLaunch;
use crate::report::model::Report;
use crate::report::tables::csv::write_file;
use crate::report::tables::probe_kernels::ProbeKernel;
use crate::report::tables::probes::ProbeValues;
use crate::report::tables::stats::STATS_COLUMNS;

use ColumnType::{Bool, Float64, Int32, Int64, Text};

/// File names of the Parquet tables, by the CSV file they mirror.
pub const RANGES_PARQUET: &str = "ranges.parquet";
/// Each range instance on each device, when the process profiled several GPUs.
pub const RANGE_DEVICES_PARQUET: &str = "range_devices.parquet";
/// `kernels.csv`'s twin.
pub const KERNELS_PARQUET: &str = "kernels.parquet";
/// `transfers.csv`'s twin.
pub const TRANSFERS_PARQUET: &str = "transfers.parquet";
/// `stats.csv`'s twin.
pub const STATS_PARQUET: &str = "stats.parquet";
/// `pm.csv`'s twin.
pub const PM_PARQUET: &str = "pm.parquet";
/// `probe_launches.csv`'s twin.
pub const PROBE_LAUNCHES_PARQUET: &str = "probe_launches.parquet";
/// `probes.csv`'s twin.
pub const PROBES_PARQUET: &str = "probes.parquet";
/// `probe_kernels.csv`'s twin.
pub const PROBE_KERNELS_PARQUET: &str = "probe_kernels.parquet";

/// Types of [`STATS_COLUMNS`], in order.
const STATS_TYPES: [(ColumnType, bool); 13] = [
    (Text, false),   // table
    (Text, false),   // quantity
    (Text, false),   // range_path
    (Text, true),    // kernel_name
    (Int64, false),  // count
    (Int64, false),  // missing
    (Int64, true),   // total_ns
    (Float64, true), // mean_ns
    (Int64, true),   // min_ns
    (Int64, true),   // p50_ns
    (Int64, true),   // p99_ns
    (Int64, true),   // max_ns
    (Float64, true), // share_pct
];

/// Columns of `probe_launches.parquet` (`probe_launches.csv`'s).
const PROBE_LAUNCH_COLUMNS: [(&str, ColumnType, bool); 19] = [
    ("correlation_id", Int64, false),
    ("kernel", Text, false),
    ("range_path", Text, true),
    ("blocks", Int64, false),
    ("threads", Int64, false),
    ("status", Text, false),
    ("blocks_once", Int64, true),
    ("blocks_missing", Int64, true),
    ("blocks_repeated", Int64, true),
    ("first_block_start_ns", Int64, true),
    ("last_block_end_ns", Int64, true),
    ("blocks_inside_kernel", Bool, true),
    ("clock_offset_ns", Int64, true),
    ("clock_slack_ns", Int64, true),
    ("clock_run_launches", Int64, true),
    ("readback_us", Float64, false),
    ("variant", Int64, true),
    ("source", Text, true),
    ("graph_launches", Int64, true),
];

/// Columns of `probes.parquet` (`probes.csv`'s).
const PROBE_TOTAL_COLUMNS: [(&str, ColumnType, bool); 7] = [
    ("correlation_id", Int64, false),
    ("kernel", Text, false),
    ("range_path", Text, true),
    ("probe", Text, false),
    ("field", Text, false),
    ("total", Int64, false),
    ("records", Int64, false),
];

/// `probe_ranges.csv`'s twin.
pub const PROBE_RANGES_PARQUET: &str = "probe_ranges.parquet";
/// `sass_hot.csv`'s twin.
pub const SASS_HOT_PARQUET: &str = "sass_hot.parquet";

/// Columns of `probe_ranges.parquet` (`probe_ranges.csv`'s).
const PROBE_RANGE_COLUMNS: [(&str, ColumnType, bool); 6] = [
    ("range_path", Text, false),
    ("probe", Text, false),
    ("field", Text, false),
    ("source", Text, false),
    ("total", Int64, false),
    ("launches", Int64, false),
];

/// Columns of `sass_hot.parquet` (`sass_hot.csv`'s).
const SASS_HOT_COLUMNS: [(&str, ColumnType, bool); 15] = [
    ("kernel", Text, false),
    ("mangled", Text, false),
    ("cubin_crc", Int64, false),
    ("launches", Int64, false),
    ("rank", Int64, false),
    ("pc_offset", Text, false),
    ("instructions", Int64, false),
    ("share", Float64, false),
    ("thread_instructions", Int64, false),
    ("threads_per_instruction", Float64, true),
    ("global_loads", Int64, false),
    ("global_stores", Int64, false),
    ("global_sector_bytes", Int64, false),
    ("file", Text, true),
    ("line", Int64, true),
];

/// Columns of `probe_kernels.parquet` (`probe_kernels.csv`'s).
const PROBE_KERNEL_COLUMNS: [(&str, ColumnType, bool); 14] = [
    ("kernel", Text, false),
    ("mangled", Text, false),
    ("status", Text, false),
    ("detail", Text, false),
    ("launches", Int64, false),
    ("load_ms", Float64, true),
    ("variant", Int64, false),
    ("module", Text, true),
    ("module_file", Text, true),
    ("reqntid", Text, true),
    ("maxntid", Text, true),
    ("max_threads_per_block", Int32, true),
    ("functions", Int64, false),
    ("source", Text, true),
];

fn listed(columns: &[(&str, ColumnType, bool)]) -> Vec<Column> {
    columns.iter().map(|&(n, ty, nullable)| Column { name: n.to_owned(), ty, nullable }).collect()
}

impl Report {
    /// The key-value metadata of a table: its name, the CSV header `lines`, the report's meta.
    pub(crate) fn parquet_metadata(&self, table: &str, lines: Vec<String>) -> Result<Vec<(String, String)>> {
        let meta = serde_json::to_string(&self.meta)
            .map_err(|e| Error::Serialize { what: "report metadata", message: e.to_string() })?;
        Ok(vec![(KEY_TABLE.into(), table.into()), (KEY_HEADER.into(), lines.join("\n")), (KEY_META.into(), meta)])
    }

    /// Writes `ranges.parquet`'s content to `out`.
    pub fn write_ranges_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        let rows = self.ranges.iter().map(|r| (None, r));
        self.write_range_parquet_table(out, "per-range report", "per-range Parquet", rows, false)
    }

    /// Writes `range_devices.parquet`'s content ([`Report::range_devices`]) to `out`.
    pub fn write_range_devices_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        let rows = self.range_devices.iter().map(|d| (Some(d.device_id), &d.row));
        self.write_range_parquet_table(out, "per-range report by device", "per-range-by-device Parquet", rows, true)
    }

    /// Writes `range_devices.parquet` to a file (replaced whole).
    pub fn write_range_devices_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_range_devices_parquet_to(out).map(drop))
    }

    fn write_range_parquet_table<'a, W: Write + Send>(
        &self,
        out: W,
        table: &str,
        what: &'static str,
        rows: impl Iterator<Item = (Option<u32>, &'a crate::analysis::aggregate::RangeRow)>,
        device_column: bool,
    ) -> Result<usize> {
        let metric_names = self.metric_names();
        let mut columns = Vec::new();
        if device_column {
            columns.push(Column::null("device_id", Int64));
        }
        columns.extend(range_columns(&metric_names));
        let metadata = self.parquet_metadata(table, self.csv_metadata_lines(table))?;
        let mut w = ParquetRows::new(out, columns, metadata, what)?;
        for (device, row) in rows {
            if device_column {
                w.u64(u32s(device))?;
            }
            push_range(&mut w, row, metric_names.len())?;
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `kernels.parquet`'s content to `out`.
    pub fn write_kernels_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        const TABLE: &str = "per-kernel report";
        let metric_names = self.metric_names();
        let probes = self.probe_columns();
        let mut columns = kernel_columns(&metric_names);
        columns.extend(probes.iter().map(|(name, values)| {
            Column::null(
                name.as_str(),
                match values {
                    ProbeValues::Text(_) => Text,
                    ProbeValues::Count(_) => Int64,
                    ProbeValues::Flag(_) => Bool,
                },
            )
        }));
        let metadata = self.parquet_metadata(TABLE, self.csv_metadata_lines(TABLE))?;
        let mut w = ParquetRows::new(out, columns, metadata, "per-kernel Parquet")?;
        for (row, k) in self.kernels.iter().enumerate() {
            push_kernel(&mut w, k, metric_names.len())?;
            for (_, values) in &probes {
                match values {
                    ProbeValues::Text(v) => w.text(v[row].as_deref())?,
                    ProbeValues::Count(v) => w.u64(v[row])?,
                    ProbeValues::Flag(v) => w.bool(v[row])?,
                }
            }
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `transfers.parquet`'s content to `out`.
    pub fn write_transfers_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        const TABLE: &str = "per-transfer report";
        let metadata = self.parquet_metadata(TABLE, self.csv_metadata_lines(TABLE))?;
        let mut w = ParquetRows::new(out, transfer_columns(), metadata, "per-transfer Parquet")?;
        for t in &self.transfers {
            push_transfer(&mut w, t)?;
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `stats.parquet`'s content to `out`.
    pub fn write_stats_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        const TABLE: &str = "statistics";
        let mut lines = self.csv_metadata_lines(TABLE);
        lines.push(crate::report::tables::stats::STATS_NOTE.to_owned());
        let metadata = self.parquet_metadata(TABLE, lines)?;
        let mut w = ParquetRows::new(out, typed(&STATS_COLUMNS, &STATS_TYPES), metadata, "statistics Parquet")?;
        let stats = self.stats();
        for s in stats.ranges.iter().chain(&stats.range_wall).chain(&stats.kernels) {
            w.text(Some(s.table.as_str()))?;
            w.text(Some(s.quantity.as_str()))?;
            w.text(Some(&s.range_path))?;
            w.text(s.kernel_name.as_deref())?;
            w.u64(Some(s.count))?;
            w.u64(Some(s.missing))?;
            w.u64(s.total_ns)?;
            w.f64(s.mean_ns)?;
            w.u64(s.min_ns)?;
            w.u64(s.p50_ns)?;
            w.u64(s.p99_ns)?;
            w.u64(s.max_ns)?;
            w.f64(s.share_pct)?;
            w.end_row()?;
        }
        w.finish()
    }

    /// Writes `pm.parquet`'s content to `out`; an error when the report has no PM sampling.
    pub fn write_pm_parquet_to<W: Write + Send>(&self, out: W) -> Result<usize> {
        const TABLE: &str = "PM sampling report";
        let pm = self.pm.as_ref().ok_or_else(|| {
            Error::InvalidState("the report has no PM sampling (enable it with --pm-sampling)".into())
        })?;
        let mut lines = self.csv_metadata_lines(TABLE);
        lines.extend(crate::report::tables::pm_csv::pm_metadata_lines(pm));
        let metadata = self.parquet_metadata(TABLE, lines)?;
        let mut w = ParquetRows::new(out, super::streamed::pm_columns(), metadata, "PM sampling Parquet")?;
        let units: Vec<Option<String>> = pm.metrics.iter().map(|m| m.integral_unit()).collect();
        for row in &pm.rows {
            for (index, metric) in pm.metrics.iter().enumerate() {
                super::streamed::push_pm_value(&mut w, row, index, metric, units[index].as_deref())?;
                w.end_row()?;
            }
        }
        w.finish()
    }

    /// Writes `ranges.parquet` to a file (replaced whole).
    pub fn write_ranges_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_ranges_parquet_to(out).map(drop))
    }

    /// Writes `kernels.parquet` to a file (replaced whole).
    pub fn write_kernels_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_kernels_parquet_to(out).map(drop))
    }

    /// Writes `transfers.parquet` to a file (replaced whole).
    pub fn write_transfers_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_transfers_parquet_to(out).map(drop))
    }

    /// Writes `stats.parquet` to a file (replaced whole).
    pub fn write_stats_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_stats_parquet_to(out).map(drop))
    }

    /// Writes `pm.parquet` to a file (replaced whole).
    pub fn write_pm_parquet(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), |out| self.write_pm_parquet_to(out).map(drop))
    }
}

/// Writes `probe_launches.parquet` and `probes.parquet` for `launches` into `dir`.
pub fn write_probe_parquets(dir: &Path, launches: &[ProbedLaunch]) -> Result<()> {
    let table = |name: &str| vec![(KEY_TABLE.to_owned(), name.to_owned())];
    write_file(&dir.join(PROBE_LAUNCHES_PARQUET), |out| {
        let mut w =
            ParquetRows::new(out, listed(&PROBE_LAUNCH_COLUMNS), table("probed launches"), "probe launches Parquet")?;
        for l in launches {
            w.u64(Some(l.correlation_id.into()))?;
            w.text(Some(&l.kernel))?;
            w.text(l.range_path.as_deref())?;
            w.u64(Some(l.blocks))?;
            w.u64(Some(l.threads))?;
            w.text(Some(&l.status))?;
            w.u64(l.blocks_once)?;
            w.u64(l.blocks_missing)?;
            w.u64(l.blocks_repeated)?;
            w.u64(l.first_block_start_ns)?;
            w.u64(l.last_block_end_ns)?;
            w.bool(l.blocks_inside_kernel)?;
            w.i64(l.clock_offset_ns)?;
            w.u64(l.clock_slack_ns)?;
            w.u64(u32s(l.clock_run_launches))?;
            w.f64(Some(l.readback_us))?;
            w.u64(u32s(l.variant))?;
            w.text(l.source.as_deref())?;
            w.u64(l.graph_launches)?;
            w.end_row()?;
        }
        w.finish().map(drop)
    })?;
    write_file(&dir.join(PROBE_RANGES_PARQUET), |out| {
        let mut w = ParquetRows::new(
            out,
            listed(&PROBE_RANGE_COLUMNS),
            table("probe totals per range"),
            "probe ranges Parquet",
        )?;
        for r in crate::report::tables::probes::range_totals(launches) {
            w.text(Some(&r.range_path))?;
            w.text(Some(&r.probe))?;
            w.text(Some(&r.field))?;
            w.text(Some(&r.source))?;
            w.u64(Some(r.total))?;
            w.u64(Some(r.launches))?;
            w.end_row()?;
        }
        w.finish().map(drop)
    })?;
    write_file(&dir.join(PROBES_PARQUET), |out| {
        let mut w = ParquetRows::new(out, listed(&PROBE_TOTAL_COLUMNS), table("probe totals"), "probe totals Parquet")?;
        for l in launches {
            for t in &l.totals {
                w.u64(Some(l.correlation_id.into()))?;
                w.text(Some(&l.kernel))?;
                w.text(l.range_path.as_deref())?;
                w.text(Some(&t.probe))?;
                w.text(Some(&t.field))?;
                w.u64(Some(t.total))?;
                w.u64(Some(t.records))?;
                w.end_row()?;
            }
        }
        w.finish().map(drop)
    })
}

/// Writes `probe_kernels.parquet` (`rows` as in `probe_kernels.csv`) into `dir`.
pub fn write_probe_kernels_parquet(dir: &Path, rows: &[ProbeKernel]) -> Result<()> {
    write_file(&dir.join(PROBE_KERNELS_PARQUET), |out| {
        let metadata = vec![(KEY_TABLE.to_owned(), "probe kernels".to_owned())];
        let mut w = ParquetRows::new(out, listed(&PROBE_KERNEL_COLUMNS), metadata, "probe kernels Parquet")?;
        for r in rows {
            w.text(Some(&r.kernel))?;
            w.text(Some(&r.mangled))?;
            w.text(Some(&r.status))?;
            w.text(Some(&r.detail))?;
            w.u64(Some(r.launches))?;
            w.f64(r.load_ms)?;
            w.u64(Some(r.variant.into()))?;
            w.text(r.module.as_deref())?;
            w.text(r.module_file.as_deref())?;
            w.text(r.reqntid.as_deref())?;
            w.text(r.maxntid.as_deref())?;
            w.i32(r.max_threads_per_block)?;
            w.u64(Some(r.functions.into()))?;
            w.text(r.source.as_deref())?;
            w.end_row()?;
        }
        w.finish().map(drop)
    })
}

/// Writes `sass_hot.parquet` (`rows` as in `sass_hot.csv`) into `dir`.
pub fn write_sass_hot_parquet(dir: &Path, rows: &[crate::report::tables::sass_hot::SassHotRow]) -> Result<()> {
    write_file(&dir.join(SASS_HOT_PARQUET), |out| {
        let metadata = vec![(KEY_TABLE.to_owned(), "hottest SASS instructions".to_owned())];
        let mut w = ParquetRows::new(out, listed(&SASS_HOT_COLUMNS), metadata, "SASS hot instructions Parquet")?;
        for r in rows {
            w.text(Some(&r.kernel))?;
            w.text(Some(&r.mangled))?;
            w.u64(Some(r.cubin_crc.into()))?;
            w.u64(Some(r.launches))?;
            w.u64(Some(r.rank.into()))?;
            w.text(Some(&r.pc_offset))?;
            w.u64(Some(r.instructions))?;
            w.f64(Some(r.share))?;
            w.u64(Some(r.thread_instructions))?;
            w.f64(r.threads_per_instruction)?;
            w.u64(Some(r.global_loads))?;
            w.u64(Some(r.global_stores))?;
            w.u64(Some(r.global_sector_bytes))?;
            w.text(r.file.as_deref())?;
            w.u64(r.line.map(u64::from))?;
            w.end_row()?;
        }
        w.finish().map(drop)
    })
}
